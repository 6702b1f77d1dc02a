/**
 * @file coding.h
 * @brief Gradient coding: codes, decoder and the pipelined schedule.
 *
 * Pure computation, no network. The coded gather collective and the
 * training loop build on it.
 *
 * @section gc_model Model
 * n workers, n data partitions, tolerance of s stragglers. An encoding
 * matrix B (n x n) says what every worker sends: worker i computes the
 * gradients g_j of the partitions j with B_ij != 0 (its "assignment") and
 * sends m_i = sum_j B_ij g_j. For a set F of arrived workers, a decoding
 * vector a with a_F^T B_F = 1^T gives sum_{i in F} a_i m_i = sum_j g_j.
 *
 * Codes (gcx_code_kind_t):
 * - UNCODED: s = 0, B = I.
 * - FR (fractional repetition): workers and partitions form
 *   q = floor(n/(s+1)) groups of consecutive indices; every worker of group
 *   k holds all partitions of group k with coefficient 1. Decoding: one
 *   reply per group, coefficient 1. With (s+1) | n the groups are Tandon
 *   et al.'s, n/(s+1) of s+1 each; otherwise the first n mod q groups have
 *   floor(n/q) + 1 workers and the others floor(n/q) (>= s+1), so any s
 *   stragglers still leave every group a worker, at a load of up to
 *   ceil(n/q) partitions (n = 1024, s = 2: 341 groups, load 4).
 * - CR (cyclic repetition, Tandon et al., ICML 2017): worker i holds
 *   partitions {i, ..., i+s} mod n; B_ii = 1 and
 *   B_{i,S\i} = -H_{:,S\i}^{-1} H_{:,i}, with H an s x n matrix whose rows
 *   are orthonormal and orthogonal to the all-ones vector. Any n-s rows
 *   span 1. H is not random as in the paper but chosen for conditioning
 *   (src/coding/cr.c): real Fourier rows when n + s is odd (B circulant, a
 *   real BCH code), the best of a few deterministic projections of them
 *   otherwise. Deterministic: every rank running the same build gets the
 *   same B bit for bit.
 * - MATRIX: a caller-supplied B.
 *
 * Decoding (gcx_code_decoding_t): EXACT uses B as above. WEIGHTED is the
 * approximate scheme of pipelined CR (Su & Li): coefficients 0/1 on the
 * assignment, the root adds the first n-s replies and scales them; the
 * result is an unbiased estimate of sum_j g_j only on average over which
 * workers straggle.
 *
 * Arrived sets are worker sets over n workers (gcx/wset.h: bit i is worker
 * i, GCX_WSET_WORDS(n) words). n goes up to GCX_CODE_MAX_WORKERS (65536)
 * for UNCODED and FR, whose state is O(n (s + 1)) and whose decoding is in
 * closed form; CR and MATRIX, decoded by a dense solve, up to
 * GCX_CODE_MAX_SOLVED_WORKERS (64). Larger n: GCX_ERR_UNSUPPORTED.
 *
 * @section gc_threads Threads and memory
 * Functions taking a const object are safe to call concurrently. Those that
 * decode (non-const) update a cache and scratch space inside the object:
 * one thread at a time per object. Every array argument is owned by the
 * caller; gcx never keeps a pointer to it after the call returns (the code
 * copies a caller matrix). Outputs are written only on GCX_OK.
 *
 * @section gc_pgc Pipelined gradient coding (gcx_pgc_t)
 * Each step a worker computes ONE partition gradient, at the current
 * weights, instead of s+1: at step t it computes slot l = t mod P
 * (P = s+1 = gcx_pgc_period(); the largest row load for MATRIX codes),
 * i.e. partition p_{i,l}, stores it in its slot buffer l, and sends
 * m_i(t) = sum_l b_{i,l} * buf_l, i.e. one fresh gradient and one of each
 * staleness 1..s. The root waits for a decodable set as usual. The
 * decoded vector is then a sum of partition gradients computed at
 * different steps; gcx_pgc_decode() reports exactly which: terms
 * (partition j, staleness d, weight w) with
 *     decoded = sum_{i in U} a_i m_i(t) = sum_terms w * g_j(weights of t-d).
 * - FR and UNCODED: every worker of a group computes the same partition at
 *   the same step (slot of partition j = j mod P), so each partition has
 *   one term, weight 1, staleness (t - j mod P) mod P, whoever arrived.
 * - CR, EXACT: the real-valued B. When P | n, the slot of partition j is
 *   j mod P at every worker holding it, so again each partition has one
 *   term of weight 1: the decoded vector is exactly the sum of the reported
 *   stale gradients. When P does not divide n this is impossible (the
 *   s workers whose support wraps around cannot agree with their
 *   neighbours on when to compute a partition); the few partitions they
 *   share get several terms whose weights still sum to 1 (an affine
 *   combination in time; the terms say exactly what was summed).
 * - CR, WEIGHTED (the authors' scheme): every weight is
 *   n/((n-s)(s+1)) times the number of arrived holders at that staleness.
 *   The authors scale the sum of the n-s replies by 1/((n-s)(s+1)), an
 *   estimate of the MEAN gradient (1/n) sum_j g_j; gcx always decodes to
 *   the SUM, so its scale is n/((n-s)(s+1)) (divide by n to get theirs).
 * Warm-up: at steps t < P-1, slots l > t were never computed. Their
 * coefficient is 0 (the slot buffer is not read) and the partitions they
 * hold are missing from the terms (gcx_pgc_info_t::missing).
 *
 * Worked example (n = 3, s = 1, CR, WEIGHTED; P = 2). Slots (partitions
 * taken in increasing order): worker 0: (p0, p1), worker 1: (p2, p1),
 * worker 2: (p0, p2) -- p2 cannot take slot 0 there, p0 already has it.
 * At step t = 4 (slot 0 is fresh) the workers send
 *     m_0 = g0(4) + g1(3),  m_1 = g2(4) + g1(3),  m_2 = g0(4) + g2(3).
 * Workers 0 and 2 arrive (U = 0b101): a = (3/4, 0, 3/4) and the terms
 * (partition, staleness, weight) are
 *     (p0, 0, 3/2), (p1, 1, 3/4), (p2, 1, 3/4),
 * weight sum 3 = n: p0 is over-represented, p1 and p2 under; averaged over
 * the three straggler choices every partition has weight 1. With EXACT CR
 * on the same slots, when workers 1 and 2 both arrive p2 appears at
 * staleness 0 (from worker 1) and 1 (from worker 2), weights summing to 1.
 *
 * With FR (n = 4, s = 1): workers 0 and 1 hold (p0, p1), workers 2 and 3
 * hold (p2, p3); at t = 5 every worker of group 0 sends g0(4) + g1(5) and
 * of group 1 g2(4) + g3(5); any one reply per group gives the staleness
 * (1, 0, 1, 0) for (p0, p1, p2, p3).
 *
 * Contract: the schedule (coefficients, staleness, terms) assumes that at
 * step t slot l holds the gradient computed at exactly step
 * t - staleness(l). A worker that skips computing at a step (gcx_coded_ready()
 * says its round is already decoded: its work would be dropped) leaves
 * that slot holding an older gradient -- with moving weights, a gradient
 * of the wrong step -- until it recomputes the slot P steps later. Its
 * messages of the rounds that read the slot in between must not be folded
 * in: the decoded vector would silently contain a wrong-step term and the
 * staleness reported by gcx_pgc_decode() would be false. The worker records
 * in slot_steps[l] the step at which it last computed slot l (-1: never),
 * asks gcx_pgc_message_valid(), and for an invalid message calls
 * gcx_coded_abstain() instead of gcx_coded_gather(): it takes part in the
 * round and receives the decoded sum, but contributes nothing. In this
 * loop abstention alone never makes a round undecodable: every worker
 * used in round t-1 sends a valid message in round t unless round t is
 * already decoded. (When it does, with dead workers, the round fails at
 * once with GCX_ERR_UNDECODABLE.)
 *
 * A training loop (worker i), per step t (slot_steps[] = -1 at the start):
 * @code
 *   gcx_coded_ready(coded, &ready);
 *   if (ready) {                                // decoded without us:
 *       gcx_coded_abstain(coded, sum, &res, NULL);  // compute nothing
 *       continue;
 *   }
 *   gcx_pgc_compute(pgc, i, t, &l, &j);        // compute g_j into buf[l]
 *   slot_steps[l] = t;
 *   gcx_pgc_message_valid(pgc, i, t, slot_steps, &valid);
 *   if (!valid) {                               // a slot read is stale
 *       gcx_coded_abstain(coded, sum, &res, NULL);
 *       continue;
 *   }
 *   gcx_pgc_coeffs(pgc, i, t, c);               // P coefficients
 *   gcx_code_encode(P, c, bufs, len, msg);      // msg = sum c_l buf_l
 *   gcx_coded_gather(coded, msg, sum, &res, NULL);  // res.used = U
 *   root: gcx_pgc_decode(pgc, t, res.used, a, terms, &info);
 *         // sum = sum_i a_i msg_i = sum_terms w * g_j(weights of t-d)
 * @endcode
 */
