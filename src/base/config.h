/*
 * config.h - the one table of GCX_* variables, made of every area's rows.
 *
 * Every tunable of gcx is a row (gcx_config_entry_t): name, type, default,
 * one-line doc, range or accepted values, and the offset of its parsed field
 * in struct gcx_config. Each area owns its rows and keeps them next to its
 * code (src/transport/transport_config.c, src/coll/allreduce/allreduce.c,
 * src/gravac/params.c, ...): an array of rows registered with
 * GCX_CONFIG_REGISTER, as UCX's components register their config tables.
 * Users still see one table, listed bottom up by layer and then by area (a
 * stable order, whatever the link order): it is used to read the
 * environment, to validate values (a bad one is an error naming the variable
 * and what is accepted), by gcx-info to print every variable, and to
 * generate the README's table. Adding a variable = one field below + one row
 * in its area.
 */
#ifndef GCX_BASE_CONFIG_H
#define GCX_BASE_CONFIG_H

#include <gcx/gcx.h>
#include <stddef.h>
#include <stdio.h>

typedef enum gcx_config_type {
    GCX_CONFIG_INT,    /**< integer in [min, max] */
    GCX_CONFIG_DOUBLE, /**< real number in [min, max] */
    GCX_CONFIG_BOOL,   /**< y/n, yes/no, 1/0, true/false, on/off */
    GCX_CONFIG_SIZE,   /**< bytes with optional K/M/G suffix, in [min, max] */
    GCX_CONFIG_ENUM,   /**< one of the listed names; stored as its id */
    GCX_CONFIG_STRING, /**< free text, at most GCX_CONFIG_STRING_MAX - 1 */
    GCX_CONFIG_SECRET, /**< a STRING that gcx never prints (gcx-info, errors
                            show only whether it is set) */
} gcx_config_type_t;

#define GCX_CONFIG_STRING_MAX 256

/* Ids of the transport's ENUM rows, kept here next to their fields of
 * struct gcx_config (core reads them); their names are the transport's, in
 * src/transport/transport.c. */

/* GCX_UCX_ERR_MODE values */
enum {
    GCX_UCX_ERR_MODE_NONE = 0,
    GCX_UCX_ERR_MODE_PEER,
    GCX_UCX_ERR_MODE_AUTO, /* peer to other hosts, none on this one */
};

/* GCX_TRANSPORT values */
enum {
    GCX_TRANSPORT_UCX = 0,
};

/**
 * Parsed values of every variable. The rows (docs, defaults, ranges) live
 * with their areas; the values stay in this one struct for now, so that a
 * communicator carries one copy: fields are grouped by the area that owns
 * the row.
 */
