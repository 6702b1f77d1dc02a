/*
 * compress.c - the table of compressors and the public entry points.
 *
 * Idea (as UCC's algorithm tables): one row {kind, name, description,
 * select function} per compressor, each implemented in its own file; a new
 * compressor is one file plus one row. The entry points check arguments,
 * derive k from the compression factor, check the output capacity, handle
 * the trivial cases (N = 0, k = 0, k >= N) the same way for every
 * compressor, and fill the statistics; the select functions only ever see
 * 0 < k < N. Cost here: O(1) plus the sum of squares of the nnz outputs.
 */
#include "compress_int.h"

#include <math.h>
#include <stdlib.h>

typedef struct gcx_compress_row {
    gcx_compress_kind_t kind;
    const char *name;
    const char *desc;
    gcx_compress_select_fn_t select;
} gcx_compress_row_t;

static const gcx_compress_row_t gcx_compress_table[GCX_COMPRESS_KIND_COUNT] =
    {
        {GCX_COMPRESS_NONE, "none", "send every entry", gcx_none_select},
        {GCX_COMPRESS_TOPK, "topk", "exact top-k by magnitude (radix select)",
         gcx_topk_select},
        {GCX_COMPRESS_DGC, "dgc",
         "DGC sampled threshold, count within [0.8k, 1.3k]", gcx_dgc_select},
        {GCX_COMPRESS_REDSYNC, "redsync",
         "RedSync threshold search between mean and max of |x|",
         gcx_redsync_select},
        {GCX_COMPRESS_RANDOMK, "randomk",
         "k indices drawn from a seed shared by all ranks",
         gcx_randomk_select},
};

const char *gcx_compress_kind_name(gcx_compress_kind_t kind)
{
    if ((unsigned)kind >= GCX_COMPRESS_KIND_COUNT) {
        return "?";
    }
    return gcx_compress_table[kind].name;
}

gcx_status_t gcx_compress_kind_parse(const char *name,
                                     gcx_compress_kind_t *kind_p)
{
    int i;

    if (name == NULL || kind_p == NULL) {
        return GCX_ERR_INVALID;
    }
    for (i = 0; i < GCX_COMPRESS_KIND_COUNT; i++) {
        if (strcmp(name, gcx_compress_table[i].name) == 0) {
            *kind_p = gcx_compress_table[i].kind;
            return GCX_OK;
        }
    }
    return GCX_ERR_NOT_FOUND;
}

gcx_status_t gcx_compressor_create(gcx_compress_kind_t kind, uint64_t seed,
                                   gcx_compressor_t **comp_p)
{
    gcx_compressor_t *comp;

    if (comp_p == NULL || (unsigned)kind >= GCX_COMPRESS_KIND_COUNT) {
        return GCX_ERR_INVALID;
    }
    comp = calloc(1, sizeof(*comp));
    if (comp == NULL) {
        return GCX_ERR_NOMEM;
    }
    comp->kind = kind;
    comp->select = gcx_compress_table[kind].select;
    comp->seed = seed;
    *comp_p = comp;
    return GCX_OK;
}

void gcx_compressor_destroy(gcx_compressor_t *comp)
{
    int i;

    if (comp == NULL) {
        return;
    }
    for (i = 0; i < GCX_COMPRESS_SCR_COUNT; i++) {
        free(comp->scr[i]);
    }
    free(comp);
}

gcx_compress_kind_t gcx_compressor_kind(const gcx_compressor_t *comp)
{
    return comp->kind;
}

void gcx_compressor_set_step(gcx_compressor_t *comp, uint64_t step)
{
    comp->step = step;
}

gcx_status_t gcx_compress_k(size_t n, double cf, size_t *k_p)
{
    double dn = (double)n;
    size_t k;

    if (k_p == NULL || !(cf >= 1.0)) {
        return GCX_ERR_INVALID; /* also NaN */
    }
    if (isinf(cf) || n == 0) {
        *k_p = 0;
        return GCX_OK;
    }
    k = (size_t)ceil(dn / cf);
    /* the smallest k with k * cf >= n, whatever the rounding of n / cf */
    while (k > 0 && (double)(k - 1) * cf >= dn) {
        k--;
    }
    while ((double)k * cf < dn) {
        k++;
    }
    *k_p = k < n ? k : n;
    return GCX_OK;
}

size_t gcx_compress_capacity_k(gcx_compress_kind_t kind, size_t n, size_t k)
{
    size_t cap;

    if (k > n) {
        k = n;
    }
    switch (kind) {
    case GCX_COMPRESS_DGC:
        cap = k + (3 * k) / 10; /* floor(1.3 k) */
        break;
    case GCX_COMPRESS_REDSYNC:
        cap = 2 * k;
        break;
    case GCX_COMPRESS_TOPK:
    case GCX_COMPRESS_RANDOMK:
        cap = k;
        break;
    case GCX_COMPRESS_NONE:
    default:
        cap = n;
        break;
    }
    return cap < n ? cap : n;
}

