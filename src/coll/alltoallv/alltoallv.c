/*
 * alltoallv.c - pairwise-exchange alltoallv, counts agreed before any data.
 *
 * Idea: rank i's sendcounts[j] must equal rank j's recvcounts[i], a fact no
 * single rank can check. So first every rank sends each peer the count it
 * will send it (P-1 messages of 8 bytes, all posted at once) and compares
 * what arrives with its own recvcounts; the argument check that follows
 * (check.c) turns any rank's surprise into GCX_ERR_MISMATCH on every rank
 * before a byte of recvbuf is written. Then every receive (straight into
 * recvbuf) and every send (straight from sendbuf) is posted at once and the
 * transport schedules them; the rank's own block is a memcpy.
 * Cost: one 8-byte all-to-all (α, overlapped) + the check (log2 P small
 * exchanges) + max over ranks of (sent, received) bytes·β + α·(P-1)
 * overlapped. GCX_CHECK_ARGS=n skips the first two: a wrong size is then
 * only seen by the receiving rank (a longer message is truncated by the
 * transport, never overruns), which fails its communicator.
 */
#include "coll/coll.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the counts: each peer learns what this rank will send it ------------ */

typedef struct gcx_alltoallv_counts {
    gcx_task_t    super;
    const size_t *sendcounts, *recvcounts;
    int          *wrong_size; /* set here, read by the check that follows */
    int           pending;
    uint64_t     *out, *in;   /* [P]: counts sent to / announced by a peer */
    gcx_tl_req_t *reqs;       /* [0, P): receives; [P, 2P): sends */
    char         *done;
} gcx_alltoallv_counts_t;

static void gcx_alltoallv_counts_progress(gcx_task_t *task)
{
    gcx_alltoallv_counts_t *c    = (gcx_alltoallv_counts_t *)task;
    int                     size = task->comm->size, i;

    for (i = 0; i < 2 * size && c->pending > 0; ++i) {
        int peer = i % size, state;

        if (c->done[i]) {
            continue;
        }
        state = gcx_coll_req_state(task, &c->reqs[i], peer,
                                   i < size ? sizeof(uint64_t) : SIZE_MAX);
        if (state < 0) {
            return;
        }
        if (state == 0) {
            continue;
        }
        c->done[i] = 1;
        --c->pending;
        if (i < size && c->in[peer] != c->recvcounts[peer]) {
            gcx_error("alltoallv #%u: rank %d sends %llu elements to this "
                      "rank but recvcounts[%d] = %zu", task->seq, peer,
                      (unsigned long long)c->in[peer], peer,
                      c->recvcounts[peer]);
            *c->wrong_size = 1;
        }
    }
    if (c->pending == 0) {
        task->status = GCX_OK;
    }
}

static void gcx_alltoallv_counts_post(gcx_task_t *task)
{
    gcx_alltoallv_counts_t *c    = (gcx_alltoallv_counts_t *)task;
    int                     size = task->comm->size, rank = task->comm->rank;
    int                     k;

    c->pending = 0;
    c->done[rank] = c->done[size + rank] = 1;
    for (k = 1; k < size; ++k) {
        int from = gcx_coll_mod(rank - k, size);
        int to   = gcx_coll_mod(rank + k, size);

        c->out[to] = c->sendcounts[to];
        if (gcx_coll_recv(task, from, 0, &c->in[from], sizeof(uint64_t),
                          &c->reqs[from]) < 0 ||
            gcx_coll_send(task, to, 0, &c->out[to], sizeof(uint64_t),
                          &c->reqs[size + to]) < 0) {
            return;
        }
        c->pending += 2;
    }
    gcx_alltoallv_counts_progress(task);
}

static void gcx_alltoallv_counts_finalize(gcx_task_t *task)
{
    gcx_alltoallv_counts_t *c = (gcx_alltoallv_counts_t *)task;

    free(c->out);
    free(c->in);
    free(c->reqs);
    free(c->done);
    free(c);
}

