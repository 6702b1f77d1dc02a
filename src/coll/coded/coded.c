/*
 * coded.c - coded gradient gathering with early completion: the
 * object, the active-message dispatch and the API.
 *
 * Idea. Every worker sends one coded vector per round to the root; the
 * root finishes the round as soon as the arrived set is decodable (the
 * code's predicate), decodes the sum (streaming where coefficients are
 * known on arrival: FR, uncoded, weighted; all at once for CR), and sends
 * the decoded sum to every rank. Cost per round: each worker sends count
 * floats once; the root receives at most the messages it needs (a message
 * that is not needed is dropped before its payload moves), does one
 * multiply-add pass per used message, one memcpy, and sends count floats
 * to each of the P-1 other ranks. Non-root ranks do one memcpy of their
 * contribution (see below).
 *
 * Rounds and late messages. Rounds are numbered by call order (the same on
 * every rank) and every message is an active message whose header carries
 * (comm id, object instance, round, sender). The AM handler looks at the
 * header before any payload moves:
 * - root, round not finished and entered: taken or dropped as star_root.c
 *   says (pulled straight into recvbuf where possible);
 * - root, round not entered yet (the root is behind): pulled into an
 *   internal block and used when the root enters it;
 * - root, round finished: dropped -- the handler returns without pulling,
 *   UCX completes the sender, and nothing lands anywhere. Since a round
 *   number is never reused, a late message cannot reach a later round.
 * - other ranks: the decoded sum of the round being waited for is pulled
 *   into recvbuf; one of a later round (this rank is behind) into a block.
 * A different instance (an object destroyed and re-created on the same AM
 * id) or communicator id is dropped.
 *
 * Rounds and the FIFO. A round is one task in the communicator's FIFO, on
 * every rank, like any collective, but no task ever waits for a straggler:
 * - the root's task waits for a decodable set, not for everyone, and does
 *   not wait for its result sends (they live in result slots that outlast
 *   the round);
 * - a worker's task waits only for the root's decoded sum; its own send
 *   lives in an internal block and outlasts the round;
 * - a straggler entering a round that is already decoded finds the sum
 *   waiting and completes at once without sending, so it catches up.
 * Messages arrive through the handler whatever task heads the FIFO. The
 * root's result slots are what a slow rank costs: at most
 * GCX_CODED_MAX_LAG per rank; a rank holding that many holds the root's
 * next round back until it takes one (star_root.c, flow control). There
 * is no per-round argument check (it would be an exchange with every rank,
 * i.e. wait for the straggler); arguments are agreed once, at creation.
 * The existing tree broadcast is not reused for the decoded sum for the
 * same reason: any relaying rank may be the straggler; the root sends to
 * every rank directly.
 *
 * Abstention (gcx_coded_abstain()): the worker takes part in the round as
 * with a contribution, but its message is a header-only VOID: the root
 * records the worker as abstained (never arrived or used) and stops
 * waiting for it. Cost: one header per abstention, no payload. VOID
 * messages go through the same round rules (dropped when finished, staged
 * when early).
 *
 * Dead workers: a lost connection, or GCX_CODED_MAX_LAG results not taken
 * within GCX_TIMEOUT, make a worker gone; rounds go on while the rest can decode; otherwise the root
 * fails the round with GCX_ERR_UNDECODABLE and tells every reachable rank
 * (ERROR message); the others time out (GCX_TIMEOUT). The same check with
 * the abstained workers taken out makes a round that only abstentions
 * leave undecodable fail at once.
 */
#include "coded_int.h"
#include "base/time.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int gcx_coded_masterless(const gcx_coded_t *coded)
{
    return coded != NULL && coded->car != NULL;
}

int gcx_coded_worker(const gcx_coded_t *coded, int rank)
{
    if (!coded->root_not_worker) {
        return rank;
    }
    if (rank == coded->root) {
        return -1;
    }
    return rank > coded->root ? rank - 1 : rank;
}

