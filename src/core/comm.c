/*
 * comm.c - the communicator object: its memory, its link into the process
 * context (the list of live communicators, the progress callbacks of its
 * queue and control channel), derive (a communicator over some of a
 * parent's endpoints: split, dup, create_group and shrink end here), the
 * id's release, destroy.
 *
 * The constructors that talk to other ranks (create, split, dup,
 * create_group) are in comm_create.c, above the service exchange; shrink
 * is in shrink.c. Nothing here waits for another rank.
 *
 * Cost: a new communicator is a calloc, two O(1) callback registrations
 * and, for derive, one pointer per rank (the transport's view); destroy
 * gives endpoints this communicator was the last to use at most
 * GCX_COMM_CLOSE_GRACE to deliver what was sent.
 */
#include "comm.h"
#include "base/log.h"
#include "gcx_build_config.h"

#include <stdlib.h>
#include <string.h>

static int gcx_comm_state_slots;

int gcx_comm_state_slot(void)
{
    int slot = __atomic_fetch_add(&gcx_comm_state_slots, 1, __ATOMIC_RELAXED);

    return slot < GCX_COMM_STATE_MAX ? slot : -1;
}

const char *gcx_version(void)
{
    return GCX_VERSION_STRING;
}

void *gcx_comm_scratch(gcx_comm_t *comm, size_t size)
{
    if (size > comm->scratch_size) {
        void *p = NULL;

        if (posix_memalign(&p, 64, size) != 0) {
            return NULL;
        }
        free(comm->scratch);
        comm->scratch      = p;
        comm->scratch_size = size;
    }
    return comm->scratch;
}

/* seconds a destroy lets the endpoints it releases deliver what was sent */
#define GCX_COMM_CLOSE_GRACE 0.2

void gcx_comm_id_release(gcx_context_t *ctx, uint32_t id)
{
    gcx_ctl_early_forget(ctx, id);
    gcx_context_id_release(ctx, id);
}

int gcx_comm_queue_progress(gcx_comm_t *comm)
{
    gcx_task_t *failed;
    int         done = gcx_queue_progress(&comm->queue,
                                          &comm->transfer_mismatch, &failed);

    if (failed != NULL) {
        gcx_comm_fail(comm, failed->status);
        /* a transfer cancelled because its peer died (the transport's
         * process watch, or UCX) fails its task with the cause, as
         * gcx_comm_fail names it for the communicator */
        if (failed->status == GCX_ERR_CANCELED) {
            failed->status = comm->error;
        }
    }
    return done;
}

/* The queue's progress callback: nothing to do on a failed communicator
 * or an idle queue. */
static int gcx_comm_queue_progress_cb(void *arg)
{
    gcx_comm_t *comm = arg;

    if (comm->error != GCX_OK || gcx_queue_idle(&comm->queue)) {
        return 0;
    }
    gcx_context_waiting(comm->ctx);
    return gcx_comm_queue_progress(comm);
}

void gcx_comm_fail(gcx_comm_t *comm, gcx_status_t status)
{
    int r;

    if (comm->error != GCX_OK) {
        return;
    }
    /* UCX cancels the transfers it had with a peer whose connection it
     * lost: name the cause, not the symptom (a rank stopped for longer
     * than GCX_TIMEOUT wakes up to such cancellations) */
    for (r = 0; status == GCX_ERR_CANCELED && r < comm->size; ++r) {
        if (r != comm->rank && comm->tl->ops->peer_failed(comm->tl, r)) {
            status = GCX_ERR_PEER;
        }
    }
    comm->error = status;
    if (comm->failure_heard != GCX_OK && status == comm->failure_heard) {
        gcx_error("communicator failed: %s (told by rank %d); cancelling "
                  "outstanding transfers (destroy the communicator)",
                  gcx_strerror(status), comm->failure_from);
    } else {
        gcx_error("communicator failed: %s; cancelling outstanding "
                  "transfers (destroy the communicator)",
                  gcx_strerror(status));
    }
    comm->tl->ops->abort(comm->tl);
    gcx_queue_fail(&comm->queue, status);
    gcx_comm_fail_notify(comm, status);
}

/* Links the communicator into the context's list of live ones (newest
 * first), which the control channel searches by id; registers its queue's
 * and its control channel's progress. */
static void gcx_comm_link(gcx_context_t *ctx, gcx_comm_t *comm)
{
    comm->ctx_prev = NULL;
    comm->ctx_next = ctx->comms;
    if (ctx->comms != NULL) {
        ctx->comms->ctx_prev = comm;
    }
    ctx->comms = comm;
    /* the newest registration runs first: a revoke heard acts before the
     * queue moves */
    gcx_context_progress_register(ctx, &comm->queue_cb,
                                  gcx_comm_queue_progress_cb, comm);
    gcx_comm_ctl_attach(comm);
}

