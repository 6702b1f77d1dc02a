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
 *
 * Files: this one holds the window, the round task (progress, post,
 * finalize) and the API; masterless_int.h lists the others, one concern
 * each.
 */
#include "masterless_int.h"
#include "base/log.h"
#include "base/time.h"

#include <stdlib.h>
#include <string.h>

/*
 * The window: rounds a rank serves ahead of its call. GCX_CODED_AHEAD when
 * set; 0 (auto) takes as many rounds as GCX_CODED_AHEAD_BYTES of the vector
 * hold, GCX_CAR_AHEAD_MIN to GCX_CAR_AHEAD_MAX: the window's price is paid
 * in vectors (a rank that far behind holds about two per round, every rank
 * s/P of one per round in kept copies), its benefit counted in rounds (per
 * stall of a slow rank, the others run `window` rounds), so a small vector
 * gets many rounds for the memory one large vector's few take.
 */
int gcx_car_window(const struct gcx_config *config, size_t count)
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

/*
 * A round's state, sized by n, in one allocation: the acting owners and
 * the receiver part of every chunk (its copies by line position), the
 * used set, and the owner part of the line chunks this rank may act for
 * (c = rank - pos, pos < line): per round 4n + (32 + 8 line) n bytes plus
 * line (4 n/8 + 8 n) bytes -- about 56 KB at n = 1024, s = 1. Every chunk
 * starts unsent (sent_to -1).
 */
gcx_status_t gcx_car_state_new(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    size_t         n = (size_t)car->base.n, line = (size_t)car->line;
    size_t         words = car->base.words, k;
    gcx_car_own_t *own;
    uint64_t      *sets;
    char          *mem;
    int            c, pos, me = car->base.comm->rank;

    /* pointers and words first, then the ints: every part stays aligned */
    mem = calloc(1, n * sizeof(gcx_car_chunk_t) +
                        line * sizeof(gcx_car_own_t) +
                        (n * line + line * n) * sizeof(void *) +
                        (1 + 4 * line) * words * sizeof(uint64_t) +
                        n * sizeof(int));
    if (mem == NULL) {
        gcx_error("coded allreduce round %llu: out of memory for the "
                  "round's state (%zu chunks)",
                  (unsigned long long)op->round, n);
        return GCX_ERR_NOMEM;
    }
    op->state = mem;
    op->ch    = (gcx_car_chunk_t *)(void *)mem;
    own       = (gcx_car_own_t *)(void *)(op->ch + n);
    for (c = 0; c < (int)n; ++c) {
        op->ch[c].sent_to = -1;
        op->ch[c].copy    = (gcx_coded_slot_t **)(void *)(own + line) +
                            (size_t)c * line;
    }
    sets = (uint64_t *)(void *)((gcx_coded_slot_t **)(void *)(own + line) +
                                n * line + line * n);
    op->used_union = sets;
    sets          += words;
    for (k = 0; k < line; ++k) {
        own[k].in        = (gcx_coded_slot_t **)(void *)(own + line) +
                           n * line + k * n;
        own[k].arrived   = sets;
        own[k].taken     = sets + words;
        own[k].used      = sets + 2 * words;
        own[k].abstained = sets + 3 * words;
        sets            += 4 * words;
        pos              = (int)k;
        op->ch[gcx_coll_mod(me - pos, (int)n)].own = &own[k];
    }
    op->acting = (int *)(void *)sets;
    return GCX_OK;
}

static void gcx_car_state_free(gcx_car_op_t *op)
{
    free(op->state);
    op->state = NULL;
    op->ch    = NULL;
}

void gcx_car_progress(gcx_task_t *task)
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

void gcx_car_post(gcx_task_t *task)
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
        op->state      = ahead->state;
        op->ch         = ahead->ch;
        op->acting     = ahead->acting;
        op->used_union = ahead->used_union;
        if (ahead->super.status != GCX_INPROGRESS) {
            op->super.status = ahead->super.status;
        }
        op->next    = ahead->next;
        car->rounds = op;
        free(ahead);
    } else if (gcx_car_state_new(car, op) != GCX_OK) {
        op->super.status = GCX_ERR_NOMEM;
        return;
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
    gcx_car_state_free(op);
    free(op);
}

static const gcx_task_ops_t gcx_car_ops = {
    .name     = "coded_allreduce",
    .post     = gcx_car_post,
    .progress = gcx_car_progress,
    .finalize = gcx_car_finalize,
    .describe = gcx_car_describe,
};

