/*
 * alltoallv.c - pairwise-exchange alltoallv.
 *
 * Idea: post every receive (straight into recvbuf) and every send (straight
 * from sendbuf) at once and let the transport schedule them; the rank's own
 * block is a memcpy. Counts cannot be checked before the exchange without
 * an extra alltoall, so they are checked by the exchange itself: a message
 * longer than expected is truncated by the transport (never overruns), a
 * shorter one is noticed, and a check task after the exchange turns any
 * rank's surprise into GCX_ERR_MISMATCH on every rank.
 * Cost: max over ranks of (sent, received) bytes·β + α·(P-1) overlapped.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_alltoallv_task {
    gcx_task_t    super;
    const char   *sendbuf;
    char         *recvbuf;
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    size_t        esize;
    int           wrong_size; /* read by the check that follows */
    int           pending;
    gcx_tl_req_t *reqs; /* [0, P): receives; [P, 2P): sends */
    char         *done; /* per request */
} gcx_alltoallv_task_t;

static void gcx_alltoallv_progress(gcx_task_t *task)
{
    gcx_alltoallv_task_t *a    = (gcx_alltoallv_task_t *)task;
    int                   size = task->comm->size, i;

    for (i = 0; i < 2 * size && a->pending > 0; ++i) {
        gcx_tl_req_t *req  = &a->reqs[i];
        int           peer = i % size;

        if (a->done[i] || req->status == GCX_INPROGRESS) {
            if (!a->done[i] && task->comm->tl->ops->peer_failed(
                                   task->comm->tl, peer)) {
                gcx_error("alltoallv #%u: rank %d is gone", task->seq, peer);
                task->status = GCX_ERR_PEER;
                return;
            }
            continue;
        }
        a->done[i] = 1;
        --a->pending;
        if (i < size && (req->status == GCX_ERR_MISMATCH ||
                         (req->status == GCX_OK &&
                          req->length != a->recvcounts[peer] * a->esize))) {
            gcx_error("alltoallv #%u: rank %d sent other than the %zu "
                      "elements expected", task->seq, peer,
                      a->recvcounts[peer]);
            a->wrong_size = 1;
        } else if (req->status != GCX_OK) {
            task->status = req->status;
            return;
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
    size_t                own;

    a->pending = 0;
    own = a->sendcounts[rank] < a->recvcounts[rank] ? a->sendcounts[rank] :
                                                      a->recvcounts[rank];
    if (own > 0) {
        memcpy(a->recvbuf + a->rdispls[rank] * a->esize,
               a->sendbuf + a->sdispls[rank] * a->esize, own * a->esize);
    }
    if (a->sendcounts[rank] != a->recvcounts[rank]) {
        gcx_error("alltoallv #%u: sendcounts[%d] = %zu but recvcounts[%d] = "
                  "%zu", task->seq, rank, a->sendcounts[rank], rank,
                  a->recvcounts[rank]);
        a->wrong_size = 1;
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

gcx_status_t gcx_alltoallv(gcx_comm_t *comm, const void *sendbuf,
                           const size_t *sendcounts, const size_t *sdispls,
                           void *recvbuf, const size_t *recvcounts,
                           const size_t *rdispls, gcx_dtype_t dtype,
                           gcx_request_t **req_p)
{
    gcx_coll_signature_t  signature = {0};
    gcx_alltoallv_task_t *a;
    gcx_schedule_t       *schedule;
    gcx_task_t           *check;

    if (comm == NULL || gcx_dtype_size(dtype) == 0 || sendbuf == NULL ||
        sendbuf == GCX_IN_PLACE || recvbuf == NULL || sendcounts == NULL ||
        sdispls == NULL || recvcounts == NULL || rdispls == NULL) {
        gcx_error("gcx_alltoallv: invalid arguments (in place is not "
                  "supported)");
        return GCX_ERR_INVALID;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&a->super, &gcx_alltoallv_ops, comm);
    a->reqs = calloc(2 * (size_t)comm->size, sizeof(*a->reqs));
    a->done = calloc(2 * (size_t)comm->size, 1);
    schedule = gcx_schedule_create(comm);
    signature.coll  = GCX_COLL_ALLTOALLV;
    signature.dtype = dtype;
    check = gcx_coll_check_create(comm, &signature, &a->wrong_size);
    if (a->reqs == NULL || a->done == NULL || schedule == NULL ||
        check == NULL) {
        free(schedule);
        free(check);
        gcx_alltoallv_finalize(&a->super);
        return GCX_ERR_NOMEM;
    }
    a->sendbuf    = sendbuf;
    a->recvbuf    = recvbuf;
    a->sendcounts = sendcounts;
    a->sdispls    = sdispls;
    a->recvcounts = recvcounts;
    a->rdispls    = rdispls;
    a->esize      = gcx_dtype_size(dtype);
    /* the exchange, then everyone learns whether anyone saw a wrong size */
    gcx_schedule_add(schedule, &a->super);
    gcx_schedule_add(schedule, check);
    schedule->super.name = "alltoallv";
    return gcx_task_submit(&schedule->super, req_p);
}
