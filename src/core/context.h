/*
 * context.h - the process's one gcx context: what every communicator of the
 * process shares (as UCC's context is shared by its teams).
 *
 * It holds the transport context (one UCX context and worker, the endpoint
 * cache), the list of live communicators, the communicator ids in use and
 * the lock that serializes every gcx call. The first communicator creates
 * it and the last one's destroy releases it (reference counted).
 *
 * Progress: gcx_context_progress() progresses the transport once and then
 * calls the progress callbacks the parts above have registered (as each UCT
 * transport registers with a UCX worker, uct_worker_progress_register_safe):
 * each communicator's task queue and control channel, a shrink under way.
 * The context names none of them. So a wait on any communicator moves all
 * of them (a rank that waits on one communicator still answers what its
 * peers wait for on another).
 *
 * Communicator ids: each communicator owns a pair of the 12-bit tag ids (the
 * even one for collectives, the odd one for point-to-point). Ids are agreed
 * by the members at creation from every member's offer (the ids it has in
 * use and its cursor): the first pair at or after the largest cursor that
 * no member uses. So no two live communicators of a process share an id,
 * and an id is not reused before the other 2047 pairs have been (late
 * messages of a destroyed communicator find no new owner soon after).
 */
#ifndef GCX_CORE_CONTEXT_H
#define GCX_CORE_CONTEXT_H

#include "transport/transport.h"

#include <gcx/gcx.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define GCX_CONTEXT_ID_PAIRS (GCX_TL_MAX_COMM_IDS / 2)

/** What a process offers when a communicator id is agreed (wire format). */
typedef struct gcx_comm_id_offer {
    uint32_t cursor;                          /* next pair it would take */
    uint8_t  used[GCX_CONTEXT_ID_PAIRS / 8];  /* bit p: pair p in use */
} gcx_comm_id_offer_t;

/** A progress callback: bounded, non-blocking work; returns the events it
 *  handled (0: idle). Called with the context lock held; it may register or
 *  unregister callbacks (itself included), and never calls
 *  gcx_context_progress(). */
typedef int (*gcx_progress_fn_t)(void *arg);

/**
 * One registration of a progress callback. The part that registers owns
 * it (embedded in its object, as a libuv handle is: no allocation), keeps
 * it registered while it needs progress and unregisters it before the
 * memory goes.
 */
typedef struct gcx_progress_cb {
    gcx_progress_fn_t       fn;
    void                   *arg;
    struct gcx_progress_cb *prev, *next;
} gcx_progress_cb_t;

/* The context's progress thread (progress_thread.c), when one runs. */
typedef struct gcx_progress_thread {
    pthread_t thread;
    int       running;  /* started and not joined (context lock) */
    int       stop;     /* __atomic: the thread is to end */
    int       wake_fd;  /* an eventfd that ends its sleep at once */
} gcx_progress_thread_t;

typedef struct gcx_context {
    pthread_mutex_t     lock;        /* recursive: every gcx call */
    int                 refcount;    /* live communicators */
    int                 transport;   /* GCX_TRANSPORT of the first one */
    const gcx_tl_ops_t *tl_ops;
    gcx_tl_ctx_t       *tl_ctx;
    int                 network_only; /* tl_ops->ctx_network_only */
    gcx_comm_t         *comms;       /* live communicators (linked and
                                        walked by comm.c and shrink.c) */
    gcx_progress_cb_t  *progress_head; /* registered callbacks, newest
                                          first */
    gcx_progress_cb_t  *progress_next; /* the walk's next one */
    uint32_t            id_cursor;
    uint8_t             ids_used[GCX_CONTEXT_ID_PAIRS / 8];
    /* the control channel's (shrink.c): its handler is installed, and the
     * control messages for communicators not created here yet */
    int                 ctl_handler_set;
    struct gcx_ctl_msg *ctl_early;
    int                 ctl_early_n;
    gcx_progress_thread_t progress_thread; /* GCX_PROGRESS_THREAD */
    /* set during a progress pass by a part with work that waits for
     * messages (gcx_context_waiting); cleared when a pass starts */
    int                 waiting;
} gcx_context_t;

