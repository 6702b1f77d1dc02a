/*
 * gcx_coded_gather_perf.c - per-round time of gradient-coded gathering
 * against its baselines, with a per-partition compute cost and injected
 * stragglers (GCX_STRAGGLER_* from the environment).
 *
 *   gcxrun -n 4 -- gcx_coded_gather_perf [--count N] [--rounds R]
 *          [--warmup W] [--s S] [--compute-ms X] [--modes a,b,..]
 *          [--straggler-exp M] [--late R:MS] [--baseline] [--json FILE]
 *          [--trace]
 *
 * A round on every rank = compute (a busy loop of X ms per partition
 * gradient, the cost of one partition) + encode + coded gather. Modes:
 *   uncoded  s = 0, 1 partition, the root waits for every worker;
 *   ignore   1 partition, the root adds the first n-s replies (weighted
 *            decode): fast but inexact, the classic "drop stragglers";
 *   gc-fr, gc-cr    gradient coding: s+1 partitions per round, exact;
 *   pgc-fr, pgc-cr  pipelined gradient coding: 1 partition per round
 *            (slot t mod (s+1)), s older ones reused, exact here because the
 *            partition gradients do not change between rounds;
 *   gc-fr-ml, gc-cr-ml, pgc-fr-ml, pgc-cr-ml  (pipelined) gradient
 *            coding through the master-less coded
 *            allreduce (gcx_coded_allreduce: every rank decodes a chunk)
 *            instead of the star (gcx_coded_gather);
 *   dense    1 partition, gcx_allreduce (the data-parallel ring): waits
 *            for the slowest rank. The straggler delays of GCX_STRAGGLER_*
 *            are slept by the driver (the same variables; the exponential
 *            draw is the driver's own, per rank and round from the seed).
 * A rank whose round is already decoded when it starts (gcx_coded_ready)
 * skips its computation, as a gradient-coding worker drops stale work. A
 * PGC worker then follows the library's contract (gcx/coding.h): it keeps
 * the step each slot was computed at, and abstains (gcx_coded_abstain)
 * from the rounds whose message would read a slot it skipped
 * (gcx_pgc_message_valid), so no stale or empty slot reaches a sum.
 * --straggler-exp M: the straggler model of the gradient coding papers,
 * every worker delayed every round by an exponential time of mean M x its
 * compute of the round (M x X ms for uncoded, ignore and pgc, M x (s+1) X
 * for gc): the library's random injection with GCX_STRAGGLER_COUNT = n
 * (all workers drawn) and GCX_STRAGGLER_MEAN_MS set per mode; it replaces
 * those two variables. Without it GCX_STRAGGLER_COUNT defaults to the
 * code's s, which is 0 for uncoded: random delays then miss that mode.
 * --late R:MS: rank R computes every round MS ms longer (a sleep that makes
 * no gcx call: a rank still computing, which serves the chunks it owns only
 * if its process progresses: GCX_PROGRESS_THREAD), unless the round was
 * decoded without it (then it computes nothing, as every coded worker);
 * part of the straggler injection (off in --baseline's runs).
 * With --baseline every mode is also run with straggler injection off and
 * the ratio straggler/baseline printed. Columns: mode, n, s, partitions
 * computed per round, mean / p50 / max round time (ms) on the root, mean
 * time inside the aggregation call (agg_ms: no compute, no encode),
 * #wrong rounds (decoded sum off the exact one; "-" for ignore), #lost rounds
 * (pgc: a round abstentions leave undecodable is lost on every rank,
 * lost_rounds; "-" for none). --trace: every rank prints, for every round,
 * when it entered the aggregation call and when the call returned
 * (CLOCK_MONOTONIC seconds: one clock for the ranks of one host, as on the
 * emulated cluster), on stderr as "trace MODE ROUND RANK ENTER DONE": who
 * got the star's result when, and how the rounds overlap.
 */
#include <gcx/coded.h>
#include <gcx/coding.h>
#include <gcx/gcx.h>

