/*
 * shared.c - what the star and the master-less coded allreduce share
 * besides slots (slot.c) and straggler injection (straggler.c): worker
 * numbering, and the creation check that every rank built the same object
 * (count, code matrix, options, window), and writing the public result
 * and counters into the caller's storage. Cost of the check: one hash of
 * the code's rows (O(n (s + 1))) and one small agreement collective, at creation
 * only; a result costs O(n) (its sets and arrival times).
 */
#include "coded_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

gcx_status_t gcx_coded_sets_init(gcx_coded_t *coded)
{
    coded->words         = GCX_WSET_WORDS(coded->n);
    coded->gone          = calloc(2 * coded->words, sizeof(uint64_t));
    coded->straggler_set = coded->gone + coded->words;
    return coded->gone != NULL ? GCX_OK : GCX_ERR_NOMEM;
}

void gcx_coded_sets_free(gcx_coded_t *coded)
{
    free(coded->gone); /* and straggler_set: one block */
    coded->gone          = NULL;
    coded->straggler_set = NULL;
}

gcx_status_t gcx_coded_result_alloc(gcx_coded_result_t *result, int n)
{
    size_t    words = GCX_WSET_WORDS(n);
    uint64_t *block;

    if (result == NULL || n < 1) {
        return GCX_ERR_INVALID;
    }
    /* one block: three sets, then n floats (8-byte aligned after them) */
    block = calloc(3 * words * sizeof(uint64_t) + (size_t)n * sizeof(float),
                   1);
    if (block == NULL) {
        return GCX_ERR_NOMEM;
    }
    memset(result, 0, sizeof(*result));
    result->arrived   = block;
    result->used      = block + words;
    result->abstained = block + 2 * words;
    result->arrival   = (float *)(block + 3 * words);
    return GCX_OK;
}

void gcx_coded_result_free(gcx_coded_result_t *result)
{
    if (result == NULL) {
        return;
    }
    free(result->arrived); /* the block: see gcx_coded_result_alloc() */
    memset(result, 0, sizeof(*result));
}

void gcx_coded_result_write(gcx_coded_result_t *result, int n,
                            const gcx_coded_result_sets_t *sets)
{
    int w;

    result->round      = sets->round;
    result->round_time = sets->round_time;
    result->skipped    = sets->skipped;
    result->lost       = sets->lost;
    if (result->arrived != NULL) {
        gcx_wset_copy(result->arrived, sets->arrived, n);
    }
    if (result->used != NULL) {
        gcx_wset_copy(result->used, sets->used, n);
    }
    if (result->abstained != NULL) {
        gcx_wset_copy(result->abstained, sets->abstained, n);
    }
    if (result->arrival != NULL) {
        for (w = 0; w < n; ++w) {
            result->arrival[w] = sets->arrival != NULL ? sets->arrival[w] : NAN;
        }
    }
}

void gcx_coded_stats_write(const gcx_coded_stats_t *counters,
                           const uint64_t *gone, int n,
                           gcx_coded_stats_t *stats_p)
{
    uint64_t *gone_out = stats_p->gone;

    *stats_p            = *counters;
    stats_p->gone       = gone_out;
    stats_p->gone_count = (uint64_t)gcx_wset_count(gone, n);
    if (gone_out != NULL) {
        gcx_wset_copy(gone_out, gone, n);
    }
}

int gcx_coded_worker(const gcx_coded_t *coded, int rank)
{
    if (!coded->root_not_worker) {
        return rank;
    }
    if (rank == coded->root) {
        return -1;
    }
    return rank > coded->root ? rank - 1 : rank;
}

/* Hash of the code's rows (partitions and coefficients of every worker):
 * O(n load), never the n x n matrix. */
static gcx_status_t gcx_coded_code_hash(const gcx_code_t *code,
                                        uint64_t *hash_p)
{
    int       load = gcx_code_load(code), n = gcx_code_workers(code), w, cnt;
    int      *parts  = malloc((size_t)load * sizeof(*parts));
    double   *coeffs = malloc((size_t)load * sizeof(*coeffs));
    uint64_t  hash   = 0;

    if (parts == NULL || coeffs == NULL) {
        free(parts);
        free(coeffs);
        return GCX_ERR_NOMEM;
    }
    for (w = 0; w < n; ++w) {
        gcx_code_assignment(code, w, parts, coeffs, &cnt);
        hash = gcx_coll_hash(hash, &cnt, sizeof(cnt));
        hash = gcx_coll_hash(hash, parts, (size_t)cnt * sizeof(*parts));
        hash = gcx_coll_hash(hash, coeffs, (size_t)cnt * sizeof(*coeffs));
    }
    free(parts);
    free(coeffs);
    *hash_p = hash;
    return GCX_OK;
}

gcx_status_t gcx_coded_agree(gcx_coded_t *coded, uint32_t coll_id)
{
    gcx_coll_signature_t signature = {0};
    gcx_task_t          *check;
    gcx_status_t         status;
    uint32_t             fields[6];
    uint64_t             code_hash;

    status = gcx_coded_code_hash(coded->code, &code_hash);
    if (status != GCX_OK) {
        return status;
    }
    fields[0] = (uint32_t)coded->n;
    fields[1] = (uint32_t)coded->s;
    fields[2] = coded->am_id;
    fields[3] = (uint32_t)coded->root_not_worker;
    fields[4] = (uint32_t)coded->lost_rounds;
    fields[5] = (uint32_t)coded->window;
    signature.coll  = coll_id;
    signature.count = coded->count;
    signature.dtype = GCX_DT_F32;
    signature.root  = coded->root;
    signature.extra = gcx_coll_hash(
        gcx_coll_hash(0, fields, sizeof(fields)), &code_hash,
        sizeof(code_hash));
    check = gcx_coll_check_create(coded->comm, &signature, NULL);
    if (check == NULL) {
        return GCX_ERR_NOMEM;
    }
    status = gcx_task_submit(check, NULL);
    if (status == GCX_ERR_MISMATCH) {
        gcx_error("coded object: the ranks disagree on the count, the code "
                  "(workers, stragglers, matrix), lost_rounds or the "
                  "master-less window (GCX_CODED_AHEAD, "
                  "GCX_CODED_AHEAD_BYTES); this rank: count %zu, n %d, s %d, "
                  "lost_rounds %d, window %d round(s)",
                  coded->count, coded->n, coded->s, coded->lost_rounds,
                  coded->window);
    }
    return status;
}
