/*
 * ucx_tl.c - the UCX transport (default): one communicator's view of the
 * process's UCX context (ucx_context.c), tagged and active messages over
 * UCP.
 *
 * A view is a rank map onto the context's shared endpoints plus the
 * communicator's id, carried in every tag (transport.h) and in the first
 * word of every active-message header. Messages use ucp_tag_send_nbx /
 * ucp_tag_recv_nbx directly on the caller's buffers: UCX picks eager (small)
 * or rendezvous (large: cma/knem single copy on a host, zero-copy RDMA on
 * InfiniBand), so gcx itself never stages user data; send_eager (its
 * receive side is ucx_eager.c) is the exception a collective opts into.
 *
 * Peer failure: endpoints in UCP_ERR_HANDLING_MODE_PEER have their error
 * callback mark the endpoint failed, so collectives waiting on the peer fail
 * with GCX_ERR_PEER at once. UCX 1.13 has no shared-memory transport that
 * supports that mode, so by default (GCX_UCX_ERR_MODE=auto) only endpoints
 * to peers on other hosts use it (they go over TCP or InfiniBand anyway);
 * a dead peer on this host (shm + cma single copy) is caught by the
 * GCX_TIMEOUT deadline that the task queue enforces. `peer` asks it of
 * every endpoint, `none` of none. Every
 * posted request is on the view's outstanding list so abort() can cancel
 * receives, let live peers' transfers end while they still complete, close
 * the endpoints the rest wait on (which completes them), tell those peers
 * (a purge notice: their receives matched to what this rank was sending
 * will not go on, ucx_ctl.c) and wait until nothing can write into a user
 * buffer any more; only a receive a live peer may still be sending into
 * stops the process's worker. After an abort the process never
 * progresses UCX from a teardown again (FORCE closes, no drain, the worker
 * left to the exit): UCX 1.13's TCP transport crashes there otherwise
 * (docs/decisions.md).
 *
 * Active messages (UCP_FEATURE_AM): the context routes a message to the
 * view named by its header, whose handler takes the payload
 * (ucp_am_recv_data_nbx for rendezvous, straight into the caller's buffer;
 * a memcpy for eager) or leaves it: it is then dropped and its sender
 * completes (UCX 1.13 semantics). A handler may also keep a rendezvous
 * payload for later (am_hold: the UCP callback returns UCS_INPROGRESS and
 * the descriptor stays valid until ucp_am_recv_data_nbx or
 * ucp_am_data_release), or an eager payload that UCX holds in a buffer of
 * its own (UCP_AM_FLAG_PERSISTENT_DATA; read in place until
 * ucp_am_data_release: a receive without a copy). The memory of an abandoned operation is
 * released only when it ends with success: a rendezvous peer reads or writes
 * it without us (cma, RDMA), even after an error or after the worker is
 * destroyed, so otherwise it is kept until the process exits.
 *
 * Cost per message: one UCP call and, when it does not complete at once, a
 * UCP request taken from UCX's own pool; no allocation in gcx. A view costs
 * one pointer per rank; deriving one (split, dup) touches no network.
 */
#include "ucx_int.h"
#include "base/log.h"
#include "base/time.h"

#include <stdlib.h>
#include <string.h>

/* most unmatched messages a released view drains (bounded teardown) */
#define GCX_TL_UCX_DRAIN_MAX 4096

/* seconds an abort lets transfers with live peers end before closing
 * endpoints: they end as soon as those peers progress, which on a loaded
 * host (ranks outnumbering cores) can take several scheduling periods;
 * the wait ends early once nothing is left, and goes on only while
 * something still completes (GCX_TL_UCX_ABORT_QUIET) */
#define GCX_TL_UCX_ABORT_GRACE 1.0
/* seconds without a completion after which the rest is taken as stuck (a
 * rendezvous the peer will not fetch, a hung peer) */
#define GCX_TL_UCX_ABORT_QUIET 0.2
/* seconds an abort waits, once its endpoints are closed, for the receives
 * UCX cannot cancel to end or become safe (their peer gone, or its purge
 * notice come); a live peer that sends neither is hung */
#define GCX_TL_UCX_ABORT_PURGE_WAIT 2.0
/* progress calls that take what peers sent before their purge notices */
#define GCX_TL_UCX_ABORT_DRAIN 256

static void gcx_tl_ucx_track(gcx_tl_ucx_t *ucx, gcx_tl_req_t *req)
{
    gcx_tl_req_t *head = &ucx->outstanding;

    req->next        = head->next;
    req->prev        = head;
    head->next->prev = req;
    head->next       = req;
}

static void gcx_tl_ucx_untrack(gcx_tl_req_t *req)
{
    req->prev->next = req->next;
    req->next->prev = req->prev;
    req->prev = req->next = NULL;
}

/* Hands the UCP request of @p req to its callback, which frees it (and
 * runs or keeps @p node's release) when UCX ends it; until then @p ctx
 * counts it, so that its worker is not destroyed under it (the pool's leak
 * report: a send a dead peer never took ends only with the process). */
static void gcx_tl_ucx_orphan_impl(gcx_tl_ctx_t *ctx, gcx_tl_req_t *req,
                                   gcx_tl_ucx_abandoned_t *node)
{
    gcx_tl_ucx_priv_t *priv = req->impl;

    priv->owner     = NULL;
    priv->orphaned  = ctx;
    priv->abandoned = node;
    ++ctx->orphans;
    req->impl = NULL;
}

static void gcx_tl_ucx_release(gcx_tl_ucx_priv_t *priv)
{
    gcx_tl_ucx_request_init(priv); /* the pool reuses it as it is */
    ucp_request_free(priv);
}

