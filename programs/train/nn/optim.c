/*
 * optim.c - SGD update and learning-rate schedule.
 *
 * The update is one streaming pass over parameters, gradients and velocity
 * (12 bytes read and 8 written per parameter); everything is done in float
 * in a fixed order, so equal inputs give bit-identical weights on every rank.
 */
#include "nn/optim.h"
#include "util.h"

#include <math.h>
#include <string.h>

int train_sched_parse(const char *name)
{
    if (strcmp(name, "const") == 0) {
        return TRAIN_SCHED_CONST;
    }
    if (strcmp(name, "step") == 0) {
        return TRAIN_SCHED_STEP;
    }
    if (strcmp(name, "cosine") == 0) {
        return TRAIN_SCHED_COSINE;
    }
    return -1;
}

const char *train_sched_name(train_sched_kind_t kind)
{
    switch (kind) {
    case TRAIN_SCHED_CONST:
        return "const";
    case TRAIN_SCHED_STEP:
        return "step";
    case TRAIN_SCHED_COSINE:
        return "cosine";
    }
    return "?";
}

double train_sched_lr(const train_sched_t *s, long step)
{
    long t, span;

    if (step < s->warmup_steps) {
        return s->base_lr * (double)(step + 1) / (double)s->warmup_steps;
    }
    t = step - s->warmup_steps;
    switch (s->kind) {
    case TRAIN_SCHED_STEP:
        return s->base_lr *
               pow(s->gamma, (double)(s->step_size > 0 ? t / s->step_size : 0));
    case TRAIN_SCHED_COSINE:
        span = s->total_steps - s->warmup_steps;
        if (span <= 0 || t >= span) {
            return s->min_lr;
        }
        return s->min_lr + (s->base_lr - s->min_lr) * 0.5 *
                               (1.0 + cos(M_PI * (double)t / (double)span));
    case TRAIN_SCHED_CONST:
        break;
    }
    return s->base_lr;
}

gcx_status_t train_sgd_init(train_sgd_t *opt, size_t n, double momentum,
                            double weight_decay)
{
    float *v = train_falloc(n);

    if (v == NULL) {
        train_error("optimizer: cannot allocate %zu floats", n);
        return GCX_ERR_NOMEM;
    }
    opt->n = n;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->velocity = v;
    return GCX_OK;
}

void train_sgd_step(train_sgd_t *opt, float *params, const float *grads,
                    double lr)
{
    const float mu = (float)opt->momentum, wd = (float)opt->weight_decay;
    const float rate = (float)lr;
    float *v = opt->velocity;
    size_t i;

    for (i = 0; i < opt->n; i++) {
        float g = grads[i] + wd * params[i];

        v[i] = mu * v[i] + g;
        params[i] -= rate * v[i];
    }
}

void train_sgd_fini(train_sgd_t *opt)
{
    train_ffree(opt->velocity);
    opt->velocity = NULL;
}
