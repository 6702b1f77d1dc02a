/*
 * masterless.c - master-less coded allreduce: gradient coding without a
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
 *   3. allgather: the owner sends its decoded chunk to the P-1 others
 *      (final there on the owner's COMMIT, below).
 * A straggler's chunk messages come late and are dropped (the round number
 * is in the header), as the star drops a late contribution; no owner waits
 * for more than a decodable set. The messages travel eager (no rendezvous
 * handshake, see gcx_car_send), so a late one has crossed the link.
 *
 * Cost per round, per rank, with n = |g| bytes, P ranks, α, β, γ (the
 * owner also sends P-1 header-only COMMITs and gets s ACKs, below):
 *   bytes out = bytes in = 2 (P-1)/P n (phase 1 + phase 3), the ring's;
 *   messages  = 2 (P-1) posted at once, P-1 COMMITs: about 3 (P-1) o of
 *               send overhead o and 4α of latency (chunk, decoded chunk,
 *               ACK, COMMIT; the ring: 2 (P-1) α in sequence);
 *   decode    = |used| n/P γ multiply-adds on each owner (the star's root:
 *               |used| n γ);
 *   memory    = one copy of the message (the chunks in flight), up to P
 *               taken chunks, and the decoded chunks received: about 3 n.
 *               Received chunks are read where UCX assembled them
 *               (gcx_car_pull, GCX_CODED_IN_PLACE), so the passes over
 *               the vector beyond decoding are two: the message copied
 *               into the send blocks, the final chunks into recvbuf.
 * Against the star (root: n (|used| + P - 1) β), the root's P vectors per
 * link become two vectors per link, whatever P is.
 *
 * Owners, deaths and agreement. Chunk c has a line of owners c, c+1, ...,
 * c+s (mod P); the acting owner is the first whose connection is not lost.
 * A rank that loses the acting owner of a chunk sends its own chunk to the
 * next one, which decodes it (or, if the lost owner's decoded copy reached
 * it, sends those bits on). Every rank must end with the same bits, so an
 * owner commits in two steps: its decoded chunk goes to every rank at once,
 * each later owner of the line answers ACK once it landed, and on the last
 * ACK the owner sends COMMIT to every rank. A rank takes the chunk as final
 * only when it landed and its COMMIT came. Hence: if any rank holds owner
 * a's bits as final, every later owner holds them too, and the next acting
 * owner sends those same bits on; a later owner that finished the round
 * keeps its copy and sends it again, with its COMMIT, once a is lost
 * (gcx_car_serve_kept), for the ranks whose transfer or COMMIT from a died
 * with it. Price: per chunk and round, s ACKs and P-1 COMMITs (header
 * only) and one round trip after the chunk landed (ACK back, COMMIT out).
 * Sending the chunk to the later owners first and to the others only after
 * their ACKs, as the first version did, put a whole chunk transfer through
 * a download still busy with the scatter on every rank's path (16 emulated
 * ranks at 200 Mbit/s: 1.3-1.6x the ring's time against 1.2-1.3x; 4 ranks
 * at 1 Gbit/s: 1.3-1.5x against 1.0-1.05x; perf/coded/README.md).
 *
 * Stragglers and progress. An owner decodes whenever its process
 * progresses, inside the round's call or before it: a rank still computing
 * its gradient serves the chunks it owns of the rounds of its window
 * (gcx_car_window) from the other workers' chunks (gcx_car_ahead, below),
 * so the others do not wait for it, and when it gets to a round already
 * decoded it can skip computing (gcx_coded_allreduce_ready, _abstain). What
 * that needs is progress while the rank computes: gcx's progress thread
 * (torch_gcx and gcx-train turn it on). A rank that makes no progress call for
 * d seconds holds its chunks (and its ACKs) for d. Straggler injection
 * (GCX_STRAGGLER_*) delays only a rank's chunk messages.
 *
 * Dead workers are stragglers that never come: rounds go on while the
 * others decode. Every owner of a chunk lost, or more than s workers: the
 * round fails (GCX_ERR_PEER, GCX_ERR_UNDECODABLE).
 *
 * Abstentions and lost rounds (pipelined codes: a worker that skipped a
 * slot abstains from the rounds whose message would read it). An
 * abstaining worker sends each chunk's owner a header-only VOID; an owner
 * whose chunk the workers left (not lost, not abstained) can no longer
 * decode gives up: with lost_rounds, when the workers not lost could have
 * decoded it, its outcome is "lost", published as a header-only LOST and
 * acknowledged and committed as decoded bits are (so a later owner
 * adopting it sends LOST on, never bits); otherwise the round fails with
 * GCX_ERR_UNDECODABLE. Every rank sees the same committed outcome of every
 * chunk, and takes the round as lost if any chunk's is: so chunks decoded
 * from different arrival sets (a worker dying between two owners) cannot
 * leave one rank with a sum and another without. With lost_rounds the
 * decoded chunks go to recvbuf only once every chunk is final and none
 * lost (recvbuf untouched by a lost round); the copy is the same one pass,
 * made at the end instead of as chunks come. Cost of an abstention: P-1
 * header-only messages.
 */
#include "masterless_int.h"
#include "base/log.h"
#include "base/time.h"

#include <gcx/coded.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GCX_CAR_COLL_ID (GCX_COLL_INTERNAL + 9) /* for the creation check */
#define GCX_CAR_MAX     GCX_CODE_MAX_WORKERS
#define GCX_CAR_AHEAD_MAX 256 /* largest window (GCX_CODED_AHEAD) */
#define GCX_CAR_AHEAD_MIN 8   /* smallest window GCX_CODED_AHEAD=0 picks */

typedef struct gcx_car_op gcx_car_op_t;

/* A committed copy kept by a later owner, and whether it was sent again. */
typedef struct gcx_car_kept {
    gcx_coded_slot_t *slot;
    int               served;
} gcx_car_kept_t;

struct gcx_coded_allreduce {
    /* comm, code, n, s, instance, am_id, the pool of chunk-sized slots,
     * stats and straggler injection of the coded gather (base.bytes: the
     * largest chunk; base.count: the whole vector, for the check) */
    gcx_coded_t   base;
    int           line;       /* owners per chunk: min(s + 1, n) */
    /* the rounds in progress here, by round: the one this rank's call
     * entered (the lowest, next_open) and those served ahead of its call
     * (entered 0; rounds next_open .. next_open + base.window - 1: the
     * window, gcx_car_window) */
    gcx_car_op_t *rounds;
    int           in_place;   /* GCX_CODED_IN_PLACE: read received chunks
                                 in the transport's buffer (gcx_car_pull) */
    gcx_progress_cb_t ahead_cb; /* gcx_car_ahead, while the object lives */
    /* the copies this rank, a later owner of the line of chunk c, took in
     * the last base.window rounds it finished (gcx_car_serve_kept): a row
     * per position pos = 1 .. line - 1 in that line, indexed by round %
     * window (gcx_car_kept_row) */
    gcx_car_kept_t *kept;
    uint64_t      next_round; /* number of the next call */
    uint64_t      next_open;  /* lowest round not finished here */
};

enum { GCX_CAR_COLLECT, GCX_CAR_ACKS, GCX_CAR_DONE };

/* One chunk of a round, as worker, owner and receiver. */
typedef struct gcx_car_chunk {
    /* worker: the owner this rank's chunk went to (-1: not yet) */
    int               sent_to;
    /* owner (this rank acts for the chunk) */
    int               ostate;
    uint64_t          arrived, taken, used;
    uint64_t          abstained;             /* workers that sent VOID */
    uint64_t          acks_wanted, acks_got; /* backup ranks */
    gcx_coded_slot_t *in[GCX_CAR_MAX];       /* taken chunks, by worker */
    gcx_coded_slot_t *pub;                   /* the decoded chunk sent;
                                                held after the round's
                                                publish until the rank has
                                                entered (gcx_car_settle) */
    /* receiver: copies by line position of their sender; the final one is
     * copied into recvbuf */
    gcx_coded_slot_t *copy[GCX_CAR_MAX];
    uint64_t          acked;        /* line positions acknowledged */
    uint64_t          committed;    /* line positions whose COMMIT came */
    int               final;
    int               lost;         /* final outcome: the round is lost
                                       (LOST, lost_rounds only) */
    int               keep;         /* final from the copy of the earlier
                                       owner at line position keep - 1 */
    int               from;         /* final, served ahead: the bits are in
                                       copy[from - 1] until the rank enters
                                       (gcx_car_settle); else 0 */
} gcx_car_chunk_t;

