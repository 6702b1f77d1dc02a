/*
 * controller.c - GraVAC's decision per step and its window rules
 * (Tyagi & Swany, IEEE CLOUD 2023, Algorithm 1).
 *
 * Per step (gcx_gravac_decide), from norms already summed over ranks:
 *   1. T of the previous step's send: summed samples/s * its gain;
 *   2. raw gains delta = ||level||^2 / ||g_ef||^2, smoothed by an EWMA
 *      (weight alpha = N/100 by default, seeded by the first sample);
 *   3. the epsilon cascade: g_c if delta_c >= eps, else g_min if
 *      delta_min >= eps, else dense.
 * Every send, dense ones included (CF 1, gain 1), records its T.
 * After every `window` decisions (the window's T samples become each CF's
 * latest value first):
 *   a. saturation: the two best T, T1 >= T2, with (T1 - T2) / T2 <= omega
 *      -> settle on the lower CF of the two (thetas set to reach it; CF 1
 *      settles on dense steps); no raise or scaling in this window. With
 *      GCX_GRAVAC_SETTLE_WINDOW (default) this check runs at every window
 *      end, settled or not, and a settled controller whose two best have
 *      drifted apart resumes the search from its thetas; with
 *      GCX_GRAVAC_SETTLE_ONCE a settled controller stops checking;
 *   b. raise: |delta_min - delta_c| <= omega * delta_min ->
 *      theta_min <- theta_min * theta_s (the theta_s just measured);
 *   c. scale: theta_s <- policy(theta_s) (or back to the initial scale
 *      from 1, after a settlement at or below theta_min), capped so
 *      theta_min * theta_s <= theta_max.
 * A level whose CF changed restarts its EWMA, so each candidate is judged
 * on its own window. Everything is O(1) per step except the window end
 * (O(#CFs) once per window). Only the summed inputs are read, so every
 * rank takes the same decisions.
 */
#include "gravac_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(gcx_gravac_norms_t) == 4 * sizeof(double),
               "gcx_gravac_norms_t is allreduced as 4 doubles");

static void gcx_gravac_ewma_add(gcx_gravac_ewma_t *e, double alpha, double x)
{
    e->value = e->valid ? alpha * x + (1.0 - alpha) * e->value : x;
    e->valid = 1;
}

static void gcx_gravac_ewma_reset(gcx_gravac_ewma_t *e)
{
    e->value = 0.0;
    e->valid = 0;
}

gcx_status_t gcx_gravac_create(const gcx_gravac_params_t *params,
                               gcx_gravac_t **ctl_p)
{
    gcx_gravac_t *ctl;

    if (gcx_gravac_params_check(params) != GCX_OK || ctl_p == NULL) {
        return GCX_ERR_INVALID;
    }
    ctl = calloc(1, sizeof(*ctl));
    if (ctl == NULL) {
        return GCX_ERR_NOMEM;
    }
    ctl->params    = *params;
    ctl->alpha     = params->alpha > 0.0 ? params->alpha
                                         : fmin(1.0, params->nranks / 100.0);
    ctl->theta_min = params->theta_min;
    ctl->theta_s =
        gcx_gravac_cap(params->theta_min, params->scale, params->theta_max);
    *ctl_p = ctl;
    return GCX_OK;
}

void gcx_gravac_destroy(gcx_gravac_t *ctl)
{
    free(ctl);
}

static double gcx_gravac_gain(double part, double whole)
{
    double gain;

    if (whole == 0.0) {
        return 1.0; /* nothing to lose */
    }
    gain = part / whole;
    return gain > 1.0 ? 1.0 : gain; /* rounding of sums over ranks */
}

/* Effective CF of the c level with the current thetas. */
static double gcx_gravac_cf_c(const gcx_gravac_t *ctl)
{
    if (ctl->settled && ctl->theta_s > 1.0) {
        return ctl->settled_cf; /* exactly the CF settled on */
    }
    return gcx_gravac_cf_of(ctl->theta_min, ctl->theta_s,
                            ctl->params.theta_max);
}

