/*
 * bootstrap.c - environment detection and a TCP star for the OOB allgather.
 *
 * Cost: rank 0 accepts size-1 connections and every allgather moves
 * size*len bytes through rank 0, which is fine for the few hundred bytes of
 * UCX addresses per rank exchanged once at creation. Every socket wait is a
 * poll() against the GCX_TIMEOUT deadline, so a rank that never comes or
 * dies during creation gives GCX_ERR_TIMEOUT or GCX_ERR_PEER, not a hang.
 */
#include "bootstrap.h"
#include "base/log.h"
#include "base/time.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define GCX_BOOTSTRAP_MAGIC        0x67637862u /* "gcxb" */
#define GCX_BOOTSTRAP_DEFAULT_PORT 29517

typedef struct gcx_bootstrap_hello {
    uint32_t magic;
    uint32_t rank;
    uint32_t size;
    int32_t  status; /* reply: GCX_OK or why the root refused */
} gcx_bootstrap_hello_t;

struct gcx_bootstrap {
    int    rank;
    int    size;
    double timeout;
    int   *fds; /* root: fds[r] for r >= 1; others: fds[0] = to root */
};

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

gcx_status_t gcx_bootstrap_root(const struct gcx_config *config, char *host,
                                size_t hostlen, int *port_p)
{
    const char *addr = config->root_addr;
    const char *nodelist;
    const char *jobid;
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
        if ((jobid = getenv("SLURM_JOB_ID")) != NULL ||
            (jobid = getenv("OMPI_MCA_ess_base_jobid")) != NULL ||
            (jobid = getenv("PMIX_NAMESPACE")) != NULL) {
            char key[256];
            snprintf(key, sizeof(key), "%s.%s", jobid,
                     getenv("SLURM_STEP_ID") ? getenv("SLURM_STEP_ID") : "");
            port = 20000 + (int)(gcx_bootstrap_hash(key) % 20000u);
        } else {
            port = GCX_BOOTSTRAP_DEFAULT_PORT;
        }
    }
    *port_p = port;
    return GCX_OK;
}

/* ---- socket helpers -------------------------------------------------------- */

static int gcx_bootstrap_wait_fd(int fd, short events, double deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    double        left;
    int           rc;

    for (;;) {
        left = deadline - gcx_time_now();
        if (left <= 0) {
            return 0;
        }
        rc = poll(&pfd, 1, (int)(left * 1000.0) + 1);
        if (rc > 0) {
            return 1;
        }
        if (rc < 0 && errno != EINTR) {
            return -1;
        }
    }
}

/* Moves all @p len bytes (send or receive) before @p deadline. A closed or
 * reset connection means the peer died: GCX_ERR_PEER. */
static gcx_status_t gcx_bootstrap_io_all(int fd, void *buf, size_t len,
                                         int is_send, double deadline)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = is_send ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) :
                              recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            int w = gcx_bootstrap_wait_fd(fd, is_send ? POLLOUT : POLLIN,
                                          deadline);
            if (w == 0) {
                return GCX_ERR_TIMEOUT;
            }
            if (w > 0) {
                continue;
            }
        }
        return GCX_ERR_PEER;
    }
    return GCX_OK;
}

static gcx_status_t gcx_bootstrap_send_all(int fd, const void *buf, size_t len,
                                           double deadline)
{
    return gcx_bootstrap_io_all(fd, (void *)buf, len, 1, deadline);
}

static gcx_status_t gcx_bootstrap_recv_all(int fd, void *buf, size_t len,
                                           double deadline)
{
    return gcx_bootstrap_io_all(fd, buf, len, 0, deadline);
}

