/*
 * config.c - the table of GCX_* variables and its parsers.
 *
 * Reading the configuration walks the table once (a getenv per row), so it
 * costs microseconds and happens at communicator creation, never on a
 * collective's path. Values are validated here, not where they are used:
 * a bad value fails the whole read with an error that names the variable,
 * the value and what is accepted.
 */
#include "config.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const gcx_config_log_levels[] = {"error", "warn", "info",
                                                    "debug", "trace", NULL};
static const char *const gcx_config_transports[] = {"ucx", NULL};
static const char *const gcx_config_ucx_err_modes[] = {"none", "peer", NULL};
static const char *const gcx_config_allreduce_algos[] = {
    "auto", "recursive_doubling", "ring", "rabenseifner", NULL};
static const char *const gcx_config_sparse_algos[] = {
    "auto", "allgather", "recursive_doubling", "split", "balanced_split",
    NULL};
static const char *const gcx_config_bcast_algos[] = {"auto", "binomial",
                                                     "chain", NULL};
/* same order as gcx_gravac_policy_t */
static const char *const gcx_config_gravac_policies[] = {"exponential",
                                                         "geometric", NULL};

#define GCX_CFG_FIELD(_f) offsetof(struct gcx_config, _f)
#define GCX_CFG_NO_RANGE  0, 0

