/*
 * balanced_split.c - split sparse allreduce with balanced index ranges
 * (the partitioning of Ok-Topk).
 *
 * Idea: gradients' top-k indices cluster (layers differ in magnitude), so
 * N/P-wide ranges give one owner most of the pairs. Every rank already
 * sent its P-1 local index quantiles in the info exchange (the index at
 * position q·nnz/P, q = 1..P-1); the boundary b_q is their average weighted
 * by nnz, so every owner receives about Σnnz/P pairs. Then the split
 * engine runs (split.c), top-k included. The boundaries are computed from
 * exchanged data only, so every rank computes the same ones.
 * Cost: the split engine's with load_max ≈ Σnnz/P: α·(P-1) +
 * 8(P-1)/P·(k + K)·β (+ 3(P-1)·α), 2·8k(P-1)/P·β with top-k: the lower
 * bound for COO sparse allreduce. The P+1 bounds are written into the
 * engine's state (O(P) per call, nothing on the stack).
 */
#include "sparse_allreduce.h"

size_t gcx_sparse_balanced_bound(const gcx_sparse_model_t *m, int q,
                                 size_t prev)
{
    int    P = m->P, r;
    size_t bound, len;
    double b = 0;

    if (q <= 0) {
        return 0;
    }
    if (q >= P) {
        return m->N;
    }
    if (m->nnz_sum == 0) {
        gcx_coll_block(m->N, P, q, &bound, &len);
    } else {
        for (r = 0; r < P; ++r) {
            b += (double)m->nnz[r] *
                 (double)m->quant[(size_t)r * m->quant_stride + (size_t)q - 1];
        }
        bound = (size_t)(b / (double)m->nnz_sum);
    }
    if (bound < prev) {
        bound = prev;
    }
    return bound > m->N ? m->N : bound;
}

void gcx_sparse_balanced_bounds(const gcx_sparse_model_t *m, size_t *bounds)
{
    int q;

    bounds[0] = 0;
    for (q = 1; q <= m->P; ++q) {
        bounds[q] = gcx_sparse_balanced_bound(m, q, bounds[q - 1]);
    }
}

static void gcx_sparse_balanced_start(gcx_sparse_task_t *t)
{
    gcx_sparse_split_start(t, gcx_sparse_balanced_bounds);
}

const gcx_sparse_algo_t gcx_sparse_algo_balanced_split = {
    .id       = GCX_SPARSE_ALGO_BALANCED_SPLIT,
    .cost     = gcx_sparse_cost_balanced_split, /* select.c */
    .start    = gcx_sparse_balanced_start,
    .progress = gcx_sparse_split_progress,
    .cleanup  = gcx_sparse_split_cleanup,
};
