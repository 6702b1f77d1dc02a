/*
 * coded_allreduce.c - master-less coded allreduce: gradient coding without a
 * root, with ring-like bytes on every link.
 *
 * Idea. The coded gather (../coded_gather) is a star: every worker sends its
 * coded vector of |g| floats to one root, which decodes and sends the sum to
 * the P-1 others, so the root's link carries about P vectors each way per
 * round. Here the vector is cut into P chunks (the block layout of the ring)
 * and chunk c is decoded by its owner, rank c, as a reduce-scatter spreads a
 * reduction:
 *   1. coded scatter: every worker sends chunk c of its coded message to
 *      rank c (P-1 active messages, all posted at once);
 *   2. each owner decodes its chunk as soon as the chunks it took come from
 *      a decodable set of workers (the code's predicate, as the star's root
 *      does), from that set alone, in worker order;
 *   3. allgather: the owner sends its decoded chunk to the P-1 others.
 * A straggler's chunk messages come late and are dropped unread (the round
 * number is in the header), exactly as the star drops a late contribution;
 * no owner waits for more than a decodable set.
 *
 * Cost per round, per rank, with n = |g| bytes, P ranks, α, β, γ:
 *   bytes out = bytes in = 2 (P-1)/P n (phase 1 + phase 3), the ring's;
 *   messages  = 2 (P-1) posted at once: about 2 (P-1) o of send overhead o
 *               and 2α of latency (the ring: 2 (P-1) α in sequence);
 *   decode    = |used| n/P γ multiply-adds on each owner (the star's root:
 *               |used| n γ);
 *   memory    = one copy of the message (the chunks in flight) + up to P
 *               taken chunks, i.e. about 2 n.
 * Against the star (root: n (|used| + P - 1) β), the root's P vectors per
 * link become two vectors per link, whatever P is.
 *
 * Agreement. Every chunk has exactly one decoder, so every rank ends with the
 * same bits: the ones its owner sent (the owner's own copy is the same
 * buffer). The result reports, per round, the union of the used sets.
 *
 * Stragglers and progress. A rank's owner part runs while the rank is in the
 * call (or progresses the communicator): straggler injection
 * (GCX_STRAGGLER_*) delays only its chunk messages, the delayed rank goes on
 * taking and publishing meanwhile, which is how a rank behaves whose
 * computation runs beside a progress engine (torch_gcx's engine thread). A
 * rank that makes no progress call for d seconds delays its own chunk by d;
 * see README.md of this folder.
 *
 * Dead owners: a rank whose connection to the owner of a chunk it still waits
 * for is lost fails the round at once (GCX_ERR_PEER), as the star's ranks do
 * when the root dies. Dead workers are stragglers that never come: rounds go
 * on while the others decode.
 */
#include "coll/coded_gather/coded_int.h"
#include "base/log.h"
#include "base/time.h"

#include <gcx/coded.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GCX_CAR_COLL_ID (GCX_COLL_INTERNAL + 9) /* for the creation check */

enum {
    GCX_CAR_CHUNK   = 1, /* worker -> owner: one chunk of a coded message */
    GCX_CAR_DECODED = 2, /* owner -> rank: the decoded sum of its chunk */
};

/* Wire header (starts with the communicator id: gcx_tl_am_prefix_t). */
typedef struct gcx_car_hdr {
    uint32_t comm_id;
    uint32_t instance;
    uint64_t round;
    uint16_t sender;
    uint16_t kind;
    uint32_t chunk;
    uint64_t used; /* DECODED: the workers the chunk was decoded from */
} gcx_car_hdr_t;

typedef struct gcx_car_op gcx_car_op_t;

struct gcx_coded_allreduce {
    /* comm, code, n, s, instance, am_id, the pool of chunk-sized slots,
     * stats and straggler injection of the coded gather (base.bytes: the
     * largest chunk; base.count: the whole vector, for the check) */
    gcx_coded_t   base;
    gcx_car_op_t *live;       /* round in progress here */
    uint64_t      next_round; /* number of the next call */
    uint64_t      next_open;  /* lowest round not finished here */
};

