/*
 * task.h - the one task type, the per-communicator queue, schedules.
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
 * the collective's sequence number and get disjoint tag step ranges.
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
} gcx_task_ops_t;

struct gcx_task {
    const gcx_task_ops_t *ops;
    const char           *name;      /* for logs; ops->name by default */
    gcx_comm_t           *comm;
    gcx_status_t          status;    /* GCX_INPROGRESS until final */
    uint32_t              seq;       /* collective sequence number */
    uint32_t              step_base; /* first tag step of this task */
    double                deadline;  /* set when the task becomes active */
    gcx_task_t           *next;      /* communicator queue link */
};

/** Initialise the common fields of a task. */
void gcx_task_init(gcx_task_t *task, const gcx_task_ops_t *ops,
                   gcx_comm_t *comm);

/**
 * Hand a new top-level task to the communicator. With @p req_p the request
 * is returned and GCX_OK; with NULL the call waits and returns the final
 * status (and frees the task). If the communicator has failed, the task is
 * freed and the communicator's error returned.
 */
gcx_status_t gcx_task_submit(gcx_task_t *task, gcx_request_t **req_p);

/**
 * Start a task outside the FIFO (point-to-point): posted at once, tracked
 * on the communicator's p2p list, GCX_TIMEOUT from now. Otherwise as
 * gcx_task_submit; the sequence number is not used.
 */
gcx_status_t gcx_task_start(gcx_task_t *task, gcx_request_t **req_p);

/**
 * Progress the process context once: the transport and every
 * communicator's queue; returns work done (0: idle). Context lock held.
 */
int gcx_comm_progress_once(gcx_comm_t *comm);

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
