/*
 * topk.c - exact top-k by magnitude in O(N): radix select on magnitude keys.
 *
 * Idea: the bits of |x| (IEEE-754 with the sign cleared) order like |x|, so
 * the k-th largest magnitude can be found digit by digit, most significant
 * first, from histograms - no sort. Ties: equal magnitudes are ordered by
 * index, the lower index wins; the selection is a deterministic function of
 * the input, and topk of a sparse top-k result equals the direct top-k
 * (multi-level exactness).
 *
 * Radix select (topk_radix; the guaranteed path):
 *   pass 1  histogram of the top 11 bits of every key, fused with the sum of
 *           squares (which also detects NaN/Inf: the sum is then not finite).
 *           Walking the histogram from the top gives the boundary bucket b:
 *           "above" entries lie in higher buckets, k - above must come from b.
 *   (pass)  while b holds more than ~3% of the input, histogram the next 10
 *           bits of the keys inside b (at most twice: 11 + 10 + 10 = 31).
 *   pass 2  one emitting pass: entries above b go straight to the output in
 *           index order; entries inside b go to a candidate buffer. The
 *           k - above largest candidates are kept (cand.c: histogram, then a
 *           quickselect on (key, earlier first) inside one bucket), and a
 *           backward merge interleaves them with the output, in place.
 *   When all 31 bits are resolved the threshold key T is exact and the
 *   emitting pass takes key > T plus the first (k - above) entries == T.
 *   Cost: 2 streaming reads for gradient-like data, 3 to 4 for magnitudes
 *   crowded into one bucket; memory: the bucket's candidates.
 *
 * Sampled shortcut (topk_sampled; N >= 64Ki): the radix select's first
 * histogram mostly counts entries far below the boundary. A 0.1% stratified
 * sample gives a lower bound L of the k-th largest key with a margin of four
 * standard deviations; one pass (fused with the sum of squares) copies the
 * entries with key >= L - typically 1.1k to 2k of them - and the same
 * candidate selection finds the exact top k among them. The sample only
 * decides how much work is skipped, never the result: when fewer than k or
 * more than the buffer's entries reach L, the radix select runs instead.
 *   Cost: one streaming read plus O(k); the figures are in perf/compress.
 */
#include "compress_int.h"

#include <math.h>

#define TOPK_D0_BITS 11u /* first digit: exponent + 3 mantissa bits */
#define TOPK_DN_BITS 10u /* next digits: 10 + 10 = the remaining 20 bits */
#define TOPK_BLOCK   GCX_COMPRESS_SQ_BLOCK

#define TOPK_SAMPLE_MIN_M 65536u /* below: radix select directly */
#define TOPK_SAMPLE_DIV   1024u  /* sample ~0.1% ... */
#define TOPK_SAMPLE_MIN   4096u  /* ... but at least this many */

/* Candidate buffer limit: one more histogram pass is cheaper than
 * collecting and selecting more candidates than this. */
static size_t topk_cand_cap(size_t m)
{
    return m / 32 + 4096;
}

/* Pass 1: histogram of key >> 20 and the sum of squares, block by block so
 * that the sum of squares runs vectorized on data already in L1. Two
 * interleaved histograms break the store-to-load dependency between
 * neighbours that fall into the same bucket. */
static double topk_hist_first(const float *v, size_t m, uint32_t *hist)
{
    uint32_t h2[1u << TOPK_D0_BITS];
    const unsigned shift = 31u - TOPK_D0_BITS;
    double sq = 0;
    size_t b, i;

    memset(h2, 0, sizeof(h2));
    for (b = 0; b < m; b += TOPK_BLOCK) {
        size_t len = m - b < TOPK_BLOCK ? m - b : TOPK_BLOCK;
        const float *p = v + b;

        sq += gcx_compress_sqnorm_block(p, len);
        for (i = 0; i + 2 <= len; i += 2) {
            hist[gcx_compress_key(p[i]) >> shift]++;
            h2[gcx_compress_key(p[i + 1]) >> shift]++;
        }
        if (i < len) {
            hist[gcx_compress_key(p[i]) >> shift]++;
        }
    }
    for (i = 0; i < (1u << TOPK_D0_BITS); i++) {
        hist[i] += h2[i];
    }
    return sq;
}

/* Further digit: histogram of bits [dshift, dshift + TOPK_DN_BITS) of the
 * keys whose bits above pshift equal prefix. */
static void topk_hist_next(const float *v, size_t m, uint32_t prefix,
                           unsigned pshift, unsigned dshift, uint32_t *hist)
{
    const uint32_t mask = (1u << TOPK_DN_BITS) - 1;
    size_t i;

    for (i = 0; i < m; i++) {
        uint32_t key = gcx_compress_key(v[i]);
        if ((key >> pshift) == prefix) {
            hist[(key >> dshift) & mask]++;
        }
    }
}

/*
 * Emitting pass with candidates: keys >= hi go to out, keys in [lo, hi) go
 * to the candidate arrays. Inlined twice (dense: map == NULL, sparse).
 */