const gcx_config_entry_t gcx_config_table[] = {
    {"LOG_LEVEL", GCX_CONFIG_ENUM, "warn",
     "Logging level; lines go to stderr prefixed with the rank",
     GCX_CFG_FIELD(log_level), GCX_CFG_NO_RANGE, gcx_config_log_levels},
    {"TIMEOUT", GCX_CONFIG_DOUBLE, "300",
     "Seconds a collective (or communicator creation) may take before it "
     "fails with GCX_ERR_TIMEOUT and the communicator is aborted",
     GCX_CFG_FIELD(timeout), 0.001, 1e6, NULL},
    {"TRANSPORT", GCX_CONFIG_ENUM, "ucx",
     "Transport for collectives (UCX: shared memory, TCP, InfiniBand; the "
     "only one built so far)",
     GCX_CFG_FIELD(transport), GCX_CFG_NO_RANGE, gcx_config_transports},
    {"UCX_ERR_MODE", GCX_CONFIG_ENUM, "none",
     "UCX endpoint error handling: peer reports a lost peer at once but, in "
     "UCX 1.13, rules out shared memory (posix/sysv/cma); none keeps them "
     "and a dead peer is found by GCX_TIMEOUT",
     GCX_CFG_FIELD(ucx_err_mode), GCX_CFG_NO_RANGE, gcx_config_ucx_err_modes},
    {"RANK", GCX_CONFIG_INT, "-1",
     "Rank of this process when bootstrapping from the environment; -1: "
     "take RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID",
     GCX_CFG_FIELD(rank), -1, INT_MAX, NULL},
    {"WORLD_SIZE", GCX_CONFIG_INT, "-1",
     "Number of ranks when bootstrapping from the environment; -1: take "
     "WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS",
     GCX_CFG_FIELD(world_size), -1, 1 << 16, NULL},
    {"LOCAL_RANK", GCX_CONFIG_INT, "-1",
     "Rank among the processes of this host (set by gcxrun; informational)",
     GCX_CFG_FIELD(local_rank), -1, INT_MAX, NULL},
    {"LOCAL_SIZE", GCX_CONFIG_INT, "-1",
     "Number of processes on this host (set by gcxrun; informational)",
     GCX_CFG_FIELD(local_size), -1, INT_MAX, NULL},
    {"ROOT_ADDR", GCX_CONFIG_STRING, "",
     "Host name or IPv4 address of rank 0's rendezvous; empty: MASTER_ADDR, "
     "else the first host of SLURM_STEP_NODELIST, else 127.0.0.1",
     GCX_CFG_FIELD(root_addr), GCX_CFG_NO_RANGE, NULL},
    {"ROOT_PORT", GCX_CONFIG_INT, "0",
     "TCP port of rank 0's rendezvous; 0: MASTER_PORT, else a port derived "
     "from the launcher's job id (Slurm, Open MPI), else 29517",
     GCX_CFG_FIELD(root_port), 0, 65535, NULL},
    {"BOOTSTRAP_FD", GCX_CONFIG_INT, "-1",
     "Listening socket inherited by rank 0 from gcxrun (internal; -1: none)",
     GCX_CFG_FIELD(bootstrap_fd), -1, INT_MAX, NULL},
    {"CHECK_ARGS", GCX_CONFIG_BOOL, "y",
     "Verify before each collective that all ranks passed the same counts, "
     "types, operation and root (one small exchange); mismatches fail with "
     "GCX_ERR_MISMATCH on every rank",
     GCX_CFG_FIELD(check_args), GCX_CFG_NO_RANGE, NULL},
    {"PROGRESS_YIELD", GCX_CONFIG_BOOL, "y",
     "Call sched_yield() while waiting when a progress call found nothing "
     "to do (helps when ranks outnumber cores)",
     GCX_CFG_FIELD(progress_yield), GCX_CFG_NO_RANGE, NULL},
    {"ALLREDUCE_ALGO", GCX_CONFIG_ENUM, "auto",
     "Dense allreduce algorithm; auto: recursive doubling up to "
     "GCX_ALLREDUCE_SMALL_MSG bytes, Rabenseifner (recursive halving + "
     "doubling) up to GCX_ALLREDUCE_LARGE_MSG with more than 2 ranks, "
     "pipelined ring above",
     GCX_CFG_FIELD(allreduce_algo), GCX_CFG_NO_RANGE,
     gcx_config_allreduce_algos},
    {"ALLREDUCE_SMALL_MSG", GCX_CONFIG_SIZE, "64K",
     "Largest message (bytes) for which auto picks recursive doubling",
     GCX_CFG_FIELD(allreduce_small_msg), 0, 1e15, NULL},
    {"ALLREDUCE_LARGE_MSG", GCX_CONFIG_SIZE, "2M",
     "Largest message (bytes) for which auto picks Rabenseifner (with more "
     "than 2 ranks); the pipelined ring above",
     GCX_CFG_FIELD(allreduce_large_msg), 0, 1e15, NULL},
    {"BCAST_ALGO", GCX_CONFIG_ENUM, "auto",
     "Broadcast algorithm; auto: binomial tree up to GCX_BCAST_SMALL_MSG "
     "bytes, pipelined chain above",
     GCX_CFG_FIELD(bcast_algo), GCX_CFG_NO_RANGE, gcx_config_bcast_algos},
    {"BCAST_SMALL_MSG", GCX_CONFIG_SIZE, "256K",
     "Largest message (bytes) for which auto picks the binomial tree",
     GCX_CFG_FIELD(bcast_small_msg), 0, 1e15, NULL},
    {"PIPELINE_CHUNK", GCX_CONFIG_SIZE, "512K",
     "Chunk size (bytes) of pipelined algorithms (ring, chain)",
     GCX_CFG_FIELD(pipeline_chunk), 4096, 1 << 30, NULL},
    {"GRAVAC_THETA_MIN", GCX_CONFIG_DOUBLE, "10",
     "GraVAC: initial first-level compression factor theta_min (at most "
     "GCX_GRAVAC_THETA_MAX)",
     GCX_CFG_FIELD(gravac_theta_min), 1, 1e9, NULL},
    {"GRAVAC_THETA_MAX", GCX_CONFIG_DOUBLE, "1000",
     "GraVAC: largest effective compression factor theta_min * theta_s",
     GCX_CFG_FIELD(gravac_theta_max), 1, 1e9, NULL},
    {"GRAVAC_EPSILON", GCX_CONFIG_DOUBLE, "0.7",
     "GraVAC: smallest compression gain (squared norm kept over squared "
     "norm before) a compressed level needs to be sent; below it for both "
     "levels the step is dense",
     GCX_CFG_FIELD(gravac_epsilon), 1e-6, 1, NULL},
    {"GRAVAC_OMEGA", GCX_CONFIG_DOUBLE, "0.01",
     "GraVAC: relative tolerance for raising theta_min (gains agree) and "
     "for settling (two best compression throughputs agree)",
     GCX_CFG_FIELD(gravac_omega), 0, 0.999, NULL},
    {"GRAVAC_WINDOW", GCX_CONFIG_INT, "500",
     "GraVAC: steps between two scaling decisions",
     GCX_CFG_FIELD(gravac_window), 1, INT_MAX, NULL},
    {"GRAVAC_POLICY", GCX_CONFIG_ENUM, "exponential",
     "GraVAC: how theta_s grows each window; exponential squares it "
     "(2, 4, 16, 256), geometric multiplies it by GCX_GRAVAC_RATIO",
     GCX_CFG_FIELD(gravac_policy), GCX_CFG_NO_RANGE,
     gcx_config_gravac_policies},
    {"GRAVAC_SCALE", GCX_CONFIG_DOUBLE, "2",
     "GraVAC: initial second-level compression factor theta_s",
     GCX_CFG_FIELD(gravac_scale), 1.001, 1e9, NULL},
    {"GRAVAC_RATIO", GCX_CONFIG_DOUBLE, "2",
     "GraVAC: ratio of the geometric policy",
     GCX_CFG_FIELD(gravac_ratio), 1.001, 1e9, NULL},
    {"GRAVAC_ALPHA", GCX_CONFIG_DOUBLE, "0",
     "GraVAC: EWMA weight of the newest gain; 0: N/100 for N workers "
     "(at most 1); 1: no smoothing",
     GCX_CFG_FIELD(gravac_alpha), 0, 1, NULL},
    {"CODED_MAX_LAG", GCX_CONFIG_INT, "64",
     "Coded gather: rounds the root keeps decoded sums for a rank that has "
     "not taken them; a rank lagging further counts as gone (permanent "
     "straggler)",
     GCX_CFG_FIELD(coded_max_lag), 1, 1 << 20, NULL},
    {"STRAGGLER_RANKS", GCX_CONFIG_STRING, "",
     "Coded gather straggler injection: comma-separated ranks delayed by "
     "GCX_STRAGGLER_DELAY_MS every round (tests, perf)",
     GCX_CFG_FIELD(straggler_ranks), GCX_CFG_NO_RANGE, NULL},
    {"STRAGGLER_DELAY_MS", GCX_CONFIG_DOUBLE, "0",
     "Coded gather: milliseconds each rank of GCX_STRAGGLER_RANKS sleeps "
     "before it contributes to a round",
     GCX_CFG_FIELD(straggler_delay_ms), 0, 1e7, NULL},
    {"STRAGGLER_MEAN_MS", GCX_CONFIG_DOUBLE, "0",
     "Coded gather: mean (ms) of exponential delays injected each round on "
     "GCX_STRAGGLER_COUNT ranks chosen at random (same choice on every "
     "rank); 0: off",
     GCX_CFG_FIELD(straggler_mean_ms), 0, 1e7, NULL},
    {"STRAGGLER_COUNT", GCX_CONFIG_INT, "-1",
     "Coded gather: ranks delayed at random per round with "
     "GCX_STRAGGLER_MEAN_MS; -1: the code's s",
     GCX_CFG_FIELD(straggler_count), -1, 1 << 16, NULL},
    {"STRAGGLER_SEED", GCX_CONFIG_INT, "1",
     "Coded gather: seed of the random straggler choice and delays",
     GCX_CFG_FIELD(straggler_seed), 0, INT_MAX, NULL},
    {"SPARSE_ALGO", GCX_CONFIG_ENUM, "auto",
     "Sparse allreduce algorithm; auto: the cheapest by the alpha-beta model "
     "(GCX_NET_LATENCY_US, GCX_NET_BANDWIDTH_GBPS) for N, P and the ranks' "
     "nnz",
     GCX_CFG_FIELD(sparse_algo), GCX_CFG_NO_RANGE, gcx_config_sparse_algos},
    {"SPARSE_FEEDBACK", GCX_CONFIG_BOOL, "y",
     "Sparse allreduce auto: scale each algorithm's modelled time by "
     "measured/modelled of its earlier calls of similar cost on the "
     "communicator (agreed by every rank); n: the model alone",
     GCX_CFG_FIELD(sparse_feedback), GCX_CFG_NO_RANGE, NULL},
    {"NET_LATENCY_US", GCX_CONFIG_DOUBLE, "0",
     "Network latency alpha (microseconds) for cost models; 0: measured "
     "at the first sparse allreduce that needs it",
     GCX_CFG_FIELD(net_latency_us), 0, 1e7, NULL},
    {"NET_BANDWIDTH_GBPS", GCX_CONFIG_DOUBLE, "0",
     "Per-link bandwidth 1/beta (Gbit/s) for cost models; 0: measured at "
     "the first sparse allreduce that needs it",
     GCX_CFG_FIELD(net_bandwidth_gbps), 0, 1e6, NULL},
};

