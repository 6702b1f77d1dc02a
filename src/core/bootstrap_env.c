/*
 * bootstrap_env.c - who this process is and where rank 0 listens, read from
 * the environment (gcx's own GCX_* rows, then torchrun, Open MPI, PMI, PMIx
 * and Slurm variables), and where the job token comes from.
 *
 * Idea: the first launcher that set both a rank and a size wins, so one
 * binary runs unchanged under any of them; the rendezvous host is
 * GCX_ROOT_ADDR, MASTER_ADDR or the first host of the Slurm node list, and
 * the port, when nobody set one, is derived from the launcher's job id so
 * that every rank of one job picks the same one without talking. The
 * configuration rows of the bootstrap (area "core/bootstrap") live here.
 *
 * Cost: a few getenv() and string scans per communicator creation; nothing
 * is allocated and nothing touches the network.
 */
#include "bootstrap.h"
#include "base/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GCX_BOOTSTRAP_DEFAULT_PORT 29517

/* ---- identity ------------------------------------------------------------ */

static int gcx_bootstrap_env_int(const char *name, int *value)
{
    const char *text = getenv(name);
    char       *end;
    long        v;

    if (text == NULL || *text == '\0') {
        return 0;
    }
    errno = 0;
    v     = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > 1 << 30) {
        gcx_error("invalid %s='%s': expected a non-negative integer", name,
                  text);
        return -1;
    }
    *value = (int)v;
    return 1;
}

