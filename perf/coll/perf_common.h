/*
 * perf_common.h - one driver for every collective perf program (the
 * nccl-tests shape): options, sizes, timing, data check, columns and JSON
 * live here; a backend (gcx, Open MPI) supplies the calls.
 */
#ifndef GCX_PERF_COMMON_H
#define GCX_PERF_COMMON_H

#include <gcx/gcx.h>
#include <stddef.h>

typedef struct perf_backend {
    const char *name;
    /** Start; fills rank and size. Returns 0 on success. */
    int (*init)(int *argc, char ***argv, int *rank_p, int *size_p);
    /** One allreduce; sendbuf == recvbuf means in place. 0 on success. */
    int (*allreduce)(const void *sendbuf, void *recvbuf, size_t count,
                     gcx_dtype_t dtype, gcx_op_t op);
    /** Element-wise maximum over ranks of @p n doubles, in place. */
    int (*max_doubles)(double *values, int n);
    void (*finalize)(void);
} perf_backend_t;

/** Sort @p n doubles ascending, in place (qsort). */
void perf_sort_doubles(double *values, int n);

/** Median of @p n >= 1 doubles (the mean of the middle two for even n);
 *  sorts them in place. */
double perf_median(double *values, int n);

/** Parse options, run the size sweep, print rows; returns the exit code. */
int perf_allreduce_main(int argc, char **argv, const perf_backend_t *backend);

#endif
