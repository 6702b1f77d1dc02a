/*
 * sparse_allreduce.h - what the sparse allreduce algorithms share (internal).
 *
 * One top-level task (sparse_allreduce.c) runs: argument check (by
 * gcx_coll_submit_checked) -> info exchange (every rank's nnz, sparse_out
 * capacity and P-1 index quantiles, one small ring allgather) -> selection
 * (the same on every rank: it reads only exchanged data) -> the algorithm
 * -> the common epilogue (top-k if the algorithm did not do it, capacity
 * check, outputs, in_result flags).
 *
 * An algorithm leaves the result in one of two forms: a sorted list
 * (res_idx, res_val, res_n) that every rank holds in full, or the dense sum
 * in dense_out (res_dense, only when the caller asked for dense output
 * alone and no top-k: then the support is not needed).
 *
 * Wire format of a variable-size sparse message: indices then values of the
 * same m pairs (8m bytes), sent as an iov of two pieces straight from the
 * sender's arrays and received into one buffer of a known upper bound, so m
 * = length / 8 and nothing can overrun. Where dense messages are possible
 * (recursive doubling) a dense vector is 4N bytes, which no sparse message
 * reaches (sparse messages have m < N/2 pairs).
 */
#ifndef GCX_SPARSE_ALLREDUCE_H
#define GCX_SPARSE_ALLREDUCE_H

#include "coll/coll.h"
#include "feedback.h"
#include "model.h"

#include <gcx/sparse.h>
#include <stdint.h>

/*
 * Tag step slots inside the task's range (one per sub-task or exchange).
 * A ring of P ranks takes P-1 steps, more than a slot holds past 1025
 * ranks: the rings (gcx_sparse_ring) wrap their steps inside their slot
 * (step_span, coll.h's gcx_coll_tag), so any P the transport carries fits.
 */
#define GCX_SPARSE_SLOT_WIDTH 0x400u
#define GCX_SPARSE_SLOT(_i)   ((uint32_t)(_i) * GCX_SPARSE_SLOT_WIDTH)

/**
 * Tests only: make the sparse allreduce's rings wrap their steps every
 * @p span steps (1..GCX_SPARSE_SLOT_WIDTH; 0: the slot width, the default)
 * so that a handful of ranks wraps as more than 1025 do. Call it before the
 * first call, with the same span on every rank.
 */
void gcx_sparse_test_step_span(uint32_t span);

/* GCX_SPARSE_ALGO values (and opts->algo names): ids of
 * gcx_sparse_algo_names */
enum {
    GCX_SPARSE_ALGO_AUTO = 0,
    GCX_SPARSE_ALGO_ALLGATHER,
    GCX_SPARSE_ALGO_RECURSIVE_DOUBLING,
    GCX_SPARSE_ALGO_SPLIT,
    GCX_SPARSE_ALGO_BALANCED_SPLIT,
};

/** The algorithms' one table of names (select.c), indexed by id, ending
 *  with a NULL name: the GCX_SPARSE_ALGO row's accepted values, opts->algo,
 *  the selection's log lines and gcx_sparse_allreduce_stats_t's algo. */
extern const gcx_config_value_t gcx_sparse_algo_names[];

typedef struct gcx_sparse_task gcx_sparse_task_t;

/** One row of the algorithm table; its name and description are
 *  gcx_sparse_algo_names[id]. */
typedef struct gcx_sparse_algo {
    int         id; /* GCX_SPARSE_ALGO value */
    /** Predicted seconds (model.h; the same on every rank). */
    double (*cost)(const gcx_sparse_model_t *m);
    /** Start (allocate, post); sets t->super.status on failure. */
    void (*start)(gcx_sparse_task_t *t);
    /** Bounded work: 1 done (result set), 0 in progress, -1 failed. */
    int (*progress)(gcx_sparse_task_t *t);
    /** Free the algorithm's state (t->algo_state); may be called at any
     *  time after start, also when it failed. */
    void (*cleanup)(gcx_sparse_task_t *t);
} gcx_sparse_algo_t;

/** Radix top-k selection over rows of entries (one row per owner). */
typedef struct gcx_sparse_topk {
    int      rows;
    int      round;  /* 0..3: which 8-bit digit of |v|'s bits */
    int      done;
    int      all;    /* the union is not larger than k: keep everything */
    uint32_t prefix; /* digits chosen so far */
    size_t   k;
    int64_t  need;   /* still to choose among entries matching prefix */
    int64_t  total;  /* entries over all rows (known after round 0) */
    int64_t *gt;     /* per row: entries strictly above the threshold */
    int64_t *take;   /* per row: ties (== threshold) kept, lowest index first */
} gcx_sparse_topk_t;