static void gcx_car_scratch_free(gcx_coded_allreduce_t *car)
{
    free(car->kept);
    free(car->scratch);
    free(car->coeffs);
    free(car->vecs);
    free(car->acting);
}

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
    if (comm->size > GCX_CODED_MAX_WORKERS) {
        gcx_error("gcx_coded_allreduce_create: %d workers: a DECODED "
                  "message's header carries a set of them, and the "
                  "transport bounds a header near 8 KB: at most %d "
                  "(GCX_CODED_MAX_WORKERS)",
                  comm->size, GCX_CODED_MAX_WORKERS);
        return GCX_ERR_UNSUPPORTED;
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
    car->base.hdr_tail   = GCX_WSET_WORDS(comm->size) * sizeof(uint64_t);
    car->scratch = calloc(GCX_WSET_WORDS(comm->size), sizeof(uint64_t));
    car->coeffs  = calloc((size_t)comm->size, sizeof(double));
    car->vecs    = calloc((size_t)comm->size, sizeof(*car->vecs));
    car->acting  = calloc((size_t)comm->size, sizeof(int));
    if (car->scratch == NULL || car->coeffs == NULL || car->vecs == NULL ||
        car->acting == NULL) {
        status = GCX_ERR_NOMEM;
        goto err_free;
    }
    status = gcx_coded_sets_init(&car->base);
    if (status == GCX_OK) {
        status = gcx_coded_straggler_init(&car->base);
    }
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
    /* after the agreement: every rank has the same code, so every rank
     * refuses it alike (a rank refusing alone would leave the others in
     * the agreement until GCX_TIMEOUT) */
    if (car->line > GCX_CAR_LINE_MAX) {
        gcx_error("gcx_coded_allreduce_create: a code for %d stragglers: "
                  "the master-less coded allreduce keeps a chunk's owners "
                  "(s + 1) as bits of one word, at most %d (use the star, "
                  "GCX_CODED_ALGO=star)",
                  car->base.s, GCX_CAR_LINE_MAX);
        status = GCX_ERR_UNSUPPORTED;
        goto err_unregister;
    }
    car->kept = calloc(gcx_car_kept_len(car) + 1, sizeof(*car->kept));
    if (car->kept == NULL) {
        status = GCX_ERR_NOMEM; /* local: the others' first round times
                                   out, as for any allocation failure */
        goto err_unregister;
    }
    gcx_context_progress_register(comm->ctx, &car->ahead_cb, gcx_car_ahead,
                                  car);
    *car_p = car;
    return GCX_OK;

err_unregister:
    tl->ops->am_handler(tl, car->base.am_id, NULL, NULL);
err_free:
    gcx_coded_sets_free(&car->base);
    gcx_car_scratch_free(car);
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
    gcx_coded_sets_free(&car->base);
    gcx_car_scratch_free(car);
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
    gcx_coded_stats_write(&car->base.stats, car->base.gone, car->base.n,
                          stats_p);
    return GCX_OK;
}

/* ---- the master-less row of the coded object's dispatch (coded.c) -------- */

static gcx_status_t gcx_car_algo_create(gcx_coded_t *coded,
                                        const gcx_coded_params_t *params)
{
    return gcx_coded_allreduce_create(coded->comm, params, &coded->car);
}

static void gcx_car_algo_destroy(gcx_coded_t *coded)
{
    gcx_coded_allreduce_destroy(coded->car);
}

static gcx_status_t gcx_car_algo_submit(gcx_coded_t *coded,
                                        const float *sendbuf, float *recvbuf,
                                        int abstain,
                                        gcx_coded_result_t *result,
                                        gcx_request_t **req_p)
{
    if (abstain) {
        return gcx_coded_allreduce_abstain(coded->car, recvbuf, result,
                                           req_p);
    }
    return gcx_coded_allreduce(coded->car, sendbuf, recvbuf, result, req_p);
}

static gcx_status_t gcx_car_algo_ready(gcx_coded_t *coded, int *ready_p)
{
    return gcx_coded_allreduce_ready(coded->car, ready_p);
}

static gcx_status_t gcx_car_algo_stats(const gcx_coded_t *coded,
                                       gcx_coded_stats_t *stats_p)
{
    return gcx_coded_allreduce_stats(coded->car, stats_p);
}

const gcx_coded_impl_t gcx_coded_impl_masterless = {
    .name    = "master-less",
    .create  = gcx_car_algo_create,
    .destroy = gcx_car_algo_destroy,
    .submit  = gcx_car_algo_submit,
    .ready   = gcx_car_algo_ready,
    .stats   = gcx_car_algo_stats,
};
