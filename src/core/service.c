/*
 * service.c - the core's allgather of fixed-size records (service.h).
 *
 * Bruck's allgather, for any P: in round k (d = 2^k) a rank sends the
 * min(d, P - d) records it holds to rank - d and receives as many from
 * rank + d, appending them; after ceil(log2 P) rounds it holds every record
 * in the order rank, rank+1, ..., which a final rotation puts in rank
 * order. Cost: ceil(log2 P) latencies and (P-1)*len bytes each way.
 * Records are a few hundred bytes (ids, colors, keys), so it is all latency.
 *
 * The same exchange runs among some members of a communicator only
 * (gcx_comm_create_group): ranks are then member indices, mapped onto the
 * communicator's ranks, the messages go on its point-to-point id with the
 * group tag (gcx_tl_group_tag) and the task skips the collective FIFO, so
 * non-members take no part and the communicator's collectives go on.
 */
#include "service.h"
#include "comm.h"
#include "request.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

typedef struct gcx_service_allgather {
    gcx_task_t   super;
    int          n;     /* members */
    int          me;    /* this rank's member index */
    const int   *ranks; /* member index -> rank; NULL: every rank */
    uint32_t     gtag;  /* ranks != NULL: the group tag */
    size_t       len;
    char        *tmp;   /* n * len: records in the order me, me+1, ... */
    void        *out;
    int          round; /* d = 1 << round */
    int          held;  /* records in tmp */
    gcx_tl_req_t sreq, rreq;
    size_t       expect;
} gcx_service_allgather_t;

static int gcx_service_rank(const gcx_service_allgather_t *ag, int index)
{
    return ag->ranks != NULL ? ag->ranks[index] : index;
}

static uint64_t gcx_service_tag(const gcx_service_allgather_t *ag, int src)
{
    uint32_t id = ag->super.comm->id, step = (uint32_t)ag->round;

    return ag->ranks != NULL ?
               gcx_tl_group_tag(id, ag->gtag, step, (uint32_t)src) :
               gcx_tl_tag(id, ag->super.seq, step, (uint32_t)src);
}

static void gcx_service_round_post(gcx_service_allgather_t *ag)
{
    gcx_comm_t  *comm = ag->super.comm;
    int          d    = 1 << ag->round;
    int          n    = d < ag->n - d ? d : ag->n - d;
    int          to   = gcx_service_rank(ag, (ag->me - d + ag->n) % ag->n);
    int          from = gcx_service_rank(ag, (ag->me + d) % ag->n);
    gcx_iov_t    siov = {ag->tmp, (size_t)n * ag->len};
    gcx_iov_t    riov = {ag->tmp + (size_t)ag->held * ag->len,
                         (size_t)n * ag->len};
    gcx_status_t status;

    ag->expect = riov.length;
    status = gcx_comm_recv(comm, from, gcx_service_tag(ag, from), &riov, 1,
                           &ag->rreq);
    if (status == GCX_OK) {
        status = gcx_comm_send(comm, to, gcx_service_tag(ag, comm->rank),
                               &siov, 1, &ag->sreq);
    }
    if (status != GCX_OK) {
        ag->super.status = status;
    }
}

static void gcx_service_finish(gcx_service_allgather_t *ag)
{
    int i;

    for (i = 0; i < ag->n; ++i) {
        memcpy((char *)ag->out + (size_t)((ag->me + i) % ag->n) * ag->len,
               ag->tmp + (size_t)i * ag->len, ag->len);
    }
    ag->super.status = GCX_OK;
}

static void gcx_service_progress(gcx_task_t *task)
{
    gcx_service_allgather_t *ag   = (gcx_service_allgather_t *)task;
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
                  ag->rreq.length, gcx_service_rank(ag, (ag->me + d) % ag->n),
                  ag->expect);
        task->status = GCX_ERR_MISMATCH;
        return;
    }
    ag->held += d < ag->n - d ? d : ag->n - d;
    ++ag->round;
    if (ag->held == ag->n) {
        gcx_service_finish(ag);
        return;
    }
    gcx_service_round_post(ag);
}

static void gcx_service_post(gcx_task_t *task)
{
    gcx_service_allgather_t *ag = (gcx_service_allgather_t *)task;

    if (ag->held == ag->n) {
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

static gcx_status_t gcx_service_run(gcx_comm_t *comm,
                                    const gcx_service_group_t *group,
                                    const void *mine, void *all, size_t len)
{
    gcx_service_allgather_t *ag = calloc(1, sizeof(*ag));
    int                      n  = group != NULL ? group->n : comm->size;

    if (ag == NULL || (ag->tmp = malloc((size_t)n * len)) == NULL) {
        free(ag);
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&ag->super, &gcx_service_allgather_ops, comm);
    ag->n    = n;
    ag->me   = group != NULL ? group->me : comm->rank;
    ag->len  = len;
    ag->out  = all;
    ag->held = 1;
    memcpy(ag->tmp, mine, len);
    if (group == NULL) {
        return gcx_task_submit(&ag->super, NULL);
    }
    ag->ranks       = group->ranks;
    ag->gtag        = group->tag;
    ag->super.name  = "member exchange";
    return gcx_task_start(&ag->super, NULL);
}

gcx_status_t gcx_service_allgather(gcx_comm_t *comm, const void *mine,
                                   void *all, size_t len)
{
    return gcx_service_run(comm, NULL, mine, all, len);
}

gcx_status_t gcx_service_allgather_group(gcx_comm_t *comm,
                                         const gcx_service_group_t *group,
                                         const void *mine, void *all,
                                         size_t len)
{
    return gcx_service_run(comm, group, mine, all, len);
}
