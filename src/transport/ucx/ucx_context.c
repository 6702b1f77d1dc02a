/*
 * ucx_context.c - the process's UCX context: one UCP context and one worker
 * shared by every communicator, a cache of endpoints keyed by the peer
 * worker's address, and the routing of active messages to communicators.
 *
 * Why one: a UCP context per communicator cost a ucp_init (~10 ms, device
 * discovery) and a worker with its own sockets and shared-memory segments
 * per communicator, and a process waiting on one communicator did not
 * progress the others (a rendezvous acknowledgement owed on another
 * communicator never went out). With one worker, tags carry the
 * communicator id (transport.h), so a progress call on any communicator
 * moves every transfer of the process, and a new communicator whose peers
 * are already connected costs no connection at all.
 *
 * Endpoints are reference counted by the views that use them; the last
 * view's release flushes the endpoints it lets go all at once, for a bounded
 * time (a dead peer's flush never ends), then closes them. An endpoint is
 * keyed by (peer address, error mode): peer-mode endpoints cannot use shared
 * memory in UCX 1.13, so a communicator that asks for it gets its own. By
 * default (GCX_UCX_ERR_MODE=auto) peer mode is used for peers on other
 * hosts only: each rank publishes its host identity (boot id, network
 * namespace) in front of its worker address. Cost: one 56-byte header per
 * published address; a dead peer costs a destroy at most its grace. A failed endpoint (lost peer, or closed by an abort) is never handed
 * to a new view; views holding it fail their transfers to that peer.
 *
 * Active messages: UCP dispatches on the message id only, so the context
 * registers one UCP handler per id in use and routes each message to the
 * view whose id the header's first word carries (gcx_tl_am_prefix_t);
 * a message for a view that is gone is dropped (its sender completes).
 *
 * Not thread-safe by itself: the worker runs in UCS_THREAD_MODE_SERIALIZED
 * (more than one thread calls it, never two at once) and the core
 * serializes every call with its context lock.
 */
#include "ucx_int.h"
#include "base/log.h"
#include "base/time.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* seconds a close waits for UCX once the endpoint was flushed (or FORCEd) */
#define GCX_TL_UCX_CLOSE_WAIT 0.1

/* kept for good, reachable from here: memory of abandoned operations that
 * did not end well, and contexts whose worker is left to the process exit
 * (after an abort, gcx_tl_ucx_ctx_destroy) */
static pthread_mutex_t         gcx_tl_ucx_kept_lock = PTHREAD_MUTEX_INITIALIZER;
static gcx_tl_ucx_abandoned_t *gcx_tl_ucx_kept; /* singly linked by next */
static gcx_tl_ctx_t           *gcx_tl_ucx_kept_ctxs; /* by kept_next */

gcx_status_t gcx_tl_ucx_status(ucs_status_t status)
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

void gcx_tl_ucx_request_init(void *request)
{
    gcx_tl_ucx_priv_t *priv = request;

    priv->owner      = NULL;
    priv->early      = 0;
    priv->orphaned   = NULL;
    priv->abandoned  = NULL;
}

gcx_tl_ucx_abandoned_t *gcx_tl_ucx_abandoned_new(gcx_tl_ctx_t *ctx,
                                                 void (*release)(void *arg),
                                                 void *arg,
                                                 gcx_tl_ucx_ep_t *ep)
{
    gcx_tl_ucx_abandoned_t *node = malloc(sizeof(*node));

    if (node == NULL) {
        return NULL;
    }
    node->release             = release;
    node->arg                 = arg;
    node->ep                  = ep;
    node->next                = ctx->abandoned.next;
    node->prev                = &ctx->abandoned;
    ctx->abandoned.next->prev = node;
    ctx->abandoned.next       = node;
    return node;
}

void gcx_tl_ucx_abandoned_run(gcx_tl_ucx_abandoned_t *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    if (node->release != NULL) {
        node->release(node->arg);
    }
    free(node);
}

/* The operation did not end well: keep its memory for good. */
void gcx_tl_ucx_abandoned_keep(gcx_tl_ucx_abandoned_t *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev       = NULL;
    pthread_mutex_lock(&gcx_tl_ucx_kept_lock);
    node->next      = gcx_tl_ucx_kept;
    gcx_tl_ucx_kept = node;
    pthread_mutex_unlock(&gcx_tl_ucx_kept_lock);
}

