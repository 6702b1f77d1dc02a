/*
 * allreduce.c - dense allreduce: argument checks, the algorithm table and
 * selection.
 *
 * auto: recursive doubling (latency-optimal) up to GCX_ALLREDUCE_SMALL_MSG
 * bytes, then with more than 2 ranks Rabenseifner (bandwidth-optimal,
 * 2·log2 P rounds) up to GCX_ALLREDUCE_LARGE_MSG, and the pipelined ring
 * (bandwidth-optimal, chunk-pipelined) above and for 2 ranks, where both
 * have the same schedule but the ring overlaps chunks (measured in
 * perf/coll/RESULTS.md); on TCP-only jobs the ring takes over above
 * GCX_ALLREDUCE_LARGE_MSG_TCP instead (see that row).
 * GCX_ALLREDUCE_ALGO forces one. A new algorithm = one file + one id
 * (allreduce.h) + one row of each table below.
 */
#include "allreduce.h"
#include "coll/coll.h"


typedef gcx_task_t *(*gcx_allreduce_create_fn_t)(gcx_comm_t *comm,
                                                 const void *sendbuf,
                                                 void *recvbuf, size_t count,
                                                 gcx_dtype_t dtype,
                                                 gcx_op_t op);

/* The algorithms' one table of names (indexed by id): the GCX_ALLREDUCE_ALGO
 * row's accepted values, the selection's result and the log lines. */
const gcx_config_value_t gcx_allreduce_algo_names[] = {
    [GCX_ALLREDUCE_ALGO_AUTO] = {GCX_ALLREDUCE_ALGO_AUTO, "auto",
                                 "by size and P (GCX_ALLREDUCE_SMALL_MSG, "
                                 "GCX_ALLREDUCE_LARGE_MSG)"},
    [GCX_ALLREDUCE_ALGO_RECURSIVE_DOUBLING] =
        {GCX_ALLREDUCE_ALGO_RECURSIVE_DOUBLING, "recursive_doubling",
         "log2(P) full-vector exchanges; small messages"},
    [GCX_ALLREDUCE_ALGO_RING] =
        {GCX_ALLREDUCE_ALGO_RING, "ring",
         "pipelined ring reduce-scatter + allgather; large messages"},
    [GCX_ALLREDUCE_ALGO_RABENSEIFNER] =
        {GCX_ALLREDUCE_ALGO_RABENSEIFNER, "rabenseifner",
         "recursive halving reduce-scatter + recursive doubling allgather; "
         "medium messages"},
    {0, NULL, NULL},
};

/* what runs each id but auto */
static const gcx_allreduce_create_fn_t gcx_allreduce_create[] = {
    [GCX_ALLREDUCE_ALGO_RECURSIVE_DOUBLING] = gcx_allreduce_rd_create,
    [GCX_ALLREDUCE_ALGO_RING]               = gcx_allreduce_ring_create,
    [GCX_ALLREDUCE_ALGO_RABENSEIFNER]       = gcx_allreduce_rabenseifner_create,
};

static int gcx_allreduce_select(const gcx_comm_t *comm, size_t bytes)
{
    int    id    = comm->config.allreduce_algo;
    size_t large = comm->network_only ?
                       comm->config.allreduce_large_msg_tcp :
                       comm->config.allreduce_large_msg;

    if (comm->size == 1) {
        id = GCX_ALLREDUCE_ALGO_RECURSIVE_DOUBLING; /* copies, if anything */
    } else if (id == GCX_ALLREDUCE_ALGO_AUTO) {
        id = bytes <= comm->config.allreduce_small_msg ?
                 GCX_ALLREDUCE_ALGO_RECURSIVE_DOUBLING :
             (bytes <= large && comm->size > 2) ?
                 GCX_ALLREDUCE_ALGO_RABENSEIFNER :
                 GCX_ALLREDUCE_ALGO_RING;
    }
    return id;
}

gcx_status_t gcx_allreduce(gcx_comm_t *comm, const void *sendbuf,
                           void *recvbuf, size_t count, gcx_dtype_t dtype,
                           gcx_op_t op, gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *task;
    size_t               bytes;
    int                  id;

    if (comm == NULL || gcx_reduce_fn(dtype, op) == NULL ||
        (count > 0 && (recvbuf == NULL || sendbuf == NULL))) {
        gcx_error("gcx_allreduce: invalid arguments (comm %p, type %d, op %d, "
                  "count %zu, buffers %p -> %p)",
                  (void *)comm, (int)dtype, (int)op, count, sendbuf, recvbuf);
        return GCX_ERR_INVALID;
    }
    if (sendbuf == GCX_IN_PLACE) {
        sendbuf = recvbuf;
    }
    bytes = count * gcx_dtype_size(dtype);
    id   = gcx_allreduce_select(comm, bytes);
    gcx_debug("allreduce #%u: %zu x %s %s -> %s", comm->seq, count,
              gcx_dtype_name(dtype), gcx_op_name(op),
              gcx_allreduce_algo_names[id].name);
    task = gcx_allreduce_create[id](comm, sendbuf, recvbuf, count, dtype, op);
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    signature.coll  = GCX_COLL_ALLREDUCE;
    signature.count = count;
    signature.dtype = dtype;
    signature.op    = op;
    return gcx_coll_submit_checked(comm, task, &signature, req_p);
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_allreduce_config_rows[] = {
    {"ALLREDUCE_ALGO", GCX_CONFIG_ENUM, "auto",
     "Dense allreduce algorithm; auto: recursive doubling up to "
     "GCX_ALLREDUCE_SMALL_MSG bytes, Rabenseifner (recursive halving + "
     "doubling) up to GCX_ALLREDUCE_LARGE_MSG with more than 2 ranks, "
     "pipelined ring above",
     offsetof(struct gcx_config, allreduce_algo), 0, 0,
     gcx_allreduce_algo_names},
    {"ALLREDUCE_SMALL_MSG", GCX_CONFIG_SIZE, "64K",
     "Largest message (bytes) for which auto picks recursive doubling",
     offsetof(struct gcx_config, allreduce_small_msg), 0, 1e15, NULL},
    {"ALLREDUCE_LARGE_MSG", GCX_CONFIG_SIZE, "2M",
     "Largest message (bytes) for which auto picks Rabenseifner (with more "
     "than 2 ranks); the pipelined ring above",
     offsetof(struct gcx_config, allreduce_large_msg), 0, 1e15, NULL},
    {"ALLREDUCE_LARGE_MSG_TCP", GCX_CONFIG_SIZE, "512K",
     "GCX_ALLREDUCE_LARGE_MSG where every transport is TCP (UCX on tcp and "
     "self only): Rabenseifner's whole-half messages each wait a rendezvous "
     "handshake behind the data queued on the link, the ring's pipelined "
     "chunks do not",
     offsetof(struct gcx_config, allreduce_large_msg_tcp), 0, 1e15, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_COLL, "coll/allreduce",
                    gcx_allreduce_config_rows)
