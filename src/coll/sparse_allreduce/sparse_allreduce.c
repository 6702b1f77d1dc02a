/*
 * sparse_allreduce.c - sparse allreduce: validation, the info exchange,
 * the algorithm table and selection, and the common epilogue.
 *
 * Flow of one call: local validation (indices strictly increasing and below
 * N) -> argument check of gcx_coll_submit_checked (N and topk must agree;
 * a rank's local error fails every rank with GCX_ERR_MISMATCH) -> info
 * exchange (ring allgather of [nnz, capacity, P-1 index quantiles, a 32-hash
 * union sketch on every 16th auto call, the feedback record] per
 * rank: (P-1)·α, ~300 bytes) -> selection from that info, so every rank
 * picks the same algorithm -> the algorithm -> epilogue: top-k (if the
 * algorithm did not select it already), capacity check against every
 * rank's capacity (all ranks fail together), outputs, in_result.
 *
 * Selection (auto): the algorithm with the lowest modelled time
 * (each file's cost()), with α and β from GCX_NET_LATENCY_US and
 * GCX_NET_BANDWIDTH_GBPS, or, where those are 0, measured once per
 * communicator at its first auto sparse allreduce (see calibrate below).
 * GCX_SPARSE_ALGO forces one; GCX_LOG_LEVEL=info prints the choice and
 * every modelled time. A new algorithm = one file + one row.
 *
 * Feedback (GCX_SPARSE_FEEDBACK, on by default): the α-β-γ model misses
 * what it does not see (TCP slow start after a merge left the link idle,
 * the receive-side copies of a shared CPU), and it can be off by 1.3-2x in
 * a way that differs between algorithms. So every auto call records, per
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

#include "core/config.h"
#include "core/time.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const gcx_sparse_algo_t *const gcx_sparse_algos[] = {
    &gcx_sparse_algo_allgather,
    &gcx_sparse_algo_rd,
    &gcx_sparse_algo_split,
    &gcx_sparse_algo_balanced_split,
};
#define GCX_SPARSE_NALGOS \
    (sizeof(gcx_sparse_algos) / sizeof(gcx_sparse_algos[0]))

enum {
    GCX_SPARSE_PHASE_INFO = 0,
    GCX_SPARSE_PHASE_CALIBRATE,
    GCX_SPARSE_PHASE_ALGO,
    GCX_SPARSE_PHASE_DONE,
};

/* ---- per-communicator memory: measured α/β/γ and the last call's stats ---- */

#define GCX_SPARSE_FB_BUCKETS 16     /* factor-of-2 buckets of modelled time */
#define GCX_SPARSE_FB_BUCKET0 100e-6 /* bucket 0: up to 200 us */
#define GCX_SPARSE_FB_CLAMP   16.0   /* ratios kept within [1/16, 16] */
#define GCX_SPARSE_SKETCH_EVERY 16
#define GCX_SPARSE_FB_EXPIRE  64     /* records of a bucket a ratio lives */
#define GCX_SPARSE_FB_EXPLORE 1.5    /* measure what models within 1.5x */
#define GCX_SPARSE_FB_WINDOW  5      /* records a ratio is the median of */
#define GCX_SPARSE_FB_SAMPLES 2      /* records a contender gets at least */

/* The feedback table; every rank holds the same bits (hashed). */
typedef struct gcx_sparse_fb {
    /* the last records of each algorithm and bucket: a ring of count[]
     * (at most GCX_SPARSE_FB_WINDOW) values, next[] the slot to write */
    double   ratio[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS]
                  [GCX_SPARSE_FB_WINDOW];
    uint8_t  count[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS]; /* 0: unknown */
    uint8_t  next[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS];
    uint32_t since[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS]; /* calls[] then */
    uint32_t calls[GCX_SPARSE_FB_BUCKETS]; /* records folded per bucket */
} gcx_sparse_fb_t;

typedef struct gcx_sparse_comm_state {
    double                       alpha, beta, gamma; /* 0: not measured */
    int                          have_stats;
    gcx_sparse_allreduce_stats_t stats;
    gcx_sparse_fb_t              fb;
    /* this rank's record of its last auto call, sent with the next one:
     * algorithm index + 1 (0: none), bucket, modelled ns, measured ns */
    int64_t                      last[GCX_SPARSE_FB_LEN - 1];
    /* union sketches: every GCX_SPARSE_SKETCH_EVERY-th auto call (a sketch
     * hashes every index: ~10% of a call); in between the last one's
     * union / nnz sum stands in */
    uint64_t                     calls;
    double                       union_ratio;
} gcx_sparse_comm_state_t;

