/*
 * comm.h - the communicator object (internal view): comm.c (the object,
 * its queue's progress and failure, derive, destroy), comm_ctl.c (its
 * control channel and revoke); the queue itself is task.c's. The constructors that talk (comm_create.c) and shrink
 * (shrink.c) are above it and declare nothing here.
 */
#ifndef GCX_CORE_COMM_H
#define GCX_CORE_COMM_H

#include "base/config.h"
#include "context.h"
#include "task.h"
#include "transport/transport.h"

#include <gcx/gcx.h>
#include <stdint.h>

/*
 * State a collective keeps across its calls on one communicator (e.g. the
 * sparse allreduce's measured network model and its feedback table):
 * created by the collective on first use, released by gcx_comm_destroy.
 * Living in the communicator, it can never be shared, lost or evicted on one
 * rank only. The core knows slots, not collectives: a layer above takes a
 * slot once with gcx_comm_state_slot() and keeps its index.
 */
#define GCX_COMM_STATE_MAX 4

typedef struct gcx_comm_state {
    void *data;
    void (*release)(void *data);
} gcx_comm_state_t;

struct gcx_comm {
    int               rank;
    int               size;
    uint32_t          id;     /* agreed at creation; part of every tag */
    uint32_t          seq;    /* sequence number of the next collective */
    struct gcx_config config;
    gcx_tl_t         *tl;
    gcx_status_t      error;  /* GCX_OK until the communicator fails */
    gcx_queue_t       queue;  /* its tasks (task.h) */
    void             *scratch; /* for the active task only */
    size_t            scratch_size;
    gcx_comm_state_t  state[GCX_COMM_STATE_MAX];
    gcx_context_t    *ctx;    /* the process's context, shared */
    int               network_only; /* every member's context reaches its
                                       peers over network sockets only
                                       (agreed at creation: collectives
                                       choose by it, so all ranks alike) */
    gcx_comm_t       *ctx_prev, *ctx_next; /* ctx->comms */
    gcx_progress_cb_t queue_cb; /* the queue's progress (comm.c) */
    gcx_progress_cb_t ctl_cb;   /* the control channel's (comm_ctl.c) */
    /* a collective's transfer got another size than expected (ranks out of
     * step without GCX_CHECK_ARGS): its other transfers may still be in
     * flight, so the mismatch fails the communicator */
    int               transfer_mismatch;
    /* the control channel and revoke (comm_ctl.c), shrink (shrink.c) */
    int               revoked;      /* revoked here: notices sent */
    int               revoke_heard; /* a peer's revoke notice arrived */
    /* failure notices (comm_ctl.c): the cause a peer's notice carried
     * (GCX_OK: none heard) and from which rank; whether this rank's own
     * failure was told to the others */
    gcx_status_t      failure_heard;
    int               failure_from;
    int               failure_told;
    uint32_t          shrink_epoch; /* shrinks of this communicator begun */
    struct gcx_ctl_msg *ctl_head, *ctl_tail; /* control messages not
                                                consumed yet (FIFO) */
};

/**
 * A slot index in every communicator's state[] for one user (a collective
 * with state across calls); the same index on every call and every rank.
 * Call once (e.g. from a pthread_once); -1 when all are taken.
 */
int gcx_comm_state_slot(void);

/** Moves the communicator's queue along (task.h's gcx_queue_progress) and
 *  fails the communicator when a task's error says so; returns tasks
 *  completed. */
int gcx_comm_queue_progress(gcx_comm_t *comm);

/**
 * Fail the communicator: cancel every transfer (nothing can land in a user
 * buffer afterwards), fail every queued task with @p status. Idempotent.
 */
void gcx_comm_fail(gcx_comm_t *comm, gcx_status_t status);

/** A new communicator object in the context, linked and registered with
 *  its progress (lock held); no id, no transport yet. */
gcx_status_t gcx_comm_new(const gcx_config_t *config, int rank, int size,
                          gcx_comm_t **comm_p);

/** Releases what a communicator holds, giving its endpoints at most
 *  @p grace seconds to deliver what was sent; the context lock is held. */
void gcx_comm_free(gcx_comm_t *comm, double grace);

/** The id @p id is free again, and so are the control messages that came
 *  for it before its communicator existed here. */
void gcx_comm_id_release(gcx_context_t *ctx, uint32_t id);

/**
 * The new communicator of @p n members (member i is parent rank
 * members[i]; this rank is newrank) over the parent's endpoints, its id
 * agreed from the members' offers (@p stride apart from @p offers, @p index
 * picks them as in gcx_context_id_agree). Context lock held.
 */
gcx_status_t gcx_comm_derive(gcx_comm_t *parent, const gcx_config_t *config,
                             const void *offers, size_t stride,
                             const int *index, const int *members, int n,
                             int newrank, gcx_comm_t **comm_p);

/* ---- the control channel (comm_ctl.c) ------------------------------------ */

/** Register the communicator's control channel with the context's
 *  progress (a revoke heard acts there) and, the first time, the context's
 *  control-message handler. */
void gcx_comm_ctl_attach(gcx_comm_t *comm);

/** Unregister it and free the control messages @p comm still holds
 *  (destroy); with the context's last communicator, also the early ones. */
void gcx_comm_ctl_free(gcx_comm_t *comm);

/** A new communicator has its id: take the control messages that came for
 *  it before it existed here (a peer that finished the creation first). */
void gcx_comm_ctl_adopt(gcx_comm_t *comm);

/** Drop the early control messages for id @p id (it is free again). */
void gcx_ctl_early_forget(gcx_context_t *ctx, uint32_t id);

/** After @p comm failed here with @p status by its own detection (a peer
 *  process ended or a transfer timed out: GCX_ERR_PEER, GCX_ERR_TIMEOUT),
 *  tell every rank not known dead, once, so their collectives on it fail
 *  with that cause at once instead of each waiting for its own detection
 *  (GCX_TIMEOUT where the dead rank is not its direct partner). Lock
 *  held; called by gcx_comm_fail. */
void gcx_comm_fail_notify(gcx_comm_t *comm, gcx_status_t status);

/** Revoke @p comm here: tell every other rank, then fail it with
 *  GCX_ERR_REVOKED (unless it failed already). Idempotent; lock held. */
void gcx_comm_revoke_locked(gcx_comm_t *comm);

/** Scratch space of at least @p size bytes for the active task; NULL: OOM. */
void *gcx_comm_scratch(gcx_comm_t *comm, size_t size);

/** Shorthands for the transport of a communicator. */
static inline gcx_status_t gcx_comm_send(gcx_comm_t *comm, int peer,
                                         uint64_t tag, const gcx_iov_t *iov,
                                         int iovcnt, gcx_tl_req_t *req)
{
    return comm->tl->ops->send(comm->tl, peer, tag, iov, iovcnt, req);
}

static inline gcx_status_t gcx_comm_recv(gcx_comm_t *comm, int peer,
                                         uint64_t tag, const gcx_iov_t *iov,
                                         int iovcnt, gcx_tl_req_t *req)
{
    return comm->tl->ops->recv(comm->tl, peer, tag, GCX_TL_TAG_MATCH_ALL, iov,
                               iovcnt, req);
}

#endif