#ifndef GCX_CODING_H
#define GCX_CODING_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/status.h>
#include <gcx/wset.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Largest number of workers of a code: the transport's largest
 * communicator. Worker sets are sized by n (gcx/wset.h); UNCODED and FR
 * (also WEIGHTED) keep O(n (s + 1)) state and decode in closed form, so
 * they go this far.
 */
#define GCX_CODE_MAX_WORKERS 65536

/**
 * Largest number of workers of the codes decoded by a dense least-squares
 * solve (exact CR and MATRIX): they hold the n x n matrix and solve an
 * n x |F| system per new arrived set (0.56 s at n = 1024), so they stop
 * here; use FR past it (docs/cr-decoding-at-scale.md).
 */
#define GCX_CODE_MAX_SOLVED_WORKERS 64

/**
 * Default largest noise amplification accepted when decoding:
 * max_j sum_{i in F} |a_i B_ij| (1 for FR). The rounding error of float
 * messages grows by at most this factor in the decoded sum (1e5: about
 * 1e-2 of the gradients' magnitude in the worst case, far less typically);
 * a set needing more is ill-conditioned and reported as
 * GCX_ERR_UNDECODABLE. Worst case over all straggler sets of gcx's CR
 * (measured, n <= 64): below 1e3 for s <= 3 and n + s odd, below 2e4 for
 * s = 3 and n odd; for s >= 4 and n >= 40 some sets exceed 1e5
 * (src/coding/README.md): use FR there, or raise the limit.
 */
