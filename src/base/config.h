/*
 * config.h - the one table of GCX_* variables.
 *
 * Every tunable of gcx is a row of gcx_config_table (config.c): name, type,
 * default, one-line doc, accepted values, and the offset of its parsed field
 * in struct gcx_config. The same table is used to read the environment, to
 * validate values (a bad one is an error naming the variable and what is
 * accepted), by gcx-info to print every variable, and to generate the
 * README's table. Adding a variable = one field below + one row.
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
    GCX_CONFIG_ENUM,   /**< one of the listed names; stored as its index */
    GCX_CONFIG_STRING, /**< free text, at most GCX_CONFIG_STRING_MAX - 1 */
} gcx_config_type_t;

#define GCX_CONFIG_STRING_MAX 256

/* GCX_ALLREDUCE_ALGO values */
enum {
    GCX_ALLREDUCE_ALGO_AUTO = 0,
    GCX_ALLREDUCE_ALGO_RECURSIVE_DOUBLING,
    GCX_ALLREDUCE_ALGO_RING,
    GCX_ALLREDUCE_ALGO_RABENSEIFNER,
};

/* GCX_BCAST_ALGO values */
enum {
    GCX_BCAST_ALGO_AUTO = 0,
    GCX_BCAST_ALGO_BINOMIAL,
    GCX_BCAST_ALGO_CHAIN,
};

/* GCX_SPARSE_ALGO values */
enum {
    GCX_SPARSE_ALGO_AUTO = 0,
    GCX_SPARSE_ALGO_ALLGATHER,
    GCX_SPARSE_ALGO_RECURSIVE_DOUBLING,
    GCX_SPARSE_ALGO_SPLIT,
    GCX_SPARSE_ALGO_BALANCED_SPLIT,
};

/* GCX_UCX_ERR_MODE values */
enum {
    GCX_UCX_ERR_MODE_NONE = 0,
    GCX_UCX_ERR_MODE_PEER,
};

/* GCX_TRANSPORT values */
enum {
    GCX_TRANSPORT_UCX = 0,
};

/** Parsed values of every variable (see config.c for docs and defaults). */
struct gcx_config {
    int    log_level;           /* GCX_LOG_LEVEL, a gcx_log_level_t */
    double timeout;             /* GCX_TIMEOUT, seconds */
    int    transport;           /* GCX_TRANSPORT */
    int    ucx_err_mode;        /* GCX_UCX_ERR_MODE */
    int    rank;                /* GCX_RANK, -1 = not set */
    int    world_size;          /* GCX_WORLD_SIZE, -1 = not set */
    int    local_rank;          /* GCX_LOCAL_RANK, -1 = not set */
    int    local_size;          /* GCX_LOCAL_SIZE, -1 = not set */
    char   root_addr[GCX_CONFIG_STRING_MAX]; /* GCX_ROOT_ADDR, "" = not set */
    int    root_port;           /* GCX_ROOT_PORT, 0 = not set */
    int    bootstrap_fd;        /* GCX_BOOTSTRAP_FD, -1 = not set */
    int    check_args;          /* GCX_CHECK_ARGS */
    int    progress_yield;      /* GCX_PROGRESS_YIELD */
    int    allreduce_algo;      /* GCX_ALLREDUCE_ALGO */
    size_t allreduce_small_msg; /* GCX_ALLREDUCE_SMALL_MSG, bytes */
    size_t allreduce_large_msg; /* GCX_ALLREDUCE_LARGE_MSG, bytes */
    int    bcast_algo;          /* GCX_BCAST_ALGO */
    size_t bcast_small_msg;     /* GCX_BCAST_SMALL_MSG, bytes */
    size_t pipeline_chunk;      /* GCX_PIPELINE_CHUNK, bytes */
    /* GraVAC controller (read by gcx_gravac_params_from_config) */
    double gravac_theta_min;    /* GCX_GRAVAC_THETA_MIN */
    double gravac_theta_max;    /* GCX_GRAVAC_THETA_MAX */
    double gravac_epsilon;      /* GCX_GRAVAC_EPSILON */
    double gravac_omega;        /* GCX_GRAVAC_OMEGA */
    int    gravac_window;       /* GCX_GRAVAC_WINDOW, steps */
    int    gravac_policy;       /* GCX_GRAVAC_POLICY, a gcx_gravac_policy_t */
    double gravac_scale;        /* GCX_GRAVAC_SCALE */
    double gravac_ratio;        /* GCX_GRAVAC_RATIO */
    double gravac_alpha;        /* GCX_GRAVAC_ALPHA, 0 = N/100 */
    /* coded gather (src/coll/coded_gather) */
    int    coded_max_lag;       /* GCX_CODED_MAX_LAG, rounds */
    char   straggler_ranks[GCX_CONFIG_STRING_MAX]; /* GCX_STRAGGLER_RANKS */
    double straggler_delay_ms;  /* GCX_STRAGGLER_DELAY_MS */
    double straggler_mean_ms;   /* GCX_STRAGGLER_MEAN_MS */
    int    straggler_count;     /* GCX_STRAGGLER_COUNT, -1 = the code's s */
    int    straggler_seed;      /* GCX_STRAGGLER_SEED */
    int    sparse_algo;         /* GCX_SPARSE_ALGO */
    int    sparse_feedback;     /* GCX_SPARSE_FEEDBACK */
    double net_latency_us;      /* GCX_NET_LATENCY_US, 0 = measure */
    double net_bandwidth_gbps;  /* GCX_NET_BANDWIDTH_GBPS, 0 = measure */
};

typedef struct gcx_config_entry {
    const char        *name;          /* without the GCX_ prefix */
    gcx_config_type_t  type;
    const char        *default_value; /* as text, parsed like the env */
    const char        *doc;           /* one line */
    size_t             offset;        /* of the field in struct gcx_config */
    double             min, max;      /* INT, DOUBLE, SIZE */
    const char *const *values;        /* ENUM names, NULL-terminated */
} gcx_config_entry_t;

extern const gcx_config_entry_t gcx_config_table[];
extern const size_t gcx_config_table_size;

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

/** Name of the i-th value of an ENUM entry. */
const char *gcx_config_enum_name(const gcx_config_entry_t *entry, int index);

/** Print every variable: "GCX_NAME=value" and its doc (gcx-info). */
void gcx_config_print(const struct gcx_config *config, FILE *stream);

/** Print the Markdown table of all variables (README). */
void gcx_config_print_markdown(FILE *stream);

#endif
