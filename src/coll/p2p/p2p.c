/*
 * p2p.c - tagged point-to-point messages on a communicator (gcx_send,
 * gcx_recv), what a framework backend needs besides collectives.
 *
 * A message goes straight to the transport with the communicator's
 * point-to-point id and the user's tag (transport.h), never behind the
 * collective FIFO: rank A's send and rank B's receive match whatever
 * collectives either has queued. Zero copy as the collectives: eager for
 * small messages, rendezvous from and into the user's buffers for large
 * ones. Cost: one transport call and one small allocation per message.
 *
 * A receive must get exactly the bytes it expects: a longer or shorter
 * message completes it with GCX_ERR_MISMATCH (its buffer's content is then
 * undefined) and the communicator stays usable. A receive from
 * GCX_ANY_SOURCE masks the tag's source field out of the match and reads
 * the sender from the tag that matched. A lost peer, GCX_TIMEOUT or
 * a request freed in flight fails the communicator, as for collectives.
 */
#include "coll/coll.h"

#include <stdlib.h>

typedef struct gcx_p2p {
    gcx_task_t   super;
    gcx_tl_req_t req;
    gcx_iov_t    iov;
    int          peer;   /* GCX_ANY_SOURCE: any rank (receives only) */
    int          source; /* receives: the sender, once done */
    int          is_recv;
    uint32_t     tag;
} gcx_p2p_t;

/* The source field of a tag (transport.h's layout): what an any-source
 * receive leaves out of its match. */
#define GCX_P2P_ANY_SOURCE_MASK (~(((uint64_t)1 << GCX_TL_TAG_SRC_BITS) - 1))

static void gcx_p2p_post(gcx_task_t *task)
{
    gcx_p2p_t  *p2p  = (gcx_p2p_t *)task;
    gcx_comm_t *comm = task->comm;
    gcx_tl_t   *tl   = comm->tl;

    if (p2p->is_recv && p2p->peer == GCX_ANY_SOURCE) {
        tl->ops->recv(tl, -1, gcx_tl_p2p_tag(comm->id, p2p->tag, 0),
                      GCX_P2P_ANY_SOURCE_MASK, &p2p->iov, 1, &p2p->req);
    } else if (p2p->is_recv) {
        tl->ops->recv(tl, p2p->peer,
                      gcx_tl_p2p_tag(comm->id, p2p->tag, (uint32_t)p2p->peer),
                      GCX_TL_TAG_MATCH_ALL, &p2p->iov, 1, &p2p->req);
    } else {
        tl->ops->send(tl, p2p->peer,
                      gcx_tl_p2p_tag(comm->id, p2p->tag,
                                     (uint32_t)comm->rank),
                      &p2p->iov, 1, &p2p->req);
    }
    task->ops->progress(task);
}

static void gcx_p2p_progress(gcx_task_t *task)
{
    gcx_p2p_t *p2p = (gcx_p2p_t *)task;

    if (p2p->req.status == GCX_INPROGRESS) {
        if (p2p->peer != GCX_ANY_SOURCE &&
            task->comm->tl->ops->peer_failed(task->comm->tl, p2p->peer)) {
            gcx_error("%s: connection to rank %d lost", task->name,
                      p2p->peer);
            task->status = GCX_ERR_PEER;
        }
        return;
    }
    if (p2p->is_recv) {
        p2p->source = p2p->peer != GCX_ANY_SOURCE ?
                          p2p->peer :
                          (int)gcx_tl_tag_src(p2p->req.tag);
    }
    if (p2p->req.status == GCX_OK && p2p->is_recv &&
        p2p->req.length != p2p->iov.length) {
        gcx_error("gcx_recv from rank %d, tag %u: %zu bytes arrived, %zu "
                  "expected", p2p->source, p2p->tag, p2p->req.length,
                  p2p->iov.length);
        task->status = GCX_ERR_MISMATCH;
        return;
    }
    if (p2p->req.status == GCX_ERR_MISMATCH) {
        gcx_error("gcx_recv from rank %d, tag %u: the message is longer than "
                  "the %zu bytes expected", p2p->source, p2p->tag,
                  p2p->iov.length);
    }
    task->status = p2p->req.status;
}

static void gcx_p2p_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_send_ops = {
    .name     = "gcx_send",
    .post     = gcx_p2p_post,
    .progress = gcx_p2p_progress,
    .finalize = gcx_p2p_finalize,
};

static const gcx_task_ops_t gcx_recv_ops = {
    .name     = "gcx_recv",
    .post     = gcx_p2p_post,
    .progress = gcx_p2p_progress,
    .finalize = gcx_p2p_finalize,
};

static gcx_status_t gcx_p2p_start(const gcx_task_ops_t *ops, gcx_comm_t *comm,
                                  void *buf, size_t count, gcx_dtype_t dtype,
                                  int peer, int tag, gcx_request_t **req_p)
{
    size_t     esize = gcx_dtype_size(dtype);
    gcx_p2p_t *p2p;

    if (comm == NULL) {
        gcx_error("%s: no communicator", ops->name);
        return GCX_ERR_INVALID;
    }
    if (esize == 0 ||
        (peer < 0 && !(peer == GCX_ANY_SOURCE && ops == &gcx_recv_ops)) ||
        peer >= comm->size || tag < 0 ||
        (buf == NULL && count > 0) || count > SIZE_MAX / esize) {
        gcx_error("%s: invalid arguments (peer %d of %d ranks, tag %d: "
                  "0..%d, dtype %d, count %zu, buffer %p)",
                  ops->name, peer, comm->size, tag, INT32_MAX, (int)dtype,
                  count, buf);
        return GCX_ERR_INVALID;
    }
    p2p = calloc(1, sizeof(*p2p));
    if (p2p == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&p2p->super, ops, comm);
    p2p->iov.buffer = buf;
    p2p->iov.length = count * esize;
    p2p->peer       = peer;
    p2p->is_recv    = ops == &gcx_recv_ops;
    p2p->tag        = (uint32_t)tag;
    return gcx_task_start(&p2p->super, req_p);
}

gcx_status_t gcx_send(gcx_comm_t *comm, const void *buf, size_t count,
                      gcx_dtype_t dtype, int peer, int tag,
                      gcx_request_t **req_p)
{
    return gcx_p2p_start(&gcx_send_ops, comm, (void *)buf, count, dtype, peer,
                         tag, req_p);
}

gcx_status_t gcx_recv(gcx_comm_t *comm, void *buf, size_t count,
                      gcx_dtype_t dtype, int peer, int tag,
                      gcx_request_t **req_p)
{
    return gcx_p2p_start(&gcx_recv_ops, comm, buf, count, dtype, peer, tag,
                         req_p);
}

gcx_status_t gcx_recv_source(gcx_request_t *req, int *source_p)
{
    gcx_task_t  *task = (gcx_task_t *)req;
    gcx_status_t status;

    if (task == NULL || source_p == NULL || task->ops != &gcx_recv_ops) {
        gcx_error("gcx_recv_source: %s", task == NULL || source_p == NULL ?
                                             "NULL argument" :
                                             "not a gcx_recv request");
        return GCX_ERR_INVALID;
    }
    gcx_context_lock();
    status = task->status;
    if (status == GCX_OK) {
        *source_p = ((gcx_p2p_t *)task)->source;
    }
    gcx_context_unlock();
    return status;
}