#define GCX_CODE_MAX_AMPLIFICATION 1e5

/** Default number of arrived sets whose decoding vector is cached. */
#define GCX_CODE_DEFAULT_CACHE 1024

/** Which code. */
typedef enum gcx_code_kind {
    GCX_CODE_UNCODED = 0, /**< s = 0, B = I. */
    GCX_CODE_FR = 1,      /**< Fractional repetition, any n > s. */
    GCX_CODE_CR = 2,      /**< Cyclic repetition (Tandon et al.). */
    GCX_CODE_MATRIX = 3,  /**< Caller-supplied encoding matrix. */
} gcx_code_kind_t;

/** How the root decodes. */
typedef enum gcx_code_decoding {
    /** a_F^T B_F = 1^T: the exact sum of the partition gradients. */
    GCX_CODE_DECODE_EXACT = 0,
    /**
     * 0/1 encoding coefficients on the assignment; the first n-s replies are
     * added with weight n/((n-s)(s+1)). Needs every partition held by
     * exactly s+1 workers (CR, and FR with (s+1) | n).
     */
    GCX_CODE_DECODE_WEIGHTED = 1,
} gcx_code_decoding_t;

/** Parameters of gcx_code_create(). Zero-initialise, then set. */
typedef struct gcx_code_params {
    gcx_code_kind_t kind;         /**< Which code. */
    gcx_code_decoding_t decoding; /**< EXACT (default) or WEIGHTED. */
    int n; /**< Workers = partitions, 1..GCX_CODE_MAX_WORKERS (CR and
                MATRIX: ..GCX_CODE_MAX_SOLVED_WORKERS). */
    int s;                        /**< Stragglers tolerated, 0..n-1. */
    /**
     * MATRIX only: B, n*n doubles, row-major, row i = coefficients worker i
     * applies to the partition gradients. Copied; the caller keeps it.
     */
    const double *matrix;
    /** Cached arrived sets, 1..2^24; 0 means GCX_CODE_DEFAULT_CACHE. */
    int cache_size;
    /** Accepted amplification (>= 1); 0 means GCX_CODE_MAX_AMPLIFICATION. */
    double max_amplification;
} gcx_code_params_t;