static void gcx_comm_unlink(gcx_context_t *ctx, gcx_comm_t *comm)
{
    gcx_context_progress_unregister(ctx, &comm->queue_cb);
    if (comm->ctx_prev != NULL) {
        comm->ctx_prev->ctx_next = comm->ctx_next;
    } else if (ctx->comms == comm) {
        ctx->comms = comm->ctx_next;
    }
    if (comm->ctx_next != NULL) {
        comm->ctx_next->ctx_prev = comm->ctx_prev;
    }
    comm->ctx_prev = comm->ctx_next = NULL;
}

void gcx_comm_free(gcx_comm_t *comm, double grace)
{
    int i;

    if (comm->tl != NULL) {
        if (comm->tl->ops->fini(comm->tl, grace)) {
            gcx_comm_id_release(comm->ctx, comm->id);
        }
    }
    gcx_comm_unlink(comm->ctx, comm);
    gcx_comm_ctl_free(comm);
    for (i = 0; i < GCX_COMM_STATE_MAX; ++i) {
        if (comm->state[i].release != NULL) {
            comm->state[i].release(comm->state[i].data);
        }
    }
    gcx_context_release(comm->ctx);
    free(comm->scratch);
    free(comm);
}


gcx_status_t gcx_comm_new(const gcx_config_t *config, int rank,
                                 int size, gcx_comm_t **comm_p)
{
    gcx_comm_t  *comm = calloc(1, sizeof(*comm));
    gcx_status_t status;

    if (comm == NULL) {
        return GCX_ERR_NOMEM;
    }
    comm->config = *config;
    comm->rank   = rank;
    comm->size   = size;
    comm->id     = UINT32_MAX;
    comm->queue.timeout = config->timeout;
    status       = gcx_context_acquire(config, &comm->ctx);
    if (status != GCX_OK) {
        free(comm);
        return status;
    }
    gcx_comm_link(comm->ctx, comm);
    *comm_p = comm;
    return GCX_OK;
}


gcx_status_t gcx_comm_derive(gcx_comm_t *parent, const gcx_config_t *config,
                             const void *offers, size_t stride,
                             const int *index, const int *members, int n,
                             int newrank, gcx_comm_t **comm_p)
{
    gcx_tl_params_t params;
    gcx_comm_t     *comm = NULL;
    gcx_status_t    status;

    status = gcx_comm_new(config, newrank, n, &comm);
    if (status != GCX_OK) {
        return status;
    }
    status = gcx_context_id_agree(comm->ctx, offers, stride, index, n,
                                  &comm->id);
    if (status != GCX_OK) {
        gcx_comm_free(comm, 0);
        return status;
    }
    params.rank    = newrank;
    params.size    = n;
    params.comm_id = comm->id;
    params.peer_failure_detection = 0; /* the parent's endpoints decide */
    comm->network_only = parent->network_only; /* agreed by the parent */
    status = parent->tl->ops->derive(parent->tl, &params, members, &comm->tl);
    if (status != GCX_OK) {
        gcx_comm_id_release(comm->ctx, comm->id);
        gcx_comm_free(comm, 0);
        return status;
    }
    gcx_comm_ctl_adopt(comm);
    *comm_p = comm;
    return GCX_OK;
}


int gcx_comm_rank(const gcx_comm_t *comm)
{
    return comm->rank;
}

int gcx_comm_size(const gcx_comm_t *comm)
{
    return comm->size;
}

const gcx_config_t *gcx_comm_config(const gcx_comm_t *comm)
{
    return &comm->config;
}

void gcx_comm_destroy(gcx_comm_t *comm)
{
    double grace;

    if (comm == NULL) {
        return;
    }
    gcx_context_lock();
    if (!gcx_queue_idle(&comm->queue)) {
        gcx_warn("communicator destroyed with operations in flight");
        gcx_comm_fail(comm, GCX_ERR_CANCELED);
    }
    /* endpoints this communicator was the last to use deliver what was
     * sent before they close, for at most GCX_COMM_CLOSE_GRACE: a live
     * peer's flush takes microseconds; a dead peer's never ends, and
     * destroy does not wait for peers (its endpoint is closed with FORCE) */
    grace = comm->error != GCX_OK ? 0 :
            comm->config.timeout < GCX_COMM_CLOSE_GRACE ?
                                    comm->config.timeout :
                                    GCX_COMM_CLOSE_GRACE;
    gcx_comm_free(comm, grace);
    gcx_context_unlock();
}
