/*
 * scatter_linear.c - scatter from a root (linear).
 *
 * Idea: the root posts all P-1 sends at once, each straight from its block
 * of sendbuf, and copies its own block into recvbuf (nothing with
 * GCX_IN_PLACE); every other rank receives straight into recvbuf (zero
 * copy). Used for large messages: every byte has to leave through the
 * root's link anyway, and unlike the binomial tree nothing is staged or
 * copied on the way.
 * Cost: (P-1)·α (overlapped) + (P-1)·n·β at the root, n = recvcount bytes.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_scatter_linear_task {
    gcx_task_t    super;
    const char   *sendbuf; /* root */
    char         *recvbuf; /* NULL: in place at the root */
    size_t        bytes;   /* per rank */
    int           root;
    gcx_tl_req_t *reqs;    /* per rank at the root, [0] elsewhere */
} gcx_scatter_linear_task_t;

static void gcx_scatter_linear_progress(gcx_task_t *task)
{
    gcx_scatter_linear_task_t *s = (gcx_scatter_linear_task_t *)task;
    int                        r, state, done = 1;

    if (task->comm->rank != s->root) {
        state = gcx_coll_req_state(task, &s->reqs[0], s->root, s->bytes);
        if (state > 0) {
            task->status = GCX_OK;
        }
        return;
    }
    for (r = 0; r < task->comm->size; ++r) {
        if (r == s->root) {
            continue;
        }
        state = gcx_coll_req_state(task, &s->reqs[r], r, SIZE_MAX);
        if (state < 0) {
            return;
        }
        done &= state;
    }
    if (done) {
        task->status = GCX_OK;
    }
}

static void gcx_scatter_linear_post(gcx_task_t *task)
{
    gcx_scatter_linear_task_t *s = (gcx_scatter_linear_task_t *)task;
    int                        r;

    if (s->bytes == 0) {
        task->status = GCX_OK;
        return;
    }
    if (task->comm->rank != s->root) {
        if (gcx_coll_recv(task, s->root, 0, s->recvbuf, s->bytes,
                          &s->reqs[0]) < 0) {
            return;
        }
    } else {
        for (r = 0; r < task->comm->size; ++r) {
            if (r != s->root &&
                gcx_coll_send(task, r, 0, s->sendbuf + (size_t)r * s->bytes,
                              s->bytes, &s->reqs[r]) < 0) {
                return;
            }
        }
        if (s->recvbuf != NULL) {
            memcpy(s->recvbuf, s->sendbuf + (size_t)s->root * s->bytes,
                   s->bytes);
        }
    }
    gcx_scatter_linear_progress(task);
}

static void gcx_scatter_linear_finalize(gcx_task_t *task)
{
    gcx_scatter_linear_task_t *s = (gcx_scatter_linear_task_t *)task;

    free(s->reqs);
    free(s);
}

static const gcx_task_ops_t gcx_scatter_linear_ops = {
    .name     = "scatter (linear)",
    .post     = gcx_scatter_linear_post,
    .progress = gcx_scatter_linear_progress,
    .finalize = gcx_scatter_linear_finalize,
};

gcx_task_t *gcx_scatter_linear_create(gcx_comm_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t bytes, int root)
{
    gcx_scatter_linear_task_t *s = calloc(1, sizeof(*s));

    if (s == NULL || (s->reqs = calloc((size_t)comm->size,
                                       sizeof(*s->reqs))) == NULL) {
        free(s);
        return NULL;
    }
    gcx_task_init(&s->super, &gcx_scatter_linear_ops, comm);
    s->sendbuf = sendbuf;
    s->recvbuf = recvbuf;
    s->bytes   = bytes;
    s->root    = root;
    return &s->super;
}
