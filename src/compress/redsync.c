/*
 * redsync.c - RedSync's threshold search (Fang et al., 2019).
 *
 * Idea: the threshold of the top k lies between the mean and the max of |x|
 * for gradient-like data, so search thr = mean + r (max - mean), r in [0, 1],
 * until the count of |x| > thr lies in RedSync's window [ceil(k/2), 2k]:
 *   pass 1  sum and max of |x| and the sum of squares (NaN/Inf check).
 *   search  each pass counts |x| > thr for 8 values of r spread over the
 *           current interval [l, h) (an 8-ary search: the interval shrinks
 *           8x per pass where the binary search of the paper halves it), at
 *           most 8 passes; the accepted threshold is the one whose count is
 *           closest to k.
 *   emit    one pass writes |x| > thr in index order.
 * When fewer than k/2 entries exceed the mean, or the interval collapses
 * between two floats with the count jumping over the window (ties), there
 * is no such threshold: exact topk is used instead. The result is always the
 * set of the nnz largest magnitudes.
 * Cost: typically 3 to 4 streaming passes (1 + 1..2 searches + emit); no
 * scratch.
 */
#include "compress_int.h"

#include <math.h>

#define RS_WAYS   8u /* thresholds per search pass */
#define RS_PASSES 8u /* search passes before exact topk */
#define RS_BLOCK  GCX_COMPRESS_SQ_BLOCK

/* Sum of |x|, largest key and sum of squares, in one read. */
static double rs_first(const float *v, size_t m, double *sum_p,
                       uint32_t *maxkey_p)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, sq = 0;
    uint32_t mk = 0;
    size_t b, i;

    for (b = 0; b < m; b += RS_BLOCK) {
        size_t len = m - b < RS_BLOCK ? m - b : RS_BLOCK;
        const float *p = v + b;
        int32_t bm = 0;

        sq += gcx_compress_sqnorm_block(p, len);
        for (i = 0; i + 4 <= len; i += 4) {
            s0 += fabsf(p[i]);
            s1 += fabsf(p[i + 1]);
            s2 += fabsf(p[i + 2]);
            s3 += fabsf(p[i + 3]);
        }
        for (; i < len; i++) {
            s0 += fabsf(p[i]);
        }
        for (i = 0; i < len; i++) {
            int32_t key = (int32_t)gcx_compress_key(p[i]);
            bm = key > bm ? key : bm;
        }
        mk = (uint32_t)bm > mk ? (uint32_t)bm : mk;
    }
    *sum_p = (s0 + s1) + (s2 + s3);
    *maxkey_p = mk;
    return sq;
}

/* cnt[j] += #(key > t[j]) for the RS_WAYS thresholds in one read: four
 * keys at a time are compared with every threshold in vector registers,
 * each comparison (-1 or 0 per lane) subtracted from a lane counter. */
static void rs_count(const float *v, size_t m, const int32_t *t, size_t *cnt)
{
    const gcx_compress_v4i mask = {0x7fffffff, 0x7fffffff, 0x7fffffff,
                                   0x7fffffff};
    gcx_compress_v4i tv[RS_WAYS], acc[RS_WAYS];
    size_t i;
    unsigned j;

    for (j = 0; j < RS_WAYS; j++) {
        gcx_compress_v4i z = {0, 0, 0, 0}, b = {t[j], t[j], t[j], t[j]};
        tv[j] = b;
        acc[j] = z;
    }
    for (i = 0; i + 4 <= m; i += 4) {
        gcx_compress_v4i k;
        memcpy(&k, v + i, sizeof(k));
        k &= mask;
        for (j = 0; j < RS_WAYS; j++) {
            acc[j] -= k > tv[j];
        }
        if (GCX_COMPRESS_UNLIKELY((i & ((1u << 30) - 4)) == (1u << 30) - 4)) {
            /* flush before a lane counter could reach 2^31 */
            for (j = 0; j < RS_WAYS; j++) {
                gcx_compress_v4i z = {0, 0, 0, 0};
                cnt[j] += (size_t)(uint32_t)acc[j][0] + (uint32_t)acc[j][1] +
                          (uint32_t)acc[j][2] + (uint32_t)acc[j][3];
                acc[j] = z;
            }
        }
    }
    for (j = 0; j < RS_WAYS; j++) {
        cnt[j] += (size_t)(uint32_t)acc[j][0] + (uint32_t)acc[j][1] +
                  (uint32_t)acc[j][2] + (uint32_t)acc[j][3];
    }
    for (; i < m; i++) {
        int32_t key = (int32_t)gcx_compress_key(v[i]);
        for (j = 0; j < RS_WAYS; j++) {
            cnt[j] += key > t[j];
        }
    }
}

