/*
 * log.h - rank-prefixed logging controlled by GCX_LOG_LEVEL.
 *
 * Lines look like "[gcx r3 pid 1234] warn: text". The level check is an
 * inline compare, so disabled levels cost one branch. Per UCX convention,
 * only the function that first detects an error logs it.
 */
#ifndef GCX_BASE_LOG_H
#define GCX_BASE_LOG_H

typedef enum gcx_log_level {
    GCX_LOG_ERROR = 0,
    GCX_LOG_WARN,
    GCX_LOG_INFO,
    GCX_LOG_DEBUG,
    GCX_LOG_TRACE,
} gcx_log_level_t;

/* Read by every thread's level checks, written by each configuration read
 * (gcx_config_read, communicator creation) from any thread: accessed with
 * relaxed atomics (a plain load and store on x86; a race otherwise). */
extern int gcx_log_level_current;

static inline int gcx_log_level(void)
{
    return __atomic_load_n(&gcx_log_level_current, __ATOMIC_RELAXED);
}

/** Set the process-wide level and (when >= 0) the rank shown in the prefix. */
void gcx_log_configure(int level, int rank);

void gcx_log_write(gcx_log_level_t level, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define gcx_log(_level, ...)                                                   \
    do {                                                                       \
        if ((int)(_level) <= gcx_log_level()) {                                 \
            gcx_log_write((_level), __FILE__, __LINE__, __VA_ARGS__);          \
        }                                                                      \
    } while (0)

#define gcx_error(...) gcx_log(GCX_LOG_ERROR, __VA_ARGS__)
#define gcx_warn(...)  gcx_log(GCX_LOG_WARN, __VA_ARGS__)
#define gcx_info(...)  gcx_log(GCX_LOG_INFO, __VA_ARGS__)
#define gcx_debug(...) gcx_log(GCX_LOG_DEBUG, __VA_ARGS__)
#define gcx_trace(...) gcx_log(GCX_LOG_TRACE, __VA_ARGS__)

#endif
