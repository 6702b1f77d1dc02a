/*
 * params.c - GraVAC parameters: defaults, validation, and reading the
 * GCX_GRAVAC_* variables of a configuration.
 *
 * The variables' rows (defaults, docs, ranges) are GraVAC's own, at the end
 * of this file, registered into base's one config table; this file reads
 * the values back through the public gcx_config_get() and checks the
 * combinations a single row cannot (theta_max >= theta_min). O(1).
 */
#include "gravac_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void gcx_gravac_params_default(gcx_gravac_params_t *params)
{
    if (params == NULL) {
        return;
    }
    memset(params, 0, sizeof(*params));
    params->theta_min = 10.0;
    params->theta_max = 1000.0;
    params->epsilon   = 0.7;
    params->omega     = 0.01;
    params->window    = 500;
    params->policy    = GCX_GRAVAC_POLICY_EXPONENTIAL;
    params->scale     = 2.0;
    params->ratio     = 2.0;
    params->alpha     = 0.0;
    params->nranks    = 1;
    params->settle    = GCX_GRAVAC_SETTLE_WINDOW;
}

gcx_status_t gcx_gravac_params_check(const gcx_gravac_params_t *p)
{
    /* written so that NaN fails every comparison */
    if (p == NULL || !(p->theta_min >= 1.0) || !isfinite(p->theta_min) ||
        !(p->theta_max >= p->theta_min) || !isfinite(p->theta_max) ||
        !(p->epsilon > 0.0 && p->epsilon <= 1.0) ||
        !(p->omega >= 0.0 && p->omega < 1.0) || p->window == 0 ||
        !(p->scale > 1.0) || !isfinite(p->scale) || !(p->ratio > 1.0) ||
        !isfinite(p->ratio) || !(p->alpha >= 0.0 && p->alpha <= 1.0) ||
        p->nranks < 1) {
        return GCX_ERR_INVALID;
    }
    if ((p->policy != GCX_GRAVAC_POLICY_EXPONENTIAL &&
         p->policy != GCX_GRAVAC_POLICY_GEOMETRIC) ||
        (p->settle != GCX_GRAVAC_SETTLE_WINDOW &&
         p->settle != GCX_GRAVAC_SETTLE_ONCE)) {
        return GCX_ERR_INVALID;
    }
    return GCX_OK;
}

static gcx_status_t gcx_gravac_get_number(const gcx_config_t *config,
                                          const char *name, double *value_p)
{
    char         buf[64];
    char        *end;
    double       value;
    gcx_status_t status;

    status = gcx_config_get(config, name, buf, sizeof(buf));
    if (status != GCX_OK) {
        return status;
    }
    errno = 0;
    value = strtod(buf, &end);
    if (end == buf || *end != '\0' || errno != 0) {
        return GCX_ERR_INVALID;
    }
    *value_p = value;
    return GCX_OK;
}