struct gcx_car_op {
    gcx_task_t             super;
    gcx_coded_allreduce_t *car;
    uint64_t               round;
    const float           *sendbuf;
    float                 *recvbuf;
    gcx_coded_result_t    *result;
    double                 t_start;
    double                 t_send;  /* chunk messages go at this time */
    int                    sent;    /* 1: sent; 2: skipped (round done) */
    /* owner of chunk `rank` */
    uint64_t          arrived;      /* workers whose chunk header came */
    uint64_t          taken;        /* workers whose chunk is taken */
    uint64_t          used;         /* decoded from (0: not yet) */
    int               published;
    gcx_coded_slot_t *in[GCX_CODE_MAX_WORKERS]; /* taken chunks */
    /* receiver of the other chunks */
    uint64_t     posted;            /* chunk receive posted (bit c) */
    uint64_t     got;               /* chunk landed (bit c) */
    uint64_t     used_union;
    gcx_tl_req_t rreq[GCX_CODE_MAX_WORKERS];
};

static void gcx_car_chunk(const gcx_coded_allreduce_t *car, int c,
                          size_t *off_p, size_t *len_p)
{
    gcx_coll_block(car->base.count, car->base.n, c, off_p, len_p);
}

static uint64_t gcx_car_all(int n)
{
    return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* A staged message (slot->hdr keeps round, sender, kind; used; chunk in
 * slot->worker). */
static gcx_coded_slot_t *gcx_car_stash_find(gcx_coded_allreduce_t *car,
                                            uint64_t round, int kind,
                                            int sender, int unlink)
{
    gcx_coded_slot_t **pp = &car->base.stash, *slot;

    for (; (slot = *pp) != NULL; pp = &slot->next) {
        if (slot->round == round && slot->hdr.kind == kind &&
            slot->hdr.sender == sender) {
            if (unlink) {
                *pp = slot->next;
            }
            return slot;
        }
    }
    return NULL;
}

static void gcx_car_stage(gcx_coded_allreduce_t *car, const gcx_car_hdr_t *hdr,
                          const gcx_tl_am_msg_t *msg)
{
    gcx_tl_t         *tl = car->base.comm->tl;
    gcx_coded_slot_t *slot;
    gcx_iov_t         iov;

    if (gcx_car_stash_find(car, hdr->round, hdr->kind, hdr->sender, 0) !=
        NULL) {
        gcx_warn("coded allreduce: dropping a duplicate message of round "
                 "%llu from rank %u",
                 (unsigned long long)hdr->round, hdr->sender);
        return;
    }
    slot = gcx_coded_slot_get(&car->base);
    if (slot == NULL) {
        gcx_error("coded allreduce: out of memory staging a message");
        return;
    }
    memset(&slot->hdr, 0, sizeof(slot->hdr));
    slot->round       = hdr->round;
    slot->hdr.round   = hdr->round;
    slot->hdr.sender  = hdr->sender;
    slot->hdr.kind    = hdr->kind;
    slot->hdr.used    = hdr->used;
    slot->worker      = (int)hdr->chunk;
    slot->t_arrival   = gcx_time_now();
    slot->nreqs       = 1;
    iov.buffer        = slot->block->data;
    iov.length        = msg->length;
    slot->reqs[0].status = GCX_OK;
    tl->ops->am_recv(tl, msg, &iov, 1, &slot->reqs[0]);
    slot->next      = car->base.stash;
    car->base.stash = slot;
    ++car->base.stats.early;
}

/* Owner: does the taken set need worker w's chunk? */
static int gcx_car_wanted(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    int decodable = 0;

    gcx_code_decodable(car->base.code, op->taken, &decodable);
    return !decodable && op->used == 0;
}

/* Owner: take worker w's chunk of the live round (payload in msg, or staged
 * in slot). */
static void gcx_car_take(gcx_coded_allreduce_t *car, gcx_car_op_t *op, int w,
                         const gcx_tl_am_msg_t *msg, gcx_coded_slot_t *slot)
{
    gcx_tl_t *tl = car->base.comm->tl;
    gcx_iov_t iov;

    op->arrived |= 1ull << w;
    if (!gcx_car_wanted(car, op)) {
        ++car->base.stats.unneeded;
        if (slot != NULL) {
            gcx_coded_slot_put(&car->base, slot);
        }
        return; /* msg: dropped unread, its sender completes */
    }
    if (slot == NULL) {
        slot = gcx_coded_slot_get(&car->base);
        if (slot == NULL) {
            gcx_error("coded allreduce: out of memory taking a chunk");
            return;
        }
        slot->nreqs          = 1;
        slot->reqs[0].status = GCX_OK;
        iov.buffer           = slot->block->data;
        iov.length           = msg->length;
        tl->ops->am_recv(tl, msg, &iov, 1, &slot->reqs[0]);
    }
    op->in[w]  = slot;
    op->taken |= 1ull << w;
}

static void gcx_car_on_chunk(gcx_coded_allreduce_t *car,
                             const gcx_car_hdr_t *hdr,
                             const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = car->live;
    size_t        off, len;
    int           me = car->base.comm->rank;

    gcx_car_chunk(car, me, &off, &len);
    if (hdr->chunk != (uint32_t)me || msg->length != len * sizeof(float)) {
        gcx_warn("coded allreduce: dropping a malformed chunk from rank %u",
                 hdr->sender);
        return;
    }
    if (hdr->round < car->next_open ||
        (op != NULL && hdr->round == op->round && op->used != 0)) {
        ++car->base.stats.late_dropped; /* decoded already: drop unread */
        return;
    }
    if (op != NULL && hdr->round == op->round &&
        op->super.status == GCX_INPROGRESS) {
        if (op->arrived & (1ull << hdr->sender)) {
            gcx_warn("coded allreduce: dropping a duplicate chunk of round "
                     "%llu from rank %u",
                     (unsigned long long)hdr->round, hdr->sender);
            return;
        }
        gcx_car_take(car, op, hdr->sender, msg, NULL);
        return;
    }
    gcx_car_stage(car, hdr, msg); /* a round this owner has not entered */
}

static void gcx_car_on_decoded(gcx_coded_allreduce_t *car,
                               const gcx_car_hdr_t *hdr,
                               const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = car->live;
    gcx_tl_t     *tl = car->base.comm->tl;
    size_t        off, len;
    gcx_iov_t     iov;
    int           c = (int)hdr->chunk;

    if (c != hdr->sender || c == car->base.comm->rank) {
        gcx_warn("coded allreduce: dropping a decoded chunk %u from rank %u",
                 hdr->chunk, hdr->sender);
        return;
    }
    gcx_car_chunk(car, c, &off, &len);
    if (msg->length != len * sizeof(float)) {
        gcx_warn("coded allreduce: dropping a malformed decoded chunk");
        return;
    }
    if (hdr->round < car->next_open) {
        gcx_warn("coded allreduce: dropping a duplicate decoded chunk of "
                 "round %llu", (unsigned long long)hdr->round);
        return;
    }
    if (op != NULL && hdr->round == op->round &&
        op->super.status == GCX_INPROGRESS) {
        if (op->posted & (1ull << c)) {
            gcx_warn("coded allreduce: dropping a duplicate decoded chunk");
            return;
        }
        op->posted     |= 1ull << c;
        op->used_union |= hdr->used;
        iov.buffer      = op->recvbuf + off;
        iov.length      = len * sizeof(float);
        tl->ops->am_recv(tl, msg, &iov, 1, &op->rreq[c]);
        return;
    }
    gcx_car_stage(car, hdr, msg); /* this rank is behind */
}

static void gcx_car_am_handler(void *arg, const gcx_tl_am_msg_t *msg)
{
    gcx_coded_allreduce_t *car = arg;
    gcx_car_hdr_t          hdr;

    if (msg->header_length != sizeof(hdr)) {
        gcx_warn("coded allreduce: dropping a message with a bad header");
        return;
    }
    memcpy(&hdr, msg->header, sizeof(hdr)); /* may be unaligned */
    if (hdr.comm_id != car->base.comm->id ||
        hdr.instance != car->base.instance ||
        hdr.sender >= (unsigned)car->base.comm->size ||
        hdr.sender == (unsigned)car->base.comm->rank ||
        hdr.chunk >= (unsigned)car->base.comm->size) {
        return; /* another object's (destroyed) message: drop */
    }
    switch (hdr.kind) {
    case GCX_CAR_CHUNK:
        gcx_car_on_chunk(car, &hdr, msg);
        break;
    case GCX_CAR_DECODED:
        gcx_car_on_decoded(car, &hdr, msg);
        break;
    default:
        gcx_warn("coded allreduce: dropping a message of kind %u", hdr.kind);
        break;
    }
}

/* A message from one of this object's slots; the slot goes in flight. */
static gcx_status_t gcx_car_send(gcx_coded_allreduce_t *car,
                                 gcx_coded_slot_t *slot, int i, int peer,
                                 const gcx_car_hdr_t *hdr, size_t len)
{
    gcx_tl_t *tl = car->base.comm->tl;
    gcx_iov_t iov;

    /* the block's header storage (big enough) holds this header while the
     * send reads it */
    memcpy(&slot->block->hdr, hdr, sizeof(*hdr));
    iov.buffer = slot->block->data;
    iov.length = len * sizeof(float);
    return tl->ops->am_send(tl, peer, car->base.am_id, &slot->block->hdr,
                            sizeof(*hdr), &iov, 1, &slot->reqs[i]);
}

static void gcx_car_hdr_init(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                             int kind, gcx_car_hdr_t *hdr)
{
    memset(hdr, 0, sizeof(*hdr));
    hdr->comm_id  = car->base.comm->id;
    hdr->instance = car->base.instance;
    hdr->round    = op->round;
    hdr->sender   = (uint16_t)car->base.comm->rank;
    hdr->kind     = (uint16_t)kind;
}

/* Worker: chunk c of the message to its owner, for every c but this rank's;
 * each from an internal block, so no transfer holds sendbuf. */
static void gcx_car_send_chunks(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t *slot;
    gcx_car_hdr_t     hdr;
    size_t            off, len;
    int               c, size = car->base.comm->size;

    gcx_car_hdr_init(car, op, GCX_CAR_CHUNK, &hdr);
    for (c = 0; c < size; ++c) {
        if (c == car->base.comm->rank) {
            continue;
        }
        slot = gcx_coded_slot_get(&car->base);
        if (slot == NULL) {
            op->super.status = GCX_ERR_NOMEM;
            return;
        }
        gcx_car_chunk(car, c, &off, &len);
        memcpy(slot->block->data, op->sendbuf + off, len * sizeof(float));
        hdr.chunk   = (uint32_t)c;
        slot->round = op->round;
        slot->nreqs = 1;
        /* a failed send (owner gone) shows in the owner's own round */
        gcx_car_send(car, slot, 0, c, &hdr, len);
        slot->next          = car->base.inflight;
        car->base.inflight  = slot;
    }
}

/* Owner: decode the chunk from the taken set and send it to every rank. */
static void gcx_car_publish(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    const float      *vecs[GCX_CODE_MAX_WORKERS];
    double            a[GCX_CODE_MAX_WORKERS];
    gcx_coded_slot_t *slot;
    gcx_car_hdr_t     hdr;
    gcx_status_t      status;
    size_t            off, len;
    int               w, r, me = car->base.comm->rank;

    status = gcx_code_decode_vector(car->base.code, op->taken, a);
    if (status != GCX_OK) {
        gcx_error("coded allreduce round %llu: chunk %d cannot be decoded "
                  "from workers %#llx: %s",
                  (unsigned long long)op->round, me,
                  (unsigned long long)op->taken, gcx_strerror(status));
        op->super.status = status;
        return;
    }
    gcx_car_chunk(car, me, &off, &len);
    op->used = 0;
    for (w = 0; w < car->base.n; ++w) {
        vecs[w] = NULL;
        if (a[w] == 0) {
            continue;
        }
        op->used |= 1ull << w;
        vecs[w] = w == me ? op->sendbuf + off : op->in[w]->block->data;
    }
    /* canonical: the same taken set gives the same bits on any rank */
    gcx_code_encode(car->base.n, a, vecs, len, op->recvbuf + off);
    slot = gcx_coded_slot_get(&car->base);
    if (slot == NULL) {
        op->super.status = GCX_ERR_NOMEM;
        return;
    }
    memcpy(slot->block->data, op->recvbuf + off, len * sizeof(float));
    gcx_car_hdr_init(car, op, GCX_CAR_DECODED, &hdr);
    hdr.chunk   = (uint32_t)me;
    hdr.used    = op->used;
    slot->round = op->round;
    slot->nreqs = car->base.comm->size;
    for (r = 0; r < car->base.comm->size; ++r) {
        slot->reqs[r].status = GCX_OK;
        if (r != me) {
            gcx_car_send(car, slot, r, r, &hdr, len);
        }
    }
    slot->next         = car->base.inflight;
    car->base.inflight = slot;
    op->used_union    |= op->used;
    op->published      = 1;
}

/* Staged messages of this round: chunks to take, decoded chunks to copy. */
static void gcx_car_unstash(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t *slot;
    size_t            off, len;
    int               r, me = car->base.comm->rank;

    for (r = 0; r < car->base.comm->size; ++r) {
        if (r == me) {
            continue;
        }
        slot = gcx_car_stash_find(car, op->round, GCX_CAR_CHUNK, r, 0);
        if (slot != NULL && slot->reqs[0].status != GCX_INPROGRESS) {
            gcx_car_stash_find(car, op->round, GCX_CAR_CHUNK, r, 1);
            if (slot->reqs[0].status != GCX_OK || op->used != 0) {
                gcx_coded_slot_put(&car->base, slot);
            } else {
                gcx_car_take(car, op, r, NULL, slot);
            }
        }
        slot = gcx_car_stash_find(car, op->round, GCX_CAR_DECODED, r, 0);
        if (slot != NULL && slot->reqs[0].status != GCX_INPROGRESS) {
            gcx_car_stash_find(car, op->round, GCX_CAR_DECODED, r, 1);
            if (slot->reqs[0].status != GCX_OK) {
                op->super.status = slot->reqs[0].status;
            } else if (!(op->posted & (1ull << r))) {
                gcx_car_chunk(car, r, &off, &len);
                memcpy(op->recvbuf + off, slot->block->data,
                       len * sizeof(float));
                op->posted     |= 1ull << r;
                op->got        |= 1ull << r;
                op->used_union |= slot->hdr.used;
            }
            gcx_coded_slot_put(&car->base, slot);
        }
    }
}

static void gcx_car_done(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_result_t *res = op->result;
    int                 w;

    if (res != NULL) {
        memset(res, 0, sizeof(*res));
        res->round      = op->round;
        res->arrived    = op->arrived;
        res->used       = op->used_union;
        res->round_time = gcx_time_now() - op->t_start;
        for (w = 0; w < GCX_CODE_MAX_WORKERS; ++w) {
            res->arrival[w] = NAN;
        }
        res->skipped = op->sent == 2;
    }
    car->base.stats.skipped += (uint64_t)(op->sent == 2);
    ++car->base.stats.rounds;
    car->next_open   = op->round + 1;
    car->live        = NULL;
    op->super.status = GCX_OK;
}

static void gcx_car_progress(gcx_task_t *task)
{
    gcx_car_op_t          *op  = (gcx_car_op_t *)task;
    gcx_coded_allreduce_t *car = op->car;
    gcx_tl_t              *tl  = car->base.comm->tl;
    int                    c, w, me = car->base.comm->rank;
    int                    size = car->base.comm->size;
    uint64_t               others = gcx_car_all(size) & ~(1ull << me);
    uint64_t               alive;
    int                    decodable = 0, landed = 1;

    if (task->status != GCX_INPROGRESS) {
        return;
    }
    gcx_coded_reclaim(&car->base);
    gcx_car_unstash(car, op);
    if (task->status != GCX_INPROGRESS) {
        return;
    }
    /* receiver: decoded chunks that landed; an owner lost before its chunk
     * came fails the round now (a chunk has one decoder) */
    for (c = 0; c < size; ++c) {
        if (c == me || (op->got & (1ull << c))) {
            continue;
        }
        if (op->posted & (1ull << c)) {
            if (op->rreq[c].status == GCX_INPROGRESS) {
                continue;
            }
            if (op->rreq[c].status != GCX_OK) {
                task->status = op->rreq[c].status;
                return;
            }
            op->got |= 1ull << c;
        } else if (tl->ops->peer_failed(tl, c)) {
            gcx_error("coded allreduce round %llu: the connection to rank "
                      "%d, the owner of chunk %d, is lost",
                      (unsigned long long)op->round, c, c);
            task->status = GCX_ERR_PEER;
            return;
        }
    }
    /* worker: this rank's chunks, once its (injected) delay is over */
    if (op->sent == 0 && gcx_time_now() >= op->t_send) {
        gcx_car_send_chunks(car, op);
        op->sent = 1;
        op->arrived |= 1ull << me;
        if (op->used == 0) {
            op->taken |= 1ull << me; /* read from sendbuf */
        }
        if (task->status != GCX_INPROGRESS) {
            return;
        }
    }
    /* owner: decode once the taken chunks landed and are decodable */
    if (!op->published) {
        for (w = 0; w < car->base.n; ++w) {
            if (!(op->taken & (1ull << w)) || w == me) {
                continue;
            }
            if (op->in[w]->reqs[0].status == GCX_INPROGRESS) {
                landed = 0;
            } else if (op->in[w]->reqs[0].status != GCX_OK) {
                /* its sender died mid-payload: a straggler that never
                 * comes; the others may still decode */
                op->taken &= ~(1ull << w);
                gcx_coded_slot_put(&car->base, op->in[w]);
                op->in[w] = NULL;
                car->base.gone |= 1ull << w;
            }
        }
        gcx_code_decodable(car->base.code, op->taken, &decodable);
        if (decodable && landed) {
            gcx_car_publish(car, op);
            if (task->status != GCX_INPROGRESS) {
                return;
            }
        } else if (!decodable) {
            alive = gcx_car_all(car->base.n);
            for (w = 0; w < car->base.n; ++w) {
                if (w != me && !(op->arrived & (1ull << w)) &&
                    tl->ops->peer_failed(tl, w)) {
                    alive &= ~(1ull << w);
                }
            }
            alive &= ~(op->arrived & ~op->taken); /* dropped ones */
            gcx_code_decodable(car->base.code, alive, &decodable);
            if (!decodable) {
                gcx_error("coded allreduce round %llu: chunk %d can no "
                          "longer be decoded (workers lost)",
                          (unsigned long long)op->round, me);
                task->status = GCX_ERR_UNDECODABLE;
                return;
            }
        }
    }
    if (op->published && (op->got & others) == others) {
        if (op->sent == 0) {
            op->sent = 2; /* decoded without this rank: nothing to send */
        }
        gcx_car_done(car, op);
    }
}

static void gcx_car_post(gcx_task_t *task)
{
    gcx_car_op_t          *op  = (gcx_car_op_t *)task;
    gcx_coded_allreduce_t *car = op->car;
    double                 delay_ms;

    car->live   = op;
    op->t_start = gcx_time_now();
    delay_ms    = gcx_coded_straggler_delay(&car->base, car->base.comm->rank,
                                            op->round);
    op->t_send  = op->t_start + delay_ms * 1e-3;
    car->base.comm->tl->ops->progress(car->base.comm->tl);
    gcx_car_progress(task);
}

static void gcx_car_finalize(gcx_task_t *task)
{
    gcx_car_op_t          *op  = (gcx_car_op_t *)task;
    gcx_coded_allreduce_t *car = op->car;
    gcx_tl_t              *tl;
    int                    w, c;

    if (car != NULL) {
        tl = car->base.comm->tl;
        if (car->live == op) {
            car->live = NULL;
        }
        for (w = 0; w < GCX_CODE_MAX_WORKERS; ++w) {
            if (op->in[w] != NULL) {
                if (op->in[w]->reqs[0].status == GCX_INPROGRESS) {
                    gcx_coded_slot_abandon_req(&car->base, op->in[w], 0);
                }
                gcx_coded_slot_put(&car->base, op->in[w]);
            }
        }
        for (c = 0; c < car->base.comm->size; ++c) {
            if ((op->posted & (1ull << c)) &&
                op->rreq[c].status == GCX_INPROGRESS) {
                /* a failed round: the transfer lands in the caller's
                 * buffer or fails; the transport keeps it */
                tl->ops->abandon(tl, &op->rreq[c], NULL, NULL);
            }
        }
    }
    free(op);
}

static const gcx_task_ops_t gcx_car_ops = {
    .name     = "coded_allreduce",
    .post     = gcx_car_post,
    .progress = gcx_car_progress,
    .finalize = gcx_car_finalize,
};

/* ---- API ------------------------------------------------------------------ */

static gcx_status_t gcx_car_create_locked(gcx_comm_t *comm,
                                          const gcx_coded_params_t *params,
                                          gcx_coded_allreduce_t **car_p)
{
    gcx_coded_allreduce_t *car;
    gcx_tl_t              *tl;
    gcx_status_t           status;
    size_t                 off, len;
    unsigned               id;

    if (comm == NULL || params == NULL || params->code == NULL ||
        car_p == NULL || params->root_not_worker || params->lost_rounds) {
        gcx_error("gcx_coded_allreduce_create: invalid arguments (every rank "
                  "is a worker; root_not_worker and lost_rounds are not "
                  "supported)");
        return GCX_ERR_INVALID;
    }
    if (comm->error != GCX_OK) {
        return comm->error;
    }
    if (gcx_code_workers(params->code) != comm->size) {
        gcx_error("gcx_coded_allreduce_create: the code has %d workers, the "
                  "communicator %d",
                  gcx_code_workers(params->code), comm->size);
        return GCX_ERR_INVALID;
    }
    car = calloc(1, sizeof(*car));
    if (car == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_coll_block(params->count, comm->size, 0, &off, &len); /* largest */
    tl                   = comm->tl;
    car->base.comm       = comm;
    car->base.code       = params->code;
    car->base.count      = params->count;
    car->base.bytes      = len * sizeof(float);
    car->base.root       = 0;
    car->base.n          = comm->size;
    car->base.s          = gcx_code_stragglers(params->code);
    car->base.my_worker  = comm->rank;
    car->base.instance   = comm->seq;
    status = gcx_coded_straggler_init(&car->base);
    if (status != GCX_OK) {
        goto err_free;
    }
    for (id = GCX_CODED_AM_FIRST; id < GCX_TL_AM_MAX_ID; ++id) {
        if (tl->ops->am_handler(tl, id, gcx_car_am_handler, car) == GCX_OK) {
            break;
        }
    }
    if (id == GCX_TL_AM_MAX_ID) {
        gcx_error("gcx_coded_allreduce_create: no free active-message id");
        status = GCX_ERR_UNSUPPORTED;
        goto err_free;
    }
    car->base.am_id = id;
    status = gcx_coded_agree(&car->base, GCX_CAR_COLL_ID);
    if (status != GCX_OK) {
        goto err_unregister;
    }
    *car_p = car;
    return GCX_OK;

err_unregister:
    tl->ops->am_handler(tl, car->base.am_id, NULL, NULL);
err_free:
    free(car);
    return status;
}

gcx_status_t gcx_coded_allreduce_create(gcx_comm_t *comm,
                                        const gcx_coded_params_t *params,
                                        gcx_coded_allreduce_t **car_p)
{
    gcx_status_t status;

    if (car_p != NULL) {
        *car_p = NULL;
    }
    gcx_context_lock();
    status = gcx_car_create_locked(comm, params, car_p);
    gcx_context_unlock();
    return status;
}

void gcx_coded_allreduce_destroy(gcx_coded_allreduce_t *car)
{
    gcx_tl_t *tl;

    if (car == NULL) {
        return;
    }
    gcx_context_lock();
    tl = car->base.comm->tl;
    if (car->live != NULL) {
        gcx_warn("coded allreduce destroyed with a round in flight");
        car->live->car = NULL;
    }
    if (car->base.comm->error == GCX_OK) {
        tl->ops->progress(tl);
        gcx_coded_reclaim(&car->base);
    }
    tl->ops->am_handler(tl, car->base.am_id, NULL, NULL);
    gcx_coded_slots_release(&car->base);
    free(car);
    gcx_context_unlock();
}

gcx_status_t gcx_coded_allreduce(gcx_coded_allreduce_t *car,
                                 const float *sendbuf, float *recvbuf,
                                 gcx_coded_result_t *result,
                                 gcx_request_t **req_p)
{
    gcx_car_op_t *op;
    size_t        count;

    count = car != NULL ? car->base.count : 0;
    if (car == NULL ||
        (count > 0 && (sendbuf == NULL || recvbuf == NULL ||
                       (sendbuf < recvbuf + count &&
                        recvbuf < sendbuf + count)))) {
        gcx_error("gcx_coded_allreduce: invalid arguments (buffers %p -> %p; "
                  "they must not overlap)",
                  (const void *)sendbuf, (void *)recvbuf);
        return GCX_ERR_INVALID;
    }
    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&op->super, &gcx_car_ops, car->base.comm);
    op->car     = car;
    op->round   = car->next_round++;
    op->sendbuf = sendbuf;
    op->recvbuf = recvbuf;
    op->result  = result;
    return gcx_task_submit(&op->super, req_p);
}

gcx_status_t gcx_coded_allreduce_stats(const gcx_coded_allreduce_t *car,
                                       gcx_coded_stats_t *stats_p)
{
    if (car == NULL || stats_p == NULL) {
        return GCX_ERR_INVALID;
    }
    *stats_p      = car->base.stats;
    stats_p->gone = car->base.gone;
    return GCX_OK;
}
