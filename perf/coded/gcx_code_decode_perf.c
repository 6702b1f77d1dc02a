/*
 * gcx_code_decode_perf - what decoding costs a root (or a master-less chunk
 * owner) per round, as the number of workers n grows (issue 45, item 3).
 *
 * One process, no communication: per round, the n workers arrive in a
 * random order (a fixed-seed permutation, the s last to "arrive" are the
 * stragglers, never delivered), and the decoder is driven as a collective
 * drives it. Three ways, each timed over --rounds rounds:
 *
 *   stream   gcx_code_arrival_coeff() per arrival and a count of the
 *            nonzero coefficients against gcx_code_stream_need(): the O(1)
 *            per arrival decodability of UNCODED, FR and WEIGHTED
 *            (CR and MATRIX have no streaming coefficient: "-")
 *   predicate  gcx_code_decodable() after every arrival, until it holds
 *            (what the star's root does today for every code)
 *   vector   gcx_code_decode_vector() once on the decodable set
 *
 * Every decodable set found is checked against the definition (FR: every
 * group has an arrived worker; the vector's support is the lowest arrived
 * worker of each group), so a wrong decoder shows as "wrong" > 0.
 *
 * Usage: gcx_code_decode_perf [--n 16,64,256,1024,4096] [--s 1,3,-8]
 *                             [--kinds fr,cr] [--rounds 200]
 * A negative s = -k means s = n / k (e.g. -8: s = n / 8). FR takes any s:
 * floor(n / (s + 1)) groups of s + 1 or more workers.
 * Output: one row per (kind, n, s): microseconds per round of each way and
 * per new arrival set; a refused code prints the library's reason (logged
 * by gcx_code_create) and "refused".
 */
#include <gcx/coding.h>
#include <gcx/gcx.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int parse_list(const char *text, int *out, int max)
{
    int   count = 0;
    char *copy  = strdup(text), *save = NULL, *tok;

    for (tok = strtok_r(copy, ",", &save); tok != NULL && count < max;
         tok = strtok_r(NULL, ",", &save)) {
        out[count++] = atoi(tok);
    }
    free(copy);
    return count;
}

/* FR by its definition: q = floor(n / (s + 1)) groups of consecutive
 * workers, the first n mod q of them floor(n / q) + 1 workers, the others
 * floor(n / q); decodable iff every group has an arrival; the vector is 1
 * on the lowest arrived worker of each group. */
static int fr_check(int n, int s, const uint64_t *set, const double *a)
{
    int q = n / (s + 1), lo = 0;

    for (int grp = 0; grp < q; grp++) {
        int hi = lo + n / q + (grp < n % q), first = -1;

        for (int w = lo; w < hi && first < 0; w++) {
            if (gcx_wset_has(set, w)) {
                first = w;
            }
        }
        if (first < 0) {
            return 0;
        }
        for (int w = lo; a != NULL && w < hi; w++) {
            if (a[w] != (w == first ? 1.0 : 0.0)) {
                return 0;
            }
        }
        lo = hi;
    }
    return lo == n;
}

typedef struct {
    double stream_s, predicate_s, vector_s;
    long   rounds, sets, wrong;
    int    streamable;
} result_t;

