/*
 * code.c - building a gradient code: parameters, assignment and, for the
 * codes decoded by a solve, the encoding matrix.
 *
 * Idea: every code is an effective encoding matrix B (row i = what worker
 * i sends), kept as sparse rows: the partitions each worker holds and
 * their coefficients. UNCODED and FR are written as rows directly, for any
 * n up to GCX_CODE_MAX_WORKERS; CR and MATRIX, whose exact decoding solves
 * a least-squares system over B, are built dense (n <= 64) and their rows
 * read off B's nonzeros, so they share the solver. WEIGHTED decoding
 * replaces B by its 0/1 support.
 *
 * Cost: UNCODED and FR create O(n load) memory and time (load = s + 1, or
 * ceil(n / floor(n / (s + 1))) when s + 1 does not divide n); CR and MATRIX
 * O(n^2) memory and, for CR, O(n s^3) time (cr.c), with the solver
 * workspace and the cache sized once, so decoding never allocates. The
 * getters are O(1), gcx_code_assignment() O(load), gcx_code_matrix()
 * O(n^2) (it fills the caller's n x n array).
 */
#include "code_int.h"
#include "base/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *code_kind_name(gcx_code_kind_t kind)
{
    switch (kind) {
    case GCX_CODE_UNCODED: return "an uncoded";
    case GCX_CODE_FR:      return "an FR";
    case GCX_CODE_CR:      return "a CR";
    case GCX_CODE_MATRIX:  return "a MATRIX";
    }
    return "an unknown";
}

/* GCX_OK, or the status and, in *why, what is wrong with @p p. */
static gcx_status_t code_check_params(const gcx_code_params_t *p,
                                      const char **why)
{
    if (p->n > GCX_CODE_MAX_WORKERS) {
        *why = "more workers than GCX_CODE_MAX_WORKERS (65536), the largest "
               "communicator";
        return GCX_ERR_UNSUPPORTED;
    }
    if (p->n < 1 || p->s < 0 || p->s >= p->n) {
        *why = "n must be >= 1 and s in 0..n-1";
        return GCX_ERR_INVALID;
    }
    if ((p->kind == GCX_CODE_CR || p->kind == GCX_CODE_MATRIX) &&
        p->n > GCX_CODE_MAX_SOLVED_WORKERS) {
        *why = "CR and MATRIX codes are decoded by a dense least-squares "
               "solve: at most GCX_CODE_MAX_SOLVED_WORKERS (64) workers; "
               "use FR";
        return GCX_ERR_UNSUPPORTED;
    }
    if (p->cache_size < 0 ||
        !(p->max_amplification == 0.0 || p->max_amplification >= 1.0)) {
        *why = "cache_size must be >= 0 and max_amplification 0 or >= 1";
        return GCX_ERR_INVALID;
    }
    if (p->decoding != GCX_CODE_DECODE_EXACT &&
        p->decoding != GCX_CODE_DECODE_WEIGHTED) {
        *why = "unknown decoding";
        return GCX_ERR_INVALID;
    }
    switch (p->kind) {
    case GCX_CODE_UNCODED:
        *why = "an uncoded code has s = 0";
        return (p->s == 0) ? GCX_OK : GCX_ERR_INVALID;
    case GCX_CODE_FR:
        /* floor(n / (s + 1)) groups of s + 1 or more workers: any n */
        *why = "WEIGHTED decoding needs every partition held by exactly "
               "s + 1 workers: an FR code with (s + 1) | n (the groups of "
               "this one differ in size), or use EXACT";
        return (p->decoding == GCX_CODE_DECODE_EXACT ||
                p->n % (p->s + 1) == 0)
                   ? GCX_OK
                   : GCX_ERR_INVALID;
    case GCX_CODE_CR:
        return GCX_OK;
    case GCX_CODE_MATRIX:
        *why = "a MATRIX code needs its n x n matrix";
        if (p->matrix == NULL) {
            return GCX_ERR_INVALID;
        }
        for (int k = 0; k < p->n * p->n; k++) {
            if (!isfinite(p->matrix[k])) {
                *why = "the matrix has an entry that is not finite";
                return GCX_ERR_RANGE;
            }
        }
        return GCX_OK;
    }
    *why = "unknown code kind";
    return GCX_ERR_INVALID;
}

