/*
 * compress_int.h - internals shared by the compressors of src/compress.
 *
 * Idea: every compressor works on a "view" (gcx_compress_cvec_t): m float
 * values and an optional index map, so that one code path serves a dense
 * vector (index = position) and a sparse vector (index = map[position]); the
 * map is sorted, so emitting in position order emits sorted indices. compress.c
 * checks the arguments and handles the trivial cases (m = 0, k = 0, k >= m)
 * before it calls a compressor's select function, which therefore always
 * sees 0 < k < m, a large enough output, and has to detect NaN/Inf itself
 * (from the sum of squares of its first full pass) before it writes out.
 *
 * Magnitude keys: the IEEE-754 bits of a float with the sign cleared, as
 * uint32_t, order like |x| (for non-NaN values); +Inf is 0x7f800000 and NaN
 * is above it.
 */
#ifndef GCX_COMPRESS_INT_H
#define GCX_COMPRESS_INT_H

#include <stdint.h>
#include <string.h>
#include <gcx/compress.h>

#define GCX_COMPRESS_LIKELY(x)   __builtin_expect(!!(x), 1)
#define GCX_COMPRESS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GCX_COMPRESS_INLINE      static inline __attribute__((always_inline))

/** Largest length: indices, and counts of entries in histograms, are
 *  uint32_t. */
#define GCX_COMPRESS_MAX_LEN ((size_t)UINT32_MAX)

/** Input of a compressor: m values, index of value i is map ? map[i] : i. */
typedef struct gcx_compress_cvec {
    const float *val;
    const uint32_t *map;
    size_t m;
} gcx_compress_cvec_t;

/** What a select function reports besides its output. */
typedef struct gcx_compress_cres {
    double in_sqnorm; /* sum of val[i]^2 over the input */
    unsigned passes;  /* full passes over the input */
} gcx_compress_cres_t;

/*
 * A select function: choose entries of in into out (capacity checked by the
 * caller against gcx_compress_capacity_k). Precondition 0 < k < in->m.
 * Returns GCX_ERR_RANGE for NaN/Inf without touching out; sets out->nnz and
 * the arrays (not dense_len) on success.
 */
typedef gcx_status_t (*gcx_compress_select_fn_t)(gcx_compressor_t *comp,
                                                 const gcx_compress_cvec_t *in,
                                                 size_t k,
                                                 gcx_sparse_vec_t *out,
                                                 gcx_compress_cres_t *res);

/** Scratch slots of a compressor; each grows on demand and is reused. */
enum {
    GCX_COMPRESS_SCR_CIDX = 0, /* candidate indices (uint32_t) */
    GCX_COMPRESS_SCR_CVAL,     /* candidate values (float) */
    GCX_COMPRESS_SCR_AUX,      /* keys, composites, bitmaps */
    GCX_COMPRESS_SCR_TMP,      /* sample positions, rank selection */
    GCX_COMPRESS_SCR_COUNT
};

struct gcx_compressor {
    gcx_compress_kind_t kind;
    gcx_compress_select_fn_t select;
    uint64_t seed;
    uint64_t step;
    void *scr[GCX_COMPRESS_SCR_COUNT];
    size_t scr_size[GCX_COMPRESS_SCR_COUNT];
};

/* ---- helpers (helpers.c) ----------------------------------------------- */

GCX_COMPRESS_INLINE uint32_t gcx_compress_key(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    return u & 0x7fffffffu;
}

/* Four int32 lanes (GCC/Clang vector extension: SSE2 on x86-64, NEON on
 * arm64, plain code elsewhere). */
typedef int32_t gcx_compress_v4i __attribute__((vector_size(16)));

/* True when one of the 16 keys at p is >= lo (lo < 2^31). The scanning
 * loops of the compressors skip blocks of 16 entries with it at memory
 * speed, since most blocks hold nothing to select. */
GCX_COMPRESS_INLINE int gcx_compress_any16_ge(const float *p, uint32_t lo)
{
    const gcx_compress_v4i mask = {0x7fffffff, 0x7fffffff, 0x7fffffff,
                                   0x7fffffff};
    const int32_t l1 = (int32_t)lo - 1; /* key >= lo <=> key > lo - 1 */
    const gcx_compress_v4i t = {l1, l1, l1, l1};
    gcx_compress_v4i a, b, c, d, r;
    uint64_t h[2];

    memcpy(&a, p, 16);
    memcpy(&b, p + 4, 16);
    memcpy(&c, p + 8, 16);
    memcpy(&d, p + 12, 16);
    r = ((a & mask) > t) | ((b & mask) > t) | ((c & mask) > t) |
        ((d & mask) > t);
    memcpy(h, &r, 16);
    return (h[0] | h[1]) != 0;
}

