/*
 * ucx_tl.c - the UCX transport (default): tagged messages over UCP.
 *
 * One UCP context and worker per communicator; endpoints to every rank,
 * created from worker addresses exchanged over the OOB. Messages use
 * ucp_tag_send_nbx / ucp_tag_recv_nbx directly on the caller's buffers: UCX
 * picks eager (small) or rendezvous (large: cma/knem single copy on a host,
 * zero-copy RDMA on InfiniBand), so gcx itself never stages user data.
 *
 * Peer failure: with GCX_UCX_ERR_MODE=peer, endpoints use
 * UCP_ERR_HANDLING_MODE_PEER and the error callback marks the peer failed,
 * so collectives waiting on it fail with GCX_ERR_PEER at once. UCX 1.13 has
 * no shared-memory transport that supports that mode, so the default is
 * none (shm + cma single-copy on a host) and a dead peer is caught by the
 * GCX_TIMEOUT deadline that the task queue enforces. Every posted request is on an outstanding list so abort() can
 * cancel receives, force-close endpoints (which completes sends) and wait
 * until nothing can write into a user buffer any more.
 *
 * Active messages (UCP_FEATURE_AM): one UCP handler per registered id
 * forwards to the gcx handler, which takes the payload (ucp_am_recv_data_nbx
 * for rendezvous, straight into the caller's buffer; a memcpy for eager) or
 * leaves it: the wrapper then returns UCS_OK, which drops a rendezvous
 * payload unread and completes its sender (UCX 1.13 semantics).
 * The memory of an abandoned operation is released only when it ends with
 * success: a rendezvous peer reads or writes it without us (cma, RDMA),
 * even after an error or after the worker is destroyed, so otherwise it is
 * kept until the process exits (flush_close() does not wait for them:
 * ucp_worker_flush does not wait for a rendezvous peer to pull).
 *
 * Cost per message: one UCP call and, when it does not complete at once, a
 * UCP request taken from UCX's own pool; no allocation in gcx.
 */
#include "transport/transport.h"
#include "core/log.h"
#include "core/time.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

typedef struct gcx_tl_ucx gcx_tl_ucx_t;

/*
 * An abandoned operation's release callback, run when the operation ends
 * with success. An operation that ends with an error, or never ends (the
 * worker is destroyed first), does not prove that the peer is done with its
 * memory: a rendezvous peer reads (get: cma, RDMA) or writes (put) it
 * without this side taking part, from the request it already holds, even
 * after this worker is gone. Such memory is kept, never released, for the
 * life of the process (on gcx_tl_ucx_kept, so it stays reachable).
 */
typedef struct gcx_tl_ucx_abandoned {
    void (*release)(void *arg);
    void  *arg;
    struct gcx_tl_ucx_abandoned *prev, *next;
} gcx_tl_ucx_abandoned_t;

static pthread_mutex_t         gcx_tl_ucx_kept_lock = PTHREAD_MUTEX_INITIALIZER;
static gcx_tl_ucx_abandoned_t *gcx_tl_ucx_kept; /* singly linked by next */

typedef struct gcx_tl_ucx_am {
    gcx_tl_ucx_t       *ucx;
    gcx_tl_am_handler_t handler; /* NULL: id free */
    void               *arg;
} gcx_tl_ucx_am_t;

typedef struct gcx_tl_ucx_peer {
    gcx_tl_ucx_t *ucx;
    ucp_ep_h      ep;
    int           rank;
    int           failed;
} gcx_tl_ucx_peer_t;

/*
 * Lives inside every UCP request (ucp_params.request_size), so completion
 * reaches the gcx request through it and abort() can orphan a request that
 * UCX cannot finish: the callback then frees it without touching the
 * (possibly freed) task memory that held the gcx_tl_req_t.
 */
typedef struct gcx_tl_ucx_priv {
    gcx_tl_req_t *owner;    /* NULL until attached, and once orphaned */
    int           early;    /* completed before it was attached */
    int           orphaned; /* abandoned by abort(): just free it */
    int           user_freed; /* abandon(): ucp_request_free done already */
    gcx_tl_ucx_abandoned_t *abandoned; /* abandon(): release at the end */
    ucs_status_t  status;
    size_t        length;
    uint64_t      tag;
} gcx_tl_ucx_priv_t;

