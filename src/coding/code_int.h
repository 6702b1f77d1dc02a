/*
 * code_int.h - internals of the gradient codes (src/coding), shared by the
 * files of this folder and visible to the white-box unit tests.
 *
 * A code is its assignment as sparse rows (the partitions each worker holds
 * and its coefficients: O(n (s + 1))), the closed-form decoders of UNCODED,
 * FR and WEIGHTED over worker sets sized by n (gcx/wset.h), and, for the
 * codes decoded by a solve (exact CR and MATRIX, n <= 64), the dense
 * effective encoding matrix B (n x n doubles), the holders of each
 * partition as a 64-bit mask, a least-squares solver with preallocated
 * workspace and a cache of decoding vectors keyed by the arrived mask.
 * Everything is allocated in gcx_code_create(); decoding allocates nothing.
 */
#ifndef GCX_CODING_CODE_INT_H
#define GCX_CODING_CODE_INT_H

#include <stdint.h>
#include <gcx/coding.h>

/* Accepted residual max_j |sum_i a_i B_ij - 1| of a decoding vector. */
#define GCX_CODE_RESIDUAL_TOL 1e-8
/* Singular values below this times the largest count as zero (dgelsd). */
#define GCX_CODE_RCOND 1e-10

/* Least-squares solver for B_F^T a = 1 (solve.c). */
typedef struct gcx_code_solver gcx_code_solver_t;

/* Decoding-vector cache (cache.c): open addressing on the 64-bit key, a
 * fixed number of entries, emptied at once when full. */
typedef struct gcx_code_cache {
    int n;           /* Length of a vector. */
    int capacity;    /* Entries before the cache is emptied. */
    int count;       /* Entries in use. */
    uint32_t mask;   /* Slots - 1 (slots: a power of two >= 2 capacity). */
    uint64_t *keys;  /* [slots] arrived set, 0 = empty (never a key). */
    int32_t *entry;  /* [slots] index of the entry of a used slot. */
    int8_t *ok;      /* [capacity] 1 decodable, 0 undecodable. */
    double *vectors; /* [capacity * n] decoding vectors. */
} gcx_code_cache_t;

struct gcx_code {
    gcx_code_kind_t kind;
    gcx_code_decoding_t decoding;
    int n;             /* Workers = partitions. */
    int s;             /* Stragglers tolerated. */
    int load;          /* Most partitions held by a worker. */
    /* UNCODED and FR: the workers (= partitions) form `groups` consecutive
     * groups, the first `groups_big` of them group_size + 1 workers, the
     * others group_size (FR: groups = floor(n / (s + 1)), so every group
     * has at least s + 1 workers; equal groups of s + 1 when (s + 1) | n;
     * UNCODED: n groups of one). */
    int groups;
    int group_size;
    int groups_big;
    int dense;         /* 1: CR or MATRIX, n <= GCX_CODE_MAX_SOLVED_WORKERS:
                          b, holders, all, solver and cache below. */
    double weight;     /* WEIGHTED coefficient n/((n-s)(s+1)). */
    double max_amp;    /* Accepted amplification of a decoding vector. */
    int *parts;        /* [n*load] partitions of worker i, increasing, -1
                          past nparts[i]. */
    double *coeffs;    /* [n*load] B_ij of those partitions. */
    int *nparts;       /* [n] how many. */
    double *scratch;   /* [n] decoding vector before it is published. */
    /* dense codes only (NULL / 0 otherwise): */
    uint64_t all;      /* Mask of all n workers. */
    double *b;         /* [n*n] effective encoding matrix, row-major. */
    uint64_t *holders; /* [n] workers i with B_ij != 0, per partition j. */
    gcx_code_solver_t *solver;
    gcx_code_cache_t cache;
};

/* The group of worker (or partition) w of an UNCODED or FR code: O(1). */
static inline int gcx_code_group_of(const gcx_code_t *code, int w)
{
    int big = code->groups_big * (code->group_size + 1);

    return w < big ? w / (code->group_size + 1)
                   : code->groups_big + (w - big) / code->group_size;
}

/* The first worker of group g (g = groups: n), UNCODED or FR: O(1). */
static inline int gcx_code_group_start(const gcx_code_t *code, int g)
{
    return g <= code->groups_big
               ? g * (code->group_size + 1)
               : code->groups_big * (code->group_size + 1) +
                     (g - code->groups_big) * code->group_size;
}

/* cr.c: fill b (n*n, row-major) with the cyclic-repetition matrix. */
gcx_status_t gcx_code_cr_fill(int n, int s, double *b);

/* solve.c */
gcx_status_t gcx_code_solver_create(int n, gcx_code_solver_t **solver_p);
void gcx_code_solver_destroy(gcx_code_solver_t *solver);
/* Minimum-norm least squares of B_F^T a_F = 1, residual and amplification
 * (<= max_amp) checked; a[i] = 0 outside F, a is written even when the
 * result is rejected (GCX_ERR_UNDECODABLE). */
gcx_status_t gcx_code_solver_solve(gcx_code_solver_t *solver, const double *b,
                                   int n, uint64_t arrived, double max_amp,
                                   double *a);

/* cache.c */
gcx_status_t gcx_code_cache_init(gcx_code_cache_t *cache, int n, int capacity);
void gcx_code_cache_fini(gcx_code_cache_t *cache);
/* 1 when found: *vec_p (NULL if undecodable) and *ok_p are set. */
int gcx_code_cache_lookup(const gcx_code_cache_t *cache, uint64_t key,
                          const double **vec_p, int *ok_p);
/* Insert a vector (ok = 1) or a failure (ok = 0, vec unused). */
void gcx_code_cache_insert(gcx_code_cache_t *cache, uint64_t key,
                           const double *vec, int ok);

static inline int gcx_code_popcount(uint64_t x)
{
    return __builtin_popcountll(x);
}

#endif /* GCX_CODING_CODE_INT_H */
