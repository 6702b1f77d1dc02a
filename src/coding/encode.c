/*
 * encode.c - linear combinations of float vectors: a worker's coded
 * message m = sum_k c_k g_k, and the root's decode sum_i a_i m_i.
 *
 * Idea: walk the output in blocks of ENCODE_BLOCK floats (16 KiB, stays in
 * L1); per block, the first nonzero term writes the block (no separate
 * zeroing pass) and the others add into it. Each inner loop is a plain
 * restrict-qualified axpy that the compiler vectorises. Zero coefficients
 * are skipped without touching their vector, so uninitialised slot buffers
 * of the pipelined warm-up (and NaNs in them) cannot leak into a message.
 *
 * Cost: one read of each input with a nonzero coefficient, one write of
 * the output: (k + 1) * 4 * len bytes; no allocation.
 */
#include "code_int.h"

#include <string.h>

#define ENCODE_BLOCK 4096

static void encode_scale(float c, const float *restrict v, size_t len,
                         float *restrict out)
{
    for (size_t e = 0; e < len; e++) {
        out[e] = c * v[e];
    }
}

static void encode_axpy(float c, const float *restrict v, size_t len,
                        float *restrict out)
{
    for (size_t e = 0; e < len; e++) {
        out[e] += c * v[e];
    }
}

gcx_status_t gcx_code_encode(int count, const double *coeffs,
                             const float *const *vecs, size_t len, float *out)
{
    if (count < 0 || (count > 0 && coeffs == NULL) ||
        (len > 0 && out == NULL) || (count > 0 && vecs == NULL)) {
        return GCX_ERR_INVALID;
    }
    for (int k = 0; k < count; k++) {
        if (coeffs[k] != 0.0 && len > 0 && vecs[k] == NULL) {
            return GCX_ERR_INVALID;
        }
    }

    for (size_t off = 0; off < len; off += ENCODE_BLOCK) {
        size_t m = (len - off < ENCODE_BLOCK) ? len - off : ENCODE_BLOCK;
        int first = 1;

        for (int k = 0; k < count; k++) {
            if (coeffs[k] == 0.0) {
                continue;
            }
            if (first) {
                encode_scale((float)coeffs[k], vecs[k] + off, m, out + off);
                first = 0;
            } else {
                encode_axpy((float)coeffs[k], vecs[k] + off, m, out + off);
            }
        }
        if (first) {
            memset(out + off, 0, sizeof(float) * m);
        }
    }
    return GCX_OK;
}

gcx_status_t gcx_code_accumulate(double coeff, const float *vec, size_t len,
                                 float *acc)
{
    if (len > 0 && (acc == NULL || (coeff != 0.0 && vec == NULL))) {
        return GCX_ERR_INVALID;
    }
    if (coeff == 0.0 || len == 0) {
        return GCX_OK;
    }
    encode_axpy((float)coeff, vec, len, acc);
    return GCX_OK;
}