gcx_status_t gcx_gravac_params_from_config(const gcx_config_t *config,
                                           gcx_gravac_params_t *params)
{
    static const char *const names[] = {
        "GRAVAC_THETA_MIN", "GRAVAC_THETA_MAX", "GRAVAC_EPSILON",
        "GRAVAC_OMEGA",     "GRAVAC_WINDOW",    "GRAVAC_SCALE",
        "GRAVAC_RATIO",     "GRAVAC_ALPHA"};
    double                    v[sizeof(names) / sizeof(names[0])];
    char                      policy[32], settle[32];
    const gcx_config_value_t *named, *named_settle;
    gcx_gravac_params_t       p;
    gcx_status_t              status;
    size_t                    i;

    if (config == NULL || params == NULL) {
        return GCX_ERR_INVALID;
    }
    for (i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
        status = gcx_gravac_get_number(config, names[i], &v[i]);
        if (status != GCX_OK) {
            return status;
        }
    }
    status = gcx_config_get(config, "GRAVAC_POLICY", policy, sizeof(policy));
    if (status == GCX_OK) {
        status =
            gcx_config_get(config, "GRAVAC_SETTLE", settle, sizeof(settle));
    }
    if (status != GCX_OK) {
        return status;
    }
    p           = *params;
    p.theta_min = v[0];
    p.theta_max = v[1];
    p.epsilon   = v[2];
    p.omega     = v[3];
    p.window    = (uint32_t)v[4]; /* the table bounds it to 1..2^31-1 */
    p.scale     = v[5];
    p.ratio     = v[6];
    p.alpha     = v[7];
    named        = gcx_config_value_find(gcx_gravac_policy_names, policy);
    named_settle = gcx_config_value_find(gcx_gravac_settle_names, settle);
    if (named == NULL || named_settle == NULL) {
        return GCX_ERR_INVALID;
    }
    p.policy = (gcx_gravac_policy_t)named->id;
    p.settle = (gcx_gravac_settle_t)named_settle->id;
    status = gcx_gravac_params_check(&p);
    if (status != GCX_OK) {
        return status;
    }
    *params = p;
    return GCX_OK;
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_gravac_config_rows[] = {
    {"GRAVAC_THETA_MIN", GCX_CONFIG_DOUBLE, "10",
     "GraVAC: initial first-level compression factor theta_min (at most "
     "GCX_GRAVAC_THETA_MAX)",
     offsetof(struct gcx_config, gravac_theta_min), 1, 1e9, NULL},
    {"GRAVAC_THETA_MAX", GCX_CONFIG_DOUBLE, "1000",
     "GraVAC: largest effective compression factor theta_min * theta_s",
     offsetof(struct gcx_config, gravac_theta_max), 1, 1e9, NULL},
    {"GRAVAC_EPSILON", GCX_CONFIG_DOUBLE, "0.7",
     "GraVAC: smallest compression gain (squared norm kept over squared "
     "norm before) a compressed level needs to be sent; below it for both "
     "levels the step is dense",
     offsetof(struct gcx_config, gravac_epsilon), 1e-6, 1, NULL},
    {"GRAVAC_OMEGA", GCX_CONFIG_DOUBLE, "0.01",
     "GraVAC: relative tolerance for raising theta_min (gains agree) and "
     "for settling (the two best compression throughputs agree, relative "
     "to the second)",
     offsetof(struct gcx_config, gravac_omega), 0, 0.999, NULL},
    {"GRAVAC_WINDOW", GCX_CONFIG_INT, "500",
     "GraVAC: steps between two scaling decisions",
     offsetof(struct gcx_config, gravac_window), 1, INT_MAX, NULL},
    {"GRAVAC_POLICY", GCX_CONFIG_ENUM, "exponential",
     "GraVAC: how theta_s grows each window; exponential squares it "
     "(2, 4, 16, 256), geometric multiplies it by GCX_GRAVAC_RATIO",
     offsetof(struct gcx_config, gravac_policy), 0, 0,
     gcx_gravac_policy_names},
    {"GRAVAC_SCALE", GCX_CONFIG_DOUBLE, "2",
     "GraVAC: initial second-level compression factor theta_s",
     offsetof(struct gcx_config, gravac_scale), 1.001, 1e9, NULL},
    {"GRAVAC_RATIO", GCX_CONFIG_DOUBLE, "2",
     "GraVAC: ratio of the geometric policy",
     offsetof(struct gcx_config, gravac_ratio), 1.001, 1e9, NULL},
    {"GRAVAC_ALPHA", GCX_CONFIG_DOUBLE, "0",
     "GraVAC: EWMA weight of the newest gain; 0: N/100 for N workers "
     "(at most 1); 1: no smoothing",
     offsetof(struct gcx_config, gravac_alpha), 0, 1, NULL},
    {"GRAVAC_SETTLE", GCX_CONFIG_ENUM, "window",
     "GraVAC: when saturation is checked after settling; window re-checks "
     "it at every window end with the latest throughputs, so a change of "
     "regime moves the compression factor again; once keeps the first "
     "settlement",
     offsetof(struct gcx_config, gravac_settle), 0, 0,
     gcx_gravac_settle_names},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_GRAVAC, "gravac", gcx_gravac_config_rows)