/* The sparse allreduce's slot in every communicator's state[]. */
static pthread_once_t gcx_sparse_slot_once = PTHREAD_ONCE_INIT;
static int            gcx_sparse_slot      = -1;

static void gcx_sparse_slot_take(void)
{
    gcx_sparse_slot = gcx_comm_state_slot();
}

/* The state of @p comm (see comm.h); NULL when never created. */
static gcx_sparse_comm_state_t *gcx_sparse_state(const gcx_comm_t *comm)
{
    pthread_once(&gcx_sparse_slot_once, gcx_sparse_slot_take);
    return gcx_sparse_slot < 0 ? NULL : comm->state[gcx_sparse_slot].data;
}

static gcx_status_t gcx_sparse_state_create(gcx_comm_t *comm)
{
    gcx_comm_state_t *s;

    pthread_once(&gcx_sparse_slot_once, gcx_sparse_slot_take);
    if (gcx_sparse_slot < 0) {
        return GCX_ERR_NOMEM;
    }
    s = &comm->state[gcx_sparse_slot];

    if (s->data == NULL) {
        s->data = calloc(1, sizeof(gcx_sparse_comm_state_t));
        if (s->data == NULL) {
            return GCX_ERR_NOMEM;
        }
        s->release = free;
    }
    return GCX_OK;
}

gcx_status_t gcx_sparse_allreduce_last_stats(
    const gcx_comm_t *comm, gcx_sparse_allreduce_stats_t *stats_p)
{
    const gcx_sparse_comm_state_t *e;

    if (comm == NULL || stats_p == NULL) {
        return GCX_ERR_INVALID;
    }
    e = gcx_sparse_state(comm);
    if (e == NULL || !e->have_stats) {
        return GCX_ERR_NOT_FOUND;
    }
    *stats_p = e->stats;
    return GCX_OK;
}

static void gcx_sparse_save_stats(gcx_sparse_task_t *t)
{
    gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);

    e->have_stats       = 1;
    e->stats.algo       = t->algo->name;
    e->stats.bytes_sent = t->bytes_sent;
    e->stats.result_nnz = t->union_nnz;
}

/* α (s), β (s/byte) and γ (s/merged pair) from the variables or the
 * measured cache; 0 when they still have to be measured. */
static int gcx_sparse_model_params(gcx_sparse_task_t *t)
{
    const struct gcx_config       *cfg = &t->super.comm->config;
    const gcx_sparse_comm_state_t *e   = gcx_sparse_state(t->super.comm);
    double                         alpha = e->alpha, beta = e->beta;
    double                         gamma = e->gamma;

    if (cfg->net_latency_us > 0) {
        alpha = cfg->net_latency_us * 1e-6;
    }
    if (cfg->net_bandwidth_gbps > 0) {
        beta = 8.0 / (cfg->net_bandwidth_gbps * 1e9);
    }
    if (gamma == 0 && cfg->net_latency_us > 0 && cfg->net_bandwidth_gbps > 0) {
        gamma = GCX_SPARSE_DEFAULT_GAMMA; /* no calibration will run */
    }
    t->alpha = alpha;
    t->beta  = beta;
    t->gamma = gamma;
    return alpha > 0 && beta > 0 && gamma > 0;
}

/*
 * ---- calibration: timed ring allgathers, agreed by a MAX allreduce ----
 * First, untimed, 8 bytes to and from every other rank: the first message
 * between two ranks may set up the connection (UCX wires endpoints lazily;
 * milliseconds over TCP). Left to the algorithms, that would be charged to
 * the first one to use a pair (the ring's neighbours are not all of them):
 * as latency to the α measured here, and as a measured/modelled ratio of
 * 3-7 to the first algorithm auto runs (recursive doubling at 0.01% on the
 * emulated cluster), which then would not run again for an expiry period.
 * Then the fastest of 5 small rings (α: one late scheduling of a rank
 * sharing a core would otherwise count as latency), one ring of 4 MB per
 * rank (β) and a local merge (γ). Once per communicator: 2(P-1) small
 * messages and ~4(P-1) MB per rank.
 */

