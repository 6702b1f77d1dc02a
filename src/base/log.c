/*
 * log.c - the writer behind gcx_log(): one formatted line per call, written
 * with a single fprintf so lines of different ranks do not interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gcx_log_level_current = GCX_LOG_WARN;
static int gcx_log_rank = -1;

static const char *const gcx_log_level_names[] = {"error", "warn", "info",
                                                  "debug", "trace"};

void gcx_log_configure(int level, int rank)
{
    __atomic_store_n(&gcx_log_level_current, level, __ATOMIC_RELAXED);
    if (rank >= 0) {
        __atomic_store_n(&gcx_log_rank, rank, __ATOMIC_RELAXED);
    }
}

void gcx_log_write(gcx_log_level_t level, const char *file, int line,
                   const char *fmt, ...)
{
    char msg[1024];
    char where[64] = "";
    int  rank = __atomic_load_n(&gcx_log_rank, __ATOMIC_RELAXED);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (gcx_log_level() >= GCX_LOG_DEBUG) {
        const char *base = strrchr(file, '/');
        snprintf(where, sizeof(where), " %s:%d", base ? base + 1 : file, line);
    }
    if (rank >= 0) {
        fprintf(stderr, "[gcx r%d pid %d%s] %s: %s\n", rank,
                (int)getpid(), where, gcx_log_level_names[level], msg);
    } else {
        fprintf(stderr, "[gcx pid %d%s] %s: %s\n", (int)getpid(), where,
                gcx_log_level_names[level], msg);
    }
}
