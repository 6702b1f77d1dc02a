/*
 * decode.c - the decoder: "is this arrived set decodable?", its decoding
 * vector, and the streaming coefficient of a sender on arrival.
 *
 * Idea: closed forms where the code has one, least squares otherwise.
 * - UNCODED: everybody, coefficient 1.
 * - FR (exact): one worker per group (groups of s + 1 or more,
 *   gcx_code_group_of), coefficient 1; the lowest-numbered arrived one for
 *   a set, the first to arrive when streaming.
 * - WEIGHTED: any n-s workers, coefficient n/((n-s)(s+1)).
 * - CR and MATRIX (exact, n <= 64): a quick coverage test (every partition
 *   has an arrived holder, a necessary condition: two AND per partition),
 *   then the cached least-squares solve of solve.c.
 * Sets are worker sets sized by n (gcx/wset.h); the dense codes' sets fit
 * one word, which keys their cache.
 *
 * Cost: O(n / 64 + |set|) for the closed forms (a scan of the set's set
 * bits), O(s / 64 + 1) per streaming coefficient (FR: a range test of the
 * sender's group; WEIGHTED: a count, O(n / 64)); a collective counting its
 * nonzero coefficients against gcx_code_stream_need() tests decodability
 * in O(1) per arrival. CR and MATRIX: O(n) coverage, then a cache lookup
 * or one O(n |F|^2) solve for a set not seen before. Nothing allocates.
 */
#include "code_int.h"

#include <string.h>

/* The lowest member of set at or after worker @p from, or n when none. */
static int decode_next(const gcx_code_t *code, const uint64_t *set, int from)
{
    size_t   words = GCX_WSET_WORDS(code->n), k;
    uint64_t bits;

    if (from >= code->n) {
        return code->n;
    }
    k    = (size_t)from / 64;
    bits = set[k] & (~UINT64_C(0) << ((unsigned)from % 64));
    while (bits == 0) {
        if (++k == words) {
            return code->n;
        }
        bits = set[k];
    }
    return (int)(k * 64) + __builtin_ctzll(bits);
}

/* 1 when the set holds a worker in [lo, hi). */
static int decode_any_in(const gcx_code_t *code, const uint64_t *set, int lo,
                         int hi)
{
    return decode_next(code, set, lo) < hi;
}

/* A set given, with no bit at or past n. */
static int decode_set_valid(const gcx_code_t *code, const uint64_t *set)
{
    return set != NULL && gcx_wset_valid(set, code->n);
}

/*
 * The closed forms (UNCODED, FR, WEIGHTED): whether the set decodes and,
 * when @p a is not NULL, its decoding vector (a zeroed by the caller).
 */
static int decode_closed_form(const gcx_code_t *code, const uint64_t *set,
                              double *a)
{
    int n = code->n, w, need, group;

    if (code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        need = n - code->s;
        if (gcx_wset_count(set, n) < need) {
            return 0;
        }
        for (w = decode_next(code, set, 0); a != NULL && need > 0;
             w = decode_next(code, set, w + 1), --need) {
            a[w] = code->weight;
        }
        return 1;
    }
    if (code->kind == GCX_CODE_UNCODED) {
        if (gcx_wset_count(set, n) != n) {
            return 0;
        }
        for (w = 0; a != NULL && w < n; w++) {
            a[w] = 1.0;
        }
        return 1;
    }
    /* FR: the lowest arrived worker of each group, groups in order */
    need = code->groups;
    for (w = decode_next(code, set, 0); w < n; w = decode_next(code, set, w)) {
        group = gcx_code_group_of(code, w);
        --need;
        if (a != NULL) {
            a[w] = 1.0;
        }
        w = gcx_code_group_start(code, group + 1); /* skip the group's rest */
    }
    return need == 0;
}

