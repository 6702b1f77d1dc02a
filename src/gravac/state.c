/*
 * state.c - save and restore a GraVAC controller (checkpoints).
 *
 * Idea: a controller is a plain struct of numbers (gravac_int.h), so its
 * checkpoint is those numbers in a fixed little-endian layout, versioned,
 * with the parameters it was created with. Restoring checks everything it
 * reads before it writes anything: a blob that is short, long, of another
 * version, holds values the controller could never reach (NaN, gains
 * outside [0, 1], thetas beyond theta_max, more CFs than the table) or was
 * saved under other parameters is refused and the controller is left as it
 * was. A restored controller takes the same decisions, bit for bit, as the
 * one that was saved. Cost: O(#CFs with a throughput), no allocation.
 *
 * Layout (all integers little-endian, doubles as their IEEE-754 bits):
 *   "GCXGRAVC" u32 version u32 n_tput
 *   params: f64 theta_min theta_max epsilon omega, u32 window policy,
 *           f64 scale ratio alpha, i32 nranks, u32 settle
 *   state:  u64 step, f64 theta_min theta_s, f64 delta_min u8 valid,
 *           f64 delta_c u8 valid, u8 settled f64 settled_cf,
 *           u8 pending f64 pending_cf pending_delta
 *   n_tput x (f64 cf, u8 has_value f64 value, f64 win_sum u64 win_count)
 * Version 2 (per-window throughputs, the settle parameter) replaced 1;
 * a version-1 blob is refused as another version.
 */
#include "gravac_int.h"

#include <math.h>
#include <string.h>

#define GCX_GRAVAC_STATE_MAGIC   "GCXGRAVC"
#define GCX_GRAVAC_STATE_VERSION 2u
/* bytes before the throughput table */
#define GCX_GRAVAC_STATE_FIXED                                                 \
    (8 + 4 + 4 + 4 * 8 + 4 + 4 + 3 * 8 + 4 + 4 + 8 + 2 * 8 + 8 + 1 + 8 + 1 + \
     1 + 8 + 1 + 2 * 8)
#define GCX_GRAVAC_STATE_TPUT 33 /* bytes per throughput entry */

/* A bounded cursor over the blob: a read or write past the end sets ok = 0
 * and does nothing (so the checks can come after the reads). */
typedef struct gcx_gravac_cursor {
    uint8_t *wr;
    const uint8_t *rd;
    size_t len, pos;
    int ok;
} gcx_gravac_cursor_t;

static void gcx_put_bytes(gcx_gravac_cursor_t *c, const void *p, size_t n)
{
    if (!c->ok || c->len - c->pos < n) {
        c->ok = 0;
        return;
    }
    memcpy(c->wr + c->pos, p, n);
    c->pos += n;
}

static void gcx_put_uint(gcx_gravac_cursor_t *c, uint64_t v, size_t n)
{
    uint8_t b[8];
    size_t  i;

    for (i = 0; i < n; ++i) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    gcx_put_bytes(c, b, n);
}

static void gcx_put_f64(gcx_gravac_cursor_t *c, double d)
{
    uint64_t v;

    memcpy(&v, &d, sizeof(v));
    gcx_put_uint(c, v, 8);
}

static uint64_t gcx_get_uint(gcx_gravac_cursor_t *c, size_t n)
{
    uint64_t v = 0;
    size_t   i;

    if (!c->ok || c->len - c->pos < n) {
        c->ok = 0;
        return 0;
    }
    for (i = 0; i < n; ++i) {
        v |= (uint64_t)c->rd[c->pos + i] << (8 * i);
    }
    c->pos += n;
    return v;
}

static double gcx_get_f64(gcx_gravac_cursor_t *c)
{
    uint64_t v = gcx_get_uint(c, 8);
    double   d;

    memcpy(&d, &v, sizeof(d));
    return d;
}

size_t gcx_gravac_save_size(const gcx_gravac_t *ctl)
{
    return ctl == NULL ? 0
                       : GCX_GRAVAC_STATE_FIXED +
                             ctl->n_tput * GCX_GRAVAC_STATE_TPUT;
}

