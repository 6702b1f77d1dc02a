/*
 * transport.h - the internal transport ops table.
 *
 * Collectives talk to the network only through this table, so UCX (default)
 * and raw verbs (a later addition) are interchangeable without touching
 * src/coll. The model is tagged point-to-point messaging with caller-owned
 * request structs:
 *
 *  - send/recv take an iov list that is used in place: large messages go
 *    by rendezvous straight from/to those buffers (zero copy), so the
 *    buffers must stay untouched until the request completes;
 *  - a request is a gcx_tl_req_t that the caller allocates; the transport
 *    sets status (GCX_INPROGRESS -> final) and, for receives, the length
 *    and tag that matched; the caller polls req->status after progress();
 *  - tags are 64 bits built by gcx_tl_tag() (comm id, collective sequence,
 *    step, source), so a message of an old collective is recognisable;
 *  - abort() cancels everything outstanding and returns only when no request
 *    can touch a user buffer any more; afterwards the transport is dead;
 *  - send_eager/recv_eager are the same model with the payload staged:
 *    it travels as one eager message and is copied out on arrival, which
 *    costs a copy per side but no rendezvous handshake (see the ops).
 *
 * Active messages (am_handler / am_send / am_recv / abandon) are the tool of
 * early-completion collectives (DESIGN §4): the receiver's handler sees a
 * small header first and decides where the payload goes -- pulled straight
 * into a user buffer (rendezvous: zero copy), copied (eager), or dropped
 * (not taken: the sender completes all the same, nothing lands anywhere).
 * A sender's request may outlive the operation that posted it; abandon()
 * hands it, and the buffer it reads, over to the transport, which releases
 * the buffer only once the operation ended with success (a rendezvous peer
 * may read or write it without this side, even after an error or after the
 * transport is finalized; then the buffer is kept for good).
 * Memory registration slots in here later without changing these entries.
 *
 * One transport context per process (gcx_tl_ctx_t: UCX's context and
 * worker, the endpoint cache), shared by every communicator; a transport
 * object (gcx_tl_t) is one communicator's view of it: a rank map onto
 * shared endpoints and the communicator id that every tag and every active
 * message header carries. Progressing any view progresses the context, so
 * one progress call moves every communicator's transfers. The context is
 * not thread-safe: the core serializes every call with its context lock.
 */
#ifndef GCX_TRANSPORT_H
#define GCX_TRANSPORT_H

#include <gcx/gcx.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gcx_tl     gcx_tl_t;
typedef struct gcx_tl_ctx gcx_tl_ctx_t;

/** One contiguous piece of a message. */
typedef struct gcx_iov {
    void  *buffer;
    size_t length;
} gcx_iov_t;

/** Caller-owned request; fields below the line are the transport's. */
typedef struct gcx_tl_req {
    gcx_status_t status; /**< GCX_INPROGRESS until done, then final status */
    size_t       length; /**< recv: bytes that arrived */
    uint64_t     tag;    /**< recv: the tag that matched */
    /* ---- transport private ---- */
    void              *impl;
    int                is_recv;
    int                peer; /* sends: the destination */
    struct gcx_tl_req *prev, *next;
    gcx_iov_t          eager_iov;    /* recv_eager: the one buffer, or
                                        (eager_iovcnt > 1) a copy of the list */
    int                eager_iovcnt;
    unsigned           peer_purges;  /* recv: its source's purge notices
                                        when it was posted */
} gcx_tl_req_t;

/** Largest active-message id + 1 (ids are per transport object). */
#define GCX_TL_AM_MAX_ID 32

/**
 * Every active-message header starts with the 32-bit id of the sending
 * communicator (written by the caller, checked by am_send): the shared
 * context routes a message to the view with that id.
 */
typedef struct gcx_tl_am_prefix {
    uint32_t comm_id;
} gcx_tl_am_prefix_t;

/**
 * An active message as its handler sees it; valid only during the handler.
 * The payload is taken with am_recv() inside the handler, or dropped by
 * returning without taking it, or kept for later with am_hold(): a
 * rendezvous payload, or an eager one that the transport can leave in its
 * own buffer (in_place). A copy of this struct then stands for it outside
 * the handler, header excepted: a rendezvous payload until am_recv() or
 * am_release(), an eager one read at data until am_release().
 */
