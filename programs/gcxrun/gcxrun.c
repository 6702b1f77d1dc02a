/*
 * gcxrun - start N ranks of a program on this machine, like torchrun or
 * mpirun for one host.
 *
 *   gcxrun -n N [-t] [--keep-going] [--timeout S] [--bind auto|cpu|none]
 *          [--] PROGRAM [ARGS...]
 *
 * Each rank gets GCX_RANK, GCX_WORLD_SIZE, GCX_LOCAL_RANK, GCX_LOCAL_SIZE,
 * GCX_ROOT_ADDR, GCX_ROOT_PORT and GCX_JOB_TOKEN. gcxrun opens the rendezvous
 * socket itself (on an ephemeral loopback port) and hands it to rank 0
 * (GCX_BOOTSTRAP_FD), so concurrent jobs never race for a port; the token,
 * 128 random bits per job (kept if GCX_JOB_TOKEN is set already), is what
 * rank 0 admits connections by, so no other process on the host can join
 * the job. When a rank fails, the others
 * get SIGTERM (then SIGKILL after a grace period) unless --keep-going;
 * SIGINT/SIGTERM to gcxrun are forwarded. The exit status is 0 when every
 * rank succeeded, else the first failing rank's status (128+signal for a
 * signal), 124 on --timeout. With -t every output line is prefixed "[rank]".
 *
 * Binding: when the ranks divide evenly over the n CPUs gcxrun may use
 * (its own affinity mask): N <= n, or N a multiple of n, rank r is pinned
 * to CPU r mod n, so the scheduler cannot stack two busy-polling ranks on
 * one CPU and move them around (on the 2-core box that alone took a
 * 2-rank 1 MB allreduce from 240-520 us to 206-219 us). With N a multiple
 * of n, unlike mpirun, which then pins nothing: a waiting gcx rank calls
 * sched_yield(), which hands the CPU only to a task of the same CPU's run
 * queue, and pinned that is a rank it shares the CPU with (4 ranks on 2
 * CPUs, 1 MB allreduce: paired gcx/Open MPI 1.04-1.09 pinned, 0.62-1.06
 * not; perf/coll/RESULTS.md). Otherwise nothing is pinned: one CPU would
 * carry more ranks than the others for the whole run (5 ranks on 2 CPUs:
 * the 5-rank allreduce tests took 46% longer pinned). --bind cpu pins
 * round-robin whatever N is, --bind none never.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GCXRUN_KILL_GRACE_S 5.0

typedef struct gcxrun_stream {
    int    fd;      /* read end, -1 when closed */
    FILE  *out;     /* where its lines go */
    char  *line;    /* partial line */
    size_t len, cap;
} gcxrun_stream_t;

typedef struct gcxrun_rank {
    pid_t           pid;
    int             running;
    int             status; /* wait status */
    gcxrun_stream_t streams[2];
} gcxrun_rank_t;

static volatile sig_atomic_t gcxrun_signal;

static void gcxrun_on_signal(int sig)
{
    gcxrun_signal = sig;
}

static double gcxrun_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void gcxrun_usage(FILE *out)
{
    fprintf(out,
            "usage: gcxrun -n N [options] [--] PROGRAM [ARGS...]\n"
            "Start N ranks of PROGRAM on this machine with a gcx environment.\n"
            "  -n, --nprocs N     number of ranks (1..4096)\n"
            "  -t, --tag-output   prefix every output line with [rank]\n"
            "  --keep-going       do not stop the other ranks when one fails\n"
            "  --timeout S        kill the job after S seconds (exit 124)\n"
            "  --bind MODE        auto (default): pin rank r to usable CPU\n"
            "                     r mod n when N <= n or N is a multiple of n,\n"
            "                     else none; cpu: always; none: never\n"
            "  -h, --help         this text\n");
}

static void gcxrun_flush_line(gcxrun_stream_t *s, int rank)
{
    fprintf(s->out, "[%d] %.*s\n", rank, (int)s->len, s->line);
    fflush(s->out);
    s->len = 0;
}

/* At the end of a stream: prints an unterminated last line, closes it. */
static void gcxrun_close_stream(gcxrun_stream_t *s, int rank)
{
    if (s->len > 0) {
        gcxrun_flush_line(s, rank);
    }
    close(s->fd);
    s->fd = -1;
}

/* Reads what is there; prints complete lines with the rank prefix. Returns
 * 0 when there was nothing to read (yet), else 1. */
