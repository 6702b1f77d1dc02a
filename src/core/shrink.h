/*
 * shrink.h - revoke and shrink (shrink.c): what the context and the
 * communicator lifecycle call.
 */
#ifndef GCX_CORE_SHRINK_H
#define GCX_CORE_SHRINK_H

#include "comm.h"

#include <stddef.h>
#include <stdint.h>

struct gcx_shrink;

/** The context's control-message handler (transport.h's
 *  gcx_tl_ctl_handler_t; @p arg is the context): queues a message for the
 *  communicator with id @p comm_id, or notes its revoke. */
void gcx_ctl_deliver(void *arg, uint32_t comm_id, const void *data,
                     size_t length);

/** Revoke @p comm here: tell every other rank, then fail it with
 *  GCX_ERR_REVOKED (unless it failed already). Idempotent; lock held. */
void gcx_comm_revoke_locked(gcx_comm_t *comm);

/** One step of a shrink agreement under way; returns events (0: idle). */
int gcx_shrink_progress(struct gcx_shrink *shrink);

/** Free the control messages @p comm still holds (destroy). */
void gcx_comm_ctl_free(gcx_comm_t *comm);

/** A new communicator has its id: take the control messages that came for
 *  it before it existed here (a peer that finished the creation first). */
void gcx_comm_ctl_adopt(gcx_comm_t *comm);

/** Drop the early control messages for id @p id (it is free again), or all
 *  of them (the context goes away). */
void gcx_ctl_early_forget(gcx_context_t *ctx, uint32_t id);
void gcx_ctl_early_free(gcx_context_t *ctx);

#endif