void gcx_coded_fill_result(const gcx_coded_t *coded, const gcx_coded_hdr_t *hdr,
                           int skipped, gcx_coded_result_t *result)
{
    int w;

    if (result == NULL) {
        return;
    }
    result->round      = hdr->round;
    result->arrived    = hdr->arrived;
    result->used       = hdr->used;
    result->abstained  = hdr->abstained;
    result->round_time = hdr->round_time;
    for (w = 0; w < GCX_CODE_MAX_WORKERS; ++w) {
        result->arrival[w] = w < coded->n ? hdr->arrival[w] : NAN;
    }
    result->skipped = skipped;
    result->lost    = hdr->kind == GCX_CODED_LOST;
}

gcx_status_t gcx_coded_hdr_parse(const void *bytes, size_t len,
                                 gcx_coded_hdr_t *hdr)
{
    if (len < offsetof(gcx_coded_hdr_t, arrival) || len > sizeof(*hdr)) {
        return GCX_ERR_INVALID;
    }
    memset(hdr, 0, sizeof(*hdr));
    memcpy(hdr, bytes, len); /* may be unaligned */
    return GCX_OK;
}

static void gcx_coded_am_handler(void *arg, const gcx_tl_am_msg_t *msg)
{
    gcx_coded_t    *coded = arg;
    gcx_coded_hdr_t hdr;

    if (gcx_coded_hdr_parse(msg->header, msg->header_length, &hdr) !=
        GCX_OK) {
        gcx_warn("coded gather: dropping a message with a bad header");
        return;
    }
    if (hdr.comm_id != coded->comm->id || hdr.instance != coded->instance ||
        hdr.sender >= (unsigned)coded->comm->size) {
        return; /* another object's (destroyed) message: drop */
    }
    switch (hdr.kind) {
    case GCX_CODED_CONTRIB:
    case GCX_CODED_VOID:
        if (coded->comm->rank == coded->root) {
            gcx_coded_root_on_contrib(coded, &hdr, msg);
        }
        break;
    case GCX_CODED_RESULT:
    case GCX_CODED_LOST:
        if (coded->comm->rank != coded->root) {
            gcx_coded_rank_on_result(coded, &hdr, msg);
        }
        break;
    case GCX_CODED_ERROR:
        if (coded->error == GCX_OK && hdr.status < 0) {
            coded->error       = (gcx_status_t)hdr.status;
            coded->error_round = hdr.round;
        }
        break;
    default:
        gcx_warn("coded gather: dropping a message of kind %u", hdr.kind);
        break;
    }
}