const size_t gcx_config_table_size =
    sizeof(gcx_config_table) / sizeof(gcx_config_table[0]);

static void *gcx_config_field(const gcx_config_entry_t *entry,
                              struct gcx_config *config)
{
    return (char *)config + entry->offset;
}

static const void *gcx_config_field_const(const gcx_config_entry_t *entry,
                                          const struct gcx_config *config)
{
    return (const char *)config + entry->offset;
}

const char *gcx_config_enum_name(const gcx_config_entry_t *entry, int index)
{
    return entry->values[index];
}

void gcx_config_accepted(const gcx_config_entry_t *entry, char *buf,
                         size_t buflen)
{
    size_t used = 0;
    int i;

    buf[0] = '\0';
    switch (entry->type) {
    case GCX_CONFIG_INT:
        snprintf(buf, buflen, "an integer in %.0f..%.0f", entry->min,
                 entry->max);
        break;
    case GCX_CONFIG_DOUBLE:
        snprintf(buf, buflen, "a number in %g..%g", entry->min, entry->max);
        break;
    case GCX_CONFIG_SIZE:
        snprintf(buf, buflen, "bytes in %.0f..%.0f, suffix K, M or G allowed",
                 entry->min, entry->max);
        break;
    case GCX_CONFIG_BOOL:
        snprintf(buf, buflen, "y|n (also yes/no, 1/0, true/false, on/off)");
        break;
    case GCX_CONFIG_STRING:
        snprintf(buf, buflen, "text of at most %d characters",
                 GCX_CONFIG_STRING_MAX - 1);
        break;
    case GCX_CONFIG_ENUM:
        for (i = 0; entry->values[i] != NULL && used < buflen; ++i) {
            used += (size_t)snprintf(buf + used, buflen - used, "%s%s",
                                     i ? "|" : "", entry->values[i]);
        }
        break;
    }
}

