/*
 * allreduce.h - the dense allreduce's algorithms: ids and their one
 * {id, name, description} table (allreduce.c), used by the GCX_ALLREDUCE_ALGO
 * row, by the selection and by the log lines.
 */
#ifndef GCX_COLL_ALLREDUCE_H
#define GCX_COLL_ALLREDUCE_H

#include "base/config.h"

/* GCX_ALLREDUCE_ALGO values */
enum {
    GCX_ALLREDUCE_ALGO_AUTO = 0,
    GCX_ALLREDUCE_ALGO_RECURSIVE_DOUBLING,
    GCX_ALLREDUCE_ALGO_RING,
    GCX_ALLREDUCE_ALGO_RABENSEIFNER,
};

/** Indexed by id; ends with a NULL name. */
extern const gcx_config_value_t gcx_allreduce_algo_names[];

#endif
