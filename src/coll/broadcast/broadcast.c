/*
 * broadcast.c - broadcast: checks, algorithm table and selection.
 *
 * auto: binomial tree up to GCX_BCAST_SMALL_MSG bytes (latency), pipelined
 * chain above (bandwidth); GCX_BCAST_ALGO forces one.
 */
#include "broadcast.h"
#include "coll/coll.h"

typedef gcx_task_t *(*gcx_broadcast_create_fn_t)(gcx_comm_t *comm,
                                                 void *buf, size_t bytes,
                                                 int root);

/* The algorithms' one table of names (indexed by id): the GCX_BCAST_ALGO
 * row's accepted values, the selection's result and the log lines. */
const gcx_config_value_t gcx_broadcast_algo_names[] = {
    [GCX_BCAST_ALGO_AUTO]     = {GCX_BCAST_ALGO_AUTO, "auto",
                                 "by size (GCX_BCAST_SMALL_MSG)"},
    [GCX_BCAST_ALGO_BINOMIAL] = {GCX_BCAST_ALGO_BINOMIAL, "binomial",
                                 "binomial tree; small messages"},
    [GCX_BCAST_ALGO_CHAIN]    = {GCX_BCAST_ALGO_CHAIN, "chain",
                                 "pipelined chain; large messages"},
    {0, NULL, NULL},
};

/* what runs each id but auto */
static const gcx_broadcast_create_fn_t gcx_broadcast_create[] = {
    [GCX_BCAST_ALGO_BINOMIAL] = gcx_broadcast_binomial_create,
    [GCX_BCAST_ALGO_CHAIN]    = gcx_broadcast_chain_create,
};

gcx_status_t gcx_broadcast(gcx_comm_t *comm, void *buf, size_t count,
                           gcx_dtype_t dtype, int root, gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *task;
    size_t               bytes;
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
    gcx_debug("broadcast #%u: %zu bytes from %d -> %s", comm->seq, bytes, root,
              gcx_broadcast_algo_names[id].name);
    task = gcx_broadcast_create[id](comm, buf, bytes, root);
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    signature.coll  = GCX_COLL_BROADCAST;
    signature.count = count;
    signature.dtype = dtype;
    signature.root  = root;
    return gcx_coll_submit_checked(comm, task, &signature, req_p);
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_broadcast_config_rows[] = {
    {"BCAST_ALGO", GCX_CONFIG_ENUM, "auto",
     "Broadcast algorithm; auto: binomial tree up to GCX_BCAST_SMALL_MSG "
     "bytes, pipelined chain above",
     offsetof(struct gcx_config, bcast_algo), 0, 0, gcx_broadcast_algo_names},
    {"BCAST_SMALL_MSG", GCX_CONFIG_SIZE, "256K",
     "Largest message (bytes) for which auto picks the binomial tree",
     offsetof(struct gcx_config, bcast_small_msg), 0, 1e15, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_COLL, "coll/broadcast",
                    gcx_broadcast_config_rows)
