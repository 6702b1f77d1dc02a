/*
 * gcx_shrink_perf.c - how long after a rank's death do the survivors have a
 * working communicator again (gcx_comm_shrink)?
 *
 * Idea: every rank runs small allreduces in a loop; at iteration --kill-at
 * the victim (--victim, the last rank by default) _exits (as a killed
 * process: the kernel ends it, nothing is torn down; victim_loop.h). Each
 * survivor notes the wall-clock time (CLOCK_REALTIME: one clock for every
 * process of the host) at which its collective failed, calls
 * gcx_comm_shrink and notes when
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
#include "victim_loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    victim_opts_t opts = {NULL, 50, 1024, -1, "exit"};
    int           size, i;
    gcx_comm_t   *comm, *shrunk = NULL;
    gcx_status_t  status;
    float        *buf;
    double        t_err, t_new, t_kill, times[3], *all;

    if (victim_opts_parse(argc, argv, 0, &opts) != 0) {
        return 2;
    }
    if (gcx_comm_create(NULL, NULL, &comm) != GCX_OK) {
        return 1;
    }
    size = gcx_comm_size(comm);
    buf  = calloc((size_t)opts.count, sizeof(*buf));
    if (buf == NULL || size < 2 || opts.victim >= size) {
        fprintf(stderr, "gcx_shrink_perf: needs 2 ranks and a valid victim\n");
        return 1;
    }
    (void)victim_loop(comm, &opts, buf);
    t_err  = victim_wall_now();
    status = gcx_comm_shrink(comm, &shrunk);
    t_new  = victim_wall_now();
    if (status != GCX_OK) {
        fprintf(stderr, "rank %d: gcx_comm_shrink: %s\n", gcx_comm_rank(comm),
                gcx_strerror(status));
        return 1;
    }
    /* the new communicator works and has every survivor */
    buf[0] = 1.0f;
    status = gcx_allreduce(shrunk, GCX_IN_PLACE, buf, 1, GCX_DT_F32,
                           GCX_OP_SUM, NULL);
    if (status != GCX_OK || buf[0] != (float)(size - 1)) {
        fprintf(stderr, "rank %d: the new communicator: %s, sum %g\n",
                gcx_comm_rank(comm),
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
        t_kill = victim_stamp_read(opts.stamp);
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