/* Completion: to the owner if attached, else remembered for attach(). */
static void gcx_tl_ucx_done(void *request, ucs_status_t status, size_t length,
                            uint64_t tag)
{
    gcx_tl_ucx_priv_t *priv = request;
    gcx_tl_req_t      *req  = priv->owner;

    if (req != NULL) {
        if (status == UCS_OK) {
            req->length = length;
            req->tag    = tag;
        }
        req->status = gcx_tl_ucx_status(status);
        req->impl   = NULL;
        gcx_tl_ucx_untrack(req);
        gcx_tl_ucx_release(priv);
    } else if (priv->orphaned != NULL) {
        --priv->orphaned->orphans;
        if (priv->abandoned != NULL && status == UCS_OK) {
            gcx_tl_ucx_abandoned_run(priv->abandoned);
        } else if (priv->abandoned != NULL) {
            /* cancelled (endpoint closed) or failed: the peer may still
             * read or write the memory through the rendezvous */
            gcx_tl_ucx_abandoned_keep(priv->abandoned);
        }
        gcx_tl_ucx_release(priv);
    } else {
        priv->early  = 1;
        priv->status = status;
        priv->length = length;
        priv->tag    = tag;
    }
}

static void gcx_tl_ucx_send_cb(void *request, ucs_status_t status,
                               void *user_data)
{
    (void)user_data;
    gcx_tl_ucx_done(request, status, 0, 0);
}

static void gcx_tl_ucx_recv_cb(void *request, ucs_status_t status,
                               const ucp_tag_recv_info_t *info,
                               void *user_data)
{
    (void)user_data;
    gcx_tl_ucx_done(request, status, info->length, info->sender_tag);
}

static void gcx_tl_ucx_am_recv_cb(void *request, ucs_status_t status,
                                  size_t length, void *user_data)
{
    (void)user_data;
    gcx_tl_ucx_done(request, status, length, 0);
}

/* ---- views ---------------------------------------------------------------- */

static gcx_tl_ucx_t *gcx_tl_ucx_view_new(gcx_tl_ctx_t *ctx,
                                         const gcx_tl_params_t *params)
{
    gcx_tl_ucx_t *ucx;
    uint32_t      id = params->comm_id % GCX_TL_MAX_COMM_IDS;

    if (ctx->views[id] != NULL) {
        gcx_error("communicator id %u is in use in this process", id);
        return NULL;
    }
    ucx = calloc(1, sizeof(*ucx));
    if (ucx == NULL) {
        return NULL;
    }
    ucx->peers = calloc((size_t)params->size, sizeof(*ucx->peers));
    if (ucx->peers == NULL) {
        free(ucx);
        return NULL;
    }
    ucx->super.ops        = &gcx_tl_ucx_ops;
    ucx->super.ctx        = ctx;
    ucx->super.rank       = params->rank;
    ucx->super.size       = params->size;
    ucx->super.comm_id    = id;
    ucx->peer_failure    = params->peer_failure_detection;
    ucx->outstanding.next = &ucx->outstanding;
    ucx->outstanding.prev = &ucx->outstanding;
    ucx->eager_posted.next = &ucx->eager_posted;
    ucx->eager_posted.prev = &ucx->eager_posted;
    ctx->views[id]        = ucx;
    return ucx;
}

static gcx_status_t gcx_tl_ucx_init(gcx_tl_ctx_t *ctx,
                                    const gcx_tl_params_t *params,
                                    gcx_tl_t **tl_p)
{
    gcx_tl_ucx_t *ucx;

    if (ctx->stopped) {
        gcx_error("the process's UCX worker was stopped by an earlier abort "
                  "(a transfer UCX could not cancel); destroy every "
                  "communicator before creating a new one");
        return GCX_ERR_TRANSPORT;
    }
    ucx = gcx_tl_ucx_view_new(ctx, params);
    if (ucx == NULL) {
        return GCX_ERR_NOMEM;
    }
    *tl_p = &ucx->super;
    return GCX_OK;
}

static gcx_status_t gcx_tl_ucx_connect(gcx_tl_t *tl, const void *const *addrs,
                                       const size_t *lens)
{
    gcx_tl_ucx_t *ucx = (gcx_tl_ucx_t *)tl;
    gcx_status_t  status;
    int           i;

    for (i = 0; i < tl->size; ++i) {
        const void *addr;
        size_t      len;
        int         local = gcx_tl_ucx_blob_parse(tl->ctx, addrs[i], lens[i],
                                                  &addr, &len);

        if (local < 0) {
            gcx_error("rank %d published no gcx UCX address (%zu bytes): "
                      "another transport or gcx version?", i, lens[i]);
            return GCX_ERR_MISMATCH;
        }
        status = gcx_tl_ucx_ep_get(
            tl->ctx, addr, len,
            ucx->peer_failure == GCX_TL_PEER_FAILURE_ALL ||
                (ucx->peer_failure == GCX_TL_PEER_FAILURE_REMOTE && !local),
            &ucx->peers[i]);
        if (status != GCX_OK) {
            return status;
        }
        if (local) {
            gcx_tl_ucx_ep_watch(tl->ctx, ucx->peers[i], addrs[i], lens[i]);
        }
    }
    return GCX_OK;
}

static gcx_status_t gcx_tl_ucx_derive(const gcx_tl_t *parent,
                                      const gcx_tl_params_t *params,
                                      const int *parent_ranks,
                                      gcx_tl_t **tl_p)
{
    const gcx_tl_ucx_t *pucx = (const gcx_tl_ucx_t *)parent;
    gcx_tl_ucx_t       *ucx;
    gcx_tl_params_t     p = *params;
    int                 i;

    p.peer_failure_detection = pucx->peer_failure;
    ucx = gcx_tl_ucx_view_new(parent->ctx, &p);
    if (ucx == NULL) {
        return GCX_ERR_NOMEM;
    }
    for (i = 0; i < params->size; ++i) {
        ucx->peers[i] = pucx->peers[parent_ranks[i]];
        ++ucx->peers[i]->refcount;
    }
    *tl_p = &ucx->super;
    return GCX_OK;
}

