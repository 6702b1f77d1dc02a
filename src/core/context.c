/*
 * context.c - the process's one gcx context (see context.h): reference
 * count, the progress callbacks, id agreement, the locks.
 *
 * It sits right above the transport and names nothing of core above it:
 * the parts that need progress (a communicator's queue and control
 * channel, a shrink) register a callback, as UCT transports register with
 * a UCX worker (ucs_callbackq) and libuv's handles with its loop.
 *
 * Cost: a lock and unlock per public call (uncontended: tens of
 * nanoseconds); a progress call is one transport progress plus one
 * indirect call per registered callback (two per live communicator, each a
 * pointer test when idle, and one per shrink under way), and a drain (what
 * gcx_progress(), gcx_test() and every wait make) repeats it while it
 * finds work, at most GCX_CONTEXT_DRAIN_PASSES times; registering and
 * unregistering are O(1) list links; an id agreement is a scan of at most
 * 2048 bits per member, at creation only.
 */
#include "context.h"
#include "base/config.h"
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

int gcx_context_timedlock(const struct timespec *deadline)
{
    return pthread_mutex_timedlock(&gcx_context_mutex, deadline);
}

gcx_status_t gcx_context_acquire(const gcx_config_t *config,
                                 gcx_context_t **ctx_p)
{
    gcx_context_t *ctx       = &gcx_context_the;
    int            transport = config->transport;
    gcx_status_t   status;

    if (gcx_context_live) {
        if (transport != ctx->transport) {
            gcx_error("GCX_TRANSPORT differs from the one this process's "
                      "communicators use");
            return GCX_ERR_INVALID;
        }
        if (config->progress_thread && !ctx->progress_thread.running) {
            status = gcx_progress_thread_start(ctx);
            if (status != GCX_OK) {
                return status;
            }
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
    ctx->progress_thread.wake_fd = -1;
    if (config->progress_thread &&
        (status = gcx_progress_thread_start(ctx)) != GCX_OK) {
        ctx->tl_ops->ctx_destroy(ctx->tl_ctx);
        ctx->tl_ctx = NULL;
        return status;
    }
    gcx_context_live  = 1;
    *ctx_p           = ctx;
    return GCX_OK;
}

void gcx_context_release(gcx_context_t *ctx)
{
    if (--ctx->refcount > 0) {
        return;
    }
    gcx_progress_thread_stop(ctx);
    ctx->tl_ops->ctx_destroy(ctx->tl_ctx);
    ctx->tl_ctx      = NULL;
    gcx_context_live = 0;
}

void gcx_context_progress_register(gcx_context_t *ctx, gcx_progress_cb_t *cb,
                                   gcx_progress_fn_t fn, void *arg)
{
    cb->fn   = fn;
    cb->arg  = arg;
    cb->prev = NULL;
    cb->next = ctx->progress_head;
    if (ctx->progress_head != NULL) {
        ctx->progress_head->prev = cb;
    }
    ctx->progress_head = cb;
}

void gcx_context_progress_unregister(gcx_context_t *ctx,
                                     gcx_progress_cb_t *cb)
{
    if (cb->prev == NULL && ctx->progress_head != cb) {
        return; /* not registered */
    }
    if (ctx->progress_next == cb) {
        ctx->progress_next = cb->next; /* the walk goes on after it */
    }
    if (cb->prev != NULL) {
        cb->prev->next = cb->next;
    } else {
        ctx->progress_head = cb->next;
    }
    if (cb->next != NULL) {
        cb->next->prev = cb->prev;
    }
    cb->prev = cb->next = NULL;
}

int gcx_context_progress(gcx_context_t *ctx)
{
    gcx_progress_cb_t *cb;
    int                events = ctx->tl_ops->ctx_progress(ctx->tl_ctx);

    ctx->waiting = 0;
    for (cb = ctx->progress_head; cb != NULL; cb = ctx->progress_next) {
        ctx->progress_next = cb->next;
        events += cb->fn(cb->arg);
    }
    ctx->progress_next = NULL;
    return events;
}

int gcx_context_drain(gcx_context_t *ctx)
{
    int total = 0, events, pass;

    for (pass = 0; pass < GCX_CONTEXT_DRAIN_PASSES; ++pass) {
        events = gcx_context_progress(ctx);
        total += events;
        if (events == 0) {
            break;
        }
    }
    return total;
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

    ctx->ids_used[pair / 8] &= (uint8_t)~(1u << (pair % 8));
}
