/**
 * @file sparse_vec.h
 * @brief The sparse float vector (gcx_sparse_vec_t): strictly increasing
 *        uint32_t indices and float values of a dense length N.
 *
 * This is the data type that the compressors produce (compress.h), that the
 * sparse allreduce sums over ranks (sparse.h) and that GraVAC selects
 * (gravac.h). The collective itself is in sparse.h; this header holds only
 * the vector and its helpers, which are pure computation on host memory (no
 * network, no threads, no global state).
 *
 * Model:
 * - A structure of arrays: idx[j] and val[j] (j < nnz) are one entry, the
 *   indices strictly increasing and below dense_len. Entries not stored are
 *   zero; a stored value may be zero too.
 * - The arrays belong either to the caller (gcx_sparse_vec_init(): the
 *   library never frees them) or to the library (gcx_sparse_vec_alloc(),
 *   released by gcx_sparse_vec_free()).
 * - The fields are public, so a vector can also be written as an aggregate
 *   {idx, val, nnz, capacity, dense_len, 0} over caller arrays.
 * As everywhere in gcx, outputs are set only when GCX_OK is returned.
 */
#ifndef GCX_SPARSE_VEC_H
#define GCX_SPARSE_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A sparse float vector of dense length dense_len, as a structure of arrays.
 *
 * Invariants (checked by gcx_sparse_vec_check(), relied upon by every
 * consumer): nnz <= capacity, idx[0] < idx[1] < ... < idx[nnz-1] <
 * dense_len < 2^32.
 *
 * The fields are public so that other layers (sparse allreduce, the GraVAC
 * controller) can read them without calls; write them only through the
 * functions below, the compressors, or as documented.
 */
typedef struct gcx_sparse_vec {
    uint32_t *idx;    /**< capacity indices, strictly increasing. */
    float *val;       /**< capacity values, val[j] belongs to idx[j]. */
    size_t nnz;       /**< Number of stored entries. */
    size_t capacity;  /**< Entries the arrays can hold. */
    size_t dense_len; /**< Length N of the dense vector (< 2^32). */
    int owned;        /**< Non-zero when the library owns idx and val. */
} gcx_sparse_vec_t;

/**
 * Wrap caller-owned arrays as an empty sparse vector (nnz = 0). The library
 * never frees them; gcx_sparse_vec_free() only clears the struct.
 *
 * @param[out] sp        Vector to initialize.
 * @param idx, val       Arrays of capacity entries each (may be NULL when
 *                       capacity is 0).
 * @param capacity       Entries each array holds.
 * @param dense_len      Dense length N (< 2^32).
 * @return GCX_OK; GCX_ERR_INVALID for a NULL sp or NULL arrays with
 *         capacity > 0; GCX_ERR_RANGE for dense_len >= 2^32.
 */
GCX_API
gcx_status_t gcx_sparse_vec_init(gcx_sparse_vec_t *sp, uint32_t *idx,
                                 float *val, size_t capacity,
                                 size_t dense_len);

/**
 * Allocate an empty sparse vector (nnz = 0) whose arrays the library owns.
 *
 * @param capacity   Entries to allocate (0 is allowed).
 * @param dense_len  Dense length N (< 2^32).
 * @param[out] sp_p  Filled on success; release with gcx_sparse_vec_free().
 * @return GCX_OK, GCX_ERR_NOMEM, GCX_ERR_RANGE (dense_len >= 2^32 or a
 *         capacity too large to allocate), GCX_ERR_INVALID (NULL sp_p).
 */
GCX_API
gcx_status_t gcx_sparse_vec_alloc(size_t capacity, size_t dense_len,
                                  gcx_sparse_vec_t *sp_p);

/**
 * Free library-owned arrays (nothing for caller-owned ones) and reset the
 * struct to an empty vector of capacity 0. NULL is allowed.
 */
GCX_API
void gcx_sparse_vec_free(gcx_sparse_vec_t *sp);

/**
 * Check the invariants of a sparse vector in O(nnz).
 * @return GCX_OK, or GCX_ERR_INVALID (NULL, nnz > capacity, NULL arrays
 *         with nnz > 0, indices not strictly increasing or not below
 *         dense_len, dense_len >= 2^32).
 */
GCX_API
gcx_status_t gcx_sparse_vec_check(const gcx_sparse_vec_t *sp);

/**
 * dense[idx[j]] = val[j] for every entry; other entries of dense are left
 * as they are. dense holds sp->dense_len floats.
 * @return GCX_OK, or GCX_ERR_INVALID (sp fails gcx_sparse_vec_check(), or
 *         NULL dense with nnz > 0); dense is then untouched.
 */
GCX_API
gcx_status_t gcx_sparse_vec_scatter(const gcx_sparse_vec_t *sp, float *dense);

/**
 * dense[idx[j]] += alpha * val[j] for every entry. Errors as
 * gcx_sparse_vec_scatter().
 */
GCX_API
gcx_status_t gcx_sparse_vec_scatter_add(const gcx_sparse_vec_t *sp,
                                        float alpha, float *dense);

/**
 * Zero dense (sp->dense_len floats), then scatter sp into it.
 * @return GCX_OK, or GCX_ERR_INVALID (sp fails gcx_sparse_vec_check(), or
 *         NULL dense with dense_len > 0); dense is then untouched.
 */
GCX_API
gcx_status_t gcx_sparse_vec_to_dense(const gcx_sparse_vec_t *sp,
                                     float *dense);

/**
 * Squared Euclidean norm sum(val[j]^2) over the nnz entries, accumulated
 * in double; 0 for a NULL vector or NULL values. The indices are not read.
 */
GCX_API
double gcx_sparse_vec_sqnorm(const gcx_sparse_vec_t *sp);

#ifdef __cplusplus
}
#endif

#endif /* GCX_SPARSE_VEC_H */
