/*
 * gcx_compress_perf.c - time and throughput of every compressor, next to a
 * plain streaming pass over the same data (the memory-speed yardstick).
 *
 * For each size N and compression factor CF, one row per compressor:
 *   size count cf k compressor | time(ms) min(ms) GB/s x_stream nnz #wrong
 * time is the median of --reps timed runs (after one warm-up run), GB/s is
 * input bytes / median time, x_stream is median time / median time of the
 * stream row (sum of squares: one read, the cheapest honest pass), #wrong
 * counts violated output properties (data checking is on by default, as in
 * nccl-tests). Rows "topk.l2" and "topk.ml" time multi-level compression:
 * CF 10 on the dense vector, then CF/10 on the sparse result (l2: second
 * stage alone, ml: both); "ef.topk" is a whole error-feedback step.
 * --dump DIR writes each input as raw float32 (DIR/gcx_compress_input_N.f32)
 * so that perf/compress/torch_topk_perf.py times torch.topk on the same data.
 * Memory: 4 N bytes of input plus two outputs of 2k entries (N with
 * "none" or "ef", whose residual is another 4 N): ~0.7 GB at N = 100M.
 */
#include <gcx/compress.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LIST 16

typedef struct perf_opts {
    size_t sizes[MAX_LIST];
    int nsizes;
    double cfs[MAX_LIST];
    int ncfs;
    char kinds[256];
    int reps;
    int check;
    const char *json;
    const char *dump;
    uint64_t seed;
} perf_opts_t;

typedef struct perf_row {
    size_t n;
    double cf;
    size_t k;
    char name[32];
    double med_ms, min_ms, gbps, xstream, in_bytes;
    size_t nnz;
    long wrong;
} perf_row_t;

static FILE *json_fp;
static int json_rows;

static clockid_t clock_id = CLOCK_THREAD_CPUTIME_ID;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- input: gradient-like data ------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(void)
{
    return ((rng_next() >> 11) + 0.5) * 0x1p-53;
}

/* Gaussian values (Box-Muller) with a scale per block of 64 Ki entries
 * spread over two decades, like the layers of a model. */
static void make_input(float *x, size_t n, uint64_t seed)
{
    const size_t block = 65536;
    double scale = 1;
    size_t i;

    rng_state = seed;
    for (i = 0; i < n; i += 2) {
        double r = sqrt(-2.0 * log(rng_unit())), a = 2 * M_PI * rng_unit();
        if (i % block == 0) {
            scale = pow(10.0, -2.0 * rng_unit());
        }
        x[i] = (float)(scale * r * cos(a));
        if (i + 1 < n) {
            x[i + 1] = (float)(scale * r * sin(a));
        }
    }
}

/* ---- checking ------------------------------------------------------------ */

static uint32_t key_of(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    return u & 0x7fffffffu;
}

/*
 * Properties of a magnitude selection of x (length n, sparse input map if
 * non-NULL): indices increasing, values copied, every unselected magnitude
 * <= the smallest selected one; exact: also nnz == k and, at equal
 * magnitude, every unselected index above every selected one.
 */
static long check_topset(const float *x, const uint32_t *map, size_t n,
                         const gcx_sparse_vec_t *s, size_t k, int exact,
                         size_t lo, size_t hi)
{
    long wrong = 0;
    uint32_t tmin = UINT32_MAX;
    size_t i, j, last_sel_tie = 0, first_unsel_tie = SIZE_MAX;

    if (exact ? s->nnz != k : (s->nnz < lo || s->nnz > hi)) {
        wrong++;
    }
    for (j = 0; j < s->nnz; j++) {
        if (key_of(s->val[j]) < tmin) {
            tmin = key_of(s->val[j]);
        }
        if (j > 0 && s->idx[j] <= s->idx[j - 1]) {
            wrong++;
        }
    }
    for (i = 0, j = 0; i < n; i++) {
        uint32_t ix = map != NULL ? map[i] : (uint32_t)i;
        uint32_t key = key_of(x[i]);
        if (j < s->nnz && s->idx[j] == ix) {
            wrong += memcmp(&s->val[j], &x[i], sizeof(float)) != 0;
            if (key == tmin) {
                last_sel_tie = i;
            }
            j++;
        } else if (s->nnz > 0 && key > tmin) {
            wrong++; /* a larger magnitude was left out */
        } else if (key == tmin && first_unsel_tie == SIZE_MAX) {
            first_unsel_tie = i;
        }
    }
    /* exact ties: the lower index wins */
    if (exact && s->nnz > 0 && first_unsel_tie < last_sel_tie) {
        wrong++;
    }
    return wrong + (long)(s->nnz - j); /* outputs not found in the input */
}

