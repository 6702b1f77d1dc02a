/*
 * gcx_comm_perf.c - what a communicator costs: gcx_comm_split, gcx_comm_dup,
 * gcx_comm_create_group (the ranks of one parity, made by them only: a
 * 4-rank world gives {0,2} and {1,3}) and gcx_comm_create (through an OOB
 * over the world communicator, as a framework's store would be), each
 * followed by gcx_comm_destroy, and the resident memory and open
 * descriptors after many split/destroy cycles.
 *
 *   gcxrun -n 4 -- gcx_comm_perf [-n ITERS]
 *
 * Prints, for rank 0, the median and the fastest time of each over ITERS
 * runs (every rank synchronised by a barrier before each), so that one run
 * compares the three. Built against a library without gcx_comm_split (no
 * GCX_UNDEFINED), it times creation only.
 */
#include "perf_common.h"

#include <gcx/gcx.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static gcx_status_t world_allgather(const void *sendbuf, void *recvbuf,
                                    size_t len, void *ctx)
{
    return gcx_allgather(ctx, sendbuf, recvbuf, len, GCX_DT_U8, NULL);
}

static int open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    int  n   = 0;

    while (dir != NULL && readdir(dir) != NULL) {
        ++n;
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return n;
}

static long resident_kb(void)
{
    long  pages = 0, resident = 0;
    FILE *f     = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) {
            resident = 0;
        }
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

enum { OP_CREATE, OP_SPLIT, OP_DUP, OP_GROUP, OP_LAST };
static const char *const op_names[] = {"create", "split", "dup", "group"};

#define GCX_PERF_MAX_GROUP 1024

static gcx_status_t run_op(gcx_comm_t *world, int op, gcx_comm_t **comm_p)
{
    gcx_oob_t oob = {world_allgather, world, gcx_comm_rank(world),
                     gcx_comm_size(world)};

    switch (op) {
    case OP_CREATE:
        return gcx_comm_create(&oob, gcx_comm_config(world), comm_p);
#ifdef GCX_UNDEFINED
    case OP_SPLIT:
        return gcx_comm_split(world, gcx_comm_rank(world) % 2,
                              gcx_comm_rank(world), comm_p);
    case OP_DUP:
        return gcx_comm_dup(world, comm_p);
    case OP_GROUP: {
        int ranks[GCX_PERF_MAX_GROUP], n = 0, r;

        for (r = gcx_comm_rank(world) % 2;
             r < gcx_comm_size(world) && n < GCX_PERF_MAX_GROUP; r += 2) {
            ranks[n++] = r;
        }
        return gcx_comm_create_group(world, n, ranks, 0, NULL, comm_p);
    }
#endif
    default:
        return GCX_ERR_UNSUPPORTED;
    }
}

int main(int argc, char **argv)
{
    gcx_comm_t *world = NULL, *comm;
    int         iters = 200, op, i, rank, fds0;
    double     *t, t0;
    long        rss0;

    if (argc == 3 && strcmp(argv[1], "-n") == 0) {
        iters = atoi(argv[2]);
    }
    if (iters < 1 || gcx_comm_create(NULL, NULL, &world) != GCX_OK) {
        fprintf(stderr, "usage: gcx_comm_perf [-n ITERS] (under a launcher)\n");
        return 1;
    }
    rank = gcx_comm_rank(world);
    t    = calloc((size_t)iters, sizeof(*t));
    if (rank == 0) {
        printf("# %d ranks, %d runs each; times of the call plus destroy\n",
               gcx_comm_size(world), iters);
        printf("# %-8s %12s %12s\n", "call", "median_us", "min_us");
    }
    for (op = 0; op < OP_LAST; ++op) {
#ifndef GCX_UNDEFINED
        if (op != OP_CREATE) {
            continue;
        }
#endif
        for (i = 0; i < iters; ++i) {
            gcx_barrier(world, NULL);
            t0 = now();
            if (run_op(world, op, &comm) != GCX_OK) {
                fprintf(stderr, "rank %d: %s failed\n", rank, op_names[op]);
                return 1;
            }
            gcx_comm_destroy(comm);
            t[i] = now() - t0;
        }
        if (rank == 0) {
            double med = perf_median(t, iters); /* sorts t */

            printf("  %-8s %12.1f %12.1f\n", op_names[op], med * 1e6,
                   t[0] * 1e6);
        }
    }
#ifdef GCX_UNDEFINED
    fds0 = open_fds();
    rss0 = resident_kb();
    for (i = 0; i < 1000; ++i) {
        if (run_op(world, OP_SPLIT, &comm) != GCX_OK) {
            return 1;
        }
        gcx_comm_destroy(comm);
    }
    if (rank == 0) {
        printf("# 1000 split/destroy cycles: open fds %d -> %d, resident "
               "%ld -> %ld KB\n", fds0, open_fds(), rss0, resident_kb());
    }
#else
    (void)fds0;
    (void)rss0;
#endif
    free(t);
    gcx_comm_destroy(world);
    return 0;
}