GCX_COMPRESS_INLINE uint32_t
gcx_compress_cvec_index(const gcx_compress_cvec_t *in, size_t i)
{
    return in->map != NULL ? in->map[i] : (uint32_t)i;
}

/** Scratch slot of at least bytes bytes (contents undefined), or NULL. */
void *gcx_compress_scratch(gcx_compressor_t *comp, int slot, size_t bytes);

/**
 * Sums of squares are accumulated per block of GCX_COMPRESS_SQ_BLOCK entries (8
 * accumulators inside a block, blocks added in order), whichever pass
 * computes them, so that every pass over the same array gets the same bits
 * (a level-1 ||C(x)||^2 equals the level-2 ||x||^2, gcx_dense_sqnorm(x)
 * equals stats.in_sqnorm).
 */
#define GCX_COMPRESS_SQ_BLOCK 2048u

/** Sum of squares of one block (n <= GCX_COMPRESS_SQ_BLOCK) in double. */
double gcx_compress_sqnorm_block(const float *v, size_t n);

/** Two double lanes (GCC/Clang vector extension). */
typedef double gcx_compress_v2d __attribute__((vector_size(16)));

/**
 * The 8 accumulators of a block's sum of squares, as 4 pairs: acc[q / 2]
 * lane q % 2 sums v[8 i + q]^2 over the groups i of 8 entries.
 */
typedef struct gcx_compress_sqacc {
    gcx_compress_v2d s[4];
} gcx_compress_sqacc_t;

GCX_COMPRESS_INLINE void gcx_compress_sqacc_init(gcx_compress_sqacc_t *a)
{
    const gcx_compress_v2d z = {0, 0};
    a->s[0] = a->s[1] = a->s[2] = a->s[3] = z;
}

/** Add the squares of the 8 entries at p (one group). */
GCX_COMPRESS_INLINE void gcx_compress_sqacc_add8(gcx_compress_sqacc_t *a,
                                                 const float *p)
{
    const gcx_compress_v2d d0 = {p[0], p[1]}, d1 = {p[2], p[3]};
    const gcx_compress_v2d d2 = {p[4], p[5]}, d3 = {p[6], p[7]};
    a->s[0] += d0 * d0;
    a->s[1] += d1 * d1;
    a->s[2] += d2 * d2;
    a->s[3] += d3 * d3;
}

/** Finish a block: the n % 8 entries after the groups go to lane 0. */
GCX_COMPRESS_INLINE double gcx_compress_sqacc_sum(const gcx_compress_sqacc_t *a,
                                                  const float *tail, size_t n)
{
    double a0 = a->s[0][0];
    size_t i;

    for (i = 0; i < n; i++) {
        a0 += (double)tail[i] * tail[i];
    }
    return ((a0 + a->s[0][1]) + (a->s[1][0] + a->s[1][1])) +
           ((a->s[2][0] + a->s[2][1]) + (a->s[3][0] + a->s[3][1]));
}

/** Sum of squares of n floats in double, block by block; Inf/NaN when any
 *  value is not finite. */
double gcx_compress_sqnorm(const float *v, size_t n);

/**
 * The r-th largest (1 <= r <= n) of n distinct 64-bit values; permutes a.
 * Expected O(n) (quickselect with pseudo-random pivots, deterministic).
 */
uint64_t gcx_compress_select_u64_desc(uint64_t *a, size_t n, size_t r);

/** splitmix64 generator: deterministic on every platform. */
typedef struct gcx_compress_rng {
    uint64_t s;
} gcx_compress_rng_t;

/** Seed from several words (seed, step, sizes, ...). */
void gcx_compress_rng_seed(gcx_compress_rng_t *rng, uint64_t a, uint64_t b,
                           uint64_t c, uint64_t d);

GCX_COMPRESS_INLINE uint64_t gcx_compress_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

GCX_COMPRESS_INLINE uint64_t gcx_compress_rng_next(gcx_compress_rng_t *rng)
{
    rng->s += 0x9e3779b97f4a7c15ull;
    return gcx_compress_mix64(rng->s);
}

