/*
 * comm.h - how gcx-train talks to other ranks: a gcx communicator, or none
 * at all for a single process (unit tests, and runs where the library has
 * no communicator). Every call is blocking and in place.
 */
#ifndef GCX_TRAIN_COMM_H
#define GCX_TRAIN_COMM_H

#include <gcx/compress.h>
#include <gcx/gcx.h>
#include <gcx/wset.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct train_comm {
    gcx_comm_t *comm; /**< NULL: one process, collectives are identities. */
    int rank;
    int size;
    /**
     * Channels of train_comm_allreduce_live (train_comm_live_open): one
     * communicator per pair (root, rank r), indexed by r (the root holds
     * size - 1 of them, another rank only live[root]); NULL when not open.
     * A pair whose peer died fails alone, never the others or @p comm.
     */
    gcx_comm_t **live;
    int live_root;
    /** Root: ranks lost in a live allreduce, a rank set over size ranks
     *  (gcx/wset.h layout: bit r % 64 of word r / 64); with live. */
    uint64_t *live_gone;
    int live_kill;      /**< Test hook (GCX_TRAIN_KILL=R:S:send|recv|stall):
                             1: SIGKILL in the next live allreduce before
                             sending, 2: after sending, 3: sleep
                             GCX_TIMEOUT + 2 s before sending; 0: off. */
} train_comm_t;

/** A single process without a communicator. */
void train_comm_local(train_comm_t *tc);

/**
 * Create the gcx communicator from the environment (gcx_comm_create with a
 * NULL oob: GCX_RANK/GCX_WORLD_SIZE/GCX_ROOT_ADDR/GCX_ROOT_PORT or a known
 * launcher's variables). When no launcher variable at all is set, the
 * process runs alone without a communicator (and says so). With
 * @p progress_thread (a TRAIN_SYNC_PROGRESS_THREAD mode) the communicator
 * runs gcx's progress thread unless GCX_PROGRESS_THREAD says otherwise.
 */
gcx_status_t train_comm_open(train_comm_t *tc, int progress_thread);

/**
 * Start gcx's progress thread for @p tc's communicator (collectives posted
 * before a compute phase then advance during it), unless the environment
 * sets GCX_PROGRESS_THREAD (which the communicator's creation obeyed).
 */
gcx_status_t train_comm_progress_thread(train_comm_t *tc);

/** Destroy the communicator, if any. */
void train_comm_close(train_comm_t *tc);

/** In-place blocking allreduce. */
gcx_status_t train_comm_allreduce(train_comm_t *tc, void *buf, size_t count,
                                  gcx_dtype_t dtype, gcx_op_t op);

/**
 * Open the channels of train_comm_allreduce_live through @p root: one
 * communicator per pair (root, r) (gcx_comm_create_group; the root makes
 * them in rank order, every other rank its own, with GCX_TIMEOUT doubled
 * plus 2 s). Collective over every rank; call it while all are alive (a
 * coded mode's init does).
 */
gcx_status_t train_comm_live_open(train_comm_t *tc, int root);

/**
 * Root: add the contribution of rank @p rank, which is gone, to @p buf
 * (evaluation: the root evaluates its part of the test set itself).
 */
typedef void (*train_live_fill_fn_t)(void *ctx, int rank, void *buf);

/**
 * Allreduce over the ranks still alive, through the root of
 * train_comm_live_open: every other rank sends its @p count values to the
 * root on its pair channel, the root combines those of the ranks not in
 * @p gone (a rank set over tc->size ranks in gcx/wset.h's layout, bit
 * r % 64 of word r / 64 for rank r; NULL: none; read on the root only)
 * with its own and sends
 * the result back to each of them. For sync modes that survive dead ranks
 * (coded), where a collective would wait for a dead rank and fail.
 *
 * A rank that dies (or does not answer within GCX_TIMEOUT: stopped, or
 * behind a link too slow for it) while the root waits for its value or
 * sends it the result costs only its own pair channel: the root counts it
 * gone (tc->live_gone, also in later calls), calls @p fill for it (may be
 * NULL) like for the ranks of @p gone, and goes on with the others; the
 * rank itself, if alive, gets no result and fails (a named cause). The
 * root posts every receive at once, so slow ranks cost one GCX_TIMEOUT
 * together; the other ranks wait 2 GCX_TIMEOUT + 2 s for the root on their
 * channel, so that wait does not time them out. Only the root's death (or
 * a root later than that) fails the call on the other ranks. F64 and I64;
 * SUM, MAX, MIN. Cost: 2(P-1) messages through the root.
 */
gcx_status_t train_comm_allreduce_live(train_comm_t *tc, void *buf,
                                       size_t count, gcx_dtype_t dtype,
                                       gcx_op_t op, const uint64_t *gone,
                                       train_live_fill_fn_t fill,
                                       void *fill_ctx);

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
