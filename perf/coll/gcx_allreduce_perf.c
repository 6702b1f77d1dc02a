/*
 * gcx_allreduce_perf - gcx allreduce in the nccl-tests format.
 *
 *   gcxrun -n 4 gcx_allreduce_perf -b 1M -e 64M -f 2
 *   mpirun -np 4 gcx_allreduce_perf ...      srun -n 4 gcx_allreduce_perf ...
 *
 * The communicator bootstraps from the launcher's environment; the
 * algorithm follows GCX_ALLREDUCE_ALGO.
 */
#include "perf_common.h"

#include <stdio.h>

static gcx_comm_t *perf_comm;

static int gcx_perf_init(int *argc, char ***argv, int *rank_p, int *size_p)
{
    gcx_status_t status;

    (void)argc;
    (void)argv;
    status = gcx_comm_create(NULL, NULL, &perf_comm);
    if (status != GCX_OK) {
        fprintf(stderr, "gcx_comm_create: %s\n", gcx_strerror(status));
        return -1;
    }
    *rank_p = gcx_comm_rank(perf_comm);
    *size_p = gcx_comm_size(perf_comm);
    return 0;
}

static int gcx_perf_allreduce(const void *sendbuf, void *recvbuf,
                              size_t count, gcx_dtype_t dtype, gcx_op_t op)
{
    gcx_status_t status =
        gcx_allreduce(perf_comm, sendbuf == recvbuf ? GCX_IN_PLACE : sendbuf,
                      recvbuf, count, dtype, op, NULL);
    if (status != GCX_OK) {
        fprintf(stderr, "gcx_allreduce: %s\n", gcx_strerror(status));
        return -1;
    }
    return 0;
}

static int gcx_perf_max_doubles(double *values, int n)
{
    return gcx_allreduce(perf_comm, GCX_IN_PLACE, values, (size_t)n,
                         GCX_DT_F64, GCX_OP_MAX, NULL) == GCX_OK ? 0 : -1;
}

static void gcx_perf_finalize(void)
{
    gcx_comm_destroy(perf_comm);
}

int main(int argc, char **argv)
{
    static const perf_backend_t backend = {
        .name        = "gcx",
        .init        = gcx_perf_init,
        .allreduce   = gcx_perf_allreduce,
        .max_doubles = gcx_perf_max_doubles,
        .finalize    = gcx_perf_finalize,
    };
    return perf_allreduce_main(argc, argv, &backend);
}