struct gcx_car_op {
    gcx_task_t             super;
    gcx_coded_allreduce_t *car;
    gcx_car_op_t          *next;     /* car->rounds, by round */
    uint64_t               round;
    const float           *sendbuf;
    float                 *recvbuf;
    gcx_coded_result_t    *result;
    int                    abstain;  /* sends VOIDs (sendbuf unread) */
    int                    whole;    /* lost_rounds: every chunk final and
                                        none lost, recvbuf may be written
                                        (gcx_car_settle) */
    int                    entered;  /* 0: served ahead of the call */
    double                 t_start;
    double                 t_send;   /* chunk messages go from this time */
    int                    sending;  /* t_send has passed */
    int                    nsent;    /* chunk messages sent */
    int                    nvoid;    /* abstentions said (VOIDs sent, or
                                        recorded for a chunk it owns) */
    uint64_t               used_union;
    int                    acting[GCX_CAR_MAX]; /* owner of each chunk */
    gcx_car_chunk_t        ch[GCX_CAR_MAX];
};

/* memcpy of n floats; nothing for n = 0 (the buffers may then be NULL) */
static void gcx_car_copy(float *dst, const float *src, size_t n)
{
    if (n > 0) {
        memcpy(dst, src, n * sizeof(float));
    }
}

/* base + off, NULL for a NULL base (count 0: the buffers may be NULL) */
static float *gcx_car_at(const float *base, size_t off)
{
    return base != NULL ? (float *)(uintptr_t)(base + off) : NULL;
}

static void gcx_car_block(const gcx_coded_allreduce_t *car, int c,
                          size_t *off_p, size_t *len_p)
{
    gcx_coll_block(car->base.count, car->base.n, c, off_p, len_p);
}

/* Position of @p rank in chunk @p c's line of owners, or -1. */
static int gcx_car_pos(const gcx_coded_allreduce_t *car, int c, int rank)
{
    int pos = gcx_coll_mod(rank - c, car->base.n);

    return pos < car->line ? pos : -1;
}

static int gcx_car_owner(const gcx_coded_allreduce_t *car, int c, int pos)
{
    return (c + pos) % car->base.n;
}

/* Entries of car->kept: (line - 1) positions x window rounds. */
static size_t gcx_car_kept_len(const gcx_coded_allreduce_t *car)
{
    return (size_t)(car->line - 1) * (size_t)car->base.window;
}

/* The kept copies of chunk c, by round % window; this rank is a later
 * owner of c's line (pos >= 1). */
static gcx_car_kept_t *gcx_car_kept_row(gcx_coded_allreduce_t *car, int pos)
{
    return &car->kept[(size_t)(pos - 1) * (size_t)car->base.window];
}

/* The kept copy of chunk c in @p round's place (ch->keep: this rank is a
 * later owner of c's line). */
static gcx_car_kept_t *gcx_car_kept(gcx_coded_allreduce_t *car, int c,
                                    uint64_t round)
{
    return gcx_car_kept_row(car, gcx_car_pos(car, c, car->base.comm->rank)) +
           round % (uint64_t)car->base.window;
}

/*
 * The window: rounds a rank serves ahead of its call. GCX_CODED_AHEAD when
 * set; 0 (auto) takes as many rounds as GCX_CODED_AHEAD_BYTES of the vector
 * hold, GCX_CAR_AHEAD_MIN to GCX_CAR_AHEAD_MAX: the window's price is paid
 * in vectors (a rank that far behind holds about two per round, every rank
 * s/P of one per round in kept copies), its benefit counted in rounds (per
 * stall of a slow rank, the others run `window` rounds), so a small vector
 * gets many rounds for the memory one large vector's few take.
 */
static int gcx_car_window(const struct gcx_config *config, size_t count)
{
    size_t vector = count * sizeof(float), rounds;

    if (config->coded_ahead > 0) {
        return config->coded_ahead;
    }
    rounds = vector > 0 ? config->coded_ahead_bytes / vector :
                          GCX_CAR_AHEAD_MAX;
    if (rounds < GCX_CAR_AHEAD_MIN) {
        rounds = GCX_CAR_AHEAD_MIN;
    }
    return rounds > GCX_CAR_AHEAD_MAX ? GCX_CAR_AHEAD_MAX : (int)rounds;
}

static void gcx_car_hdr_init(gcx_coded_allreduce_t *car, uint64_t round,
                             int kind, int c, gcx_car_hdr_t *hdr)
{
    memset(hdr, 0, sizeof(*hdr));
    hdr->comm_id  = car->base.comm->id;
    hdr->instance = car->base.instance;
    hdr->round    = round;
    hdr->sender   = (uint16_t)car->base.comm->rank;
    hdr->kind     = (uint16_t)kind;
    hdr->chunk    = (uint32_t)c;
}

/* Request i of a slot: the block's header storage (big enough) holds the
 * header while the send reads it; len floats of payload (0: header only).
 * A failed send (peer gone) shows where its answer is waited for. Payloads
 * go eager (am_send_eager): each rank posts 2(P-1) of them at once, and
 * with rendezvous every one of those handshakes waited behind the data
 * queued on its TCP link (8 emulated ranks: 1.2-1.7x the ring's time with
 * rendezvous, 1.07-1.21x eager; perf/coded/README.md). A late chunk then
 * crosses the link before it is dropped. */
static void gcx_car_send(gcx_coded_allreduce_t *car, gcx_coded_slot_t *slot,
                         int i, int peer, const gcx_car_hdr_t *hdr,
                         size_t len)
{
    gcx_tl_t *tl = car->base.comm->tl;
    gcx_iov_t iov;

    memcpy(&slot->block->hdr, hdr, sizeof(*hdr));
    iov.buffer = slot->block->data;
    iov.length = len * sizeof(float);
    if (len > 0) {
        tl->ops->am_send_eager(tl, peer, car->base.am_id, &slot->block->hdr,
                               sizeof(*hdr), &iov, 1, &slot->reqs[i]);
    } else {
        tl->ops->am_send(tl, peer, car->base.am_id, &slot->block->hdr,
                         sizeof(*hdr), NULL, 0, &slot->reqs[i]);
    }
}

/* A slot whose sends may outlive the round: reclaimed when they end; with
 * a chunk-sized block (@p data) or for header-only sends. NULL when out of
 * memory. */
static gcx_coded_slot_t *gcx_car_out_slot(gcx_coded_allreduce_t *car,
                                          uint64_t round, int data)
{
    gcx_coded_slot_t *slot = data ? gcx_coded_slot_get(&car->base) :
                                    gcx_coded_slot_get_ctl(&car->base);
    int               r;

    if (slot == NULL) {
        gcx_error("coded allreduce: out of memory for a send");
        return NULL;
    }
    slot->round = round;
    slot->nreqs = car->base.comm->size;
    for (r = 0; r < slot->nreqs; ++r) {
        slot->reqs[r].status = GCX_OK;
    }
    slot->next         = car->base.inflight;
    car->base.inflight = slot;
    return slot;
}

/* A header-only ACK, COMMIT (the decoded bits sent before are final) or
 * VOID about chunk c of @p round to the ranks of @p peers (a bit set): one
 * slot, the same header for all. */