int gcx_tl_ucx_wait_until(ucp_worker_h worker, ucs_status_ptr_t sp,
                          double deadline)
{
    if (sp == NULL || UCS_PTR_IS_ERR(sp)) {
        return 1;
    }
    while (ucp_request_check_status(sp) == UCS_INPROGRESS) {
        if (gcx_time_now() >= deadline) {
            /* released, so destroying the worker may drop it (UCX asserts
             * that every request left then was released) */
            ucp_request_free(sp);
            return 0;
        }
        ucp_worker_progress(worker);
    }
    ucp_request_free(sp);
    return 1;
}

/* ---- endpoints ------------------------------------------------------------ */

/* UCX reports a connection that ended. Not a warning by itself: at the end
 * of a job that went well the ranks leave at different moments, so a rank
 * still tearing down, or about to, sees its peers' connections close. What
 * matters is an operation that needed the peer: that one fails with
 * GCX_ERR_PEER and its communicator says so at error level. */
static void gcx_tl_ucx_ep_error_cb(void *arg, ucp_ep_h uep, ucs_status_t st)
{
    gcx_tl_ucx_ep_t *ep = arg;

    (void)uep;
    if (ep->closing) {
        gcx_debug("a peer closed its side while this one was closing: %s",
                  ucs_status_string(st));
    } else if (!ep->failed) {
        gcx_info("connection to a peer lost: %s", ucs_status_string(st));
    }
    if (!ep->closing && !ep->failed) {
        ep->lost = 1; /* not the echo of this side's own close (an abort) */
    }
    ep->failed = 1;
}

gcx_status_t gcx_tl_ucx_ep_get(gcx_tl_ctx_t *ctx, const void *address,
                               size_t address_len, int err_mode_peer,
                               gcx_tl_ucx_ep_t **ep_p)
{
    ucp_ep_params_t  params = {0};
    gcx_tl_ucx_ep_t *ep, *other;
    ucs_status_t     st;

    for (ep = ctx->eps; ep != NULL; ep = ep->next) {
        if (!ep->failed && ep->err_mode_peer == err_mode_peer &&
            gcx_tl_ucx_ep_reaches(ep, address, address_len)) {
            ++ep->refcount;
            *ep_p = ep;
            return GCX_OK;
        }
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL || (ep->address = malloc(address_len)) == NULL) {
        free(ep);
        return GCX_ERR_NOMEM;
    }
    memcpy(ep->address, address, address_len);
    ep->pidfd         = -1;
    ep->address_len   = address_len;
    ep->err_mode_peer = err_mode_peer;
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address    = address;
    params.err_mode   = err_mode_peer ? UCP_ERR_HANDLING_MODE_PEER :
                                        UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb  = gcx_tl_ucx_ep_error_cb;
    params.err_handler.arg = ep;
    st = ucp_ep_create(ctx->worker, &params, &ep->ep);
    if (st != UCS_OK) {
        gcx_error("ucp_ep_create failed: %s", ucs_status_string(st));
        free(ep->address);
        free(ep);
        return GCX_ERR_TRANSPORT;
    }
    /* purge notices count per peer worker (ucx_ctl.c): a new endpoint to
     * a worker that sent some goes on from their count */
    for (other = ctx->eps; other != NULL; other = other->next) {
        if (gcx_tl_ucx_ep_reaches(other, address, address_len) &&
            other->peer_purges > ep->peer_purges) {
            ep->peer_purges = other->peer_purges;
        }
    }
    ep->refcount = 1;
    ep->next     = ctx->eps;
    ctx->eps     = ep;
    *ep_p        = ep;
    return GCX_OK;
}

/* Closes @p ep; 1 when UCX finished the close by @p deadline. */
static int gcx_tl_ucx_ep_close(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep,
                               int force, double deadline)
{
    ucp_request_param_t param = {0};
    int                 done  = 1;

    if (ep->ep == NULL) {
        return 1;
    }
    if (ctx->stopped) {
        /* closing would progress the worker; ucp_worker_destroy releases
         * the endpoint without delivering anything */
        ep->ep = NULL;
        return 1;
    }
    /* a failed endpoint may only be closed with FORCE */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = (force || ep->failed) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    if (!gcx_tl_ucx_wait_until(ctx->worker, ucp_ep_close_nbx(ep->ep, &param),
                               deadline)) {
        gcx_debug("closing an endpoint did not finish in time");
        done = 0;
    }
    ep->ep = NULL;
    return done;
}

