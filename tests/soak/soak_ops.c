/*
 * soak_ops.c - gcx_soak's collective steps: the seeded generator, the
 * inputs and element access, and one collective step, posted (soak_post)
 * and checked (soak_check).
 *
 * Idea: inputs are a deterministic function of (step, rank, element),
 * integers in [-8, 8] drawn from two small tables, so every type (f16 and
 * bf16 included) sums them exactly and each rank computes the expected
 * result of every peer locally and compares bits; outputs land at a random
 * offset in their area between 64 poisoned guard bytes, and the bytes a
 * collective must not write (gaps, non-roots' buffers) are poisoned and
 * checked too. The sparse allreduce is in soak_sparse.c. With --inject,
 * a call passes soak_arg_*()'s values (a liar's count, type, operation,
 * root, per-rank counts, message size: soak_random.c), after its delay,
 * the snapshot of its outputs and any local bad-argument calls.
 *
 * Cost: the reference of a reduction over n ranks of c elements is n*c
 * table lookups; a check compares the whole output area once.
 */
#include "soak.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const gcx_dtype_t soak_red_types[] = {
    GCX_DT_F32, GCX_DT_F64, GCX_DT_I32, GCX_DT_I64, GCX_DT_F16, GCX_DT_BF16,
};

/* ---- generator, inputs, element access ---------------------------------- */

uint64_t soak_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

size_t soak_rng_below(uint64_t *s, size_t n)
{
    return n == 0 ? 0 : (size_t)(soak_rng_next(s) % n);
}

/* log-uniform in [0, max]: 0 with probability 1/32 */
size_t soak_rng_size(uint64_t *s, size_t max)
{
    double u;

    if (soak_rng_below(s, 32) == 0 || max == 0) {
        return 0;
    }
    u = (double)(soak_rng_next(s) >> 11) / 9007199254740992.0;
    return (size_t)exp(u * log((double)max + 1.0));
}

int8_t soak_t1[4096], soak_t2[1024];

void soak_tables_init(void)
{
    uint64_t s = 12345;

    for (int i = 0; i < 4096; ++i) {
        soak_t1[i] = (int8_t)((int)soak_rng_below(&s, 9) - 4);
    }
    for (int i = 0; i < 1024; ++i) {
        soak_t2[i] = (int8_t)((int)soak_rng_below(&s, 9) - 4);
    }
}

static uint16_t soak_to_half(float f) /* round to nearest even; |f| normal or 0 */
{
    uint32_t u, absu;
    uint16_t sign;

    memcpy(&u, &f, 4);
    sign = (uint16_t)((u >> 16) & 0x8000u);
    absu = u & 0x7fffffffu;
    if (absu == 0) {
        return sign;
    }
    absu = absu + 0xfffu + ((absu >> 13) & 1u);
    return sign | (uint16_t)((absu - 0x38000000u) >> 13);
}

static uint16_t soak_to_bf16(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void soak_put(gcx_dtype_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case GCX_DT_F32: ((float *)buf)[i] = (float)v; break;
    case GCX_DT_F64: ((double *)buf)[i] = v; break;
    case GCX_DT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case GCX_DT_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case GCX_DT_F16: ((uint16_t *)buf)[i] = soak_to_half((float)v); break;
    case GCX_DT_BF16: ((uint16_t *)buf)[i] = soak_to_bf16((float)v); break;
    default: ((uint8_t *)buf)[i] = (uint8_t)(int)v; break;
    }
}

/* count elements of stream (seq, a) from element `first` on */
static void soak_fill(gcx_dtype_t dt, void *buf, size_t count, uint64_t seq,
                      uint32_t a, size_t first)
{
    for (size_t i = 0; i < count; ++i) {
        soak_put(dt, buf, i, soak_val(seq, a, first + i));
    }
}

/* The reduction over ranks 0..n-1 of element i, as gcx must produce it
 * (AVG: the exact sum divided once, in the element type). */
static double soak_reduce_ref(gcx_dtype_t dt, gcx_op_t op, uint64_t seq,
                              int n, size_t i)
{
    double sum = 0, mx = -1e300, mn = 1e300;

    for (int r = 0; r < n; ++r) {
        double v = soak_val(seq, (uint32_t)r, i);
        sum += v;
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
    }
    switch (op) {
    case GCX_OP_MAX: return mx;
    case GCX_OP_MIN: return mn;
    case GCX_OP_SUM: return sum;
    default: break;
    }
    switch (dt) {
    case GCX_DT_I32:
    case GCX_DT_I64: return (double)((int64_t)sum / n);
    case GCX_DT_F64: return sum / n;
    default: return (double)((float)sum / (float)n); /* f32, f16, bf16 */
    }
}


