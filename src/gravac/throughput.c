/*
 * throughput.c - the compression throughput table T[cf] and saturation.
 *
 * T[cf] = T_system * delta (samples/s of the step times the smoothed gain
 * of what was sent) is kept as the mean over every step that sent cf, in a
 * fixed table of GCX_GRAVAC_MAX_CFS entries (no allocation). Saturation:
 * the two best means within omega of the best -> the lower CF of the two.
 * Ties rank the lower CF first, so the result depends on the numbers only.
 * Adding is O(#CFs), the check is O(#CFs).
 */
#include "gravac_int.h"

int gcx_gravac_tput_find(const struct gcx_gravac *ctl, double cf)
{
    size_t i;

    for (i = 0; i < ctl->n_tput; ++i) {
        if (gcx_gravac_cf_equal(ctl->tput[i].cf, cf)) {
            return (int)i;
        }
    }
    return -1;
}

void gcx_gravac_tput_add(struct gcx_gravac *ctl, double cf, double t)
{
    int i = gcx_gravac_tput_find(ctl, cf);

    if (i < 0) {
        if (ctl->n_tput == GCX_GRAVAC_MAX_CFS) {
            return; /* documented: CFs beyond a full table are not kept */
        }
        i                 = (int)ctl->n_tput++;
        ctl->tput[i].cf    = cf;
        ctl->tput[i].sum   = 0.0;
        ctl->tput[i].count = 0;
    }
    ctl->tput[i].sum += t;
    ctl->tput[i].count++;
}

static double gcx_gravac_tput_mean(const gcx_gravac_tput_t *e)
{
    return e->sum / (double)e->count;
}

/* Is a better than b: higher mean, or equal mean and lower CF. */
static int gcx_gravac_tput_better(const gcx_gravac_tput_t *a,
                                  const gcx_gravac_tput_t *b)
{
    double ta = gcx_gravac_tput_mean(a), tb = gcx_gravac_tput_mean(b);

    return ta > tb || (ta == tb && a->cf < b->cf);
}

int gcx_gravac_tput_saturated(const struct gcx_gravac *ctl, double omega,
                              double *cf_p)
{
    const gcx_gravac_tput_t *best = NULL, *second = NULL;
    size_t                   i;

    for (i = 0; i < ctl->n_tput; ++i) {
        const gcx_gravac_tput_t *e = &ctl->tput[i];

        if (best == NULL || gcx_gravac_tput_better(e, best)) {
            second = best;
            best   = e;
        } else if (second == NULL || gcx_gravac_tput_better(e, second)) {
            second = e;
        }
    }
    if (second == NULL) {
        return 0;
    }
    if (gcx_gravac_tput_mean(best) - gcx_gravac_tput_mean(second) >
        omega * gcx_gravac_tput_mean(best)) {
        return 0;
    }
    *cf_p = best->cf < second->cf ? best->cf : second->cf;
    return 1;
}