/* ---- tagged messages ------------------------------------------------------ */

static void gcx_tl_ucx_fill_param(ucp_request_param_t *param,
                                  const gcx_iov_t *iov, int iovcnt,
                                  void **buffer_p, size_t *count_p)
{
    param->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    if (iovcnt == 1) {
        param->datatype = ucp_dt_make_contig(1);
        *buffer_p       = iov[0].buffer;
        *count_p        = iov[0].length;
    } else {
        /* gcx_iov_t has ucp_dt_iov_t's layout; the array must live until
         * completion, which the collectives guarantee */
        param->datatype = ucp_dt_make_iov();
        *buffer_p       = (void *)iov;
        *count_p        = (size_t)iovcnt;
    }
}

/* Ties a posted operation to its gcx request (or finishes it at once). */
static gcx_status_t gcx_tl_ucx_attach(gcx_tl_ucx_t *ucx, gcx_tl_req_t *req,
                                      ucs_status_ptr_t sp)
{
    gcx_tl_ucx_priv_t *priv;

    if (sp == NULL) {
        req->status = GCX_OK;
        return GCX_OK;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        req->status = gcx_tl_ucx_status(UCS_PTR_STATUS(sp));
        return req->status;
    }
    priv = sp;
    if (priv->early) {
        req->status = gcx_tl_ucx_status(priv->status);
        req->length = priv->length;
        req->tag    = priv->tag;
        gcx_tl_ucx_release(priv);
        return GCX_OK;
    }
    priv->owner = req;
    req->impl   = priv;
    gcx_tl_ucx_track(ucx, req);
    return GCX_OK;
}

/* The endpoint for a send to @p peer, or NULL (req failed with PEER). */
static ucp_ep_h gcx_tl_ucx_send_ep(gcx_tl_ucx_t *ucx, int peer,
                                   gcx_tl_req_t *req)
{
    gcx_tl_ucx_ep_t *ep = ucx->peers[peer];

    req->status  = GCX_INPROGRESS;
    req->is_recv = 0;
    req->impl    = NULL;
    req->peer    = peer;
    if (ucx->aborted || ucx->super.ctx->stopped || ep == NULL ||
        ep->failed || ep->ep == NULL) {
        req->status = GCX_ERR_PEER;
        return NULL;
    }
    return ep->ep;
}

/* A tagged send (ucp_tag_send_nbx), or an eager one: the payload goes whole
 * as an active message on the context's eager id (ucx_eager.c receives
 * it), whose header, the tag, lives in the request until it completes
 * (UCX 1.13 has no header copy flag). */
static gcx_status_t gcx_tl_ucx_post_send(gcx_tl_t *tl, int peer, uint64_t tag,
                                         const gcx_iov_t *iov, int iovcnt,
                                         gcx_tl_req_t *req, int eager)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    ucp_ep_h            ep    = gcx_tl_ucx_send_ep(ucx, peer, req);
    void               *buffer;
    size_t              count;

    if (ep == NULL) {
        return GCX_ERR_PEER;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.send      = gcx_tl_ucx_send_cb;
    gcx_tl_ucx_fill_param(&param, iov, iovcnt, &buffer, &count);
    if (!eager) {
        return gcx_tl_ucx_attach(ucx, req, ucp_tag_send_nbx(ep, buffer, count,
                                                            tag, &param));
    }
    req->tag            = tag;
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags         = UCP_AM_SEND_FLAG_EAGER;
    return gcx_tl_ucx_attach(ucx, req,
                             ucp_am_send_nbx(ep, GCX_TL_UCX_EAGER_AM_ID,
                                             &req->tag, sizeof(req->tag),
                                             buffer, count, &param));
}

static gcx_status_t gcx_tl_ucx_send(gcx_tl_t *tl, int peer, uint64_t tag,
                                    const gcx_iov_t *iov, int iovcnt,
                                    gcx_tl_req_t *req)
{
    return gcx_tl_ucx_post_send(tl, peer, tag, iov, iovcnt, req, 0);
}

static gcx_status_t gcx_tl_ucx_send_eager(gcx_tl_t *tl, int peer,
                                          uint64_t tag, const gcx_iov_t *iov,
                                          int iovcnt, gcx_tl_req_t *req)
{
    return gcx_tl_ucx_post_send(tl, peer, tag, iov, iovcnt, req, 1);
}

static gcx_status_t gcx_tl_ucx_recv(gcx_tl_t *tl, int peer, uint64_t tag,
                                    uint64_t tag_mask, const gcx_iov_t *iov,
                                    int iovcnt, gcx_tl_req_t *req)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    void               *buffer;
    size_t              count;

    req->status  = GCX_INPROGRESS;
    req->is_recv = 1;
    req->impl    = NULL;
    req->length  = 0;
    req->peer    = peer; /* the source is part of the tag; abort needs it */
    req->peer_purges = peer >= 0 && ucx->peers[peer] != NULL ?
                           ucx->peers[peer]->peer_purges : 0;
    if (ucx->aborted || tl->ctx->stopped) {
        req->status = GCX_ERR_CANCELED;
        return GCX_ERR_CANCELED;
    }
    /* UCX 1.13 leaves recv_info unset on immediate completion, so the
     * length and tag always come through the callback */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv      = gcx_tl_ucx_recv_cb;
    gcx_tl_ucx_fill_param(&param, iov, iovcnt, &buffer, &count);
    return gcx_tl_ucx_attach(ucx, req,
                             ucp_tag_recv_nbx(tl->ctx->worker, buffer, count,
                                              tag, tag_mask, &param));
}

