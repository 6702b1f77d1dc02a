/*
 * bootstrap.c - a TCP star for the OOB allgather of communicator creation,
 * which admits only the ranks of this job (identity and rendezvous address:
 * bootstrap_env.c; message format and MACs: bootstrap_wire.c).
 *
 * Protocol (docs/architecture.md, "Bootstrap"): rank 0 sends each new
 * connection a CHALLENGE (a nonce); a rank answers with a HELLO (rank,
 * size, its nonce, and a MAC of them and the challenge keyed by the job
 * token), so the token never travels and a HELLO cannot be replayed; rank 0
 * admits it with a REPLY MACed the same way, so the rank knows it reached
 * its own job's root. A header that disagrees is rejected before a byte of
 * the body is read, and nothing is allocated from a length on the wire.
 * Rank 0 serves the connections that have not proven themselves yet all at
 * once from one poll() (at most GCX_BOOTSTRAP_MAX_PENDING, each with its
 * own deadline), so port scanners, truncated or oversized messages, wrong
 * tokens and silent connections are closed with a logged reason and never
 * delay the job.
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
#include <errno.h>
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

struct gcx_bootstrap {
    int       rank;
    int       size;
    double    timeout;
    int      *fds;    /* root: fds[r] for r >= 1; others: fds[0] = to root */
    uint64_t *nonces; /* root: rank r's (challenge, hello) nonces at 2r */
    uint64_t  key[2]; /* SipHash key made from the job token */
};

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

static gcx_status_t gcx_bootstrap_send_msg(int fd,
                                           const gcx_bootstrap_msg_t *msg,
                                           double deadline)
{
    uint8_t buf[GCX_BOOTSTRAP_HEADER_LEN + 24];

    return gcx_bootstrap_send_all(fd, buf, gcx_bootstrap_pack(buf, msg),
                                  deadline);
}

/* Receives a fixed-size message of @p type: the header is checked before
 * the body is read. GCX_ERR_INVALID (with *why_p) for a malformed one. */
