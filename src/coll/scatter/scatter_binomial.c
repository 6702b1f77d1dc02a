/*
 * scatter_binomial.c - binomial tree scatter (small messages).
 *
 * Idea: the gather's tree run backwards. With v = (rank - root) mod P, rank
 * v receives the blocks of its whole subtree (virtual ranks v .. v +
 * min(lowbit(v), P - v) - 1, in virtual order) from v - lowbit(v) in one
 * message into the communicator scratch, keeps the first and forwards to
 * each child v + 2^j, largest subtree first, the child's part. A leaf
 * receives straight into recvbuf; the root sends straight from sendbuf
 * when it is rank 0 (virtual order is rank order), otherwise from a
 * rotated copy in scratch.
 * Cost: ceil(log2 P)·α + (P-1)·n·β at the root (n bytes per rank), plus
 * one copy of each subtree on the inner ranks; scratch of a subtree.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_scatter_binomial_task {
    gcx_task_t   super;
    const char  *sendbuf; /* root */
    char        *recvbuf; /* NULL: in place at the root */
    const char  *staged;  /* the subtree's blocks in virtual order */
    char        *scratch;
    size_t       bytes;   /* per rank */
    int          root;
    int          subtree, parent;
    int          nchildren, received;
    int          children[GCX_TL_TAG_SRC_BITS + 1];
    int          offsets[GCX_TL_TAG_SRC_BITS + 1]; /* blocks, in staged */
    int          sizes[GCX_TL_TAG_SRC_BITS + 1];   /* blocks */
    gcx_tl_req_t sreqs[GCX_TL_TAG_SRC_BITS + 1];
    gcx_tl_req_t rreq;
} gcx_scatter_binomial_task_t;

static void gcx_scatter_binomial_progress(gcx_task_t *task)
{
    gcx_scatter_binomial_task_t *s = (gcx_scatter_binomial_task_t *)task;
    int                          i, state;

    if (!s->received) {
        if (s->parent >= 0) {
            state = gcx_coll_req_state(task, &s->rreq, s->parent,
                                       (size_t)s->subtree * s->bytes);
            if (state <= 0) {
                return;
            }
        }
        s->received = 1;
        for (i = 0; i < s->nchildren; ++i) {
            if (gcx_coll_send(task, s->children[i], 0,
                              s->staged + (size_t)s->offsets[i] * s->bytes,
                              (size_t)s->sizes[i] * s->bytes,
                              &s->sreqs[i]) < 0) {
                return;
            }
        }
        if (s->recvbuf != NULL && s->recvbuf != s->staged) {
            memcpy(s->recvbuf, s->staged, s->bytes);
        }
    }
    if (gcx_coll_sends_state(task, s->sreqs, s->children,
                             s->nchildren) == 1) {
        task->status = GCX_OK;
    }
}

static void gcx_scatter_binomial_post(gcx_task_t *task)
{
    gcx_scatter_binomial_task_t *s = (gcx_scatter_binomial_task_t *)task;
    int size = task->comm->size;
    int v    = gcx_coll_mod(task->comm->rank - s->root, size);
    int low  = 1, mask;

    if (s->bytes == 0) {
        task->status = GCX_OK;
        return;
    }
    while (low < size && !(v & low)) {
        low <<= 1;
    }
    s->subtree   = v + low < size ? low : size - v;
    s->parent    = v == 0 ? -1 : gcx_coll_mod(v - low + s->root, size);
    s->nchildren = 0;
    s->received  = 0;
    for (mask = low >> 1; mask > 0; mask >>= 1) { /* largest first */
        if (v + mask < size) {
            s->children[s->nchildren] = gcx_coll_mod(v + mask + s->root, size);
            s->offsets[s->nchildren]  = mask;
            s->sizes[s->nchildren]    = v + 2 * mask <= size ? mask :
                                                         size - v - mask;
            ++s->nchildren;
        }
    }
    if (v == 0 && s->root == 0) {
        s->staged = s->sendbuf; /* virtual order is rank order */
    } else if (v == 0 || s->nchildren > 0) {
        s->scratch = gcx_comm_scratch(task->comm,
                                      (size_t)s->subtree * s->bytes);
        if (s->scratch == NULL) {
            task->status = GCX_ERR_NOMEM;
            return;
        }
        s->staged = s->scratch;
        if (v == 0) { /* rank (u + root) mod P goes to virtual u */
            size_t head = (size_t)(size - s->root) * s->bytes;

            memcpy(s->scratch, s->sendbuf + (size_t)s->root * s->bytes, head);
            memcpy(s->scratch + head, s->sendbuf, (size_t)s->root * s->bytes);
        }
    } else {
        s->staged = s->recvbuf; /* a leaf */
    }
    if (s->parent >= 0 &&
        gcx_coll_recv(task, s->parent, 0,
                      s->scratch != NULL ? s->scratch : s->recvbuf,
                      (size_t)s->subtree * s->bytes, &s->rreq) < 0) {
        return;
    }
    gcx_scatter_binomial_progress(task);
}

static void gcx_scatter_binomial_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_scatter_binomial_ops = {
    .name     = "scatter (binomial)",
    .post     = gcx_scatter_binomial_post,
    .progress = gcx_scatter_binomial_progress,
    .finalize = gcx_scatter_binomial_finalize,
};

gcx_task_t *gcx_scatter_binomial_create(gcx_comm_t *comm, const void *sendbuf,
                                        void *recvbuf, size_t bytes, int root)
{
    gcx_scatter_binomial_task_t *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return NULL;
    }
    gcx_task_init(&s->super, &gcx_scatter_binomial_ops, comm);
    s->sendbuf = sendbuf;
    s->recvbuf = recvbuf;
    s->bytes   = bytes;
    s->root    = root;
    return &s->super;
}
