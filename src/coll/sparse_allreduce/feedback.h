/*
 * feedback.h - the feedback table of auto (internal): measured/modelled
 * ratios per algorithm and per factor-of-2 bucket of modelled time, which
 * select.c multiplies into the cost model (feedback.c has the why).
 *
 * A plain data structure, no communicator: insert a ratio, look up the
 * median of the live records of an (algorithm, bucket), count them; a
 * (algorithm, bucket) expires GCX_SPARSE_FB_EXPIRE records of its bucket
 * after its first record. Every rank folds the same records (each rank's
 * last call, exchanged) into it, so every rank holds the same bits; the
 * hash checks that. Cost: O(1) per insert and lookup (a sort of at most
 * GCX_SPARSE_FB_WINDOW values), ~3 KB.
 */
#ifndef GCX_SPARSE_FEEDBACK_H
#define GCX_SPARSE_FEEDBACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of the algorithm table (select.c): the index a of the table here,
 * of gcx_sparse_choice_t and of the records. */
enum {
    GCX_SPARSE_A_ALLGATHER = 0,
    GCX_SPARSE_A_RD,
    GCX_SPARSE_A_SPLIT,
    GCX_SPARSE_A_BALANCED_SPLIT,
    GCX_SPARSE_NALGOS
};

#define GCX_SPARSE_FB_BUCKETS 16     /* factor-of-2 buckets of modelled time */
#define GCX_SPARSE_FB_BUCKET0 100e-6 /* bucket 0: up to 200 us */
#define GCX_SPARSE_FB_CLAMP   16.0   /* ratios kept within [1/16, 16] */
#define GCX_SPARSE_FB_EXPIRE  64     /* records of a bucket a ratio lives */
#define GCX_SPARSE_FB_EXPLORE 1.5    /* measure what models within 1.5x */
#define GCX_SPARSE_FB_WINDOW  5      /* records a ratio is the median of */
#define GCX_SPARSE_FB_SAMPLES 2      /* records a contender gets at least */

/*
 * One rank's record of its last auto call, as exchanged (int64 each):
 * algorithm index + 1 (0: none), bucket, modelled ns, measured ns, and the
 * hash of the sender's table.
 */
#define GCX_SPARSE_FB_LEN 5

/* The table; zero-initialized = empty. */
typedef struct gcx_sparse_fb {
    /* the last records of each algorithm and bucket: a ring of count[]
     * (at most GCX_SPARSE_FB_WINDOW) values, next[] the slot to write */
    double   ratio[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS]
                  [GCX_SPARSE_FB_WINDOW];
    uint8_t  count[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS]; /* 0: unknown */
    uint8_t  next[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS];
    uint32_t since[GCX_SPARSE_NALGOS][GCX_SPARSE_FB_BUCKETS]; /* calls[] then */
    uint32_t calls[GCX_SPARSE_FB_BUCKETS]; /* records folded per bucket */
} gcx_sparse_fb_t;

/** Bucket of a modelled time (s): 0 below 2·BUCKET0, then one per factor
 *  of 2, the last one open-ended. */
int gcx_sparse_fb_bucket(double model);

/** Live records of algorithm @p a in bucket @p b; 0: none yet, or they
 *  expired. */
int gcx_sparse_fb_count(const gcx_sparse_fb_t *fb, size_t a, int b);

/** The live ratio of @p a in @p b: the median of its last (at most
 *  GCX_SPARSE_FB_WINDOW) records, the lower middle of an even count;
 *  0: unknown or expired. */
double gcx_sparse_fb_ratio(const gcx_sparse_fb_t *fb, size_t a, int b);

/** Add a record of @p a in @p b (clamped to [1/CLAMP, CLAMP]); counts one
 *  record of the bucket; an expired or new (a, b) starts afresh. */
void gcx_sparse_fb_insert(gcx_sparse_fb_t *fb, size_t a, int b,
                          double ratio);

/** FNV-1a over the table's bits, non-negative. */
int64_t gcx_sparse_fb_hash(const gcx_sparse_fb_t *fb);

/**
 * Fold P ranks' records (rank r's at recs + r·stride) of their last call:
 * when every rank names the same algorithm and bucket, insert the slowest
 * rank's measured time over the largest modelled time. Returns 1 when a
 * record was inserted, 0 when there was nothing to learn, -1 when a rank's
 * table hash differs from rank 0's: then the table is emptied (every rank
 * sees the same hashes, so every rank empties it) and *differ_p (if not
 * NULL) is that rank.
 */
int gcx_sparse_fb_fold(gcx_sparse_fb_t *fb, const int64_t *recs, int P,
                       size_t stride, int *differ_p);

#ifdef __cplusplus
}
#endif

#endif