gcx_status_t gcx_coded_agree(gcx_coded_t *coded, uint32_t coll_id)
{
    gcx_coll_signature_t signature = {0};
    double              *b;
    gcx_task_t          *check;
    gcx_status_t         status;
    uint32_t             fields[6];

    b = malloc((size_t)coded->n * (size_t)coded->n * sizeof(*b));
    if (b == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_code_matrix(coded->code, b);
    fields[0] = (uint32_t)coded->n;
    fields[1] = (uint32_t)coded->s;
    fields[2] = coded->am_id;
    fields[3] = (uint32_t)coded->root_not_worker;
    fields[4] = (uint32_t)coded->lost_rounds;
    fields[5] = (uint32_t)coded->window;
    signature.coll  = coll_id;
    signature.count = coded->count;
    signature.dtype = GCX_DT_F32;
    signature.root  = coded->root;
    signature.extra = gcx_coll_hash(
        gcx_coll_hash(0, fields, sizeof(fields)), b,
        (size_t)coded->n * (size_t)coded->n * sizeof(*b));
    free(b);
    check = gcx_coll_check_create(coded->comm, &signature, NULL);
    if (check == NULL) {
        return GCX_ERR_NOMEM;
    }
    status = gcx_task_submit(check, NULL);
    if (status == GCX_ERR_MISMATCH) {
        gcx_error("coded object: the ranks disagree on the count, the code "
                  "(workers, stragglers, matrix), lost_rounds or the "
                  "master-less window (GCX_CODED_AHEAD, "
                  "GCX_CODED_AHEAD_BYTES); this rank: count %zu, n %d, s %d, "
                  "lost_rounds %d, window %d round(s)",
                  coded->count, coded->n, coded->s, coded->lost_rounds,
                  coded->window);
    }
    return status;
}

/* ---- star or master-less ------------------------------------------------- */

static const gcx_config_value_t gcx_coded_algo_names[] = {
    [GCX_CODED_ALGO_DEFAULT] = {GCX_CODED_ALGO_DEFAULT, "default",
                                "GCX_CODED_ALGO decides (as star)"},
    [GCX_CODED_ALGO_AUTO] = {GCX_CODED_ALGO_AUTO, "auto",
                             "the cheaper of star and masterless by the "
                             "alpha-beta model (GCX_NET_*)"},
    [GCX_CODED_ALGO_STAR] = {GCX_CODED_ALGO_STAR, "star",
                             "one root decodes and sends the sum to every "
                             "rank"},
    [GCX_CODED_ALGO_MASTERLESS] = {GCX_CODED_ALGO_MASTERLESS, "masterless",
                                   "every rank decodes a chunk and sends it "
                                   "to every rank (gcx_coded_allreduce)"},
    {0, NULL, NULL},
};

/*
 * auto: per round, with m = 4 count bytes, P ranks, α, β from GCX_NET_*
 * (20 us, 10 Gbit/s when unset) and a send overhead o = 2 us,
 *   star       2α + (P-1)(o + mβ)          the root's link sends P-1 sums
 *   masterless 4α + 3(P-1)o + 2(P-1)/P mβ  two vectors per link; chunk,
 *                                          decoded chunk, ACK, COMMIT
 * (the decode and the straggler wait are alike). Master-less needs every
 * rank a worker. Not weighed: a rank stopped past GCX_TIMEOUT (SIGSTOP, a
 * starved process) is left out by the star, unless it is the root, but
 * ends a master-less round on every rank (it owns a chunk; perf/chaos,
 * --algo masterless). A pure function of agreed inputs.
 */
static int gcx_coded_pick_masterless(const gcx_comm_t *comm,
                                     const gcx_coded_params_t *params)
{
    const struct gcx_config *cfg = &comm->config;
    int    algo = params->algo != GCX_CODED_ALGO_DEFAULT ? params->algo :
                                                          cfg->coded_algo;
    double alpha = cfg->net_latency_us > 0 ? cfg->net_latency_us * 1e-6 :
                                             20e-6;
    double beta  = cfg->net_bandwidth_gbps > 0 ?
                       8.0 / (cfg->net_bandwidth_gbps * 1e9) :
                       8.0 / 10e9;
    double o = 2e-6, m = 4.0 * (double)params->count, P = comm->size;
    double star, masterless;

    if (algo == GCX_CODED_ALGO_MASTERLESS) {
        return 1;
    }
    if (algo != GCX_CODED_ALGO_AUTO || params->root_not_worker ||
        comm->size < 3) {
        return 0;
    }
    star       = 2 * alpha + (P - 1) * (o + m * beta);
    masterless = 4 * alpha + 3 * (P - 1) * o + 2 * (P - 1) / P * m * beta;
    return masterless < star;
}

static gcx_status_t gcx_coded_create_locked(gcx_comm_t *comm,
                              const gcx_coded_params_t *params,
                              gcx_coded_t **coded_p)
{
    gcx_coded_t *coded;
    gcx_tl_t    *tl;
    gcx_status_t status;
    unsigned     id;
    int          workers;

    if (comm == NULL || params == NULL || params->code == NULL ||
        coded_p == NULL || params->root < 0 || params->root >= comm->size) {
        gcx_error("gcx_coded_create: invalid arguments");
        return GCX_ERR_INVALID;
    }
    if (comm->error != GCX_OK) {
        return comm->error;
    }
    if (params->algo < GCX_CODED_ALGO_DEFAULT ||
        params->algo > GCX_CODED_ALGO_MASTERLESS) {
        gcx_error("gcx_coded_create: invalid algo %d", params->algo);
        return GCX_ERR_INVALID;
    }
    if (gcx_coded_pick_masterless(comm, params)) {
        coded = calloc(1, sizeof(*coded));
        if (coded == NULL) {
            return GCX_ERR_NOMEM;
        }
        coded->comm = comm;
        status      = gcx_coded_allreduce_create(comm, params, &coded->car);
        if (status != GCX_OK) {
            free(coded);
            return status;
        }
        gcx_debug("coded gather: master-less on %d ranks, %zu floats",
                  comm->size, params->count);
        *coded_p = coded;
        return GCX_OK;
    }
    workers = comm->size - (params->root_not_worker ? 1 : 0);
    if (gcx_code_workers(params->code) != workers || workers < 1) {
        gcx_error("gcx_coded_create: the code has %d workers, the "
                  "communicator %d",
                  gcx_code_workers(params->code), workers);
        return GCX_ERR_INVALID;
    }
    coded = calloc(1, sizeof(*coded));
    if (coded == NULL) {
        return GCX_ERR_NOMEM;
    }
    tl                     = comm->tl;
    coded->comm            = comm;
    coded->code            = params->code;
    coded->count           = params->count;
    coded->bytes           = params->count * sizeof(float);
    coded->root            = params->root;
    coded->root_not_worker = params->root_not_worker ? 1 : 0;
    coded->lost_rounds     = params->lost_rounds ? 1 : 0;
    coded->n               = workers;
    coded->s               = gcx_code_stragglers(params->code);
    coded->my_worker       = gcx_coded_worker(coded, comm->rank);
    coded->instance        = comm->seq;
    status = gcx_coded_straggler_init(coded);
    if (status != GCX_OK) {
        goto err_free;
    }
    for (id = GCX_CODED_AM_FIRST; id < GCX_TL_AM_MAX_ID; ++id) {
        if (tl->ops->am_handler(tl, id, gcx_coded_am_handler, coded) ==
            GCX_OK) {
            break;
        }
    }
    if (id == GCX_TL_AM_MAX_ID) {
        gcx_error("gcx_coded_create: no free active-message id");
        status = GCX_ERR_UNSUPPORTED;
        goto err_free;
    }
    coded->am_id = id;
    /* registered before the exchange: once any rank is past it, every
     * rank can take this object's messages */
    status = gcx_coded_agree(coded, GCX_CODED_COLL_ID);
    if (status != GCX_OK) {
        goto err_unregister;
    }
    *coded_p = coded;
    return GCX_OK;

err_unregister:
    tl->ops->am_handler(tl, coded->am_id, NULL, NULL);
err_free:
    free(coded);
    return status;
}

gcx_status_t gcx_coded_create(gcx_comm_t *comm,
                              const gcx_coded_params_t *params,
                              gcx_coded_t **coded_p)
{
    gcx_status_t status;

    gcx_context_lock();
    status = gcx_coded_create_locked(comm, params, coded_p);
    gcx_context_unlock();
    return status;
}

static void gcx_coded_destroy_locked(gcx_coded_t *coded)
{
    gcx_tl_t *tl;

    if (coded == NULL) {
        return;
    }
    if (coded->car != NULL) {
        gcx_coded_allreduce_destroy(coded->car);
        free(coded);
        return;
    }
    tl = coded->comm->tl;
    if (coded->live != NULL) {
        gcx_warn("coded gather destroyed with a round in flight");
        coded->live->coded = NULL;
    }
    /* give slow transfers a moment, then hand them to the transport */
    if (coded->comm->error == GCX_OK) {
        tl->ops->progress(tl);
        gcx_coded_reclaim(coded);
    }
    tl->ops->am_handler(tl, coded->am_id, NULL, NULL);
    gcx_coded_slots_release(coded);
    free(coded);
}

void gcx_coded_destroy(gcx_coded_t *coded)
{
    gcx_context_lock();
    gcx_coded_destroy_locked(coded);
    gcx_context_unlock();
}

/* One round task; abstain: no sendbuf, a VOID message instead. */
static gcx_status_t gcx_coded_submit(gcx_coded_t *coded, const float *sendbuf,
                                     float *recvbuf, int abstain,
                                     gcx_coded_result_t *result,
                                     gcx_request_t **req_p)
{
    gcx_coded_op_t *op;
    int             is_root;

    if (coded->lost_rounds && result == NULL) {
        gcx_error("gcx_coded_%s: the object was created with lost_rounds: "
                  "pass a result, it says whether the round was lost",
                  abstain ? "abstain" : "gather");
        return GCX_ERR_INVALID;
    }
    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return GCX_ERR_NOMEM;
    }
    is_root = coded->comm->rank == coded->root;
    gcx_task_init(&op->super,
                  is_root ? &gcx_coded_root_ops : &gcx_coded_rank_ops,
                  coded->comm);
    op->coded   = coded;
    op->round   = coded->next_round++;
    op->sendbuf = sendbuf;
    op->recvbuf = recvbuf;
    op->result  = result;
    op->abstain = abstain && coded->my_worker >= 0;
    op->rreq.status = GCX_OK;
    return gcx_task_submit(&op->super, req_p);
}

