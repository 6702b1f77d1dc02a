/*
 * recursive_doubling.c - sparse recursive doubling with a switch to dense
 * (SparCML's SSAR_Recursive_double).
 *
 * Idea: log2(P) rounds; in each, partners swap their current sorted lists
 * and both merge-sum them, so the lists grow with the union of the group.
 * Round 0 sends straight from the caller's arrays; later rounds send the
 * previous merge output; receives go into one buffer whose size bounds the
 * partner's list, and are merged from there. Non-powers of two: ranks 2j
 * and 2j+1 (j < P - p2) fold first and the even one gets the result at the
 * end (the layout of the dense recursive doubling, gcx_coll_rd_layout()).
 * When only the dense sum is wanted, a list of m >= N/2 pairs costs at
 * least as much as the dense vector (8m >= 4N bytes), so that rank turns
 * dense and sends 4N-byte dense vectors from then on; messages say which
 * they are by their length (a sparse one is always shorter than 4N), so
 * partners need no agreement on when to switch. Every element is summed as
 * a + b of the two partners' values, which commutes exactly, so all ranks
 * hold the same bits.
 * Cost: Σ_rounds (α + β·min(8·U_j, 4N) + γ·U_{j+1}) (+2 rounds when P is
 * not a power of two), U_j = union size of 2^j ranks, γ the merge cost per
 * output pair (every round merges before the next can send): about 8k·log2(P)·β for disjoint
 * supports that stay small, 8k·β·log2(P) for identical ones; latency-light
 * (log2 P messages) but each round resends the whole current union.
 */
#include "sparse_allreduce.h"

#include <stdlib.h>
#include <string.h>

enum {
    GCX_SRD_PRE = 0,
    GCX_SRD_LOOP,
    GCX_SRD_POST,
    GCX_SRD_DONE,
};

typedef struct gcx_sparse_rd {
    int          p2, rem, vrank, phase, mask, posted, partner;
    const uint32_t *ci; /* current list (the input at first) */
    const float    *cv;
    size_t          cn;
    int             dense;   /* current sum is dense in dense_out */
    int             next;    /* ping-pong merge buffer to write next */
    uint32_t       *mi[2];
    float          *mv[2];
    char           *rbuf;
    size_t          rcap;    /* bytes */
    gcx_iov_t       siov[2];
    gcx_tl_req_t    sreq, rreq;
} gcx_sparse_rd_t;

static void gcx_sparse_rd_cleanup(gcx_sparse_task_t *t)
{
    gcx_sparse_rd_t *rd = t->algo_state;

    if (rd == NULL) {
        return;
    }
    free(rd->mi[0]);
    free(rd->mv[0]);
    free(rd->rbuf);
    free(rd);
    t->algo_state = NULL;
}

static void gcx_sparse_rd_start(gcx_sparse_task_t *t)
{
    gcx_sparse_rd_t *rd = calloc(1, sizeof(*rd));
    size_t           bound = t->nnz_sum < t->N ? t->nnz_sum : t->N;

    t->algo_state = rd;
    if (rd == NULL) {
        t->super.status = GCX_ERR_NOMEM;
        return;
    }
    gcx_coll_rd_layout(t->super.comm->size, t->super.comm->rank, &rd->p2,
                       &rd->rem, &rd->vrank);
    rd->rcap = 8 * bound;
    if (t->dense_only && rd->rcap > 4 * t->N) {
        rd->rcap = 4 * t->N; /* a dense vector, or a list shorter than it */
    }
    rd->mi[0] = malloc(2 * bound * sizeof(uint32_t) + 1);
    rd->mv[0] = malloc(2 * bound * sizeof(float) + 1);
    rd->rbuf  = malloc(rd->rcap + 1);
    if (rd->mi[0] == NULL || rd->mv[0] == NULL || rd->rbuf == NULL) {
        t->super.status = GCX_ERR_NOMEM;
        return;
    }
    rd->mi[1] = rd->mi[0] + bound;
    rd->mv[1] = rd->mv[0] + bound;
    rd->ci    = t->in_idx;
    rd->cv    = t->in_val;
    rd->cn    = t->in_nnz;
    rd->mask  = 1;
    rd->phase = GCX_SRD_PRE;
    if (t->dense_only && t->N > 0 && 2 * rd->cn >= t->N) {
        /* a list this long costs more than dense: start dense, so that no
         * sparse message ever reaches 4N bytes */
        memset(t->dense_out, 0, 4 * t->N);
        gcx_sparse_add_to_dense(rd->ci, rd->cv, rd->cn, t->N, t->dense_out);
        rd->dense = 1;
    }
}

