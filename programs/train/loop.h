/*
 * loop.h - the data-parallel training loop and what it reports.
 */
#ifndef GCX_TRAIN_LOOP_H
#define GCX_TRAIN_LOOP_H

#include "sync/comm.h"
#include "data.h"
#include "opts.h"
#include "sync/sync.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One epoch's outcome (global over ranks). */
typedef struct train_epoch_rec {
    int epoch;         /**< 1-based. */
    long steps;        /**< Global steps done at its end. */
    double time_s;     /**< Training time at the epoch's end (wall time since
                            training started, evaluations excluded). */
    double train_loss; /**< Mean over the epoch's samples. */
    double train_acc;
    double test_loss;
    double test_acc;
} train_epoch_rec_t;

/** One step's outcome, for the trace and the progress line. */
typedef struct train_step_rec {
    long step;       /**< 0-based global step. */
    int epoch;       /**< 1-based. */
    long epoch_step; /**< 0-based step within the epoch. */
    long steps_per_epoch;
    double time_s; /**< Training time (evaluations excluded) at the step's
                        end. */
    double lr;
    double loss; /**< Mean over the global batch. */
    double acc;  /**< Over the global batch. */
    train_sync_stats_t sync;
    double bytes_total; /**< This rank's bytes sent so far. */
    double step_s, compute_s, sync_s;
} train_step_rec_t;

/** Outcome of a run. */
typedef struct train_result {
    int world;
    int workers; /**< Ranks computing gradients (world - 1 with a master). */
    size_t nparams;
    char model_desc[256];
    long steps;
    int nepochs;               /**< Epochs completed. */
    train_epoch_rec_t *epochs; /**< nepochs records (malloc'd). */
    double total_time_s;       /**< Training time, evaluations excluded. */
    double eval_time_s;        /**< Time spent evaluating on the test set. */
    double time_to_target_s;   /**< Training time at the first evaluation
                                    (--eval-every or epoch end) at or above
                                    the target; < 0: not reached (or none). */
    int target_epoch;          /**< Epoch in which it was reached, else 0. */
    double final_test_acc;
    double best_test_acc;
    double bytes_sent;     /**< This rank, gradient exchange only. */
    double dense_bytes;    /**< Dense equivalent for this rank. */
    double bytes_sent_all; /**< Summed over ranks. */
    double dense_bytes_all;
    int weight_checks; /**< Cross-rank checks passed. */
} train_result_t;

/**
 * Train as @p opts says on @p train, evaluating on @p test every epoch.
 * Collective over @p comm. Rank 0 writes the CSV trace and progress. The data
 * sets must already be normalised. Fails with GCX_ERR_MISMATCH (after a loud
 * message) if the ranks' weights ever differ, GCX_ERR_RANGE if the loss is not
 * finite, or the error of a collective.
 */
gcx_status_t train_run(const train_opts_t *opts, train_comm_t *comm,
                       const train_dataset_t *train,
                       const train_dataset_t *test, train_result_t *result_p);

/** Free what train_run() allocated in a result. */
void train_result_free(train_result_t *result);

/**
 * 63-bit FNV-1a checksum of @p n floats' bytes: equal weights give equal
 * checksums; any changed bit almost surely changes it.
 */
int64_t train_checksum(const float *v, size_t n);

/**
 * Verify that every rank holds the same @p n floats (one allreduce of two
 * int64 with MAX); prints which step failed and returns GCX_ERR_MISMATCH.
 */
gcx_status_t train_check_identical(train_comm_t *comm, const float *v, size_t n,
                                   long step);

#ifdef __cplusplus
}
#endif

#endif
