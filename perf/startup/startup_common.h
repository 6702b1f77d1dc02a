/*
 * startup_common.h - what gcx_startup_perf.c and mpi_startup_perf.c share:
 * the wall-clock stamps, each rank's record file and rank 0's one line.
 *
 * Idea: every rank stamps CLOCK_REALTIME (one clock for every process of
 * the host) at main's first line, after the communicator exists and one
 * barrier is done, and around its destruction; it writes them with its
 * peak RSS (getrusage) to DIR/r<rank> (written under another name, then
 * renamed, so a file that exists is complete). Rank 0, once its own
 * communicator is destroyed, waits for all P files and prints
 *
 *   STARTUP <name> ranks P create_s A create_from_first_s B destroy_s C
 *     rss_kb D start_spread_s E load_s F first_start_s G last_start_s H
 *
 * A: max over ranks of (created - that rank's start); B: last created -
 * earliest start; C: max destroy time; D: max peak RSS; E: latest start -
 * earliest start (how long the launcher took to start them all); F: max
 * over ranks of main's first line - exec (from /proc/self/stat, 10 ms
 * ticks: the dynamic loader's share); G/H: earliest/latest start after
 * STARTUP_T0 (the launcher's start, set by run.sh; -1 without it).
 * Cost: one small file per rank, written after destruction, so none of
 * it is inside the measured intervals.
 */
#ifndef GCX_PERF_STARTUP_COMMON_H
#define GCX_PERF_STARTUP_COMMON_H

typedef struct startup_rec {
    double start;         /* main's first line */
    double exec;          /* the process's exec, from /proc (0: unknown) */
    double created;       /* communicator + one barrier done */
    double destroy_begin; /* just before destruction */
    double destroy_end;   /* just after */
    long   maxrss_kb;     /* getrusage peak, after destruction */
} startup_rec_t;

/* CLOCK_REALTIME in seconds. */
double startup_wall(void);

/* The process's start (exec) as wall-clock seconds, 10 ms resolution; 0
 * when /proc does not say. */
double startup_exec_time(void);

/* Parses --dir DIR and --wait S; returns 0, or 2 after the usage. */
int startup_opts(int argc, char **argv, const char **dir_p, double *wait_p);

/* Fills maxrss_kb, writes @p rec to DIR/r<rank>; on rank 0 waits up to
 * @p wait_s seconds for every rank's file and prints the STARTUP line.
 * Returns 0 on success. */
int startup_report(const char *name, const char *dir, int rank, int size,
                   startup_rec_t *rec, double wait_s);

#endif