/* ---- one collective step ------------------------------------------------- */

void soak_report(const soak_op_t *o, const char *what, size_t index,
                 const char *detail)
{
    ++S.st.wrong;
    if (S.reported++ < 20) {
        fprintf(stderr,
                "[soak rank %d] WRONG step %lld (collective #%llu) %s on "
                "family %d (config %d, %d ranks, rank %d): %s at %zu (%s; "
                "type %s, op %s, count %zu, root %d, in place %d%s%s)\n",
                S.rank, S.nstep, (unsigned long long)o->seq,
                soak_kind_names[o->kind], S.fam[o->fam].id,
                S.fam[o->fam].config, o->n, o->me, what, index, detail,
                gcx_dtype_name(o->dt), gcx_op_name(o->op), o->count, o->root,
                o->inplace, o->follow ? ", after an injected step" : "",
                o->kind == K_SPARSE && o->algo != NULL ? o->algo : "");
        soak_replay_line("wrong result");
    }
}

/* An output region with poisoned guards on both sides, at an element-aligned
 * offset inside the area. */
uint8_t *soak_place(uint64_t *rng, uint8_t *area, size_t area_bytes,
                    size_t bytes, size_t esz, int poison_body)
{
    size_t   room = area_bytes - 2 * SOAK_GUARD - bytes;
    size_t   off  = (soak_rng_below(rng, 64) * esz) % (room + 1);
    uint8_t *p;

    off -= off % esz;
    p = area + SOAK_GUARD + off;
    memset(p - SOAK_GUARD, SOAK_POISON, SOAK_GUARD);
    memset(p + bytes, SOAK_POISON, SOAK_GUARD);
    if (poison_body) {
        memset(p, SOAK_POISON, bytes);
    }
    return p;
}

void soak_check_guards(const soak_op_t *o, const uint8_t *p,
                       size_t bytes)
{
    for (size_t i = 0; i < SOAK_GUARD; ++i) {
        if (p[-(ptrdiff_t)SOAK_GUARD + (ptrdiff_t)i] != SOAK_POISON) {
            soak_report(o, "write before the output", SOAK_GUARD - i, "guard");
            return;
        }
        if (p[bytes + i] != SOAK_POISON) {
            soak_report(o, "write after the output", i, "guard");
            return;
        }
    }
}

/* Compares count elements of got against expected; reports the first. */
void soak_compare(const soak_op_t *o, const char *what,
                  const uint8_t *got, const uint8_t *want,
                  size_t count, size_t esz)
{
    char detail[96];

    if (count == 0 || memcmp(got, want, count * esz) == 0) {
        return;
    }
    for (size_t i = 0; i < count; ++i) {
        if (memcmp(got + i * esz, want + i * esz, esz) != 0) {
            uint64_t g = 0, w = 0;
            memcpy(&g, got + i * esz, esz);
            memcpy(&w, want + i * esz, esz);
            snprintf(detail, sizeof(detail), "bits 0x%llx, expected 0x%llx",
                     (unsigned long long)g, (unsigned long long)w);
            soak_report(o, what, i, detail);
            return;
        }
    }
}

/* Per-rank byte size of a step: a large area for steps alone, a sixteenth
 * for batched ones. */
static void soak_draw_common(soak_op_t *o, size_t max_bytes, int reduction)
{
    o->dt  = reduction ? soak_red_types[soak_rng_below(&o->rng, 6)] :
                         (gcx_dtype_t)soak_rng_below(&o->rng, GCX_DT_LAST);
    /* the ops soak_reduce_ref() models: SUM, MAX, MIN, AVG (PROD and the
     * bitwise ones are checked by the multirank suite) */
    o->op  = (gcx_op_t)soak_rng_below(&o->rng, GCX_OP_AVG + 1);
    o->esz = gcx_dtype_size(o->dt);
    o->count = soak_rng_size(&o->rng, max_bytes) / o->esz;
    o->root  = (int)soak_rng_below(&o->rng, (size_t)o->n);
    o->inplace = soak_rng_below(&o->rng, 3) == 0;
    soak_inject_pick(o); /* --inject: may lie about these */
}

