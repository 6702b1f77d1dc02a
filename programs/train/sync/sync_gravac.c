/*
 * sync_gravac.c - GraVAC: adaptive compression (src/gravac) over gcx's
 * sparse allreduce.
 *
 * Per step: residual += g; the controller's step helper compresses twice
 * (g_min = C(g_ef, theta_min), g_c = C(g_min, theta_s)); one allreduce of
 * four doubles sums the norms and the throughput so every rank takes the
 * same decision; the chosen level (g_c, g_min or the dense residual) is
 * averaged across ranks and committed to the residual. Cost per step: the
 * two compressions (the second on the sparse g_min only), a 32-byte
 * allreduce, and the exchange of the chosen level.
 *
 * The throughput the controller compares is steps per second of the
 * previous step (samples/s up to the constant global batch), measured here
 * between exchanges; or, with model_gbit=G, that of a modeled step,
 * model_compute_ms + B / G Gbit/s with B the bytes of an allgather of the
 * sent level ((P-1) * nnz * 8) or of a dense ring allreduce: the same on
 * every run (the bytes the sparse allreduce really sent depend on the
 * algorithm its timing-driven auto picked), so that runs, and a run resumed
 * from a checkpoint against one that never stopped, decide alike.
 * Options: compressor=topk|dgc|redsync|randomk (default topk), the
 * controller's theta_min, theta_max, eps, window overriding GCX_GRAVAC_*,
 * and model_gbit (0: measure, the default), model_compute_ms (default 10).
 * Checkpoints hold the controller (gcx_gravac_save), the residual and the
 * previous step's throughput.
 */
#include "sync/sync.h"
#include "util.h"

#include <gcx/compress.h>
#include <gcx/gravac.h>
#include <stdlib.h>
#include <string.h>

#define SYNC_GRAVAC_SEED 0x67726176u

typedef struct sync_gravac {
    gcx_gravac_t      *ctl;
    gcx_gravac_work_t *work;
    gcx_feedback_t    *fb;
    gcx_compressor_t  *comp;
    double             last_time; /* end of the previous exchange */
    double             steps_per_s;
    double             model_gbit;       /* 0: measured throughput */
    double             model_compute_s;
} sync_gravac_t;

static void gravac_fini(train_sync_t *sync)
{
    sync_gravac_t *sg = sync->priv;

    if (sg != NULL) {
        gcx_gravac_work_destroy(sg->work);
        gcx_gravac_destroy(sg->ctl);
        gcx_feedback_destroy(sg->fb);
        gcx_compressor_destroy(sg->comp);
        free(sg);
    }
    sync->priv = NULL;
}

/* Controller parameters: defaults, GCX_GRAVAC_*, then the mode's options. */
static gcx_status_t gravac_params(train_sync_t *sync, sync_gravac_t *sg,
                                  train_kv_t *args, gcx_gravac_params_t *p)
{
    gcx_config_t *own = NULL;
    gcx_status_t  status;
    double        window;

    gcx_gravac_params_default(p);
    if (sync->comm->comm != NULL) {
        status = gcx_gravac_params_from_config(gcx_comm_config(sync->comm->comm),
                                               p);
    } else {
        status = gcx_config_read(&own);
        if (status == GCX_OK) {
            status = gcx_gravac_params_from_config(own, p);
            gcx_config_release(own);
        }
    }
    p->nranks = sync->comm->size;
    if (status == GCX_OK) {
        status = train_kv_double(args, "gravac", "model_gbit", 0, 0, 1e6,
                                 &sg->model_gbit);
    }
    if (status == GCX_OK) {
        status = train_kv_double(args, "gravac", "model_compute_ms", 10, 0,
                                 1e6, &sg->model_compute_s);
        sg->model_compute_s /= 1e3;
    }
    if (status == GCX_OK) {
        status = train_kv_double(args, "gravac", "theta_min", p->theta_min, 1,
                                 1e6, &p->theta_min);
    }
    if (status == GCX_OK) {
        status = train_kv_double(args, "gravac", "theta_max", p->theta_max, 1,
                                 1e6, &p->theta_max);
    }
    if (status == GCX_OK) {
        status = train_kv_double(args, "gravac", "eps", p->epsilon, 0, 1,
                                 &p->epsilon);
    }
    if (status == GCX_OK) {
        status = train_kv_double(args, "gravac", "window", p->window, 1, 1e9,
                                 &window);
        p->window = (int)window;
    }
    return status == GCX_OK ? gcx_gravac_params_check(p) : status;
}

static gcx_status_t gravac_init(train_sync_t *sync, train_kv_t *args)
{
    gcx_gravac_params_t params;
    gcx_compress_kind_t kind;
    sync_gravac_t      *sg;
    gcx_status_t        status;

    sg = calloc(1, sizeof(*sg));
    if (sg == NULL) {
        return GCX_ERR_NOMEM;
    }
    sync->priv = sg;
    status = gcx_compress_kind_parse(train_kv_str(args, "compressor", "topk"),
                                     &kind);
    if (status != GCX_OK || kind == GCX_COMPRESS_NONE) {
        train_error("sync gravac: compressor must be topk, dgc, redsync or "
                    "randomk");
        status = GCX_ERR_INVALID;
    }
    if (status == GCX_OK) {
        status = gravac_params(sync, sg, args, &params);
    }
    if (status == GCX_OK) {
        status = gcx_gravac_create(&params, &sg->ctl);
    }
    if (status == GCX_OK) {
        status = gcx_compressor_create(kind, SYNC_GRAVAC_SEED, &sg->comp);
    }
    if (status == GCX_OK) {
        status = gcx_feedback_create(sync->n, NULL, &sg->fb);
    }
    if (status == GCX_OK) {
        status = gcx_gravac_work_create(sg->ctl, sg->fb, sg->comp, sg->comp,
                                        &sg->work);
    }
    if (status != GCX_OK) {
        train_error("sync gravac: setup failed: %s", gcx_strerror(status));
        gravac_fini(sync);
    }
    return status;
}

