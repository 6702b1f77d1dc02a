/*
 * ucx_ctl.c - what the UCX transport keeps working through a failure:
 * control messages, and knowing at once that a peer on this host died.
 *
 * Purge notices (gcx_tl_ucx_purge_notify in ucx_tl.c, counted here): a
 * rank whose abort closed its endpoint to this one says so, and every
 * endpoint to its worker counts it; an abort here then knows that a
 * receive matched to what that rank was sending will never be written to
 * again, and leaves it to UCX instead of stopping the worker.
 *
 * Control messages (ctl_send in ucx_tl.c, the receive side here) carry a
 * revoke notice or a shrink agreement's rounds (src/core/shrink.c). They go
 * as eager active messages on GCX_TL_UCX_CTL_AM_ID, outside the views' ids,
 * with the sending communicator's id as the header, so a failed
 * (aborted) communicator still sends and hears them; the context hands
 * each one to the core's one handler, which finds the communicator.
 *
 * Liveness: UCX 1.13 has no shared-memory transport with its peer error
 * mode, so on one host a dead peer used to be found only by GCX_TIMEOUT.
 * Every rank publishes its pid, pid namespace and start time in its host
 * identity (ucx_int.h); for a peer on this host in the same pid namespace
 * the endpoint keeps a pidfd (pidfd_open, Linux 5.3), which becomes
 * readable when that process ends (a zombie that is not reaped yet
 * included), checked against the start time so a reused pid is never taken
 * for the rank. ctx_progress polls them, one poll() for all, at most every
 * GCX_TL_UCX_LIVENESS_PERIOD; a dead peer's endpoint is then lost and
 * every request with it ends with GCX_ERR_PEER (gcx_tl_ucx_fail_ep): the
 * collective fails as fast as with a peer on another host. It is a
 * perfect detector for what it covers (an ended process, never a slow
 * one); ranks in another pid namespace (containers) are still found by
 * GCX_TIMEOUT.
 *
 * Deafness: UCX's shared-memory transport queues a process's incoming
 * messages in one FIFO that every peer on the host writes into: a writer
 * claims a slot (an atomic increment of the head), fills it, then marks
 * it ready, and the reader takes slots in order. A peer killed between
 * the claim and the mark leaves a slot that is never ready: the reader
 * hears nobody on this host again (UCX 1.13; seen in the shrink tests,
 * whose victim dies while another of its threads sends). Only the death
 * of a peer on this host can do that, so each time the liveness poll
 * finds one, the process sends itself a message over that path from a
 * worker of its own (a probe, gcx_tl_ucx_hears_itself) and counts itself
 * deaf if it does not arrive: the shrink then leaves at once
 * (GCX_ERR_TRANSPORT, telling the others) instead of taking every silent
 * live peer for dead and deciding alone, and an error names the cause.
 *
 * Cost: a clock read per progress call while peers are watched and one
 * poll() over their pidfds per period (a few microseconds per
 * millisecond); one fd per peer on this host; 24 bytes per published
 * address. A control message is one malloc'd copy, freed once sent. A
 * probe, after a death on this host only: a UCP worker created and
 * destroyed (about a millisecond), nothing per peer.
 */
#include "ucx_int.h"
#include "base/log.h"
#include "base/time.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* seconds between two polls of the watched processes */
#define GCX_TL_UCX_LIVENESS_PERIOD 0.001

/* most progress calls that take what a dead peer left in shared memory */
#define GCX_TL_UCX_DEAD_DRAIN 256

/* How long a deafness probe waits for its message before the process
 * counts itself deaf: at least GCX_TL_UCX_PROBE_WAIT seconds and at least
 * GCX_TL_UCX_PROBE_CPU seconds of this thread's own CPU time spent polling,
 * at most GCX_TL_UCX_PROBE_WAIT_MAX seconds. The message is written and
 * read by this thread, so what delays it is a live peer stopped inside a
 * write (a claimed slot it has not marked yet) and this thread's own share
 * of the CPU to take what queued before it -- both only a matter of CPU on
 * a crowded host: with 255 busy ranks on 2 CPUs a thread gets ~8 ms of CPU
 * per second, and a fixed 1 s made 18 of 255 live ranks count themselves
 * deaf after one SIGKILL (a real deafness is one receiver per interrupted
 * write). On an idle host the two bounds coincide (1 s); a deaf process
 * under load reports later, a live one as soon as its message comes. */