typedef struct gcx_tl_am_msg {
    const void *header;        /**< sender's header; may be unaligned */
    size_t      header_length;
    size_t      length;        /**< payload bytes */
    int         rndv;          /**< payload not here yet: am_recv pulls it */
    int         in_place;      /**< eager payload am_hold() can keep where
                                    it is (no copy); 0: copy it or drop it */
    void       *data;          /**< eager: payload; rndv: opaque descriptor */
} gcx_tl_am_msg_t;

/**
 * Active-message handler, called from progress(). Must not block; may call
 * am_recv() once for this message, and post sends.
 */
typedef void (*gcx_tl_am_handler_t)(void *arg, const gcx_tl_am_msg_t *msg);

/**
 * Handler of control messages (ctx_ctl_handler, ctl_send): called from
 * progress with the id of the communicator that sent it (its even id) and
 * the message, valid only during the call. Must not block or call the
 * transport.
 */
typedef void (*gcx_tl_ctl_handler_t)(void *arg, uint32_t comm_id,
                                     const void *data, size_t length);

/*
 * Tag layout: | comm id 12 | sequence 20 | step 16 | source 16 |. A
 * communicator owns two ids: an even one for its collectives and the odd one
 * after it for its point-to-point messages, whose user tag fills the
 * sequence and step fields (GCX_TL_P2P_TAG_BITS). Above the user tag, the
 * odd id holds a member-only exchange (gcx_comm_create_group):
 * | comm id|1 12 | 1 | step 4 | tag 31 | source 16 |, a space no user tag
 * (0..2^31-1) reaches.
 */
#define GCX_TL_TAG_SRC_BITS   16
#define GCX_TL_TAG_STEP_BITS  16
#define GCX_TL_TAG_SEQ_BITS   20
#define GCX_TL_TAG_COMM_BITS  12
#define GCX_TL_TAG_MATCH_ALL  UINT64_MAX
#define GCX_TL_MAX_RANKS      (1 << GCX_TL_TAG_SRC_BITS)
#define GCX_TL_MAX_COMM_IDS   (1u << GCX_TL_TAG_COMM_BITS)
#define GCX_TL_P2P_TAG_BITS   31
#define GCX_TL_TAG_COMM_MASK  (((uint64_t)GCX_TL_MAX_COMM_IDS - 1) << 52)

static inline uint64_t gcx_tl_tag(uint32_t comm_id, uint32_t seq,
                                  uint32_t step, uint32_t src)
{
    const uint64_t seq_mask  = (1u << GCX_TL_TAG_SEQ_BITS) - 1;
    const uint64_t comm_mask = (1u << GCX_TL_TAG_COMM_BITS) - 1;

    return ((comm_id & comm_mask) << 52) | ((seq & seq_mask) << 32) |
           ((uint64_t)(step & 0xffffu) << 16) | (src & 0xffffu);
}

/** Tag of a point-to-point message with user tag @p utag from @p src. */
static inline uint64_t gcx_tl_p2p_tag(uint32_t comm_id, uint32_t utag,
                                      uint32_t src)
{
    const uint64_t comm_mask = (1u << GCX_TL_TAG_COMM_BITS) - 1;

    return (((uint64_t)(comm_id | 1u) & comm_mask) << 52) |
           ((uint64_t)(utag & 0x7fffffffu) << 16) | (src & 0xffffu);
}

/** Tag of round @p step (< 16) of a member-only exchange on the
 *  point-to-point id, with the exchange's tag @p gtag, from @p src. */
static inline uint64_t gcx_tl_group_tag(uint32_t comm_id, uint32_t gtag,
                                        uint32_t step, uint32_t src)
{
    return gcx_tl_p2p_tag(comm_id, gtag, src) | (1ull << 51) |
           ((uint64_t)(step & 0xfu) << 47);
}

static inline uint32_t gcx_tl_tag_src(uint64_t tag)
{
    return (uint32_t)(tag & 0xffffu);
}

