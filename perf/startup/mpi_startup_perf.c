/*
 * mpi_startup_perf.c - gcx_startup_perf.c's twin for Open MPI: MPI_Init +
 * one MPI_Barrier, then MPI_Finalize, with the same stamps and the same
 * STARTUP line (startup_common.h), so one run compares the two launchers
 * and libraries at each rank count.
 *
 *   mpirun --allow-run-as-root --oversubscribe -np P mpi_startup_perf --dir DIR
 *
 * Built by meson where it finds MPI (perf/startup/meson.build), otherwise
 * by run.sh with mpicc. Cost: MPI_Init itself; records written after
 * MPI_Finalize.
 */
#include "startup_common.h"

#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    startup_rec_t rec   = {0};
    const char   *dir   = NULL;
    double        wait_s = 120;
    int           rank = 0, size = 0;

    rec.start = startup_wall(); /* first: the process's start */
    rec.exec  = startup_exec_time();
    if (startup_opts(argc, argv, &dir, &wait_s) != 0) {
        return 2;
    }
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS ||
        MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "mpi_startup_perf: MPI_Init or MPI_Barrier failed\n");
        return 1;
    }
    rec.created = startup_wall();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rec.destroy_begin = startup_wall();
    MPI_Finalize();
    rec.destroy_end = startup_wall();
    return startup_report("mpi", dir, rank, size, &rec, wait_s);
}
