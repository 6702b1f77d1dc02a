/*
 * ctl_wire.h - the control messages' wire format and queue entry, shared
 * by the communicator's control channel (comm_ctl.c: the handler, the
 * queues, revoke) and the shrink agreement (shrink.c). Types only.
 */
#ifndef GCX_CORE_CTL_WIRE_H
#define GCX_CORE_CTL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define GCX_CTL_MAGIC 0x67637843u /* "gcxC" */

enum {
    GCX_CTL_REVOKE   = 1,
    GCX_CTL_PROPOSAL = 2,
    GCX_CTL_DECIDED  = 3,
    GCX_CTL_FAILED   = 4, /* the sender's communicator failed: its cause
                             (an int32 gcx_status_t) follows the header */
};

/* Every control message starts with this (wire format). */
typedef struct gcx_ctl_hdr {
    uint32_t magic;
    uint32_t type;
    uint32_t epoch; /* which shrink of the communicator */
    uint32_t round;
    int32_t  src;   /* the sender's rank in the communicator */
    int32_t  size;  /* the communicator's size: the value's layout */
} gcx_ctl_hdr_t;

/* A control message queued on its communicator (or, early, on the
 * context). */
typedef struct gcx_ctl_msg {
    struct gcx_ctl_msg *next;
    uint32_t            comm_id;
    size_t              length;
    gcx_ctl_hdr_t       hdr;
    uint8_t             value[]; /* length - sizeof(hdr) bytes */
} gcx_ctl_msg_t;

#endif
