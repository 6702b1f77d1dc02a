/*
 * shared.c - what the star and the master-less coded allreduce share
 * besides slots (slot.c) and straggler injection (straggler.c): worker
 * numbering, and the creation check that every rank built the same object
 * (count, code matrix, options, window). Cost of the check: one hash of the
 * n x n code matrix and one small agreement collective, at creation only.
 */
#include "coded_int.h"

#include <stdlib.h>

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

gcx_status_t gcx_coded_agree(gcx_coded_t *coded, uint32_t coll_id)
{
    gcx_coll_signature_t signature = {0};
    double              *b;
    gcx_task_t          *check;
    gcx_status_t         status;
    uint32_t             fields[6];

    b = malloc((size_t)coded->n * (size_t)coded->n * sizeof(*b));
    if (b == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_code_matrix(coded->code, b);
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
        gcx_coll_hash(0, fields, sizeof(fields)), b,
        (size_t)coded->n * (size_t)coded->n * sizeof(*b));
    free(b);
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
