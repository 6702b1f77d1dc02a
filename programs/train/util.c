/*
 * util.c - error messages, clock, SplitMix64 generator, aligned buffers.
 *
 * Cost: nothing here is on a per-element hot path except train_rng_next()
 * (a few integer operations) used once per weight at init and once per
 * sample per epoch for the permutation.
 */
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int train_log_rank = -1;

void train_set_log_rank(int rank)
{
    train_log_rank = rank;
}

static void train_vlog(const char *kind, const char *fmt, va_list ap)
{
    char msg[1024];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (train_log_rank >= 0) {
        fprintf(stderr, "gcx-train[%d]: %s%s\n", train_log_rank, kind, msg);
    } else {
        fprintf(stderr, "gcx-train: %s%s\n", kind, msg);
    }
}

void train_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    train_vlog("error: ", fmt, ap);
    va_end(ap);
}

void train_info(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    train_vlog("", fmt, ap);
    va_end(ap);
}

double train_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void train_rng_seed(train_rng_t *rng, uint64_t seed, uint64_t stream)
{
    rng->state = seed ^ (stream * 0xd1342543de82ef95ULL);
    /* Warm up so that nearby seeds give unrelated first draws. */
    (void)train_rng_next(rng);
    (void)train_rng_next(rng);
}

uint64_t train_rng_next(train_rng_t *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t train_rng_below(train_rng_t *rng, uint64_t n)
{
    /* Reject the top partial range so every value is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;

    do {
        x = train_rng_next(rng);
    } while (x >= limit);
    return x % n;
}

double train_rng_uniform(train_rng_t *rng)
{
    return (double)(train_rng_next(rng) >> 11) * 0x1.0p-53;
}

double train_rng_normal(train_rng_t *rng)
{
    double u1 = 1.0 - train_rng_uniform(rng); /* (0, 1]: log is finite */
    double u2 = train_rng_uniform(rng);

    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

float *train_falloc(size_t n)
{
    size_t bytes;
    void *p;

    if (n > (SIZE_MAX - 64) / sizeof(float)) {
        return NULL;
    }
    bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, bytes) != 0) {
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

void train_ffree(float *p)
{
    free(p);
}
