/*
 * loop.c - the data-parallel training loop.
 *
 * Every rank starts from the same seeded weights (and rank 0's are broadcast
 * to be sure), walks the same seeded permutation of the training set and, at
 * step s, computes the mean gradient over its own slice of the global batch
 * (data.h). A sync mode whose step computes only part of the global batch
 * (pipelined gradient coding: sync.steps_per_batch = P > 1) gets P steps
 * per global batch, so an epoch, P times as many steps, is still one pass
 * over the data. The sync mode turns the local gradients into one gradient
 * that is bit-identical on every rank; each rank applies the same SGD
 * update, so weights stay identical, which is verified by a checksum
 * allreduce every --check-every steps and at every epoch end. Each epoch
 * ends with every rank evaluating its contiguous part of the test set;
 * counts are summed.
 *
 * A sync mode that survives dead ranks (coded: train_sync_ops_t.survivors)
 * gets those checks, evaluations and byte sums over the live ranks
 * instead, through the rank that knows who is gone (train_reduce()).
 *
 * Cost per step: gather + forward/backward of --batch samples, the sync
 * mode's exchange, one SGD pass over the parameters, and one allreduce of
 * three doubles (loss, hits, samples) for the global batch statistics.
 *
 * Checkpoints (--save/--resume) are loop_ckpt.c's.
 */