struct gcx_tl_ucx {
    gcx_tl_t           super;
    ucp_context_h      context;
    ucp_worker_h       worker;
    ucp_address_t     *address;
    size_t             address_len;
    gcx_tl_ucx_peer_t *peers;
    int                err_mode_peer;
    int                aborted;
    gcx_tl_req_t       outstanding; /* list head (sentinel) */
    gcx_tl_ucx_am_t    am[GCX_TL_AM_MAX_ID];
    gcx_tl_ucx_abandoned_t abandoned; /* list head (sentinel) */
};

static void gcx_tl_ucx_abandoned_run(gcx_tl_ucx_abandoned_t *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    if (node->release != NULL) {
        node->release(node->arg);
    }
    free(node);
}

/* The operation did not end well: keep its memory for good. */
static void gcx_tl_ucx_abandoned_keep(gcx_tl_ucx_abandoned_t *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev       = NULL;
    pthread_mutex_lock(&gcx_tl_ucx_kept_lock);
    node->next      = gcx_tl_ucx_kept;
    gcx_tl_ucx_kept = node;
    pthread_mutex_unlock(&gcx_tl_ucx_kept_lock);
}

static gcx_status_t gcx_tl_ucx_status(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return GCX_OK;
    case UCS_INPROGRESS:
        return GCX_INPROGRESS;
    case UCS_ERR_CANCELED:
        return GCX_ERR_CANCELED;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return GCX_ERR_MISMATCH;
    case UCS_ERR_NO_MEMORY:
        return GCX_ERR_NOMEM;
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_IO_ERROR:       /* e.g. cma reading a process that died */
    case UCS_ERR_SHMEM_SEGMENT:
        return GCX_ERR_PEER;
    default:
        return GCX_ERR_TRANSPORT;
    }
}

static void gcx_tl_ucx_track(gcx_tl_ucx_t *ucx, gcx_tl_req_t *req)
{
    gcx_tl_req_t *head = &ucx->outstanding;

    req->next       = head->next;
    req->prev       = head;
    head->next->prev = req;
    head->next      = req;
}

static void gcx_tl_ucx_untrack(gcx_tl_req_t *req)
{
    req->prev->next = req->next;
    req->next->prev = req->prev;
    req->prev = req->next = NULL;
}

static void gcx_tl_ucx_request_init(void *request)
{
    gcx_tl_ucx_priv_t *priv = request;

    priv->owner    = NULL;
    priv->early    = 0;
    priv->orphaned = 0;
    priv->abandoned  = NULL;
    priv->user_freed = 0;
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
    } else if (priv->orphaned) {
        if (priv->abandoned != NULL && status == UCS_OK) {
            gcx_tl_ucx_abandoned_run(priv->abandoned);
        } else if (priv->abandoned != NULL) {
            /* cancelled (endpoint closed) or failed: the peer may still
             * read or write the memory through the rendezvous */
            gcx_tl_ucx_abandoned_keep(priv->abandoned);
        }
        if (priv->user_freed) {
            gcx_tl_ucx_request_init(priv); /* UCX puts it back itself */
        } else {
            gcx_tl_ucx_release(priv);
        }
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

static void gcx_tl_ucx_ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    gcx_tl_ucx_peer_t *peer = arg;

    (void)ep;
    if (!peer->failed) {
        gcx_warn("connection to rank %d lost: %s", peer->rank,
                 ucs_status_string(status));
    }
    peer->failed = 1;
}