static void gcx_bootstrap_tune(int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static int gcx_bootstrap_listen(const struct gcx_config *config, int port)
{
    struct sockaddr_in sa = {0};
    int                fd, one = 1;

    if (config->bootstrap_fd >= 0) {
        return config->bootstrap_fd; /* inherited from gcxrun */
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sa.sin_family      = AF_INET;
    sa.sin_port        = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, 1024) < 0) {
        gcx_error("rank 0 cannot listen on port %d: %s (set GCX_ROOT_PORT "
                  "to a free port)", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static gcx_status_t gcx_bootstrap_root_accept(gcx_bootstrap_t *bs,
                                              const struct gcx_config *config,
                                              int port, double deadline)
{
    gcx_status_t status = GCX_OK;
    int          listen_fd, joined = 0, r;

    listen_fd = gcx_bootstrap_listen(config, port);
    if (listen_fd < 0) {
        return GCX_ERR_IO;
    }
    while (joined < bs->size - 1) {
        gcx_bootstrap_hello_t hello;
        int                   fd, w;

        w = gcx_bootstrap_wait_fd(listen_fd, POLLIN, deadline);
        if (w == 0) {
            gcx_error("only %d of %d ranks joined within GCX_TIMEOUT=%g s",
                      joined + 1, bs->size, bs->timeout);
            status = GCX_ERR_TIMEOUT;
            break;
        }
        fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        gcx_bootstrap_tune(fd);
        if (gcx_bootstrap_recv_all(fd, &hello, sizeof(hello), deadline) !=
                GCX_OK ||
            hello.magic != GCX_BOOTSTRAP_MAGIC) {
            close(fd); /* not one of ours */
            continue;
        }
        hello.status = GCX_OK;
        if (hello.size != (uint32_t)bs->size) {
            gcx_error("rank %u says the world size is %u, rank 0 says %d",
                      hello.rank, hello.size, bs->size);
            hello.status = GCX_ERR_MISMATCH;
        } else if (hello.rank == 0 || hello.rank >= (uint32_t)bs->size ||
                   bs->fds[hello.rank] >= 0) {
            gcx_error("two processes claim rank %u", hello.rank);
            hello.status = GCX_ERR_INVALID;
        }
        if (hello.status != GCX_OK) {
            gcx_bootstrap_send_all(fd, &hello, sizeof(hello), deadline);
            close(fd);
            status = (gcx_status_t)hello.status;
            break;
        }
        bs->fds[hello.rank] = fd;
        ++joined;
    }
    if (listen_fd != config->bootstrap_fd) {
        close(listen_fd); /* an inherited one serves later communicators */
    }
    /* tell every joined rank whether the world is complete */
    for (r = 1; r < bs->size; ++r) {
        if (bs->fds[r] >= 0) {
            gcx_bootstrap_hello_t reply = {GCX_BOOTSTRAP_MAGIC, (uint32_t)r,
                                           (uint32_t)bs->size, status};
            gcx_bootstrap_send_all(bs->fds[r], &reply, sizeof(reply),
                                   deadline + 1.0);
        }
    }
    return status;
}

static gcx_status_t gcx_bootstrap_join(gcx_bootstrap_t *bs, const char *host,
                                       int port, double deadline)
{
    struct addrinfo       hints = {0}, *res = NULL;
    gcx_bootstrap_hello_t hello = {GCX_BOOTSTRAP_MAGIC, (uint32_t)bs->rank,
                                   (uint32_t)bs->size, GCX_OK};
    char                  service[16];
    gcx_status_t          status;
    int                   fd = -1, rc;

    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof(service), "%d", port);
    rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        gcx_error("cannot resolve the rendezvous host '%s': %s", host,
                  gai_strerror(rc));
        return GCX_ERR_INVALID;
    }
    for (;;) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            break;
        }
        if (fd >= 0) {
            close(fd);
            fd = -1;
        }
        if (gcx_time_now() > deadline) {
            gcx_error("cannot reach rank 0 at %s:%d within GCX_TIMEOUT=%g s",
                      host, port, bs->timeout);
            freeaddrinfo(res);
            return GCX_ERR_TIMEOUT;
        }
        usleep(20000);
    }
    freeaddrinfo(res);
    gcx_bootstrap_tune(fd);
    bs->fds[0] = fd;
    status = gcx_bootstrap_send_all(fd, &hello, sizeof(hello), deadline);
    if (status == GCX_OK) {
        status = gcx_bootstrap_recv_all(fd, &hello, sizeof(hello), deadline);
    }
    if (status == GCX_OK && hello.status != GCX_OK) {
        status = (gcx_status_t)hello.status;
        gcx_error("rank 0 refused this rank: %s", gcx_strerror(status));
    }
    return status;
}

