/*
 * perf_common.c - the shared allreduce perf driver.
 *
 * For each size: -w warm-up iterations, then -n timed iterations, each
 * timed on its own; per iteration the slowest rank's time counts (a
 * max-allreduce of the per-iteration times), and the row reports the
 * median, so one noisy iteration does not move the figure. Then one more
 * iteration on fresh data is checked against the closed-form expected
 * result (#wrong = elements off, summed over ranks). Columns follow
 * nccl-tests: algbw = bytes / time, busbw = algbw * 2(P-1)/P.
 */
#include "perf_common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct perf_options {
    size_t      min_bytes, max_bytes;
    double      factor;
    int         iters, warmup, check, in_place;
    gcx_dtype_t dtype;
    gcx_op_t    op;
    const char *json;
} perf_options_t;

static const char *const perf_dtype_names[] = {"float", "double", "int32",
                                               "int64", "half", "bfloat16"};
static const char *const perf_op_names[]    = {"sum", "max", "min", "avg"};

static double perf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int perf_parse_size(const char *text, size_t *out)
{
    char  *end;
    double v = strtod(text, &end);

    switch (*end) {
    case 'K': case 'k': v *= 1024; ++end; break;
    case 'M': case 'm': v *= 1024 * 1024; ++end; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; ++end; break;
    default: break;
    }
    if (*end != '\0' || v < 0) {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static void perf_usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
            "          [-c 0|1] [-d float|double|int32|int64|half|bfloat16]\n"
            "          [-o sum|max|min|avg] [-i 0|1] [--json FILE]\n"
            "  sizes in bytes with K/M/G suffixes; -c checks results (default 1);\n"
            "  -i 1 runs in place\n", prog);
}

static int perf_parse(int argc, char **argv, perf_options_t *o)
{
    int i, k;

    *o = (perf_options_t){.min_bytes = 1 << 20, .max_bytes = 64 << 20,
                          .factor = 2, .iters = 20, .warmup = 5, .check = 1,
                          .dtype = GCX_DT_F32, .op = GCX_OP_SUM};
    for (i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int         found = 0;

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            perf_usage(argv[0]);
            exit(0);
        }
        if (v == NULL) {
            fprintf(stderr, "%s: option %s needs a value\n", argv[0], a);
            return -1;
        }
        ++i;
        if (!strcmp(a, "-b") && perf_parse_size(v, &o->min_bytes) == 0) {
            continue;
        }
        if (!strcmp(a, "-e") && perf_parse_size(v, &o->max_bytes) == 0) {
            continue;
        }
        if (!strcmp(a, "-f") && (o->factor = atof(v)) > 1) {
            continue;
        }
        if (!strcmp(a, "-n") && (o->iters = atoi(v)) > 0) {
            continue;
        }
        if (!strcmp(a, "-w") && (o->warmup = atoi(v)) >= 0) {
            continue;
        }
        if (!strcmp(a, "-c")) {
            o->check = atoi(v) != 0;
            continue;
        }
        if (!strcmp(a, "-i")) {
            o->in_place = atoi(v) != 0;
            continue;
        }
        if (!strcmp(a, "--json")) {
            o->json = v;
            continue;
        }
        if (!strcmp(a, "-d")) {
            for (k = 0; k < 6; ++k) {
                if (!strcmp(v, perf_dtype_names[k])) {
                    o->dtype = (gcx_dtype_t)k;
                    found    = 1;
                }
            }
            if (found) {
                continue;
            }
        }
        if (!strcmp(a, "-o")) {
            for (k = 0; k < 4; ++k) {
                if (!strcmp(v, perf_op_names[k])) {
                    o->op = (gcx_op_t)k;
                    found = 1;
                }
            }
            if (found) {
                continue;
            }
        }
        fprintf(stderr, "%s: invalid option or value: %s %s\n", argv[0], a, v);
        return -1;
    }
    if (o->max_bytes < o->min_bytes) {
        fprintf(stderr, "%s: -e must be >= -b\n", argv[0]);
        return -1;
    }
    return 0;
}

/* Input of rank r at element i: small integers, exact in every type. */
static double perf_value(int rank, size_t i)
{
    return (double)((rank % 5) + 1) * (double)((i % 7) + 1);
}