static gcx_status_t gcx_car_send_ctl(gcx_coded_allreduce_t *car, int kind,
                                     uint64_t round, int c, uint64_t peers)
{
    gcx_coded_slot_t *slot = gcx_car_out_slot(car, round, 0);
    gcx_car_hdr_t     hdr;
    int               r;

    if (slot == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_car_hdr_init(car, round, kind, c, &hdr);
    for (r = 0; r < car->base.comm->size; ++r) {
        if (peers & (1ull << r)) {
            gcx_car_send(car, slot, r, r, &hdr, 0);
        }
    }
    return GCX_OK;
}

/* The other ranks whose connection is not lost, as a bit set. */
static uint64_t gcx_car_others(gcx_coded_allreduce_t *car)
{
    gcx_tl_t *tl    = car->base.comm->tl;
    uint64_t  peers = 0;
    int       r;

    for (r = 0; r < car->base.comm->size; ++r) {
        if (r != car->base.comm->rank && !tl->ops->peer_failed(tl, r)) {
            peers |= 1ull << r;
        }
    }
    return peers;
}

/* ---- messages ------------------------------------------------------------ */

/* The state of @p round here (entered or served ahead), or NULL. */
static gcx_car_op_t *gcx_car_find(gcx_coded_allreduce_t *car, uint64_t round)
{
    gcx_car_op_t *op;

    for (op = car->rounds; op != NULL && op->round < round; op = op->next) {
    }
    return op != NULL && op->round == round ? op : NULL;
}

static gcx_coded_slot_t *gcx_car_stash_find(gcx_coded_allreduce_t *car,
                                            uint64_t round, int kind,
                                            int sender, int chunk, int unlink)
{
    gcx_coded_slot_t **pp = &car->base.stash, *slot;

    for (; (slot = *pp) != NULL; pp = &slot->next) {
        if (slot->round == round && slot->hdr.kind == kind &&
            slot->hdr.sender == sender && slot->worker == chunk) {
            if (unlink) {
                *pp = slot->next;
            }
            return slot;
        }
    }
    return NULL;
}

/* A slot whose receive may still be in flight: the transport keeps its
 * block until the transfer ends; the slot goes back to the pool. */
static void gcx_car_drop(gcx_coded_allreduce_t *car, gcx_coded_slot_t *slot)
{
    gcx_coded_slot_abandon_req(&car->base, slot, 0);
    gcx_coded_slot_put(&car->base, slot);
}

/* A payload into a fresh slot (hdr kept in slot->hdr, chunk in
 * slot->worker): kept where the transport assembled it when it can
 * (gcx_coded_slot_hold: no copy), else copied into the slot's block. A
 * slot that holds its payload in place or has none (a header-only kind)
 * takes no block: a rank behind stages (P-1) COMMITs and decoded chunks
 * per round, which would otherwise pin a chunk-sized block each. NULL
 * when out of memory. */
static gcx_coded_slot_t *gcx_car_pull(gcx_coded_allreduce_t *car,
                                      const gcx_car_hdr_t *hdr,
                                      const gcx_tl_am_msg_t *msg)
{
    gcx_tl_t         *tl = car->base.comm->tl;
    gcx_coded_slot_t *slot;
    gcx_iov_t         iov;

    slot = gcx_coded_slot_get_bare(&car->base);
    if (slot == NULL) {
        gcx_error("coded allreduce: out of memory taking a message");
        return NULL;
    }
    memset(&slot->hdr, 0, sizeof(slot->hdr));
    slot->round          = hdr->round;
    slot->hdr.round      = hdr->round;
    slot->hdr.sender     = hdr->sender;
    slot->hdr.kind       = hdr->kind;
    slot->hdr.used       = hdr->used;
    slot->worker         = (int)hdr->chunk;
    slot->t_arrival      = gcx_time_now();
    slot->nreqs          = 1;
    slot->reqs[0].status = GCX_OK;
    if (msg->length == 0) {
        return slot; /* header only: nothing to receive */
    }
    if (car->in_place && gcx_coded_slot_hold(&car->base, slot, msg)) {
        ++car->base.stats.in_place;
        return slot;
    }
    if (!gcx_coded_slot_block(&car->base, slot)) {
        gcx_coded_slot_put(&car->base, slot);
        gcx_error("coded allreduce: out of memory taking a message");
        return NULL;
    }
    iov.buffer           = slot->block->data;
    iov.length           = msg->length;
    tl->ops->am_recv(tl, msg, &iov, 1, &slot->reqs[0]);
    return slot;
}

static void gcx_car_stage(gcx_coded_allreduce_t *car, const gcx_car_hdr_t *hdr,
                          const gcx_tl_am_msg_t *msg)
{
    gcx_coded_slot_t *slot;

    if (gcx_car_stash_find(car, hdr->round, hdr->kind, hdr->sender,
                           (int)hdr->chunk, 0) != NULL) {
        gcx_warn("coded allreduce: dropping a duplicate message of round "
                 "%llu from rank %u",
                 (unsigned long long)hdr->round, hdr->sender);
        return;
    }
    slot = gcx_car_pull(car, hdr, msg);
    if (slot != NULL) {
        slot->next      = car->base.stash;
        car->base.stash = slot;
        ++car->base.stats.early;
    }
}

/* Owner: the taken chunks that have landed (this rank's own: always). */
static uint64_t gcx_car_landed_bits(const gcx_coded_allreduce_t *car,
                                    const gcx_car_chunk_t       *ch)
{
    uint64_t landed = 0;
    int      w, me = car->base.comm->rank;

    for (w = 0; w < car->base.n; ++w) {
        if ((ch->taken & (1ull << w)) &&
            (w == me || ch->in[w]->reqs[0].status == GCX_OK)) {
            landed |= 1ull << w;
        }
    }
    return landed;
}

/* gcx_car_landed_bits, after letting go of a taken chunk whose transfer
 * failed (its sender died mid-payload): a straggler that never comes. */
static uint64_t gcx_car_landed(gcx_coded_allreduce_t *car, gcx_car_chunk_t *ch)
{
    int w, me = car->base.comm->rank;

    for (w = 0; w < car->base.n; ++w) {
        if (w != me && (ch->taken & (1ull << w)) &&
            ch->in[w]->reqs[0].status != GCX_OK &&
            ch->in[w]->reqs[0].status != GCX_INPROGRESS) {
            ch->taken &= ~(1ull << w);
            gcx_car_drop(car, ch->in[w]);
            ch->in[w] = NULL;
            car->base.gone |= 1ull << w;
        }
    }
    return gcx_car_landed_bits(car, ch);
}

/* Owner: is another worker's chunk still needed? Until the chunks that
 * landed are decodable, every arrival is taken: one taken earlier may
 * still fail with its sender, and a dropped one cannot be had again. */
static int gcx_car_wanted(gcx_coded_allreduce_t *car, gcx_car_chunk_t *ch)
{
    int decodable = 0;

    gcx_code_decodable(car->base.code, gcx_car_landed(car, ch), &decodable);
    return ch->ostate == GCX_CAR_COLLECT && !decodable;
}

/* Owner of chunk c: worker w's chunk, in msg (live) or in a staged slot. */
static void gcx_car_take(gcx_coded_allreduce_t *car, gcx_car_chunk_t *ch,
                         int w, const gcx_car_hdr_t *hdr,
                         const gcx_tl_am_msg_t *msg, gcx_coded_slot_t *slot)
{
    if (ch->arrived & (1ull << w)) {
        if (slot != NULL) {
            gcx_car_drop(car, slot);
        }
        return; /* sent again after a change of owner: have it */
    }
    ch->arrived |= 1ull << w;
    if (!gcx_car_wanted(car, ch)) {
        ++car->base.stats.unneeded;
        if (slot != NULL) {
            gcx_car_drop(car, slot);
        }
        return; /* msg: dropped (not copied), its sender completes */
    }
    if (slot == NULL) {
        slot = gcx_car_pull(car, hdr, msg);
        if (slot == NULL) {
            return;
        }
    }
    ch->in[w]  = slot;
    ch->taken |= 1ull << w;
}

static void gcx_car_on_chunk(gcx_coded_allreduce_t *car,
                             const gcx_car_hdr_t *hdr,
                             const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = gcx_car_find(car, hdr->round);
    size_t        off, len;
    int           c = (int)hdr->chunk, me = car->base.comm->rank;

    gcx_car_block(car, c, &off, &len);
    if (gcx_car_pos(car, c, me) < 0 || msg->length != len * sizeof(float)) {
        gcx_warn("coded allreduce: dropping a malformed chunk from rank %u",
                 hdr->sender);
        return;
    }
    if (hdr->round < car->next_open) {
        ++car->base.stats.late_dropped; /* finished: drop unread */
        return;
    }
    if (op != NULL && op->super.status == GCX_INPROGRESS &&
        op->acting[c] == me) {
        if (op->ch[c].ostate != GCX_CAR_COLLECT) {
            ++car->base.stats.late_dropped; /* decoded already */
            return;
        }
        gcx_car_take(car, &op->ch[c], hdr->sender, hdr, msg, NULL);
        return;
    }
    /* a round not entered yet, or a chunk this rank may act for later */
    gcx_car_stage(car, hdr, msg);
}

static void gcx_car_on_decoded(gcx_coded_allreduce_t *car,
                               const gcx_car_hdr_t *hdr,
                               const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t     *op = gcx_car_find(car, hdr->round);
    gcx_coded_slot_t *slot;
    size_t            off, len;
    int               c = (int)hdr->chunk, pos;

    pos = gcx_car_pos(car, c, hdr->sender);
    gcx_car_block(car, c, &off, &len);
    if (hdr->kind == GCX_CAR_LOST) {
        len = 0; /* the outcome "lost": no bits */
    }
    if (pos < 0 || msg->length != len * sizeof(float)) {
        gcx_warn("coded allreduce: dropping a decoded chunk %u from rank %u",
                 hdr->chunk, hdr->sender);
        return;
    }
    if (hdr->round < car->next_open) {
        /* a new owner sends on a chunk of a round this rank finished: as a
         * later owner of its line this rank took the same bits (committed
         * by the lost owner, whose copy the new owner had too), so it
         * answers ACK and the new owner can go on */
        if (gcx_car_pos(car, c, car->base.comm->rank) > pos) {
            (void)gcx_car_send_ctl(car, GCX_CAR_ACK, hdr->round, c,
                                   1ull << hdr->sender);
        }
        return;
    }
    if (op != NULL && op->super.status == GCX_INPROGRESS) {
        if (op->ch[c].final) {
            /* as for a finished round: this rank has the same bits */
            if (gcx_car_pos(car, c, car->base.comm->rank) > pos) {
                (void)gcx_car_send_ctl(car, GCX_CAR_ACK, hdr->round, c,
                                       1ull << hdr->sender);
            }
            return;
        }
        if (op->ch[c].copy[pos] != NULL) {
            gcx_warn("coded allreduce: dropping a duplicate decoded chunk");
            return;
        }
        slot = gcx_car_pull(car, hdr, msg);
        op->ch[c].copy[pos] = slot;
        return;
    }
    gcx_car_stage(car, hdr, msg); /* this rank is behind */
}

/* Owner of chunk c: worker hdr->sender abstains from the round (no chunk
 * will come from it: the decode must do without, or the round is lost). */
static void gcx_car_on_void(gcx_coded_allreduce_t *car,
                            const gcx_car_hdr_t *hdr,
                            const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = gcx_car_find(car, hdr->round);
    int           c  = (int)hdr->chunk, me = car->base.comm->rank;

    if (gcx_car_pos(car, c, me) < 0 || hdr->round < car->next_open) {
        return; /* not a chunk this rank can own, or a finished round */
    }
    if (op != NULL && op->super.status == GCX_INPROGRESS &&
        op->acting[c] == me) {
        op->ch[c].abstained |= 1ull << hdr->sender;
        return;
    }
    gcx_car_stage(car, hdr, msg); /* as a chunk would be */
}

static void gcx_car_on_ctl(gcx_coded_allreduce_t *car, const gcx_car_hdr_t *hdr,
                           const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = gcx_car_find(car, hdr->round);
    int           c  = (int)hdr->chunk, pos = gcx_car_pos(car, c, hdr->sender);

    if (op == NULL && hdr->kind == GCX_CAR_COMMIT &&
        hdr->round >= car->next_open) {
        gcx_car_stage(car, hdr, msg); /* a round this rank has not begun */
        return;
    }
    if (op == NULL || pos < 0) {
        return; /* of a finished round: nothing waits for it */
    }
    if (hdr->kind == GCX_CAR_ACK) {
        op->ch[c].acks_got |= 1ull << hdr->sender;
    } else {
        op->ch[c].committed |= 1ull << pos;
    }
}

gcx_status_t gcx_car_hdr_parse(const void *bytes, size_t len, size_t payload,
                               int size, int line, size_t count,
                               gcx_car_hdr_t *hdr)
{
    size_t off, clen;
    int    pos;

    if (len != sizeof(*hdr) || size < 1 || line < 1) {
        return GCX_ERR_INVALID;
    }
    memcpy(hdr, bytes, sizeof(*hdr)); /* may be unaligned */
    if (hdr->sender >= (unsigned)size || hdr->chunk >= (unsigned)size) {
        return GCX_ERR_INVALID;
    }
    gcx_coll_block(count, size, (int)hdr->chunk, &off, &clen);
    pos = gcx_coll_mod((int)hdr->sender - (int)hdr->chunk, size);
    switch (hdr->kind) {
    case GCX_CAR_CHUNK: /* from any worker */
        return payload == clen * sizeof(float) ? GCX_OK : GCX_ERR_INVALID;
    case GCX_CAR_DECODED: /* from an owner of the chunk */
        return payload == clen * sizeof(float) && pos < line ?
                   GCX_OK : GCX_ERR_INVALID;
    case GCX_CAR_ACK: /* from a later owner */
        return payload == 0 && pos > 0 && pos < line ? GCX_OK :
                                                       GCX_ERR_INVALID;
    case GCX_CAR_COMMIT: /* from an owner */
    case GCX_CAR_LOST:
        return payload == 0 && pos < line ? GCX_OK : GCX_ERR_INVALID;
    case GCX_CAR_VOID: /* from any worker */
        return payload == 0 ? GCX_OK : GCX_ERR_INVALID;
    default:
        return GCX_ERR_INVALID;
    }
}

static void gcx_car_am_handler(void *arg, const gcx_tl_am_msg_t *msg)
{
    gcx_coded_allreduce_t *car = arg;
    gcx_car_hdr_t          hdr;

    if (gcx_car_hdr_parse(msg->header, msg->header_length, msg->length,
                          car->base.comm->size, car->line, car->base.count,
                          &hdr) != GCX_OK) {
        gcx_warn("coded allreduce: dropping a malformed message");
        return;
    }
    if (hdr.comm_id != car->base.comm->id ||
        hdr.instance != car->base.instance ||
        hdr.sender == (unsigned)car->base.comm->rank) {
        return; /* another object's (destroyed) message: drop */
    }
    switch (hdr.kind) {
    case GCX_CAR_CHUNK:
        gcx_car_on_chunk(car, &hdr, msg);
        break;
    case GCX_CAR_DECODED:
    case GCX_CAR_LOST:
        gcx_car_on_decoded(car, &hdr, msg);
        break;
    case GCX_CAR_VOID:
        gcx_car_on_void(car, &hdr, msg);
        break;
    default: /* ACK, COMMIT */
        gcx_car_on_ctl(car, &hdr, msg);
        break;
    }
}

/* ---- the round ----------------------------------------------------------- */

/* Owner of chunk c now, into acting[c]: the first owner of its line whose
 * connection is not lost (this rank's view); -1 when every one is lost.
 * Ranks whose connection is lost are counted gone (stats.gone: what a
 * training loop leaves out of its checks, as the star's root reports
 * them). */
static void gcx_car_acting(gcx_coded_allreduce_t *car, int *acting)
{
    gcx_tl_t *tl     = car->base.comm->tl;
    uint64_t  failed = 0;
    int       c, pos, r, me = car->base.comm->rank;

    for (r = 0; r < car->base.n; ++r) {
        if (r != me && tl->ops->peer_failed(tl, r)) {
            failed |= 1ull << r;
            if (!(car->base.gone & (1ull << r))) {
                gcx_warn("coded allreduce: rank %d is gone: connection lost",
                         r);
            }
        }
    }
    car->base.gone |= failed;
    for (c = 0; c < car->base.n; ++c) {
        acting[c] = -1;
        for (pos = 0; pos < car->line; ++pos) {
            r = gcx_car_owner(car, c, pos);
            if (!(failed & (1ull << r))) {
                acting[c] = r;
                break;
            }
        }
    }
}

/* Staged messages of this round that can be used now. */
static void gcx_car_unstash(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t **pp = &car->base.stash, *slot;
    int                c, pos, me = car->base.comm->rank;

    while ((slot = *pp) != NULL) {
        c = slot->worker;
        if (slot->round != op->round ||
            ((slot->hdr.kind == GCX_CAR_CHUNK ||
              slot->hdr.kind == GCX_CAR_VOID) && op->acting[c] != me)) {
            pp = &slot->next;
            continue;
        }
        *pp = slot->next;
        if (slot->hdr.kind == GCX_CAR_CHUNK) {
            /* landed or not: the taken slot's request is checked later */
            gcx_car_take(car, &op->ch[c], slot->hdr.sender, NULL, NULL, slot);
            continue;
        }
        if (slot->hdr.kind == GCX_CAR_VOID) {
            op->ch[c].abstained |= 1ull << slot->hdr.sender;
            gcx_car_drop(car, slot);
            continue;
        }
        pos = gcx_car_pos(car, c, slot->hdr.sender);
        if (slot->hdr.kind == GCX_CAR_COMMIT) {
            op->ch[c].committed |= 1ull << pos;
            gcx_car_drop(car, slot);
            continue;
        }
        if (op->ch[c].copy[pos] == NULL) {
            op->ch[c].copy[pos] = slot;
        } else {
            gcx_car_drop(car, slot);
        }
    }
}

/* Worker: this rank's chunks to their owners (again, if an owner
 * changed), chunk me+1 first (shift order, see gcx_car_publish_to); when
 * it abstains, a header-only VOID to each instead. */
static void gcx_car_contribute(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t *slot;
    gcx_car_chunk_t  *ch;
    gcx_car_hdr_t     hdr;
    size_t            off, len;
    int               k, c, me = car->base.comm->rank;

    for (k = 1; k <= car->base.n; ++k) {
        c  = (me + k) % car->base.n;
        ch = &op->ch[c];
        if (ch->final || ch->sent_to == op->acting[c]) {
            continue;
        }
        ch->sent_to = op->acting[c];
        if (op->abstain) { /* a VOID to the owner; noted here if it is me */
            if (op->acting[c] == me) {
                ch->abstained |= 1ull << me;
            } else if (gcx_car_send_ctl(car, GCX_CAR_VOID, op->round, c,
                                        1ull << op->acting[c]) != GCX_OK) {
                op->super.status = GCX_ERR_NOMEM;
                return;
            }
            ++op->nvoid;
            continue;
        }
        if (op->acting[c] == me) {
            if (ch->ostate == GCX_CAR_COLLECT &&
                !(ch->arrived & (1ull << me))) {
                ch->arrived |= 1ull << me; /* read from sendbuf */
                ch->taken   |= 1ull << me;
            }
            continue;
        }
        slot = gcx_car_out_slot(car, op->round, 1);
        if (slot == NULL) {
            op->super.status = GCX_ERR_NOMEM;
            return;
        }
        gcx_car_block(car, c, &off, &len);
        gcx_car_copy(slot->block->data, gcx_car_at(op->sendbuf, off), len);
        gcx_car_hdr_init(car, op->round, GCX_CAR_CHUNK, c, &hdr);
        gcx_car_send(car, slot, 0, op->acting[c], &hdr, len);
        ++op->nsent;
    }
}

/* Owner: send the decoded chunk c of @p round (in @p slot, decoded from
 * the workers of @p used; @p lost: the outcome "round lost", header only)
 * to @p peers' bit set, in shift order from this
 * rank (as gcx_car_contribute sends its chunks): all
 * owners starting at rank 0 put every fan-out's first bytes on one download
 * (16 emulated ranks at 200 Mbit/s: 7,700-10,300 TCP retransmits per 22
 * rounds in rank order, 420-1,100 in shift order; the round time the same
 * within the runs' spread). */
static void gcx_car_publish_to(gcx_coded_allreduce_t *car, uint64_t round,
                               int c, uint64_t used, int lost,
                               gcx_coded_slot_t *slot, uint64_t peers)
{
    gcx_car_hdr_t hdr;
    size_t        off, len;
    int           k, r;

    gcx_car_block(car, c, &off, &len);
    gcx_car_hdr_init(car, round, lost ? GCX_CAR_LOST : GCX_CAR_DECODED, c,
                     &hdr);
    hdr.used = lost ? 0 : used;
    len      = lost ? 0 : len;
    for (k = 1; k <= car->base.comm->size; ++k) {
        r = (car->base.comm->rank + k) % car->base.comm->size;
        if (peers & (1ull << r)) {
            gcx_car_send(car, slot, r, r, &hdr, len);
        }
    }
}

/* Owner of chunk c: the bits to publish -- a copy that an earlier owner of
 * the line sent here before it was lost (it may have reached others: the
 * same bits must go on), else a decode of the taken set. 1 when ready. */
static int gcx_car_owner_bits(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                              int c, float *out)
{
    const float     *vecs[GCX_CAR_MAX];
    double           a[GCX_CAR_MAX];
    gcx_car_chunk_t *ch = &op->ch[c];
    gcx_coded_slot_t *copy;
    gcx_status_t     status;
    size_t           off, len;
    uint64_t         landed;
    int              pos, w, mypos, decodable = 0;
    int              me = car->base.comm->rank;

    gcx_car_block(car, c, &off, &len);
    mypos = gcx_car_pos(car, c, me);
    for (pos = 0; pos < mypos; ++pos) {
        copy = ch->copy[pos];
        if (copy == NULL) {
            continue;
        }
        if (copy->reqs[0].status == GCX_INPROGRESS) {
            return 0; /* wait: it lands, or fails with its sender */
        }
        if (copy->reqs[0].status == GCX_OK) {
            ch->lost = copy->hdr.kind == GCX_CAR_LOST;
            ch->used = copy->hdr.used;
            if (!ch->lost) {
                gcx_car_copy(out, gcx_coded_slot_data(copy), len);
            }
            return 1;
        }
    }
    /* decode from the chunks that landed, once they are decodable; the
     * ones still on their way are not waited for */
    landed = gcx_car_landed(car, ch);
    gcx_code_decodable(car->base.code, landed, &decodable);
    if (!decodable) {
        return 0;
    }
    status = gcx_code_decode_vector(car->base.code, landed, a);
    if (status != GCX_OK) {
        gcx_error("coded allreduce round %llu: chunk %d cannot be decoded "
                  "from workers %#llx: %s",
                  (unsigned long long)op->round, c,
                  (unsigned long long)landed, gcx_strerror(status));
        op->super.status = status;
        return 0;
    }
    ch->used = 0;
    for (w = 0; w < car->base.n; ++w) {
        vecs[w] = NULL;
        if (a[w] != 0) {
            ch->used |= 1ull << w;
            vecs[w] = w == me ? gcx_car_at(op->sendbuf, off) :
                              gcx_coded_slot_data(ch->in[w]);
        }
    }
    /* canonical: the same taken set gives the same bits on any rank */
    gcx_code_encode(car->base.n, a, vecs, len, out);
    return 1;
}

/* Can chunk c still be decoded (this rank acting for it)? With
 * @p abstentions 0, whatever the abstentions: could the workers not lost
 * decode it (then only abstentions stand in the way: a lost round). */
static int gcx_car_decodable_still(gcx_coded_allreduce_t *car,
                                   gcx_car_op_t *op, int c, int abstentions)
{
    gcx_tl_t        *tl = car->base.comm->tl;
    gcx_car_chunk_t *ch = &op->ch[c];
    uint64_t         alive = 0, bit;
    int              w, decodable = 0, me = car->base.comm->rank;

    for (w = 0; w < car->base.n; ++w) {
        bit = 1ull << w;
        if ((ch->taken & bit) ||
            (!(ch->arrived & bit) &&
             (!abstentions || !(ch->abstained & bit)) &&
             (w == me || !tl->ops->peer_failed(tl, w)))) {
            alive |= bit; /* taken, or may still come */
        }
    }
    gcx_code_decodable(car->base.code, alive, &decodable);
    return decodable;
}

/* The owner's publish slot of chunk c to the in-flight list (back in the
 * pool when its sends end). */
static void gcx_car_pub_release(gcx_coded_allreduce_t *car,
                                gcx_car_chunk_t *ch)
{
    ch->pub->next      = car->base.inflight;
    car->base.inflight = ch->pub;
    ch->pub            = NULL;
}

/* Chunk c, final: once the rank has entered the round, its bits go to
 * recvbuf -- from the owner's publish slot, which then goes to the
 * in-flight list (back in the pool when its sends end), or from the copy
 * received. Served ahead of the call, the slots keep them until then. */
static void gcx_car_settle(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                           int c)
{
    gcx_car_chunk_t *ch = &op->ch[c];
    size_t           off, len;

    if (!op->entered || !ch->final || (car->base.lost_rounds && !op->whole)) {
        return; /* lost_rounds: recvbuf only once no chunk is lost */
    }
    gcx_car_block(car, c, &off, &len);
    if (ch->ostate == GCX_CAR_DONE && ch->pub != NULL) {
        gcx_car_copy(gcx_car_at(op->recvbuf, off), ch->pub->block->data, len);
        gcx_car_pub_release(car, ch);
    } else if (ch->from > 0) {
        gcx_car_copy(gcx_car_at(op->recvbuf, off),
                     gcx_coded_slot_data(ch->copy[ch->from - 1]), len);
        ch->from = 0;
    }
}

/* Owner of chunk c: decode (or adopt) and send it to every rank; once the
 * later owners of the line all have it, COMMIT to every rank. */
static void gcx_car_own(gcx_coded_allreduce_t *car, gcx_car_op_t *op, int c)
{
    gcx_tl_t         *tl = car->base.comm->tl;
    gcx_car_chunk_t  *ch = &op->ch[c];
    gcx_coded_slot_t *slot;
    size_t            off, len;
    int               pos, r, me = car->base.comm->rank;

    gcx_car_block(car, c, &off, &len);
    if (ch->ostate == GCX_CAR_COLLECT) {
        /* the publish slot, taken once for the round (off the in-flight
         * list until both fan-outs are posted and the rank has its bits:
         * gcx_car_settle; gcx_car_release frees it if the round fails
         * first) */
        if (ch->pub == NULL) {
            slot = gcx_coded_slot_get(&car->base);
            if (slot == NULL) {
                op->super.status = GCX_ERR_NOMEM;
                return;
            }
            slot->round = op->round;
            slot->nreqs = car->base.comm->size;
            for (r = 0; r < slot->nreqs; ++r) {
                slot->reqs[r].status = GCX_OK;
            }
            ch->pub = slot;
        }
        slot = ch->pub;
        if (!gcx_car_owner_bits(car, op, c, slot->block->data)) {
            if (op->super.status != GCX_INPROGRESS ||
                gcx_car_decodable_still(car, op, c, 1)) {
                return; /* wait for more */
            }
            if (!car->base.lost_rounds ||
                !gcx_car_decodable_still(car, op, c, 0)) {
                gcx_error("coded allreduce round %llu: chunk %d can no "
                          "longer be decoded (workers lost 0x%llx, "
                          "abstained 0x%llx)",
                          (unsigned long long)op->round, c,
                          (unsigned long long)car->base.gone,
                          (unsigned long long)ch->abstained);
                op->super.status = GCX_ERR_UNDECODABLE;
                return;
            }
            /* only abstentions stand in the way: the outcome of the
             * chunk, agreed as bits would be, is "round lost" */
            ch->lost = 1;
            ch->used = 0;
        }
        ch->acks_wanted = 0;
        for (pos = gcx_car_pos(car, c, me) + 1; pos < car->line; ++pos) {
            r = gcx_car_owner(car, c, pos);
            if (!tl->ops->peer_failed(tl, r)) {
                ch->acks_wanted |= 1ull << r;
            }
        }
        gcx_car_publish_to(car, op->round, c, ch->used, ch->lost, slot,
                           gcx_car_others(car));
        ch->ostate = GCX_CAR_ACKS;
    }
    if (ch->ostate == GCX_CAR_ACKS) {
        for (r = 0; r < car->base.comm->size; ++r) {
            if ((ch->acks_wanted & (1ull << r)) && tl->ops->peer_failed(tl, r)) {
                ch->acks_wanted &= ~(1ull << r);
            }
        }
        if ((ch->acks_got & ch->acks_wanted) != ch->acks_wanted) {
            return;
        }
        if (gcx_car_send_ctl(car, GCX_CAR_COMMIT, op->round, c,
                             gcx_car_others(car)) != GCX_OK) {
            op->super.status = GCX_ERR_NOMEM;
            return;
        }
        op->used_union |= ch->used;
        ch->ostate      = GCX_CAR_DONE;
        ch->final       = 1;
        gcx_car_settle(car, op, c);
    }
}

/* Receiver of chunk c from its owner a: final once a's copy landed and
 * a's COMMIT came. */
static void gcx_car_receive(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                            int c)
{
    gcx_car_chunk_t  *ch = &op->ch[c];
    gcx_coded_slot_t *copy;
    int               pos, apos, mypos, me = car->base.comm->rank;

    /* acknowledge every landed copy from an earlier owner of the line */
    mypos = gcx_car_pos(car, c, me);
    for (pos = 0; mypos > 0 && pos < mypos; ++pos) {
        copy = ch->copy[pos];
        if (copy != NULL && copy->reqs[0].status == GCX_OK &&
            !(ch->acked & (1ull << pos))) {
            ch->acked |= 1ull << pos;
            (void)gcx_car_send_ctl(car, GCX_CAR_ACK, op->round, c,
                             1ull << gcx_car_owner(car, c, pos));
        }
    }
    apos = gcx_car_pos(car, c, op->acting[c]);
    copy = ch->copy[apos];
    if (copy == NULL || copy->reqs[0].status == GCX_INPROGRESS) {
        return;
    }
    if (copy->reqs[0].status != GCX_OK) {
        /* its sender was lost mid-payload: a later owner takes over */
        gcx_car_drop(car, copy);
        ch->copy[apos] = NULL;
        return;
    }
    if (!(ch->committed & (1ull << apos))) {
        return;
    }
    op->used_union |= copy->hdr.used;
    ch->final = 1;
    ch->lost  = copy->hdr.kind == GCX_CAR_LOST;
    ch->keep  = mypos > apos ? apos + 1 : 0;
    ch->from  = apos + 1;
    gcx_car_settle(car, op, c);
}

/* Free the round's slots; a transfer still in flight is handed to the
 * transport with its block. */
static void gcx_car_release(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t **pp = &car->base.stash, *slot;
    gcx_car_chunk_t   *ch;
    gcx_car_kept_t    *kept;
    int                c, i;

    for (c = 0; c < car->base.n; ++c) {
        ch = &op->ch[c];
        if (ch->keep && op->super.status == GCX_OK) {
            i    = ch->keep - 1; /* its owner may have been lost since */
            kept = gcx_car_kept(car, c, op->round);
            if (kept->slot != NULL) {
                gcx_coded_slot_put(&car->base, kept->slot);
            }
            kept->slot   = ch->copy[i];
            kept->served = 0;
            ch->copy[i]  = NULL;
        }
        for (i = 0; i < GCX_CAR_MAX; ++i) {
            if (ch->in[i] != NULL) {
                gcx_car_drop(car, ch->in[i]);
                ch->in[i] = NULL;
            }
            if (ch->copy[i] != NULL) {
                gcx_car_drop(car, ch->copy[i]);
                ch->copy[i] = NULL;
            }
        }
        if (ch->pub != NULL) { /* a failed round, half published */
            for (i = 0; i < ch->pub->nreqs; ++i) {
                gcx_coded_slot_abandon_req(&car->base, ch->pub, i);
            }
            gcx_coded_slot_put(&car->base, ch->pub);
            ch->pub = NULL;
        }
    }
    /* staged messages of this round nobody took (chunks for an owner that
     * was not lost after all, duplicates) */
    while ((slot = *pp) != NULL) {
        if (slot->round <= op->round) {
            *pp = slot->next;
            gcx_car_drop(car, slot);
        } else {
            pp = &slot->next;
        }
    }
}

static void gcx_car_done(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_result_t *res = op->result;
    int                 c, w, skipped, lost = 0, me = car->base.comm->rank;

    /* lost_rounds: the decoded chunks go to recvbuf now, unless a chunk's
     * agreed outcome is "lost" (every rank sees the same outcomes): then
     * recvbuf stays as it was and the decoded chunks' slots go */
    for (c = 0; c < car->base.n; ++c) {
        lost |= op->ch[c].lost;
    }
    op->whole = !lost;
    for (c = 0; c < car->base.n; ++c) {
        if (!lost) {
            gcx_car_settle(car, op, c);
        } else if (op->ch[c].pub != NULL) {
            gcx_car_pub_release(car, &op->ch[c]);
        }
    }

    /* skipped: this rank's vector went into no decode and it said no
     * abstention (no chunk or VOID sent, its own not taken by a chunk it
     * acts for): every chunk was final first */
    skipped = op->nsent == 0 && op->nvoid == 0;
    for (c = 0; c < car->base.n; ++c) {
        if (op->ch[c].taken & (1ull << me)) {
            skipped = 0;
        }
    }

    if (res != NULL) {
        memset(res, 0, sizeof(*res));
        res->round      = op->round;
        res->arrived    = op->ch[me].arrived;
        res->abstained  = op->ch[me].abstained;
        res->used       = lost ? 0 : op->used_union;
        res->round_time = gcx_time_now() - op->t_start;
        for (w = 0; w < GCX_CODE_MAX_WORKERS; ++w) {
            res->arrival[w] = NAN;
        }
        res->skipped = skipped;
        res->lost    = lost;
    }
    car->base.stats.skipped += (uint64_t)skipped;
    car->base.stats.abstained += (uint64_t)(op->abstain && !skipped);
    car->base.stats.rounds_lost += (uint64_t)lost;
    ++car->base.stats.rounds;
    op->super.status = GCX_OK;
    gcx_car_release(car, op);
    car->next_open   = op->round + 1;
    car->rounds      = op->next; /* the lowest round */
}

/*
 * A later owner of chunk c's line finishes a round with the copy its owner
 * committed; if that owner then dies while sending the copy to the ranks
 * outside the line, some of them still wait for chunk c of that round, and
 * now take this rank for its owner. So the copy is kept for `window`
 * rounds (a rank can be at most that many rounds behind a live peer: the
 * peer's next round needs every live owner's chunk, which a rank serves
 * only that far ahead of its call, gcx_car_ahead), and sent again to every
 * other rank once its owner is lost: a rank that has it drops it (finished
 * round), one that waits takes it -- the same bits as everyone else's.
 */
/* Send @p kept (chunk c of a finished round) again, with its COMMIT, to
 * every other live rank but the earlier owners of the line. */
static gcx_status_t gcx_car_resend_kept(gcx_coded_allreduce_t *car, int c,
                                        const gcx_coded_slot_t *kept)
{
    gcx_coded_slot_t *slot;
    size_t            off, len;
    uint64_t          peers = gcx_car_others(car);
    int               pos, mypos = gcx_car_pos(car, c, car->base.comm->rank);

    slot = gcx_car_out_slot(car, kept->round, 1);
    if (slot == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_car_block(car, c, &off, &len);
    if (kept->hdr.kind != GCX_CAR_LOST) {
        gcx_car_copy(slot->block->data, gcx_coded_slot_data(kept), len);
    }
    for (pos = 0; pos < mypos; ++pos) {
        peers &= ~(1ull << gcx_car_owner(car, c, pos));
    }
    gcx_car_publish_to(car, kept->round, c, kept->hdr.used,
                       kept->hdr.kind == GCX_CAR_LOST, slot, peers);
    return gcx_car_send_ctl(car, GCX_CAR_COMMIT, kept->round, c, peers);
}

/* The kept copies of the chunks this rank acts for now (@p acting: their
 * owner is lost), each sent again once, those of the `window` rounds below
 * @p round. Every kept round is below next_open, so the lowest round in
 * progress sees all the window holds; with no round in progress (between
 * calls, or after the last one: gcx_car_ahead) next_open does. */
static gcx_status_t gcx_car_serve_kept(gcx_coded_allreduce_t *car,
                                       const int *acting, uint64_t round)
{
    gcx_car_kept_t *kept;
    int             c, k, pos, me = car->base.comm->rank;

    for (c = 0; c < car->base.n; ++c) {
        pos = gcx_car_pos(car, c, me);
        if (acting[c] != me || pos < 1) {
            continue; /* not acting, or its own chunk: nothing kept */
        }
        kept = gcx_car_kept_row(car, pos);
        for (k = 0; k < car->base.window; ++k, ++kept) {
            if (kept->slot == NULL || kept->served ||
                kept->slot->round >= round ||
                kept->slot->round + (uint64_t)car->base.window < round) {
                continue;
            }
            kept->served = 1;
            if (gcx_car_resend_kept(car, c, kept->slot) != GCX_OK) {
                return GCX_ERR_NOMEM;
            }
        }
    }
    return GCX_OK;
}

static void gcx_car_progress(gcx_task_t *task)
{
    gcx_car_op_t          *op  = (gcx_car_op_t *)task;
    gcx_coded_allreduce_t *car = op->car;
    int                    c, nfinal = 0, me = car->base.comm->rank;

    if (task->status != GCX_INPROGRESS) {
        return;
    }
    gcx_coded_reclaim(&car->base);
    gcx_car_acting(car, op->acting);
    for (c = 0; c < car->base.n; ++c) {
        if (op->acting[c] < 0 && !op->entered) {
            return; /* the round fails once the rank enters it */
        }
        if (op->acting[c] < 0) {
            gcx_error("coded allreduce round %llu: every owner of chunk %d "
                      "(ranks %d..%d) is lost",
                      (unsigned long long)op->round, c, c,
                      gcx_car_owner(car, c, car->line - 1));
            task->status = GCX_ERR_PEER;
            return;
        }
    }
    gcx_car_unstash(car, op);
    if (op == car->rounds &&
        gcx_car_serve_kept(car, op->acting, op->round) != GCX_OK) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    if (op->entered && !op->sending && gcx_time_now() >= op->t_send) {
        op->sending = 1;
    }
    if (op->sending) {
        gcx_car_contribute(car, op);
    }
    for (c = 0; c < car->base.n && task->status == GCX_INPROGRESS; ++c) {
        if (!op->ch[c].final) {
            if (op->acting[c] == me) {
                gcx_car_own(car, op, c);
            } else {
                gcx_car_receive(car, op, c);
            }
        }
        nfinal += op->ch[c].final;
    }
    if (task->status == GCX_INPROGRESS && nfinal == car->base.n &&
        op->entered) {
        gcx_car_done(car, op);
    } else if (task->status == GCX_INPROGRESS && nfinal < car->base.n) {
        gcx_context_waiting(car->base.comm->ctx); /* served ahead, too */
    }
}

/*
 * Serving rounds ahead of the call. A rank that has not entered round r
 * yet (still computing its gradient) owns its chunks of round r all the
 * same, and the other ranks wait for them. So whenever this process
 * progresses (any gcx call, gcx_progress from a framework's progress
 * thread: a progress callback of the context), a round r of the window
 * next_open .. next_open + window - 1 (gcx_car_window) whose messages are
 * here gets its state without the rank's vector (entered 0): the owner
 * part decodes its chunks from the other workers' chunks and publishes
 * them, the rank's own chunk being one more straggler's; a later owner
 * acknowledges the copies it holds; the decoded chunks of the others wait
 * in their slots. The rank's call then takes that state over (gcx_car_post):
 * its chunks still go to the owners that have not decoded yet, and the
 * round completes with the chunks already there -- or, every chunk there
 * (gcx_coded_allreduce_ready), the rank need not compute its vector at all
 * and abstains. The others can thus be `window` rounds in front of a rank
 * that computes slowly; one round further they need a chunk it does not
 * serve yet, which bounds how far behind a rank can be (the rule
 * gcx_car_serve_kept relies on). Cost: a walk of the stash per progress
 * call between rounds (a few entries) and, with no round here at all, a
 * look at the P peers' connections and at the chunks it acts for (kept
 * copies to send again when an owner is lost); on a rank behind, up to
 * `window` round states, each holding the chunks taken for its decode and
 * the decoded chunks received (about two vectors, in the transport's
 * buffers when held in place) and the chunk it published (a block of its
 * own: its sends may outlive the round). Received messages held in place
 * and header-only ones (COMMIT, ACK, VOID, LOST) need no block of ours
 * (gcx_car_pull; but a pooled slot taken for one keeps the block it had,
 * so the pool's blocks grow towards one per message held at once: see
 * gcx_coded_stats_t.buffer_bytes); a header-only fan-out is one slot whose
 * block holds the header alone (gcx_car_send_ctl).
 */
/* A fresh round state: no chunk sent yet; linked into car->rounds in
 * round order. */
static void gcx_car_link(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_car_op_t **pp;
    int            c;

    for (c = 0; c < car->base.n; ++c) {
        op->ch[c].sent_to = -1;
    }
    for (pp = &car->rounds; *pp != NULL && (*pp)->round < op->round;
         pp = &(*pp)->next) {
    }
    op->next = *pp;
    *pp      = op;
}

static gcx_car_op_t *gcx_car_ahead_make(gcx_coded_allreduce_t *car,
                                        uint64_t round)
{
    gcx_car_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        return NULL; /* served once the rank enters */
    }
    op->super.status = GCX_INPROGRESS;
    op->car          = car;
    op->round        = round;
    gcx_car_link(car, op);
    return op;
}

static int gcx_car_ahead(void *arg)
{
    gcx_coded_allreduce_t *car = arg;
    gcx_coded_slot_t      *slot;
    gcx_car_op_t          *op, *next;
    uint64_t               end = car->next_open + (uint64_t)car->base.window;
    int                    made = 0;

    if (car->base.comm->error != GCX_OK) {
        return 0;
    }
    for (slot = car->base.stash; slot != NULL; slot = slot->next) {
        if (slot->round >= car->next_open && slot->round < end &&
            gcx_car_find(car, slot->round) == NULL) {
            if (gcx_car_ahead_make(car, slot->round) == NULL) {
                break;
            }
            made = 1;
        }
    }
    for (op = car->rounds; op != NULL; op = next) {
        next = op->next; /* a round served ahead never completes here */
        if (!op->entered) {
            gcx_car_progress(&op->super);
        }
    }
    if (car->rounds == NULL) {
        /* no round here: the kept copies a lost owner's chunks need are
         * sent from here, or a rank still in the last round the others
         * ran would wait for one until GCX_TIMEOUT (nothing else runs
         * gcx_car_serve_kept once this rank has stopped calling) */
        int acting[GCX_CAR_MAX];

        gcx_car_acting(car, acting);
        (void)gcx_car_serve_kept(car, acting, car->next_open);
    }
    return made;
}

/* Unlink @p op from car->rounds. */
static void gcx_car_unlink(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_car_op_t **pp;

    for (pp = &car->rounds; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            return;
        }
    }
}

