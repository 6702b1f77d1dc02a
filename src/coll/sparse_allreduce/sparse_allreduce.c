/*
 * sparse_allreduce.c - the sparse allreduce collective: validation, the
 * info exchange, the task's phases and the common epilogue.
 *
 * Flow of one call: local validation (indices strictly increasing and below
 * N) -> argument check of gcx_coll_submit_checked (N and topk must agree;
 * a rank's local error fails every rank with GCX_ERR_MISMATCH) -> info
 * exchange (ring allgather of [nnz, capacity, P-1 index quantiles, a 32-hash
 * union sketch on every 16th auto call, the feedback record, the model
 * record] per rank: (P-1)·α, 8(P+43) bytes each) -> selection from that
 * info alone, so every rank picks the same algorithm -> the algorithm ->
 * epilogue: top-k (if the algorithm did not select it already), capacity
 * check against every rank's capacity (all ranks fail together), outputs,
 * in_result.
 *
 * Selection (auto): the algorithm with the lowest modelled time (select.c),
 * with α, β and γ from GCX_NET_* or measured once per communicator at its
 * first auto call (calibrate.c), corrected by the measured ratios of
 * earlier calls (feedback.c). What a rank keeps between calls (the union
 * ratio, the sketch schedule, α, β, γ) reaches a call only through its
 * info record, and every rank decides from rank 0's (gcx_sparse_agreed_t):
 * a call that failed on some ranks, or a variable set on one rank, can
 * make the ranks' own state differ, never their choice. GCX_SPARSE_ALGO or opts.algo forces one;
 * GCX_LOG_LEVEL=info prints the choice and every modelled time. A new
 * algorithm = one file + one row (select.c).
 *
 * Cost: (P-1)·α and 8(P+43) bytes per rank for the info exchange, whose P
 * records every rank holds (O(P^2): 8.7 MB at 1024 ranks, 136 MB at 4096),
 * O(nnz) for the validation, then the algorithm's and the epilogue's (top-k
 * over the result, one pass for the outputs and in_result). No rank cap:
 * the rings wrap their tag steps inside their slots (sparse_allreduce.h),
 * and the per-rank arrays of the algorithms are allocated for P per call.
 */
#include "sparse_allreduce.h"

#include "base/config.h"
#include "base/time.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
    GCX_SPARSE_PHASE_INFO = 0,
    GCX_SPARSE_PHASE_CALIBRATE,
    GCX_SPARSE_PHASE_ALGO,
    GCX_SPARSE_PHASE_DONE,
};

/* ---- per-communicator state: the last call's stats --------------------- */

static pthread_once_t gcx_sparse_slot_once = PTHREAD_ONCE_INIT;
static int            gcx_sparse_slot      = -1;

static void gcx_sparse_slot_take(void)
{
    gcx_sparse_slot = gcx_comm_state_slot();
}

int gcx_sparse_state_slot(void)
{
    pthread_once(&gcx_sparse_slot_once, gcx_sparse_slot_take);
    return gcx_sparse_slot;
}

static gcx_status_t gcx_sparse_state_create(gcx_comm_t *comm)
{
    gcx_comm_state_t *s;

    if (gcx_sparse_state_slot() < 0) {
        return GCX_ERR_NOMEM;
    }
    s = &comm->state[gcx_sparse_slot];

    if (s->data == NULL) {
        s->data = calloc(1, sizeof(gcx_sparse_comm_state_t));
        if (s->data == NULL) {
            return GCX_ERR_NOMEM;
        }
        s->release = free;
    }
    return GCX_OK;
}

gcx_status_t gcx_sparse_allreduce_last_stats(
    const gcx_comm_t *comm, gcx_sparse_allreduce_stats_t *stats_p)
{
    const gcx_sparse_comm_state_t *e;

    if (comm == NULL || stats_p == NULL) {
        return GCX_ERR_INVALID;
    }
    e = gcx_sparse_state(comm);
    if (e == NULL || !e->have_stats) {
        return GCX_ERR_NOT_FOUND;
    }
    *stats_p = e->stats;
    return GCX_OK;
}

