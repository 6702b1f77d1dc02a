/*
 * context.c - the process's one gcx context (see context.h): reference
 * count, the communicator list progress walks, id agreement, the locks.
 *
 * Cost: a lock and unlock per public call (uncontended: tens of
 * nanoseconds); a progress call walks every live communicator's queue (a
 * pointer test each when idle); an id agreement is a scan of at most 2048
 * bits per member, at creation only.
 */
#include "context.h"
#include "comm.h"
#include "shrink.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

static gcx_context_t   gcx_context_the;
static int             gcx_context_live;
static pthread_mutex_t gcx_context_mutex =
    PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t gcx_context_create_mutex = PTHREAD_MUTEX_INITIALIZER;

void gcx_context_lock(void)
{
    pthread_mutex_lock(&gcx_context_mutex);
}

void gcx_context_unlock(void)
{
    pthread_mutex_unlock(&gcx_context_mutex);
}

void gcx_context_create_lock(void)
{
    pthread_mutex_lock(&gcx_context_create_mutex);
}

void gcx_context_create_unlock(void)
{
    pthread_mutex_unlock(&gcx_context_create_mutex);
}

gcx_status_t gcx_context_acquire(int transport, gcx_context_t **ctx_p)
{
    gcx_context_t *ctx = &gcx_context_the;
    gcx_status_t   status;

    if (gcx_context_live) {
        if (transport != ctx->transport) {
            gcx_error("GCX_TRANSPORT differs from the one this process's "
                      "communicators use");
            return GCX_ERR_INVALID;
        }
        ++ctx->refcount;
        *ctx_p = ctx;
        return GCX_OK;
    }
    memset(ctx, 0, sizeof(*ctx));
    ctx->tl_ops = gcx_tl_ops_find(transport);
    if (ctx->tl_ops == NULL) {
        gcx_error("GCX_TRANSPORT=%d is not available in this build",
                  transport);
        return GCX_ERR_UNSUPPORTED;
    }
    status = ctx->tl_ops->ctx_create(&ctx->tl_ctx);
    if (status != GCX_OK) {
        return status;
    }
    ctx->transport    = transport;
    ctx->network_only = ctx->tl_ops->ctx_network_only != NULL &&
                        ctx->tl_ops->ctx_network_only(ctx->tl_ctx);
    ctx->refcount     = 1;
    if (ctx->tl_ops->ctx_ctl_handler != NULL) {
        ctx->tl_ops->ctx_ctl_handler(ctx->tl_ctx, gcx_ctl_deliver, ctx);
    }
    gcx_context_live = 1;
    *ctx_p           = ctx;
    return GCX_OK;
}

void gcx_context_release(gcx_context_t *ctx)
{
    if (--ctx->refcount > 0) {
        return;
    }
    gcx_ctl_early_free(ctx);
    ctx->tl_ops->ctx_destroy(ctx->tl_ctx);
    ctx->tl_ctx      = NULL;
    gcx_context_live = 0;
}

void gcx_context_add(gcx_context_t *ctx, gcx_comm_t *comm)
{
    comm->ctx_prev = NULL;
    comm->ctx_next = ctx->comms;
    if (ctx->comms != NULL) {
        ctx->comms->ctx_prev = comm;
    }
    ctx->comms = comm;
}

void gcx_context_remove(gcx_context_t *ctx, gcx_comm_t *comm)
{
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

int gcx_context_progress(gcx_context_t *ctx)
{
    gcx_comm_t *comm;
    int         events = ctx->tl_ops->ctx_progress(ctx->tl_ctx);

    for (comm = ctx->comms; comm != NULL; comm = comm->ctx_next) {
        if (comm->revoke_heard && !comm->revoked) {
            gcx_comm_revoke_locked(comm); /* tell the others, fail */
            ++events;
        }
        if (comm->error == GCX_OK &&
            (comm->head != NULL || comm->p2p != NULL)) {
            events += gcx_comm_queue_progress(comm);
        }
        if (comm->shrink != NULL) {
            events += gcx_shrink_progress(comm->shrink);
        }
    }
    return events;
}

int gcx_context_arm(gcx_context_t *ctx)
{
    return ctx->tl_ops->ctx_arm != NULL ? ctx->tl_ops->ctx_arm(ctx->tl_ctx)
                                        : -1;
}

static int gcx_context_id_bit(const uint8_t *used, uint32_t pair)
{
    return (used[pair / 8] >> (pair % 8)) & 1;
}

void gcx_context_id_offer(const gcx_context_t *ctx, gcx_comm_id_offer_t *offer)
{
    offer->cursor = ctx->id_cursor;
    memcpy(offer->used, ctx->ids_used, sizeof(offer->used));
}

gcx_status_t gcx_context_id_agree(gcx_context_t *ctx, const void *offers,
                                  size_t stride, const int *index, int n,
                                  uint32_t *id_p)
{
    const char *base  = offers;
    uint32_t    start = 0, k, pair;
    int         i;

#define GCX_OFFER(_i)                                                        \
    ((const gcx_comm_id_offer_t *)(base +                                    \
                                   stride * (size_t)(index ? index[_i] : (_i))))
    for (i = 0; i < n; ++i) {
        if (GCX_OFFER(i)->cursor > start) {
            start = GCX_OFFER(i)->cursor;
        }
    }
    for (k = 0; k < GCX_CONTEXT_ID_PAIRS; ++k) {
        pair = (start + k) % GCX_CONTEXT_ID_PAIRS;
        for (i = 0; i < n; ++i) {
            if (gcx_context_id_bit(GCX_OFFER(i)->used, pair)) {
                break;
            }
        }
        if (i == n) {
            break;
        }
    }
#undef GCX_OFFER
    if (k == GCX_CONTEXT_ID_PAIRS) {
        gcx_error("no communicator id is free on every member (at most %d "
                  "live communicators per process)",
                  GCX_CONTEXT_ID_PAIRS);
        return GCX_ERR_UNSUPPORTED;
    }
    if (gcx_context_id_bit(ctx->ids_used, pair)) {
        /* the offer was made by this process: cannot happen unless two
         * creations overlapped, which the creation lock prevents */
        gcx_error("communicator id %u was taken during the agreement",
                  pair * 2);
        return GCX_ERR_INVALID;
    }
    ctx->ids_used[pair / 8] |= (uint8_t)(1u << (pair % 8));
    ctx->id_cursor = (pair + 1) % GCX_CONTEXT_ID_PAIRS;
    *id_p          = pair * 2;
    return GCX_OK;
}

void gcx_context_id_release(gcx_context_t *ctx, uint32_t id)
{
    uint32_t pair = id / 2;

    gcx_ctl_early_forget(ctx, id);

    ctx->ids_used[pair / 8] &= (uint8_t)~(1u << (pair % 8));
}
