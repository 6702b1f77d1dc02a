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
 * controller's theta_min, theta_max, eps, window, omega, policy overriding
 * GCX_GRAVAC_*,
 * and model_gbit (0: measure, the default), model_compute_ms (default 10).
 * Checkpoints hold the controller (gcx_gravac_save), the residual and the
 * previous step's throughput.
 *
 * With explain=1 (the default) rank 0 prints at every window end why the
 * controller chose what it chose: the steps the window sent at each CF and
 * the gains against epsilon, the throughput of every CF sent so far and
 * whether the two best are within omega (saturation), whether the gains
 * agree (raise), and the thetas of the next window. Cost: one line of a few
 * hundred characters per window, O(CFs seen).
 */
#include "sync/sync.h"
#include "util.h"

#include <gcx/compress.h>
#include <gcx/gravac.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SYNC_GRAVAC_SEED 0x67726176u
#define SYNC_GRAVAC_CFS  32 /* CFs the explanation lists */

typedef struct sync_gravac {
    gcx_gravac_t      *ctl;
    gcx_gravac_work_t *work;
    gcx_feedback_t    *fb;
    gcx_compressor_t  *comp;
    double             last_time; /* end of the previous exchange */
    double             steps_per_s;
    double             model_gbit;       /* 0: measured throughput */
    double             model_compute_s;
    /* explain=1: what the window did, per CF seen (rank 0 prints) */
    int                explain;
    gcx_gravac_params_t params;
    double             cfs[SYNC_GRAVAC_CFS];
    long               sent_in_window[SYNC_GRAVAC_CFS];
    int                ncfs;
    long               window_first; /* step the window began at */
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
    if (status == GCX_OK) {
        status = train_kv_double(args, "gravac", "omega", p->omega, 0, 0.999,
                                 &p->omega);
    }
    if (status == GCX_OK) {
        /* the names are the library's (gcx_gravac_policy_name) */
        const gcx_gravac_policy_t known[] = {GCX_GRAVAC_POLICY_EXPONENTIAL,
                                             GCX_GRAVAC_POLICY_GEOMETRIC};
        const char *policy = train_kv_str(args, "policy", NULL);
        size_t      i      = 0;

        while (policy != NULL && i < sizeof(known) / sizeof(known[0]) &&
               strcmp(policy, gcx_gravac_policy_name(known[i])) != 0) {
            ++i;
        }
        if (policy != NULL && i < sizeof(known) / sizeof(known[0])) {
            p->policy = known[i];
        } else if (policy != NULL) {
            train_error("sync gravac: policy=%s: expected %s or %s", policy,
                        gcx_gravac_policy_name(known[0]),
                        gcx_gravac_policy_name(known[1]));
            status = GCX_ERR_INVALID;
        }
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
        long explain;

        status = train_kv_long(args, "gravac", "explain", 1, 0, 1, &explain);
        sg->explain = (int)explain && sync->comm->rank == 0;
        sg->params  = params;
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

/* Count a step's send under its CF (explain). */
static void gravac_count(sync_gravac_t *sg, double cf)
{
    int i;

    for (i = 0; i < sg->ncfs && sg->cfs[i] != cf; ++i) {
    }
    if (i == sg->ncfs) {
        if (sg->ncfs == SYNC_GRAVAC_CFS) {
            return;
        }
        sg->cfs[sg->ncfs++] = cf;
    }
    sg->sent_in_window[i]++;
}

/* At a window end: one line on why the controller did what it did. */
static void gravac_explain(sync_gravac_t *sg, long step,
                           const gcx_gravac_record_t *rec)
{
    const gcx_gravac_params_t *p = &sg->params;
    char                       line[2048];
    size_t                     len = 0;
    double                     t, best = -1, second = -1, best_cf = 0,
                               second_cf = 0;
    gcx_gravac_state_t         next;
    int                        i;

#define GRAVAC_PUT(...)                                                        \
    do {                                                                       \
        if (len < sizeof(line)) {                                              \
            int n_ = snprintf(line + len, sizeof(line) - len, __VA_ARGS__);    \
            len += n_ > 0 ? (size_t)n_ : 0;                                    \
        }                                                                      \
    } while (0)
    GRAVAC_PUT("GraVAC steps %ld-%ld: sent", sg->window_first, step);
    for (i = 0; i < sg->ncfs; ++i) {
        if (sg->sent_in_window[i] > 0) {
            GRAVAC_PUT(" CF %g x%ld", sg->cfs[i], sg->sent_in_window[i]);
        }
    }
    GRAVAC_PUT("; gains delta_min %.3f (CF %g), delta_c %.3f (CF %g) vs "
               "epsilon %g",
               rec->delta_min, rec->theta_min, rec->delta_c,
               rec->theta_min * rec->theta_s, p->epsilon);
    GRAVAC_PUT("; T (steps/s over ranks x gain):");
    for (i = 0; i < sg->ncfs; ++i) {
        if (gcx_gravac_throughput(sg->ctl, sg->cfs[i], &t) != GCX_OK) {
            continue;
        }
        GRAVAC_PUT(" CF %g %.4g", sg->cfs[i], t);
        if (t > best) {
            second = best, second_cf = best_cf;
            best = t, best_cf = sg->cfs[i];
        } else if (t > second) {
            second = t, second_cf = sg->cfs[i];
        }
    }
    if (second > 0) {
        GRAVAC_PUT("; best two CF %g / CF %g %.1f%% apart %s omega %g%%",
                   best_cf, second_cf, 100.0 * (best - second) / second,
                   best - second <= p->omega * second ? "<=" : ">",
                   100.0 * p->omega);
    }
    (void)gcx_gravac_get_state(sg->ctl, &next);
    if (rec->events & GCX_GRAVAC_EV_SETTLED) {
        GRAVAC_PUT(" -> settled on CF %g (the lower of the two)",
                   next.settled_cf);
    } else if (next.settled) {
        GRAVAC_PUT(" -> stays settled on CF %g", next.settled_cf);
    } else {
        if (rec->events & GCX_GRAVAC_EV_UNSETTLED) {
            GRAVAC_PUT(" -> no longer saturated: the search resumes");
        }
        GRAVAC_PUT("; gains %s (|delta_min - delta_c| / delta_min %.1f%% "
                   "%s omega)",
                   rec->events & GCX_GRAVAC_EV_RAISED ? "agree: theta_min "
                                                        "raised"
                                                      : "differ",
                   rec->delta_min > 0
                       ? 100.0 * fabs(rec->delta_min - rec->delta_c) /
                             rec->delta_min
                       : 0.0,
                   rec->events & GCX_GRAVAC_EV_RAISED ? "<=" : ">");
    }
    GRAVAC_PUT("; next window: theta_min %g, theta_s %g, c level CF %g%s",
               next.theta_min, next.theta_s, next.theta_min * next.theta_s,
               rec->events & GCX_GRAVAC_EV_CAPPED ? " (theta_max)" : "");
#undef GRAVAC_PUT
    train_info("%s", line);
    memset(sg->sent_in_window, 0, sizeof(sg->sent_in_window));
    sg->window_first = step + 1;
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
    if (sg->explain) {
        gravac_count(sg, rec.cf);
        if (rec.events & GCX_GRAVAC_EV_WINDOW) {
            gravac_explain(sg, sync->step, &rec);
        }
    }
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
    sync_gravac_t     *sg  = sync->priv;
    uint64_t           len = train_blob_get_u64(in);
    gcx_gravac_state_t state;
    gcx_status_t       status;

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
    if (gcx_gravac_get_state(sg->ctl, &state) == GCX_OK) {
        sg->window_first =
            (long)(state.step - state.step % sg->params.window);
    }
    status = train_sync_get_feedback(in, sg->fb, "gravac");
    sg->steps_per_s = train_blob_get_f64(in);
    return status == GCX_OK && !in->ok ? GCX_ERR_INVALID : status;
}

const train_sync_ops_t train_sync_gravac = {
    .name     = "gravac",
    .help     = "GraVAC adaptive CF + error feedback, sparse allreduce; "
                "compressor=topk|dgc|redsync|randomk, theta_min, theta_max, "
                "eps, window, omega, policy (defaults: GCX_GRAVAC_*); model_gbit, "
                "model_compute_ms: a modeled throughput instead of the "
                "measured one; explain=0|1 (default 1): rank 0 says why at "
                "every window end",
    .flags    = 0,
    .init     = gravac_init,
    .exchange = gravac_exchange,
    .fini     = gravac_fini,
    .save     = gravac_save,
    .load     = gravac_load,
};
