/*
 * comm_create.c - the communicator constructors that talk to other ranks:
 * create, split, dup, create_group (the object itself: comm.c).
 *
 * Creation from an OOB = configuration + identity (caller's OOB or the
 * environment's TCP star) + one OOB allgather of hellos (size check, the
 * id offers, address lengths) + one of transport addresses + endpoints (the
 * process context's cached ones where the peer is already connected) + one
 * service exchange over the transport that proves the connections and the
 * agreed id. It is the only place that blocks for long, bounded by
 * GCX_TIMEOUT.
 *
 * Split (and dup, a split with one color) is collective over the parent:
 * one service exchange of (color, key, id offer) records over the parent's
 * transport (ceil(log2 P) latencies), then a view of the parent's endpoints
 * for the members; no socket, no UCX initialisation, no connection.
 * create_group is the same among the listed members only: the exchange
 * runs on the parent's point-to-point id (ceil(log2 n) latencies), outside
 * the parent's collective order.
 */
#include "comm.h"
#include "bootstrap.h"
#include "service.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

#define GCX_COMM_MAGIC 0x67637864u /* "gcxd" */

typedef struct gcx_comm_hello {
    uint32_t            magic;
    uint32_t            size;
    uint32_t            addr_len;
    uint32_t            pad;
    gcx_comm_id_offer_t offer;
} gcx_comm_hello_t;

/* One rank's record in a split. */
typedef struct gcx_comm_split_rec {
    int32_t             color;
    int32_t             key;
    gcx_comm_id_offer_t offer;
} gcx_comm_split_rec_t;

/* One member's record in gcx_comm_create_group: what it was asked. */
typedef struct gcx_comm_group_rec {
    uint32_t            magic;
    int32_t             n;
    uint64_t            list_hash; /* the member list, in its order */
    uint64_t            set_hash;  /* the same, sorted */
    gcx_comm_id_offer_t offer;
} gcx_comm_group_rec_t;

/* What the first service exchange of a new communicator carries. */
typedef struct gcx_comm_check {
    uint32_t magic;
    uint32_t id;
    uint32_t network_only; /* this rank's context */
    uint32_t ring_eager;   /* GCX_RING_EAGER: ranks must send alike */
} gcx_comm_check_t;

/* Every rank checks over the transport that all agree on the id. */
static gcx_status_t gcx_comm_check_wireup(gcx_comm_t *comm)
{
    gcx_comm_check_t  mine = {GCX_COMM_MAGIC, comm->id,
                              (uint32_t)comm->ctx->network_only,
                              (uint32_t)comm->config.ring_eager}, *all;
    gcx_status_t      status;
    int               r;

    all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL) {
        return GCX_ERR_NOMEM;
    }
    status = gcx_service_allgather(comm, &mine, all, sizeof(mine));
    comm->network_only = 1;
    for (r = 0; status == GCX_OK && r < comm->size; ++r) {
        comm->network_only &= all[r].network_only != 0;
        if (all[r].magic != GCX_COMM_MAGIC || all[r].id != comm->id) {
            gcx_error("rank %d agreed on communicator id %u, this rank on "
                      "%u", r, all[r].id, comm->id);
            status = GCX_ERR_MISMATCH;
        } else if (all[r].ring_eager != mine.ring_eager) {
            gcx_error("rank %d has another GCX_RING_EAGER than this rank "
                      "(%u, here %u): every rank must set the same",
                      r, all[r].ring_eager, mine.ring_eager);
            status = GCX_ERR_MISMATCH;
        }
    }
    free(all);
    return status;
}

/*
 * Exchanges hellos and transport addresses over the OOB, agrees on the id,
 * creates the view and connects. The context lock is dropped around each
 * OOB call (they wait for other processes).
 */
