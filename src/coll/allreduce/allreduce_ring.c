/*
 * allreduce_ring.c - ring allreduce = ring reduce-scatter + ring allgather.
 *
 * Idea: split the vector in P blocks; a reduce-scatter ring leaves block
 * (r+1) mod P fully reduced on rank r (AVG divides it there, once), then an
 * allgather ring spreads the reduced blocks into every rank's recvbuf. Both
 * halves are the chunked pipeline of ring.c; out of place, step 0 of the
 * reduce-scatter reads sendbuf directly, so no copy of the input is made.
 * Every block is reduced on exactly one rank and then copied, so all ranks
 * hold the same bits.
 * Cost: 2(P-1)/P·n·β + (P-1)/P·n·γ + 2(P-1)·α (bandwidth-optimal).
 */
#include "coll/coll.h"

#include <stdlib.h>

gcx_task_t *gcx_allreduce_ring_create(gcx_comm_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      gcx_dtype_t dtype, gcx_op_t op)
{
    gcx_schedule_t *schedule;
    gcx_task_t     *rs = NULL, *ag = NULL;
    size_t         *counts, *displs;
    int             b;

    counts = malloc(2 * (size_t)comm->size * sizeof(size_t));
    if (counts == NULL) {
        return NULL;
    }
    displs = counts + comm->size;
    for (b = 0; b < comm->size; ++b) {
        gcx_coll_block(count, comm->size, b, &displs[b], &counts[b]);
    }
    schedule = gcx_schedule_create(comm);
    if (schedule != NULL) {
        rs = gcx_ring_create(comm, GCX_RING_REDUCE_SCATTER, recvbuf, sendbuf,
                             counts, displs, dtype, op, 0);
        ag = gcx_ring_create(comm, GCX_RING_ALLGATHER, recvbuf, recvbuf,
                             counts, displs, dtype, op, 1);
    }
    free(counts);
    if (schedule == NULL || rs == NULL || ag == NULL) {
        if (rs != NULL) {
            rs->ops->finalize(rs);
        }
        if (ag != NULL) {
            ag->ops->finalize(ag);
        }
        free(schedule);
        return NULL;
    }
    gcx_schedule_add(schedule, rs);
    gcx_schedule_add(schedule, ag);
    schedule->super.name = "allreduce (ring)";
    return &schedule->super;
}
