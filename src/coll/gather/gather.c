/*
 * gather.c - gather to a root (linear).
 *
 * Idea: every rank sends its block straight from sendbuf to the root, which
 * posts all P-1 receives at once straight into recvbuf (zero copy; its own
 * block is copied, or already in place with GCX_IN_PLACE). The receives
 * overlap, so the latency terms overlap too; a binomial tree would cut the
 * α term to log2 P but stage subtrees in scratch and move data log2 P
 * times, and every byte has to cross the root's link anyway.
 * Cost: (P-1)·α (overlapped) + (P-1)·n·β at the root, n = sendcount
 * bytes: the β term is optimal for any gather algorithm.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_gather_task {
    gcx_task_t    super;
    const char   *sendbuf; /* NULL: in place at the root */
    char         *recvbuf; /* root */
    size_t        bytes;   /* per rank */
    int           root;
    gcx_tl_req_t *reqs;    /* per rank at the root, [0] elsewhere */
} gcx_gather_task_t;

static void gcx_gather_progress(gcx_task_t *task)
{
    gcx_gather_task_t *g = (gcx_gather_task_t *)task;
    int                r, state, done = 1;

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

static void gcx_gather_post(gcx_task_t *task)
{
    gcx_gather_task_t *g = (gcx_gather_task_t *)task;
    int                r;

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
    gcx_gather_progress(task);
}

static void gcx_gather_finalize(gcx_task_t *task)
{
    gcx_gather_task_t *g = (gcx_gather_task_t *)task;

    free(g->reqs);
    free(g);
}

static const gcx_task_ops_t gcx_gather_ops = {
    .name     = "gather",
    .post     = gcx_gather_post,
    .progress = gcx_gather_progress,
    .finalize = gcx_gather_finalize,
};

gcx_status_t gcx_gather(gcx_comm_t *comm, const void *sendbuf,
                        size_t sendcount, void *recvbuf, gcx_dtype_t dtype,
                        int root, gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_gather_task_t   *g;
    int                  is_root;

    if (comm == NULL) {
        gcx_error("gcx_gather: NULL communicator");
        return GCX_ERR_INVALID;
    }
    if (gcx_dtype_size(dtype) == 0) {
        gcx_error("gcx_gather: invalid type %d", (int)dtype);
        return GCX_ERR_INVALID;
    }
    if (root < 0 || root >= comm->size) {
        gcx_error("gcx_gather: root %d is not a rank of the %d", root,
                  comm->size);
        return GCX_ERR_INVALID;
    }
    is_root = comm->rank == root;
    if (sendcount > 0 && (sendbuf == NULL || (is_root && recvbuf == NULL))) {
        gcx_error("gcx_gather: NULL %s with sendcount %zu",
                  sendbuf == NULL ? "sendbuf" : "recvbuf at the root",
                  sendcount);
        return GCX_ERR_INVALID;
    }
    if (sendbuf == GCX_IN_PLACE && !is_root) {
        gcx_error("gcx_gather: GCX_IN_PLACE on rank %d, which is not the "
                  "root (%d)", comm->rank, root);
        return GCX_ERR_INVALID;
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL || (g->reqs = calloc((size_t)comm->size,
                                       sizeof(*g->reqs))) == NULL) {
        free(g);
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&g->super, &gcx_gather_ops, comm);
    g->sendbuf = sendbuf == GCX_IN_PLACE ? NULL : sendbuf;
    g->recvbuf = recvbuf;
    g->bytes   = sendcount * gcx_dtype_size(dtype);
    g->root    = root;
    gcx_debug("gather #%u: %zu x %s to %d", comm->seq, sendcount,
              gcx_dtype_name(dtype), root);
    signature.coll  = GCX_COLL_GATHER;
    signature.count = sendcount;
    signature.dtype = dtype;
    signature.root  = root;
    return gcx_coll_submit_checked(comm, &g->super, &signature, req_p);
}
