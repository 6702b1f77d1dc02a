/*
 * ring.c - the ring pipeline shared by reduce-scatter and allgather.
 *
 * Idea: P-1 steps; at step k rank r sends block (r+shift-k) to r+1 and
 * receives block (r+shift-k-1) from r-1. Each block is cut into chunks of
 * GCX_PIPELINE_CHUNK bytes and the chunks flow independently: chunk c of
 * step k is forwarded as soon as chunk c of step k-1 has arrived (and, for
 * reduce-scatter, been reduced), so communication of one chunk overlaps the
 * reduction of the next and a block never waits for a whole block.
 *
 *  - allgather mode receives straight into the user's buffer (zero copy)
 *    and sends straight from it;
 *  - reduce-scatter mode receives into a few chunk-sized scratch slots
 *    (cache-resident) and reduces buf[b] = src[b] op slot, so the user's
 *    input is read in place and never copied;
 *  - its one-block variant (gcx_ring_rs_block_create) keeps the partial
 *    results in a buffer one block long instead of a full-length one: the
 *    step-k partial of chunk c overwrites chunk c of the step-(k-1) partial
 *    once that one's send has completed, and the last step leaves the
 *    rank's reduced block there (reduce-scatter into a block-sized recvbuf,
 *    and the non-roots of the reduce, need no full-length scratch).
 *
 * On a network-only context (GCX_RING_EAGER=auto) chunks travel as eager
 * messages (transport.h send_eager): each rendezvous handshake would wait
 * behind the chunks queued on the link, once per step, on the critical
 * path; eager chunks cost a copy per side instead and are copied out of
 * UCX's buffer into the same places (slot or user buffer) on arrival. A
 * caller whose ring competes with heavy local work for the CPU (the sparse
 * allreduce's merges) keeps it tagged with gcx_ring_prefer_tagged().
 *
 * Cost per rank: (P-1)/P·n bytes sent and received per mode, i.e. ring
 * allreduce = 2(P-1)/P·n·β + (P-1)/P·n·γ + 2(P-1)·α·chunks — bandwidth-
 * optimal. progress() handles at most the chunks that are ready, a bounded
 * amount of work proportional to the window sizes.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

#define GCX_RING_REDUCE_SLOTS 4  /* scratch chunks in flight (reduce mode) */
#define GCX_RING_RECV_WINDOW  8  /* receives in flight (allgather mode) */
#define GCX_RING_SEND_WINDOW  8  /* sends in flight */

typedef struct gcx_ring_task {
    gcx_task_t      super;
    gcx_ring_mode_t mode;
    char           *buf;
    const char     *src;
    size_t         *counts; /* elements per block */
    size_t         *displs; /* element offset per block */
    size_t          esize;
    gcx_reduce_fn_t reduce;
    gcx_dtype_t     dtype;
    int             average; /* reduce mode: divide the owned block by P */
    int             narrow;  /* partials in a one-block buf (see above) */
    int             eager;   /* chunks as eager messages (see above) */
    int             prefer_tagged; /* GCX_RING_EAGER=auto keeps it tagged */
    int             shift;
    int             left, right;
    size_t          chunk;   /* elements per chunk */
    size_t          nchunks; /* per step */
    size_t          total;   /* units = (P-1)·nchunks */
    size_t          recv_posted, recv_done, send_posted, send_done;
    int             recv_window;
    char           *slots;   /* reduce mode: recv_window chunks */
    gcx_tl_req_t    rreqs[GCX_RING_RECV_WINDOW];
    gcx_tl_req_t    sreqs[GCX_RING_SEND_WINDOW];
} gcx_ring_task_t;

/* Block and element range of unit u for a send (is_send) or a receive. */
static void gcx_ring_unit(const gcx_ring_task_t *ring, size_t u, int is_send,
                          size_t *offset_p, size_t *len_p, uint32_t *step_p,
                          size_t *begin_p)
{
    int    size  = ring->super.comm->size;
    int    rank  = ring->super.comm->rank;
    size_t step  = u / ring->nchunks;
    size_t c     = u % ring->nchunks;
    int    block = gcx_coll_mod(rank + ring->shift - (int)step - (is_send ? 0 : 1),
                                size);
    size_t begin = c * ring->chunk;
    size_t end   = begin + ring->chunk;

    if (begin > ring->counts[block]) {
        begin = ring->counts[block];
    }
    if (end > ring->counts[block]) {
        end = ring->counts[block];
    }
    *offset_p = ring->displs[block] + begin;
    *len_p    = end - begin;
    *step_p   = (uint32_t)step;
    if (begin_p != NULL) {
        *begin_p = begin;
    }
}

/* Where the partial result of a unit lives: its place in the full-length
 * buf, or its place in the block (one-block variant). */
static char *gcx_ring_partial(gcx_ring_task_t *ring, size_t offset,
                              size_t begin)
{
    return ring->buf + (ring->narrow ? begin : offset) * ring->esize;
}

static char *gcx_ring_recv_target(gcx_ring_task_t *ring, size_t u,
                                  size_t offset)
{
    if (ring->mode == GCX_RING_ALLGATHER) {
        return ring->buf + offset * ring->esize;
    }
    return ring->slots + (u % (size_t)ring->recv_window) * ring->chunk *
                             ring->esize;
}