static gcx_status_t gcx_tl_ucx_init(const gcx_tl_params_t *params,
                                    gcx_tl_t **tl_p)
{
    ucp_params_t        ucp_params    = {0};
    ucp_worker_params_t worker_params = {0};
    ucp_config_t       *ucp_config;
    gcx_tl_ucx_t       *ucx;
    ucs_status_t        st;
    gcx_status_t        status;

    ucx = calloc(1, sizeof(*ucx));
    if (ucx == NULL) {
        return GCX_ERR_NOMEM;
    }
    ucx->super.ops          = &gcx_tl_ucx_ops;
    ucx->super.rank         = params->rank;
    ucx->super.size         = params->size;
    ucx->err_mode_peer      = params->peer_failure_detection;
    ucx->outstanding.next   = &ucx->outstanding;
    ucx->outstanding.prev   = &ucx->outstanding;
    ucx->abandoned.next     = &ucx->abandoned;
    ucx->abandoned.prev     = &ucx->abandoned;
    ucx->peers = calloc((size_t)params->size, sizeof(*ucx->peers));
    if (ucx->peers == NULL) {
        status = GCX_ERR_NOMEM;
        goto err_free;
    }

    st = ucp_config_read(NULL, NULL, &ucp_config);
    if (st != UCS_OK) {
        gcx_error("ucp_config_read failed: %s", ucs_status_string(st));
        status = GCX_ERR_TRANSPORT;
        goto err_free_peers;
    }
    ucp_params.field_mask        = UCP_PARAM_FIELD_FEATURES |
                                   UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                                   UCP_PARAM_FIELD_REQUEST_SIZE |
                                   UCP_PARAM_FIELD_REQUEST_INIT;
    ucp_params.request_size      = sizeof(gcx_tl_ucx_priv_t);
    ucp_params.request_init      = gcx_tl_ucx_request_init;
    ucp_params.features          = UCP_FEATURE_TAG | UCP_FEATURE_AM;
    ucp_params.estimated_num_eps = (size_t)params->size;
    st = ucp_init(&ucp_params, ucp_config, &ucx->context);
    ucp_config_release(ucp_config);
    if (st != UCS_OK) {
        gcx_error("ucp_init failed: %s", ucs_status_string(st));
        status = GCX_ERR_TRANSPORT;
        goto err_free_peers;
    }

    worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(ucx->context, &worker_params, &ucx->worker);
    if (st != UCS_OK) {
        gcx_error("ucp_worker_create failed: %s", ucs_status_string(st));
        status = GCX_ERR_TRANSPORT;
        goto err_cleanup_context;
    }
    st = ucp_worker_get_address(ucx->worker, &ucx->address,
                                &ucx->address_len);
    if (st != UCS_OK) {
        gcx_error("ucp_worker_get_address failed: %s", ucs_status_string(st));
        status = GCX_ERR_TRANSPORT;
        goto err_destroy_worker;
    }
    *tl_p = &ucx->super;
    return GCX_OK;

err_destroy_worker:
    ucp_worker_destroy(ucx->worker);
err_cleanup_context:
    ucp_cleanup(ucx->context);
err_free_peers:
    free(ucx->peers);
err_free:
    free(ucx);
    return status;
}

static gcx_status_t gcx_tl_ucx_address(gcx_tl_t *tl, const void **addr_p,
                                       size_t *len_p)
{
    gcx_tl_ucx_t *ucx = (gcx_tl_ucx_t *)tl;

    *addr_p = ucx->address;
    *len_p  = ucx->address_len;
    return GCX_OK;
}

static gcx_status_t gcx_tl_ucx_connect(gcx_tl_t *tl, const void *const *addrs,
                                       const size_t *lens)
{
    gcx_tl_ucx_t *ucx = (gcx_tl_ucx_t *)tl;
    int           i;

    (void)lens;
    for (i = 0; i < tl->size; ++i) {
        ucp_ep_params_t ep_params = {0};
        ucs_status_t    st;

        ucx->peers[i].ucx  = ucx;
        ucx->peers[i].rank = i;
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                               UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.address    = addrs[i];
        ep_params.err_mode   = ucx->err_mode_peer ?
                                   UCP_ERR_HANDLING_MODE_PEER :
                                   UCP_ERR_HANDLING_MODE_NONE;
        ep_params.err_handler.cb  = gcx_tl_ucx_ep_error_cb;
        ep_params.err_handler.arg = &ucx->peers[i];
        st = ucp_ep_create(ucx->worker, &ep_params, &ucx->peers[i].ep);
        if (st != UCS_OK) {
            gcx_error("ucp_ep_create to rank %d failed: %s", i,
                      ucs_status_string(st));
            return GCX_ERR_TRANSPORT;
        }
    }
    return GCX_OK;
}

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

