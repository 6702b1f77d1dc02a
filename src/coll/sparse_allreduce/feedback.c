/*
 * feedback.c - the feedback table of auto (GCX_SPARSE_FEEDBACK, on by
 * default): measured/modelled ratios per algorithm that correct the cost
 * model.
 *
 * Idea: the α-β-γ model misses what it does not see (TCP slow start after a
 * merge left the link idle, the receive-side copies of a shared CPU), and it
 * can be off by 1.3-2x in a way that differs between algorithms. So every auto
 * call records, per algorithm and per factor-of-2 bucket of modelled time, the
 * ratio measured/modelled of the algorithm it ran (the slowest rank's time,
 * from the start of the algorithm to its results), and the next selection
 * scales each algorithm's model by its ratio (1 while unmeasured). A ratio is
 * the median of the algorithm's last GCX_SPARSE_FB_WINDOW records in the
 * bucket: what a call typically takes, which is what a training loop pays. (The
 * smallest seen, used before, favoured whichever algorithm varies most: at
 * 0.01% density on the emulated cluster auto left allgather, ~1.35 ms a call,
 * for split or balanced split, ~1.55 ms.) A ratio expires GCX_SPARSE_FB_EXPIRE
 * records of its bucket after it was first set, so every algorithm gets
 * measured afresh now and then and a few unlucky calls cannot ban it for good.
 * The model can also be too pessimistic about an algorithm, which then would
 * never run: so any algorithm modelled within GCX_SPARSE_FB_EXPLORE of the
 * cheapest measured one is run until it has GCX_SPARSE_FB_SAMPLES (2) records
 * of its own (gcx_sparse_choose, select.c): a first call on connections no
 * algorithm has used for a while runs in TCP slow start and reads 1.5-2x. The
 * measurement rides in the next call's info exchange (4 numbers per rank), so
 * every rank folds in the same numbers and the tables stay identical; a hash of
 * the table travels with them and any disagreement resets every rank's table.
 * Cost: 40 bytes per info record; per expiry period (64 calls of a bucket) two
 * calls of each algorithm that models close to the best. A call of an unusual
 * size lands in its own bucket and does not disturb the others.
 *
 * Layout: first the table as a data structure (feedback.h: bucket, count,
 * ratio, insert, hash, fold of the ranks' records; no communicator), then
 * the task's side (pack this rank's record into the info exchange, fold
 * the exchanged ones into the communicator's table, record this call).
 */
#include "sparse_allreduce.h"

#include "base/time.h"

#include <stdlib.h>
#include <string.h>

/* ---- the table (feedback.h) --------------------------------------------- */

int gcx_sparse_fb_bucket(double model)
{
    int b = 0;

    while (b < GCX_SPARSE_FB_BUCKETS - 1 &&
           model >= GCX_SPARSE_FB_BUCKET0 * (double)(2 << b)) {
        ++b;
    }
    return b;
}

int64_t gcx_sparse_fb_hash(const gcx_sparse_fb_t *fb)
{
    const unsigned char *p = (const unsigned char *)fb;
    uint64_t             h = 1469598103934665603ull;
    size_t               i;

    for (i = 0; i < sizeof(*fb); ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return (int64_t)(h >> 1); /* non-negative: the record is int64 */
}

int gcx_sparse_fb_count(const gcx_sparse_fb_t *fb, size_t a, int b)
{
    return fb->calls[b] - fb->since[a][b] < GCX_SPARSE_FB_EXPIRE ?
               fb->count[a][b] : 0;
}

/* (The lower middle of an even count: of two, the second call on warmer
 * connections.) */
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

void gcx_sparse_fb_insert(gcx_sparse_fb_t *fb, size_t a, int b, double ratio)
{
    if (ratio > GCX_SPARSE_FB_CLAMP) {
        ratio = GCX_SPARSE_FB_CLAMP;
    } else if (ratio < 1.0 / GCX_SPARSE_FB_CLAMP) {
        ratio = 1.0 / GCX_SPARSE_FB_CLAMP;
    }
    ++fb->calls[b];
    if (gcx_sparse_fb_count(fb, a, b) == 0) {
        /* first, or expired: start afresh */
        fb->since[a][b] = fb->calls[b];
        fb->count[a][b] = 0;
        fb->next[a][b]  = 0;
    }
    fb->ratio[a][b][fb->next[a][b]] = ratio;
    fb->next[a][b] = (uint8_t)((fb->next[a][b] + 1) % GCX_SPARSE_FB_WINDOW);
    if (fb->count[a][b] < GCX_SPARSE_FB_WINDOW) {
        ++fb->count[a][b];
    }
}

/* The slowest rank's time over the modelled time. Reads only exchanged
 * data, so every rank's table changes alike. */
int gcx_sparse_fb_fold(gcx_sparse_fb_t *fb, const int64_t *recs, int P,
                       size_t stride, int *differ_p)
{
    const int64_t *rec;
    int64_t        algo = recs[0], bucket = recs[1];
    double         model = 0, measured = 0;
    int            r;

    for (r = 0; r < P; ++r) {
        rec = recs + (size_t)r * stride;
        if (rec[GCX_SPARSE_FB_LEN - 1] != recs[GCX_SPARSE_FB_LEN - 1]) {
            memset(fb, 0, sizeof(*fb));
            if (differ_p != NULL) {
                *differ_p = r;
            }
            return -1;
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
        return 0;
    }
    gcx_sparse_fb_insert(fb, (size_t)(algo - 1), (int)bucket,
                         measured / model);
    return 1;
}

/* ---- the task's side: pack, fold, record --------------------------------- */

int gcx_sparse_feedback_on(const gcx_sparse_task_t *t)
{
    return t->algo_id == GCX_SPARSE_ALGO_AUTO &&
           t->super.comm->config.sparse_feedback;
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
    rec[GCX_SPARSE_FB_LEN - 1] = gcx_sparse_fb_hash(&e->fb);
    memset(e->last, 0, sizeof(e->last));
}

/* Fold every rank's record of the previous call (from the info exchange)
 * into the communicator's table. */
void gcx_sparse_fb_fold_info(gcx_sparse_task_t *t)
{
    gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);
    int                      P = t->super.comm->size, differ = 0;

    if (!gcx_sparse_feedback_on(t)) {
        return;
    }
    if (gcx_sparse_fb_fold(&e->fb, t->info + GCX_SPARSE_INFO_FB(P), P,
                           t->info_len, &differ) < 0) {
        gcx_info("sparse allreduce #%u: the ranks' feedback tables "
                 "differ (rank %d vs 0); every rank starts a new one",
                 t->super.seq, differ);
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
