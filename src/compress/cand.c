/*
 * cand.c - threshold passes and candidate selection, shared by topk, dgc
 * and redsync.
 *
 * Idea: a selection by magnitude rarely needs to look twice at most of the
 * input. A threshold pass copies the few entries whose key reaches a
 * threshold into a candidate buffer (in index order), skipping groups of
 * 16 entries with one vector compare, and sums squares of the same groups
 * while they are in registers. The exact top r among the candidates is then
 * found on the small buffer: an 11-bit histogram of their keys gives the
 * boundary bucket, a quickselect on (key, earlier first) composites of that
 * bucket alone gives the exact boundary, and a compaction keeps the winners in
 * index order.
 * Costs: sample: s / chunk random reads (prefetched); rank in the sample: a
 * histogram pass over it plus two over its boundary bucket;
 * threshold pass: one streaming read, writes per candidate; keep_top: two
 * reads of the nc candidates plus O(bucket) for the quickselect.
 */
#include "compress_int.h"

#define CAND_BLOCK   GCX_COMPRESS_SQ_BLOCK
#define CAND_D0_BITS 11u

void gcx_cand_sample_keys(const gcx_compress_cvec_t *in, size_t s, size_t chunk,
                          gcx_compress_rng_t *rng, uint32_t *keys,
                          uint32_t *tmp)
{
    const float *v = in->val;
    const size_t units = in->m / chunk, strata = s / chunk, ahead = 32;
    const size_t q = units / strata, rem = units % strata;
    size_t j, c, a = 0, acc = 0;

    /* Stratum j is the range of units (chunks of `chunk` entries)
     * [floor(j U / S), floor((j + 1) U / S)), stepped with an exact
     * remainder; one unit at random in each. Positions first, then a gather
     * with prefetches so that many cache misses are in flight at once. */
    for (j = 0; j < strata; j++) {
        size_t w = q;
        acc += rem;
        if (acc >= strata) {
            acc -= strata;
            w++;
        }
        tmp[j] = (uint32_t)((a + (size_t)gcx_compress_rng_below(rng, w)) *
                            chunk);
        a += w;
    }
    for (j = 0; j < strata; j++) {
        const float *p = v + tmp[j];
        if (j + ahead < strata) {
            __builtin_prefetch(v + tmp[j + ahead]);
        }
        for (c = 0; c < chunk; c++) {
            keys[j * chunk + c] = gcx_compress_key(p[c]);
        }
    }
}

/* Keys of src whose bits from pshift up equal prefix (every key when
 * pshift >= 32) are histogrammed on (key >> shift) & mask and copied to dst
 * when dst is given. Returns how many matched. */
static size_t rank_hist(const uint32_t *src, size_t n, unsigned pshift,
                        uint32_t prefix, unsigned shift, uint32_t mask,
                        uint32_t *hist, uint32_t *dst)
{
    size_t i, w = 0;

    for (i = 0; i < n; i++) {
        uint32_t key = src[i];
        if (pshift >= 32 || key >> pshift == prefix) {
            hist[(key >> shift) & mask]++;
            if (dst != NULL) {
                dst[w] = key;
            }
            w++;
        }
    }
    return w;
}

uint32_t gcx_cand_keys_rank(const uint32_t *keys, size_t s, size_t r,
                            uint32_t *tmp)
{
    uint32_t hist[1u << CAND_D0_BITS], b, b2, b3;
    size_t above = 0, nb;

    /* 11 + 10 + 10 bits: the first level over all s keys, the next ones
     * over the boundary bucket only (copied to tmp). */
    memset(hist, 0, sizeof(hist));
    rank_hist(keys, s, 32, 0, 20, 0x7ff, hist, NULL);
    b = gcx_cand_hist_find(hist, 1u << 11, r, &above);
    memset(hist, 0, sizeof(hist));
    nb = rank_hist(keys, s, 20, b, 10, 0x3ff, hist, tmp);
    b2 = gcx_cand_hist_find(hist, 1u << 10, r - above, &above);
    memset(hist, 0, sizeof(hist));
    rank_hist(tmp, nb, 10, (b << 10) | b2, 0, 0x3ff, hist, NULL);
    b3 = gcx_cand_hist_find(hist, 1u << 10, r - above, &above);
    return (b << 20) | (b2 << 10) | b3;
}

/* The entries of a group of 16 (or of the tail of a block) with key >= t
 * into the candidates. While 16 more fit, the stores are unconditional and
 * only the count moves (no branch to mispredict at CF 10); near the end of
 * the buffer a checked loop takes over and counts past cap. */
GCX_COMPRESS_INLINE size_t cand_take(const float *v, const uint32_t *map,
                                     size_t base, size_t i, size_t j,
                                     uint32_t t, size_t n, size_t cap,
                                     uint32_t *cidx, float *cval)
{
    if (GCX_COMPRESS_LIKELY(n + 16 <= cap)) {
        for (; i < j; i++) {
            cidx[n] = map != NULL ? map[i] : (uint32_t)(base + i);
            cval[n] = v[i];
            n += gcx_compress_key(v[i]) >= t;
        }
        return n;
    }
    for (; i < j; i++) {
        if (gcx_compress_key(v[i]) >= t) {
            if (n < cap) {
                cidx[n] = map != NULL ? map[i] : (uint32_t)(base + i);
                cval[n] = v[i];
            }
            n++;
        }
    }
    return n;
}

