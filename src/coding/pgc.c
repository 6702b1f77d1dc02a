/*
 * pgc.c - pipelined gradient coding (Su & Li): the per-step schedule of
 * every worker and the staleness bookkeeping of the decoded gradient.
 *
 * Idea: with period P = load (s+1 for the built-in codes), worker i keeps P
 * slot buffers, slot l holding the latest gradient of partition p_{i,l}. At
 * step t it recomputes only slot t mod P, at the current weights, and sends
 * sum_l b_{i,l} buf_l: per-step compute equals the uncoded baseline while
 * the code still tolerates s stragglers. The gradient in slot l at step t
 * was computed at step t - ((t - l) mod P): staleness (t - l) mod P.
 *
 * Slot choice: partition j goes to slot j mod P where that slot is still
 * free at the worker (partitions taken in increasing order), otherwise to
 * the lowest free slot. A "colouring" c(j) with all holders of j computing
 * it at the same steps exists iff every worker's partitions get distinct
 * colours; for FR (groups aligned at multiples of P) and CR with P | n,
 * c(j) = j mod P does it, so every partition carries one staleness and the
 * exact decoding is the exact sum of stale gradients. For CR with P not
 * dividing n no colouring exists (windows of P consecutive partitions that
 * wrap around force c(j + P) = c(j), i.e. period P dividing n); only the s
 * wrap-around workers deviate, and the decoded vector mixes staleness for
 * the partitions they hold. gcx_pgc_decode() reports the exact composition.
 *
 * Validity: the schedule assumes slot l holds the gradient computed at
 * exactly step t - staleness(l). A worker that skipped a step (its round
 * was already decoded) holds an older gradient there until it recomputes
 * the slot P steps later; gcx_pgc_message_valid() compares the steps the
 * caller records against the schedule, so such a message is never sent
 * (the worker abstains from the coded gather instead).
 *
 * Cost: create O(n P) memory and time; per-worker queries O(P); decode is
 * the code's decoding vector plus O(n P) to collect the terms, no
 * allocation.
 */
#include "code_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PGC_TERM_EPS  1e-12 /* terms with |weight| below are dropped */
#define PGC_EXACT_TOL 1e-9  /* |weight - 1| of an "exact" term */

struct gcx_pgc {
    gcx_code_t *code; /* borrowed */
    int n;
    int period;         /* P */
    int *slot_part;     /* [n*P] partition in slot l of worker i, or -1 */
    double *slot_coeff; /* [n*P] its encoding coefficient */
    double *a;          /* [n] decoding vector before it is published */
    double *wsum;       /* [n*P] weight of (partition, staleness) */
    uint8_t *touched;   /* [n*P] whether (partition, staleness) occurs */
    int *pending;       /* [P] create's scratch */
};

static void pgc_assign_slots(gcx_pgc_t *pgc)
{
    const gcx_code_t *code = pgc->code;
    int P = pgc->period, *pending = pgc->pending;

    for (int i = 0; i < pgc->n; i++) {
        int    *slots = pgc->slot_part + (size_t)i * P;
        double *coeff = pgc->slot_coeff + (size_t)i * P;
        int     npending = 0;

        for (int l = 0; l < P; l++) {
            slots[l] = -1;
            coeff[l] = 0.0;
        }
        /* pending[] holds indices k into worker i's row */
        for (int k = 0; k < code->nparts[i]; k++) {
            int j = code->parts[(size_t)i * code->load + k];
            if (slots[j % P] < 0) {
                slots[j % P] = j;
                coeff[j % P] = code->coeffs[(size_t)i * code->load + k];
            } else {
                pending[npending++] = k;
            }
        }
        for (int k = 0, l = 0; k < npending; k++) {
            while (slots[l] >= 0) {
                l++;
            }
            slots[l] = code->parts[(size_t)i * code->load + pending[k]];
            coeff[l] = code->coeffs[(size_t)i * code->load + pending[k]];
        }
    }
}

