/*
 * gather.c - gather to a root: argument checks and algorithm selection.
 *
 * Binomial tree (gather_binomial.c: ceil(log2 P)·α, subtrees staged in
 * scratch) while the gathered total size·n is at most GCX_GATHER_SMALL_MSG
 * bytes and P > 2; linear (gather_linear.c: zero copy, all receives posted
 * at once) above, where the (P-1)·n·β at the root dominates both. The
 * threshold is a constant: the gather has no GCX_* variable of its own.
 */
#include "coll/coll.h"

#define GCX_GATHER_SMALL_MSG (64u * 1024u)

gcx_status_t gcx_gather(gcx_comm_t *comm, const void *sendbuf,
                        size_t sendcount, void *recvbuf, gcx_dtype_t dtype,
                        int root, gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *task;
    size_t               bytes;
    int                  is_root;

    if (comm == NULL) {
        gcx_error("gcx_gather: NULL communicator");
        return GCX_ERR_INVALID;
    }
    if (gcx_dtype_size(dtype) == 0) {
        gcx_error("gcx_gather: invalid type %d", (int)dtype);
        return GCX_ERR_INVALID;
    }
    if (root < 0 || root >= comm->size) {
        gcx_error("gcx_gather: root %d is not a rank of the %d", root,
                  comm->size);
        return GCX_ERR_INVALID;
    }
    is_root = comm->rank == root;
    if (sendcount > 0 && (sendbuf == NULL || (is_root && recvbuf == NULL))) {
        gcx_error("gcx_gather: NULL %s with sendcount %zu",
                  sendbuf == NULL ? "sendbuf" : "recvbuf at the root",
                  sendcount);
        return GCX_ERR_INVALID;
    }
    if (sendbuf == GCX_IN_PLACE && !is_root) {
        gcx_error("gcx_gather: GCX_IN_PLACE on rank %d, which is not the "
                  "root (%d)", comm->rank, root);
        return GCX_ERR_INVALID;
    }
    if (sendbuf == GCX_IN_PLACE) {
        sendbuf = NULL;
    }
    bytes = sendcount * gcx_dtype_size(dtype);
    task  = comm->size > 2 &&
                    bytes * (size_t)comm->size <= GCX_GATHER_SMALL_MSG ?
        gcx_gather_binomial_create(comm, sendbuf, recvbuf, bytes, root) :
        gcx_gather_linear_create(comm, sendbuf, recvbuf, bytes, root);
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_debug("gather #%u: %zu x %s to %d -> %s", comm->seq, sendcount,
              gcx_dtype_name(dtype), root, task->name);
    signature.coll  = GCX_COLL_GATHER;
    signature.count = sendcount;
    signature.dtype = dtype;
    signature.root  = root;
    return gcx_coll_submit_checked(comm, task, &signature, req_p);
}
