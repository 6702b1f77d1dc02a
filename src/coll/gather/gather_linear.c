/*
 * gather_linear.c - gather to a root (linear).
 *
 * Idea: every rank sends its block straight from sendbuf to the root, which
 * posts all P-1 receives at once straight into recvbuf (zero copy; its own
 * block is copied, or already in place with GCX_IN_PLACE). The receives
 * overlap, so the latency terms overlap too. Used for large messages: every
 * byte has to cross the root's link anyway, and unlike the binomial tree
 * nothing is staged or copied on the way.
 * Cost: (P-1)·α (overlapped) + (P-1)·n·β at the root, n = sendcount
 * bytes: the β term is optimal for any gather algorithm.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_gather_linear_task {
    gcx_task_t    super;
    const char   *sendbuf; /* NULL: in place at the root */
    char         *recvbuf; /* root */
    size_t        bytes;   /* per rank */
    int           root;
    gcx_tl_req_t *reqs;    /* per rank at the root, [0] elsewhere */
} gcx_gather_linear_task_t;

static void gcx_gather_linear_progress(gcx_task_t *task)
{
    gcx_gather_linear_task_t *g = (gcx_gather_linear_task_t *)task;
    int                       r, state, done = 1;

    if (task->comm->rank != g->root) {
        state = gcx_coll_req_state(task, &g->reqs[0], g->root, SIZE_MAX);
        if (state > 0) {
            task->status = GCX_OK;
        }
        return;
    }
    for (r = 0; r < task->comm->size; ++r) {
        if (r == g->root) {
            continue;
        }
        state = gcx_coll_req_state(task, &g->reqs[r], r, g->bytes);
        if (state < 0) {
            return;
        }
        done &= state;
    }
    if (done) {
        task->status = GCX_OK;
    }
}

static void gcx_gather_linear_post(gcx_task_t *task)
{
    gcx_gather_linear_task_t *g = (gcx_gather_linear_task_t *)task;
    int                       r;

    if (g->bytes == 0) {
        task->status = GCX_OK;
        return;
    }
    if (task->comm->rank != g->root) {
        if (gcx_coll_send(task, g->root, 0, g->sendbuf, g->bytes,
                          &g->reqs[0]) < 0) {
            return;
        }
    } else {
        if (g->sendbuf != NULL) {
            memcpy(g->recvbuf + (size_t)g->root * g->bytes, g->sendbuf,
                   g->bytes);
        }
        for (r = 0; r < task->comm->size; ++r) {
            if (r != g->root &&
                gcx_coll_recv(task, r, 0, g->recvbuf + (size_t)r * g->bytes,
                              g->bytes, &g->reqs[r]) < 0) {
                return;
            }
        }
    }
    gcx_gather_linear_progress(task);
}

static void gcx_gather_linear_finalize(gcx_task_t *task)
{
    gcx_gather_linear_task_t *g = (gcx_gather_linear_task_t *)task;

    free(g->reqs);
    free(g);
}

static const gcx_task_ops_t gcx_gather_linear_ops = {
    .name     = "gather (linear)",
    .post     = gcx_gather_linear_post,
    .progress = gcx_gather_linear_progress,
    .finalize = gcx_gather_linear_finalize,
};

gcx_task_t *gcx_gather_linear_create(gcx_comm_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t bytes, int root)
{
    gcx_gather_linear_task_t *g = calloc(1, sizeof(*g));

    if (g == NULL || (g->reqs = calloc((size_t)comm->size,
                                       sizeof(*g->reqs))) == NULL) {
        free(g);
        return NULL;
    }
    gcx_task_init(&g->super, &gcx_gather_linear_ops, comm);
    g->sendbuf = sendbuf;
    g->recvbuf = recvbuf;
    g->bytes   = bytes;
    g->root    = root;
    return &g->super;
}
