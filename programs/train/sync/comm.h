/*
 * comm.h - how gcx-train talks to other ranks: a gcx communicator, or none
 * at all for a single process (unit tests, and runs where the library has
 * no communicator). Every call is blocking and in place.
 */
#ifndef GCX_TRAIN_COMM_H
#define GCX_TRAIN_COMM_H

#include <gcx/compress.h>
#include <gcx/gcx.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct train_comm {
    gcx_comm_t *comm; /**< NULL: one process, collectives are identities. */
    int rank;
    int size;
} train_comm_t;

/** A single process without a communicator. */
void train_comm_local(train_comm_t *tc);

/**
 * Create the gcx communicator from the environment (gcx_comm_create with a
 * NULL oob: GCX_RANK/GCX_WORLD_SIZE/GCX_ROOT_ADDR/GCX_ROOT_PORT or a known
 * launcher's variables). When no launcher variable at all is set, the
 * process runs alone without a communicator (and says so).
 */
gcx_status_t train_comm_open(train_comm_t *tc);

/** Destroy the communicator, if any. */
void train_comm_close(train_comm_t *tc);

/** In-place blocking allreduce. */
gcx_status_t train_comm_allreduce(train_comm_t *tc, void *buf, size_t count,
                                  gcx_dtype_t dtype, gcx_op_t op);

/**
 * Allreduce over the ranks still alive, through @p root: every other rank
 * sends its @p count values to the root (gcx_send), the root combines those
 * of the ranks not in @p gone (bit r: rank r; read on the root only) with
 * its own and sends the result back to each of them. For sync modes that
 * survive dead ranks (coded), where a collective would wait for a dead rank
 * and fail. F64 and I64; SUM, MAX, MIN. Cost: 2(P-1) messages through the
 * root. A rank the root counts gone gets no answer and fails at GCX_TIMEOUT.
 */
gcx_status_t train_comm_allreduce_live(train_comm_t *tc, void *buf,
                                       size_t count, gcx_dtype_t dtype,
                                       gcx_op_t op, int root, uint64_t gone);

/** Blocking broadcast from @p root. */
gcx_status_t train_comm_broadcast(train_comm_t *tc, void *buf, size_t count,
                                  gcx_dtype_t dtype, int root);

/**
 * Average of the ranks' sparse vectors into the dense @p out (n floats,
 * overwritten) by gcx's sparse allreduce; *bytes_p gets the bytes this rank
 * sent. One process: @p out is the input scattered.
 */
gcx_status_t train_comm_sparse_average(train_comm_t *tc,
                                       const gcx_sparse_vec_t *in,
                                       float *out, double *bytes_p);

#ifdef __cplusplus
}
#endif

#endif
