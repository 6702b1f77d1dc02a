/*
 * feedback.c - error feedback in place, with DGC's momentum correction and
 * momentum-factor masking.
 *
 *   plain:     e += g;               s = C(e); e -= s
 *   momentum:  u = m u + g; e += u;  s = C(e); e -= s; (masking) u[s] = 0
 *
 * Idea: the compressed vector is never materialized densely. Compressors
 * copy values of e, so "e -= s" is a scatter over the nnz sent entries that
 * leaves exact zeros: e_after + s == e_before bit for bit.
 * Failure atomicity: a NaN/Inf gradient (or a sum that would overflow) must
 * leave e and u as they were, so that a step can be skipped, as frameworks
 * do with dynamic loss scaling. Hence accumulate first reads g alone (its
 * largest magnitude, NaN/Inf check), then updates. Whether e + g can
 * overflow is decided from upper bounds of max|e| and max|u| that the state
 * keeps (a commit never raises them; an accumulate raises them by at most
 * max|g|); only when a bound is unknown (caller's buffers, after
 * gcx_feedback_touch()) or near FLT_MAX does an extra read-only pass run.
 * Cost per accumulate: read g, then read g and e (and u), write e (and u).
 * Commit: O(nnz).
 */
#include "compress_int.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

struct gcx_feedback {
    size_t n;
    float *e;       /* residual (error memory), n floats */
    float *u;       /* velocity, n floats, or NULL without momentum */
    int own_e;      /* the library allocated e */
    int own_u;      /* the library allocated u */
    float momentum; /* DGC momentum factor m, 0 = plain */
    int mask;       /* momentum-factor masking */
    double bound_e; /* upper bound of max|e|, INFINITY = unknown */
    double bound_u; /* upper bound of max|u|, INFINITY = unknown */
};

/* Rounding slack for bounds: each float operation may round up by 2^-24. */
static inline double fb_up(double x)
{
    return x * (1.0 + 0x1p-20);
}

static uint32_t fb_maxkey(const float *v, size_t n)
{
    int32_t mk = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        int32_t key = (int32_t)gcx_compress_key(v[i]);
        mk = key > mk ? key : mk;
    }
    return (uint32_t)mk;
}

static double fb_key_value(uint32_t key)
{
    float f;

    memcpy(&f, &key, sizeof(f));
    return f;
}

gcx_status_t gcx_feedback_create(size_t n, const gcx_feedback_params_t *params,
                                 gcx_feedback_t **fb_p)
{
    gcx_feedback_params_t defaults;
    gcx_feedback_t *fb;

    memset(&defaults, 0, sizeof(defaults));
    if (params == NULL) {
        params = &defaults;
    }
    if (fb_p == NULL || !(params->momentum >= 0.0f) ||
        !(params->momentum < 1.0f)) {
        return GCX_ERR_INVALID;
    }
    if (n > GCX_COMPRESS_MAX_LEN) {
        return GCX_ERR_RANGE;
    }
    fb = calloc(1, sizeof(*fb));
    if (fb == NULL) {
        goto err;
    }
    fb->n = n;
    fb->momentum = params->momentum;
    fb->mask = params->mask_momentum != 0;
    if (params->residual != NULL) {
        fb->e = params->residual;
        fb->bound_e = INFINITY;
    } else {
        fb->e = calloc(n > 0 ? n : 1, sizeof(float));
        if (fb->e == NULL) {
            goto err_free_fb;
        }
        fb->own_e = 1;
    }
    if (params->momentum > 0.0f) {
        if (params->velocity != NULL) {
            fb->u = params->velocity;
            fb->bound_u = INFINITY;
        } else {
            fb->u = calloc(n > 0 ? n : 1, sizeof(float));
            if (fb->u == NULL) {
                goto err_free_e;
            }
            fb->own_u = 1;
        }
    }
    *fb_p = fb;
    return GCX_OK;

err_free_e:
    if (fb->own_e) {
        free(fb->e);
    }
err_free_fb:
    free(fb);
err:
    return GCX_ERR_NOMEM;
}

void gcx_feedback_destroy(gcx_feedback_t *fb)
{
    if (fb == NULL) {
        return;
    }
    if (fb->own_u) {
        free(fb->u);
    }
    if (fb->own_e) {
        free(fb->e);
    }
    free(fb);
}

float *gcx_feedback_residual(gcx_feedback_t *fb)
{
    return fb->e;
}

float *gcx_feedback_velocity(gcx_feedback_t *fb)
{
    return fb->u;
}

size_t gcx_feedback_size(const gcx_feedback_t *fb)
{
    return fb->n;
}

void gcx_feedback_reset(gcx_feedback_t *fb)
{
    if (fb->n > 0) {
        memset(fb->e, 0, fb->n * sizeof(float));
        if (fb->u != NULL) {
            memset(fb->u, 0, fb->n * sizeof(float));
        }
    }
    fb->bound_e = 0;
    fb->bound_u = 0;
}

void gcx_feedback_touch(gcx_feedback_t *fb)
{
    fb->bound_e = INFINITY;
    fb->bound_u = fb->u != NULL ? INFINITY : 0;
}

/* Read-only pass: are all updated values finite? Sets the exact maxima of
 * the updated e and u. Same arithmetic as fb_update. */