GCX_COMPRESS_INLINE void topk_emit_split(const float *v, const uint32_t *map,
                                         size_t m, uint32_t lo, uint32_t hi,
                                         uint32_t *oidx, float *oval,
                                         uint32_t *cidx, float *cval)
{
    size_t i = 0, j, no = 0, nc = 0;

    for (;;) {
        for (; i + 16 <= m && !gcx_compress_any16_ge(v + i, lo); i += 16) {
        }
        j = i + 16 <= m ? i + 16 : m;
        if (i >= j) {
            break;
        }
        for (; i < j; i++) {
            uint32_t key = gcx_compress_key(v[i]);
            if (key >= lo) {
                uint32_t ix = map != NULL ? map[i] : (uint32_t)i;
                if (key >= hi) {
                    oidx[no] = ix;
                    oval[no++] = v[i];
                } else {
                    cidx[nc] = ix;
                    cval[nc++] = v[i];
                }
            }
        }
    }
}

/* Emitting pass for an exact threshold key t: key > t, then the first
 * `ties` entries with key == t. */
GCX_COMPRESS_INLINE void topk_emit_exact(const float *v, const uint32_t *map,
                                         size_t m, uint32_t t, size_t ties,
                                         uint32_t *oidx, float *oval)
{
    size_t i = 0, j, no = 0;

    for (;;) {
        for (; i + 16 <= m && !gcx_compress_any16_ge(v + i, t); i += 16) {
        }
        j = i + 16 <= m ? i + 16 : m;
        if (i >= j) {
            break;
        }
        for (; i < j; i++) {
            uint32_t key = gcx_compress_key(v[i]);
            if (key > t || (key == t && ties > 0)) {
                ties -= key == t;
                oidx[no] = map != NULL ? map[i] : (uint32_t)i;
                oval[no++] = v[i];
            }
        }
    }
}

static void topk_emit_split_dense(const float *v, size_t m, uint32_t lo,
                                  uint32_t hi, uint32_t *oidx, float *oval,
                                  uint32_t *cidx, float *cval)
{
    topk_emit_split(v, NULL, m, lo, hi, oidx, oval, cidx, cval);
}

static void topk_emit_split_map(const float *v, const uint32_t *map, size_t m,
                                uint32_t lo, uint32_t hi, uint32_t *oidx,
                                float *oval, uint32_t *cidx, float *cval)
{
    topk_emit_split(v, map, m, lo, hi, oidx, oval, cidx, cval);
}

static void topk_emit_exact_dense(const float *v, size_t m, uint32_t t,
                                  size_t ties, uint32_t *oidx, float *oval)
{
    topk_emit_exact(v, NULL, m, t, ties, oidx, oval);
}

static void topk_emit_exact_map(const float *v, const uint32_t *map, size_t m,
                                uint32_t t, size_t ties, uint32_t *oidx,
                                float *oval)
{
    topk_emit_exact(v, map, m, t, ties, oidx, oval);
}

/* Merge the nc candidates (sorted by index) into the na outputs (sorted by
 * index), backwards, so that out holds na + nc entries in index order. */
static void topk_merge(uint32_t *oidx, float *oval, size_t na,
                       const uint32_t *cidx, const float *cval, size_t nc)
{
    size_t w = na + nc;

    while (nc > 0) {
        if (na > 0 && oidx[na - 1] > cidx[nc - 1]) {
            na--;
            w--;
            oidx[w] = oidx[na];
            oval[w] = oval[na];
        } else {
            nc--;
            w--;
            oidx[w] = cidx[nc];
            oval[w] = cval[nc];
        }
    }
}

