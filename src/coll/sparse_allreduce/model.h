/*
 * model.h - the cost model of the sparse allreduce and auto's choice
 * (internal; select.c, the bounds in split.c and balanced_split.c).
 *
 * Pure functions of a gcx_sparse_model_t: the network model (α, β, γ),
 * P, N, every rank's nnz and P-1 index quantiles, the union estimate, topk
 * and whether only the dense sum is wanted. No communicator: a task fills
 * one from its exchanged info (gcx_sparse_task_model), a test by hand.
 * Every rank holds the same inputs, so every rank predicts the same times
 * and makes the same choice. Cost: O(P) per prediction, O(P^2 log P) for
 * the split variants (each owner's load from every rank's quantiles), no
 * memory of their own (the ranges are computed bound by bound).
 */
#ifndef GCX_SPARSE_MODEL_H
#define GCX_SPARSE_MODEL_H

#include "feedback.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What the model reads (the same on every rank). */
typedef struct gcx_sparse_model {
    double         alpha;     /* s per message */
    double         beta;      /* s per byte */
    double         gamma;     /* s per pair written by a merge */
    int            P;         /* ranks, >= 1 */
    size_t         N;         /* dense length */
    const size_t  *nnz;       /* per rank */
    size_t         nnz_sum, nnz_max;
    /* rank r's index quantile q/P (q = 1..P-1), the index at position
     * q·nnz/P of its sorted list (q·N/P when it is empty), is
     * quant[r·quant_stride + q - 1]; non-decreasing in q, at most N (the
     * cdf's binary search relies on it) */
    const int64_t *quant;
    size_t         quant_stride;
    double         union_est; /* union size of all ranks (sketch); 0: none */
    size_t         topk;      /* 0: no top-k */
    int            dense_only; /* the result may be delivered dense */
} gcx_sparse_model_t;

/*
 * Union size of @p nranks of the P ranks' supports. With union_est (the
 * sketch of all P): linear in the ranks, k_avg·(1 + (r-1)·u) with u =
 * (union_est/k_avg - 1)/(P-1) clamped to [0, 1], at most N. Without it:
 * random independent supports, N·(1 - (1-d)^r), d = nnz_sum/(P·N).
 */
double gcx_sparse_union_estimate(const gcx_sparse_model_t *m, double nranks);

/** Estimated count of rank r's entries below x: piecewise linear through
 *  its quantiles (0 at 0, j·nnz/P at quantile j, nnz at N). O(log P). */
double gcx_sparse_rank_cdf(const gcx_sparse_model_t *m, int r, double x);

/** Split's ranges: N/P each (gcx_coll_block), P+1 bounds (split.c);
 *  bound @p q (0..P) alone. */
void   gcx_sparse_even_bounds(const gcx_sparse_model_t *m, size_t *bounds);
size_t gcx_sparse_even_bound(const gcx_sparse_model_t *m, int q);
/** Balanced split's: bound q = the nnz-weighted mean of the ranks' q-th
 *  quantiles, non-decreasing, at most N (balanced_split.c); bound @p q
 *  (0..P) alone from bound q-1 (@p prev), O(P). */
void   gcx_sparse_balanced_bounds(const gcx_sparse_model_t *m, size_t *bounds);
size_t gcx_sparse_balanced_bound(const gcx_sparse_model_t *m, int q,
                                 size_t prev);

/*
 * Predicted seconds of each algorithm (K = union of all P, S = nnz_sum):
 * allgather: 2(P-1)α + 8(S - nnz_min)β + γ·K·ceil(log2 P);
 * recursive doubling (p2 = 2^floor(log2 P), rem = P - p2): (rem > 0:
 * α + 8·nnz_max·β) + Σ_{j=1,2,..<p2} [α + β·m(P·j/p2) + γ·U(2P·j/p2)]
 * + (rem > 0: α + β·m(P)), m(r) = 8·U(r), at most 4N when dense_only;
 * split with ranges b: (P-1)α + 8β·max(nnz_max, load_max)·(P-1)/P
 * + γ·Kj_max·ceil(log2 P) + 3(P-1)α + (P-1)β·(4·width_max if dense_only
 * and 8K >= 4N, else 8·Kj_max) (+ 4(ceil(log2 P)+2)(α + 2048·P·β) with
 * top-k), K ← min(K, topk), Kj = K·load_j/S, load_j the pairs owner j
 * receives (from the quantiles).
 */
double gcx_sparse_cost_allgather(const gcx_sparse_model_t *m);
double gcx_sparse_cost_rd(const gcx_sparse_model_t *m);
double gcx_sparse_cost_split_ranges(const gcx_sparse_model_t *m,
                                    const size_t *bounds);
double gcx_sparse_cost_split(const gcx_sparse_model_t *m);
double gcx_sparse_cost_balanced_split(const gcx_sparse_model_t *m);

/** Auto's choice and what it was made from (indices: GCX_SPARSE_A_*). */
typedef struct gcx_sparse_choice {
    int    best;     /* the algorithm to run */
    int    explore;  /* 1: best runs to be measured (a contender short of
                        GCX_SPARSE_FB_SAMPLES records), not as the cheapest */
    int    bucket[GCX_SPARSE_NALGOS]; /* feedback bucket of model[] */
    int    count[GCX_SPARSE_NALGOS];  /* live records there */
    double model[GCX_SPARSE_NALGOS];  /* predicted s */
    double ratio[GCX_SPARSE_NALGOS];  /* measured/modelled; 0: none */
    double cost[GCX_SPARSE_NALGOS];   /* model × ratio (model when none) */
} gcx_sparse_choice_t;

/*
 * The cheapest by the corrected model (the first of equal ones). With a
 * feedback table (@p fb not NULL), explore first: while the cheapest has a
 * ratio, an algorithm whose cost is within GCX_SPARSE_FB_EXPLORE of it and
 * that has fewer than GCX_SPARSE_FB_SAMPLES records runs instead (the
 * cheapest such).
 */
void gcx_sparse_choose(const gcx_sparse_model_t *m, const gcx_sparse_fb_t *fb,
                       gcx_sparse_choice_t *c);

#ifdef __cplusplus
}
#endif

#endif