/* Before a step's call: its delay, the snapshot of its outputs, the bad
 * calls of an injected step (soak_random.c). */
static void soak_pre_call(soak_op_t *o)
{
    soak_delay(o);
    soak_snapshot(o);
    soak_invalid_calls(o);
}

/* the per-rank counts a liar passes (INJ_VCOUNTS): one of them one more */
static const size_t *soak_lie_counts(soak_op_t *o, const size_t *honest,
                                     int which)
{
    int j;

    if (o->inj != INJ_VCOUNTS || !o->liar || (o->inj_var & 1) != which) {
        return honest;
    }
    memcpy(o->lie_counts, honest, (size_t)o->n * sizeof(size_t));
    /* another rank's block (this rank's own is sendcount's business) */
    j = (o->me + 1 + (o->inj_var >> 1) % (o->n - 1)) % o->n;
    o->lie_counts[j]++;
    return o->lie_counts;
}

/* (All)gather: c elements per rank into an n*c output, this rank's block
 * already in place there (in place; at the root only when rooted) or in
 * the send buffer. */
static void soak_gather_inputs(soak_op_t *o, size_t max_bytes, int rooted)
{
    size_t c;

    soak_draw_common(o, max_bytes / (size_t)o->n, 0);
    c            = o->count;
    o->out_bytes = (size_t)o->n * c * o->esz;
    o->out = soak_place(&o->rng, o->slot->recv, o->slot->bytes, o->out_bytes,
                        o->esz, 1);
    o->inplace = o->inplace && (!rooted || o->me == o->root);
    if (o->inplace) {
        soak_fill(o->dt, o->out + (size_t)o->me * c * o->esz, c, o->seq,
                  (uint32_t)o->me, 0);
    } else {
        o->in = o->slot->send;
        soak_fill(o->dt, o->in, c, o->seq, (uint32_t)o->me, 0);
    }
}

/* Draws the parameters, fills the inputs, posts. Returns the status of the
 * post (a non-blocking start, or the whole call when blocking). */
