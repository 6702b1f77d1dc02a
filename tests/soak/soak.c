/*
 * soak.c - gcx_soak: a long seeded mix of collectives, algorithms and
 * communicators, every result checked, memory and descriptors watched
 * (issue 15, "Hardening").
 *
 * Idea: every rank draws the same sequence from one seeded generator (the
 * seed is rank 0's, broadcast first), one draw per step, so the ranks agree
 * on every kind, size, type, operation, root, algorithm and communicator
 * event without talking about it; what a step needs beyond that comes from
 * a generator seeded by that draw. A step is a collective (allreduce,
 * broadcast, allgather(v), alltoallv, reduce-scatter, reduce, gather,
 * scatter, barrier, send/recv around a ring, sparse allreduce; every type
 * and operation; in place or not; from a byte to --max-bytes), a batch of
 * 2-4 of them posted non-blocking and waited in a shuffled order, or a
 * communicator event (create over an OOB of the world with forced
 * algorithms, create from the environment, split, dup, destroy). Split
 * families have one communicator per color; a rank outside one skips its
 * steps. Inputs are a deterministic function of (step, rank, element), small
 * integers exact in every type (f16 and bf16 included), so each rank
 * computes the expected result of every peer locally and compares bits;
 * 64 guard bytes around each output catch a write out of bounds.
 *
 * Memory: buffers are allocated and touched once at start. At a
 * checkpoint every --every steps each rank reads its resident set
 * (/proc/self/statm) and its open descriptors (/proc/self/fd); after
 * --warmup steps every family but the world is destroyed and the baseline
 * is taken, at the end again. --fd-exact fails a rank whose descriptor
 * count is not back at its baseline; --rss-growth-kb K fails a rank whose
 * resident set grew by more than K kB per 10^4 steps after the baseline.
 *
 * --churn N instead creates and destroys N communicators (every 50th from
 * the environment, the rest over the OOB, split and dup), each checked with
 * one allreduce; run in the ASan build, LeakSanitizer reports what they
 * leak at exit.
 *
 * Cost: the reference of a reduction over n ranks of c elements is n*c
 * table lookups; a sparse step regenerates every member's input (O(sum of
 * nnz) plus O(N)). Buffers: about (4 + 4P) * --max-bytes per rank.
 *
 * Files: soak.c (this: the tables, the state, memory and descriptors, the
 * run, main), soak_ops.c (generator, inputs, one collective step),
 * soak_sparse.c (the sparse allreduce step), soak_comm.c (communicator
 * families, events, churn); soak.h shares their types and state.
 */
#include "soak.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const soak_kind_names[K_NKINDS] = {
    "allreduce", "broadcast", "allgather", "allgatherv", "alltoallv",
    "reduce_scatter", "reduce", "gather", "scatter", "barrier", "send_recv",
    "sparse_allreduce", "create(oob)", "create(env)", "split", "dup",
    "destroy",
};

/* Configurations a created communicator may get: forced algorithms, small
 * pipeline chunks and thresholds ({name, value}, ..., NULL). */
const char *const soak_configs[][9] = {
    {NULL},
    {"ALLREDUCE_ALGO", "recursive_doubling", NULL},
    {"ALLREDUCE_ALGO", "ring", "PIPELINE_CHUNK", "4K", NULL},
    {"ALLREDUCE_ALGO", "rabenseifner", NULL},
    {"BCAST_ALGO", "binomial", NULL},
    {"BCAST_ALGO", "chain", "PIPELINE_CHUNK", "8K", NULL},
    {"ALLREDUCE_SMALL_MSG", "1K", "ALLREDUCE_LARGE_MSG", "32K",
     "BCAST_SMALL_MSG", "1K", NULL},
    {"SPARSE_ALGO", "split", "NET_LATENCY_US", "5", "NET_BANDWIDTH_GBPS",
     "10", NULL},
    {"SPARSE_ALGO", "balanced_split", "SPARSE_FEEDBACK", "n", NULL},
    {"CHECK_ARGS", "n", NULL},
    {"PROGRESS_YIELD", "n", "PIPELINE_CHUNK", "64K", NULL},
};
_Static_assert(sizeof(soak_configs) / sizeof(soak_configs[0]) == SOAK_NCONFIGS,
               "SOAK_NCONFIGS in soak.h");

