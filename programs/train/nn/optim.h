/*
 * optim.h - SGD with momentum and weight decay, and the learning-rate
 * schedule.
 */
#ifndef GCX_TRAIN_OPTIM_H
#define GCX_TRAIN_OPTIM_H

#include <stddef.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum train_sched_kind {
    TRAIN_SCHED_CONST = 0, /**< base_lr throughout. */
    TRAIN_SCHED_STEP,      /**< base_lr * gamma^floor(step / step_size). */
    TRAIN_SCHED_COSINE,    /**< Cosine from base_lr to min_lr at the end. */
} train_sched_kind_t;

/** Learning-rate schedule, a pure function of the step number. */
typedef struct train_sched {
    train_sched_kind_t kind;
    double base_lr;
    double min_lr;     /**< Cosine: value reached at total_steps. */
    double gamma;      /**< Step: factor applied every step_size steps. */
    long step_size;    /**< Step: steps between decays (> 0). */
    long warmup_steps; /**< Linear ramp from base_lr/warmup to base_lr. */
    long total_steps;  /**< Length of the run (cosine needs it). */
} train_sched_t;

/** Parse "const", "step" or "cosine"; -1 if unknown. */
int train_sched_parse(const char *name);

/** Name of a schedule kind. */
const char *train_sched_name(train_sched_kind_t kind);

/**
 * Learning rate of step @p step (0-based). Warmup first: during steps
 * 0..warmup-1 the rate is base_lr * (step + 1) / warmup; after it the
 * schedule runs on (step - warmup) over (total - warmup) steps.
 */
double train_sched_lr(const train_sched_t *sched, long step);

/**
 * SGD with momentum (PyTorch form):
 *   g' = g + wd * w;  v = momentum * v + g';  w -= lr * v.
 * Weight decay applies to every parameter, biases included.
 */
typedef struct train_sgd {
    size_t n;
    double momentum;
    double weight_decay;
    float *velocity; /**< n floats, zero at start. */
} train_sgd_t;

gcx_status_t train_sgd_init(train_sgd_t *opt, size_t n, double momentum,
                            double weight_decay);

/** One update of @p params (n floats) from @p grads at rate @p lr. */
void train_sgd_step(train_sgd_t *opt, float *params, const float *grads,
                    double lr);

void train_sgd_fini(train_sgd_t *opt);

#ifdef __cplusplus
}
#endif

#endif