void gcx_tl_ucx_ep_kill(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep)
{
    ep->failed = 1;
    gcx_tl_ucx_ep_close(ctx, ep, 1, gcx_time_now() + 0.2);
}

/* Whether an abandoned send to @p ep is still in flight. */
static int gcx_tl_ucx_ep_has_abandoned(gcx_tl_ctx_t *ctx,
                                       const gcx_tl_ucx_ep_t *ep)
{
    const gcx_tl_ucx_abandoned_t *node;

    for (node = ctx->abandoned.next; node != &ctx->abandoned;
         node = node->next) {
        if (node->ep == ep) {
            return 1;
        }
    }
    return 0;
}

/* Unlinks @p ep from the context's list and frees it (closed already). */
static void gcx_tl_ucx_ep_free(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep)
{
    gcx_tl_ucx_ep_t       **pp;
    gcx_tl_ucx_abandoned_t *node;

    for (node = ctx->abandoned.next; node != &ctx->abandoned;
         node = node->next) {
        if (node->ep == ep) {
            node->ep = NULL;
        }
    }

    for (pp = &ctx->eps; *pp != ep; pp = &(*pp)->next) {
    }
    *pp = ep->next;
    gcx_tl_ucx_ep_unwatch(ctx, ep);
    free(ep->address);
    free(ep);
}

void gcx_tl_ucx_ep_put_all(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t **eps, int n,
                           double deadline)
{
    ucs_status_ptr_t *flush;
    int               i, pending;

    /* the endpoints no view uses any more; the others are left out */
    for (i = 0; i < n; ++i) {
        if (eps[i] != NULL && --eps[i]->refcount > 0) {
            eps[i] = NULL;
        } else if (eps[i] != NULL) {
            eps[i]->closing = 1;
        }
    }
    if (ctx->abort_seen || ctx->stopped) {
        /* after an abort, teardown does not progress the worker and does
         * not flush (a flush would push what the abort gave up): UCX 1.13's
         * TCP transport can be left with a freed endpoint in its event set
         * then (a call through a stale pointer in the next progress: 1 in 4
         * runs of Failure.OutOfStepWithoutChecks-tcp-p3); FORCE purges the
         * endpoint's requests without delivering */
        for (i = 0; i < n; ++i) {
            if (eps[i] != NULL) {
                gcx_tl_ucx_ep_close(ctx, eps[i], 1, 0);
                gcx_tl_ucx_ep_free(ctx, eps[i]);
            }
        }
        return;
    }
    /* flush them all at once, and let the peers take what abandoned
     * operations still offer them (a rendezvous they pull), until the
     * deadline: what was sent reaches the live peers */
    flush = calloc(n > 0 ? (size_t)n : 1, sizeof(*flush));
    for (i = 0; flush != NULL && i < n; ++i) {
        ucp_request_param_t param = {0};

        if (eps[i] != NULL && eps[i]->ep != NULL && !eps[i]->failed) {
            flush[i] = ucp_ep_flush_nbx(eps[i]->ep, &param);
        }
    }
    for (;;) {
        pending = 0;
        for (i = 0; flush != NULL && i < n; ++i) {
            pending |= (flush[i] != NULL && !UCS_PTR_IS_ERR(flush[i]) &&
                        ucp_request_check_status(flush[i]) ==
                            UCS_INPROGRESS) ||
                       (eps[i] != NULL &&
                        gcx_tl_ucx_ep_has_abandoned(ctx, eps[i]));
        }
        if (!pending || gcx_time_now() >= deadline) {
            break;
        }
        ucp_worker_progress(ctx->worker);
    }
    /* a flush that did not end waits on a peer that is dead or stuck (an
     * active message it never takes, a rendezvous it never pulls): closing
     * with FORCE purges those requests (their memory stays kept, see
     * gcx_tl_ucx_abandoned_t), so none is left in UCX's pool */
    for (i = 0; i < n; ++i) {
        int stuck, force;

        if (eps[i] == NULL) {
            continue;
        }
        stuck = (flush != NULL && flush[i] != NULL &&
                 !UCS_PTR_IS_ERR(flush[i]) &&
                 ucp_request_check_status(flush[i]) == UCS_INPROGRESS) ||
                gcx_tl_ucx_ep_has_abandoned(ctx, eps[i]);
        /* FORCE purges an endpoint's requests only in UCX's peer error
         * mode; in mode none it would only reset a live peer's connection
         * (fatal to it over TCP), so that close is left running */
        force = (stuck || flush == NULL) && eps[i]->err_mode_peer;
        if (stuck) {
            gcx_debug("a peer did not take what was sent to it before the "
                      "communicator was destroyed: its endpoint is closed "
                      "%s", force ? "with FORCE" : "without waiting");
        }
        if (!gcx_tl_ucx_ep_close(ctx, eps[i], force,
                                 stuck && !force ? 0 :
                                 gcx_time_now() + GCX_TL_UCX_CLOSE_WAIT)) {
            ctx->leftover = 1;
        }
        if (flush != NULL && flush[i] != NULL && !UCS_PTR_IS_ERR(flush[i])) {
            if (ucp_request_check_status(flush[i]) == UCS_INPROGRESS) {
                ctx->leftover = 1;
            }
            ucp_request_free(flush[i]); /* done, or purged by the close */
        }
        gcx_tl_ucx_ep_free(ctx, eps[i]);
    }
    free(flush);
}