static gcx_status_t gcx_tl_ucx_send(gcx_tl_t *tl, int peer, uint64_t tag,
                                    const gcx_iov_t *iov, int iovcnt,
                                    gcx_tl_req_t *req)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    ucs_status_ptr_t    sp;
    void               *buffer;
    size_t              count;

    req->status  = GCX_INPROGRESS;
    req->is_recv = 0;
    req->impl    = NULL;
    if (ucx->peers[peer].failed || ucx->peers[peer].ep == NULL) {
        req->status = GCX_ERR_PEER;
        return GCX_ERR_PEER;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.send      = gcx_tl_ucx_send_cb;
    gcx_tl_ucx_fill_param(&param, iov, iovcnt, &buffer, &count);
    sp = ucp_tag_send_nbx(ucx->peers[peer].ep, buffer, count, tag, &param);
    return gcx_tl_ucx_attach(ucx, req, sp);
}

static gcx_status_t gcx_tl_ucx_recv(gcx_tl_t *tl, int peer, uint64_t tag,
                                    uint64_t tag_mask, const gcx_iov_t *iov,
                                    int iovcnt, gcx_tl_req_t *req)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    ucs_status_ptr_t    sp;
    void               *buffer;
    size_t              count;

    (void)peer; /* the source is part of the tag */
    req->status  = GCX_INPROGRESS;
    req->is_recv = 1;
    req->impl    = NULL;
    req->length  = 0;
    /* UCX 1.13 leaves recv_info unset on immediate completion, so the
     * length and tag always come through the callback */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv      = gcx_tl_ucx_recv_cb;
    gcx_tl_ucx_fill_param(&param, iov, iovcnt, &buffer, &count);
    sp = ucp_tag_recv_nbx(ucx->worker, buffer, count, tag, tag_mask, &param);
    return gcx_tl_ucx_attach(ucx, req, sp);
}

/* ---- active messages ----------------------------------------------------- */

static ucs_status_t gcx_tl_ucx_am_cb(void *arg, const void *header,
                                     size_t header_length, void *data,
                                     size_t length,
                                     const ucp_am_recv_param_t *param)
{
    gcx_tl_ucx_am_t *am  = arg;
    gcx_tl_am_msg_t  msg = {
        .header        = header,
        .header_length = header_length,
        .length        = length,
        .rndv          = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0,
        .data          = data,
    };

    if (am->handler != NULL && !am->ucx->aborted) {
        am->handler(am->arg, &msg);
    }
    /* taken or not: UCS_OK. A rendezvous payload that was not pulled is
     * dropped here and its sender completes. */
    return UCS_OK;
}

static gcx_status_t gcx_tl_ucx_am_handler(gcx_tl_t *tl, unsigned id,
                                          gcx_tl_am_handler_t handler,
                                          void *arg)
{
    gcx_tl_ucx_t          *ucx    = (gcx_tl_ucx_t *)tl;
    ucp_am_handler_param_t params = {0};
    ucs_status_t           st;

    if (id >= GCX_TL_AM_MAX_ID ||
        (handler != NULL && ucx->am[id].handler != NULL)) {
        return GCX_ERR_INVALID;
    }
    ucx->am[id].ucx     = ucx;
    ucx->am[id].handler = handler;
    ucx->am[id].arg     = arg;
    params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                        UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG;
    params.id         = id;
    /* an unregistered id keeps the wrapper: late messages are dropped (and
     * their senders completed) instead of reaching UCX with no handler */
    params.cb         = gcx_tl_ucx_am_cb;
    params.arg        = &ucx->am[id];
    st = ucp_worker_set_am_recv_handler(ucx->worker, &params);
    if (st != UCS_OK) {
        gcx_error("ucp_worker_set_am_recv_handler(%u) failed: %s", id,
                  ucs_status_string(st));
        ucx->am[id].handler = NULL;
        return GCX_ERR_TRANSPORT;
    }
    return GCX_OK;
}

