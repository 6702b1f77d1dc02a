/*
 * time.h - monotonic clock in seconds, for deadlines and perf drivers.
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

#endif
