/*
 * policy.c - the scaling policies of theta_s and the theta_max cap.
 *
 * Exponential squares theta_s (2, 4, 16, 256, ...), geometric multiplies it
 * by a ratio (2, 4, 8, ...); both start at params->scale. The effective CF
 * of the second level is theta_min * theta_s, capped at theta_max. O(1);
 * listing the candidates is O(log log) (exponential) or O(log) (geometric)
 * in theta_max / theta_min.
 */
#include "gravac_int.h"

#include <math.h>

int gcx_gravac_cf_equal(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

double gcx_gravac_policy_next(const gcx_gravac_params_t *params,
                              double theta_s)
{
    switch (params->policy) {
    case GCX_GRAVAC_POLICY_EXPONENTIAL:
        return theta_s * theta_s;
    case GCX_GRAVAC_POLICY_GEOMETRIC:
        return theta_s * params->ratio;
    }
    return theta_s;
}

/* theta_s limited so that theta_min * theta_s <= theta_max, and >= 1. */
double gcx_gravac_cap(double theta_min, double theta_s, double theta_max)
{
    double limit = theta_max / theta_min;

    if (!(theta_s < limit)) { /* also catches an overflow to +inf */
        theta_s = limit;
    }
    return theta_s < 1.0 ? 1.0 : theta_s;
}

double gcx_gravac_cf_of(double theta_min, double theta_s, double theta_max)
{
    double cf = theta_min * theta_s;

    /* a capped theta_s gives theta_max up to rounding: report it exactly */
    return cf >= theta_max * (1.0 - 1e-12) ? theta_max : cf;
}

const gcx_config_value_t gcx_gravac_policy_names[] = {
    [GCX_GRAVAC_POLICY_EXPONENTIAL] = {GCX_GRAVAC_POLICY_EXPONENTIAL,
                                       "exponential",
                                       "theta_s <- theta_s^2"},
    [GCX_GRAVAC_POLICY_GEOMETRIC]   = {GCX_GRAVAC_POLICY_GEOMETRIC,
                                       "geometric",
                                       "theta_s <- theta_s * ratio"},
    {0, NULL, NULL},
};

const gcx_config_value_t gcx_gravac_settle_names[] = {
    [GCX_GRAVAC_SETTLE_WINDOW] = {GCX_GRAVAC_SETTLE_WINDOW, "window",
                                  "re-check saturation at every window end"},
    [GCX_GRAVAC_SETTLE_ONCE]   = {GCX_GRAVAC_SETTLE_ONCE, "once",
                                  "the first settlement is final"},
    {0, NULL, NULL},
};

const char *gcx_gravac_policy_name(gcx_gravac_policy_t policy)
{
    return gcx_config_value_name(gcx_gravac_policy_names, (int)policy);
}

gcx_status_t gcx_gravac_candidates(const gcx_gravac_params_t *params,
                                   double *cfs, size_t max, size_t *count_p)
{
    double theta_min, theta_s, cf;
    size_t count = 0;
    int    first = 1;

    if (gcx_gravac_params_check(params) != GCX_OK || count_p == NULL ||
        (cfs == NULL && max > 0)) {
        return GCX_ERR_INVALID;
    }
    theta_min = params->theta_min;
    theta_s   = gcx_gravac_cap(theta_min, params->scale, params->theta_max);
    cf        = theta_min;
    for (;;) {
        if (count < max) {
            cfs[count] = cf;
        }
        ++count;
        if (theta_s <= 1.0 || cf >= params->theta_max) {
            break;
        }
        if (!first) { /* the first entry is theta_min alone */
            theta_s = gcx_gravac_cap(theta_min,
                                     gcx_gravac_policy_next(params, theta_s),
                                     params->theta_max);
        }
        first = 0;
        cf = gcx_gravac_cf_of(theta_min, theta_s, params->theta_max);
    }
    *count_p = count;
    return GCX_OK;
}