const char *const soak_sparse_algos[] = {
    NULL, "auto", "allgather", "recursive_doubling", "split",
    "balanced_split",
};

soak_state_t S;

/* ---- memory and descriptors --------------------------------------------- */

long soak_rss_kb(void)
{
    long  pages = 0, resident = 0;
    FILE *f     = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) {
            resident = 0;
        }
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

long soak_fds(void)
{
    long           n   = 0;
    DIR           *dir = opendir("/proc/self/fd");
    struct dirent *e;

    while (dir != NULL && (e = readdir(dir)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (dir != NULL) {
        closedir(dir);
        --n; /* the directory's own descriptor */
    }
    return n;
}

double soak_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* max over ranks of each value, on the world */
void soak_max(int64_t *v, size_t n)
{
    gcx_status_t st = gcx_allreduce(S.world, GCX_IN_PLACE, v, n, GCX_DT_I64,
                                    GCX_OP_MAX, NULL);
    if (st != GCX_OK) {
        soak_die("checkpoint allreduce", st);
    }
}

static void soak_sum(int64_t *v, size_t n)
{
    gcx_status_t st = gcx_allreduce(S.world, GCX_IN_PLACE, v, n, GCX_DT_I64,
                                    GCX_OP_SUM, NULL);
    if (st != GCX_OK) {
        soak_die("summary allreduce", st);
    }
}

/* ---- the run ------------------------------------------------------------- */

static int soak_alloc(size_t max_bytes)
{
    size_t big = (size_t)S.size * max_bytes + 2 * SOAK_GUARD + 4096;

    for (int k = 0; k < SOAK_NSLOT; ++k) {
        size_t b = k == 0 ? big : big / 16 + 2 * SOAK_GUARD + 4096;
        S.slot[k].bytes = b;
        S.slot[k].send  = malloc(b);
        S.slot[k].recv  = malloc(b);
        if (S.slot[k].send == NULL || S.slot[k].recv == NULL) {
            return -1;
        }
        memset(S.slot[k].send, 0, b); /* resident from the start */
        memset(S.slot[k].recv, 0, b);
    }
    S.ref       = malloc(big);
    S.aux_bytes = max_bytes / 16 + 16;
    S.aux       = malloc(S.aux_bytes);
    if (S.ref == NULL || S.aux == NULL) {
        return -1;
    }
    memset(S.ref, 0, big);
    memset(S.aux, 0, S.aux_bytes);
    return 0;
}

/* Kind of a collective step: every kind, a little more allreduce. */
static int soak_draw_kind(uint64_t *rng)
{
    size_t k = soak_rng_below(rng, K_NCOLL + 2);
    return k >= K_NCOLL ? K_ALLREDUCE : (int)k;
}

/* Picks the family (same on every rank) and this rank's place in it. */
static int soak_setup_op(soak_op_t *o, uint64_t *rng, uint64_t seq, int slot)
{
    int live[SOAK_MAX_FAM], nlive = soak_live_list(live, 1);

    memset(o, 0, sizeof(*o));
    o->seq   = seq;
    o->kind  = soak_draw_kind(rng);
    o->fam   = live[soak_rng_below(rng, (size_t)nlive)];
    o->rng   = soak_rng_next(rng);
    o->slot  = &S.slot[slot];
    o->comm  = S.fam[o->fam].comm;
    if (o->comm == NULL) {
        return 0;
    }
    o->n  = gcx_comm_size(o->comm);
    o->me = gcx_comm_rank(o->comm);
    return 1;
}

static void soak_count(const soak_op_t *o)
{
    ++S.st.ops;
    ++S.st.per_kind[o->kind];
    ++S.st.per_config[S.fam[o->fam].config];
    if (o->kind != K_BARRIER) {
        ++S.st.per_type[o->dt];
        S.st.bytes += o->count * o->esz;
    }
    if (o->kind == K_ALLREDUCE || o->kind == K_REDUCE ||
        o->kind == K_REDUCE_SCATTER) {
        ++S.st.per_op[o->op];
    }
    if (o->kind == K_SPARSE) {
        ++S.st.per_sparse_algo[o->algo_index];
    }
}

static void soak_fail_op(soak_op_t *o, gcx_status_t st)
{
    fprintf(stderr,
            "[soak rank %d] step %llu %s on family %d (%d ranks, type %s, op "
            "%s, count %zu, root %d) returned %s\n",
            S.rank, (unsigned long long)o->seq, soak_kind_names[o->kind],
            S.fam[o->fam].id, o->n, gcx_dtype_name(o->dt), gcx_op_name(o->op),
            o->count, o->root, gcx_strerror(st));
    exit(3);
}

static void soak_wait_op(soak_op_t *o)
{
    for (int q = 0; q < o->nreq; ++q) {
        gcx_status_t st = gcx_wait(o->req[q]);
        gcx_request_free(o->req[q]);
        if (st != GCX_OK) {
            soak_fail_op(o, st);
        }
    }
    o->nreq = 0;
}

/* One step: a collective, a batch, or a communicator event. */
static void soak_step(uint64_t *rng, uint64_t *seq, size_t max_bytes,
                      uint64_t *done)
{
    uint64_t  s = soak_rng_next(rng);
    size_t    what = soak_rng_below(&s, 1000);
    soak_op_t ops[SOAK_MAX_BATCH];
    double    t0 = soak_now();

    if (what < 12) { /* ~1.2%: a communicator event */
        static const int kinds[] = {K_CREATE, K_CREATE, K_SPLIT, K_SPLIT,
                                    K_DUP, K_DESTROY, K_DESTROY};
        int kind = what == 0 && soak_rng_below(&s, 8) == 0 ?
                       K_CREATE_ENV :
                       kinds[soak_rng_below(&s, sizeof(kinds) / sizeof(kinds[0]))];
        soak_event(kind, &s);
        S.st.seconds[kind] += soak_now() - t0;
        return;
    }
    if (what < 150) { /* a batch of non-blocking collectives */
        int nb = 2 + (int)soak_rng_below(&s, SOAK_MAX_BATCH - 1), order[SOAK_MAX_BATCH];
        for (int b = 0; b < nb; ++b) {
            order[b] = b;
            if (soak_setup_op(&ops[b], &s, (*seq)++, b)) {
                gcx_status_t st = soak_post(&ops[b], max_bytes / 16);
                if (st != GCX_OK) {
                    soak_fail_op(&ops[b], st);
                }
                S.st.nonblocking++;
            }
        }
        for (int b = nb - 1; b > 0; --b) { /* the same shuffle everywhere */
            int j = (int)soak_rng_below(&s, (size_t)b + 1), t = order[b];
            order[b] = order[j];
            order[j] = t;
        }
        for (int b = 0; b < nb; ++b) {
            soak_op_t *o = &ops[order[b]];
            if (o->comm != NULL) {
                soak_wait_op(o);
            }
        }
        for (int b = 0; b < nb; ++b) {
            if (ops[b].comm != NULL) {
                soak_check(&ops[b]);
                soak_count(&ops[b]);
            }
        }
        ++S.st.batches;
        *done += (uint64_t)nb;
        S.st.seconds[K_NKINDS] += soak_now() - t0;
        return;
    }
    if (soak_setup_op(&ops[0], &s, (*seq)++, 0)) {
        gcx_status_t st;
        ops[0].blocking = soak_rng_below(&s, 2) == 0 && ops[0].kind != K_SENDRECV;
        st              = soak_post(&ops[0], max_bytes);
        if (st != GCX_OK) {
            soak_fail_op(&ops[0], st);
        }
        if (!ops[0].blocking) {
            S.st.nonblocking++;
        }
        soak_wait_op(&ops[0]);
        soak_check(&ops[0]);
        soak_count(&ops[0]);
        S.st.seconds[ops[0].kind] += soak_now() - t0;
    }
    *done += 1;
}

typedef struct {
    long rss0, rss1, rss_max, fd0, fd1, fd_max, rss_start;
} soak_mem_t;

static void soak_print_stats(double elapsed)
{
    int64_t v[K_NKINDS + SOAK_NCONFIGS + GCX_DT_LAST + GCX_OP_LAST + 6 + 6];
    size_t  m = 0;

    /* counts summed over ranks (a step on a split family counts once per
     * communicator member) */
    for (int k = 0; k < K_NKINDS; ++k) v[m++] = (int64_t)S.st.per_kind[k];
    for (int k = 0; k < SOAK_NCONFIGS; ++k) v[m++] = (int64_t)S.st.per_config[k];
    for (int k = 0; k < GCX_DT_LAST; ++k) v[m++] = (int64_t)S.st.per_type[k];
    for (int k = 0; k < GCX_OP_LAST; ++k) v[m++] = (int64_t)S.st.per_op[k];
    for (int k = 0; k < 6; ++k) v[m++] = (int64_t)S.st.per_sparse_algo[k];
    v[m++] = (int64_t)S.st.ops;
    v[m++] = (int64_t)S.st.batches;
    v[m++] = (int64_t)S.st.nonblocking;
    v[m++] = (int64_t)S.st.bytes;
    v[m++] = (int64_t)S.st.events;
    v[m++] = (int64_t)S.st.wrong;
    soak_sum(v, m);
    if (S.rank != 0) {
        return;
    }
    m = 0;
    printf("# calls summed over ranks, %.1f s\n# kind:", elapsed);
    for (int k = 0; k < K_NKINDS; ++k) printf(" %s=%lld", soak_kind_names[k], (long long)v[m++]);
    printf("\n# config:");
    for (int k = 0; k < SOAK_NCONFIGS; ++k) {
        printf(" [%d]", k);
        for (int j = 0; soak_configs[k][j] != NULL; j += 2) {
            printf("%s%s=%s", j ? "," : "", soak_configs[k][j],
                   soak_configs[k][j + 1]);
        }
        printf("%s:%lld", soak_configs[k][0] ? "" : "default", (long long)v[m++]);
    }
    printf("\n# type:");
    for (int k = 0; k < GCX_DT_LAST; ++k) printf(" %s=%lld", gcx_dtype_name((gcx_dtype_t)k), (long long)v[m++]);
    printf("\n# reduction op:");
    for (int k = 0; k < GCX_OP_LAST; ++k) printf(" %s=%lld", gcx_op_name((gcx_op_t)k), (long long)v[m++]);
    printf("\n# sparse algo:");
    for (int k = 0; k < 6; ++k) printf(" %s=%lld", soak_sparse_algos[k] ? soak_sparse_algos[k] : "comm", (long long)v[m++]);
    printf("\n# seconds on rank 0 (steps alone, with their checks; batches):");
    for (int k = 0; k <= K_NKINDS; ++k) {
        printf(" %s=%.1f", k < K_NKINDS ? soak_kind_names[k] : "batches",
               S.st.seconds[k]);
    }
    printf("\n# rank-calls %lld, in batches %lld, non-blocking %lld, bytes %lld, "
           "events %lld, wrong %lld\n",
           (long long)v[m], (long long)v[m + 1], (long long)v[m + 2],
           (long long)v[m + 3], (long long)v[m + 4], (long long)v[m + 5]);
}

static void soak_checkpoint(uint64_t done, double t0, soak_mem_t *mem,
                            int header)
{
    int64_t v[4] = {soak_rss_kb(), soak_fds(), (int64_t)S.st.wrong, 0};
    int     live[SOAK_MAX_FAM];

    if (v[0] > mem->rss_max) mem->rss_max = v[0];
    if (v[1] > mem->fd_max) mem->fd_max = v[1];
    v[3] = soak_live_list(live, 0);
    soak_max(v, 4);
    if (S.rank == 0) {
        if (header) {
            printf("%10s %8s %12s %6s %6s %6s\n", "steps", "time_s",
                   "rss_kb(max)", "fds", "comms", "wrong");
        }
        printf("%10llu %8.1f %12lld %6lld %6lld %6lld\n",
               (unsigned long long)done, soak_now() - t0, (long long)v[0],
               (long long)v[1], (long long)v[3] + 1, (long long)v[2]);
        fflush(stdout);
    }
}

static int soak_run(uint64_t seed, uint64_t nops, size_t max_bytes,
                    uint64_t every, uint64_t warmup, long rss_growth_kb,
                    int fd_exact, const char *results)
{
    uint64_t   rng = seed, seq = 1, done = 0, next = every;
    double     t0 = soak_now(), t_base = t0;
    soak_mem_t mem = {0};
    int        based = 0, fail = 0;
    int64_t    verdict[6];

    mem.rss_start = soak_rss_kb();
    soak_checkpoint(0, t0, &mem, 1);
    while (done < nops) {
        soak_step(&rng, &seq, max_bytes, &done);
        if (!based && done >= warmup) {
            soak_destroy_all();
            mem.rss0 = mem.rss_max = soak_rss_kb();
            mem.fd0  = mem.fd_max = soak_fds();
            t_base   = soak_now();
            based    = 1;
            if (S.rank == 0) {
                printf("# baseline after %llu steps (all but the world "
                       "destroyed)\n", (unsigned long long)done);
            }
        }
        if (done >= next || done >= nops) {
            soak_checkpoint(done, t0, &mem, 0);
            next = done + every;
        }
    }
    soak_destroy_all();
    mem.rss1 = soak_rss_kb();
    mem.fd1  = soak_fds();
    if (!based) {
        mem.rss0 = mem.rss_start;
        mem.fd0  = mem.fd1;
    }
    /* verdicts of this rank */
    {
        double after = (double)(done - (based ? warmup : 0));
        long   bound = (long)((double)rss_growth_kb * (after / 1e4 < 1 ? 1 : after / 1e4));
        if (fd_exact && mem.fd1 != mem.fd0) {
            fprintf(stderr, "[soak rank %d] open descriptors %ld at the end, "
                    "%ld at the baseline\n", S.rank, mem.fd1, mem.fd0);
            fail = 1;
        }
        if (rss_growth_kb > 0 && mem.rss1 - mem.rss0 > bound) {
            fprintf(stderr, "[soak rank %d] resident memory grew %ld kB "
                    "(%ld -> %ld) over %.0f steps, more than the %ld kB "
                    "allowed\n", S.rank, mem.rss1 - mem.rss0, mem.rss0,
                    mem.rss1, after, bound);
            fail = 1;
        }
    }
    soak_print_stats(soak_now() - t0);
    verdict[0] = (int64_t)S.st.wrong;
    verdict[1] = fail;
    verdict[2] = mem.rss1 - mem.rss0;
    verdict[3] = mem.fd1 - mem.fd0;
    verdict[4] = mem.rss_max;
    verdict[5] = mem.fd_max;
    {
        int64_t base[4] = {mem.rss0, mem.fd0, mem.rss1, mem.fd1};
        soak_max(verdict, 6);
        soak_max(base, 4);
        if (S.rank == 0) {
            double el = soak_now() - t0;
            printf("# soak: %d ranks, seed %llu, %llu steps (%llu after the "
                   "baseline) in %.1f s (%.0f steps/s), %lld wrong; rss (max "
                   "over ranks) baseline %lld kB, end %lld kB, max %lld kB, "
                   "growth %lld kB; fds baseline %lld, end %lld, max %lld\n",
                   S.size, (unsigned long long)seed, (unsigned long long)done,
                   (unsigned long long)(done - (based ? warmup : 0)), el,
                   (double)done / el, (long long)verdict[0], (long long)base[0],
                   (long long)base[2], (long long)verdict[4],
                   (long long)verdict[2], (long long)base[1],
                   (long long)base[3], (long long)verdict[5]);
            if (results != NULL) {
                FILE *f = fopen(results, "a");
                if (f != NULL) {
                    fprintf(f,
                            "{\"ranks\": %d, \"seed\": %llu, \"steps\": %llu, "
                            "\"warmup\": %llu, \"max_bytes\": %zu, "
                            "\"seconds\": %.1f, \"wrong\": %lld, "
                            "\"rss_kb_baseline\": %lld, \"rss_kb_end\": %lld, "
                            "\"rss_kb_max\": %lld, \"fds_baseline\": %lld, "
                            "\"fds_end\": %lld, \"fds_max\": %lld, "
                            "\"since_baseline_s\": %.1f}\n",
                            S.size, (unsigned long long)seed,
                            (unsigned long long)done,
                            (unsigned long long)warmup, max_bytes, el,
                            (long long)verdict[0], (long long)base[0],
                            (long long)base[2], (long long)verdict[4],
                            (long long)base[1], (long long)base[3],
                            (long long)verdict[5], soak_now() - t_base);
                    fclose(f);
                }
            }
        }
    }
    return verdict[0] != 0 || verdict[1] != 0;
}

/* ---- main ---------------------------------------------------------------- */

static size_t soak_parse_size(const char *s)
{
    char  *end;
    double v = strtod(s, &end);

    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    default: break;
    }
    return (size_t)v;
}

static void soak_usage(void)
{
    fprintf(stderr,
            "usage: gcx_soak [--ops N] [--seed S] [--max-bytes B] [--every K]\n"
            "                [--warmup K] [--rss-growth-kb K] [--fd-exact]\n"
            "                [--results FILE] | --churn N [--fd-exact]\n"
            "Run under gcxrun (or any launcher gcx bootstraps from).\n");
}

int main(int argc, char **argv)
{
    uint64_t     seed = 1, nops = 100000, every = 0, warmup = 0;
    size_t       max_bytes = 4u << 20;
    long         rss_growth_kb = 0;
    int          fd_exact = 0, churn = 0, rc;
    const char  *results = NULL;
    gcx_status_t st;

    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--fd-exact")) {
            fd_exact = 1;
            continue;
        }
        if (v == NULL) {
            soak_usage();
            return 1;
        }
        if (!strcmp(a, "--ops")) nops = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--max-bytes")) max_bytes = soak_parse_size(v);
        else if (!strcmp(a, "--every")) every = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--warmup")) warmup = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--rss-growth-kb")) rss_growth_kb = strtol(v, NULL, 0);
        else if (!strcmp(a, "--results")) results = v;
        else if (!strcmp(a, "--churn")) churn = atoi(v);
        else {
            soak_usage();
            return 1;
        }
        ++i;
    }
    if (every == 0) {
        every = nops >= 100000 ? 10000 : (nops >= 10 ? nops / 10 : 1);
    }
    if (warmup == 0) {
        warmup = every;
    }
    if (max_bytes < 1024) {
        max_bytes = 1024;
    }
    soak_tables_init();
    st = gcx_comm_create(NULL, NULL, &S.world);
    if (st != GCX_OK) {
        soak_die("gcx_comm_create (world)", st);
    }
    S.rank = gcx_comm_rank(S.world);
    S.size = gcx_comm_size(S.world);
    if (S.size > SOAK_MAX_RANKS) {
        fprintf(stderr, "gcx_soak: at most %d ranks\n", SOAK_MAX_RANKS);
        return 1;
    }
    /* rank 0's seed for everyone */
    st = gcx_broadcast(S.world, &seed, 1, GCX_DT_I64, 0, NULL);
    if (st != GCX_OK) {
        soak_die("seed broadcast", st);
    }
    S.fam[0].live = 1;
    S.fam[0].comm = S.world;
    S.fam[0].n    = S.size;
    S.fam[0].how  = -1;
    for (int r = 0; r < S.size; ++r) {
        S.fam[0].members[r] = r;
    }
    if (churn > 0) {
        rc = soak_churn(seed, churn, fd_exact);
    } else {
        if (soak_alloc(max_bytes) != 0) {
            fprintf(stderr, "gcx_soak: cannot allocate the buffers\n");
            return 1;
        }
        if (S.rank == 0) {
            printf("# gcx_soak: %d ranks, seed %llu, %llu steps, max %zu "
                   "bytes per rank\n",
                   S.size, (unsigned long long)seed, (unsigned long long)nops,
                   max_bytes);
        }
        rc = soak_run(seed, nops, max_bytes, every, warmup, rss_growth_kb,
                      fd_exact, results);
        for (int k = 0; k < SOAK_NSLOT; ++k) {
            free(S.slot[k].send);
            free(S.slot[k].recv);
        }
        free(S.ref);
        free(S.aux);
    }
    gcx_comm_destroy(S.world);
    return rc;
}
