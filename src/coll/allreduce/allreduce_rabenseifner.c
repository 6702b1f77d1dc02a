/*
 * allreduce_rabenseifner.c - recursive-halving reduce-scatter followed by
 * recursive-doubling allgather (Rabenseifner), for medium messages.
 *
 * Idea: with p2 = 2^floor(log2 P) participating ranks (extra ranks folded in
 * first and served last, as in recursive doubling), round i of the
 * reduce-scatter halves the block range each rank is responsible for: it
 * sends the half it gives up to its partner and reduces the half it keeps
 * with the partner's copy. After log2(p2) rounds rank v holds block v fully
 * reduced (AVG divides it there, once); the allgather retraces the rounds
 * in reverse, doubling the owned range straight into the user's buffer.
 * Each block is reduced on one rank only, so every rank ends with the same
 * bits. Out of place, the first round reads the input directly (no copy).
 * Cost: 2·log2(p2)·α + 2(p2-1)/p2·n·β + (p2-1)/p2·n·γ, plus 2·(α + nβ) when
 * P is not a power of two: as little data as the ring with log2 instead of
 * linear latency terms, which wins between the small and the large sizes.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

enum {
    GCX_RAB_PRE = 0,
    GCX_RAB_RS,
    GCX_RAB_AG,
    GCX_RAB_POST,
    GCX_RAB_DONE,
};

typedef struct gcx_allreduce_rab_task {
    gcx_task_t      super;
    const char     *sendbuf;
    char           *buf;
    const char     *src;   /* operand of the next reduction: input, then buf */
    char           *tmp;
    size_t          count;
    size_t          esize;
    gcx_dtype_t     dtype;
    gcx_op_t        op;
    gcx_reduce_fn_t reduce;
    int             phase;
    int             p2, rem, vrank, logp;
    int             mask;      /* current round's distance */
    int             blo, bhi;  /* owned block range [blo, bhi) */
    int             posted;
    gcx_tl_req_t    sreq, rreq;
} gcx_allreduce_rab_task_t;

/* Element offset of block b of p2 (b may be p2: the end). */
static size_t gcx_rab_off(const gcx_allreduce_rab_task_t *r, int b)
{
    size_t off, len;

    if (b >= r->p2) {
        return r->count;
    }
    gcx_coll_block(r->count, r->p2, b, &off, &len);
    return off;
}

/* One exchange: send [soff, soff+slen) of sbuf, receive rlen elements into
 * rbuf; 1 when both are done, 0 while in flight, -1 on failure. */
static int gcx_rab_exchange(gcx_allreduce_rab_task_t *r, int peer,
                            uint32_t step, const char *sbuf, size_t slen,
                            char *rbuf, size_t rlen)
{
    gcx_task_t *task = &r->super;
    int         s, q;

    if (!r->posted) {
        r->posted       = 1;
        r->sreq.status  = GCX_OK;
        r->rreq.status  = GCX_OK;
        r->rreq.length  = rlen * r->esize;
        if (rbuf != NULL && gcx_coll_recv(task, peer, step, rbuf,
                                          rlen * r->esize, &r->rreq) < 0) {
            return -1;
        }
        if (sbuf != NULL && gcx_coll_send(task, peer, step, sbuf,
                                          slen * r->esize, &r->sreq) < 0) {
            return -1;
        }
    }
    s = gcx_coll_req_state(task, &r->sreq, peer, SIZE_MAX);
    q = gcx_coll_req_state(task, &r->rreq, peer, rlen * r->esize);
    if (s < 0 || q < 0) {
        return -1;
    }
    if (s == 0 || q == 0) {
        return 0;
    }
    r->posted = 0;
    return 1;
}