/** Lock and unlock the context (every public entry point). */
void gcx_context_lock(void);
void gcx_context_unlock(void);

/**
 * Serializes communicator creation (create, split, dup) within the process,
 * so that ids agreed from offers are not taken twice. Held across the
 * exchanges of a creation, which drop the context lock while they wait.
 */
void gcx_context_create_lock(void);
void gcx_context_create_unlock(void);

/**
 * Take a reference on the context, creating it (and the transport context)
 * for @p config's transport if it does not exist, and start its progress
 * thread if @p config asks for one (GCX_PROGRESS_THREAD; once started it
 * runs until the context is released). Call with the context lock held.
 */
gcx_status_t gcx_context_acquire(const gcx_config_t *config,
                                 gcx_context_t **ctx_p);

/** Drop a reference; the last one releases the transport context. */
void gcx_context_release(gcx_context_t *ctx);

/**
 * Register @p cb: from the next progress call on, each one calls
 * fn(arg) after the transport's progress. The newest registration is
 * called first. O(1); @p cb must not be registered already.
 */
void gcx_context_progress_register(gcx_context_t *ctx, gcx_progress_cb_t *cb,
                                   gcx_progress_fn_t fn, void *arg);

/** Unregister @p cb (a no-op if it is not registered); O(1), safe inside a
 *  callback of the walk under way. */
void gcx_context_progress_unregister(gcx_context_t *ctx,
                                     gcx_progress_cb_t *cb);

/** Progress the transport once, then call every registered callback;
 *  returns the events of all of them (0: idle). */
int gcx_context_progress(gcx_context_t *ctx);

/**
 * Called by a progress callback whose part has work waiting for messages
 * (a collective in flight, a round served ahead): the progress thread then
 * polls at its busy cadence where the transport cannot wake it
 * (progress_thread.c). ctx->waiting says it until the next pass.
 */
static inline void gcx_context_waiting(gcx_context_t *ctx)
{
    ctx->waiting = 1;
}

/** Drains in a row that found nothing before a wait or the progress
 *  thread arms the transport to sleep (a message may be on its way). */
#define GCX_CONTEXT_IDLE_DRAINS 2

/** Most passes of gcx_context_progress() one gcx_context_drain() makes. */
#define GCX_CONTEXT_DRAIN_PASSES 32

/**
 * Finish what the arrived messages allow: gcx_context_progress() again
 * while a pass found something, at most GCX_CONTEXT_DRAIN_PASSES passes
 * (each the transport's progress, bounded by UCX's per-call budget, and
 * one call of every registered callback: a decode, a publish, the next
 * step of a pipeline). Returns the events of all passes (0: idle).
 */
int gcx_context_drain(gcx_context_t *ctx);

/** Lock the context, waiting at most until @p deadline (CLOCK_REALTIME);
 *  0 when locked, else an errno (the progress thread's lock). */
int gcx_context_timedlock(const struct timespec *deadline);

/** Start the context's progress thread (lock held); GCX_OK if it runs. */
gcx_status_t gcx_progress_thread_start(gcx_context_t *ctx);

/** End and join it (lock held: the thread takes the lock with a timeout,
 *  so it sees the request); a no-op if none runs. */
void gcx_progress_thread_stop(gcx_context_t *ctx);

/** Arm the transport for a sleep: a file descriptor to poll (without the
 *  context lock) until the next event, or -1 when it cannot sleep now. */
int gcx_context_arm(gcx_context_t *ctx);

/** This process's offer for a new id. */
void gcx_context_id_offer(const gcx_context_t *ctx, gcx_comm_id_offer_t *offer);

/**
 * Agree on an id from the members' offers (@p n of them, @p stride bytes
 * apart; @p index, when not NULL, picks which); every member computes the
 * same. Marks it in use here; returns the even tag id in @p id_p.
 * GCX_ERR_UNSUPPORTED when every pair is taken on some member.
 */
gcx_status_t gcx_context_id_agree(gcx_context_t *ctx, const void *offers,
                                  size_t stride, const int *index, int n,
                                  uint32_t *id_p);

/** The communicator with even tag id @p id is gone: its pair is free. */
void gcx_context_id_release(gcx_context_t *ctx, uint32_t id);

#endif