static void gcx_gravac_settle(gcx_gravac_t *ctl, double cf)
{
    double theta_min = ctl->theta_min, theta_s;

    if (gcx_gravac_cf_equal(cf, 1.0)) {
        /* dense SGD was among the two best: dense steps, thetas kept so a
         * resumed search goes on from them */
        ctl->settled    = 1;
        ctl->settled_cf = 1.0;
        return;
    }
    if (cf > theta_min) {
        theta_s = cf / theta_min; /* keep the g_min fallback below cf */
    } else {
        theta_min = cf; /* an earlier, lower theta_min */
        theta_s   = 1.0;
    }
    if (theta_min != ctl->theta_min) {
        gcx_gravac_ewma_reset(&ctl->delta_min);
    }
    if (theta_min != ctl->theta_min || theta_s != ctl->theta_s) {
        gcx_gravac_ewma_reset(&ctl->delta_c);
    }
    ctl->theta_min  = theta_min;
    ctl->theta_s    = theta_s;
    ctl->settled    = 1;
    ctl->settled_cf = cf;
}

/* The rules applied after each window; returns GCX_GRAVAC_EV_* bits. */
static unsigned gcx_gravac_window_end(gcx_gravac_t *ctl)
{
    const gcx_gravac_params_t *p      = &ctl->params;
    unsigned                   events = GCX_GRAVAC_EV_WINDOW;
    double                     cf, theta_min, theta_s;

    gcx_gravac_tput_close_window(ctl);
    if (ctl->settled && p->settle == GCX_GRAVAC_SETTLE_ONCE) {
        return events;
    }
    if (gcx_gravac_tput_saturated(ctl, p->omega, &cf)) {
        if (!ctl->settled || !gcx_gravac_cf_equal(cf, ctl->settled_cf)) {
            gcx_gravac_settle(ctl, cf);
            events |= GCX_GRAVAC_EV_SETTLED;
        }
        return events;
    }
    if (ctl->settled) { /* the two best drifted apart: search again */
        ctl->settled    = 0;
        ctl->settled_cf = 0.0;
        events |= GCX_GRAVAC_EV_UNSETTLED;
    }
    theta_min = ctl->theta_min;
    theta_s   = ctl->theta_s;
    if (theta_s > 1.0 && ctl->delta_min.valid && ctl->delta_c.valid &&
        fabs(ctl->delta_min.value - ctl->delta_c.value) <=
            p->omega * ctl->delta_min.value) {
        theta_min = gcx_gravac_cf_of(theta_min, theta_s, p->theta_max);
        events |= GCX_GRAVAC_EV_RAISED;
    }
    /* theta_s is 1 only at the cap or after a settlement at or below
     * theta_min; from there the policy starts again at the initial scale */
    theta_s = gcx_gravac_cap(theta_min,
                             theta_s > 1.0 ? gcx_gravac_policy_next(p, theta_s)
                                           : p->scale,
                             p->theta_max);
    if (theta_s != ctl->theta_s) {
        events |= GCX_GRAVAC_EV_SCALED;
    }
    if (gcx_gravac_cf_of(theta_min, theta_s, p->theta_max) >= p->theta_max) {
        events |= GCX_GRAVAC_EV_CAPPED;
    }
    if (theta_min != ctl->theta_min) {
        gcx_gravac_ewma_reset(&ctl->delta_min);
    }
    if (theta_min != ctl->theta_min || theta_s != ctl->theta_s) {
        gcx_gravac_ewma_reset(&ctl->delta_c);
    }
    ctl->theta_min = theta_min;
    ctl->theta_s   = theta_s;
    return events;
}