static void gcx_sparse_save_stats(gcx_sparse_task_t *t)
{
    gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);

    e->have_stats       = 1;
    e->stats.algo       = gcx_sparse_algo_names[t->algo->id].name;
    e->stats.bytes_sent = t->bytes_sent;
    e->stats.result_nnz = t->union_nnz;
}

/* ---- epilogue ------------------------------------------------------------- */

static void gcx_sparse_mark(gcx_sparse_task_t *t, const uint32_t *idx,
                            size_t n)
{
    size_t j, o = 0;

    if (t->in_result == NULL) {
        return;
    }
    for (j = 0; j < t->in_nnz; ++j) {
        while (o < n && idx[o] < t->in_idx[j]) {
            ++o;
        }
        t->in_result[j] = o < n && idx[o] == t->in_idx[j];
    }
}

/* Top-k, capacity check, outputs. Sets the final status. */
static void gcx_sparse_finish(gcx_sparse_task_t *t)
{
    int       P = t->super.comm->size, r;
    uint32_t *fi = t->res_idx;
    float    *fv = t->res_val;
    size_t    fn = t->res_n;

    if (t->res_dense) { /* dense_only: whole union, no flags to compute */
        if (t->in_result != NULL) {
            memset(t->in_result, 1, t->in_nnz);
        }
        t->super.status = GCX_OK;
        return;
    }
    if (t->union_nnz == 0) {
        t->union_nnz = t->res_n;
    }
    gcx_sparse_topk_t sel;
    int64_t           gt, take;
    int               select = t->topk > 0 && !t->topk_done;

    if (select) {
        gcx_sparse_topk_local(&sel, t->topk, t->res_val, t->res_n, &gt,
                              &take);
        fn = gcx_sparse_topk_count(&sel, 0);
    }
    if (t->sparse_out != NULL) { /* every rank decides alike */
        for (r = 0; r < P; ++r) {
            if ((uint64_t)t->info[(size_t)r * t->info_len + 1] < fn) {
                gcx_error("sparse allreduce #%u: rank %d's sparse_out "
                          "capacity %lld is smaller than the result (%zu "
                          "entries); nothing written",
                          t->super.seq, r,
                          (long long)t->info[(size_t)r * t->info_len + 1],
                          fn);
                t->super.status = GCX_ERR_MISMATCH;
                return;
            }
        }
    }
    if (select) {
        if (t->sparse_out != NULL) {
            fi = t->sparse_out->idx;
            fv = t->sparse_out->val;
            t->res_in_out = 1;
        } else {
            t->fin_idx = malloc(fn * sizeof(uint32_t) + 1);
            t->fin_val = malloc(fn * sizeof(float) + 1);
            if (t->fin_idx == NULL || t->fin_val == NULL) {
                t->super.status = GCX_ERR_NOMEM;
                return;
            }
            fi = t->fin_idx;
            fv = t->fin_val;
        }
        gcx_sparse_topk_apply(&sel, 0, t->res_idx, t->res_val, t->res_n, fi,
                              fv);
    }
    if (t->sparse_out != NULL) {
        if (!t->res_in_out && fn > 0) {
            memcpy(t->sparse_out->idx, fi, fn * sizeof(*fi));
            memcpy(t->sparse_out->val, fv, fn * sizeof(*fv));
        }
        t->sparse_out->nnz       = fn;
        t->sparse_out->dense_len = t->N;
    }
    if (t->dense_out != NULL) {
        memset(t->dense_out, 0, t->N * sizeof(float));
        gcx_sparse_add_to_dense(fi, fv, fn, t->N, t->dense_out);
    }
    if (t->topk > 0) {
        gcx_sparse_mark(t, fi, fn);
    } else if (t->in_result != NULL) {
        memset(t->in_result, 1, t->in_nnz);
    }
    t->super.status = GCX_OK;
}

