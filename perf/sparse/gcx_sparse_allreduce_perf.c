/*
 * gcx_sparse_allreduce_perf - sparse allreduce sweep in the nccl-tests
 * spirit: every algorithm, auto and the dense allreduce, over densities.
 *
 *   gcxrun -n 4 gcx_sparse_allreduce_perf -N 25M -d 0.0001,0.001,0.01,0.1
 *   perf/cluster/emulate.sh -n 4 --rate 1gbit -- \
 *       build/perf/sparse/gcx_sparse_allreduce_perf --rate-gbps 1 --json out.json
 *
 * Input of rank r at density d: k = d·N indices, a fraction "overlap" of
 * them the same on every rank (common seed), the rest rank-specific; values
 * random. Columns: time (each iteration timed on every rank, the slowest
 * rank's time per iteration, the median over iterations: robust to one
 * late-scheduled iteration on a shared box), bytes this rank sent
 * (max over ranks, every phase), union size K, and the bound
 * 8·(P-1)/P·(k + min(K, N/2)) bytes at the link rate (measured at start:
 * the best of 3 timed allgathers of 8 MB per rank, each rank receiving
 * (P-1)·8 MB over its link; --rate-gbps G gives it instead), and #wrong: entries
 * of the last iteration's result that differ from a dense allreduce of the
 * same inputs (max over ranks; checked without --topk only, where the result
 * must be the exact union with summed values). All sparse rows share one
 * communicator made over the world one, each call naming its algorithm
 * (opts.algo; auto learns from its own calls only), so every algorithm
 * runs on the same connections: with one communicator per algorithm the
 * same algorithm in two rows of a run differed by up to 14% at 1-5 ms. The
 * sparse algorithms take turns, one call each per iteration after a
 * barrier, the turn starting one row later each iteration, so a drift of
 * a shared machine and a row's place in the turn hit them alike (the
 * dense allreduce runs after them: a second between two calls of a
 * communicator would let TCP restart slow start on its connections).
 * --gap-ms G idles every rank G ms before each call, so every call starts
 * from idle links. Under
 * perf/cluster/emulate.sh that matters: each link's tc tbf bucket (rate/HZ,
 * 500 KB = 4 ms at 1 Gbit/s) refills while a link idles, is two thirds of
 * what a rank sends at 0.1% density, and back to back a call got what the
 * call before it left: at 0.1%, overlap 0, the row right after
 * recursive_doubling took 4.6-5.0 ms and the next row 5.7-6.6 ms, whichever
 * algorithm either was (split and auto swapped places). For auto the line
 * below it says which algorithms its timed calls ran (it learns from its
 * first calls: GCX_SPARSE_FEEDBACK).
 */
#include <math.h>
#include <gcx/gcx.h>
#include <gcx/sparse.h>

#include "perf_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static gcx_comm_t *world;

static gcx_status_t perf_oob_allgather(const void *sendbuf, void *recvbuf,
                                       size_t len, void *ctx)
{
    (void)ctx;
    return gcx_allgather(world, sendbuf, recvbuf, len, GCX_DT_U8, NULL);
}

/* Sleep @p ms milliseconds (--gap-ms): the links go idle before a call. */
static void perf_idle(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000),
                          (long)(fmod(ms, 1000.0) * 1e6)};

    if (ms > 0) {
        nanosleep(&ts, NULL);
    }
}

static double perf_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t perf_rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int perf_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

static double perf_max(double v)
{
    gcx_allreduce(world, GCX_IN_PLACE, &v, 1, GCX_DT_F64, GCX_OP_MAX, NULL);
    return v;
}

/* Median over @p n iterations of the slowest rank's time (sorts @p t). */
static double perf_median_of_max(double *t, int n)
{
    gcx_allreduce(world, GCX_IN_PLACE, t, (size_t)n, GCX_DT_F64, GCX_OP_MAX,
                  NULL);
    return perf_median(t, n);
}

/*
 * Entries where a sparse result (out) or a dense one (dense != NULL) differs
 * from the reference sum ref: a value off by more than float rounding of a
 * P-term sum, or a nonzero of ref missing from the sparse result.
 */
