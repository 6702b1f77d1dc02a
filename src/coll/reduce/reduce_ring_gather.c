/*
 * reduce_ring_gather.c - reduce = ring reduce-scatter + gather to the root
 * (large messages): Rabenseifner's reduce-scatter + gather scheme, but with
 * the ring reduce-scatter, not the recursive halving of
 * allreduce_rabenseifner.c.
 *
 * Idea: the vector is cut into P blocks; the pipelined ring reduce-scatter
 * of ring.c (shift -1) leaves block r reduced on rank r (AVG divided
 * there), then every rank sends its block to the root, which receives them
 * straight into recvbuf. The root runs the full-length ring in recvbuf (its
 * block is then already in place); the other ranks run the one-block
 * variant into a block-sized buffer, so no rank needs n bytes of scratch.
 *
 * Why not a pipelined chain: a chain reduce moves and reduces all n
 * elements on every rank, n·(β + γ) per rank plus (P-1) chunk latencies of
 * pipeline fill, while here each rank reduces only (P-1)/P·n elements and
 * the root's link carries (P-1)/P·n in each phase; the ring code and its
 * chunk pipelining are shared with the allreduce.
 * Cost: reduce-scatter (P-1)·α·chunks + (P-1)/P·n·β + (P-1)/P·n·γ, gather
 * α + (P-1)/P·n·β at the root: 2(P-1)/P·n·β + (P-1)/P·n·γ in all.
 */
#include "coll/coll.h"

#include <stdlib.h>

typedef struct gcx_reduce_rg_task {
    gcx_task_t    super;
    gcx_task_t   *ring;
    char         *recvbuf; /* root */
    char         *block;   /* others: the rank's reduced block */
    size_t       *counts;  /* elements per block, then offsets */
    size_t        esize;
    int           root;
    int           gathering;
    gcx_tl_req_t *reqs;    /* per rank */
} gcx_reduce_rg_task_t;

static void gcx_reduce_rg_gather(gcx_task_t *task)
{
    gcx_reduce_rg_task_t  *rd   = (gcx_reduce_rg_task_t *)task;
    gcx_comm_t            *comm = task->comm;
    size_t                *displs = rd->counts + comm->size;
    uint32_t               step = (uint32_t)comm->size; /* after the ring */
    int                    r;

    rd->gathering = 1;
    if (comm->rank != rd->root) {
        gcx_coll_send(task, rd->root, step, rd->block,
                      rd->counts[comm->rank] * rd->esize, &rd->reqs[0]);
        return;
    }
    for (r = 0; r < comm->size; ++r) {
        if (r == rd->root) {
            continue;
        }
        if (gcx_coll_recv(task, r, step, rd->recvbuf + displs[r] * rd->esize,
                          rd->counts[r] * rd->esize, &rd->reqs[r]) < 0) {
            return;
        }
    }
}

static void gcx_reduce_rg_progress(gcx_task_t *task)
{
    gcx_reduce_rg_task_t  *rd   = (gcx_reduce_rg_task_t *)task;
    gcx_comm_t            *comm = task->comm;
    int                    r, state, done = 1;

    if (!rd->gathering) {
        if (gcx_coll_subtask_progress(task, rd->ring) <= 0) {
            return;
        }
        gcx_reduce_rg_gather(task);
        if (task->status != GCX_INPROGRESS) {
            return;
        }
    }
    if (comm->rank != rd->root) {
        state = gcx_coll_req_state(task, &rd->reqs[0], rd->root, SIZE_MAX);
        if (state > 0) {
            task->status = GCX_OK;
        }
        return;
    }
    for (r = 0; r < comm->size; ++r) {
        if (r == rd->root) {
            continue;
        }
        state = gcx_coll_req_state(task, &rd->reqs[r], r,
                                   rd->counts[r] * rd->esize);
        if (state < 0) {
            return;
        }
        done &= state;
    }
    if (done) {
        task->status = GCX_OK;
    }
}

static void gcx_reduce_rg_post(gcx_task_t *task)
{
    gcx_reduce_rg_task_t *rd = (gcx_reduce_rg_task_t *)task;

    rd->gathering = 0;
    gcx_coll_subtask_post(task, rd->ring, 0);
    gcx_reduce_rg_progress(task);
}

static void gcx_reduce_rg_finalize(gcx_task_t *task)
{
    gcx_reduce_rg_task_t *rd = (gcx_reduce_rg_task_t *)task;

    if (rd->ring != NULL) {
        rd->ring->ops->finalize(rd->ring);
    }
    free(rd->block);
    free(rd->counts);
    free(rd->reqs);
    free(rd);
}

static const gcx_task_ops_t gcx_reduce_rg_ops = {
    .name     = "reduce (ring + gather)",
    .post     = gcx_reduce_rg_post,
    .progress = gcx_reduce_rg_progress,
    .finalize = gcx_reduce_rg_finalize,
};

gcx_task_t *gcx_reduce_ring_gather_create(gcx_comm_t *comm, const void *src,
                                          void *recvbuf, size_t count,
                                          gcx_dtype_t dtype, gcx_op_t op,
                                          int root)
{
    gcx_reduce_rg_task_t  *rd = calloc(1, sizeof(*rd));
    size_t                 n  = (size_t)comm->size;
    int                    b;

    if (rd == NULL) {
        return NULL;
    }
    gcx_task_init(&rd->super, &gcx_reduce_rg_ops, comm);
    rd->recvbuf = recvbuf;
    rd->esize   = gcx_dtype_size(dtype);
    rd->root    = root;
    rd->counts  = malloc(2 * n * sizeof(size_t));
    rd->reqs    = calloc(n, sizeof(*rd->reqs));
    if (rd->counts == NULL || rd->reqs == NULL) {
        gcx_reduce_rg_finalize(&rd->super);
        return NULL;
    }
    for (b = 0; b < comm->size; ++b) {
        gcx_coll_block(count, comm->size, b, &rd->counts[n + (size_t)b],
                       &rd->counts[b]);
    }
    if (comm->rank == root) {
        rd->ring = gcx_ring_create(comm, GCX_RING_REDUCE_SCATTER, recvbuf, src,
                                   rd->counts, rd->counts + n, dtype, op, -1);
    } else {
        /* block 0 is the longest */
        rd->block = malloc(rd->counts[0] * rd->esize + 1);
        if (rd->block != NULL) {
            rd->ring = gcx_ring_rs_block_create(comm, rd->block, src,
                                                rd->counts, rd->counts + n,
                                                dtype, op, -1);
        }
    }
    if (rd->ring == NULL) {
        gcx_reduce_rg_finalize(&rd->super);
        return NULL;
    }
    return &rd->super;
}
