/*
 * comm.h - the communicator object (internal view).
 */
#ifndef GCX_CORE_COMM_H
#define GCX_CORE_COMM_H

#include "config.h"
#include "task.h"
#include "transport/transport.h"

#include <gcx/gcx.h>
#include <stdint.h>

/*
 * State a collective keeps across its calls on one communicator (the sparse
 * allreduce's measured network model and its feedback table): created by
 * the collective on first use, released by gcx_comm_destroy. Living in the
 * communicator, it can never be shared, lost or evicted on one rank only.
 */
enum {
    GCX_COMM_STATE_SPARSE = 0,
    GCX_COMM_STATE_MAX,
};

typedef struct gcx_comm_state {
    void *data;
    void (*release)(void *data);
} gcx_comm_state_t;

struct gcx_comm {
    int               rank;
    int               size;
    uint32_t          id;     /* agreed at creation; part of every tag */
    uint32_t          seq;    /* sequence number of the next collective */
    struct gcx_config config;
    gcx_tl_t         *tl;
    gcx_status_t      error;  /* GCX_OK until the communicator fails */
    gcx_task_t       *head;   /* active task; the queue continues via next */
    gcx_task_t       *tail;
    void             *scratch; /* for the active task only */
    size_t            scratch_size;
    gcx_comm_state_t  state[GCX_COMM_STATE_MAX];
    /* the communicators that progress each other (GCX_PROGRESS_ALL) */
    int               registered;
    gcx_comm_t       *registry_prev, *registry_next;
};

/**
 * Progress the transports (only) of the other registered communicators:
 * called by a wait that found nothing to do on @p self (GCX_PROGRESS_ALL).
 * Without it, a rank that moved on to another communicator would never
 * send what a peer still waits for on this one: UCX over TCP queues a
 * rendezvous acknowledgement when the socket is full and sends it on the
 * next progress of that worker, and the peer, waiting for it, never
 * reaches the collective the rank now waits in (seen on the emulated
 * cluster: a 2 MB sparse exchange that one rank finished and the other
 * never did). Skips a round when another thread is iterating.
 */
void gcx_comm_progress_others(gcx_comm_t *self);

/**
 * Fail the communicator: cancel every transfer (nothing can land in a user
 * buffer afterwards), fail every queued task with @p status. Idempotent.
 */
void gcx_comm_fail(gcx_comm_t *comm, gcx_status_t status);

/** Scratch space of at least @p size bytes for the active task; NULL: OOM. */
void *gcx_comm_scratch(gcx_comm_t *comm, size_t size);

/** Shorthands for the transport of a communicator. */
static inline gcx_status_t gcx_comm_send(gcx_comm_t *comm, int peer,
                                         uint64_t tag, const gcx_iov_t *iov,
                                         int iovcnt, gcx_tl_req_t *req)
{
    return comm->tl->ops->send(comm->tl, peer, tag, iov, iovcnt, req);
}

static inline gcx_status_t gcx_comm_recv(gcx_comm_t *comm, int peer,
                                         uint64_t tag, const gcx_iov_t *iov,
                                         int iovcnt, gcx_tl_req_t *req)
{
    return comm->tl->ops->recv(comm->tl, peer, tag, GCX_TL_TAG_MATCH_ALL, iov,
                               iovcnt, req);
}

#endif