static double perf_expected(int size, size_t i, gcx_op_t op)
{
    double s = 0, mx = -1e300, mn = 1e300;
    int    r;

    for (r = 0; r < size; ++r) {
        double v = perf_value(r, i);
        s += v;
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
    }
    switch (op) {
    case GCX_OP_MAX: return mx;
    case GCX_OP_MIN: return mn;
    case GCX_OP_AVG: return s / size;
    default: return s;
    }
}

static void perf_fill(void *buf, size_t count, gcx_dtype_t dtype, int rank)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        double v = perf_value(rank, i);
        switch (dtype) {
        case GCX_DT_F32: ((float *)buf)[i] = (float)v; break;
        case GCX_DT_F64: ((double *)buf)[i] = v; break;
        case GCX_DT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
        case GCX_DT_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
        case GCX_DT_F16: {
            /* v is a small integer: exact in half; build its bits */
            float    f = (float)v;
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)buf)[i] = (uint16_t)(((u >> 16) & 0x8000) |
                                              ((((u >> 23) & 0xff) - 112) << 10) |
                                              ((u >> 13) & 0x3ff));
            break;
        }
        case GCX_DT_BF16: {
            float    f = (float)v;
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
            break;
        }
        default: break;
        }
    }
}

static double perf_read(const void *buf, size_t i, gcx_dtype_t dtype)
{
    uint16_t h;
    uint32_t u;
    float    f;

    switch (dtype) {
    case GCX_DT_F32: return ((const float *)buf)[i];
    case GCX_DT_F64: return ((const double *)buf)[i];
    case GCX_DT_I32: return ((const int32_t *)buf)[i];
    case GCX_DT_I64: return (double)((const int64_t *)buf)[i];
    case GCX_DT_F16:
        h = ((const uint16_t *)buf)[i];
        if (((h >> 10) & 0x1f) == 0) {
            return 0; /* only small integers are used */
        }
        u = ((uint32_t)(h & 0x8000) << 16) |
            ((((h >> 10) & 0x1fu) + 112) << 23) | ((uint32_t)(h & 0x3ff) << 13);
        memcpy(&f, &u, 4);
        return f;
    case GCX_DT_BF16:
        u = (uint32_t)((const uint16_t *)buf)[i] << 16;
        memcpy(&f, &u, 4);
        return f;
    default: return NAN;
    }
}

static long perf_count_wrong(const void *buf, size_t count, gcx_dtype_t dtype,
                             gcx_op_t op, int size)
{
    double tol = (dtype == GCX_DT_F16 || dtype == GCX_DT_BF16) ? 1e-2 :
                 (dtype == GCX_DT_F32) ? 1e-6 : 1e-12;
    long   wrong = 0;
    size_t i;

    if (op == GCX_OP_AVG && (dtype == GCX_DT_I32 || dtype == GCX_DT_I64)) {
        tol = 1.0; /* integer division truncates */
    }
    for (i = 0; i < count; ++i) {
        double e = perf_expected(size, i, op);
        if (op == GCX_OP_AVG && (dtype == GCX_DT_I32 || dtype == GCX_DT_I64)) {
            e = floor(e);
        }
        if (fabs(perf_read(buf, i, dtype) - e) > tol * fabs(e) + 1e-12) {
            ++wrong;
        }
    }
    return wrong;
}

static int perf_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void perf_sort_doubles(double *values, int n)
{
    qsort(values, (size_t)n, sizeof(*values), perf_cmp_double);
}