static long check_randomk(const float *x, const uint32_t *map, size_t n,
                          const gcx_sparse_vec_t *s, size_t k)
{
    long wrong = s->nnz != k;
    size_t j, i = 0;

    for (j = 0; j < s->nnz; j++) {
        if (j > 0 && s->idx[j] <= s->idx[j - 1]) {
            wrong++;
        }
        if (map == NULL) {
            wrong += s->idx[j] >= n || x[s->idx[j]] != s->val[j];
        } else {
            while (i < n && map[i] < s->idx[j]) {
                i++;
            }
            wrong += i >= n || map[i] != s->idx[j] || x[i] != s->val[j];
        }
    }
    return wrong;
}

/* ---- output ------------------------------------------------------------ */

static void print_header(void)
{
    printf("# %12s %11s %6s %10s %-10s | %9s %9s %8s %8s %10s %6s\n", "size",
           "count", "cf", "k", "compressor", "time(ms)", "min(ms)", "GB/s",
           "x_stream", "nnz", "#wrong");
}

static void emit_row(const perf_row_t *r)
{
    char cf[16], k[24];

    if (r->cf > 0) {
        snprintf(cf, sizeof(cf), "%g", r->cf);
        snprintf(k, sizeof(k), "%zu", r->k);
    } else {
        snprintf(cf, sizeof(cf), "-");
        snprintf(k, sizeof(k), "-");
    }
    printf("  %12.0f %11zu %6s %10s %-10s | %9.3f %9.3f %8.2f %8.2f %10zu "
           "%6ld\n",
           r->in_bytes, r->n, cf, k, r->name, r->med_ms, r->min_ms, r->gbps,
           r->xstream, r->nnz, r->wrong);
    fflush(stdout);
    if (json_fp != NULL) {
        fprintf(json_fp,
                "%s\n  {\"impl\": \"gcx\", \"size_bytes\": %.0f, \"count\": "
                "%zu, \"cf\": %g, \"k\": %zu, \"compressor\": \"%s\", "
                "\"time_ms\": %.4f, \"min_ms\": %.4f, \"gbps\": %.3f, "
                "\"x_stream\": %.3f, \"nnz\": %zu, \"wrong\": %ld}",
                json_rows++ > 0 ? "," : "", r->in_bytes, r->n, r->cf, r->k,
                r->name, r->med_ms, r->min_ms, r->gbps, r->xstream, r->nnz,
                r->wrong);
    }
}

/* ---- timing -------------------------------------------------------------- */

typedef int (*bench_fn_t)(void *arg);

/* Median and min of reps timed runs after one warm-up; -1 on error. */
static int time_it(bench_fn_t fn, void *arg, int reps, double *med_p,
                   double *min_p)
{
    double t[64];
    int i;

    if (reps > 64) {
        reps = 64;
    }
    if (fn(arg) != 0) {
        return -1;
    }
    for (i = 0; i < reps; i++) {
        double t0 = now_ms();
        if (fn(arg) != 0) {
            return -1;
        }
        t[i] = now_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    *med_p = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    *min_p = t[0];
    return 0;
}

typedef struct bench_arg {
    const float *x;
    size_t n;
    double cf, cf2;
    gcx_compressor_t *comp;
    gcx_sparse_vec_t *out, *mid;
    gcx_feedback_t *fb;
    volatile double sink;
} bench_arg_t;

static int bench_stream(void *p)
{
    bench_arg_t *a = p;
    a->sink = gcx_dense_sqnorm(a->x, a->n);
    return 0;
}

static int bench_compress(void *p)
{
    bench_arg_t *a = p;
    return gcx_compress_dense(a->comp, a->x, a->n, a->cf, a->out, NULL) !=
           GCX_OK;
}

static int bench_level2(void *p)
{
    bench_arg_t *a = p;
    return gcx_compress_sparse(a->comp, a->mid, a->cf2, a->out, NULL) != GCX_OK;
}

static int bench_multilevel(void *p)
{
    bench_arg_t *a = p;
    if (gcx_compress_dense(a->comp, a->x, a->n, a->cf, a->mid, NULL) !=
        GCX_OK) {
        return 1;
    }
    return gcx_compress_sparse(a->comp, a->mid, a->cf2, a->out, NULL) != GCX_OK;
}

static int bench_feedback(void *p)
{
    bench_arg_t *a = p;
    return gcx_feedback_step(a->fb, a->comp, a->x, a->cf, a->out, NULL) !=
           GCX_OK;
}

/* ---- driver -------------------------------------------------------------- */

static int kind_wanted(const perf_opts_t *o, const char *name)
{
    char buf[256], *save = NULL, *tok;

    snprintf(buf, sizeof(buf), "%s", o->kinds);
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, name) == 0) {
            return 1;
        }
    }
    return 0;
}