/* ---- active-message routing --------------------------------------------- */

static ucs_status_t gcx_tl_ucx_am_cb(void *arg, const void *header,
                                     size_t header_length, void *data,
                                     size_t length,
                                     const ucp_am_recv_param_t *param)
{
    gcx_tl_ucx_am_route_t *route = arg;
    gcx_tl_ucx_t          *view;
    gcx_tl_am_prefix_t     prefix;
    gcx_tl_am_msg_t        msg = {
        .header        = header,
        .header_length = header_length,
        .length        = length,
        .rndv          = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0,
        .in_place      = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0,
        .data          = data,
    };

    if (header_length < sizeof(prefix)) {
        return UCS_OK;
    }
    memcpy(&prefix, header, sizeof(prefix)); /* may be unaligned */
    view = route->ctx->views[prefix.comm_id % GCX_TL_MAX_COMM_IDS];
    route->ctx->am_held = 0;
    if (view != NULL && !view->aborted &&
        view->am[route->id].handler != NULL) {
        view->am[route->id].handler(view->am[route->id].arg, &msg);
    }
    if (route->ctx->am_held) { /* am_hold: the descriptor outlives us */
        route->ctx->am_held = 0;
        return UCS_INPROGRESS;
    }
    /* taken or not: UCS_OK. A rendezvous payload that was not pulled is
     * dropped here and its sender completes. */
    return UCS_OK;
}

gcx_status_t gcx_tl_ucx_am_route(gcx_tl_ctx_t *ctx, unsigned id)
{
    ucp_am_handler_param_t params = {0};
    ucs_status_t           st;

    if (ctx->am_registered & (1u << id)) {
        return GCX_OK;
    }
    ctx->am_route[id].ctx = ctx;
    ctx->am_route[id].id  = id;
    /* PERSISTENT_DATA: an eager payload UCX holds in a buffer of its own
     * (a message assembled from fragments, a transport descriptor) comes
     * with UCP_AM_RECV_ATTR_FLAG_DATA and may be kept (am_hold, in_place);
     * one that is not kept is released when the handler returns UCS_OK */
    params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                        UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                        UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG;
    params.id         = id;
    params.flags      = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
    params.cb         = gcx_tl_ucx_am_cb;
    params.arg        = &ctx->am_route[id];
    st = ucp_worker_set_am_recv_handler(ctx->worker, &params);
    if (st != UCS_OK) {
        gcx_error("ucp_worker_set_am_recv_handler(%u) failed: %s", id,
                  ucs_status_string(st));
        return GCX_ERR_TRANSPORT;
    }
    ctx->am_registered |= 1u << id;
    return GCX_OK;
}

/* ---- host identity ------------------------------------------------------- */

