/*
 * loop_int.h - the training loop's state, shared by loop.c (the loop) and
 * loop_ckpt.c (its checkpoints). Not part of gcx-train's library interface.
 */
#ifndef GCX_TRAIN_LOOP_INT_H
#define GCX_TRAIN_LOOP_INT_H

#include "loop.h"
#include "nn/net.h"
#include "nn/optim.h"
#include "sync/sync.h"

#include <stdio.h>

typedef struct train_state {
    const train_opts_t *opts;
    train_comm_t *comm;
    const train_dataset_t *train;
    const train_dataset_t *test;
    train_net_t net;
    size_t dim; /* floats per sample */
    float *params;
    float *grads;
    float *x; /* batch x dim */
    uint8_t *y;
    uint32_t *perm;
    long spe;           /* steps per epoch: global batches x steps_per_batch */
    int epoch;          /* 1-based */
    long step_in_epoch; /* / sync.steps_per_batch: the global batch */
    double loss_sum;    /* since the last reset: summed sample losses */
    double hits;
    double samples;
    train_sgd_t sgd;
    train_sched_t sched;
    train_sync_t sync;
    long perturb_step; /* fault injection (GCX_TRAIN_PERTURB); -1: off */
    long kill_step;    /* fault injection (GCX_TRAIN_KILL); -1: off */
    int kill_where;    /* 0: after the step; 1, 2: in the next live
                          reduction, before / after sending (comm.h) */
    FILE *trace;       /* GCX_TRAIN_TRACE_SAMPLES; NULL: off */
    gcx_status_t grad_ready_status; /* the first failed sync grad_ready of
                                       this step's backward pass */
    int grad_ready_calls;           /* ... and its calls so far */
} train_state_t;

/* Where a run starts: the first step, or the one after a checkpoint. */
typedef struct train_position {
    long step;          /* global */
    int epoch;          /* 1-based */
    long step_in_epoch;
} train_position_t;

/* Checkpoints (loop_ckpt.c): every rank writes PREFIX.<rank> / reads it
 * back; errors name the file and the cause. train_run() refuses a sync
 * mode without save/load before training, so both may call them. */
gcx_status_t train_ckpt_save(train_state_t *st, const train_position_t *next);
gcx_status_t train_ckpt_load(train_state_t *st, train_position_t *pos);

#endif
