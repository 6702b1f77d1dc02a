/*
 * reduce_binomial.c - binomial tree reduce (small messages).
 *
 * Idea: with v = (rank - root) mod P, rank v receives the partial results
 * of its children v + 2^j (every 2^j below its lowest set bit, all receives
 * posted at once into the communicator scratch), folds them in one after
 * the other in a fixed order, and sends its result to v minus its lowest
 * set bit. The first fold reads the rank's input where it is (no copy);
 * the root folds straight into recvbuf and divides for AVG at the end.
 * Cost: ceil(log2 P)·(α + n·β + n·γ) on the critical path; scratch of
 * (children + 1)·n bytes.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_reduce_binomial_task {
    gcx_task_t      super;
    const char     *src;     /* the rank's input */
    char           *recvbuf; /* root only */
    const char     *cur;     /* the partial result so far */
    char           *acc;     /* where folds go */
    char           *slots;   /* one per child */
    size_t          count, bytes;
    gcx_dtype_t     dtype;
    gcx_reduce_fn_t reduce;
    int             average;
    int             root;
    int             parent; /* real rank, -1 at the root */
    int             nchildren, folded, sent;
    int             children[GCX_TL_TAG_SRC_BITS + 1];
    gcx_tl_req_t    rreqs[GCX_TL_TAG_SRC_BITS + 1];
    gcx_tl_req_t    sreq;
} gcx_reduce_binomial_task_t;

static void gcx_reduce_binomial_progress(gcx_task_t *task)
{
    gcx_reduce_binomial_task_t *rd = (gcx_reduce_binomial_task_t *)task;
    int                         state;

    while (rd->folded < rd->nchildren) {
        int i = rd->folded;

        state = gcx_coll_req_state(task, &rd->rreqs[i], rd->children[i],
                                   rd->bytes);
        if (state <= 0) {
            return;
        }
        rd->reduce(rd->acc, rd->cur, rd->slots + (size_t)i * rd->bytes,
                   rd->count);
        rd->cur = rd->acc;
        ++rd->folded;
    }
    if (rd->parent >= 0) {
        if (!rd->sent) {
            if (gcx_coll_send(task, rd->parent, 0, rd->cur, rd->bytes,
                              &rd->sreq) < 0) {
                return;
            }
            rd->sent = 1;
        }
        state = gcx_coll_req_state(task, &rd->sreq, rd->parent, SIZE_MAX);
        if (state <= 0) {
            return;
        }
    } else {
        if (rd->cur != rd->recvbuf) { /* one rank, out of place */
            memcpy(rd->recvbuf, rd->cur, rd->bytes);
        }
        if (rd->average) {
            gcx_reduce_divide(rd->recvbuf, rd->count, rd->dtype,
                              task->comm->size);
        }
    }
    task->status = GCX_OK;
}

static void gcx_reduce_binomial_post(gcx_task_t *task)
{
    gcx_reduce_binomial_task_t *rd = (gcx_reduce_binomial_task_t *)task;
    int   size = task->comm->size;
    int   v    = gcx_coll_mod(task->comm->rank - rd->root, size);
    int   low  = 1, mask, i;
    char *scratch;

    if (rd->bytes == 0) {
        task->status = GCX_OK; /* every rank agrees on the count */
        return;
    }
    while (low < size && !(v & low)) {
        low <<= 1;
    }
    rd->parent    = v == 0 ? -1 : gcx_coll_mod(v - low + rd->root, size);
    rd->nchildren = 0;
    for (mask = 1; mask < low && v + mask < size; mask <<= 1) {
        rd->children[rd->nchildren++] = gcx_coll_mod(v + mask + rd->root, size);
    }
    scratch = gcx_comm_scratch(task->comm,
                               (size_t)(rd->nchildren + 1) * rd->bytes);
    if (scratch == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    rd->acc    = v == 0 ? rd->recvbuf : scratch;
    rd->slots  = scratch + rd->bytes;
    rd->cur    = rd->src;
    rd->folded = rd->sent = 0;
    for (i = 0; i < rd->nchildren; ++i) {
        if (gcx_coll_recv(task, rd->children[i], 0,
                          rd->slots + (size_t)i * rd->bytes, rd->bytes,
                          &rd->rreqs[i]) < 0) {
            return;
        }
    }
    gcx_reduce_binomial_progress(task);
}

static void gcx_reduce_binomial_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_reduce_binomial_ops = {
    .name     = "reduce (binomial)",
    .post     = gcx_reduce_binomial_post,
    .progress = gcx_reduce_binomial_progress,
    .finalize = gcx_reduce_binomial_finalize,
};

gcx_task_t *gcx_reduce_binomial_create(gcx_comm_t *comm, const void *src,
                                       void *recvbuf, size_t count,
                                       gcx_dtype_t dtype, gcx_op_t op,
                                       int root)
{
    gcx_reduce_binomial_task_t *rd = calloc(1, sizeof(*rd));

    if (rd == NULL) {
        return NULL;
    }
    gcx_task_init(&rd->super, &gcx_reduce_binomial_ops, comm);
    rd->src     = src;
    rd->recvbuf = recvbuf;
    rd->count   = count;
    rd->bytes   = count * gcx_dtype_size(dtype);
    rd->dtype   = dtype;
    rd->reduce  = gcx_reduce_fn(dtype, op);
    rd->average = op == GCX_OP_AVG;
    rd->root    = root;
    return &rd->super;
}