gcx_status_t gcx_bootstrap_connect(const struct gcx_config *config, int rank,
                                   int size, gcx_bootstrap_t **bootstrap_p)
{
    gcx_bootstrap_t *bs;
    char             host[GCX_CONFIG_STRING_MAX];
    gcx_status_t     status;
    double           deadline = gcx_time_now() + config->timeout;
    int              port, r;

    status = gcx_bootstrap_root(config, host, sizeof(host), &port);
    if (status != GCX_OK) {
        return status;
    }
    bs = calloc(1, sizeof(*bs));
    if (bs == NULL) {
        return GCX_ERR_NOMEM;
    }
    bs->fds = malloc((size_t)size * sizeof(int));
    if (bs->fds == NULL) {
        free(bs);
        return GCX_ERR_NOMEM;
    }
    for (r = 0; r < size; ++r) {
        bs->fds[r] = -1;
    }
    bs->rank    = rank;
    bs->size    = size;
    bs->timeout = config->timeout;
    gcx_debug("bootstrap: rank %d of %d, rendezvous %s:%d", rank, size, host,
              port);
    if (size == 1) {
        status = GCX_OK;
    } else if (rank == 0) {
        status = gcx_bootstrap_root_accept(bs, config, port, deadline);
    } else {
        status = gcx_bootstrap_join(bs, host, port, deadline);
    }
    if (status != GCX_OK) {
        gcx_bootstrap_close(bs);
        return status;
    }
    *bootstrap_p = bs;
    return GCX_OK;
}

gcx_status_t gcx_bootstrap_allgather(const void *sendbuf, void *recvbuf,
                                     size_t len, void *bootstrap)
{
    gcx_bootstrap_t *bs       = bootstrap;
    double           deadline = gcx_time_now() + bs->timeout;
    gcx_status_t     status;
    int              r;

    memcpy((char *)recvbuf + (size_t)bs->rank * len, sendbuf, len);
    if (bs->size == 1) {
        return GCX_OK;
    }
    if (bs->rank != 0) {
        status = gcx_bootstrap_send_all(bs->fds[0], sendbuf, len, deadline);
        if (status == GCX_OK) {
            status = gcx_bootstrap_recv_all(bs->fds[0], recvbuf,
                                            (size_t)bs->size * len, deadline);
        }
        return status;
    }
    for (r = 1; r < bs->size; ++r) {
        status = gcx_bootstrap_recv_all(bs->fds[r],
                                        (char *)recvbuf + (size_t)r * len, len,
                                        deadline);
        if (status != GCX_OK) {
            gcx_error("bootstrap allgather: rank %d: %s", r,
                      gcx_strerror(status));
            return status;
        }
    }
    for (r = 1; r < bs->size; ++r) {
        status = gcx_bootstrap_send_all(bs->fds[r], recvbuf,
                                        (size_t)bs->size * len, deadline);
        if (status != GCX_OK) {
            return status;
        }
    }
    return GCX_OK;
}

void gcx_bootstrap_close(gcx_bootstrap_t *bs)
{
    int r;

    for (r = 0; r < bs->size; ++r) {
        if (bs->fds[r] >= 0) {
            close(bs->fds[r]);
        }
    }
    free(bs->fds);
    free(bs);
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
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_CORE, "core/bootstrap",
                    gcx_bootstrap_config_rows)