gcx_status_t gcx_pgc_create(gcx_code_t *code, gcx_pgc_t **pgc_p)
{
    gcx_pgc_t *pgc;
    size_t np;

    if (code == NULL || pgc_p == NULL) {
        return GCX_ERR_INVALID;
    }
    pgc = calloc(1, sizeof(*pgc));
    if (pgc == NULL) {
        return GCX_ERR_NOMEM;
    }
    pgc->code = code;
    pgc->n = code->n;
    pgc->period = code->load;
    np = (size_t)pgc->n * (size_t)pgc->period;
    pgc->slot_part = calloc(np, sizeof(int));
    pgc->slot_coeff = calloc(np, sizeof(double));
    pgc->a = calloc((size_t)pgc->n, sizeof(double));
    pgc->wsum = calloc(np, sizeof(double));
    pgc->touched = calloc(np, sizeof(uint8_t));
    pgc->pending = calloc((size_t)pgc->period, sizeof(int));
    if (pgc->slot_part == NULL || pgc->slot_coeff == NULL || pgc->a == NULL ||
        pgc->wsum == NULL || pgc->touched == NULL || pgc->pending == NULL) {
        gcx_pgc_destroy(pgc);
        return GCX_ERR_NOMEM;
    }
    pgc_assign_slots(pgc);
    *pgc_p = pgc;
    return GCX_OK;
}

void gcx_pgc_destroy(gcx_pgc_t *pgc)
{
    if (pgc == NULL) {
        return;
    }
    free(pgc->pending);
    free(pgc->touched);
    free(pgc->wsum);
    free(pgc->a);
    free(pgc->slot_coeff);
    free(pgc->slot_part);
    free(pgc);
}

int gcx_pgc_period(const gcx_pgc_t *pgc)
{
    return pgc->period;
}

int gcx_pgc_max_terms(const gcx_pgc_t *pgc)
{
    return pgc->n * pgc->period;
}

static int pgc_bad_worker(const gcx_pgc_t *pgc, int worker, int64_t step)
{
    return pgc == NULL || worker < 0 || worker >= pgc->n || step < 0;
}

/* Staleness of slot l at step t, or -1 if never computed. */
static int pgc_slot_staleness(const gcx_pgc_t *pgc, int64_t step, int l)
{
    if (step < l) {
        return -1;
    }
    return (int)((step - l) % pgc->period);
}

gcx_status_t gcx_pgc_slots(const gcx_pgc_t *pgc, int worker, int *partitions)
{
    if (pgc_bad_worker(pgc, worker, 0) || partitions == NULL) {
        return GCX_ERR_INVALID;
    }
    memcpy(partitions, pgc->slot_part + (size_t)worker * pgc->period,
           sizeof(int) * (size_t)pgc->period);
    return GCX_OK;
}

gcx_status_t gcx_pgc_compute(const gcx_pgc_t *pgc, int worker, int64_t step,
                             int *slot_p, int *partition_p)
{
    int l;

    if (pgc_bad_worker(pgc, worker, step) || slot_p == NULL ||
        partition_p == NULL) {
        return GCX_ERR_INVALID;
    }
    l = (int)(step % pgc->period);
    *slot_p = l;
    *partition_p = pgc->slot_part[(size_t)worker * pgc->period + l];
    return GCX_OK;
}

gcx_status_t gcx_pgc_coeffs(const gcx_pgc_t *pgc, int worker, int64_t step,
                            double *coeffs)
{
    if (pgc_bad_worker(pgc, worker, step) || coeffs == NULL) {
        return GCX_ERR_INVALID;
    }
    for (int l = 0; l < pgc->period; l++) {
        coeffs[l] = (step < l)
                        ? 0.0
                        : pgc->slot_coeff[(size_t)worker * pgc->period + l];
    }
    return GCX_OK;
}

gcx_status_t gcx_pgc_staleness(const gcx_pgc_t *pgc, int worker, int64_t step,
                               int *staleness)
{
    if (pgc_bad_worker(pgc, worker, step) || staleness == NULL) {
        return GCX_ERR_INVALID;
    }
    for (int l = 0; l < pgc->period; l++) {
        int idle = pgc->slot_part[(size_t)worker * pgc->period + l] < 0;
        staleness[l] = idle ? -1 : pgc_slot_staleness(pgc, step, l);
    }
    return GCX_OK;
}