static void gcx_tl_ucx_host_self(gcx_tl_ucx_host_t *host)
{
    struct stat st;
    FILE       *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    memset(host, 0, sizeof(*host));
    host->magic = GCX_TL_UCX_HOST_MAGIC;
    if (f == NULL || fgets(host->boot_id, sizeof(host->boot_id), f) == NULL) {
        gethostname(host->boot_id, sizeof(host->boot_id) - 1);
    }
    if (f != NULL) {
        fclose(f);
    }
    host->boot_id[strcspn(host->boot_id, "\n")] = '\0';
    if (stat("/proc/self/ns/net", &st) == 0) {
        host->netns = (uint64_t)st.st_ino;
    }
    gcx_tl_ucx_host_pid(host);
}

int gcx_tl_ucx_blob_parse(const gcx_tl_ctx_t *ctx, const void *blob,
                          size_t len, const void **ucp_addr_p,
                          size_t *ucp_len_p)
{
    gcx_tl_ucx_host_t peer, self;

    if (len <= sizeof(peer)) {
        return -1;
    }
    memcpy(&peer, blob, sizeof(peer)); /* the OOB buffer may be unaligned */
    memcpy(&self, ctx->blob, sizeof(self));
    if (peer.magic != GCX_TL_UCX_HOST_MAGIC) {
        return -1;
    }
    *ucp_addr_p = (const char *)blob + sizeof(peer);
    *ucp_len_p  = len - sizeof(peer);
    return peer.netns == self.netns &&
           strncmp(peer.boot_id, self.boot_id, sizeof(peer.boot_id)) == 0;
}

/* ---- the context ------------------------------------------------------------ */

/* Whether every resource of the UCP context is tcp or self: no shared
 * memory, no RDMA. UCX 1.13 offers no query of its resources but the
 * printed summary ("resource N : md M dev D flags -- tl/device" lines). */
static int gcx_tl_ucx_tcp_only(ucp_context_h context)
{
    char  *text = NULL, *line, *save = NULL;
    size_t len  = 0;
    FILE  *mem  = open_memstream(&text, &len);
    int    tcp = 0, other = 0;

    if (mem == NULL) {
        return 0;
    }
    ucp_context_print_info(context, mem);
    fclose(mem);
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        const char *tl = strstr(line, "-- ");

        if (strstr(line, "resource") == NULL || tl == NULL) {
            continue;
        }
        tl += 3;
        if (!strncmp(tl, "tcp/", 4)) {
            tcp = 1;
        } else if (strncmp(tl, "self/", 5)) {
            other = 1;
        }
    }
    free(text);
    return tcp && !other;
}

/* TCP-only settings, each applied unless the user set its UCX_ variable:
 *  - TCP_SNDBUF 256K: enough socket buffer to keep a 1-10 Gbit/s link busy
 *    between two progress calls without the kernel's autotuning ramp.
 * Not RNDV_THRESH: eager messages above the segment size would skip the
 * rendezvous handshake (faster on a loaded link), but UCX 1.13 cannot
 * cancel a receive matched to a multi-fragment eager message (it completes
 * the request while later fragments still land in the buffer), so an
 * abort after a peer failure would let them write into memory the caller
 * freed. Rendezvous requests are purged with their endpoint. The handshake
 * cost is met in the algorithm choice instead (GCX_ALLREDUCE_LARGE_MSG_TCP).
 * Measured in perf/coll/RESULTS.md ("Dense allreduce on TCP links"). */
static const struct {
    /* as ucp_config_modify takes it, in the order tried: the key changed
     * between UCX versions. UCX 1.13 applies "SNDBUF" and accepts
     * "TCP_SNDBUF" here but drops it at ucp_worker_create ("invalid
     * configuration", no SO_SNDBUF set); UCX 1.22 rejects "SNDBUF" here
     * (UCS_ERR_INVALID_PARAM) and applies "TCP_SNDBUF" (both seen with
     * strace: setsockopt SO_SNDBUF 262144). The first key UCX accepts is
     * used. */
    const char *names[2];
    const char *env;   /* the user's variable that overrides us */
    const char *value;
} gcx_tl_ucx_tcp_settings[] = {
    {{"SNDBUF", "TCP_SNDBUF"}, "UCX_TCP_SNDBUF", "256K"},
};

