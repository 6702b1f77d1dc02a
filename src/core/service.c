/*
 * service.c - the core's allgather of fixed-size records (service.h).
 *
 * Bruck's allgather, for any P: in round k (d = 2^k) a rank sends the
 * min(d, P - d) records it holds to rank - d and receives as many from
 * rank + d, appending them; after ceil(log2 P) rounds it holds every record
 * in the order rank, rank+1, ..., which a final rotation puts in rank
 * order. Cost: ceil(log2 P) latencies and (P-1)*len bytes each way.
 * Records are a few hundred bytes (ids, colors, keys), so it is all latency.
 */
#include "service.h"
#include "comm.h"
#include "base/log.h"
#include "task.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_service_allgather {
    gcx_task_t   super;
    size_t       len;
    char        *tmp;   /* size * len: records in the order rank, rank+1.. */
    void        *out;
    int          round; /* d = 1 << round */
    int          held;  /* records in tmp */
    gcx_tl_req_t sreq, rreq;
    size_t       expect;
} gcx_service_allgather_t;

static void gcx_service_round_post(gcx_service_allgather_t *ag)
{
    gcx_comm_t  *comm = ag->super.comm;
    int          d    = 1 << ag->round;
    int          n    = d < comm->size - d ? d : comm->size - d;
    int          to   = (comm->rank - d + comm->size) % comm->size;
    int          from = (comm->rank + d) % comm->size;
    gcx_iov_t    siov = {ag->tmp, (size_t)n * ag->len};
    gcx_iov_t    riov = {ag->tmp + (size_t)ag->held * ag->len,
                         (size_t)n * ag->len};
    uint32_t     step = (uint32_t)ag->round;
    gcx_status_t status;

    ag->expect = riov.length;
    status = gcx_comm_recv(comm, from,
                           gcx_tl_tag(comm->id, ag->super.seq, step,
                                      (uint32_t)from),
                           &riov, 1, &ag->rreq);
    if (status == GCX_OK) {
        status = gcx_comm_send(comm, to,
                               gcx_tl_tag(comm->id, ag->super.seq, step,
                                          (uint32_t)comm->rank),
                               &siov, 1, &ag->sreq);
    }
    if (status != GCX_OK) {
        ag->super.status = status;
    }
}

static void gcx_service_finish(gcx_service_allgather_t *ag)
{
    gcx_comm_t *comm = ag->super.comm;
    int         i;

    for (i = 0; i < comm->size; ++i) {
        memcpy((char *)ag->out + (size_t)((comm->rank + i) % comm->size) *
                                     ag->len,
               ag->tmp + (size_t)i * ag->len, ag->len);
    }
    ag->super.status = GCX_OK;
}

static void gcx_service_progress(gcx_task_t *task)
{
    gcx_service_allgather_t *ag   = (gcx_service_allgather_t *)task;
    gcx_comm_t              *comm = task->comm;
    int                      d    = 1 << ag->round;

    if (ag->rreq.status == GCX_INPROGRESS ||
        ag->sreq.status == GCX_INPROGRESS) {
        return;
    }
    if (ag->rreq.status != GCX_OK || ag->sreq.status != GCX_OK) {
        task->status = ag->rreq.status != GCX_OK ? ag->rreq.status :
                                                   ag->sreq.status;
        return;
    }
    if (ag->rreq.length != ag->expect) {
        gcx_error("service exchange: %zu bytes from rank %d, expected %zu",
                  ag->rreq.length, (comm->rank + d) % comm->size,
                  ag->expect);
        task->status = GCX_ERR_MISMATCH;
        return;
    }
    ag->held += d < comm->size - d ? d : comm->size - d;
    ++ag->round;
    if (ag->held == comm->size) {
        gcx_service_finish(ag);
        return;
    }
    gcx_service_round_post(ag);
}

static void gcx_service_post(gcx_task_t *task)
{
    gcx_service_allgather_t *ag = (gcx_service_allgather_t *)task;

    if (ag->held == task->comm->size) {
        gcx_service_finish(ag);
        return;
    }
    gcx_service_round_post(ag);
}

static void gcx_service_finalize(gcx_task_t *task)
{
    gcx_service_allgather_t *ag = (gcx_service_allgather_t *)task;

    free(ag->tmp);
    free(ag);
}

static const gcx_task_ops_t gcx_service_allgather_ops = {
    .name     = "service exchange",
    .post     = gcx_service_post,
    .progress = gcx_service_progress,
    .finalize = gcx_service_finalize,
};

gcx_status_t gcx_service_allgather(gcx_comm_t *comm, const void *mine,
                                   void *all, size_t len)
{
    gcx_service_allgather_t *ag = calloc(1, sizeof(*ag));

    if (ag == NULL ||
        (ag->tmp = malloc((size_t)comm->size * len)) == NULL) {
        free(ag);
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&ag->super, &gcx_service_allgather_ops, comm);
    ag->len  = len;
    ag->out  = all;
    ag->held = 1;
    memcpy(ag->tmp, mine, len);
    return gcx_task_submit(&ag->super, NULL);
}
