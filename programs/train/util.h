/*
 * util.h - small helpers shared by gcx-train: error messages with the rank
 * in front, a monotonic clock, and a seeded random number generator.
 *
 * The generator is SplitMix64 (Steele, Lea, Flood 2014): 64 bits of state,
 * one add and three xor-shift-multiplies per draw. Every random choice of
 * gcx-train (weight init, epoch permutation) goes through it, so a run is a
 * function of --seed alone and every rank draws the same numbers.
 */
#ifndef GCX_TRAIN_UTIL_H
#define GCX_TRAIN_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Rank printed in front of messages (-1 until the communicator exists). */
void train_set_log_rank(int rank);

/** Print "gcx-train[rank]: error: ..." on stderr. */
void train_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Print "gcx-train[rank]: ..." on stderr. */
void train_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Seconds from an arbitrary fixed point (CLOCK_MONOTONIC). */
double train_now(void);

/** Seeded generator; the struct is public so it can live on the stack. */
typedef struct train_rng {
    uint64_t state;
} train_rng_t;

/** Seed a generator; @p stream separates independent uses of one seed. */
void train_rng_seed(train_rng_t *rng, uint64_t seed, uint64_t stream);

/** Next 64 random bits. */
uint64_t train_rng_next(train_rng_t *rng);

/** Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t train_rng_below(train_rng_t *rng, uint64_t n);

/** Uniform double in [0, 1). */
double train_rng_uniform(train_rng_t *rng);

/** Standard normal draw (Box-Muller; one draw per call, simple over fast). */
double train_rng_normal(train_rng_t *rng);

/** Aligned allocation (64 bytes) of @p n floats, zeroed; NULL on failure. */
float *train_falloc(size_t n);

/** Free memory from train_falloc(); NULL is allowed. */
void train_ffree(float *p);

#ifdef __cplusplus
}
#endif

#endif
