/*
 * service.h - the core's own exchange over the transport: an allgather of
 * fixed-size records among a communicator's ranks, used where the core
 * must talk (communicator creation, split) without calling a collective.
 */
#ifndef GCX_CORE_SERVICE_H
#define GCX_CORE_SERVICE_H

#include <gcx/gcx.h>
#include <stddef.h>

/**
 * Blocking allgather of @p len bytes per rank over @p comm's transport:
 * @p all receives size*len bytes in rank order. A task on the
 * communicator's queue (so it keeps the order of its collectives and
 * GCX_TIMEOUT applies); every rank must call it in the same order.
 * Bruck's algorithm: ceil(log2 P) rounds, each one send and one receive.
 */
gcx_status_t gcx_service_allgather(gcx_comm_t *comm, const void *mine,
                                   void *all, size_t len);

#endif
