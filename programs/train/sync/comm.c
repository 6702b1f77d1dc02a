/*
 * comm.c - thin blocking wrappers over the gcx communicator; identities when
 * there is none (one process). Costs are those of the gcx collectives.
 */
#include "sync/comm.h"

#include <gcx/sparse.h>
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/*
 * Variables by which a launcher tells a process its rank (DESIGN.md 2). With
 * none of them set, gcx-train is a plain single process.
 */
static const char *const train_rank_vars[] = {
    "GCX_RANK", "RANK",      "OMPI_COMM_WORLD_RANK",
    "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
};

static int train_launched(void)
{
    size_t i;

    for (i = 0; i < sizeof(train_rank_vars) / sizeof(train_rank_vars[0]); i++) {
        if (getenv(train_rank_vars[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

void train_comm_local(train_comm_t *tc)
{
    tc->comm = NULL;
    tc->rank = 0;
    tc->size = 1;
    tc->live = NULL;
    tc->live_root = -1;
    tc->live_gone = NULL;
    tc->live_kill = 0;
}

gcx_status_t train_comm_progress_thread(train_comm_t *tc)
{
    gcx_status_t status;

    if (tc->comm == NULL || getenv("GCX_PROGRESS_THREAD") != NULL) {
        return GCX_OK;
    }
    status = gcx_progress_thread_enable(tc->comm);
    if (status != GCX_OK) {
        train_error("cannot start gcx's progress thread: %s",
                    gcx_strerror(status));
    }
    return status;
}

gcx_status_t train_comm_open(train_comm_t *tc, int progress_thread)
{
    gcx_config_t *config = NULL;
    gcx_comm_t *comm;
    gcx_status_t status;

    if (!train_launched()) {
        train_info("no launcher environment (GCX_RANK, RANK, ...): one "
                   "process without a communicator; use gcxrun -n N for N "
                   "ranks");
        train_comm_local(tc);
        return GCX_OK;
    }
    if (progress_thread && getenv("GCX_PROGRESS_THREAD") == NULL) {
        status = gcx_config_read(&config);
        if (status == GCX_OK) {
            status = gcx_config_set(config, "PROGRESS_THREAD", "y");
        }
        if (status != GCX_OK) {
            gcx_config_release(config);
            return status;
        }
    }
    status = gcx_comm_create(NULL, config, &comm);
    gcx_config_release(config);
    if (status != GCX_OK) {
        train_error("cannot create the communicator: %s (run under gcxrun, "
                    "or set GCX_RANK, GCX_WORLD_SIZE, GCX_ROOT_ADDR and "
                    "GCX_ROOT_PORT)",
                    gcx_strerror(status));
        return status;
    }
    train_comm_local(tc);
    tc->comm = comm;
    tc->rank = gcx_comm_rank(comm);
    tc->size = gcx_comm_size(comm);
    return GCX_OK;
}

/* Destroy the live channels (pair communicators), if open. */
static void train_comm_live_close(train_comm_t *tc)
{
    int r;

    for (r = 0; tc->live != NULL && r < tc->size; r++) {
        if (tc->live[r] != NULL) {
            gcx_comm_destroy(tc->live[r]);
        }
    }
    free(tc->live);
    free(tc->live_gone);
    tc->live = NULL;
    tc->live_gone = NULL;
    tc->live_root = -1;
}

void train_comm_close(train_comm_t *tc)
{
    if (tc->comm != NULL) {
        train_comm_live_close(tc);
        gcx_comm_destroy(tc->comm);
        tc->comm = NULL;
    }
}

gcx_status_t train_comm_allreduce(train_comm_t *tc, void *buf, size_t count,
                                  gcx_dtype_t dtype, gcx_op_t op)
{
    gcx_status_t status;

    if (tc->comm == NULL) {
        return GCX_OK;
    }
    status = gcx_allreduce(tc->comm, GCX_IN_PLACE, buf, count, dtype, op, NULL);
    if (status != GCX_OK) {
        train_error("allreduce of %zu %s (%s) failed: %s", count,
                    gcx_dtype_name(dtype), gcx_op_name(op),
                    gcx_strerror(status));
    }
    return status;
}

/* p2p tags of train_comm_allreduce_live on a pair channel: values up,
 * results down; the tag of the pair channels' creation */
#define TRAIN_TAG_LIVE_UP   0x67780001
#define TRAIN_TAG_LIVE_DOWN 0x67780002
#define TRAIN_TAG_LIVE_PAIR 0x67780100

/* acc[i] = op(acc[i], in[i]) for F64 or I64 values */
static void train_combine(void *acc, const void *in, size_t count,
                          gcx_dtype_t dtype, gcx_op_t op)
{
    size_t i;

    for (i = 0; i < count; i++) {
        if (dtype == GCX_DT_F64) {
            double *a = (double *)acc + i, b = ((const double *)in)[i];

            *a = op == GCX_OP_SUM ? *a + b
                 : op == GCX_OP_MAX ? (b > *a ? b : *a)
                                    : (b < *a ? b : *a);
        } else {
            int64_t *a = (int64_t *)acc + i, b = ((const int64_t *)in)[i];

            *a = op == GCX_OP_SUM ? *a + b
                 : op == GCX_OP_MAX ? (b > *a ? b : *a)
                                    : (b < *a ? b : *a);
        }
    }
}

/*
 * The configuration of a rank's pair channel: the parent's, but a rank
 * other than the root waits 2 GCX_TIMEOUT + 2 s there, so that the root
 * can wait GCX_TIMEOUT for a slow rank (then leave it out) without the
 * others, which wait for the root meanwhile, timing out first. *cfg_p is
 * NULL (the parent's) on the root or when the variables cannot be read.
 */
static void train_live_config(train_comm_t *tc, gcx_config_t **cfg_p)
{
    char value[64];
    double timeout;

    *cfg_p = NULL;
    if (tc->rank == tc->live_root ||
        gcx_config_get(gcx_comm_config(tc->comm), "TIMEOUT", value,
                       sizeof(value)) != GCX_OK ||
        sscanf(value, "%lf", &timeout) != 1 ||
        gcx_config_read(cfg_p) != GCX_OK) {
        return;
    }
    snprintf(value, sizeof(value), "%.17g", 2 * timeout + 2);
    if (gcx_config_set(*cfg_p, "TIMEOUT", value) != GCX_OK) {
        gcx_config_release(*cfg_p);
        *cfg_p = NULL;
    }
}

gcx_status_t train_comm_live_open(train_comm_t *tc, int root)
{
    gcx_status_t status = GCX_OK;
    gcx_config_t *cfg;
    int r, ranks[2];

    if (tc->comm == NULL || tc->live != NULL) {
        return GCX_OK;
    }
    tc->live = calloc((size_t)tc->size, sizeof(*tc->live));
    tc->live_gone = calloc(GCX_WSET_WORDS(tc->size), sizeof(*tc->live_gone));
    if (tc->live == NULL || tc->live_gone == NULL) {
        train_comm_live_close(tc);
        return GCX_ERR_NOMEM;
    }
    tc->live_root = root;
    train_live_config(tc, &cfg);
    ranks[0] = root;
    for (r = 0; r < tc->size && status == GCX_OK; r++) {
        if (r == root || (tc->rank != root && r != tc->rank)) {
            continue;
        }
        ranks[1] = r;
        status = gcx_comm_create_group(tc->comm, 2, ranks,
                                       TRAIN_TAG_LIVE_PAIR + r, cfg,
                                       &tc->live[r]);
    }
    gcx_config_release(cfg);
    if (status != GCX_OK) {
        train_error("cannot open the channels to rank %d for reductions "
                    "over the live ranks: %s",
                    root, gcx_strerror(status));
        train_comm_live_close(tc);
    }
    return status;
}

/* Root: rank @p r is lost to the live allreduce (@p status): its channel
 * goes, and it counts gone from now on. */
static void train_live_lose(train_comm_t *tc, int r, gcx_status_t status)
{
    train_info("rank %d is gone for the reductions over the live ranks "
               "(%s); going on without it",
               r, gcx_strerror(status));
    gcx_wset_add(tc->live_gone, r);
    gcx_comm_destroy(tc->live[r]);
    tc->live[r] = NULL;
}

/* Test hook: die here (GCX_TRAIN_KILL=R:S:send|recv), or stall for
 * GCX_TIMEOUT + 2 s before sending (R:S:stall, as a SIGSTOP would). */
static void train_live_kill(train_comm_t *tc, int when)
{
    char value[64];
    double timeout = 0;
    struct timespec ts;

    if (tc->live_kill == 3 && when == 1) {
        tc->live_kill = 0;
        if (gcx_config_get(gcx_comm_config(tc->comm), "TIMEOUT", value,
                           sizeof(value)) == GCX_OK) {
            sscanf(value, "%lf", &timeout);
        }
        train_info("GCX_TRAIN_KILL: stalling %.0f s (GCX_TIMEOUT + 2 s)",
                   timeout + 2);
        ts.tv_sec = (time_t)(timeout + 2);
        ts.tv_nsec = 0;
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    if (tc->live_kill == when) {
        fflush(NULL);
        raise(SIGKILL);
    }
}

gcx_status_t train_comm_allreduce_live(train_comm_t *tc, void *buf,
                                       size_t count, gcx_dtype_t dtype,
                                       gcx_op_t op, const uint64_t *gone,
                                       train_live_fill_fn_t fill,
                                       void *fill_ctx)
{
    size_t w, words = GCX_WSET_WORDS(tc->size);
    size_t bytes = count * gcx_dtype_size(dtype);
    gcx_status_t status = GCX_OK;
    int r, root = tc->live_root;
    gcx_request_t **reqs;
    uint64_t *out; /* gone, the ranks lost before and those lost now */
    void *tmp;

    if (tc->comm == NULL) {
        return GCX_OK;
    }
    if ((dtype != GCX_DT_F64 && dtype != GCX_DT_I64) ||
        (op != GCX_OP_SUM && op != GCX_OP_MAX && op != GCX_OP_MIN)) {
        train_error("allreduce over the live ranks: %s %s is not supported "
                    "(f64 or i64; sum, max or min)",
                    gcx_dtype_name(dtype), gcx_op_name(op));
        return GCX_ERR_UNSUPPORTED;
    }
    if (tc->live == NULL || root < 0) {
        train_error("allreduce over the live ranks: no channels "
                    "(train_comm_live_open was not called)");
        return GCX_ERR_INVALID;
    }
    if (tc->rank != root) {
        /* rank 0 of the pair channel is the root */
        train_live_kill(tc, 1);
        status = gcx_send(tc->live[tc->rank], buf, count, dtype, 0,
                          TRAIN_TAG_LIVE_UP, NULL);
        train_live_kill(tc, 2);
        if (status == GCX_OK) {
            status = gcx_recv(tc->live[tc->rank], buf, count, dtype, 0,
                              TRAIN_TAG_LIVE_DOWN, NULL);
        }
        if (status != GCX_OK) {
            train_error("allreduce of %zu %s (%s) over the live ranks through "
                        "rank %d failed: %s",
                        count, gcx_dtype_name(dtype), gcx_op_name(op), root,
                        gcx_strerror(status));
        }
        return status;
    }
    /* every value is received at once, so GCX_TIMEOUT counts from the
     * same moment for all: one slow rank costs one GCX_TIMEOUT, not one
     * per slow rank; they are combined in rank order */
    tmp = malloc((bytes > 0 ? bytes : 1) * (size_t)tc->size);
    reqs = calloc((size_t)tc->size, sizeof(*reqs));
    out = calloc(words, sizeof(*out));
    if (tmp == NULL || reqs == NULL || out == NULL) {
        free(tmp);
        free(reqs);
        free(out);
        return GCX_ERR_NOMEM;
    }
    for (w = 0; w < words; w++) {
        out[w] = (gone != NULL ? gone[w] : 0) | tc->live_gone[w];
    }
    for (r = 0; r < tc->size; r++) {
        if (r != root && !gcx_wset_has(out, r) && tc->live[r] != NULL &&
            gcx_recv(tc->live[r], (char *)tmp + (size_t)r * bytes, count,
                     dtype, 1, TRAIN_TAG_LIVE_UP, &reqs[r]) != GCX_OK) {
            reqs[r] = NULL; /* not started: lost below */
            train_live_lose(tc, r, GCX_ERR_INVALID);
        }
    }
    for (r = 0; r < tc->size; r++) {
        if (r == root) {
            continue;
        }
        if (reqs[r] != NULL) {
            /* rank 1 of the pair channel is the other rank */
            status = gcx_wait(reqs[r]);
            gcx_request_free(reqs[r]);
            if (status == GCX_OK) {
                train_combine(buf, (char *)tmp + (size_t)r * bytes, count,
                              dtype, op);
                continue;
            }
            train_live_lose(tc, r, status);
        }
        gcx_wset_add(out, r);
        if (fill != NULL) {
            fill(fill_ctx, r, buf);
        }
    }
    free(reqs);
    free(tmp);
    for (r = 0; r < tc->size; r++) {
        if (r == root || gcx_wset_has(out, r) || tc->live[r] == NULL) {
            continue;
        }
        status = gcx_send(tc->live[r], buf, count, dtype, 1,
                          TRAIN_TAG_LIVE_DOWN, NULL);
        if (status != GCX_OK) {
            /* it has the others' values but not the result: it is the
             * one that fails (no answer), not the others */
            train_live_lose(tc, r, status);
        }
    }
    free(out);
    return GCX_OK;
}

gcx_status_t train_comm_broadcast(train_comm_t *tc, void *buf, size_t count,
                                  gcx_dtype_t dtype, int root)
{
    gcx_status_t status;

    if (tc->comm == NULL) {
        return GCX_OK;
    }
    status = gcx_broadcast(tc->comm, buf, count, dtype, root, NULL);
    if (status != GCX_OK) {
        train_error("broadcast of %zu %s from rank %d failed: %s", count,
                    gcx_dtype_name(dtype), root, gcx_strerror(status));
    }
    return status;
}

gcx_status_t train_comm_sparse_average(train_comm_t *tc,
                                       const gcx_sparse_vec_t *in,
                                       float *out, double *bytes_p)
{
    gcx_sparse_allreduce_stats_t stats;
    gcx_status_t                 status;
    size_t                       i;

    if (tc->comm == NULL) {
        *bytes_p = 0;
        return gcx_sparse_vec_to_dense(in, out);
    }
    status = gcx_sparse_allreduce(tc->comm, in, out, NULL, NULL, NULL);
    if (status != GCX_OK) {
        train_error("sparse allreduce of %zu of %zu entries failed: %s",
                    in->nnz, in->dense_len, gcx_strerror(status));
        return status;
    }
    for (i = 0; i < in->dense_len; i++) {
        out[i] /= (float)tc->size;
    }
    *bytes_p = gcx_sparse_allreduce_last_stats(tc->comm, &stats) == GCX_OK ?
                   (double)stats.bytes_sent : 0.0;
    return GCX_OK;
}