/** Opaque code: encoding matrix, assignment and decoder with its cache. */
typedef struct gcx_code gcx_code_t;

/**
 * Build a code. Every rank builds the same code from the same parameters
 * (the CR matrix is deterministic).
 *
 * @param[in]  params  Parameters; params->matrix is copied.
 * @param[out] code_p  New code, owned by the caller (gcx_code_destroy()).
 * @return GCX_OK; GCX_ERR_INVALID (NULL, n < 1, s out of 0..n-1, UNCODED
 *         with s != 0, MATRIX without a matrix, WEIGHTED on an FR code
 *         without (s+1) | n or on a matrix whose columns do not all have
 *         s+1 nonzeros);
 *         GCX_ERR_RANGE (a matrix entry is NaN or infinite);
 *         GCX_ERR_UNSUPPORTED (n > GCX_CODE_MAX_WORKERS, or CR or MATRIX
 *         with n > GCX_CODE_MAX_SOLVED_WORKERS); GCX_ERR_NOMEM;
 *         GCX_ERR_UNDECODABLE if no usable CR matrix was found (never seen
 *         for n <= 64). Nothing is allocated on failure. A parameter check
 *         that fails logs an error naming what is wrong (e.g. "CR decodes
 *         by a least-squares solve: at most GCX_CODE_MAX_SOLVED_WORKERS
 *         (64) workers; use FR").
 */
GCX_API
gcx_status_t gcx_code_create(const gcx_code_params_t *params,
                             gcx_code_t **code_p);

/** Release a code and its cache. NULL is allowed. */
GCX_API
void gcx_code_destroy(gcx_code_t *code);

/** Number of workers (= partitions) n. */
GCX_API
int gcx_code_workers(const gcx_code_t *code);

/** Stragglers tolerated s. */
GCX_API
int gcx_code_stragglers(const gcx_code_t *code);

/**
 * Largest number of partitions a worker holds: 1 for UNCODED, s+1 for CR
 * and for FR with (s+1) | n (else ceil(n/floor(n/(s+1)))), the most
 * nonzeros in a row for MATRIX. Size of the arrays of
 * gcx_code_assignment().
 */
GCX_API
int gcx_code_load(const gcx_code_t *code);

/**
 * The encoding matrix actually used (0/1 on the assignment for WEIGHTED).
 *
 * @param[out] b  Caller array of n*n doubles, row-major.
 */
GCX_API
gcx_status_t gcx_code_matrix(const gcx_code_t *code, double *b);

/**
 * What worker @p worker computes and sends: m = sum_k coeffs[k] *
 * g_{partitions[k]}, partitions in increasing order.
 *
 * @param[out] partitions  Caller array of gcx_code_load() ints.
 * @param[out] coeffs      Caller array of gcx_code_load() doubles.
 * @param[out] count_p     Number of entries written.
 * @return GCX_OK; GCX_ERR_INVALID for a bad worker or NULL pointer.
 */
