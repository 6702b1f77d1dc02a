/*
 * task.c - the per-communicator FIFO of tasks, requests, wait, schedules.
 *
 * gcx_progress() = one progress call of the process context: the shared
 * transport once, then the registered callbacks, among them each
 * communicator's queue (registered here, gcx_comm_queue_attach), which
 * progresses its active task: the cost is bounded by what one task's
 * progress() may do per communicator. The
 * deadline of a task (GCX_TIMEOUT) starts when it becomes active, so a
 * queue of many collectives does not time out the later ones.
 * Point-to-point tasks skip the FIFO (a send must not wait behind a
 * collective its peer has not reached): they are posted at once and kept
 * on the communicator's p2p list, progressed with the queue.
 *
 * Every public entry takes the context lock (context.h); a wait drops it
 * between progress calls, so other threads get their turn.
 *
 * A wait polls; where the transport can sleep (TCP-only contexts, see
 * ucx_context.c) and GCX_PROGRESS_SLEEP allows, a wait whose last
 * GCX_WAIT_IDLE_POLLS progress calls found nothing sleeps on the
 * transport's event file descriptor for at most GCX_WAIT_SLEEP_MS, then
 * polls again: ranks that outnumber cores leave the CPU to the kernel's
 * network stack, at the cost of a wakeup (~10-50 us) on a link whose
 * messages take milliseconds. The bound keeps deadlines (GCX_TIMEOUT, a
 * coded gather's straggler deadline) within a millisecond.
 */
#include "task.h"
#include "comm.h"
#include "base/log.h"
#include "base/time.h"

#include <poll.h>
#include <sched.h>
#include <stdlib.h>

#define GCX_WAIT_IDLE_POLLS 2  /* empty progress calls before a sleep */
#define GCX_WAIT_SLEEP_MS   1  /* longest sleep before polling again */

void gcx_task_init(gcx_task_t *task, const gcx_task_ops_t *ops,
                   gcx_comm_t *comm)
{
    task->ops       = ops;
    task->name      = ops->name;
    task->comm      = comm;
    task->status    = GCX_INPROGRESS;
    task->seq       = 0;
    task->step_base = 0;
    task->deadline  = 0;
    task->next      = NULL;
}

static void gcx_task_activate(gcx_task_t *task)
{
    task->deadline = gcx_time_now() + task->comm->config.timeout;
    task->ops->post(task);
}

/* A transfer cancelled because its peer died (the transport's process
 * watch, or UCX) fails its task with the cause, as gcx_comm_fail names it
 * for the communicator. */
static void gcx_task_name_cause(gcx_task_t *task)
{
    if (task->status == GCX_ERR_CANCELED) {
        task->status = task->comm->error;
    }
}

/* Progresses the point-to-point tasks; a failed one fails the comm. */
static int gcx_p2p_progress(gcx_comm_t *comm)
{
    gcx_task_t **pp = &comm->p2p, *task;
    int          done = 0;

    while ((task = *pp) != NULL) {
        task->ops->progress(task);
        if (task->status == GCX_INPROGRESS &&
            gcx_time_now() > task->deadline) {
            gcx_error("%s did not complete within GCX_TIMEOUT=%g s",
                      task->name, comm->config.timeout);
            task->status = GCX_ERR_TIMEOUT;
        }
        if (task->status == GCX_INPROGRESS) {
            pp = &task->next;
            continue;
        }
        ++done;
        *pp        = task->next;
        task->next = NULL;
        if (task->status < 0 && task->status != GCX_ERR_MISMATCH) {
            gcx_comm_fail(comm, task->status);
            gcx_task_name_cause(task);
            break;
        }
    }
    return done;
}

/* Moves the queue along; the head stays until it is done. */
int gcx_comm_queue_progress(gcx_comm_t *comm)
{
    gcx_task_t *task;
    int         done = 0;

    if (comm->p2p != NULL) {
        done += gcx_p2p_progress(comm);
        if (comm->error != GCX_OK) {
            return done;
        }
    }

    while ((task = comm->head) != NULL) {
        if (task->status == GCX_INPROGRESS) {
            task->ops->progress(task);
        }
        if (task->status == GCX_INPROGRESS &&
            gcx_time_now() > task->deadline) {
            gcx_error("%s (collective #%u) did not complete within "
                      "GCX_TIMEOUT=%g s",
                      task->name, task->seq, comm->config.timeout);
            task->status = GCX_ERR_TIMEOUT;
        }
        if (task->status == GCX_INPROGRESS) {
            break;
        }
        ++done;
        comm->head = task->next;
        if (comm->head == NULL) {
            comm->tail = NULL;
        }
        task->next = NULL;
        if (task->status < 0 && (task->status != GCX_ERR_MISMATCH ||
                                 comm->transfer_mismatch)) {
            gcx_comm_fail(comm, task->status);
            gcx_task_name_cause(task);
            break;
        }
        if (comm->head != NULL) {
            gcx_task_activate(comm->head);
        }
    }
    return done;
}

/* The queue's progress callback: nothing to do on a failed communicator
 * or an empty queue. */
static int gcx_comm_queue_progress_cb(void *arg)
{
    gcx_comm_t *comm = arg;

    if (comm->error != GCX_OK || (comm->head == NULL && comm->p2p == NULL)) {
        return 0;
    }
    return gcx_comm_queue_progress(comm);
}

void gcx_comm_queue_attach(gcx_comm_t *comm)
{
    gcx_context_progress_register(comm->ctx, &comm->queue_cb,
                                  gcx_comm_queue_progress_cb, comm);
}

void gcx_comm_queue_detach(gcx_comm_t *comm)
{
    gcx_context_progress_unregister(comm->ctx, &comm->queue_cb);
}

