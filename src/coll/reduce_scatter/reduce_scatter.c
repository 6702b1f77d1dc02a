/*
 * reduce_scatter.c - reduce-scatter (MPI_Reduce_scatter_block semantics)
 * over the ring pipeline of ring.c.
 *
 * Idea: the input is P blocks of recvcount elements; the ring reduce-scatter
 * with shift -1 leaves block r fully reduced on rank r after P-1 steps, each
 * block cut into GCX_PIPELINE_CHUNK chunks that flow independently.
 *  - out of place: the one-block variant keeps the partial sums in recvbuf
 *    itself (recvcount elements), so no full-length scratch is needed and
 *    sendbuf is only read; the last step leaves the result there.
 *  - in place (input in recvbuf, size*recvcount elements): the full-length
 *    ring works in recvbuf and the rank's block r is then moved to the
 *    front; the other blocks of recvbuf are left holding partial sums.
 * AVG divides each rank's block once, on that rank. A block is reduced in
 * ring order starting from a different rank on each block, so float results
 * are not bit-identical to an allreduce (exact for integers).
 *
 * The ring is used for every size: it is bandwidth-optimal, and for small
 * messages its P-1 steps of one chunk each cost (P-1)·α, no worse than the
 * alternatives for the P this library is run with (recursive halving needs
 * log2 P steps but a power of two).
 * Cost: (P-1)·α·chunks + (P-1)/P·n·β + (P-1)/P·n·γ with n = size·recvcount
 * elements (bandwidth- and compute-optimal).
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_reduce_scatter_task {
    gcx_task_t  super;
    gcx_task_t *ring;
    char       *recvbuf;
    size_t      bytes; /* of the rank's block */
    int         in_place;
} gcx_reduce_scatter_task_t;

static void gcx_reduce_scatter_progress(gcx_task_t *task)
{
    gcx_reduce_scatter_task_t *rs = (gcx_reduce_scatter_task_t *)task;
    int                        rank = task->comm->rank;

    if (gcx_coll_subtask_progress(task, rs->ring) <= 0) {
        return;
    }
    if (rs->in_place && rank > 0 && rs->bytes > 0) {
        memmove(rs->recvbuf, rs->recvbuf + (size_t)rank * rs->bytes,
                rs->bytes);
    }
    task->status = GCX_OK;
}

static void gcx_reduce_scatter_post(gcx_task_t *task)
{
    gcx_reduce_scatter_task_t *rs = (gcx_reduce_scatter_task_t *)task;

    gcx_coll_subtask_post(task, rs->ring, 0);
    gcx_reduce_scatter_progress(task);
}

static void gcx_reduce_scatter_finalize(gcx_task_t *task)
{
    gcx_reduce_scatter_task_t *rs = (gcx_reduce_scatter_task_t *)task;

    rs->ring->ops->finalize(rs->ring);
    free(rs);
}

static const gcx_task_ops_t gcx_reduce_scatter_ops = {
    .name     = "reduce-scatter",
    .post     = gcx_reduce_scatter_post,
    .progress = gcx_reduce_scatter_progress,
    .finalize = gcx_reduce_scatter_finalize,
};

gcx_status_t gcx_reduce_scatter(gcx_comm_t *comm, const void *sendbuf,
                                void *recvbuf, size_t recvcount,
                                gcx_dtype_t dtype, gcx_op_t op,
                                gcx_request_t **req_p)
{
    gcx_reduce_scatter_task_t *rs;
    gcx_coll_signature_t       signature = {0};
    size_t                    *counts;
    int                        in_place, b;

    if (comm == NULL) {
        gcx_error("gcx_reduce_scatter: NULL communicator");
        return GCX_ERR_INVALID;
    }
    if (gcx_reduce_fn(dtype, op) == NULL) {
        gcx_error("gcx_reduce_scatter: type %d (%s) with operation %d (%s) "
                  "is not a reduction",
                  (int)dtype, gcx_dtype_name(dtype) ? gcx_dtype_name(dtype) :
                                                      "invalid",
                  (int)op, gcx_op_name(op) ? gcx_op_name(op) : "invalid");
        return GCX_ERR_INVALID;
    }
    if (recvcount > 0 && (sendbuf == NULL || recvbuf == NULL)) {
        gcx_error("gcx_reduce_scatter: NULL %s with recvcount %zu",
                  sendbuf == NULL ? "sendbuf" : "recvbuf", recvcount);
        return GCX_ERR_INVALID;
    }
    in_place = sendbuf == GCX_IN_PLACE || sendbuf == recvbuf;
    if (!in_place && recvcount > 0 &&
        (const char *)sendbuf < (const char *)recvbuf +
                                    recvcount * gcx_dtype_size(dtype) &&
        (const char *)recvbuf < (const char *)sendbuf +
                                    (size_t)comm->size * recvcount *
                                        gcx_dtype_size(dtype)) {
        gcx_error("gcx_reduce_scatter: sendbuf and recvbuf overlap (use "
                  "GCX_IN_PLACE with the input in recvbuf)");
        return GCX_ERR_INVALID;
    }
    rs     = calloc(1, sizeof(*rs));
    counts = malloc(2 * (size_t)comm->size * sizeof(size_t));
    if (rs == NULL || counts == NULL) {
        free(rs);
        free(counts);
        return GCX_ERR_NOMEM;
    }
    for (b = 0; b < comm->size; ++b) {
        counts[b]              = recvcount;
        counts[comm->size + b] = (size_t)b * recvcount;
    }
    gcx_task_init(&rs->super, &gcx_reduce_scatter_ops, comm);
    rs->recvbuf  = recvbuf;
    rs->bytes    = recvcount * gcx_dtype_size(dtype);
    rs->in_place = in_place;
    /* shift -1: rank r ends with block r */
    rs->ring = in_place ?
        gcx_ring_create(comm, GCX_RING_REDUCE_SCATTER, recvbuf, recvbuf,
                        counts, counts + comm->size, dtype, op, -1) :
        gcx_ring_rs_block_create(comm, recvbuf, sendbuf, counts,
                                 counts + comm->size, dtype, op, -1);
    free(counts);
    if (rs->ring == NULL) {
        free(rs);
        return GCX_ERR_NOMEM;
    }
    gcx_debug("reduce-scatter #%u: %zu x %s %s per rank%s", comm->seq,
              recvcount, gcx_dtype_name(dtype), gcx_op_name(op),
              in_place ? " in place" : "");
    signature.coll  = GCX_COLL_REDUCE_SCATTER;
    signature.count = recvcount;
    signature.dtype = dtype;
    signature.op    = op;
    return gcx_coll_submit_checked(comm, &rs->super, &signature, req_p);
}