/* ---- the info records ----------------------------------------------------- */

static int64_t gcx_sparse_bits(double x)
{
    int64_t bits;

    memcpy(&bits, &x, sizeof(bits));
    return bits;
}

static double gcx_sparse_double(int64_t bits)
{
    double x;

    memcpy(&x, &bits, sizeof(x));
    return x;
}

void gcx_sparse_model_pack(int64_t *rec, uint64_t calls, double union_ratio,
                           double alpha, double beta, double gamma)
{
    rec[0] = (int64_t)(calls & INT64_MAX);
    rec[1] = gcx_sparse_bits(union_ratio);
    rec[2] = gcx_sparse_bits(alpha);
    rec[3] = gcx_sparse_bits(beta);
    rec[4] = gcx_sparse_bits(gamma);
}

/* A model record as gcx_sparse_model_pack() writes it: a count >= 0, a
 * union ratio in [0, 1], α, β, γ finite and >= 0 (NaN fails every test). */
static int gcx_sparse_model_rec_ok(const int64_t *rec)
{
    double ratio = gcx_sparse_double(rec[1]);
    int    i;

    if (rec[0] < 0 || !(ratio >= 0 && ratio <= 1)) {
        return 0;
    }
    for (i = 2; i < GCX_SPARSE_MODEL_LEN; ++i) {
        double x = gcx_sparse_double(rec[i]);

        if (!(x >= 0 && x < 1e6)) {
            return 0;
        }
    }
    return 1;
}

void gcx_sparse_info_agree(const int64_t *info, int P, size_t stride,
                           int is_auto, gcx_sparse_agreed_t *agreed)
{
    const int64_t *rank0 = info + GCX_SPARSE_INFO_MODEL(P);
    uint64_t       calls = 0;
    int            r, all_sketched = 1;

    for (r = 0; r < P; ++r) {
        uint64_t c = (uint64_t)info[(size_t)r * stride +
                                    GCX_SPARSE_INFO_MODEL(P)];

        all_sketched &= c % GCX_SPARSE_SKETCH_EVERY == 0;
        calls = c > calls ? c : calls;
    }
    agreed->sketched    = is_auto && all_sketched;
    agreed->calls       = calls + (is_auto ? 1 : 0);
    agreed->union_ratio = gcx_sparse_double(rank0[1]);
    agreed->alpha       = gcx_sparse_double(rank0[2]);
    agreed->beta        = gcx_sparse_double(rank0[3]);
    agreed->gamma       = gcx_sparse_double(rank0[4]);
}

int gcx_sparse_info_parse(const int64_t *info, int P, size_t stride, size_t N,
                          size_t *nnz, size_t *sum_p, size_t *max_p)
{
    const int64_t *rec;
    size_t         sum = 0, max = 0;
    int            r, q;

    for (r = 0; r < P; ++r) {
        rec = info + (size_t)r * stride;
        if (rec[0] < 0 || (uint64_t)rec[0] > N || rec[1] < 0) {
            return r;
        }
        for (q = 1; q < P; ++q) { /* what the model and ranges read; the
                                     model's search needs them in order */
            if (rec[1 + q] < 0 || (uint64_t)rec[1 + q] > N ||
                (q > 1 && rec[1 + q] < rec[q])) {
                return r;
            }
        }
        if (!gcx_sparse_model_rec_ok(rec + GCX_SPARSE_INFO_MODEL(P))) {
            return r;
        }
        nnz[r] = (size_t)rec[0];
        sum += nnz[r];
        if (nnz[r] > max) {
            max = nnz[r];
        }
    }
    *sum_p = sum;
    *max_p = max;
    return -1;
}

/* ---- the task ------------------------------------------------------------- */