/* A round served ahead of this rank's call, dropped (the object goes, or a
 * failed round left one below the next call). */
static void gcx_car_ahead_drop(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_car_unlink(car, op);
    gcx_car_release(car, op);
    free(op);
}

static void gcx_car_post(gcx_task_t *task)
{
    gcx_car_op_t          *op  = (gcx_car_op_t *)task;
    gcx_coded_allreduce_t *car = op->car;
    gcx_car_op_t          *ahead;
    double                 delay_ms;
    int                    c;

    while (car->rounds != NULL && car->rounds->round < op->round &&
           !car->rounds->entered) {
        gcx_car_ahead_drop(car, car->rounds);
    }
    ahead = car->rounds;
    if (ahead != NULL && ahead->round == op->round && !ahead->entered) {
        /* served ahead of this call: take its state over */
        memcpy(op->acting, ahead->acting, sizeof(op->acting));
        memcpy(op->ch, ahead->ch, sizeof(op->ch));
        op->used_union = ahead->used_union;
        if (ahead->super.status != GCX_INPROGRESS) {
            op->super.status = ahead->super.status;
        }
        op->next    = ahead->next;
        car->rounds = op;
        free(ahead);
    } else {
        gcx_car_link(car, op);
    }
    op->entered = 1;
    for (c = 0; c < car->base.n; ++c) {
        gcx_car_settle(car, op, c);
    }
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

    if (car != NULL && task->status != GCX_OK) {
        gcx_car_unlink(car, op);
        gcx_car_release(car, op);
        if (car->next_open <= op->round) {
            car->next_open = op->round + 1; /* its late messages drop */
        }
    }
    free(op);
}

