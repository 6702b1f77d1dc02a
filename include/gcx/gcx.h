/**
 * @file gcx.h
 * @brief gcx public API: configuration, communicators, requests and dense
 *        collectives.
 *
 * Model (close to UCC and NCCL):
 * - A communicator is created collectively by all ranks from an out-of-band
 *   allgather supplied by the caller (torch Store, MPI, ...) or, with a NULL
 *   oob, from the environment (GCX_RANK/GCX_WORLD_SIZE, torchrun, Open MPI,
 *   PMI, PMIx and Slurm variables, with a TCP rendezvous at GCX_ROOT_ADDR).
 * - Every collective is non-blocking: it returns a request that is completed
 *   by gcx_test()/gcx_wait()/gcx_progress(). Passing a NULL request pointer
 *   makes the call blocking. All ranks must call collectives in the same order.
 * - One context per process: the first communicator creates it (one UCX
 *   context and worker, shared) and every other one shares it, with its
 *   endpoints; gcx_comm_split()/gcx_comm_dup() (collective over the parent)
 *   and gcx_comm_create_group() (over the new members only) make
 *   communicators over ranks already connected without any new connection.
 * - Progress is per process: gcx_progress(), gcx_test() or gcx_wait() on
 *   any communicator move the operations of every communicator.
 * - Threads: every gcx call may be made from any thread. Calls are
 *   serialized by one lock per process (a blocking call or gcx_wait drops it
 *   between progress steps, so other threads' calls proceed meanwhile);
 *   there is no parallelism inside gcx. Collectives on one communicator
 *   must be called in the same order on every rank, so two threads issuing
 *   on the same communicator must order their calls themselves; threads
 *   using different communicators need no coordination. Communicator
 *   creation (create, split, dup, create_group) is serialized within a process: every
 *   process must create its communicators in the same order.
 * - Failure: if a peer dies or a collective does not complete within
 *   GCX_TIMEOUT seconds, the collective fails with GCX_ERR_PEER or
 *   GCX_ERR_TIMEOUT, every outstanding transfer is cancelled before the error
 *   is returned (nothing lands in user buffers afterwards) and the communicator
 *   becomes unusable: later collectives fail with the same status. Destroy it.
 *   A rank whose communicator fails so tells the other ranks (a failure
 *   notice: n - 1 small messages, once), and their operations on it fail
 *   with the same status as soon as they hear it, even those waiting on a
 *   live partner that will never send (ULFM's revoke, done for them).
 * - Recovery: gcx_comm_revoke() makes every rank's pending and later
 *   operations on a communicator fail at once; gcx_comm_shrink() gives the
 *   survivors of a failure a new communicator of them (ULFM's revoke and
 *   shrink, NCCL's ncclCommShrink).
 * - Ranks that disagree on counts, types, operations or roots get
 *   GCX_ERR_MISMATCH on every rank; no buffer is overrun.
 */
#ifndef GCX_GCX_H
#define GCX_GCX_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GCX_VERSION_MAJOR 0
#define GCX_VERSION_MINOR 2
#define GCX_VERSION_PATCH 0

/** Version string of the library that is linked ("0.2.0"). */
GCX_API
const char *gcx_version(void);

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

/** Opaque parsed configuration (the GCX_* variables). */
typedef struct gcx_config gcx_config_t;

/**
 * Read every GCX_* variable from the environment and validate it.
 *
 * @param[out] config_p  New configuration, owned by the caller
 *                       (release with gcx_config_release()).
 * @return GCX_OK; GCX_ERR_INVALID when a variable has a bad value (the error
 *         is logged naming the variable and the accepted values).
 */
GCX_API
gcx_status_t gcx_config_read(gcx_config_t **config_p);

/**
 * Set one variable, by its name with or without the "GCX_" prefix, from a
 * string, with the same validation as the environment.
 */