static void gcx_sparse_start_algo(gcx_sparse_task_t *t)
{
    int id = t->algo_id;

    t->algo  = id == GCX_SPARSE_ALGO_AUTO ? gcx_sparse_select(t) :
                                            gcx_sparse_find(id);
    if (id != GCX_SPARSE_ALGO_AUTO) {
        gcx_info("sparse allreduce #%u: N %zu, P %d, nnz sum %zu max %zu -> "
                 "%s (GCX_SPARSE_ALGO or the call's option)",
                 t->super.seq, t->N, t->super.comm->size, t->nnz_sum,
                 t->nnz_max, gcx_sparse_algo_names[t->algo->id].name);
    }
    t->phase = GCX_SPARSE_PHASE_ALGO;
    t->fb_t0 = gcx_time_now();
    t->algo->start(t);
}

/* After the info exchange: the model's inputs and the communicator's
 * sketch schedule and union ratio, from the records every rank received
 * (gcx_sparse_agreed_t), so every rank decides alike whatever it held. */
static void gcx_sparse_take_agreed(gcx_sparse_task_t *t)
{
    gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);
    gcx_sparse_agreed_t      agreed;
    int                      P = t->super.comm->size;

    gcx_sparse_info_agree(t->info, P, t->info_len,
                          t->algo_id == GCX_SPARSE_ALGO_AUTO, &agreed);
    e->calls    = agreed.calls;
    t->sketched = agreed.sketched;
    t->alpha    = agreed.alpha;
    t->beta     = agreed.beta;
    t->gamma    = agreed.gamma;
    t->union_est = 0; /* sketches are only sent for auto */
    if (t->sketched) {
        t->union_est = gcx_sparse_sketch_union(
            t->info + GCX_SPARSE_INFO_SKETCH(P), P, t->info_len);
        e->union_ratio = t->nnz_sum > 0 ?
                             t->union_est / (double)t->nnz_sum : 0;
        if (e->union_ratio > 1) {
            e->union_ratio = 1; /* the estimate's error; a ratio is <= 1 */
        }
    } else if (t->algo_id == GCX_SPARSE_ALGO_AUTO) {
        /* the last sketch's overlap, as rank 0 holds it */
        e->union_ratio = agreed.union_ratio;
        t->union_est   = agreed.union_ratio * (double)t->nnz_sum;
    }
}

static void gcx_sparse_progress(gcx_task_t *task)
{
    gcx_sparse_task_t *t = (gcx_sparse_task_t *)task;
    int                P = task->comm->size, r, state;

    while (task->status == GCX_INPROGRESS) {
        switch (t->phase) {
        case GCX_SPARSE_PHASE_INFO:
            if (gcx_coll_subtask_progress(task, t->sub) <= 0) {
                return;
            }
            t->sub->ops->finalize(t->sub);
            t->sub = NULL;
            r      = gcx_sparse_info_parse(t->info, P, t->info_len, t->N,
                                           t->nnz, &t->nnz_sum, &t->nnz_max);
            if (r >= 0) { /* every rank sees the same records: all fail */
                gcx_error("sparse allreduce #%u: rank %d's info record is "
                          "out of range (nnz, capacity or an index quantile "
                          "outside [0, N = %zu], or a quantile below the one "
                          "before)", task->seq, r, t->N);
                task->status = GCX_ERR_MISMATCH;
                return;
            }
            gcx_sparse_fb_fold_info(t);
            gcx_sparse_take_agreed(t);
            if (t->union_est > 0 && t->union_est < (double)t->nnz_max) {
                t->union_est = (double)t->nnz_max;
            }
            if (t->union_est > (double)t->nnz_sum) {
                t->union_est = (double)t->nnz_sum;
            }
            if (t->algo_id == GCX_SPARSE_ALGO_AUTO && P > 1 &&
                !(t->alpha > 0 && t->beta > 0 && t->gamma > 0)) {
                t->phase = GCX_SPARSE_PHASE_CALIBRATE;
                gcx_sparse_cal_start(t);
                break;
            }
            gcx_sparse_start_algo(t);
            break;
        case GCX_SPARSE_PHASE_CALIBRATE:
            if (gcx_sparse_cal_progress(t) <= 0) {
                return;
            }
            gcx_sparse_start_algo(t);
            /* not recorded: it runs on links the calibration's 4(P-1) MB
             * just filled (recursive doubling, first at 0.01% on the
             * emulated cluster, took 4-7x its model here, 1.0-1.2x later) */
            t->fb_algo = 0;
            break;
        case GCX_SPARSE_PHASE_ALGO:
            state = t->algo->progress(t);
            if (state <= 0) {
                return;
            }
            t->phase = GCX_SPARSE_PHASE_DONE;
            gcx_sparse_finish(t);
            if (task->status == GCX_OK) {
                gcx_sparse_save_stats(t);
                gcx_sparse_fb_record(t);
            }
            return;
        default:
            return;
        }
    }
}