#define GCX_SPARSE_CAL_BYTES (4u << 20) /* per rank: near the streaming rate */
#define GCX_SPARSE_CAL_SMALL 5          /* small rings; the fastest counts */

typedef struct gcx_sparse_cal {
    int         stage; /* -1 wiring, 0 small rings, 1 big ring, 2 agree */
    int         small_done;
    gcx_tl_req_t *wire; /* stage -1: [0, P) receives, [P, 2P) sends */
    double      t0, small_s, big_s;
    gcx_task_t *ring;
    char       *buf;
    size_t     *counts;
    gcx_task_t  rd_task;
    gcx_rd_t    rd;
    double      vals[3], tmp[3];
} gcx_sparse_cal_t;

static const gcx_task_ops_t gcx_sparse_pseudo_ops = {
    .name = "sparse allreduce (calibration)",
};

static gcx_task_t *gcx_sparse_cal_ring(gcx_sparse_task_t *t,
                                       gcx_sparse_cal_t *cal, size_t per_rank)
{
    int P = t->super.comm->size, r;

    for (r = 0; r < P; ++r) {
        cal->counts[r]     = per_rank;
        cal->counts[P + r] = (size_t)r * per_rank;
    }
    return gcx_ring_create(t->super.comm, GCX_RING_ALLGATHER, cal->buf, NULL,
                           cal->counts, cal->counts + P, GCX_DT_U8,
                           GCX_OP_SUM, 0);
}

static void gcx_sparse_cal_free(gcx_sparse_cal_t *cal)
{
    if (cal->ring != NULL) {
        cal->ring->ops->finalize(cal->ring);
    }
    free(cal->buf);
    free(cal->counts);
    free(cal->wire);
    free(cal);
}

/* Stage -1: post 8 bytes to and from every other rank (into and from
 * cal->buf, which the rings overwrite later); < 0 on failure, with
 * t->super.status set. */