GCX_API
gcx_status_t gcx_config_set(gcx_config_t *config, const char *name,
                            const char *value);

/**
 * Current value of a variable as text, written into buf (NUL-terminated).
 * @return GCX_OK, GCX_ERR_NOT_FOUND for an unknown name, GCX_ERR_RANGE when
 *         buf is too small.
 */
GCX_API
gcx_status_t gcx_config_get(const gcx_config_t *config, const char *name,
                            char *buf, size_t buflen);

/** Release a configuration. NULL is allowed. */
GCX_API
void gcx_config_release(gcx_config_t *config);

/* ------------------------------------------------------------------------ */
/* Communicator                                                             */
/* ------------------------------------------------------------------------ */

/**
 * Out-of-band allgather supplied by the caller (like UCC's ucc_oob_coll_t),
 * used only while a communicator is created.
 */
typedef struct gcx_oob {
    /**
     * Blocking allgather: every rank contributes @p len bytes from @p sendbuf
     * and receives size*len bytes in rank order into @p recvbuf.
     * Must return GCX_OK or an error; must not return before data is there.
     */
    gcx_status_t (*allgather)(const void *sendbuf, void *recvbuf, size_t len,
                              void *ctx);
    void *ctx;  /**< Passed back to allgather(). */
    int   rank; /**< This process's rank, 0 <= rank < size. */
    int   size; /**< Number of ranks. */
} gcx_oob_t;

/** Opaque communicator. */
typedef struct gcx_comm gcx_comm_t;

/**
 * Create a communicator; collective over all ranks.
 *
 * @param oob      Caller's allgather, or NULL to bootstrap from the
 *                 environment (rank/size variables + TCP rendezvous).
 * @param config   Configuration, or NULL to read the environment. The
 *                 communicator keeps its own copy.
 * @param[out] comm_p  The communicator, owned by the caller.
 * @return GCX_OK; GCX_ERR_INVALID (bad variable or missing rank/size);
 *         GCX_ERR_TIMEOUT (a rank did not join within GCX_TIMEOUT);
 *         GCX_ERR_PEER or GCX_ERR_REVOKED when a rank died, or revoked the
 *         new communicator, while this one was still checking it with the
 *         others (ranks that finished creation first may do so);
 *         GCX_ERR_TRANSPORT; GCX_ERR_NOMEM.
 */
GCX_API
gcx_status_t gcx_comm_create(const gcx_oob_t *oob, const gcx_config_t *config,
                             gcx_comm_t **comm_p);

/** Rank of the calling process in @p comm. */
GCX_API
int gcx_comm_rank(const gcx_comm_t *comm);

/** Number of ranks in @p comm. */
GCX_API
int gcx_comm_size(const gcx_comm_t *comm);

/**
 * Destroy a communicator. Outstanding requests are cancelled and must not be
 * used afterwards. Not collective: it does not wait for peers.
 */
GCX_API
void gcx_comm_destroy(gcx_comm_t *comm);

/**
 * The configuration the communicator was created with (read-only, owned by
 * the communicator). Lets layers above read their GCX_* variables.
 */
GCX_API
const gcx_config_t *gcx_comm_config(const gcx_comm_t *comm);

/* ------------------------------------------------------------------------ */
/* Requests and progress                                                    */
/* ------------------------------------------------------------------------ */

/** Opaque request of a non-blocking collective. */
typedef struct gcx_request gcx_request_t;

/**
 * Progress every outstanding operation of the process (every communicator:
 * they share one context) until a pass finds nothing more to do: every
 * message that has arrived is taken, and what it allows is done (a receive
 * completes, a ring step or pipeline chunk goes on, a coded chunk is
 * decoded and published), at most 32 passes of one transport progress call
 * (UCX's own per-call budget) and one step of every active operation each.
 * Never blocks. Returns GCX_OK, or the communicator's error once it has
 * failed. gcx_test() and the waits progress the same way.
 *
 * Progress happens only inside gcx calls unless the progress thread runs
 * (gcx_progress_thread_enable(), GCX_PROGRESS_THREAD=y): an operation
 * posted before a long compute phase, or a master-less coded allreduce's
 * chunks this rank owns, then advance while the application computes.
 */