GCX_API
gcx_status_t gcx_code_assignment(const gcx_code_t *code, int worker,
                                 int *partitions, double *coeffs, int *count_p);

/**
 * Whether the arrived set can be decoded. This is the predicate of the coded
 * gather: call it after each arrival. For EXACT it is the true algebraic
 * test, not |arrived| >= n-s: FR decodes as soon as every group has
 * replied, which may be fewer than n-s workers, and so may some sets of
 * gcx's structured CR (e.g. n even, s = 1); for WEIGHTED it is
 * |arrived| >= n-s.
 * Costs one least-squares solve (O(n |F|^2)) per new set for CR and MATRIX,
 * a cache lookup afterwards, O(n) for the others.
 *
 * @param[in]  arrived      Worker set over n workers (gcx/wset.h).
 * @param[out] decodable_p  1 or 0.
 * @return GCX_OK; GCX_ERR_INVALID for bits >= n or NULL pointers.
 */
GCX_API
gcx_status_t gcx_code_decodable(gcx_code_t *code, const uint64_t *arrived,
                                int *decodable_p);

/**
 * Decoding vector for an arrived set: sum_i a[i] m_i = sum_j g_j (EXACT),
 * or the WEIGHTED estimate. a[i] = 0 for workers that are not used.
 * - UNCODED: a = 1, every worker needed.
 * - FR: 1 for the lowest-numbered arrived worker of each group.
 * - WEIGHTED: n/((n-s)(s+1)) for the n-s lowest-numbered arrived workers.
 * - CR, MATRIX: the least-squares solution of B_F^T a_F = 1 of minimum
 *   norm (LAPACK dgelsd, double), accepted when the residual
 *   max |B_F^T a_F - 1| <= 1e-8 and the amplification is at most
 *   params.max_amplification. Cached per arrived set (also failures),
 *   up to params.cache_size sets; when full, the cache is emptied. A cached
 *   vector is returned bit for bit.
 *
 * @param[in]  arrived  Worker set over n workers (gcx/wset.h).
 * @param[out] a  Caller array of n doubles.
 * @return GCX_OK; GCX_ERR_UNDECODABLE when the set cannot be decoded
 *         (too few workers, a partition nobody arrived holds, or an
 *         ill-conditioned or inconsistent system); GCX_ERR_INVALID.
 */
GCX_API
gcx_status_t gcx_code_decode_vector(gcx_code_t *code, const uint64_t *arrived,
                                    double *a);

/**
 * Streaming decode: can the root fold the message of @p worker into the
 * result as soon as it arrives? Given the set that arrived before it:
 * - UNCODED: yes, 1.
 * - FR: yes, 1 if it is the first of its group, else 0 (drop it).
 * - WEIGHTED: yes, n/((n-s)(s+1)) for the first n-s arrivals, else 0.
 * - CR, MATRIX (EXACT): no (*known_p = 0, *coeff_p = 0): keep the message
 *   until gcx_code_decodable() holds, then use gcx_code_decode_vector().
 * The senders folded in with a nonzero coefficient form the used set U;
 * gcx_code_decode_vector(U) returns exactly the coefficients applied, so a
 * collective should report U to its caller (e.g. for gcx_pgc_decode()).
 *
 * @param[in]  before   Workers that arrived before (must not hold worker),
 *                      a worker set over n workers (gcx/wset.h).
 * @param[out] known_p  1 when the coefficient is final now.
 * @param[out] coeff_p  The coefficient (0 when not known).
 */
GCX_API
gcx_status_t gcx_code_arrival_coeff(const gcx_code_t *code,
                                    const uint64_t *before, int worker,
                                    int *known_p, double *coeff_p);

