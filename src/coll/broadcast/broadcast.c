/*
 * broadcast.c - broadcast: checks, algorithm table and selection.
 *
 * auto: binomial tree up to GCX_BCAST_SMALL_MSG bytes (latency), pipelined
 * chain above (bandwidth); GCX_BCAST_ALGO forces one.
 */
#include "coll/coll.h"

typedef gcx_task_t *(*gcx_broadcast_create_fn_t)(gcx_comm_t *comm,
                                                 void *buf, size_t bytes,
                                                 int root);

typedef struct gcx_broadcast_algo {
    int                       id; /* GCX_BCAST_ALGO value */
    const char               *name;
    const char               *desc;
    gcx_broadcast_create_fn_t create;
} gcx_broadcast_algo_t;

static const gcx_broadcast_algo_t gcx_broadcast_algos[] = {
    {GCX_BCAST_ALGO_BINOMIAL, "binomial", "binomial tree; small messages",
     gcx_broadcast_binomial_create},
    {GCX_BCAST_ALGO_CHAIN, "chain", "pipelined chain; large messages",
     gcx_broadcast_chain_create},
};

gcx_status_t gcx_broadcast(gcx_comm_t *comm, void *buf, size_t count,
                           gcx_dtype_t dtype, int root, gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *task;
    size_t               bytes, i;
    int                  id;

    if (comm == NULL || gcx_dtype_size(dtype) == 0 || root < 0 ||
        root >= comm->size || (count > 0 && buf == NULL)) {
        gcx_error("gcx_broadcast: invalid arguments (type %d, root %d of %d, "
                  "count %zu, buffer %p)",
                  (int)dtype, root, comm ? comm->size : -1, count, buf);
        return GCX_ERR_INVALID;
    }
    bytes = count * gcx_dtype_size(dtype);
    id    = comm->config.bcast_algo;
    if (id == GCX_BCAST_ALGO_AUTO) {
        id = bytes <= comm->config.bcast_small_msg ? GCX_BCAST_ALGO_BINOMIAL :
                                                     GCX_BCAST_ALGO_CHAIN;
    }
    for (i = 0; gcx_broadcast_algos[i].id != id; ++i) {
    }
    gcx_debug("broadcast #%u: %zu bytes from %d -> %s", comm->seq, bytes, root,
              gcx_broadcast_algos[i].name);
    task = gcx_broadcast_algos[i].create(comm, buf, bytes, root);
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    signature.coll  = GCX_COLL_BROADCAST;
    signature.count = count;
    signature.dtype = dtype;
    signature.root  = root;
    return gcx_coll_submit_checked(comm, task, &signature, req_p);
}
