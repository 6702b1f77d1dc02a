/*
 * barrier.c - dissemination barrier.
 *
 * Idea: in round k rank r sends an empty message to r + 2^k and waits for
 * one from r - 2^k; after ceil(log2 P) rounds every rank has (transitively)
 * heard from every other. Works for any P. Cost: ceil(log2 P)·α.
 */
#include "coll/coll.h"

#include <stdlib.h>

typedef struct gcx_barrier_task {
    gcx_task_t   super;
    int          distance; /* 2^k of the current round */
    int          posted;
    gcx_tl_req_t sreq, rreq;
} gcx_barrier_task_t;

static void gcx_barrier_progress(gcx_task_t *task)
{
    gcx_barrier_task_t *b    = (gcx_barrier_task_t *)task;
    int                 size = task->comm->size, rank = task->comm->rank;

    while (b->distance < size) {
        int      to   = gcx_coll_mod(rank + b->distance, size);
        int      from = gcx_coll_mod(rank - b->distance, size);
        uint32_t step = (uint32_t)__builtin_ctz((unsigned)b->distance);
        int      s, r;

        if (!b->posted) {
            if (gcx_coll_recv(task, from, step, NULL, 0, &b->rreq) < 0 ||
                gcx_coll_send(task, to, step, NULL, 0, &b->sreq) < 0) {
                return;
            }
            b->posted = 1;
        }
        s = gcx_coll_req_state(task, &b->sreq, to, SIZE_MAX);
        r = gcx_coll_req_state(task, &b->rreq, from, 0);
        if (s <= 0 || r <= 0) {
            return;
        }
        b->posted = 0;
        b->distance <<= 1;
    }
    task->status = GCX_OK;
}

static void gcx_barrier_post(gcx_task_t *task)
{
    gcx_barrier_task_t *b = (gcx_barrier_task_t *)task;

    b->distance = 1;
    b->posted   = 0;
    gcx_barrier_progress(task);
}

static void gcx_barrier_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_barrier_ops = {
    .name     = "barrier",
    .post     = gcx_barrier_post,
    .progress = gcx_barrier_progress,
    .finalize = gcx_barrier_finalize,
};

gcx_task_t *gcx_barrier_dissemination_create(gcx_comm_t *comm)
{
    gcx_barrier_task_t *b = calloc(1, sizeof(*b));

    if (b != NULL) {
        gcx_task_init(&b->super, &gcx_barrier_ops, comm);
    }
    return b ? &b->super : NULL;
}

gcx_status_t gcx_barrier(gcx_comm_t *comm, gcx_request_t **req_p)
{
    gcx_task_t *task;

    if (comm == NULL) {
        return GCX_ERR_INVALID;
    }
    task = gcx_barrier_dissemination_create(comm);
    if (task == NULL) {
        return GCX_ERR_NOMEM;
    }
    return gcx_task_submit(task, req_p);
}