GCX_API
gcx_status_t gcx_progress(gcx_comm_t *comm);

/**
 * Start the process's progress thread now, if it does not run yet (what
 * GCX_PROGRESS_THREAD=y in a communicator's configuration does at its
 * creation): one thread per process that progresses every communicator
 * whenever messages arrive, serialized with the application's gcx calls by
 * the context's lock (safe beside application threads). It sleeps on the
 * transport's events where it can (a network-only job: UCX on tcp and
 * self) and, on shared memory, polls with a backoff up to 1 ms (100 us
 * while an operation waits for messages), so an idle process spends no
 * core on it. It runs until the process's last
 * communicator is destroyed. Idempotent.
 *
 * @return GCX_OK; GCX_ERR_INVALID for a NULL @p comm; GCX_ERR_NOMEM when
 *         the thread cannot be started (logged).
 */
GCX_API
gcx_status_t gcx_progress_thread_enable(gcx_comm_t *comm);

/**
 * Progress and report: GCX_INPROGRESS while running, GCX_OK when done, an
 * error when it failed. Never blocks.
 */
GCX_API
gcx_status_t gcx_test(gcx_request_t *req);

/** Progress until the request is done; returns its final status. */
GCX_API
gcx_status_t gcx_wait(gcx_request_t *req);

/**
 * One step of a wait for many requests, for event loops that track them
 * with gcx_test() (a framework's progress thread): progress once like
 * gcx_progress(); if that found nothing to do, wait the way gcx_wait()
 * waits: with GCX_PROGRESS_SLEEP on a context that can sleep (TCP-only
 * transports), sleep on the transport's events for at most 1 ms (a message
 * ends the sleep at once); else yield the CPU (GCX_PROGRESS_YIELD). Never
 * blocks longer than that. Returns GCX_OK, or the communicator's error once
 * it has failed.
 */
GCX_API
gcx_status_t gcx_progress_wait(gcx_comm_t *comm);

/**
 * Release a request. A request still in progress is cancelled first, which
 * fails the communicator (like an abort), since ranks would fall out of step.
 */
GCX_API
void gcx_request_free(gcx_request_t *req);

/* ------------------------------------------------------------------------ */
/* Dense collectives                                                        */
/* ------------------------------------------------------------------------ */

/** Element types. F16 and BF16 are storage types: reduced in float32. */
typedef enum gcx_dtype {
    GCX_DT_F32 = 0,
    GCX_DT_F64,
    GCX_DT_I32,
    GCX_DT_I64,
    GCX_DT_F16,
    GCX_DT_BF16,
    GCX_DT_U8, /**< Raw bytes: allowed for data movement, not for reductions. */
    GCX_DT_LAST
} gcx_dtype_t;

/**
 * Reduction operations. AVG is the sum divided by the number of ranks.
 * SUM, MAX, MIN, AVG and PROD apply to every reduction type (F16/BF16 in
 * float32, integers wrap like unsigned arithmetic); the bitwise BAND, BOR
 * and BXOR to the integer types I32 and I64 only: another type is
 * GCX_ERR_INVALID.
 */
typedef enum gcx_op {
    GCX_OP_SUM = 0,
    GCX_OP_MAX,
    GCX_OP_MIN,
    GCX_OP_AVG,
    GCX_OP_PROD, /**< Product. */
    GCX_OP_BAND, /**< Bitwise and (integer types). */
    GCX_OP_BOR,  /**< Bitwise or (integer types). */
    GCX_OP_BXOR, /**< Bitwise exclusive or (integer types). */
    GCX_OP_LAST
} gcx_op_t;

