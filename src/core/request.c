/*
 * request.c - handing tasks to their communicator and the public request
 * API: gcx_task_submit/start, gcx_test, gcx_wait, gcx_progress,
 * gcx_progress_wait, gcx_progress_thread_enable, gcx_request_free, and the
 * one waiting policy.
 *
 * gcx_progress() = one drain of the process context (context.h): the
 * shared transport, then the callbacks registered with it (among them each
 * communicator's queue, comm.c, which progresses its active task), again
 * while a pass finds work, at most GCX_CONTEXT_DRAIN_PASSES passes: what
 * the arrived messages allow is done, within a bound.
 *
 * Every public entry takes the context lock (context.h); a wait drops it
 * between progress calls, so other threads get their turn.
 *
 * A wait polls; where the transport can sleep (TCP-only contexts, see
 * ucx_context.c) and GCX_PROGRESS_SLEEP allows, a wait whose last
 * GCX_CONTEXT_IDLE_DRAINS progress calls found nothing sleeps on the
 * transport's event file descriptor for at most GCX_WAIT_SLEEP_MS, then
 * polls again: ranks that outnumber cores leave the CPU to the kernel's
 * network stack, at the cost of a wakeup (~10-50 us) on a link whose
 * messages take milliseconds. The bound keeps deadlines (GCX_TIMEOUT, a
 * coded gather's straggler deadline) within a millisecond.
 */
#include "request.h"
#include "comm.h"
#include "base/log.h"

#include <poll.h>
#include <sched.h>

#define GCX_WAIT_SLEEP_MS   1  /* longest sleep before polling again */

/* One progress call of the process context (lock held): what the arrived
 * messages allow, drained (context.h); returns work done (0: idle). */
static int gcx_comm_progress_once(gcx_comm_t *comm)
{
    return gcx_context_drain(comm->ctx);
}

/* Returns the request, or waits for the task and frees it. Lock held. */
static gcx_status_t gcx_task_hand_over(gcx_task_t *task,
                                       gcx_request_t **req_p)
{
    gcx_status_t status;

    if (req_p != NULL) {
        *req_p = (gcx_request_t *)task;
        gcx_context_unlock();
        return GCX_OK;
    }
    gcx_context_unlock();
    status = gcx_wait((gcx_request_t *)task);
    gcx_context_lock();
    task->ops->finalize(task);
    gcx_context_unlock();
    return status;
}

/* Takes the lock; a failed communicator frees the task and says why. */
static gcx_status_t gcx_task_enter(gcx_task_t *task)
{
    gcx_status_t status;

    gcx_context_lock();
    status = task->comm->error;
    if (status != GCX_OK) {
        task->ops->finalize(task);
        gcx_context_unlock();
    }
    return status;
}

gcx_status_t gcx_task_submit(gcx_task_t *task, gcx_request_t **req_p)
{
    gcx_comm_t  *comm = task->comm;
    gcx_status_t status = gcx_task_enter(task);

    if (status != GCX_OK) {
        return status;
    }
    task->seq = comm->seq++;
    if (gcx_queue_push(&comm->queue, task)) {
        gcx_comm_queue_progress(comm); /* completes a task done in post */
    }
    return gcx_task_hand_over(task, req_p);
}

gcx_status_t gcx_task_start(gcx_task_t *task, gcx_request_t **req_p)
{
    gcx_comm_t  *comm = task->comm;
    gcx_status_t status = gcx_task_enter(task);

    if (status != GCX_OK) {
        return status;
    }
    gcx_queue_start_p2p(&comm->queue, task);
    if (task->status < 0 && task->status != GCX_ERR_MISMATCH) {
        status = task->status;
        gcx_comm_fail(comm, status);
        task->status = status;
    }
    return gcx_task_hand_over(task, req_p);
}

/* ---- public request API -------------------------------------------------- */

gcx_status_t gcx_progress(gcx_comm_t *comm)
{
    gcx_status_t status;

    if (comm == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    gcx_comm_progress_once(comm);
    status = comm->error;
    gcx_context_unlock();
    return status;
}

gcx_status_t gcx_progress_thread_enable(gcx_comm_t *comm)
{
    gcx_status_t status;

    if (comm == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    status = gcx_progress_thread_start(comm->ctx);
    gcx_context_unlock();
    return status;
}

gcx_status_t gcx_test(gcx_request_t *req)
{
    gcx_task_t  *task = (gcx_task_t *)req;
    gcx_status_t status;

    if (task == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    if (task->status == GCX_INPROGRESS) {
        gcx_comm_progress_once(task->comm);
    }
    status = task->status;
    gcx_context_unlock();
    return status;
}

/* After one progress call under the lock found `events` events: sleep on
 * the transport's events (at most GCX_WAIT_SLEEP_MS) once *idle_p calls in
 * a row found nothing and the communicator allows it, else yield if it
 * allows that. Called with the lock held; returns with it released. The
 * one waiting policy of gcx_wait() and gcx_progress_wait(). */
static void gcx_wait_idle(gcx_comm_t *comm, int events, int *idle_p)
{
    int fd = -1;

    *idle_p = events == 0 ? *idle_p + 1 : 0;
    if (comm->config.progress_sleep && *idle_p >= GCX_CONTEXT_IDLE_DRAINS) {
        fd = gcx_context_arm(comm->ctx);
    }
    gcx_context_unlock();
    if (fd >= 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};

        (void)poll(&pfd, 1, GCX_WAIT_SLEEP_MS);
        *idle_p = 0;
    } else if (events == 0 && comm->config.progress_yield) {
        sched_yield();
    }
}

gcx_status_t gcx_wait(gcx_request_t *req)
{
    gcx_task_t  *task = (gcx_task_t *)req;
    gcx_status_t status;
    int          idle = 0;

    if (task == NULL) {
        return GCX_ERR_INVALID;
    }
    for (;;) {
        gcx_context_lock();
        status = task->status;
        if (status != GCX_INPROGRESS) {
            gcx_context_unlock();
            return status;
        }
        gcx_wait_idle(task->comm, gcx_comm_progress_once(task->comm), &idle);
    }
}

gcx_status_t gcx_progress_wait(gcx_comm_t *comm)
{
    gcx_status_t status;
    int          idle = GCX_CONTEXT_IDLE_DRAINS - 1;

    if (comm == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    status = comm->error;
    gcx_wait_idle(comm, gcx_comm_progress_once(comm), &idle);
    return status;
}

void gcx_request_free(gcx_request_t *req)
{
    gcx_task_t *task = (gcx_task_t *)req;

    if (task == NULL) {
        return;
    }
    gcx_context_lock();
    if (task->status == GCX_INPROGRESS) {
        gcx_error("request of %s freed while in progress", task->name);
        gcx_queue_unlink_p2p(&task->comm->queue, task);
        gcx_comm_fail(task->comm, GCX_ERR_CANCELED);
    }
    task->ops->finalize(task);
    gcx_context_unlock();
}