/* The radix select proper: every pass over the whole input. */
static gcx_status_t topk_radix(gcx_compressor_t *comp,
                               const gcx_compress_cvec_t *in, size_t k,
                               gcx_sparse_vec_t *out, gcx_compress_cres_t *res)
{
    uint32_t hist[1u << TOPK_D0_BITS];
    const float *v = in->val;
    size_t m = in->m, above = 0, count;
    unsigned bits = TOPK_D0_BITS, passes = 1;
    uint32_t prefix;
    double sq;

    memset(hist, 0, sizeof(hist));
    sq = topk_hist_first(v, m, hist);
    if (!(sq <= __DBL_MAX__)) {
        return GCX_ERR_RANGE; /* NaN or Inf in the input */
    }
    prefix = gcx_cand_hist_find(hist, 1u << TOPK_D0_BITS, k, &above);
    count = hist[prefix];

    while (count > topk_cand_cap(m) && bits < 31) {
        unsigned pshift = 31u - bits, dshift = pshift - TOPK_DN_BITS;
        uint32_t j;

        memset(hist, 0, sizeof(uint32_t) << TOPK_DN_BITS);
        topk_hist_next(v, m, prefix, pshift, dshift, hist);
        passes++;
        j = gcx_cand_hist_find(hist, 1u << TOPK_DN_BITS, k - above, &above);
        count = hist[j];
        prefix = (prefix << TOPK_DN_BITS) | j;
        bits += TOPK_DN_BITS;
    }

    if (bits == 31) {
        /* The threshold key is exact: no candidates needed. */
        if (in->map != NULL) {
            topk_emit_exact_map(v, in->map, m, prefix, k - above, out->idx,
                                out->val);
        } else {
            topk_emit_exact_dense(v, m, prefix, k - above, out->idx, out->val);
        }
    } else {
        unsigned pshift = 31u - bits;
        uint32_t lo = prefix << pshift, hi = (prefix + 1) << pshift;
        uint32_t *cidx = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CIDX,
                                              count * 4 + 4);
        float *cval = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CVAL,
                                           count * 4 + 4);
        gcx_status_t status;

        /* Reserve the selection's scratch too, so that nothing can fail
         * once out is being written. */
        if (cidx == NULL || cval == NULL ||
            gcx_compress_scratch(comp, GCX_COMPRESS_SCR_AUX,
                                 count * 8 + 8) == NULL) {
            return GCX_ERR_NOMEM;
        }
        /* The outputs of "above" and the candidates are written here; out
         * is only written after the NaN check above. */
        if (in->map != NULL) {
            topk_emit_split_map(v, in->map, m, lo, hi, out->idx, out->val, cidx,
                                cval);
        } else {
            topk_emit_split_dense(v, m, lo, hi, out->idx, out->val, cidx, cval);
        }
        status =
            gcx_cand_keep_top(comp, cidx, cval, count, k - above, cidx, cval);
        if (status != GCX_OK) {
            return status;
        }
        topk_merge(out->idx, out->val, above, cidx, cval, k - above);
    }
    passes++;
    out->nnz = k;
    res->in_sqnorm = sq;
    res->passes = passes;
    return GCX_OK;
}

/*
 * The sampled shortcut: a lower bound L of the k-th largest key, taken from
 * a sample with a wide margin, lets one pass collect every entry >= L (a
 * few k of them) and the exact top k is then selected among those alone.
 * The sample never decides the result, only the work: if fewer than k or
 * more than the buffer's entries reach L, the radix select runs instead.
 * Returns 1 when it produced out, 0 to fall back, < 0 on error.
 */
static int topk_sampled(gcx_compressor_t *comp, const gcx_compress_cvec_t *in,
                        size_t k, gcx_sparse_vec_t *out,
                        gcx_compress_cres_t *res)
{
    const size_t m = in->m;
    size_t s = m / TOPK_SAMPLE_DIV, rl, cap, c;
    uint32_t *keys, *tmp, *cidx, l;
    float *cval;
    double rk, sq;
    gcx_compress_rng_t rng;

    s = s < TOPK_SAMPLE_MIN ? TOPK_SAMPLE_MIN : s;
    rk = (double)s * (double)k / (double)m; /* expected rank of the k-th */
    rl = (size_t)ceil(rk + 4 * sqrt(rk) + 16);
    if (rl >= s) {
        return 0; /* no useful bound */
    }
    keys = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_AUX, s * 4);
    tmp = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_TMP, s * 4);
    if (keys == NULL || tmp == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_compress_rng_seed(&rng, comp->seed, comp->step, m, k);
    gcx_cand_sample_keys(in, s, 1, &rng, keys, tmp);
    l = gcx_cand_keys_rank(keys, s, rl, tmp);
    if (l == 0) {
        return 0; /* zeros (or nothing) to skip: no gain */
    }
    cap = 2 * (size_t)ceil((double)m * (double)rl / (double)s) + 4096;
    cap = cap < m ? cap : m;
    cidx = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CIDX, cap * 4);
    cval = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CVAL, cap * 4);
    if (cidx == NULL || cval == NULL) {
        return GCX_ERR_NOMEM;
    }
    c = gcx_cand_thr_collect(in, l, cap, cidx, cval, &sq);
    res->in_sqnorm = sq;
    res->passes = 1;
    if (!(sq <= __DBL_MAX__)) {
        return GCX_ERR_RANGE;
    }
    if (c < k || c > cap) {
        return 0;
    }
    if (gcx_cand_keep_top(comp, cidx, cval, c, k, out->idx, out->val) !=
        GCX_OK) {
        return GCX_ERR_NOMEM;
    }
    out->nnz = k;
    return 1;
}

gcx_status_t gcx_topk_select(gcx_compressor_t *comp,
                             const gcx_compress_cvec_t *in, size_t k,
                             gcx_sparse_vec_t *out, gcx_compress_cres_t *res)
{
    gcx_compress_cres_t first = {0, 0};
    gcx_status_t status;
    int done = 0;

    if (in->m >= TOPK_SAMPLE_MIN_M) {
        done = topk_sampled(comp, in, k, out, &first);
        if (done < 0) {
            return (gcx_status_t)done;
        }
        if (done) {
            *res = first;
            return GCX_OK;
        }
    }
    status = topk_radix(comp, in, k, out, res);
    res->passes += first.passes;
    return status;
}