#define GCX_TL_UCX_PROBE_WAIT     1.0
#define GCX_TL_UCX_PROBE_CPU      0.2
#define GCX_TL_UCX_PROBE_WAIT_MAX 30.0

/* ---- control messages ----------------------------------------------------- */

static ucs_status_t gcx_tl_ucx_ctl_cb(void *arg, const void *header,
                                      size_t header_length, void *data,
                                      size_t length,
                                      const ucp_am_recv_param_t *param)
{
    gcx_tl_ctx_t      *ctx = arg;
    gcx_tl_am_prefix_t prefix;

    if (header_length != sizeof(prefix) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        gcx_warn("dropped a control message that is not one (header %zu "
                 "bytes)", header_length);
        return UCS_OK;
    }
    memcpy(&prefix, header, sizeof(prefix)); /* may be unaligned */
    if (ctx->ctl_handler != NULL) {
        ctx->ctl_handler(ctx->ctl_arg, prefix.comm_id & ~1u, data, length);
    }
    return UCS_OK;
}

/* A purge notice (ucx_tl.c, gcx_tl_ucx_purge_notify): every endpoint to
 * that peer's worker counts it, so an abort of any view here knows that
 * what the peer was sending before it will not go on. */
static ucs_status_t gcx_tl_ucx_purge_cb(void *arg, const void *header,
                                        size_t header_length, void *data,
                                        size_t length,
                                        const ucp_am_recv_param_t *param)
{
    gcx_tl_ctx_t          *ctx = arg;
    gcx_tl_ucx_purge_t     notice;
    const gcx_tl_ucx_t    *view;
    const gcx_tl_ucx_ep_t *from;
    gcx_tl_ucx_ep_t       *ep;

    (void)data;
    (void)length;
    if (header_length != sizeof(notice) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        gcx_warn("dropped a purge notice that is not one (header %zu "
                 "bytes)", header_length);
        return UCS_OK;
    }
    memcpy(&notice, header, sizeof(notice)); /* may be unaligned */
    view = ctx->views[notice.comm_id % GCX_TL_MAX_COMM_IDS];
    if (view == NULL || view->super.comm_id != notice.comm_id ||
        notice.rank < 0 || notice.rank >= view->super.size ||
        (from = view->peers[notice.rank]) == NULL) {
        return UCS_OK; /* the communicator is gone here: nothing waits */
    }
    for (ep = ctx->eps; ep != NULL; ep = ep->next) {
        if (gcx_tl_ucx_ep_reaches(ep, from->address, from->address_len)) {
            ++ep->peer_purges;
        }
    }
    gcx_debug("rank %d of communicator %u closed its endpoint to this rank "
              "in an abort", notice.rank, notice.comm_id);
    return UCS_OK;
}

static ucs_status_t gcx_tl_ucx_probe_cb(void *arg, const void *header,
                                        size_t header_length, void *data,
                                        size_t length,
                                        const ucp_am_recv_param_t *param)
{
    gcx_tl_ctx_t *ctx = arg;
    uint64_t      number;

    (void)header;
    (void)header_length;
    if (length == sizeof(number) &&
        !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        memcpy(&number, data, sizeof(number));
        ctx->probe_heard = number;
    }
    return UCS_OK;
}

gcx_status_t gcx_tl_ucx_ctl_init(gcx_tl_ctx_t *ctx)
{
    static const struct {
        unsigned               id;
        ucp_am_recv_callback_t cb;
        const char            *what;
    } handlers[] = {
        {GCX_TL_UCX_CTL_AM_ID, gcx_tl_ucx_ctl_cb, "control"},
        {GCX_TL_UCX_PURGE_AM_ID, gcx_tl_ucx_purge_cb, "purge"},
        {GCX_TL_UCX_PROBE_AM_ID, gcx_tl_ucx_probe_cb, "probe"},
    };
    ucp_am_handler_param_t params = {0};
    ucs_status_t           st;
    size_t                 i;

    params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                        UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                        UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG;
    params.flags      = UCP_AM_FLAG_WHOLE_MSG;
    params.arg        = ctx;
    for (i = 0; i < sizeof(handlers) / sizeof(handlers[0]); ++i) {
        params.id = handlers[i].id;
        params.cb = handlers[i].cb;
        st        = ucp_worker_set_am_recv_handler(ctx->worker, &params);
        if (st != UCS_OK) {
            gcx_error("ucp_worker_set_am_recv_handler(%s) failed: %s",
                      handlers[i].what, ucs_status_string(st));
            return GCX_ERR_TRANSPORT;
        }
    }
    return GCX_OK;
}

