/*
 * gcx_shrink_perf.c - how long after a rank's death do the survivors have a
 * working communicator again (gcx_comm_shrink)?
 *
 * Idea: every rank runs small allreduces in a loop; at iteration --kill-at
 * the victim (--victim, the last rank by default) _exits (as a killed
 * process: the kernel ends it, nothing is torn down). Each survivor notes
 * the wall-clock time (CLOCK_REALTIME: one clock for every process of the
 * host) at which its collective failed, calls gcx_comm_shrink and notes when
 * it returned, then checks an allreduce over the new communicator. The
 * survivors gather their times over it and its rank 0 prints one line:
 *
 *   SHRINK size N known_after_ms A shrink_ms B call_ms_max C
 *
 * A: from the death (the victim's stamp) to the first survivor's error;
 * B: from that first error (the failure is known) to the last survivor's
 * new communicator, the figure of issue 26; C: the longest gcx_comm_shrink
 * call. run_shrink.sh runs many jobs and takes medians.
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

int main(int argc, char **argv)
{
    const char  *stamp = NULL;
    long         kill_at = 50, count = 1024;
    int          victim = -1, rank, size, i;
    gcx_comm_t  *comm, *shrunk = NULL;
    gcx_status_t status = GCX_OK;
    float       *buf;
    double       t_err = 0, t_new, t_kill = 0, times[3], *all;
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
        } else {
            fprintf(stderr,
                    "usage: %s --stamp FILE [--kill-at N] [--count N] "
                    "[--victim R]\n", argv[0]);
            return 2;
        }
    }
    if (stamp == NULL || count < 1) {
        fprintf(stderr, "%s: --stamp FILE is required\n", argv[0]);
        return 2;
    }
    if (gcx_comm_create(NULL, NULL, &comm) != GCX_OK) {
        return 1;
    }
    rank = gcx_comm_rank(comm);
    size = gcx_comm_size(comm);
    victim = victim < 0 ? size - 1 : victim;
    buf = calloc((size_t)count, sizeof(*buf));
    if (buf == NULL || size < 2 || victim >= size) {
        fprintf(stderr, "gcx_shrink_perf: needs 2 ranks and a valid victim\n");
        return 1;
    }
    for (i = 0; status == GCX_OK; ++i) {
        if (rank == victim && i == kill_at) {
            f = fopen(stamp, "w");
            if (f != NULL) {
                fprintf(f, "%.9f\n", wall_now());
                fclose(f);
            }
            _exit(0);
        }
        status = gcx_allreduce(comm, GCX_IN_PLACE, buf, (size_t)count,
                               GCX_DT_F32, GCX_OP_SUM, NULL);
    }
    t_err  = wall_now();
    status = gcx_comm_shrink(comm, &shrunk);
    t_new  = wall_now();
    if (status != GCX_OK) {
        fprintf(stderr, "rank %d: gcx_comm_shrink: %s\n", rank,
                gcx_strerror(status));
        return 1;
    }
    /* the new communicator works and has every survivor */
    buf[0] = 1.0f;
    status = gcx_allreduce(shrunk, GCX_IN_PLACE, buf, 1, GCX_DT_F32,
                           GCX_OP_SUM, NULL);
    if (status != GCX_OK || buf[0] != (float)(size - 1)) {
        fprintf(stderr, "rank %d: the new communicator: %s, sum %g\n", rank,
                gcx_strerror(status), (double)buf[0]);
        return 1;
    }
    times[0] = t_err;
    times[1] = t_new;
    times[2] = t_new - t_err;
    all = calloc(3 * (size_t)gcx_comm_size(shrunk), sizeof(*all));
    if (all == NULL ||
        gcx_allgather(shrunk, times, all, 3, GCX_DT_F64, NULL) != GCX_OK) {
        return 1;
    }
    if (gcx_comm_rank(shrunk) == 0) {
        double first = all[0], last = all[1], call = all[2];

        usleep(100000); /* the victim's stamp is written before it died */
        f = fopen(stamp, "r");
        if (f == NULL || fscanf(f, "%lf", &t_kill) != 1) {
            t_kill = 0;
        }
        if (f != NULL) {
            fclose(f);
        }
        for (i = 1; i < gcx_comm_size(shrunk); ++i) {
            first = all[3 * i] < first ? all[3 * i] : first;
            last  = all[3 * i + 1] > last ? all[3 * i + 1] : last;
            call  = all[3 * i + 2] > call ? all[3 * i + 2] : call;
        }
        printf("SHRINK size %d known_after_ms %.2f shrink_ms %.2f "
               "call_ms_max %.2f\n",
               gcx_comm_size(shrunk), t_kill > 0 ? 1e3 * (first - t_kill) : -1.0,
               1e3 * (last - first), 1e3 * call);
        fflush(stdout);
    }
    free(all);
    free(buf);
    gcx_comm_destroy(shrunk);
    gcx_comm_destroy(comm);
    return 0;
}