/** Pass as the send buffer to run a collective in place. */
#define GCX_IN_PLACE ((const void *)1)

/** Size in bytes of one element of @p dtype (0 for an invalid type). */
GCX_API
size_t gcx_dtype_size(gcx_dtype_t dtype);

/** Name of a type ("f32") or NULL. */
GCX_API
const char *gcx_dtype_name(gcx_dtype_t dtype);

/** Name of an operation ("sum") or NULL. */
GCX_API
const char *gcx_op_name(gcx_op_t op);

/**
 * Allreduce @p count elements. @p sendbuf may be GCX_IN_PLACE or equal to
 * @p recvbuf. Algorithm: recursive doubling for small messages, ring
 * reduce-scatter + allgather for large ones (GCX_ALLREDUCE_ALGO overrides).
 * Every rank gets bit-identical results.
 *
 * @param req_p  Where to return the request, or NULL to block.
 */
GCX_API
gcx_status_t gcx_allreduce(gcx_comm_t *comm, const void *sendbuf,
                           void *recvbuf, size_t count, gcx_dtype_t dtype,
                           gcx_op_t op, gcx_request_t **req_p);

/** Broadcast @p count elements of @p buf from @p root to all ranks. */
GCX_API
gcx_status_t gcx_broadcast(gcx_comm_t *comm, void *buf, size_t count,
                           gcx_dtype_t dtype, int root, gcx_request_t **req_p);

/**
 * Allgather: each rank contributes @p count elements; @p recvbuf receives
 * size*count elements in rank order. In place: sendbuf == GCX_IN_PLACE and
 * the rank's block already sits at recvbuf + rank*count.
 */
GCX_API
gcx_status_t gcx_allgather(gcx_comm_t *comm, const void *sendbuf,
                           void *recvbuf, size_t count, gcx_dtype_t dtype,
                           gcx_request_t **req_p);

/**
 * Allgatherv: rank i contributes recvcounts[i] elements (its @p sendcount
 * must equal recvcounts[rank]), placed at recvbuf + displs[i] elements.
 * recvcounts and displs must be the same on every rank and must stay valid
 * until the request completes.
 */
GCX_API
gcx_status_t gcx_allgatherv(gcx_comm_t *comm, const void *sendbuf,
                            size_t sendcount, void *recvbuf,
                            const size_t *recvcounts, const size_t *displs,
                            gcx_dtype_t dtype, gcx_request_t **req_p);

/**
 * Alltoallv: rank i sends sendcounts[j] elements from sendbuf + sdispls[j]
 * to rank j, which must expect exactly that many in its recvcounts[i].
 * Arrays must stay valid until completion. In-place is not supported.
 */
GCX_API
gcx_status_t gcx_alltoallv(gcx_comm_t *comm, const void *sendbuf,
                           const size_t *sendcounts, const size_t *sdispls,
                           void *recvbuf, const size_t *recvcounts,
                           const size_t *rdispls, gcx_dtype_t dtype,
                           gcx_request_t **req_p);

/** Barrier: completes once every rank has entered it. */
GCX_API
gcx_status_t gcx_barrier(gcx_comm_t *comm, gcx_request_t **req_p);

/* ------------------------------------------------------------------------ */
/* Reduce-scatter and rooted collectives                                    */
/* ------------------------------------------------------------------------ */

