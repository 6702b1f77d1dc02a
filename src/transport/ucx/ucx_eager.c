/*
 * ucx_eager.c - eager tagged messages staged by UCX and copied out whole:
 * the receive side of send_eager/recv_eager (transport.h).
 *
 * Idea: on a TCP link every rendezvous handshake (request, reply) waits
 * behind the data already queued in the link's sender, so a pipeline that
 * sends one rendezvous per step (the ring) loses that wait on every step.
 * Eager messages need no handshake, but UCX 1.13's tagged eager receive of
 * a multi-fragment message keeps writing the later fragments into the
 * caller's buffer after the receive was cancelled (a peer failure): memory
 * the caller has freed. So these messages go as active messages with
 * UCP_AM_SEND_FLAG_EAGER instead: UCX assembles each one in its own buffer
 * (UCP_AM_FLAG_PERSISTENT_DATA) and calls us once it is whole. A waiting
 * recv_eager() then gets a memcpy and completes; a message that comes first
 * stays in UCX's buffer on the context's staged list (FIFO) until its
 * receive is posted, even for a communicator this process has not created
 * yet (a split that a peer finished first), as UCX's tag matching keeps
 * unexpected messages. Nothing but that memcpy, inside a call, ever writes
 * into a caller's buffer, so cancelling a receive (abort) is instant and
 * final.
 *
 * Matching is by the whole 64-bit tag (communicator id, sequence, step,
 * source): linear over the view's waiting receives and the staged list,
 * which hold a few pipeline windows at most and match near the head,
 * because one sender's messages arrive in order.
 *
 * Cost per message: one memcpy of the payload on arrival (besides UCX's
 * own copies: bcopy on send, assembly on receive); no allocation in gcx
 * unless a receive names more than one buffer.
 */
#include "ucx_int.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

/* The communicator id a tag's communicator field names (a view's id is
 * even; its point-to-point id is the odd one after). */
static uint32_t gcx_tl_ucx_eager_comm(uint64_t tag)
{
    return ((uint32_t)(tag >> 52) & (GCX_TL_MAX_COMM_IDS - 1)) & ~1u;
}

static const gcx_iov_t *gcx_tl_ucx_eager_iov(const gcx_tl_req_t *req)
{
    return req->eager_iovcnt > 1 ? req->eager_iov.buffer : &req->eager_iov;
}

/* Copies a whole message into a waiting request and completes it. */
static void gcx_tl_ucx_eager_deliver(gcx_tl_req_t *req, const void *data,
                                     size_t length)
{
    const gcx_iov_t *iov      = gcx_tl_ucx_eager_iov(req);
    size_t           capacity = 0, off = 0;
    int              i;

    for (i = 0; i < req->eager_iovcnt; ++i) {
        capacity += iov[i].length;
    }
    if (length > capacity) {
        req->status = GCX_ERR_MISMATCH; /* as a truncated tagged receive */
    } else {
        for (i = 0; i < req->eager_iovcnt && off < length; ++i) {
            size_t n = iov[i].length < length - off ? iov[i].length :
                                                      length - off;

            memcpy(iov[i].buffer, (const char *)data + off, n);
            off += n;
        }
        req->status = GCX_OK;
    }
    req->length = length;
}

/* Frees the copy of a receive's iov list, if it has one. */
static void gcx_tl_ucx_eager_iov_free(gcx_tl_req_t *req)
{
    if (req->eager_iovcnt > 1) {
        free(req->eager_iov.buffer);
    }
    req->eager_iovcnt = 0;
}

/* Unlinks a waiting request and frees what it allocated. */
static void gcx_tl_ucx_eager_unlink(gcx_tl_req_t *req)
{
    req->prev->next = req->next;
    req->next->prev = req->prev;
    req->prev = req->next = NULL;
    gcx_tl_ucx_eager_iov_free(req);
}

static void gcx_tl_ucx_staged_unlink(gcx_tl_ucx_staged_t *msg)
{
    msg->prev->next = msg->next;
    msg->next->prev = msg->prev;
}

