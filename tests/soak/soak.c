/*
 * soak.c - gcx_soak: a long seeded mix of collectives, algorithms and
 * communicators, every result checked, memory and descriptors watched
 * (issue 15, "Hardening").
 *
 * Idea: every rank draws the same sequence from one seeded generator (the
 * seed is rank 0's, broadcast first), one draw per step, so the ranks agree
 * on every kind, size, type, operation, root, algorithm and communicator
 * event without talking about it; what a step needs beyond that comes from
 * a generator seeded by that draw. A step is a collective (allreduce,
 * broadcast, allgather(v), alltoallv, reduce-scatter, reduce, gather,
 * scatter, barrier, send/recv around a ring, sparse allreduce; every type
 * and operation; in place or not; from a byte to --max-bytes), a batch of
 * 2-4 of them posted non-blocking and waited in a shuffled order, or a
 * communicator event (create over an OOB of the world with forced
 * algorithms, create from the environment, split, dup, destroy). Split
 * families have one communicator per color; a rank outside one skips its
 * steps. Inputs are a deterministic function of (step, rank, element), small
 * integers exact in every type (f16 and bf16 included), so each rank
 * computes the expected result of every peer locally and compares bits;
 * 64 guard bytes around each output catch a write out of bounds.
 *
 * Memory: buffers are allocated and touched once at start. At a
 * checkpoint every --every steps each rank reads its resident set
 * (/proc/self/statm) and its open descriptors (/proc/self/fd); after
 * --warmup steps every family but the world is destroyed and the baseline
 * is taken, at the end again. --fd-exact fails a rank whose descriptor
 * count is not back at its baseline; --rss-growth-kb K fails a rank whose
 * resident set grew by more than K kB per 10^4 steps after the baseline.
 *
 * --churn N instead creates and destroys N communicators (every 50th from
 * the environment, the rest over the OOB, split and dup), each checked with
 * one allreduce; run in the ASan build, LeakSanitizer reports what they
 * leak at exit.
 *
 * Cost: the reference of a reduction over n ranks of c elements is n*c
 * table lookups; a sparse step regenerates every member's input (O(sum of
 * nnz) plus O(N)). Buffers: about (4 + 4P) * --max-bytes per rank.
 * Public headers only.
 */
#include <gcx/gcx.h>
#include <gcx/sparse.h>
#include <gcx/sparse_vec.h>

#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SOAK_MAX_RANKS 64
#define SOAK_MAX_FAM   8   /* live families, the world included */
#define SOAK_MAX_BATCH 4
#define SOAK_GUARD     64  /* bytes checked on each side of an output */
#define SOAK_POISON    0xA5
#define SOAK_MAX_MSGS  3   /* send/recv messages per step */
#define SOAK_NSLOT     SOAK_MAX_BATCH

enum {
    K_ALLREDUCE, K_BCAST, K_ALLGATHER, K_ALLGATHERV, K_ALLTOALLV,
    K_REDUCE_SCATTER, K_REDUCE, K_GATHER, K_SCATTER, K_BARRIER, K_SENDRECV,
    K_SPARSE, K_NCOLL,
    /* communicator events */
    K_CREATE = K_NCOLL, K_CREATE_ENV, K_SPLIT, K_DUP, K_DESTROY, K_NKINDS
};

static const char *const soak_kind_names[K_NKINDS] = {
    "allreduce", "broadcast", "allgather", "allgatherv", "alltoallv",
    "reduce_scatter", "reduce", "gather", "scatter", "barrier", "send_recv",
    "sparse_allreduce", "create(oob)", "create(env)", "split", "dup",
    "destroy",
};

/* Configurations a created communicator may get: forced algorithms, small
 * pipeline chunks and thresholds ({name, value}, ..., NULL). */
static const char *const soak_configs[][9] = {
    {NULL},
    {"ALLREDUCE_ALGO", "recursive_doubling", NULL},
    {"ALLREDUCE_ALGO", "ring", "PIPELINE_CHUNK", "4K", NULL},
    {"ALLREDUCE_ALGO", "rabenseifner", NULL},
    {"BCAST_ALGO", "binomial", NULL},
    {"BCAST_ALGO", "chain", "PIPELINE_CHUNK", "8K", NULL},
    {"ALLREDUCE_SMALL_MSG", "1K", "ALLREDUCE_LARGE_MSG", "32K",
     "BCAST_SMALL_MSG", "1K", NULL},
    {"SPARSE_ALGO", "split", "NET_LATENCY_US", "5", "NET_BANDWIDTH_GBPS",
     "10", NULL},
    {"SPARSE_ALGO", "balanced_split", "SPARSE_FEEDBACK", "n", NULL},
    {"CHECK_ARGS", "n", NULL},
    {"PROGRESS_YIELD", "n", "PIPELINE_CHUNK", "64K", NULL},
};
#define SOAK_NCONFIGS ((int)(sizeof(soak_configs) / sizeof(soak_configs[0])))

static const char *const soak_sparse_algos[] = {
    NULL, "auto", "allgather", "recursive_doubling", "split",
    "balanced_split",
};

static const gcx_dtype_t soak_red_types[] = {
    GCX_DT_F32, GCX_DT_F64, GCX_DT_I32, GCX_DT_I64, GCX_DT_F16, GCX_DT_BF16,
};

/* ---- generator, inputs, element access ---------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rng_below(uint64_t *s, size_t n)
{
    return n == 0 ? 0 : (size_t)(rng_next(s) % n);
}

/* log-uniform in [0, max]: 0 with probability 1/32 */
static size_t rng_size(uint64_t *s, size_t max)
{
    double u;

    if (rng_below(s, 32) == 0 || max == 0) {
        return 0;
    }
    u = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return (size_t)exp(u * log((double)max + 1.0));
}

static int8_t soak_t1[4096], soak_t2[1024];

static void soak_tables_init(void)
{
    uint64_t s = 12345;

    for (int i = 0; i < 4096; ++i) {
        soak_t1[i] = (int8_t)((int)rng_below(&s, 9) - 4);
    }
    for (int i = 0; i < 1024; ++i) {
        soak_t2[i] = (int8_t)((int)rng_below(&s, 9) - 4);
    }
}

/* Input of step `seq`, stream `a` (a rank, or a pair), element i: an
 * integer in [-8, 8], aperiodic over 4M elements. Sums over 64 ranks stay
 * exact in f16 and bf16. */
static inline int soak_val(uint64_t seq, uint32_t a, size_t i)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull + (uint64_t)a * 0xc2b2ae3d27d4eb4full;

    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return soak_t1[(i + h) & 4095] + soak_t2[((i >> 12) + (h >> 20)) & 1023];
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

/* ---- state ------------------------------------------------------------------ */

typedef struct {
    int         live;
    int         id;            /* running number, for messages */
    int         config;        /* index into soak_configs */
    int         how;           /* K_CREATE.. or -1 for the world */
    gcx_comm_t *comm;          /* NULL: this rank is in none of its comms */
    int         n;             /* members of this rank's communicator */
    int         members[SOAK_MAX_RANKS]; /* their world ranks, in order */
} soak_fam_t;

