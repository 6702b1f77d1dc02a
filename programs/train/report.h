/*
 * report.h - what rank 0 shows and writes: the progress line, the per-step
 * CSV trace and the JSON summary.
 */
#ifndef GCX_TRAIN_REPORT_H
#define GCX_TRAIN_REPORT_H

#include <stdio.h>

#include "loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct train_report {
    int active;            /**< Only rank 0 reports. */
    train_progress_t mode; /**< Resolved: never AUTO. */
    FILE *out;             /**< Progress goes here (stdout). */
    FILE *csv;             /**< NULL without --csv. */
    long log_every;
    double last_draw; /**< Time of the last tty redraw. */
    int line_open;    /**< A tty line waits to be ended. */
    int have_pending; /**< pending is a CSV row not written yet. */
    train_step_rec_t pending;
} train_report_t;

/** CSV header of the per-step trace. */
#define TRAIN_CSV_HEADER                                                       \
    "step,epoch,time_s,lr,loss,train_acc,test_acc,cf,gain,bytes_sent,"         \
    "dense_bytes,bytes_total,step_s,compute_s,sync_s"

/** Open the report (rank 0: progress mode, the CSV file and its header). */
gcx_status_t train_report_open(train_report_t *rep, const train_opts_t *opts,
                               int rank, long steps_per_epoch, FILE *out);

/**
 * A test accuracy measured right after the step @p rec (--eval-every):
 * written into that step's CSV row, and a plain line.
 */
void train_report_test(train_report_t *rep, const train_step_rec_t *rec,
                       double test_acc);

/** One step: CSV row (held until the next call) and progress. */
void train_report_step(train_report_t *rep, const train_step_rec_t *rec);

/** End of an epoch: test accuracy into the last CSV row, an epoch line. */
void train_report_epoch(train_report_t *rep, const train_epoch_rec_t *rec,
                        int epochs);

/** Flush and close the CSV. */
void train_report_close(train_report_t *rep);

/** Write the JSON summary of a run to @p path. */
gcx_status_t train_report_json(const char *path, const train_opts_t *opts,
                               const train_result_t *res);

/** Write the JSON summary to an open stream. */
void train_report_json_stream(FILE *f, const train_opts_t *opts,
                              const train_result_t *res);

#ifdef __cplusplus
}
#endif

#endif
