/*
 * reduce.c - reduce to a root: argument checks and algorithm selection.
 *
 * Binomial tree (reduce_binomial.c, latency log2 P·α) up to
 * GCX_REDUCE_SMALL_MSG bytes and for one rank; above, ring reduce-scatter +
 * gather (reduce_ring_gather.c, bandwidth-optimal). The threshold is a
 * constant: the reduce has no GCX_* variable of its own yet.
 */
#include "coll/coll.h"

#define GCX_REDUCE_SMALL_MSG (64u * 1024u)

gcx_status_t gcx_reduce(gcx_comm_t *comm, const void *sendbuf, void *recvbuf,
                        size_t count, gcx_dtype_t dtype, gcx_op_t op, int root,
                        gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *task;
    size_t               bytes;
    int                  is_root;

    if (comm == NULL) {
        gcx_error("gcx_reduce: NULL communicator");
        return GCX_ERR_INVALID;
    }
    if (gcx_reduce_fn(dtype, op) == NULL) {
        gcx_error("gcx_reduce: type %d (%s) with operation %d (%s) is not a "
                  "reduction",
                  (int)dtype, gcx_dtype_name(dtype) ? gcx_dtype_name(dtype) :
                                                      "invalid",
                  (int)op, gcx_op_name(op) ? gcx_op_name(op) : "invalid");
        return GCX_ERR_INVALID;
    }
    if (root < 0 || root >= comm->size) {
        gcx_error("gcx_reduce: root %d is not a rank of the %d", root,
                  comm->size);
        return GCX_ERR_INVALID;
    }
    is_root = comm->rank == root;
    if (count > 0 && (sendbuf == NULL || (is_root && recvbuf == NULL))) {
        gcx_error("gcx_reduce: NULL %s with count %zu",
                  sendbuf == NULL ? "sendbuf" : "recvbuf at the root", count);
        return GCX_ERR_INVALID;
    }
    if (sendbuf == GCX_IN_PLACE && !is_root) {
        gcx_error("gcx_reduce: GCX_IN_PLACE on rank %d, which is not the "
                  "root (%d)", comm->rank, root);
        return GCX_ERR_INVALID;
    }
    if (sendbuf == GCX_IN_PLACE) {
        sendbuf = recvbuf;
    }
    bytes = count * gcx_dtype_size(dtype);
    if (comm->size == 1 || bytes <= GCX_REDUCE_SMALL_MSG) {
        task = gcx_reduce_binomial_create(comm, sendbuf, recvbuf, count, dtype,
                                          op, root);
    } else {
        task = gcx_reduce_ring_gather_create(comm, sendbuf, recvbuf, count,
                                             dtype, op, root);
    }
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_debug("reduce #%u: %zu x %s %s to %d -> %s", comm->seq, count,
              gcx_dtype_name(dtype), gcx_op_name(op), root, task->name);
    signature.coll  = GCX_COLL_REDUCE;
    signature.count = count;
    signature.dtype = dtype;
    signature.op    = op;
    signature.root  = root;
    return gcx_coll_submit_checked(comm, task, &signature, req_p);
}
