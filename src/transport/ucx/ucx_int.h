/*
 * ucx_int.h - what the two halves of the UCX transport share: the process
 * context (ucx_context.c: UCP context, worker, endpoint cache, active-message
 * routing) and the communicator views (ucx_tl.c: tagged and active messages,
 * abort, release).
 */
#ifndef GCX_TRANSPORT_UCX_INT_H
#define GCX_TRANSPORT_UCX_INT_H

#include "transport/transport.h"

#include <ucp/api/ucp.h>
#include <string.h>

typedef struct gcx_tl_ucx gcx_tl_ucx_t;

/*
 * An abandoned operation's release callback, run when the operation ends
 * with success. An operation that ends with an error, or never ends (the
 * worker is destroyed first), does not prove that the peer is done with its
 * memory: a rendezvous peer reads (get: cma, RDMA) or writes (put) it
 * without this side taking part, from the request it already holds, even
 * after this worker is gone. Such memory is kept, never released, for the
 * life of the process (on a list, so it stays reachable).
 */
typedef struct gcx_tl_ucx_abandoned {
    void (*release)(void *arg);
    void  *arg;
    struct gcx_tl_ucx_ep *ep; /* a send's endpoint (NULL: unknown, or freed):
                                 releasing it waits for this, then FORCEs */
    struct gcx_tl_ucx_abandoned *prev, *next;
} gcx_tl_ucx_abandoned_t;

/*
 * An endpoint to one peer worker, shared by every view that reaches that
 * peer with the same error mode; the cache key is the peer's address.
 */
typedef struct gcx_tl_ucx_ep {
    ucp_ep_h              ep;
    void                 *address; /* the peer worker's address (key) */
    size_t                address_len;
    int                   err_mode_peer;
    int                   refcount;
    int                   failed; /* lost, or closed by an abort */
    int                   lost;   /* the peer is gone: UCX reported the
                                     connection lost, or (on this host) its
                                     process ended (ucx_ctl.c) */
    int                   pidfd;  /* the peer's process on this host
                                     (pidfd_open), or -1 */
    int                   closing; /* no view uses it: a peer's disconnect
                                      is the normal end, not news */
    unsigned              peer_purges; /* purge notices from the peer: it
                                          closed its endpoint to this rank
                                          in an abort, so nothing it was
                                          sending over it goes on
                                          (ucx_ctl.c) */
    struct gcx_tl_ucx_ep *next;   /* the context's list */
} gcx_tl_ucx_ep_t;

/* Whether @p ep reaches the worker whose address is @p address. */
static inline int gcx_tl_ucx_ep_reaches(const gcx_tl_ucx_ep_t *ep,
                                        const void *address,
                                        size_t address_len)
{
    return ep->address_len == address_len &&
           memcmp(ep->address, address, address_len) == 0;
}

typedef struct gcx_tl_ucx_am {
    gcx_tl_am_handler_t handler; /* NULL: id free */
    void               *arg;
} gcx_tl_ucx_am_t;

typedef struct gcx_tl_ucx_am_route {
    gcx_tl_ctx_t *ctx;
    unsigned      id;
} gcx_tl_ucx_am_route_t;

/*
 * Eager tagged messages (ucx_eager.c) travel as active messages on this
 * id, outside the views' ids; the header is the 64-bit tag.
 */
#define GCX_TL_UCX_EAGER_AM_ID GCX_TL_AM_MAX_ID

/* Control messages (ctl_send, ucx_ctl.c) travel as eager active messages
 * on this id; the header is the sending communicator's id. */
#define GCX_TL_UCX_CTL_AM_ID (GCX_TL_AM_MAX_ID + 1)

/* Purge notices (ucx_ctl.c) travel as eager active messages on this id;
 * the header is gcx_tl_ucx_purge_t. */
#define GCX_TL_UCX_PURGE_AM_ID (GCX_TL_AM_MAX_ID + 2)

/* A deafness probe (ucx_ctl.c) travels as an eager active message on this
 * id from a worker of the process's own to its worker; the payload is the
 * probe's number. */
#define GCX_TL_UCX_PROBE_AM_ID (GCX_TL_AM_MAX_ID + 3)

/* A purge notice: rank @c rank of communicator @c comm_id closed its
 * endpoint to the receiver in an abort. */
typedef struct gcx_tl_ucx_purge {
    uint32_t comm_id;
    int32_t  rank;
} gcx_tl_ucx_purge_t;

/* An eager message that arrived before its receive: UCX's persistent copy
 * of the payload, released with ucp_am_data_release once taken. */
typedef struct gcx_tl_ucx_staged {
    uint64_t                  tag;
    void                     *data;
    size_t                    length;
    struct gcx_tl_ucx_staged *prev, *next;
} gcx_tl_ucx_staged_t;

