/**
 * @file compress.h
 * @brief Gradient compression: magnitude compressors (topk, dgc, redsync,
 *        randomk, none) producing sparse vectors, multi-level compression,
 *        error feedback and the gain statistics GraVAC needs.
 *
 * Everything here is pure computation on host memory: no network, no
 * threads, no global state. A compressor object is used by one thread at a
 * time; different objects may be used concurrently.
 *
 * Model:
 * - The output is a sparse vector (gcx_sparse_vec_t, sparse_vec.h): a
 *   structure of arrays of strictly increasing uint32_t indices and float
 *   values, plus the dense length N. Its arrays belong either to the caller
 *   (gcx_sparse_vec_init()) or to the library (gcx_sparse_vec_alloc() /
 *   gcx_sparse_vec_free()).
 * - A compressor selects entries by magnitude |x|. The compression factor
 *   CF = N / k is the parameter: k = ceil(N / CF) (gcx_compress_k()).
 *   Every compressor accepts a dense vector or an already-sparse vector
 *   (multi-level compression C(C(g, cf1), cf2): the second level reads only
 *   the sparse result, and its k is ceil(nnz / cf2)).
 * - Output indices are always strictly increasing; the output values are
 *   copies of input values (no scaling), so "residual -= sent" zeroes the
 *   sent entries exactly.
 * - Every call returns ||x||^2 and ||C(x)||^2 (gcx_compress_stats_t) from
 *   the pass it makes anyway, so GraVAC's gain costs no extra pass.
 *
 * Bad input policy (every compressor, every entry point):
 * - N = 0: empty result, GCX_OK. k = 0 (CF = +inf): empty result, GCX_OK,
 *   statistics still computed. k >= N, and the "none" compressor: every
 *   entry is returned (zeros included).
 * - Zeros are ordinary values: when fewer than k entries are non-zero, topk
 *   fills the selection with zeros of the lowest indices.
 * - NaN or +-Inf anywhere in the input: GCX_ERR_RANGE. Nothing is written to
 *   the output (not its arrays, not its nnz), so no garbage can be sent.
 * - Output capacity below gcx_compress_capacity(): GCX_ERR_RANGE, checked
 *   before any work. N of 2^32 or more (indices and counts are uint32_t):
 *   GCX_ERR_RANGE.
 * - CF below 1 or NaN, NULL pointers, a sparse input whose indices are not
 *   strictly increasing or not below its dense length, an output that is the
 *   input: GCX_ERR_INVALID.
 * As everywhere in gcx, outputs are set only when GCX_OK is returned.
 */
#ifndef GCX_COMPRESS_H
#define GCX_COMPRESS_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/sparse_vec.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Norms                                                                    */
/* ------------------------------------------------------------------------ */

/** Squared Euclidean norm of n dense floats, accumulated in double. */
GCX_API
double gcx_dense_sqnorm(const float *x, size_t n);

/* ------------------------------------------------------------------------ */
/* Compressors                                                              */
/* ------------------------------------------------------------------------ */

/** The compressors. All select by magnitude |x| except randomk. */
typedef enum gcx_compress_kind {
    /** Send everything (k = N whatever the CF). */
    GCX_COMPRESS_NONE = 0,
    /**
     * Exact top-k by magnitude in O(N), no sort: radix select on the bits
     * of |x| (two passes over the input; one more per further radix digit
     * when magnitudes crowd into one bucket). From N = 64Ki, a 0.1% sample
     * bounds the k-th magnitude from below so that one pass collects a few
     * k candidates and the selection runs on those alone; the sample only
     * saves work, it never changes the result. Ties: among equal
     * magnitudes the lower index wins. Output: exactly k entries.
     */
    GCX_COMPRESS_TOPK = 1,
    /**
     * Deep Gradient Compression's sampled threshold: ~1% of |x| is sampled
     * (stratified, at random offsets), the threshold is the sample's top
     * k/N quantile, and one pass selects every |x| >= threshold. The count
     * is corrected until it lies in [ceil(0.8k), floor(1.3k)]: above, an
     * exact top-k among the candidates; below, a lower threshold from the
     * same sample; after two corrections, exact topk. The result is always
     * the set of the nnz largest magnitudes.
     */
    GCX_COMPRESS_DGC = 2,
    /**
     * RedSync's threshold search: thresholds mean + r * (max - mean) of |x|,
     * r searched in [0, 1] (eight candidates per pass) until the count of
     * |x| > threshold lies in [ceil(k/2), 2k]. When no threshold in that
     * range reaches the window (fewer than k/2 entries above the mean, or
     * ties), it falls back to exact topk.
     */
    GCX_COMPRESS_REDSYNC = 3,
    /**
     * k indices drawn uniformly without replacement from a generator seeded
     * by (seed, step, N, k): every rank with the same seed and step draws the
     * same indices, so the values can be summed by a dense allreduce of
     * length k. The values are not read to choose.
     */
    GCX_COMPRESS_RANDOMK = 4,
} gcx_compress_kind_t;

/** Number of compressor kinds (for tables and loops). */
#define GCX_COMPRESS_KIND_COUNT 5