static gcx_status_t gcx_comm_wireup(gcx_comm_t *comm, const gcx_oob_t *oob)
{
    gcx_context_t    *ctx = comm->ctx;
    gcx_comm_hello_t  mine = {0}, *all = NULL;
    gcx_tl_params_t   params;
    const void      **addrs  = NULL;
    size_t           *lens   = NULL;
    char             *blobs  = NULL, *myblob = NULL;
    const void       *addr;
    size_t            len, maxlen = 0;
    gcx_status_t      status;
    int               r;

    status = ctx->tl_ops->address(ctx->tl_ctx, &addr, &len);
    if (status != GCX_OK) {
        return status;
    }
    mine.magic    = GCX_COMM_MAGIC;
    mine.size     = (uint32_t)comm->size;
    mine.addr_len = (uint32_t)len;
    gcx_context_id_offer(ctx, &mine.offer);
    all   = calloc((size_t)comm->size, sizeof(*all));
    addrs = calloc((size_t)comm->size, sizeof(*addrs));
    lens  = calloc((size_t)comm->size, sizeof(*lens));
    if (all == NULL || addrs == NULL || lens == NULL) {
        status = GCX_ERR_NOMEM;
        goto out;
    }
    gcx_context_unlock();
    status = oob->allgather(&mine, all, sizeof(mine), oob->ctx);
    gcx_context_lock();
    if (status != GCX_OK) {
        gcx_error("out-of-band allgather failed: %s", gcx_strerror(status));
        goto out;
    }
    for (r = 0; r < comm->size; ++r) {
        if (all[r].magic != GCX_COMM_MAGIC ||
            all[r].size != (uint32_t)comm->size) {
            gcx_error("rank %d disagrees on the communicator (size %u vs %d)",
                      r, all[r].size, comm->size);
            status = GCX_ERR_MISMATCH;
            goto out;
        }
        if (all[r].addr_len > maxlen) {
            maxlen = all[r].addr_len;
        }
    }
    status = gcx_context_id_agree(ctx, &all[0].offer, sizeof(*all), NULL,
                                  comm->size, &comm->id);
    if (status != GCX_OK) {
        goto out;
    }
    params.rank    = comm->rank;
    params.size    = comm->size;
    params.comm_id = comm->id;
    params.peer_failure_detection =
        comm->config.ucx_err_mode == GCX_UCX_ERR_MODE_PEER ?
            GCX_TL_PEER_FAILURE_ALL :
        comm->config.ucx_err_mode == GCX_UCX_ERR_MODE_AUTO ?
            GCX_TL_PEER_FAILURE_REMOTE : GCX_TL_PEER_FAILURE_NONE;
    status = ctx->tl_ops->init(ctx->tl_ctx, &params, &comm->tl);
    if (status != GCX_OK) {
        gcx_comm_id_release(ctx, comm->id);
        goto out;
    }
    myblob = calloc(1, maxlen);
    blobs  = calloc((size_t)comm->size, maxlen);
    if (myblob == NULL || blobs == NULL) {
        status = GCX_ERR_NOMEM;
        goto out;
    }
    memcpy(myblob, addr, len);
    gcx_context_unlock();
    status = oob->allgather(myblob, blobs, maxlen, oob->ctx);
    gcx_context_lock();
    if (status != GCX_OK) {
        gcx_error("out-of-band allgather failed: %s", gcx_strerror(status));
        goto out;
    }
    for (r = 0; r < comm->size; ++r) {
        addrs[r] = blobs + (size_t)r * maxlen;
        lens[r]  = all[r].addr_len;
    }
    status = comm->tl->ops->connect(comm->tl, addrs, lens);
out:
    free(blobs);
    free(myblob);
    free(lens);
    free(addrs);
    free(all);
    return status;
}

