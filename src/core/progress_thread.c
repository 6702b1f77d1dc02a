/*
 * progress_thread.c - the context's own progress thread (GCX_PROGRESS_THREAD,
 * off by default): gcx moves while the application computes.
 *
 * Without it gcx progresses only inside gcx calls, so a collective posted
 * before a compute phase, or the chunks a master-less coded allreduce's
 * owner serves ahead of its own call, wait until the application next calls
 * in (frameworks ran a thread of their own calling gcx_progress() every
 * millisecond for that). With it, one thread per process drains the
 * context (context.h: what the arrived messages allow) whenever messages
 * arrive, under the context lock that serializes every gcx call, so it is
 * safe beside application threads calling gcx at the same time.
 *
 * Sleeping. After GCX_CONTEXT_IDLE_DRAINS drains that found nothing (as a
 * wait does, request.c) it arms the transport (ucp_worker_arm) and
 * poll()s the worker's event fd, where the transport
 * has one (UCX with tcp and self only: a network-only job), and an eventfd
 * of its own that ends the sleep at once when the context goes; the sleep
 * is at most GCX_PROGRESS_THREAD_TICK_MS so deadlines (GCX_TIMEOUT, a coded
 * gather's straggler deadline) are checked that often. Where the transport
 * cannot wake it (shared memory polls: UCX 1.13's mm transport signals only
 * an armed reader, and cma none), it sleeps between polls, 20 us at first,
 * doubling while idle up to GCX_PROGRESS_THREAD_POLL_MAX_US, or up to
 * GCX_PROGRESS_THREAD_POLL_BUSY_US while some work waits for messages (a
 * collective in flight, a coded round served ahead: gcx_context_waiting),
 * whose every hop -- a decode, an acknowledgement -- would otherwise wait
 * up to a millisecond for the next poll. The anchors:
 * MPICH's MPIR_CVAR_ASYNC_PROGRESS (a thread that spins in the progress
 * engine, a core per process, and every MPI call then pays a global lock),
 * Open MPI's opal_progress thread (off by default for the same reason),
 * NCCL's proxy thread (it polls its network plugin: a core's share). The
 * sleeping thread costs no core: idle, one wakeup per tick.
 *
 * Cost: one thread and one eventfd per process, nothing per peer. Idle:
 * with an event fd, 1000 / GCX_PROGRESS_THREAD_TICK_MS wakeups a second of a
 * lock and a drain each; without, at most 1e6 / POLL_MAX_US wakeups a
 * second, 1e6 / POLL_BUSY_US while work waits. Busy: a drain per arrival,
 * and the lock against application calls (a drain holds it for its
 * passes; the application's waits drop it between theirs).
 */
#include "context.h"
#include "base/config.h"
#include "base/log.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* longest sleep on the transport's event fd, milliseconds */
#define GCX_PROGRESS_THREAD_TICK_MS 10
/* longest sleep between polls where the transport cannot wake the thread */
#define GCX_PROGRESS_THREAD_POLL_MAX_US 1000
/* ... while work waits for messages (gcx_context_waiting) */
#define GCX_PROGRESS_THREAD_POLL_BUSY_US 100
/* longest wait for the context lock before the stop request is read again */
#define GCX_PROGRESS_THREAD_LOCK_NS 1000000L

static void gcx_progress_thread_sleep_us(long us)
{
    struct timespec ts = {us / 1000000L, (us % 1000000L) * 1000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void gcx_progress_thread_sleep_fd(gcx_progress_thread_t *pt, int fd)
{
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
                            {.fd = pt->wake_fd, .events = POLLIN}};

    (void)poll(pfd, 2, GCX_PROGRESS_THREAD_TICK_MS);
}

static void *gcx_progress_thread_main(void *arg)
{
    gcx_context_t         *ctx      = arg;
    gcx_progress_thread_t *pt       = &ctx->progress_thread;
    long                   sleep_us = 0, max_us;
    int                    idle     = 0;

    while (!__atomic_load_n(&pt->stop, __ATOMIC_ACQUIRE)) {
        struct timespec deadline;
        int             events, fd = -1;

        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += GCX_PROGRESS_THREAD_LOCK_NS;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_nsec -= 1000000000L;
            ++deadline.tv_sec;
        }
        if (gcx_context_timedlock(&deadline) != 0) {
            continue; /* held long (a creation, a destroy): ask again */
        }
        events = gcx_context_drain(ctx);
        max_us = ctx->waiting ? GCX_PROGRESS_THREAD_POLL_BUSY_US :
                                GCX_PROGRESS_THREAD_POLL_MAX_US;
        idle   = events == 0 ? idle + 1 : 0;
        if (idle >= GCX_CONTEXT_IDLE_DRAINS) {
            fd = gcx_context_arm(ctx);
        }
        gcx_context_unlock();
        if (events > 0) {
            sleep_us = 0;
        } else if (fd >= 0) {
            gcx_progress_thread_sleep_fd(pt, fd);
            idle = 0;
        } else if (idle >= GCX_CONTEXT_IDLE_DRAINS) {
            sleep_us = sleep_us == 0 ? 20 : sleep_us * 2;
            sleep_us = sleep_us > max_us ? max_us : sleep_us;
            gcx_progress_thread_sleep_us(sleep_us);
        }
    }
    return NULL;
}

gcx_status_t gcx_progress_thread_start(gcx_context_t *ctx)
{
    gcx_progress_thread_t *pt = &ctx->progress_thread;
    sigset_t               all, old;
    int                    rc;

    if (pt->running) {
        return GCX_OK;
    }
    pt->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (pt->wake_fd < 0) {
        gcx_error("GCX_PROGRESS_THREAD: eventfd failed: %s", strerror(errno));
        return GCX_ERR_NOMEM;
    }
    __atomic_store_n(&pt->stop, 0, __ATOMIC_RELEASE);
    /* signals stay with the application's threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&pt->thread, NULL, gcx_progress_thread_main, ctx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        gcx_error("GCX_PROGRESS_THREAD: cannot start the thread: %s",
                  strerror(rc));
        close(pt->wake_fd);
        pt->wake_fd = -1;
        return GCX_ERR_NOMEM;
    }
    pt->running = 1;
    gcx_debug("progress thread started");
    return GCX_OK;
}

void gcx_progress_thread_stop(gcx_context_t *ctx)
{
    gcx_progress_thread_t *pt  = &ctx->progress_thread;
    uint64_t               one = 1;

    if (!pt->running) {
        return;
    }
    __atomic_store_n(&pt->stop, 1, __ATOMIC_RELEASE);
    if (write(pt->wake_fd, &one, sizeof(one)) < 0) {
        /* a full counter still wakes it; the tick bounds the rest */
    }
    pthread_join(pt->thread, NULL);
    close(pt->wake_fd);
    pt->wake_fd = -1;
    pt->running = 0;
}

/* ---- configuration row (registered into base's one table) ---------------- */

static const gcx_config_entry_t gcx_progress_thread_rows[] = {
    {"PROGRESS_THREAD", GCX_CONFIG_BOOL, "n",
     "Run a progress thread per process: collectives posted before a "
     "compute phase, and a master-less coded allreduce's serving ahead, "
     "advance while the application computes; it sleeps on the transport's "
     "events (network-only jobs) or polls with a backoff to 1 ms (shared "
     "memory), so an idle process spends no core on it",
     offsetof(struct gcx_config, progress_thread), 0, 0, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_CORE, "core/progress",
                    gcx_progress_thread_rows)
