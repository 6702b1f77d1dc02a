/*
 * gather_binomial.c - binomial tree gather (small messages).
 *
 * Idea: with v = (rank - root) mod P, rank v owns the subtree of virtual
 * ranks v .. v + min(lowbit(v), P - v) - 1. It stages the blocks of its
 * subtree in virtual order in the communicator scratch (its own first),
 * receives each child v + 2^j's whole subtree at offset 2^j blocks (all
 * receives posted at once), then sends the lot to v - lowbit(v) in one
 * message. A leaf sends straight from sendbuf; the root receives straight
 * into recvbuf when it is rank 0 (virtual order is rank order), otherwise
 * in scratch and rotates into recvbuf at the end.
 * Cost: ceil(log2 P)·α + (P-1)·n·β at the root (n bytes per rank), plus
 * one copy of each subtree on the inner ranks; scratch of a subtree.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_gather_binomial_task {
    gcx_task_t   super;
    const char  *sendbuf; /* NULL: in place at the root */
    char        *recvbuf; /* root */
    char        *staged;  /* the subtree's blocks in virtual order */
    size_t       bytes;   /* per rank */
    int          root;
    int          vrank, subtree, parent;
    int          nchildren, sent;
    int          children[GCX_TL_TAG_SRC_BITS + 1];
    int          offsets[GCX_TL_TAG_SRC_BITS + 1]; /* blocks, in staged */
    int          sizes[GCX_TL_TAG_SRC_BITS + 1];   /* blocks */
    gcx_tl_req_t rreqs[GCX_TL_TAG_SRC_BITS + 1];
    gcx_tl_req_t sreq;
} gcx_gather_binomial_task_t;

static void gcx_gather_binomial_progress(gcx_task_t *task)
{
    gcx_gather_binomial_task_t *g = (gcx_gather_binomial_task_t *)task;
    int                         size = task->comm->size, i, state;

    for (i = 0; i < g->nchildren; ++i) {
        state = gcx_coll_req_state(task, &g->rreqs[i], g->children[i],
                                   (size_t)g->sizes[i] * g->bytes);
        if (state <= 0) {
            return;
        }
    }
    if (g->parent >= 0) {
        if (!g->sent) {
            const char *from = g->nchildren == 0 ? g->sendbuf : g->staged;

            if (gcx_coll_send(task, g->parent, 0, from,
                              (size_t)g->subtree * g->bytes, &g->sreq) < 0) {
                return;
            }
            g->sent = 1;
        }
        state = gcx_coll_req_state(task, &g->sreq, g->parent, SIZE_MAX);
        if (state <= 0) {
            return;
        }
    } else if (g->staged != g->recvbuf) {
        /* virtual u is rank (u + root) mod P */
        size_t head = (size_t)(size - g->root) * g->bytes;

        memcpy(g->recvbuf + (size_t)g->root * g->bytes, g->staged, head);
        memcpy(g->recvbuf, g->staged + head, (size_t)g->root * g->bytes);
    }
    task->status = GCX_OK;
}

static void gcx_gather_binomial_post(gcx_task_t *task)
{
    gcx_gather_binomial_task_t *g = (gcx_gather_binomial_task_t *)task;
    int size = task->comm->size;
    int v    = gcx_coll_mod(task->comm->rank - g->root, size);
    int low  = 1, mask, i;

    if (g->bytes == 0) {
        task->status = GCX_OK;
        return;
    }
    while (low < size && !(v & low)) {
        low <<= 1;
    }
    g->vrank     = v;
    g->subtree   = v + low < size ? low : size - v;
    g->parent    = v == 0 ? -1 : gcx_coll_mod(v - low + g->root, size);
    g->nchildren = 0;
    g->sent      = 0;
    for (mask = 1; mask < low && v + mask < size; mask <<= 1) {
        g->children[g->nchildren] = gcx_coll_mod(v + mask + g->root, size);
        g->offsets[g->nchildren]  = mask;
        g->sizes[g->nchildren]    = v + 2 * mask <= size ? mask :
                                                     size - v - mask;
        ++g->nchildren;
    }
    if (v == 0 && g->root == 0) {
        g->staged = g->recvbuf; /* virtual order is rank order */
    } else if (g->nchildren > 0 || v == 0) {
        g->staged = gcx_comm_scratch(task->comm,
                                     (size_t)g->subtree * g->bytes);
        if (g->staged == NULL) {
            task->status = GCX_ERR_NOMEM;
            return;
        }
    }
    if (g->staged != NULL) {
        const char *own = g->sendbuf != NULL ? g->sendbuf :
                          g->recvbuf + (size_t)g->root * g->bytes;
        if (own != g->staged) {
            memcpy(g->staged, own, g->bytes);
        }
    }
    for (i = 0; i < g->nchildren; ++i) {
        if (gcx_coll_recv(task, g->children[i], 0,
                          g->staged + (size_t)g->offsets[i] * g->bytes,
                          (size_t)g->sizes[i] * g->bytes, &g->rreqs[i]) < 0) {
            return;
        }
    }
    gcx_gather_binomial_progress(task);
}

static void gcx_gather_binomial_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_gather_binomial_ops = {
    .name     = "gather (binomial)",
    .post     = gcx_gather_binomial_post,
    .progress = gcx_gather_binomial_progress,
    .finalize = gcx_gather_binomial_finalize,
};

gcx_task_t *gcx_gather_binomial_create(gcx_comm_t *comm, const void *sendbuf,
                                       void *recvbuf, size_t bytes, int root)
{
    gcx_gather_binomial_task_t *g = calloc(1, sizeof(*g));

    if (g == NULL) {
        return NULL;
    }
    gcx_task_init(&g->super, &gcx_gather_binomial_ops, comm);
    g->sendbuf = sendbuf;
    g->recvbuf = recvbuf;
    g->bytes   = bytes;
    g->root    = root;
    return &g->super;
}
