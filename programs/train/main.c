/*
 * main.c - gcx-train: parse options, load and normalise Fashion-MNIST,
 * create the communicator, run the loop, write the JSON summary.
 *
 * Every rank loads the whole data set (47 MB of bytes) because each epoch's
 * permutation gives it a different shard; normalisation constants come from
 * the training set, so every rank computes the same ones.
 * Exit status: 0 success, 1 a run-time failure, 2 bad options.
 */
#include "sync/comm.h"
#include "sync/sync.h"
#include "data.h"
#include "loop.h"
#include "opts.h"
#include "report.h"
#include "util.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    train_dataset_t train, test;
    train_result_t result;
    train_comm_t comm;
    train_opts_t opts;
    gcx_status_t status;
    double mean, std;
    int rc;

    train_opts_default(&opts);
    rc = train_opts_parse(argc, argv, &opts);
    if (rc == TRAIN_OPTS_EXIT) {
        return 0;
    }
    if (rc != TRAIN_OPTS_RUN) {
        return 2;
    }

    status = train_dataset_load_named("train", &train);
    if (status != GCX_OK) {
        return 1;
    }
    status = train_dataset_load_named("t10k", &test);
    if (status != GCX_OK) {
        goto out_free_train;
    }
    train_dataset_stats(&train, &mean, &std);
    train_dataset_set_norm(&train, mean, std);
    train_dataset_set_norm(&test, mean, std);

    status = train_comm_open(&comm, (train_sync_flags(opts.sync) &
                                     TRAIN_SYNC_PROGRESS_THREAD) != 0);
    if (status != GCX_OK) {
        goto out_free_test;
    }
    train_set_log_rank(comm.rank);
    if (comm.rank == 0) {
        printf("gcx-train: %s, %d rank%s x batch %d, sync %s, %zu train / "
               "%zu test samples (mean %.4f std %.4f)\n",
               opts.model.kind, comm.size, comm.size == 1 ? "" : "s",
               opts.batch, opts.sync, train.n, test.n, mean, std);
        fflush(stdout);
    }

    status = train_run(&opts, &comm, &train, &test, &result);
    if (status != GCX_OK) {
        goto out_close;
    }
    if (comm.rank == 0) {
        printf("gcx-train: %s (%zu parameters): final test accuracy %.4f "
               "(best %.4f) after %d epochs, %ld steps, %.1f s",
               result.model_desc, result.nparams, result.final_test_acc,
               result.best_test_acc, result.nepochs, result.steps,
               result.total_time_s);
        if (opts.target_acc > 0) {
            if (result.time_to_target_s >= 0) {
                printf("; %.4f reached after %.1f s (epoch %d)",
                       opts.target_acc, result.time_to_target_s,
                       result.target_epoch);
            } else {
                printf("; %.4f not reached", opts.target_acc);
            }
        }
        printf("\n");
        if (opts.json[0] != '\0') {
            status = train_report_json(opts.json, &opts, &result);
        }
    }
    train_result_free(&result);

out_close:
    train_comm_close(&comm);
out_free_test:
    train_dataset_free(&test);
out_free_train:
    train_dataset_free(&train);
    return status == GCX_OK ? 0 : 1;
}