/** Opaque compressor: its kind, seed, step and reusable scratch memory. */
typedef struct gcx_compressor gcx_compressor_t;

/** Statistics of one compression, from the passes it makes anyway. */
typedef struct gcx_compress_stats {
    double in_sqnorm;  /**< ||x||^2 of the input, accumulated in double. */
    double out_sqnorm; /**< ||C(x)||^2 of the output. */
    size_t k;          /**< Target count ceil(n / cf) (n: input length). */
    size_t nnz;        /**< Entries produced (k for topk and randomk). */
    unsigned passes;   /**< Full passes over the input (cost diagnostic). */
} gcx_compress_stats_t;

/** Name of a kind ("none", "topk", "dgc", "redsync", "randomk"), or "?". */
GCX_API
const char *gcx_compress_kind_name(gcx_compress_kind_t kind);

/**
 * Kind from its name.
 * @return GCX_OK, or GCX_ERR_NOT_FOUND for an unknown name.
 */
GCX_API
gcx_status_t gcx_compress_kind_parse(const char *name,
                                     gcx_compress_kind_t *kind_p);

/**
 * Create a compressor.
 *
 * @param kind       Which compressor.
 * @param seed       Seed of randomk's draw and of dgc's sample; all ranks
 *                   must pass the same seed.
 * @param[out] comp_p New compressor, owned by the caller (release with
 *                   gcx_compressor_destroy()).
 * @return GCX_OK, GCX_ERR_INVALID (unknown kind, NULL comp_p), GCX_ERR_NOMEM.
 */
GCX_API
gcx_status_t gcx_compressor_create(gcx_compress_kind_t kind, uint64_t seed,
                                   gcx_compressor_t **comp_p);

/** Release a compressor and its scratch memory. NULL is allowed. */
GCX_API
void gcx_compressor_destroy(gcx_compressor_t *comp);

/** Kind of a compressor. */
GCX_API
gcx_compress_kind_t gcx_compressor_kind(const gcx_compressor_t *comp);

/**
 * Set the training step; randomk draws (and dgc samples) depend on
 * (seed, step, n, k) only. Call with the same step on every rank.
 */
GCX_API
void gcx_compressor_set_step(gcx_compressor_t *comp, uint64_t step);

/**
 * Target count for n entries and compression factor cf: ceil(n / cf),
 * at most n; 0 for cf = +inf.
 * @return GCX_OK, or GCX_ERR_INVALID for cf < 1 or NaN.
 */
GCX_API
gcx_status_t gcx_compress_k(size_t n, double cf, size_t *k_p);

/**
 * Output capacity a compressor may need for n input entries at target count
 * k: n for none, k for topk and randomk, floor(1.3k) for dgc, 2k for redsync
 * (each at most n).
 */
GCX_API
size_t gcx_compress_capacity_k(gcx_compress_kind_t kind, size_t n, size_t k);

/**
 * gcx_compress_capacity_k() with k = gcx_compress_k(n, cf).
 * @return GCX_OK, GCX_ERR_INVALID (bad cf or kind).
 */
GCX_API
gcx_status_t gcx_compress_capacity(gcx_compress_kind_t kind, size_t n,
                                   double cf, size_t *capacity_p);

/**
 * Compress a dense vector: out = C(x, cf).
 *
 * @param comp   Compressor (its scratch memory grows on first use and is
 *               reused; no allocation afterwards for the same sizes).
 * @param x      n floats, read only.
 * @param n      Dense length (< 2^32).
 * @param cf     Compression factor >= 1 (+inf for k = 0).
 * @param out    Caller's vector; its capacity must be at least
 *               gcx_compress_capacity(kind, n, cf). On success its nnz,
 *               idx, val and dense_len (= n) are set; on error it is not
 *               touched.
 * @param[out] stats_p Statistics, or NULL.
 * @return GCX_OK, GCX_ERR_INVALID, GCX_ERR_RANGE (NaN/Inf in x, capacity,
 *         n >= 2^32), GCX_ERR_NOMEM (scratch).
 */
GCX_API
gcx_status_t gcx_compress_dense(gcx_compressor_t *comp, const float *x,
                                size_t n, double cf, gcx_sparse_vec_t *out,
                                gcx_compress_stats_t *stats_p);

/**
 * Compress an already-sparse vector further: out = C(in, cf), where the
 * target count is ceil(in->nnz / cf). Only the nnz entries of in are read;
 * out->dense_len = in->dense_len. For topk, C(C(x, a), b) equals the direct
 * top-k of x with the same final k. out must not be in.
 */
GCX_API
gcx_status_t gcx_compress_sparse(gcx_compressor_t *comp,
                                 const gcx_sparse_vec_t *in,
                                 double cf, gcx_sparse_vec_t *out,
                                 gcx_compress_stats_t *stats_p);

/** gcx_compress_dense() with an explicit target count k (k >= n: all). */
GCX_API
gcx_status_t gcx_compress_dense_k(gcx_compressor_t *comp, const float *x,
                                  size_t n, size_t k, gcx_sparse_vec_t *out,
                                  gcx_compress_stats_t *stats_p);