static void gcx_ring_progress(gcx_task_t *task)
{
    gcx_ring_task_t *ring = (gcx_ring_task_t *)task;
    size_t           offset, len, begin;
    uint32_t         step;
    int              busy = 1, state;

    while (busy) {
        busy = 0;
        /* completed receives, in order; reduce mode folds them in */
        while (ring->recv_done < ring->recv_posted) {
            gcx_tl_req_t *req = &ring->rreqs[ring->recv_done %
                                             (size_t)ring->recv_window];

            gcx_ring_unit(ring, ring->recv_done, 0, &offset, &len, &step,
                          &begin);
            state = gcx_coll_req_state(task, req, ring->left, len * ring->esize);
            if (state < 0) {
                return;
            }
            if (state == 0) {
                break;
            }
            if (ring->narrow && step > 0 &&
                ring->send_done <= ring->recv_done) {
                break; /* its chunk of buf is still being sent */
            }
            if (ring->mode == GCX_RING_REDUCE_SCATTER) {
                ring->reduce(gcx_ring_partial(ring, offset, begin),
                             ring->src + offset * ring->esize,
                             gcx_ring_recv_target(ring, ring->recv_done,
                                                  offset),
                             len);
            }
            ++ring->recv_done;
            busy = 1;
        }
        /* completed sends, in order */
        while (ring->send_done < ring->send_posted) {
            state = gcx_coll_req_state(
                task, &ring->sreqs[ring->send_done % GCX_RING_SEND_WINDOW],
                ring->right, SIZE_MAX);
            if (state < 0) {
                return;
            }
            if (state == 0) {
                break;
            }
            ++ring->send_done;
            busy = 1;
        }
        /* new receives while the window has room */
        while (ring->recv_posted < ring->total &&
               ring->recv_posted - ring->recv_done <
                   (size_t)ring->recv_window) {
            size_t u = ring->recv_posted;

            gcx_ring_unit(ring, u, 0, &offset, &len, &step, NULL);
            if ((ring->eager ? gcx_coll_recv_eager : gcx_coll_recv)(
                    task, ring->left, step,
                    gcx_ring_recv_target(ring, u, offset), len * ring->esize,
                    &ring->rreqs[u % (size_t)ring->recv_window]) < 0) {
                return;
            }
            ++ring->recv_posted;
            busy = 1;
        }
        /* new sends: step 0 is ready at once, step k needs step k-1's chunk */
        while (ring->send_posted < ring->total &&
               ring->send_posted - ring->send_done < GCX_RING_SEND_WINDOW &&
               (ring->send_posted < ring->nchunks ||
                ring->send_posted - ring->nchunks < ring->recv_done)) {
            size_t      u = ring->send_posted;
            const char *from;

            gcx_ring_unit(ring, u, 1, &offset, &len, &step, &begin);
            from = (ring->mode == GCX_RING_REDUCE_SCATTER && step == 0) ?
                       ring->src + offset * ring->esize :
                       gcx_ring_partial(ring, offset, begin);
            if ((ring->eager ? gcx_coll_send_eager : gcx_coll_send)(
                    task, ring->right, step, from, len * ring->esize,
                    &ring->sreqs[u % GCX_RING_SEND_WINDOW]) < 0) {
                return;
            }
            ++ring->send_posted;
            busy = 1;
        }
    }
    if (ring->recv_done == ring->total && ring->send_done == ring->total) {
        if (ring->average) {
            int owned = gcx_coll_mod(task->comm->rank + ring->shift + 1,
                                     task->comm->size);
            gcx_reduce_divide(gcx_ring_partial(ring, ring->displs[owned], 0),
                              ring->counts[owned], ring->dtype,
                              task->comm->size);
        }
        task->status = GCX_OK;
    }
}

