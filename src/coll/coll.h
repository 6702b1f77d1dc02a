/*
 * coll.h - what every collective algorithm shares: tags, request checks,
 * block layout, the argument check, and the tasks other collectives reuse
 * (recursive doubling, the ring pipeline).
 */
#ifndef GCX_COLL_H
#define GCX_COLL_H

#include "core/comm.h"
#include "base/log.h"
#include "core/request.h"
#include "core/task.h"
#include "reduce.h"

#include <gcx/gcx.h>
#include <stdint.h>

/**
 * Tag of step @p step of @p task for a message sent by @p src. A task with
 * a step_span (task.h) wraps its steps: step k and step k + step_span share
 * a tag. That is safe for a task that sends to a peer in step order and
 * receives from it in step order (the ring: one neighbour each way, its
 * transfers posted unit by unit): the transport matches equal tags of one
 * sender in the order they were sent and posted (UCX's tag matching is
 * ordered per endpoint; the eager path's lists are FIFO), which the ring
 * already relies on for the chunks of one step. The creator sets a span
 * no wider than the step range it gives the task, so wrapped steps never
 * meet another task's. Cost: a modulo per tag.
 */
static inline uint64_t gcx_coll_tag(const gcx_task_t *task, uint32_t step,
                                    int src)
{
    if (task->step_span != 0) {
        step %= task->step_span;
    }
    return gcx_tl_tag(task->comm->id, task->seq, task->step_base + step,
                      (uint32_t)src);
}

/**
 * State of a transfer with @p peer: 1 done, 0 in flight, -1 failed (then
 * task->status holds why: the transfer's error, GCX_ERR_PEER when the peer's
 * connection is lost, GCX_ERR_MISMATCH when a receive got other than
 * @p expected bytes; pass SIZE_MAX for sends).
 */
int gcx_coll_req_state(gcx_task_t *task, gcx_tl_req_t *req, int peer,
                       size_t expected);

/**
 * State of @p n sends to @p peers (gcx_coll_req_state of each): 1 all
 * done, 0 some in flight, -1 one failed (task->status says why).
 */
int gcx_coll_sends_state(gcx_task_t *task, gcx_tl_req_t *reqs,
                         const int *peers, int n);

/** Post a contiguous send/recv; on failure sets task->status, returns it. */
gcx_status_t gcx_coll_send(gcx_task_t *task, int peer, uint32_t step,
                           const void *buf, size_t len, gcx_tl_req_t *req);
gcx_status_t gcx_coll_recv(gcx_task_t *task, int peer, uint32_t step,
                           void *buf, size_t len, gcx_tl_req_t *req);

/** The same as eager messages (transport.h send_eager/recv_eager): no
 *  rendezvous handshake, a copy on each side; both ends must use them. */
gcx_status_t gcx_coll_send_eager(gcx_task_t *task, int peer, uint32_t step,
                                 const void *buf, size_t len,
                                 gcx_tl_req_t *req);
gcx_status_t gcx_coll_recv_eager(gcx_task_t *task, int peer, uint32_t step,
                                 void *buf, size_t len, gcx_tl_req_t *req);

/** Even split of @p count elements into @p nblocks blocks; block @p b. */
static inline void gcx_coll_block(size_t count, int nblocks, int b,
                                  size_t *offset_p, size_t *len_p)
{
    size_t base = count / (size_t)nblocks, extra = count % (size_t)nblocks;
    size_t ub   = (size_t)b;

    *offset_p = ub * base + (ub < extra ? ub : extra);
    *len_p    = base + (ub < extra ? 1 : 0);
}

static inline int gcx_coll_mod(int a, int n)
{
    int m = a % n;
    return m < 0 ? m + n : m;
}

/**
 * Recursive-doubling layout shared by every doubling algorithm (MPICH's
 * scheme): p2 = 2^floor(log2 P), rem = P - p2; ranks 2j and 2j+1 (j < rem)
 * fold into the odd one, whose virtual rank is j; the even one sits out
 * (vrank -1). Other ranks r have vrank r - rem.
 */
