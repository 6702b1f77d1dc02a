/*
 * gcx_overlap_perf.c - does an allreduce posted before a compute phase
 * finish during it? Without gcx's progress thread it advances only inside
 * gcx calls, so the wait after the compute is about the allreduce's whole
 * time; with the thread (gcx_progress_thread_enable) it goes on while the
 * application computes.
 *
 *   gcxrun -n 4 -- gcx_overlap_perf [--count N] [--compute-ms C]
 *                  [--rounds R] [--idle-s S]
 *
 * Two phases, the thread off and then on (it cannot be stopped before the
 * communicator goes). In each, R pairs of rounds alternate: "alone" (post,
 * wait at once: the allreduce's time) and "overlap" (post, compute C ms as
 * a sleep that makes no gcx call, then wait: the wait's time); a barrier
 * before each round; every time is the maximum over ranks. Printed per
 * phase: median alone, median wait after the compute, their ratio, and
 * the results checked (wrong elements, any round), and what the process
 * spent of a core during the compute (getrusage over the sleep: the
 * progress thread's work while the allreduce is under way, median). Then
 * the idle cost:
 * the process's CPU (getrusage, user + system, every thread) over S
 * seconds of sleep with the communicator alive, the thread off and on, as
 * a percentage of one core (maximum over ranks).
 */
#include "perf_common.h"

#include <gcx/gcx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

static double cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static double max_over_ranks(gcx_comm_t *comm, double v)
{
    if (gcx_allreduce(comm, GCX_IN_PLACE, &v, 1, GCX_DT_F64, GCX_OP_MAX,
                      NULL) != GCX_OK) {
        fprintf(stderr, "gcx_overlap_perf: allreduce of the times failed\n");
        exit(1);
    }
    return v;
}

/* One round: the allreduce's time alone (compute_s < 0) or the wait after
 * compute_s of sleep; adds the wrong elements to *wrong; *busy_p (compute
 * rounds): the process's CPU during the sleep, % of a core, max over
 * ranks. */
static double round_time(gcx_comm_t *comm, const float *in, float *out,
                         size_t n, double compute_s, long *wrong,
                         double *busy_p)
{
    const float    want = (float)gcx_comm_size(comm) *
                          (float)(gcx_comm_size(comm) + 1) / 2.0f;
    gcx_request_t *req  = NULL;
    double         t0, t, c0, busy = 0;
    size_t         i;

    memset(out, 0, n * sizeof(*out));
    if (gcx_barrier(comm, NULL) != GCX_OK ||
        gcx_allreduce(comm, in, out, n, GCX_DT_F32, GCX_OP_SUM, &req) !=
            GCX_OK) {
        fprintf(stderr, "gcx_overlap_perf: a collective failed\n");
        exit(1);
    }
    t0 = now();
    if (compute_s >= 0) {
        c0 = cpu_s();
        sleep_s(compute_s);
        busy = 100.0 * (cpu_s() - c0) / (now() - t0);
        t0   = now();
    }
    if (gcx_wait(req) != GCX_OK) {
        fprintf(stderr, "gcx_overlap_perf: the allreduce failed\n");
        exit(1);
    }
    t = now() - t0;
    gcx_request_free(req);
    for (i = 0; i < n; ++i) {
        *wrong += out[i] != want;
    }
    if (busy_p != NULL) {
        *busy_p = max_over_ranks(comm, busy);
    }
    return max_over_ranks(comm, t);
}

