/*
 * shrink.h - revoke and shrink (shrink.c): what the communicator
 * lifecycle calls. The context's progress reaches revoke and shrink
 * through the callbacks they register, never by name.
 */
#ifndef GCX_CORE_SHRINK_H
#define GCX_CORE_SHRINK_H

#include "comm.h"

#include <stddef.h>
#include <stdint.h>

/** Register the communicator's control channel with the context's
 *  progress (a revoke heard acts there) and, the first time, the context's
 *  control-message handler. */
void gcx_comm_ctl_attach(gcx_comm_t *comm);

/** Unregister it and free the control messages @p comm still holds
 *  (destroy); with the context's last communicator, also the early ones. */
void gcx_comm_ctl_free(gcx_comm_t *comm);

/** A new communicator has its id: take the control messages that came for
 *  it before it existed here (a peer that finished the creation first). */
void gcx_comm_ctl_adopt(gcx_comm_t *comm);

/** Drop the early control messages for id @p id (it is free again). */
void gcx_ctl_early_forget(gcx_context_t *ctx, uint32_t id);

#endif