static gcx_status_t gcx_bootstrap_recv_msg(int fd, unsigned type,
                                           gcx_bootstrap_msg_t *msg,
                                           double deadline, const char **why_p)
{
    uint8_t      buf[GCX_BOOTSTRAP_HEADER_LEN + 24];
    size_t       body = gcx_bootstrap_body_len(type);
    gcx_status_t status;

    *why_p = NULL;
    status = gcx_bootstrap_recv_all(fd, buf, GCX_BOOTSTRAP_HEADER_LEN,
                                    deadline);
    if (status == GCX_OK) {
        status = gcx_bootstrap_parse_header(buf, GCX_BOOTSTRAP_HEADER_LEN,
                                            type, body, why_p);
    }
    if (status == GCX_OK) {
        status = gcx_bootstrap_recv_all(fd, buf, body, deadline);
    }
    if (status == GCX_OK) {
        status = gcx_bootstrap_parse_body(type, buf, body, msg);
    }
    return status;
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
        fd = config->bootstrap_fd; /* inherited from gcxrun */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return fd;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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

/* ---- rank 0: accepting the ranks ------------------------------------------- */

/* A connection that has not proven it belongs to the job yet. */
typedef struct gcx_bootstrap_pending {
    int      fd;
    double   deadline;   /* its hello must be complete by then */
    uint64_t nonce;      /* the challenge it was sent */
    size_t   got;        /* bytes of header + hello received */
    uint8_t  buf[GCX_BOOTSTRAP_HEADER_LEN + 24];
    char     peer[48];   /* "address:port", for the log */
} gcx_bootstrap_pending_t;

typedef struct gcx_bootstrap_root_state {
    gcx_bootstrap_t        *bs;
    gcx_bootstrap_pending_t pending[GCX_BOOTSTRAP_MAX_PENDING];
    int                     npending;
    int                     joined;
    unsigned                rejected;
} gcx_bootstrap_root_state_t;

/* Closes pending connection @p i with the reason logged (the first few at
 * warn level, the rest at debug: a flood must not flood the log). */
static void gcx_bootstrap_reject(gcx_bootstrap_root_state_t *st, int i,
                                 const char *why)
{
    gcx_bootstrap_pending_t *p = &st->pending[i];

    if (++st->rejected <= GCX_BOOTSTRAP_LOGGED_REJECTS) {
        gcx_warn("bootstrap: rejected a connection from %s: %s", p->peer, why);
    } else {
        gcx_debug("bootstrap: rejected a connection from %s: %s", p->peer,
                  why);
    }
    close(p->fd);
    st->pending[i] = st->pending[--st->npending];
}

static void gcx_bootstrap_take(gcx_bootstrap_root_state_t *st, int listen_fd,
                               double timeout)
{
    struct sockaddr_in       sa;
    socklen_t                salen = sizeof(sa);
    gcx_bootstrap_pending_t *p;
    gcx_bootstrap_msg_t      challenge = {.type = GCX_BOOTSTRAP_CHALLENGE};
    uint8_t                  buf[GCX_BOOTSTRAP_HEADER_LEN + 8];
    int                      fd, i, oldest;

    fd = accept4(listen_fd, (struct sockaddr *)&sa, &salen,
                 SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && st->npending > 0) {
        oldest = 0; /* out of descriptors: drop the oldest stranger */
        for (i = 1; i < st->npending; ++i) {
            if (st->pending[i].deadline < st->pending[oldest].deadline) {
                oldest = i;
            }
        }
        gcx_bootstrap_reject(st, oldest, "out of file descriptors");
        return;
    }
    if (fd < 0) {
        return;
    }
    if (st->npending == GCX_BOOTSTRAP_MAX_PENDING) {
        oldest = 0;
        for (i = 1; i < st->npending; ++i) {
            if (st->pending[i].deadline < st->pending[oldest].deadline) {
                oldest = i;
            }
        }
        gcx_bootstrap_reject(st, oldest, "too many connections without a "
                                         "hello; the oldest goes");
    }
    gcx_bootstrap_tune(fd);
    p           = &st->pending[st->npending++];
    p->fd       = fd;
    p->deadline = gcx_time_now() + (timeout < GCX_BOOTSTRAP_HELLO_S ?
                                        timeout : GCX_BOOTSTRAP_HELLO_S);
    p->nonce    = gcx_bootstrap_nonce();
    p->got      = 0;
    if (inet_ntop(AF_INET, &sa.sin_addr, p->peer, sizeof(p->peer)) == NULL) {
        snprintf(p->peer, sizeof(p->peer), "?");
    }
    snprintf(p->peer + strlen(p->peer), sizeof(p->peer) - strlen(p->peer),
             ":%u", ntohs(sa.sin_port));
    challenge.nonce = p->nonce;
    /* 20 bytes into a fresh socket's buffer: never partial */
    if (send(fd, buf, gcx_bootstrap_pack(buf, &challenge),
             MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        gcx_bootstrap_reject(st, st->npending - 1,
                             "closed before the challenge");
    }
}

/* A verified hello from pending connection @p i: the rank joins, or the
 * world is wrong (a fatal status for the whole creation). */
static gcx_status_t gcx_bootstrap_admit(gcx_bootstrap_root_state_t *st, int i,
                                        const gcx_bootstrap_msg_t *hello,
                                        double deadline)
{
    gcx_bootstrap_t         *bs = st->bs;
    gcx_bootstrap_pending_t *p  = &st->pending[i];
    gcx_bootstrap_msg_t      reply = {.type   = GCX_BOOTSTRAP_REPLY,
                                      .status = GCX_INPROGRESS,
                                      .rank   = hello->rank};
    gcx_status_t             status;

    if (hello->size != (uint32_t)bs->size) {
        gcx_error("rank %u says the world size is %u, rank 0 says %d",
                  hello->rank, hello->size, bs->size);
        reply.status = GCX_ERR_MISMATCH;
    } else if (hello->rank == 0 || hello->rank >= (uint32_t)bs->size ||
               bs->fds[hello->rank] >= 0) {
        gcx_error("two processes claim rank %u", hello->rank);
        reply.status = GCX_ERR_INVALID;
    }
    reply.mac = gcx_bootstrap_reply_mac(bs->key, p->nonce, hello->nonce,
                                        &reply);
    status = gcx_bootstrap_send_msg(p->fd, &reply, deadline);
    if (reply.status != GCX_INPROGRESS) {
        close(p->fd);
        st->pending[i] = st->pending[--st->npending];
        return (gcx_status_t)reply.status;
    }
    if (status != GCX_OK) {
        gcx_bootstrap_reject(st, i, "lost after its hello");
        return GCX_OK; /* it will come again */
    }
    bs->fds[hello->rank]            = p->fd;
    bs->nonces[2 * hello->rank]     = p->nonce;
    bs->nonces[2 * hello->rank + 1] = hello->nonce;
    st->pending[i] = st->pending[--st->npending];
    ++st->joined;
    return GCX_OK;
}

/* Reads what pending connection @p i sent; checks the header before the
 * body and the authenticator before anything else of the hello. */
static gcx_status_t gcx_bootstrap_read(gcx_bootstrap_root_state_t *st, int i,
                                       double deadline)
{
    gcx_bootstrap_pending_t *p    = &st->pending[i];
    size_t                   need = GCX_BOOTSTRAP_HEADER_LEN + 24;
    gcx_bootstrap_msg_t      hello, refusal = {.type = GCX_BOOTSTRAP_REPLY};
    uint8_t                  buf[GCX_BOOTSTRAP_HEADER_LEN + 16];
    const char              *why;
    char                     text[96];
    ssize_t                  n;

    n = recv(p->fd, p->buf + p->got,
             (p->got < GCX_BOOTSTRAP_HEADER_LEN ? GCX_BOOTSTRAP_HEADER_LEN :
                                                  need) - p->got,
             MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        snprintf(text, sizeof(text), "closed after %zu bytes (%s)", p->got,
                 n == 0 ? "no complete hello" : strerror(errno));
        gcx_bootstrap_reject(st, i, text);
        return GCX_OK;
    }
    if (n < 0) {
        return GCX_OK;
    }
    p->got += (size_t)n;
    if (p->got == GCX_BOOTSTRAP_HEADER_LEN &&
        gcx_bootstrap_parse_header(p->buf, p->got, GCX_BOOTSTRAP_HELLO, 24,
                                   &why) != GCX_OK) {
        gcx_bootstrap_reject(st, i, why);
        return GCX_OK;
    }
    if (p->got < need) {
        return GCX_OK;
    }
    gcx_bootstrap_parse_body(GCX_BOOTSTRAP_HELLO,
                             p->buf + GCX_BOOTSTRAP_HEADER_LEN, 24, &hello);
    if (hello.mac != gcx_bootstrap_hello_mac(st->bs->key, p->nonce, &hello)) {
        /* not signed: this tells a rank of another job why, nothing more */
        refusal.status = GCX_ERR_MISMATCH;
        refusal.rank   = hello.rank;
        send(p->fd, buf, gcx_bootstrap_pack(buf, &refusal),
             MSG_NOSIGNAL | MSG_DONTWAIT);
        gcx_bootstrap_reject(st, i, "wrong job token (its authenticator "
                                    "does not match this job's token)");
        return GCX_OK;
    }
    return gcx_bootstrap_admit(st, i, &hello, deadline);
}

static gcx_status_t gcx_bootstrap_root_accept(gcx_bootstrap_t *bs,
                                              const struct gcx_config *config,
                                              int port, double deadline)
{
    gcx_bootstrap_root_state_t *st;
    gcx_status_t                status = GCX_OK;
    int                         listen_fd, r, i;

    st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return GCX_ERR_NOMEM;
    }
    st->bs    = bs;
    listen_fd = gcx_bootstrap_listen(config, port);
    if (listen_fd < 0) {
        free(st);
        return GCX_ERR_IO;
    }
    while (status == GCX_OK && st->joined < bs->size - 1) {
        struct pollfd pfds[1 + GCX_BOOTSTRAP_MAX_PENDING];
        double        now = gcx_time_now(), wake = deadline;
        int           rc;

        if (now >= deadline) {
            gcx_error("only %d of %d ranks joined within GCX_TIMEOUT=%g s",
                      st->joined + 1, bs->size, bs->timeout);
            status = GCX_ERR_TIMEOUT;
            break;
        }
        pfds[0].fd     = listen_fd;
        pfds[0].events = POLLIN;
        for (i = 0; i < st->npending; ++i) {
            pfds[1 + i].fd     = st->pending[i].fd;
            pfds[1 + i].events = POLLIN;
            if (st->pending[i].deadline < wake) {
                wake = st->pending[i].deadline;
            }
        }
        rc = poll(pfds, (nfds_t)(1 + st->npending),
                  wake > now ? (int)((wake - now) * 1000.0) + 1 : 0);
        if (rc < 0 && errno != EINTR) {
            gcx_error("bootstrap: poll: %s", strerror(errno));
            status = GCX_ERR_IO;
            break;
        }
        now = gcx_time_now();
        /* from the last: a rejected one is replaced by the last one */
        for (i = st->npending - 1; i >= 0 && status == GCX_OK; --i) {
            if (rc > 0 && pfds[1 + i].revents != 0) {
                status = gcx_bootstrap_read(st, i, deadline);
            } else if (now >= st->pending[i].deadline) {
                gcx_bootstrap_reject(st, i, "no complete hello in time");
            }
        }
        if (status == GCX_OK && rc > 0 && (pfds[0].revents & POLLIN)) {
            gcx_bootstrap_take(st, listen_fd, bs->timeout);
        }
    }
    for (i = 0; i < st->npending; ++i) {
        close(st->pending[i].fd); /* strangers still silent: not ours */
    }
    if (st->rejected > GCX_BOOTSTRAP_LOGGED_REJECTS) {
        gcx_warn("bootstrap: rejected %u foreign or malformed connections "
                 "in all", st->rejected);
    }
    if (listen_fd != config->bootstrap_fd) {
        close(listen_fd); /* an inherited one serves later communicators */
    }
    /* tell every joined rank whether the world is complete */
    for (r = 1; r < bs->size; ++r) {
        if (bs->fds[r] >= 0) {
            gcx_bootstrap_msg_t reply = {.type   = GCX_BOOTSTRAP_REPLY,
                                         .status = status,
                                         .rank   = (uint32_t)r};

            reply.mac = gcx_bootstrap_reply_mac(bs->key, bs->nonces[2 * r],
                                                bs->nonces[2 * r + 1], &reply);
            gcx_bootstrap_send_msg(bs->fds[r], &reply, deadline + 1.0);
        }
    }
    free(st);
    return status;
}

/* ---- the other ranks: joining ---------------------------------------------- */

/* One attempt over a connected @p fd: challenge, hello, admission, then
 * the root's word that the world is complete. *retry_p: the connection
 * was not (or no longer) a working rendezvous, try again. */
static gcx_status_t gcx_bootstrap_join_once(gcx_bootstrap_t *bs, int fd,
                                            const char *where, double deadline,
                                            int *retry_p)
{
    gcx_bootstrap_msg_t challenge, reply;
    gcx_bootstrap_msg_t hello = {.type = GCX_BOOTSTRAP_HELLO,
                                 .rank = (uint32_t)bs->rank,
                                 .size = (uint32_t)bs->size};
    const char         *why;
    gcx_status_t        status;

    *retry_p = 1;
    status   = gcx_bootstrap_recv_msg(fd, GCX_BOOTSTRAP_CHALLENGE, &challenge,
                                      deadline, &why);
    if (status != GCX_OK) {
        gcx_debug("bootstrap: %s sent no challenge: %s", where,
                  why != NULL ? why : gcx_strerror(status));
        return status;
    }
    hello.nonce = gcx_bootstrap_nonce();
    hello.mac   = gcx_bootstrap_hello_mac(bs->key, challenge.nonce, &hello);
    status      = gcx_bootstrap_send_msg(fd, &hello, deadline);
    if (status == GCX_OK) {
        status = gcx_bootstrap_recv_msg(fd, GCX_BOOTSTRAP_REPLY, &reply,
                                        deadline, &why);
    }
    if (status != GCX_OK) {
        return status; /* e.g. dropped by a root flooded with strangers */
    }
    if (reply.mac != gcx_bootstrap_reply_mac(bs->key, challenge.nonce,
                                             hello.nonce, &reply)) {
        if (reply.status == GCX_ERR_MISMATCH && reply.mac == 0) {
            gcx_error("rank 0 at %s refused this rank's job token: "
                      "GCX_JOB_TOKEN (or the launcher's job id it is taken "
                      "from) differs between the ranks", where);
            *retry_p = 0;
            return GCX_ERR_MISMATCH;
        }
        gcx_debug("bootstrap: %s answered with a wrong authenticator", where);
        return GCX_ERR_PEER;
    }
    *retry_p = 0;
    if (reply.status == GCX_INPROGRESS) { /* admitted: wait for the world */
        status = gcx_bootstrap_recv_msg(fd, GCX_BOOTSTRAP_REPLY, &reply,
                                        deadline, &why);
        if (status == GCX_OK &&
            reply.mac != gcx_bootstrap_reply_mac(bs->key, challenge.nonce,
                                                 hello.nonce, &reply)) {
            status = GCX_ERR_PEER;
            why    = "a wrong authenticator";
        }
        if (status != GCX_OK) {
            gcx_error("bootstrap: rank 0 at %s: %s", where,
                      why != NULL ? why : gcx_strerror(status));
            return status;
        }
    }
    if (reply.status != GCX_OK) {
        status = reply.status < 0 ? (gcx_status_t)reply.status : GCX_ERR_PEER;
        gcx_error("rank 0 refused this rank: %s", gcx_strerror(status));
    }
    return status;
}

static gcx_status_t gcx_bootstrap_join(gcx_bootstrap_t *bs, const char *host,
                                       int port, double deadline)
{
    struct addrinfo hints = {0}, *res = NULL;
    char            service[16], where[GCX_CONFIG_STRING_MAX + 16];
    gcx_status_t    status = GCX_ERR_TIMEOUT;
    int             fd = -1, rc, retry = 1;

    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof(service), "%d", port);
    snprintf(where, sizeof(where), "%s:%d", host, port);
    rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        gcx_error("cannot resolve the rendezvous host '%s': %s", host,
                  gai_strerror(rc));
        return GCX_ERR_INVALID;
    }
    while (retry) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            gcx_bootstrap_tune(fd);
            status = gcx_bootstrap_join_once(bs, fd, where, deadline, &retry);
            if (status == GCX_OK) {
                break;
            }
        }
        if (fd >= 0) {
            close(fd);
            fd = -1;
        }
        if (retry && gcx_time_now() > deadline) {
            gcx_error("cannot reach rank 0 at %s within GCX_TIMEOUT=%g s",
                      where, bs->timeout);
            status = GCX_ERR_TIMEOUT;
            break;
        }
        if (retry) {
            usleep(20000);
        }
    }
    freeaddrinfo(res);
    bs->fds[0] = fd;
    return status;
}