/* ---- active messages ------------------------------------------------------ */

static gcx_status_t gcx_tl_ucx_am_handler(gcx_tl_t *tl, unsigned id,
                                          gcx_tl_am_handler_t handler,
                                          void *arg)
{
    gcx_tl_ucx_t *ucx = (gcx_tl_ucx_t *)tl;
    gcx_status_t  status;

    if (id >= GCX_TL_AM_MAX_ID ||
        (handler != NULL && ucx->am[id].handler != NULL)) {
        return GCX_ERR_INVALID;
    }
    if (handler != NULL) {
        status = gcx_tl_ucx_am_route(tl->ctx, id);
        if (status != GCX_OK) {
            return status;
        }
    }
    ucx->am[id].handler = handler;
    ucx->am[id].arg     = arg;
    return GCX_OK;
}

/* am_send and am_send_eager: @p flags 0 or UCP_AM_SEND_FLAG_EAGER */
static gcx_status_t gcx_tl_ucx_am_post(gcx_tl_t *tl, int peer, unsigned id,
                                       const void *header,
                                       size_t header_length,
                                       const gcx_iov_t *iov, int iovcnt,
                                       gcx_tl_req_t *req, uint32_t flags)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    ucp_ep_h            ep    = gcx_tl_ucx_send_ep(ucx, peer, req);
    gcx_tl_am_prefix_t  prefix;
    void               *buffer = NULL;
    size_t              count  = 0;

    if (ep == NULL) {
        return GCX_ERR_PEER;
    }
    if (header_length < sizeof(prefix) ||
        (memcpy(&prefix, header, sizeof(prefix)),
         prefix.comm_id != tl->comm_id)) {
        req->status = GCX_ERR_INVALID;
        return GCX_ERR_INVALID;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.send      = gcx_tl_ucx_send_cb;
    if (flags != 0) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        param.flags         = flags;
    }
    if (iovcnt > 0) {
        gcx_tl_ucx_fill_param(&param, iov, iovcnt, &buffer, &count);
    }
    return gcx_tl_ucx_attach(ucx, req,
                             ucp_am_send_nbx(ep, id, header, header_length,
                                             buffer, count, &param));
}

static gcx_status_t gcx_tl_ucx_am_send(gcx_tl_t *tl, int peer, unsigned id,
                                       const void *header,
                                       size_t header_length,
                                       const gcx_iov_t *iov, int iovcnt,
                                       gcx_tl_req_t *req)
{
    return gcx_tl_ucx_am_post(tl, peer, id, header, header_length, iov,
                              iovcnt, req, 0);
}

static gcx_status_t gcx_tl_ucx_am_send_eager(gcx_tl_t *tl, int peer,
                                             unsigned id, const void *header,
                                             size_t header_length,
                                             const gcx_iov_t *iov, int iovcnt,
                                             gcx_tl_req_t *req)
{
    return gcx_tl_ucx_am_post(tl, peer, id, header, header_length, iov,
                              iovcnt, req, UCP_AM_SEND_FLAG_EAGER);
}

static gcx_status_t gcx_tl_ucx_am_recv(gcx_tl_t *tl, const gcx_tl_am_msg_t *msg,
                                       const gcx_iov_t *iov, int iovcnt,
                                       gcx_tl_req_t *req)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    ucs_status_ptr_t    sp;
    size_t              total = 0, off = 0;
    void               *buffer;
    size_t              count;
    int                 i;

    req->status  = GCX_INPROGRESS;
    req->is_recv = 1;
    req->impl    = NULL;
    req->length  = 0;
    req->tag     = 0;
    req->peer    = -1; /* the sender is not known here */
    for (i = 0; i < iovcnt; ++i) {
        total += iov[i].length;
    }
    if (total != msg->length) {
        req->status = GCX_ERR_MISMATCH;
        return GCX_ERR_MISMATCH;
    }
    if (!msg->rndv) {
        for (i = 0; i < iovcnt; ++i) {
            if (iov[i].length > 0) {
                memcpy(iov[i].buffer, (const char *)msg->data + off,
                       iov[i].length);
            }
            off += iov[i].length;
        }
        req->length = total;
        req->status = GCX_OK;
        return GCX_OK;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv_am   = gcx_tl_ucx_am_recv_cb;
    gcx_tl_ucx_fill_param(&param, iov, iovcnt, &buffer, &count);
    sp = ucp_am_recv_data_nbx(tl->ctx->worker, msg->data, buffer, count,
                              &param);
    if (sp == NULL) {
        req->length = total;
    }
    return gcx_tl_ucx_attach(ucx, req, sp);
}

static gcx_status_t gcx_tl_ucx_am_hold(gcx_tl_t *tl, const gcx_tl_am_msg_t *msg)
{
    if (!msg->rndv && !msg->in_place) {
        return GCX_ERR_UNSUPPORTED;
    }
    tl->ctx->am_held = 1;
    return GCX_OK;
}

static void gcx_tl_ucx_am_release(gcx_tl_t *tl, const gcx_tl_am_msg_t *msg)
{
    ucp_am_data_release(tl->ctx->worker, msg->data);
}

