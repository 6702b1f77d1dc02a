/*
 * sparse_kernels.c - local kernels of the sparse allreduce: sorted
 * merge-sum, tree merge of many lists, scatter into dense, message parsing,
 * radix top-k selection and the union-size sketch of the cost model.
 *
 * Cost: merge2 is one pass over both inputs (O(an + bn)); a tree merge of
 * nl lists of total n pairs is ceil(log2 nl) passes. Top-k selection reads
 * the values once per 8-bit digit of |v| (at most 4 passes, usually fewer
 * entries after the first) and needs no sort; with rows > 1 the histograms
 * of several owners are combined by the caller (one small allreduce per
 * round), so the threshold and the per-owner tie counts are exact and the
 * same on every rank. Ties at the threshold go to the lower row (= lower
 * index range) first, then the lower index: "ties: lower index first".
 */
#include "sparse_allreduce.h"

#include "base/time.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/*
 * Branch-free merge step: which side(s) the smaller index comes from is data
 * (masks), not control flow. With random supports a branchy merge mispredicts
 * about every other element (~20-40 ns each measured on the 2-core box); this
 * one costs the same few instructions whatever the data. Values are picked
 * by bit masks: a + b when both sides hold the index (so partners that merge
 * (mine, theirs) and (theirs, mine) get the same bits), else the one value
 * untouched.
 */
size_t gcx_sparse_merge2(const uint32_t *ai, const float *av, size_t an,
                         const uint32_t *bi, const float *bv, size_t bn,
                         uint32_t *oi, float *ov)
{
    size_t a = 0, b = 0, o = 0;

    while (a < an && b < bn) {
        uint32_t x = ai[a], y = bi[b], take_a = x <= y, take_b = y <= x;
        uint32_t ma = 0u - take_a, mb = 0u - take_b, ba, bb, bs, bits;
        float    va = av[a], vb = bv[b], sum = va + vb;

        memcpy(&ba, &va, sizeof(ba));
        memcpy(&bb, &vb, sizeof(bb));
        memcpy(&bs, &sum, sizeof(bs));
        bits  = (ma & mb & bs) | (ma & ~mb & ba) | (~ma & mb & bb);
        oi[o] = (ma & x) | (~ma & y);
        memcpy(&ov[o], &bits, sizeof(bits));
        a += take_a;
        b += take_b;
        ++o;
    }
    if (a < an) { /* memcpy must not see NULL, even for 0 bytes */
        memcpy(oi + o, ai + a, (an - a) * sizeof(*oi));
        memcpy(ov + o, av + a, (an - a) * sizeof(*ov));
        o += an - a;
    }
    if (b < bn) {
        memcpy(oi + o, bi + b, (bn - b) * sizeof(*oi));
        memcpy(ov + o, bv + b, (bn - b) * sizeof(*ov));
    }
    return o + (bn - b);
}

double gcx_sparse_measure_merge(void)
{
    enum { n = 1 << 20 }; /* lists of the size that matters: 4 MB each */
    uint32_t *in = malloc(2 * n * sizeof(*in)), *oi, a = 0, b = 0;
    float    *iv = calloc(2 * n, sizeof(*iv)), *ov;
    uint64_t  x  = 0x9e3779b97f4a7c15ull;
    double    best = 0, t;
    size_t    i, m;
    int       rep;

    if (in == NULL || iv == NULL) {
        free(in);
        free(iv);
        return GCX_SPARSE_DEFAULT_GAMMA;
    }
    for (i = 0; i < n; ++i) { /* two interleaved sorted lists, random gaps */
        x         = x * 6364136223846793005ull + 1442695040888963407ull;
        a        += 1 + (uint32_t)(x >> 58);
        b        += 1 + (uint32_t)((x >> 40) & 63);
        in[i]     = a;
        in[n + i] = b;
    }
    for (rep = 0; rep < 2; ++rep) {
        oi = malloc(2 * n * sizeof(*oi));
        ov = malloc(2 * n * sizeof(*ov));
        if (oi == NULL || ov == NULL) {
            free(oi);
            free(ov);
            break;
        }
        t = gcx_time_now();
        m = gcx_sparse_merge2(in, iv, n, in + n, iv + n, n, oi, ov);
        t = (gcx_time_now() - t) / (double)(m > 0 ? m : 1);
        best = rep == 0 || t < best ? t : best;
        free(oi);
        free(ov);
    }
    free(in);
    free(iv);
    return best > 0 ? best : GCX_SPARSE_DEFAULT_GAMMA;
}

