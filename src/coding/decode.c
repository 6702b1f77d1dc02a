/*
 * decode.c - the decoder: "is this arrived set decodable?", its decoding
 * vector, and the streaming coefficient of a sender on arrival.
 *
 * Idea: closed forms where the code has one, least squares otherwise.
 * - UNCODED: everybody, coefficient 1.
 * - FR (exact): one worker per group, coefficient 1; the lowest-numbered
 *   arrived one for a set, the first to arrive when streaming.
 * - WEIGHTED: any n-s workers, coefficient n/((n-s)(s+1)).
 * - CR and MATRIX (exact): a quick coverage test (every partition has an
 *   arrived holder, a necessary condition: two AND per partition), then
 *   the cached least-squares solve of solve.c.
 *
 * Cost: O(n) for the closed forms and the coverage test; a cache lookup,
 * or one O(n |F|^2) solve for a set not seen before. Nothing allocates.
 */
#include "code_int.h"

#include <string.h>

/* The n-s lowest-numbered workers of a set of at least n-s. */
static uint64_t decode_first_needed(const gcx_code_t *code, uint64_t arrived)
{
    uint64_t used = 0;
    int need = code->n - code->s;

    while (need-- > 0) {
        uint64_t low = arrived & (~arrived + 1);
        used |= low;
        arrived &= ~low;
    }
    return used;
}

static uint64_t decode_fr_group(const gcx_code_t *code, int group)
{
    int g = code->s + 1;
    return ((g == 64) ? ~UINT64_C(0) : ((UINT64_C(1) << g) - 1)) << (group * g);
}

/* Decoding vector into code->scratch. */
static gcx_status_t decode_compute(gcx_code_t *code, uint64_t arrived)
{
    double *a = code->scratch;
    int n = code->n;
    const double *cached;
    gcx_status_t status;
    int ok;

    memset(a, 0, sizeof(double) * (size_t)n);

    if (code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        if (gcx_code_popcount(arrived) < n - code->s) {
            return GCX_ERR_UNDECODABLE;
        }
        uint64_t used = decode_first_needed(code, arrived);
        for (int i = 0; i < n; i++) {
            if (used & (UINT64_C(1) << i)) {
                a[i] = code->weight;
            }
        }
        return GCX_OK;
    }

    switch (code->kind) {
    case GCX_CODE_UNCODED:
        if (arrived != code->all) {
            return GCX_ERR_UNDECODABLE;
        }
        for (int i = 0; i < n; i++) {
            a[i] = 1.0;
        }
        return GCX_OK;
    case GCX_CODE_FR:
        for (int grp = 0; grp < n / (code->s + 1); grp++) {
            uint64_t in = arrived & decode_fr_group(code, grp);
            if (in == 0) {
                return GCX_ERR_UNDECODABLE;
            }
            a[__builtin_ctzll(in)] = 1.0;
        }
        return GCX_OK;
    case GCX_CODE_CR:
    case GCX_CODE_MATRIX:
        break;
    }

    for (int j = 0; j < n; j++) {
        if ((code->holders[j] & arrived) == 0) {
            return GCX_ERR_UNDECODABLE;
        }
    }
    if (gcx_code_cache_lookup(&code->cache, arrived, &cached, &ok)) {
        if (!ok) {
            return GCX_ERR_UNDECODABLE;
        }
        memcpy(a, cached, sizeof(double) * (size_t)n);
        return GCX_OK;
    }
    status = gcx_code_solver_solve(code->solver, code->b, n, arrived,
                                   code->max_amp, a);
    gcx_code_cache_insert(&code->cache, arrived, a, status == GCX_OK);
    return status;
}

gcx_status_t gcx_code_decodable(gcx_code_t *code, uint64_t arrived,
                                int *decodable_p)
{
    gcx_status_t status;

    if (code == NULL || decodable_p == NULL || (arrived & ~code->all)) {
        return GCX_ERR_INVALID;
    }
    status = decode_compute(code, arrived);
    if (status != GCX_OK && status != GCX_ERR_UNDECODABLE) {
        return status;
    }
    *decodable_p = (status == GCX_OK);
    return GCX_OK;
}

gcx_status_t gcx_code_decode_vector(gcx_code_t *code, uint64_t arrived,
                                    double *a)
{
    gcx_status_t status;

    if (code == NULL || a == NULL || (arrived & ~code->all)) {
        return GCX_ERR_INVALID;
    }
    status = decode_compute(code, arrived);
    if (status != GCX_OK) {
        return status;
    }
    memcpy(a, code->scratch, sizeof(double) * (size_t)code->n);
    return GCX_OK;
}

gcx_status_t gcx_code_arrival_coeff(const gcx_code_t *code, uint64_t before,
                                    int worker, int *known_p, double *coeff_p)
{
    uint64_t bit;
    int known = 0;
    double coeff = 0.0;

    if (code == NULL || known_p == NULL || coeff_p == NULL || worker < 0 ||
        worker >= code->n || (before & ~code->all)) {
        return GCX_ERR_INVALID;
    }
    bit = UINT64_C(1) << worker;
    if (before & bit) {
        return GCX_ERR_INVALID; /* a worker arrives once per round */
    }

    if (code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        known = 1;
        coeff = (gcx_code_popcount(before) < code->n - code->s) ? code->weight
                                                                : 0.0;
    } else if (code->kind == GCX_CODE_UNCODED) {
        known = 1;
        coeff = 1.0;
    } else if (code->kind == GCX_CODE_FR) {
        known = 1;
        coeff = (before & decode_fr_group(code, worker / (code->s + 1))) ? 0.0
                                                                         : 1.0;
    }
    *known_p = known;
    *coeff_p = coeff;
    return GCX_OK;
}
