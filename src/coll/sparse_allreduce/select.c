/*
 * select.c - auto's decision: which algorithm runs a call.
 *
 * Idea: every algorithm's cost() (in its file) predicts its time from the
 * exchanged sizes and the network model (α, β, γ: calibrate.c); with
 * feedback each prediction is scaled by the algorithm's measured ratio
 * (feedback.c) and the cheapest runs, except that a close contender with
 * too few records of its own runs first, to be measured. Everything read is
 * the same on every rank, so every rank picks the same algorithm.
 * Cost: one cost() per algorithm per call (O(P^2) for the split variants'
 * range loads), no communication.
 */
#include "sparse_allreduce.h"

#include "core/config.h"

#include <stdio.h>

const gcx_sparse_algo_t *const gcx_sparse_algos[GCX_SPARSE_NALGOS] = {
    &gcx_sparse_algo_allgather,
    &gcx_sparse_algo_rd,
    &gcx_sparse_algo_split,
    &gcx_sparse_algo_balanced_split,
};

/* ---- selection ------------------------------------------------------------ */

const gcx_sparse_algo_t *gcx_sparse_find(int id)
{
    size_t i;

    for (i = 0; i < GCX_SPARSE_NALGOS; ++i) {
        if (gcx_sparse_algos[i]->id == id) {
            return gcx_sparse_algos[i];
        }
    }
    return gcx_sparse_algos[0];
}

/* The info line of a selection: every algorithm's corrected time. */
static void gcx_sparse_log_choice(const gcx_sparse_task_t *t, size_t best,
                                  int explore, const double *cost,
                                  const double *ratio)
{
    char   line[640], note[32];
    size_t i, used = 0;

    for (i = 0; i < GCX_SPARSE_NALGOS; ++i) {
        note[0] = '\0';
        if (ratio[i] > 0) {
            snprintf(note, sizeof(note), " (x%.2f measured)", ratio[i]);
        }
        used += (size_t)snprintf(line + used, sizeof(line) - used,
                                 "%s%s %.3f ms%s", i ? ", " : "",
                                 gcx_sparse_algos[i]->name, cost[i] * 1e3,
                                 note);
        if (used >= sizeof(line)) {
            used = sizeof(line) - 1;
        }
    }
    gcx_info("sparse allreduce #%u: N %zu, P %d, nnz sum %zu max %zu, topk "
             "%zu, alpha %.1f us, beta %.3f Gbit/s, merge %.1f ns/pair -> %s%s "
             "(model: %s)",
             t->super.seq, t->N, t->super.comm->size, t->nnz_sum, t->nnz_max,
             t->topk, t->alpha * 1e6, 8.0 / t->beta / 1e9, t->gamma * 1e9,
             gcx_sparse_algos[best]->name,
             explore ? " (to measure it)" : "", line);
}

/*
 * The cheapest by the corrected model. With feedback, explore first: while
 * the cheapest is measured but an algorithm within GCX_SPARSE_FB_EXPLORE of
 * it has fewer than GCX_SPARSE_FB_SAMPLES records (none: never run, or its
 * ratio expired), run that one (the cheapest such first), so an algorithm
 * the model overrates gets measured too, once per expiry period, and one
 * slow first call does not rule a contender out (at 0.01% on the emulated
 * cluster a single allgather call in slow start left auto on recursive
 * doubling, 1.35-1.44 ms against allgather's 1.13-1.16). Reads only state
 * every rank has alike.
 */
const gcx_sparse_algo_t *gcx_sparse_select(gcx_sparse_task_t *t)
{
    const gcx_sparse_comm_state_t *e  = gcx_sparse_state(t->super.comm);
    double model[GCX_SPARSE_NALGOS], ratio[GCX_SPARSE_NALGOS];
    double cost[GCX_SPARSE_NALGOS];
    int    bucket[GCX_SPARSE_NALGOS], count[GCX_SPARSE_NALGOS];
    int    fb = gcx_sparse_feedback_on(t);
    size_t i, best = 0;
    int    explore = -1;

    for (i = 0; i < GCX_SPARSE_NALGOS; ++i) {
        model[i]  = gcx_sparse_algos[i]->cost(t);
        bucket[i] = gcx_sparse_fb_bucket(model[i]);
        ratio[i]  = 0;
        count[i]  = 0;
        if (fb) {
            count[i] = gcx_sparse_fb_count(&e->fb, i, bucket[i]);
            ratio[i] = gcx_sparse_fb_ratio(&e->fb, i, bucket[i]);
        }
        cost[i]   = ratio[i] > 0 ? model[i] * ratio[i] : model[i];
        if (cost[i] < cost[best]) {
            best = i;
        }
    }
    for (i = 0; fb && ratio[best] > 0 && i < GCX_SPARSE_NALGOS; ++i) {
        if (i != best && count[i] < GCX_SPARSE_FB_SAMPLES &&
            cost[i] <= GCX_SPARSE_FB_EXPLORE * cost[best] &&
            (explore < 0 || cost[i] < cost[explore])) {
            explore = (int)i;
        }
    }
    if (explore >= 0) {
        best = (size_t)explore;
    }
    t->fb_algo   = (int)best + 1;
    t->fb_bucket = bucket[best];
    t->fb_model  = model[best];
    if (GCX_LOG_INFO <= gcx_log_level_current) { /* not on the hot path */
        gcx_sparse_log_choice(t, best, explore >= 0, cost, ratio);
    }
    return gcx_sparse_algos[best];
}