static void gcx_tl_ucx_abandon(gcx_tl_t *tl, gcx_tl_req_t *req,
                               void (*release)(void *arg), void *arg)
{
    gcx_tl_ctx_t           *ctx  = tl->ctx;
    gcx_tl_ucx_abandoned_t *node;

    if (req->status != GCX_INPROGRESS || req->impl == NULL) {
        if (release != NULL) {
            release(arg);
        }
        return;
    }
    node = gcx_tl_ucx_abandoned_new(
        ctx, release, arg,
        req->is_recv ? NULL : ((gcx_tl_ucx_t *)tl)->peers[req->peer]);
    if (node == NULL) { /* keep the memory alive for good rather than risk it */
        gcx_warn("out of memory abandoning a request; its buffer is kept");
    }
    /* not ucp_request_free'd here: UCX calls no callback for a request
     * freed before it ends, so node's release could never run (its memory,
     * e.g. a control message or a coded block, would grow with the run).
     * The callback frees it when it ends (release() on success; closing
     * the endpoint ends it too); one that never ends is counted in the
     * context's orphans, which leave the worker to the process exit */
    gcx_tl_ucx_orphan_impl(ctx, req, node);
    req->status = GCX_ERR_CANCELED;
    gcx_tl_ucx_untrack(req);
}

/* ---- progress, failure, release ------------------------------------------- */

static int gcx_tl_ucx_progress(gcx_tl_t *tl)
{
    return gcx_tl_ucx_ctx_progress(tl->ctx);
}

static int gcx_tl_ucx_peer_failed(gcx_tl_t *tl, int peer)
{
    const gcx_tl_ucx_ep_t *ep = ((gcx_tl_ucx_t *)tl)->peers[peer];

    return ep == NULL || ep->failed;
}

static int gcx_tl_ucx_peer_lost(gcx_tl_t *tl, int peer)
{
    const gcx_tl_ucx_ep_t *ep = ((gcx_tl_ucx_t *)tl)->peers[peer];

    return ep == NULL || ep->lost;
}

static int gcx_tl_ucx_deaf(gcx_tl_t *tl)
{
    return tl->ctx->deaf;
}

/* Completes one tracked request with @p status now; its UCP request is
 * orphaned (freed by its callback, nothing else touched). */
static void gcx_tl_ucx_orphan(gcx_tl_ctx_t *ctx, gcx_tl_req_t *req,
                              gcx_status_t status)
{
    gcx_tl_ucx_orphan_impl(ctx, req, NULL);
    req->status = status;
    gcx_tl_ucx_untrack(req);
}

void gcx_tl_ucx_fail_ep(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep)
{
    uint32_t id;
    int      i;

    for (id = 0; id < GCX_TL_MAX_COMM_IDS; ++id) {
        gcx_tl_ucx_t *ucx = ctx->views[id];
        gcx_tl_req_t *req, *next;

        if (ucx == NULL) {
            continue;
        }
        for (i = 0; i < ucx->super.size; ++i) {
            if (ucx->peers[i] == ep) {
                gcx_tl_ucx_eager_cancel(ucx, i, GCX_ERR_PEER);
            }
        }
        /* an unmatched receive is cancelled; what is left (a send, a
         * receive matched to a message the dead peer was sending) ends
         * here: nobody on the other side reads or writes any more */
        for (req = ucx->outstanding.next; req != &ucx->outstanding;
             req = next) {
            next = req->next; /* a cancel may complete (unlink) req */
            if (req->is_recv && req->peer >= 0 &&
                ucx->peers[req->peer] == ep) {
                ucp_request_cancel(ctx->worker, req->impl);
            }
        }
        for (req = ucx->outstanding.next; req != &ucx->outstanding;
             req = next) {
            next = req->next;
            if (req->peer >= 0 && ucx->peers[req->peer] == ep) {
                gcx_tl_ucx_orphan(ctx, req, GCX_ERR_PEER);
            }
        }
    }
}

/* A message of the transport's own in flight (a control message, a purge
 * notice): the header, then the payload, which UCX reads until the send
 * completes. */
typedef struct gcx_tl_ucx_own_msg {
    gcx_tl_req_t req;
    size_t       header_len;
    char         bytes[];
} gcx_tl_ucx_own_msg_t;

static gcx_status_t gcx_tl_ucx_revive(gcx_tl_t *tl, int peer)
{
    gcx_tl_ucx_t    *ucx = (gcx_tl_ucx_t *)tl;
    gcx_tl_ucx_ep_t *ep  = ucx->peers[peer], *fresh;
    gcx_status_t     status;

    if (tl->ctx->stopped) {
        return GCX_ERR_TRANSPORT;
    }
    if (ep == NULL || ep->lost) {
        return GCX_ERR_PEER;
    }
    if (!ep->failed && ep->ep != NULL) {
        return GCX_OK;
    }
    /* closed by an abort of this side while the peer lives (a transfer it
     * had to stop): a new endpoint to the same worker */
    status = gcx_tl_ucx_ep_get(tl->ctx, ep->address, ep->address_len,
                               ep->err_mode_peer, &fresh);
    if (status != GCX_OK) {
        return status;
    }
    if (fresh->pidfd < 0 && ep->pidfd >= 0) {
        fresh->pidfd = ep->pidfd; /* the watch goes with it */
        ep->pidfd    = -1;
    }
    gcx_debug("endpoint to rank %d of communicator %u opened again after "
              "an abort", peer, tl->comm_id);
    ucx->peers[peer] = fresh;
    gcx_tl_ucx_ep_put_all(tl->ctx, &ep, 1, gcx_time_now());
    return GCX_OK;
}

/* Sends header + payload as an eager active message @p am_id to @p peer,
 * over an endpoint opened again if an abort closed it; fire and forget
 * (the copy is freed once sent, kept if it never is). */