/**
 * Reduce-scatter (MPI_Reduce_scatter_block): @p sendbuf holds size*recvcount
 * elements; rank r receives in @p recvbuf the reduction over all ranks of
 * block r (elements r*recvcount .. (r+1)*recvcount-1). AVG divides by the
 * number of ranks; f16/bf16 are reduced in float32.
 *
 * In place (as MPI_IN_PLACE): @p sendbuf == GCX_IN_PLACE (or == recvbuf)
 * takes the input from @p recvbuf, which then holds size*recvcount elements;
 * the result lands in its first recvcount elements and the rest of recvbuf
 * is overwritten with partial results. Out of place, recvbuf holds recvcount
 * elements and must not overlap sendbuf.
 *
 * Algorithm: pipelined ring (bandwidth-optimal). Results are exact for
 * integers; float results are not guaranteed bit-identical to an allreduce.
 *
 * @return GCX_OK (or the request); GCX_ERR_INVALID for a NULL communicator,
 *         a type/operation that is not a reduction (U8), NULL buffers with
 *         recvcount > 0 or overlapping buffers; GCX_ERR_MISMATCH on every
 *         rank when the ranks disagree on recvcount, type or operation
 *         (nothing is written).
 */
GCX_API
gcx_status_t gcx_reduce_scatter(gcx_comm_t *comm, const void *sendbuf,
                                void *recvbuf, size_t recvcount,
                                gcx_dtype_t dtype, gcx_op_t op,
                                gcx_request_t **req_p);

/**
 * Reduce @p count elements of every rank's @p sendbuf into @p recvbuf of
 * rank @p root. @p recvbuf is ignored on the other ranks (may be NULL).
 * In place: @p sendbuf == GCX_IN_PLACE at the root only (its input is taken
 * from recvbuf); GCX_IN_PLACE elsewhere is invalid. AVG divides by the
 * number of ranks; f16/bf16 are reduced in float32.
 *
 * Algorithm: binomial tree up to 64 KiB, ring reduce-scatter + gather to the
 * root above.
 *
 * @return GCX_OK (or the request); GCX_ERR_INVALID for a bad root, a
 *         type/operation that is not a reduction, NULL buffers with
 *         count > 0; GCX_ERR_MISMATCH on every rank when the ranks disagree
 *         on count, type, operation or root (nothing is written).
 */
GCX_API
gcx_status_t gcx_reduce(gcx_comm_t *comm, const void *sendbuf, void *recvbuf,
                        size_t count, gcx_dtype_t dtype, gcx_op_t op, int root,
                        gcx_request_t **req_p);

/**
 * Gather (MPI_Gather): each rank sends @p sendcount elements; the root's
 * @p recvbuf receives size*sendcount elements in rank order. @p recvbuf is
 * ignored on the other ranks (may be NULL). In place: @p sendbuf ==
 * GCX_IN_PLACE at the root only, whose block already sits at
 * recvbuf + root*sendcount. Every type, U8 included.
 *
 * Algorithm: binomial tree (log2 P steps) while size*sendcount is at most
 * 64 KiB, linear (zero copy, all receives posted at once) above.
 *
 * @return GCX_OK (or the request); GCX_ERR_INVALID for a bad root or type,
 *         NULL buffers with sendcount > 0; GCX_ERR_MISMATCH on every rank
 *         when the ranks disagree on sendcount, type or root.
 */
GCX_API
gcx_status_t gcx_gather(gcx_comm_t *comm, const void *sendbuf,
                        size_t sendcount, void *recvbuf, gcx_dtype_t dtype,
                        int root, gcx_request_t **req_p);

/**
 * Scatter (MPI_Scatter): the root's @p sendbuf holds size*recvcount
 * elements; rank r receives block r in @p recvbuf (recvcount elements).
 * @p sendbuf is ignored on the other ranks (may be NULL). In place:
 * @p recvbuf == GCX_IN_PLACE at the root only, whose block stays in
 * sendbuf. Every type, U8 included.
 *
 * Algorithm: binomial tree (log2 P steps) while size*recvcount is at most
 * 64 KiB, linear (zero copy, all sends posted at once) above.
 *
 * @return GCX_OK (or the request); GCX_ERR_INVALID for a bad root or type,
 *         NULL buffers with recvcount > 0; GCX_ERR_MISMATCH on every rank
 *         when the ranks disagree on recvcount, type or root.
 */
