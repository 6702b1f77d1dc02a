/*
 * service.h - the core's own exchange over the transport: an allgather of
 * fixed-size records among a communicator's ranks (or some of them), used
 * where the core must talk (communicator creation, split, create_group)
 * without calling a collective.
 */
#ifndef GCX_CORE_SERVICE_H
#define GCX_CORE_SERVICE_H

#include <gcx/gcx.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Blocking allgather of @p len bytes per rank over @p comm's transport:
 * @p all receives size*len bytes in rank order. A task on the
 * communicator's queue (so it keeps the order of its collectives and
 * GCX_TIMEOUT applies); every rank must call it in the same order.
 * Bruck's algorithm: ceil(log2 P) rounds, each one send and one receive.
 */
gcx_status_t gcx_service_allgather(gcx_comm_t *comm, const void *mine,
                                   void *all, size_t len);

/** Some members of a communicator, for a member-only exchange. */
typedef struct gcx_service_group {
    int        n;     /* members, at most 2^16 (16 rounds) */
    int        me;    /* this rank's index in ranks */
    const int *ranks; /* the members' ranks in the communicator */
    uint32_t   tag;   /* keeps concurrent exchanges apart (< 2^31) */
} gcx_service_group_t;

/**
 * The same allgather among @p group's members only, in the order of
 * group->ranks: not collective over @p comm and outside its FIFO (its
 * collectives and non-members go on meanwhile); the messages travel on the
 * point-to-point id with @p group->tag in the space user tags cannot reach
 * (gcx_tl_group_tag). GCX_TIMEOUT applies; a lost peer or a timeout fails
 * @p comm as a point-to-point message does. Members must use the same
 * ranks in the same order and the same tag.
 */
gcx_status_t gcx_service_allgather_group(gcx_comm_t *comm,
                                         const gcx_service_group_t *group,
                                         const void *mine, void *all,
                                         size_t len);

#endif