/* One block (len <= GCX_COMPRESS_SQ_BLOCK): the candidates and, in the same
 * loop over groups of 16 held in registers, the block's sum of squares with
 * the accumulation order of gcx_compress_sqnorm_block (so the bits are the
 * same). */
GCX_COMPRESS_INLINE size_t cand_block(const float *v, const uint32_t *map,
                                      size_t base, size_t len, uint32_t t,
                                      size_t n, size_t cap, uint32_t *cidx,
                                      float *cval, double *sq_p)
{
    gcx_compress_sqacc_t acc;
    size_t i = 0, j;

    gcx_compress_sqacc_init(&acc);
    for (; i + 16 <= len; i += 16) {
        gcx_compress_sqacc_add8(&acc, v + i);
        gcx_compress_sqacc_add8(&acc, v + i + 8);
        if (GCX_COMPRESS_UNLIKELY(gcx_compress_any16_ge(v + i, t))) {
            n = cand_take(v, map, base, i, i + 16, t, n, cap, cidx, cval);
        }
    }
    for (j = i; j + 8 <= len; j += 8) {
        gcx_compress_sqacc_add8(&acc, v + j);
    }
    *sq_p += gcx_compress_sqacc_sum(&acc, v + j, len - j);
    return cand_take(v, map, base, i, len, t, n, cap, cidx, cval);
}

GCX_COMPRESS_INLINE size_t cand_pass(const float *v, const uint32_t *map,
                                     size_t m, uint32_t t, size_t cap,
                                     uint32_t *cidx, float *cval, double *sq_p)
{
    size_t b, n = 0;
    double sq = 0;

    for (b = 0; b < m; b += CAND_BLOCK) {
        size_t len = m - b < CAND_BLOCK ? m - b : CAND_BLOCK;
        n = cand_block(v + b, map != NULL ? map + b : NULL, b, len, t, n, cap,
                       cidx, cval, &sq);
    }
    if (sq_p != NULL) {
        *sq_p = sq;
    }
    return n;
}

static size_t cand_pass_dense(const float *v, size_t m, uint32_t t, size_t cap,
                              uint32_t *cidx, float *cval, double *sq_p)
{
    return cand_pass(v, NULL, m, t, cap, cidx, cval, sq_p);
}

static size_t cand_pass_map(const float *v, const uint32_t *map, size_t m,
                            uint32_t t, size_t cap, uint32_t *cidx, float *cval,
                            double *sq_p)
{
    return cand_pass(v, map, m, t, cap, cidx, cval, sq_p);
}

size_t gcx_cand_thr_collect(const gcx_compress_cvec_t *in, uint32_t t,
                            size_t cap, uint32_t *cidx, float *cval,
                            double *sq_p)
{
    if (in->map != NULL) {
        return cand_pass_map(in->val, in->map, in->m, t, cap, cidx, cval, sq_p);
    }
    return cand_pass_dense(in->val, in->m, t, cap, cidx, cval, sq_p);
}

uint32_t gcx_cand_hist_find(const uint32_t *hist, uint32_t nb, size_t need,
                            size_t *above_p)
{
    size_t acc = 0;
    uint32_t j = nb;

    while (j-- > 1) {
        if (acc + hist[j] >= need) {
            break;
        }
        acc += hist[j];
    }
    *above_p += acc;
    return j;
}

/* Composite of candidate j: magnitude first, then the earlier candidate. */
static inline uint64_t cand_composite(float v, size_t j)
{
    return ((uint64_t)gcx_compress_key(v) << 32) | (uint32_t) ~(uint32_t)j;
}

gcx_status_t gcx_cand_keep_top(gcx_compressor_t *comp, const uint32_t *cidx,
                               const float *cval, size_t nc, size_t r,
                               uint32_t *oidx, float *oval)
{
    const unsigned shift = 31u - CAND_D0_BITS;
    uint32_t hist[1u << CAND_D0_BITS], b;
    size_t j, w = 0, above = 0, nb = 0;
    uint64_t *c64, thr;

    if (r >= nc || r == 0) {
        r = r >= nc ? nc : 0;
        if (oidx != cidx && r > 0) {
            memmove(oidx, cidx, r * sizeof(*oidx));
            memmove(oval, cval, r * sizeof(*oval));
        }
        return GCX_OK;
    }
    memset(hist, 0, sizeof(hist));
    for (j = 0; j < nc; j++) {
        hist[gcx_compress_key(cval[j]) >> shift]++;
    }
    b = gcx_cand_hist_find(hist, 1u << CAND_D0_BITS, r, &above);
    c64 = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_AUX,
                               hist[b] * sizeof(*c64));
    if (c64 == NULL) {
        return GCX_ERR_NOMEM;
    }
    for (j = 0; j < nc; j++) {
        if (gcx_compress_key(cval[j]) >> shift == b) {
            c64[nb++] = cand_composite(cval[j], j);
        }
    }
    /* 1 <= r - above <= nb: the boundary inside bucket b */
    thr = gcx_compress_select_u64_desc(c64, nb, r - above);
    /* Branch-free compaction (w <= j, so in place is safe); the loop ends
     * when r are kept, so a separate output needs only r entries. */
    for (j = 0; j < nc && w < r; j++) {
        uint32_t bk = gcx_compress_key(cval[j]) >> shift;
        size_t keep =
            (size_t)(bk > b) |
            ((size_t)(bk == b) & (size_t)(cand_composite(cval[j], j) >= thr));
        oidx[w] = cidx[j];
        oval[w] = cval[j];
        w += keep;
    }
    return GCX_OK;
}