static const gcx_task_ops_t gcx_alltoallv_counts_ops = {
    .name     = "alltoallv counts",
    .post     = gcx_alltoallv_counts_post,
    .progress = gcx_alltoallv_counts_progress,
    .finalize = gcx_alltoallv_counts_finalize,
};

/* ---- the data ------------------------------------------------------------ */

typedef struct gcx_alltoallv_task {
    gcx_task_t    super;
    const char   *sendbuf;
    char         *recvbuf;
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    size_t        esize;
    int           wrong_size; /* the counts task's finding, for the check */
    int           pending;
    gcx_tl_req_t *reqs; /* [0, P): receives; [P, 2P): sends */
    char         *done; /* per request */
} gcx_alltoallv_task_t;

static void gcx_alltoallv_progress(gcx_task_t *task)
{
    gcx_alltoallv_task_t *a    = (gcx_alltoallv_task_t *)task;
    int                   size = task->comm->size, i;

    for (i = 0; i < 2 * size && a->pending > 0; ++i) {
        int peer = i % size, state;

        if (a->done[i]) {
            continue;
        }
        /* a wrong size gets here only with GCX_CHECK_ARGS=n: it fails on
         * this rank (truncated, never overrun) with GCX_ERR_MISMATCH */
        state = gcx_coll_req_state(task, &a->reqs[i], peer,
                                   i < size ? a->recvcounts[peer] * a->esize :
                                              SIZE_MAX);
        if (state < 0) {
            return;
        }
        if (state > 0) {
            a->done[i] = 1;
            --a->pending;
        }
    }
    if (a->pending == 0) {
        task->status = GCX_OK;
    }
}

static void gcx_alltoallv_post(gcx_task_t *task)
{
    gcx_alltoallv_task_t *a    = (gcx_alltoallv_task_t *)task;
    int                   size = task->comm->size, rank = task->comm->rank;
    int                   k;

    a->pending = 0;
    if (a->recvcounts[rank] > 0) {
        memcpy(a->recvbuf + a->rdispls[rank] * a->esize,
               a->sendbuf + a->sdispls[rank] * a->esize,
               a->recvcounts[rank] * a->esize);
    }
    a->done[rank] = a->done[size + rank] = 1;
    /* start with the nearest peers, so that not everybody hits rank 0 */
    for (k = 1; k < size; ++k) {
        int from = gcx_coll_mod(rank - k, size);
        int to   = gcx_coll_mod(rank + k, size);

        if (gcx_coll_recv(task, from, 0,
                          a->recvbuf + a->rdispls[from] * a->esize,
                          a->recvcounts[from] * a->esize, &a->reqs[from]) < 0 ||
            gcx_coll_send(task, to, 0,
                          a->sendbuf + a->sdispls[to] * a->esize,
                          a->sendcounts[to] * a->esize,
                          &a->reqs[size + to]) < 0) {
            return;
        }
        a->pending += 2;
    }
    gcx_alltoallv_progress(task);
}

static void gcx_alltoallv_finalize(gcx_task_t *task)
{
    gcx_alltoallv_task_t *a = (gcx_alltoallv_task_t *)task;

    free(a->reqs);
    free(a->done);
    free(a);
}

static const gcx_task_ops_t gcx_alltoallv_ops = {
    .name     = "alltoallv",
    .post     = gcx_alltoallv_post,
    .progress = gcx_alltoallv_progress,
    .finalize = gcx_alltoallv_finalize,
};

static gcx_task_t *gcx_alltoallv_counts_create(gcx_alltoallv_task_t *a)
{
    gcx_comm_t             *comm = a->super.comm;
    size_t                  size = (size_t)comm->size;
    gcx_alltoallv_counts_t *c    = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    gcx_task_init(&c->super, &gcx_alltoallv_counts_ops, comm);
    c->sendcounts = a->sendcounts;
    c->recvcounts = a->recvcounts;
    c->wrong_size = &a->wrong_size;
    c->out        = calloc(size, sizeof(*c->out));
    c->in         = calloc(size, sizeof(*c->in));
    c->reqs       = calloc(2 * size, sizeof(*c->reqs));
    c->done       = calloc(2 * size, 1);
    if (c->out == NULL || c->in == NULL || c->reqs == NULL ||
        c->done == NULL) {
        gcx_alltoallv_counts_finalize(&c->super);
        return NULL;
    }
    return &c->super;
}