#include "loop_int.h"
#include "report.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int64_t train_checksum(const float *v, size_t n)
{
    const unsigned char *p = (const unsigned char *)v;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i;

    for (i = 0; i < n * sizeof(float); i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return (int64_t)(h >> 1);
}

/* An in-place allreduce: over every rank, or over the live ones. */
typedef gcx_status_t (*train_reduce_fn_t)(void *ctx, void *buf, size_t count,
                                          gcx_dtype_t dtype, gcx_op_t op);

static gcx_status_t train_reduce_all(void *ctx, void *buf, size_t count,
                                     gcx_dtype_t dtype, gcx_op_t op)
{
    return train_comm_allreduce(ctx, buf, count, dtype, op);
}

static gcx_status_t train_check_with(train_reduce_fn_t reduce, void *ctx,
                                     const float *v, size_t n, long step)
{
    int64_t h = train_checksum(v, n);
    int64_t range[2] = {h, -h}; /* max of h and of -h: max and -min */
    gcx_status_t status;

    status = reduce(ctx, range, 2, GCX_DT_I64, GCX_OP_MAX);
    if (status != GCX_OK) {
        return status;
    }
    if (range[0] != -range[1]) {
        train_error("WEIGHTS DIFFER BETWEEN RANKS after step %ld: checksums "
                    "range from %lld to %lld (this rank %lld); the ranks did "
                    "not apply the same update",
                    step, (long long)-range[1], (long long)range[0],
                    (long long)h);
        return GCX_ERR_MISMATCH;
    }
    return GCX_OK;
}

gcx_status_t train_check_identical(train_comm_t *comm, const float *v, size_t n,
                                   long step)
{
    return train_check_with(train_reduce_all, comm, v, n, step);
}

/*
 * The loop's reductions once training runs: over every rank, or, for a
 * sync mode that survives dead ranks (coded), over the live ones through
 * the rank that knows which are gone; a dead rank then stops nothing.
 */
static gcx_status_t train_reduce(void *ctx, void *buf, size_t count,
                                 gcx_dtype_t dtype, gcx_op_t op)
{
    train_state_t *st = ctx;
    gcx_status_t status;
    uint64_t *gone;
    int root;

    if (st->sync.ops->survivors == NULL) {
        return train_comm_allreduce(st->comm, buf, count, dtype, op);
    }
    gone = calloc(GCX_WSET_WORDS(st->comm->size), sizeof(*gone));
    if (gone == NULL) {
        return GCX_ERR_NOMEM;
    }
    st->sync.ops->survivors(&st->sync, &root, gone);
    status = train_comm_allreduce_live(st->comm, buf, count, dtype, op, gone,
                                       NULL, NULL);
    free(gone);
    return status;
}

/*
 * Make a local outcome collective: every rank gets an error if any rank has
 * one (so that no rank enters a collective the others have left).
 */
static gcx_status_t train_agree(train_comm_t *comm, gcx_status_t local)
{
    int32_t worst = local;
    gcx_status_t status;

    status = train_comm_allreduce(comm, &worst, 1, GCX_DT_I32, GCX_OP_MIN);
    if (status != GCX_OK) {
        return status;
    }
    if (local == GCX_OK && worst != GCX_OK) {
        train_error("stopping: another rank failed (%s)",
                    gcx_strerror((gcx_status_t)worst));
    }
    return (gcx_status_t)worst;
}

/*
 * Mean-loss gradient over part @p part of @p nparts of the current global
 * batch (train_grad_src_t.compute).
 */
static gcx_status_t train_grad_part(void *ctx, int part, int nparts,
                                    float *grad, train_batch_stats_t *stats_p)
{
    train_state_t *st = ctx;
    /* the workers' shards: a master that computes nothing has none */
    size_t global = (size_t)st->opts->batch * (size_t)st->sync.workers;
    size_t begin, count;
    double loss, t0;
    long u;
    int hits;

    if (nparts <= 0 || part < 0 || part >= nparts ||
        global % (size_t)nparts != 0 ||
        global / (size_t)nparts > (size_t)st->opts->batch) {
        train_error("gradient of part %d of %d: the global batch of %zu "
                    "must split into equal parts of at most --batch %d",
                    part, nparts, global, st->opts->batch);
        return GCX_ERR_INVALID;
    }
    count = global / (size_t)nparts;
    /* steps_per_batch consecutive steps share global batch u */
    u = st->step_in_epoch / st->sync.steps_per_batch;
    begin = train_shard_offset((int)u, st->opts->batch, 0, st->sync.workers) +
            (size_t)part * count;
    if (st->trace != NULL) {
        fprintf(st->trace, "%d %ld %zu %zu\n", st->epoch, st->step_in_epoch,
                begin, count);
    }
    t0 = train_now();
    train_dataset_gather(st->train, st->perm + begin, count, st->x, st->y);
    train_net_loss_grad(&st->net, st->params, st->x, st->y, (int)count, grad,
                        &loss, &hits);
    /* --straggler exp:M draws a delay relative to this computation */
    train_sync_computed(&st->sync, part, train_now() - t0);
    stats_p->loss_sum = loss * (double)count;
    stats_p->hits = hits;
    stats_p->samples = (double)count;
    st->loss_sum += stats_p->loss_sum;
    st->hits += stats_p->hits;
    st->samples += stats_p->samples;
    return GCX_OK;
}

/* Add the loss, hits and samples of rank @p r's part of the test set to
 * @p sums. */
static void train_evaluate_part(train_state_t *st, int r, double *sums)
{
    const train_dataset_t *test = st->test;
    size_t begin, end, i, chunk = (size_t)st->net.max_batch, j;
    uint32_t *idx = malloc(chunk * sizeof(*idx));

    if (idx == NULL) { /* the sums then lack the part: samples says so */
        train_error("out of memory evaluating part %d of the test set", r);
        return;
    }
    train_eval_range(test->n, r, st->comm->size, &begin, &end);
    for (i = begin; i < end; i += chunk) {
        size_t count = end - i < chunk ? end - i : chunk;
        double loss;
        int hits;

        for (j = 0; j < count; j++) {
            idx[j] = (uint32_t)(i + j);
        }
        train_dataset_gather(test, idx, count, st->x, st->y);
        train_net_evaluate(&st->net, st->params, st->x, st->y, (int)count,
                           &loss, &hits);
        sums[0] += loss;
        sums[1] += hits;
        sums[2] += (double)count;
    }
    free(idx);
}

/* train_live_fill_fn_t of the evaluation: the root evaluates the part of a
 * rank that is gone. */
static void train_evaluate_fill(void *ctx, int rank, void *buf)
{
    train_evaluate_part(ctx, rank, buf);
}

/*
 * Loss and accuracy over the test set: each rank evaluates its part, the
 * sums are reduced; for a sync mode that survives dead ranks, over the
 * live ranks, and the rank that knows which are gone evaluates their parts
 * too (also of a rank that dies during the reduction).
 */
static gcx_status_t train_evaluate(train_state_t *st, double *loss_p,
                                   double *acc_p)
{
    double sums[3] = {0, 0, 0}; /* loss, hits, samples */
    gcx_status_t status;
    uint64_t *gone;
    int root;

    train_evaluate_part(st, st->comm->rank, sums);
    if (st->sync.ops->survivors != NULL) {
        gone = calloc(GCX_WSET_WORDS(st->comm->size), sizeof(*gone));
        if (gone == NULL) {
            return GCX_ERR_NOMEM;
        }
        st->sync.ops->survivors(&st->sync, &root, gone);
        status = train_comm_allreduce_live(st->comm, sums, 3, GCX_DT_F64,
                                           GCX_OP_SUM, gone,
                                           train_evaluate_fill, st);
        free(gone);
    } else {
        status = train_comm_allreduce(st->comm, sums, 3, GCX_DT_F64,
                                      GCX_OP_SUM);
    }
    if (status != GCX_OK) {
        return status;
    }
    *loss_p = sums[2] > 0 ? sums[0] / sums[2] : 0;
    *acc_p = sums[2] > 0 ? sums[1] / sums[2] : 0;
    return GCX_OK;
}

/*
 * Fault injection for tests of the weight check: GCX_TRAIN_PERTURB="R:S"
 * makes rank R nudge one weight by one ulp after step S. Returns S on rank R,
 * -1 elsewhere or when unset.
 */
static long train_perturb_step(int rank)
{
    const char *v = getenv("GCX_TRAIN_PERTURB");
    long r, s;

    if (v == NULL || sscanf(v, "%ld:%ld", &r, &s) != 2 || r != rank) {
        return -1;
    }
    train_info("GCX_TRAIN_PERTURB: this rank changes a weight after step %ld",
               s);
    return s;
}

/*
 * Fault injection for tests of dead ranks: GCX_TRAIN_KILL="R:S" makes rank R
 * kill itself with SIGKILL after step S (no exit path runs, as when an
 * operator or the OOM killer ends it); "R:S:send" / "R:S:recv" in the first
 * reduction over the live ranks after step S (a weight check, evaluation
 * or byte sum of a coded mode), before it sends its value / after it sent
 * it, before the result (*where_p 1 / 2; 0 for after the step); "R:S:stall"
 * makes it sleep GCX_TIMEOUT + 2 s there before it sends (*where_p 3), as a
 * SIGSTOPped rank. Returns S on rank R, -1 elsewhere or when unset.
 */
static long train_kill_step(int rank, int *where_p)
{
    const char *v = getenv("GCX_TRAIN_KILL");
    char where[8] = "";
    long r, s;

    *where_p = 0;
    if (v == NULL || sscanf(v, "%ld:%ld:%7s", &r, &s, where) < 2 ||
        r != rank) {
        return -1;
    }
    if (strcmp(where, "send") == 0 || strcmp(where, "recv") == 0) {
        *where_p = where[1] == 'e' ? 1 : 2;
        train_info("GCX_TRAIN_KILL: this rank kills itself in the first "
                   "reduction over the live ranks after step %ld, %s",
                   s, *where_p == 1 ? "before it sends its value" :
                                      "after it sent its value");
        return s;
    }
    if (strcmp(where, "stall") == 0) {
        *where_p = 3;
        train_info("GCX_TRAIN_KILL: this rank stalls for GCX_TIMEOUT + 2 s "
                   "in the first reduction over the live ranks after step "
                   "%ld, before it sends its value",
                   s);
        return s;
    }
    train_info("GCX_TRAIN_KILL: this rank kills itself after step %ld", s);
    return s;
}

/*
 * Test hook: GCX_TRAIN_TRACE_SAMPLES=PREFIX makes every rank write to
 * PREFIX.<rank> a line "epoch step_in_epoch begin count" for each gradient
 * part it computes: the samples perm[begin, begin + count) of that epoch's
 * permutation (tests/unit/train checks that an epoch computes each sample
 * once). *trace_p is NULL when unset.
 */
static gcx_status_t train_trace_open(int rank, FILE **trace_p)
{
    const char *prefix = getenv("GCX_TRAIN_TRACE_SAMPLES");
    char path[4096];

    *trace_p = NULL;
    if (prefix == NULL || prefix[0] == '\0') {
        return GCX_OK;
    }
    snprintf(path, sizeof(path), "%s.%d", prefix, rank);
    *trace_p = fopen(path, "w");
    if (*trace_p == NULL) {
        train_error("GCX_TRAIN_TRACE_SAMPLES: cannot write %s: %s", path,
                    strerror(errno));
        return GCX_ERR_IO;
    }
    return GCX_OK;
}

static gcx_status_t train_state_init(train_state_t *st,
                                     const train_opts_t *opts,
                                     train_comm_t *comm,
                                     const train_dataset_t *train,
                                     const train_dataset_t *test)
{
    train_shape_t in = {1, train->rows, train->cols};
    gcx_status_t status;
    long batches;

    memset(st, 0, sizeof(*st));
    st->perturb_step = train_perturb_step(comm->rank);
    st->kill_step = train_kill_step(comm->rank, &st->kill_where);
    st->opts = opts;
    st->comm = comm;
    st->train = train;
    st->test = test;
    if (test->rows != train->rows || test->cols != train->cols) {
        train_error("test images are %dx%d but training images %dx%d",
                    test->rows, test->cols, train->rows, train->cols);
        return GCX_ERR_MISMATCH;
    }
    status = train_model_build(&opts->model, in, TRAIN_NUM_CLASSES, opts->batch,
                               &st->net);
    if (status != GCX_OK) {
        return status;
    }
    st->dim = train_shape_size(in);
    st->params = train_falloc(st->net.nparams);
    st->grads = train_falloc(st->net.nparams);
    st->x = train_falloc((size_t)opts->batch * st->dim);
    st->y = malloc((size_t)opts->batch);
    st->perm = malloc(train->n * sizeof(*st->perm));
    if (st->params == NULL || st->grads == NULL || st->x == NULL ||
        st->y == NULL || st->perm == NULL) {
        train_error("out of memory for %zu parameters", st->net.nparams);
        return GCX_ERR_NOMEM;
    }
    status = train_sgd_init(&st->sgd, st->net.nparams, opts->momentum,
                            opts->weight_decay);
    if (status != GCX_OK) {
        return status;
    }
    if (opts->straggler_rank >= comm->size) {
        train_error("--straggler %d:...: there are only %d ranks",
                    opts->straggler_rank, comm->size);
        return GCX_ERR_INVALID;
    }
    status = train_sync_create(opts->sync, comm, st->net.nparams, &st->sync);
    if (status != GCX_OK) {
        return status;
    }
    /* the global batch is --batch per worker (not per master) */
    batches = (long)train_steps_per_epoch(train->n, opts->batch,
                                          st->sync.workers);
    if (batches == 0) {
        train_error("a global batch of %d x %d workers is larger than the "
                    "%zu training samples",
                    opts->batch, st->sync.workers, train->n);
        return GCX_ERR_INVALID;
    }
    if (comm->rank == opts->straggler_rank && st->sync.worker < 0) {
        train_info("--straggler: this rank is the master, computes no "
                   "gradient and so never sleeps");
    } else if (comm->rank == opts->straggler_rank) {
        st->sync.delay_s = opts->straggler_delay;
        train_info("--straggler: this rank sleeps %.0f ms per step",
                   opts->straggler_delay * 1e3);
    }
    st->sync.straggler_exp = opts->straggler_exp;
    st->sync.straggler_seed = opts->seed;
    if (opts->straggler_exp > 0 && comm->rank == 0) {
        train_info("--straggler exp:%g: every worker sleeps Exp(mean %g x "
                   "its compute time) after each gradient it computes",
                   opts->straggler_exp, opts->straggler_exp);
    }
    /* the sync mode says how many steps a global batch takes */
    st->spe = batches * st->sync.steps_per_batch;
    st->sched.kind = opts->schedule;
    st->sched.base_lr = opts->lr;
    st->sched.min_lr = opts->min_lr;
    st->sched.gamma = opts->lr_gamma;
    st->sched.step_size = lround(opts->lr_step_epochs * (double)st->spe);
    if (st->sched.step_size < 1) {
        st->sched.step_size = 1;
    }
    st->sched.warmup_steps = lround(opts->warmup_epochs * (double)st->spe);
    st->sched.total_steps = (long)opts->epochs * st->spe;
    if (opts->max_steps > 0 && opts->max_steps < st->sched.total_steps) {
        st->sched.total_steps = opts->max_steps;
    }
    return GCX_OK;
}

static void train_state_fini(train_state_t *st)
{
    if (st->trace != NULL) {
        fclose(st->trace);
    }
    train_sync_destroy(&st->sync);
    train_sgd_fini(&st->sgd);
    free(st->perm);
    free(st->y);
    train_ffree(st->x);
    train_ffree(st->grads);
    train_ffree(st->params);
    train_net_destroy(&st->net);
}

/* The network's hook while this rank computes the gradient exchange()
 * gets: hand each layer's final slice to the sync mode. A --straggler R:MS
 * rank sleeps before its first slice goes (its backward pass is that much
 * slower), not after the last, when its slices would already be on their
 * way; exp:M's delay needs the computation's time, so it still comes after
 * (train_step). */
static void train_grad_ready(void *ctx, size_t off, size_t len)
{
    train_state_t *st = ctx;
    gcx_status_t status;

    if (st->grad_ready_status != GCX_OK) {
        return;
    }
    if (st->grad_ready_calls++ == 0) {
        train_sync_delay(&st->sync); /* delay_s: nothing drawn yet */
    }
    status = st->sync.ops->grad_ready(&st->sync, st->grads, off, len);
    st->grad_ready_status = status;
}

/* One global step; fills @p rec. */
static gcx_status_t train_step(train_state_t *st, long step,
                               train_step_rec_t *rec)
{
    const train_grad_src_t src = {train_grad_part, st};
    train_batch_stats_t mine;
    double stats[3], t0, t1, t2;
    gcx_status_t status;

    st->loss_sum = st->hits = st->samples = 0;
    st->sync.step = step; /* the straggler draws read it */
    st->sync.busy_s = 0;
    t0 = train_now();
    if (!(st->sync.ops->flags & TRAIN_SYNC_OWN_GRADIENT)) {
        st->grad_ready_status = GCX_OK;
        st->grad_ready_calls = 0;
        if (st->sync.ops->grad_ready != NULL) {
            train_net_set_hook(&st->net, train_grad_ready, st);
        }
        status = train_grad_part(st, st->sync.worker, st->sync.workers,
                                 st->grads, &mine);
        train_net_set_hook(&st->net, NULL, NULL);
        if (status == GCX_OK) {
            status = st->grad_ready_status;
        }
        if (status != GCX_OK) {
            return status;
        }
        if (st->grad_ready_calls > 0) {
            train_sync_delay_drawn(&st->sync); /* delay_s slept already */
        } else {
            train_sync_delay(&st->sync);
        }
    }
    t1 = train_now();
    memset(&rec->sync, 0, sizeof(rec->sync));
    status = st->sync.ops->exchange(&st->sync, st->grads, &src, &rec->sync);
    if (status != GCX_OK) {
        train_error("sync mode %s failed at step %ld: %s", st->sync.ops->name,
                    step, gcx_strerror(status));
        return status;
    }
    t2 = train_now();
    rec->lr = train_sched_lr(&st->sched, step);
    train_sgd_step(&st->sgd, st->params, st->grads, rec->lr);
    if (step == st->perturb_step) {
        st->params[0] = nextafterf(st->params[0], INFINITY);
    }
    if (step == st->kill_step && st->kill_where == 0) {
        fflush(NULL);
        raise(SIGKILL);
    }
    if (step == st->kill_step) {
        st->comm->live_kill = st->kill_where; /* in the next live reduce */
    }

    if (st->sync.ops->flags & TRAIN_SYNC_BATCH_STATS) {
        stats[0] = rec->sync.batch.loss_sum;
        stats[1] = rec->sync.batch.hits;
        stats[2] = rec->sync.batch.samples;
    } else {
        stats[0] = st->loss_sum;
        stats[1] = st->hits;
        stats[2] = st->samples;
        status =
            train_comm_allreduce(st->comm, stats, 3, GCX_DT_F64, GCX_OP_SUM);
        if (status != GCX_OK) {
            return status;
        }
    }
    rec->step = step;
    rec->loss = stats[2] > 0 ? stats[0] / stats[2] : 0;
    rec->acc = stats[2] > 0 ? stats[1] / stats[2] : 0;
    rec->compute_s = t1 - t0;
    rec->sync_s = t2 - t1;
    if (st->sync.ops->flags & TRAIN_SYNC_OWN_GRADIENT) {
        /* the mode computed inside its exchange: report that as compute */
        rec->compute_s = st->sync.busy_s;
        rec->sync_s = t2 - t1 - st->sync.busy_s;
    }
    rec->step_s = train_now() - t0;
    if (!isfinite(rec->loss)) {
        train_error("the loss is %g at step %ld: training diverged (try a "
                    "lower --lr)",
                    rec->loss, step);
        return GCX_ERR_RANGE;
    }
    return GCX_OK;
}

/*
 * Record a test accuracy measured at training time @p time_s (evaluation
 * time excluded) against the target; returns 1 when the run should stop.
 */
static int train_note_accuracy(const train_opts_t *opts, train_result_t *res,
                               double acc, double time_s, int epoch)
{
    if (acc > res->best_test_acc) {
        res->best_test_acc = acc;
    }
    if (opts->target_acc > 0 && res->time_to_target_s < 0 &&
        acc >= opts->target_acc) {
        res->time_to_target_s = time_s;
        res->target_epoch = epoch;
        return opts->stop_at_target;
    }
    return 0;
}

gcx_status_t train_run(const train_opts_t *opts, train_comm_t *comm,
                       const train_dataset_t *train,
                       const train_dataset_t *test, train_result_t *result_p)
{
    train_result_t res;
    train_report_t rep;
    train_state_t st;
    gcx_status_t status;
    double t_start, t_eval = 0, t0, bytes[2];
    train_position_t start = {0, 1, 0}, next;
    long step, spe;
    int epoch, done = 0;

    memset(&res, 0, sizeof(res));
    memset(&rep, 0, sizeof(rep));
    res.time_to_target_s = -1;
    status = train_state_init(&st, opts, comm, train, test);
    if (status != GCX_OK) {
        goto out;
    }
    spe = st.spe;
    res.world = comm->size;
    res.workers = st.sync.workers;
    res.nparams = st.net.nparams;
    snprintf(res.model_desc, sizeof(res.model_desc), "%s", st.net.desc);
    res.epochs = calloc((size_t)opts->epochs, sizeof(*res.epochs));
    if (res.epochs == NULL) {
        status = GCX_ERR_NOMEM;
        goto out;
    }
    train_net_init_params(&st.net, st.params, opts->seed);
    status =
        train_comm_broadcast(comm, st.params, st.net.nparams, GCX_DT_F32, 0);
    if (status == GCX_OK && (opts->save[0] || opts->resume[0]) &&
        st.sync.ops->save == NULL) {
        train_error("--save/--resume: sync mode %s cannot be checkpointed "
                    "(its rounds and stragglers' messages are in flight at "
                    "any step)",
                    st.sync.ops->name);
        status = GCX_ERR_UNSUPPORTED;
    }
    if (status == GCX_OK && opts->resume[0]) {
        status = train_agree(comm, train_ckpt_load(&st, &start));
    }
    if (status == GCX_OK) {
        status = train_check_identical(comm, st.params, st.net.nparams,
                                       start.step);
    }
    if (status != GCX_OK) {
        goto out;
    }
    step = start.step;
    next = start;
    status = train_report_open(&rep, opts, comm->rank, spe, stdout);
    if (status == GCX_OK) {
        status = train_trace_open(comm->rank, &st.trace);
    }
    status = train_agree(comm, status);
    if (status != GCX_OK) {
        goto out_report;
    }

    t_start = train_now();
    for (epoch = start.epoch; epoch <= opts->epochs && !done; epoch++) {
        train_epoch_rec_t *er = &res.epochs[res.nepochs];
        double ep_loss = 0, ep_hits = 0, ep_samples = 0;

        st.epoch = epoch;
        train_epoch_permutation(opts->seed, epoch - 1, st.perm, train->n);
        st.step_in_epoch = epoch == start.epoch ? start.step_in_epoch : 0;
        for (; st.step_in_epoch < spe; st.step_in_epoch++) {
            train_step_rec_t rec;

            status = train_step(&st, step, &rec);
            if (status != GCX_OK) {
                goto out_report;
            }
            step++;
            next.step = step;
            next.epoch = st.step_in_epoch + 1 < spe ? epoch : epoch + 1;
            next.step_in_epoch =
                st.step_in_epoch + 1 < spe ? st.step_in_epoch + 1 : 0;
            ep_loss += rec.loss;
            ep_hits += rec.acc;
            ep_samples += 1;
            res.bytes_sent += rec.sync.bytes_sent;
            res.dense_bytes += rec.sync.dense_bytes;
            if (opts->check_every > 0 && step % opts->check_every == 0) {
                status = train_check_with(train_reduce, &st, st.params,
                                          st.net.nparams, step);
                if (status != GCX_OK) {
                    goto out_report;
                }
                res.weight_checks++;
            }
            rec.epoch = epoch;
            rec.epoch_step = st.step_in_epoch;
            rec.steps_per_epoch = spe;
            rec.bytes_total = res.bytes_sent;
            rec.time_s = train_now() - t_start - t_eval;
            train_report_step(&rep, &rec);
            if (opts->max_steps > 0 && step >= opts->max_steps) {
                done = 1;
                break;
            }
            if (opts->eval_every > 0 && step % opts->eval_every == 0 &&
                st.step_in_epoch + 1 < spe) {
                double test_loss, test_acc;

                t0 = train_now();
                status = train_evaluate(&st, &test_loss, &test_acc);
                if (status != GCX_OK) {
                    goto out_report;
                }
                t_eval += train_now() - t0;
                train_report_test(&rep, &rec, test_acc);
                if (train_note_accuracy(opts, &res, test_acc, rec.time_s,
                                        epoch)) {
                    done = 1;
                    break;
                }
            }
        }
        status = train_check_with(train_reduce, &st, st.params,
                                  st.net.nparams, step);
        if (status != GCX_OK) {
            goto out_report;
        }
        res.weight_checks++;
        er->time_s = train_now() - t_start - t_eval;
        t0 = train_now();
        status = train_evaluate(&st, &er->test_loss, &er->test_acc);
        if (status != GCX_OK) {
            goto out_report;
        }
        t_eval += train_now() - t0;
        er->epoch = epoch;
        er->steps = step;
        er->train_loss = ep_samples > 0 ? ep_loss / ep_samples : 0;
        er->train_acc = ep_samples > 0 ? ep_hits / ep_samples : 0;
        res.nepochs++;
        if (train_note_accuracy(opts, &res, er->test_acc, er->time_s, epoch)) {
            done = 1;
        }
        train_report_epoch(&rep, er, opts->epochs);
    }
    res.total_time_s = train_now() - t_start - t_eval;
    res.eval_time_s = t_eval;
    res.steps = step;
    res.final_test_acc = res.nepochs ? res.epochs[res.nepochs - 1].test_acc : 0;
    bytes[0] = res.bytes_sent;
    bytes[1] = res.dense_bytes;
    status = train_reduce(&st, bytes, 2, GCX_DT_F64, GCX_OP_SUM);
    res.bytes_sent_all = bytes[0];
    res.dense_bytes_all = bytes[1];
    if (status == GCX_OK && opts->save[0]) {
        status = train_agree(comm, train_ckpt_save(&st, &next));
    }

out_report:
    train_report_close(&rep);
out:
    train_state_fini(&st);
    if (status == GCX_OK) {
        *result_p = res;
    } else {
        train_result_free(&res);
    }
    return status;
}

void train_result_free(train_result_t *result)
{
    free(result->epochs);
    result->epochs = NULL;
    result->nepochs = 0;
}