struct gcx_sparse_task {
    gcx_task_t super;
    /* arguments */
    const uint32_t *in_idx;
    const float    *in_val;
    size_t          in_nnz;
    size_t          N;
    float          *dense_out;
    gcx_sparse_vec_t *sparse_out;
    uint8_t        *in_result;
    size_t          topk;
    int             dense_only; /* result may be delivered dense */
    /* info exchange: per rank [nnz, capacity, P-1 quantiles, sketch,
     * feedback record, model record] (GCX_SPARSE_INFO_* offsets) */
    size_t          info_len;
    int64_t        *info_send;
    int64_t        *info;
    size_t         *nnz;        /* per rank */
    size_t          nnz_sum, nnz_max;
    int             phase;
    gcx_task_t     *sub;
    double          alpha, beta; /* s, s/byte */
    double          gamma;       /* s per pair written by a merge */
    double          union_est;   /* union size from the sketches; 0: none */
    int             sketched;    /* this call carries every rank's sketch */
    /* feedback (auto): what the chosen algorithm was modelled to cost */
    int             fb_algo;     /* index in the table + 1; 0: no record */
    int             fb_bucket;
    double          fb_model;    /* s, uncorrected */
    double          fb_t0;       /* when the algorithm started */
    /* algorithm */
    int             algo_id;    /* GCX_SPARSE_ALGO_*: the call's option, or
                                   the communicator's GCX_SPARSE_ALGO */
    const gcx_sparse_algo_t *algo;
    void           *algo_state;
    /* result */
    uint32_t       *res_idx;
    float          *res_val;
    size_t          res_n;
    int             res_dense;  /* the sum is in dense_out */
    int             res_in_out; /* res_* are sparse_out's arrays */
    int             topk_done;  /* res is already the global top-k */
    uint64_t        union_nnz;  /* K before top-k, 0 if unknown */
    uint64_t        bytes_sent;
    /* epilogue */
    uint32_t       *fin_idx;    /* owned buffer for a top-k result */
    float          *fin_val;
};

/* ---- the algorithms (one file each) ------------------------------------ */

extern const gcx_sparse_algo_t gcx_sparse_algo_allgather;
extern const gcx_sparse_algo_t gcx_sparse_algo_rd;
extern const gcx_sparse_algo_t gcx_sparse_algo_split;
extern const gcx_sparse_algo_t gcx_sparse_algo_balanced_split;

/* ---- shared by several algorithms (sparse_kernels.c, split.c) ---------- */

/** Sorted merge-sum of two sorted lists into o (room for an + bn). */
size_t gcx_sparse_merge2(const uint32_t *ai, const float *av, size_t an,
                         const uint32_t *bi, const float *bv, size_t bn,
                         uint32_t *oi, float *ov);

/**
 * Merge-sum @p nl sorted lists (pairwise, as a tree: log2(nl) passes) using
 * two work buffers of room for the sum of their lengths each. The result
 * is one of the inputs (nl == 1) or lies in a work buffer.
 */
void gcx_sparse_merge_lists(uint32_t **idx, float **val, size_t *n, int nl,
                            uint32_t *w0i, float *w0v, uint32_t *w1i,
                            float *w1v, uint32_t **oi_p, float **ov_p,
                            size_t *on_p);

/** dense[idx[j]] += val[j] for validated indices (any order). */
void gcx_sparse_add_to_dense(const uint32_t *idx, const float *val, size_t n,
                             size_t N, float *dense);

/** Split a received [indices | values] message of @p bytes. */
int gcx_sparse_parse_msg(gcx_task_t *task, int peer, void *buf, size_t bytes,
                         uint32_t **idx_p, float **val_p, size_t *n_p);

/** Top-k selection: start (gt and take hold rows entries each). */
void gcx_sparse_topk_init(gcx_sparse_topk_t *sel, int rows, size_t k,
                          int64_t *gt, int64_t *take);
/** Add this round's 256-bin histogram of @p val to @p hist. */
void gcx_sparse_topk_hist(const gcx_sparse_topk_t *sel, const float *val,
                          size_t n, int64_t *hist);
/** Consume the rows' histograms (rows x 256) of this round. */
void gcx_sparse_topk_step(gcx_sparse_topk_t *sel, const int64_t *hist);
/** Entries row @p row keeps (after done; with sel->all only for 1 row). */
size_t gcx_sparse_topk_count(const gcx_sparse_topk_t *sel, int row);
/** Copy the kept entries of row @p row to o (may be the input); count. */
size_t gcx_sparse_topk_apply(const gcx_sparse_topk_t *sel, int row,
                             const uint32_t *idx, const float *val, size_t n,
                             uint32_t *oi, float *ov);