static ucs_status_t gcx_tl_ucx_eager_cb(void *arg, const void *header,
                                        size_t header_length, void *data,
                                        size_t length,
                                        const ucp_am_recv_param_t *param)
{
    gcx_tl_ctx_t        *ctx = arg;
    gcx_tl_ucx_staged_t *msg;
    gcx_tl_ucx_t        *view;
    gcx_tl_req_t        *req;
    uint64_t             tag;

    if (header_length != sizeof(tag) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        gcx_warn("dropped an eager message that is not one (header %zu "
                 "bytes, %s)", header_length,
                 (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ?
                     "rendezvous" : "eager");
        return UCS_OK;
    }
    memcpy(&tag, header, sizeof(tag)); /* may be unaligned */
    ++ctx->eager_arrived;
    view = ctx->views[gcx_tl_ucx_eager_comm(tag)];
    if (view != NULL && view->aborted) {
        return UCS_OK; /* nobody will ever receive it */
    }
    if (view != NULL) {
        for (req = view->eager_posted.next; req != &view->eager_posted;
             req = req->next) {
            if (req->tag == tag) {
                gcx_tl_ucx_eager_deliver(req, data, length);
                gcx_tl_ucx_eager_unlink(req);
                return UCS_OK;
            }
        }
    }
    msg = malloc(sizeof(*msg));
    if (msg == NULL) {
        gcx_error("out of memory staging an eager message of %zu bytes: "
                  "dropped", length);
        return UCS_OK;
    }
    msg->tag              = tag;
    msg->data             = data;
    msg->length           = length;
    msg->next             = &ctx->staged;
    msg->prev             = ctx->staged.prev;
    ctx->staged.prev->next = msg;
    ctx->staged.prev       = msg;
    return UCS_INPROGRESS; /* data stays valid until ucp_am_data_release */
}

gcx_status_t gcx_tl_ucx_eager_init(gcx_tl_ctx_t *ctx)
{
    ucp_am_handler_param_t params = {0};
    ucs_status_t           st;

    ctx->staged.next  = &ctx->staged;
    ctx->staged.prev  = &ctx->staged;
    params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                        UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                        UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG;
    params.id         = GCX_TL_UCX_EAGER_AM_ID;
    params.flags      = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
    params.cb         = gcx_tl_ucx_eager_cb;
    params.arg        = ctx;
    st = ucp_worker_set_am_recv_handler(ctx->worker, &params);
    if (st != UCS_OK) {
        gcx_error("ucp_worker_set_am_recv_handler(eager) failed: %s",
                  ucs_status_string(st));
        return GCX_ERR_TRANSPORT;
    }
    return GCX_OK;
}

static void gcx_tl_ucx_staged_free(gcx_tl_ctx_t *ctx,
                                   gcx_tl_ucx_staged_t *msg)
{
    gcx_tl_ucx_staged_unlink(msg);
    ucp_am_data_release(ctx->worker, msg->data);
    free(msg);
}

void gcx_tl_ucx_eager_fini(gcx_tl_ctx_t *ctx)
{
    while (ctx->staged.next != &ctx->staged) {
        gcx_tl_ucx_staged_free(ctx, ctx->staged.next);
    }
}

void gcx_tl_ucx_eager_purge(gcx_tl_ctx_t *ctx, uint32_t comm_id)
{
    gcx_tl_ucx_staged_t *msg, *next;

    for (msg = ctx->staged.next; msg != &ctx->staged; msg = next) {
        next = msg->next;
        if (gcx_tl_ucx_eager_comm(msg->tag) == (comm_id & ~1u)) {
            gcx_tl_ucx_staged_free(ctx, msg);
        }
    }
}

void gcx_tl_ucx_eager_cancel(gcx_tl_ucx_t *ucx, int peer, gcx_status_t status)
{
    gcx_tl_req_t *req, *next;

    for (req = ucx->eager_posted.next; req != &ucx->eager_posted;
         req = next) {
        next = req->next;
        if (peer < 0 || req->peer == peer) {
            gcx_tl_ucx_eager_unlink(req);
            req->status = status;
        }
    }
}

gcx_status_t gcx_tl_ucx_recv_eager(gcx_tl_t *tl, int peer, uint64_t tag,
                                   const gcx_iov_t *iov, int iovcnt,
                                   gcx_tl_req_t *req)
{
    gcx_tl_ucx_t        *ucx = (gcx_tl_ucx_t *)tl;
    gcx_tl_ctx_t        *ctx = tl->ctx;
    gcx_tl_ucx_staged_t *msg;

    req->status       = GCX_INPROGRESS;
    req->is_recv      = 1;
    req->impl         = NULL;
    req->length       = 0;
    req->tag          = tag;
    req->peer         = peer;
    req->eager_iovcnt = iovcnt;
    if (iovcnt == 1) {
        req->eager_iov = iov[0];
    } else if (iovcnt > 1) {
        req->eager_iov.buffer = malloc((size_t)iovcnt * sizeof(*iov));
        if (req->eager_iov.buffer == NULL) {
            req->status = GCX_ERR_NOMEM;
            return GCX_ERR_NOMEM;
        }
        memcpy(req->eager_iov.buffer, iov, (size_t)iovcnt * sizeof(*iov));
    }
    if (ucx->aborted || ctx->stopped) {
        req->status = GCX_ERR_CANCELED;
    } else {
        for (msg = ctx->staged.next; msg != &ctx->staged; msg = msg->next) {
            if (msg->tag == tag) {
                gcx_tl_ucx_eager_deliver(req, msg->data, msg->length);
                gcx_tl_ucx_staged_free(ctx, msg);
                break;
            }
        }
    }
    if (req->status != GCX_INPROGRESS) {
        gcx_tl_ucx_eager_iov_free(req);
        return req->status == GCX_ERR_CANCELED ? GCX_ERR_CANCELED : GCX_OK;
    }
    req->next                     = &ucx->eager_posted;
    req->prev                     = ucx->eager_posted.prev;
    ucx->eager_posted.prev->next  = req;
    ucx->eager_posted.prev        = req;
    return GCX_OK;
}
