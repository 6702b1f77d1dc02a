/*
 * straggler.c - straggler injection for tests and perf drivers.
 *
 * Two sources, added up:
 * - fixed: the ranks of GCX_STRAGGLER_RANKS sleep GCX_STRAGGLER_DELAY_MS
 *   in every round they contribute to;
 * - random: with GCX_STRAGGLER_MEAN_MS > 0, GCX_STRAGGLER_COUNT workers
 *   (default the code's s) are drawn per round, each delayed by an
 *   exponential time of that mean. The draw is a pure function of
 *   (GCX_STRAGGLER_SEED, round), so every rank agrees on it without talking.
 * The delay is a sleep before the rank sends its contribution, i.e. a slow
 * computation; a rank that enters an already decoded round is not delayed
 * (it skips the work). Cost: a few multiplications per round.
 */
#include "coded_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t gcx_coded_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* uniform in (0, 1) from a counter-based stream */
static double gcx_coded_uniform(uint64_t seed, uint64_t round, uint64_t i)
{
    uint64_t x = gcx_coded_mix(seed ^ gcx_coded_mix(round * 0x100000001b3ull + i));

    return ((double)(x >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

gcx_status_t gcx_coded_straggler_parse(const char *list, int size, int root,
                                       int root_not_worker, uint64_t *set)
{
    const char *p = list;
    char       *end;
    long        rank;

    gcx_wset_clear(set, size);
    while (*p != '\0') {
        errno = 0;
        rank  = strtol(p, &end, 10);
        if (end == p || errno != 0 || rank < 0 || rank >= size ||
            (*end != ',' && *end != '\0')) {
            gcx_wset_clear(set, size);
            return GCX_ERR_INVALID;
        }
        if (!(root_not_worker && rank == root)) {
            gcx_wset_add(set, root_not_worker && rank > root ? (int)rank - 1 :
                                                                (int)rank);
        }
        p = *end == ',' ? end + 1 : end;
    }
    return GCX_OK;
}

gcx_status_t gcx_coded_straggler_init(gcx_coded_t *coded)
{
    const struct gcx_config *config = &coded->comm->config;

    coded->straggler_delay_ms = config->straggler_delay_ms;
    coded->straggler_mean_ms  = config->straggler_mean_ms;
    coded->straggler_count    = config->straggler_count < 0 ?
                                    coded->s :
                                    config->straggler_count;
    if (coded->straggler_count > coded->n) {
        coded->straggler_count = coded->n;
    }
    coded->straggler_seed = config->straggler_seed;
    if (gcx_coded_straggler_parse(config->straggler_ranks, coded->comm->size,
                                  coded->root, coded->root_not_worker,
                                  coded->straggler_set) != GCX_OK) {
        gcx_error("invalid GCX_STRAGGLER_RANKS='%s'; accepted: "
                  "comma-separated ranks in 0..%d",
                  config->straggler_ranks, coded->comm->size - 1);
        return GCX_ERR_INVALID;
    }
    return GCX_OK;
}

double gcx_coded_straggler_delay(const gcx_coded_t *coded, int worker,
                                 uint64_t round)
{
    double   delay = 0;
    int     *order;
    int      i, j, tmp;
    uint64_t seed  = (uint64_t)coded->straggler_seed;

    if (worker < 0) {
        return 0;
    }
    if (gcx_wset_has(coded->straggler_set, worker)) {
        delay += coded->straggler_delay_ms;
    }
    if (coded->straggler_mean_ms <= 0 || coded->straggler_count == 0) {
        return delay;
    }
    /* partial Fisher-Yates: the first straggler_count of a permutation
     * (O(n) per round, random injection only) */
    order = malloc((size_t)coded->n * sizeof(*order));
    if (order == NULL) {
        return delay; /* no random delay this round */
    }
    for (i = 0; i < coded->n; ++i) {
        order[i] = i;
    }
    for (i = 0; i < coded->straggler_count; ++i) {
        j = i + (int)(gcx_coded_uniform(seed, round, (uint64_t)i) *
                      (coded->n - i));
        if (j >= coded->n) {
            j = coded->n - 1;
        }
        tmp      = order[i];
        order[i] = order[j];
        order[j] = tmp;
        if (order[i] == worker) {
            delay += -coded->straggler_mean_ms *
                     log(gcx_coded_uniform(seed, round, 1000u + (uint64_t)i));
        }
    }
    free(order);
    return delay;
}

void gcx_coded_sleep(double seconds)
{
    struct timespec ts;

    ts.tv_sec  = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
