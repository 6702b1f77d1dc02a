/*
 * work.c - the step helper: two-level compression of an error-feedback
 * residual and the commit of the level the controller chose.
 *
 * g_min = C(e, theta_min) reads the n floats of e once (plus the
 * compressor's own passes); g_c = C(g_min, theta_s) reads only the nnz
 * entries of g_min. Both compressions return their squared norms from the
 * passes they make anyway, so the gains cost nothing extra. The two sparse
 * vectors are allocated once, at the capacity of the initial theta_min:
 * every CF the controller can choose later is at least that, so no step
 * allocates. Commit is gcx_feedback_commit() of the chosen level (O(nnz))
 * or gcx_feedback_commit_dense() (O(n)).
 */
#include "gravac_int.h"

#include <math.h>
#include <stdlib.h>

struct gcx_gravac_work {
    gcx_feedback_t   *fb;       /* borrowed */
    gcx_compressor_t *comp_min; /* borrowed */
    gcx_compressor_t *comp_c;   /* borrowed, may equal comp_min */
    gcx_sparse_vec_t  g_min;
    gcx_sparse_vec_t  g_c;
    int               compressed; /* a compress awaits its commit */
    int               has_c;      /* g_c was computed (theta_s > 1) */
    uint64_t          step;       /* controller step of that compress */
};

gcx_status_t gcx_gravac_work_create(const gcx_gravac_t *ctl,
                                    gcx_feedback_t *fb,
                                    gcx_compressor_t *comp_min,
                                    gcx_compressor_t *comp_c,
                                    gcx_gravac_work_t **work_p)
{
    gcx_gravac_work_t *work;
    size_t             n, capacity;
    gcx_status_t       status;

    if (ctl == NULL || fb == NULL || comp_min == NULL || comp_c == NULL ||
        work_p == NULL) {
        return GCX_ERR_INVALID;
    }
    n      = gcx_feedback_size(fb);
    status = gcx_compress_capacity(gcx_compressor_kind(comp_min), n,
                                   ctl->params.theta_min, &capacity);
    if (status != GCX_OK) {
        return status;
    }
    work = calloc(1, sizeof(*work));
    if (work == NULL) {
        return GCX_ERR_NOMEM;
    }
    status = gcx_sparse_vec_alloc(capacity, n, &work->g_min);
    if (status != GCX_OK) {
        goto err_free_work;
    }
    /* the second level reads at most capacity entries and returns at most
     * as many as it reads */
    status = gcx_sparse_vec_alloc(capacity, n, &work->g_c);
    if (status != GCX_OK) {
        goto err_free_min;
    }
    work->fb       = fb;
    work->comp_min = comp_min;
    work->comp_c   = comp_c;
    *work_p        = work;
    return GCX_OK;

err_free_min:
    gcx_sparse_vec_free(&work->g_min);
err_free_work:
    free(work);
    return status;
}

void gcx_gravac_work_destroy(gcx_gravac_work_t *work)
{
    if (work == NULL) {
        return;
    }
    gcx_sparse_vec_free(&work->g_c);
    gcx_sparse_vec_free(&work->g_min);
    free(work);
}

gcx_status_t gcx_gravac_compress(gcx_gravac_t *ctl, gcx_gravac_work_t *work,
                                 double samples_per_s,
                                 gcx_gravac_norms_t *norms_p)
{
    gcx_compress_stats_t st_min, st_c;
    gcx_gravac_norms_t   norms;
    gcx_status_t         status;
    int                  has_c;

    if (ctl == NULL || work == NULL || norms_p == NULL ||
        !(samples_per_s >= 0.0) || !isfinite(samples_per_s)) {
        return GCX_ERR_INVALID;
    }
    /* a compress that fails leaves nothing to commit */
    work->compressed = 0;
    gcx_compressor_set_step(work->comp_min, ctl->step);
    gcx_compressor_set_step(work->comp_c, ctl->step);
    status = gcx_compress_dense(work->comp_min,
                                gcx_feedback_residual(work->fb),
                                gcx_feedback_size(work->fb), ctl->theta_min,
                                &work->g_min, &st_min);
    if (status != GCX_OK) {
        return status;
    }
    has_c = ctl->theta_s > 1.0;
    if (has_c) {
        status = gcx_compress_sparse(work->comp_c, &work->g_min, ctl->theta_s,
                                     &work->g_c, &st_c);
        if (status != GCX_OK) {
            return status;
        }
    } else {
        st_c = st_min; /* no second level: g_c is g_min */
    }
    norms.ef_sqnorm     = st_min.in_sqnorm;
    norms.min_sqnorm    = st_min.out_sqnorm;
    norms.c_sqnorm      = st_c.out_sqnorm;
    norms.samples_per_s = samples_per_s;
    work->has_c         = has_c;
    work->step          = ctl->step;
    work->compressed    = 1;
    *norms_p            = norms;
    return GCX_OK;
}

const gcx_sparse_vec_t *gcx_gravac_selected(const gcx_gravac_work_t *work,
                                            const gcx_gravac_record_t *rec)
{
    if (work == NULL || rec == NULL) {
        return NULL;
    }
    switch (rec->level) {
    case GCX_GRAVAC_LEVEL_C:
        return work->has_c ? &work->g_c : &work->g_min;
    case GCX_GRAVAC_LEVEL_MIN:
        return &work->g_min;
    case GCX_GRAVAC_LEVEL_DENSE:
        break;
    }
    return NULL;
}

gcx_status_t gcx_gravac_commit(gcx_gravac_work_t *work,
                               const gcx_gravac_record_t *rec)
{
    const gcx_sparse_vec_t *sent;
    gcx_status_t        status;

    if (work == NULL || rec == NULL || !work->compressed ||
        rec->step != work->step) {
        return GCX_ERR_INVALID;
    }
    sent = gcx_gravac_selected(work, rec);
    if (sent == NULL) {
        if (rec->level != GCX_GRAVAC_LEVEL_DENSE) {
            return GCX_ERR_INVALID;
        }
        gcx_feedback_commit_dense(work->fb);
    } else {
        status = gcx_feedback_commit(work->fb, sent);
        if (status != GCX_OK) {
            return status;
        }
    }
    work->compressed = 0;
    return GCX_OK;
}