static double perf_count_wrong(const gcx_sparse_vec_t *out, const float *dense,
                               const float *ref, size_t N)
{
    size_t j, listed = 0, nonzero = 0;
    double wrong = 0;

    if (dense != NULL) {
        for (j = 0; j < N; ++j) {
            wrong += fabsf(dense[j] - ref[j]) > 1e-5f * (1 + fabsf(ref[j]));
        }
        return wrong;
    }
    for (j = 0; j < out->nnz; ++j) {
        if (out->idx[j] >= N) {
            ++wrong;
            continue;
        }
        listed += ref[out->idx[j]] != 0;
        wrong += fabsf(out->val[j] - ref[out->idx[j]]) >
                 1e-5f * (1 + fabsf(ref[out->idx[j]]));
    }
    for (j = 0; j < N; ++j) {
        nonzero += ref[j] != 0;
    }
    return wrong + (double)(nonzero - listed);
}

/*
 * Link rate in Gbit/s as gcx sees it: every rank receives (P-1)·B bytes in a
 * ring allgather of B per rank; best of 3 (after a warm-up) of the slowest
 * rank's time.
 */
static double perf_measure_rate(int P)
{
    const size_t B = 8u << 20;
    double       best = 0, t0, t;
    char        *buf = calloc((size_t)P, B);
    int          i;

    if (buf == NULL || P < 2) {
        free(buf);
        return 0;
    }
    for (i = 0; i < 4; ++i) {
        gcx_barrier(world, NULL);
        t0 = perf_now();
        if (gcx_allgather(world, GCX_IN_PLACE, buf, B, GCX_DT_U8, NULL) !=
            GCX_OK) {
            free(buf);
            return 0;
        }
        t = perf_max(perf_now() - t0);
        if (i > 0 && (best == 0 || t < best)) {
            best = t;
        }
    }
    free(buf);
    return (double)(P - 1) * (double)B * 8.0 / best / 1e9;
}

static size_t perf_parse_size(const char *s)
{
    char  *end;
    double v = strtod(s, &end);

    if (*end == 'K' || *end == 'k') {
        v *= 1e3;
    } else if (*end == 'M' || *end == 'm') {
        v *= 1e6;
    } else if (*end == 'G' || *end == 'g') {
        v *= 1e9;
    }
    return (size_t)v;
}

#define PERF_MAX_ROWS 8
static const char *const perf_algos[] = {"allgather", "recursive_doubling",
                                         "split", "balanced_split", "?"};
#define PERF_NALGOS ((int)(sizeof(perf_algos) / sizeof(perf_algos[0])))

/* One row of the table: an algorithm (or auto, or dense) and its times. */
typedef struct perf_row {
    const char                  *name;
    int                          is_dense;
    gcx_comm_t                  *comm;
    double                      *its;   /* per timed iteration, this rank */
    double                       wrong; /* last iteration; -1: not checked */
    gcx_sparse_allreduce_stats_t stats; /* of the last call */
    int                          chosen[PERF_NALGOS]; /* timed calls ran */
} perf_row_t;

static int perf_algo_index(const char *algo)
{
    int i;

    for (i = 0; algo != NULL && i < PERF_NALGOS - 1; ++i) {
        if (!strcmp(algo, perf_algos[i])) {
            return i;
        }
    }
    return PERF_NALGOS - 1;
}

/* "split" or "split 12/15, allgather 3/15": what the timed calls ran
 * (rank 0's view; every rank runs the same). */
static void perf_chosen_text(const perf_row_t *row, int iters, char *buf,
                             size_t size)
{
    size_t used = 0;
    int    i, kinds = 0;

    buf[0] = '\0';
    if (row->is_dense) {
        snprintf(buf, size, "dense");
        return;
    }
    for (i = 0; i < PERF_NALGOS; ++i) {
        kinds += row->chosen[i] > 0;
    }
    for (i = 0; i < PERF_NALGOS && used < size; ++i) {
        if (row->chosen[i] == 0) {
            continue;
        }
        if (kinds == 1) {
            used += (size_t)snprintf(buf + used, size - used, "%s",
                                     perf_algos[i]);
        } else {
            used += (size_t)snprintf(buf + used, size - used, "%s%s %d/%d",
                                     used ? ", " : "", perf_algos[i],
                                     row->chosen[i], iters);
        }
    }
}