gcx_status_t soak_post(soak_op_t *o, size_t max_bytes)
{
    soak_slot_t  *sl = o->slot;
    uint64_t      seq = o->seq;
    gcx_request_t **rq = o->blocking ? NULL : &o->req[0];
    gcx_status_t  st = GCX_OK;
    size_t        c, total;
    int           n = o->n, me = o->me;

    o->nreq = o->blocking ? 0 : 1;
    switch (o->kind) {
    case K_ALLREDUCE:
        soak_draw_common(o, max_bytes, 1);
        c            = o->count;
        o->out_bytes = c * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            !o->inplace);
        if (o->inplace) {
            soak_fill(o->dt, o->out, c, seq, (uint32_t)me, 0);
        } else {
            o->in = sl->send;
            soak_fill(o->dt, o->in, c, seq, (uint32_t)me, 0);
        }
        soak_pre_call(o);
        st = gcx_allreduce(o->comm, o->inplace ? GCX_IN_PLACE : o->in, o->out,
                           soak_arg_count(o, c), soak_arg_dt(o),
                           soak_arg_op(o), rq);
        break;
    case K_BCAST:
        soak_draw_common(o, max_bytes, 0);
        c            = o->count;
        o->out_bytes = c * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            me != o->root);
        if (me == o->root) {
            soak_fill(o->dt, o->out, c, seq, (uint32_t)o->root, 0);
        }
        soak_pre_call(o);
        st = gcx_broadcast(o->comm, o->out, soak_arg_count(o, c),
                           soak_arg_dt(o), soak_arg_root(o), rq);
        break;
    case K_ALLGATHER:
        soak_gather_inputs(o, max_bytes, 0);
        c  = o->count;
        soak_pre_call(o);
        st = gcx_allgather(o->comm, o->inplace ? GCX_IN_PLACE : o->in, o->out,
                           soak_arg_count(o, c), soak_arg_dt(o), rq);
        break;
    case K_ALLGATHERV:
        soak_draw_common(o, max_bytes / (size_t)n, 0);
        total = 0;
        for (int r = 0; r < n; ++r) {
            o->counts[r] = soak_rng_below(&o->rng, 3) == 0 ? 0 :
                           soak_rng_below(&o->rng, o->count + 1);
            o->displs[r] = total + soak_rng_below(&o->rng, 8); /* gaps stay poison */
            total        = o->displs[r] + o->counts[r];
        }
        o->out_bytes = total * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            1);
        o->in = sl->send;
        soak_fill(o->dt, o->in, o->counts[me], seq, (uint32_t)me, 0);
        soak_pre_call(o);
        /* a liar passes one more for itself (sendcount) or for another */
        st = gcx_allgatherv(o->comm, o->in,
                            o->counts[me] + (o->inj == INJ_VCOUNTS && o->liar &&
                                             (o->inj_var & 1) == 0),
                            o->out, soak_lie_counts(o, o->counts, 1),
                            o->displs, soak_arg_dt(o), rq);
        break;
    case K_ALLTOALLV: {
        /* counts[i][j] from the step's generator: the same matrix on every
         * member; this rank's row is what it sends, its column what it
         * receives */
        size_t mat[SOAK_MAX_RANKS];
        size_t stotal = 0, rtotal = 0;

        soak_draw_common(o, max_bytes / (size_t)n, 0);
        for (int i = 0; i < n; ++i) {
            for (int j = 0; j < n; ++j) {
                size_t v = soak_rng_below(&o->rng, 4) == 0 ? 0 :
                           soak_rng_below(&o->rng, o->count + 1);
                if (i == me) {
                    o->scounts[j] = v;
                }
                if (j == me) {
                    mat[i] = v;
                }
            }
        }
        for (int r = 0; r < n; ++r) {
            o->sdispls[r] = stotal + soak_rng_below(&o->rng, 4);
            stotal        = o->sdispls[r] + o->scounts[r];
            o->counts[r]  = mat[r];
            o->displs[r]  = rtotal + soak_rng_below(&o->rng, 8);
            rtotal        = o->displs[r] + o->counts[r];
        }
        o->in = sl->send;
        for (int j = 0; j < n; ++j) {
            soak_fill(o->dt, o->in + o->sdispls[j] * o->esz, o->scounts[j], seq,
                      (uint32_t)(me * SOAK_MAX_RANKS + j), 0);
        }
        o->out_bytes = rtotal * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            1);
        soak_pre_call(o);
        /* a liar sends one more to a peer, or expects one more from one */
        st = gcx_alltoallv(o->comm, o->in, soak_lie_counts(o, o->scounts, 0),
                           o->sdispls, o->out, soak_lie_counts(o, o->counts, 1),
                           o->displs, soak_arg_dt(o), rq);
        break;
    }
    case K_REDUCE_SCATTER:
        soak_draw_common(o, max_bytes / (size_t)n, 1);
        c = o->count;
        if (o->inplace) {
            o->out_bytes = (size_t)n * c * o->esz; /* input, then result */
            o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes,
                                o->esz, 0);
            soak_fill(o->dt, o->out, (size_t)n * c, seq, (uint32_t)me, 0);
        } else {
            o->out_bytes = c * o->esz;
            o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes,
                                o->esz, 1);
            o->in = sl->send;
            soak_fill(o->dt, o->in, (size_t)n * c, seq, (uint32_t)me, 0);
        }
        soak_pre_call(o);
        st = gcx_reduce_scatter(o->comm, o->inplace ? GCX_IN_PLACE : o->in,
                                o->out, soak_arg_count(o, c), soak_arg_dt(o),
                                soak_arg_op(o), rq);
        break;
    case K_REDUCE:
        soak_draw_common(o, max_bytes, 1);
        c            = o->count;
        o->out_bytes = c * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            1);
        o->inplace = o->inplace && me == o->root;
        if (o->inplace) {
            soak_fill(o->dt, o->out, c, seq, (uint32_t)me, 0);
        } else {
            o->in = sl->send;
            soak_fill(o->dt, o->in, c, seq, (uint32_t)me, 0);
        }
        /* a non-root's recvbuf is ignored: sometimes NULL, else it must
         * stay untouched */
        total = soak_rng_below(&o->rng, 2);
        soak_pre_call(o);
        st = gcx_reduce(o->comm, o->inplace ? GCX_IN_PLACE : o->in,
                        me == o->root || total || soak_arg_root(o) == me ?
                            o->out : NULL,
                        soak_arg_count(o, c), soak_arg_dt(o), soak_arg_op(o),
                        soak_arg_root(o), rq);
        break;
    case K_GATHER:
        soak_gather_inputs(o, max_bytes, 1);
        c  = o->count;
        soak_pre_call(o);
        st = gcx_gather(o->comm, o->inplace ? GCX_IN_PLACE : o->in,
                        soak_arg_count(o, c), o->out, soak_arg_dt(o),
                        soak_arg_root(o), rq);
        break;
    case K_SCATTER:
        soak_draw_common(o, max_bytes / (size_t)n, 0);
        c          = o->count;
        o->inplace = o->inplace && me == o->root;
        o->in      = sl->send;
        if (me == o->root) {
            for (int r = 0; r < n; ++r) {
                soak_fill(o->dt, o->in + (size_t)r * c * o->esz, c, seq,
                          (uint32_t)r, 0);
            }
        }
        o->out_bytes = c * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            1);
        soak_pre_call(o);
        st = gcx_scatter(o->comm, o->in,
                         o->inplace ? (void *)GCX_IN_PLACE : o->out,
                         soak_arg_count(o, c), soak_arg_dt(o),
                         soak_arg_root(o), rq);
        break;
    case K_BARRIER:
        soak_inject_pick(o);
        soak_pre_call(o);
        st = gcx_barrier(o->comm, rq);
        break;
    case K_SENDRECV: {
        /* 1-3 messages with one tag to the right neighbour (arrive in order),
         * as many from the left; all non-blocking */
        int right = (me + 1) % n, left = (me + n - 1) % n;

        soak_draw_common(o, max_bytes / SOAK_MAX_MSGS, 0);
        o->nmsg      = 1 + (int)soak_rng_below(&o->rng, SOAK_MAX_MSGS);
        o->tag       = (int)(soak_rng_next(&o->rng) & 0x7fffffff);
        c            = o->count;
        o->out_bytes = (size_t)o->nmsg * c * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            1);
        o->in = sl->send;
        o->nreq = 0;
        for (int m = 0; m < o->nmsg; ++m) {
            soak_fill(o->dt, o->in + (size_t)m * c * o->esz, c,
                      seq * SOAK_MAX_MSGS + (uint64_t)m, (uint32_t)me, 0);
        }
        soak_pre_call(o);
        for (int m = 0; m < o->nmsg && st == GCX_OK; ++m) {
            st = gcx_recv(o->comm, o->out + (size_t)m * c * o->esz, c, o->dt,
                          left, o->tag, &o->req[o->nreq]);
            o->nreq += st == GCX_OK;
        }
        for (int m = 0; m < o->nmsg && st == GCX_OK; ++m) {
            /* INJ_P2P_SIZE: a liar sends one message one element longer or
             * shorter; its receiver gets GCX_ERR_MISMATCH for that one */
            size_t cm = o->inj == INJ_P2P_SIZE && o->liar &&
                                m == o->inj_var % o->nmsg ?
                            (c == 0 || (o->inj_var & 64) ? c + 1 : c - 1) :
                            c;
            st = gcx_send(o->comm, o->in + (size_t)m * c * o->esz, cm, o->dt,
                          right, o->tag, &o->req[o->nreq]);
            o->nreq += st == GCX_OK;
        }
        break;
    }
    case K_SPARSE:
        soak_sparse_prepare(o, max_bytes);
        soak_pre_call(o);
        st = gcx_sparse_allreduce(o->comm, &o->in_sp,
                                  o->want_dense ? (float *)o->out : NULL,
                                  o->want_sparse ? &o->out_sp : NULL,
                                  &o->sp_opts, rq);
        break;
    default:
        break;
    }
    return st; /* an error ends the run: nothing to clean up */
}