gcx_status_t gcx_bootstrap_connect(const struct gcx_config *config, int rank,
                                   int size, gcx_bootstrap_t **bootstrap_p)
{
    gcx_bootstrap_t *bs;
    char             host[GCX_CONFIG_STRING_MAX], jobid[GCX_CONFIG_STRING_MAX];
    const char      *source;
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
    bs->fds    = malloc((size_t)size * sizeof(int));
    bs->nonces = calloc(2 * (size_t)size, sizeof(uint64_t));
    if (bs->fds == NULL || bs->nonces == NULL) {
        free(bs->fds);
        free(bs->nonces);
        free(bs);
        return GCX_ERR_NOMEM;
    }
    for (r = 0; r < size; ++r) {
        bs->fds[r] = -1;
    }
    bs->rank    = rank;
    bs->size    = size;
    bs->timeout = config->timeout;
    source      = gcx_bootstrap_token(config, jobid, sizeof(jobid));
    gcx_bootstrap_key(config->job_token[0] != '\0' ? config->job_token :
                      source != NULL ? jobid : "", bs->key);
    gcx_debug("bootstrap: rank %d of %d, rendezvous %s:%d, job token from "
              "%s", rank, size, host, port,
              source != NULL ? source : "nowhere (none set)");
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

/* Receives a DATA message of exactly @p len bytes into @p buf: the length
 * is checked before a byte of the payload is read. */
static gcx_status_t gcx_bootstrap_recv_data(int fd, void *buf, size_t len,
                                            double deadline, const char **why)
{
    uint8_t      hdr[GCX_BOOTSTRAP_HEADER_LEN];
    gcx_status_t status;

    *why   = NULL;
    status = gcx_bootstrap_recv_all(fd, hdr, sizeof(hdr), deadline);
    if (status == GCX_OK) {
        status = gcx_bootstrap_parse_header(hdr, sizeof(hdr),
                                            GCX_BOOTSTRAP_DATA, len, why);
    }
    if (status == GCX_OK) {
        status = gcx_bootstrap_recv_all(fd, buf, len, deadline);
    }
    return status;
}

static gcx_status_t gcx_bootstrap_send_data(int fd, const void *buf,
                                            size_t len, double deadline)
{
    uint8_t      hdr[GCX_BOOTSTRAP_HEADER_LEN];
    gcx_status_t status;

    gcx_bootstrap_put_header(hdr, GCX_BOOTSTRAP_DATA, (uint32_t)len);
    status = gcx_bootstrap_send_all(fd, hdr, sizeof(hdr), deadline);
    if (status == GCX_OK) {
        status = gcx_bootstrap_send_all(fd, buf, len, deadline);
    }
    return status;
}

gcx_status_t gcx_bootstrap_allgather(const void *sendbuf, void *recvbuf,
                                     size_t len, void *bootstrap)
{
    gcx_bootstrap_t *bs       = bootstrap;
    double           deadline = gcx_time_now() + bs->timeout;
    const char      *why;
    gcx_status_t     status;
    int              r;

    memcpy((char *)recvbuf + (size_t)bs->rank * len, sendbuf, len);
    if (bs->size == 1) {
        return GCX_OK;
    }
    if ((size_t)bs->size * len > UINT32_MAX) {
        gcx_error("bootstrap allgather: %zu bytes per rank are too many",
                  len);
        return GCX_ERR_INVALID;
    }
    if (bs->rank != 0) {
        status = gcx_bootstrap_send_data(bs->fds[0], sendbuf, len, deadline);
        if (status == GCX_OK) {
            status = gcx_bootstrap_recv_data(bs->fds[0], recvbuf,
                                             (size_t)bs->size * len, deadline,
                                             &why);
        }
        if (status != GCX_OK && why != NULL) {
            gcx_error("bootstrap allgather: rank 0 sent %s", why);
            status = GCX_ERR_PEER;
        }
        return status;
    }
    for (r = 1; r < bs->size; ++r) {
        status = gcx_bootstrap_recv_data(bs->fds[r],
                                         (char *)recvbuf + (size_t)r * len,
                                         len, deadline, &why);
        if (status != GCX_OK) {
            gcx_error("bootstrap allgather: rank %d: %s", r,
                      why != NULL ? why : gcx_strerror(status));
            return why != NULL ? GCX_ERR_PEER : status;
        }
    }
    for (r = 1; r < bs->size; ++r) {
        status = gcx_bootstrap_send_data(bs->fds[r], recvbuf,
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
    free(bs->nonces);
    free(bs);
}
