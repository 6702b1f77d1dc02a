/*
 * split.c - split sparse allreduce (SparCML's SSAR_Split / DSAR_Split):
 * sparse reduce-scatter by index range, then sparse or dense allgather.
 * Also the engine of balanced_split.c, which only chooses other ranges.
 *
 * Idea: rank j owns the index range [b_j, b_j+1) (here: N/P each). Every
 * rank sends owner j the slice of its pairs in that range, straight from
 * its arrays (one message of two iov pieces per owner, all at once); owner
 * j receives each sender's slice into a buffer bounded by that sender's
 * nnz and by the range width, and merge-sums the P slices (tree merge) into
 * its region of the sum. With topk, the exact global top-k is chosen with
 * four rounds of a tiny allreduce of per-owner magnitude histograms
 * (sparse_kernels.c), so each owner keeps only its share before anything
 * is spread. The region sizes are exchanged (one small ring), every rank
 * checks every rank's capacity, and the regions are spread by two
 * allgatherv rings (indices, values) straight into sparse_out when given,
 * or - when only the dense sum is wanted and 8K >= 4N - as dense blocks by
 * one allgatherv ring straight into dense_out (DSAR).
 * Cost: α·(P-1) + 8·β·max(k(P-1)/P, load_max) for the reduce-scatter
 * (load_max: pairs the busiest owner receives), then 3(P-1)·α +
 * β·(P-1)·max_j min(8·K_j, 4·width_j). For even loads this is
 * 8(P-1)/P·(k + K)·β, near the 2·8k(P-1)/P·β lower bound when the supports
 * overlap; uneven index distributions overload one owner, which
 * balanced_split.c fixes.
 */
#include "sparse_allreduce.h"

#include <stdlib.h>
#include <string.h>

enum {
    GCX_SPLIT_EXCHANGE = 0,
    GCX_SPLIT_TOPK,
    GCX_SPLIT_SIZES,
    GCX_SPLIT_SPREAD,
};

typedef struct gcx_sparse_split {
    int           stage;
    size_t       *bounds;  /* P + 1 */
    gcx_tl_req_t *sreqs, *rreqs;
    gcx_iov_t    *siov;    /* 2 per owner */
    char         *rbuf;
    size_t       *roff, *rcap; /* bytes, per sender */
    uint32_t    **li;      /* the P slices to merge (lists of my range) */
    float       **lv;
    size_t       *ln;
    size_t        lo, hi;  /* my slice for myself */
    uint32_t     *wi[2];
    float        *wv[2];
    uint32_t     *regi;    /* my region of the sum */
    float        *regv;
    size_t        regn;
    /* top-k */
    gcx_sparse_topk_t sel;
    int64_t      *hist, *hist_tmp, *gt, *take;
    gcx_task_t    rd_task;
    gcx_rd_t      rd;
    int           rd_running;
    /* sizes and spread */
    int64_t      *sizes;
    size_t       *counts;  /* P counts + P displs */
    gcx_task_t   *ring_a, *ring_b;
    int           done_a, done_b;
    uint32_t     *oi;
    float        *ov;
} gcx_sparse_split_t;

static const gcx_task_ops_t gcx_sparse_split_pseudo_ops = {
    .name = "sparse allreduce (split, top-k)",
};

void gcx_sparse_split_cleanup(gcx_sparse_task_t *t)
{
    gcx_sparse_split_t *sp = t->algo_state;

    if (sp == NULL) {
        return;
    }
    if (sp->ring_a != NULL) {
        sp->ring_a->ops->finalize(sp->ring_a);
    }
    if (sp->ring_b != NULL) {
        sp->ring_b->ops->finalize(sp->ring_b);
    }
    free(sp->bounds);
    free(sp->rbuf);
    free(sp->wi[0]);
    free(sp->wv[0]);
    free(sp->oi);
    free(sp->ov);
    free(sp);
    t->algo_state = NULL;
}