GCX_COMPRESS_INLINE size_t rs_emit(const float *v, const uint32_t *map,
                                   size_t m, uint32_t t, uint32_t *oidx,
                                   float *oval)
{
    size_t i = 0, j, n = 0;

    for (;;) {
        for (; i + 16 <= m && !gcx_compress_any16_ge(v + i, t + 1); i += 16) {
        }
        j = i + 16 <= m ? i + 16 : m;
        if (i >= j) {
            break;
        }
        for (; i < j; i++) {
            if (gcx_compress_key(v[i]) > t) {
                oidx[n] = map != NULL ? map[i] : (uint32_t)i;
                oval[n++] = v[i];
            }
        }
    }
    return n;
}

static size_t rs_emit_dense(const float *v, size_t m, uint32_t t,
                            uint32_t *oidx, float *oval)
{
    return rs_emit(v, NULL, m, t, oidx, oval);
}

static size_t rs_emit_map(const float *v, const uint32_t *map, size_t m,
                          uint32_t t, uint32_t *oidx, float *oval)
{
    return rs_emit(v, map, m, t, oidx, oval);
}

/* Threshold key of mean + r (max - mean), rounded to float. */
static int32_t rs_thr(double mean, double max, double r)
{
    return (int32_t)gcx_compress_key((float)(mean + r * (max - mean)));
}

gcx_status_t gcx_redsync_select(gcx_compressor_t *comp,
                                const gcx_compress_cvec_t *in, size_t k,
                                gcx_sparse_vec_t *out, gcx_compress_cres_t *res)
{
    const size_t m = in->m, lo = (k + 1) / 2, hi = 2 * k < m ? 2 * k : m;
    double sum, mean, max, l = 0, h = 1, sq;
    uint32_t maxkey;
    float fmax;
    int32_t t[RS_WAYS], thr = -1;
    unsigned pass, passes = 1, j;
    gcx_compress_cres_t sub;
    gcx_status_t status;

    sq = rs_first(in->val, m, &sum, &maxkey);
    if (!(sq <= __DBL_MAX__)) {
        return GCX_ERR_RANGE;
    }
    memcpy(&fmax, &maxkey, sizeof(fmax));
    mean = sum / (double)m;
    max = fmax;

    for (pass = 0; pass < RS_PASSES && thr < 0; pass++) {
        size_t cnt[RS_WAYS] = {0};
        double best = 0;
        unsigned a = 0;

        for (j = 0; j < RS_WAYS; j++) {
            t[j] = rs_thr(mean, max, l + (h - l) * j / RS_WAYS);
        }
        rs_count(in->val, m, t, cnt);
        passes++;
        if (cnt[0] < lo) {
            break; /* (first pass) fewer than k/2 above the mean */
        }
        for (j = 0; j < RS_WAYS; j++) {
            if (cnt[j] >= lo && cnt[j] <= hi) {
                double d = fabs(log((double)cnt[j] / (double)k));
                if (thr < 0 || d < best) {
                    thr = t[j];
                    best = d;
                }
            }
            if (cnt[j] > hi) {
                a = j;
            }
        }
        if (thr >= 0) {
            break;
        }
        /* cnt[a] > hi and (a + 1 < RS_WAYS: cnt[a + 1] < lo, else the
         * count at h is < lo): search [l_a, l_{a+1}). */
        {
            double nl = l + (h - l) * a / RS_WAYS;
            double nh = l + (h - l) * (a + 1) / RS_WAYS;
            if (rs_thr(mean, max, nl) == rs_thr(mean, max, nh)) {
                break; /* collapsed between two floats: ties */
            }
            l = nl;
            h = nh;
        }
    }
    res->in_sqnorm = sq;
    if (thr < 0) {
        status = gcx_topk_select(comp, in, k, out, &sub);
        if (status != GCX_OK) {
            return status;
        }
        res->passes = passes + sub.passes;
        return GCX_OK;
    }
    out->nnz = in->map != NULL ? rs_emit_map(in->val, in->map, m, (uint32_t)thr,
                                             out->idx, out->val)
                               : rs_emit_dense(in->val, m, (uint32_t)thr,
                                               out->idx, out->val);
    res->passes = passes + 1;
    return GCX_OK;
}