double perf_median(double *values, int n)
{
    perf_sort_doubles(values, n);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int perf_allreduce_main(int argc, char **argv, const perf_backend_t *backend)
{
    perf_options_t o;
    FILE          *json = NULL;
    double        *times;
    char          *sendbuf, *recvbuf;
    size_t         esize, bytes, max_count;
    int            rank, size, it, failures = 0, first_row = 1;

    if (backend->init(&argc, &argv, &rank, &size) != 0) {
        fprintf(stderr, "%s: cannot start the %s backend\n", argv[0],
                backend->name);
        return 1;
    }
    if (perf_parse(argc, argv, &o) != 0) {
        if (rank == 0) {
            perf_usage(argv[0]);
        }
        backend->finalize();
        return 2;
    }
    esize     = gcx_dtype_size(o.dtype);
    max_count = o.max_bytes / esize;
    times     = calloc((size_t)(o.iters > 1 ? o.iters : 1), sizeof(double));
    sendbuf   = malloc(max_count * esize + 64);
    recvbuf   = malloc(max_count * esize + 64);
    if (times == NULL || sendbuf == NULL || recvbuf == NULL) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 1;
    }
    memset(sendbuf, 0, max_count * esize);
    memset(recvbuf, 0, max_count * esize); /* touch the pages once */
    if (rank == 0) {
        printf("# %s allreduce perf: %d ranks, %d iterations (median of the "
               "slowest rank), %d warm-up, %s\n",
               backend->name, size, o.iters, o.warmup,
               o.in_place ? "in place" : "out of place");
        printf("# %12s %12s %8s %6s | %10s %11s %11s %7s\n", "size", "count",
               "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
               "#wrong");
        fflush(stdout);
        if (o.json != NULL) {
            json = fopen(o.json, "w");
            if (json == NULL) {
                fprintf(stderr, "%s: cannot write %s\n", argv[0], o.json);
                return 1;
            }
            fprintf(json, "{\"backend\": \"%s\", \"collective\": "
                    "\"allreduce\", \"ranks\": %d, \"in_place\": %s, "
                    "\"rows\": [", backend->name, size,
                    o.in_place ? "true" : "false");
        }
    }
    for (bytes = o.min_bytes; bytes <= o.max_bytes;
         bytes = (size_t)((double)bytes * o.factor) > bytes ?
                     (size_t)((double)bytes * o.factor) : bytes + 1) {
        size_t count = bytes / esize;
        void  *dst   = recvbuf;
        void  *src   = o.in_place ? recvbuf : sendbuf;
        double median, algbw, busbw;
        long   wrong = 0;

        perf_fill(src, count, o.dtype, rank);
        for (it = 0; it < o.warmup; ++it) {
            failures += backend->allreduce(src, dst, count, o.dtype, o.op) != 0;
        }
        for (it = 0; it < o.iters; ++it) {
            double t0 = perf_now();
            failures += backend->allreduce(src, dst, count, o.dtype, o.op) != 0;
            times[it] = perf_now() - t0;
        }
        backend->max_doubles(times, o.iters);
        median = perf_median(times, o.iters);
        if (o.check) {
            perf_fill(src, count, o.dtype, rank);
            failures += backend->allreduce(src, dst, count, o.dtype, o.op) != 0;
            {
                /* #wrong: elements off on the worst rank */
                double w = (double)perf_count_wrong(dst, count, o.dtype, o.op,
                                                    size);
                backend->max_doubles(&w, 1);
                wrong = (long)w;
            }
        }
        algbw = median > 0 ? (double)(count * esize) / median / 1e9 : 0;
        busbw = algbw * (size > 1 ? 2.0 * (size - 1) / size : 1.0);
        if (rank == 0) {
            char wrong_text[32];
            snprintf(wrong_text, sizeof(wrong_text), "%ld", wrong);
            printf("  %12zu %12zu %8s %6s | %10.1f %11.3f %11.3f %7s\n",
                   count * esize, count, perf_dtype_names[o.dtype],
                   perf_op_names[o.op], median * 1e6, algbw, busbw,
                   o.check ? wrong_text : "N/A");
            fflush(stdout);
            if (json != NULL) {
                fprintf(json, "%s\n  {\"size\": %zu, \"count\": %zu, "
                        "\"type\": \"%s\", \"redop\": \"%s\", \"time_us\": "
                        "%.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, "
                        "\"wrong\": %ld}",
                        first_row ? "" : ",", count * esize, count,
                        perf_dtype_names[o.dtype], perf_op_names[o.op],
                        median * 1e6, algbw, busbw, o.check ? wrong : -1L);
            }
        }
        first_row = 0;
        if (wrong != 0) {
            ++failures;
        }
        if (count * esize == 0 && o.max_bytes == 0) {
            break;
        }
    }
    if (json != NULL) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    if (rank == 0 && failures > 0) {
        fprintf(stderr, "# %d failed or wrong allreduce(s)\n", failures);
    }
    free(times);
    free(sendbuf);
    free(recvbuf);
    backend->finalize();
    return failures > 0 ? 1 : 0;
}