struct gcx_config {
    /* base (config.c) */
    int    log_level;           /* GCX_LOG_LEVEL, a gcx_log_level_t */
    /* transport (src/transport/transport_config.c) */
    int    transport;           /* GCX_TRANSPORT */
    int    ucx_err_mode;        /* GCX_UCX_ERR_MODE */
    /* core (src/core/task.c, bootstrap.c) */
    double timeout;             /* GCX_TIMEOUT, seconds */
    int    progress_yield;      /* GCX_PROGRESS_YIELD */
    int    progress_sleep;      /* GCX_PROGRESS_SLEEP */
    int    progress_thread;     /* GCX_PROGRESS_THREAD (progress_thread.c) */
    int    rank;                /* GCX_RANK, -1 = not set */
    int    world_size;          /* GCX_WORLD_SIZE, -1 = not set */
    int    local_rank;          /* GCX_LOCAL_RANK, -1 = not set */
    int    local_size;          /* GCX_LOCAL_SIZE, -1 = not set */
    char   root_addr[GCX_CONFIG_STRING_MAX]; /* GCX_ROOT_ADDR, "" = not set */
    int    root_port;           /* GCX_ROOT_PORT, 0 = not set */
    int    bootstrap_fd;        /* GCX_BOOTSTRAP_FD, -1 = not set */
    char   job_token[GCX_CONFIG_STRING_MAX]; /* GCX_JOB_TOKEN, "" = derive */
    /* coll (src/coll/check.c, ring.c) */
    int    check_args;          /* GCX_CHECK_ARGS */
    size_t pipeline_chunk;      /* GCX_PIPELINE_CHUNK, bytes */
    int    ring_eager;          /* GCX_RING_EAGER, a gcx_ring_eager_t */
    /* coll/allreduce (src/coll/allreduce/allreduce.c) */
    int    allreduce_algo;      /* GCX_ALLREDUCE_ALGO */
    size_t allreduce_small_msg; /* GCX_ALLREDUCE_SMALL_MSG, bytes */
    size_t allreduce_large_msg; /* GCX_ALLREDUCE_LARGE_MSG, bytes */
    size_t allreduce_large_msg_tcp; /* GCX_ALLREDUCE_LARGE_MSG_TCP, bytes */
    /* coll/broadcast (src/coll/broadcast/broadcast.c) */
    int    bcast_algo;          /* GCX_BCAST_ALGO */
    size_t bcast_small_msg;     /* GCX_BCAST_SMALL_MSG, bytes */
    /* gravac (src/gravac/params.c; read by gcx_gravac_params_from_config) */
    double gravac_theta_min;    /* GCX_GRAVAC_THETA_MIN */
    double gravac_theta_max;    /* GCX_GRAVAC_THETA_MAX */
    double gravac_epsilon;      /* GCX_GRAVAC_EPSILON */
    double gravac_omega;        /* GCX_GRAVAC_OMEGA */
    int    gravac_window;       /* GCX_GRAVAC_WINDOW, steps */
    int    gravac_policy;       /* GCX_GRAVAC_POLICY, a gcx_gravac_policy_t */
    double gravac_scale;        /* GCX_GRAVAC_SCALE */
    double gravac_ratio;        /* GCX_GRAVAC_RATIO */
    double gravac_alpha;        /* GCX_GRAVAC_ALPHA, 0 = N/100 */
    int    gravac_settle;       /* GCX_GRAVAC_SETTLE, a gcx_gravac_settle_t */
    /* coll/coded (src/coll/coded/coded.c) */
    int    coded_max_lag;       /* GCX_CODED_MAX_LAG, rounds */
    int    coded_algo;          /* GCX_CODED_ALGO, a gcx_coded_algo_t */
    int    coded_ahead;         /* GCX_CODED_AHEAD, rounds, 0 = auto */
    size_t coded_ahead_bytes;   /* GCX_CODED_AHEAD_BYTES */
    int    coded_in_place;      /* GCX_CODED_IN_PLACE, bool */
    char   straggler_ranks[GCX_CONFIG_STRING_MAX]; /* GCX_STRAGGLER_RANKS */
    double straggler_delay_ms;  /* GCX_STRAGGLER_DELAY_MS */
    double straggler_mean_ms;   /* GCX_STRAGGLER_MEAN_MS */
    int    straggler_count;     /* GCX_STRAGGLER_COUNT, -1 = the code's s */
    int    straggler_seed;      /* GCX_STRAGGLER_SEED */
    /* coll/sparse_allreduce (src/coll/sparse_allreduce/select.c) */
    int    sparse_algo;         /* GCX_SPARSE_ALGO */
    int    sparse_feedback;     /* GCX_SPARSE_FEEDBACK */
    double net_latency_us;      /* GCX_NET_LATENCY_US, 0 = measure */
    double net_bandwidth_gbps;  /* GCX_NET_BANDWIDTH_GBPS, 0 = measure */
};

/**
 * One accepted value of an ENUM row: the id stored in the parsed field, the
 * name users write, a one-line description. A table of them ends with a
 * NULL name. A collective's algorithm table is one of these (its selection
 * code, its log lines and its config row all use it), so an algorithm's name
 * is written once.
 */
typedef struct gcx_config_value {
    int         id;
    const char *name;
    const char *desc;
} gcx_config_value_t;

