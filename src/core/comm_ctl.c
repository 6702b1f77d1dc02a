/*
 * comm_ctl.c - a communicator's control channel: control messages and
 * revoke (ULFM's MPI_Comm_revoke). Part of the communicator object
 * (declared in comm.h); the shrink agreement (shrink.c) speaks over it.
 *
 * Control messages (transport.h: ctl_send, a context-wide handler) are
 * what an aborted view still sends and a failed communicator still hears,
 * tagged with the communicator's id. The handler (gcx_ctl_deliver, inside
 * the transport's progress) only notes a revoke or queues a copy on the
 * communicator (or, for a communicator not created here yet, on the
 * context, adopted at its creation). Each communicator registers its
 * channel's progress callback with the context (gcx_comm_ctl_attach, from
 * its creation to its destroy), which acts on a revoke heard after the
 * transport's progress returns; queued messages wait for a shrink.
 *
 * Revoke: the revoker sends a notice to every rank not known dead, then
 * fails the communicator with GCX_ERR_REVOKED (cancelling its transfers as
 * any failure does). A rank that hears one does the same, once: the
 * notice gets through if the revoker dies half way. Cost: n - 1 small
 * messages per rank, n(n-1) in all; the progress callback is a test of two
 * flags per progress call; a control message costs a malloc and a copy.
 *
 * Failure notices: a communicator that fails by its own detection (a peer
 * process ended, GCX_ERR_PEER; a transfer timed out, GCX_ERR_TIMEOUT)
 * tells every rank not known dead, once (gcx_comm_fail_notify), and a rank
 * that hears one fails its communicator with the same cause without
 * passing it on. Without them a rank whose partners in a collective are
 * alive but stuck behind the dead one waits for GCX_TIMEOUT from its own
 * call's start (one abort per hop of the collective's dependency chain,
 * each hop waiting for a CPU on a crowded host). A failed communicator is
 * unusable on its rank (destroy or shrink it), so the others' next
 * collective with that rank could not complete anyway. Cost: n - 1 small
 * messages per rank whose communicator failed by itself (the ranks that
 * saw the death or timed out: a few, at most n), nothing per peer held.
 */
#include "comm.h"
#include "ctl_wire.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

/* most control messages kept for communicators not created yet */
#define GCX_CTL_EARLY_MAX 4096

/* ---- control messages ------------------------------------------------------ */

static void gcx_ctl_append(gcx_comm_t *comm, gcx_ctl_msg_t *msg)
{
    if (comm->ctl_tail != NULL) {
        comm->ctl_tail->next = msg;
    } else {
        comm->ctl_head = msg;
    }
    comm->ctl_tail = msg;
}

/* A peer's failure notice (GCX_CTL_FAILED, @p data its whole message) for
 * @p comm: the first one's cause is noted; the communicator fails with it
 * in gcx_comm_ctl_progress, out of the transport's progress. */
static void gcx_ctl_note_failure(gcx_comm_t *comm, const gcx_ctl_hdr_t *hdr,
                                 const void *data, size_t length)
{
    int32_t cause;

    if (length != sizeof(*hdr) + sizeof(cause)) {
        return;
    }
    memcpy(&cause, (const char *)data + sizeof(*hdr), sizeof(cause));
    if (comm->failure_heard == GCX_OK &&
        (cause == GCX_ERR_PEER || cause == GCX_ERR_TIMEOUT)) {
        comm->failure_heard = (gcx_status_t)cause;
        comm->failure_from  = hdr->src;
    }
}

/* The context's control-message handler (transport.h's
 * gcx_tl_ctl_handler_t; @p arg is the context): queues a message for the
 * communicator with id @p comm_id, or notes its revoke. */
