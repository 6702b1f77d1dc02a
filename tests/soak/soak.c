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
 * The randomized differential run (issue 31, item 2; off unless asked,
 * then the plain sequence is unchanged): --inject PCT (mismatches and bad
 * arguments on random ranks, each followed by a checked collective on the
 * same communicator), --delays PCT (seeded sleeps), --more (coded gather
 * and create_group), --kills N / --kill-at (a rank _exits, the survivors
 * shrink and go on); soak_random.c. Exit: 0 ok, 1 wrong, 2 setup failed,
 * 3 unexpected error, 4 hang (GCX_ERR_TIMEOUT); every failure prints a
 * replay command. random_runs.py runs many short sequences of it.
 *
 * Cost: the reference of a reduction over n ranks of c elements is n*c
 * table lookups; a sparse step regenerates every member's input (O(sum of
 * nnz) plus O(N)). Buffers: about (4 + 4P) * --max-bytes per rank.
 *
 * Files: soak.c (this: the tables, the state, memory and descriptors, the
 * run, main), soak_ops.c (generator, inputs, one collective step),
 * soak_sparse.c (the sparse allreduce step), soak_comm.c (communicator
 * families, events, churn), soak_random.c (injections, delays, kills, coded
 * gather, create_group, replay lines); soak.h shares their types and
 * state.
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
    "sparse_allreduce", "coded_gather", "create(oob)", "create(env)", "split",
    "dup", "destroy", "create_group",
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
        if (S.opt.inject > 0) { /* only then: the plain soak's memory */
            S.slot[k].snap = malloc(2 * b);
            if (S.slot[k].snap == NULL) {
                return -1;
            }
            memset(S.slot[k].snap, 0, 2 * b);
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

/* Kind of a collective step: every kind, a little more allreduce (the
 * coded gather comes from --more, drawn apart). */
static int soak_draw_kind(uint64_t *rng)
{
    size_t k = soak_rng_below(rng, SOAK_NDRAWN + 2);
    return k >= SOAK_NDRAWN ? K_ALLREDUCE : (int)k;
}

/* The family's communicator and this rank's place in it; the injection,
 * liars and delays of the step (soak_random.c). */
static int soak_setup_fam(soak_op_t *o, uint64_t *rng, uint64_t seq, int slot)
{
    o->seq   = seq;
    o->rng   = soak_rng_next(rng);
    o->slot  = &S.slot[slot];
    o->comm  = S.fam[o->fam].comm;
    o->force_algo = -1;
    if (o->comm != NULL) {
        o->n  = gcx_comm_size(o->comm);
        o->me = gcx_comm_rank(o->comm);
    }
    soak_inject_setup(o);
    return o->comm != NULL;
}

/* Picks the family (same on every rank) and this rank's place in it. */
static int soak_setup_op(soak_op_t *o, uint64_t *rng, uint64_t seq, int slot)
{
    int live[SOAK_MAX_FAM], nlive = soak_live_list(live, 1);

    memset(o, 0, sizeof(*o));
    o->kind  = soak_draw_kind(rng);
    if (S.opt.only >= 0) {
        o->kind = S.opt.only; /* --only: the draws stay as they were */
    }
    o->fam   = live[soak_rng_below(rng, (size_t)nlive)];
    return soak_setup_fam(o, rng, seq, slot);
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

/* A status other than GCX_OK: an injected mismatch (checked later), a
 * failure a kill explains (recorded), else a hang or an unexpected error
 * (exit 4 or 3, with the replay line). */
static void soak_fail_op(soak_op_t *o, int q, gcx_status_t st)
{
    if (q >= 0) {
        o->rst[q] = st;
    }
    if (st == GCX_ERR_MISMATCH && o->inj != INJ_NONE && o->inj != INJ_INVALID) {
        if (o->inj != INJ_P2P_SIZE) {
            o->status = st;
        }
        return;
    }
    soak_bad_status(o, q < 0 ? "post" : "wait", st);
    if (o->status == GCX_OK) {
        o->status = st;
    }
}

static void soak_wait_op(soak_op_t *o)
{
    for (int q = 0; q < o->nreq; ++q) {
        gcx_status_t st = gcx_wait(o->req[q]);
        gcx_request_free(o->req[q]);
        o->rst[q] = GCX_OK;
        if (st != GCX_OK) {
            soak_fail_op(o, q, st);
        }
    }
    o->nreq = 0;
}

/* Posts a single step (blocking or not), waits, checks, counts. */
static void soak_run_single(soak_op_t *o, size_t max_bytes, int die_inside,
                            double t0)
{
    gcx_status_t st;

    if (die_inside) {
        o->blocking = 0; /* the victim posts, then goes */
    }
    if (o->kind == K_CODED) {
        (void)soak_coded_run(o, max_bytes, die_inside);
        soak_count(o);
        S.st.seconds[o->kind] += soak_now() - t0;
        return;
    }
    st = soak_post(o, max_bytes);
    if (st != GCX_OK) {
        if (!o->blocking) {
            o->nreq = o->kind == K_SENDRECV ? o->nreq : 0; /* none started */
        }
        soak_fail_op(o, -1, st);
    }
    if (die_inside) {
        uint64_t t = soak_mix(o->rng, 0x74657374);
        soak_vanish(o, 1, soak_rng_below(&t, 4));
    }
    if (!o->blocking) {
        S.st.nonblocking++;
    }
    soak_wait_op(o);
    soak_check(o);
    soak_count(o);
    S.st.seconds[o->kind] += soak_now() - t0;
}

/* After an injected step: the next collective on its communicator, of the
 * same kind (a sparse one by auto, which an injected algorithm must not
 * have put out of step), checked as every other. */
static void soak_follow_up(const soak_op_t *inj, uint64_t *rng, uint64_t *seq,
                           size_t max_bytes)
{
    soak_op_t o;

    memset(&o, 0, sizeof(o));
    o.kind   = inj->kind;
    o.fam    = inj->fam;
    o.follow = 1;
    if (soak_setup_fam(&o, rng, (*seq)++, 0)) {
        if (o.kind == K_SPARSE) {
            o.force_algo = 1; /* "auto" */
        }
        o.blocking = soak_rng_below(rng, 2) == 0 && o.kind != K_SENDRECV;
        soak_run_single(&o, max_bytes, 0, soak_now());
        S.st.follow += o.me == 0;
    }
}

/* One step: a collective, a batch, or a communicator event. With --more,
 * create_group events and coded gather steps come from a draw of their own
 * (the plain soak's sequence stays as it was); with --kills, a collective
 * step may be a kill step (soak_random.c). */
static void soak_step(uint64_t *rng, uint64_t *seq, size_t max_bytes,
                      uint64_t *done)
{
    uint64_t  s = soak_rng_next(rng);
    size_t    what = soak_rng_below(&s, 1000);
    uint64_t  x = soak_mix(s, 0x6d6f7265);
    size_t    extra = S.opt.more ? soak_rng_below(&x, 1000) : 1000;
    soak_op_t ops[SOAK_MAX_BATCH];
    double    t0 = soak_now();
    int       kill, victim = 0, inside = 0;

    ++S.nstep;
    if (what < 12 || extra < 10) { /* ~1.2%: a communicator event */
        static const int kinds[] = {K_CREATE, K_CREATE, K_SPLIT, K_SPLIT,
                                    K_DUP, K_DESTROY, K_DESTROY};
        int kind = what == 0 && soak_rng_below(&s, 8) == 0 ?
                       K_CREATE_ENV :
                       kinds[soak_rng_below(&s, sizeof(kinds) / sizeof(kinds[0]))];
        if (extra < 10) { /* --more: ~1%, create_group */
            soak_group_event(&x);
            S.st.seconds[K_GROUP] += soak_now() - t0;
            return;
        }
        soak_event(kind, &s);
        S.st.seconds[kind] += soak_now() - t0;
        return;
    }
    kill = soak_kill_now();
    if (kill) {
        victim = soak_kill_victim();
        inside = soak_kill_inside();
        if (victim && !inside) {
            soak_vanish(NULL, 0, 0);
        }
    }
    if (what < 150 && S.opt.only != K_CODED) {
        /* a batch of non-blocking collectives (a coded gather step is
         * never batched: --only coded_gather runs single steps) */
        int nb = 2 + (int)soak_rng_below(&s, SOAK_MAX_BATCH - 1), order[SOAK_MAX_BATCH];
        uint64_t t = soak_mix(s, 0x7669637469);
        int      upto = victim ? 1 + (int)soak_rng_below(&t, (size_t)nb) : nb;
        for (int b = 0; b < nb; ++b) {
            order[b] = b;
            if (soak_setup_op(&ops[b], &s, (*seq)++, b) && b < upto) {
                gcx_status_t st = soak_post(&ops[b], max_bytes / 16);
                if (st != GCX_OK) {
                    ops[b].nreq = ops[b].kind == K_SENDRECV ? ops[b].nreq : 0;
                    soak_fail_op(&ops[b], -1, st);
                }
                S.st.nonblocking++;
            }
        }
        if (victim) { /* after posting some of them */
            soak_vanish(ops, upto, soak_rng_below(&t, 4));
        }
        for (int b = nb - 1; b > 0; --b) { /* the same shuffle everywhere */
            int j = (int)soak_rng_below(&s, (size_t)b + 1), tmp = order[b];
            order[b] = order[j];
            order[j] = tmp;
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
        if (kill) {
            soak_kill_recover();
        }
        return;
    }
    {
        int      member = soak_setup_op(&ops[0], &s, (*seq)++, 0);
        /* with --inject every rank keeps a number for a follow-up */
        uint64_t fseq = S.opt.inject > 0 ? (*seq)++ : 0;
        if (extra < 50) { /* --more: ~4%, a coded gather step */
            ops[0].kind = K_CODED;
        }
        if (member) {
            ops[0].blocking = soak_rng_below(&s, 2) == 0 && ops[0].kind != K_SENDRECV;
            soak_run_single(&ops[0], max_bytes, victim && inside, t0);
            if (ops[0].inj != INJ_NONE && ops[0].inj != INJ_INVALID &&
                ops[0].kind != K_CODED) {
                soak_follow_up(&ops[0], &s, &fseq, max_bytes);
            }
        }
    }
    if (victim) {
        soak_vanish(NULL, 0, 0); /* not in the step's communicator */
    }
    if (kill) {
        soak_kill_recover();
    }
    *done += 1;
}

/* A rank that saw a kill's failure before the kill step (it lagged): the
 * steps up to the kill step are drawn as soak_step draws them, not run
 * (what they would make of the families is destroyed by the shrink), so
 * it comes out of the shrink with the others' generator, numbers and
 * step count. */
static void soak_catch_up(uint64_t *rng, uint64_t *seq, uint64_t *done)
{
    long long kstep = S.opt.kill_step[S.kill_next];

    for (;;) {
        uint64_t s     = soak_rng_next(rng);
        size_t   what  = soak_rng_below(&s, 1000);
        uint64_t x     = soak_mix(s, 0x6d6f7265);
        size_t   extra = S.opt.more ? soak_rng_below(&x, 1000) : 1000;

        ++S.nstep;
        if (what < 12 || extra < 10) {
            continue; /* an event */
        }
        if (what < 150 && S.opt.only != K_CODED) { /* as soak_step */
            uint64_t nb = 2 + soak_rng_below(&s, SOAK_MAX_BATCH - 1);
            *seq  += nb;
            *done += nb;
        } else {
            *seq  += 1 + (S.opt.inject > 0);
            *done += 1;
        }
        if (S.nstep >= kstep) {
            break; /* the kill step */
        }
    }
    (void)soak_kill_now();
    soak_kill_recover();
}

typedef struct {
    long rss0, rss1, rss_max, fd0, fd1, fd_max, rss_start;
} soak_mem_t;

static void soak_print_stats(double elapsed)
{
    int64_t v[K_NKINDS + SOAK_NCONFIGS + GCX_DT_LAST + GCX_OP_LAST + 6 + 6 +
              INJ_NKINDS + 6];
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
    for (int k = 0; k < INJ_NKINDS; ++k) v[m++] = (int64_t)S.st.per_inj[k];
    v[m++] = (int64_t)S.st.colls;
    v[m++] = (int64_t)S.st.injected;
    v[m++] = (int64_t)S.st.invalid_calls;
    v[m++] = (int64_t)S.st.delays;
    v[m++] = (int64_t)S.st.follow;
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
    m += 6;
    if (S.opt.inject > 0 || S.opt.delays > 0 || S.opt.nkills > 0 ||
        S.opt.more) {
        static const char *const inj[INJ_NKINDS] = {
            "none", "count", "type", "op", "root", "vcounts", "sp_algo",
            "sp_index", "sp_capacity", "sp_topk", "sp_dense_len", "p2p_size",
            "coded", "group_order", "invalid"};
        size_t m0 = m;
        printf("# injected:");
        for (int k = 1; k < INJ_NKINDS; ++k) printf(" %s=%lld", inj[k], (long long)v[m0 + (size_t)k]);
        m += INJ_NKINDS;
        /* one line for random_runs.py */
        printf("\n# random: ranks %d, live %d, seed %llu, steps %lld, "
               "collectives %lld, injected %lld, invalid_calls %lld, "
               "kills %d, delays %lld, follow_ups %lld, wrong %lld\n",
               S.size0, S.size, (unsigned long long)S.seed, S.nstep,
               (long long)v[m], (long long)v[m + 1], (long long)v[m + 2],
               S.killed, (long long)v[m + 3], (long long)v[m + 4],
               (long long)v[m - INJ_NKINDS - 1]);
    }
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
    if (S.opt.nkills == 0) { /* with kills: no world collective between
                                  steps, which a kill could revoke */
        soak_checkpoint(0, t0, &mem, 1);
    }
    while (done < nops || S.kill_next < S.opt.nkills) {
        if (!S.early) {
            soak_step(&rng, &seq, max_bytes, &done);
        }
        if (S.early) { /* a kill's failure came before its step */
            soak_catch_up(&rng, &seq, &done);
        }
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
        if ((done >= next || done >= nops) && S.opt.nkills == 0) {
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
        if (fd_exact && mem.fd1 != mem.fd0 && S.killed == 0) {
            fprintf(stderr, "[soak rank %d] open descriptors %ld at the end, "
                    "%ld at the baseline\n", S.rank, mem.fd1, mem.fd0);
            fail = 1;
        }
        if (rss_growth_kb > 0 && mem.rss1 - mem.rss0 > bound && S.killed == 0) {
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
            "                [--results FILE]\n"
            "                [--inject PCT] [--delays PCT] [--more] [--only KIND]\n"
            "                [--kills N | --kill-at STEP:RANK[:inside|before]]\n"
            "       gcx_soak --churn N [--fd-exact]\n"
            "Run under gcxrun (or any launcher gcx bootstraps from); with kills\n"
            "under gcxrun --keep-going. Exit: 0 ok, 1 wrong result, 2 setup\n"
            "failed, 3 unexpected error, 4 hang (GCX_ERR_TIMEOUT).\n");
}

int main(int argc, char **argv)
{
    uint64_t     seed = 1, nops = 100000, every = 0, warmup = 0;
    size_t       max_bytes = 4u << 20;
    long         rss_growth_kb = 0;
    int          fd_exact = 0, churn = 0, rc, kills = 0;
    const char  *results = NULL;
    gcx_status_t st;

    S.opt.only = -1;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--fd-exact")) {
            fd_exact = 1;
            continue;
        }
        if (!strcmp(a, "--more")) {
            S.opt.more = 1;
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
        else if (!strcmp(a, "--inject")) S.opt.inject = atoi(v);
        else if (!strcmp(a, "--only")) {
            S.opt.only = -1;
            for (int k = 0; k <= K_CODED; ++k) {
                if (!strcmp(v, soak_kind_names[k])) {
                    S.opt.only = k;
                }
            }
            if (S.opt.only < 0) {
                soak_usage();
                return 1;
            }
        }
        else if (!strcmp(a, "--delays")) S.opt.delays = atoi(v);
        else if (!strcmp(a, "--kills")) kills = atoi(v);
        else if (!strcmp(a, "--kill-at")) {
            if (soak_parse_kill(v) != 0) {
                soak_usage();
                return 1;
            }
        }
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
    S.opt.argc = argc;
    S.opt.argv = argv;
    if (kills < 0 || kills > 8 || (kills > 0 && S.opt.nkills > 0)) {
        fprintf(stderr, "gcx_soak: --kills 0..8, or --kill-at\n");
        return 1;
    }
    soak_tables_init();
    st = gcx_comm_create(NULL, NULL, &S.world);
    if (st != GCX_OK) {
        soak_die("gcx_comm_create (world)", st);
    }
    S.rank  = gcx_comm_rank(S.world);
    S.size  = gcx_comm_size(S.world);
    S.size0 = S.size;
    if (S.size > SOAK_MAX_RANKS) {
        fprintf(stderr, "gcx_soak: at most %d ranks\n", SOAK_MAX_RANKS);
        return 1;
    }
    /* rank 0's seed for everyone; with kills every rank takes its own
     * (the same command line): a kill may revoke the world while a rank
     * that lags is still in that broadcast */
    if (kills == 0 && S.opt.nkills == 0) {
        st = gcx_broadcast(S.world, &seed, 1, GCX_DT_I64, 0, NULL);
        if (st != GCX_OK) {
            soak_die("seed broadcast", st);
        }
    }
    S.seed = seed;
    if (kills > 0) {
        S.opt.nkills = kills < S.size ? kills : S.size - 1;
        soak_draw_kills(seed, nops);
    }
    if (S.opt.nkills > 0) {
        /* a rank leaves this barrier only once every rank has entered it,
         * so no rank is still creating the world when the first kill
         * revokes it; one still in the barrier then catches up */
        st = gcx_barrier(S.world, NULL);
        if (st != GCX_OK) {
            soak_bad_status(NULL, "barrier after creating the world", st);
        }
    }
    S.fam[0].live = 1;
    S.fam[0].single = 1;
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
            free(S.slot[k].snap);
        }
        free(S.ref);
        free(S.aux);
    }
    gcx_comm_destroy(S.world);
    return rc;
}