#include "perf_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct perf_opts {
    size_t count;
    int    rounds, warmup, s, baseline, trace;
    double compute_ms;
    double straggler_exp; /* --straggler-exp M; 0: GCX_STRAGGLER_* as set */
    int    late_rank;     /* --late R:MS; -1: none */
    double late_ms;
    char   modes[256];
    char   json[256];
} perf_opts_t;

typedef struct perf_row {
    const char *mode;
    int         straggle; /* injection on */
    int         n, s, partitions;
    double      mean_ms, p50_ms, max_ms;
    double      agg_ms;   /* mean time inside the aggregation call */
    long        wrong;    /* -1: not checked */
    long        lost;     /* rounds lost on rank 0 (pgc: lost_rounds) */
} perf_row_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* compute of one partition gradient: a busy loop of ms, then the values */
static void compute_partition(double ms, int j, float *g, size_t count)
{
    double end = now_s() + ms * 1e-3;
    size_t i;

    while (now_s() < end) {
    }
    for (i = 0; i < count; ++i) {
        g[i] = (float)((int)((j * 131 + i * 7) % 23) - 11);
    }
}

static gcx_status_t world_allgather(const void *sendbuf, void *recvbuf,
                                    size_t len, void *ctx)
{
    return gcx_allgather(ctx, sendbuf, recvbuf, len, GCX_DT_U8, NULL);
}

/* @p exp_mean_ms > 0: every worker delayed Exp(that mean) per round */
static gcx_comm_t *make_comm(gcx_comm_t *world, int straggle,
                             double exp_mean_ms)
{
    gcx_config_t *config = NULL;
    gcx_comm_t   *comm   = NULL;
    gcx_oob_t     oob    = {world_allgather, world, gcx_comm_rank(world),
                            gcx_comm_size(world)};

    if (gcx_config_read(&config) != GCX_OK) {
        return NULL;
    }
    if (!straggle) {
        gcx_config_set(config, "STRAGGLER_DELAY_MS", "0");
        gcx_config_set(config, "STRAGGLER_MEAN_MS", "0");
    } else if (exp_mean_ms > 0) {
        char mean[64], count[32];

        snprintf(mean, sizeof(mean), "%.17g", exp_mean_ms);
        snprintf(count, sizeof(count), "%d", gcx_comm_size(world));
        gcx_config_set(config, "STRAGGLER_MEAN_MS", mean);
        gcx_config_set(config, "STRAGGLER_COUNT", count);
    }
    if (gcx_comm_create(&oob, config, &comm) != GCX_OK) {
        comm = NULL;
    }
    gcx_config_release(config);
    return comm;
}