/*
 * UNCODED and FR: the groups. FR with (s + 1) | n is Tandon et al.'s: n / (s
 * + 1) groups of s + 1. Otherwise q = floor(n / (s + 1)) groups, the first
 * n mod q of them one worker larger: every group still has at least s + 1
 * workers (q (s + 1) <= n), so any s stragglers leave each group a worker,
 * and a worker holds at most ceil(n / q) partitions (n = 1024, s = 2: 341
 * groups, one of 4, load 4 instead of 3; s = 128: 7 groups, load 147
 * instead of 129). UNCODED: n groups of one.
 */
static void code_set_groups(gcx_code_t *code)
{
    int width = code->kind == GCX_CODE_FR ? code->s + 1 : 1;

    code->groups = code->n / width;
    code->group_size = code->n / code->groups;
    code->groups_big = code->n % code->groups;
    code->load = code->group_size + (code->groups_big > 0);
}

/* UNCODED and FR: the rows directly (coefficient 1; also WEIGHTED). */
static void code_fill_rows(gcx_code_t *code)
{
    for (int i = 0; i < code->n; i++) {
        int g = gcx_code_group_of(code, i);
        int base = gcx_code_group_start(code, g);
        int size = gcx_code_group_start(code, g + 1) - base;
        size_t row = (size_t)i * (size_t)code->load;

        for (int k = 0; k < code->load; k++) {
            code->parts[row + k] = k < size ? base + k : -1;
            code->coeffs[row + k] = k < size ? 1.0 : 0.0;
        }
        code->nparts[i] = size;
    }
}

/* CR and MATRIX: the exact encoding matrix into b (zeroed). */
static gcx_status_t code_fill_matrix(const gcx_code_params_t *p, double *b)
{
    if (p->kind == GCX_CODE_CR) {
        return gcx_code_cr_fill(p->n, p->s, b);
    }
    memcpy(b, p->matrix, sizeof(double) * (size_t)p->n * (size_t)p->n);
    return GCX_OK;
}

/* Dense codes: holders, load and the WEIGHTED 0/1 matrix from b. */
static gcx_status_t code_derive_assignment(gcx_code_t *code)
{
    int n = code->n;

    code->load = 0;
    for (int i = 0; i < n; i++) {
        int cnt = 0;
        for (int j = 0; j < n; j++) {
            if (code->b[i * n + j] != 0.0) {
                code->holders[j] |= UINT64_C(1) << i;
                cnt++;
            }
        }
        code->nparts[i] = cnt;
        if (cnt > code->load) {
            code->load = cnt;
        }
    }
    if (code->load == 0) {
        return GCX_ERR_INVALID; /* an all-zero matrix */
    }
    if (code->decoding == GCX_CODE_DECODE_WEIGHTED) {
        for (int j = 0; j < n; j++) {
            if (gcx_code_popcount(code->holders[j]) != code->s + 1) {
                return GCX_ERR_INVALID;
            }
        }
        for (int k = 0; k < n * n; k++) {
            code->b[k] = (code->b[k] != 0.0) ? 1.0 : 0.0;
        }
    }
    return GCX_OK;
}

/* Dense codes: the rows from b. */
static void code_fill_parts(gcx_code_t *code)
{
    int n = code->n;

    for (int i = 0; i < n; i++) {
        int cnt = 0;
        for (int j = 0; j < n; j++) {
            if (code->b[i * n + j] != 0.0) {
                code->parts[i * code->load + cnt] = j;
                code->coeffs[i * code->load + cnt] = code->b[i * n + j];
                cnt++;
            }
        }
        for (; cnt < code->load; cnt++) {
            code->parts[i * code->load + cnt] = -1;
        }
    }
}

/* Dense codes: matrix, assignment, solver and cache. */
static gcx_status_t code_create_dense(gcx_code_t *code,
                                      const gcx_code_params_t *params)
{
    size_t       n = (size_t)code->n;
    gcx_status_t status;

    code->all = (n == 64) ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
    code->b = calloc(n * n, sizeof(double));
    code->holders = calloc(n, sizeof(uint64_t));
    if (code->b == NULL || code->holders == NULL) {
        return GCX_ERR_NOMEM;
    }
    status = code_fill_matrix(params, code->b);
    if (status != GCX_OK) {
        return status;
    }
    status = code_derive_assignment(code);
    if (status != GCX_OK) {
        return status;
    }
    code->parts = calloc(n * (size_t)code->load, sizeof(int));
    code->coeffs = calloc(n * (size_t)code->load, sizeof(double));
    if (code->parts == NULL || code->coeffs == NULL) {
        return GCX_ERR_NOMEM;
    }
    code_fill_parts(code);
    status = gcx_code_solver_create(code->n, &code->solver);
    if (status != GCX_OK) {
        return status;
    }
    return gcx_code_cache_init(&code->cache, code->n,
                               params->cache_size ? params->cache_size
                                                  : GCX_CODE_DEFAULT_CACHE);
}