void gcx_sparse_merge_lists(uint32_t **idx, float **val, size_t *n, int nl,
                            uint32_t *w0i, float *w0v, uint32_t *w1i,
                            float *w1v, uint32_t **oi_p, float **ov_p,
                            size_t *on_p)
{
    uint32_t *wi[2] = {w0i, w1i};
    float    *wv[2] = {w0v, w1v};
    int       pass = 0, l;

    if (nl == 0) {
        *oi_p = w0i;
        *ov_p = w0v;
        *on_p = 0;
        return;
    }
    /* each pass halves the number of lists; outputs packed in wi[pass] */
    while (nl > 1) {
        size_t off = 0;
        int    out = 0;

        for (l = 0; l < nl; l += 2) {
            uint32_t *oi = wi[pass] + off;
            float    *ov = wv[pass] + off;
            size_t    m;

            if (l + 1 < nl) {
                m = gcx_sparse_merge2(idx[l], val[l], n[l], idx[l + 1],
                                      val[l + 1], n[l + 1], oi, ov);
            } else {
                if (n[l] > 0) {
                    memcpy(oi, idx[l], n[l] * sizeof(*oi));
                    memcpy(ov, val[l], n[l] * sizeof(*ov));
                }
                m = n[l];
            }
            idx[out] = oi;
            val[out] = ov;
            n[out++] = m;
            off += m;
        }
        nl   = out;
        pass ^= 1;
    }
    *oi_p = idx[0];
    *ov_p = val[0];
    *on_p = n[0];
}

void gcx_sparse_add_to_dense(const uint32_t *idx, const float *val, size_t n,
                             size_t N, float *dense)
{
    size_t j;

    /* not gcx_sparse_vec_scatter_add(): that re-checks the order (one more
     * pass) and refuses concatenated lists; these indices were validated */
    (void)N;
    for (j = 0; j < n; ++j) {
        dense[idx[j]] += val[j];
    }
}

int gcx_sparse_parse_msg(gcx_task_t *task, int peer, void *buf, size_t bytes,
                         uint32_t **idx_p, float **val_p, size_t *n_p)
{
    size_t m = bytes / 8;

    if (bytes % 8 != 0) {
        gcx_error("%s #%u: rank %d sent %zu bytes, not whole pairs",
                  task->name, task->seq, peer, bytes);
        task->status = GCX_ERR_MISMATCH;
        return -1;
    }
    *idx_p = buf;
    *val_p = (float *)((char *)buf + 4 * m);
    *n_p   = m;
    return 0;
}

/* ---- top-k -------------------------------------------------------------- */

static inline uint32_t gcx_sparse_key(float v)
{
    uint32_t bits;

    memcpy(&bits, &v, sizeof(bits));
    return bits & 0x7fffffffu; /* |v|, ordered like its bits */
}

void gcx_sparse_topk_init(gcx_sparse_topk_t *sel, int rows, size_t k,
                          int64_t *gt, int64_t *take)
{
    memset(sel, 0, sizeof(*sel));
    sel->rows = rows;
    sel->k    = k;
    sel->need = (int64_t)k;
    sel->gt   = gt;
    sel->take = take;
    memset(gt, 0, (size_t)rows * sizeof(*gt));
    memset(take, 0, (size_t)rows * sizeof(*take));
}

void gcx_sparse_topk_hist(const gcx_sparse_topk_t *sel, const float *val,
                          size_t n, int64_t *hist)
{
    int    shift = 24 - 8 * sel->round;
    size_t j;

    if (sel->round == 0) {
        for (j = 0; j < n; ++j) {
            ++hist[gcx_sparse_key(val[j]) >> 24];
        }
        return;
    }
    for (j = 0; j < n; ++j) {
        uint32_t key = gcx_sparse_key(val[j]);

        if ((key >> (shift + 8)) == sel->prefix) {
            ++hist[(key >> shift) & 0xffu];
        }
    }
}