/**
 * Incremental decodability of the streaming codes: for UNCODED, FR and
 * WEIGHTED decoding, a round is decodable exactly when this many senders
 * have been folded in with a nonzero coefficient by
 * gcx_code_arrival_coeff() (UNCODED: n; FR: floor(n / (s + 1)), one per group;
 * WEIGHTED: n - s). A collective that counts its nonzero coefficients
 * thus tests decodability in O(1) per arrival, O(n) per round, instead of
 * calling gcx_code_decodable() (O(n) per call) after each.
 *
 * @param[out] need_p  The count.
 * @return GCX_OK; GCX_ERR_UNSUPPORTED for exact CR and MATRIX (no
 *         streaming coefficient: use gcx_code_decodable()); GCX_ERR_INVALID.
 */
GCX_API
gcx_status_t gcx_code_stream_need(const gcx_code_t *code, int *need_p);

/**
 * out = sum_k coeffs[k] * vecs[k] (float vectors of length len,
 * accumulated in float). Encodes a message from partition gradients, or
 * decodes messages with a decoding vector. Entries with coeffs[k] == 0 are
 * skipped and vecs[k] is not read (it may be NULL). With no nonzero
 * coefficient, out is zeroed. Works in cache-sized blocks, one streaming
 * pass over each input; the inner loops vectorise. out must not alias an
 * input.
 *
 * @return GCX_OK; GCX_ERR_INVALID (count < 0, NULL pointers with len > 0).
 */
GCX_API
gcx_status_t gcx_code_encode(int count, const double *coeffs,
                             const float *const *vecs, size_t len, float *out);

/**
 * acc += coeff * vec over len floats (the root's streaming fold).
 * coeff == 0 does nothing and does not read vec.
 */
GCX_API
gcx_status_t gcx_code_accumulate(double coeff, const float *vec, size_t len,
                                 float *acc);

/* ------------------------------------------------------------------------ */
/* Pipelined gradient coding                                                */
/* ------------------------------------------------------------------------ */

/** Opaque pipelined schedule over a code. */
typedef struct gcx_pgc gcx_pgc_t;

/** One term of a decoded vector: weight * g_partition(step - staleness). */
typedef struct gcx_pgc_term {
    int partition; /**< Partition j. */
    int staleness; /**< Computed this many steps ago (0 = this step). */
    double weight; /**< Its weight in the decoded vector. */
} gcx_pgc_term_t;

/** Summary of one decoded step. */
typedef struct gcx_pgc_info {
    int nterms;            /**< Terms written (sorted by partition, then
                                staleness); terms of |weight| <= 1e-12 are
                                dropped. */
    int exact;             /**< 1 when every partition has one term of
                                weight 1 (within 1e-9): the decoded vector
                                is the exact sum of stale gradients. */
    int missing;           /**< Partitions with no term (warm-up only). */
    int max_staleness;     /**< Largest staleness of a term. */
    double mean_staleness; /**< sum w*d / sum w over the terms. */
    double weight_sum;     /**< sum of the weights: n when every partition
                                counts once. */
    double scale;          /**< Factor included in every coefficient of a:
                                1, or n/((n-s)(s+1)) for WEIGHTED. */
} gcx_pgc_info_t;

/**
 * Build the pipelined schedule of a code: period P = gcx_code_load(), and
 * for every worker the slot of each of its partitions. Partition j goes to
 * slot j mod P where that slot is free at the worker, else to the lowest
 * free slot. For UNCODED, FR and CR with P | n this makes all holders of a
 * partition compute it at the same steps.
 *
 * @param[in]  code   The code; borrowed, it must outlive the schedule, and
 *                    gcx_pgc_decode() uses its decoder (not thread-safe).
 * @param[out] pgc_p  New schedule, owned by the caller (gcx_pgc_destroy()).
 * @return GCX_OK; GCX_ERR_INVALID; GCX_ERR_NOMEM.
 */
