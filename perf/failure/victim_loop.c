/*
 * victim_loop.c - the killed-rank drivers' shared options, loop and stamp
 * (victim_loop.h).
 */
#include "victim_loop.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double victim_wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int victim_usage(const char *prog, int with_how)
{
    fprintf(stderr,
            "usage: %s --stamp FILE [--kill-at N] [--count N] "
            "[--victim R] [--how exit|kill%s]\n",
            prog, with_how ? "|linkdown" : "");
    return 2;
}

int victim_opts_parse(int argc, char **argv, int with_how,
                      victim_opts_t *opts)
{
    int i;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--stamp") && i + 1 < argc) {
            opts->stamp = argv[++i];
        } else if (!strcmp(argv[i], "--kill-at") && i + 1 < argc) {
            opts->kill_at = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            opts->count = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--victim") && i + 1 < argc) {
            opts->victim = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--how") && i + 1 < argc) {
            opts->how = argv[++i];
        } else {
            return victim_usage(argv[0], with_how);
        }
    }
    if (opts->stamp == NULL || opts->count <= 0 ||
        (strcmp(opts->how, "exit") && strcmp(opts->how, "kill") &&
         (!with_how || strcmp(opts->how, "linkdown")))) {
        return victim_usage(argv[0], with_how);
    }
    return 0;
}

gcx_status_t victim_loop(gcx_comm_t *comm, const victim_opts_t *opts,
                         float *buf)
{
    int          rank   = gcx_comm_rank(comm);
    int          victim = opts->victim < 0 ? gcx_comm_size(comm) - 1 :
                                             opts->victim;
    gcx_status_t status = GCX_OK;
    long         i;
    FILE        *f;

    for (i = 0; status == GCX_OK; ++i) {
        if (i == opts->kill_at && rank == victim) {
            if (!strcmp(opts->how, "linkdown") &&
                system("ip link set dev eth0 down") != 0) {
                fprintf(stderr, "rank %d: cannot take eth0 down\n", rank);
            }
            f = fopen(opts->stamp, "w");
            if (f != NULL) {
                fprintf(f, "%.9f\n", victim_wall_now());
                fclose(f);
            }
            if (!strcmp(opts->how, "kill")) {
                raise(SIGKILL); /* as an OOM kill or scancel -s KILL */
            }
            _exit(0);
        }
        status = gcx_allreduce(comm, GCX_IN_PLACE, buf, (size_t)opts->count,
                               GCX_DT_F32, GCX_OP_SUM, NULL);
    }
    return status;
}

double victim_stamp_read(const char *path)
{
    FILE  *f = fopen(path, "r");
    double t = 0;

    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%lf", &t) != 1) {
        t = 0;
    }
    fclose(f);
    return t;
}