GCX_API
gcx_status_t gcx_scatter(gcx_comm_t *comm, const void *sendbuf, void *recvbuf,
                         size_t recvcount, gcx_dtype_t dtype, int root,
                         gcx_request_t **req_p);

/* ------------------------------------------------------------------------ */
/* Communicators from communicators; point-to-point                         */
/* ------------------------------------------------------------------------ */

/** Color of a rank that joins no new communicator in gcx_comm_split(). */
#define GCX_UNDEFINED (-1)

/**
 * Split @p comm into disjoint communicators, MPI_Comm_split semantics:
 * collective over @p comm (in its order of collectives); ranks passing the
 * same @p color form one new communicator, ranked by (@p key, rank in
 * @p comm); GCX_UNDEFINED joins none (*newcomm_p = NULL). The new
 * communicator shares the process context and the parent's connections
 * (no socket, no transport initialisation) and takes the parent's
 * configuration; collectives on the parent and its children may interleave
 * freely. Destroy children and parent in any order.
 *
 * @return GCX_OK; GCX_ERR_INVALID (a color < 0 other than GCX_UNDEFINED);
 *         the parent's error if it has failed; GCX_ERR_UNSUPPORTED when a
 *         process has 2048 live communicators; errors of the exchange
 *         (GCX_ERR_PEER, GCX_ERR_TIMEOUT) fail the parent as a collective.
 */
GCX_API
gcx_status_t gcx_comm_split(gcx_comm_t *comm, int color, int key,
                            gcx_comm_t **newcomm_p);

/** A communicator over the same ranks in the same order: a split with one
 *  color (MPI_Comm_dup). Collective over @p comm. */
GCX_API
gcx_status_t gcx_comm_dup(gcx_comm_t *comm, gcx_comm_t **newcomm_p);

/**
 * A communicator of some ranks of @p parent, made by those ranks only
 * (MPI_Comm_create_group semantics): collective over the listed members,
 * the other ranks of @p parent do not call and go on with the parent
 * meanwhile (it is not ordered with the parent's collectives). Rank i of
 * the new communicator is parent rank @p ranks[i]. Like a split, the new
 * communicator shares the process context and the parent's connections
 * (no socket, no transport initialisation) and gets a communicator id the
 * members agree on. One exchange among the members over the parent's
 * point-to-point channel, in a tag space user tags cannot reach:
 * ceil(log2 n) latencies.
 *
 * Creations are serialized within a process: a process that is a member of
 * several groups must create them in the same order as the other members
 * (as for any blocking collective). @p tag keeps apart the messages of
 * creations over overlapping member sets that are under way at the same
 * time (any value 0..2^31-1 the members agree on).
 *
 * @param parent   A live communicator the caller belongs to.
 * @param n        Number of members, 1..size of @p parent.
 * @param ranks    The members' parent ranks, in their new order, without
 *                 duplicates; must list the caller; the same on every member.
 * @param tag      0..2^31-1, the same on every member.
 * @param config   Configuration of the new communicator (it keeps a copy;
 *                 same GCX_TRANSPORT as the parent), or NULL for the
 *                 parent's.
 * @param[out] newcomm_p  The new communicator, owned by the caller.
 * @return GCX_OK; GCX_ERR_INVALID for a NULL argument, n < 1 or > the
 *         parent's size, a rank out of range or listed twice, a list
 *         without the caller, tag < 0 (nothing is sent; the message names
 *         the argument); the parent's error if it has failed;
 *         GCX_ERR_MISMATCH on every member when members were given
 *         different lists or orders of the same ranks (the parent stays
 *         usable); members with different member sets, a lost member or
 *         GCX_TIMEOUT fail the parent (GCX_ERR_MISMATCH, GCX_ERR_PEER,
 *         GCX_ERR_TIMEOUT, within GCX_TIMEOUT), as a point-to-point message
 *         does; GCX_ERR_UNSUPPORTED when a member has 2048 live
 *         communicators.
 */
