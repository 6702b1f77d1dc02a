/*
 * allgather.c - allgather and allgatherv over the ring pipeline (ring.c).
 *
 * Every block travels P-1 hops, straight from one user buffer into the
 * next (zero copy); out of place, the rank's own block is copied once.
 * Cost: (P-1)/P·total·β + (P-1)·α·chunks. Ranks must agree on every count:
 * the argument check hashes the count arrays.
 */
#include "coll/coll.h"

#include <stdlib.h>

static gcx_status_t gcx_allgather_submit(gcx_comm_t *comm, const void *sendbuf,
                                         void *recvbuf, const size_t *counts,
                                         const size_t *displs,
                                         gcx_dtype_t dtype, uint32_t coll,
                                         int local_error,
                                         gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *task;
    size_t               n = (size_t)comm->size;

    task = gcx_ring_create(comm, GCX_RING_ALLGATHER, recvbuf,
                           sendbuf == GCX_IN_PLACE ? NULL : sendbuf, counts,
                           displs, dtype, GCX_OP_SUM, 0);
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    task->name      = coll == GCX_COLL_ALLGATHER ? "allgather" : "allgatherv";
    signature.coll  = coll;
    signature.count = 0;
    for (size_t r = 0; r < n; ++r) {
        signature.count += counts[r]; /* the same on every rank */
    }
    signature.dtype = dtype;
    signature.extra = gcx_coll_hash(gcx_coll_hash(0, counts, n * sizeof(*counts)),
                                    displs, n * sizeof(*displs));
    if (coll == GCX_COLL_ALLGATHER) {
        signature.extra = 0; /* counts are all equal to count */
    }
    signature.local_error = local_error;
    return gcx_coll_submit_checked(comm, task, &signature, req_p);
}

gcx_status_t gcx_allgather(gcx_comm_t *comm, const void *sendbuf,
                           void *recvbuf, size_t count, gcx_dtype_t dtype,
                           gcx_request_t **req_p)
{
    size_t      *counts;
    gcx_status_t status;
    int          r;

    if (comm == NULL || gcx_dtype_size(dtype) == 0 ||
        (count > 0 && (sendbuf == NULL || recvbuf == NULL))) {
        gcx_error("gcx_allgather: invalid arguments");
        return GCX_ERR_INVALID;
    }
    counts = malloc(2 * (size_t)comm->size * sizeof(size_t));
    if (counts == NULL) {
        return GCX_ERR_NOMEM;
    }
    for (r = 0; r < comm->size; ++r) {
        counts[r]              = count;
        counts[comm->size + r] = (size_t)r * count;
    }
    status = gcx_allgather_submit(comm, sendbuf, recvbuf, counts,
                                  counts + comm->size, dtype,
                                  GCX_COLL_ALLGATHER, 0, req_p);
    free(counts);
    return status;
}

gcx_status_t gcx_allgatherv(gcx_comm_t *comm, const void *sendbuf,
                            size_t sendcount, void *recvbuf,
                            const size_t *recvcounts, const size_t *displs,
                            gcx_dtype_t dtype, gcx_request_t **req_p)
{
    int local_error;

    if (comm == NULL || gcx_dtype_size(dtype) == 0 || recvcounts == NULL ||
        displs == NULL || (sendbuf == NULL && sendcount > 0) ||
        recvbuf == NULL) {
        gcx_error("gcx_allgatherv: invalid arguments");
        return GCX_ERR_INVALID;
    }
    /* a wrong sendcount fails every rank (GCX_ERR_MISMATCH), not just this
     * one, so that nobody waits for a block that never comes */
    local_error = sendbuf != GCX_IN_PLACE &&
                  sendcount != recvcounts[comm->rank];
    if (local_error) {
        gcx_error("gcx_allgatherv: sendcount %zu differs from "
                  "recvcounts[%d] = %zu",
                  sendcount, comm->rank, recvcounts[comm->rank]);
    }
    return gcx_allgather_submit(comm, sendbuf, recvbuf, recvcounts, displs,
                                dtype, GCX_COLL_ALLGATHERV, local_error,
                                req_p);
}