/* 0: the slot width; a test's smaller span (gcx_sparse_test_step_span) */
static uint32_t gcx_sparse_span_override;

void gcx_sparse_test_step_span(uint32_t span)
{
    gcx_sparse_span_override = span <= GCX_SPARSE_SLOT_WIDTH ? span : 0;
}

/* Steps a ring cycles through: its slot's width (a no-op below 1026
 * ranks), or a test's smaller span. */
static uint32_t gcx_sparse_step_span(void)
{
    return gcx_sparse_span_override != 0 ? gcx_sparse_span_override :
                                           GCX_SPARSE_SLOT_WIDTH;
}

gcx_task_t *gcx_sparse_ring(gcx_comm_t *comm, void *buf, const void *src,
                            const size_t *counts, const size_t *displs,
                            gcx_dtype_t dtype)
{
    gcx_task_t *ring = gcx_ring_create(comm, GCX_RING_ALLGATHER, buf, src,
                                       counts, displs, dtype, GCX_OP_SUM, 0);

    if (ring != NULL) {
        gcx_ring_prefer_tagged(ring);
        ring->step_span = gcx_sparse_step_span();
    }
    return ring;
}

static void gcx_sparse_post(gcx_task_t *task)
{
    gcx_sparse_task_t *t = (gcx_sparse_task_t *)task;
    int                P = task->comm->size, r;
    size_t             L = t->info_len;

    gcx_sparse_comm_state_t *e = gcx_sparse_state(task->comm);

    t->bytes_sent = 0;
    /* packed now, not at submission: the previous call on this
     * communicator has finished and recorded its time on every rank, and
     * a call that failed its argument check never got here (it changes
     * nothing that the next call reads) */
    gcx_sparse_fb_pack(t, t->info_send + GCX_SPARSE_INFO_FB(P));
    if (t->algo_id == GCX_SPARSE_ALGO_AUTO &&
        e->calls % GCX_SPARSE_SKETCH_EVERY == 0) {
        gcx_sparse_sketch(t->in_idx, t->in_nnz,
                          t->info_send + GCX_SPARSE_INFO_SKETCH(P));
    } else {
        gcx_sparse_sketch(NULL, 0, t->info_send + GCX_SPARSE_INFO_SKETCH(P));
    }
    gcx_sparse_model_params(t); /* this rank's; rank 0's are taken */
    gcx_sparse_model_pack(t->info_send + GCX_SPARSE_INFO_MODEL(P), e->calls,
                          e->union_ratio, t->alpha, t->beta, t->gamma);
    t->sub = gcx_sparse_ring(task->comm, t->info, t->info_send,
                             t->nnz /* counts: reused below */, t->nnz + P,
                             GCX_DT_I64);
    if (t->sub == NULL) {
        task->status = GCX_ERR_NOMEM;
        return;
    }
    for (r = 0; r < P; ++r) { /* ring gets P-1 of the P records out */
        if (r != gcx_coll_mod(task->comm->rank + 1, P)) {
            t->bytes_sent += L * sizeof(int64_t);
        }
    }
    if (P == 1) {
        t->bytes_sent = 0;
    }
    gcx_coll_subtask_post(task, t->sub, GCX_SPARSE_SLOT(0));
    gcx_sparse_progress(task);
}