void gcx_sparse_topk_step(gcx_sparse_topk_t *sel, const int64_t *hist)
{
    int64_t tot[256] = {0}, above = 0;
    int     r, b, chosen = 0;

    for (r = 0; r < sel->rows; ++r) {
        for (b = 0; b < 256; ++b) {
            tot[b] += hist[r * 256 + b];
        }
    }
    if (sel->round == 0) {
        for (b = 0; b < 256; ++b) {
            sel->total += tot[b];
        }
        if (sel->total <= (int64_t)sel->k) {
            sel->all  = 1;
            sel->done = 1;
            return;
        }
    }
    for (b = 255; b >= 0; --b) {
        if (above + tot[b] >= sel->need) {
            chosen = b;
            break;
        }
        above += tot[b];
    }
    for (r = 0; r < sel->rows; ++r) {
        for (b = chosen + 1; b < 256; ++b) {
            sel->gt[r] += hist[r * 256 + b];
        }
    }
    sel->need  -= above;
    sel->prefix = (sel->prefix << 8) | (uint32_t)chosen;
    if (sel->round == 3) {
        int64_t remain = sel->need;

        for (r = 0; r < sel->rows; ++r) {
            int64_t ties = hist[r * 256 + chosen];

            sel->take[r] = ties < remain ? ties : remain;
            remain -= sel->take[r];
        }
        sel->done = 1;
        return;
    }
    ++sel->round;
}

size_t gcx_sparse_topk_count(const gcx_sparse_topk_t *sel, int row)
{
    if (sel->all) { /* everything is kept: the total (one row) */
        return sel->rows == 1 ? (size_t)sel->total : 0;
    }
    return (size_t)(sel->gt[row] + sel->take[row]);
}

size_t gcx_sparse_topk_apply(const gcx_sparse_topk_t *sel, int row,
                             const uint32_t *idx, const float *val, size_t n,
                             uint32_t *oi, float *ov)
{
    int64_t ties = sel->take[row];
    size_t  j, o = 0;

    for (j = 0; j < n; ++j) {
        uint32_t key = gcx_sparse_key(val[j]);

        if (sel->all || key > sel->prefix ||
            (key == sel->prefix && ties-- > 0)) {
            oi[o]   = idx[j];
            ov[o++] = val[j];
        }
    }
    return o;
}

void gcx_sparse_topk_local(gcx_sparse_topk_t *sel, size_t k,
                           const float *val, size_t n, int64_t *gt,
                           int64_t *take)
{
    int64_t hist[256];

    gcx_sparse_topk_init(sel, 1, k, gt, take);
    while (!sel->done) {
        memset(hist, 0, sizeof(hist));
        gcx_sparse_topk_hist(sel, val, n, hist);
        gcx_sparse_topk_step(sel, hist);
    }
}

/* ---- model --------------------------------------------------------------- */

static uint64_t gcx_sparse_hash(uint32_t i)
{
    uint64_t z = (uint64_t)i + 0x9e3779b97f4a7c15ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void gcx_sparse_sketch(const uint32_t *idx, size_t n, int64_t *sketch)
{
    uint64_t v[GCX_SPARSE_SKETCH];
    size_t   i;
    int      m = 0, j;

    for (i = 0; i < n; ++i) {
        uint64_t h = gcx_sparse_hash(idx[i]);

        if (m == GCX_SPARSE_SKETCH && h >= v[m - 1]) {
            continue; /* the common case once the sketch is full */
        }
        j = m < GCX_SPARSE_SKETCH ? m++ : m - 1;
        for (; j > 0 && v[j - 1] > h; --j) { /* insertion, ascending */
            v[j] = v[j - 1];
        }
        v[j] = h; /* indices are distinct, so hashes (a bijection) too */
    }
    for (j = 0; j < GCX_SPARSE_SKETCH; ++j) {
        sketch[j] = (int64_t)(j < m ? v[j] : UINT64_MAX);
    }
}

double gcx_sparse_sketch_union(const int64_t *sketches, int P, size_t stride)
{
    uint64_t all[GCX_SPARSE_SKETCH], h;
    int      m = 0, r, j, k;

    /* the S smallest distinct values over all sketches */
    for (r = 0; r < P; ++r) {
        for (j = 0; j < GCX_SPARSE_SKETCH; ++j) {
            h = (uint64_t)sketches[(size_t)r * stride + (size_t)j];
            if (h == UINT64_MAX ||
                (m == GCX_SPARSE_SKETCH && h >= all[m - 1])) {
                continue;
            }
            for (k = 0; k < m && all[k] < h; ++k) {
            }
            if (k < m && all[k] == h) {
                continue; /* the same index on another rank */
            }
            if (m < GCX_SPARSE_SKETCH) {
                ++m;
            }
            memmove(&all[k + 1], &all[k], (size_t)(m - 1 - k) * sizeof(h));
            all[k] = h;
        }
    }
    if (m < GCX_SPARSE_SKETCH) {
        return (double)m; /* every rank had fewer: the exact union */
    }
    return (double)(GCX_SPARSE_SKETCH - 1) /
           ((double)all[GCX_SPARSE_SKETCH - 1] / 18446744073709551616.0);
}
