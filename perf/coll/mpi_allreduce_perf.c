/*
 * mpi_allreduce_perf - the same driver over MPI_Allreduce (Open MPI), so
 * gcx and MPI are measured by identical code in one run:
 *
 *   mpirun --allow-run-as-root -np 4 mpi_allreduce_perf -b 1M -e 64M
 */
#include "perf_common.h"

#include <mpi.h>
#include <stdio.h>

static MPI_Datatype mpi_perf_type(gcx_dtype_t dtype)
{
    switch (dtype) {
    case GCX_DT_F64: return MPI_DOUBLE;
    case GCX_DT_I32: return MPI_INT32_T;
    case GCX_DT_I64: return MPI_INT64_T;
    default: return MPI_FLOAT;
    }
}

static MPI_Op mpi_perf_op(gcx_op_t op)
{
    switch (op) {
    case GCX_OP_MAX: return MPI_MAX;
    case GCX_OP_MIN: return MPI_MIN;
    default: return MPI_SUM;
    }
}

static int mpi_perf_init(int *argc, char ***argv, int *rank_p, int *size_p)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank_p);
    MPI_Comm_size(MPI_COMM_WORLD, size_p);
    return 0;
}

static int mpi_perf_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                              gcx_dtype_t dtype, gcx_op_t op)
{
    int size, rc;

    if (dtype == GCX_DT_F16 || dtype == GCX_DT_BF16 || op == GCX_OP_AVG ||
        count > 2147483647u) {
        fprintf(stderr, "mpi_allreduce_perf: only float/double/int32/int64 "
                "with sum/max/min\n");
        return -1;
    }
    rc = MPI_Allreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf,
                       (int)count, mpi_perf_type(dtype), mpi_perf_op(op),
                       MPI_COMM_WORLD);
    (void)size;
    return rc == MPI_SUCCESS ? 0 : -1;
}

static int mpi_perf_max_doubles(double *values, int n)
{
    return MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_MAX,
                         MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static void mpi_perf_finalize(void)
{
    MPI_Finalize();
}

int main(int argc, char **argv)
{
    static const perf_backend_t backend = {
        .name        = "mpi",
        .init        = mpi_perf_init,
        .allreduce   = mpi_perf_allreduce,
        .max_doubles = mpi_perf_max_doubles,
        .finalize    = mpi_perf_finalize,
    };
    return perf_allreduce_main(argc, argv, &backend);
}