static int gcxrun_drain(gcxrun_stream_t *s, int rank)
{
    char    buf[4096];
    ssize_t n, i;

    n = read(s->fd, buf, sizeof(buf));
    if (n <= 0) {
        int again = n < 0 && errno == EINTR;

        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            gcxrun_close_stream(s, rank);
        }
        return again;
    }
    for (i = 0; i < n; ++i) {
        if (buf[i] == '\n') {
            gcxrun_flush_line(s, rank);
            continue;
        }
        if (s->len == s->cap) {
            size_t cap  = s->cap ? 2 * s->cap : 256;
            char  *line = realloc(s->line, cap);
            if (line == NULL) {
                gcxrun_flush_line(s, rank);
                continue;
            }
            s->line = line;
            s->cap  = cap;
        }
        s->line[s->len++] = buf[i];
    }
    return 1;
}

static int gcxrun_listen(int *port_p)
{
    struct sockaddr_in sa  = {0};
    socklen_t          len = sizeof(sa);
    int                fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    sa.sin_family      = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port        = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        close(fd);
        return -1;
    }
    *port_p = ntohs(sa.sin_port);
    return fd;
}

/* GCX_JOB_TOKEN for every rank: 32 hex digits of getrandom(), unless the
 * caller set one. 0 on success. */
static int gcxrun_job_token(void)
{
    unsigned char bytes[16];
    char          text[2 * sizeof(bytes) + 1];
    size_t        i;

    if (getenv("GCX_JOB_TOKEN") != NULL && *getenv("GCX_JOB_TOKEN") != '\0') {
        return 0;
    }
    if (getrandom(bytes, sizeof(bytes), 0) != (ssize_t)sizeof(bytes)) {
        return -1;
    }
    for (i = 0; i < sizeof(bytes); ++i) {
        snprintf(text + 2 * i, 3, "%02x", bytes[i]);
    }
    return setenv("GCX_JOB_TOKEN", text, 1);
}

static void gcxrun_setenv_int(const char *name, int value)
{
    char text[32];
    snprintf(text, sizeof(text), "%d", value);
    setenv(name, text, 1);
}

enum { GCXRUN_BIND_AUTO, GCXRUN_BIND_CPU, GCXRUN_BIND_NONE };

/* The CPUs this process may run on, in order; their count (0: unknown). */
static int gcxrun_cpus(int *cpus, int max)
{
    cpu_set_t set;
    int       c, n = 0;

    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return 0;
    }
    for (c = 0; c < CPU_SETSIZE && n < max; ++c) {
        if (CPU_ISSET(c, &set)) {
            cpus[n++] = c;
        }
    }
    return n;
}

/* Pins the calling process to @p cpu; a failure is reported, not fatal. */
static void gcxrun_pin(int rank, int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "gcxrun: rank %d: cannot bind to CPU %d: %s\n", rank,
                cpu, strerror(errno));
    }
}

static void gcxrun_child(int rank, int nprocs, int port, int listen_fd,
                         int tag_output, int pipes[2][2], int cpu,
                         char **argv)
{
    if (cpu >= 0) {
        gcxrun_pin(rank, cpu);
    }
    if (tag_output) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
    }
    gcxrun_setenv_int("GCX_RANK", rank);
    gcxrun_setenv_int("GCX_WORLD_SIZE", nprocs);
    gcxrun_setenv_int("GCX_LOCAL_RANK", rank);
    gcxrun_setenv_int("GCX_LOCAL_SIZE", nprocs);
    setenv("GCX_ROOT_ADDR", "127.0.0.1", 1);
    gcxrun_setenv_int("GCX_ROOT_PORT", port);
    if (rank == 0) {
        int fd = dup(listen_fd); /* dup() clears FD_CLOEXEC */
        gcxrun_setenv_int("GCX_BOOTSTRAP_FD", fd);
    } else {
        unsetenv("GCX_BOOTSTRAP_FD");
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvp(argv[0], argv);
    fprintf(stderr, "gcxrun: cannot run '%s': %s\n", argv[0],
            strerror(errno));
    _exit(127);
}

static int gcxrun_exit_code(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return 1;
}

static void gcxrun_kill_all(gcxrun_rank_t *ranks, int n, int sig)
{
    int r;

    for (r = 0; r < n; ++r) {
        if (ranks[r].running) {
            kill(ranks[r].pid, sig);
        }
    }
}

