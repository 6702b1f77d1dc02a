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
 * Cost: one streaming read for the sum of squares (and the NaN/Inf check
 * every compressor makes), min(k, N-k) random bitmap probes, N/64 words
 * scanned, k gathered values; scratch: N/8 bytes.
 */
#include "compress_int.h"

gcx_status_t gcx__randomk_select(gcx_compressor_t *comp,
                                 const gcx__cvec_t *in, size_t k,
                                 gcx_sparse_t *out, gcx__cres_t *res)
{
    const size_t m = in->m, words = (m + 63) / 64;
    const int invert = k > m / 2;
    const size_t draws = invert ? m - k : k;
    uint64_t *bits, flip;
    gcx__rng_t rng;
    size_t w, j, n = 0;
    double sq;

    bits = gcx__scratch(comp, GCX__SCR_AUX, words * sizeof(*bits));
    if (bits == NULL) {
        return GCX_ERR_NOMEM;
    }
    sq = gcx__sqnorm(in->val, m);
    if (!(sq <= __DBL_MAX__)) {
        return GCX_ERR_RANGE;
    }
    memset(bits, 0, words * sizeof(*bits));
    gcx__rng_seed(&rng, comp->seed, comp->step, m, k);
    /* Floyd: for j = m - draws .. m - 1, take t uniform in [0, j]; if t is
     * taken already, take j (which cannot be taken yet). */
    for (j = m - draws; j < m; j++) {
        size_t t = (size_t)gcx__rng_below(&rng, (uint64_t)j + 1);
        uint64_t bit = 1ull << (t % 64);
        if (bits[t / 64] & bit) {
            t = j;
            bit = 1ull << (t % 64);
        }
        bits[t / 64] |= bit;
    }
    flip = invert ? ~0ull : 0;
    for (w = 0; w < words; w++) {
        uint64_t b = bits[w] ^ flip;
        if (w == words - 1 && m % 64 != 0) {
            b &= (1ull << (m % 64)) - 1; /* positions past m */
        }
        while (b != 0) {
            size_t pos = w * 64 + (size_t)__builtin_ctzll(b);
            out->idx[n] = gcx__cvec_index(in, pos);
            out->val[n++] = in->val[pos];
            b &= b - 1;
        }
    }
    out->nnz = n;
    res->in_sqnorm = sq;
    res->passes = 1;
    return GCX_OK;
}