static gcx_status_t gcx_comm_create_locked(const gcx_oob_t *oob,
                                           const gcx_config_t *config,
                                           gcx_comm_t **comm_p)
{
    gcx_bootstrap_t *bootstrap = NULL;
    gcx_oob_t        env_oob;
    const char      *source = "the caller's OOB";
    gcx_comm_t      *comm   = NULL;
    gcx_config_t    *env_config = NULL;
    gcx_config_t     cfg;
    gcx_status_t     status;
    int              rank, size;

    if (config == NULL) {
        status = gcx_config_read(&env_config);
        if (status != GCX_OK) {
            return status;
        }
        config = env_config;
    }
    cfg = *config;
    gcx_config_release(env_config);
    gcx_log_configure(cfg.log_level, -1);
    if (oob != NULL) {
        rank = oob->rank;
        size = oob->size;
    } else {
        status = gcx_bootstrap_identity(&cfg, &rank, &size, &source);
        if (status != GCX_OK) {
            return status;
        }
    }
    gcx_log_configure(cfg.log_level, rank);
    if (size > GCX_TL_MAX_RANKS) {
        gcx_error("%d ranks: at most %d are supported", size,
                  GCX_TL_MAX_RANKS);
        return GCX_ERR_UNSUPPORTED;
    }
    if (oob == NULL) {
        gcx_context_unlock();
        status = gcx_bootstrap_connect(&cfg, rank, size, &bootstrap);
        gcx_context_lock();
        if (status != GCX_OK) {
            return status;
        }
        env_oob.allgather = gcx_bootstrap_allgather;
        env_oob.ctx       = bootstrap;
        env_oob.rank      = rank;
        env_oob.size      = size;
        oob               = &env_oob;
    }
    status = gcx_comm_new(&cfg, rank, size, &comm);
    if (status == GCX_OK) {
        status = gcx_comm_wireup(comm, oob);
    }
    if (bootstrap != NULL) {
        gcx_bootstrap_close(bootstrap);
    }
    /* every rank proves it reaches the others and agrees on the id, so a
     * broken network shows here, not in the first collective */
    if (status == GCX_OK) {
        status = gcx_comm_check_wireup(comm);
    }
    if (status != GCX_OK) {
        if (comm != NULL) {
            gcx_comm_free(comm, 0);
        }
        return status;
    }
    gcx_comm_ctl_adopt(comm);
    gcx_info("communicator %u: rank %d of %d (identity from %s), "
             "transport %s",
             comm->id, comm->rank, comm->size, source, comm->tl->ops->name);
    *comm_p = comm;
    return GCX_OK;
}

gcx_status_t gcx_comm_create(const gcx_oob_t *oob, const gcx_config_t *config,
                             gcx_comm_t **comm_p)
{
    gcx_status_t status;

    if (comm_p == NULL ||
        (oob != NULL && (oob->allgather == NULL || oob->size < 1 ||
                         oob->rank < 0 || oob->rank >= oob->size))) {
        gcx_error("gcx_comm_create: invalid arguments");
        return GCX_ERR_INVALID;
    }
    gcx_context_create_lock();
    gcx_context_lock();
    status = gcx_comm_create_locked(oob, config, comm_p);
    gcx_context_unlock();
    gcx_context_create_unlock();
    return status;
}

/* Sort members by (key, parent rank). */
static const gcx_comm_split_rec_t *gcx_comm_split_recs;

static int gcx_comm_split_cmp(const void *a, const void *b)
{
    int ra = *(const int *)a, rb = *(const int *)b;
    int ka = gcx_comm_split_recs[ra].key, kb = gcx_comm_split_recs[rb].key;

    if (ka != kb) {
        return ka < kb ? -1 : 1;
    }
    return ra < rb ? -1 : (ra > rb);
}

static gcx_status_t gcx_comm_split_locked(gcx_comm_t *parent, int color,
                                          int key, gcx_comm_t **newcomm_p)
{
    gcx_comm_split_rec_t mine, *recs;
    gcx_comm_t          *comm = NULL;
    int                 *members = NULL;
    int                  n = 0, r, newrank = -1;
    gcx_status_t         status;

    mine.color = color;
    mine.key   = key;
    gcx_context_id_offer(parent->ctx, &mine.offer);
    recs = calloc((size_t)parent->size, sizeof(*recs));
    if (recs == NULL) {
        return GCX_ERR_NOMEM;
    }
    /* the exchange waits for the other ranks' splits: drop the context
     * lock meanwhile (the creation lock still serializes creations), so
     * this process's other threads can run the collectives a peer may
     * need to finish before it reaches its split */
    gcx_context_unlock();
    status = gcx_service_allgather(parent, &mine, recs, sizeof(mine));
    gcx_context_lock();
    if (status != GCX_OK || color == GCX_UNDEFINED) {
        goto out;
    }
    members = malloc((size_t)parent->size * sizeof(*members));
    if (members == NULL) {
        status = GCX_ERR_NOMEM;
        goto out;
    }
    for (r = 0; r < parent->size; ++r) {
        if (recs[r].color == color) {
            members[n++] = r;
        }
    }
    /* qsort has no context argument; the creation lock makes this safe */
    gcx_comm_split_recs = recs;
    qsort(members, (size_t)n, sizeof(*members), gcx_comm_split_cmp);
    for (r = 0; r < n; ++r) {
        if (members[r] == parent->rank) {
            newrank = r;
        }
    }
    status = gcx_comm_derive(parent, &parent->config, &recs[0].offer,
                             sizeof(*recs), members, members, n, newrank,
                             &comm);
out:
    if (status == GCX_OK) {
        gcx_debug("split of communicator %u: color %d, rank %d of %d in "
                  "communicator %s%u", parent->id, color, newrank, n,
                  comm != NULL ? "" : "(none) ",
                  comm != NULL ? comm->id : 0);
        *newcomm_p = comm;
    }
    free(members);
    free(recs);
    return status;
}