static gcx_status_t gcx_tl_ucx_init_context(gcx_tl_ctx_t *ctx, int tcp_tuned)
{
    ucp_params_t  ucp_params = {0};
    ucp_config_t *ucp_config;
    ucs_status_t  st;
    size_t        i;

    st = ucp_config_read(NULL, NULL, &ucp_config);
    if (st != UCS_OK) {
        gcx_error("ucp_config_read failed: %s", ucs_status_string(st));
        return GCX_ERR_TRANSPORT;
    }
    for (i = 0; tcp_tuned && i < sizeof(gcx_tl_ucx_tcp_settings) /
                                     sizeof(gcx_tl_ucx_tcp_settings[0]); ++i) {
        if (getenv(gcx_tl_ucx_tcp_settings[i].env) == NULL) {
            size_t j;

            st = UCS_ERR_INVALID_PARAM;
            for (j = 0; j < 2 && st != UCS_OK; ++j) {
                st = ucp_config_modify(ucp_config,
                                       gcx_tl_ucx_tcp_settings[i].names[j],
                                       gcx_tl_ucx_tcp_settings[i].value);
            }
            if (st != UCS_OK) {
                /* never silent: the setting is lost for this process */
                gcx_warn("UCX %s rejected the configuration keys %s and %s "
                         "(=%s: %s): running without it; set %s=%s to apply "
                         "it", ucp_get_version_string(),
                         gcx_tl_ucx_tcp_settings[i].names[0],
                         gcx_tl_ucx_tcp_settings[i].names[1],
                         gcx_tl_ucx_tcp_settings[i].value,
                         ucs_status_string(st), gcx_tl_ucx_tcp_settings[i].env,
                         gcx_tl_ucx_tcp_settings[i].value);
            }
        }
    }
    ucp_params.field_mask   = UCP_PARAM_FIELD_FEATURES |
                              UCP_PARAM_FIELD_REQUEST_SIZE |
                              UCP_PARAM_FIELD_REQUEST_INIT;
    ucp_params.request_size = sizeof(gcx_tl_ucx_priv_t);
    ucp_params.request_init = gcx_tl_ucx_request_init;
    ucp_params.features     = UCP_FEATURE_TAG | UCP_FEATURE_AM |
                              (tcp_tuned ? UCP_FEATURE_WAKEUP : 0);
    st = ucp_init(&ucp_params, ucp_config, &ctx->context);
    ucp_config_release(ucp_config);
    if (st != UCS_OK) {
        gcx_error("ucp_init failed: %s", ucs_status_string(st));
        return GCX_ERR_TRANSPORT;
    }
    return GCX_OK;
}

gcx_status_t gcx_tl_ucx_ctx_create(gcx_tl_ctx_t **ctx_p)
{
    ucp_worker_params_t worker_params = {0};
    gcx_tl_ctx_t       *ctx;
    ucs_status_t        st;

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return GCX_ERR_NOMEM;
    }
    ctx->abandoned.next = &ctx->abandoned;
    ctx->abandoned.prev = &ctx->abandoned;
    ctx->event_fd       = -1;
    if (gcx_tl_ucx_init_context(ctx, 0) != GCX_OK) {
        goto err_free;
    }
    /* network-only: start again with the TCP settings (one more ucp_init,
     * ~10 ms, paid once per process) */
    ctx->tcp_only = gcx_tl_ucx_tcp_only(ctx->context);
    if (ctx->tcp_only) {
        ucp_cleanup(ctx->context);
        if (gcx_tl_ucx_init_context(ctx, 1) != GCX_OK) {
            goto err_free;
        }
    }
    /* SERIALIZED, not SINGLE: the application's threads and the progress
     * thread (core/progress_thread.c) all call into it, one at a time
     * (the core's context lock); SINGLE promises UCX one thread only.
     * MPICH's UCX worker is SERIALIZED for the same reason (its global
     * lock); UCX takes no lock of its own in either mode. */
    worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(ctx->context, &worker_params, &ctx->worker);
    if (st != UCS_OK) {
        gcx_error("ucp_worker_create failed: %s", ucs_status_string(st));
        goto err_cleanup;
    }
    if (gcx_tl_ucx_eager_init(ctx) != GCX_OK ||
        gcx_tl_ucx_ctl_init(ctx) != GCX_OK) {
        goto err_destroy_worker;
    }
    if (ctx->tcp_only &&
        ucp_worker_get_efd(ctx->worker, &ctx->event_fd) != UCS_OK) {
        ctx->event_fd = -1; /* waits poll, as on other transports */
    }
    if (ctx->tcp_only) {
        gcx_debug("UCX resources are tcp and self only: TCP settings "
                  "applied (TCP_SNDBUF 256K unless set), waits %s",
                  ctx->event_fd >= 0 ? "may sleep" : "poll");
    }
    st = ucp_worker_get_address(ctx->worker, &ctx->address,
                                &ctx->address_len);
    if (st != UCS_OK) {
        gcx_error("ucp_worker_get_address failed: %s", ucs_status_string(st));
        goto err_destroy_worker;
    }
    ctx->blob_len = sizeof(gcx_tl_ucx_host_t) + ctx->address_len;
    ctx->blob     = malloc(ctx->blob_len);
    if (ctx->blob == NULL) {
        ucp_worker_release_address(ctx->worker, ctx->address);
        goto err_destroy_worker;
    }
    gcx_tl_ucx_host_self(ctx->blob);
    memcpy((char *)ctx->blob + sizeof(gcx_tl_ucx_host_t), ctx->address,
           ctx->address_len);
    *ctx_p = ctx;
    return GCX_OK;