/* First position in the input with index >= x. */
static size_t gcx_sparse_lower_bound(const gcx_sparse_task_t *t, size_t x)
{
    size_t lo = 0, hi = t->in_nnz;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (t->in_idx[mid] < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

void gcx_sparse_split_start(gcx_sparse_task_t *t,
                            void (*ranges)(const gcx_sparse_model_t *m,
                                           size_t *bounds))
{
    gcx_task_t         *task = &t->super;
    gcx_comm_t         *comm = task->comm;
    int                 P = comm->size, me = comm->rank, j;
    size_t              width, total, mem, *sz, *bounds;
    gcx_sparse_split_t *sp = calloc(1, sizeof(*sp));
    gcx_sparse_model_t  m;
    char               *p;

    t->algo_state = sp;
    if (sp == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    /* one block for every small per-rank array: O(P), ~4.2 KB per rank
     * (most of it the top-k histograms) */
    mem = (size_t)P * (2 * sizeof(gcx_tl_req_t) + 2 * sizeof(gcx_iov_t) +
                       2 * sizeof(size_t) + 2 * sizeof(size_t) +
                       (2 * 256 + 3) * sizeof(int64_t) +
                       sizeof(uint32_t *) + sizeof(float *) +
                       sizeof(size_t)) +
          (size_t)(P + 1) * sizeof(size_t);
    sp->bounds = malloc(mem);
    if (sp->bounds == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    p = (char *)(sp->bounds + P + 1);
    sp->sreqs    = (gcx_tl_req_t *)p, p += P * sizeof(gcx_tl_req_t);
    sp->rreqs    = (gcx_tl_req_t *)p, p += P * sizeof(gcx_tl_req_t);
    sp->hist     = (int64_t *)p, p += P * 256 * sizeof(int64_t);
    sp->hist_tmp = (int64_t *)p, p += P * 256 * sizeof(int64_t);
    sp->gt       = (int64_t *)p, p += P * sizeof(int64_t);
    sp->take     = (int64_t *)p, p += P * sizeof(int64_t);
    sp->sizes    = (int64_t *)p, p += P * sizeof(int64_t);
    sp->siov     = (gcx_iov_t *)p, p += 2 * P * sizeof(gcx_iov_t);
    sp->roff     = (size_t *)p, p += P * sizeof(size_t);
    sp->rcap     = (size_t *)p, p += P * sizeof(size_t);
    sp->li       = (uint32_t **)p, p += P * sizeof(uint32_t *);
    sp->lv       = (float **)p, p += P * sizeof(float *);
    sp->ln       = (size_t *)p, p += P * sizeof(size_t);
    sp->counts   = (size_t *)p;
    bounds       = sp->bounds;
    gcx_sparse_task_model(t, &m);
    ranges(&m, bounds);
    width = bounds[me + 1] - bounds[me];
    sp->lo = gcx_sparse_lower_bound(t, bounds[me]);
    sp->hi = gcx_sparse_lower_bound(t, bounds[me + 1]);
    total  = sp->hi - sp->lo;
    for (j = 0, sz = sp->roff; j < P; ++j) {
        size_t cap = t->nnz[j] < width ? t->nnz[j] : width;

        sp->rcap[j] = j == me ? 0 : 8 * cap;
        sz[j]       = j == 0 ? 0 : sz[j - 1] + sp->rcap[j - 1];
        total += j == me ? 0 : cap;
    }
    sp->rbuf  = malloc(sp->roff[P - 1] + sp->rcap[P - 1] + 1);
    sp->wi[0] = malloc(2 * total * sizeof(uint32_t) + 1);
    sp->wv[0] = malloc(2 * total * sizeof(float) + 1);
    if (sp->rbuf == NULL || sp->wi[0] == NULL || sp->wv[0] == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    sp->wi[1] = sp->wi[0] + total;
    sp->wv[1] = sp->wv[0] + total;
    for (j = 0; j < P; ++j) {
        gcx_iov_t riov = {sp->rbuf + sp->roff[j], sp->rcap[j]};
        uint32_t  step = GCX_SPARSE_SLOT(4);

        sp->sreqs[j].status = GCX_OK;
        sp->rreqs[j].status = GCX_OK;
        if (j == me) {
            continue;
        }
        task->status = gcx_comm_recv(comm, j, gcx_coll_tag(task, step, j),
                                     &riov, 1, &sp->rreqs[j]);
        if (task->status < 0) {
            return;
        }
        {
            size_t a = gcx_sparse_lower_bound(t, bounds[j]);
            size_t b = gcx_sparse_lower_bound(t, bounds[j + 1]);

            sp->siov[2 * j].buffer     = (void *)(t->in_idx + a);
            sp->siov[2 * j].length     = 4 * (b - a);
            sp->siov[2 * j + 1].buffer = (void *)(t->in_val + a);
            sp->siov[2 * j + 1].length = 4 * (b - a);
            t->bytes_sent += 8 * (b - a);
        }
        task->status = gcx_comm_send(comm, j, gcx_coll_tag(task, step, me),
                                     &sp->siov[2 * j], 2, &sp->sreqs[j]);
        if (task->status < 0) {
            return;
        }
        task->status = GCX_INPROGRESS;
    }
    sp->stage = GCX_SPLIT_EXCHANGE;
}

/* All slices arrived: merge them into my region. */
static int gcx_sparse_split_merge(gcx_sparse_task_t *t)
{
    gcx_sparse_split_t *sp = t->algo_state;
    int                 P = t->super.comm->size, me = t->super.comm->rank, j;
    uint32_t          **li = sp->li;
    float             **lv = sp->lv;
    size_t             *ln = sp->ln;

    for (j = 0; j < P; ++j) {
        if (j == me) {
            li[j] = (uint32_t *)t->in_idx + sp->lo;
            lv[j] = (float *)t->in_val + sp->lo;
            ln[j] = sp->hi - sp->lo;
        } else if (gcx_sparse_parse_msg(&t->super, j, sp->rbuf + sp->roff[j],
                                        sp->rreqs[j].length, &li[j], &lv[j],
                                        &ln[j]) < 0) {
            return -1;
        }
    }
    gcx_sparse_merge_lists(li, lv, ln, P, sp->wi[0], sp->wv[0], sp->wi[1],
                           sp->wv[1], &sp->regi, &sp->regv, &sp->regn);
    return 0;
}

static int gcx_sparse_split_wait_all(gcx_sparse_task_t *t)
{
    gcx_sparse_split_t *sp = t->algo_state;
    int                 P = t->super.comm->size, j, s, r, busy = 0;

    for (j = 0; j < P; ++j) {
        s = gcx_coll_req_state(&t->super, &sp->sreqs[j], j, SIZE_MAX);
        r = gcx_coll_req_state(&t->super, &sp->rreqs[j], j, SIZE_MAX);
        if (s < 0 || r < 0) {
            return -1;
        }
        busy |= s == 0 || r == 0;
    }
    return busy ? 0 : 1;
}

/* One histogram round of the distributed top-k; 1 when selected. */
static int gcx_sparse_split_topk(gcx_sparse_task_t *t)
{
    gcx_sparse_split_t *sp = t->algo_state;
    int                 P = t->super.comm->size, me = t->super.comm->rank;
    int                 state;
    uint32_t           *oi;
    float              *ov;

    while (!sp->sel.done) {
        if (!sp->rd_running) {
            memset(sp->hist, 0, (size_t)P * 256 * sizeof(int64_t));
            gcx_sparse_topk_hist(&sp->sel, sp->regv, sp->regn,
                                 sp->hist + (size_t)me * 256);
            gcx_task_init(&sp->rd_task, &gcx_sparse_split_pseudo_ops,
                          t->super.comm);
            sp->rd_task.seq       = t->super.seq;
            sp->rd_task.step_base = t->super.step_base + GCX_SPARSE_SLOT(5) +
                                    (uint32_t)sp->sel.round * 0x40u;
            gcx_rd_start(&sp->rd, &sp->rd_task, sp->hist, sp->hist_tmp,
                         (size_t)P * 256, GCX_DT_I64, GCX_OP_SUM);
            sp->rd_running = 1;
            t->bytes_sent += (uint64_t)P * 256 * 8 *
                             (uint64_t)(__builtin_ctz((unsigned)sp->rd.p2) +
                                        (sp->rd.rem > 0));
        }
        state = gcx_rd_progress(&sp->rd);
        if (state < 0) {
            t->super.status = sp->rd_task.status;
            return -1;
        }
        if (state == 0) {
            return 0;
        }
        sp->rd_running = 0;
        gcx_sparse_topk_step(&sp->sel, sp->hist);
    }
    t->union_nnz = (uint64_t)sp->sel.total;
    oi = sp->regi == sp->wi[0] ? sp->wi[1] : sp->wi[0];
    ov = sp->regi == sp->wi[0] ? sp->wv[1] : sp->wv[0];
    sp->regn = gcx_sparse_topk_apply(&sp->sel, me, sp->regi, sp->regv,
                                     sp->regn, oi, ov);
    sp->regi = oi;
    sp->regv = ov;
    t->topk_done = 1;
    return 1;
}

static int gcx_sparse_split_start_spread(gcx_sparse_task_t *t)
{
    gcx_sparse_split_t *sp = t->algo_state;
    gcx_comm_t         *comm = t->super.comm;
    int                 P = comm->size, me = comm->rank, r;
    int                 next = gcx_coll_mod(me + 1, P);
    uint64_t            K = 0;

    for (r = 0; r < P; ++r) {
        K += (uint64_t)sp->sizes[r];
    }
    if (!t->topk_done) {
        t->union_nnz = K;
    }
    if (t->sparse_out != NULL) { /* every rank decides alike */
        for (r = 0; r < P; ++r) {
            if ((uint64_t)t->info[(size_t)r * t->info_len + 1] < K) {
                gcx_error("sparse allreduce #%u: rank %d's sparse_out "
                          "capacity %lld is smaller than the result (%llu "
                          "entries); nothing written",
                          t->super.seq, r,
                          (long long)t->info[(size_t)r * t->info_len + 1],
                          (unsigned long long)K);
                t->super.status = GCX_ERR_MISMATCH;
                return -1;
            }
        }
    }
    if (t->dense_only && 2 * K >= t->N) { /* DSAR: dense blocks */
        size_t width = sp->bounds[me + 1] - sp->bounds[me];

        memset(t->dense_out + sp->bounds[me], 0, width * sizeof(float));
        gcx_sparse_add_to_dense(sp->regi, sp->regv, sp->regn, t->N,
                                t->dense_out);
        for (r = 0; r < P; ++r) {
            sp->counts[r]     = sp->bounds[r + 1] - sp->bounds[r];
            sp->counts[P + r] = sp->bounds[r];
            if (r != next && P > 1) {
                t->bytes_sent += 4 * sp->counts[r];
            }
        }
        sp->ring_a = gcx_sparse_ring(comm, t->dense_out, NULL, sp->counts,
                                     sp->counts + P, GCX_DT_F32);
        sp->done_b    = 1;
        t->res_dense  = 1;
    } else {
        if (t->sparse_out != NULL) {
            sp->oi = NULL;
            t->res_idx    = t->sparse_out->idx;
            t->res_val    = t->sparse_out->val;
            t->res_in_out = 1;
        } else {
            sp->oi = malloc(K * sizeof(uint32_t) + 1);
            sp->ov = malloc(K * sizeof(float) + 1);
            if (sp->oi == NULL || sp->ov == NULL) {
                t->super.status = GCX_ERR_NOMEM;
                return -1;
            }
            t->res_idx = sp->oi;
            t->res_val = sp->ov;
        }
        t->res_n = K;
        for (r = 0; r < P; ++r) {
            sp->counts[r]     = (size_t)sp->sizes[r];
            sp->counts[P + r] = r == 0 ? 0 :
                                sp->counts[P + r - 1] + sp->counts[r - 1];
            if (r != next && P > 1) {
                t->bytes_sent += 8 * sp->counts[r];
            }
        }
        sp->ring_a = gcx_sparse_ring(comm, t->res_idx, sp->regi, sp->counts,
                                     sp->counts + P, GCX_DT_I32);
        sp->ring_b = gcx_sparse_ring(comm, t->res_val, sp->regv, sp->counts,
                                     sp->counts + P, GCX_DT_F32);
        if (sp->ring_b == NULL) {
            t->super.status = GCX_ERR_NOMEM;
            return -1;
        }
    }
    if (sp->ring_a == NULL) {
        t->super.status = GCX_ERR_NOMEM;
        return -1;
    }
    gcx_coll_subtask_post(&t->super, sp->ring_a, GCX_SPARSE_SLOT(7));
    if (sp->ring_b != NULL && t->super.status == GCX_INPROGRESS) {
        gcx_coll_subtask_post(&t->super, sp->ring_b, GCX_SPARSE_SLOT(8));
    }
    return t->super.status == GCX_INPROGRESS ? 0 : -1;
}

int gcx_sparse_split_progress(gcx_sparse_task_t *t)
{
    gcx_sparse_split_t *sp = t->algo_state;
    gcx_comm_t         *comm = t->super.comm;
    int                 P = comm->size, r, state;

    for (;;) {
        switch (sp->stage) {
        case GCX_SPLIT_EXCHANGE:
            state = gcx_sparse_split_wait_all(t);
            if (state <= 0) {
                return state;
            }
            if (gcx_sparse_split_merge(t) < 0) {
                return -1;
            }
            if (t->topk > 0) {
                gcx_sparse_topk_init(&sp->sel, P, t->topk, sp->gt, sp->take);
            }
            sp->stage = GCX_SPLIT_TOPK;
            break;
        case GCX_SPLIT_TOPK:
            if (t->topk > 0) {
                state = gcx_sparse_split_topk(t);
                if (state <= 0) {
                    return state;
                }
            }
            for (r = 0; r < P; ++r) {
                sp->counts[r]     = 1;
                sp->counts[P + r] = (size_t)r;
            }
            sp->sizes[comm->rank] = (int64_t)sp->regn;
            sp->ring_a = gcx_sparse_ring(comm, sp->sizes, NULL, sp->counts,
                                         sp->counts + P, GCX_DT_I64);
            if (sp->ring_a == NULL) {
                t->super.status = GCX_ERR_NOMEM;
                return -1;
            }
            t->bytes_sent += 8 * (uint64_t)(P - 1);
            gcx_coll_subtask_post(&t->super, sp->ring_a, GCX_SPARSE_SLOT(6));
            sp->stage = GCX_SPLIT_SIZES;
            break;
        case GCX_SPLIT_SIZES:
            state = gcx_coll_subtask_progress(&t->super, sp->ring_a);
            if (state <= 0) {
                return state;
            }
            sp->ring_a->ops->finalize(sp->ring_a);
            sp->ring_a = NULL;
            if (gcx_sparse_split_start_spread(t) < 0) {
                return -1;
            }
            sp->stage = GCX_SPLIT_SPREAD;
            break;
        default:
            if (!sp->done_a) {
                state = gcx_coll_subtask_progress(&t->super, sp->ring_a);
                if (state < 0) {
                    return -1;
                }
                sp->done_a = state;
            }
            if (!sp->done_b) {
                state = gcx_coll_subtask_progress(&t->super, sp->ring_b);
                if (state < 0) {
                    return -1;
                }
                sp->done_b = state;
            }
            return sp->done_a && sp->done_b ? 1 : 0;
        }
    }
}

/* ---- split by even index ranges ------------------------------------------ */

size_t gcx_sparse_even_bound(const gcx_sparse_model_t *m, int q)
{
    size_t bound, len;

    if (q >= m->P) {
        return m->N;
    }
    gcx_coll_block(m->N, m->P, q, &bound, &len);
    return bound;
}

void gcx_sparse_even_bounds(const gcx_sparse_model_t *m, size_t *bounds)
{
    int q;

    for (q = 0; q <= m->P; ++q) {
        bounds[q] = gcx_sparse_even_bound(m, q);
    }
}

static void gcx_sparse_split_even_start(gcx_sparse_task_t *t)
{
    gcx_sparse_split_start(t, gcx_sparse_even_bounds);
}

const gcx_sparse_algo_t gcx_sparse_algo_split = {
    .id       = GCX_SPARSE_ALGO_SPLIT,
    .cost     = gcx_sparse_cost_split, /* select.c */
    .start    = gcx_sparse_split_even_start,
    .progress = gcx_sparse_split_progress,
    .cleanup  = gcx_sparse_split_cleanup,
};