static gcx_status_t gcx_config_bad(const gcx_config_entry_t *entry,
                                   const char *value, const char *why)
{
    char accepted[256];

    gcx_config_accepted(entry, accepted, sizeof(accepted));
    gcx_error("invalid GCX_%s='%s': %s; accepted: %s", entry->name, value,
              why, accepted);
    return GCX_ERR_INVALID;
}

static int gcx_config_parse_bool(const char *value, int *out)
{
    static const char *const yes[] = {"y", "yes", "1", "true", "on"};
    static const char *const no[]  = {"n", "no", "0", "false", "off"};
    size_t i;

    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); ++i) {
        if (!strcasecmp(value, yes[i])) {
            *out = 1;
            return 1;
        }
        if (!strcasecmp(value, no[i])) {
            *out = 0;
            return 1;
        }
    }
    return 0;
}

/* Parses a real number with an optional K/M/G (binary) suffix. */
static int gcx_config_parse_number(const char *value, int allow_suffix,
                                   double *out)
{
    char  *end;
    double v;

    errno = 0;
    v     = strtod(value, &end);
    if (end == value || errno != 0 || !isfinite(v)) {
        return 0;
    }
    if (allow_suffix && *end != '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K':
            v *= 1024.0;
            break;
        case 'M':
            v *= 1024.0 * 1024.0;
            break;
        case 'G':
            v *= 1024.0 * 1024.0 * 1024.0;
            break;
        default:
            return 0;
        }
        ++end;
        if (toupper((unsigned char)*end) == 'B') {
            ++end;
        }
    }
    *out = v;
    return *end == '\0';
}