static void sleep_ms(double ms)
{
    struct timespec ts;

    if (ms <= 0) {
        return;
    }
    ts.tv_sec  = (time_t)(ms * 1e-3);
    ts.tv_nsec = (long)((ms * 1e-3 - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

static double config_double(gcx_comm_t *comm, const char *name)
{
    char buf[256] = "";

    gcx_config_get(gcx_comm_config(comm), name, buf, sizeof(buf));
    return atof(buf);
}

/* dense mode: what GCX_STRAGGLER_* of @p comm delay this rank in round r
 * (the coded objects sleep it themselves): the fixed ranks, plus an
 * exponential draw of GCX_STRAGGLER_MEAN_MS per rank and round when
 * GCX_STRAGGLER_COUNT covers every rank (--straggler-exp) */
static double dense_delay_ms(gcx_comm_t *comm, int rank, int r, int n)
{
    char     list[256] = "", *p, *end;
    double   ms = 0, mean = config_double(comm, "STRAGGLER_MEAN_MS");
    uint64_t x;

    gcx_config_get(gcx_comm_config(comm), "STRAGGLER_RANKS", list,
                   sizeof(list));
    for (p = list; *p != '\0'; p = *end == ',' ? end + 1 : end) {
        if (strtol(p, &end, 10) == rank) {
            ms += config_double(comm, "STRAGGLER_DELAY_MS");
        }
        if (end == p) {
            break;
        }
    }
    if (mean > 0 && (int)config_double(comm, "STRAGGLER_COUNT") >= n) {
        x = (uint64_t)config_double(comm, "STRAGGLER_SEED") * 0x9e3779b97f4a7c15ull ^
            ((uint64_t)r << 20) ^ (uint64_t)rank;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        ms += -mean * log(((double)(x >> 11) + 0.5) / 9007199254740992.0);
    }
    return ms;
}

static int run_mode(gcx_comm_t *world, const perf_opts_t *o, const char *mode,
                    int straggle, perf_row_t *row)
{
    int                 rank = gcx_comm_rank(world), n = gcx_comm_size(world);
    int                 pgc = !strncmp(mode, "pgc", 3), s = o->s, P, k, r;
    int                 ml = strstr(mode, "-ml") != NULL;
    int                 dense = !strcmp(mode, "dense");
    int                 one = pgc || dense || !strcmp(mode, "ignore") ||
                              !strcmp(mode, "uncoded"); /* 1 partition */
    gcx_coded_allreduce_t *car = NULL;
    gcx_code_params_t   cp = {0};
    gcx_code_t         *code = NULL;
    gcx_pgc_t          *sched = NULL;
    gcx_coded_params_t  params = {0};
    gcx_coded_t        *coded = NULL;
    gcx_comm_t         *comm;
    float              *msg, *sum, **slots;
    double             *coeffs, *times;
    int                *parts, cnt = 0;
    int64_t            *slot_steps; /* PGC: step each slot was computed */
    long                wrong = 0, lost = 0;
    double              agg_s = 0;
    int                 check = strcmp(mode, "ignore") != 0;
    gcx_status_t        st;

    if (!strcmp(mode, "uncoded") || dense) {
        cp.kind = GCX_CODE_UNCODED;
        s       = 0;
    } else if (!strcmp(mode, "ignore")) {
        cp.kind     = GCX_CODE_CR;
        cp.decoding = GCX_CODE_DECODE_WEIGHTED;
    } else {
        cp.kind = strstr(mode, "fr") ? GCX_CODE_FR : GCX_CODE_CR;
    }
    cp.n = n;
    cp.s = s;
    st = gcx_code_create(&cp, &code);
    if (st != GCX_OK) {
        /* the library names what is wrong in its error line on stderr
         * ("gcx_code_create: ... code, n = ..., s = ...: why"), logged
         * before this line on every rank; no guess here */
        fflush(stderr);
        if (rank == 0) {
            printf("# %s: no code for n = %d, s = %d: %s (skipped; the "
                   "reason is gcx_code_create's error on stderr)\n", mode, n,
                   s, gcx_strerror(st));
        }
        return 0;
    }
    P = gcx_code_load(code);
    if (pgc && gcx_pgc_create(code, &sched) != GCX_OK) {
        gcx_code_destroy(code);
        return 1;
    }
    /* gc computes its s+1 partitions per round, the others one */
    comm = make_comm(world, straggle,
                     o->straggler_exp * o->compute_ms * (one ? 1 : P));
    if (comm == NULL) {
        return 1;
    }
    params.code  = code;
    params.count = o->count;
    /* pgc: a round that abstentions leave undecodable is lost on every
     * rank (as gcx-train and torch_gcx run them), not an error */
    params.lost_rounds = pgc;
    if (ml ? gcx_coded_allreduce_create(comm, &params, &car) != GCX_OK :
             gcx_coded_create(comm, &params, &coded) != GCX_OK) {
        return 1;
    }
    msg    = calloc(o->count, sizeof(float));
    sum    = calloc(o->count, sizeof(float));
    slots  = calloc((size_t)P, sizeof(float *));
    coeffs = calloc((size_t)P, sizeof(double));
    parts  = calloc((size_t)P, sizeof(int));
    times  = calloc((size_t)o->rounds, sizeof(double));
    slot_steps = calloc((size_t)P, sizeof(int64_t));
    for (k = 0; k < P; ++k) {
        slots[k]      = calloc(o->count, sizeof(float));
        slot_steps[k] = -1; /* never */
    }
    gcx_code_assignment(code, rank, parts, coeffs, &cnt);
    for (r = 0; r < o->warmup + o->rounds; ++r) {
        double t0 = now_s(), t_agg;
        int    ready = 0, abstain = 0, valid = 0, slot, part;
        gcx_coded_result_t res;

        memset(&res, 0, sizeof(res));
        if (coded != NULL) {
            gcx_coded_ready(coded, &ready);
        } else if (car != NULL) {
            gcx_coded_allreduce_ready(car, &ready);
        }
        if (!ready && straggle && rank == o->late_rank) {
            sleep_ms(o->late_ms); /* a slow computation: no gcx call */
        }
        if (ready && pgc) {
            abstain = 1; /* decoded without us: nothing computed */
        } else if (!ready) {
            if (pgc) { /* one fresh partition into its slot */
                gcx_pgc_compute(sched, rank, r, &slot, &part);
                if (part >= 0) {
                    compute_partition(o->compute_ms, part, slots[slot],
                                      o->count);
                }
                slot_steps[slot] = r;
                /* a slot skipped in the last P-1 steps is stale: abstain */
                gcx_pgc_message_valid(sched, rank, r, slot_steps, &valid);
                abstain = !valid;
                if (valid) {
                    gcx_pgc_coeffs(sched, rank, r, coeffs);
                    gcx_code_encode(P, coeffs, (const float *const *)slots,
                                    o->count, msg);
                }
            } else if (one) {
                compute_partition(o->compute_ms, rank, msg, o->count);
                if (dense) {
                    sleep_ms(dense_delay_ms(comm, rank, r, n));
                }
            } else { /* classic GC: all s+1 partitions, every round */
                for (k = 0; k < cnt; ++k) {
                    compute_partition(o->compute_ms, parts[k], slots[k],
                                      o->count);
                }
                gcx_code_encode(cnt, coeffs, (const float *const *)slots,
                                o->count, msg);
            }
        }
        t_agg = now_s();
        st = dense ? gcx_allreduce(comm, msg, sum, o->count, GCX_DT_F32,
                                   GCX_OP_SUM, NULL) :
             ml && abstain ? gcx_coded_allreduce_abstain(car, sum, &res,
                                                         NULL) :
             ml      ? gcx_coded_allreduce(car, msg, sum, &res, NULL) :
             abstain ? gcx_coded_abstain(coded, sum, &res, NULL) :
                       gcx_coded_gather(coded, msg, sum, &res, NULL);
        if (st != GCX_OK) {
            fprintf(stderr, "rank %d: %s round %d: %s\n", rank, mode, r,
                    gcx_strerror(st));
            return 1;
        }
        if (o->trace) {
            fprintf(stderr, "trace %s %d %d %.6f %.6f\n", mode, r, rank,
                    t_agg, now_s());
        }
        if (r >= o->warmup) {
            times[r - o->warmup] = now_s() - t0;
            agg_s += (now_s() - t_agg) / o->rounds;
            lost += res.lost;
            if (check && !res.lost && (!pgc || r >= P - 1)) {
                size_t i;
                for (i = 0; i < o->count; ++i) {
                    double want = 0;
                    int    j;
                    for (j = 0; j < n; ++j) {
                        want += (double)((int)((j * 131 + i * 7) % 23) - 11);
                    }
                    if (fabs(want - sum[i]) > 1e-3 * 11 * n) {
                        ++wrong;
                        break;
                    }
                }
            }
        }
    }
    perf_sort_doubles(times, o->rounds);
    row->mode       = mode;
    row->straggle   = straggle;
    row->n          = n;
    row->s          = s;
    row->partitions = one ? 1 : cnt;
    row->agg_ms     = agg_s * 1e3;
    row->mean_ms    = 0;
    for (r = 0; r < o->rounds; ++r) {
        row->mean_ms += times[r] * 1e3 / o->rounds;
    }
    row->p50_ms = times[o->rounds / 2] * 1e3;
    row->max_ms = times[o->rounds - 1] * 1e3;
    row->wrong  = check ? wrong : -1;
    row->lost   = lost;
    /* let a straggler finish its rounds first: it may still pull decoded
     * sums from the root, which only moves while the root progresses this
     * communicator (not while it waits on the world one) */
    gcx_barrier(comm, NULL);
    /* wrong rounds anywhere count */
    {
        int64_t w = wrong;
        gcx_allreduce(world, GCX_IN_PLACE, &w, 1, GCX_DT_I64, GCX_OP_SUM,
                      NULL);
        row->wrong = check ? (long)w : -1;
    }
    for (k = 0; k < P; ++k) {
        free(slots[k]);
    }
    free(slots);
    free(coeffs);
    free(parts);
    free(slot_steps);
    free(times);
    free(msg);
    free(sum);
    gcx_coded_destroy(coded);
    gcx_coded_allreduce_destroy(car);
    gcx_barrier(comm, NULL);
    gcx_comm_destroy(comm);
    gcx_pgc_destroy(sched);
    gcx_code_destroy(code);
    return 0;
}

static void print_row(const perf_row_t *row, double base_mean)
{
    char ratio[32] = "-", wrong[32] = "-", lost[32] = "-";

    if (base_mean > 0) {
        snprintf(ratio, sizeof(ratio), "%.2f", row->mean_ms / base_mean);
    }
    if (row->wrong >= 0) {
        snprintf(wrong, sizeof(wrong), "%ld", row->wrong);
    }
    if (row->lost > 0) {
        snprintf(lost, sizeof(lost), "%ld", row->lost);
    }
    printf("%10s %9s %4d %4d %6d %10.2f %10.2f %10.2f %10.2f %8s %7s %6s\n",
           row->mode, row->straggle ? "yes" : "no", row->n, row->s,
           row->partitions, row->mean_ms, row->p50_ms, row->max_ms,
           row->agg_ms, ratio, wrong, lost);
}

int main(int argc, char **argv)
{
    perf_opts_t o = {.count = 1 << 16, .rounds = 50, .warmup = 5, .s = 1,
                     .compute_ms = 5.0, .late_rank = -1,
                     .modes = "uncoded,ignore,gc-fr,gc-cr,pgc-fr,pgc-cr"};
    perf_row_t  rows[32];
    int         nrows = 0, i, rank, rc = 0;
    gcx_comm_t *world;
    char       *mode, *save = NULL;
    FILE       *json;

    for (i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--baseline")) {
            o.baseline = 1;
            continue;
        }
        if (!strcmp(a, "--trace")) {
            o.trace = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "usage: see the comment of %s\n", __FILE__);
            return 2;
        }
        if (!strcmp(a, "--count")) {
            o.count = (size_t)atoll(v);
        } else if (!strcmp(a, "--rounds")) {
            o.rounds = atoi(v);
        } else if (!strcmp(a, "--warmup")) {
            o.warmup = atoi(v);
        } else if (!strcmp(a, "--s")) {
            o.s = atoi(v);
        } else if (!strcmp(a, "--compute-ms")) {
            o.compute_ms = atof(v);
        } else if (!strcmp(a, "--straggler-exp")) {
            char *end;
            o.straggler_exp = strtod(v, &end);
            if (end == v || *end != '\0' ||
                !(o.straggler_exp > 0 && o.straggler_exp <= 1000)) {
                fprintf(stderr, "--straggler-exp %s: expected M in (0, 1000], "
                                "the mean delay as a multiple of the compute "
                                "time\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--late")) {
            char *end;
            o.late_rank = (int)strtol(v, &end, 10);
            o.late_ms   = *end == ':' ? strtod(end + 1, &end) : -1;
            if (*end != '\0' || o.late_rank < 0 || !(o.late_ms >= 0)) {
                fprintf(stderr, "--late %s: expected R:MS (rank R computes "
                                "each round MS ms longer)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--modes")) {
            snprintf(o.modes, sizeof(o.modes), "%s", v);
        } else if (!strcmp(a, "--json")) {
            snprintf(o.json, sizeof(o.json), "%s", v);
        } else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
        ++i;
    }
    if (o.rounds < 1 || o.s < 0) {
        fprintf(stderr, "--rounds must be >= 1 and --s >= 0\n");
        return 2;
    }
    if (gcx_comm_create(NULL, NULL, &world) != GCX_OK) {
        return 1;
    }
    rank = gcx_comm_rank(world);
    if (rank == 0) {
        printf("# gcx_coded_gather_perf: %d ranks, %zu floats, %d rounds "
               "(+%d warm-up), %.2f ms per partition; straggler injection "
               "from GCX_STRAGGLER_*%s%s; times on rank 0\n",
               gcx_comm_size(world), o.count, o.rounds, o.warmup,
               o.compute_ms,
               o.straggler_exp > 0 ? " (every worker Exp(mean M x compute), "
                                     "--straggler-exp)" : "",
               o.late_rank >= 0 ? ", and --late" : "");
        if (o.late_rank >= 0) {
            printf("# rank %d computes every round %.1f ms longer (no gcx "
                   "call meanwhile); progress thread %s\n", o.late_rank,
                   o.late_ms,
                   getenv("GCX_PROGRESS_THREAD") ? getenv("GCX_PROGRESS_THREAD")
                                                 : "n");
        }
        printf("%10s %9s %4s %4s %6s %10s %10s %10s %10s %8s %7s %6s\n",
               "mode", "straggler", "n", "s", "parts", "mean_ms", "p50_ms",
               "max_ms", "agg_ms", "vs_base", "#wrong", "#lost");
    }
    for (mode = strtok_r(o.modes, ",", &save); mode != NULL && rc == 0;
         mode = strtok_r(NULL, ",", &save)) {
        double base = 0;
        if (o.baseline) {
            rc = run_mode(world, &o, mode, 0, &rows[nrows]);
            if (rc == 0 && rows[nrows].mode != NULL) {
                base = rows[nrows].mean_ms;
                if (rank == 0) {
                    print_row(&rows[nrows], 0);
                }
                ++nrows;
            }
        }
        rows[nrows].mode = NULL;
        if (rc == 0) {
            rc = run_mode(world, &o, mode, 1, &rows[nrows]);
        }
        if (rc == 0 && rows[nrows].mode != NULL) {
            if (rank == 0) {
                print_row(&rows[nrows], base);
            }
            ++nrows;
        }
        rows[nrows].mode = NULL;
        fflush(stdout);
    }
    if (rank == 0 && o.json[0] != '\0' && (json = fopen(o.json, "w"))) {
        fprintf(json, "{\"ranks\": %d, \"count\": %zu, \"rounds\": %d, "
                      "\"compute_ms\": %g, \"straggler_exp\": %g, "
                      "\"rows\": [",
                gcx_comm_size(world), o.count, o.rounds, o.compute_ms,
                o.straggler_exp);
        for (i = 0; i < nrows; ++i) {
            fprintf(json,
                    "%s\n {\"mode\": \"%s\", \"straggler\": %s, \"n\": %d, "
                    "\"s\": %d, \"partitions\": %d, \"mean_ms\": %.4f, "
                    "\"p50_ms\": %.4f, \"max_ms\": %.4f, \"agg_ms\": %.4f, "
                    "\"wrong\": %ld, \"lost\": %ld}",
                    i ? "," : "", rows[i].mode,
                    rows[i].straggle ? "true" : "false", rows[i].n, rows[i].s,
                    rows[i].partitions, rows[i].mean_ms, rows[i].p50_ms,
                    rows[i].max_ms, rows[i].agg_ms, rows[i].wrong,
                    rows[i].lost);
        }
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    gcx_comm_destroy(world);
    return rc;
}
