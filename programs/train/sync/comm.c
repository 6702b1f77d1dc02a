/*
 * comm.c - thin blocking wrappers over the gcx communicator; identities when
 * there is none (one process). Costs are those of the gcx collectives.
 */
#include "sync/comm.h"

#include <gcx/sparse.h>
#include "util.h"

#include <stdlib.h>

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
}

gcx_status_t train_comm_open(train_comm_t *tc)
{
    gcx_comm_t *comm;
    gcx_status_t status;

    if (!train_launched()) {
        train_info("no launcher environment (GCX_RANK, RANK, ...): one "
                   "process without a communicator; use gcxrun -n N for N "
                   "ranks");
        train_comm_local(tc);
        return GCX_OK;
    }
    status = gcx_comm_create(NULL, NULL, &comm);
    if (status != GCX_OK) {
        train_error("cannot create the communicator: %s (run under gcxrun, "
                    "or set GCX_RANK, GCX_WORLD_SIZE, GCX_ROOT_ADDR and "
                    "GCX_ROOT_PORT)",
                    gcx_strerror(status));
        return status;
    }
    tc->comm = comm;
    tc->rank = gcx_comm_rank(comm);
    tc->size = gcx_comm_size(comm);
    return GCX_OK;
}

void train_comm_close(train_comm_t *tc)
{
    if (tc->comm != NULL) {
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

/* p2p tags of train_comm_allreduce_live: values up, results down */
#define TRAIN_TAG_LIVE_UP   0x67780001
#define TRAIN_TAG_LIVE_DOWN 0x67780002

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

gcx_status_t train_comm_allreduce_live(train_comm_t *tc, void *buf,
                                       size_t count, gcx_dtype_t dtype,
                                       gcx_op_t op, int root, uint64_t gone)
{
    size_t bytes = count * gcx_dtype_size(dtype);
    gcx_status_t status = GCX_OK;
    void *tmp;
    int r, peer = -1;

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
    if (tc->rank != root) {
        peer = root;
        status = gcx_send(tc->comm, buf, count, dtype, root, TRAIN_TAG_LIVE_UP,
                          NULL);
        if (status == GCX_OK) {
            status = gcx_recv(tc->comm, buf, count, dtype, root,
                              TRAIN_TAG_LIVE_DOWN, NULL);
        }
    } else {
        tmp = malloc(bytes > 0 ? bytes : 1);
        if (tmp == NULL) {
            return GCX_ERR_NOMEM;
        }
        for (r = 0; r < tc->size && status == GCX_OK; r++) {
            if (r == root || (r < 64 && (gone >> r & 1))) {
                continue;
            }
            peer = r;
            status = gcx_recv(tc->comm, tmp, count, dtype, r,
                              TRAIN_TAG_LIVE_UP, NULL);
            if (status == GCX_OK) {
                train_combine(buf, tmp, count, dtype, op);
            }
        }
        for (r = 0; r < tc->size && status == GCX_OK; r++) {
            if (r != root && !(r < 64 && (gone >> r & 1))) {
                peer = r;
                status = gcx_send(tc->comm, buf, count, dtype, r,
                                  TRAIN_TAG_LIVE_DOWN, NULL);
            }
        }
        free(tmp);
    }
    if (status != GCX_OK) {
        train_error("allreduce of %zu %s (%s) over the live ranks through "
                    "rank %d failed with rank %d: %s",
                    count, gcx_dtype_name(dtype), gcx_op_name(op), root, peer,
                    gcx_strerror(status));
    }
    return status;
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
