/*
 * allreduce_rd.c - recursive doubling allreduce (small messages).
 *
 * Idea: in round i every rank swaps its whole vector with the rank whose
 * (virtual) rank differs in bit i and reduces, so after log2(P) rounds all
 * hold the total. Non-powers of two: with p2 = 2^floor(log2 P) and
 * rem = P - p2, ranks 2j and 2j+1 (j < rem) first fold into the odd one;
 * the even ones wait and get the result at the end (MPICH's scheme).
 * Reductions are pairwise and commutative, so every rank computes exactly
 * the same bits.
 * Cost: (log2(p2) + 2·[rem > 0])·(α + n·β + n·γ) — latency-optimal,
 * bandwidth-poor, hence only up to GCX_ALLREDUCE_SMALL_MSG.
 *
 * The engine (gcx_rd_t) is reused by the argument check.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

enum {
    GCX_RD_PRE = 0, /* fold extra ranks in */
    GCX_RD_LOOP,    /* doubling rounds */
    GCX_RD_POST,    /* hand the result to the extra ranks */
    GCX_RD_DONE,
};

void gcx_rd_start(gcx_rd_t *rd, gcx_task_t *task, void *buf, void *tmp,
                  size_t count, gcx_dtype_t dtype, gcx_op_t op)
{
    int size = task->comm->size, rank = task->comm->rank;

    rd->task   = task;
    rd->buf    = buf;
    rd->tmp    = tmp;
    rd->count  = count;
    rd->dtype  = dtype;
    rd->bytes  = count * gcx_dtype_size(dtype);
    rd->reduce = gcx_reduce_fn(dtype, op);
    rd->posted = 0;
    rd->mask   = 1;
    gcx_coll_rd_layout(size, rank, &rd->p2, &rd->rem, &rd->vrank);
    rd->phase = GCX_RD_PRE;
}

/* Posts (once) a send of buf and/or a receive into @p rbuf with @p peer. */
static int gcx_rd_exchange(gcx_rd_t *rd, int peer, uint32_t step, int do_send,
                           int do_recv, void *rbuf)
{
    gcx_task_t *task = rd->task;
    int         s = 1, r = 1;

    if (!rd->posted) {
        rd->posted = 1;
        rd->partner = peer;
        rd->sreq.status = GCX_OK;
        rd->rreq.status = GCX_OK;
        rd->rreq.length = rd->bytes;
        if (do_recv &&
            gcx_coll_recv(task, peer, step, rbuf, rd->bytes, &rd->rreq) < 0) {
            return -1;
        }
        if (do_send &&
            gcx_coll_send(task, peer, step, rd->buf, rd->bytes, &rd->sreq) <
                0) {
            return -1;
        }
    }
    s = gcx_coll_req_state(task, &rd->sreq, peer, SIZE_MAX);
    r = gcx_coll_req_state(task, &rd->rreq, peer, rd->bytes);
    if (s < 0 || r < 0) {
        return -1;
    }
    if (s == 0 || r == 0) {
        return 0;
    }
    rd->posted = 0;
    return 1;
}

int gcx_rd_progress(gcx_rd_t *rd)
{
    int rank = rd->task->comm->rank, state;

    for (;;) {
        switch (rd->phase) {
        case GCX_RD_PRE:
            if (rank >= 2 * rd->rem) {
                rd->phase = GCX_RD_LOOP;
                break;
            }
            if (rank % 2 == 0) {
                state = gcx_rd_exchange(rd, rank + 1, 0, 1, 0, NULL);
                if (state <= 0) {
                    return state;
                }
                rd->phase = GCX_RD_POST;
                break;
            }
            state = gcx_rd_exchange(rd, rank - 1, 0, 0, 1, rd->tmp);
            if (state <= 0) {
                return state;
            }
            rd->reduce(rd->buf, rd->tmp, rd->buf, rd->count);
            rd->phase = GCX_RD_LOOP;
            break;
        case GCX_RD_LOOP:
            if (rd->mask >= rd->p2) {
                rd->phase = GCX_RD_POST;
                break;
            }
            state = gcx_rd_exchange(rd,
                                    gcx_coll_rd_real_rank(rd->rem, rd->vrank ^ rd->mask),
                                    (uint32_t)(1 + __builtin_ctz(rd->mask)),
                                    1, 1, rd->tmp);
            if (state <= 0) {
                return state;
            }
            rd->reduce(rd->buf, rd->buf, rd->tmp, rd->count);
            rd->mask <<= 1;
            break;
        case GCX_RD_POST:
            if (rank < 2 * rd->rem) {
                uint32_t step = 1u + (uint32_t)__builtin_ctz((unsigned)rd->p2);
                state = (rank % 2) ?
                            gcx_rd_exchange(rd, rank - 1, step, 1, 0, NULL) :
                            gcx_rd_exchange(rd, rank + 1, step, 0, 1, rd->buf);
                if (state <= 0) {
                    return state;
                }
            }
            rd->phase = GCX_RD_DONE;
            break;
        default:
            return 1;
        }
    }
}

/* ---- the allreduce task ------------------------------------------------ */

typedef struct gcx_allreduce_rd_task {
    gcx_task_t  super;
    gcx_rd_t    rd;
    const void *sendbuf;
    void       *recvbuf;
    size_t      count;
    gcx_dtype_t dtype;
    gcx_op_t    op;
} gcx_allreduce_rd_task_t;

static void gcx_allreduce_rd_progress(gcx_task_t *task)
{
    gcx_allreduce_rd_task_t *ar = (gcx_allreduce_rd_task_t *)task;

    if (gcx_rd_progress(&ar->rd) == 1) {
        if (ar->op == GCX_OP_AVG) {
            gcx_reduce_divide(ar->recvbuf, ar->count, ar->dtype,
                              task->comm->size);
        }
        task->status = GCX_OK;
    }
}

static void gcx_allreduce_rd_post(gcx_task_t *task)
{
    gcx_allreduce_rd_task_t *ar    = (gcx_allreduce_rd_task_t *)task;
    size_t                   bytes = ar->count * gcx_dtype_size(ar->dtype);
    void                    *tmp;

    if (ar->sendbuf != ar->recvbuf && bytes > 0) {
        memcpy(ar->recvbuf, ar->sendbuf, bytes);
    }
    tmp = gcx_comm_scratch(task->comm, bytes ? bytes : 1);
    if (tmp == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    gcx_rd_start(&ar->rd, task, ar->recvbuf, tmp, ar->count, ar->dtype,
                 ar->op);
    gcx_allreduce_rd_progress(task);
}

static void gcx_allreduce_rd_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_allreduce_rd_ops = {
    .name     = "allreduce (recursive doubling)",
    .post     = gcx_allreduce_rd_post,
    .progress = gcx_allreduce_rd_progress,
    .finalize = gcx_allreduce_rd_finalize,
};

gcx_task_t *gcx_allreduce_rd_create(gcx_comm_t *comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    gcx_dtype_t dtype, gcx_op_t op)
{
    gcx_allreduce_rd_task_t *ar = calloc(1, sizeof(*ar));

    if (ar == NULL) {
        return NULL;
    }
    gcx_task_init(&ar->super, &gcx_allreduce_rd_ops, comm);
    ar->sendbuf = sendbuf;
    ar->recvbuf = recvbuf;
    ar->count   = count;
    ar->dtype   = dtype;
    ar->op      = op;
    return &ar->super;
}
