/*
 * none.c - the identity compressor: every entry is sent.
 *
 * Also the path of every compressor when k >= N. The input is checked for
 * NaN/Inf (sum of squares) before the output is written, so that an error
 * leaves the output untouched; cost: two streaming reads and one write.
 */
#include "compress_int.h"

gcx_status_t gcx_none_select(gcx_compressor_t *comp,
                             const gcx_compress_cvec_t *in, size_t k,
                             gcx_sparse_vec_t *out, gcx_compress_cres_t *res)
{
    size_t i, m = in->m;
    double sq;

    (void)comp;
    (void)k;
    sq = gcx_compress_sqnorm(in->val, m);
    if (!(sq <= __DBL_MAX__)) {
        return GCX_ERR_RANGE;
    }
    if (in->map != NULL) {
        memcpy(out->idx, in->map, m * sizeof(*out->idx));
    } else {
        for (i = 0; i < m; i++) {
            out->idx[i] = (uint32_t)i;
        }
    }
    memcpy(out->val, in->val, m * sizeof(*out->val));
    out->nnz = m;
    res->in_sqnorm = sq;
    res->passes = 2;
    return GCX_OK;
}
