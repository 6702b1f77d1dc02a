/*
 * allgather.c - allgather-based sparse allreduce (what Horovod, GRACE and
 * DGC do): the baseline.
 *
 * Idea: the nnz of every rank are known from the info exchange, so two
 * allgatherv rings (indices and values, running side by side) bring every
 * rank's pairs, sent straight from the caller's arrays, to every rank; then
 * each rank sums the P sorted lists itself (tree merge, or scatter-add
 * straight into dense_out when only the dense sum is wanted). Every rank
 * merges the same lists in the same order, so all hold the same bits.
 * Cost: 2(P-1)·α + 8·(S - nnz_min)·β with S = Σ nnz (about 8k(P-1)·β for
 * k pairs per rank), plus log2(P) local merge passes over S pairs. Simple
 * and latency-light, but the traffic grows with P and ignores overlap.
 * Memory: the S gathered pairs, 2S more for the merge, 40 bytes per rank.
 */
#include "sparse_allreduce.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_sparse_ag {
    uint32_t   *gi; /* S gathered indices, rank by rank */
    float      *gv;
    uint32_t   *wi; /* merge work: 2 x S pairs */
    float      *wv;
    size_t     *counts; /* P counts + P displs */
    uint32_t  **li;     /* the P gathered lists to merge (the merge */
    float     **lv;     /* rewrites these and the lengths ln) */
    size_t     *ln;
    gcx_task_t *ring_idx, *ring_val;
    int         done_idx, done_val;
} gcx_sparse_ag_t;

static void gcx_sparse_ag_cleanup(gcx_sparse_task_t *t)
{
    gcx_sparse_ag_t *ag = t->algo_state;

    if (ag == NULL) {
        return;
    }
    if (ag->ring_idx != NULL) {
        ag->ring_idx->ops->finalize(ag->ring_idx);
    }
    if (ag->ring_val != NULL) {
        ag->ring_val->ops->finalize(ag->ring_val);
    }
    free(ag->gi);
    free(ag->gv);
    free(ag->wi);
    free(ag->wv);
    free(ag->counts);
    free(ag);
    t->algo_state = NULL;
}

static void gcx_sparse_ag_start(gcx_sparse_task_t *t)
{
    gcx_comm_t      *comm = t->super.comm;
    int              P = comm->size, r;
    size_t           S = t->nnz_sum, wn;
    gcx_sparse_ag_t *ag = calloc(1, sizeof(*ag));

    t->algo_state = ag;
    if (ag == NULL) {
        t->super.status = GCX_ERR_NOMEM;
        return;
    }
    wn = t->dense_only ? 0 : 2 * S;
    ag->gi     = malloc(S * sizeof(uint32_t) + 1);
    ag->gv     = malloc(S * sizeof(float) + 1);
    ag->wi     = malloc(wn * sizeof(uint32_t) + 1);
    ag->wv     = malloc(wn * sizeof(float) + 1);
    /* P counts, P displs, the merge's P lengths, then its P list
     * pointers of each kind */
    ag->counts = malloc(3 * (size_t)P * sizeof(size_t) +
                        (size_t)P * (sizeof(uint32_t *) + sizeof(float *)));
    if (ag->gi == NULL || ag->gv == NULL || ag->wi == NULL || ag->wv == NULL ||
        ag->counts == NULL) {
        t->super.status = GCX_ERR_NOMEM;
        return;
    }
    ag->ln = ag->counts + 2 * (size_t)P;
    ag->li = (uint32_t **)(ag->ln + P);
    ag->lv = (float **)(ag->li + P);
    for (r = 0; r < P; ++r) {
        ag->counts[r]     = t->nnz[r];
        ag->counts[P + r] = r == 0 ? 0 : ag->counts[P + r - 1] + t->nnz[r - 1];
        if (r != gcx_coll_mod(comm->rank + 1, P) && P > 1) {
            t->bytes_sent += 8 * t->nnz[r];
        }
    }
    ag->ring_idx = gcx_sparse_ring(comm, ag->gi, t->in_idx, ag->counts,
                                   ag->counts + P, GCX_DT_I32);
    ag->ring_val = gcx_sparse_ring(comm, ag->gv, t->in_val, ag->counts,
                                   ag->counts + P, GCX_DT_F32);
    if (ag->ring_idx == NULL || ag->ring_val == NULL) {
        t->super.status = GCX_ERR_NOMEM;
        return;
    }
    gcx_coll_subtask_post(&t->super, ag->ring_idx, GCX_SPARSE_SLOT(4));
    if (t->super.status == GCX_INPROGRESS) {
        gcx_coll_subtask_post(&t->super, ag->ring_val, GCX_SPARSE_SLOT(5));
    }
}

static int gcx_sparse_ag_progress(gcx_sparse_task_t *t)
{
    gcx_sparse_ag_t *ag = t->algo_state;
    int              P = t->super.comm->size, r, state;

    if (!ag->done_idx) {
        state = gcx_coll_subtask_progress(&t->super, ag->ring_idx);
        if (state < 0) {
            return -1;
        }
        ag->done_idx = state;
    }
    if (!ag->done_val) {
        state = gcx_coll_subtask_progress(&t->super, ag->ring_val);
        if (state < 0) {
            return -1;
        }
        ag->done_val = state;
    }
    if (!ag->done_idx || !ag->done_val) {
        return 0;
    }
    if (t->dense_only) { /* sum straight into the output */
        memset(t->dense_out, 0, t->N * sizeof(float));
        gcx_sparse_add_to_dense(ag->gi, ag->gv, t->nnz_sum, t->N,
                                t->dense_out);
        t->res_dense = 1;
        return 1;
    }
    for (r = 0; r < P; ++r) {
        ag->li[r] = ag->gi + ag->counts[P + r];
        ag->lv[r] = ag->gv + ag->counts[P + r];
        ag->ln[r] = ag->counts[r];
    }
    gcx_sparse_merge_lists(ag->li, ag->lv, ag->ln, P, ag->wi, ag->wv,
                           ag->wi + t->nnz_sum, ag->wv + t->nnz_sum,
                           &t->res_idx, &t->res_val, &t->res_n);
    return 1;
}

const gcx_sparse_algo_t gcx_sparse_algo_allgather = {
    .id       = GCX_SPARSE_ALGO_ALLGATHER,
    .cost     = gcx_sparse_cost_allgather, /* select.c */
    .start    = gcx_sparse_ag_start,
    .progress = gcx_sparse_ag_progress,
    .cleanup  = gcx_sparse_ag_cleanup,
};