GCX_API
gcx_status_t gcx_pgc_create(gcx_code_t *code, gcx_pgc_t **pgc_p);

/** Release a schedule (not the code). NULL is allowed. */
GCX_API
void gcx_pgc_destroy(gcx_pgc_t *pgc);

/** Period P: slots per worker, and the largest staleness plus one. */
GCX_API
int gcx_pgc_period(const gcx_pgc_t *pgc);

/** Capacity needed for the terms of gcx_pgc_decode(): n*P. */
GCX_API
int gcx_pgc_max_terms(const gcx_pgc_t *pgc);

/**
 * Partition held in each slot of a worker (-1: the slot is idle, possible
 * only for MATRIX codes with rows of fewer than P nonzeros).
 *
 * @param[out] partitions  Caller array of P ints.
 */
GCX_API
gcx_status_t gcx_pgc_slots(const gcx_pgc_t *pgc, int worker, int *partitions);

/**
 * What worker computes at step t >= 0: slot t mod P, partition in it
 * (-1: nothing this step). Store the gradient in that slot's buffer.
 */
GCX_API
gcx_status_t gcx_pgc_compute(const gcx_pgc_t *pgc, int worker, int64_t step,
                             int *slot_p, int *partition_p);

/**
 * Coefficients a worker applies at step t to its P slot buffers (after
 * computing this step's slot): the code's coefficient of the slot's
 * partition, 0 for idle slots and for slots not computed yet (t < slot).
 *
 * @param[out] coeffs  Caller array of P doubles.
 */
GCX_API
gcx_status_t gcx_pgc_coeffs(const gcx_pgc_t *pgc, int worker, int64_t step,
                            double *coeffs);

/**
 * Staleness of each slot of a worker at step t: (t - slot) mod P, or -1 if
 * the slot was never computed (t < slot) or is idle.
 *
 * @param[out] staleness  Caller array of P ints.
 */
GCX_API
gcx_status_t gcx_pgc_staleness(const gcx_pgc_t *pgc, int worker, int64_t step,
                               int *staleness);

/**
 * Whether worker's message at step t would be what the schedule says: for
 * every slot l with a nonzero coefficient at t (gcx_pgc_coeffs()),
 * slot_steps[l] == t - staleness(l) (gcx_pgc_staleness()). Slots with a
 * zero coefficient (idle, or not computed yet during the warm-up) are not
 * read and not checked. Call it after computing this step's slot (and
 * recording it); an invalid message must not be sent: see the contract in
 * "Pipelined gradient coding" (gcx_coded_abstain()).
 *
 * @param slot_steps  P steps: slot_steps[l] is the step at which the caller
 *                    last computed slot l, -1 if never.
 * @param[out] valid_p  1 if the message is valid, else 0.
 * @return GCX_OK; GCX_ERR_INVALID (NULL pointer, bad worker, t < 0).
 */
GCX_API
gcx_status_t gcx_pgc_message_valid(const gcx_pgc_t *pgc, int worker,
                                   int64_t step, const int64_t *slot_steps,
                                   int *valid_p);

/**
 * Decode step t from the used set U (the arrived senders the collective
 * folded in; any decodable arrived set works, see gcx_code_decode_vector()),
 * a worker set over n workers (gcx/wset.h).
 *
 * @param[out] a       Caller array of n doubles: decoded = sum_i a[i] m_i(t).
 * @param[out] terms   Caller array of gcx_pgc_max_terms() terms, or NULL:
 *                     the exact composition of the decoded vector.
 * @param[out] info_p  Summary (required).
 * @return GCX_OK; GCX_ERR_UNDECODABLE; GCX_ERR_INVALID.
 */
GCX_API
gcx_status_t gcx_pgc_decode(gcx_pgc_t *pgc, int64_t step, const uint64_t *used,
                            double *a, gcx_pgc_term_t *terms,
                            gcx_pgc_info_t *info_p);

#ifdef __cplusplus
}
#endif

#endif /* GCX_CODING_H */