/* After GCX_TIMEOUT: what the round waits for here -- a line for the round,
 * one per chunk not final (at most n), one for the rounds served ahead and
 * the staged messages. Bits are ranks, except a receiver's copies and
 * COMMITs (line positions of the chunk's owners). */
static void gcx_car_describe(const gcx_task_t *task)
{
    static const char *const states[] = {"collecting", "waiting for ACKs",
                                         "done"};
    const gcx_car_op_t          *op  = (const gcx_car_op_t *)task;
    const gcx_coded_allreduce_t *car = op->car;
    const gcx_car_chunk_t       *ch;
    const gcx_car_op_t          *r;
    const gcx_coded_slot_t      *slot;
    unsigned long long           landed, flying;
    int                          c, w, ahead = 0, staged = 0, me;

    if (car == NULL) {
        return; /* the object was destroyed under it */
    }
    me = car->base.comm->rank;
    gcx_error("coded allreduce round %llu: %s, %d chunk(s) and %d VOID(s) "
              "sent; ranks gone 0x%llx",
              (unsigned long long)op->round,
              op->sending ? "sending" : "not sending yet (straggler delay)",
              op->nsent, op->nvoid, (unsigned long long)car->base.gone);
    for (c = 0; c < car->base.n; ++c) {
        ch = &op->ch[c];
        if (ch->final) {
            continue;
        }
        if (op->acting[c] == me) {
            landed = gcx_car_landed_bits(car, ch);
            gcx_error("  chunk %d: owned here, %s: arrived 0x%llx, landed "
                      "0x%llx, abstained 0x%llx, ACKs wanted 0x%llx got "
                      "0x%llx",
                      c, states[ch->ostate], (unsigned long long)ch->arrived,
                      landed, (unsigned long long)ch->abstained,
                      (unsigned long long)ch->acks_wanted,
                      (unsigned long long)ch->acks_got);
            continue;
        }
        landed = flying = 0;
        for (w = 0; w < car->line; ++w) {
            if (ch->copy[w] != NULL) {
                if (ch->copy[w]->reqs[0].status == GCX_OK) {
                    landed |= 1ull << w;
                } else if (ch->copy[w]->reqs[0].status == GCX_INPROGRESS) {
                    flying |= 1ull << w;
                }
            }
        }
        gcx_error("  chunk %d: owner rank %d (this rank's chunk sent to %d): "
                  "decoded copies landed 0x%llx, in flight 0x%llx, COMMITs "
                  "0x%llx",
                  c, op->acting[c], ch->sent_to, landed, flying,
                  (unsigned long long)ch->committed);
    }
    for (r = car->rounds; r != NULL; r = r->next) {
        ahead += !r->entered;
    }
    for (slot = car->base.stash; slot != NULL; slot = slot->next) {
        ++staged;
    }
    gcx_error("  %d round(s) served ahead, %d message(s) staged; next round "
              "to finish here %llu",
              ahead, staged, (unsigned long long)car->next_open);
}