gcx_status_t gcx_comm_split(gcx_comm_t *comm, int color, int key,
                            gcx_comm_t **newcomm_p)
{
    gcx_status_t status;

    if (comm == NULL || newcomm_p == NULL) {
        gcx_error("gcx_comm_split: %s is NULL",
                  comm == NULL ? "the communicator" : "newcomm_p");
        return GCX_ERR_INVALID;
    }
    if (color < 0 && color != GCX_UNDEFINED) {
        gcx_error("gcx_comm_split: color %d: a color is >= 0 or "
                  "GCX_UNDEFINED", color);
        return GCX_ERR_INVALID;
    }
    *newcomm_p = NULL;
    gcx_context_create_lock();
    gcx_context_lock();
    status = comm->error != GCX_OK ?
                 comm->error :
                 gcx_comm_split_locked(comm, color, key, newcomm_p);
    gcx_context_unlock();
    gcx_context_create_unlock();
    return status;
}

gcx_status_t gcx_comm_dup(gcx_comm_t *comm, gcx_comm_t **newcomm_p)
{
    if (comm == NULL) {
        gcx_error("gcx_comm_dup: invalid arguments");
        return GCX_ERR_INVALID;
    }
    return gcx_comm_split(comm, 0, comm->rank, newcomm_p);
}

/* FNV-1a over the member list: members compare what they were asked. */
static uint64_t gcx_comm_list_hash(int n, const int *ranks)
{
    uint64_t h = 14695981039346656037ull;
    int      i, b;

    for (i = 0; i < n; ++i) {
        for (b = 0; b < 32; b += 8) {
            h = (h ^ (((uint32_t)ranks[i] >> b) & 0xffu)) * 1099511628211ull;
        }
    }
    return h;
}

static int gcx_comm_int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return x < y ? -1 : (x > y);
}

static gcx_status_t gcx_comm_create_group_locked(gcx_comm_t *parent, int n,
                                                 const int *ranks, int tag,
                                                 const gcx_config_t *config,
                                                 int newrank,
                                                 gcx_comm_t **newcomm_p)
{
    gcx_comm_group_rec_t mine = {0}, *recs;
    gcx_service_group_t  group;
    int                 *sorted;
    gcx_status_t         status;
    int                  i, other_set, other_order = 0;

    recs   = calloc((size_t)n, sizeof(*recs));
    sorted = malloc((size_t)n * sizeof(*sorted));
    if (recs == NULL || sorted == NULL) {
        free(recs);
        free(sorted);
        return GCX_ERR_NOMEM;
    }
    /* the exchange runs in parent-rank order, whatever order each member
     * was given, so members that disagree on the order finish it and see
     * each other's records instead of waiting for messages never sent */
    memcpy(sorted, ranks, (size_t)n * sizeof(*sorted));
    qsort(sorted, (size_t)n, sizeof(*sorted), gcx_comm_int_cmp);
    group.n     = n;
    group.ranks = sorted;
    group.tag   = (uint32_t)tag;
    group.me    = (int)((const int *)bsearch(&parent->rank, sorted,
                                             (size_t)n, sizeof(*sorted),
                                             gcx_comm_int_cmp) -
                        sorted);
    mine.magic     = GCX_COMM_MAGIC;
    mine.n         = n;
    mine.list_hash = gcx_comm_list_hash(n, ranks);
    mine.set_hash  = gcx_comm_list_hash(n, sorted);
    gcx_context_id_offer(parent->ctx, &mine.offer);
    gcx_context_unlock(); /* as in a split: other threads go on */
    status = gcx_service_allgather_group(parent, &group, &mine, recs,
                                         sizeof(mine));
    gcx_context_lock();
    /* a transfer of another size: the members disagree on who takes part */
    other_set = status == GCX_ERR_MISMATCH;
    for (i = 0; status == GCX_OK && i < n && !other_set; ++i) {
        if (recs[i].magic != GCX_COMM_MAGIC || recs[i].n != n ||
            recs[i].set_hash != mine.set_hash) {
            gcx_error("gcx_comm_create_group (tag %d): parent rank %d was "
                      "given other members (%d ranks) than this rank (%d)",
                      tag, sorted[i], recs[i].n, n);
            other_set = 1;
        } else if (recs[i].list_hash != mine.list_hash && !other_order) {
            gcx_error("gcx_comm_create_group (tag %d): parent rank %d was "
                      "given the members in another order than this rank",
                      tag, sorted[i]);
            other_order = 1;
        }
    }
    if (other_set || other_order) {
        status = GCX_ERR_MISMATCH;
    }
    if (other_set) {
        /* the exchange ran over different members, whose messages may
         * still be on the way: the parent fails, as a collective's
         * transfer mismatch fails it (the same members in another order
         * leave nothing behind) */
        gcx_comm_fail(parent, status);
    }
    if (status == GCX_OK) {
        status = gcx_comm_derive(parent, config, &recs[0].offer,
                                 sizeof(*recs), NULL, ranks, n, newrank,
                                 newcomm_p);
    }
    if (status == GCX_OK) {
        gcx_debug("group of communicator %u (tag %d): rank %d of %d in "
                  "communicator %u", parent->id, tag, newrank, n,
                  (*newcomm_p)->id);
    }
    free(sorted);
    free(recs);
    return status;
}