int main(int argc, char **argv)
{
    gcxrun_rank_t   *ranks;
    struct sigaction sa = {0};
    double           kill_at = 0, deadline = 0, timeout = 0;
    int              nprocs = 0, tag_output = 0, keep_going = 0;
    int              port, listen_fd, running, r, i, argi;
    int              bind = GCXRUN_BIND_AUTO, ncpus, cpus[CPU_SETSIZE];
    int              first_failed = -1, exit_code = 0, timed_out = 0;

    for (argi = 1; argi < argc; ++argi) {
        const char *a = argv[argi];

        if (!strcmp(a, "--")) {
            ++argi;
            break;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--nprocs") ||
                   !strcmp(a, "-np")) {
            char *end;
            if (argi + 1 >= argc) {
                fprintf(stderr, "gcxrun: %s needs a number\n", a);
                return 2;
            }
            nprocs = (int)strtol(argv[++argi], &end, 10);
            if (*end != '\0' || nprocs < 1 || nprocs > 4096) {
                fprintf(stderr, "gcxrun: invalid number of ranks '%s' "
                        "(1..4096)\n", argv[argi]);
                return 2;
            }
        } else if (!strcmp(a, "-t") || !strcmp(a, "--tag-output")) {
            tag_output = 1;
        } else if (!strcmp(a, "--keep-going")) {
            keep_going = 1;
        } else if (!strcmp(a, "--timeout")) {
            char *end;
            if (argi + 1 >= argc) {
                fprintf(stderr, "gcxrun: --timeout needs seconds\n");
                return 2;
            }
            timeout = strtod(argv[++argi], &end);
            if (*end != '\0' || timeout <= 0) {
                fprintf(stderr, "gcxrun: invalid --timeout '%s'\n",
                        argv[argi]);
                return 2;
            }
        } else if (!strcmp(a, "--bind")) {
            const char *m = argi + 1 < argc ? argv[++argi] : "";

            if (!strcmp(m, "auto")) {
                bind = GCXRUN_BIND_AUTO;
            } else if (!strcmp(m, "cpu")) {
                bind = GCXRUN_BIND_CPU;
            } else if (!strcmp(m, "none")) {
                bind = GCXRUN_BIND_NONE;
            } else {
                fprintf(stderr, "gcxrun: --bind '%s': expected auto, cpu or "
                        "none\n", m);
                return 2;
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            gcxrun_usage(stdout);
            return 0;
        } else if (a[0] == '-') {
            fprintf(stderr, "gcxrun: unknown option '%s'\n", a);
            gcxrun_usage(stderr);
            return 2;
        } else {
            break;
        }
    }
    if (nprocs == 0 || argi >= argc) {
        fprintf(stderr, "gcxrun: %s\n", nprocs == 0 ? "-n N is required" :
                                                      "no program given");
        gcxrun_usage(stderr);
        return 2;
    }

    ncpus = bind == GCXRUN_BIND_NONE ? 0 : gcxrun_cpus(cpus, CPU_SETSIZE);
    if (bind == GCXRUN_BIND_AUTO && nprocs > ncpus && ncpus > 0 &&
        nprocs % ncpus != 0) {
        ncpus = 0; /* uneven: let the scheduler balance the ranks */
    }
    if (gcxrun_job_token() != 0) {
        fprintf(stderr, "gcxrun: cannot make a job token: %s\n",
                strerror(errno));
        return 1;
    }
    listen_fd = gcxrun_listen(&port);
    if (listen_fd < 0) {
        fprintf(stderr, "gcxrun: cannot open the rendezvous socket: %s\n",
                strerror(errno));
        return 1;
    }
    ranks = calloc((size_t)nprocs, sizeof(*ranks));
    if (ranks == NULL) {
        return 1;
    }
    sa.sa_handler = gcxrun_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    for (r = 0; r < nprocs; ++r) {
        int pipes[2][2] = {{-1, -1}, {-1, -1}};

        if (tag_output && (pipe2(pipes[0], O_CLOEXEC) < 0 ||
                           pipe2(pipes[1], O_CLOEXEC) < 0)) {
            fprintf(stderr, "gcxrun: pipe: %s\n", strerror(errno));
            gcxrun_kill_all(ranks, r, SIGKILL);
            return 1;
        }
        fflush(NULL);
        ranks[r].pid = fork();
        if (ranks[r].pid < 0) {
            fprintf(stderr, "gcxrun: fork: %s\n", strerror(errno));
            gcxrun_kill_all(ranks, r, SIGKILL);
            return 1;
        }
        if (ranks[r].pid == 0) {
            gcxrun_child(r, nprocs, port, listen_fd, tag_output, pipes,
                         ncpus > 0 ? cpus[r % ncpus] : -1, &argv[argi]);
        }
        ranks[r].running = 1;
        for (i = 0; i < 2; ++i) {
            ranks[r].streams[i].fd  = tag_output ? pipes[i][0] : -1;
            ranks[r].streams[i].out = i == 0 ? stdout : stderr;
            if (tag_output) {
                close(pipes[i][1]);
                fcntl(pipes[i][0], F_SETFL, O_NONBLOCK);
            }
        }
    }
    close(listen_fd);
    if (timeout > 0) {
        deadline = gcxrun_now() + timeout;
    }

    running = nprocs;
    while (running > 0 || tag_output) {
        struct pollfd pfds[2 * 4096];
        int           owners[2 * 4096], npfd = 0;
        pid_t         pid;
        int           status;

        /* reap */
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (r = 0; r < nprocs; ++r) {
                if (ranks[r].pid == pid && ranks[r].running) {
                    ranks[r].running = 0;
                    ranks[r].status  = status;
                    --running;
                    if (gcxrun_exit_code(status) != 0 && first_failed < 0 &&
                        kill_at == 0) {
                        first_failed = r;
                        exit_code    = gcxrun_exit_code(status);
                        fprintf(stderr, "gcxrun: rank %d %s %d%s\n", r,
                                WIFSIGNALED(status) ? "was killed by signal" :
                                                      "exited with status",
                                WIFSIGNALED(status) ? WTERMSIG(status) :
                                                      WEXITSTATUS(status),
                                keep_going || running == 0 ?
                                    "" : "; stopping the other ranks");
                        if (!keep_going && running > 0) {
                            gcxrun_kill_all(ranks, nprocs, SIGTERM);
                            kill_at = gcxrun_now() + GCXRUN_KILL_GRACE_S;
                        }
                    }
                }
            }
        }
        if (gcxrun_signal != 0) {
            int sig = gcxrun_signal;
            gcxrun_signal = 0;
            if (kill_at != 0) {
                sig = SIGKILL; /* second signal: no more patience */
            }
            gcxrun_kill_all(ranks, nprocs, sig);
            if (kill_at == 0) {
                kill_at = gcxrun_now() + GCXRUN_KILL_GRACE_S;
            }
            if (exit_code == 0) {
                exit_code = 128 + sig;
            }
        }
        if (deadline > 0 && gcxrun_now() > deadline && !timed_out) {
            fprintf(stderr, "gcxrun: --timeout of %g s reached; killing the "
                    "job\n", timeout);
            timed_out = 1;
            gcxrun_kill_all(ranks, nprocs, SIGTERM);
            kill_at = gcxrun_now() + GCXRUN_KILL_GRACE_S;
        }
        if (kill_at != 0 && gcxrun_now() > kill_at) {
            gcxrun_kill_all(ranks, nprocs, SIGKILL);
        }
        if (running == 0 && tag_output) {
            /* Every rank is reaped, so all they wrote is in the pipes: take
             * it and stop. Waiting for EOF would wait on whatever child a
             * rank left behind holding its stdout (a shell's sleep), past
             * --timeout and the stop of a failed job. */
            for (r = 0; r < nprocs; ++r) {
                for (i = 0; i < 2; ++i) {
                    gcxrun_stream_t *s = &ranks[r].streams[i];

                    while (s->fd >= 0 && gcxrun_drain(s, r)) {
                    }
                    if (s->fd >= 0) {
                        gcxrun_close_stream(s, r);
                    }
                }
            }
            break;
        }

        for (r = 0; r < nprocs && tag_output; ++r) {
            for (i = 0; i < 2; ++i) {
                if (ranks[r].streams[i].fd >= 0) {
                    pfds[npfd].fd     = ranks[r].streams[i].fd;
                    pfds[npfd].events = POLLIN;
                    owners[npfd++]    = r * 2 + i;
                }
            }
        }
        if (npfd == 0) {
            if (running == 0) {
                break;
            }
            usleep(20000);
            continue;
        }
        if (poll(pfds, (nfds_t)npfd, 50) > 0) {
            for (i = 0; i < npfd; ++i) {
                if (pfds[i].revents != 0) {
                    gcxrun_drain(&ranks[owners[i] / 2].streams[owners[i] % 2],
                                 owners[i] / 2);
                }
            }
        }
    }
    for (r = 0; r < nprocs; ++r) {
        free(ranks[r].streams[0].line);
        free(ranks[r].streams[1].line);
    }
    free(ranks);
    return timed_out ? 124 : exit_code;
}
