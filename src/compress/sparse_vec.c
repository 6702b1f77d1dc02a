/*
 * sparse_vec.c - the sparse vector type gcx_sparse_vec_t (include/gcx/
 * sparse_vec.h): sorted uint32 indices + float values (structure of arrays)
 * of a dense length N.
 *
 * Ownership: gcx_sparse_vec_init() wraps the caller's arrays (never freed by
 * the library); gcx_sparse_vec_alloc() allocates arrays the library owns and
 * gcx_sparse_vec_free() releases. Helpers scatter into a dense vector and
 * compute norms; each is one pass over the nnz entries (plus N for
 * to_dense). gcx_dense_sqnorm() (compress.h) lives here next to its sparse
 * counterpart.
 */
#include "compress_int.h"

#include <stdlib.h>

gcx_status_t gcx_sparse_vec_init(gcx_sparse_vec_t *sp, uint32_t *idx,
                                 float *val,
                                 size_t capacity, size_t dense_len)
{
    if (sp == NULL || (capacity > 0 && (idx == NULL || val == NULL))) {
        return GCX_ERR_INVALID;
    }
    if (dense_len > GCX_COMPRESS_MAX_LEN) {
        return GCX_ERR_RANGE;
    }
    sp->idx = idx;
    sp->val = val;
    sp->nnz = 0;
    sp->capacity = capacity;
    sp->dense_len = dense_len;
    sp->owned = 0;
    return GCX_OK;
}

gcx_status_t gcx_sparse_vec_alloc(size_t capacity, size_t dense_len,
                                  gcx_sparse_vec_t *sp_p)
{
    uint32_t *idx;
    float *val;

    if (sp_p == NULL) {
        return GCX_ERR_INVALID;
    }
    if (dense_len > GCX_COMPRESS_MAX_LEN ||
        capacity > SIZE_MAX / sizeof(*idx)) {
        return GCX_ERR_RANGE;
    }
    /* malloc(0) may return NULL: allocate at least one entry. */
    idx = malloc((capacity > 0 ? capacity : 1) * sizeof(*idx));
    if (idx == NULL) {
        goto err;
    }
    val = malloc((capacity > 0 ? capacity : 1) * sizeof(*val));
    if (val == NULL) {
        goto err_free_idx;
    }
    sp_p->idx = idx;
    sp_p->val = val;
    sp_p->nnz = 0;
    sp_p->capacity = capacity;
    sp_p->dense_len = dense_len;
    sp_p->owned = 1;
    return GCX_OK;

err_free_idx:
    free(idx);
err:
    return GCX_ERR_NOMEM;
}

void gcx_sparse_vec_free(gcx_sparse_vec_t *sp)
{
    if (sp == NULL) {
        return;
    }
    if (sp->owned) {
        free(sp->idx);
        free(sp->val);
    }
    memset(sp, 0, sizeof(*sp));
}

gcx_status_t gcx_sparse_vec_check(const gcx_sparse_vec_t *sp)
{
    size_t j;
    int bad = 0;

    if (sp == NULL || sp->nnz > sp->capacity ||
        sp->dense_len > GCX_COMPRESS_MAX_LEN ||
        (sp->nnz > 0 && (sp->idx == NULL || sp->val == NULL))) {
        return GCX_ERR_INVALID;
    }
    if (sp->nnz == 0) {
        return GCX_OK;
    }
    /* Branch-free so that the check runs at memory speed. */
    for (j = 1; j < sp->nnz; j++) {
        bad |= sp->idx[j] <= sp->idx[j - 1];
    }
    if (bad || sp->idx[sp->nnz - 1] >= sp->dense_len) {
        return GCX_ERR_INVALID;
    }
    return GCX_OK;
}

gcx_status_t gcx_sparse_vec_scatter(const gcx_sparse_vec_t *sp, float *dense)
{
    size_t j;

    if (gcx_sparse_vec_check(sp) != GCX_OK || (dense == NULL && sp->nnz > 0)) {
        return GCX_ERR_INVALID;
    }
    for (j = 0; j < sp->nnz; j++) {
        dense[sp->idx[j]] = sp->val[j];
    }
    return GCX_OK;
}

gcx_status_t gcx_sparse_vec_scatter_add(const gcx_sparse_vec_t *sp, float alpha,
                                        float *dense)
{
    size_t j;

    if (gcx_sparse_vec_check(sp) != GCX_OK || (dense == NULL && sp->nnz > 0)) {
        return GCX_ERR_INVALID;
    }
    for (j = 0; j < sp->nnz; j++) {
        dense[sp->idx[j]] += alpha * sp->val[j];
    }
    return GCX_OK;
}

gcx_status_t gcx_sparse_vec_to_dense(const gcx_sparse_vec_t *sp, float *dense)
{
    if (gcx_sparse_vec_check(sp) != GCX_OK ||
        (dense == NULL && sp->dense_len > 0)) {
        return GCX_ERR_INVALID;
    }
    if (sp->dense_len > 0) {
        memset(dense, 0, sp->dense_len * sizeof(*dense));
    }
    return gcx_sparse_vec_scatter(sp, dense);
}

double gcx_sparse_vec_sqnorm(const gcx_sparse_vec_t *sp)
{
    if (sp == NULL || sp->val == NULL) {
        return 0;
    }
    return gcx_compress_sqnorm(sp->val, sp->nnz);
}

double gcx_dense_sqnorm(const float *x, size_t n)
{
    if (x == NULL) {
        return 0;
    }
    return gcx_compress_sqnorm(x, n);
}