static void gcx_sparse_finalize(gcx_task_t *task)
{
    gcx_sparse_task_t *t = (gcx_sparse_task_t *)task;

    if (t->sub != NULL) {
        t->sub->ops->finalize(t->sub);
    }
    if (t->phase == GCX_SPARSE_PHASE_CALIBRATE && t->algo_state != NULL) {
        gcx_sparse_cal_free(t->algo_state);
    } else if (t->algo != NULL && t->algo->cleanup != NULL) {
        t->algo->cleanup(t);
    }
    free(t->fin_idx);
    free(t->fin_val);
    free(t->info_send);
    free(t);
}

static const gcx_task_ops_t gcx_sparse_ops = {
    .name     = "sparse allreduce",
    .post     = gcx_sparse_post,
    .progress = gcx_sparse_progress,
    .finalize = gcx_sparse_finalize,
};

/* ---- API ---------------------------------------------------------------- */

/* Index strictly increasing and < N? Logs the first bad position. */
static int gcx_sparse_input_ok(const gcx_comm_t *comm,
                               const gcx_sparse_vec_t *in)
{
    size_t j;

    if (in->nnz > in->capacity || in->dense_len > ((size_t)1 << 32)) {
        gcx_error("gcx_sparse_allreduce: rank %d: nnz %zu > capacity %zu or "
                  "dense length %zu > 2^32",
                  comm->rank, in->nnz, in->capacity, in->dense_len);
        return 0;
    }
    for (j = 0; j < in->nnz; ++j) {
        if (in->idx[j] >= in->dense_len) {
            gcx_error("gcx_sparse_allreduce: rank %d: index %u at position "
                      "%zu is not below the dense length %zu",
                      comm->rank, in->idx[j], j, in->dense_len);
            return 0;
        }
        if (j > 0 && in->idx[j] <= in->idx[j - 1]) {
            gcx_error("gcx_sparse_allreduce: rank %d: indices not strictly "
                      "increasing at position %zu (%u after %u)%s",
                      comm->rank, j, in->idx[j], in->idx[j - 1],
                      in->idx[j] == in->idx[j - 1] ? ": duplicate" : "");
            return 0;
        }
    }
    return 1;
}

/* The call's algorithm: opts->algo by name, one of gcx_sparse_algo_names,
 * else the communicator's GCX_SPARSE_ALGO; -1 and an error naming the
 * choices for an unknown name. */
static int gcx_sparse_algo_id(const gcx_comm_t *comm,
                              const gcx_sparse_allreduce_opts_t *opts)
{
    char accepted[256];
    int  i;

    if (opts == NULL || opts->algo == NULL) {
        return comm->config.sparse_algo;
    }
    for (i = 0; gcx_sparse_algo_names[i].name != NULL; ++i) {
        if (!strcmp(opts->algo, gcx_sparse_algo_names[i].name)) {
            return gcx_sparse_algo_names[i].id;
        }
    }
    gcx_config_value_list(gcx_sparse_algo_names, accepted, sizeof(accepted));
    gcx_error("gcx_sparse_allreduce: unknown algorithm '%s' in opts->algo "
              "(accepted: %s)", opts->algo, accepted);
    return -1;
}