GCX_API
gcx_status_t gcx_comm_create_group(gcx_comm_t *parent, int n,
                                   const int *ranks, int tag,
                                   const gcx_config_t *config,
                                   gcx_comm_t **newcomm_p);

/* ------------------------------------------------------------------------ */
/* Fault tolerance: revoke, shrink                                          */
/* ------------------------------------------------------------------------ */

/**
 * Revoke @p comm (MPI_Comm_revoke semantics): every pending and later
 * operation on it fails with GCX_ERR_REVOKED on every rank, so ranks that
 * wait on a collective a dead peer will never finish learn it at once
 * instead of at GCX_TIMEOUT. Not collective: the caller tells every other
 * rank, and each rank that learns it tells them again (so the notice gets
 * through when the revoker dies while sending it). A communicator that has
 * failed already keeps its first error. Works on a failed communicator (a
 * rank that saw GCX_ERR_PEER revokes so the others stop too). Only
 * gcx_comm_shrink*() and gcx_comm_destroy() remain useful afterwards.
 * Idempotent.
 *
 * @return GCX_OK; GCX_ERR_INVALID for a NULL communicator.
 */
GCX_API
gcx_status_t gcx_comm_revoke(gcx_comm_t *comm);

/**
 * The communicator's error: GCX_OK while it works, else the status that
 * failed it (GCX_ERR_PEER, GCX_ERR_TIMEOUT, GCX_ERR_REVOKED, ...). Never
 * blocks and does not progress (a framework's getError()).
 */
GCX_API
gcx_status_t gcx_comm_error(const gcx_comm_t *comm);

/** gcx_comm_shrink_ranks() flag: revoke the parent first (as
 *  NCCL_SHRINK_ABORT aborts it), so that every rank blocked in one of its
 *  collectives fails at once and can come and shrink. */
#define GCX_SHRINK_REVOKE 1

/**
 * A communicator of the survivors of @p comm: gcx_comm_shrink_ranks(comm,
 * NULL, 0, GCX_SHRINK_REVOKE, newcomm_p). The usual recovery after a
 * collective failed with GCX_ERR_PEER, GCX_ERR_TIMEOUT or GCX_ERR_REVOKED.
 */
GCX_API
gcx_status_t gcx_comm_shrink(gcx_comm_t *comm, gcx_comm_t **newcomm_p);