static gcx_status_t gcx_tl_ucx_own_send(gcx_tl_t *tl, int peer,
                                        unsigned am_id, const void *header,
                                        size_t header_len, const void *data,
                                        size_t length)
{
    gcx_tl_ucx_t         *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t   param = {0};
    gcx_tl_ucx_own_msg_t *msg;
    gcx_status_t          status = gcx_tl_ucx_revive(tl, peer);

    if (status != GCX_OK) {
        return status;
    }
    msg = malloc(sizeof(*msg) + header_len + length);
    if (msg == NULL) {
        return GCX_ERR_NOMEM;
    }
    memcpy(msg->bytes, header, header_len);
    if (length > 0) {
        memcpy(msg->bytes + header_len, data, length);
    }
    msg->header_len     = header_len;
    msg->req.status     = GCX_INPROGRESS;
    msg->req.is_recv    = 0;
    msg->req.impl       = NULL;
    msg->req.peer       = peer;
    param.op_attr_mask  = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send       = gcx_tl_ucx_send_cb;
    param.flags         = UCP_AM_SEND_FLAG_EAGER;
    (void)gcx_tl_ucx_attach(
        ucx, &msg->req,
        ucp_am_send_nbx(ucx->peers[peer]->ep, am_id, msg->bytes, header_len,
                        msg->bytes + header_len, length, &param));
    if (msg->req.status != GCX_INPROGRESS) {
        status = msg->req.status;
        free(msg);
        return status;
    }
    tl->ops->abandon(tl, &msg->req, free, msg);
    return GCX_OK;
}

static gcx_status_t gcx_tl_ucx_ctl_send(gcx_tl_t *tl, int peer,
                                        const void *data, size_t length)
{
    gcx_tl_am_prefix_t prefix = {tl->comm_id};

    return gcx_tl_ucx_own_send(tl, peer, GCX_TL_UCX_CTL_AM_ID, &prefix,
                               sizeof(prefix), data, length);
}

/* Tells @p peer (-1: every rank but this one) that this rank closed its
 * endpoint to it in an abort (ucx_ctl.c: the peer's receives from this
 * rank that UCX matched can then be left to UCX). Best effort: a peer that
 * is gone or unreachable is skipped. */
static void gcx_tl_ucx_purge_notify(gcx_tl_ucx_t *ucx, int peer)
{
    gcx_tl_t          *tl     = &ucx->super;
    gcx_tl_ucx_purge_t notice = {tl->comm_id, (int32_t)tl->rank};
    int                i;

    for (i = 0; i < tl->size; ++i) {
        if ((peer < 0 || i == peer) && i != tl->rank &&
            ucx->peers[i] != NULL && !ucx->peers[i]->lost) {
            (void)gcx_tl_ucx_own_send(tl, i, GCX_TL_UCX_PURGE_AM_ID, &notice,
                                      sizeof(notice), NULL, 0);
        }
    }
}

/* Closes the endpoint to @p peer (-1: to every rank) if still open. */
static void gcx_tl_ucx_kill_peer(gcx_tl_ucx_t *ucx, int peer)
{
    int i;

    for (i = 0; i < ucx->super.size; ++i) {
        if ((peer < 0 || i == peer) && ucx->peers[i] != NULL &&
            ucx->peers[i]->ep != NULL) {
            gcx_tl_ucx_ep_kill(ucx->super.ctx, ucx->peers[i]);
        }
    }
}

/* An outstanding request whose endpoint (or, for -1, any) is still open. */
static gcx_tl_req_t *gcx_tl_ucx_open_req(gcx_tl_ucx_t *ucx)
{
    gcx_tl_req_t *req;
    int           i;

    for (req = ucx->outstanding.next; req != &ucx->outstanding;
         req = req->next) {
        for (i = 0; i < ucx->super.size; ++i) {
            if ((req->peer < 0 || i == req->peer) &&
                ucx->peers[i] != NULL && ucx->peers[i]->ep != NULL) {
                return req;
            }
        }
    }
    return NULL;
}

/* Completes every outstanding request of @p ucx with @p status now; UCX's
 * requests are orphaned (freed by their callback, nothing else touched).
 * Returns how many there were. */
static int gcx_tl_ucx_orphan_all(gcx_tl_ucx_t *ucx, gcx_status_t status)
{
    gcx_tl_req_t *req, *next;
    int           n = 0;

    for (req = ucx->outstanding.next; req != &ucx->outstanding; req = next) {
        next = req->next;
        gcx_tl_ucx_orphan(ucx->super.ctx, req, status);
        ++n;
    }
    return n;
}

/*
 * UCX could not finish or cancel a receive of an aborted view from a peer
 * that is alive: a receive matched to an eager message whose remaining
 * fragments that peer may still send (ucp_request_cancel cannot stop it,
 * and closing our endpoint does not close the peer's connection to us).
 * Progressing the worker again could write into memory the caller frees
 * once the collective has failed. So the worker is never progressed again:
 * every communicator of the process fails now, and the context is released
 * (without progress) with the last of them. What else an abort can leave
 * does not stop it (gcx_tl_ucx_leftover_safe).
 */
static void gcx_tl_ucx_ctx_stop(gcx_tl_ctx_t *ctx)
{
    uint32_t id;

    gcx_warn("an aborted receive from a live peer could not be cancelled: "
             "the process's UCX worker stops; every communicator fails "
             "(destroy them all, then create new ones)");
    ctx->stopped = 1;
    for (id = 0; id < GCX_TL_MAX_COMM_IDS; ++id) {
        if (ctx->views[id] != NULL) {
            gcx_tl_ucx_orphan_all(ctx->views[id], GCX_ERR_TRANSPORT);
            gcx_tl_ucx_eager_cancel(ctx->views[id], -1, GCX_ERR_TRANSPORT);
        }
    }
}