gcx_status_t gcx_coded_gather(gcx_coded_t *coded, const float *sendbuf,
                              float *recvbuf, gcx_coded_result_t *result,
                              gcx_request_t **req_p)
{
    if (coded == NULL || (coded->count > 0 && recvbuf == NULL) ||
        (coded->my_worker >= 0 && coded->count > 0 &&
         (sendbuf == NULL ||
          (sendbuf < recvbuf + coded->count &&
           recvbuf < sendbuf + coded->count)))) {
        gcx_error("gcx_coded_gather: invalid arguments (buffers %p -> %p)",
                  (const void *)sendbuf, (void *)recvbuf);
        return GCX_ERR_INVALID;
    }
    if (coded->car != NULL) {
        return gcx_coded_allreduce(coded->car, sendbuf, recvbuf, result,
                                   req_p);
    }
    return gcx_coded_submit(coded, sendbuf, recvbuf, 0, result, req_p);
}

gcx_status_t gcx_coded_abstain(gcx_coded_t *coded, float *recvbuf,
                               gcx_coded_result_t *result,
                               gcx_request_t **req_p)
{
    if (coded == NULL || (coded->count > 0 && recvbuf == NULL)) {
        gcx_error("gcx_coded_abstain: invalid arguments (recvbuf %p)",
                  (void *)recvbuf);
        return GCX_ERR_INVALID;
    }
    if (coded->car != NULL) {
        return gcx_coded_allreduce_abstain(coded->car, recvbuf, result,
                                           req_p);
    }
    return gcx_coded_submit(coded, NULL, recvbuf, 1, result, req_p);
}