static inline uint32_t gcx_tl_tag_step(uint64_t tag)
{
    return (uint32_t)((tag >> 16) & 0xffffu);
}

static inline uint32_t gcx_tl_tag_seq(uint64_t tag)
{
    return (uint32_t)((tag >> 32) & ((1u << GCX_TL_TAG_SEQ_BITS) - 1));
}

/** Parameters of one communicator's view. */
typedef struct gcx_tl_params {
    int      rank;
    int      size;
    uint32_t comm_id;               /* even; agreed by every member */
    int      peer_failure_detection; /* GCX_TL_PEER_FAILURE_*: which peers
                                        report their failure at once */
} gcx_tl_params_t;

/* Values of gcx_tl_params_t.peer_failure_detection. Fast reports may cost a
 * transport (UCX 1.13: shared memory), so the default asks for them only
 * from peers on other hosts. */
enum {
    GCX_TL_PEER_FAILURE_NONE   = 0, /* dead peers found by GCX_TIMEOUT */
    GCX_TL_PEER_FAILURE_ALL    = 1, /* every peer */
    GCX_TL_PEER_FAILURE_REMOTE = 2, /* peers on other hosts */
};

/**
 * Every entry: may it block? Only ctx_create, ctx_destroy, init, connect,
 * abort and fini may.
 */
