/*
 * broadcast.h - the broadcast's algorithms: ids and their one
 * {id, name, description} table (broadcast.c), used by the GCX_BCAST_ALGO
 * row, by the selection and by the log lines.
 */
#ifndef GCX_COLL_BROADCAST_H
#define GCX_COLL_BROADCAST_H

#include "base/config.h"

/* GCX_BCAST_ALGO values */
enum {
    GCX_BCAST_ALGO_AUTO = 0,
    GCX_BCAST_ALGO_BINOMIAL,
    GCX_BCAST_ALGO_CHAIN,
};

/** Indexed by id; ends with a NULL name. */
extern const gcx_config_value_t gcx_broadcast_algo_names[];

#endif
