/*
 * task.c - the task type, the queue of a communicator, schedules.
 *
 * The queue is the collective FIFO (the head is active, one at a time)
 * and the list of point-to-point tasks, which skip the FIFO (a send must
 * not wait behind a collective its peer has not reached): posted at once
 * and progressed with the queue. The deadline of a task (GCX_TIMEOUT)
 * starts when it becomes active, so a queue of many collectives does not
 * time out the later ones. The queue knows no communicator and no context:
 * the communicator registers the queue's progress with the context
 * (comm.c) and fails itself when a task's error says so; requests
 * (submit, wait) are request.c's.
 *
 * Cost: a progress call is one progress() of each point-to-point task in
 * flight and of the active collective (more only when tasks complete), a
 * clock read each; push, start and unlink are O(1) but the unlink of a
 * point-to-point task (O(tasks in flight)).
 */
#include "task.h"
#include "base/config.h"
#include "base/log.h"
#include "base/time.h"

#include <stddef.h>
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
    task->step_span = 0;
    task->deadline  = 0;
    task->next      = NULL;
}

/* A task past its deadline says what it waits for, if it can. */
static void gcx_task_describe(const gcx_task_t *task)
{
    if (task->ops->describe != NULL) {
        task->ops->describe(task);
    }
}

static void gcx_task_activate(const gcx_queue_t *queue, gcx_task_t *task)
{
    task->deadline = gcx_time_now() + queue->timeout;
    task->ops->post(task);
}

/* ---- the queue -------------------------------------------------------------- */

int gcx_queue_push(gcx_queue_t *queue, gcx_task_t *task)
{
    if (queue->tail == NULL) {
        queue->head = queue->tail = task;
        gcx_task_activate(queue, task);
        return 1;
    }
    queue->tail->next = task;
    queue->tail       = task;
    return 0;
}

void gcx_queue_start_p2p(gcx_queue_t *queue, gcx_task_t *task)
{
    gcx_task_activate(queue, task);
    if (task->status == GCX_INPROGRESS) {
        task->next  = queue->p2p;
        queue->p2p  = task;
    }
}

/* Progresses the point-to-point tasks; stops at one that fails the
 * communicator (returned, unlinked). */
static int gcx_queue_p2p_progress(gcx_queue_t *queue, gcx_task_t **failed_p)
{
    gcx_task_t **pp = &queue->p2p, *task;
    int          done = 0;

    while ((task = *pp) != NULL) {
        task->ops->progress(task);
        if (task->status == GCX_INPROGRESS &&
            gcx_time_now() > task->deadline) {
            gcx_error("%s did not complete within GCX_TIMEOUT=%g s",
                      task->name, queue->timeout);
            gcx_task_describe(task);
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
            *failed_p = task;
            break;
        }
    }
    return done;
}

int gcx_queue_progress(gcx_queue_t *queue, const int *mismatch_fails,
                       gcx_task_t **failed_p)
{
    gcx_task_t *task;
    int         done = 0;

    *failed_p = NULL;
    if (queue->p2p != NULL) {
        done += gcx_queue_p2p_progress(queue, failed_p);
        if (*failed_p != NULL) {
            return done;
        }
    }

    while ((task = queue->head) != NULL) {
        if (task->status == GCX_INPROGRESS) {
            task->ops->progress(task);
        }
        if (task->status == GCX_INPROGRESS &&
            gcx_time_now() > task->deadline) {
            gcx_error("%s (collective #%u) did not complete within "
                      "GCX_TIMEOUT=%g s",
                      task->name, task->seq, queue->timeout);
            gcx_task_describe(task);
            task->status = GCX_ERR_TIMEOUT;
        }
        if (task->status == GCX_INPROGRESS) {
            break;
        }
        ++done;
        queue->head = task->next;
        if (queue->head == NULL) {
            queue->tail = NULL;
        }
        task->next = NULL;
        if (task->status < 0 && (task->status != GCX_ERR_MISMATCH ||
                                 *mismatch_fails)) {
            *failed_p = task;
            break;
        }
        if (queue->head != NULL) {
            gcx_task_activate(queue, queue->head);
        }
    }
    return done;
}

void gcx_queue_fail(gcx_queue_t *queue, gcx_status_t status)
{
    gcx_task_t *task;

    for (task = queue->head; task != NULL; task = task->next) {
        if (task->status == GCX_INPROGRESS) {
            task->status = status;
        }
    }
    for (task = queue->p2p; task != NULL; task = task->next) {
        if (task->status == GCX_INPROGRESS) {
            task->status = status;
        }
    }
    queue->head = queue->tail = NULL;
    queue->p2p  = NULL;
}

void gcx_queue_unlink_p2p(gcx_queue_t *queue, gcx_task_t *task)
{
    gcx_task_t **pp;

    for (pp = &queue->p2p; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == task) {
            *pp = task->next;
            return;
        }
    }
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
