/*
 * broadcast_binomial.c - binomial tree broadcast (small messages).
 *
 * Idea: with v = (rank - root) mod P, rank v receives from v minus its
 * lowest set bit and then sends to v + 2^j for every 2^j below that bit.
 * The message goes straight from the parent's buffer into the child's.
 * Cost: ceil(log2 P)·(α + n·β) on the critical path.
 */
#include "coll/coll.h"

#include <stdlib.h>

typedef struct gcx_broadcast_binomial_task {
    gcx_task_t    super;
    char         *buf;
    size_t        bytes;
    int           root;
    int           parent;   /* real rank, -1 at the root */
    int           received; /* the parent's message has arrived */
    int           nchildren;
    int           children[GCX_TL_TAG_SRC_BITS + 1];
    gcx_tl_req_t  rreq;
    gcx_tl_req_t  sreqs[GCX_TL_TAG_SRC_BITS + 1];
} gcx_broadcast_binomial_task_t;

static void gcx_broadcast_binomial_progress(gcx_task_t *task)
{
    gcx_broadcast_binomial_task_t *bc =
        (gcx_broadcast_binomial_task_t *)task;
    int i, state;

    if (!bc->received) {
        state = gcx_coll_req_state(task, &bc->rreq, bc->parent, bc->bytes);
        if (state <= 0) {
            return;
        }
        bc->received = 1;
        for (i = 0; i < bc->nchildren; ++i) {
            if (gcx_coll_send(task, bc->children[i], 0, bc->buf, bc->bytes,
                              &bc->sreqs[i]) < 0) {
                return;
            }
        }
    }
    if (gcx_coll_sends_state(task, bc->sreqs, bc->children,
                             bc->nchildren) == 1) {
        task->status = GCX_OK;
    }
}

static void gcx_broadcast_binomial_post(gcx_task_t *task)
{
    gcx_broadcast_binomial_task_t *bc =
        (gcx_broadcast_binomial_task_t *)task;
    int size = task->comm->size;
    int v    = gcx_coll_mod(task->comm->rank - bc->root, size);
    int mask = 1;

    while (mask < size && !(v & mask)) {
        mask <<= 1;
    }
    bc->parent    = v == 0 ? -1 : gcx_coll_mod(v - mask + bc->root, size);
    bc->nchildren = 0;
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask < size) {
            bc->children[bc->nchildren++] =
                gcx_coll_mod(v + mask + bc->root, size);
        }
    }
    bc->received = 0; /* the root "receives" its own buffer at once */
    if (v == 0) {
        bc->rreq.status = GCX_OK;
        bc->rreq.length = bc->bytes;
    } else if (gcx_coll_recv(task, bc->parent, 0, bc->buf, bc->bytes,
                             &bc->rreq) < 0) {
        return;
    }
    gcx_broadcast_binomial_progress(task);
}

static void gcx_broadcast_binomial_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_broadcast_binomial_ops = {
    .name     = "broadcast (binomial)",
    .post     = gcx_broadcast_binomial_post,
    .progress = gcx_broadcast_binomial_progress,
    .finalize = gcx_broadcast_binomial_finalize,
};

gcx_task_t *gcx_broadcast_binomial_create(gcx_comm_t *comm, void *buf,
                                          size_t bytes, int root)
{
    gcx_broadcast_binomial_task_t *bc = calloc(1, sizeof(*bc));

    if (bc == NULL) {
        return NULL;
    }
    gcx_task_init(&bc->super, &gcx_broadcast_binomial_ops, comm);
    bc->buf   = buf;
    bc->bytes = bytes;
    bc->root  = root;
    return &bc->super;
}
