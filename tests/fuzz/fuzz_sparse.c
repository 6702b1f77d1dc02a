/*
 * fuzz_sparse.c - libFuzzer target of what the sparse allreduce reads from
 * other ranks (src/coll/sparse_allreduce): the info records of a call
 * (nnz, capacity, index quantiles, union sketch, feedback record, model
 * record per rank) and the [indices | values] message split.
 *
 * Input: byte 0 picks P (1..8), bytes 1-4 the dense length N, the rest
 * fills the P records (zero-padded). What gcx_sparse_info_parse() accepts
 * goes on as in a call: the agreed inputs (in range), auto's model and
 * choice over a feedback table, the
 * balanced ranges (checked to be non-decreasing and within N), the union
 * sketch, the feedback fold; the message split runs on the raw input.
 * Cost per input: O(P^2) model work, no allocation beyond the records.
 */
#include "coll/sparse_allreduce/sparse_allreduce.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_P 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gcx_sparse_fb_t fb;
    int64_t                info[FUZZ_MAX_P * GCX_SPARSE_INFO_LEN(FUZZ_MAX_P)];
    size_t                 nnz[FUZZ_MAX_P], bounds[FUZZ_MAX_P + 1];
    size_t                 L, sum, max, N, bytes, n;
    uint32_t               n32 = 0, *idx;
    float                 *val;
    gcx_sparse_model_t     m;
    gcx_sparse_choice_t    choice;
    gcx_sparse_agreed_t    agreed;
    gcx_task_t             task;
    int                    P, q, differ;

    if (size < 5) {
        return 0;
    }
    P = 1 + data[0] % FUZZ_MAX_P;
    memcpy(&n32, data + 1, sizeof(n32));
    N     = n32;
    L     = GCX_SPARSE_INFO_LEN(P);
    bytes = size - 5 < sizeof(info) ? size - 5 : sizeof(info);
    memset(info, 0, sizeof(info));
    memcpy(info, data + 5, bytes);

    if (gcx_sparse_info_parse(info, P, L, N, nnz, &sum, &max) < 0) {
        gcx_sparse_info_agree(info, P, L, data[0] & 1, &agreed);
        if (!(agreed.union_ratio >= 0 && agreed.union_ratio <= 1) ||
            !(agreed.alpha >= 0 && agreed.beta >= 0 && agreed.gamma >= 0)) {
            abort(); /* parse accepted a record the model cannot use */
        }
        memset(&m, 0, sizeof(m));
        m.alpha        = 10e-6;
        m.beta         = 1e-9;
        m.gamma        = GCX_SPARSE_DEFAULT_GAMMA;
        m.P            = P;
        m.N            = N;
        m.nnz          = nnz;
        m.nnz_sum      = sum;
        m.nnz_max      = max;
        m.quant        = info + 2;
        m.quant_stride = L;
        m.union_est    = gcx_sparse_sketch_union(
            info + GCX_SPARSE_INFO_SKETCH(P), P, L);
        m.topk       = (size_t)(data[0] >> 4);
        m.dense_only = data[0] & 8;
        gcx_sparse_choose(&m, &fb, &choice);
        if (choice.best < 0 || choice.best >= GCX_SPARSE_NALGOS) {
            abort();
        }
        gcx_sparse_balanced_bounds(&m, bounds);
        for (q = 0; q < P; ++q) {
            if (bounds[q] > bounds[q + 1] || bounds[q + 1] > N) {
                abort(); /* the split engine relies on these */
            }
        }
        gcx_sparse_fb_fold(&fb, info + GCX_SPARSE_INFO_FB(P), P, L, &differ);
    }

    /* a received sparse message of any length */
    memset(&task, 0, sizeof(task));
    task.name = "fuzz";
    if (gcx_sparse_parse_msg(&task, 1, (void *)data, size, &idx, &val, &n) ==
        0) {
        if (8 * n != size) {
            abort();
        }
    }
    return 0;
}