typedef struct gcx_config_entry {
    const char        *name;          /* without the GCX_ prefix */
    gcx_config_type_t  type;
    const char        *default_value; /* as text, parsed like the env */
    const char        *doc;           /* one line */
    size_t             offset;        /* of the field in struct gcx_config */
    double             min, max;      /* INT, DOUBLE, SIZE */
    const gcx_config_value_t *values; /* ENUM values, NULL name last */
} gcx_config_entry_t;

/** Layers, bottom up: the first key of the table's order. */
typedef enum gcx_config_layer {
    GCX_CONFIG_LAYER_BASE = 0,
    GCX_CONFIG_LAYER_TRANSPORT,
    GCX_CONFIG_LAYER_CORE,
    GCX_CONFIG_LAYER_COLL, /* coll, compress, coding */
    GCX_CONFIG_LAYER_GRAVAC,
} gcx_config_layer_t;

/** An area's rows: one node of the registry's list. */
typedef struct gcx_config_rows {
    gcx_config_layer_t        layer;
    const char               *area;  /* "core/task", "coll/allreduce": the
                                        second key of the order */
    const gcx_config_entry_t *rows;  /* kept in this order */
    size_t                    count;
    struct gcx_config_rows   *next;
} gcx_config_rows_t;

/**
 * Add an area's rows to the table, in (layer, area) order; called by the
 * constructors GCX_CONFIG_REGISTER makes, before main() or while libgcx.so
 * is loaded (single-threaded). An area's file that registers rows must be
 * linked: libgcx.so holds every area; a program linking libgcx.a links it
 * whole (gcx_internal_dep does).
 */
void gcx_config_register(gcx_config_rows_t *rows);

/** Register the array @p _rows of area @p _area (a string) of @p _layer;
 *  once per source file. */
#define GCX_CONFIG_REGISTER(_layer, _area, _rows)                              \
    static gcx_config_rows_t gcx_config_rows_of_file = {                       \
        (_layer), (_area), (_rows), sizeof(_rows) / sizeof((_rows)[0]), NULL}; \
    static void gcx_config_register_file(void) __attribute__((constructor));   \
    static void gcx_config_register_file(void)                                 \
    {                                                                          \
        gcx_config_register(&gcx_config_rows_of_file);                         \
    }

/** The registered areas, in table order. */
const gcx_config_rows_t *gcx_config_areas(void);

/** Number of rows of the table, and its i-th row (NULL past the end). */
size_t gcx_config_count(void);
const gcx_config_entry_t *gcx_config_at(size_t index);

/** Name of the value with @p id in @p values; "?" if none. */
const char *gcx_config_value_name(const gcx_config_value_t *values, int id);

/** The value named @p name (case-insensitive) in @p values; NULL if none. */
const gcx_config_value_t *gcx_config_value_find(const gcx_config_value_t *values,
                                                const char *name);

/** "a|b|c": the names of @p values. */
void gcx_config_value_list(const gcx_config_value_t *values, char *buf,
                           size_t buflen);

/** Fill @p config with every default (cannot fail: defaults are valid). */
void gcx_config_defaults(struct gcx_config *config);

/**
 * Parse @p value for @p entry into @p config. On error, logs
 * "GCX_NAME=value: <why>; accepted: <values>" and returns GCX_ERR_INVALID.
 */
gcx_status_t gcx_config_parse_entry(const gcx_config_entry_t *entry,
                                    const char *value,
                                    struct gcx_config *config);

/** Find a row by name, with or without the GCX_ prefix; NULL if unknown. */
const gcx_config_entry_t *gcx_config_find(const char *name);

/** Format the current value of @p entry in @p config. */
void gcx_config_format(const gcx_config_entry_t *entry,
                       const struct gcx_config *config, char *buf,
                       size_t buflen);

/** Text describing the accepted values of @p entry ("1..3600", "y|n"). */
void gcx_config_accepted(const gcx_config_entry_t *entry, char *buf,
                         size_t buflen);

/** Print every variable: "GCX_NAME=value" and its doc (gcx-info). */
void gcx_config_print(const struct gcx_config *config, FILE *stream);

/** Print the Markdown table of all variables (README). */
void gcx_config_print_markdown(FILE *stream);

#endif