static inline void gcx_coll_rd_layout(int size, int rank, int *p2_p,
                                      int *rem_p, int *vrank_p)
{
    int p2 = 1, rem;

    while (p2 * 2 <= size) {
        p2 *= 2;
    }
    rem = size - p2;
    *p2_p    = p2;
    *rem_p   = rem;
    *vrank_p = rank < 2 * rem ? ((rank % 2) ? rank / 2 : -1) : rank - rem;
}

/** Real rank of virtual rank @p vrank in the layout above. */
static inline int gcx_coll_rd_real_rank(int rem, int vrank)
{
    return vrank < rem ? 2 * vrank + 1 : vrank + rem;
}

/**
 * Run @p sub as a part of @p parent, outside the queue (for algorithms that
 * choose their next step from what they received, or run sub-tasks
 * concurrently): it gets the parent's sequence number and deadline and tag
 * steps from parent->step_base + @p step_offset, then is posted. Its
 * step_span stays what its creator set (0 unless set): the parent's wraps
 * the parent's own steps only.
 */
void gcx_coll_subtask_post(gcx_task_t *parent, gcx_task_t *sub,
                           uint32_t step_offset);

/**
 * Progress a sub-task posted with gcx_coll_subtask_post(): 1 done, 0 in
 * progress, -1 failed (the error is copied to parent->status).
 */
int gcx_coll_subtask_progress(gcx_task_t *parent, gcx_task_t *sub);

/* ---- argument agreement (check.c) ----------------------------------------- */

/** What every rank must agree on; hashed arrays go into @p extra. */
typedef struct gcx_coll_signature {
    uint32_t coll;  /* which collective */
    uint64_t count; /* element count (or a hash of per-rank counts) */
    int      dtype;
    int      op;
    int      root;
    uint64_t extra; /* hash of per-rank arrays, 0 if none */
    int      local_error; /* nonzero: this rank's arguments are inconsistent */
} gcx_coll_signature_t;

enum {
    GCX_COLL_ALLREDUCE = 1,
    GCX_COLL_BROADCAST,
    GCX_COLL_ALLGATHER,
    GCX_COLL_ALLGATHERV,
    GCX_COLL_ALLTOALLV,
    GCX_COLL_BARRIER,
    GCX_COLL_REDUCE_SCATTER,
    GCX_COLL_REDUCE,
    GCX_COLL_GATHER,
    GCX_COLL_SCATTER,
    GCX_COLL_INTERNAL, /* first id for collectives of later layers */
};

/** FNV-1a over bytes, for gcx_coll_signature_t.extra. */
uint64_t gcx_coll_hash(uint64_t hash, const void *data, size_t len);

/**
 * A task that fails with GCX_ERR_MISMATCH on every rank when the ranks'
 * signatures differ or any rank reports a local error (signature's
 * local_error, or *local_error when not NULL, read when the task starts:
 * that is how a check placed after an exchange learns what it saw).
 */
gcx_task_t *gcx_coll_check_create(gcx_comm_t *comm,
                                  const gcx_coll_signature_t *signature,
                                  const int *local_error);

/**
 * Wrap @p task in a schedule behind the argument check (if GCX_CHECK_ARGS)
 * and submit it. Frees @p task on failure.
 */
gcx_status_t gcx_coll_submit_checked(gcx_comm_t *comm, gcx_task_t *task,
                                     const gcx_coll_signature_t *signature,
                                     gcx_request_t **req_p);

/* ---- recursive doubling allreduce engine (allreduce/allreduce_rd.c) ------- */

typedef struct gcx_rd {
    gcx_task_t     *task;
    void           *buf;   /* in/out */
    void           *tmp;   /* bytes of scratch */
    size_t          count;
    size_t          bytes;
    gcx_dtype_t     dtype;
    gcx_reduce_fn_t reduce;
    int             phase;
    int             mask;
    int             p2, rem, vrank;
    int             partner;
    int             posted;
    gcx_tl_req_t    sreq, rreq;
} gcx_rd_t;

/** Start; returns via task->status only on failure. */
void gcx_rd_start(gcx_rd_t *rd, gcx_task_t *task, void *buf, void *tmp,
                  size_t count, gcx_dtype_t dtype, gcx_op_t op);

/** 1 when done, 0 in progress, -1 failed (task->status says why). */
int gcx_rd_progress(gcx_rd_t *rd);

/* ---- ring pipeline (ring.c): reduce-scatter or allgather ------------------ */