gcx_status_t gcx_config_parse_entry(const gcx_config_entry_t *entry,
                                    const char *value,
                                    struct gcx_config *config)
{
    void  *field = gcx_config_field(entry, config);
    double number;
    int    flag, i;

    switch (entry->type) {
    case GCX_CONFIG_INT:
    case GCX_CONFIG_DOUBLE:
    case GCX_CONFIG_SIZE:
        /* numbers: parse (sizes take K/M/G), integrality, range */
        if (!gcx_config_parse_number(value, entry->type == GCX_CONFIG_SIZE,
                                     &number) ||
            (entry->type != GCX_CONFIG_DOUBLE && number != floor(number))) {
            return gcx_config_bad(entry, value,
                                  entry->type == GCX_CONFIG_INT ? "not an integer" :
                                  entry->type == GCX_CONFIG_SIZE ? "not a size" :
                                                                   "not a number");
        }
        if (number < entry->min || number > entry->max) {
            return gcx_config_bad(entry, value, "out of range");
        }
        if (entry->type == GCX_CONFIG_INT) {
            *(int *)field = (int)number;
        } else if (entry->type == GCX_CONFIG_SIZE) {
            *(size_t *)field = (size_t)number;
        } else {
            *(double *)field = number;
        }
        return GCX_OK;
    case GCX_CONFIG_BOOL:
        if (!gcx_config_parse_bool(value, &flag)) {
            return gcx_config_bad(entry, value, "not a boolean");
        }
        *(int *)field = flag;
        return GCX_OK;
    case GCX_CONFIG_ENUM:
        for (i = 0; entry->values[i] != NULL; ++i) {
            if (!strcasecmp(value, entry->values[i])) {
                *(int *)field = i;
                return GCX_OK;
            }
        }
        return gcx_config_bad(entry, value, "unknown value");
    case GCX_CONFIG_STRING:
        if (strlen(value) >= GCX_CONFIG_STRING_MAX) {
            return gcx_config_bad(entry, value, "too long");
        }
        strcpy((char *)field, value);
        return GCX_OK;
    }
    return GCX_ERR_INVALID;
}

void gcx_config_defaults(struct gcx_config *config)
{
    size_t i;

    memset(config, 0, sizeof(*config));
    for (i = 0; i < gcx_config_table_size; ++i) {
        gcx_status_t status = gcx_config_parse_entry(
            &gcx_config_table[i], gcx_config_table[i].default_value, config);
        (void)status; /* defaults are valid: checked by a unit test */
    }
}

const gcx_config_entry_t *gcx_config_find(const char *name)
{
    size_t i;

    if (!strncmp(name, "GCX_", 4)) {
        name += 4;
    }
    for (i = 0; i < gcx_config_table_size; ++i) {
        if (!strcmp(gcx_config_table[i].name, name)) {
            return &gcx_config_table[i];
        }
    }
    return NULL;
}

void gcx_config_format(const gcx_config_entry_t *entry,
                       const struct gcx_config *config, char *buf,
                       size_t buflen)
{
    const void *field = gcx_config_field_const(entry, config);
    size_t      size;

    switch (entry->type) {
    case GCX_CONFIG_INT:
        snprintf(buf, buflen, "%d", *(const int *)field);
        break;
    case GCX_CONFIG_DOUBLE:
        snprintf(buf, buflen, "%g", *(const double *)field);
        break;
    case GCX_CONFIG_SIZE:
        size = *(const size_t *)field;
        if (size != 0 && size % (1024 * 1024 * 1024) == 0) {
            snprintf(buf, buflen, "%zuG", size >> 30);
        } else if (size != 0 && size % (1024 * 1024) == 0) {
            snprintf(buf, buflen, "%zuM", size >> 20);
        } else if (size != 0 && size % 1024 == 0) {
            snprintf(buf, buflen, "%zuK", size >> 10);
        } else {
            snprintf(buf, buflen, "%zu", size);
        }
        break;
    case GCX_CONFIG_BOOL:
        snprintf(buf, buflen, "%s", *(const int *)field ? "y" : "n");
        break;
    case GCX_CONFIG_ENUM:
        snprintf(buf, buflen, "%s", entry->values[*(const int *)field]);
        break;
    case GCX_CONFIG_STRING:
        snprintf(buf, buflen, "%s", (const char *)field);
        break;
    }
}