/* Posts (once) the send of the current sum and/or a receive; 1 when both
 * are done, 0 in flight, -1 failed. */
static int gcx_sparse_rd_exchange(gcx_sparse_task_t *t, int peer,
                                  uint32_t step, int do_send, int do_recv)
{
    gcx_sparse_rd_t *rd   = t->algo_state;
    gcx_task_t      *task = &t->super;
    gcx_iov_t        riov;
    int              s, r;

    step += GCX_SPARSE_SLOT(4);
    if (!rd->posted) {
        rd->posted      = 1;
        rd->sreq.status = GCX_OK;
        rd->rreq.status = GCX_OK;
        if (do_recv) {
            riov.buffer = rd->rbuf;
            riov.length = rd->rcap;
            task->status = gcx_comm_recv(task->comm, peer,
                                         gcx_coll_tag(task, step, peer),
                                         &riov, 1, &rd->rreq);
            if (task->status < 0) {
                return -1;
            }
            task->status = GCX_INPROGRESS;
        }
        if (do_send) {
            int cnt = 1;

            if (rd->dense) {
                rd->siov[0].buffer = t->dense_out;
                rd->siov[0].length = 4 * t->N;
            } else {
                rd->siov[0].buffer = (void *)rd->ci;
                rd->siov[0].length = 4 * rd->cn;
                rd->siov[1].buffer = (void *)rd->cv;
                rd->siov[1].length = 4 * rd->cn;
                cnt = 2;
            }
            t->bytes_sent += rd->siov[0].length * (size_t)cnt;
            task->status = gcx_comm_send(task->comm, peer,
                                         gcx_coll_tag(task, step,
                                                      task->comm->rank),
                                         rd->siov, cnt, &rd->sreq);
            if (task->status < 0) {
                return -1;
            }
            task->status = GCX_INPROGRESS;
        }
    }
    s = gcx_coll_req_state(task, &rd->sreq, peer, SIZE_MAX);
    r = gcx_coll_req_state(task, &rd->rreq, peer, SIZE_MAX);
    if (s < 0 || r < 0) {
        return -1;
    }
    if (s == 0 || r == 0) {
        return 0;
    }
    rd->posted = 0;
    return 1;
}

/* Current sum += what arrived in rbuf. */
static int gcx_sparse_rd_combine(gcx_sparse_task_t *t, int peer)
{
    gcx_sparse_rd_t *rd = t->algo_state;
    size_t           len = rd->rreq.length;
    uint32_t        *pi;
    float           *pv;
    size_t           pn;

    if (t->dense_only && t->N > 0 && len == 4 * t->N) { /* dense */
        if (rd->dense) {
            gcx_reduce_fn(GCX_DT_F32, GCX_OP_SUM)(t->dense_out, t->dense_out,
                                                  rd->rbuf, t->N);
        } else {
            if (t->N > 0) {
                memcpy(t->dense_out, rd->rbuf, 4 * t->N);
            }
            gcx_sparse_add_to_dense(rd->ci, rd->cv, rd->cn, t->N,
                                    t->dense_out);
            rd->dense = 1;
        }
        return 0;
    }
    if (gcx_sparse_parse_msg(&t->super, peer, rd->rbuf, len, &pi, &pv,
                             &pn) < 0) {
        return -1;
    }
    if (rd->dense) {
        gcx_sparse_add_to_dense(pi, pv, pn, t->N, t->dense_out);
        return 0;
    }
    rd->cn = gcx_sparse_merge2(rd->ci, rd->cv, rd->cn, pi, pv, pn,
                               rd->mi[rd->next], rd->mv[rd->next]);
    rd->ci   = rd->mi[rd->next];
    rd->cv   = rd->mv[rd->next];
    rd->next ^= 1;
    if (t->dense_only && 2 * rd->cn >= t->N) { /* fill-in: go dense */
        memset(t->dense_out, 0, 4 * t->N);
        gcx_sparse_add_to_dense(rd->ci, rd->cv, rd->cn, t->N, t->dense_out);
        rd->dense = 1;
    }
    return 0;
}