static int fb_dry_run(const gcx_feedback_t *fb, const float *g, double *max_e_p,
                      double *max_u_p)
{
    const float m = fb->momentum;
    uint32_t mk_e = 0, mk_u = 0;
    size_t i;

    for (i = 0; i < fb->n; i++) {
        float du = fb->u != NULL ? m * fb->u[i] + g[i] : g[i];
        float ne = fb->e[i] + du;
        uint32_t ke = gcx_compress_key(ne), ku = gcx_compress_key(du);
        mk_e = ke > mk_e ? ke : mk_e;
        mk_u = ku > mk_u ? ku : mk_u;
    }
    if (mk_e >= 0x7f800000u || mk_u >= 0x7f800000u) {
        return 0;
    }
    *max_e_p = fb_key_value(mk_e);
    *max_u_p = fb->u != NULL ? fb_key_value(mk_u) : 0;
    return 1;
}

static void fb_update(gcx_feedback_t *fb, const float *g)
{
    const float m = fb->momentum;
    float *e = fb->e, *u = fb->u;
    size_t i;

    if (u != NULL) {
        for (i = 0; i < fb->n; i++) {
            float du = m * u[i] + g[i];
            u[i] = du;
            e[i] += du;
        }
    } else {
        for (i = 0; i < fb->n; i++) {
            e[i] += g[i];
        }
    }
}

gcx_status_t gcx_feedback_accumulate(gcx_feedback_t *fb, const float *g)
{
    double gmax, be, bu, max_e, max_u;
    uint32_t gkey;

    if (fb == NULL || (g == NULL && fb->n > 0)) {
        return GCX_ERR_INVALID;
    }
    gkey = fb_maxkey(g, fb->n);
    if (gkey >= 0x7f800000u) {
        return GCX_ERR_RANGE; /* NaN or Inf in g */
    }
    gmax = fb_key_value(gkey);
    bu = fb->u != NULL ? fb_up(fb_up(fb->momentum * fb->bound_u) + gmax) : gmax;
    be = fb_up(fb->bound_e + bu);
    if (be < FLT_MAX && bu < FLT_MAX) {
        fb_update(fb, g);
        fb->bound_e = be;
        fb->bound_u = fb->u != NULL ? bu : 0;
        return GCX_OK;
    }
    /* Unknown bounds or values near FLT_MAX: check exactly first. */
    if (!fb_dry_run(fb, g, &max_e, &max_u)) {
        return GCX_ERR_RANGE;
    }
    fb_update(fb, g);
    fb->bound_e = fb_up(max_e);
    fb->bound_u = fb_up(max_u);
    return GCX_OK;
}

gcx_status_t gcx_feedback_commit(gcx_feedback_t *fb,
                                 const gcx_sparse_vec_t *sent)
{
    uint32_t mk = 0;
    size_t j;

    if (fb == NULL || gcx_sparse_vec_check(sent) != GCX_OK ||
        sent->dense_len != fb->n) {
        return GCX_ERR_INVALID;
    }
    /* Check first, write after: a non-finite result leaves e unchanged.
     * Normally every new value is exactly 0 (s holds copies of e). */
    for (j = 0; j < sent->nnz; j++) {
        uint32_t key = gcx_compress_key(fb->e[sent->idx[j]] - sent->val[j]);
        mk = key > mk ? key : mk;
    }
    if (mk >= 0x7f800000u) {
        return GCX_ERR_RANGE;
    }
    for (j = 0; j < sent->nnz; j++) {
        fb->e[sent->idx[j]] -= sent->val[j];
    }
    if (fb->mask && fb->u != NULL) {
        for (j = 0; j < sent->nnz; j++) {
            fb->u[sent->idx[j]] = 0;
        }
    }
    if (fb_key_value(mk) > fb->bound_e) {
        fb->bound_e = fb_up(fb_key_value(mk));
    }
    return GCX_OK;
}

void gcx_feedback_commit_dense(gcx_feedback_t *fb)
{
    if (fb->n > 0) {
        memset(fb->e, 0, fb->n * sizeof(float));
        if (fb->mask && fb->u != NULL) {
            memset(fb->u, 0, fb->n * sizeof(float));
        }
    }
    fb->bound_e = 0;
    if (fb->mask) {
        fb->bound_u = 0;
    }
}

gcx_status_t gcx_feedback_step(gcx_feedback_t *fb, gcx_compressor_t *comp,
                               const float *g, double cf, gcx_sparse_vec_t *out,
                               gcx_compress_stats_t *stats_p)
{
    gcx_status_t status;
    size_t cap;

    if (fb == NULL || comp == NULL || out == NULL) {
        return GCX_ERR_INVALID;
    }
    status = gcx_compress_capacity(comp->kind, fb->n, cf, &cap);
    if (status != GCX_OK) {
        return status;
    }
    if (out->capacity < cap) {
        return GCX_ERR_RANGE;
    }
    if (cap > 0 && (out->idx == NULL || out->val == NULL)) {
        return GCX_ERR_INVALID;
    }
    status = gcx_feedback_accumulate(fb, g);
    if (status != GCX_OK) {
        return status;
    }
    status = gcx_compress_dense(comp, fb->e, fb->n, cf, out, stats_p);
    if (status != GCX_OK) {
        return status;
    }
    return gcx_feedback_commit(fb, out);
}