/**
 * Shrink (MPI_Comm_shrink, ncclCommShrink): the ranks of @p comm that call
 * agree on who takes part, and each gets a new communicator of them,
 * ranked in the order of their ranks in @p comm, over the endpoints the
 * process already has (no new connection, except where an abort closed
 * one to a live peer), with a fresh communicator id so that no message of
 * the parent can match in it. The parent may have failed (aborted,
 * revoked) or be healthy (shrink on request); it is left as it is (unless
 * GCX_SHRINK_REVOKE) and is still to be destroyed.
 *
 * Who takes part: every rank of the parent that calls, minus the ranks in
 * @p exclude, which do not call (a live rank asked to leave, as torch's
 * Backend::shrink(ranks_to_exclude) has it). A rank that died before or
 * during the shrink is left out once the others know it is gone: a peer
 * whose connection UCX reports lost, a process on this host that ended
 * (seen within milliseconds), or a rank not heard from within GCX_TIMEOUT
 * of a round (a slow rank is then treated as dead; a rank that can no
 * longer hear its host's peers leaves instead: GCX_ERR_TRANSPORT below).
 * Every survivor gets the same member set, also when more ranks die
 * during the agreement: a
 * flooding consensus (every rank sends what it knows to every rank it does
 * not know to be dead, round after round, until a round in which it heard
 * from the same ranks as in the round before; a rank that decides tells
 * the others, who adopt its decision), at most f + 2 rounds for f deaths
 * seen during it, each bounded by GCX_TIMEOUT. It assumes crash failures
 * and that the failure detector above is accurate (a rank declared dead
 * is dead); a rank that was too slow to be heard and comes late gets
 * GCX_ERR_TIMEOUT, never a communicator the others do not have.
 *
 * Collective over the ranks that take part; serialized with the other
 * creations of the process. Shrinking the same parent again later is
 * allowed (after another failure of the new one, shrink that one instead).
 *
 * @param comm       The parent (failed or not).
 * @param exclude    Parent ranks to leave out, or NULL; the same list on
 *                   every caller (the union of the lists is what counts).
 * @param nexclude   Number of entries of @p exclude (0 with NULL).
 * @param flags      0 or GCX_SHRINK_REVOKE.
 * @param[out] newcomm_p  The new communicator, owned by the caller.
 * @return GCX_OK; GCX_ERR_INVALID for a NULL argument, nexclude < 0 or
 *         > size - 1, an excluded rank out of range, listed twice or the
 *         caller itself, an unknown flag (nothing is sent; the message names
 *         the argument); GCX_ERR_TIMEOUT when this rank was left out (not
 *         heard within GCX_TIMEOUT); GCX_ERR_TRANSPORT when the process's
 *         worker was stopped by an earlier abort (destroy everything), or
 *         when this process no longer hears its peers on its host (UCX's
 *         shared-memory queue stops for good when a peer is killed while
 *         writing into it; an error says so): it tells the others it
 *         leaves, they shrink without it, and the rank is to be restarted;
 *         GCX_ERR_UNSUPPORTED when a member has 2048 live communicators.
 */
GCX_API
gcx_status_t gcx_comm_shrink_ranks(gcx_comm_t *comm, const int *exclude,
                                   int nexclude, int flags,
                                   gcx_comm_t **newcomm_p);

/**
 * Send @p count elements to rank @p peer with tag @p tag (0..2^31-1).
 * Non-blocking with @p req_p (the buffer must stay untouched until the
 * request completes), blocking with NULL. Not ordered with collectives:
 * it starts at once, whatever the communicator has queued. Messages between
 * two ranks with the same tag are received in the order they were sent.
 * A lost peer or GCX_TIMEOUT fails the communicator, as for collectives.
 */
GCX_API
gcx_status_t gcx_send(gcx_comm_t *comm, const void *buf, size_t count,
                      gcx_dtype_t dtype, int peer, int tag,
                      gcx_request_t **req_p);

/** Pass as gcx_recv()'s peer to receive from any rank of the communicator. */
#define GCX_ANY_SOURCE (-1)

/**
 * Receive exactly @p count elements from rank @p peer with tag @p tag. A
 * message of another size completes the receive with GCX_ERR_MISMATCH
 * (the buffer's content is then undefined; the communicator stays usable).
 * @p peer may be GCX_ANY_SOURCE: the first message with that tag from any
 * rank matches (gcx_recv_source() tells which); such a receive is not
 * failed by one peer's loss, only by GCX_TIMEOUT or the communicator's
 * failure.
 */
GCX_API
gcx_status_t gcx_recv(gcx_comm_t *comm, void *buf, size_t count,
                      gcx_dtype_t dtype, int peer, int tag,
                      gcx_request_t **req_p);

/**
 * The rank a completed receive's message came from (for GCX_ANY_SOURCE;
 * a receive from one peer gives that peer). Never blocks.
 *
 * @param[out] source_p  Set when the receive completed with GCX_OK.
 * @return GCX_OK; GCX_INPROGRESS while the receive runs; the receive's
 *         error when it failed; GCX_ERR_INVALID when @p req is not a
 *         gcx_recv() request or an argument is NULL.
 */
GCX_API
gcx_status_t gcx_recv_source(gcx_request_t *req, int *source_p);

#ifdef __cplusplus
}
#endif

#endif /* GCX_GCX_H */