static const gcx_task_ops_t gcx_car_ops = {
    .name     = "coded_allreduce",
    .post     = gcx_car_post,
    .progress = gcx_car_progress,
    .finalize = gcx_car_finalize,
    .describe = gcx_car_describe,
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
        car_p == NULL || params->root_not_worker) {
        gcx_error("gcx_coded_allreduce_create: invalid arguments (every rank "
                  "is a worker; root_not_worker is not supported)");
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
    car->line            = car->base.s + 1 < comm->size ? car->base.s + 1 :
                                                          comm->size;
    car->base.my_worker  = comm->rank;
    car->base.instance   = comm->seq;
    car->in_place        = comm->config.coded_in_place;
    car->base.lost_rounds = params->lost_rounds ? 1 : 0; /* checked */
    car->base.window     = gcx_car_window(&comm->config, params->count);
    car->kept = calloc(gcx_car_kept_len(car) + 1, sizeof(*car->kept));
    if (car->kept == NULL) {
        status = GCX_ERR_NOMEM;
        goto err_free;
    }
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
    gcx_context_progress_register(comm->ctx, &car->ahead_cb, gcx_car_ahead,
                                  car);
    *car_p = car;
    return GCX_OK;

err_unregister:
    tl->ops->am_handler(tl, car->base.am_id, NULL, NULL);
err_free:
    free(car->kept);
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
    size_t    k;

    if (car == NULL) {
        return;
    }
    gcx_context_lock();
    tl = car->base.comm->tl;
    gcx_context_progress_unregister(car->base.comm->ctx, &car->ahead_cb);
    while (car->rounds != NULL) {
        gcx_car_op_t *op = car->rounds;

        if (op->entered) {
            gcx_warn("coded allreduce destroyed with a round in flight");
            car->rounds = op->next;
            op->car     = NULL;
        } else {
            gcx_car_ahead_drop(car, op);
        }
    }
    if (car->base.comm->error == GCX_OK) {
        tl->ops->progress(tl);
        gcx_coded_reclaim(&car->base);
    }
    tl->ops->am_handler(tl, car->base.am_id, NULL, NULL);
    for (k = 0; k < gcx_car_kept_len(car); ++k) {
        if (car->kept[k].slot != NULL) {
            gcx_coded_slot_put(&car->base, car->kept[k].slot);
        }
    }
    gcx_coded_slots_release(&car->base);
    free(car->kept);
    free(car);
    gcx_context_unlock();
}