static void gcx_allreduce_rab_progress(gcx_task_t *task)
{
    gcx_allreduce_rab_task_t *r    = (gcx_allreduce_rab_task_t *)task;
    int                       rank = task->comm->rank, state;
    size_t                    es   = r->esize;

    for (;;) {
        switch (r->phase) {
        case GCX_RAB_PRE:
            if (rank >= 2 * r->rem) {
                r->phase = GCX_RAB_RS;
                break;
            }
            if (rank % 2 == 0) { /* extra rank: hand over, wait for POST */
                state = gcx_rab_exchange(r, rank + 1, 0, r->src, r->count,
                                         NULL, 0);
                if (state <= 0) {
                    return;
                }
                r->phase = GCX_RAB_POST;
                break;
            }
            state = gcx_rab_exchange(r, rank - 1, 0, NULL, 0, r->tmp,
                                     r->count);
            if (state <= 0) {
                return;
            }
            r->reduce(r->buf, r->tmp, r->src, r->count);
            r->src   = r->buf;
            r->phase = GCX_RAB_RS;
            break;
        case GCX_RAB_RS: {
            int    mid, keep_lo, keep_hi, give_lo, give_hi;
            size_t koff, klen, goff, glen;

            if (r->mask == 0) {
                if (r->op == GCX_OP_AVG) {
                    size_t off = gcx_rab_off(r, r->blo);
                    gcx_reduce_divide(r->buf + off * es,
                                      gcx_rab_off(r, r->bhi) - off, r->dtype,
                                      task->comm->size);
                }
                r->mask  = 1;
                r->phase = GCX_RAB_AG;
                break;
            }
            mid = r->blo + r->mask;
            if ((r->vrank & r->mask) == 0) {
                keep_lo = r->blo, keep_hi = mid, give_lo = mid, give_hi = r->bhi;
            } else {
                keep_lo = mid, keep_hi = r->bhi, give_lo = r->blo, give_hi = mid;
            }
            koff  = gcx_rab_off(r, keep_lo);
            klen  = gcx_rab_off(r, keep_hi) - koff;
            goff  = gcx_rab_off(r, give_lo);
            glen  = gcx_rab_off(r, give_hi) - goff;
            state = gcx_rab_exchange(
                r, gcx_coll_rd_real_rank(r->rem, r->vrank ^ r->mask),
                1u + (uint32_t)__builtin_ctz((unsigned)r->mask),
                r->src + goff * es, glen, r->tmp, klen);
            if (state <= 0) {
                return;
            }
            r->reduce(r->buf + koff * es, r->src + koff * es, r->tmp, klen);
            r->src  = r->buf;
            r->blo  = keep_lo;
            r->bhi  = keep_hi;
            r->mask >>= 1;
            break;
        }
        case GCX_RAB_AG: {
            int    plo, phi;
            size_t moff, mlen, poff, plen;

            if (r->mask >= r->p2) {
                r->phase = GCX_RAB_POST;
                break;
            }
            if ((r->vrank & r->mask) == 0) {
                plo = r->bhi, phi = r->bhi + r->mask;
            } else {
                plo = r->blo - r->mask, phi = r->blo;
            }
            moff  = gcx_rab_off(r, r->blo);
            mlen  = gcx_rab_off(r, r->bhi) - moff;
            poff  = gcx_rab_off(r, plo);
            plen  = gcx_rab_off(r, phi) - poff;
            state = gcx_rab_exchange(
                r, gcx_coll_rd_real_rank(r->rem, r->vrank ^ r->mask),
                (uint32_t)(1 + r->logp + __builtin_ctz((unsigned)r->mask)),
                r->buf + moff * es, mlen, r->buf + poff * es, plen);
            if (state <= 0) {
                return;
            }
            r->blo = plo < r->blo ? plo : r->blo;
            r->bhi = phi > r->bhi ? phi : r->bhi;
            r->mask <<= 1;
            break;
        }
        case GCX_RAB_POST:
            if (rank < 2 * r->rem) {
                uint32_t step = (uint32_t)(1 + 2 * r->logp);
                state = (rank % 2) ?
                            gcx_rab_exchange(r, rank - 1, step, r->buf,
                                             r->count, NULL, 0) :
                            gcx_rab_exchange(r, rank + 1, step, NULL, 0,
                                             r->buf, r->count);
                if (state <= 0) {
                    return;
                }
            }
            r->phase = GCX_RAB_DONE;
            break;
        default:
            task->status = GCX_OK;
            return;
        }
    }
}

static void gcx_allreduce_rab_post(gcx_task_t *task)
{
    gcx_allreduce_rab_task_t *r    = (gcx_allreduce_rab_task_t *)task;
    int                       size = task->comm->size, rank = task->comm->rank;

    r->tmp = gcx_comm_scratch(task->comm, r->count * r->esize + 1);
    if (r->tmp == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    gcx_coll_rd_layout(size, rank, &r->p2, &r->rem, &r->vrank);
    r->logp = __builtin_ctz((unsigned)r->p2);
    r->src    = r->sendbuf;
    r->mask   = r->p2 / 2;
    r->blo    = 0;
    r->bhi    = r->p2;
    r->posted = 0;
    r->phase  = GCX_RAB_PRE;
    if (size == 1 && r->sendbuf != r->buf && r->count > 0) {
        memcpy(r->buf, r->sendbuf, r->count * r->esize);
    }
    gcx_allreduce_rab_progress(task);
}

static void gcx_allreduce_rab_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_allreduce_rab_ops = {
    .name     = "allreduce (rabenseifner)",
    .post     = gcx_allreduce_rab_post,
    .progress = gcx_allreduce_rab_progress,
    .finalize = gcx_allreduce_rab_finalize,
};

gcx_task_t *gcx_allreduce_rabenseifner_create(gcx_comm_t *comm,
                                              const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              gcx_dtype_t dtype, gcx_op_t op)
{
    gcx_allreduce_rab_task_t *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    gcx_task_init(&r->super, &gcx_allreduce_rab_ops, comm);
    r->sendbuf = sendbuf;
    r->buf     = recvbuf;
    r->count   = count;
    r->esize   = gcx_dtype_size(dtype);
    r->dtype   = dtype;
    r->op      = op;
    r->reduce  = gcx_reduce_fn(dtype, op);
    return &r->super;
}
