/*
 * check.c - do all ranks call the same collective with the same arguments?
 *
 * Each rank turns its arguments into 8 non-negative 32-bit items a[i] and
 * runs one recursive-doubling allreduce(MAX) over (a, -a, error flag): every
 * rank then knows max(a) and min(a) = -max(-a) of every item and decides
 * alike, so a mismatch fails on every rank with GCX_ERR_MISMATCH before any
 * user buffer is touched. Cost: log2(P) exchanges of 136 bytes (about one
 * small-message latency per doubling step); GCX_CHECK_ARGS=n skips it.
 */
#include "coll.h"

#include <stdlib.h>

#define GCX_CHECK_ITEMS 8
#define GCX_CHECK_LEN   (2 * GCX_CHECK_ITEMS + 1)

typedef struct gcx_check_task {
    gcx_task_t           super;
    gcx_rd_t             rd;
    gcx_coll_signature_t signature;
    const int           *local_error;
    int64_t              values[GCX_CHECK_LEN];
    int64_t              tmp[GCX_CHECK_LEN];
} gcx_check_task_t;

static const char *const gcx_check_item_names[GCX_CHECK_ITEMS] = {
    "collective", "count", "count", "type", "operation", "root",
    "per-rank counts or options", "per-rank counts or options"};

static void gcx_check_items(const gcx_coll_signature_t *s, int64_t *a)
{
    a[0] = s->coll;
    a[1] = (int64_t)(s->count >> 32);
    a[2] = (int64_t)(s->count & 0xffffffffu);
    a[3] = (uint32_t)s->dtype;
    a[4] = (uint32_t)s->op;
    a[5] = (uint32_t)s->root;
    a[6] = (int64_t)(s->extra >> 32);
    a[7] = (int64_t)(s->extra & 0xffffffffu);
}

static void gcx_check_post(gcx_task_t *task)
{
    gcx_check_task_t *check = (gcx_check_task_t *)task;
    int               i;

    gcx_check_items(&check->signature, check->values);
    for (i = 0; i < GCX_CHECK_ITEMS; ++i) {
        check->values[GCX_CHECK_ITEMS + i] = -check->values[i];
    }
    check->values[2 * GCX_CHECK_ITEMS] =
        (check->signature.local_error ||
         (check->local_error != NULL && *check->local_error)) ? 1 : 0;
    gcx_rd_start(&check->rd, task, check->values, check->tmp, GCX_CHECK_LEN,
                 GCX_DT_I64, GCX_OP_MAX);
    if (task->status == GCX_INPROGRESS) {
        task->ops->progress(task);
    }
}

static void gcx_check_progress(gcx_task_t *task)
{
    gcx_check_task_t *check = (gcx_check_task_t *)task;
    int               state = gcx_rd_progress(&check->rd);
    int               i;

    if (state <= 0) {
        return; /* in progress, or failed with task->status set */
    }
    for (i = 0; i < GCX_CHECK_ITEMS; ++i) {
        int64_t max = check->values[i];
        int64_t min = -check->values[GCX_CHECK_ITEMS + i];

        if (max != min) {
            gcx_error("collective #%u: ranks disagree on the %s (this rank: "
                      "collective %u count %llu type %d op %d root %d)",
                      task->seq, gcx_check_item_names[i],
                      check->signature.coll,
                      (unsigned long long)check->signature.count,
                      check->signature.dtype, check->signature.op,
                      check->signature.root);
            task->status = GCX_ERR_MISMATCH;
            return;
        }
    }
    if (check->values[2 * GCX_CHECK_ITEMS] != 0) {
        gcx_error("collective #%u: a rank found its arguments inconsistent "
                  "with the others' (see that rank's log)", task->seq);
        task->status = GCX_ERR_MISMATCH;
        return;
    }
    task->status = GCX_OK;
}

static void gcx_check_finalize(gcx_task_t *task)
{
    free(task);
}

static const gcx_task_ops_t gcx_check_ops = {
    .name     = "argument check",
    .post     = gcx_check_post,
    .progress = gcx_check_progress,
    .finalize = gcx_check_finalize,
};

gcx_task_t *gcx_coll_check_create(gcx_comm_t *comm,
                                  const gcx_coll_signature_t *signature,
                                  const int *local_error)
{
    gcx_check_task_t *check = calloc(1, sizeof(*check));

    if (check == NULL) {
        return NULL;
    }
    gcx_task_init(&check->super, &gcx_check_ops, comm);
    check->signature   = *signature;
    check->local_error = local_error;
    return &check->super;
}

gcx_status_t gcx_coll_submit_checked(gcx_comm_t *comm, gcx_task_t *task,
                                     const gcx_coll_signature_t *signature,
                                     gcx_request_t **req_p)
{
    gcx_schedule_t *schedule;
    gcx_task_t     *check;

    if (!comm->config.check_args || comm->size == 1) {
        if (signature->local_error) {
            task->ops->finalize(task); /* nobody can be told: fail here */
            return GCX_ERR_INVALID;
        }
        return gcx_task_submit(task, req_p);
    }
    schedule = gcx_schedule_create(comm);
    check    = gcx_coll_check_create(comm, signature, NULL);
    if (schedule == NULL || check == NULL) {
        free(schedule);
        free(check);
        task->ops->finalize(task);
        return GCX_ERR_NOMEM;
    }
    gcx_schedule_add(schedule, check);
    gcx_schedule_add(schedule, task);
    schedule->super.name = task->name; /* logs name the collective */
    return gcx_task_submit(&schedule->super, req_p);
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_check_config_rows[] = {
    {"CHECK_ARGS", GCX_CONFIG_BOOL, "y",
     "Verify before each collective that all ranks passed the same counts, "
     "types, operation and root (one small exchange); mismatches fail with "
     "GCX_ERR_MISMATCH on every rank",
     offsetof(struct gcx_config, check_args), 0, 0, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_COLL, "coll/check", gcx_check_config_rows)