/** gcx_compress_sparse() with an explicit target count k. */
GCX_API
gcx_status_t gcx_compress_sparse_k(gcx_compressor_t *comp,
                                   const gcx_sparse_vec_t *in, size_t k,
                                   gcx_sparse_vec_t *out,
                                   gcx_compress_stats_t *stats_p);

/** GraVAC's gain ||C(x)||^2 / ||x||^2 of one compression (1 when x = 0). */
GCX_API
double gcx_compress_gain(const gcx_compress_stats_t *stats);

/* ------------------------------------------------------------------------ */
/* Error feedback                                                           */
/* ------------------------------------------------------------------------ */

/**
 * Error-feedback state of one dense vector of n floats:
 *   plain:     e += g;                   s = C(e); e -= s
 *   momentum:  u = m u + g;  e += u;     s = C(e); e -= s; (masking) u[s] = 0
 * (DGC's momentum correction and momentum-factor masking). There is no
 * dense temporary besides e (and u with momentum).
 */
typedef struct gcx_feedback gcx_feedback_t;

/** Parameters of gcx_feedback_create(); zero-initialize for the defaults. */
typedef struct gcx_feedback_params {
    /** Caller's buffer of n floats for e (its content is the initial
     *  residual; the caller keeps ownership), or NULL: the library
     *  allocates it zeroed. */
    float *residual;
    /** Caller's buffer of n floats for u, or NULL: allocated zeroed by the
     *  library. Used only when momentum > 0. */
    float *velocity;
    /** DGC momentum factor m in [0, 1); 0 = plain error feedback. */
    float momentum;
    /** Non-zero: momentum-factor masking (u = 0 where entries were sent). */
    int mask_momentum;
} gcx_feedback_params_t;

/**
 * Create an error-feedback state for n floats.
 * @param params NULL for plain error feedback with a library-owned, zeroed
 *               residual.
 * @return GCX_OK, GCX_ERR_INVALID (momentum outside [0, 1) or NaN),
 *         GCX_ERR_RANGE (n >= 2^32), GCX_ERR_NOMEM.
 */
GCX_API
gcx_status_t gcx_feedback_create(size_t n, const gcx_feedback_params_t *params,
                                 gcx_feedback_t **fb_p);

/** Release the state and the buffers the library allocated. NULL allowed. */
GCX_API
void gcx_feedback_destroy(gcx_feedback_t *fb);

/** The residual e (n floats); valid until gcx_feedback_destroy(). */
GCX_API
float *gcx_feedback_residual(gcx_feedback_t *fb);

/** The velocity u (n floats), or NULL without momentum. */
GCX_API
float *gcx_feedback_velocity(gcx_feedback_t *fb);

/** Length n. */
GCX_API
size_t gcx_feedback_size(const gcx_feedback_t *fb);

/** Zero e and u. */
GCX_API
void gcx_feedback_reset(gcx_feedback_t *fb);

/**
 * Tell the state that the caller wrote into e or u itself (for example
 * restored a checkpoint); the next accumulate re-checks them for overflow.
 */
GCX_API
void gcx_feedback_touch(gcx_feedback_t *fb);

/**
 * e += g (or u = m u + g; e += u), in place.
 *
 * Cost: a read of g (NaN/Inf and magnitude check) and the update pass; an
 * extra read-only pass only when e + g could overflow to Inf.
 * @return GCX_OK; GCX_ERR_RANGE when g holds NaN/Inf or the sum would
 *         overflow: e and u are then unchanged (a step can be skipped, as
 *         with dynamic loss scaling).
 */
GCX_API
gcx_status_t gcx_feedback_accumulate(gcx_feedback_t *fb, const float *g);

/**
 * e -= sent on the entries of sent (sent->dense_len must be n), and with
 * masking u = 0 there. When sent was compressed from e (directly or in
 * several levels) the sent entries of e become exactly 0, so
 * e_after + sent == e_before.
 * @return GCX_OK, GCX_ERR_INVALID (bad sparse vector or length).
 */
GCX_API
gcx_status_t gcx_feedback_commit(gcx_feedback_t *fb,
                                 const gcx_sparse_vec_t *sent);

/** The whole e was sent densely: e = 0 (and with masking u = 0). */
GCX_API
void gcx_feedback_commit_dense(gcx_feedback_t *fb);

/**
 * One error-feedback step: accumulate g, compress e with comp at cf into out,
 * commit out. Equivalent to the three calls, with the capacity of out
 * checked before e is touched.
 *
 * @return GCX_OK; GCX_ERR_RANGE (NaN/Inf, overflow, capacity; e and u
 *         unchanged); GCX_ERR_INVALID; GCX_ERR_NOMEM (then g has been added
 *         to e and nothing was sent: no gradient is lost).
 */
GCX_API
gcx_status_t gcx_feedback_step(gcx_feedback_t *fb, gcx_compressor_t *comp,
                               const float *g, double cf, gcx_sparse_vec_t *out,
                               gcx_compress_stats_t *stats_p);

#ifdef __cplusplus
}
#endif

#endif /* GCX_COMPRESS_H */