/* Checks gcx_comm_create_group's arguments: the caller's index, -1 for a
 * bad argument (logged), -2 out of memory. */
static int gcx_comm_group_check(const gcx_comm_t *parent, int n,
                                const int *ranks, int tag,
                                gcx_comm_t **newcomm_p)
{
    int  newrank = -1, i;
    int *seen; /* parent rank -> 1 + its index in ranks */

    if (parent == NULL || ranks == NULL || newcomm_p == NULL) {
        gcx_error("gcx_comm_create_group: %s is NULL",
                  parent == NULL ? "the parent" :
                  ranks == NULL  ? "ranks" : "newcomm_p");
        return -1;
    }
    if (n < 1 || n > parent->size) {
        gcx_error("gcx_comm_create_group: n = %d: 1..%d (the parent's size)",
                  n, parent->size);
        return -1;
    }
    if (tag < 0) {
        gcx_error("gcx_comm_create_group: tag %d: a tag is 0..%d", tag,
                  INT32_MAX);
        return -1;
    }
    seen = calloc((size_t)parent->size, sizeof(*seen));
    if (seen == NULL) {
        return -2;
    }
    for (i = 0; i < n; ++i) {
        if (ranks[i] < 0 || ranks[i] >= parent->size) {
            gcx_error("gcx_comm_create_group: ranks[%d] = %d is not a rank "
                      "of the parent (0..%d)", i, ranks[i], parent->size - 1);
            break;
        }
        if (seen[ranks[i]] != 0) {
            gcx_error("gcx_comm_create_group: ranks[%d] and ranks[%d] "
                      "are both %d", seen[ranks[i]] - 1, i, ranks[i]);
            break;
        }
        seen[ranks[i]] = i + 1;
    }
    if (i == n) {
        newrank = seen[parent->rank] - 1;
        if (newrank < 0) {
            gcx_error("gcx_comm_create_group: ranks does not list the "
                      "caller (parent rank %d); only members call",
                      parent->rank);
        }
    }
    free(seen);
    return newrank;
}

gcx_status_t gcx_comm_create_group(gcx_comm_t *parent, int n,
                                   const int *ranks, int tag,
                                   const gcx_config_t *config,
                                   gcx_comm_t **newcomm_p)
{
    gcx_status_t status;
    int          newrank = gcx_comm_group_check(parent, n, ranks, tag,
                                                newcomm_p);

    if (newrank < 0) {
        return newrank == -2 ? GCX_ERR_NOMEM : GCX_ERR_INVALID;
    }
    *newcomm_p = NULL;
    gcx_context_create_lock();
    gcx_context_lock();
    status = parent->error != GCX_OK ?
                 parent->error :
                 gcx_comm_create_group_locked(
                     parent, n, ranks, tag,
                     config != NULL ? config : &parent->config, newrank,
                     newcomm_p);
    gcx_context_unlock();
    gcx_context_create_unlock();
    return status;
}