/** Select locally over one full list (no communication). */
void gcx_sparse_topk_local(gcx_sparse_topk_t *sel, size_t k,
                           const float *val, size_t n, int64_t *gt,
                           int64_t *take);

/*
 * Union-size sketch (KMV, "k minimum values"): the GCX_SPARSE_SKETCH
 * smallest 64-bit hashes of a rank's indices, ascending, padded with
 * INT64_MIN-encoded UINT64_MAX (as int64: -1). Sketches merge by taking the
 * smallest distinct values of their union; the union of P index sets then
 * has about (S-1)/u_S elements, u_S the S-th smallest hash / 2^64 (relative
 * error ~1/sqrt(S-2), ~18% at S = 32). Cost: O(n) hashes and compares.
 */
#define GCX_SPARSE_SKETCH 32

void gcx_sparse_sketch(const uint32_t *idx, size_t n, int64_t *sketch);

/* Union size of P ranks from their sketches at @p stride int64 apart. */
double gcx_sparse_sketch_union(const int64_t *sketches, int P, size_t stride);

/* Feedback record after the sketch in each info record (feedback.h:
 * GCX_SPARSE_FB_LEN int64), then the model record: the sender's count of
 * auto calls before this one, its union ratio and its α, β, γ (doubles as
 * their bits; 0: not measured). */
#define GCX_SPARSE_INFO_SKETCH(_P) (1 + (size_t)(_P))
#define GCX_SPARSE_INFO_FB(_P)     (1 + (size_t)(_P) + GCX_SPARSE_SKETCH)
#define GCX_SPARSE_INFO_MODEL(_P)  (GCX_SPARSE_INFO_FB(_P) + GCX_SPARSE_FB_LEN)
#define GCX_SPARSE_MODEL_LEN       5
#define GCX_SPARSE_INFO_LEN(_P)    (GCX_SPARSE_INFO_MODEL(_P) + GCX_SPARSE_MODEL_LEN)

/*
 * What every rank takes from the exchanged info records, whatever it holds
 * itself: a call's choice rests on these and the records alone, never on
 * one rank's own state, which a call that failed on some ranks (or a
 * GCX_NET_* variable set on one rank) can leave different. A sketch is used
 * when every rank sent one; the auto-call count goes on from the largest
 * (so the ranks' sketch schedules meet again after any divergence); the
 * union ratio and α, β, γ are rank 0's.
 */
typedef struct gcx_sparse_agreed {
    int      sketched;           /* every rank sent its union sketch */
    uint64_t calls;              /* auto calls counted after this one */
    double   union_ratio;        /* rank 0's: union / nnz sum, in [0, 1] */
    double   alpha, beta, gamma; /* rank 0's; 0: to be measured */
} gcx_sparse_agreed_t;

/* Pack this rank's model record (GCX_SPARSE_MODEL_LEN int64) at @p rec. */
void gcx_sparse_model_pack(int64_t *rec, uint64_t calls, double union_ratio,
                           double alpha, double beta, double gamma);

/* The agreed inputs of a call from P valid records (gcx_sparse_info_parse
 * accepted them); @p is_auto: the call's algorithm is auto. Pure. */
void gcx_sparse_info_agree(const int64_t *info, int P, size_t stride,
                           int is_auto, gcx_sparse_agreed_t *agreed);

/*
 * Seconds per output pair of gcx_sparse_merge2() into freshly allocated
 * memory (page faults included, as every call allocates its work arrays):
 * the best of 2 merges of two interleaved 1M-pair lists (beyond the caches,
 * as the lists that make merges matter), run by every rank
 * at once (so sharing cores and memory bandwidth is part of it). Local; the
 * calibration agrees on the MAX over ranks.
 */
double gcx_sparse_measure_merge(void);

/* γ when α and β come from GCX_NET_* and nothing was measured (x86-64). */
#define GCX_SPARSE_DEFAULT_GAMMA 10e-9

/*
 * A ring allgather of the sparse allreduce (counts/displs in elements, as
 * gcx_ring_create): its chunks stay tagged under GCX_RING_EAGER=auto, since
 * eager copies compete with the merges for the CPU (1-8% slower at 1%
 * density, 4 ranks on the emulated cluster). Its P-1 steps wrap every
 * GCX_SPARSE_SLOT_WIDTH (step_span), so it must be posted at a slot's
 * start with the whole slot to itself.
 */
