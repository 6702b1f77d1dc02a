/*
 * broadcast_chain.c - pipelined chain broadcast (large messages).
 *
 * Idea: ranks form a chain root -> root+1 -> ... -> root+P-1; the buffer is
 * cut into GCX_PIPELINE_CHUNK chunks and every rank forwards chunk c as soon
 * as it has arrived, straight from its own (user) buffer. All links are busy
 * at once, so the time approaches one transfer of the buffer.
 * Cost: (n + (P-2)·chunk)·β + (chunks + P-2)·α.
 */
#include "coll/coll.h"

#include <stdlib.h>

#define GCX_CHAIN_WINDOW 8

typedef struct gcx_broadcast_chain_task {
    gcx_task_t   super;
    char        *buf;
    size_t       bytes;
    int          root;
    int          prev, next; /* -1 at the ends */
    size_t       chunk, nchunks;
    size_t       recv_posted, recv_done, send_posted, send_done;
    gcx_tl_req_t rreqs[GCX_CHAIN_WINDOW];
    gcx_tl_req_t sreqs[GCX_CHAIN_WINDOW];
} gcx_broadcast_chain_task_t;

static size_t gcx_broadcast_chain_len(const gcx_broadcast_chain_task_t *bc,
                                      size_t c)
{
    size_t begin = c * bc->chunk;
    return bc->bytes - begin < bc->chunk ? bc->bytes - begin : bc->chunk;
}

static void gcx_broadcast_chain_progress(gcx_task_t *task)
{
    gcx_broadcast_chain_task_t *bc = (gcx_broadcast_chain_task_t *)task;
    int                         busy = 1, state;

    while (busy) {
        busy = 0;
        while (bc->recv_done < bc->recv_posted) {
            state = gcx_coll_req_state(
                task, &bc->rreqs[bc->recv_done % GCX_CHAIN_WINDOW], bc->prev,
                gcx_broadcast_chain_len(bc, bc->recv_done));
            if (state < 0) {
                return;
            }
            if (state == 0) {
                break;
            }
            ++bc->recv_done;
            busy = 1;
        }
        while (bc->send_done < bc->send_posted) {
            state = gcx_coll_req_state(
                task, &bc->sreqs[bc->send_done % GCX_CHAIN_WINDOW], bc->next,
                SIZE_MAX);
            if (state < 0) {
                return;
            }
            if (state == 0) {
                break;
            }
            ++bc->send_done;
            busy = 1;
        }
        while (bc->prev >= 0 && bc->recv_posted < bc->nchunks &&
               bc->recv_posted - bc->recv_done < GCX_CHAIN_WINDOW) {
            size_t c = bc->recv_posted;
            if (gcx_coll_recv(task, bc->prev, 0, bc->buf + c * bc->chunk,
                              gcx_broadcast_chain_len(bc, c),
                              &bc->rreqs[c % GCX_CHAIN_WINDOW]) < 0) {
                return;
            }
            ++bc->recv_posted;
            busy = 1;
        }
        while (bc->next >= 0 && bc->send_posted < bc->nchunks &&
               bc->send_posted - bc->send_done < GCX_CHAIN_WINDOW &&
               (bc->prev < 0 || bc->send_posted < bc->recv_done)) {
            size_t c = bc->send_posted;
            if (gcx_coll_send(task, bc->next, 0, bc->buf + c * bc->chunk,
                              gcx_broadcast_chain_len(bc, c),
                              &bc->sreqs[c % GCX_CHAIN_WINDOW]) < 0) {
                return;
            }
            ++bc->send_posted;
            busy = 1;
        }
    }
    if ((bc->prev < 0 || bc->recv_done == bc->nchunks) &&
        (bc->next < 0 || bc->send_done == bc->nchunks)) {
        task->status = GCX_OK;
    }
}

static void gcx_broadcast_chain_post(gcx_task_t *task)
{
    gcx_broadcast_chain_task_t *bc = (gcx_broadcast_chain_task_t *)task;
    int size = task->comm->size;
    int v    = gcx_coll_mod(task->comm->rank - bc->root, size);

    bc->prev    = v == 0 ? -1 : gcx_coll_mod(v - 1 + bc->root, size);
    bc->next    = v == size - 1 ? -1 : gcx_coll_mod(v + 1 + bc->root, size);
    bc->chunk   = task->comm->config.pipeline_chunk;
    bc->nchunks = bc->bytes == 0 ? 1 : (bc->bytes + bc->chunk - 1) / bc->chunk;
    bc->recv_posted = bc->recv_done = bc->send_posted = bc->send_done = 0;
    gcx_broadcast_chain_progress(task);
}

static void gcx_broadcast_chain_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_broadcast_chain_ops = {
    .name     = "broadcast (chain)",
    .post     = gcx_broadcast_chain_post,
    .progress = gcx_broadcast_chain_progress,
    .finalize = gcx_broadcast_chain_finalize,
};

gcx_task_t *gcx_broadcast_chain_create(gcx_comm_t *comm, void *buf,
                                       size_t bytes, int root)
{
    gcx_broadcast_chain_task_t *bc = calloc(1, sizeof(*bc));

    if (bc == NULL) {
        return NULL;
    }
    gcx_task_init(&bc->super, &gcx_broadcast_chain_ops, comm);
    bc->buf   = buf;
    bc->bytes = bytes;
    bc->root  = root;
    return &bc->super;
}