static int gcx_sparse_rd_progress(gcx_sparse_task_t *t)
{
    gcx_sparse_rd_t *rd   = t->algo_state;
    int              rank = t->super.comm->rank, state, peer;

    for (;;) {
        switch (rd->phase) {
        case GCX_SRD_PRE:
            if (rank >= 2 * rd->rem) {
                rd->phase = GCX_SRD_LOOP;
                break;
            }
            if (rank % 2 == 0) {
                state = gcx_sparse_rd_exchange(t, rank + 1, 0, 1, 0);
                if (state <= 0) {
                    return state;
                }
                rd->phase = GCX_SRD_POST;
                break;
            }
            state = gcx_sparse_rd_exchange(t, rank - 1, 0, 0, 1);
            if (state <= 0) {
                return state;
            }
            if (gcx_sparse_rd_combine(t, rank - 1) < 0) {
                return -1;
            }
            rd->phase = GCX_SRD_LOOP;
            break;
        case GCX_SRD_LOOP:
            if (rd->mask >= rd->p2) {
                rd->phase = GCX_SRD_POST;
                break;
            }
            peer  = gcx_coll_rd_real_rank(rd->rem, rd->vrank ^ rd->mask);
            state = gcx_sparse_rd_exchange(
                t, peer, (uint32_t)(1 + __builtin_ctz((unsigned)rd->mask)), 1,
                1);
            if (state <= 0) {
                return state;
            }
            if (gcx_sparse_rd_combine(t, peer) < 0) {
                return -1;
            }
            rd->mask <<= 1;
            break;
        case GCX_SRD_POST:
            if (rank < 2 * rd->rem) {
                uint32_t step =
                    1u + (uint32_t)__builtin_ctz((unsigned)rd->p2);

                if (rank % 2) {
                    state = gcx_sparse_rd_exchange(t, rank - 1, step, 1, 0);
                } else {
                    state = gcx_sparse_rd_exchange(t, rank + 1, step, 0, 1);
                    if (state == 1) { /* the result replaces my input */
                        rd->cn    = 0;
                        rd->dense = 0;
                        if (gcx_sparse_rd_combine(t, rank + 1) < 0) {
                            return -1;
                        }
                    }
                }
                if (state <= 0) {
                    return state;
                }
            }
            rd->phase = GCX_SRD_DONE;
            break;
        default:
            if (rd->dense) {
                t->res_dense = 1;
            } else {
                t->res_idx = (uint32_t *)rd->ci;
                t->res_val = (float *)rd->cv;
                t->res_n   = rd->cn;
            }
            return 1;
        }
    }
}

const gcx_sparse_algo_t gcx_sparse_algo_rd = {
    .id       = GCX_SPARSE_ALGO_RECURSIVE_DOUBLING,
    .cost     = gcx_sparse_cost_rd, /* select.c */
    .start    = gcx_sparse_rd_start,
    .progress = gcx_sparse_rd_progress,
    .cleanup  = gcx_sparse_rd_cleanup,
};