static int run_size(const perf_opts_t *o, size_t n)
{
    float *x = malloc(n * sizeof(float));
    perf_row_t row;
    bench_arg_t arg;
    gcx_sparse_vec_t out, mid;
    double stream_ms, min_ms;
    int c, kind, rc = 0;

    if (x == NULL) {
        fprintf(stderr, "cannot allocate %zu floats\n", n);
        return 1;
    }
    make_input(x, n, o->seed + n);
    if (o->dump != NULL) {
        char path[4096];
        FILE *fp;
        snprintf(path, sizeof(path), "%s/gcx_compress_input_%zu.f32", o->dump,
                 n);
        fp = fopen(path, "wb");
        if (fp == NULL || fwrite(x, sizeof(float), n, fp) != n ||
            fclose(fp) != 0) {
            fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
            free(x);
            return 1;
        }
    }
    /* Room for any compressor at the smallest CF (redsync: 2k), for the
     * first level (CF 10) of multi-level topk, or for "none". */
    size_t cap = 0;
    for (c = 0; c < o->ncfs; c++) {
        size_t k;
        if (gcx_compress_k(n, o->cfs[c], &k) == GCX_OK && 2 * k > cap) {
            cap = 2 * k;
        }
    }
    cap = cap > n / 10 + 1 ? cap : n / 10 + 1;
    if (kind_wanted(o, "none") || cap > n) {
        cap = n;
    }
    if (gcx_sparse_vec_alloc(cap, n, &out) != GCX_OK ||
        gcx_sparse_vec_alloc(cap, n, &mid) != GCX_OK) {
        fprintf(stderr, "cannot allocate outputs\n");
        free(x);
        return 1;
    }
    memset(&arg, 0, sizeof(arg));
    arg.x = x;
    arg.n = n;
    arg.out = &out;
    arg.mid = &mid;

    memset(&row, 0, sizeof(row));
    row.n = n;
    row.in_bytes = (double)n * sizeof(float);
    if (time_it(bench_stream, &arg, o->reps, &stream_ms, &min_ms) != 0) {
        return 1;
    }
    snprintf(row.name, sizeof(row.name), "stream");
    row.med_ms = stream_ms;
    row.min_ms = min_ms;
    row.gbps = row.in_bytes / stream_ms * 1e-6;
    row.xstream = 1;
    emit_row(&row);

    for (c = 0; c < o->ncfs; c++) {
        double cf = o->cfs[c];
        size_t k;

        gcx_compress_k(n, cf, &k);
        for (kind = 0; kind < GCX_COMPRESS_KIND_COUNT; kind++) {
            const char *name = gcx_compress_kind_name(kind);
            gcx_compress_kind_t kd = (gcx_compress_kind_t)kind;
            gcx_status_t st;

            if (!kind_wanted(o, name)) {
                continue;
            }
            if (gcx_compressor_create(kd, 42, &arg.comp) != GCX_OK) {
                return 1;
            }
            arg.cf = cf;
            memset(&row, 0, sizeof(row));
            row.n = n;
            row.cf = cf;
            row.k = k;
            row.in_bytes = (double)n * sizeof(float);
            snprintf(row.name, sizeof(row.name), "%s", name);
            if (time_it(bench_compress, &arg, o->reps, &row.med_ms,
                        &row.min_ms) != 0) {
                fprintf(stderr, "%s failed\n", name);
                rc = 1;
            }
            row.gbps = row.in_bytes / row.med_ms * 1e-6;
            row.xstream = row.med_ms / stream_ms;
            row.nnz = out.nnz;
            if (o->check) {
                size_t hi = gcx_compress_capacity_k(kd, n, k);
                if (kd == GCX_COMPRESS_RANDOMK) {
                    row.wrong = check_randomk(x, NULL, n, &out, k);
                } else if (kd == GCX_COMPRESS_DGC) {
                    row.wrong = check_topset(x, NULL, n, &out, k, 0,
                                             k - (2 * k) / 10, hi);
                } else if (kd == GCX_COMPRESS_REDSYNC) {
                    row.wrong =
                        check_topset(x, NULL, n, &out, k, 0, (k + 1) / 2, hi);
                } else {
                    row.wrong =
                        check_topset(x, NULL, n, &out,
                                     kd == GCX_COMPRESS_NONE ? n : k, 1, 0, 0);
                }
            }
            emit_row(&row);

            /* multi-level: CF 10 dense, then cf / 10 on the sparse result */
            if (kd == GCX_COMPRESS_TOPK && kind_wanted(o, "ml") && cf > 10 &&
                cf / 10 >= 1) {
                size_t k1, k2;
                gcx_compress_k(n, 10, &k1);
                gcx_compress_k(k1, cf / 10, &k2);
                arg.cf = 10;
                arg.cf2 = cf / 10;
                st = gcx_compress_dense(arg.comp, x, n, 10, &mid, NULL);
                if (st != GCX_OK) {
                    return 1;
                }
                row.k = k2;
                snprintf(row.name, sizeof(row.name), "topk.l2");
                row.in_bytes = (double)mid.nnz * 8;
                if (time_it(bench_level2, &arg, o->reps, &row.med_ms,
                            &row.min_ms) != 0) {
                    rc = 1;
                }
                row.gbps = row.in_bytes / row.med_ms * 1e-6;
                row.xstream = row.med_ms / stream_ms;
                row.nnz = out.nnz;
                row.wrong = o->check ? check_topset(mid.val, mid.idx, mid.nnz,
                                                    &out, k2, 1, 0, 0)
                                     : 0;
                emit_row(&row);
                snprintf(row.name, sizeof(row.name), "topk.ml");
                row.in_bytes = (double)n * sizeof(float);
                if (time_it(bench_multilevel, &arg, o->reps, &row.med_ms,
                            &row.min_ms) != 0) {
                    rc = 1;
                }
                row.gbps = row.in_bytes / row.med_ms * 1e-6;
                row.xstream = row.med_ms / stream_ms;
                row.nnz = out.nnz;
                row.wrong =
                    o->check ? check_topset(x, NULL, n, &out, k2, 1, 0, 0) : 0;
                emit_row(&row);
            }
            /* a whole error-feedback step with this compressor */
            if (kd == GCX_COMPRESS_TOPK && kind_wanted(o, "ef")) {
                if (gcx_feedback_create(n, NULL, &arg.fb) != GCX_OK) {
                    return 1;
                }
                arg.cf = cf;
                snprintf(row.name, sizeof(row.name), "ef.topk");
                row.k = k;
                row.in_bytes = (double)n * sizeof(float);
                if (time_it(bench_feedback, &arg, o->reps, &row.med_ms,
                            &row.min_ms) != 0) {
                    rc = 1;
                }
                row.gbps = row.in_bytes / row.med_ms * 1e-6;
                row.xstream = row.med_ms / stream_ms;
                row.nnz = out.nnz;
                row.wrong = 0;
                emit_row(&row);
                gcx_feedback_destroy(arg.fb);
                arg.fb = NULL;
            }
            gcx_compressor_destroy(arg.comp);
            arg.comp = NULL;
        }
    }
    gcx_sparse_vec_free(&mid);
    gcx_sparse_vec_free(&out);
    free(x);
    return rc;
}