/** Uniform integer in [0, bound), bound >= 1, without bias (Lemire's
 *  multiply-and-reject). */
GCX_COMPRESS_INLINE uint64_t gcx_compress_rng_below(gcx_compress_rng_t *rng,
                                                    uint64_t bound)
{
    unsigned __int128 m = (unsigned __int128)gcx_compress_rng_next(rng) * bound;
    uint64_t low = (uint64_t)m;

    if (GCX_COMPRESS_UNLIKELY(low < bound)) {
        uint64_t t = (0 - bound) % bound;
        while (low < t) {
            m = (unsigned __int128)gcx_compress_rng_next(rng) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/**
 * Exact top-k of in (ties: lower position wins) into out; the engine of
 * topk, also the last correction of dgc and redsync.
 */
gcx_status_t gcx_topk_select(gcx_compressor_t *comp,
                             const gcx_compress_cvec_t *in, size_t k,
                             gcx_sparse_vec_t *out, gcx_compress_cres_t *res);

/* ---- candidates (cand.c) ------------------------------------------------ */

/**
 * Stratified sample of s magnitude keys of in into keys: the input is cut
 * into units of `chunk` consecutive entries and the units into s / chunk
 * equal strata; one unit at random from each. Every entry (but the last
 * m % chunk) has the same chance. chunk = 16 reads whole cache lines: the
 * same sample size from 16x fewer lines. Needs chunk | s and
 * s / chunk <= m / chunk; tmp holds s / chunk positions.
 */
void gcx_cand_sample_keys(const gcx_compress_cvec_t *in, size_t s, size_t chunk,
                          gcx_compress_rng_t *rng, uint32_t *keys,
                          uint32_t *tmp);

/**
 * The r-th largest (1 <= r <= s) of s keys (< 2^31), by a three-level
 * radix select; tmp holds s keys. O(s).
 */
uint32_t gcx_cand_keys_rank(const uint32_t *keys, size_t s, size_t r,
                            uint32_t *tmp);

/**
 * One pass over in: every entry with key >= t is a candidate (stored in
 * position order while fewer than cap); returns how many there are. With
 * sq_p, also the sum of squares of the input (NaN/Inf check).
 */
size_t gcx_cand_thr_collect(const gcx_compress_cvec_t *in, uint32_t t,
                            size_t cap, uint32_t *cidx, float *cval,
                            double *sq_p);

/**
 * Bucket j, counted from the top of hist[0..nb), where the running count
 * reaches need (1 <= need <= total); adds the counts above j to *above_p.
 */
uint32_t gcx_cand_hist_find(const uint32_t *hist, uint32_t nb, size_t need,
                            size_t *above_p);

/**
 * Write into (oidx, oval) the r (<= nc) candidates with the largest
 * magnitudes, in candidate order; ties: the earlier candidate wins. The
 * output may be the candidate arrays themselves (in-place compaction).
 * Radix histogram of the top 11 key bits, then a quickselect inside the
 * boundary bucket only. Scratch: AUX. GCX_ERR_NOMEM before any write.
 */
gcx_status_t gcx_cand_keep_top(gcx_compressor_t *comp, const uint32_t *cidx,
                               const float *cval, size_t nc, size_t r,
                               uint32_t *oidx, float *oval);

/* ---- the compressors (one file each) ------------------------------------ */

/* none.c: copies every entry whatever k (also used for k >= m). */
gcx_status_t gcx_none_select(gcx_compressor_t *comp,
                             const gcx_compress_cvec_t *in, size_t k,
                             gcx_sparse_vec_t *out, gcx_compress_cres_t *res);
gcx_status_t gcx_dgc_select(gcx_compressor_t *comp,
                            const gcx_compress_cvec_t *in, size_t k,
                            gcx_sparse_vec_t *out, gcx_compress_cres_t *res);
gcx_status_t gcx_redsync_select(gcx_compressor_t *comp,
                                const gcx_compress_cvec_t *in, size_t k,
                                gcx_sparse_vec_t *out,
                                gcx_compress_cres_t *res);
gcx_status_t gcx_randomk_select(gcx_compressor_t *comp,
                                const gcx_compress_cvec_t *in, size_t k,
                                gcx_sparse_vec_t *out,
                                gcx_compress_cres_t *res);

#endif /* GCX_COMPRESS_INT_H */