int main(int argc, char **argv)
{
    size_t      N = 25000000, k, nnz, cap, j, topk_on = 0;
    double      dens[16] = {0.0001, 0.001, 0.01, 0.1}, overlap = 0, rate = 0;
    double      gap_ms = 0;
    int         ndens = 4, iters = 5, warm = 1, a, di, it, rank, P, r, nrows;
    int         pass, turn;
    perf_row_t  rows[PERF_MAX_ROWS];
    gcx_comm_t *sparse_comm = NULL;
    const char *algos = "allgather,recursive_doubling,split,balanced_split,"
                        "auto,dense";
    const char *json = NULL;
    FILE       *jf = NULL;
    char        algolist[256], *save, *name;
    gcx_status_t st;

    for (a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "-N") && a + 1 < argc) {
            N = perf_parse_size(argv[++a]);
        } else if (!strcmp(argv[a], "-d") && a + 1 < argc) {
            char *s = argv[++a], *tok;
            for (ndens = 0; (tok = strtok_r(s, ",", &save)) && ndens < 16;
                 s = NULL) {
                dens[ndens++] = atof(tok);
            }
        } else if (!strcmp(argv[a], "-o") && a + 1 < argc) {
            overlap = atof(argv[++a]);
        } else if (!strcmp(argv[a], "-a") && a + 1 < argc) {
            algos = argv[++a];
        } else if (!strcmp(argv[a], "-n") && a + 1 < argc) {
            iters = atoi(argv[++a]);
        } else if (!strcmp(argv[a], "-w") && a + 1 < argc) {
            warm = atoi(argv[++a]);
        } else if (!strcmp(argv[a], "--gap-ms") && a + 1 < argc) {
            gap_ms = atof(argv[++a]);
        } else if (!strcmp(argv[a], "--topk")) {
            topk_on = 1;
        } else if (!strcmp(argv[a], "--rate-gbps") && a + 1 < argc) {
            rate = atof(argv[++a]);
        } else if (!strcmp(argv[a], "--json") && a + 1 < argc) {
            json = argv[++a];
        } else {
            fprintf(stderr,
                    "usage: %s [-N 25M] [-d 0.0001,0.001,0.01,0.1] [-o overlap]"
                    " [-a algo,...|dense] [-n iters] [-w warmup] [--topk]"
                    " [--gap-ms MS (idle before each call)]"
                    " [--rate-gbps G (bound; default: measured)]"
                    " [--json FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (iters < 1 || warm < 0 || !(gap_ms >= 0 && gap_ms <= 10000)) {
        fprintf(stderr, "%s: -n must be >= 1, -w >= 0, --gap-ms 0..10000\n",
                argv[0]);
        return 2;
    }
    st = gcx_comm_create(NULL, NULL, &world);
    if (st != GCX_OK) {
        fprintf(stderr, "gcx_comm_create: %s\n", gcx_strerror(st));
        return 1;
    }
    rank = gcx_comm_rank(world);
    P    = gcx_comm_size(world);
    if (rate <= 0) {
        rate = perf_measure_rate(P);
        if (rate <= 0) {
            rate = 1.0;
        }
    }
    if (rank == 0) {
        printf("# gcx_sparse_allreduce_perf: P %d, N %zu, overlap %.2f, topk %s,"
               " iters %d, bound at %.3g Gbit/s (measured unless --rate-gbps)\n",
               P, N, overlap, topk_on ? "k (= per-rank nnz)" : "off", iters,
               rate);
        printf("# %10s %8s %7s %-18s %10s %12s %12s %10s %7s %7s\n", "N",
               "density", "overlap", "algo", "time_ms", "sent_MB", "K",
               "bound_ms", "x_bound", "#wrong");
        if (json != NULL) {
            jf = fopen(json, "w");
            if (jf != NULL) {
                fprintf(jf, "[\n");
            }
        }
    }
    for (di = 0; di < ndens; ++di) {
        uint64_t  seed_common = 12345, seed_own = 777 + (uint64_t)rank * 1000003;
        uint32_t *idx, *oi;
        float    *val, *dense, *ov, *ref;
        size_t    kshared;
        int       first = 1;

        k       = (size_t)(dens[di] * (double)N);
        kshared = (size_t)(overlap * (double)k);
        idx     = malloc((k + 1) * sizeof(*idx));
        val     = malloc((k + 1) * sizeof(*val));
        dense   = malloc(N * sizeof(float));
        ref     = calloc(N, sizeof(float));
        cap     = (size_t)P * k < N ? (size_t)P * k : N;
        oi      = malloc((cap + 1) * sizeof(*oi));
        ov      = malloc((cap + 1) * sizeof(*ov));
        if (!idx || !val || !dense || !oi || !ov || !ref) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (j = 0; j < k; ++j) {
            idx[j] = (uint32_t)(perf_rng(j < kshared ? &seed_common :
                                                       &seed_own) % N);
        }
        qsort(idx, k, sizeof(*idx), perf_cmp_u32);
        for (j = 0, nnz = 0; j < k; ++j) {
            if (nnz == 0 || idx[j] != idx[nnz - 1]) {
                idx[nnz++] = idx[j];
            }
        }
        for (j = 0; j < nnz; ++j) {
            val[j] = (float)((double)(perf_rng(&seed_own) >> 11) /
                             9007199254740992.0 - 0.5);
        }
        /* the reference: a dense allreduce of the same inputs */
        for (j = 0; j < nnz; ++j) {
            ref[idx[j]] = val[j];
        }
        if (gcx_allreduce(world, GCX_IN_PLACE, ref, N, GCX_DT_F32, GCX_OP_SUM,
                          NULL) != GCX_OK) {
            fprintf(stderr, "reference allreduce failed\n");
            return 1;
        }
        /* one communicator for every sparse row, made up front; each call
         * names its algorithm (opts.algo) */
        {
            gcx_config_t *cfg = NULL;
            gcx_oob_t     oob = {perf_oob_allgather, NULL, rank, P};

            if (gcx_config_read(&cfg) != GCX_OK ||
                gcx_comm_create(&oob, cfg, &sparse_comm) != GCX_OK) {
                fprintf(stderr, "cannot make the sparse communicator\n");
                return 1;
            }
            gcx_config_release(cfg);
        }
        nrows = 0;
        snprintf(algolist, sizeof(algolist), "%s", algos);
        for (name = strtok_r(algolist, ",", &save);
             name != NULL && nrows < PERF_MAX_ROWS;
             name = strtok_r(NULL, ",", &save)) {
            perf_row_t *row = &rows[nrows++];

            memset(row, 0, sizeof(*row));
            row->name     = name;
            row->is_dense = !strcmp(name, "dense");
            row->comm     = row->is_dense ? world : sparse_comm;
            row->wrong    = -1;
            row->its      = malloc((size_t)iters * sizeof(*row->its));
            if (row->its == NULL) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
        }
        /* pass 0: the sparse rows in turns; pass 1: dense on its own (a
         * 1 s dense call between two sparse calls would leave their TCP
         * connections idle long enough to restart slow start) */
        for (pass = 0; pass < 2; ++pass) {
            for (it = 0; it < warm + iters; ++it) {
                for (turn = 0; turn < nrows; ++turn) {
                    /* the turn starts one row later each iteration */
                    perf_row_t  *row = &rows[(turn + it) % nrows];
                    gcx_sparse_vec_t in  = {idx, val, nnz, nnz, N, 0};
                    gcx_sparse_vec_t out = {oi, ov, 0, cap, N, 0};
                    gcx_sparse_allreduce_opts_t opts = {topk_on ? k : 0, NULL,
                                                        row->name};
                    gcx_sparse_allreduce_stats_t stats;
                    double       t0;

                    if (row->is_dense != pass) {
                        continue;
                    }
                    perf_idle(gap_ms);
                    gcx_barrier(world, NULL); /* each call on its own */
                    t0 = perf_now();
                    if (row->is_dense) {
                        memset(dense, 0, N * sizeof(float));
                        for (j = 0; j < nnz; ++j) {
                            dense[idx[j]] = val[j];
                        }
                        st = gcx_allreduce(row->comm, GCX_IN_PLACE, dense, N,
                                           GCX_DT_F32, GCX_OP_SUM, NULL);
                    } else {
                        /* sparse output: what Ok-Topk / DGC consume */
                        st = gcx_sparse_allreduce(row->comm, &in, NULL, &out,
                                                  &opts, NULL);
                    }
                    if (st != GCX_OK) {
                        fprintf(stderr, "%s failed: %s\n", row->name,
                                gcx_strerror(st));
                        return 1;
                    }
                    if (it < warm) {
                        continue;
                    }
                    row->its[it - warm] = perf_now() - t0;
                    if (!row->is_dense &&
                        gcx_sparse_allreduce_last_stats(row->comm, &stats) ==
                            GCX_OK) {
                        row->stats = stats;
                        row->chosen[perf_algo_index(stats.algo)]++;
                    }
                    if (it == warm + iters - 1 && !topk_on) {
                        row->wrong = perf_count_wrong(
                            &out, row->is_dense ? dense : NULL, ref, N);
                    }
                }
            }
        }
        for (r = 0; r < nrows; ++r) {
            perf_row_t *row = &rows[r];
            double      t, sent, K, bound, Kd, wrong;
            char        chosen[160];

            t     = perf_median_of_max(row->its, iters);
            wrong = row->wrong < 0 ? -1 : perf_max(row->wrong);
            if (row->is_dense) {
                row->stats.algo       = "dense";
                row->stats.bytes_sent = (uint64_t)(2.0 * (P - 1) / P * 4.0 * N);
            }
            free(row->its);
            sent = perf_max((double)row->stats.bytes_sent);
            K    = perf_max((double)row->stats.result_nnz);
            Kd   = K > 0 ? K : (double)N;
            bound = 8.0 * (P - 1) / P *
                    ((double)k + (Kd < N / 2.0 ? Kd : N / 2.0)) /
                    (rate * 1e9 / 8.0);
            perf_chosen_text(row, iters, chosen, sizeof(chosen));
            if (rank == 0) {
                printf("  %10zu %8.4f%% %7.2f %-18s %10.2f %12.2f %12.0f %10.2f "
                       "%7.2f %7.0f\n",
                       N, 100 * dens[di], overlap, row->name, t * 1e3,
                       sent / 1e6, K, bound * 1e3, t / bound, wrong);
                if (!strcmp(row->name, "auto")) {
                    printf("  %10s %8s  %7s   (auto ran %s)\n", "", "", "",
                           chosen);
                }
                if (jf != NULL) {
                    fprintf(jf, "%s  {\"P\": %d, \"N\": %zu, \"density\": %g, "
                            "\"overlap\": %g, \"topk\": %zu, \"algo\": \"%s\", "
                            "\"chosen\": \"%s\", \"time_s\": %.6f, "
                            "\"bytes_sent\": %.0f, \"K\": %.0f, "
                            "\"bound_s\": %.6f, \"wrong\": %.0f}",
                            first && di == 0 ? "" : ",\n", P, N, dens[di],
                            overlap, topk_on ? k : 0, row->name, chosen, t,
                            sent, K, bound, wrong);
                }
            }
            first = 0;
        }
        gcx_comm_destroy(sparse_comm);
        free(idx);
        free(val);
        free(dense);
        free(ref);
        free(oi);
        free(ov);
    }
    if (jf != NULL) {
        fprintf(jf, "\n]\n");
        fclose(jf);
    }
    gcx_comm_destroy(world);
    return 0;
}