/* The process's transport context. */
struct gcx_tl_ctx {
    ucp_context_h          context;
    ucp_worker_h           worker;
    int                    tcp_only;   /* every UCX resource is tcp or self */
    int                    event_fd;   /* worker's wakeup fd, or -1 */
    int                    stopped;    /* never progressed again (abort) */
    struct gcx_tl_ctx     *kept_next;  /* left to the exit (ctx_destroy) */
    int                    abort_seen; /* a view aborted (endpoints may
                                           have been killed): teardown
                                           no longer progresses */
    int                    leftover;   /* a close or flush UCX did not
                                           finish: the worker is left to
                                           the exit */
    int                    orphans;    /* UCP requests orphaned or
                                           abandoned that UCX has not ended
                                           yet: while any is left, the
                                           worker is left to the exit (its
                                           pool would report them) */
    ucp_address_t         *address;
    size_t                 address_len;
    void                  *blob;     /* host identity + address (OOB) */
    size_t                 blob_len;
    gcx_tl_ucx_ep_t       *eps;
    unsigned               am_registered; /* bit i: UCP handler for id i */
    int                    am_held;  /* the running handler kept the payload
                                        (am_hold): UCS_INPROGRESS to UCX */
    gcx_tl_ucx_am_route_t  am_route[GCX_TL_AM_MAX_ID];
    gcx_tl_ucx_t          *views[GCX_TL_MAX_COMM_IDS]; /* by comm id */
    gcx_tl_ucx_abandoned_t abandoned; /* list head (sentinel) */
    gcx_tl_ucx_staged_t    staged;    /* eager messages not received yet,
                                         oldest first (sentinel) */
    uint64_t               eager_arrived; /* eager messages so far (tests,
                                             debugging) */
    gcx_tl_ctl_handler_t   ctl_handler; /* control messages (ucx_ctl.c) */
    void                  *ctl_arg;
    int                    watched;  /* endpoints with a pidfd */
    double                 liveness_next; /* next poll of the pidfds */
    int                    deaf;     /* its shared-memory receive queue
                                        stopped (ucx_ctl.c): peers on this
                                        host are not heard any more */
    uint64_t               probe_sent;  /* the last deafness probe's number */
    uint64_t               probe_heard; /* the last one that arrived */
};

/*
 * Lives inside every UCP request (ucp_params.request_size), so completion
 * reaches the gcx request through it and abort() can orphan a request that
 * UCX cannot finish: the callback then frees it without touching the
 * (possibly freed) task memory that held the gcx_tl_req_t.
 */
typedef struct gcx_tl_ucx_priv {
    gcx_tl_req_t *owner;    /* NULL until attached, and once orphaned */
    int           early;    /* completed before it was attached */
    gcx_tl_ctx_t *orphaned; /* set once nobody waits for it any more
                               (abort, a failed peer, abandon()): the
                               context that counts it in orphans; the
                               callback just frees it */
    gcx_tl_ucx_abandoned_t *abandoned; /* abandon(): release at the end */
    ucs_status_t  status;
    size_t        length;
    uint64_t      tag;
} gcx_tl_ucx_priv_t;

/* One communicator's view. */
struct gcx_tl_ucx {
    gcx_tl_t          super;
    gcx_tl_ucx_ep_t **peers;       /* by rank; shared */
    int               peer_failure; /* GCX_TL_PEER_FAILURE_* */
    int               aborted;
    gcx_tl_req_t      outstanding; /* list head (sentinel) */
    gcx_tl_req_t      eager_posted; /* recv_eager() requests waiting for
                                       their message (sentinel) */
    gcx_tl_ucx_am_t   am[GCX_TL_AM_MAX_ID];
};

gcx_status_t gcx_tl_ucx_status(ucs_status_t status);

/*
 * What a rank publishes over the OOB: the identity of its host, then its
 * UCP worker address. Two ranks are on one host when the kernel boot id and
 * the network namespace are the same; only then can shared memory and cma
 * join them, and only between hosts does the endpoint need (and afford)
 * UCX's peer failure mode (GCX_UCX_ERR_MODE=auto).
 */
typedef struct gcx_tl_ucx_host {
    uint32_t magic;        /* GCX_TL_UCX_HOST_MAGIC */
    uint32_t pid;          /* the rank's process (liveness, ucx_ctl.c) */
    uint64_t netns;        /* inode of /proc/self/ns/net, 0 if unknown */
    uint64_t pidns;        /* inode of /proc/self/ns/pid, 0 if unknown */
    uint64_t start;        /* the process's start time (/proc/self/stat
                              field 22): a reused pid is not the rank */
    char     boot_id[40];  /* /proc/sys/kernel/random/boot_id, or the
                              host name when that cannot be read */
} gcx_tl_ucx_host_t;

#define GCX_TL_UCX_HOST_MAGIC 0x67637848u /* "gcxH" */

/** Whether @p blob (another rank's published address) is on this host;
 *  @p ucp_addr_p, @p ucp_len_p: its UCP address. 0 or 1, or -1 when the
 *  blob is not a gcx UCX address. */
int gcx_tl_ucx_blob_parse(const gcx_tl_ctx_t *ctx, const void *blob,
                          size_t len, const void **ucp_addr_p,
                          size_t *ucp_len_p);

/** The endpoint to the worker at @p address: a cached one, or a new one. */
gcx_status_t gcx_tl_ucx_ep_get(gcx_tl_ctx_t *ctx, const void *address,
                               size_t address_len, int err_mode_peer,
                               gcx_tl_ucx_ep_t **ep_p);