typedef struct {
    uint8_t *send, *recv;
    size_t   bytes; /* of each area */
} soak_slot_t;

typedef struct {
    uint64_t ops, wrong, events;
    uint64_t per_kind[K_NKINDS];
    uint64_t per_config[SOAK_NCONFIGS];
    uint64_t per_type[GCX_DT_LAST];
    uint64_t per_op[GCX_OP_LAST];
    uint64_t per_sparse_algo[6];
    uint64_t batches, nonblocking;
    uint64_t bytes;
    double   seconds[K_NKINDS + 1]; /* this rank's, by kind; batches last */
} soak_stats_t;

static struct {
    int          rank, size;
    gcx_comm_t  *world;
    soak_fam_t   fam[SOAK_MAX_FAM];
    int          next_fam_id;
    soak_slot_t  slot[SOAK_NSLOT];
    uint8_t     *ref;       /* expected results */
    uint8_t     *aux;       /* sparse reference: flags, order */
    size_t       aux_bytes;
    soak_stats_t st;
    int          reported;  /* mismatches printed so far */
} S;

/* ---- one collective step ------------------------------------------------- */

typedef struct {
    int            kind, fam;
    uint64_t       seq;
    gcx_comm_t    *comm;
    int            n, me;
    gcx_dtype_t    dt;
    gcx_op_t       op;
    size_t         count, esz;
    int            root, inplace, blocking;
    soak_slot_t   *slot;
    uint8_t       *out;     /* where the checked result lands */
    size_t         out_bytes;
    uint8_t       *in;      /* send buffer */
    size_t         counts[SOAK_MAX_RANKS], displs[SOAK_MAX_RANKS];
    size_t         scounts[SOAK_MAX_RANKS], sdispls[SOAK_MAX_RANKS];
    gcx_request_t *req[2 * SOAK_MAX_MSGS];
    int            nreq;
    int            nmsg, tag;
    /* sparse */
    gcx_sparse_vec_t in_sp, out_sp;
    const char      *algo;
    int              algo_index;
    gcx_sparse_allreduce_opts_t sp_opts;
    int              want_dense, want_sparse, want_flags;
    uint8_t         *flags;
    uint64_t         sp_seed; /* of the members' inputs */
    size_t           sp_gap;  /* mean distance of their indices */
    uint64_t         rng;    /* the step's own generator */
} soak_op_t;

static void soak_report(const soak_op_t *o, const char *what, size_t index,
                        const char *detail)
{
    ++S.st.wrong;
    if (S.reported++ < 20) {
        fprintf(stderr,
                "[soak rank %d] WRONG step %llu %s on family %d (config %d, "
                "%d ranks, rank %d): %s at %zu (%s; type %s, op %s, count "
                "%zu, root %d, in place %d)\n",
                S.rank, (unsigned long long)o->seq, soak_kind_names[o->kind],
                S.fam[o->fam].id, S.fam[o->fam].config, o->n, o->me, what,
                index, detail, gcx_dtype_name(o->dt), gcx_op_name(o->op),
                o->count, o->root, o->inplace);
    }
}

/* An output region with poisoned guards on both sides, at an element-aligned
 * offset inside the area. */
static uint8_t *soak_place(uint64_t *rng, uint8_t *area, size_t area_bytes,
                           size_t bytes, size_t esz, int poison_body)
{
    size_t   room = area_bytes - 2 * SOAK_GUARD - bytes;
    size_t   off  = (rng_below(rng, 64) * esz) % (room + 1);
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

static void soak_check_guards(const soak_op_t *o, const uint8_t *p,
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
static void soak_compare(const soak_op_t *o, const char *what,
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
    o->dt  = reduction ? soak_red_types[rng_below(&o->rng, 6)] :
                         (gcx_dtype_t)rng_below(&o->rng, GCX_DT_LAST);
    o->op  = (gcx_op_t)rng_below(&o->rng, GCX_OP_LAST);
    o->esz = gcx_dtype_size(o->dt);
    o->count = rng_size(&o->rng, max_bytes) / o->esz;
    o->root  = (int)rng_below(&o->rng, (size_t)o->n);
    o->inplace = rng_below(&o->rng, 3) == 0;
}

static void soak_sparse_prepare(soak_op_t *o, size_t max_bytes);
static void soak_sparse_check(soak_op_t *o);

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
static gcx_status_t soak_post(soak_op_t *o, size_t max_bytes)
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
        st = gcx_allreduce(o->comm, o->inplace ? GCX_IN_PLACE : o->in, o->out,
                           c, o->dt, o->op, rq);
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
        st = gcx_broadcast(o->comm, o->out, c, o->dt, o->root, rq);
        break;
    case K_ALLGATHER:
        soak_gather_inputs(o, max_bytes, 0);
        c  = o->count;
        st = gcx_allgather(o->comm, o->inplace ? GCX_IN_PLACE : o->in, o->out,
                           c, o->dt, rq);
        break;
    case K_ALLGATHERV:
        soak_draw_common(o, max_bytes / (size_t)n, 0);
        total = 0;
        for (int r = 0; r < n; ++r) {
            o->counts[r] = rng_below(&o->rng, 3) == 0 ? 0 :
                           rng_below(&o->rng, o->count + 1);
            o->displs[r] = total + rng_below(&o->rng, 8); /* gaps stay poison */
            total        = o->displs[r] + o->counts[r];
        }
        o->out_bytes = total * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            1);
        o->in = sl->send;
        soak_fill(o->dt, o->in, o->counts[me], seq, (uint32_t)me, 0);
        st = gcx_allgatherv(o->comm, o->in, o->counts[me], o->out, o->counts,
                            o->displs, o->dt, rq);
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
                size_t v = rng_below(&o->rng, 4) == 0 ? 0 :
                           rng_below(&o->rng, o->count + 1);
                if (i == me) {
                    o->scounts[j] = v;
                }
                if (j == me) {
                    mat[i] = v;
                }
            }
        }
        for (int r = 0; r < n; ++r) {
            o->sdispls[r] = stotal + rng_below(&o->rng, 4);
            stotal        = o->sdispls[r] + o->scounts[r];
            o->counts[r]  = mat[r];
            o->displs[r]  = rtotal + rng_below(&o->rng, 8);
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
        st = gcx_alltoallv(o->comm, o->in, o->scounts, o->sdispls, o->out,
                           o->counts, o->displs, o->dt, rq);
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
        st = gcx_reduce_scatter(o->comm, o->inplace ? GCX_IN_PLACE : o->in,
                                o->out, c, o->dt, o->op, rq);
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
        total = rng_below(&o->rng, 2);
        st = gcx_reduce(o->comm, o->inplace ? GCX_IN_PLACE : o->in,
                        me == o->root || total ? o->out : NULL, c, o->dt,
                        o->op, o->root, rq);
        break;
    case K_GATHER:
        soak_gather_inputs(o, max_bytes, 1);
        c  = o->count;
        st = gcx_gather(o->comm, o->inplace ? GCX_IN_PLACE : o->in, c, o->out,
                        o->dt, o->root, rq);
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
        st = gcx_scatter(o->comm, o->in,
                         o->inplace ? (void *)GCX_IN_PLACE : o->out, c, o->dt,
                         o->root, rq);
        break;
    case K_BARRIER:
        st = gcx_barrier(o->comm, rq);
        break;
    case K_SENDRECV: {
        /* 1-3 messages with one tag to the right neighbour (arrive in order),
         * as many from the left; all non-blocking */
        int right = (me + 1) % n, left = (me + n - 1) % n;

        soak_draw_common(o, max_bytes / SOAK_MAX_MSGS, 0);
        o->nmsg      = 1 + (int)rng_below(&o->rng, SOAK_MAX_MSGS);
        o->tag       = (int)(rng_next(&o->rng) & 0x7fffffff);
        c            = o->count;
        o->out_bytes = (size_t)o->nmsg * c * o->esz;
        o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, o->esz,
                            1);
        o->in = sl->send;
        o->nreq = 0;
        for (int m = 0; m < o->nmsg && st == GCX_OK; ++m) {
            st = gcx_recv(o->comm, o->out + (size_t)m * c * o->esz, c, o->dt,
                          left, o->tag, &o->req[o->nreq++]);
        }
        for (int m = 0; m < o->nmsg && st == GCX_OK; ++m) {
            uint8_t *b = o->in + (size_t)m * c * o->esz;
            soak_fill(o->dt, b, c, seq * SOAK_MAX_MSGS + (uint64_t)m,
                      (uint32_t)me, 0);
            st = gcx_send(o->comm, b, c, o->dt, right, o->tag,
                          &o->req[o->nreq++]);
        }
        break;
    }
    case K_SPARSE:
        soak_sparse_prepare(o, max_bytes);
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

