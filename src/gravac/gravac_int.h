/*
 * gravac_int.h - internals of the GraVAC controller shared by the files of
 * src/gravac and by white-box tests.
 *
 * The controller is a plain struct of numbers: parameters, the thetas of
 * the next step, the smoothed gains of the current candidates, the pending
 * send whose throughput arrives one step late, and a fixed table of
 * compression throughputs per CF (each the mean of its latest window). Nothing here allocates after creation.
 */
#ifndef GCX_GRAVAC_INT_H
#define GCX_GRAVAC_INT_H

#include "base/config.h"

#include <gcx/gravac.h>

/* The policies' one table of names (policy.c), indexed by
 * gcx_gravac_policy_t, ending with a NULL name: the GCX_GRAVAC_POLICY row's
 * accepted values, gcx_gravac_policy_name() and reading the row back. */
extern const gcx_config_value_t gcx_gravac_policy_names[];
/* The same for gcx_gravac_settle_t: the GCX_GRAVAC_SETTLE row's values. */
extern const gcx_config_value_t gcx_gravac_settle_names[];

/* CFs that can get a throughput entry: the candidates of every theta_min
 * the controller can reach. 128 covers theta_max / theta_min up to 2^64
 * with ratio 2; a CF beyond a full table is not recorded. */
#define GCX_GRAVAC_MAX_CFS 128

/* One smoothed gain: an EWMA seeded by its first sample. */
typedef struct gcx_gravac_ewma {
    double value;
    int    valid; /* 0 until the first sample */
} gcx_gravac_ewma_t;

/* Throughput of one CF: the mean of its latest closed window that sent
 * it (value, once has_value) and the open window's running sum. */
typedef struct gcx_gravac_tput {
    double   cf;
    double   value;
    int      has_value;
    double   win_sum;
    uint64_t win_count;
} gcx_gravac_tput_t;

struct gcx_gravac {
    gcx_gravac_params_t params;
    double              alpha;     /* resolved EWMA weight, in (0, 1] */
    uint64_t            step;      /* decisions taken */
    double              theta_min; /* of the next step */
    double              theta_s;   /* of the next step */
    gcx_gravac_ewma_t   delta_min;
    gcx_gravac_ewma_t   delta_c;
    int                 settled;
    double              settled_cf;
    /* The previous step's send, whose T is recorded when the summed
     * samples/s of that step arrives with the next decision. */
    int                 pending;
    double              pending_cf;
    double              pending_delta;
    gcx_gravac_tput_t   tput[GCX_GRAVAC_MAX_CFS];
    size_t              n_tput;
};

/* policy.c */
double gcx_gravac_policy_next(const gcx_gravac_params_t *params,
                              double theta_s);
double gcx_gravac_cap(double theta_min, double theta_s, double theta_max);
double gcx_gravac_cf_of(double theta_min, double theta_s, double theta_max);

/* throughput.c */
void gcx_gravac_tput_add(struct gcx_gravac *ctl, double cf, double t);
int gcx_gravac_tput_find(const struct gcx_gravac *ctl, double cf);
double gcx_gravac_tput_of(const gcx_gravac_tput_t *e);
void gcx_gravac_tput_close_window(struct gcx_gravac *ctl);
int gcx_gravac_tput_saturated(const struct gcx_gravac *ctl, double omega,
                              double *cf_p);

/* Two CFs are the same candidate when they agree to 1e-9 relative. */
int gcx_gravac_cf_equal(double a, double b);

#endif