static int run_one(gcx_code_kind_t kind, int n, int s, int rounds,
                   result_t *res)
{
    gcx_code_params_t params = {0};
    gcx_code_t       *code;
    int              *order = malloc((size_t)n * sizeof(int)), need = 0;
    uint64_t         *set   = calloc(GCX_WSET_WORDS(n), sizeof(uint64_t));
    double           *a     = malloc((size_t)n * sizeof(double));
    uint64_t          seed  = 12345;

    memset(res, 0, sizeof(*res));
    params.kind = kind;
    params.n    = n;
    params.s    = s;
    if (gcx_code_create(&params, &code) != GCX_OK) {
        free(order), free(set), free(a);
        return -1;
    }
    res->streamable = gcx_code_stream_need(code, &need) == GCX_OK;
    for (int r = 0; r < rounds; r++) {
        int    got = 0, decodable = 0, k;
        double t0;

        for (int w = 0; w < n; w++) {
            order[w] = w;
        }
        for (int w = n - 1; w > 0; w--) {
            int j = (int)(rng_next(&seed) % (uint64_t)(w + 1)), t = order[w];
            order[w] = order[j];
            order[j] = t;
        }
        /* stream: arrival coefficients counted against the need */
        if (res->streamable) {
            gcx_wset_clear(set, n);
            t0 = now_s();
            for (k = 0; k < n - s && got < need; k++) {
                int    known = 0;
                double coeff = 0;
                gcx_code_arrival_coeff(code, set, order[k], &known, &coeff);
                got += coeff != 0.0;
                gcx_wset_add(set, order[k]);
            }
            res->stream_s += now_s() - t0;
            if (got != need || (kind == GCX_CODE_FR && !fr_check(n, s, set, NULL))) {
                res->wrong++;
            }
        }
        /* predicate after every arrival */
        gcx_wset_clear(set, n);
        t0 = now_s();
        for (k = 0; k < n - s && !decodable; k++) {
            gcx_wset_add(set, order[k]);
            gcx_code_decodable(code, set, &decodable);
            res->sets++;
        }
        res->predicate_s += now_s() - t0;
        if (!decodable) {
            res->wrong++; /* n - s arrivals always decode FR and CR */
            continue;
        }
        t0 = now_s();
        if (gcx_code_decode_vector(code, set, a) != GCX_OK) {
            res->wrong++;
            continue;
        }
        res->vector_s += now_s() - t0;
        if (kind == GCX_CODE_FR && !fr_check(n, s, set, a)) {
            res->wrong++;
        }
        res->rounds++;
    }
    gcx_code_destroy(code);
    free(order), free(set), free(a);
    return 0;
}

int main(int argc, char **argv)
{
    int         ns[16] = {16, 64, 256, 1024, 4096}, nn = 5;
    int         ss[16] = {1, 3}, ns_s = 2, rounds = 200, fr = 1, cr = 1;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--n") == 0) {
            nn = parse_list(argv[i + 1], ns, 16);
        } else if (strcmp(argv[i], "--s") == 0) {
            ns_s = parse_list(argv[i + 1], ss, 16);
        } else if (strcmp(argv[i], "--rounds") == 0) {
            rounds = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--kinds") == 0) {
            fr = strstr(argv[i + 1], "fr") != NULL;
            cr = strstr(argv[i + 1], "cr") != NULL;
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    printf("# gcx %s: decode cost per round, %d rounds, random arrival "
           "orders, the s last arrivals never delivered\n",
           gcx_version(), rounds);
    printf("%-4s %6s %4s %12s %14s %12s %10s %6s\n", "kind", "n", "s",
           "stream_us", "predicate_us", "vector_us", "us/set", "wrong");
    for (int k = 0; k < 2; k++) {
        gcx_code_kind_t kind = k == 0 ? GCX_CODE_FR : GCX_CODE_CR;

        if ((k == 0 && !fr) || (k == 1 && !cr)) {
            continue;
        }
        for (int i = 0; i < nn; i++) {
            for (int j = 0; j < ns_s; j++) {
                result_t res;
                int      n = ns[i], s = ss[j] < 0 ? n / -ss[j] : ss[j];

                int      dup = 0;

                for (int q = 0; q < j; q++) { /* e.g. -8 at n = 16 is 2 */
                    dup |= (ss[q] < 0 ? n / -ss[q] : ss[q]) == s;
                }
                if (dup || s < 0 || s >= n) {
                    continue;
                }
                fflush(stdout); /* a refusal logs to stderr */
                if (run_one(kind, n, s, rounds, &res) != 0) {
                    printf("%-4s %6d %4d refused (see the library's error "
                           "above)\n", k == 0 ? "fr" : "cr", n, s);
                    continue;
                }
                if (res.streamable) {
                    printf("%-4s %6d %4d %12.2f", k == 0 ? "fr" : "cr", n, s,
                           1e6 * res.stream_s / rounds);
                } else {
                    printf("%-4s %6d %4d %12s", k == 0 ? "fr" : "cr", n, s,
                           "-");
                }
                printf(" %14.2f %12.2f %10.3f %6ld\n",
                       1e6 * res.predicate_s / rounds,
                       res.rounds ? 1e6 * res.vector_s / res.rounds : 0.0,
                       res.sets ? 1e6 * res.predicate_s / res.sets : 0.0,
                       res.wrong);
            }
        }
    }
    return 0;
}
