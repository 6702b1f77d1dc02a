/*
 * gcx_failure_perf.c - how soon do the survivors of a killed rank know, and
 * how soon are they gone?
 *
 * Idea: every rank runs allreduces in a loop; at iteration --kill-at the
 * victim writes the wall-clock time (CLOCK_REALTIME: one clock for every
 * process of the host, network namespaces included) to --stamp FILE and
 * leaves at once: _exit (the kernel closes its sockets), or, with --how
 * linkdown, after taking its own network link down (a host that vanishes
 * without closing anything; emulated cluster only, needs root). Each
 * survivor prints one line: the status its collective failed with, the
 * seconds from the kill to that error and to the end of gcx_comm_destroy.
 * run.sh measures the process exits and looks for UCX's leak report.
 * Cost: one allreduce of --count floats per iteration until the kill.
 */
#include <gcx/gcx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s --stamp FILE [--kill-at N] [--count N] "
            "[--victim R] [--how exit|linkdown]\n",
            prog);
}

int main(int argc, char **argv)
{
    const char  *stamp = NULL, *how = "exit";
    long         kill_at = 20, count = 1 << 20;
    int          victim = -1, rank, size, i;
    gcx_comm_t  *comm;
    gcx_status_t status = GCX_OK;
    float       *buf;
    double       t_err, t_done, t_kill = 0;
    FILE        *f;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--stamp") && i + 1 < argc) {
            stamp = argv[++i];
        } else if (!strcmp(argv[i], "--kill-at") && i + 1 < argc) {
            kill_at = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            count = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--victim") && i + 1 < argc) {
            victim = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--how") && i + 1 < argc) {
            how = argv[++i];
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (stamp == NULL || count <= 0 ||
        (strcmp(how, "exit") && strcmp(how, "linkdown"))) {
        usage(argv[0]);
        return 2;
    }
    if (gcx_comm_create(NULL, NULL, &comm) != GCX_OK) {
        return 1;
    }
    rank = gcx_comm_rank(comm);
    size = gcx_comm_size(comm);
    victim = victim < 0 ? size - 1 : victim;
    buf = calloc((size_t)count, sizeof(*buf));
    if (buf == NULL) {
        return 1;
    }
    for (i = 0; status == GCX_OK; ++i) {
        if (i == kill_at && rank == victim) {
            if (!strcmp(how, "linkdown") &&
                system("ip link set dev eth0 down") != 0) {
                fprintf(stderr, "rank %d: cannot take eth0 down\n", rank);
            }
            f = fopen(stamp, "w");
            if (f != NULL) {
                fprintf(f, "%.6f\n", wall_now());
                fclose(f);
            }
            _exit(0);
        }
        status = gcx_allreduce(comm, GCX_IN_PLACE, buf, (size_t)count,
                               GCX_DT_F32, GCX_OP_SUM, NULL);
    }
    t_err = wall_now();
    gcx_comm_destroy(comm);
    t_done = wall_now();
    f = fopen(stamp, "r");
    if (f == NULL || fscanf(f, "%lf", &t_kill) != 1) {
        t_kill = 0;
    }
    if (f != NULL) {
        fclose(f);
    }
    printf("FAILURE rank %d error_after %.3f destroyed_after %.3f status %s\n",
           rank, t_kill > 0 ? t_err - t_kill : -1.0,
           t_kill > 0 ? t_done - t_kill : -1.0, gcx_strerror(status));
    free(buf);
    return 0;
}