/* Decoding vector into code->scratch. */
static gcx_status_t decode_compute(gcx_code_t *code, const uint64_t *arrived)
{
    double *a = code->scratch;
    int n = code->n;
    uint64_t mask;
    const double *cached;
    gcx_status_t status;
    int ok;

    memset(a, 0, sizeof(double) * (size_t)n);
    if (!code->dense || code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        return decode_closed_form(code, arrived, a) ? GCX_OK
                                                     : GCX_ERR_UNDECODABLE;
    }

    mask = arrived[0]; /* n <= 64 */
    for (int j = 0; j < n; j++) {
        if ((code->holders[j] & mask) == 0) {
            return GCX_ERR_UNDECODABLE;
        }
    }
    if (gcx_code_cache_lookup(&code->cache, mask, &cached, &ok)) {
        if (!ok) {
            return GCX_ERR_UNDECODABLE;
        }
        memcpy(a, cached, sizeof(double) * (size_t)n);
        return GCX_OK;
    }
    status = gcx_code_solver_solve(code->solver, code->b, n, mask,
                                   code->max_amp, a);
    gcx_code_cache_insert(&code->cache, mask, a, status == GCX_OK);
    return status;
}

gcx_status_t gcx_code_decodable(gcx_code_t *code, const uint64_t *arrived,
                                int *decodable_p)
{
    gcx_status_t status;

    if (code == NULL || decodable_p == NULL ||
        !decode_set_valid(code, arrived)) {
        return GCX_ERR_INVALID;
    }
    if (!code->dense || code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        /* no vector needed: no O(n) clearing of the scratch */
        *decodable_p = decode_closed_form(code, arrived, NULL);
        return GCX_OK;
    }
    status = decode_compute(code, arrived);
    if (status != GCX_OK && status != GCX_ERR_UNDECODABLE) {
        return status;
    }
    *decodable_p = (status == GCX_OK);
    return GCX_OK;
}

gcx_status_t gcx_code_decode_vector(gcx_code_t *code, const uint64_t *arrived,
                                    double *a)
{
    gcx_status_t status;

    if (code == NULL || a == NULL || !decode_set_valid(code, arrived)) {
        return GCX_ERR_INVALID;
    }
    status = decode_compute(code, arrived);
    if (status != GCX_OK) {
        return status;
    }
    memcpy(a, code->scratch, sizeof(double) * (size_t)code->n);
    return GCX_OK;
}

gcx_status_t gcx_code_arrival_coeff(const gcx_code_t *code,
                                    const uint64_t *before, int worker,
                                    int *known_p, double *coeff_p)
{
    int known = 0, g;
    double coeff = 0.0;

    if (code == NULL || known_p == NULL || coeff_p == NULL || worker < 0 ||
        worker >= code->n || !decode_set_valid(code, before)) {
        return GCX_ERR_INVALID;
    }
    if (gcx_wset_has(before, worker)) {
        return GCX_ERR_INVALID; /* a worker arrives once per round */
    }

    if (code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        known = 1;
        coeff = (gcx_wset_count(before, code->n) < code->n - code->s)
                    ? code->weight
                    : 0.0;
    } else if (code->kind == GCX_CODE_UNCODED) {
        known = 1;
        coeff = 1.0;
    } else if (code->kind == GCX_CODE_FR) {
        known = 1;
        g     = gcx_code_group_of(code, worker);
        coeff = decode_any_in(code, before, gcx_code_group_start(code, g),
                              gcx_code_group_start(code, g + 1))
                    ? 0.0
                    : 1.0;
    }
    *known_p = known;
    *coeff_p = coeff;
    return GCX_OK;
}

gcx_status_t gcx_code_stream_need(const gcx_code_t *code, int *need_p)
{
    if (code == NULL || need_p == NULL) {
        return GCX_ERR_INVALID;
    }
    if (code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        *need_p = code->n - code->s;
    } else if (code->kind == GCX_CODE_UNCODED) {
        *need_p = code->n;
    } else if (code->kind == GCX_CODE_FR) {
        *need_p = code->groups;
    } else {
        return GCX_ERR_UNSUPPORTED;
    }
    return GCX_OK;
}