gcx_status_t gcx_gravac_decide(gcx_gravac_t *ctl,
                               const gcx_gravac_norms_t *summed,
                               gcx_gravac_record_t *rec_p)
{
    gcx_gravac_record_t rec;
    double              raw_min, raw_c, delta;

    if (ctl == NULL || summed == NULL) {
        return GCX_ERR_INVALID;
    }
    if (!isfinite(summed->ef_sqnorm) || !isfinite(summed->min_sqnorm) ||
        !isfinite(summed->c_sqnorm) || !isfinite(summed->samples_per_s)) {
        return GCX_ERR_RANGE;
    }
    if (summed->ef_sqnorm < 0.0 || summed->min_sqnorm < 0.0 ||
        summed->c_sqnorm < 0.0 || summed->samples_per_s < 0.0) {
        return GCX_ERR_INVALID;
    }
    /* nothing below can fail */
    memset(&rec, 0, sizeof(rec));
    rec.step      = ctl->step;
    rec.theta_min = ctl->theta_min;
    rec.theta_s   = ctl->theta_s;

    /* 1. throughput of the previous step's send */
    if (ctl->pending && summed->samples_per_s > 0.0) {
        rec.throughput = summed->samples_per_s * ctl->pending_delta;
        gcx_gravac_tput_add(ctl, ctl->pending_cf, rec.throughput);
    }
    ctl->pending = 0;

    /* 2. smoothed gains; without a second level g_c is g_min */
    raw_min = gcx_gravac_gain(summed->min_sqnorm, summed->ef_sqnorm);
    raw_c   = ctl->theta_s > 1.0
                  ? gcx_gravac_gain(summed->c_sqnorm, summed->ef_sqnorm)
                  : raw_min;
    gcx_gravac_ewma_add(&ctl->delta_min, ctl->alpha, raw_min);
    gcx_gravac_ewma_add(&ctl->delta_c, ctl->alpha, raw_c);
    rec.delta_min = ctl->delta_min.value;
    rec.delta_c   = ctl->delta_c.value;

    /* 3. the epsilon cascade (a settlement on CF 1 sends dense) */
    if (ctl->settled && ctl->settled_cf == 1.0) {
        rec.level = GCX_GRAVAC_LEVEL_DENSE;
        rec.cf    = 1.0;
        delta     = 1.0;
    } else if (ctl->theta_s > 1.0 && rec.delta_c >= ctl->params.epsilon) {
        rec.level = GCX_GRAVAC_LEVEL_C;
        rec.cf    = gcx_gravac_cf_c(ctl);
        delta     = rec.delta_c;
    } else if (rec.delta_min >= ctl->params.epsilon) {
        rec.level = GCX_GRAVAC_LEVEL_MIN;
        rec.cf    = ctl->theta_min;
        delta     = rec.delta_min;
    } else {
        rec.level = GCX_GRAVAC_LEVEL_DENSE;
        rec.cf    = 1.0;
        delta     = 1.0;
    }
    ctl->pending       = 1; /* dense too: T[1] is a candidate */
    ctl->pending_cf    = rec.cf;
    ctl->pending_delta = delta;

    /* window rules: they set the thetas of the next step */
    ctl->step++;
    if (ctl->step % ctl->params.window == 0) {
        rec.events = gcx_gravac_window_end(ctl);
    }
    if (rec_p != NULL) {
        *rec_p = rec;
    }
    return GCX_OK;
}

gcx_status_t gcx_gravac_get_state(const gcx_gravac_t *ctl,
                                  gcx_gravac_state_t *state_p)
{
    gcx_gravac_state_t s;

    if (ctl == NULL || state_p == NULL) {
        return GCX_ERR_INVALID;
    }
    memset(&s, 0, sizeof(s));
    s.step         = ctl->step;
    s.theta_min    = ctl->theta_min;
    s.theta_s      = ctl->theta_s;
    s.delta_min    = ctl->delta_min.value;
    s.delta_c      = ctl->delta_c.value;
    s.settled      = ctl->settled;
    s.settled_cf   = ctl->settled_cf;
    s.n_throughput = ctl->n_tput;
    *state_p       = s;
    return GCX_OK;
}

gcx_status_t gcx_gravac_throughput(const gcx_gravac_t *ctl, double cf,
                                   double *throughput_p)
{
    int i;

    if (ctl == NULL || throughput_p == NULL) {
        return GCX_ERR_INVALID;
    }
    i = gcx_gravac_tput_find(ctl, cf);
    if (i < 0) {
        return GCX_ERR_NOT_FOUND;
    }
    *throughput_p = gcx_gravac_tput_of(&ctl->tput[i]);
    return GCX_OK;
}

const char *gcx_gravac_level_name(gcx_gravac_level_t level)
{
    switch (level) {
    case GCX_GRAVAC_LEVEL_DENSE:
        return "dense";
    case GCX_GRAVAC_LEVEL_MIN:
        return "min";
    case GCX_GRAVAC_LEVEL_C:
        return "c";
    }
    return "?";
}