int gcx_comm_progress_once(gcx_comm_t *comm)
{
    return gcx_context_progress(comm->ctx);
}

void gcx_comm_fail(gcx_comm_t *comm, gcx_status_t status)
{
    gcx_task_t *task;
    int         r;

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
    gcx_error("communicator failed: %s; cancelling outstanding transfers "
              "(destroy the communicator)",
              gcx_strerror(status));
    comm->tl->ops->abort(comm->tl);
    for (task = comm->head; task != NULL; task = task->next) {
        if (task->status == GCX_INPROGRESS) {
            task->status = status;
        }
    }
    for (task = comm->p2p; task != NULL; task = task->next) {
        if (task->status == GCX_INPROGRESS) {
            task->status = status;
        }
    }
    comm->head = comm->tail = NULL;
    comm->p2p  = NULL;
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
    if (comm->tail == NULL) {
        comm->head = comm->tail = task;
        gcx_task_activate(task);
        gcx_comm_queue_progress(comm); /* completes a task done in post */
    } else {
        comm->tail->next = task;
        comm->tail       = task;
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
    gcx_task_activate(task);
    if (task->status == GCX_INPROGRESS) {
        task->next = comm->p2p;
        comm->p2p  = task;
    } else if (task->status < 0 && task->status != GCX_ERR_MISMATCH) {
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
    if (comm->config.progress_sleep && *idle_p >= GCX_WAIT_IDLE_POLLS) {
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
    int          idle = GCX_WAIT_IDLE_POLLS - 1;

    if (comm == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    status = comm->error;
    gcx_wait_idle(comm, gcx_comm_progress_once(comm), &idle);
    return status;
}

/* Unlinks a point-to-point task from its communicator's list. */
static void gcx_p2p_unlink(gcx_task_t *task)
{
    gcx_task_t **pp;

    for (pp = &task->comm->p2p; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == task) {
            *pp = task->next;
            return;
        }
    }
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
        gcx_p2p_unlink(task);
        gcx_comm_fail(task->comm, GCX_ERR_CANCELED);
    }
    task->ops->finalize(task);
    gcx_context_unlock();
}

/* ---- schedules ------------------------------------------------------------ */

static void gcx_schedule_start_current(gcx_schedule_t *schedule)
{
    while (schedule->current < schedule->ntasks) {
        gcx_task_t *sub = schedule->tasks[schedule->current];

        sub->seq       = schedule->super.seq;
        sub->step_base = schedule->super.step_base +
                         (uint32_t)schedule->current * GCX_SCHEDULE_STEP_SPAN;
        sub->deadline  = schedule->super.deadline;
        sub->ops->post(sub);
        if (sub->status == GCX_INPROGRESS) {
            return;
        }
        if (sub->status != GCX_OK) {
            schedule->super.status = sub->status;
            return;
        }
        ++schedule->current;
    }
    schedule->super.status = GCX_OK;
}

static void gcx_schedule_post(gcx_task_t *task)
{
    gcx_schedule_t *schedule = (gcx_schedule_t *)task;

    schedule->current = 0;
    gcx_schedule_start_current(schedule);
}

static void gcx_schedule_progress(gcx_task_t *task)
{
    gcx_schedule_t *schedule = (gcx_schedule_t *)task;
    gcx_task_t     *sub      = schedule->tasks[schedule->current];

    sub->ops->progress(sub);
    if (sub->status == GCX_INPROGRESS) {
        return;
    }
    if (sub->status != GCX_OK) {
        task->status = sub->status;
        return;
    }
    ++schedule->current;
    gcx_schedule_start_current(schedule);
}

static void gcx_schedule_finalize(gcx_task_t *task)
{
    gcx_schedule_t *schedule = (gcx_schedule_t *)task;
    int             i;

    for (i = 0; i < schedule->ntasks; ++i) {
        schedule->tasks[i]->ops->finalize(schedule->tasks[i]);
    }
    free(schedule);
}

static const gcx_task_ops_t gcx_schedule_ops = {
    .name     = "schedule",
    .post     = gcx_schedule_post,
    .progress = gcx_schedule_progress,
    .finalize = gcx_schedule_finalize,
};

gcx_schedule_t *gcx_schedule_create(gcx_comm_t *comm)
{
    gcx_schedule_t *schedule = calloc(1, sizeof(*schedule));

    if (schedule != NULL) {
        gcx_task_init(&schedule->super, &gcx_schedule_ops, comm);
    }
    return schedule;
}

void gcx_schedule_add(gcx_schedule_t *schedule, gcx_task_t *task)
{
    schedule->tasks[schedule->ntasks++] = task;
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_task_config_rows[] = {
    {"TIMEOUT", GCX_CONFIG_DOUBLE, "300",
     "Seconds a collective (or communicator creation) may take before it "
     "fails with GCX_ERR_TIMEOUT and the communicator is aborted",
     offsetof(struct gcx_config, timeout), 0.001, 1e6, NULL},
    {"PROGRESS_YIELD", GCX_CONFIG_BOOL, "y",
     "Call sched_yield() while waiting when a progress call found nothing "
     "to do (helps when ranks outnumber cores)",
     offsetof(struct gcx_config, progress_yield), 0, 0, NULL},
    {"PROGRESS_SLEEP", GCX_CONFIG_BOOL, "n",
     "Let a wait sleep on the transport's event file descriptor (at most "
     "1 ms at a time) when polling finds nothing, where the transport can "
     "(UCX with only tcp and self, i.e. a network-only job): the CPU goes "
     "to the kernel's TCP stack instead of busy-polling (8 ranks on 2 "
     "cores: ~25% less CPU, same bandwidth)",
     offsetof(struct gcx_config, progress_sleep), 0, 0, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_CORE, "core/task", gcx_task_config_rows)