static void gcx_ring_post(gcx_task_t *task)
{
    gcx_ring_task_t *ring = (gcx_ring_task_t *)task;
    gcx_comm_t      *comm = task->comm;
    size_t           maxcount = 0;
    int              b;

    for (b = 0; b < comm->size; ++b) {
        if (ring->counts[b] > maxcount) {
            maxcount = ring->counts[b];
        }
    }
    ring->chunk = comm->config.pipeline_chunk / ring->esize;
    if (ring->chunk == 0) {
        ring->chunk = 1;
    }
    ring->nchunks = maxcount == 0 ? 1 : (maxcount + ring->chunk - 1) / ring->chunk;
    if (ring->chunk > maxcount && maxcount > 0) {
        ring->chunk = maxcount;
    }
    ring->total = (size_t)(comm->size - 1) * ring->nchunks;
    ring->left  = gcx_coll_mod(comm->rank - 1, comm->size);
    ring->right = gcx_coll_mod(comm->rank + 1, comm->size);
    ring->recv_posted = ring->recv_done = 0;
    ring->send_posted = ring->send_done = 0;
    ring->eager = comm->config.ring_eager == GCX_RING_EAGER_ON ||
                  (comm->config.ring_eager == GCX_RING_EAGER_AUTO &&
                   comm->network_only && !ring->prefer_tagged);
    if (ring->mode == GCX_RING_REDUCE_SCATTER) {
        if (ring->narrow && comm->size == 1 && ring->counts[0] > 0) {
            /* no steps: the reduction of one rank is its input */
            memcpy(ring->buf, ring->src + ring->displs[0] * ring->esize,
                   ring->counts[0] * ring->esize);
        }
        ring->recv_window = GCX_RING_REDUCE_SLOTS;
        ring->slots = gcx_comm_scratch(comm, (size_t)ring->recv_window *
                                                 ring->chunk * ring->esize +
                                             1);
        if (ring->slots == NULL) {
            task->status = GCX_ERR_NOMEM;
            return;
        }
    } else {
        ring->recv_window = GCX_RING_RECV_WINDOW;
        if (ring->src != NULL && ring->src != ring->buf &&
            ring->counts[gcx_coll_mod(comm->rank + ring->shift, comm->size)] > 0) {
            /* out-of-place allgather: the rank's own block */
            int own = gcx_coll_mod(comm->rank + ring->shift, comm->size);
            memcpy(ring->buf + ring->displs[own] * ring->esize, ring->src,
                   ring->counts[own] * ring->esize);
        }
    }
    gcx_ring_progress(task);
}

static void gcx_ring_finalize(gcx_task_t *task)
{
    gcx_ring_task_t *ring = (gcx_ring_task_t *)task;

    free(ring->counts);
    free(ring);
}

static const gcx_task_ops_t gcx_ring_ops = {
    .name     = "ring",
    .post     = gcx_ring_post,
    .progress = gcx_ring_progress,
    .finalize = gcx_ring_finalize,
};

gcx_task_t *gcx_ring_create(gcx_comm_t *comm, gcx_ring_mode_t mode, void *buf,
                            const void *src, const size_t *counts,
                            const size_t *displs, gcx_dtype_t dtype,
                            gcx_op_t op, int shift)
{
    gcx_ring_task_t *ring = calloc(1, sizeof(*ring));
    size_t           n    = (size_t)comm->size;

    if (ring == NULL) {
        return NULL;
    }
    ring->counts = malloc(2 * n * sizeof(size_t));
    if (ring->counts == NULL) {
        free(ring);
        return NULL;
    }
    gcx_task_init(&ring->super, &gcx_ring_ops, comm);
    ring->super.name = mode == GCX_RING_REDUCE_SCATTER ?
                           "ring reduce-scatter" : "ring allgather";
    ring->displs = ring->counts + n;
    memcpy(ring->counts, counts, n * sizeof(size_t));
    memcpy(ring->displs, displs, n * sizeof(size_t));
    ring->mode   = mode;
    ring->buf    = buf;
    ring->src    = src;
    ring->esize  = gcx_dtype_size(dtype);
    ring->reduce = mode == GCX_RING_REDUCE_SCATTER ? gcx_reduce_fn(dtype, op) :
                                                     NULL;
    ring->dtype   = dtype;
    ring->average = mode == GCX_RING_REDUCE_SCATTER && op == GCX_OP_AVG;
    ring->shift   = shift;
    return &ring->super;
}

gcx_task_t *gcx_ring_rs_block_create(gcx_comm_t *comm, void *out,
                                     const void *src, const size_t *counts,
                                     const size_t *displs, gcx_dtype_t dtype,
                                     gcx_op_t op, int shift)
{
    gcx_task_t *task = gcx_ring_create(comm, GCX_RING_REDUCE_SCATTER, out,
                                       src, counts, displs, dtype, op, shift);

    if (task != NULL) {
        ((gcx_ring_task_t *)task)->narrow = 1;
    }
    return task;
}

void gcx_ring_prefer_tagged(gcx_task_t *task)
{
    ((gcx_ring_task_t *)task)->prefer_tagged = 1;
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_value_t gcx_ring_eager_names[] = {
    {GCX_RING_EAGER_AUTO, "auto",
     "eager when every peer is reached over TCP sockets only (not the "
     "sparse allreduce's rings)"},
    {GCX_RING_EAGER_ON, "on", "always eager"},
    {GCX_RING_EAGER_OFF, "off",
     "tagged messages (rendezvous above UCX's threshold)"},
    {0, NULL, NULL}};

static const gcx_config_entry_t gcx_ring_config_rows[] = {
    {"PIPELINE_CHUNK", GCX_CONFIG_SIZE, "512K",
     "Chunk size (bytes) of pipelined algorithms (ring, chain)",
     offsetof(struct gcx_config, pipeline_chunk), 4096, 1 << 30, NULL},
    {"RING_EAGER", GCX_CONFIG_ENUM, "auto",
     "How ring chunks travel: eager messages, copied out of UCX's buffer on "
     "arrival (no rendezvous handshake waiting behind queued data), or "
     "tagged ones; every rank must use the same",
     offsetof(struct gcx_config, ring_eager), 0, 0, gcx_ring_eager_names},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_COLL, "coll/ring", gcx_ring_config_rows)