static void soak_check(soak_op_t *o)
{
    uint64_t seq = o->seq;
    int      n = o->n, me = o->me;
    size_t   c = o->count, esz = o->esz;
    uint8_t *ref = S.ref;

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
        int left = (me + n - 1) % n;
        for (int m = 0; m < o->nmsg; ++m) {
            soak_fill(o->dt, ref + (size_t)m * c * esz, c,
                      seq * SOAK_MAX_MSGS + (uint64_t)m, (uint32_t)left, 0);
        }
        soak_compare(o, "received messages", o->out, ref, (size_t)o->nmsg * c,
                     esz);
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

/* ---- sparse allreduce ------------------------------------------------------ */

/* Rank r's input of a sparse step: indices with gaps of mean 1/density,
 * values from the step's stream. Writes at most cap entries; returns nnz. */
static size_t soak_sparse_input(uint64_t opseed, int r, size_t N,
                                size_t gap, uint32_t *idx, float *val,
                                uint64_t seq, size_t cap)
{
    uint64_t s   = opseed ^ (0x51ed27ull * (uint64_t)(r + 1));
    size_t   nnz = 0, i = rng_below(&s, gap);

    while (i < N && nnz < cap) {
        idx[nnz] = (uint32_t)i;
        val[nnz] = (float)soak_val(seq, (uint32_t)r, i);
        ++nnz;
        i += 1 + rng_below(&s, 2 * gap - 1);
    }
    return nnz;
}

typedef struct {
    uint32_t idx;
    float    sum;
} soak_entry_t;

static int soak_entry_cmp(const void *a, const void *b)
{
    const soak_entry_t *x = a, *y = b;
    float               ax = fabsf(x->sum), ay = fabsf(y->sum);

    if (ax != ay) {
        return ax > ay ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* The expected result of a sparse step, from every member's input: the
 * dense sum in S.ref (N floats), the result's indices flagged in S.aux (N
 * bytes); scratch after the sum. Copies this rank's input into `own_idx`,
 * `own_val` when given. Returns the result size; *sumnnz_p gets the sum of
 * the inputs' nnz. Built at the post (the output's capacity depends on it)
 * and again at the check (a batch may hold several sparse steps). */
static size_t soak_sparse_reference(soak_op_t *o, uint32_t *own_idx,
                                    float *own_val, size_t *sumnnz_p)
{
    size_t    N = o->count, nnz, K = 0, topk = o->sp_opts.topk;
    float    *dense_ref = (float *)S.ref;
    uint8_t  *present   = S.aux;
    uint32_t *tmp_idx   = (uint32_t *)(S.ref + N * 4);
    float    *tmp_val   = (float *)(S.ref + N * 8);

    *sumnnz_p = 0;
    memset(dense_ref, 0, N * sizeof(float));
    memset(present, 0, N);
    for (int r = 0; r < o->n; ++r) {
        nnz = soak_sparse_input(o->sp_seed, r, N, o->sp_gap, tmp_idx, tmp_val,
                                o->seq, N);
        *sumnnz_p += nnz;
        for (size_t j = 0; j < nnz; ++j) {
            dense_ref[tmp_idx[j]] += tmp_val[j];
            present[tmp_idx[j]] = 1;
        }
        if (r == o->me && own_idx != NULL) {
            memcpy(own_idx, tmp_idx, nnz * 4);
            memcpy(own_val, tmp_val, nnz * 4);
            o->in_sp.nnz = o->in_sp.capacity = nnz;
        }
    }
    for (size_t i = 0; i < N; ++i) {
        K += present[i];
    }
    if (topk > 0 && topk < K) {
        /* keep the topk largest |sum|, ties to the lower index */
        soak_entry_t *e = (soak_entry_t *)(S.ref + N * 4);
        size_t        m = 0;
        for (size_t i = 0; i < N; ++i) {
            if (present[i]) {
                e[m].idx   = (uint32_t)i;
                e[m++].sum = dense_ref[i];
            }
        }
        qsort(e, m, sizeof(*e), soak_entry_cmp);
        memset(present, 0, N);
        for (size_t j = 0; j < topk; ++j) {
            present[e[j].idx] = 1;
        }
        for (size_t i = 0; i < N; ++i) {
            if (!present[i]) {
                dense_ref[i] = 0;
            }
        }
        K = topk;
    }
    return K;
}

/* Layout in the slot: send = own idx | own val | flags; recv = dense out |
 * sparse out idx | sparse out val. */
static void soak_sparse_prepare(soak_op_t *o, size_t max_bytes)
{
    static const size_t gaps[] = {1, 2, 10, 100, 1000};
    soak_slot_t *sl = o->slot;
    size_t       N, sumnnz, cap;

    o->dt  = GCX_DT_F32;
    o->esz = 4;
    N      = rng_size(&o->rng, max_bytes / 16);
    N      = N == 0 ? 1 : N;
    o->sp_gap     = gaps[rng_below(&o->rng, 5)];
    o->algo_index = (int)rng_below(&o->rng, 6);
    o->algo       = soak_sparse_algos[o->algo_index];
    o->want_dense = o->want_sparse = 1;
    switch (rng_below(&o->rng, 3)) {
    case 0: o->want_sparse = 0; break;
    case 1: o->want_dense = 0; break;
    default: break;
    }
    o->want_flags = rng_below(&o->rng, 2) == 0;
    o->sp_opts.topk = rng_below(&o->rng, 4) == 0 ? 1 + rng_below(&o->rng, N) : 0;
    o->sp_opts.algo = o->algo;
    o->sp_seed      = rng_next(&o->rng);
    o->count        = N;

    o->in_sp.idx       = (uint32_t *)sl->send;
    o->in_sp.val       = (float *)(sl->send + N * 4);
    o->in_sp.dense_len = N;
    o->in_sp.owned     = 0;
    (void)soak_sparse_reference(o, o->in_sp.idx, o->in_sp.val, &sumnnz);

    /* flags after the input; outputs in the recv area */
    o->flags = sl->send + 2 * N * 4 + SOAK_GUARD;
    memset(o->flags, SOAK_POISON, o->in_sp.nnz + SOAK_GUARD);
    o->sp_opts.in_result = o->want_flags ? o->flags : NULL;
    cap = o->sp_opts.topk > 0 ? (o->sp_opts.topk < N ? o->sp_opts.topk : N) :
                                (sumnnz < N ? sumnnz : N);
    o->out_bytes = N * 4;
    o->out = sl->recv + SOAK_GUARD;
    memset(o->out - SOAK_GUARD, SOAK_POISON, N * 4 + 2 * SOAK_GUARD);
    o->out_sp.idx = (uint32_t *)(o->out + N * 4 + SOAK_GUARD);
    o->out_sp.val = (float *)(o->out_sp.idx + cap);
    memset(o->out_sp.idx, SOAK_POISON, cap * 8 + SOAK_GUARD);
    o->out_sp.nnz       = 0;
    o->out_sp.capacity  = cap;
    o->out_sp.dense_len = N;
    o->out_sp.owned     = 0;
}

static void soak_sparse_check(soak_op_t *o)
{
    size_t         sumnnz, K = soak_sparse_reference(o, NULL, NULL, &sumnnz);
    size_t         N = o->count, j = 0;
    const float   *dense_ref = (const float *)S.ref;
    const uint8_t *present   = S.aux;
    char           detail[96];

    if (o->want_dense) {
        soak_compare(o, "sparse allreduce dense sum", o->out,
                     (const uint8_t *)dense_ref, N, 4);
        soak_check_guards(o, o->out, N * 4);
    }
    if (o->want_sparse) {
        if (o->out_sp.nnz != K) {
            snprintf(detail, sizeof(detail), "%zu entries, expected %zu",
                     o->out_sp.nnz, K);
            soak_report(o, "sparse allreduce result size", 0, detail);
            return;
        }
        for (size_t i = 0; i < N && j < K; ++i) {
            if (!present[i]) {
                continue;
            }
            if (o->out_sp.idx[j] != i || memcmp(&o->out_sp.val[j], &dense_ref[i], 4)) {
                snprintf(detail, sizeof(detail), "(%u, %g), expected (%zu, %g)",
                         o->out_sp.idx[j], (double)o->out_sp.val[j], i,
                         (double)dense_ref[i]);
                soak_report(o, "sparse allreduce entry", j, detail);
                return;
            }
            ++j;
        }
    }
    if (o->want_flags) {
        for (size_t k = 0; k < o->in_sp.nnz; ++k) {
            if (o->flags[k] != present[o->in_sp.idx[k]]) {
                snprintf(detail, sizeof(detail), "flag %u for index %u",
                         o->flags[k], o->in_sp.idx[k]);
                soak_report(o, "sparse allreduce in_result", k, detail);
                return;
            }
        }
        for (size_t k = 0; k < SOAK_GUARD; ++k) {
            if (o->flags[o->in_sp.nnz + k] != SOAK_POISON) {
                soak_report(o, "write after in_result", k, "guard");
                return;
            }
        }
    }
}

/* ---- communicators ------------------------------------------------------- */

static gcx_status_t soak_world_allgather(const void *sendbuf, void *recvbuf,
                                         size_t len, void *ctx)
{
    return gcx_allgather((gcx_comm_t *)ctx, sendbuf, recvbuf, len, GCX_DT_U8,
                         NULL);
}

static void soak_die(const char *what, gcx_status_t st)
{
    fprintf(stderr, "[soak rank %d] %s failed: %s\n", S.rank, what,
            gcx_strerror(st));
    exit(2);
}

static int soak_free_fam(void)
{
    for (int f = 1; f < SOAK_MAX_FAM; ++f) {
        if (!S.fam[f].live) {
            return f;
        }
    }
    return -1;
}

/* live families other than the world, in slot order */
static int soak_live_list(int *list, int with_world)
{
    int m = 0;

    for (int f = with_world ? 0 : 1; f < SOAK_MAX_FAM; ++f) {
        if (S.fam[f].live) {
            list[m++] = f;
        }
    }
    return m;
}

static void soak_verify_fam(const soak_fam_t *fam)
{
    int me = -1;

    if (fam->comm == NULL) {
        return;
    }
    for (int i = 0; i < fam->n; ++i) {
        if (fam->members[i] == S.rank) {
            me = i;
        }
    }
    if (gcx_comm_size(fam->comm) != fam->n || gcx_comm_rank(fam->comm) != me) {
        fprintf(stderr,
                "[soak rank %d] WRONG family %d: rank %d of %d, expected %d of "
                "%d\n",
                S.rank, fam->id, gcx_comm_rank(fam->comm),
                gcx_comm_size(fam->comm), me, fam->n);
        ++S.st.wrong;
    }
}

static void soak_destroy_fam(int f)
{
    if (S.fam[f].comm != NULL) {
        gcx_comm_destroy(S.fam[f].comm);
    }
    memset(&S.fam[f], 0, sizeof(S.fam[f]));
}

static void soak_destroy_all(void)
{
    for (int f = 1; f < SOAK_MAX_FAM; ++f) {
        if (S.fam[f].live) {
            soak_destroy_fam(f);
        }
    }
}

/* A communicator over the whole world: over the OOB (from_env = 0) or from
 * the environment, with configuration `config`. */
static gcx_comm_t *soak_create(int config, int from_env)
{
    gcx_config_t *cfg  = NULL;
    gcx_comm_t   *comm = NULL;
    gcx_oob_t     oob  = {soak_world_allgather, S.world, S.rank, S.size};
    gcx_status_t  st   = gcx_config_read(&cfg);

    for (int k = 0; st == GCX_OK && soak_configs[config][k] != NULL; k += 2) {
        st = gcx_config_set(cfg, soak_configs[config][k],
                            soak_configs[config][k + 1]);
    }
    if (st == GCX_OK) {
        st = gcx_comm_create(from_env ? NULL : &oob, cfg, &comm);
    }
    gcx_config_release(cfg);
    if (st != GCX_OK) {
        soak_die(from_env ? "gcx_comm_create (environment)" :
                            "gcx_comm_create (oob)", st);
    }
    return comm;
}

/* One communicator event, the same on every rank. */
static void soak_event(int kind, uint64_t *rng)
{
    int          live[SOAK_MAX_FAM], nlive = soak_live_list(live, 0);
    int          f = soak_free_fam(), p;
    soak_fam_t  *fam;
    gcx_status_t st;

    if (kind == K_DESTROY) {
        if (nlive > 0) {
            soak_destroy_fam(live[rng_below(rng, (size_t)nlive)]);
            ++S.st.per_kind[K_DESTROY];
        }
        return;
    }
    if (f < 0) { /* full: the oldest slot makes room */
        f = 1 + (int)rng_below(rng, SOAK_MAX_FAM - 1);
        soak_destroy_fam(f);
        ++S.st.per_kind[K_DESTROY];
    }
    nlive = soak_live_list(live, 1);
    fam   = &S.fam[f];
    fam->id = ++S.next_fam_id;
    fam->how = kind;
    switch (kind) {
    case K_CREATE:
    case K_CREATE_ENV:
        fam->config = (int)rng_below(rng, SOAK_NCONFIGS);
        fam->comm   = soak_create(fam->config, kind == K_CREATE_ENV);
        fam->n      = S.size;
        for (int r = 0; r < S.size; ++r) {
            fam->members[r] = r;
        }
        break;
    case K_SPLIT:
    case K_DUP: {
        soak_fam_t *par;
        int         color[SOAK_MAX_RANKS], key[SOAK_MAX_RANKS];
        int         ncolors = 1 + (int)rng_below(rng, 3), mine;

        p   = live[rng_below(rng, (size_t)nlive)];
        par = &S.fam[p];
        for (int r = 0; r < S.size; ++r) { /* per world rank */
            color[r] = rng_below(rng, 8) == 0 ? GCX_UNDEFINED :
                                                (int)rng_below(rng, (size_t)ncolors);
            key[r]   = (int)rng_below(rng, 4) - 2;
        }
        fam->config = par->config;
        if (par->comm == NULL) {
            fam->comm = NULL; /* not in the parent: in none of its children */
            break;
        }
        if (kind == K_DUP) {
            st = gcx_comm_dup(par->comm, &fam->comm);
            if (st != GCX_OK) {
                soak_die("gcx_comm_dup", st);
            }
            fam->n = par->n;
            memcpy(fam->members, par->members, sizeof(fam->members));
            break;
        }
        mine = color[S.rank];
        st   = gcx_comm_split(par->comm, mine, key[S.rank], &fam->comm);
        if (st != GCX_OK) {
            soak_die("gcx_comm_split", st);
        }
        if (mine == GCX_UNDEFINED) {
            if (fam->comm != NULL) {
                fprintf(stderr, "[soak rank %d] WRONG: GCX_UNDEFINED got a "
                                "communicator\n", S.rank);
                ++S.st.wrong;
                gcx_comm_destroy(fam->comm);
                fam->comm = NULL;
            }
            break;
        }
        /* members: same color, by (key, parent rank) (insertion sort) */
        fam->n = 0;
        for (int i = 0; i < par->n; ++i) {
            int w = par->members[i], j = fam->n++;
            if (color[w] != mine) {
                --fam->n;
                continue;
            }
            while (j > 0 && key[fam->members[j - 1]] > key[w]) {
                fam->members[j] = fam->members[j - 1];
                --j;
            }
            fam->members[j] = w;
        }
        break;
    }
    default:
        break;
    }
    fam->live = 1;
    soak_verify_fam(fam);
    ++S.st.per_kind[kind];
    ++S.st.events;
}

/* ---- memory and descriptors --------------------------------------------- */

static long soak_rss_kb(void)
{
    long  pages = 0, resident = 0;
    FILE *f     = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) {
            resident = 0;
        }
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long soak_fds(void)
{
    long           n   = 0;
    DIR           *dir = opendir("/proc/self/fd");
    struct dirent *e;

    while (dir != NULL && (e = readdir(dir)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (dir != NULL) {
        closedir(dir);
        --n; /* the directory's own descriptor */
    }
    return n;
}

static double soak_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* max over ranks of each value, on the world */
static void soak_max(int64_t *v, size_t n)
{
    gcx_status_t st = gcx_allreduce(S.world, GCX_IN_PLACE, v, n, GCX_DT_I64,
                                    GCX_OP_MAX, NULL);
    if (st != GCX_OK) {
        soak_die("checkpoint allreduce", st);
    }
}

static void soak_sum(int64_t *v, size_t n)
{
    gcx_status_t st = gcx_allreduce(S.world, GCX_IN_PLACE, v, n, GCX_DT_I64,
                                    GCX_OP_SUM, NULL);
    if (st != GCX_OK) {
        soak_die("summary allreduce", st);
    }
}

/* ---- the run ------------------------------------------------------------- */

static int soak_alloc(size_t max_bytes)
{
    size_t big = (size_t)S.size * max_bytes + 2 * SOAK_GUARD + 4096;

    for (int k = 0; k < SOAK_NSLOT; ++k) {
        size_t b = k == 0 ? big : big / 16 + 2 * SOAK_GUARD + 4096;
        S.slot[k].bytes = b;
        S.slot[k].send  = malloc(b);
        S.slot[k].recv  = malloc(b);
        if (S.slot[k].send == NULL || S.slot[k].recv == NULL) {
            return -1;
        }
        memset(S.slot[k].send, 0, b); /* resident from the start */
        memset(S.slot[k].recv, 0, b);
    }
    S.ref       = malloc(big);
    S.aux_bytes = max_bytes / 16 + 16;
    S.aux       = malloc(S.aux_bytes);
    if (S.ref == NULL || S.aux == NULL) {
        return -1;
    }
    memset(S.ref, 0, big);
    memset(S.aux, 0, S.aux_bytes);
    return 0;
}

/* Kind of a collective step: every kind, a little more allreduce. */
static int soak_draw_kind(uint64_t *rng)
{
    size_t k = rng_below(rng, K_NCOLL + 2);
    return k >= K_NCOLL ? K_ALLREDUCE : (int)k;
}

/* Picks the family (same on every rank) and this rank's place in it. */
static int soak_setup_op(soak_op_t *o, uint64_t *rng, uint64_t seq, int slot)
{
    int live[SOAK_MAX_FAM], nlive = soak_live_list(live, 1);

    memset(o, 0, sizeof(*o));
    o->seq   = seq;
    o->kind  = soak_draw_kind(rng);
    o->fam   = live[rng_below(rng, (size_t)nlive)];
    o->rng   = rng_next(rng);
    o->slot  = &S.slot[slot];
    o->comm  = S.fam[o->fam].comm;
    if (o->comm == NULL) {
        return 0;
    }
    o->n  = gcx_comm_size(o->comm);
    o->me = gcx_comm_rank(o->comm);
    return 1;
}

static void soak_count(const soak_op_t *o)
{
    ++S.st.ops;
    ++S.st.per_kind[o->kind];
    ++S.st.per_config[S.fam[o->fam].config];
    if (o->kind != K_BARRIER) {
        ++S.st.per_type[o->dt];
        S.st.bytes += o->count * o->esz;
    }
    if (o->kind == K_ALLREDUCE || o->kind == K_REDUCE ||
        o->kind == K_REDUCE_SCATTER) {
        ++S.st.per_op[o->op];
    }
    if (o->kind == K_SPARSE) {
        ++S.st.per_sparse_algo[o->algo_index];
    }
}

static void soak_fail_op(soak_op_t *o, gcx_status_t st)
{
    fprintf(stderr,
            "[soak rank %d] step %llu %s on family %d (%d ranks, type %s, op "
            "%s, count %zu, root %d) returned %s\n",
            S.rank, (unsigned long long)o->seq, soak_kind_names[o->kind],
            S.fam[o->fam].id, o->n, gcx_dtype_name(o->dt), gcx_op_name(o->op),
            o->count, o->root, gcx_strerror(st));
    exit(3);
}

static void soak_wait_op(soak_op_t *o)
{
    for (int q = 0; q < o->nreq; ++q) {
        gcx_status_t st = gcx_wait(o->req[q]);
        gcx_request_free(o->req[q]);
        if (st != GCX_OK) {
            soak_fail_op(o, st);
        }
    }
    o->nreq = 0;
}

/* One step: a collective, a batch, or a communicator event. */
static void soak_step(uint64_t *rng, uint64_t *seq, size_t max_bytes,
                      uint64_t *done)
{
    uint64_t  s = rng_next(rng);
    size_t    what = rng_below(&s, 1000);
    soak_op_t ops[SOAK_MAX_BATCH];
    double    t0 = soak_now();

    if (what < 12) { /* ~1.2%: a communicator event */
        static const int kinds[] = {K_CREATE, K_CREATE, K_SPLIT, K_SPLIT,
                                    K_DUP, K_DESTROY, K_DESTROY};
        int kind = what == 0 && rng_below(&s, 8) == 0 ?
                       K_CREATE_ENV :
                       kinds[rng_below(&s, sizeof(kinds) / sizeof(kinds[0]))];
        soak_event(kind, &s);
        S.st.seconds[kind] += soak_now() - t0;
        return;
    }
    if (what < 150) { /* a batch of non-blocking collectives */
        int nb = 2 + (int)rng_below(&s, SOAK_MAX_BATCH - 1), order[SOAK_MAX_BATCH];
        for (int b = 0; b < nb; ++b) {
            order[b] = b;
            if (soak_setup_op(&ops[b], &s, (*seq)++, b)) {
                gcx_status_t st = soak_post(&ops[b], max_bytes / 16);
                if (st != GCX_OK) {
                    soak_fail_op(&ops[b], st);
                }
                S.st.nonblocking++;
            }
        }
        for (int b = nb - 1; b > 0; --b) { /* the same shuffle everywhere */
            int j = (int)rng_below(&s, (size_t)b + 1), t = order[b];
            order[b] = order[j];
            order[j] = t;
        }
        for (int b = 0; b < nb; ++b) {
            soak_op_t *o = &ops[order[b]];
            if (o->comm != NULL) {
                soak_wait_op(o);
            }
        }
        for (int b = 0; b < nb; ++b) {
            if (ops[b].comm != NULL) {
                soak_check(&ops[b]);
                soak_count(&ops[b]);
            }
        }
        ++S.st.batches;
        *done += (uint64_t)nb;
        S.st.seconds[K_NKINDS] += soak_now() - t0;
        return;
    }
    if (soak_setup_op(&ops[0], &s, (*seq)++, 0)) {
        gcx_status_t st;
        ops[0].blocking = rng_below(&s, 2) == 0 && ops[0].kind != K_SENDRECV;
        st              = soak_post(&ops[0], max_bytes);
        if (st != GCX_OK) {
            soak_fail_op(&ops[0], st);
        }
        if (!ops[0].blocking) {
            S.st.nonblocking++;
        }
        soak_wait_op(&ops[0]);
        soak_check(&ops[0]);
        soak_count(&ops[0]);
        S.st.seconds[ops[0].kind] += soak_now() - t0;
    }
    *done += 1;
}

typedef struct {
    long rss0, rss1, rss_max, fd0, fd1, fd_max, rss_start;
} soak_mem_t;

static void soak_print_stats(double elapsed)
{
    int64_t v[K_NKINDS + SOAK_NCONFIGS + GCX_DT_LAST + GCX_OP_LAST + 6 + 6];
    size_t  m = 0;

    /* counts summed over ranks (a step on a split family counts once per
     * communicator member) */
    for (int k = 0; k < K_NKINDS; ++k) v[m++] = (int64_t)S.st.per_kind[k];
    for (int k = 0; k < SOAK_NCONFIGS; ++k) v[m++] = (int64_t)S.st.per_config[k];
    for (int k = 0; k < GCX_DT_LAST; ++k) v[m++] = (int64_t)S.st.per_type[k];
    for (int k = 0; k < GCX_OP_LAST; ++k) v[m++] = (int64_t)S.st.per_op[k];
    for (int k = 0; k < 6; ++k) v[m++] = (int64_t)S.st.per_sparse_algo[k];
    v[m++] = (int64_t)S.st.ops;
    v[m++] = (int64_t)S.st.batches;
    v[m++] = (int64_t)S.st.nonblocking;
    v[m++] = (int64_t)S.st.bytes;
    v[m++] = (int64_t)S.st.events;
    v[m++] = (int64_t)S.st.wrong;
    soak_sum(v, m);
    if (S.rank != 0) {
        return;
    }
    m = 0;
    printf("# calls summed over ranks, %.1f s\n# kind:", elapsed);
    for (int k = 0; k < K_NKINDS; ++k) printf(" %s=%lld", soak_kind_names[k], (long long)v[m++]);
    printf("\n# config:");
    for (int k = 0; k < SOAK_NCONFIGS; ++k) {
        printf(" [%d]", k);
        for (int j = 0; soak_configs[k][j] != NULL; j += 2) {
            printf("%s%s=%s", j ? "," : "", soak_configs[k][j],
                   soak_configs[k][j + 1]);
        }
        printf("%s:%lld", soak_configs[k][0] ? "" : "default", (long long)v[m++]);
    }
    printf("\n# type:");
    for (int k = 0; k < GCX_DT_LAST; ++k) printf(" %s=%lld", gcx_dtype_name((gcx_dtype_t)k), (long long)v[m++]);
    printf("\n# reduction op:");
    for (int k = 0; k < GCX_OP_LAST; ++k) printf(" %s=%lld", gcx_op_name((gcx_op_t)k), (long long)v[m++]);
    printf("\n# sparse algo:");
    for (int k = 0; k < 6; ++k) printf(" %s=%lld", soak_sparse_algos[k] ? soak_sparse_algos[k] : "comm", (long long)v[m++]);
    printf("\n# seconds on rank 0 (steps alone, with their checks; batches):");
    for (int k = 0; k <= K_NKINDS; ++k) {
        printf(" %s=%.1f", k < K_NKINDS ? soak_kind_names[k] : "batches",
               S.st.seconds[k]);
    }
    printf("\n# rank-calls %lld, in batches %lld, non-blocking %lld, bytes %lld, "
           "events %lld, wrong %lld\n",
           (long long)v[m], (long long)v[m + 1], (long long)v[m + 2],
           (long long)v[m + 3], (long long)v[m + 4], (long long)v[m + 5]);
}

static void soak_checkpoint(uint64_t done, double t0, soak_mem_t *mem,
                            int header)
{
    int64_t v[4] = {soak_rss_kb(), soak_fds(), (int64_t)S.st.wrong, 0};
    int     live[SOAK_MAX_FAM];

    if (v[0] > mem->rss_max) mem->rss_max = v[0];
    if (v[1] > mem->fd_max) mem->fd_max = v[1];
    v[3] = soak_live_list(live, 0);
    soak_max(v, 4);
    if (S.rank == 0) {
        if (header) {
            printf("%10s %8s %12s %6s %6s %6s\n", "steps", "time_s",
                   "rss_kb(max)", "fds", "comms", "wrong");
        }
        printf("%10llu %8.1f %12lld %6lld %6lld %6lld\n",
               (unsigned long long)done, soak_now() - t0, (long long)v[0],
               (long long)v[1], (long long)v[3] + 1, (long long)v[2]);
        fflush(stdout);
    }
}

static int soak_run(uint64_t seed, uint64_t nops, size_t max_bytes,
                    uint64_t every, uint64_t warmup, long rss_growth_kb,
                    int fd_exact, const char *results)
{
    uint64_t   rng = seed, seq = 1, done = 0, next = every;
    double     t0 = soak_now(), t_base = t0;
    soak_mem_t mem = {0};
    int        based = 0, fail = 0;
    int64_t    verdict[6];

    mem.rss_start = soak_rss_kb();
    soak_checkpoint(0, t0, &mem, 1);
    while (done < nops) {
        soak_step(&rng, &seq, max_bytes, &done);
        if (!based && done >= warmup) {
            soak_destroy_all();
            mem.rss0 = mem.rss_max = soak_rss_kb();
            mem.fd0  = mem.fd_max = soak_fds();
            t_base   = soak_now();
            based    = 1;
            if (S.rank == 0) {
                printf("# baseline after %llu steps (all but the world "
                       "destroyed)\n", (unsigned long long)done);
            }
        }
        if (done >= next || done >= nops) {
            soak_checkpoint(done, t0, &mem, 0);
            next = done + every;
        }
    }
    soak_destroy_all();
    mem.rss1 = soak_rss_kb();
    mem.fd1  = soak_fds();
    if (!based) {
        mem.rss0 = mem.rss_start;
        mem.fd0  = mem.fd1;
    }
    /* verdicts of this rank */
    {
        double after = (double)(done - (based ? warmup : 0));
        long   bound = (long)((double)rss_growth_kb * (after / 1e4 < 1 ? 1 : after / 1e4));
        if (fd_exact && mem.fd1 != mem.fd0) {
            fprintf(stderr, "[soak rank %d] open descriptors %ld at the end, "
                    "%ld at the baseline\n", S.rank, mem.fd1, mem.fd0);
            fail = 1;
        }
        if (rss_growth_kb > 0 && mem.rss1 - mem.rss0 > bound) {
            fprintf(stderr, "[soak rank %d] resident memory grew %ld kB "
                    "(%ld -> %ld) over %.0f steps, more than the %ld kB "
                    "allowed\n", S.rank, mem.rss1 - mem.rss0, mem.rss0,
                    mem.rss1, after, bound);
            fail = 1;
        }
    }
    soak_print_stats(soak_now() - t0);
    verdict[0] = (int64_t)S.st.wrong;
    verdict[1] = fail;
    verdict[2] = mem.rss1 - mem.rss0;
    verdict[3] = mem.fd1 - mem.fd0;
    verdict[4] = mem.rss_max;
    verdict[5] = mem.fd_max;
    {
        int64_t base[4] = {mem.rss0, mem.fd0, mem.rss1, mem.fd1};
        soak_max(verdict, 6);
        soak_max(base, 4);
        if (S.rank == 0) {
            double el = soak_now() - t0;
            printf("# soak: %d ranks, seed %llu, %llu steps (%llu after the "
                   "baseline) in %.1f s (%.0f steps/s), %lld wrong; rss (max "
                   "over ranks) baseline %lld kB, end %lld kB, max %lld kB, "
                   "growth %lld kB; fds baseline %lld, end %lld, max %lld\n",
                   S.size, (unsigned long long)seed, (unsigned long long)done,
                   (unsigned long long)(done - (based ? warmup : 0)), el,
                   (double)done / el, (long long)verdict[0], (long long)base[0],
                   (long long)base[2], (long long)verdict[4],
                   (long long)verdict[2], (long long)base[1],
                   (long long)base[3], (long long)verdict[5]);
            if (results != NULL) {
                FILE *f = fopen(results, "a");
                if (f != NULL) {
                    fprintf(f,
                            "{\"ranks\": %d, \"seed\": %llu, \"steps\": %llu, "
                            "\"warmup\": %llu, \"max_bytes\": %zu, "
                            "\"seconds\": %.1f, \"wrong\": %lld, "
                            "\"rss_kb_baseline\": %lld, \"rss_kb_end\": %lld, "
                            "\"rss_kb_max\": %lld, \"fds_baseline\": %lld, "
                            "\"fds_end\": %lld, \"fds_max\": %lld, "
                            "\"since_baseline_s\": %.1f}\n",
                            S.size, (unsigned long long)seed,
                            (unsigned long long)done,
                            (unsigned long long)warmup, max_bytes, el,
                            (long long)verdict[0], (long long)base[0],
                            (long long)base[2], (long long)verdict[4],
                            (long long)base[1], (long long)base[3],
                            (long long)verdict[5], soak_now() - t_base);
                    fclose(f);
                }
            }
        }
    }
    return verdict[0] != 0 || verdict[1] != 0;
}

/* ---- communicator churn --------------------------------------------------- */

static void soak_churn_check(gcx_comm_t *comm, int id)
{
    int64_t      v[3] = {id, S.rank, 1};
    int          n    = gcx_comm_size(comm);
    gcx_status_t st   = gcx_allreduce(comm, GCX_IN_PLACE, v, 3, GCX_DT_I64,
                                      GCX_OP_SUM, NULL);

    if (st != GCX_OK) {
        soak_die("churn allreduce", st);
    }
    if (v[0] != (int64_t)id * n || v[2] != n) {
        fprintf(stderr, "[soak rank %d] WRONG churn communicator %d: sums "
                "%lld %lld\n", S.rank, id, (long long)v[0], (long long)v[2]);
        ++S.st.wrong;
    }
}

static int soak_churn(uint64_t seed, int total, int fd_exact)
{
    enum { LIVE = 4 };
    gcx_comm_t *live[LIVE] = {0};
    uint64_t    rng = seed;
    int         made = 0, by[4] = {0, 0, 0, 0}, fail = 0;
    long        rss0 = 0, fd0 = 0, rss_max = 0, fd_max = 0, rss1, fd1;
    double      t0 = soak_now();
    int64_t     v[6];

    fd0 = fd_max = soak_fds(); /* only the world is alive */
    while (made < total) {
        int          k    = (int)rng_below(&rng, LIVE), how;
        gcx_comm_t  *c    = NULL;
        gcx_comm_t  *from = live[rng_below(&rng, LIVE)];
        gcx_status_t st   = GCX_OK;

        if (from == NULL) {
            from = S.world;
        }
        how = made % 50 == 0 ? 0 : 1 + (int)rng_below(&rng, 3);
        switch (how) {
        case 0: c = soak_create((int)rng_below(&rng, SOAK_NCONFIGS), 1); break;
        case 1: c = soak_create((int)rng_below(&rng, SOAK_NCONFIGS), 0); break;
        case 2: {
            int color = (gcx_comm_rank(from) + (int)rng_below(&rng, 2)) % 2;
            /* every member draws alike; the rank decides the color */
            st = gcx_comm_split(from, color, 0, &c);
            break;
        }
        default: st = gcx_comm_dup(from, &c); break;
        }
        if (st != GCX_OK) {
            soak_die("churn split/dup", st);
        }
        if (live[k] != NULL) { /* maybe `from`: a child outlives its parent */
            gcx_comm_destroy(live[k]);
        }
        live[k] = c;
        soak_churn_check(c, made);
        ++by[how];
        ++made;
        if (made == 20) { /* resident memory: after the first ones */
            rss0 = rss_max = soak_rss_kb();
        }
        {
            long r = soak_rss_kb(), d = soak_fds();
            rss_max = r > rss_max ? r : rss_max;
            fd_max  = d > fd_max ? d : fd_max;
        }
    }
    for (int k = 0; k < LIVE; ++k) {
        if (live[k] != NULL) {
            gcx_comm_destroy(live[k]);
        }
    }
    rss1 = soak_rss_kb();
    fd1  = soak_fds();
    if (fd_exact && fd1 != fd0) {
        fprintf(stderr, "[soak rank %d] open descriptors %ld after the churn, "
                "%ld at the baseline\n", S.rank, fd1, fd0);
        fail = 1;
    }
    v[0] = (int64_t)S.st.wrong;
    v[1] = fail;
    v[2] = rss1 - rss0;
    v[3] = rss_max;
    v[4] = fd1 - fd0;
    v[5] = fd_max;
    soak_max(v, 6);
    if (S.rank == 0) {
        printf("# churn: %d ranks, %d communicators (environment %d, oob %d, "
               "split %d, dup %d) in %.1f s, %lld wrong; rss growth %lld kB "
               "(max %lld kB), fds end-baseline %lld (max %lld)\n",
               S.size, made, by[0], by[1], by[2], by[3], soak_now() - t0,
               (long long)v[0], (long long)v[2], (long long)v[3],
               (long long)v[4], (long long)v[5]);
    }
    return v[0] != 0 || v[1] != 0;
}

/* ---- main ---------------------------------------------------------------- */

static size_t soak_parse_size(const char *s)
{
    char  *end;
    double v = strtod(s, &end);

    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    default: break;
    }
    return (size_t)v;
}

static void soak_usage(void)
{
    fprintf(stderr,
            "usage: gcx_soak [--ops N] [--seed S] [--max-bytes B] [--every K]\n"
            "                [--warmup K] [--rss-growth-kb K] [--fd-exact]\n"
            "                [--results FILE] | --churn N [--fd-exact]\n"
            "Run under gcxrun (or any launcher gcx bootstraps from).\n");
}

int main(int argc, char **argv)
{
    uint64_t     seed = 1, nops = 100000, every = 0, warmup = 0;
    size_t       max_bytes = 4u << 20;
    long         rss_growth_kb = 0;
    int          fd_exact = 0, churn = 0, rc;
    const char  *results = NULL;
    gcx_status_t st;

    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--fd-exact")) {
            fd_exact = 1;
            continue;
        }
        if (v == NULL) {
            soak_usage();
            return 1;
        }
        if (!strcmp(a, "--ops")) nops = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--max-bytes")) max_bytes = soak_parse_size(v);
        else if (!strcmp(a, "--every")) every = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--warmup")) warmup = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--rss-growth-kb")) rss_growth_kb = strtol(v, NULL, 0);
        else if (!strcmp(a, "--results")) results = v;
        else if (!strcmp(a, "--churn")) churn = atoi(v);
        else {
            soak_usage();
            return 1;
        }
        ++i;
    }
    if (every == 0) {
        every = nops >= 100000 ? 10000 : (nops >= 10 ? nops / 10 : 1);
    }
    if (warmup == 0) {
        warmup = every;
    }
    if (max_bytes < 1024) {
        max_bytes = 1024;
    }
    soak_tables_init();
    st = gcx_comm_create(NULL, NULL, &S.world);
    if (st != GCX_OK) {
        soak_die("gcx_comm_create (world)", st);
    }
    S.rank = gcx_comm_rank(S.world);
    S.size = gcx_comm_size(S.world);
    if (S.size > SOAK_MAX_RANKS) {
        fprintf(stderr, "gcx_soak: at most %d ranks\n", SOAK_MAX_RANKS);
        return 1;
    }
    /* rank 0's seed for everyone */
    st = gcx_broadcast(S.world, &seed, 1, GCX_DT_I64, 0, NULL);
    if (st != GCX_OK) {
        soak_die("seed broadcast", st);
    }
    S.fam[0].live = 1;
    S.fam[0].comm = S.world;
    S.fam[0].n    = S.size;
    S.fam[0].how  = -1;
    for (int r = 0; r < S.size; ++r) {
        S.fam[0].members[r] = r;
    }
    if (churn > 0) {
        rc = soak_churn(seed, churn, fd_exact);
    } else {
        if (soak_alloc(max_bytes) != 0) {
            fprintf(stderr, "gcx_soak: cannot allocate the buffers\n");
            return 1;
        }
        if (S.rank == 0) {
            printf("# gcx_soak: %d ranks, seed %llu, %llu steps, max %zu "
                   "bytes per rank\n",
                   S.size, (unsigned long long)seed, (unsigned long long)nops,
                   max_bytes);
        }
        rc = soak_run(seed, nops, max_bytes, every, warmup, rss_growth_kb,
                      fd_exact, results);
        for (int k = 0; k < SOAK_NSLOT; ++k) {
            free(S.slot[k].send);
            free(S.slot[k].recv);
        }
        free(S.ref);
        free(S.aux);
    }
    gcx_comm_destroy(S.world);
    return rc;
}