static void phase(gcx_comm_t *comm, const char *name, const float *in,
                  float *out, size_t n, double compute_s, int rounds)
{
    double *alone = calloc((size_t)rounds, sizeof(double));
    double *after = calloc((size_t)rounds, sizeof(double));
    double *busy  = calloc((size_t)rounds, sizeof(double));
    long    wrong = 0;
    double  a, w, b;
    int     r;

    if (alone == NULL || after == NULL || busy == NULL) {
        exit(1);
    }
    (void)round_time(comm, in, out, n, -1, &wrong, NULL); /* warm-up */
    for (r = 0; r < rounds; ++r) {
        alone[r] = round_time(comm, in, out, n, -1, &wrong, NULL);
        after[r] = round_time(comm, in, out, n, compute_s, &wrong, &busy[r]);
    }
    wrong = (long)max_over_ranks(comm, (double)wrong);
    a     = perf_median(alone, rounds);
    w     = perf_median(after, rounds);
    b     = perf_median(busy, rounds);
    if (gcx_comm_rank(comm) == 0) {
        printf("%-11s %10zu %10.1f %12.2f %14.2f %8.3f %7ld %12.2f\n", name,
               n * sizeof(float), compute_s * 1e3, a * 1e3, w * 1e3, w / a,
               wrong, b);
        fflush(stdout);
    }
    free(alone);
    free(after);
    free(busy);
}

static double idle_cpu_percent(gcx_comm_t *comm, double seconds)
{
    double c0, t0, pct;

    if (gcx_barrier(comm, NULL) != GCX_OK) {
        exit(1);
    }
    c0 = cpu_s();
    t0 = now();
    sleep_s(seconds);
    pct = 100.0 * (cpu_s() - c0) / (now() - t0);
    return max_over_ranks(comm, pct);
}

int main(int argc, char **argv)
{
    size_t      n       = (size_t)(2 << 20) / sizeof(float);
    double      compute = 0.050, idle_s = 2.0;
    int         rounds  = 10, i;
    gcx_comm_t *comm    = NULL;
    float      *in, *out;
    double      off, on;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--count")) {
            n = strtoull(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--compute-ms")) {
            compute = atof(argv[i + 1]) / 1e3;
        } else if (!strcmp(argv[i], "--rounds")) {
            rounds = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "--idle-s")) {
            idle_s = atof(argv[i + 1]);
        } else {
            fprintf(stderr, "gcx_overlap_perf: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (n == 0 || rounds < 1 || compute < 0 || idle_s <= 0 || i != argc) {
        fprintf(stderr, "usage: gcx_overlap_perf [--count N] [--compute-ms C] "
                        "[--rounds R] [--idle-s S]\n");
        return 2;
    }
    if (gcx_comm_create(NULL, NULL, &comm) != GCX_OK) {
        fprintf(stderr, "gcx_overlap_perf: cannot create the communicator "
                        "(run under gcxrun)\n");
        return 1;
    }
    in  = malloc(n * sizeof(float));
    out = malloc(n * sizeof(float));
    if (in == NULL || out == NULL) {
        return 1;
    }
    for (i = 0; (size_t)i < n; ++i) {
        in[i] = (float)(gcx_comm_rank(comm) + 1);
    }
    if (gcx_comm_rank(comm) == 0) {
        printf("# %d ranks, %d rounds of each, times: max over ranks, "
               "median over rounds\n", gcx_comm_size(comm), rounds);
        printf("%-11s %10s %10s %12s %14s %8s %7s %12s\n", "# thread",
               "bytes", "compute_ms", "alone_ms", "wait_after_ms", "ratio",
               "wrong", "compute_cpu%");
    }
    phase(comm, "off", in, out, n, compute, rounds);
    off = idle_cpu_percent(comm, idle_s);
    if (gcx_progress_thread_enable(comm) != GCX_OK) {
        fprintf(stderr, "gcx_overlap_perf: no progress thread\n");
        return 1;
    }
    phase(comm, "on", in, out, n, compute, rounds);
    on = idle_cpu_percent(comm, idle_s);
    if (gcx_comm_rank(comm) == 0) {
        printf("# idle CPU over %.1f s (process, max over ranks, %% of a "
               "core): thread off %.2f, on %.2f\n", idle_s, off, on);
    }
    free(in);
    free(out);
    gcx_comm_destroy(comm);
    return 0;
}
