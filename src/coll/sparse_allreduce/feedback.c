/*
 * feedback.c - the feedback table of auto (GCX_SPARSE_FEEDBACK, on by
 * default): measured/modelled ratios per algorithm that correct the cost
 * model.
 *
 * Idea: the α-β-γ model misses what it does not see (TCP slow start after
 * a merge left the link idle, the receive-side copies of a shared CPU),
 * and it can be off by 1.3-2x in a way that differs between algorithms. So every auto call records, per
 * algorithm and per factor-of-2 bucket of modelled time, the ratio
 * measured/modelled of the algorithm it ran (the slowest rank's time, from
 * the start of the algorithm to its results), and the next selection
 * scales each algorithm's model by its ratio (1 while unmeasured). A ratio
 * is the median of the algorithm's last GCX_SPARSE_FB_WINDOW records in
 * the bucket: what a call typically takes, which is what a training loop
 * pays. (The smallest seen, used before, favoured whichever algorithm
 * varies most: at 0.01% density on the emulated cluster auto left
 * allgather, ~1.35 ms a call, for split or balanced split, ~1.55 ms.) A
 * ratio expires GCX_SPARSE_FB_EXPIRE records of its bucket after it was
 * first set, so every algorithm gets measured afresh now and then and a
 * few unlucky calls cannot ban it for good. The model can also be
 * too pessimistic about an algorithm, which then would never run: so any
 * algorithm modelled within GCX_SPARSE_FB_EXPLORE of the cheapest measured
 * one is run until it has GCX_SPARSE_FB_SAMPLES (2) records of its own
 * (gcx_sparse_select): a first call on connections no algorithm has used
 * for a while runs in TCP slow start and reads 1.5-2x. The
 * measurement rides in the next call's info exchange (4 numbers per rank),
 * so every rank folds in the same numbers and the tables stay identical; a
 * hash of the table travels with them and any disagreement resets every
 * rank's table. Cost: 40 bytes per info record; per expiry period (64 calls
 * of a bucket) two calls of each algorithm that models close to the best. A
 * call of an unusual size lands in its own bucket and does not disturb the
 * others.
 */
#include "sparse_allreduce.h"

#include "core/time.h"

#include <stdlib.h>
#include <string.h>

/* ---- feedback ------------------------------------------------------------- */

int gcx_sparse_feedback_on(const gcx_sparse_task_t *t)
{
    return t->algo_id == GCX_SPARSE_ALGO_AUTO &&
           t->super.comm->config.sparse_feedback;
}

/* Bucket of a modelled time: factor-of-2 steps from GCX_SPARSE_FB_BUCKET0. */
int gcx_sparse_fb_bucket(double model)
{
    int b = 0;

    while (b < GCX_SPARSE_FB_BUCKETS - 1 &&
           model >= GCX_SPARSE_FB_BUCKET0 * (double)(2 << b)) {
        ++b;
    }
    return b;
}