gcx_status_t gcx_sparse_allreduce(gcx_comm_t *comm,
                                  const gcx_sparse_vec_t *input,
                                  float *dense_out,
                                  gcx_sparse_vec_t *sparse_out,
                                  const gcx_sparse_allreduce_opts_t *opts,
                                  gcx_request_t **req_p)
{
    gcx_coll_signature_t signature = {0};
    gcx_sparse_task_t   *t;
    size_t               topk = opts != NULL ? opts->topk : 0;
    size_t               L, q;
    int                  P, local_error, algo_id;

    if (comm == NULL || input == NULL ||
        (dense_out == NULL && sparse_out == NULL) ||
        (input->nnz > 0 && (input->idx == NULL || input->val == NULL)) ||
        (sparse_out != NULL && sparse_out->capacity > 0 &&
         (sparse_out->idx == NULL || sparse_out->val == NULL)) ||
        (sparse_out != NULL && input->nnz > 0 &&
         (sparse_out->idx == input->idx || sparse_out->val == input->val))) {
        gcx_error("gcx_sparse_allreduce: invalid arguments (comm %p, input "
                  "%p, dense_out %p, sparse_out %p)",
                  (void *)comm, (const void *)input, (void *)dense_out,
                  (void *)sparse_out);
        return GCX_ERR_INVALID;
    }
    algo_id = gcx_sparse_algo_id(comm, opts);
    if (algo_id < 0) {
        return GCX_ERR_INVALID;
    }
    P = comm->size;
    local_error = !gcx_sparse_input_ok(comm, input);
    L = GCX_SPARSE_INFO_LEN(P);
    if (gcx_sparse_state_create(comm) != GCX_OK ||
        (t = calloc(1, sizeof(*t))) == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&t->super, &gcx_sparse_ops, comm);
    /* one allocation: info_send (L), info (P·L), nnz (P) + displs (P); the
     * records carry P-1 quantiles each, so P·L grows as P^2 */
    t->info_send = malloc((L + (size_t)P * L) * sizeof(int64_t) +
                          2 * (size_t)P * sizeof(size_t));
    if (t->info_send == NULL) {
        gcx_error("gcx_sparse_allreduce: rank %d: out of memory for the info "
                  "exchange (%d records of %zu int64: P-1 index quantiles "
                  "per rank, %.1f MB at P = %d)",
                  comm->rank, P, L,
                  (double)((L + (size_t)P * L) * sizeof(int64_t)) / 1e6, P);
        free(t);
        return GCX_ERR_NOMEM;
    }
    t->info     = t->info_send + L;
    t->nnz      = (size_t *)(t->info + (size_t)P * L);
    t->info_len = L;
    t->in_idx   = input->idx;
    t->in_val   = input->val;
    t->in_nnz   = local_error ? 0 : input->nnz;
    t->N        = input->dense_len;
    t->dense_out  = dense_out;
    t->sparse_out = sparse_out;
    t->in_result  = opts != NULL ? opts->in_result : NULL;
    t->topk       = topk;
    t->algo_id    = algo_id;
    t->dense_only = dense_out != NULL && sparse_out == NULL && topk == 0;
    t->info_send[0] = (int64_t)t->in_nnz;
    t->info_send[1] = sparse_out != NULL ? (int64_t)sparse_out->capacity :
                                           INT64_MAX;
    for (q = 1; q < (size_t)P; ++q) { /* quantile q/P of the local indices */
        t->info_send[1 + q] =
            t->in_nnz > 0 ? (int64_t)t->in_idx[q * t->in_nnz / (size_t)P] :
                            (int64_t)(q * t->N / (size_t)P);
    }
    for (q = 0; q < (size_t)P; ++q) { /* ring counts/displs for the info */
        t->nnz[q]                 = L;
        t->nnz[(size_t)P + q]     = q * L;
    }
    signature.coll        = GCX_COLL_INTERNAL + 0x5a; /* sparse allreduce */
    signature.count       = t->N;
    signature.dtype       = GCX_DT_F32;
    signature.op          = GCX_OP_SUM;
    signature.extra       = gcx_coll_hash(
        gcx_coll_hash(0, &topk, sizeof(topk)), &algo_id, sizeof(algo_id));
    signature.local_error = local_error;
    return gcx_coll_submit_checked(comm, &t->super, &signature, req_p);
}