static gcx_status_t gcx_tl_ucx_am_send(gcx_tl_t *tl, int peer, unsigned id,
                                       const void *header,
                                       size_t header_length,
                                       const gcx_iov_t *iov, int iovcnt,
                                       gcx_tl_req_t *req)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    ucs_status_ptr_t    sp;
    void               *buffer = NULL;
    size_t              count  = 0;

    req->status  = GCX_INPROGRESS;
    req->is_recv = 0;
    req->impl    = NULL;
    if (ucx->aborted || ucx->peers[peer].failed ||
        ucx->peers[peer].ep == NULL) {
        req->status = GCX_ERR_PEER;
        return GCX_ERR_PEER;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.send      = gcx_tl_ucx_send_cb;
    if (iovcnt > 0) {
        gcx_tl_ucx_fill_param(&param, iov, iovcnt, &buffer, &count);
    }
    sp = ucp_am_send_nbx(ucx->peers[peer].ep, id, header, header_length,
                         buffer, count, &param);
    return gcx_tl_ucx_attach(ucx, req, sp);
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
    sp = ucp_am_recv_data_nbx(ucx->worker, msg->data, buffer, count, &param);
    if (sp == NULL) {
        req->length = total;
    }
    return gcx_tl_ucx_attach(ucx, req, sp);
}

static void gcx_tl_ucx_abandon(gcx_tl_t *tl, gcx_tl_req_t *req,
                               void (*release)(void *arg), void *arg)
{
    gcx_tl_ucx_t           *ucx  = (gcx_tl_ucx_t *)tl;
    gcx_tl_ucx_priv_t      *priv = req->impl;
    gcx_tl_ucx_abandoned_t *node;

    if (req->status != GCX_INPROGRESS || priv == NULL) {
        if (release != NULL) {
            release(arg);
        }
        return;
    }
    node = malloc(sizeof(*node));
    if (node == NULL) { /* keep the memory alive for good rather than risk it */
        gcx_warn("out of memory abandoning a request; its buffer is kept");
        release = NULL;
    } else {
        node->release         = release;
        node->arg             = arg;
        node->next            = ucx->abandoned.next;
        node->prev            = &ucx->abandoned;
        ucx->abandoned.next->prev = node;
        ucx->abandoned.next   = node;
    }
    priv->owner      = NULL;
    priv->orphaned   = 1;
    priv->abandoned  = node;
    priv->user_freed = 1;
    req->impl        = NULL;
    req->status      = GCX_ERR_CANCELED;
    gcx_tl_ucx_untrack(req);
    /* released now, so closing the endpoint or destroying the worker may
     * drop it; the callback still runs if it ends (then release() on
     * success), else the memory is kept (see gcx_tl_ucx_abandoned_t) */
    ucp_request_free(priv);
}

static int gcx_tl_ucx_progress(gcx_tl_t *tl)
{
    gcx_tl_ucx_t *ucx = (gcx_tl_ucx_t *)tl;

    return (int)ucp_worker_progress(ucx->worker);
}

static int gcx_tl_ucx_peer_failed(gcx_tl_t *tl, int peer)
{
    return ((gcx_tl_ucx_t *)tl)->peers[peer].failed;
}

/* Waits for a UCP request (flush or close) with a deadline; 1 if done. */
static int gcx_tl_ucx_wait_until(gcx_tl_ucx_t *ucx, ucs_status_ptr_t sp,
                                 double deadline)
{
    if (sp == NULL || UCS_PTR_IS_ERR(sp)) {
        return 1;
    }
    while (ucp_request_check_status(sp) == UCS_INPROGRESS) {
        ucp_worker_progress(ucx->worker);
        if (gcx_time_now() > deadline) {
            /* released, so destroying the worker may drop it (UCX asserts
             * that every request left then was released) */
            ucp_request_free(sp);
            return 0;
        }
    }
    ucp_request_free(sp);
    return 1;
}

static void gcx_tl_ucx_close_eps(gcx_tl_ucx_t *ucx, int force, double seconds)
{
    double deadline = gcx_time_now() + seconds;
    int    i;

    for (i = 0; i < ucx->super.size; ++i) {
        ucp_request_param_t param = {0};
        ucs_status_ptr_t    sp;

        if (ucx->peers[i].ep == NULL) {
            continue;
        }
        /* a failed endpoint may only be closed with FORCE */
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = (force || ucx->peers[i].failed) ?
                          UCP_EP_CLOSE_FLAG_FORCE : 0;
        sp = ucp_ep_close_nbx(ucx->peers[i].ep, &param);
        ucx->peers[i].ep = NULL;
        if (!gcx_tl_ucx_wait_until(ucx, sp, deadline)) {
            gcx_debug("closing the endpoint to rank %d did not finish", i);
        }
    }
}