/* FNV-1a over the table (identical bits on every rank, or reset). */
static int64_t gcx_sparse_fb_hash(const gcx_sparse_comm_state_t *e)
{
    const unsigned char *p = (const unsigned char *)&e->fb;
    uint64_t             h = 1469598103934665603ull;
    size_t               i;

    for (i = 0; i < sizeof(e->fb); ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return (int64_t)(h >> 1); /* non-negative: the record is int64 */
}

/* How many live records algorithm @p a has in bucket @p b; 0: none yet,
 * or they expired. */
int gcx_sparse_fb_count(const gcx_sparse_fb_t *fb, size_t a, int b)
{
    return fb->calls[b] - fb->since[a][b] < GCX_SPARSE_FB_EXPIRE ?
               fb->count[a][b] : 0;
}

/* The live ratio of algorithm @p a in bucket @p b, the median of its last
 * records (the lower middle of an even count: of two, the second call on
 * warmer connections); 0: unknown or expired. */
double gcx_sparse_fb_ratio(const gcx_sparse_fb_t *fb, size_t a, int b)
{
    double v[GCX_SPARSE_FB_WINDOW], x;
    int    n = gcx_sparse_fb_count(fb, a, b), i, j;

    if (n == 0) {
        return 0;
    }
    for (i = 0; i < n; ++i) { /* insertion sort of at most 5 values */
        x = fb->ratio[a][b][i];
        for (j = i; j > 0 && v[j - 1] > x; --j) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
    return v[(n - 1) / 2];
}

/* This rank's record for the info exchange; the last one is then spent. */
void gcx_sparse_fb_pack(gcx_sparse_task_t *t, int64_t *rec)
{
    gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);

    memset(rec, 0, GCX_SPARSE_FB_LEN * sizeof(*rec));
    if (!gcx_sparse_feedback_on(t)) {
        return;
    }
    memcpy(rec, e->last, sizeof(e->last));
    rec[GCX_SPARSE_FB_LEN - 1] = gcx_sparse_fb_hash(e);
    memset(e->last, 0, sizeof(e->last));
}

/*
 * Fold every rank's record of the previous call into the ratio table: the
 * slowest rank's time over the modelled time. Reads only exchanged data,
 * so every rank's table changes alike.
 */
void gcx_sparse_fb_fold(gcx_sparse_task_t *t)
{
    gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);
    int                      P = t->super.comm->size, r;
    const int64_t           *rec0 = t->info + GCX_SPARSE_INFO_FB(P), *rec;
    int64_t                  algo = rec0[0], bucket = rec0[1];
    double                   model = 0, measured = 0, ratio;
    size_t                   a;

    if (!gcx_sparse_feedback_on(t)) {
        return;
    }
    for (r = 0; r < P; ++r) {
        rec = t->info + (size_t)r * t->info_len + GCX_SPARSE_INFO_FB(P);
        if (rec[GCX_SPARSE_FB_LEN - 1] != rec0[GCX_SPARSE_FB_LEN - 1]) {
            gcx_info("sparse allreduce #%u: the ranks' feedback tables "
                     "differ (rank %d vs 0); every rank starts a new one",
                     t->super.seq, r);
            memset(&e->fb, 0, sizeof(e->fb));
            return;
        }
        if (rec[0] != algo || rec[1] != bucket) {
            algo = 0; /* no common record: nothing to learn */
        }
        if ((double)rec[2] > model) {
            model = (double)rec[2];
        }
        if ((double)rec[3] > measured) {
            measured = (double)rec[3];
        }
    }
    if (algo < 1 || algo > (int64_t)GCX_SPARSE_NALGOS || bucket < 0 ||
        bucket >= GCX_SPARSE_FB_BUCKETS || model <= 0) {
        return;
    }
    ratio = measured / model;
    if (ratio > GCX_SPARSE_FB_CLAMP) {
        ratio = GCX_SPARSE_FB_CLAMP;
    } else if (ratio < 1.0 / GCX_SPARSE_FB_CLAMP) {
        ratio = 1.0 / GCX_SPARSE_FB_CLAMP;
    }
    a = (size_t)(algo - 1);
    ++e->fb.calls[bucket];
    if (gcx_sparse_fb_count(&e->fb, a, (int)bucket) == 0) {
        /* first, or expired: start afresh */
        e->fb.since[a][bucket] = e->fb.calls[bucket];
        e->fb.count[a][bucket] = 0;
        e->fb.next[a][bucket]  = 0;
    }
    e->fb.ratio[a][bucket][e->fb.next[a][bucket]] = ratio;
    e->fb.next[a][bucket] =
        (uint8_t)((e->fb.next[a][bucket] + 1) % GCX_SPARSE_FB_WINDOW);
    if (e->fb.count[a][bucket] < GCX_SPARSE_FB_WINDOW) {
        ++e->fb.count[a][bucket];
    }
}

/* After a successful auto call: what the next call will send. */
void gcx_sparse_fb_record(gcx_sparse_task_t *t)
{
    gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);

    if (!gcx_sparse_feedback_on(t) || t->fb_algo == 0) {
        return;
    }
    e->last[0] = t->fb_algo;
    e->last[1] = t->fb_bucket;
    e->last[2] = (int64_t)(t->fb_model * 1e9);
    e->last[3] = (int64_t)((gcx_time_now() - t->fb_t0) * 1e9);
}