/* NULL is a valid buffer for a side whose counts are all 0 */
static int gcx_alltoallv_buffer_ok(const void *buf, const size_t *counts,
                                   int size)
{
    int i;

    if (buf != NULL) {
        return 1;
    }
    for (i = 0; i < size; ++i) {
        if (counts[i] != 0) {
            return 0;
        }
    }
    return 1;
}

gcx_status_t gcx_alltoallv(gcx_comm_t *comm, const void *sendbuf,
                           const size_t *sendcounts, const size_t *sdispls,
                           void *recvbuf, const size_t *recvcounts,
                           const size_t *rdispls, gcx_dtype_t dtype,
                           gcx_request_t **req_p)
{
    gcx_coll_signature_t  signature = {0};
    gcx_alltoallv_task_t *a;
    gcx_schedule_t       *schedule;
    gcx_task_t           *counts, *check;

    if (comm == NULL || gcx_dtype_size(dtype) == 0 ||
        sendbuf == GCX_IN_PLACE || sendcounts == NULL || sdispls == NULL ||
        recvcounts == NULL || rdispls == NULL) {
        gcx_error("gcx_alltoallv: invalid arguments (in place is not "
                  "supported)");
        return GCX_ERR_INVALID;
    }
    if (!gcx_alltoallv_buffer_ok(sendbuf, sendcounts, comm->size) ||
        !gcx_alltoallv_buffer_ok(recvbuf, recvcounts, comm->size)) {
        gcx_error("gcx_alltoallv: %s is NULL but its counts are not all 0",
                  sendbuf == NULL ? "sendbuf" : "recvbuf");
        return GCX_ERR_INVALID;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&a->super, &gcx_alltoallv_ops, comm);
    a->sendbuf    = sendbuf;
    a->recvbuf    = recvbuf;
    a->sendcounts = sendcounts;
    a->sdispls    = sdispls;
    a->recvcounts = recvcounts;
    a->rdispls    = rdispls;
    a->esize      = gcx_dtype_size(dtype);
    a->reqs = calloc(2 * (size_t)comm->size, sizeof(*a->reqs));
    a->done = calloc(2 * (size_t)comm->size, 1);
    if (a->reqs == NULL || a->done == NULL) {
        gcx_alltoallv_finalize(&a->super);
        return GCX_ERR_NOMEM;
    }
    if (sendcounts[comm->rank] != recvcounts[comm->rank]) {
        gcx_error("gcx_alltoallv: sendcounts[%d] = %zu but recvcounts[%d] = "
                  "%zu (this rank's own block)", comm->rank,
                  sendcounts[comm->rank], comm->rank, recvcounts[comm->rank]);
        a->wrong_size = 1;
    }
    signature.coll        = GCX_COLL_ALLTOALLV;
    signature.dtype       = dtype;
    signature.local_error = a->wrong_size;
    if (!comm->config.check_args || comm->size == 1) {
        return gcx_coll_submit_checked(comm, &a->super, &signature, req_p);
    }
    /* the counts, everyone learns whether anyone saw a wrong one, the data */
    schedule = gcx_schedule_create(comm);
    counts   = gcx_alltoallv_counts_create(a);
    check    = gcx_coll_check_create(comm, &signature, &a->wrong_size);
    if (schedule == NULL || counts == NULL || check == NULL) {
        free(schedule);
        if (counts != NULL) {
            counts->ops->finalize(counts);
        }
        free(check);
        gcx_alltoallv_finalize(&a->super);
        return GCX_ERR_NOMEM;
    }
    gcx_schedule_add(schedule, counts);
    gcx_schedule_add(schedule, check);
    gcx_schedule_add(schedule, &a->super);
    schedule->super.name = "alltoallv";
    return gcx_task_submit(&schedule->super, req_p);
}
