/*
 * select.c - small engines shared by the compressors: scratch memory, the
 * sum of squares, an LSD radix sort of uint32 keys, a quickselect over
 * distinct 64-bit composites and the seeding of the splitmix64 generator.
 *
 * Costs: sqnorm is one streaming read (8 independent accumulators so the
 * compiler can keep several additions in flight); the radix sort makes one
 * histogram pass plus one scatter pass per non-trivial 8-bit digit; the
 * quickselect is expected O(n) with a branch-free Lomuto partition; the
 * generator is a few multiplies per draw.
 */
#include "compress_int.h"

#include <stdlib.h>

void *gcx__scratch(gcx_compressor_t *comp, int slot, size_t bytes)
{
    void *p;

    if (bytes <= comp->scr_size[slot]) {
        return comp->scr[slot];
    }
    /* Grow by at least 1/4 so that slowly growing sizes do not realloc at
     * every call; the old contents are not needed. */
    if (bytes < comp->scr_size[slot] + comp->scr_size[slot] / 4) {
        bytes = comp->scr_size[slot] + comp->scr_size[slot] / 4;
    }
    p = malloc(bytes);
    if (p == NULL) {
        return NULL;
    }
    free(comp->scr[slot]);
    comp->scr[slot] = p;
    comp->scr_size[slot] = bytes;
    return p;
}

double gcx__sqnorm_block(const float *v, size_t n)
{
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        a0 += (double)v[i + 0] * v[i + 0];
        a1 += (double)v[i + 1] * v[i + 1];
        a2 += (double)v[i + 2] * v[i + 2];
        a3 += (double)v[i + 3] * v[i + 3];
        a4 += (double)v[i + 4] * v[i + 4];
        a5 += (double)v[i + 5] * v[i + 5];
        a6 += (double)v[i + 6] * v[i + 6];
        a7 += (double)v[i + 7] * v[i + 7];
    }
    for (; i < n; i++) {
        a0 += (double)v[i] * v[i];
    }
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

double gcx__sqnorm(const float *v, size_t n)
{
    double sq = 0;
    size_t b;

    for (b = 0; b < n; b += GCX__SQ_BLOCK) {
        sq += gcx__sqnorm_block(v + b, n - b < GCX__SQ_BLOCK ? n - b
                                                            : GCX__SQ_BLOCK);
    }
    return sq;
}

void gcx__radix_sort_u32(uint32_t *a, uint32_t *tmp, size_t n)
{
    size_t hist[4][256] = {{0}};
    uint32_t *src = a, *dst = tmp, *t;
    size_t i;
    int d;

    for (i = 0; i < n; i++) {
        uint32_t v = a[i];
        hist[0][v & 0xff]++;
        hist[1][(v >> 8) & 0xff]++;
        hist[2][(v >> 16) & 0xff]++;
        hist[3][v >> 24]++;
    }
    for (d = 0; d < 4; d++) {
        size_t sum = 0, c;
        unsigned shift = 8u * (unsigned)d;
        int b;

        if (n == 0 || hist[d][(src[0] >> shift) & 0xff] == n) {
            continue; /* every key has the same digit: nothing to do */
        }
        for (b = 0; b < 256; b++) {
            c = hist[d][b];
            hist[d][b] = sum;
            sum += c;
        }
        for (i = 0; i < n; i++) {
            uint32_t v = src[i];
            dst[hist[d][(v >> shift) & 0xff]++] = v;
        }
        t = src;
        src = dst;
        dst = t;
    }
    if (src != a) {
        memcpy(a, src, n * sizeof(*a));
    }
}

uint64_t gcx__select_u64_desc(uint64_t *a, size_t n, size_t r)
{
    size_t lo = 0, hi = n, want = r - 1;
    gcx__rng_t rng;

    gcx__rng_seed(&rng, n, r, 0x5e1ec7, 0);
    while (hi - lo > 24) {
        size_t len = hi - lo, store = lo, i;
        size_t p0 = lo + gcx__rng_below(&rng, len);
        size_t p1 = lo + gcx__rng_below(&rng, len);
        size_t p2 = lo + gcx__rng_below(&rng, len);
        uint64_t x = a[p0], y = a[p1], z = a[p2], p, v;
        size_t pi;

        /* median of three random elements */
        if ((x <= y && y <= z) || (z <= y && y <= x)) {
            pi = p1;
        } else if ((y <= x && x <= z) || (z <= x && x <= y)) {
            pi = p0;
        } else {
            pi = p2;
        }
        p = a[pi];
        a[pi] = a[hi - 1];
        a[hi - 1] = p;
        /* Branch-free Lomuto: values > p to the front (values are
         * distinct, so the pivot's final place is its rank). */
        for (i = lo; i < hi - 1; i++) {
            v = a[i];
            a[i] = a[store];
            a[store] = v;
            store += v > p;
        }
        a[hi - 1] = a[store];
        a[store] = p;
        if (want == store) {
            return p;
        }
        if (want < store) {
            hi = store;
        } else {
            lo = store + 1;
        }
    }
    /* insertion sort, descending, of the small remaining range */
    for (size_t i = lo + 1; i < hi; i++) {
        uint64_t v = a[i];
        size_t j = i;
        while (j > lo && a[j - 1] < v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
    return a[want];
}

void gcx__rng_seed(gcx__rng_t *rng, uint64_t a, uint64_t b, uint64_t c,
                   uint64_t d)
{
    uint64_t s = 0x6763785f72616e64ull; /* "gcx_rand" */

    s = gcx__mix64(s ^ a) + 0x9e3779b97f4a7c15ull;
    s = gcx__mix64(s ^ b) + 0x9e3779b97f4a7c15ull;
    s = gcx__mix64(s ^ c) + 0x9e3779b97f4a7c15ull;
    s = gcx__mix64(s ^ d);
    rng->s = s;
}