gcx_status_t gcx_code_create(const gcx_code_params_t *params,
                             gcx_code_t **code_p)
{
    gcx_code_t *code;
    gcx_status_t status;
    const char *why = "";
    size_t n;

    if (params == NULL || code_p == NULL) {
        return GCX_ERR_INVALID;
    }
    status = code_check_params(params, &why);
    if (status != GCX_OK) {
        gcx_error("gcx_code_create: %s code, n = %d, s = %d: %s",
                  code_kind_name(params->kind), params->n, params->s, why);
        return status;
    }
    n = (size_t)params->n;

    code = calloc(1, sizeof(*code));
    if (code == NULL) {
        return GCX_ERR_NOMEM;
    }
    code->kind = params->kind;
    code->decoding = params->decoding;
    code->n = params->n;
    code->s = params->s;
    code->dense = params->kind == GCX_CODE_CR ||
                  params->kind == GCX_CODE_MATRIX;
    code->max_amp = (params->max_amplification > 0.0)
                        ? params->max_amplification
                        : GCX_CODE_MAX_AMPLIFICATION;
    code->weight =
        (double)params->n / ((double)(params->n - params->s) * (params->s + 1));

    code->nparts = calloc(n, sizeof(int));
    code->scratch = calloc(n, sizeof(double));
    if (code->nparts == NULL || code->scratch == NULL) {
        gcx_code_destroy(code);
        return GCX_ERR_NOMEM;
    }
    if (code->dense) {
        status = code_create_dense(code, params);
        if (status != GCX_OK) {
            gcx_code_destroy(code);
            return status;
        }
    } else {
        code_set_groups(code);
        code->parts = calloc(n * (size_t)code->load, sizeof(int));
        code->coeffs = calloc(n * (size_t)code->load, sizeof(double));
        if (code->parts == NULL || code->coeffs == NULL) {
            gcx_code_destroy(code);
            return GCX_ERR_NOMEM;
        }
        code_fill_rows(code);
    }
    *code_p = code;
    return GCX_OK;
}

void gcx_code_destroy(gcx_code_t *code)
{
    if (code == NULL) {
        return;
    }
    gcx_code_cache_fini(&code->cache); /* zeroed for a sparse code */
    gcx_code_solver_destroy(code->solver);
    free(code->coeffs);
    free(code->parts);
    free(code->scratch);
    free(code->nparts);
    free(code->holders);
    free(code->b);
    free(code);
}

int gcx_code_workers(const gcx_code_t *code)
{
    return code->n;
}

int gcx_code_stragglers(const gcx_code_t *code)
{
    return code->s;
}

int gcx_code_load(const gcx_code_t *code)
{
    return code->load;
}

gcx_status_t gcx_code_matrix(const gcx_code_t *code, double *b)
{
    size_t n;

    if (code == NULL || b == NULL) {
        return GCX_ERR_INVALID;
    }
    n = (size_t)code->n;
    memset(b, 0, sizeof(double) * n * n);
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < code->nparts[i]; k++) {
            size_t at = i * (size_t)code->load + (size_t)k;
            b[i * n + (size_t)code->parts[at]] = code->coeffs[at];
        }
    }
    return GCX_OK;
}

gcx_status_t gcx_code_assignment(const gcx_code_t *code, int worker,
                                 int *partitions, double *coeffs, int *count_p)
{
    int cnt;

    if (code == NULL || partitions == NULL || coeffs == NULL ||
        count_p == NULL || worker < 0 || worker >= code->n) {
        return GCX_ERR_INVALID;
    }
    cnt = code->nparts[worker];
    for (int k = 0; k < cnt; k++) {
        size_t at = (size_t)worker * (size_t)code->load + (size_t)k;
        partitions[k] = code->parts[at];
        coeffs[k] = code->coeffs[at];
    }
    *count_p = cnt;
    return GCX_OK;
}