static gcx_status_t gravac_exchange(train_sync_t *sync, float *grad,
                                    const train_grad_src_t *src,
                                    train_sync_stats_t *stats)
{
    sync_gravac_t      *sg = sync->priv;
    gcx_gravac_norms_t  norms;
    gcx_gravac_record_t rec;
    const gcx_sparse_vec_t *sel;
    gcx_status_t        status;
    double              bytes, model_bytes, now;

    (void)src;
    gcx_compressor_set_step(sg->comp, (uint64_t)sync->step);
    status = gcx_feedback_accumulate(sg->fb, grad);
    if (status == GCX_OK) {
        status = gcx_gravac_compress(sg->ctl, sg->work, sg->steps_per_s, &norms);
    }
    if (status == GCX_OK && sync->comm->comm != NULL) {
        status = gcx_gravac_allreduce_norms(sync->comm->comm, &norms);
    }
    if (status == GCX_OK) {
        status = gcx_gravac_decide(sg->ctl, &norms, &rec);
    }
    if (status != GCX_OK) {
        train_error("sync gravac: step %ld failed: %s", sync->step,
                    gcx_strerror(status));
        return status;
    }
    sel = gcx_gravac_selected(sg->work, &rec);
    if (sel == NULL) {
        memcpy(grad, gcx_feedback_residual(sg->fb), sync->n * sizeof(float));
        status = train_comm_allreduce(sync->comm, grad, sync->n, GCX_DT_F32,
                                      GCX_OP_AVG);
        bytes = train_sync_ring_bytes(sync->n, sync->comm->size);
        model_bytes = bytes;
    } else {
        status = train_comm_sparse_average(sync->comm, sel, grad, &bytes);
        model_bytes = (double)(sync->comm->size - 1) * (double)sel->nnz * 8.0;
    }
    if (status == GCX_OK) {
        status = gcx_gravac_commit(sg->work, &rec);
    }
    if (status != GCX_OK) {
        return status;
    }
    now = train_now();
    if (sg->model_gbit > 0) {
        sg->steps_per_s =
            1.0 / (sg->model_compute_s +
                   model_bytes * 8.0 / (sg->model_gbit * 1e9));
    } else {
        sg->steps_per_s =
            sg->last_time > 0 ? 1.0 / (now - sg->last_time) : 0;
    }
    sg->last_time = now;
    stats->bytes_sent  = bytes;
    stats->dense_bytes = train_sync_ring_bytes(sync->n, sync->comm->size);
    stats->cf          = rec.cf;
    stats->gain = rec.level == GCX_GRAVAC_LEVEL_C   ? rec.delta_c :
                  rec.level == GCX_GRAVAC_LEVEL_MIN ? rec.delta_min : 1.0;
    return GCX_OK;
}

static gcx_status_t gravac_save(train_sync_t *sync, train_blob_t *out)
{
    sync_gravac_t *sg  = sync->priv;
    size_t         len = gcx_gravac_save_size(sg->ctl);
    uint8_t       *ctl = malloc(len);
    gcx_status_t   status;

    if (ctl == NULL) {
        return GCX_ERR_NOMEM;
    }
    status = gcx_gravac_save(sg->ctl, ctl, len, NULL);
    if (status == GCX_OK) {
        train_blob_put_u64(out, len);
        train_blob_put(out, ctl, len);
        train_sync_put_feedback(out, sg->fb);
        train_blob_put_f64(out, sg->steps_per_s);
    }
    free(ctl);
    return status;
}

static gcx_status_t gravac_load(train_sync_t *sync, train_blob_t *in)
{
    sync_gravac_t *sg  = sync->priv;
    uint64_t       len = train_blob_get_u64(in);
    gcx_status_t   status;

    if (!in->ok || len > in->len - in->pos) {
        train_error("--resume: sync gravac: the checkpoint is cut short");
        return GCX_ERR_INVALID;
    }
    status = gcx_gravac_load(sg->ctl, in->data + in->pos, (size_t)len);
    if (status != GCX_OK) {
        train_error("--resume: sync gravac: the controller's state %s: %s",
                    status == GCX_ERR_MISMATCH
                        ? "was saved under other GraVAC parameters"
                        : "is not one this version can restore",
                    gcx_strerror(status));
        return status;
    }
    in->pos += (size_t)len;
    status = train_sync_get_feedback(in, sg->fb, "gravac");
    sg->steps_per_s = train_blob_get_f64(in);
    return status == GCX_OK && !in->ok ? GCX_ERR_INVALID : status;
}

const train_sync_ops_t train_sync_gravac = {
    .name     = "gravac",
    .help     = "GraVAC adaptive CF + error feedback, sparse allreduce; "
                "compressor=topk|dgc|redsync|randomk, theta_min, theta_max, "
                "eps, window (defaults: GCX_GRAVAC_*); model_gbit, "
                "model_compute_ms: a modeled throughput instead of the "
                "measured one",
    .flags    = 0,
    .init     = gravac_init,
    .exchange = gravac_exchange,
    .fini     = gravac_fini,
    .save     = gravac_save,
    .load     = gravac_load,
};