static void gcx_tl_ucx_flush_close(gcx_tl_t *tl, double seconds)
{
    gcx_tl_ucx_t       *ucx   = (gcx_tl_ucx_t *)tl;
    ucp_request_param_t param = {0};
    double              deadline = gcx_time_now() + seconds;

    if (!gcx_tl_ucx_wait_until(ucx, ucp_worker_flush_nbx(ucx->worker, &param),
                               deadline)) {
        gcx_warn("flushing outstanding messages took over %.1f s; closing",
                 seconds);
        gcx_tl_ucx_close_eps(ucx, 1, 1.0);
        return;
    }
    gcx_tl_ucx_close_eps(ucx, 0, seconds);
}

static void gcx_tl_ucx_abort(gcx_tl_t *tl)
{
    gcx_tl_ucx_t *ucx      = (gcx_tl_ucx_t *)tl;
    double        deadline = gcx_time_now() + 0.3;
    gcx_tl_req_t *req, *next;

    ucx->aborted = 1;
    /* cancelling may complete (and unlink) the request at once */
    for (req = ucx->outstanding.next; req != &ucx->outstanding; req = next) {
        next = req->next;
        if (req->is_recv && req->impl != NULL) {
            ucp_request_cancel(ucx->worker, req->impl);
        }
    }
    gcx_tl_ucx_close_eps(ucx, 1, 0.2);
    while (ucx->outstanding.next != &ucx->outstanding &&
           gcx_time_now() < deadline) {
        ucp_worker_progress(ucx->worker);
    }
    /* what UCX cannot finish (a send whose peer died before pulling it) is
     * orphaned: its gcx request completes as cancelled now, and nothing of
     * it is touched again; the worker is never progressed after an abort */
    for (req = ucx->outstanding.next; req != &ucx->outstanding; req = next) {
        gcx_tl_ucx_priv_t *priv = req->impl;

        next           = req->next;
        priv->owner    = NULL;
        priv->orphaned = 1;
        req->impl      = NULL;
        req->status    = GCX_ERR_CANCELED;
        gcx_tl_ucx_untrack(req);
    }
}

static void gcx_tl_ucx_fini(gcx_tl_t *tl)
{
    gcx_tl_ucx_t *ucx = (gcx_tl_ucx_t *)tl;

    if (!ucx->aborted && ucx->outstanding.next != &ucx->outstanding) {
        gcx_tl_ucx_abort(tl);
    }
    gcx_tl_ucx_close_eps(ucx, 1, 0.5);
    ucp_worker_release_address(ucx->worker, ucx->address);
    ucp_worker_destroy(ucx->worker);
    /* abandoned operations that never ended: a peer may still pull (or
     * push) their memory from the rendezvous request it holds, with cma as
     * long as this process lives, so it is kept, never freed */
    while (ucx->abandoned.next != &ucx->abandoned) {
        gcx_tl_ucx_abandoned_keep(ucx->abandoned.next);
    }
    ucp_cleanup(ucx->context);
    free(ucx->peers);
    free(ucx);
}

const gcx_tl_ops_t gcx_tl_ucx_ops = {
    .name        = "ucx",
    .init        = gcx_tl_ucx_init,
    .address     = gcx_tl_ucx_address,
    .connect     = gcx_tl_ucx_connect,
    .send        = gcx_tl_ucx_send,
    .recv        = gcx_tl_ucx_recv,
    .am_handler  = gcx_tl_ucx_am_handler,
    .am_send     = gcx_tl_ucx_am_send,
    .am_recv     = gcx_tl_ucx_am_recv,
    .abandon     = gcx_tl_ucx_abandon,
    .progress    = gcx_tl_ucx_progress,
    .peer_failed = gcx_tl_ucx_peer_failed,
    .flush_close = gcx_tl_ucx_flush_close,
    .abort       = gcx_tl_ucx_abort,
    .fini        = gcx_tl_ucx_fini,
};