void gcx_config_print(const struct gcx_config *config, FILE *stream)
{
    char   value[GCX_CONFIG_STRING_MAX], accepted[256];
    size_t i;

    for (i = 0; i < gcx_config_table_size; ++i) {
        const gcx_config_entry_t *entry = &gcx_config_table[i];

        gcx_config_format(entry, config, value, sizeof(value));
        gcx_config_accepted(entry, accepted, sizeof(accepted));
        fprintf(stream, "#\n# %s\n# accepted: %s; default: '%s'\n#\n",
                entry->doc, accepted, entry->default_value);
        fprintf(stream, "GCX_%s=%s\n", entry->name, value);
    }
}

void gcx_config_print_markdown(FILE *stream)
{
    char   accepted[256];
    size_t i;

    fprintf(stream, "| Variable | Default | Accepted | Meaning |\n");
    fprintf(stream, "|---|---|---|---|\n");
    for (i = 0; i < gcx_config_table_size; ++i) {
        const gcx_config_entry_t *entry = &gcx_config_table[i];

        gcx_config_accepted(entry, accepted, sizeof(accepted));
        fprintf(stream, "| `GCX_%s` | `%s` | %s | %s |\n", entry->name,
                entry->default_value, accepted, entry->doc);
    }
}

/* ---- public API -------------------------------------------------------- */

gcx_status_t gcx_config_read(gcx_config_t **config_p)
{
    struct gcx_config *config;
    gcx_status_t       status = GCX_OK;
    size_t             i;

    if (config_p == NULL) {
        return GCX_ERR_INVALID;
    }
    config = malloc(sizeof(*config));
    if (config == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_config_defaults(config);
    for (i = 0; i < gcx_config_table_size; ++i) {
        char        envname[128];
        const char *value;

        snprintf(envname, sizeof(envname), "GCX_%s", gcx_config_table[i].name);
        value = getenv(envname);
        if (value != NULL) {
            gcx_status_t st =
                gcx_config_parse_entry(&gcx_config_table[i], value, config);
            if (st != GCX_OK) {
                status = st; /* keep going: report every bad variable */
            }
        }
    }
    if (status != GCX_OK) {
        free(config);
        return status;
    }
    gcx_log_configure(config->log_level, -1);
    *config_p = config;
    return GCX_OK;
}

gcx_status_t gcx_config_set(gcx_config_t *config, const char *name,
                            const char *value)
{
    const gcx_config_entry_t *entry;
    struct gcx_config         tmp;
    gcx_status_t              status;

    if (config == NULL || name == NULL || value == NULL) {
        return GCX_ERR_INVALID;
    }
    entry = gcx_config_find(name);
    if (entry == NULL) {
        gcx_error("unknown configuration variable '%s' (see gcx-info)", name);
        return GCX_ERR_NOT_FOUND;
    }
    tmp    = *config; /* outputs set only on success */
    status = gcx_config_parse_entry(entry, value, &tmp);
    if (status == GCX_OK) {
        *config = tmp;
        if (entry->offset == offsetof(struct gcx_config, log_level)) {
            gcx_log_configure(config->log_level, -1);
        }
    }
    return status;
}

gcx_status_t gcx_config_get(const gcx_config_t *config, const char *name,
                            char *buf, size_t buflen)
{
    const gcx_config_entry_t *entry;
    char                      value[GCX_CONFIG_STRING_MAX];

    if (config == NULL || name == NULL || buf == NULL) {
        return GCX_ERR_INVALID;
    }
    entry = gcx_config_find(name);
    if (entry == NULL) {
        return GCX_ERR_NOT_FOUND;
    }
    gcx_config_format(entry, config, value, sizeof(value));
    if (strlen(value) >= buflen) {
        return GCX_ERR_RANGE;
    }
    strcpy(buf, value);
    return GCX_OK;
}

void gcx_config_release(gcx_config_t *config)
{
    free(config);
}
