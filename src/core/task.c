/*
 * task.c - the per-communicator FIFO of tasks, requests, wait, schedules.
 *
 * gcx_progress() = one transport progress call + progress of the active
 * task, so its cost is bounded by what one task's progress() may do. The
 * deadline of a task (GCX_TIMEOUT) starts when it becomes active, so a
 * queue of many collectives does not time out the later ones.
 */
#include "task.h"
#include "comm.h"
#include "log.h"
#include "time.h"

#include <sched.h>
#include <stdlib.h>

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

/* Moves the queue along; the head stays until it is done. */
static int gcx_queue_progress(gcx_comm_t *comm)
{
    gcx_task_t *task;
    int         done = 0;

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
        if (task->status < 0 && task->status != GCX_ERR_MISMATCH) {
            gcx_comm_fail(comm, task->status);
            break;
        }
        if (comm->head != NULL) {
            gcx_task_activate(comm->head);
        }
    }
    return done;
}

int gcx_comm_progress_once(gcx_comm_t *comm)
{
    int events;

    if (comm->error != GCX_OK) {
        return 0;
    }
    events = comm->tl->ops->progress(comm->tl);
    events += gcx_queue_progress(comm);
    if (events == 0 && comm->config.progress_all) {
        gcx_comm_progress_others(comm);
    }
    return events;
}

void gcx_comm_fail(gcx_comm_t *comm, gcx_status_t status)
{
    gcx_task_t *task;

    if (comm->error != GCX_OK) {
        return;
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
    comm->head = comm->tail = NULL;
}

gcx_status_t gcx_task_submit(gcx_task_t *task, gcx_request_t **req_p)
{
    gcx_comm_t  *comm = task->comm;
    gcx_status_t status;

    if (comm->error != GCX_OK) {
        status = comm->error;
        task->ops->finalize(task);
        return status;
    }
    task->seq = comm->seq++;
    if (comm->tail == NULL) {
        comm->head = comm->tail = task;
        gcx_task_activate(task);
        gcx_queue_progress(comm); /* completes a task finished in post */
    } else {
        comm->tail->next = task;
        comm->tail       = task;
    }
    if (req_p != NULL) {
        *req_p = (gcx_request_t *)task;
        return GCX_OK;
    }
    status = gcx_wait((gcx_request_t *)task);
    task->ops->finalize(task);
    return status;
}

/* ---- public request API -------------------------------------------------- */

gcx_status_t gcx_progress(gcx_comm_t *comm)
{
    if (comm == NULL) {
        return GCX_ERR_INVALID;
    }
    gcx_comm_progress_once(comm);
    return comm->error;
}

gcx_status_t gcx_test(gcx_request_t *req)
{
    gcx_task_t *task = (gcx_task_t *)req;

    if (task == NULL) {
        return GCX_ERR_INVALID;
    }
    if (task->status == GCX_INPROGRESS) {
        gcx_comm_progress_once(task->comm);
    }
    return task->status;
}

gcx_status_t gcx_wait(gcx_request_t *req)
{
    gcx_task_t *task = (gcx_task_t *)req;

    if (task == NULL) {
        return GCX_ERR_INVALID;
    }
    while (task->status == GCX_INPROGRESS) {
        if (gcx_comm_progress_once(task->comm) == 0 &&
            task->comm->config.progress_yield) {
            sched_yield();
        }
    }
    return task->status;
}

void gcx_request_free(gcx_request_t *req)
{
    gcx_task_t *task = (gcx_task_t *)req;

    if (task == NULL) {
        return;
    }
    if (task->status == GCX_INPROGRESS) {
        gcx_error("request of %s freed while in progress", task->name);
        gcx_comm_fail(task->comm, GCX_ERR_CANCELED);
    }
    task->ops->finalize(task);
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