static gcx_status_t gcx_car_submit(gcx_coded_allreduce_t *car,
                                   const float *sendbuf, float *recvbuf,
                                   int abstain, gcx_coded_result_t *result,
                                   gcx_request_t **req_p)
{
    gcx_car_op_t *op;

    if (car->base.lost_rounds && result == NULL) {
        gcx_error("gcx_coded_allreduce%s: the object was created with "
                  "lost_rounds: pass a result, it says whether the round "
                  "was lost", abstain ? "_abstain" : "");
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
    op->abstain = abstain;
    op->result  = result;
    return gcx_task_submit(&op->super, req_p);
}

gcx_status_t gcx_coded_allreduce(gcx_coded_allreduce_t *car,
                                 const float *sendbuf, float *recvbuf,
                                 gcx_coded_result_t *result,
                                 gcx_request_t **req_p)
{
    size_t count = car != NULL ? car->base.count : 0;

    if (car == NULL ||
        (count > 0 && (sendbuf == NULL || recvbuf == NULL ||
                       (sendbuf < recvbuf + count &&
                        recvbuf < sendbuf + count)))) {
        gcx_error("gcx_coded_allreduce: invalid arguments (buffers %p -> %p; "
                  "they must not overlap)",
                  (const void *)sendbuf, (void *)recvbuf);
        return GCX_ERR_INVALID;
    }
    return gcx_car_submit(car, sendbuf, recvbuf, 0, result, req_p);
}

gcx_status_t gcx_coded_allreduce_abstain(gcx_coded_allreduce_t *car,
                                         float *recvbuf,
                                         gcx_coded_result_t *result,
                                         gcx_request_t **req_p)
{
    if (car == NULL || (car->base.count > 0 && recvbuf == NULL)) {
        gcx_error("gcx_coded_allreduce_abstain: invalid arguments (recvbuf "
                  "%p)", (void *)recvbuf);
        return GCX_ERR_INVALID;
    }
    return gcx_car_submit(car, NULL, recvbuf, 1, result, req_p);
}

gcx_status_t gcx_coded_allreduce_ready(gcx_coded_allreduce_t *car,
                                       int *ready_p)
{
    gcx_car_op_t *op;
    gcx_status_t  status;
    int           c;

    if (car == NULL || ready_p == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    *ready_p = 0;
    status   = car->base.comm->error;
    if (status == GCX_OK) {
        gcx_context_progress(car->base.comm->ctx); /* serves ahead */
        op = gcx_car_find(car, car->next_round);
        if (op != NULL && !op->entered &&
            op->super.status == GCX_INPROGRESS) {
            for (c = 0; c < car->base.n && op->ch[c].final; ++c) {
            }
            *ready_p = c == car->base.n;
        }
    }
    gcx_context_unlock();
    return status;
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
