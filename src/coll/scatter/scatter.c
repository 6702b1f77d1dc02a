/*
 * scatter.c - scatter from a root: argument checks and algorithm selection.
 *
 * Binomial tree (scatter_binomial.c: ceil(log2 P)·α, subtrees staged in
 * scratch) while the scattered total size·n is at most
 * GCX_SCATTER_SMALL_MSG bytes and P > 2; linear (scatter_linear.c: zero
 * copy, all sends posted at once) above. The threshold is a constant: the
 * scatter has no GCX_* variable of its own.
 */
#include "coll/coll.h"

#define GCX_SCATTER_SMALL_MSG (64u * 1024u)

gcx_status_t gcx_scatter(gcx_comm_t *comm, const void *sendbuf, void *recvbuf,
                         size_t recvcount, gcx_dtype_t dtype, int root,
                         gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *task;
    size_t               bytes;
    int                  is_root, in_place;

    if (comm == NULL) {
        gcx_error("gcx_scatter: NULL communicator");
        return GCX_ERR_INVALID;
    }
    if (gcx_dtype_size(dtype) == 0) {
        gcx_error("gcx_scatter: invalid type %d", (int)dtype);
        return GCX_ERR_INVALID;
    }
    if (root < 0 || root >= comm->size) {
        gcx_error("gcx_scatter: root %d is not a rank of the %d", root,
                  comm->size);
        return GCX_ERR_INVALID;
    }
    is_root  = comm->rank == root;
    in_place = (const void *)recvbuf == GCX_IN_PLACE;
    if (in_place && !is_root) {
        gcx_error("gcx_scatter: GCX_IN_PLACE on rank %d, which is not the "
                  "root (%d)", comm->rank, root);
        return GCX_ERR_INVALID;
    }
    if (recvcount > 0 && (recvbuf == NULL || (is_root && sendbuf == NULL))) {
        gcx_error("gcx_scatter: NULL %s with recvcount %zu",
                  recvbuf == NULL ? "recvbuf" : "sendbuf at the root",
                  recvcount);
        return GCX_ERR_INVALID;
    }
    if (in_place) {
        recvbuf = NULL;
    }
    bytes = recvcount * gcx_dtype_size(dtype);
    task  = comm->size > 2 &&
                    bytes * (size_t)comm->size <= GCX_SCATTER_SMALL_MSG ?
        gcx_scatter_binomial_create(comm, sendbuf, recvbuf, bytes, root) :
        gcx_scatter_linear_create(comm, sendbuf, recvbuf, bytes, root);
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_debug("scatter #%u: %zu x %s from %d -> %s", comm->seq, recvcount,
              gcx_dtype_name(dtype), root, task->name);
    signature.coll  = GCX_COLL_SCATTER;
    signature.count = recvcount;
    signature.dtype = dtype;
    signature.root  = root;
    return gcx_coll_submit_checked(comm, task, &signature, req_p);
}
