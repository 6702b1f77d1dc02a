/*
 * coded.c - coded aggregation: the object, its creation check and the one
 * dispatch to its two algorithms.
 *
 * gcx_coded_create picks the algorithm once (GCX_CODED_ALGO or the
 * params' algo; auto weighs both by the alpha-beta model below) and every
 * call goes through that row of gcx_coded_impl_t: the star (star.c: one
 * root decodes and sends the sum to every rank) or the master-less coded
 * allreduce (masterless.c: every rank decodes the chunks it owns). What
 * both use is below them: shared.c (worker numbering, the creation check),
 * slot.c, straggler.c; the configuration rows are here. Cost: one indirect
 * call per API call.
 */
#include "coded_int.h"

#include <limits.h>
#include <stdlib.h>

int gcx_coded_masterless(const gcx_coded_t *coded)
{
    return coded != NULL && coded->impl == &gcx_coded_impl_masterless;
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
 * rank a worker and a chunk's owners (s + 1) within GCX_CAR_LINE_MAX.
 * Not weighed: a rank stopped past GCX_TIMEOUT (SIGSTOP, a
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
        comm->size < 3 ||
        (gcx_code_stragglers(params->code) + 1 > GCX_CAR_LINE_MAX &&
         comm->size > GCX_CAR_LINE_MAX)) {
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
    gcx_status_t status;

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
    coded = calloc(1, sizeof(*coded));
    if (coded == NULL) {
        return GCX_ERR_NOMEM;
    }
    coded->comm = comm;
    coded->impl = gcx_coded_pick_masterless(comm, params) ?
                      &gcx_coded_impl_masterless :
                      &gcx_coded_impl_star;
    status = coded->impl->create(coded, params);
    if (status != GCX_OK) {
        free(coded);
        return status;
    }
    gcx_debug("coded gather: %s on %d ranks, %zu floats", coded->impl->name,
              comm->size, params->count);
    *coded_p = coded;
    return GCX_OK;
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

void gcx_coded_destroy(gcx_coded_t *coded)
{
    if (coded == NULL) {
        return;
    }
    gcx_context_lock();
    coded->impl->destroy(coded);
    free(coded);
    gcx_context_unlock();
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
    return coded->impl->submit(coded, sendbuf, recvbuf, 0, result, req_p);
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
    return coded->impl->submit(coded, NULL, recvbuf, 1, result, req_p);
}

gcx_status_t gcx_coded_ready(gcx_coded_t *coded, int *ready_p)
{
    if (coded == NULL || ready_p == NULL) {
        return GCX_ERR_INVALID;
    }
    return coded->impl->ready(coded, ready_p);
}

gcx_status_t gcx_coded_stats(const gcx_coded_t *coded,
                             gcx_coded_stats_t *stats_p)
{
    if (coded == NULL || stats_p == NULL) {
        return GCX_ERR_INVALID;
    }
    return coded->impl->stats(coded, stats_p);
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