gcx_task_t *gcx_sparse_ring(gcx_comm_t *comm, void *buf, const void *src,
                            const size_t *counts, const size_t *displs,
                            gcx_dtype_t dtype);

/**
 * The split engine (split.c): sparse reduce-scatter by the index ranges
 * [bounds[j], bounds[j+1]) owned by rank j, then sparse or dense allgather.
 * @p ranges writes the P+1 bounds from the task's model (model.h: the
 * even or the balanced ones) into the engine's state.
 */
void gcx_sparse_split_start(gcx_sparse_task_t *t,
                            void (*ranges)(const gcx_sparse_model_t *m,
                                           size_t *bounds));
int  gcx_sparse_split_progress(gcx_sparse_task_t *t);
void gcx_sparse_split_cleanup(gcx_sparse_task_t *t);

/* ---- the collective's parts (sparse_allreduce.c, calibrate.c, feedback.c,
 * select.c) ---------------------------------------------------------------- */

/** The algorithm table (select.c), indexed by GCX_SPARSE_A_* (feedback.h). */
extern const gcx_sparse_algo_t *const gcx_sparse_algos[GCX_SPARSE_NALGOS];

#define GCX_SPARSE_SKETCH_EVERY 16 /* auto calls per union sketch */

/* Per-communicator memory: measured α/β/γ, the feedback table and the last
 * call's stats (comm->state, released with the communicator). */
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
     * union / nnz sum stands in. Both change only once the info records
     * were exchanged, from what every rank received (gcx_sparse_agreed_t):
     * a call that failed before that leaves them as they were. */
    uint64_t                     calls;
    double                       union_ratio;
} gcx_sparse_comm_state_t;

/* The sparse allreduce's index in every communicator's state[] (taken once
 * from the core with gcx_comm_state_slot()); -1 when none is free. */
int gcx_sparse_state_slot(void);

/* The state of @p comm (see comm.h); NULL when never created. */
static inline gcx_sparse_comm_state_t *gcx_sparse_state(const gcx_comm_t *comm)
{
    int slot = gcx_sparse_state_slot();

    /* the cast: C++ tests include this header too */
    return slot < 0 ? NULL : (gcx_sparse_comm_state_t *)comm->state[slot].data;
}

/**
 * The P exchanged info records (rank r's at @p info + r·@p stride, the
 * GCX_SPARSE_INFO_* layout) of a call of dense length @p N: checks what the
 * rest reads from them (0 <= nnz <= N, capacity >= 0, the index quantiles
 * in [0, N] and non-decreasing, as a sorted input gives them) and takes
 * nnz[r], their sum and maximum. Pure: the fuzz target
 * tests/fuzz/fuzz_sparse.c calls it. @return -1 when every record is valid,
 * else the first rank whose record is not (nothing is taken then).
 */
int gcx_sparse_info_parse(const int64_t *info, int P, size_t stride, size_t N,
                          size_t *nnz, size_t *sum_p, size_t *max_p);

/* calibrate.c: α (s), β (s/byte) and γ (s/merged pair) into the task from
 * the variables or the measured cache; 0 when they still have to be
 * measured. */
int  gcx_sparse_model_params(gcx_sparse_task_t *t);
/* Measure them (the task's algo_state holds the calibration meanwhile). */
void gcx_sparse_cal_start(gcx_sparse_task_t *t);
/* 1 done (t->alpha, t->beta, t->gamma set), 0 in progress, -1 failed. */
int  gcx_sparse_cal_progress(gcx_sparse_task_t *t);
typedef struct gcx_sparse_cal gcx_sparse_cal_t;
void gcx_sparse_cal_free(gcx_sparse_cal_t *cal);

/* feedback.c, the task's side of the table (feedback.h): on for auto
 * calls with GCX_SPARSE_FEEDBACK; pack this rank's record of its last call
 * into the info record (and spend it); fold every rank's from the
 * exchanged info; keep this call's for the next. */
int  gcx_sparse_feedback_on(const gcx_sparse_task_t *t);
void gcx_sparse_fb_pack(gcx_sparse_task_t *t, int64_t *rec);
void gcx_sparse_fb_fold_info(gcx_sparse_task_t *t);
void gcx_sparse_fb_record(gcx_sparse_task_t *t);

/* select.c: the model's inputs from a task's exchanged info; the row of
 * GCX_SPARSE_ALGO id @p id; auto's choice for a task (sets its fb_*). */
void gcx_sparse_task_model(const gcx_sparse_task_t *t, gcx_sparse_model_t *m);
const gcx_sparse_algo_t *gcx_sparse_find(int id);
const gcx_sparse_algo_t *gcx_sparse_select(gcx_sparse_task_t *t);

#endif
