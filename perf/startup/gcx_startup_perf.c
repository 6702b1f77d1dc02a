/*
 * gcx_startup_perf.c - what starting and ending a gcx job costs at scale:
 * the world communicator's creation (+ one barrier) and its destruction.
 *
 *   gcxrun -n P -- gcx_startup_perf --dir DIR [--wait S]
 *
 * Idea: every rank stamps the wall clock at main's first line, creates the
 * world communicator as every gcxrun-launched program does
 * (gcx_comm_create(NULL, NULL, ...): identity from the environment, the
 * TCP star of src/core/bootstrap.c, UCX addresses allgathered, endpoints,
 * the wire-up check), does one gcx_barrier, stamps, destroys it, stamps.
 * Each rank writes its stamps and peak RSS to DIR; rank 0 prints one
 * STARTUP line (startup_common.h). mpi_startup_perf.c is the same program
 * for MPI_Init + MPI_Barrier + MPI_Finalize; run.sh runs both, alternating.
 * Cost: the creation itself; the records are written after destruction.
 */
#include "startup_common.h"

#include <gcx/gcx.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    startup_rec_t rec   = {0};
    const char   *dir   = NULL;
    double        wait_s = 120;
    gcx_comm_t   *comm;
    gcx_status_t  status;
    int           rank, size;

    rec.start = startup_wall(); /* first: the process's start */
    rec.exec  = startup_exec_time();
    if (startup_opts(argc, argv, &dir, &wait_s) != 0) {
        return 2;
    }
    status = gcx_comm_create(NULL, NULL, &comm);
    if (status == GCX_OK) {
        status = gcx_barrier(comm, NULL);
    }
    rec.created = startup_wall();
    if (status != GCX_OK) {
        fprintf(stderr, "gcx_startup_perf: creation or barrier: %s\n",
                gcx_strerror(status));
        return 1;
    }
    rank = gcx_comm_rank(comm);
    size = gcx_comm_size(comm);
    rec.destroy_begin = startup_wall();
    gcx_comm_destroy(comm);
    rec.destroy_end = startup_wall();
    return startup_report("gcx", dir, rank, size, &rec, wait_s);
}