/**
 * Drop one reference of each of the @p n endpoints of @p eps (NULL entries
 * are skipped; the array is overwritten). The endpoints no view uses any
 * more are flushed together until @p deadline and closed; one whose flush
 * did not end (a dead or stuck peer) is closed with FORCE, which purges its
 * requests. After an abort nothing is flushed or progressed (FORCE only).
 */
void gcx_tl_ucx_ep_put_all(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t **eps, int n,
                           double deadline);

/** Close an endpoint at once (abort); every view using it sees it failed. */
void gcx_tl_ucx_ep_kill(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep);

/** Make sure the context routes active-message id @p id to its views. */
gcx_status_t gcx_tl_ucx_am_route(gcx_tl_ctx_t *ctx, unsigned id);

/** Wait for a UCP request (flush, close) of @p worker until @p deadline,
 *  progressing it; the request is released either way; 1 if done. */
int gcx_tl_ucx_wait_until(ucp_worker_h worker, ucs_status_ptr_t sp,
                          double deadline);

void gcx_tl_ucx_request_init(void *request);
/** A new entry on the context's list of abandoned operations (NULL: out
 *  of memory); @p ep: a send's endpoint, or NULL. */
gcx_tl_ucx_abandoned_t *gcx_tl_ucx_abandoned_new(gcx_tl_ctx_t *ctx,
                                                 void (*release)(void *arg),
                                                 void *arg,
                                                 gcx_tl_ucx_ep_t *ep);
void gcx_tl_ucx_abandoned_run(gcx_tl_ucx_abandoned_t *node);
void gcx_tl_ucx_abandoned_keep(gcx_tl_ucx_abandoned_t *node);

/* ---- eager tagged messages (ucx_eager.c) ---- */

/** Route GCX_TL_UCX_EAGER_AM_ID to the eager receive path (ctx_create). */
gcx_status_t gcx_tl_ucx_eager_init(gcx_tl_ctx_t *ctx);

/** Release every staged message (the context goes away). */
void gcx_tl_ucx_eager_fini(gcx_tl_ctx_t *ctx);

/** Post a receive of an eager message (the recv_eager op). */
gcx_status_t gcx_tl_ucx_recv_eager(gcx_tl_t *tl, int peer, uint64_t tag,
                                   const gcx_iov_t *iov, int iovcnt,
                                   gcx_tl_req_t *req);

/** Complete every waiting recv_eager() of @p ucx from @p peer (-1: from
 *  any) with @p status: nothing is written into their buffers afterwards. */
void gcx_tl_ucx_eager_cancel(gcx_tl_ucx_t *ucx, int peer, gcx_status_t status);

/** Drop the staged messages of communicator id @p comm_id (both its
 *  collective and its point-to-point tag ids). */
void gcx_tl_ucx_eager_purge(gcx_tl_ctx_t *ctx, uint32_t comm_id);

/* ---- control messages and liveness (ucx_ctl.c) ---- */

/** Route GCX_TL_UCX_CTL_AM_ID to the context's control handler and
 *  GCX_TL_UCX_PURGE_AM_ID to the purge notices' counter. */
gcx_status_t gcx_tl_ucx_ctl_init(gcx_tl_ctx_t *ctx);

/** The ctx_ctl_handler op. */
void gcx_tl_ucx_ctx_ctl_handler(gcx_tl_ctx_t *ctx,
                                gcx_tl_ctl_handler_t handler, void *arg);

/** This process's pid, pid namespace and start time into @p host. */
void gcx_tl_ucx_host_pid(gcx_tl_ucx_host_t *host);

/** Watch the process behind @p ep when @p blob (its published address)
 *  says it is on this host, in this pid namespace (no-op otherwise, or
 *  when the endpoint is watched already). */
void gcx_tl_ucx_ep_watch(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep,
                         const void *blob, size_t len);

/** Stop watching (the endpoint is freed). */
void gcx_tl_ucx_ep_unwatch(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep);

/** Poll the watched processes when it is time; a dead one's endpoint is
 *  lost and every request with it ends with GCX_ERR_PEER. */
void gcx_tl_ucx_liveness(gcx_tl_ctx_t *ctx);

/** Ends every request of every view with the lost endpoint @p ep. */
void gcx_tl_ucx_fail_ep(gcx_tl_ctx_t *ctx, gcx_tl_ucx_ep_t *ep);

gcx_status_t gcx_tl_ucx_ctx_create(gcx_tl_ctx_t **ctx_p);
void         gcx_tl_ucx_ctx_destroy(gcx_tl_ctx_t *ctx);
gcx_status_t gcx_tl_ucx_address(gcx_tl_ctx_t *ctx, const void **addr_p,
                                size_t *len_p);
int          gcx_tl_ucx_ctx_progress(gcx_tl_ctx_t *ctx);
int          gcx_tl_ucx_ctx_arm(gcx_tl_ctx_t *ctx);
int          gcx_tl_ucx_ctx_network_only(gcx_tl_ctx_t *ctx);

#endif