static void gcx_ctl_deliver(void *arg, uint32_t comm_id, const void *data,
                            size_t length)
{
    gcx_context_t *ctx = arg;
    gcx_comm_t    *comm;
    gcx_ctl_msg_t *msg;
    gcx_ctl_hdr_t  hdr;

    if (length < sizeof(hdr)) {
        return;
    }
    memcpy(&hdr, data, sizeof(hdr)); /* may be unaligned */
    if (hdr.magic != GCX_CTL_MAGIC) {
        return;
    }
    for (comm = ctx->comms; comm != NULL && comm->id != comm_id;
         comm = comm->ctx_next) {
    }
    if (comm != NULL && (hdr.size != comm->size || hdr.src < 0 ||
                         hdr.src >= comm->size)) {
        return; /* not for this communicator */
    }
    if (comm != NULL && hdr.type == GCX_CTL_REVOKE) {
        comm->revoke_heard = 1;
        return;
    }
    if (hdr.type == GCX_CTL_FAILED) {
        /* not kept for a communicator not here (yet or any more): a
         * notice outliving its communicator must not fail a later one
         * that takes its id; a rank that creates it late finds the
         * failure itself, as without notices */
        if (comm != NULL) {
            gcx_ctl_note_failure(comm, &hdr, data, length);
        }
        return;
    }
    msg = malloc(sizeof(*msg) + (length - sizeof(hdr)));
    if (msg == NULL) {
        gcx_error("out of memory queueing a control message: dropped");
        return;
    }
    msg->next    = NULL;
    msg->comm_id = comm_id;
    msg->length  = length;
    memcpy(&msg->hdr, data, length);
    if (comm != NULL) {
        gcx_ctl_append(comm, msg);
        return;
    }
    /* a peer that finished creating the communicator first (a split)
     * already revokes or shrinks it: kept until it exists here, newest
     * first; the oldest go when there are too many */
    msg->next      = ctx->ctl_early;
    ctx->ctl_early = msg;
    if (++ctx->ctl_early_n > GCX_CTL_EARLY_MAX) {
        gcx_ctl_msg_t **pp = &ctx->ctl_early;

        while ((*pp)->next != NULL) {
            pp = &(*pp)->next;
        }
        free(*pp);
        *pp = NULL;
        --ctx->ctl_early_n;
    }
}

void gcx_comm_ctl_adopt(gcx_comm_t *comm)
{
    gcx_context_t  *ctx = comm->ctx;
    gcx_ctl_msg_t **pp  = &ctx->ctl_early, *msg, *mine = NULL;

    while ((msg = *pp) != NULL) {
        if (msg->comm_id != comm->id) {
            pp = &msg->next;
            continue;
        }
        *pp = msg->next;
        --ctx->ctl_early_n;
        msg->next = mine; /* reversed again below: oldest first */
        mine      = msg;
    }
    while ((msg = mine) != NULL) {
        mine      = msg->next;
        msg->next = NULL;
        if (msg->hdr.size != comm->size || msg->hdr.src < 0 ||
            msg->hdr.src >= comm->size) {
            free(msg);
        } else if (msg->hdr.type == GCX_CTL_REVOKE) {
            comm->revoke_heard = 1;
            free(msg);
        } else {
            gcx_ctl_append(comm, msg);
        }
    }
}

void gcx_ctl_early_forget(gcx_context_t *ctx, uint32_t id)
{
    gcx_ctl_msg_t **pp = &ctx->ctl_early, *msg;

    while ((msg = *pp) != NULL) {
        if (msg->comm_id == id) {
            *pp = msg->next;
            --ctx->ctl_early_n;
            free(msg);
        } else {
            pp = &msg->next;
        }
    }
}

static void gcx_ctl_early_free(gcx_context_t *ctx)
{
    while (ctx->ctl_early != NULL) {
        gcx_ctl_msg_t *msg = ctx->ctl_early;

        ctx->ctl_early = msg->next;
        free(msg);
    }
    ctx->ctl_early_n = 0;
}

/* The control channel's progress callback: a revoke heard acts here, out
 * of the transport's progress (tell the others, fail); so does a failure
 * notice (fail with its cause; the notice is not passed on). */