gcx_status_t gcx_pgc_message_valid(const gcx_pgc_t *pgc, int worker,
                                   int64_t step, const int64_t *slot_steps,
                                   int *valid_p)
{
    int P;

    if (pgc_bad_worker(pgc, worker, step) || slot_steps == NULL ||
        valid_p == NULL) {
        return GCX_ERR_INVALID;
    }
    P = pgc->period;
    *valid_p = 1;
    for (int l = 0; l < P; l++) {
        /* the slots gcx_pgc_coeffs() gives a nonzero coefficient */
        if (step < l || pgc->slot_coeff[(size_t)worker * P + l] == 0.0) {
            continue;
        }
        if (slot_steps[l] != step - pgc_slot_staleness(pgc, step, l)) {
            *valid_p = 0;
        }
    }
    return GCX_OK;
}

/* Sum a_i * coefficient into (partition, staleness) cells. */
static void pgc_collect(gcx_pgc_t *pgc, int64_t step)
{
    int P = pgc->period;

    memset(pgc->wsum, 0, sizeof(double) * (size_t)pgc->n * (size_t)P);
    memset(pgc->touched, 0, (size_t)pgc->n * (size_t)P);
    for (int i = 0; i < pgc->n; i++) {
        if (pgc->a[i] == 0.0) {
            continue;
        }
        for (int l = 0; l < P; l++) {
            int j = pgc->slot_part[(size_t)i * P + l];
            double c = pgc->slot_coeff[(size_t)i * P + l];
            int d = pgc_slot_staleness(pgc, step, l);
            if (j < 0 || c == 0.0 || d < 0) {
                continue;
            }
            pgc->wsum[(size_t)j * P + d] += pgc->a[i] * c;
            pgc->touched[(size_t)j * P + d] = 1;
        }
    }
}

gcx_status_t gcx_pgc_decode(gcx_pgc_t *pgc, int64_t step, const uint64_t *used,
                            double *a, gcx_pgc_term_t *terms,
                            gcx_pgc_info_t *info_p)
{
    gcx_pgc_info_t info = {0};
    double wd = 0.0;
    int P;
    gcx_status_t status;

    if (pgc == NULL || step < 0 || a == NULL || info_p == NULL) {
        return GCX_ERR_INVALID;
    }
    P = pgc->period;
    status = gcx_code_decode_vector(pgc->code, used, pgc->a);
    if (status != GCX_OK) {
        return status;
    }
    pgc_collect(pgc, step);

    info.exact = 1;
    info.scale = (pgc->code->decoding == GCX_CODE_DECODE_WEIGHTED)
                     ? pgc->code->weight
                     : 1.0;
    for (int j = 0; j < pgc->n; j++) {
        int nj = 0;
        for (int d = 0; d < P; d++) {
            double w = pgc->wsum[(size_t)j * P + d];
            if (!pgc->touched[(size_t)j * P + d] || fabs(w) <= PGC_TERM_EPS) {
                continue;
            }
            if (terms != NULL) {
                terms[info.nterms].partition = j;
                terms[info.nterms].staleness = d;
                terms[info.nterms].weight = w;
            }
            info.nterms++;
            nj++;
            info.weight_sum += w;
            wd += w * d;
            if (d > info.max_staleness) {
                info.max_staleness = d;
            }
            if (fabs(w - 1.0) > PGC_EXACT_TOL) {
                info.exact = 0;
            }
        }
        if (nj == 0) {
            info.missing++;
        }
        if (nj != 1) {
            info.exact = 0;
        }
    }
    info.mean_staleness = (info.weight_sum != 0.0) ? wd / info.weight_sum : 0.0;

    memcpy(a, pgc->a, sizeof(double) * (size_t)pgc->n);
    *info_p = info;
    return GCX_OK;
}
