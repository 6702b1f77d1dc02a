/*
 * helpers.c - small engines shared by the compressors: scratch memory, the
 * sum of squares, a quickselect over distinct 64-bit composites and the
 * seeding of the splitmix64 generator.
 *
 * Costs: sqnorm is one streaming read (8 independent accumulators so the
 * compiler can keep several additions in flight); the quickselect is
 * expected O(n) with a branch-free Lomuto partition; the generator is a few
 * multiplies per draw.
 */
#include "compress_int.h"

#include <stdlib.h>

void *gcx_compress_scratch(gcx_compressor_t *comp, int slot, size_t bytes)
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

double gcx_compress_sqnorm_block(const float *v, size_t n)
{
    gcx_compress_sqacc_t acc;
    size_t i = 0;

    gcx_compress_sqacc_init(&acc);
    for (; i + 8 <= n; i += 8) {
        gcx_compress_sqacc_add8(&acc, v + i);
    }
    return gcx_compress_sqacc_sum(&acc, v + i, n - i);
}

double gcx_compress_sqnorm(const float *v, size_t n)
{
    double sq = 0;
    size_t b;

    for (b = 0; b < n; b += GCX_COMPRESS_SQ_BLOCK) {
        sq += gcx_compress_sqnorm_block(v + b, n - b < GCX_COMPRESS_SQ_BLOCK
                                                   ? n - b
                                                   : GCX_COMPRESS_SQ_BLOCK);
    }
    return sq;
}

uint64_t gcx_compress_select_u64_desc(uint64_t *a, size_t n, size_t r)
{
    size_t lo = 0, hi = n, want = r - 1;
    gcx_compress_rng_t rng;

    gcx_compress_rng_seed(&rng, n, r, 0x5e1ec7, 0);
    while (hi - lo > 24) {
        size_t len = hi - lo, store = lo, i;
        size_t p0 = lo + gcx_compress_rng_below(&rng, len);
        size_t p1 = lo + gcx_compress_rng_below(&rng, len);
        size_t p2 = lo + gcx_compress_rng_below(&rng, len);
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

void gcx_compress_rng_seed(gcx_compress_rng_t *rng, uint64_t a, uint64_t b,
                           uint64_t c, uint64_t d)
{
    uint64_t s = 0x6763785f72616e64ull; /* "gcx_rand" */

    s = gcx_compress_mix64(s ^ a) + 0x9e3779b97f4a7c15ull;
    s = gcx_compress_mix64(s ^ b) + 0x9e3779b97f4a7c15ull;
    s = gcx_compress_mix64(s ^ c) + 0x9e3779b97f4a7c15ull;
    s = gcx_compress_mix64(s ^ d);
    rng->s = s;
}