void soak_check(soak_op_t *o)
{
    uint64_t seq = o->seq;
    int      n = o->n, me = o->me;
    size_t   c = o->count, esz = o->esz;
    uint8_t *ref = S.ref;

    if (o->status != GCX_OK && o->status != GCX_ERR_MISMATCH) {
        return; /* a failure a kill explains (else the run ended) */
    }
    if (soak_inject_check(o) || o->status != GCX_OK) {
        return; /* an injected mismatch */
    }
    switch (o->kind) {
    case K_ALLREDUCE:
        for (size_t i = 0; i < c; ++i) {
            soak_put(o->dt, ref, i, soak_reduce_ref(o->dt, o->op, seq, n, i));
        }
        soak_compare(o, "allreduce result", o->out, ref, c, esz);
        break;
    case K_BCAST:
        soak_fill(o->dt, ref, c, seq, (uint32_t)o->root, 0);
        soak_compare(o, "broadcast result", o->out, ref, c, esz);
        break;
    case K_ALLGATHER:
    case K_GATHER:
        if (o->kind == K_GATHER && me != o->root) {
            /* recvbuf is ignored here: it must stay as poisoned */
            memset(ref, SOAK_POISON, o->out_bytes);
            soak_compare(o, "non-root gather buffer", o->out, ref,
                         o->out_bytes, 1);
            break;
        }
        for (int r = 0; r < n; ++r) {
            soak_fill(o->dt, ref + (size_t)r * c * esz, c, seq, (uint32_t)r, 0);
        }
        soak_compare(o, "gathered blocks", o->out, ref, (size_t)n * c, esz);
        break;
    case K_ALLGATHERV:
    case K_ALLTOALLV:
        memset(ref, SOAK_POISON, o->out_bytes);
        for (int r = 0; r < n; ++r) {
            uint32_t a = o->kind == K_ALLGATHERV ?
                             (uint32_t)r :
                             (uint32_t)(r * SOAK_MAX_RANKS + me);
            soak_fill(o->dt, ref + o->displs[r] * esz, o->counts[r], seq, a, 0);
        }
        soak_compare(o, "v blocks and gaps", o->out, ref, o->out_bytes / esz,
                     esz);
        break;
    case K_REDUCE_SCATTER:
        for (size_t i = 0; i < c; ++i) {
            soak_put(o->dt, ref, i,
                     soak_reduce_ref(o->dt, o->op, seq, n, (size_t)me * c + i));
        }
        soak_compare(o, "reduce_scatter block", o->out, ref, c, esz);
        break;
    case K_REDUCE:
        if (me != o->root) {
            memset(ref, SOAK_POISON, o->out_bytes);
            soak_compare(o, "non-root reduce buffer", o->out, ref,
                         o->out_bytes, 1);
            break;
        }
        for (size_t i = 0; i < c; ++i) {
            soak_put(o->dt, ref, i, soak_reduce_ref(o->dt, o->op, seq, n, i));
        }
        soak_compare(o, "reduce result", o->out, ref, c, esz);
        break;
    case K_SCATTER:
        if (o->inplace) {
            memset(ref, SOAK_POISON, o->out_bytes); /* untouched */
        } else {
            soak_fill(o->dt, ref, c, seq, (uint32_t)me, 0);
        }
        soak_compare(o, "scattered block", o->out, ref, c, esz);
        if (me == o->root) { /* the root's input is read only */
            for (int r = 0; r < n; ++r) {
                soak_fill(o->dt, ref + (size_t)r * c * esz, c, seq,
                          (uint32_t)r, 0);
            }
            soak_compare(o, "scatter input", o->in, ref, (size_t)n * c, esz);
        }
        break;
    case K_SENDRECV: {
        int left = (me + n - 1) % n, bad = -1;
        if (o->inj == INJ_P2P_SIZE) {
            /* the message the left neighbour sent with another size fails
             * here with GCX_ERR_MISMATCH, the others arrive; this rank's
             * own wrong send may end either way */
            int lied = soak_liar_of(o, left), m0 = o->inj_var % o->nmsg;
            for (int q = 0; q < o->nreq; ++q) {
                int is_recv = q < o->nmsg, m = is_recv ? q : q - o->nmsg;
                gcx_status_t want = is_recv && lied && m == m0 ?
                                        GCX_ERR_MISMATCH : GCX_OK;
                if (o->rst[q] != want &&
                    !(!is_recv && o->liar && m == m0 &&
                      o->rst[q] == GCX_ERR_MISMATCH)) {
                    char d[128];
                    snprintf(d, sizeof(d), "%s %d of %d returned %s, expected %s",
                             is_recv ? "receive" : "send", m, o->nmsg,
                             gcx_strerror(o->rst[q]), gcx_strerror(want));
                    soak_report(o, "message size injection", (size_t)m, d);
                }
            }
            bad = lied ? m0 : -1;
        }
        for (int m = 0; m < o->nmsg; ++m) {
            if (m == bad) {
                continue; /* its content is undefined */
            }
            soak_fill(o->dt, ref, c, seq * SOAK_MAX_MSGS + (uint64_t)m,
                      (uint32_t)left, 0);
            soak_compare(o, "received message", o->out + (size_t)m * c * esz,
                         ref, c, esz);
        }
        break;
    }
    case K_SPARSE:
        soak_sparse_check(o);
        return;
    default:
        return;
    }
    if (o->out != NULL && o->kind != K_BARRIER) {
        soak_check_guards(o, o->out, o->out_bytes);
    }
}

