/*
 * victim_loop.h - what the killed-rank drivers (gcx_failure_perf.c,
 * gcx_shrink_perf.c) share: their options, the allreduce loop in which the
 * victim leaves, and the victim's time stamp.
 *
 * Idea: every rank runs allreduces of --count floats; at iteration
 * --kill-at the victim (--victim, the last rank by default) writes the
 * wall-clock time (CLOCK_REALTIME: one clock for every process of the host,
 * network namespaces included) to --stamp FILE and leaves at once (_exit:
 * the kernel closes what it had, as for a killed process; --how kill
 * raises SIGKILL instead, a real kill; --how linkdown first takes its own
 * network link down). The survivors read the stamp to
 * time what followed. Cost: nothing beyond the loop's allreduces.
 */
#ifndef GCX_PERF_VICTIM_LOOP_H
#define GCX_PERF_VICTIM_LOOP_H

#include <gcx/gcx.h>

typedef struct victim_opts {
    const char *stamp;   /* --stamp FILE (required) */
    long        kill_at; /* --kill-at N: the victim leaves at iteration N */
    long        count;   /* --count N: floats per allreduce */
    int         victim;  /* --victim R; -1: the last rank */
    const char *how;     /* --how exit|kill|linkdown (linkdown only where
                            allowed) */
} victim_opts_t;

/* CLOCK_REALTIME in seconds. */
double victim_wall_now(void);

/* Parses argv into @p opts (its fields hold the defaults on entry); --how
 * linkdown only if @p with_how. Returns 0, or 2 after printing the usage. */
int victim_opts_parse(int argc, char **argv, int with_how,
                      victim_opts_t *opts);

/* Allreduces @p buf (opts->count floats) on @p comm until one fails, whose
 * status it returns; on the victim it never returns. */
gcx_status_t victim_loop(gcx_comm_t *comm, const victim_opts_t *opts,
                         float *buf);

/* The victim's stamp, or 0 when there is none. */
double victim_stamp_read(const char *path);

#endif
