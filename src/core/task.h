/*
 * task.h - the one task type, the queue, schedules: the bottom of core,
 * below the communicator (which embeds a queue) and the context. It knows
 * a communicator only as the opaque gcx_comm_t the task carries for its
 * collective; submitting, waiting and a failure's effect on the
 * communicator are request.c's and comm.c's.
 *
 * Every collective is a task with post / progress / finalize (as in UCC).
 * post starts it and may finish it at once; progress does a bounded amount
 * of non-blocking work and sets task->status when done; finalize frees it.
 * A communicator runs its tasks in FIFO order, one at a time (like a CUDA
 * stream in NCCL): the head is active, the rest wait. That keeps every rank
 * in the same order, lets the active task use the communicator's scratch
 * buffer, and makes the queue the single place where GCX_TIMEOUT is enforced.
 *
 * A schedule is a task that runs sub-tasks one after another (argument
 * check -> algorithm; ring reduce-scatter -> ring allgather). Sub-tasks share
 * the collective's sequence number and get disjoint tag step ranges; a task
 * with more steps than its range may wrap them inside it (step_span).
 */
#ifndef GCX_CORE_TASK_H
#define GCX_CORE_TASK_H

#include <gcx/gcx.h>
#include <stdint.h>

typedef struct gcx_task gcx_task_t;

typedef struct gcx_task_ops {
    const char *name;
    /** Start; leaves status GCX_INPROGRESS or sets the final status. */
    void (*post)(gcx_task_t *task);
    /** Bounded non-blocking work; sets the final status when done. */
    void (*progress)(gcx_task_t *task);
    /** Free the task (and what it owns). Never fails. */
    void (*finalize)(gcx_task_t *task);
    /** Optional: log what the task still waits for (gcx_error lines), once,
     *  when it has run past GCX_TIMEOUT. NULL: the timeout line alone. */
    void (*describe)(const gcx_task_t *task);
} gcx_task_ops_t;

struct gcx_task {
    const gcx_task_ops_t *ops;
    const char           *name;      /* for logs; ops->name by default */
    gcx_comm_t           *comm;
    gcx_status_t          status;    /* GCX_INPROGRESS until final */
    uint32_t              seq;       /* collective sequence number */
    uint32_t              step_base; /* first tag step of this task */
    /* 0: the task's steps run from step_base up, each its own tag; else
     * they wrap every step_span steps (gcx_coll_tag, coll.h), for a task
     * whose steps outnumber the range it was given (a ring of more ranks
     * than its slot has steps). Set by the task's creator before it is
     * posted; gcx_task_init clears it and no sub-task inherits it. */
    uint32_t              step_span;
    double                deadline;  /* set when the task becomes active */
    gcx_task_t           *next;      /* communicator queue link */
};

/** Initialise the common fields of a task. */
void gcx_task_init(gcx_task_t *task, const gcx_task_ops_t *ops,
                   gcx_comm_t *comm);

/* ---- the queue ------------------------------------------------------------- */

/** A communicator's tasks: the collective FIFO (the head is active) and
 *  the point-to-point tasks in flight, which skip it. */
typedef struct gcx_queue {
    gcx_task_t *head;    /* active task; the queue continues via next */
    gcx_task_t *tail;
    gcx_task_t *p2p;     /* point-to-point requests in flight */
    double      timeout; /* GCX_TIMEOUT of the communicator: a task's
                            deadline, from when it becomes active */
} gcx_queue_t;

/** Whether nothing is queued or in flight. */
static inline int gcx_queue_idle(const gcx_queue_t *queue)
{
    return queue->head == NULL && queue->p2p == NULL;
}

/** Append a collective task; when it is the head, it becomes active
 *  (posted, its deadline set) and 1 is returned, else 0. */
int gcx_queue_push(gcx_queue_t *queue, gcx_task_t *task);

/** Post a point-to-point task now; tracked until done when still in
 *  progress after post. */
void gcx_queue_start_p2p(gcx_queue_t *queue, gcx_task_t *task);

/**
 * Move the queue along: the point-to-point tasks, then the FIFO (the head
 * stays until done; the next becomes active). Enforces the deadlines
 * (GCX_ERR_TIMEOUT). A task that ends with an error that fails the
 * communicator (any but GCX_ERR_MISMATCH, which does only while
 * *@p mismatch_fails) stops it: unlinked, returned in *@p failed_p for the
 * communicator to fail (else NULL). Returns tasks completed.
 */
int gcx_queue_progress(gcx_queue_t *queue, const int *mismatch_fails,
                       gcx_task_t **failed_p);

/** Fail every task still queued or in flight with @p status and empty the
 *  queue (the communicator failed). */
void gcx_queue_fail(gcx_queue_t *queue, gcx_status_t status);

/** Unlink a point-to-point task (its request is freed while in flight). */
void gcx_queue_unlink_p2p(gcx_queue_t *queue, gcx_task_t *task);

/* ---- schedules ---------------------------------------------------------- */

#define GCX_SCHEDULE_MAX_TASKS 4
#define GCX_SCHEDULE_STEP_SPAN 0x4000u /* tag steps per sub-task */

typedef struct gcx_schedule {
    gcx_task_t  super;
    int         ntasks;
    int         current;
    gcx_task_t *tasks[GCX_SCHEDULE_MAX_TASKS];
} gcx_schedule_t;

/** New empty schedule; NULL when out of memory. */
gcx_schedule_t *gcx_schedule_create(gcx_comm_t *comm);

/** Append a sub-task (the schedule owns it from now on). */
void gcx_schedule_add(gcx_schedule_t *schedule, gcx_task_t *task);

#endif
