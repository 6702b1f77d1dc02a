/*
 * phase_shim.c - where a rank's start-up time goes, seen from UCX's side
 * without touching the library: an LD_PRELOAD shim that stamps the UCP
 * calls a communicator's creation and destruction make.
 *
 *   STARTUP_SHIM_DIR=DIR LD_PRELOAD=libstartup_phase_shim.so \
 *     gcxrun -n P -- gcx_startup_perf --dir DIR
 *
 * Idea: gcx creates a communicator as bootstrap (the TCP star: every rank
 * joins rank 0, which answers when all have) -> UCX context and worker
 * (ucp_init, twice when the resources are tcp+self only, ucp_worker_create)
 * -> two allgathers over the star (hellos, UCX addresses) -> one
 * ucp_ep_create per rank -> a check exchange over UCX. The shim wraps
 * ucp_init_version, ucp_worker_create, ucp_worker_get_address,
 * ucp_ep_create, ucp_worker_destroy and ucp_cleanup (dlsym(RTLD_NEXT)),
 * stamps CLOCK_REALTIME at their entry and exit, reads /proc/self/schedstat
 * (seconds on a CPU, seconds runnable but waiting for one) at load and at
 * the phase boundaries, and at exit writes one line to DIR/p<rank> (rank
 * from GCX_RANK or OMPI_COMM_WORLD_RANK):
 *
 *   init_begin init_end worker_end ep_first ep_last ep_count ep_in_s
 *   wdestroy_begin wdestroy_end cleanup_end
 *   (cpu runq) at load, init_begin, worker_end, ep_first, the world's
 *   last ep_create, exit; then the UCX address length
 *
 * With the driver's r<rank> record (startup_common.h), run.sh splits the
 * job's creation into start->init_begin (the star's join: every rank
 * admitted by rank 0), init_begin->worker_end (UCX start), worker_end->
 * ep_first (the two star allgathers), ep_first->ep_last (endpoints),
 * ep_last->created (check exchange + barrier), and says where rank 0, the
 * star's root, spent the star's phases: on a CPU, in the run queue, or
 * asleep waiting for the others.
 * Cost: two clock reads per wrapped call, six small /proc reads per
 * process; nothing else.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucp/api/ucp.h>

static double shim_init_begin, shim_init_end, shim_worker_end;
static double shim_ep_first, shim_ep_last, shim_ep_in;
static double shim_wd_begin, shim_wd_end, shim_cleanup_end;
static long   shim_ep_count;
static size_t shim_addr_len; /* this worker's UCX address, bytes */

/* /proc/self/schedstat (seconds on a CPU, seconds runnable but waiting for
 * one) at: load, init_begin, worker_end, ep_first, ep_last, exit */
enum { SHIM_AT_LOAD, SHIM_AT_INIT, SHIM_AT_WORKER, SHIM_AT_EP_FIRST,
       SHIM_AT_EP_LAST, SHIM_AT_EXIT, SHIM_AT_N };
static double shim_cpu[SHIM_AT_N], shim_runq[SHIM_AT_N];
static long   shim_ep_target; /* the world's size: its creation's last ep */

static void shim_sched(int at)
{
    unsigned long long cpu = 0, runq = 0;
    FILE              *f = fopen("/proc/self/schedstat", "r");

    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &cpu, &runq) != 2) {
            cpu = runq = 0;
        }
        fclose(f);
    }
    shim_cpu[at]  = 1e-9 * (double)cpu;
    shim_runq[at] = 1e-9 * (double)runq;
}

__attribute__((constructor)) static void shim_load(void)
{
    const char *size = getenv("GCX_WORLD_SIZE");

    if (size == NULL) {
        size = getenv("OMPI_COMM_WORLD_SIZE");
    }
    shim_ep_target = size != NULL ? atol(size) : 0;
    shim_sched(SHIM_AT_LOAD);
}

static double shim_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *shim_next(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);

    if (fn == NULL) {
        fprintf(stderr, "phase_shim: no %s\n", name);
        abort();
    }
    return fn;
}