static void gcx_gravac_put_params(gcx_gravac_cursor_t *c,
                                  const gcx_gravac_params_t *p)
{
    gcx_put_f64(c, p->theta_min);
    gcx_put_f64(c, p->theta_max);
    gcx_put_f64(c, p->epsilon);
    gcx_put_f64(c, p->omega);
    gcx_put_uint(c, p->window, 4);
    gcx_put_uint(c, (uint32_t)p->policy, 4);
    gcx_put_f64(c, p->scale);
    gcx_put_f64(c, p->ratio);
    gcx_put_f64(c, p->alpha);
    gcx_put_uint(c, (uint32_t)p->nranks, 4);
    gcx_put_uint(c, (uint32_t)p->settle, 4);
}

gcx_status_t gcx_gravac_save(const gcx_gravac_t *ctl, void *buf, size_t len,
                             size_t *written_p)
{
    gcx_gravac_cursor_t c = {buf, NULL, len, 0, 1};
    size_t              i;

    if (ctl == NULL || (buf == NULL && len > 0)) {
        return GCX_ERR_INVALID;
    }
    if (len < gcx_gravac_save_size(ctl)) {
        return GCX_ERR_RANGE; /* nothing written */
    }
    gcx_put_bytes(&c, GCX_GRAVAC_STATE_MAGIC, 8);
    gcx_put_uint(&c, GCX_GRAVAC_STATE_VERSION, 4);
    gcx_put_uint(&c, ctl->n_tput, 4);
    gcx_gravac_put_params(&c, &ctl->params);
    gcx_put_uint(&c, ctl->step, 8);
    gcx_put_f64(&c, ctl->theta_min);
    gcx_put_f64(&c, ctl->theta_s);
    gcx_put_f64(&c, ctl->delta_min.value);
    gcx_put_uint(&c, ctl->delta_min.valid != 0, 1);
    gcx_put_f64(&c, ctl->delta_c.value);
    gcx_put_uint(&c, ctl->delta_c.valid != 0, 1);
    gcx_put_uint(&c, ctl->settled != 0, 1);
    gcx_put_f64(&c, ctl->settled_cf);
    gcx_put_uint(&c, ctl->pending != 0, 1);
    gcx_put_f64(&c, ctl->pending_cf);
    gcx_put_f64(&c, ctl->pending_delta);
    for (i = 0; i < ctl->n_tput; ++i) {
        gcx_put_f64(&c, ctl->tput[i].cf);
        gcx_put_uint(&c, ctl->tput[i].has_value != 0, 1);
        gcx_put_f64(&c, ctl->tput[i].value);
        gcx_put_f64(&c, ctl->tput[i].win_sum);
        gcx_put_uint(&c, ctl->tput[i].win_count, 8);
    }
    if (written_p != NULL) {
        *written_p = c.pos;
    }
    return GCX_OK;
}

/* A parameter block equal to the controller's, value for value. */
static int gcx_gravac_same_params(gcx_gravac_cursor_t *c,
                                  const gcx_gravac_params_t *p)
{
    int same = 1;

    same &= gcx_get_f64(c) == p->theta_min;
    same &= gcx_get_f64(c) == p->theta_max;
    same &= gcx_get_f64(c) == p->epsilon;
    same &= gcx_get_f64(c) == p->omega;
    same &= gcx_get_uint(c, 4) == p->window;
    same &= gcx_get_uint(c, 4) == (uint32_t)p->policy;
    same &= gcx_get_f64(c) == p->scale;
    same &= gcx_get_f64(c) == p->ratio;
    same &= gcx_get_f64(c) == p->alpha;
    same &= gcx_get_uint(c, 4) == (uint32_t)p->nranks;
    same &= gcx_get_uint(c, 4) == (uint32_t)p->settle;
    return same;
}

static int gcx_gravac_tput_ok(double t)
{
    return t >= 0.0 && isfinite(t); /* NaN fails */
}

static int gcx_gravac_unit(double x)
{
    return x >= 0.0 && x <= 1.0; /* NaN fails */
}

/* A CF the controller can hold: finite, >= 1, at most theta_max (with the
 * rounding tolerance of gcx_gravac_cf_equal). */
static int gcx_gravac_cf_ok(double cf, double theta_max)
{
    return isfinite(cf) && cf >= 1.0 && cf <= theta_max * (1.0 + 1e-9);
}