/*
 * Whether a request an abort could not end may be left to UCX (orphaned:
 * its callback frees it whenever UCX ends it) while the worker goes on
 * serving the process's other communicators:
 * - a send: UCX only reads the caller's buffer, and its endpoint is
 *   closed, so nothing more goes out from it (a peer that already matched
 *   a rendezvous reads it itself, stopped worker or not);
 * - a receive from a peer that is gone (its process ended, or UCX lost the
 *   connection): what that peer had sent was taken by the progress calls
 *   of the abort, and nothing more can come;
 * - a receive from a live peer that has since closed its endpoint to this
 *   rank in an abort of its own (its purge notice came after the receive
 *   was posted: UCX purged what it was sending, and what it had sent
 *   before is taken by the progress calls that follow). That peer sends
 *   nothing more on any view that existed then (its closed endpoint fails
 *   them all there), and a later view's messages carry another
 *   communicator id, so no message the receive could match is still on
 *   its way.
 * What is left is a receive from a live peer that UCX matched and cannot
 * cancel, and which that peer may still be sending: it may still be
 * written into.
 */
static int gcx_tl_ucx_leftover_safe(const gcx_tl_ucx_t *ucx,
                                    const gcx_tl_req_t *req)
{
    const gcx_tl_ucx_ep_t *ep;

    if (!req->is_recv) {
        return 1;
    }
    if (req->peer < 0) {
        return 0; /* any source: matched to whom is not known */
    }
    ep = ucx->peers[req->peer];
    return ep == NULL || ep->lost || ep->peer_purges != req->peer_purges;
}

/* Whether every outstanding request of @p ucx may be left to UCX. */
static int gcx_tl_ucx_leftovers_safe(const gcx_tl_ucx_t *ucx)
{
    const gcx_tl_req_t *req;

    for (req = ucx->outstanding.next; req != &ucx->outstanding;
         req = req->next) {
        if (!gcx_tl_ucx_leftover_safe(ucx, req)) {
            return 0;
        }
    }
    return 1;
}

/* Requests of @p ucx that are still outstanding. */
static size_t gcx_tl_ucx_outstanding_count(const gcx_tl_ucx_t *ucx)
{
    const gcx_tl_req_t *req;
    size_t              n = 0;

    for (req = ucx->outstanding.next; req != &ucx->outstanding;
         req = req->next) {
        ++n;
    }
    return n;
}

/* Progresses @p ucx's worker until no request is outstanding, or until
 * @p deadline, or (with @p quiet > 0) until none completed for @p quiet
 * seconds. */
static void gcx_tl_ucx_abort_wait(gcx_tl_ucx_t *ucx, double deadline,
                                  double quiet)
{
    double last = gcx_time_now();
    size_t n    = gcx_tl_ucx_outstanding_count(ucx), before;

    while (n > 0) {
        double now = gcx_time_now();

        if (now >= deadline || (quiet > 0 && now - last >= quiet)) {
            return;
        }
        ucp_worker_progress(ucx->super.ctx->worker);
        before = n;
        n      = gcx_tl_ucx_outstanding_count(ucx);
        if (n < before) {
            last = gcx_time_now();
        }
    }
}

static void gcx_tl_ucx_abort(gcx_tl_t *tl)
{
    gcx_tl_ucx_t *ucx   = (gcx_tl_ucx_t *)tl;
    double        start = gcx_time_now(), deadline;
    gcx_tl_req_t *req, *next;
    int           unsafe = 0, i;
    char         *notify;

    ucx->aborted        = 1;
    tl->ctx->abort_seen = 1;
    /* eager receives are cancelled for good: only their copy writes */
    gcx_tl_ucx_eager_cancel(ucx, -1, GCX_ERR_CANCELED);
    if (tl->ctx->stopped) {
        gcx_tl_ucx_orphan_all(ucx, GCX_ERR_CANCELED);
        return;
    }
    /* receives not matched yet are cancelled (which may complete and
     * unlink them at once) */
    for (req = ucx->outstanding.next; req != &ucx->outstanding; req = next) {
        next = req->next;
        if (req->is_recv && req->impl != NULL) {
            ucp_request_cancel(tl->ctx->worker, req->impl);
        }
    }
    /* transfers with live peers usually end by themselves (sends the peer
     * matched, receives matched to a message the peer is still sending),
     * once those peers run: give them GCX_TL_UCX_ABORT_GRACE, as long as
     * they keep completing, before closing endpoints, which the peers would
     * see as a failure (a peer whose eager send to this rank is cut short
     * is left with a receive it cannot cancel) */
    gcx_tl_ucx_abort_wait(ucx, start + GCX_TL_UCX_ABORT_GRACE,
                          GCX_TL_UCX_ABORT_QUIET);
    /* what is left is a send, or a receive already matched: closing its
     * endpoint stops the peer from reading the buffer of a rendezvous (and
     * UCX then purges the requests of that endpoint). The other views
     * sharing those endpoints then see the peers failed. Each peer whose
     * endpoint closed is told (a purge notice), since a receive of its own
     * may be matched to what this rank was sending. */
    notify = calloc((size_t)tl->size, sizeof(*notify));
    while ((req = gcx_tl_ucx_open_req(ucx)) != NULL) {
        for (i = 0; notify != NULL && i < tl->size; ++i) {
            notify[i] |= req->peer < 0 || req->peer == i;
        }
        gcx_tl_ucx_kill_peer(ucx, req->peer); /* may unlink any request */
    }
    for (i = 0; notify != NULL && i < tl->size; ++i) {
        if (notify[i]) {
            gcx_tl_ucx_purge_notify(ucx, i);
        }
    }
    free(notify);
    /* what UCX still holds ends, or becomes safe to leave (its peer is
     * gone, or sent its purge notice: a peer runs its own abort when its
     * collective fails, within the moment it takes to see the failure) */
    deadline = gcx_time_now() + GCX_TL_UCX_ABORT_PURGE_WAIT;
    while (ucx->outstanding.next != &ucx->outstanding &&
           !gcx_tl_ucx_leftovers_safe(ucx) && gcx_time_now() < deadline) {
        ucp_worker_progress(tl->ctx->worker);
    }
    /* and takes what those peers had sent before (shared memory keeps
     * their order; a TCP socket's last bytes are read within a few calls) */
    for (i = 0; i < GCX_TL_UCX_ABORT_DRAIN; ++i) {
        ucp_worker_progress(tl->ctx->worker);
    }
    gcx_tl_ucx_abort_wait(ucx, gcx_time_now() + 0.05, 0);
    /* what UCX did not end: left to it when it cannot write into the
     * caller's memory, else the worker stops */
    for (req = ucx->outstanding.next; req != &ucx->outstanding; req = next) {
        next = req->next;
        if (!gcx_tl_ucx_leftover_safe(ucx, req)) {
            gcx_warn("aborted receive from rank %d of communicator %u "
                     "still matched to a message of that live peer after "
                     "%.2f s", req->peer, tl->comm_id,
                     gcx_time_now() - start);
            unsafe = 1;
        }
    }
    if (gcx_tl_ucx_orphan_all(ucx, GCX_ERR_CANCELED) > 0 && unsafe) {
        gcx_tl_ucx_ctx_stop(tl->ctx);
    }
}