err_destroy_worker:
    ucp_worker_destroy(ctx->worker);
err_cleanup:
    ucp_cleanup(ctx->context);
err_free:
    free(ctx);
    return GCX_ERR_TRANSPORT;
}

void gcx_tl_ucx_ctx_destroy(gcx_tl_ctx_t *ctx)
{
    double deadline = gcx_time_now() + 0.5;

    gcx_tl_ucx_eager_fini(ctx); /* messages no communicator received */
    /* the views put every endpoint back; anything left is closed */
    while (ctx->eps != NULL) {
        gcx_tl_ucx_ep_t *ep = ctx->eps;

        ep->refcount = 1;
        gcx_tl_ucx_ep_put_all(ctx, &ep, 1, deadline);
    }
    if (ctx->abort_seen || ctx->leftover || ctx->orphans > 0) {
        /* the endpoints' FORCE closes were not progressed (see
         * gcx_tl_ucx_ep_put_all), and UCX 1.13 asserts in ucp_worker_destroy on
         * an endpoint whose requests are not purged yet; requests waiting
         * on a dead peer (mode none) can never be purged (orphans: those a
         * failure or abandon() handed to their callback, every abandoned
         * operation's memory among them), and destroying
         * the worker would print UCX's leak report for each: the worker
         * and its sockets are left to the process's exit, reachable from
         * here (so that leak checkers see memory kept on purpose, not
         * lost) */
        gcx_debug("after an abort or with requests a peer never took, the "
                  "UCX worker is left to the process exit");
        pthread_mutex_lock(&gcx_tl_ucx_kept_lock);
        ctx->kept_next       = gcx_tl_ucx_kept_ctxs;
        gcx_tl_ucx_kept_ctxs = ctx;
        pthread_mutex_unlock(&gcx_tl_ucx_kept_lock);
        return;
    }
    free(ctx->blob);
    ucp_worker_release_address(ctx->worker, ctx->address);
    ucp_worker_destroy(ctx->worker);
    ucp_cleanup(ctx->context);
    free(ctx);
}

gcx_status_t gcx_tl_ucx_address(gcx_tl_ctx_t *ctx, const void **addr_p,
                                size_t *len_p)
{
    *addr_p = ctx->blob;
    *len_p  = ctx->blob_len;
    return GCX_OK;
}

int gcx_tl_ucx_ctx_progress(gcx_tl_ctx_t *ctx)
{
    if (ctx->stopped) {
        return 0;
    }
    if (ctx->watched > 0) {
        gcx_tl_ucx_liveness(ctx);
    }
    return (int)ucp_worker_progress(ctx->worker);
}

int gcx_tl_ucx_ctx_network_only(gcx_tl_ctx_t *ctx)
{
    return ctx->tcp_only;
}

int gcx_tl_ucx_ctx_arm(gcx_tl_ctx_t *ctx)
{
    if (ctx->event_fd < 0 || ctx->stopped) {
        return -1;
    }
    /* UCS_ERR_BUSY: events are pending, progress instead of sleeping */
    return ucp_worker_arm(ctx->worker) == UCS_OK ? ctx->event_fd : -1;
}
