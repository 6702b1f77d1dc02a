/*
 * dgc.c - Deep Gradient Compression's sampled threshold (Lin et al., 2018).
 *
 * Idea: estimate the magnitude threshold of the top k from a ~1% sample and
 * select with one pass, instead of an exact selection:
 *   sample  s = max(N/100, min(N, 4096)) magnitudes: 16 consecutive entries
 *           (one cache line) at a random place in each of s/16 equal strata
 *           (stratified and random: every entry has the same chance and no
 *           periodic structure of the gradient can alias with it, unlike a
 *           fixed stride; whole lines: 1% of the entries from 1% of the
 *           lines);
 *           threshold T = the sample's ceil(s k / N)-th largest magnitude
 *           (radix select over the sample, O(s)).
 *   pass    every |x| >= T goes to a candidate buffer (in index order) of up
 *           to 2k + 64 entries; the first pass also sums squares (NaN/Inf).
 *   correct count c in [ceil(0.8k), floor(1.3k)]: done, c entries.
 *           1.3k < c <= buffer: exact top-k among the candidates (they hold
 *           every entry >= T, so this is the exact top-k of the input).
 *           c < 0.8k or c > buffer: a new threshold from the same sample at
 *           a rank scaled by k / c, and another pass; after three passes,
 *           exact topk (radix select).
 * Whatever the path, the result is the set of the nnz largest magnitudes
 * (ties at T are all in or, after an exact top-k, the lower indices win),
 * with nnz in [ceil(0.8k), floor(1.3k)].
 * Cost: reading 1% of the cache lines for the sample plus one streaming
 * pass in the common case; scratch: 2k + 64 candidates and 2s keys.
 */
#include "compress_int.h"

#define DGC_SAMPLE_DIV 100u  /* sample ~1% */
#define DGC_SAMPLE_MIN 4096u /* but at least this many (or all) */
#define DGC_PASSES     3u    /* threshold passes before exact topk */
#define DGC_CHUNK      16u   /* sample unit: 16 floats, one cache line */

/* Smallest sample key above t, or t when there is none. */
static uint32_t dgc_key_above(const uint32_t *keys, size_t s, uint32_t t)
{
    uint32_t best = UINT32_MAX;
    size_t j;

    for (j = 0; j < s; j++) {
        best = keys[j] > t && keys[j] < best ? keys[j] : best;
    }
    return best == UINT32_MAX ? t : best;
}

/* Largest sample key below t, or t when there is none. */
static uint32_t dgc_key_below(const uint32_t *keys, size_t s, uint32_t t)
{
    uint32_t best = 0;
    int found = 0;
    size_t j;

    for (j = 0; j < s; j++) {
        if (keys[j] < t && keys[j] >= best) {
            best = keys[j];
            found = 1;
        }
    }
    return found ? best : t;
}

gcx_status_t gcx_dgc_select(gcx_compressor_t *comp,
                            const gcx_compress_cvec_t *in, size_t k,
                            gcx_sparse_vec_t *out, gcx_compress_cres_t *res)
{
    const size_t m = in->m;
    const size_t lo = k - (2 * k) / 10, hi = k + (3 * k) / 10;
    size_t cap = 2 * k + 64 < m ? 2 * k + 64 : m;
    size_t s = m / DGC_SAMPLE_DIV, r, c = 0, pass, chunk;
    unsigned npass = 0;
    int done = 0;
    uint32_t *keys, *tmp, *cidx, t, t2;
    float *cval;
    double sq = 0;
    gcx_compress_rng_t rng;
    gcx_compress_cres_t sub;
    gcx_status_t status;

    if (s < DGC_SAMPLE_MIN) {
        s = m < DGC_SAMPLE_MIN ? m : DGC_SAMPLE_MIN;
    }
    /* whole cache lines when the strata are at least a chunk wide */
    chunk = s >= DGC_CHUNK && m / (s / DGC_CHUNK) >= DGC_CHUNK ? DGC_CHUNK : 1;
    s -= s % chunk;
    keys = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_AUX, s * 4);
    tmp = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_TMP, s * 4);
    cidx = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CIDX, cap * 4);
    cval = gcx_compress_scratch(comp, GCX_COMPRESS_SCR_CVAL, cap * 4);
    if (keys == NULL || tmp == NULL || cidx == NULL || cval == NULL) {
        return GCX_ERR_NOMEM;
    }

    gcx_compress_rng_seed(&rng, comp->seed, comp->step, m, k);
    gcx_cand_sample_keys(in, s, chunk, &rng, keys, tmp);
    r = (size_t)(((unsigned __int128)s * k + m - 1) / m); /* >= 1 */
    t = gcx_cand_keys_rank(keys, s, r, tmp);

    for (pass = 0; pass < DGC_PASSES; pass++) {
        c = gcx_cand_thr_collect(in, t, cap, cidx, cval,
                                 pass == 0 ? &sq : NULL);
        npass++;
        if (pass == 0 && !(sq <= __DBL_MAX__)) {
            return GCX_ERR_RANGE; /* NaN or Inf in the input */
        }
        if (c >= lo && c <= hi) {
            done = 1;
            break;
        }
        if (c > hi && c <= cap) {
            /* Every entry >= t is a candidate: their top k is exact. */
            status = gcx_cand_keep_top(comp, cidx, cval, c, k, cidx, cval);
            if (status != GCX_OK) {
                return status;
            }
            c = k;
            done = 1;
            break;
        }
        if (c > cap) {
            /* too many: a higher rank of the sample, strictly above t */
            r = (size_t)(((unsigned __int128)r * k) / c);
            r = r < 1 ? 1 : r;
            t2 = gcx_cand_keys_rank(keys, s, r, tmp);
            t2 = t2 > t ? t2 : dgc_key_above(keys, s, t);
            if (t2 <= t) {
                break; /* no sample key above t */
            }
        } else {
            /* too few: a lower rank of the sample, strictly below t */
            r = c > 0 ? (size_t)(((unsigned __int128)r * k + c - 1) / c)
                      : 4 * r;
            r = r > s ? s : r;
            t2 = gcx_cand_keys_rank(keys, s, r, tmp);
            t2 = t2 < t ? t2 : dgc_key_below(keys, s, t);
            if (t2 >= t) {
                break; /* no sample key below t */
            }
        }
        t = t2;
    }
    res->passes = npass;
    res->in_sqnorm = sq;
    if (!done) {
        /* Last correction: the exact selection always lands in range. */
        status = gcx_topk_select(comp, in, k, out, &sub);
        if (status != GCX_OK) {
            return status;
        }
        res->passes += sub.passes;
        return GCX_OK;
    }
    memcpy(out->idx, cidx, c * sizeof(*cidx));
    memcpy(out->val, cval, c * sizeof(*cval));
    out->nnz = c;
    return GCX_OK;
}