static size_t parse_size(const char *s)
{
    char *end;
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

static void usage(const char *prog)
{
    printf("usage: %s [options]\n"
           "  -n, --sizes LIST   dense lengths (default 1M,25M,100M)\n"
           "  -c, --cfs LIST     compression factors (default 10,100,1000)\n"
           "  -k, --kinds LIST   rows: none,topk,dgc,redsync,randomk,ml,ef\n"
           "                     (default topk,dgc,redsync,randomk,ml)\n"
           "  -r, --reps N       timed runs per row (median), default 3\n"
           "      --no-check     skip the output checks (#wrong = 0)\n"
           "      --json FILE    also write the rows as JSON\n"
           "      --dump DIR     write each input to DIR for the torch "
           "script\n"
           "      --clock C      cpu (default: CPU time of the thread, robust\n"
           "                     on a shared machine) or wall\n"
           "      --seed S       input seed (default 1)\n",
           prog);
}

static int parse_args(int argc, char **argv, perf_opts_t *o)
{
    int i;

    memset(o, 0, sizeof(*o));
    o->sizes[0] = 1000000;
    o->sizes[1] = 25000000;
    o->sizes[2] = 100000000;
    o->nsizes = 3;
    o->cfs[0] = 10;
    o->cfs[1] = 100;
    o->cfs[2] = 1000;
    o->ncfs = 3;
    snprintf(o->kinds, sizeof(o->kinds), "topk,dgc,redsync,randomk,ml");
    o->reps = 3;
    o->check = 1;
    o->seed = 1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(argv[0]);
            exit(0);
        } else if (!strcmp(a, "--no-check")) {
            o->check = 0;
        } else if (v == NULL) {
            fprintf(stderr, "%s needs a value\n", a);
            return -1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--sizes")) {
            char buf[512], *save = NULL, *tok;
            snprintf(buf, sizeof(buf), "%s", v);
            o->nsizes = 0;
            for (tok = strtok_r(buf, ",", &save);
                 tok != NULL && o->nsizes < MAX_LIST;
                 tok = strtok_r(NULL, ",", &save)) {
                o->sizes[o->nsizes++] = parse_size(tok);
            }
            i++;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--cfs")) {
            char buf[512], *save = NULL, *tok;
            snprintf(buf, sizeof(buf), "%s", v);
            o->ncfs = 0;
            for (tok = strtok_r(buf, ",", &save);
                 tok != NULL && o->ncfs < MAX_LIST;
                 tok = strtok_r(NULL, ",", &save)) {
                o->cfs[o->ncfs++] = strtod(tok, NULL);
            }
            i++;
        } else if (!strcmp(a, "-k") || !strcmp(a, "--kinds")) {
            snprintf(o->kinds, sizeof(o->kinds), "%s", v);
            i++;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--reps")) {
            o->reps = atoi(v);
            i++;
        } else if (!strcmp(a, "--json")) {
            o->json = v;
            i++;
        } else if (!strcmp(a, "--dump")) {
            o->dump = v;
            i++;
        } else if (!strcmp(a, "--clock")) {
            if (!strcmp(v, "wall")) {
                clock_id = CLOCK_MONOTONIC;
            } else if (!strcmp(v, "cpu")) {
                clock_id = CLOCK_THREAD_CPUTIME_ID;
            } else {
                fprintf(stderr, "--clock cpu|wall\n");
                return -1;
            }
            i++;
        } else if (!strcmp(a, "--seed")) {
            o->seed = strtoull(v, NULL, 0);
            i++;
        } else {
            fprintf(stderr, "unknown option %s\n", a);
            return -1;
        }
    }
    if (o->reps < 1) {
        o->reps = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    perf_opts_t o;
    int s, rc = 0;

    if (parse_args(argc, argv, &o) != 0) {
        usage(argv[0]);
        return 2;
    }
    if (o.json != NULL) {
        json_fp = fopen(o.json, "w");
        if (json_fp == NULL) {
            fprintf(stderr, "cannot open %s: %s\n", o.json, strerror(errno));
            return 1;
        }
        fprintf(json_fp, "[");
    }
    printf("# gcx_compress_perf: one thread, %s time, median of %d runs "
           "after a warm-up; x_stream = time / stream time\n",
           clock_id == CLOCK_MONOTONIC ? "wall" : "thread CPU", o.reps);
    print_header();
    for (s = 0; s < o.nsizes; s++) {
        rc |= run_size(&o, o.sizes[s]);
    }
    if (json_fp != NULL) {
        fprintf(json_fp, "\n]\n");
        fclose(json_fp);
    }
    return rc;
}
