/*
 * opts.h - the command line of gcx-train.
 */
#ifndef GCX_TRAIN_OPTS_H
#define GCX_TRAIN_OPTS_H

#include <stdint.h>
#include <stdio.h>

#include "nn/model.h"
#include "nn/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum train_progress {
    TRAIN_PROGRESS_AUTO = 0, /**< tty when stderr is a terminal, else plain */
    TRAIN_PROGRESS_TTY,      /**< one line rewritten in place */
    TRAIN_PROGRESS_PLAIN,    /**< a line every --log-every steps */
    TRAIN_PROGRESS_NONE,     /**< epoch lines only */
} train_progress_t;

typedef struct train_opts {
    train_model_spec_t model;
    int epochs;
    int batch; /**< Per rank. */
    double lr;
    double momentum;
    double weight_decay;
    train_sched_kind_t schedule;
    double warmup_epochs;
    double lr_step_epochs; /**< Step schedule: epochs between decays. */
    double lr_gamma;
    double min_lr;
    uint64_t seed;
    char sync[256];    /**< "name" or "name:k=v,...". */
    double target_acc; /**< 0: none. */
    int stop_at_target;
    char json[1024];  /**< "" : no JSON file. */
    char csv[1024];   /**< "" : no CSV trace. */
    long log_every;   /**< Steps between plain lines; 0: auto. */
    long check_every; /**< Steps between weight checks; 0: epochs. */
    long max_steps;   /**< Stop after this many steps; 0: no limit. */
    long eval_every;  /**< Steps between test evaluations; 0: epoch ends. */
    int straggler_rank;     /**< Rank slowed down; -1: none. */
    double straggler_delay; /**< Seconds it sleeps per gradient step. */
    /**
     * --straggler exp:M: every rank sleeps Exp(mean M x the measured time
     * of each gradient computation) after it (train_sync_computed());
     * 0: off. Replaces R:MS and the other way round.
     */
    double straggler_exp;
    train_progress_t progress;
    /** Checkpoint written at the end of the run, one file per rank
     *  (PATH.<rank>); "": none. */
    char save[1024];
    /** Checkpoint (PATH.<rank>) this run continues from; "": none. */
    char resume[1024];
} train_opts_t;

/** Defaults (a run of a few minutes on 2 cores reaching ~89% with mlp). */
void train_opts_default(train_opts_t *opts);

/** Result of train_opts_parse(). */
enum {
    TRAIN_OPTS_RUN = 0,  /**< Options are good: run. */
    TRAIN_OPTS_EXIT = 1, /**< --help was printed: exit 0. */
    TRAIN_OPTS_ERROR = 2 /**< A message was printed: exit 2. */
};

/**
 * Parse argv into @p opts (which starts from the defaults). Errors name the
 * option and what it accepts. Re-entrant across calls (resets getopt).
 */
int train_opts_parse(int argc, char **argv, train_opts_t *opts);

/** Print the usage text. */
void train_opts_usage(FILE *out);

/** Parse "1024,512" into widths (1..65536 each); "none" gives 0 widths. */
int train_parse_widths(const char *text, int *widths, int max, int *count_p);

#ifdef __cplusplus
}
#endif

#endif