ucs_status_t ucp_init_version(unsigned major, unsigned minor,
                              const ucp_params_t *params,
                              const ucp_config_t *config,
                              ucp_context_h *context_p)
{
    static ucs_status_t (*next)(unsigned, unsigned, const ucp_params_t *,
                                const ucp_config_t *, ucp_context_h *);
    ucs_status_t st;

    if (next == NULL) {
        next = shim_next("ucp_init_version");
    }
    if (shim_init_begin == 0) {
        shim_init_begin = shim_now();
        shim_sched(SHIM_AT_INIT);
    }
    st            = next(major, minor, params, config, context_p);
    shim_init_end = shim_now();
    return st;
}

ucs_status_t ucp_worker_create(ucp_context_h context,
                               const ucp_worker_params_t *params,
                               ucp_worker_h *worker_p)
{
    static ucs_status_t (*next)(ucp_context_h, const ucp_worker_params_t *,
                                ucp_worker_h *);
    ucs_status_t st;

    if (next == NULL) {
        next = shim_next("ucp_worker_create");
    }
    st = next(context, params, worker_p);
    if (shim_worker_end == 0) {
        shim_worker_end = shim_now();
        shim_sched(SHIM_AT_WORKER);
    }
    return st;
}

ucs_status_t ucp_worker_get_address(ucp_worker_h worker,
                                    ucp_address_t **address_p,
                                    size_t *address_length_p)
{
    static ucs_status_t (*next)(ucp_worker_h, ucp_address_t **, size_t *);
    ucs_status_t st;

    if (next == NULL) {
        next = shim_next("ucp_worker_get_address");
    }
    st = next(worker, address_p, address_length_p);
    if (st == UCS_OK && shim_addr_len == 0) {
        shim_addr_len = *address_length_p;
    }
    return st;
}

ucs_status_t ucp_ep_create(ucp_worker_h worker, const ucp_ep_params_t *params,
                           ucp_ep_h *ep_p)
{
    static ucs_status_t (*next)(ucp_worker_h, const ucp_ep_params_t *,
                                ucp_ep_h *);
    ucs_status_t st;
    double       t0 = shim_now();

    if (next == NULL) {
        next = shim_next("ucp_ep_create");
    }
    if (shim_ep_first == 0) {
        shim_ep_first = t0;
        shim_sched(SHIM_AT_EP_FIRST);
    }
    st = next(worker, params, ep_p);
    shim_ep_last = shim_now();
    if (shim_ep_count + 1 == shim_ep_target) {
        shim_sched(SHIM_AT_EP_LAST);
    }
    shim_ep_in += shim_ep_last - t0;
    ++shim_ep_count;
    return st;
}

void ucp_worker_destroy(ucp_worker_h worker)
{
    static void (*next)(ucp_worker_h);

    if (next == NULL) {
        next = shim_next("ucp_worker_destroy");
    }
    shim_wd_begin = shim_now();
    next(worker);
    shim_wd_end = shim_now();
}

void ucp_cleanup(ucp_context_h context)
{
    static void (*next)(ucp_context_h);

    if (next == NULL) {
        next = shim_next("ucp_cleanup");
    }
    next(context);
    shim_cleanup_end = shim_now();
}

__attribute__((destructor)) static void shim_write(void)
{
    const char *dir  = getenv("STARTUP_SHIM_DIR");
    const char *rank = getenv("GCX_RANK");
    char        path[4096];
    FILE       *f;
    int         at;

    shim_sched(SHIM_AT_EXIT);
    if (rank == NULL) {
        rank = getenv("OMPI_COMM_WORLD_RANK");
    }
    if (dir == NULL || rank == NULL) {
        return;
    }
    snprintf(path, sizeof(path), "%s/p%s", dir, rank);
    f = fopen(path, "w");
    if (f == NULL) {
        return;
    }
    fprintf(f, "%.9f %.9f %.9f %.9f %.9f %ld %.9f %.9f %.9f %.9f",
            shim_init_begin, shim_init_end, shim_worker_end, shim_ep_first,
            shim_ep_last, shim_ep_count, shim_ep_in, shim_wd_begin,
            shim_wd_end, shim_cleanup_end);
    for (at = 0; at < SHIM_AT_N; ++at) {
        fprintf(f, " %.6f %.6f", shim_cpu[at], shim_runq[at]);
    }
    fprintf(f, " %zu", shim_addr_len);
    fprintf(f, "\n");
    fclose(f);
}
