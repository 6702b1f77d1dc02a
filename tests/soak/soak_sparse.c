/*
 * soak_sparse.c - gcx_soak's sparse allreduce step: every member's sparse
 * input, the expected result, the post and the check.
 *
 * Idea: a member's input is regenerated from the step's seed and its rank
 * (indices with gaps of mean 1/density, values from the step's stream), so
 * each rank builds the dense sum and, with top-k, the selected indices
 * itself; the output is checked dense and/or sparse against it, with the
 * in_result flags and the guard bytes. With --inject, the liars change
 * their own call (algorithm, an index, capacity, top-k, dense length)
 * after the reference is built, so the others' expectations stay.
 *
 * Cost: a sparse step regenerates every member's input twice (at the post,
 * which sizes the output, and at the check): O(sum of nnz) plus O(N), and
 * a sort of the nonzero sums when top-k is asked for.
 */
#include "soak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's input of a sparse step: indices with gaps of mean 1/density,
 * values from the step's stream. Writes at most cap entries; returns nnz. */
static size_t soak_sparse_input(uint64_t opseed, int r, size_t N,
                                size_t gap, uint32_t *idx, float *val,
                                uint64_t seq, size_t cap)
{
    uint64_t s   = opseed ^ (0x51ed27ull * (uint64_t)(r + 1));
    size_t   nnz = 0, i = soak_rng_below(&s, gap);

    while (i < N && nnz < cap) {
        idx[nnz] = (uint32_t)i;
        val[nnz] = (float)soak_val(seq, (uint32_t)r, i);
        ++nnz;
        i += 1 + soak_rng_below(&s, 2 * gap - 1);
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

/* The liars' side of an injected sparse step: another algorithm, a bad
 * index, too small an output, another top-k or dense length. Each must
 * give GCX_ERR_MISMATCH on every rank (include/gcx/sparse.h). */
static void soak_sparse_lie(soak_op_t *o)
{
    static const char *const names[] = {
        "auto", "allgather", "recursive_doubling", "split", "balanced_split",
    };
    const char *honest = o->algo;
    size_t      nnz = o->in_sp.nnz, j;
    int         v = o->inj_var;

    switch (o->inj) {
    case INJ_SP_ALGO:
        if (honest == NULL) { /* the communicator's GCX_SPARSE_ALGO */
            const char *const *cfg = soak_configs[S.fam[o->fam].config];
            honest = cfg[0] != NULL && !strcmp(cfg[0], "SPARSE_ALGO") ? cfg[1] :
                                                                       "auto";
        }
        o->sp_opts.algo = !strcmp(honest, "auto") && (v & 1) ? "split" :
                          names[(size_t)(v >> 1) % 5];
        if (!strcmp(o->sp_opts.algo, honest)) {
            o->sp_opts.algo = !strcmp(honest, "split") ? "auto" : "split";
        }
        break;
    case INJ_SP_INDEX:
        /* an index not below N, a duplicate, or two out of order */
        if (nnz < 2 || v % 3 == 0) {
            if (nnz == 0) {
                o->in_sp.nnz = o->in_sp.capacity = nnz = 1;
                o->in_sp.val[0] = 1.0f;
            }
            o->in_sp.idx[(size_t)(v >> 2) % nnz] = (uint32_t)o->count +
                                                  (uint32_t)(v >> 8) % 3;
        } else {
            j = 1 + (size_t)(v >> 2) % (nnz - 1);
            if (v % 3 == 1) {
                o->in_sp.idx[j] = o->in_sp.idx[j - 1];
            } else {
                uint32_t t = o->in_sp.idx[j];
                o->in_sp.idx[j]     = o->in_sp.idx[j - 1];
                o->in_sp.idx[j - 1] = t;
            }
        }
        break;
    case INJ_SP_CAP:
        o->out_sp.capacity = o->sp_K - 1; /* one short of the result */
        break;
    case INJ_SP_TOPK:
        o->sp_opts.topk += 1;
        break;
    case INJ_SP_N:
        o->in_sp.dense_len = o->count + 1;
        break;
    default:
        break;
    }
}

/* Layout in the slot: send = own idx | own val | flags; recv = dense out |
 * sparse out idx | sparse out val. */
void soak_sparse_prepare(soak_op_t *o, size_t max_bytes)
{
    static const size_t gaps[] = {1, 2, 10, 100, 1000};
    soak_slot_t *sl = o->slot;
    size_t       N, sumnnz, cap;

    o->dt  = GCX_DT_F32;
    o->esz = 4;
    N      = soak_rng_size(&o->rng, max_bytes / 16);
    N      = N == 0 ? 1 : N;
    o->sp_gap     = gaps[soak_rng_below(&o->rng, 5)];
    o->algo_index = (int)soak_rng_below(&o->rng, 6);
    if (o->force_algo >= 0) {
        o->algo_index = o->force_algo; /* a follow-up: auto */
    }
    o->algo       = soak_sparse_algos[o->algo_index];
    o->want_dense = o->want_sparse = 1;
    switch (soak_rng_below(&o->rng, 3)) {
    case 0: o->want_sparse = 0; break;
    case 1: o->want_dense = 0; break;
    default: break;
    }
    o->want_flags = soak_rng_below(&o->rng, 2) == 0;
    o->sp_opts.topk = soak_rng_below(&o->rng, 4) == 0 ? 1 + soak_rng_below(&o->rng, N) : 0;
    o->sp_opts.algo = o->algo;
    o->sp_seed      = soak_rng_next(&o->rng);
    o->count        = N;

    o->in_sp.idx       = (uint32_t *)sl->send;
    o->in_sp.val       = (float *)(sl->send + N * 4);
    o->in_sp.dense_len = N;
    o->in_sp.owned     = 0;
    o->sp_K = soak_sparse_reference(o, o->in_sp.idx, o->in_sp.val, &sumnnz);

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
    /* --inject: what must stay untouched, then the lie */
    o->snap_off   = 0;
    o->snap_len   = (size_t)((uint8_t *)(o->out_sp.val + cap) - sl->recv) +
                  SOAK_GUARD;
    o->snap_flags = o->in_sp.nnz + SOAK_GUARD;
    soak_inject_pick(o);
    if (o->inj != INJ_NONE) {
        o->out_sp.nnz = 0xdead; /* a failed call must not set it */
    }
    if (o->liar) {
        soak_sparse_lie(o);
    }
}

void soak_sparse_check(soak_op_t *o)
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