gcx_status_t gcx_bootstrap_identity(const struct gcx_config *config,
                                    int *rank_p, int *size_p,
                                    const char **source_p)
{
    static const struct {
        const char *rank, *size, *source;
    } launchers[] = {
        {"RANK", "WORLD_SIZE", "RANK/WORLD_SIZE (torchrun)"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
        {"PMI_RANK", "PMI_SIZE", "PMI"},
        {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "PMIx"},
        {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
    };
    int    rank = -1, size = -1;
    size_t i;

    if (config->rank >= 0 || config->world_size >= 0) {
        if (config->rank < 0 || config->world_size < 1) {
            gcx_error("GCX_RANK and GCX_WORLD_SIZE must be set together "
                      "(GCX_RANK=%d, GCX_WORLD_SIZE=%d)",
                      config->rank, config->world_size);
            return GCX_ERR_INVALID;
        }
        rank      = config->rank;
        size      = config->world_size;
        *source_p = "GCX_RANK/GCX_WORLD_SIZE";
    } else {
        for (i = 0; i < sizeof(launchers) / sizeof(launchers[0]); ++i) {
            int r = gcx_bootstrap_env_int(launchers[i].rank, &rank);
            int s = gcx_bootstrap_env_int(launchers[i].size, &size);

            if (r < 0 || s < 0) {
                return GCX_ERR_INVALID;
            }
            if (r > 0 && s > 0) {
                *source_p = launchers[i].source;
                break;
            }
            rank = size = -1;
        }
        if (rank < 0) {
            gcx_error("cannot tell this process's rank: set GCX_RANK and "
                      "GCX_WORLD_SIZE, or start it with gcxrun, torchrun, "
                      "mpirun or srun");
            return GCX_ERR_INVALID;
        }
    }
    if (size < 1 || rank >= size || size > (1 << 16)) {
        gcx_error("invalid rank %d of size %d (from %s)", rank, size,
                  *source_p);
        return GCX_ERR_INVALID;
    }
    *rank_p = rank;
    *size_p = size;
    return GCX_OK;
}

gcx_status_t gcx_bootstrap_first_host(const char *nodelist, char *host,
                                      size_t hostlen)
{
    const char *p = nodelist;
    size_t      n = 0;

    /* prefix up to '[' or ',' */
    while (*p != '\0' && *p != '[' && *p != ',') {
        if (n + 1 >= hostlen) {
            return GCX_ERR_INVALID;
        }
        host[n++] = *p++;
    }
    if (n == 0) {
        return GCX_ERR_INVALID;
    }
    if (*p == '[') {
        ++p; /* first range or number: copy its first number verbatim */
        if (!isdigit((unsigned char)*p)) {
            return GCX_ERR_INVALID;
        }
        while (isdigit((unsigned char)*p)) {
            if (n + 1 >= hostlen) {
                return GCX_ERR_INVALID;
            }
            host[n++] = *p++;
        }
        if (*p != '-' && *p != ',' && *p != ']') {
            return GCX_ERR_INVALID;
        }
        if (strchr(p, ']') == NULL) {
            return GCX_ERR_INVALID;
        }
    }
    host[n] = '\0';
    return GCX_OK;
}

static uint32_t gcx_bootstrap_hash(const char *text)
{
    uint32_t h = 2166136261u;

    for (; *text != '\0'; ++text) {
        h = (h ^ (uint8_t)*text) * 16777619u;
    }
    return h;
}

const char *gcx_bootstrap_job_id(int with_torch, char *buf, size_t buflen)
{
    static const char *const vars[] = {
        "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
        "TORCHELASTIC_RUN_ID"};
    const char *step = getenv("SLURM_STEP_ID"), *id;
    size_t      i, n = sizeof(vars) / sizeof(vars[0]) - (with_torch ? 0 : 1);

    for (i = 0; i < n; ++i) {
        if ((id = getenv(vars[i])) != NULL && *id != '\0') {
            snprintf(buf, buflen, "%s.%s", id, step != NULL ? step : "");
            return vars[i];
        }
    }
    return NULL;
}

gcx_status_t gcx_bootstrap_root(const struct gcx_config *config, char *host,
                                size_t hostlen, int *port_p)
{
    const char *addr = config->root_addr;
    const char *nodelist;
    int         port = config->root_port;

    if (*addr == '\0') {
        addr = getenv("MASTER_ADDR");
    }
    if (addr != NULL && *addr != '\0') {
        if (strlen(addr) >= hostlen) {
            return GCX_ERR_INVALID;
        }
        strcpy(host, addr);
    } else if (((nodelist = getenv("SLURM_STEP_NODELIST")) != NULL ||
                (nodelist = getenv("SLURM_JOB_NODELIST")) != NULL) &&
               getenv("SLURM_PROCID") != NULL) {
        if (gcx_bootstrap_first_host(nodelist, host, hostlen) != GCX_OK) {
            gcx_error("cannot parse the Slurm node list '%s'; set "
                      "GCX_ROOT_ADDR", nodelist);
            return GCX_ERR_INVALID;
        }
    } else {
        snprintf(host, hostlen, "127.0.0.1");
    }

    if (port == 0 && getenv("MASTER_PORT") != NULL) {
        int r = gcx_bootstrap_env_int("MASTER_PORT", &port);
        if (r < 0 || port <= 0 || port > 65535) {
            gcx_error("invalid MASTER_PORT='%s'", getenv("MASTER_PORT"));
            return GCX_ERR_INVALID;
        }
    }
    if (port == 0) {
        /* every rank of one job derives the same port from the job id */
        char key[GCX_CONFIG_STRING_MAX];

        port = gcx_bootstrap_job_id(0, key, sizeof(key)) != NULL ?
                   20000 + (int)(gcx_bootstrap_hash(key) % 20000u) :
                   GCX_BOOTSTRAP_DEFAULT_PORT;
    }
    *port_p = port;
    return GCX_OK;
}

/* The job's token: GCX_JOB_TOKEN, else the launcher's job id, else "" (a
 * job on one host started by hand: foreign bytes are still rejected, a
 * second job on the same port is told apart by its world or rank claims
 * only). */
const char *gcx_bootstrap_token(const struct gcx_config *config, char *buf,
                                size_t buflen)
{
    if (config->job_token[0] != '\0') {
        return "GCX_JOB_TOKEN";
    }
    return gcx_bootstrap_job_id(1, buf, buflen);
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_bootstrap_config_rows[] = {
    {"RANK", GCX_CONFIG_INT, "-1",
     "Rank of this process when bootstrapping from the environment; -1: "
     "take RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID",
     offsetof(struct gcx_config, rank), -1, INT_MAX, NULL},
    {"WORLD_SIZE", GCX_CONFIG_INT, "-1",
     "Number of ranks when bootstrapping from the environment; -1: take "
     "WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS",
     offsetof(struct gcx_config, world_size), -1, 1 << 16, NULL},
    {"LOCAL_RANK", GCX_CONFIG_INT, "-1",
     "Rank among the processes of this host (set by gcxrun; informational)",
     offsetof(struct gcx_config, local_rank), -1, INT_MAX, NULL},
    {"LOCAL_SIZE", GCX_CONFIG_INT, "-1",
     "Number of processes on this host (set by gcxrun; informational)",
     offsetof(struct gcx_config, local_size), -1, INT_MAX, NULL},
    {"ROOT_ADDR", GCX_CONFIG_STRING, "",
     "Host name or IPv4 address of rank 0's rendezvous; empty: MASTER_ADDR, "
     "else the first host of SLURM_STEP_NODELIST, else 127.0.0.1",
     offsetof(struct gcx_config, root_addr), 0, 0, NULL},
    {"ROOT_PORT", GCX_CONFIG_INT, "0",
     "TCP port of rank 0's rendezvous; 0: MASTER_PORT, else a port derived "
     "from the launcher's job id (Slurm, Open MPI), else 29517",
     offsetof(struct gcx_config, root_port), 0, 65535, NULL},
    {"BOOTSTRAP_FD", GCX_CONFIG_INT, "-1",
     "Listening socket inherited by rank 0 from gcxrun (internal; -1: none)",
     offsetof(struct gcx_config, bootstrap_fd), -1, INT_MAX, NULL},
    {"JOB_TOKEN", GCX_CONFIG_SECRET, "",
     "Secret every rank of the job shares; rank 0 admits only connections "
     "that prove it (a MAC of a nonce, the token itself is never sent); "
     "empty: the launcher's job id (SLURM_JOB_ID+SLURM_STEP_ID, Open MPI, "
     "PMIx, TORCHELASTIC_RUN_ID); gcxrun sets a random one",
     offsetof(struct gcx_config, job_token), 0, 0, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_CORE, "core/bootstrap",
                    gcx_bootstrap_config_rows)
