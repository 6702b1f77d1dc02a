/*
 * randomk.c - k entries drawn uniformly at random, the same on every rank.
 *
 * Idea: the indices depend only on (seed, step, N, k), never on the values,
 * so every rank that passes the same seed and step selects the same
 * positions and the k values can be summed by a plain dense allreduce.
 * Draw: Floyd's algorithm (k draws, each an exact uniform integer from a
 * splitmix64 generator, so every platform draws the same) marks a uniform
 * k-subset in a bitmap of N bits; when k > N/2 the N - k excluded positions
 * are drawn instead. Reading the bitmap word by word emits sorted indices
 * without a sort.
 * Cost: min(k, N-k) bitmap probes (prefetched in batches), then one
 * streaming read that sums squares (the NaN/Inf check every compressor
 * makes) and gathers the k values of the same block, and a copy of the k
 * entries to the output; scratch: N/8 bytes and k entries.
 */
#include "compress_int.h"

#define RK_BATCH 64u /* draws whose bitmap words are prefetched together */

gcx_status_t gcx_randomk_select(gcx_compressor_t *comp,
                                const gcx_compress_cvec_t *in, size_t k,
                                gcx_sparse_vec_t *out, gcx_compress_cres_t *res)
{
    const size_t m = in->m, words = (m + 63) / 64;
    const size_t bw = GCX_COMPRESS_SQ_BLOCK / 64; /* bitmap words per block */
    const int invert = k > m / 2;
    const size_t draws = invert ? m - k : k;
    const uint64_t flip = invert ? ~0ull : 0;
    uint64_t *bits;
    uint32_t *cidx;
    float *cval;
    gcx_compress_rng_t rng;
    size_t w, j, n = 0;
    double sq = 0;

    bits = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_AUX,
                                words * sizeof(*bits));
    cidx = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CIDX, k * sizeof(*cidx));
    cval = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CVAL, k * sizeof(*cval));
    if (bits == NULL || cidx == NULL || cval == NULL) {
        return GCX_ERR_NOMEM;
    }
    memset(bits, 0, words * sizeof(*bits));
    gcx_compress_rng_seed(&rng, comp->seed, comp->step, m, k);
    /* Floyd: for j = m - draws .. m - 1, take t uniform in [0, j]; if t is
     * taken already, take j (which cannot be taken yet). The draws do not
     * depend on the bitmap, so a batch is drawn first and its bitmap words
     * prefetched: the probes then overlap instead of waiting one by one. */
    for (j = m - draws; j < m; j += RK_BATCH) {
        size_t t[RK_BATCH], b, nb = m - j < RK_BATCH ? m - j : RK_BATCH;
        for (b = 0; b < nb; b++) {
            t[b] = (size_t)gcx_compress_rng_below(&rng, (uint64_t)(j + b) + 1);
            __builtin_prefetch(&bits[t[b] / 64], 1);
        }
        for (b = 0; b < nb; b++) {
            size_t p = t[b];
            if (bits[p / 64] & (1ull << (p % 64))) {
                p = j + b;
            }
            bits[p / 64] |= 1ull << (p % 64);
        }
    }
    if (m % 64 != 0) {
        /* positions past m are never selected, even when inverted */
        bits[words - 1] |= flip & ~((1ull << (m % 64)) - 1);
    }
    /* One read of the values: per block, the sum of squares and the
     * selected entries (to scratch: out is written only once the input is
     * known to be finite). */
    for (w = 0; w < words; w++) {
        uint64_t b = bits[w] ^ flip;
        if (w % bw == 0) {
            size_t at = w * 64;
            sq += gcx_compress_sqnorm_block(in->val + at,
                                            m - at < GCX_COMPRESS_SQ_BLOCK
                                                ? m - at
                                                : GCX_COMPRESS_SQ_BLOCK);
        }
        while (b != 0) {
            size_t pos = w * 64 + (size_t)__builtin_ctzll(b);
            cidx[n] = gcx_compress_cvec_index(in, pos);
            cval[n++] = in->val[pos];
            b &= b - 1;
        }
    }
    if (!(sq <= __DBL_MAX__)) {
        return GCX_ERR_RANGE;
    }
    memcpy(out->idx, cidx, n * sizeof(*cidx));
    memcpy(out->val, cval, n * sizeof(*cval));
    out->nnz = n;
    res->in_sqnorm = sq;
    res->passes = 1;
    return GCX_OK;
}