/* GCX_RING_EAGER: how ring chunks travel */
typedef enum gcx_ring_eager {
    GCX_RING_EAGER_AUTO = 0, /* eager on network-only contexts */
    GCX_RING_EAGER_ON,
    GCX_RING_EAGER_OFF,
} gcx_ring_eager_t;

typedef enum gcx_ring_mode {
    GCX_RING_REDUCE_SCATTER, /* recv into scratch, buf[b] = src[b] op tmp */
    GCX_RING_ALLGATHER,      /* recv straight into buf */
} gcx_ring_mode_t;

/**
 * New ring task over blocks (counts/displs in elements, copied). Rank r
 * at step k sends block (r + shift - k) and receives (r + shift - k - 1).
 * Reduce-scatter: afterwards rank r holds block (r + shift + 1) mod P
 * reduced, so an allgather with shift + 1 spreads it. Reduce-scatter: @p src is the rank's input
 * (== buf in place). Allgather: if @p src is neither NULL nor buf, the
 * rank's own block is copied from src into buf when the task starts.
 */
gcx_task_t *gcx_ring_create(gcx_comm_t *comm, gcx_ring_mode_t mode, void *buf,
                            const void *src, const size_t *counts,
                            const size_t *displs, gcx_dtype_t dtype,
                            gcx_op_t op, int shift);

/**
 * Reduce-scatter of the ring above whose partial results are staged in
 * @p out, max(counts) elements long, instead of a full-length buffer: the
 * rank's reduced block (r + shift + 1) mod P ends at @p out (AVG divided).
 * @p src (full length, never written) must not overlap @p out.
 */
gcx_task_t *gcx_ring_rs_block_create(gcx_comm_t *comm, void *out,
                                     const void *src, const size_t *counts,
                                     const size_t *displs, gcx_dtype_t dtype,
                                     gcx_op_t op, int shift);

/**
 * Keep a ring task's chunks tagged (rendezvous, zero copy) under
 * GCX_RING_EAGER=auto, before it is posted: for rings whose copies would
 * compete with heavy local work for the CPU (the sparse allreduce measured
 * 1-8% slower with eager chunks at 1% density). GCX_RING_EAGER=on still
 * makes them eager.
 */
void gcx_ring_prefer_tagged(gcx_task_t *task);

/* ---- algorithm constructors ----------------------------------------------- */

gcx_task_t *gcx_allreduce_rd_create(gcx_comm_t *comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    gcx_dtype_t dtype, gcx_op_t op);
gcx_task_t *gcx_allreduce_rabenseifner_create(gcx_comm_t *comm,
                                              const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              gcx_dtype_t dtype, gcx_op_t op);
gcx_task_t *gcx_allreduce_ring_create(gcx_comm_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      gcx_dtype_t dtype, gcx_op_t op);
gcx_task_t *gcx_broadcast_binomial_create(gcx_comm_t *comm, void *buf,
                                          size_t bytes, int root);
gcx_task_t *gcx_broadcast_chain_create(gcx_comm_t *comm, void *buf,
                                       size_t bytes, int root);
gcx_task_t *gcx_barrier_dissemination_create(gcx_comm_t *comm);
gcx_task_t *gcx_reduce_binomial_create(gcx_comm_t *comm, const void *src,
                                       void *recvbuf, size_t count,
                                       gcx_dtype_t dtype, gcx_op_t op,
                                       int root);
gcx_task_t *gcx_reduce_ring_gather_create(gcx_comm_t *comm, const void *src,
                                          void *recvbuf, size_t count,
                                          gcx_dtype_t dtype, gcx_op_t op,
                                          int root);
/* gather/scatter: sendbuf (gather) or recvbuf (scatter) NULL = in place at
 * the root; bytes per rank */
gcx_task_t *gcx_gather_binomial_create(gcx_comm_t *comm, const void *sendbuf,
                                       void *recvbuf, size_t bytes, int root);
gcx_task_t *gcx_gather_linear_create(gcx_comm_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t bytes, int root);
gcx_task_t *gcx_scatter_binomial_create(gcx_comm_t *comm, const void *sendbuf,
                                        void *recvbuf, size_t bytes, int root);
gcx_task_t *gcx_scatter_linear_create(gcx_comm_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t bytes, int root);

#endif