static int gcx_sparse_cal_wire_post(gcx_sparse_task_t *t,
                                    gcx_sparse_cal_t *cal)
{
    int P = t->super.comm->size, rank = t->super.comm->rank, k;

    for (k = 1; k < P; ++k) {
        int from = gcx_coll_mod(rank - k, P), to = gcx_coll_mod(rank + k, P);

        if (gcx_coll_recv(&t->super, from, GCX_SPARSE_SLOT(9),
                          cal->buf + 8 * (size_t)from, 8,
                          &cal->wire[from]) < 0 ||
            gcx_coll_send(&t->super, to, GCX_SPARSE_SLOT(9),
                          cal->buf + 8 * (size_t)rank, 8,
                          &cal->wire[P + to]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Stage -1 done: 1, in progress: 0, failed: -1 (t->super.status set). */
static int gcx_sparse_cal_wire_test(gcx_sparse_task_t *t,
                                    gcx_sparse_cal_t *cal)
{
    int P = t->super.comm->size, rank = t->super.comm->rank, i, state;
    int done = 1;

    for (i = 0; i < 2 * P; ++i) {
        if (i % P == rank) {
            continue;
        }
        state = gcx_coll_req_state(&t->super, &cal->wire[i], i % P,
                                   i < P ? 8 : SIZE_MAX);
        if (state < 0) {
            return -1;
        }
        done &= state;
    }
    return done;
}

static void gcx_sparse_cal_start(gcx_sparse_task_t *t)
{
    int               P   = t->super.comm->size;
    gcx_sparse_cal_t *cal = calloc(1, sizeof(*cal));

    if (cal == NULL ||
        (cal->buf = calloc((size_t)P, GCX_SPARSE_CAL_BYTES)) == NULL ||
        (cal->counts = malloc(2 * (size_t)P * sizeof(size_t))) == NULL ||
        (cal->wire = calloc(2 * (size_t)P, sizeof(*cal->wire))) == NULL) {
        if (cal != NULL) {
            gcx_sparse_cal_free(cal);
        }
        t->super.status = GCX_ERR_NOMEM;
        return;
    }
    t->algo_state = cal;
    cal->stage    = -1;
    gcx_sparse_cal_wire_post(t, cal); /* sets t->super.status on failure */
}

/* 1 done (t->alpha, t->beta set), 0 in progress, -1 failed. */
static int gcx_sparse_cal_progress(gcx_sparse_task_t *t)
{
    gcx_sparse_cal_t *cal = t->algo_state;
    int               P = t->super.comm->size, state;

    for (;;) {
        switch (cal->stage) {
        case -1:
        case 0:
        case 1:
            state = cal->stage == -1 ?
                        gcx_sparse_cal_wire_test(t, cal) :
                        gcx_coll_subtask_progress(&t->super, cal->ring);
            if (state <= 0) {
                return state;
            }
            if (cal->ring != NULL) {
                cal->ring->ops->finalize(cal->ring);
                cal->ring = NULL;
            }
            if (cal->stage == 0) { /* the fastest small ring: latency */
                double dt = gcx_time_now() - cal->t0;

                if (cal->small_done++ == 0 || dt < cal->small_s) {
                    cal->small_s = dt;
                }
            }
            if (cal->stage == -1 ||
                (cal->stage == 0 && cal->small_done < GCX_SPARSE_CAL_SMALL)) {
                /* connections are up (after -1): time small rings, one tag
                 * slot each */
                cal->ring = gcx_sparse_cal_ring(t, cal, 8);
                if (cal->ring == NULL) {
                    t->super.status = GCX_ERR_NOMEM;
                    return -1;
                }
                cal->t0 = gcx_time_now();
                gcx_coll_subtask_post(&t->super, cal->ring,
                                      GCX_SPARSE_SLOT(10 + cal->small_done));
                cal->stage = 0;
                break;
            }
            if (cal->stage == 0) {
                cal->ring    = gcx_sparse_cal_ring(t, cal,
                                                   GCX_SPARSE_CAL_BYTES);
                if (cal->ring == NULL) {
                    t->super.status = GCX_ERR_NOMEM;
                    return -1;
                }
                cal->t0 = gcx_time_now();
                gcx_coll_subtask_post(&t->super, cal->ring,
                                      GCX_SPARSE_SLOT(2));
                cal->stage = 1;
                break;
            }
            cal->big_s   = gcx_time_now() - cal->t0;
            cal->vals[0] = cal->small_s / (P - 1);
            cal->vals[1] = (cal->big_s - cal->small_s) /
                           ((double)(P - 1) * GCX_SPARSE_CAL_BYTES);
            cal->vals[2] = gcx_sparse_measure_merge();
            gcx_task_init(&cal->rd_task, &gcx_sparse_pseudo_ops,
                          t->super.comm);
            cal->rd_task.seq       = t->super.seq;
            cal->rd_task.step_base = t->super.step_base + GCX_SPARSE_SLOT(3);
            gcx_rd_start(&cal->rd, &cal->rd_task, cal->vals, cal->tmp, 3,
                         GCX_DT_F64, GCX_OP_MAX);
            cal->stage = 2;
            break;
        default:
            state = gcx_rd_progress(&cal->rd);
            if (state < 0) {
                t->super.status = cal->rd_task.status;
                return -1;
            }
            if (state == 0) {
                return 0;
            }
            t->alpha = cal->vals[0] > 1e-7 ? cal->vals[0] : 1e-7;
            t->beta  = cal->vals[1] > 1e-12 ? cal->vals[1] : 1e-12;
            t->gamma = cal->vals[2] > 1e-12 ? cal->vals[2] : 1e-12;
            {
                gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);

                e->alpha = t->alpha;
                e->beta  = t->beta;
                e->gamma = t->gamma;
            }
            gcx_info("sparse allreduce: measured alpha %.1f us, link %.3f "
                     "Gbit/s, merge %.1f ns/pair (set GCX_NET_LATENCY_US / "
                     "GCX_NET_BANDWIDTH_GBPS to skip)",
                     t->alpha * 1e6, 8.0 / t->beta / 1e9, t->gamma * 1e9);
            gcx_sparse_cal_free(cal);
            t->algo_state = NULL;
            return 1;
        }
    }
}

/* ---- feedback ------------------------------------------------------------- */

static int gcx_sparse_feedback_on(const gcx_sparse_task_t *t)
{
    return t->algo_id == GCX_SPARSE_ALGO_AUTO &&
           t->super.comm->config.sparse_feedback;
}

/* Bucket of a modelled time: factor-of-2 steps from GCX_SPARSE_FB_BUCKET0. */
static int gcx_sparse_fb_bucket(double model)
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
static int gcx_sparse_fb_count(const gcx_sparse_fb_t *fb, size_t a, int b)
{
    return fb->calls[b] - fb->since[a][b] < GCX_SPARSE_FB_EXPIRE ?
               fb->count[a][b] : 0;
}

/* The live ratio of algorithm @p a in bucket @p b, the median of its last
 * records (the lower middle of an even count: of two, the second call on
 * warmer connections); 0: unknown or expired. */
static double gcx_sparse_fb_ratio(const gcx_sparse_fb_t *fb, size_t a, int b)
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
static void gcx_sparse_fb_pack(gcx_sparse_task_t *t, int64_t *rec)
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
static void gcx_sparse_fb_fold(gcx_sparse_task_t *t)
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
static void gcx_sparse_fb_record(gcx_sparse_task_t *t)
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

/* ---- selection ------------------------------------------------------------ */

static const gcx_sparse_algo_t *gcx_sparse_find(int id)
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
static const gcx_sparse_algo_t *gcx_sparse_select(gcx_sparse_task_t *t)
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

/* ---- epilogue ------------------------------------------------------------- */

static void gcx_sparse_mark(gcx_sparse_task_t *t, const uint32_t *idx,
                            size_t n)
{
    size_t j, o = 0;

    if (t->in_result == NULL) {
        return;
    }
    for (j = 0; j < t->in_nnz; ++j) {
        while (o < n && idx[o] < t->in_idx[j]) {
            ++o;
        }
        t->in_result[j] = o < n && idx[o] == t->in_idx[j];
    }
}

/* Top-k, capacity check, outputs. Sets the final status. */
static void gcx_sparse_finish(gcx_sparse_task_t *t)
{
    int       P = t->super.comm->size, r;
    uint32_t *fi = t->res_idx;
    float    *fv = t->res_val;
    size_t    fn = t->res_n;

    if (t->res_dense) { /* dense_only: whole union, no flags to compute */
        if (t->in_result != NULL) {
            memset(t->in_result, 1, t->in_nnz);
        }
        t->super.status = GCX_OK;
        return;
    }
    if (t->union_nnz == 0) {
        t->union_nnz = t->res_n;
    }
    gcx_sparse_topk_t sel;
    int64_t           gt, take;
    int               select = t->topk > 0 && !t->topk_done;

    if (select) {
        gcx_sparse_topk_local(&sel, t->topk, t->res_val, t->res_n, &gt,
                              &take);
        fn = gcx_sparse_topk_count(&sel, 0);
    }
    if (t->sparse_out != NULL) { /* every rank decides alike */
        for (r = 0; r < P; ++r) {
            if ((uint64_t)t->info[(size_t)r * t->info_len + 1] < fn) {
                gcx_error("sparse allreduce #%u: rank %d's sparse_out "
                          "capacity %lld is smaller than the result (%zu "
                          "entries); nothing written",
                          t->super.seq, r,
                          (long long)t->info[(size_t)r * t->info_len + 1],
                          fn);
                t->super.status = GCX_ERR_MISMATCH;
                return;
            }
        }
    }
    if (select) {
        if (t->sparse_out != NULL) {
            fi = t->sparse_out->idx;
            fv = t->sparse_out->val;
            t->res_in_out = 1;
        } else {
            t->fin_idx = malloc(fn * sizeof(uint32_t) + 1);
            t->fin_val = malloc(fn * sizeof(float) + 1);
            if (t->fin_idx == NULL || t->fin_val == NULL) {
                t->super.status = GCX_ERR_NOMEM;
                return;
            }
            fi = t->fin_idx;
            fv = t->fin_val;
        }
        gcx_sparse_topk_apply(&sel, 0, t->res_idx, t->res_val, t->res_n, fi,
                              fv);
    }
    if (t->sparse_out != NULL) {
        if (!t->res_in_out && fn > 0) {
            memcpy(t->sparse_out->idx, fi, fn * sizeof(*fi));
            memcpy(t->sparse_out->val, fv, fn * sizeof(*fv));
        }
        t->sparse_out->nnz       = fn;
        t->sparse_out->dense_len = t->N;
    }
    if (t->dense_out != NULL) {
        memset(t->dense_out, 0, t->N * sizeof(float));
        gcx_sparse_add_to_dense(fi, fv, fn, t->N, t->dense_out);
    }
    if (t->topk > 0) {
        gcx_sparse_mark(t, fi, fn);
    } else if (t->in_result != NULL) {
        memset(t->in_result, 1, t->in_nnz);
    }
    t->super.status = GCX_OK;
}

/* ---- the task ------------------------------------------------------------- */

static void gcx_sparse_start_algo(gcx_sparse_task_t *t)
{
    int id = t->algo_id;

    t->algo  = id == GCX_SPARSE_ALGO_AUTO ? gcx_sparse_select(t) :
                                            gcx_sparse_find(id);
    if (id != GCX_SPARSE_ALGO_AUTO) {
        gcx_info("sparse allreduce #%u: N %zu, P %d, nnz sum %zu max %zu -> "
                 "%s (GCX_SPARSE_ALGO or the call's option)",
                 t->super.seq, t->N, t->super.comm->size, t->nnz_sum,
                 t->nnz_max, t->algo->name);
    }
    t->phase = GCX_SPARSE_PHASE_ALGO;
    t->fb_t0 = gcx_time_now();
    t->algo->start(t);
}

static void gcx_sparse_progress(gcx_task_t *task)
{
    gcx_sparse_task_t *t = (gcx_sparse_task_t *)task;
    int                P = task->comm->size, r, state;

    while (task->status == GCX_INPROGRESS) {
        switch (t->phase) {
        case GCX_SPARSE_PHASE_INFO:
            if (gcx_coll_subtask_progress(task, t->sub) <= 0) {
                return;
            }
            t->sub->ops->finalize(t->sub);
            t->sub     = NULL;
            t->nnz_sum = t->nnz_max = 0;
            for (r = 0; r < P; ++r) {
                t->nnz[r] = (size_t)t->info[(size_t)r * t->info_len];
                t->nnz_sum += t->nnz[r];
                if (t->nnz[r] > t->nnz_max) {
                    t->nnz_max = t->nnz[r];
                }
            }
            gcx_sparse_fb_fold(t);
            t->union_est = 0; /* sketches are only sent for auto */
            if (t->sketched) {
                gcx_sparse_comm_state_t *e = gcx_sparse_state(task->comm);

                t->union_est = gcx_sparse_sketch_union(
                    t->info + GCX_SPARSE_INFO_SKETCH(P), P, t->info_len);
                e->union_ratio = t->nnz_sum > 0 ?
                                     t->union_est / (double)t->nnz_sum : 0;
            } else if (t->algo_id == GCX_SPARSE_ALGO_AUTO) {
                /* the last sketch's overlap */
                t->union_est = gcx_sparse_state(task->comm)->union_ratio *
                               (double)t->nnz_sum;
            }
            if (t->union_est > 0 && t->union_est < (double)t->nnz_max) {
                t->union_est = (double)t->nnz_max;
            }
            if (t->union_est > (double)t->nnz_sum) {
                t->union_est = (double)t->nnz_sum;
            }
            if (t->algo_id == GCX_SPARSE_ALGO_AUTO && P > 1 &&
                !gcx_sparse_model_params(t)) {
                t->phase = GCX_SPARSE_PHASE_CALIBRATE;
                gcx_sparse_cal_start(t);
                break;
            }
            if (t->alpha == 0) {
                gcx_sparse_model_params(t);
            }
            gcx_sparse_start_algo(t);
            break;
        case GCX_SPARSE_PHASE_CALIBRATE:
            if (gcx_sparse_cal_progress(t) <= 0) {
                return;
            }
            gcx_sparse_start_algo(t);
            /* not recorded: it runs on links the calibration's 4(P-1) MB
             * just filled (recursive doubling, first at 0.01% on the
             * emulated cluster, took 4-7x its model here, 1.0-1.2x later) */
            t->fb_algo = 0;
            break;
        case GCX_SPARSE_PHASE_ALGO:
            state = t->algo->progress(t);
            if (state <= 0) {
                return;
            }
            t->phase = GCX_SPARSE_PHASE_DONE;
            gcx_sparse_finish(t);
            if (task->status == GCX_OK) {
                gcx_sparse_save_stats(t);
                gcx_sparse_fb_record(t);
            }
            return;
        default:
            return;
        }
    }
}

static void gcx_sparse_post(gcx_task_t *task)
{
    gcx_sparse_task_t *t = (gcx_sparse_task_t *)task;
    int                P = task->comm->size, r;
    size_t             L = t->info_len;

    t->bytes_sent = 0;
    /* packed now, not at submission: the previous call on this
     * communicator has finished and recorded its time on every rank */
    gcx_sparse_fb_pack(t, t->info_send + GCX_SPARSE_INFO_FB(P));
    t->sub = gcx_ring_create(task->comm, GCX_RING_ALLGATHER, t->info,
                             t->info_send, t->nnz /* counts: reused below */,
                             t->nnz + P, GCX_DT_I64, GCX_OP_SUM, 0);
    if (t->sub == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    for (r = 0; r < P; ++r) { /* ring gets P-1 of the P records out */
        if (r != gcx_coll_mod(task->comm->rank + 1, P)) {
            t->bytes_sent += L * sizeof(int64_t);
        }
    }
    if (P == 1) {
        t->bytes_sent = 0;
    }
    gcx_coll_subtask_post(task, t->sub, GCX_SPARSE_SLOT(0));
    gcx_sparse_progress(task);
}

static void gcx_sparse_finalize(gcx_task_t *task)
{
    gcx_sparse_task_t *t = (gcx_sparse_task_t *)task;

    if (t->sub != NULL) {
        t->sub->ops->finalize(t->sub);
    }
    if (t->phase == GCX_SPARSE_PHASE_CALIBRATE && t->algo_state != NULL) {
        gcx_sparse_cal_free(t->algo_state);
    } else if (t->algo != NULL && t->algo->cleanup != NULL) {
        t->algo->cleanup(t);
    }
    free(t->fin_idx);
    free(t->fin_val);
    free(t->info_send);
    free(t);
}

static const gcx_task_ops_t gcx_sparse_ops = {
    .name     = "sparse allreduce",
    .post     = gcx_sparse_post,
    .progress = gcx_sparse_progress,
    .finalize = gcx_sparse_finalize,
};

/* ---- API ---------------------------------------------------------------- */

/* Index strictly increasing and < N? Logs the first bad position. */
static int gcx_sparse_input_ok(const gcx_comm_t *comm,
                               const gcx_sparse_t *in)
{
    size_t j;

    if (in->nnz > in->capacity || in->dense_len > ((size_t)1 << 32)) {
        gcx_error("gcx_sparse_allreduce: rank %d: nnz %zu > capacity %zu or "
                  "dense length %zu > 2^32",
                  comm->rank, in->nnz, in->capacity, in->dense_len);
        return 0;
    }
    for (j = 0; j < in->nnz; ++j) {
        if (in->idx[j] >= in->dense_len) {
            gcx_error("gcx_sparse_allreduce: rank %d: index %u at position "
                      "%zu is not below the dense length %zu",
                      comm->rank, in->idx[j], j, in->dense_len);
            return 0;
        }
        if (j > 0 && in->idx[j] <= in->idx[j - 1]) {
            gcx_error("gcx_sparse_allreduce: rank %d: indices not strictly "
                      "increasing at position %zu (%u after %u)%s",
                      comm->rank, j, in->idx[j], in->idx[j - 1],
                      in->idx[j] == in->idx[j - 1] ? ": duplicate" : "");
            return 0;
        }
    }
    return 1;
}

/* The call's algorithm: opts->algo by name, one of GCX_SPARSE_ALGO's values
 * (their index is the GCX_SPARSE_ALGO_* id), else the communicator's
 * GCX_SPARSE_ALGO; -1 and an error naming the choices for an unknown name. */
static int gcx_sparse_algo_id(const gcx_comm_t *comm,
                              const gcx_sparse_allreduce_opts_t *opts)
{
    const gcx_config_entry_t *entry;
    char                      accepted[256];
    int                       i;

    if (opts == NULL || opts->algo == NULL) {
        return comm->config.sparse_algo;
    }
    entry = gcx_config_find("SPARSE_ALGO");
    for (i = 0; gcx_config_enum_name(entry, i) != NULL; ++i) {
        if (!strcmp(opts->algo, gcx_config_enum_name(entry, i))) {
            return i;
        }
    }
    gcx_config_accepted(entry, accepted, sizeof(accepted));
    gcx_error("gcx_sparse_allreduce: unknown algorithm '%s' in opts->algo "
              "(accepted: %s)", opts->algo, accepted);
    return -1;
}

gcx_status_t gcx_sparse_allreduce(gcx_comm_t *comm, const gcx_sparse_t *input,
                                  float *dense_out, gcx_sparse_t *sparse_out,
                                  const gcx_sparse_allreduce_opts_t *opts,
                                  gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_sparse_task_t   *t;
    size_t               topk = opts != NULL ? opts->topk : 0;
    size_t               L, q;
    int                  P, local_error, algo_id;

    if (comm == NULL || input == NULL ||
        (dense_out == NULL && sparse_out == NULL) ||
        (input->nnz > 0 && (input->idx == NULL || input->val == NULL)) ||
        (sparse_out != NULL && sparse_out->capacity > 0 &&
         (sparse_out->idx == NULL || sparse_out->val == NULL)) ||
        (sparse_out != NULL && input->nnz > 0 &&
         (sparse_out->idx == input->idx || sparse_out->val == input->val))) {
        gcx_error("gcx_sparse_allreduce: invalid arguments (comm %p, input "
                  "%p, dense_out %p, sparse_out %p)",
                  (void *)comm, (const void *)input, (void *)dense_out,
                  (void *)sparse_out);
        return GCX_ERR_INVALID;
    }
    algo_id = gcx_sparse_algo_id(comm, opts);
    if (algo_id < 0) {
        return GCX_ERR_INVALID;
    }
    P = comm->size;
    if (P > GCX_SPARSE_MAX_RANKS) {
        gcx_error("gcx_sparse_allreduce: at most %d ranks",
                  GCX_SPARSE_MAX_RANKS);
        return GCX_ERR_UNSUPPORTED;
    }
    local_error = !gcx_sparse_input_ok(comm, input);
    L = GCX_SPARSE_INFO_LEN(P);
    if (gcx_sparse_state_create(comm) != GCX_OK ||
        (t = calloc(1, sizeof(*t))) == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&t->super, &gcx_sparse_ops, comm);
    /* one allocation: info_send (L), info (P·L), nnz (P) + displs (P) */
    t->info_send = malloc((L + (size_t)P * L) * sizeof(int64_t) +
                          2 * (size_t)P * sizeof(size_t));
    if (t->info_send == NULL) {
        free(t);
        return GCX_ERR_NOMEM;
    }
    t->info     = t->info_send + L;
    t->nnz      = (size_t *)(t->info + (size_t)P * L);
    t->info_len = L;
    t->in_idx   = input->idx;
    t->in_val   = input->val;
    t->in_nnz   = local_error ? 0 : input->nnz;
    t->N        = input->dense_len;
    t->dense_out  = dense_out;
    t->sparse_out = sparse_out;
    t->in_result  = opts != NULL ? opts->in_result : NULL;
    t->topk       = topk;
    t->algo_id    = algo_id;
    t->dense_only = dense_out != NULL && sparse_out == NULL && topk == 0;
    t->info_send[0] = (int64_t)t->in_nnz;
    t->info_send[1] = sparse_out != NULL ? (int64_t)sparse_out->capacity :
                                           INT64_MAX;
    for (q = 1; q < (size_t)P; ++q) { /* quantile q/P of the local indices */
        t->info_send[1 + q] =
            t->in_nnz > 0 ? (int64_t)t->in_idx[q * t->in_nnz / (size_t)P] :
                            (int64_t)(q * t->N / (size_t)P);
    }
    if (t->algo_id == GCX_SPARSE_ALGO_AUTO &&
        gcx_sparse_state(comm)->calls++ % GCX_SPARSE_SKETCH_EVERY == 0) {
        t->sketched = 1; /* for the model; every rank counts alike */
        gcx_sparse_sketch(t->in_idx, t->in_nnz,
                          t->info_send + GCX_SPARSE_INFO_SKETCH(P));
    } else {
        gcx_sparse_sketch(NULL, 0, t->info_send + GCX_SPARSE_INFO_SKETCH(P));
    }
    for (q = 0; q < (size_t)P; ++q) { /* ring counts/displs for the info */
        t->nnz[q]                 = L;
        t->nnz[(size_t)P + q]     = q * L;
    }
    signature.coll        = GCX_COLL_INTERNAL + 0x5a; /* sparse allreduce */
    signature.count       = t->N;
    signature.dtype       = GCX_DT_F32;
    signature.op          = GCX_OP_SUM;
    signature.extra       = gcx_coll_hash(
        gcx_coll_hash(0, &topk, sizeof(topk)), &algo_id, sizeof(algo_id));
    signature.local_error = local_error;
    return gcx_coll_submit_checked(comm, &t->super, &signature, req_p);
}
