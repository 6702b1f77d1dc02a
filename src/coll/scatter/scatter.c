/*
 * scatter.c - scatter from a root (linear).
 *
 * Idea: the root posts all P-1 sends at once, each straight from its block
 * of sendbuf, and copies its own block into recvbuf (nothing with
 * GCX_IN_PLACE); every other rank receives straight into recvbuf (zero
 * copy). As for the gather, every byte has to leave through the root's
 * link, so a binomial tree would only cut the α term to log2 P, at the
 * price of staging subtrees in scratch.
 * Cost: (P-1)·α (overlapped) + (P-1)·n·β at the root, n = recvcount bytes.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_scatter_task {
    gcx_task_t    super;
    const char   *sendbuf; /* root */
    char         *recvbuf; /* NULL: in place at the root */
    size_t        bytes;   /* per rank */
    int           root;
    gcx_tl_req_t *reqs;    /* per rank at the root, [0] elsewhere */
} gcx_scatter_task_t;

static void gcx_scatter_progress(gcx_task_t *task)
{
    gcx_scatter_task_t *s = (gcx_scatter_task_t *)task;
    int                 r, state, done = 1;

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

static void gcx_scatter_post(gcx_task_t *task)
{
    gcx_scatter_task_t *s = (gcx_scatter_task_t *)task;
    int                 r;

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
    gcx_scatter_progress(task);
}

static void gcx_scatter_finalize(gcx_task_t *task)
{
    gcx_scatter_task_t *s = (gcx_scatter_task_t *)task;

    free(s->reqs);
    free(s);
}

static const gcx_task_ops_t gcx_scatter_ops = {
    .name     = "scatter",
    .post     = gcx_scatter_post,
    .progress = gcx_scatter_progress,
    .finalize = gcx_scatter_finalize,
};

gcx_status_t gcx_scatter(gcx_comm_t *comm, const void *sendbuf, void *recvbuf,
                         size_t recvcount, gcx_dtype_t dtype, int root,
                         gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_scatter_task_t  *s;
    int                  is_root, in_place;

    if (comm == NULL) {
        gcx_error("gcx_scatter: NULL communicator");
        return GCX_ERR_INVALID;
    }
    if (gcx_dtype_size(dtype) == 0) {
        gcx_error("gcx_scatter: invalid type %d", (int)dtype);
        return GCX_ERR_INVALID;
    }
    if (root < 0 || root >= comm->size) {
        gcx_error("gcx_scatter: root %d is not a rank of the %d", root,
                  comm->size);
        return GCX_ERR_INVALID;
    }
    is_root  = comm->rank == root;
    in_place = (const void *)recvbuf == GCX_IN_PLACE;
    if (in_place && !is_root) {
        gcx_error("gcx_scatter: GCX_IN_PLACE on rank %d, which is not the "
                  "root (%d)", comm->rank, root);
        return GCX_ERR_INVALID;
    }
    if (recvcount > 0 && (recvbuf == NULL || (is_root && sendbuf == NULL))) {
        gcx_error("gcx_scatter: NULL %s with recvcount %zu",
                  recvbuf == NULL ? "recvbuf" : "sendbuf at the root",
                  recvcount);
        return GCX_ERR_INVALID;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL || (s->reqs = calloc((size_t)comm->size,
                                       sizeof(*s->reqs))) == NULL) {
        free(s);
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&s->super, &gcx_scatter_ops, comm);
    s->sendbuf = sendbuf;
    s->recvbuf = in_place ? NULL : recvbuf;
    s->bytes   = recvcount * gcx_dtype_size(dtype);
    s->root    = root;
    gcx_debug("scatter #%u: %zu x %s from %d", comm->seq, recvcount,
              gcx_dtype_name(dtype), root);
    signature.coll  = GCX_COLL_SCATTER;
    signature.count = recvcount;
    signature.dtype = dtype;
    signature.root  = root;
    return gcx_coll_submit_checked(comm, &s->super, &signature, req_p);
}
