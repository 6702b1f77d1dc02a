/*
 * gcx_failure_perf.c - how soon do the survivors of a killed rank know, and
 * how soon are they gone?
 *
 * Idea: every rank runs allreduces in a loop; at iteration --kill-at the
 * victim stamps the time and leaves at once (victim_loop.h): _exit (the
 * kernel closes its sockets), or, with --how linkdown, after taking its
 * own network link down (a host that vanishes without closing anything;
 * emulated cluster only, needs root). Each
 * survivor prints one line: the status its collective failed with, the
 * seconds from the kill to that error and to the end of gcx_comm_destroy.
 * run.sh measures the process exits and looks for UCX's leak report.
 * Cost: one allreduce of --count floats per iteration until the kill.
 */
#include "victim_loop.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    victim_opts_t opts = {NULL, 20, 1 << 20, -1, "exit"};
    int           rank;
    gcx_comm_t   *comm;
    gcx_status_t  status;
    float        *buf;
    double        t_err, t_done, t_kill;

    if (victim_opts_parse(argc, argv, 1, &opts) != 0) {
        return 2;
    }
    if (gcx_comm_create(NULL, NULL, &comm) != GCX_OK) {
        return 1;
    }
    rank = gcx_comm_rank(comm);
    buf  = calloc((size_t)opts.count, sizeof(*buf));
    if (buf == NULL) {
        return 1;
    }
    status = victim_loop(comm, &opts, buf);
    t_err  = victim_wall_now();
    gcx_comm_destroy(comm);
    t_done = victim_wall_now();
    t_kill = victim_stamp_read(opts.stamp);
    printf("FAILURE rank %d error_after %.3f destroyed_after %.3f status %s\n",
           rank, t_kill > 0 ? t_err - t_kill : -1.0,
           t_kill > 0 ? t_done - t_kill : -1.0, gcx_strerror(status));
    free(buf);
    return 0;
}