/* Drops messages with tag comm field @p id that arrived unmatched. */
static void gcx_tl_ucx_drain(gcx_tl_ctx_t *ctx, uint32_t id, double deadline)
{
    const uint64_t tag = (uint64_t)id << 52;
    int            n;

    for (n = 0; n < GCX_TL_UCX_DRAIN_MAX; ++n) {
        ucp_request_param_t param = {0};
        ucp_tag_recv_info_t info;
        ucp_tag_message_h   msg;
        void               *buf;

        msg = ucp_tag_probe_nb(ctx->worker, tag, GCX_TL_TAG_COMM_MASK, 1,
                               &info);
        if (msg == NULL) {
            return;
        }
        buf = malloc(info.length > 0 ? info.length : 1);
        if (buf == NULL) {
            return;
        }
        param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype     = ucp_dt_make_contig(1);
        if (!gcx_tl_ucx_wait_until(ctx->worker,
                                   ucp_tag_msg_recv_nbx(ctx->worker, buf,
                                                        info.length, msg,
                                                        &param),
                                   deadline)) {
            /* a rendezvous its (dead or stuck) sender never completed:
             * UCX may still write into buf, and holds a request, so the
             * buffer is kept for good and the worker left to the exit */
            gcx_tl_ucx_abandoned_t *node =
                gcx_tl_ucx_abandoned_new(ctx, NULL, buf, NULL);

            if (node != NULL) {
                gcx_tl_ucx_abandoned_keep(node); /* reachable: not a leak */
            }
            ctx->leftover = 1;
            return;
        }
        free(buf);
    }
}

static int gcx_tl_ucx_fini(gcx_tl_t *tl, double seconds)
{
    gcx_tl_ucx_t *ucx      = (gcx_tl_ucx_t *)tl;
    gcx_tl_ctx_t *ctx      = tl->ctx;
    double        deadline = gcx_time_now() + seconds;
    int           reusable;

    if (!ucx->aborted && (ucx->outstanding.next != &ucx->outstanding ||
                          ucx->eager_posted.next != &ucx->eager_posted)) {
        gcx_tl_ucx_abort(tl);
    }
    ctx->views[tl->comm_id] = NULL; /* late active messages are dropped */
    gcx_tl_ucx_eager_purge(ctx, tl->comm_id);
    /* draining progresses the worker, which an abort rules out (see
     * gcx_tl_ucx_ep_put_all): the id's unmatched messages stay queued and the
     * id is never used again */
    reusable = !ctx->stopped && !ctx->abort_seen;
    if (reusable) {
        gcx_tl_ucx_drain(ctx, tl->comm_id, deadline);
        gcx_tl_ucx_drain(ctx, tl->comm_id | 1u, deadline);
    }
    gcx_tl_ucx_ep_put_all(ctx, ucx->peers, tl->size, deadline);
    free(ucx->peers);
    free(ucx);
    return reusable;
}

const gcx_tl_ops_t gcx_tl_ucx_ops = {
    .name         = "ucx",
    .ctx_create   = gcx_tl_ucx_ctx_create,
    .ctx_destroy  = gcx_tl_ucx_ctx_destroy,
    .address      = gcx_tl_ucx_address,
    .ctx_progress = gcx_tl_ucx_ctx_progress,
    .ctx_arm      = gcx_tl_ucx_ctx_arm,
    .ctx_network_only = gcx_tl_ucx_ctx_network_only,
    .init         = gcx_tl_ucx_init,
    .connect      = gcx_tl_ucx_connect,
    .derive       = gcx_tl_ucx_derive,
    .send         = gcx_tl_ucx_send,
    .recv         = gcx_tl_ucx_recv,
    .send_eager   = gcx_tl_ucx_send_eager,
    .recv_eager   = gcx_tl_ucx_recv_eager,
    .am_handler   = gcx_tl_ucx_am_handler,
    .am_send      = gcx_tl_ucx_am_send,
    .am_send_eager = gcx_tl_ucx_am_send_eager,
    .am_recv      = gcx_tl_ucx_am_recv,
    .am_hold      = gcx_tl_ucx_am_hold,
    .am_release   = gcx_tl_ucx_am_release,
    .abandon      = gcx_tl_ucx_abandon,
    .progress     = gcx_tl_ucx_progress,
    .peer_failed  = gcx_tl_ucx_peer_failed,
    .peer_lost    = gcx_tl_ucx_peer_lost,
    .deaf         = gcx_tl_ucx_deaf,
    .ctx_ctl_handler = gcx_tl_ucx_ctx_ctl_handler,
    .ctl_send     = gcx_tl_ucx_ctl_send,
    .revive       = gcx_tl_ucx_revive,
    .abort        = gcx_tl_ucx_abort,
    .fini         = gcx_tl_ucx_fini,
};
