/*
 * throughput.c - the compression throughput table T[cf] and saturation.
 *
 * T[cf] = T_system * delta (samples/s of the step times the smoothed gain
 * of what was sent; delta = 1 for a dense step, CF 1) is accumulated per CF
 * over the open window; when a window closes, each CF sent in it takes the
 * mean of that window as its value, so T[cf] is the mean of the latest
 * window that sent cf (gravac.h says why a window, not one step). The
 * table is fixed, GCX_GRAVAC_MAX_CFS entries (no allocation).
 * Saturation (Tyagi & Swany, Algorithm 1, line 37): the two best values
 * T1 >= T2 with |T1 - T2| / T2 <= omega -> the lower CF of the two. Ties
 * rank the lower CF first, so the result depends on the numbers only.
 * Adding, closing a window and the check are O(#CFs).
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
    gcx_gravac_tput_t *e;
    int                i = gcx_gravac_tput_find(ctl, cf);

    if (i < 0) {
        if (ctl->n_tput == GCX_GRAVAC_MAX_CFS) {
            return; /* documented: CFs beyond a full table are not kept */
        }
        i = (int)ctl->n_tput++;
        ctl->tput[i] = (gcx_gravac_tput_t){.cf = cf};
    }
    e = &ctl->tput[i];
    e->win_sum += t;
    e->win_count++;
}

/* The value the check compares: the latest closed window's mean, else the
 * open window's (an entry always has one or the other). */
double gcx_gravac_tput_of(const gcx_gravac_tput_t *e)
{
    return e->has_value ? e->value : e->win_sum / (double)e->win_count;
}

void gcx_gravac_tput_close_window(struct gcx_gravac *ctl)
{
    size_t i;

    for (i = 0; i < ctl->n_tput; ++i) {
        gcx_gravac_tput_t *e = &ctl->tput[i];

        if (e->win_count > 0) {
            e->value     = e->win_sum / (double)e->win_count;
            e->has_value = 1;
            e->win_sum   = 0.0;
            e->win_count = 0;
        }
    }
}

/* Is a better than b: higher T, or equal T and lower CF. */
static int gcx_gravac_tput_better(const gcx_gravac_tput_t *a,
                                  const gcx_gravac_tput_t *b)
{
    double ta = gcx_gravac_tput_of(a), tb = gcx_gravac_tput_of(b);

    return ta > tb || (ta == tb && a->cf < b->cf);
}

int gcx_gravac_tput_saturated(const struct gcx_gravac *ctl, double omega,
                              double *cf_p)
{
    const gcx_gravac_tput_t *best = NULL, *second = NULL;
    double                   t1, t2;
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
    t1 = gcx_gravac_tput_of(best);
    t2 = gcx_gravac_tput_of(second);
    /* |T1 - T2| / T2 <= omega, written without dividing: T2 = 0 saturates
     * only when T1 = 0 too */
    if (t1 - t2 > omega * t2) {
        return 0;
    }
    *cf_p = best->cf < second->cf ? best->cf : second->cf;
    return 1;
}