void gcx_tl_ucx_ctx_ctl_handler(gcx_tl_ctx_t *ctx,
                                gcx_tl_ctl_handler_t handler, void *arg)
{
    ctx->ctl_handler = handler;
    ctx->ctl_arg     = arg;
}

/* ---- liveness of peers on this host ---------------------------------------- */

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), 0 if unknown. */
static uint64_t gcx_tl_ucx_start_time(const char *path)
{
    char  buf[1024];
    FILE *f = fopen(path, "r");
    char *p;
    int   field;
    size_t n;

    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command name may hold anything */
    if (p == NULL) {
        return 0;
    }
    /* ") S ppid ...": field 3 is the state, right after ") " */
    for (field = 2; field < 22 && p != NULL; ++field) {
        p = strchr(p + 1, ' ');
    }
    return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

static uint64_t gcx_tl_ucx_ns_inode(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

void gcx_tl_ucx_host_pid(gcx_tl_ucx_host_t *host)
{
    host->pid   = (uint32_t)getpid();
    host->pidns = gcx_tl_ucx_ns_inode("/proc/self/ns/pid");
    host->start = gcx_tl_ucx_start_time("/proc/self/stat");
}

void gcx_tl_ucx_ep_watch(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep,
                         const void *blob, size_t len)
{
    gcx_tl_ucx_host_t peer, self;
    char              path[64];
    int               fd;

    if (ep->pidfd >= 0 || len < sizeof(peer)) {
        return;
    }
    memcpy(&peer, blob, sizeof(peer)); /* the OOB buffer may be unaligned */
    memcpy(&self, ctx->blob, sizeof(self));
    if (peer.pid == 0 || peer.pid == self.pid || peer.pidns == 0 ||
        peer.pidns != self.pidns || peer.start == 0) {
        return; /* another pid namespace: GCX_TIMEOUT finds it */
    }
#ifdef SYS_pidfd_open
    fd = (int)syscall(SYS_pidfd_open, (pid_t)peer.pid, 0);
#else
    fd    = -1;
    errno = ENOSYS;
#endif
    if (fd < 0) {
        gcx_debug("no pidfd for the peer process %u (%s): a death is found "
                  "by GCX_TIMEOUT", peer.pid, strerror(errno));
        return;
    }
    /* the pid is the rank's only if it started when the rank did (read
     * after pidfd_open: the fd then holds that very process) */
    snprintf(path, sizeof(path), "/proc/%u/stat", peer.pid);
    if (gcx_tl_ucx_start_time(path) != peer.start) {
        gcx_debug("peer process %u is not the one that published its "
                  "address", peer.pid);
        close(fd);
        return;
    }
    ep->pidfd = fd;
    ++ctx->watched;
}

void gcx_tl_ucx_ep_unwatch(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep)
{
    if (ep->pidfd >= 0) {
        close(ep->pidfd);
        ep->pidfd = -1;
        --ctx->watched;
    }
}

/* Whether a message from a worker of this process's own to its worker
 * arrives (over shared memory, as from a peer on this host) within the
 * probe's wait (GCX_TL_UCX_PROBE_*); 1 also when the probe cannot be
 * made. */
static int gcx_tl_ucx_hears_itself(gcx_tl_ctx_t *ctx)
{
    ucp_worker_params_t wparams = {0};
    ucp_ep_params_t     eparams = {0};
    ucp_request_param_t param   = {0};
    ucp_worker_h        probe;
    ucp_ep_h            ep;
    ucs_status_ptr_t    send;
    double              start, cpu_start, now;
    int                 heard;

    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_worker_create(ctx->context, &wparams, &probe) != UCS_OK) {
        return 1;
    }
    eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address    = ctx->address;
    if (ucp_ep_create(probe, &eparams, &ep) != UCS_OK) {
        ucp_worker_destroy(probe);
        return 1;
    }
    ++ctx->probe_sent; /* the payload: lives in ctx past the send */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_AM_SEND_FLAG_EAGER;
    send = ucp_am_send_nbx(ep, GCX_TL_UCX_PROBE_AM_ID, NULL, 0,
                           &ctx->probe_sent, sizeof(ctx->probe_sent), &param);
    start     = gcx_time_now();
    cpu_start = gcx_time_thread_cpu();
    while (!UCS_PTR_IS_ERR(send) && ctx->probe_heard != ctx->probe_sent) {
        now = gcx_time_now();
        if (now - start >= GCX_TL_UCX_PROBE_WAIT_MAX ||
            (now - start >= GCX_TL_UCX_PROBE_WAIT &&
             gcx_time_thread_cpu() - cpu_start >= GCX_TL_UCX_PROBE_CPU)) {
            break;
        }
        ucp_worker_progress(probe);
        ucp_worker_progress(ctx->worker);
    }
    heard = UCS_PTR_IS_ERR(send) || ctx->probe_heard == ctx->probe_sent;
    /* FORCE: a send stuck on a full queue is purged, not flushed */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    (void)gcx_tl_ucx_wait_until(probe, ucp_ep_close_nbx(ep, &param),
                                gcx_time_now() + GCX_TL_UCX_PROBE_WAIT);
    if (UCS_PTR_IS_PTR(send)) {
        ucp_request_free(send);
    }
    ucp_worker_destroy(probe);
    return heard;
}

/* The process behind @p ep ended. What it sent before may still sit in
 * shared memory (a rank that finished its part of a collective and left
 * is no failure): progress takes that first, then the rest fails. */
static void gcx_tl_ucx_ep_dead(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep)
{
    int k;

    for (k = 0; k < GCX_TL_UCX_DEAD_DRAIN &&
                ucp_worker_progress(ctx->worker) != 0;
         ++k) {
    }
    gcx_debug("a peer process on this host ended: its transfers fail with "
              "GCX_ERR_PEER");
    ep->lost = ep->failed = 1;
    gcx_tl_ucx_fail_ep(ctx, ep);
}

void gcx_tl_ucx_liveness(gcx_tl_ctx_t *ctx)
{
    struct pollfd    pfds[64];
    gcx_tl_ucx_ep_t *eps[64], *ep;
    double           now = gcx_time_now();
    int              n, i, died = 0;

    if (now < ctx->liveness_next) {
        return;
    }
    ctx->liveness_next = now + GCX_TL_UCX_LIVENESS_PERIOD;
    ep = ctx->eps;
    while (ep != NULL) {
        /* the watched endpoints, 64 per poll() */
        for (n = 0; ep != NULL && n < 64; ep = ep->next) {
            if (ep->pidfd >= 0 && !ep->lost) {
                pfds[n].fd      = ep->pidfd;
                pfds[n].events  = POLLIN;
                pfds[n].revents = 0;
                eps[n++]        = ep;
            }
        }
        if (n == 0 || poll(pfds, (nfds_t)n, 0) <= 0) {
            continue;
        }
        for (i = 0; i < n; ++i) {
            if (pfds[i].revents != 0) {
                gcx_tl_ucx_ep_dead(ctx, eps[i]);
                died = 1;
            }
        }
    }
    /* a peer on this host killed inside a write into this process's
     * queue leaves it stopped (file comment): only then can it happen */
    if (died && !ctx->deaf && !ctx->tcp_only && !gcx_tl_ucx_hears_itself(ctx)) {
        ctx->deaf = 1;
        gcx_error("this process no longer hears its peers on this host: a "
                  "peer process was killed while writing into its "
                  "shared-memory receive queue, which stays stopped (UCX "
                  "%s); shrinks leave with GCX_ERR_TRANSPORT, collectives "
                  "with peers on this host end by GCX_TIMEOUT: restart "
                  "this rank", ucp_get_version_string());
    }
}
