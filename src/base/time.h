/*
 * time.h - monotonic clock in seconds, for deadlines and perf drivers, and
 * the calling thread's CPU time (for waits that must not count the time
 * the scheduler gave to other processes).
 */
#ifndef GCX_BASE_TIME_H
#define GCX_BASE_TIME_H

#include <time.h>

static inline double gcx_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time the calling thread has used, in seconds. */
static inline double gcx_time_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