static int gcx_comm_ctl_progress(void *arg)
{
    gcx_comm_t *comm = arg;

    if (comm->revoke_heard && !comm->revoked) {
        gcx_comm_revoke_locked(comm);
        return 1;
    }
    if (comm->failure_heard != GCX_OK && comm->error == GCX_OK) {
        comm->failure_told = 1; /* its sender told every rank */
        gcx_comm_fail(comm, comm->failure_heard);
        return 1;
    }
    return 0;
}

void gcx_comm_ctl_attach(gcx_comm_t *comm)
{
    gcx_context_t *ctx = comm->ctx;

    if (!ctx->ctl_handler_set && ctx->tl_ops->ctx_ctl_handler != NULL) {
        ctx->tl_ops->ctx_ctl_handler(ctx->tl_ctx, gcx_ctl_deliver, ctx);
        ctx->ctl_handler_set = 1;
    }
    gcx_context_progress_register(ctx, &comm->ctl_cb, gcx_comm_ctl_progress,
                                  comm);
}

void gcx_comm_ctl_free(gcx_comm_t *comm)
{
    gcx_context_progress_unregister(comm->ctx, &comm->ctl_cb);
    while (comm->ctl_head != NULL) {
        gcx_ctl_msg_t *msg = comm->ctl_head;

        comm->ctl_head = msg->next;
        free(msg);
    }
    comm->ctl_tail = NULL;
    if (comm->ctx->refcount == 1) {
        gcx_ctl_early_free(comm->ctx); /* the context goes next */
    }
}

/* ---- failure notices ---------------------------------------------------------- */

void gcx_comm_fail_notify(gcx_comm_t *comm, gcx_status_t status)
{
    struct {
        gcx_ctl_hdr_t hdr;
        int32_t       cause;
    } notice = {{GCX_CTL_MAGIC, GCX_CTL_FAILED, 0, 0, comm->rank, comm->size},
                (int32_t)status};
    int r;

    if (comm->failure_told || comm->revoked || comm->size < 2 ||
        (status != GCX_ERR_PEER && status != GCX_ERR_TIMEOUT)) {
        return;
    }
    comm->failure_told = 1;
    for (r = 0; r < comm->size; ++r) {
        if (r != comm->rank && !comm->tl->ops->peer_lost(comm->tl, r)) {
            (void)comm->tl->ops->ctl_send(comm->tl, r, &notice,
                                          sizeof(notice));
        }
    }
}

/* ---- revoke ------------------------------------------------------------------ */

void gcx_comm_revoke_locked(gcx_comm_t *comm)
{
    gcx_ctl_hdr_t hdr = {GCX_CTL_MAGIC, GCX_CTL_REVOKE, 0, 0, comm->rank,
                         comm->size};
    int           r;

    if (comm->revoked) {
        return;
    }
    comm->revoked = 1;
    for (r = 0; r < comm->size; ++r) {
        if (r != comm->rank && !comm->tl->ops->peer_lost(comm->tl, r)) {
            (void)comm->tl->ops->ctl_send(comm->tl, r, &hdr, sizeof(hdr));
        }
    }
    if (comm->error == GCX_OK) {
        gcx_comm_fail(comm, GCX_ERR_REVOKED);
    }
}

gcx_status_t gcx_comm_revoke(gcx_comm_t *comm)
{
    if (comm == NULL) {
        gcx_error("gcx_comm_revoke: the communicator is NULL");
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    if (!comm->revoked) {
        gcx_info("communicator %u revoked by rank %d", comm->id, comm->rank);
    }
    gcx_comm_revoke_locked(comm);
    gcx_context_unlock();
    return GCX_OK;
}

gcx_status_t gcx_comm_error(const gcx_comm_t *comm)
{
    gcx_status_t status;

    if (comm == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    status = comm->error;
    gcx_context_unlock();
    return status;
}
