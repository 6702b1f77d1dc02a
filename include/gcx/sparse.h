/**
 * @file sparse.h
 * @brief Sparse allreduce of top-k style gradients (zero copy, algorithm
 *        chosen by an alpha-beta cost model).
 *
 * Every rank contributes a sparse float vector of the same dense length N
 * (gcx_sparse_vec_t of sparse_vec.h: strictly increasing uint32 indices and
 * float values as a structure of arrays; nnz may differ between ranks). The
 * result is the element-wise sum over ranks, delivered as
 * - a dense vector of N floats in a caller buffer, and/or
 * - the sparse union of all ranks' indices with the summed values, in a
 *   caller-owned gcx_sparse_vec_t (an index is in the union even when its
 *   sum is exactly 0),
 * optionally re-sparsified to the global top-k of the sum by magnitude
 * before it is spread (Ok-Topk semantics: ties go to the lower index), and
 * optionally with, for each of the caller's indices, a flag saying whether
 * it is in the global result (what Ok-Topk-style residual updates need:
 * entries not in the result stay in the residual).
 *
 * Like every gcx collective the call is non-blocking (a NULL request pointer
 * blocks), all ranks call it in the same order, and every rank receives
 * bit-identical results.
 *
 * Algorithms (GCX_SPARSE_ALGO; auto chooses with an alpha-beta model fed by
 * N, P and every rank's nnz, corrected by what its earlier calls on the
 * communicator measured (GCX_SPARSE_FEEDBACK), see
 * src/coll/sparse_allreduce/README.md):
 * allgather (the Horovod/GRACE/DGC baseline), recursive_doubling (sorted
 * merge-sum, dense once fill-in makes dense cheaper), split (sparse
 * reduce-scatter by index range + sparse or dense allgather) and
 * balanced_split (split with ranges from averaged local quantiles).
 *
 * Memory: indices and values are sent straight from the caller's arrays;
 * the library never keeps a pointer to them after the request completes.
 * The caller must leave input and outputs untouched until then.
 */
#ifndef GCX_SPARSE_H
#define GCX_SPARSE_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/gcx.h>
#include <gcx/sparse_vec.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Optional parts of a sparse allreduce; zero-initialize for none. */
typedef struct gcx_sparse_allreduce_opts {
    /**
     * 0: the result is the whole union. k > 0: the result keeps only the k
     * entries of largest |sum| (ties: lower index first); every rank must
     * pass the same k. With k >= union size the whole union is kept.
     */
    size_t topk;
    /**
     * NULL, or input->nnz bytes owned by the caller: on success in_result[j]
     * is 1 when input->idx[j] is in the global result and 0 otherwise
     * (always 1 without topk).
     */
    uint8_t *in_result;
    /**
     * NULL: the communicator's GCX_SPARSE_ALGO. Else this call's algorithm
     * by name: "auto", "allgather", "recursive_doubling", "split" or
     * "balanced_split" (an unknown name: GCX_ERR_INVALID, nothing started);
     * every rank must pass the same. Only auto calls feed and use auto's
     * measurements (GCX_SPARSE_FEEDBACK), so calls that name an algorithm
     * can share a communicator with auto calls, e.g. to time them on the
     * same connections.
     */
    const char *algo;
} gcx_sparse_allreduce_opts_t;

/**
 * Sparse allreduce (sum).
 *
 * @param comm        Communicator.
 * @param input       This rank's vector (read only, caller-owned): indices
 *                    strictly increasing and below input->dense_len; the
 *                    dense length must be the same on every rank.
 * @param dense_out   NULL, or dense_len floats (caller-owned): on success
 *                    the dense sum (0 outside the result).
 * @param sparse_out  NULL, or a caller-owned vector whose arrays hold
 *                    sparse_out->capacity entries: on success its idx, val,
 *                    nnz and dense_len are the result. It must not share
 *                    memory with @p input.
 * @param opts        NULL, or the options above.
 * @param req_p       Where to return the request, or NULL to block.
 *
 * At least one of dense_out and sparse_out must be given.
 *
 * @return GCX_OK (non-blocking: the request was started).
 *         GCX_ERR_INVALID: NULL comm/input, no output, or unusable pointers
 *         (detected locally, nothing is started).
 *         GCX_ERR_MISMATCH on every rank, with the reason logged by the
 *         rank(s) that caused it, when: a rank's indices are not strictly
 *         increasing or not below N, the ranks' N, topk or algo differ, or a
 *         rank's sparse_out capacity is smaller than the result (capacities
 *         are exchanged, so all ranks fail together and the communicator
 *         stays usable; size sparse_out for min(N, sum of nnz), or topk).
 *         On these errors no output is written.
 *         GCX_ERR_TIMEOUT / GCX_ERR_PEER / GCX_ERR_TRANSPORT as for every
 *         collective (the communicator is then failed; outputs are
 *         unspecified).
 */
GCX_API
gcx_status_t gcx_sparse_allreduce(gcx_comm_t *comm,
                                  const gcx_sparse_vec_t *input,
                                  float *dense_out,
                                  gcx_sparse_vec_t *sparse_out,
                                  const gcx_sparse_allreduce_opts_t *opts,
                                  gcx_request_t **req_p);

/** Counters of the calling rank, for perf drivers and tests. */
typedef struct gcx_sparse_allreduce_stats {
    const char *algo;       /**< Name of the algorithm of the last call. */
    uint64_t    bytes_sent; /**< Payload bytes this rank sent in the last
                                 call (all phases). */
    uint64_t    result_nnz; /**< Union size K (before top-k) of the last call,
                                 when the algorithm knows it, else 0. */
} gcx_sparse_allreduce_stats_t;

/**
 * Statistics of the last completed sparse allreduce on @p comm.
 * @return GCX_OK, GCX_ERR_INVALID (NULL), GCX_ERR_NOT_FOUND (none yet).
 */
GCX_API
gcx_status_t gcx_sparse_allreduce_last_stats(
    const gcx_comm_t *comm, gcx_sparse_allreduce_stats_t *stats_p);

#ifdef __cplusplus
}
#endif

#endif /* GCX_SPARSE_H */
