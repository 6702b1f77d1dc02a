/*
 * bootstrap.h - who am I, where is rank 0, and an OOB allgather over TCP.
 *
 * Used when gcx_comm_create() gets no OOB from the caller: rank and size
 * come from the first launcher that set them (gcx, torchrun, Open MPI, PMI,
 * PMIx, Slurm), rank 0 listens at the rendezvous address, the other ranks
 * connect (retrying until GCX_TIMEOUT), and the resulting star carries the
 * few allgathers of communicator creation. Everything is closed afterwards.
 */
#ifndef GCX_CORE_BOOTSTRAP_H
#define GCX_CORE_BOOTSTRAP_H

#include "base/config.h"

#include <gcx/gcx.h>
#include <stddef.h>

typedef struct gcx_bootstrap gcx_bootstrap_t;

/**
 * Rank and size from the environment. @p source_p names the variables used
 * ("GCX_RANK/GCX_WORLD_SIZE", "OMPI_COMM_WORLD_RANK/SIZE", ...).
 * @return GCX_ERR_INVALID (logged) when none is set, a value is not a
 *         number, or rank >= size.
 */
gcx_status_t gcx_bootstrap_identity(const struct gcx_config *config,
                                    int *rank_p, int *size_p,
                                    const char **source_p);

/** Rendezvous host and port (see GCX_ROOT_ADDR / GCX_ROOT_PORT docs). */
gcx_status_t gcx_bootstrap_root(const struct gcx_config *config, char *host,
                                size_t hostlen, int *port_p);

/**
 * First host name of a Slurm host list: "node[03-05,9],gpu1" -> "node03".
 * @return GCX_ERR_INVALID if the list cannot be parsed.
 */
gcx_status_t gcx_bootstrap_first_host(const char *nodelist, char *host,
                                      size_t hostlen);

/** Connect the star; collective; GCX_ERR_TIMEOUT if a rank never comes. */
gcx_status_t gcx_bootstrap_connect(const struct gcx_config *config, int rank,
                                   int size, gcx_bootstrap_t **bootstrap_p);

/** Blocking allgather over the star, usable as a gcx_oob_t callback. */
gcx_status_t gcx_bootstrap_allgather(const void *sendbuf, void *recvbuf,
                                     size_t len, void *bootstrap);

void gcx_bootstrap_close(gcx_bootstrap_t *bootstrap);

#endif