static gcx_status_t gcx_coded_ready_locked(gcx_coded_t *coded, int *ready_p)
{
    gcx_coded_slot_t *slot;
    gcx_tl_t         *tl;

    if (coded == NULL || ready_p == NULL) {
        return GCX_ERR_INVALID;
    }
    if (coded->comm->error != GCX_OK) {
        return coded->comm->error;
    }
    tl = coded->comm->tl;
    tl->ops->progress(tl);
    *ready_p = 0;
    for (slot = coded->stash; slot != NULL; slot = slot->next) {
        if (coded->comm->rank != coded->root &&
            slot->round == coded->next_round) {
            *ready_p = 1;
        }
    }
    return GCX_OK;
}

gcx_status_t gcx_coded_ready(gcx_coded_t *coded, int *ready_p)
{
    gcx_status_t status;

    if (coded != NULL && coded->car != NULL) {
        return gcx_coded_allreduce_ready(coded->car, ready_p);
    }
    gcx_context_lock();
    status = gcx_coded_ready_locked(coded, ready_p);
    gcx_context_unlock();
    return status;
}

gcx_status_t gcx_coded_stats(const gcx_coded_t *coded,
                             gcx_coded_stats_t *stats_p)
{
    if (coded == NULL || stats_p == NULL) {
        return GCX_ERR_INVALID;
    }
    if (coded->car != NULL) {
        return gcx_coded_allreduce_stats(coded->car, stats_p);
    }
    *stats_p      = coded->stats;
    stats_p->gone = coded->gone;
    return GCX_OK;
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_coded_config_rows[] = {
    {"CODED_MAX_LAG", GCX_CONFIG_INT, "64",
     "Coded gather: decoded sums the root keeps for a rank that has not "
     "taken them; a rank holding that many holds the root's next round back "
     "until it takes one, and counts as gone (permanent straggler) only if "
     "it takes none within `GCX_TIMEOUT`",
     offsetof(struct gcx_config, coded_max_lag), 1, 1 << 20, NULL},
    {"CODED_ALGO", GCX_CONFIG_ENUM, "star",
     "Coded gather: star (one root decodes), masterless (every rank decodes "
     "a chunk: gcx_coded_allreduce) or auto (the cheaper by the alpha-beta "
     "model of GCX_NET_*); gcx_coded_params_t.algo overrides it",
     offsetof(struct gcx_config, coded_algo), 0, 0, gcx_coded_algo_names},
    {"CODED_AHEAD", GCX_CONFIG_INT, "0",
     "Master-less coded allreduce: rounds a rank serves the chunks it owns "
     "ahead of its own call (decoded from the others' chunks while it still "
     "computes), i.e. how far the others can run ahead of a slow rank; a "
     "rank that far behind holds up to about two vectors per round (in "
     "UCX's receive buffers; its own buffers, `stats.buffer_bytes`, about "
     "one chunk per round), and every rank keeps its committed copies of "
     "that many rounds (s/P of a vector each). 0: as many rounds as "
     "GCX_CODED_AHEAD_BYTES of the vector hold, 8 to 256. Must be the same "
     "on every rank",
     offsetof(struct gcx_config, coded_ahead), 0, 256, NULL},
    {"CODED_AHEAD_BYTES", GCX_CONFIG_SIZE, "64M",
     "Master-less coded allreduce with GCX_CODED_AHEAD=0: the bytes of "
     "vector the window spans (rounds = this / (4 count), 8 to 256); a rank "
     "that far behind holds about twice this (or 16 vectors, if more), "
     "every rank s/P of it in kept copies",
     offsetof(struct gcx_config, coded_ahead_bytes), 0, (double)(1ull << 40),
     NULL},
    {"CODED_IN_PLACE", GCX_CONFIG_BOOL, "y",
     "Master-less coded allreduce: read a received chunk where the "
     "transport assembled it (y; UCX with persistent active-message data) "
     "instead of copying it into an internal buffer first (n: one more "
     "pass over the vector per round, for comparison)",
     offsetof(struct gcx_config, coded_in_place), 0, 0, NULL},
    {"STRAGGLER_RANKS", GCX_CONFIG_STRING, "",
     "Coded gather straggler injection: comma-separated ranks delayed by "
     "GCX_STRAGGLER_DELAY_MS every round (tests, perf)",
     offsetof(struct gcx_config, straggler_ranks), 0, 0, NULL},
    {"STRAGGLER_DELAY_MS", GCX_CONFIG_DOUBLE, "0",
     "Coded gather: milliseconds each rank of GCX_STRAGGLER_RANKS sleeps "
     "before it contributes to a round",
     offsetof(struct gcx_config, straggler_delay_ms), 0, 1e7, NULL},
    {"STRAGGLER_MEAN_MS", GCX_CONFIG_DOUBLE, "0",
     "Coded gather: mean (ms) of exponential delays injected each round on "
     "GCX_STRAGGLER_COUNT ranks chosen at random (same choice on every "
     "rank); 0: off",
     offsetof(struct gcx_config, straggler_mean_ms), 0, 1e7, NULL},
    {"STRAGGLER_COUNT", GCX_CONFIG_INT, "-1",
     "Coded gather: ranks delayed at random per round with "
     "GCX_STRAGGLER_MEAN_MS; -1: the code's s",
     offsetof(struct gcx_config, straggler_count), -1, 1 << 16, NULL},
    {"STRAGGLER_SEED", GCX_CONFIG_INT, "1",
     "Coded gather: seed of the random straggler choice and delays",
     offsetof(struct gcx_config, straggler_seed), 0, INT_MAX, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_COLL, "coll/coded_gather",
                    gcx_coded_config_rows)