gcx_status_t gcx_compress_capacity(gcx_compress_kind_t kind, size_t n,
                                   double cf, size_t *capacity_p)
{
    gcx_status_t status;
    size_t k;

    if (capacity_p == NULL || (unsigned)kind >= GCX_COMPRESS_KIND_COUNT) {
        return GCX_ERR_INVALID;
    }
    status = gcx_compress_k(n, cf, &k);
    if (status != GCX_OK) {
        return status;
    }
    *capacity_p = gcx_compress_capacity_k(kind, n, k);
    return GCX_OK;
}

double gcx_compress_gain(const gcx_compress_stats_t *stats)
{
    if (stats->in_sqnorm <= 0) {
        return 1.0;
    }
    return stats->out_sqnorm / stats->in_sqnorm;
}

/* Common path of the four entry points, after the input checks. */
static gcx_status_t gcx_compress_run(gcx_compressor_t *comp,
                                     const gcx_compress_cvec_t *in,
                                     size_t dense_len, size_t k,
                                     gcx_sparse_vec_t *out,
                                     gcx_compress_stats_t *stats_p)
{
    gcx_compress_cres_t res = {0, 0};
    gcx_status_t status = GCX_OK;
    size_t m = in->m, cap;

    if (k > m || comp->kind == GCX_COMPRESS_NONE) {
        k = m;
    }
    cap = gcx_compress_capacity_k(comp->kind, m, k);
    if (out->capacity < cap) {
        return GCX_ERR_RANGE;
    }
    if (cap > 0 && (out->idx == NULL || out->val == NULL)) {
        return GCX_ERR_INVALID;
    }
    if (m == 0) {
        out->nnz = 0;
    } else if (k == 0) {
        res.in_sqnorm = gcx_compress_sqnorm(in->val, m);
        res.passes = 1;
        if (!(res.in_sqnorm <= __DBL_MAX__)) {
            return GCX_ERR_RANGE;
        }
        out->nnz = 0;
    } else if (k == m) {
        status = gcx_none_select(comp, in, k, out, &res);
    } else {
        status = comp->select(comp, in, k, out, &res);
    }
    if (status != GCX_OK) {
        return status;
    }
    out->dense_len = dense_len;
    if (stats_p != NULL) {
        stats_p->in_sqnorm = res.in_sqnorm;
        stats_p->out_sqnorm = gcx_compress_sqnorm(out->val, out->nnz);
        stats_p->k = k;
        stats_p->nnz = out->nnz;
        stats_p->passes = res.passes;
    }
    return GCX_OK;
}

gcx_status_t gcx_compress_dense_k(gcx_compressor_t *comp, const float *x,
                                  size_t n, size_t k, gcx_sparse_vec_t *out,
                                  gcx_compress_stats_t *stats_p)
{
    gcx_compress_cvec_t in = {x, NULL, n};

    if (comp == NULL || out == NULL || (x == NULL && n > 0)) {
        return GCX_ERR_INVALID;
    }
    if (n > GCX_COMPRESS_MAX_LEN) {
        return GCX_ERR_RANGE;
    }
    if (n > 0 && out->val == x) {
        return GCX_ERR_INVALID;
    }
    return gcx_compress_run(comp, &in, n, k, out, stats_p);
}

gcx_status_t gcx_compress_sparse_k(gcx_compressor_t *comp,
                                   const gcx_sparse_vec_t *in, size_t k,
                                   gcx_sparse_vec_t *out,
                                   gcx_compress_stats_t *stats_p)
{
    gcx_compress_cvec_t view;

    if (comp == NULL || out == NULL || gcx_sparse_vec_check(in) != GCX_OK) {
        return GCX_ERR_INVALID;
    }
    if (out == in ||
        (in->nnz > 0 && (out->idx == in->idx || out->val == in->val))) {
        return GCX_ERR_INVALID;
    }
    view.val = in->val;
    view.map = in->idx;
    view.m = in->nnz;
    return gcx_compress_run(comp, &view, in->dense_len, k, out, stats_p);
}

gcx_status_t gcx_compress_dense(gcx_compressor_t *comp, const float *x,
                                size_t n, double cf, gcx_sparse_vec_t *out,
                                gcx_compress_stats_t *stats_p)
{
    gcx_status_t status;
    size_t k;

    status = gcx_compress_k(n, cf, &k);
    if (status != GCX_OK) {
        return status;
    }
    return gcx_compress_dense_k(comp, x, n, k, out, stats_p);
}

gcx_status_t gcx_compress_sparse(gcx_compressor_t *comp,
                                 const gcx_sparse_vec_t *in,
                                 double cf, gcx_sparse_vec_t *out,
                                 gcx_compress_stats_t *stats_p)
{
    gcx_status_t status;
    size_t k;

    if (in == NULL) {
        return GCX_ERR_INVALID;
    }
    status = gcx_compress_k(in->nnz, cf, &k);
    if (status != GCX_OK) {
        return status;
    }
    return gcx_compress_sparse_k(comp, in, k, out, stats_p);
}