typedef struct gcx_tl_ops {
    const char *name;

    /** Create the process's transport context (the first communicator). */
    gcx_status_t (*ctx_create)(gcx_tl_ctx_t **ctx_p);

    /** Release it (the last communicator is gone): closes every endpoint. */
    void (*ctx_destroy)(gcx_tl_ctx_t *ctx);

    /** Local address blob to exchange over the OOB; owned by the context. */
    gcx_status_t (*address)(gcx_tl_ctx_t *ctx, const void **addr_p,
                            size_t *len_p);

    /** Progress the context (every communicator's transfers) a bounded
     *  amount; returns events processed. */
    int (*ctx_progress)(gcx_tl_ctx_t *ctx);

    /** Prepare to sleep until the context has work: returns a file
     *  descriptor that becomes readable on the next event (poll it without
     *  the context lock, then progress), or -1 when the context cannot
     *  sleep (its transports have no wakeup, or events are pending). */
    int (*ctx_arm)(gcx_tl_ctx_t *ctx);

    /** Whether every peer is reached over a network socket transport (no
     *  shared memory, no RDMA): each rendezvous handshake then waits
     *  behind the data queued on the link (collectives choose by it). */
    int (*ctx_network_only)(gcx_tl_ctx_t *ctx);

    /** Create a communicator's view of the context, not yet connected. */
    gcx_status_t (*init)(gcx_tl_ctx_t *ctx, const gcx_tl_params_t *params,
                         gcx_tl_t **tl_p);

    /**
     * Connect to every rank, given every rank's address blob: endpoints the
     * context already has to the same peer address are shared.
     */
    gcx_status_t (*connect)(gcx_tl_t *tl, const void *const *addrs,
                            const size_t *lens);

    /**
     * A connected view for a subset of @p parent's ranks (split, dup): rank
     * i of the new view is @p parent_ranks[i] of the parent, whose
     * endpoint it shares. No communication.
     */
    gcx_status_t (*derive)(const gcx_tl_t *parent,
                           const gcx_tl_params_t *params,
                           const int *parent_ranks, gcx_tl_t **tl_p);

    /** Post a tagged send of an iov list to @p peer; non-blocking. */
    gcx_status_t (*send)(gcx_tl_t *tl, int peer, uint64_t tag,
                         const gcx_iov_t *iov, int iovcnt, gcx_tl_req_t *req);

    /** Post a tagged receive from @p peer into an iov list; non-blocking. */
    gcx_status_t (*recv)(gcx_tl_t *tl, int peer, uint64_t tag,
                         uint64_t tag_mask, const gcx_iov_t *iov, int iovcnt,
                         gcx_tl_req_t *req);

    /**
     * Post a tagged send that travels whole as one eager message (no
     * rendezvous handshake); it matches only a recv_eager() of the same tag.
     * The iov list is read in place until @p req completes. For messages
     * whose handshake would wait behind data queued on a link; the price is
     * a copy on each side.
     */
    gcx_status_t (*send_eager)(gcx_tl_t *tl, int peer, uint64_t tag,
                               const gcx_iov_t *iov, int iovcnt,
                               gcx_tl_req_t *req);

    /**
     * Post a receive of a send_eager() message with exactly @p tag from
     * @p peer. The message is copied into the iov list once it has arrived
     * whole (or at once, if it is already here): nothing writes into the
     * buffers after the request completes or is cancelled, which makes
     * eager transfers safe to abort. A message longer than the buffers
     * completes the request with GCX_ERR_MISMATCH and copies nothing.
     */
    gcx_status_t (*recv_eager)(gcx_tl_t *tl, int peer, uint64_t tag,
                               const gcx_iov_t *iov, int iovcnt,
                               gcx_tl_req_t *req);

    /**
     * Register @p handler for active-message id @p id (< GCX_TL_AM_MAX_ID),
     * or unregister it with NULL. GCX_ERR_INVALID for a bad id or an id that
     * is taken. Every rank must register an id before any peer sends on it.
     */
    gcx_status_t (*am_handler)(gcx_tl_t *tl, unsigned id,
                               gcx_tl_am_handler_t handler, void *arg);

    /**
     * Post an active message: @p header (at most a few hundred bytes) and
     * a payload from an iov list; both are used in place until @p req
     * completes (UCX 1.13 has no header copy flag; large payloads go by
     * rendezvous). The request completes once the receiver took or dropped
     * the payload.
     */
    gcx_status_t (*am_send)(gcx_tl_t *tl, int peer, unsigned id,
                            const void *header, size_t header_length,
                            const gcx_iov_t *iov, int iovcnt,
                            gcx_tl_req_t *req);

    /**
     * am_send() with the payload travelling whole as one eager message (no
     * rendezvous handshake): the receiver's handler sees it with rndv = 0,
     * copied by am_recv(). For payloads posted many at once whose handshakes
     * would wait behind data queued on the links (on TCP at 8 emulated
     * ranks, the master-less coded allreduce ran at 1.2-1.7x the ring with
     * rendezvous, 1.07-1.21x eager). The price: a copy on the sending
     * side, one on the receiving side unless the handler keeps the payload
     * in place (am_hold with in_place), and a payload the receiver drops
     * has crossed the link all the same. The request completes once the
     * payload is sent.
     */
    gcx_status_t (*am_send_eager)(gcx_tl_t *tl, int peer, unsigned id,
                                  const void *header, size_t header_length,
                                  const gcx_iov_t *iov, int iovcnt,
                                  gcx_tl_req_t *req);

    /**
     * Inside a handler only: take the payload of @p msg into the iov list
     * (exactly msg->length bytes, else GCX_ERR_MISMATCH and it is dropped).
     * Eager payloads are copied and @p req is complete on return;
     * rendezvous ones are pulled straight into the buffers and @p req
     * completes later (req->length = bytes received).
     */
    gcx_status_t (*am_recv)(gcx_tl_t *tl, const gcx_tl_am_msg_t *msg,
                            const gcx_iov_t *iov, int iovcnt,
                            gcx_tl_req_t *req);

    /**
     * Inside a handler only: keep the payload of @p msg past the handler.
     * A rendezvous payload (not pulled yet) can still be taken later:
     * am_recv() or am_release() on a copy of @p msg, exactly once, at any
     * later point (inside or outside a handler); its sender's request
     * stays in flight until then, and it costs nothing on the wire. An
     * eager payload with msg->in_place stays in the transport's buffer and
     * is read at msg->data until am_release() (exactly once; no am_recv):
     * the receive without a copy. GCX_ERR_UNSUPPORTED for an eager payload
     * without in_place (copy it or drop it).
     */
    gcx_status_t (*am_hold)(gcx_tl_t *tl, const gcx_tl_am_msg_t *msg);

    /** Drop a payload kept with am_hold(): a rendezvous sender completes;
     *  an eager payload's buffer goes back to the transport. */
    void (*am_release)(gcx_tl_t *tl, const gcx_tl_am_msg_t *msg);

    /**
     * Give up an in-flight request whose owner goes away: the gcx request is
     * detached at once (status GCX_ERR_CANCELED, never touched again) and
     * the transport calls @p release(@p arg) when the operation finally ends
     * with success (at once if it already has), so the memory it reads or
     * writes can be kept alive until then. If it ends with an error, or has
     * not ended when the transport is finalized, @p release is never called:
     * the peer may still access the memory (rendezvous), so it is kept for
     * the life of the process. @p release may be NULL.
     */
    void (*abandon)(gcx_tl_t *tl, gcx_tl_req_t *req,
                    void (*release)(void *arg), void *arg);

    /** Progress the context of @p tl (every communicator) a bounded
     *  amount; returns events processed. */
    int (*progress)(gcx_tl_t *tl);

    /** Nonzero once the connection to @p peer is known to be lost. */
    int (*peer_failed)(gcx_tl_t *tl, int peer);

    /* ---- what survives a failure (revoke, shrink) ---- */

    /**
     * Nonzero once @p peer is known to be gone: UCX reported its connection
     * lost, or its process on this host ended (the transport watches the
     * processes of peers on this host, so a dead one's transfers end with
     * GCX_ERR_PEER within milliseconds). Unlike peer_failed, an endpoint
     * that this side's abort closed does not count.
     */
    int (*peer_lost)(gcx_tl_t *tl, int peer);

    /**
     * Nonzero once this process no longer hears its peers on this host:
     * a peer killed while writing into its shared-memory receive queue
     * left the queue stopped (found by a probe after each death on this
     * host). Control messages still go out; what it waits for from those
     * peers never comes.
     */
    int (*deaf)(gcx_tl_t *tl);

    /** Set the process's handler of control messages (one per context). */
    void (*ctx_ctl_handler)(gcx_tl_ctx_t *ctx, gcx_tl_ctl_handler_t handler,
                            void *arg);

    /**
     * Send a small control message (a few hundred bytes) to @p peer's
     * control handler, tagged with this view's communicator id; copied, so
     * the caller's buffer is free on return. Works on an aborted view too:
     * an endpoint the abort closed is opened again (revive). Fire and
     * forget: GCX_OK once posted; GCX_ERR_PEER when the peer is lost;
     * GCX_ERR_TRANSPORT when the process's worker was stopped.
     */
    gcx_status_t (*ctl_send)(gcx_tl_t *tl, int peer, const void *data,
                             size_t length);

    /**
     * Make the endpoint to @p peer usable again if an abort closed it (the
     * peer is not lost): a new endpoint to the same address replaces it in
     * this view (views derived afterwards share the new one). GCX_OK,
     * GCX_ERR_PEER (lost), GCX_ERR_TRANSPORT (worker stopped, or UCX
     * refused). No communication.
     */
    gcx_status_t (*revive)(gcx_tl_t *tl, int peer);

    /**
     * Cancel everything outstanding on this view: receives are cancelled,
     * and the shared endpoints of peers that a send of this view still
     * waits on are closed (the only way to stop a rendezvous peer from
     * reading the buffer), which fails those peers for every communicator.
     * Blocks briefly. Afterwards the view is dead.
     */
    void (*abort)(gcx_tl_t *tl);

    /**
     * Release the view (abort first if anything is outstanding). Endpoints
     * no other view uses are closed after delivering what was sent, waiting
     * at most @p seconds; messages of this view that arrived unmatched are
     * dropped. Returns 1 when the view's communicator id may be used again,
     * 0 when messages of it may still be queued (the id is then retired).
     */
    int (*fini)(gcx_tl_t *tl, double seconds);
} gcx_tl_ops_t;

/** Base of every transport view. */
struct gcx_tl {
    const gcx_tl_ops_t *ops;
    gcx_tl_ctx_t       *ctx;
    int                 rank;
    int                 size;
    uint32_t            comm_id;
};

extern const gcx_tl_ops_t gcx_tl_ucx_ops;

/** Ops table for a GCX_TRANSPORT value, or NULL when not built. */
const gcx_tl_ops_t *gcx_tl_ops_find(int transport);

#endif