gcx_status_t gcx_gravac_load(gcx_gravac_t *ctl, const void *buf, size_t len)
{
    gcx_gravac_cursor_t c = {NULL, buf, len, 0, 1};
    gcx_gravac_t        s; /* decoded into a copy; ctl changes at the end */
    uint64_t            version, n_tput;
    int                 same;
    size_t              i;
    double              tmax;

    if (ctl == NULL || (buf == NULL && len > 0)) {
        return GCX_ERR_INVALID;
    }
    if (len < GCX_GRAVAC_STATE_FIXED ||
        memcmp(buf, GCX_GRAVAC_STATE_MAGIC, 8) != 0) {
        return GCX_ERR_INVALID;
    }
    c.pos   = 8;
    version = gcx_get_uint(&c, 4);
    n_tput  = gcx_get_uint(&c, 4);
    if (version != GCX_GRAVAC_STATE_VERSION || n_tput > GCX_GRAVAC_MAX_CFS ||
        len != GCX_GRAVAC_STATE_FIXED + n_tput * GCX_GRAVAC_STATE_TPUT) {
        return GCX_ERR_INVALID;
    }
    s    = *ctl;
    same = gcx_gravac_same_params(&c, &ctl->params);
    tmax = ctl->params.theta_max;

    s.step            = gcx_get_uint(&c, 8);
    s.theta_min       = gcx_get_f64(&c);
    s.theta_s         = gcx_get_f64(&c);
    s.delta_min.value = gcx_get_f64(&c);
    s.delta_min.valid = (int)gcx_get_uint(&c, 1);
    s.delta_c.value   = gcx_get_f64(&c);
    s.delta_c.valid   = (int)gcx_get_uint(&c, 1);
    s.settled         = (int)gcx_get_uint(&c, 1);
    s.settled_cf      = gcx_get_f64(&c);
    s.pending         = (int)gcx_get_uint(&c, 1);
    s.pending_cf      = gcx_get_f64(&c);
    s.pending_delta   = gcx_get_f64(&c);
    s.n_tput          = (size_t)n_tput;
    for (i = 0; i < s.n_tput; ++i) {
        gcx_gravac_tput_t *e = &s.tput[i];

        e->cf        = gcx_get_f64(&c);
        e->has_value = (int)gcx_get_uint(&c, 1);
        e->value     = gcx_get_f64(&c);
        e->win_sum   = gcx_get_f64(&c);
        e->win_count = gcx_get_uint(&c, 8);
        /* an entry has a closed value, an open window, or both */
        if (!gcx_gravac_cf_ok(e->cf, tmax) || e->has_value > 1 ||
            !gcx_gravac_tput_ok(e->value) ||
            (!e->has_value && e->value != 0.0) ||
            !gcx_gravac_tput_ok(e->win_sum) ||
            (e->win_count == 0 && (e->win_sum != 0.0 || !e->has_value))) {
            return GCX_ERR_INVALID;
        }
    }
    if (!c.ok || c.pos != len) {
        return GCX_ERR_INVALID;
    }
    if (!gcx_gravac_cf_ok(s.theta_min, tmax) || !(s.theta_s >= 1.0) ||
        !gcx_gravac_cf_ok(s.theta_min * s.theta_s, tmax) ||
        s.delta_min.valid > 1 || s.delta_c.valid > 1 || s.settled > 1 ||
        s.pending > 1 || !gcx_gravac_unit(s.delta_min.value) ||
        !gcx_gravac_unit(s.delta_c.value) ||
        !gcx_gravac_unit(s.pending_delta) ||
        (s.settled ? !gcx_gravac_cf_ok(s.settled_cf, tmax)
                   : s.settled_cf != 0.0) ||
        /* pending_cf keeps the last send's CF after it was recorded */
        (s.pending || s.pending_cf != 0.0
             ? !gcx_gravac_cf_ok(s.pending_cf, tmax)
             : 0)) {
        return GCX_ERR_INVALID;
    }
    if (!same) {
        return GCX_ERR_MISMATCH; /* saved under other parameters */
    }
    *ctl = s;
    return GCX_OK;
}
