/*
 * bootstrap.h - who am I, where is rank 0, and an OOB allgather over TCP.
 *
 * Used when gcx_comm_create() gets no OOB from the caller: rank and size
 * come from the first launcher that set them (gcx, torchrun, Open MPI, PMI,
 * PMIx, Slurm), rank 0 listens at the rendezvous address, the other ranks
 * connect (retrying until GCX_TIMEOUT) and prove with a MAC keyed by the job
 * token (GCX_JOB_TOKEN, else the launcher's job id) that they belong to the
 * job, and the resulting star carries the few allgathers of communicator
 * creation. Everything is closed afterwards. The message parsers are pure
 * functions, declared here for the unit tests and the fuzz target
 * (tests/fuzz/fuzz_bootstrap.c).
 *
 * Implemented in three files: bootstrap_env.c (identity, rendezvous
 * address, job id and token, the configuration rows), bootstrap_wire.c
 * (message format, SipHash, MACs, nonces) and bootstrap.c (sockets, rank
 * 0's admission loop, joining, the allgather). The last block below is
 * shared among them only.
 */
#ifndef GCX_CORE_BOOTSTRAP_H
#define GCX_CORE_BOOTSTRAP_H

#include "base/config.h"

#include <gcx/gcx.h>
#include <stddef.h>
#include <stdint.h>

#define GCX_BOOTSTRAP_MAGIC      0x67637862u /* "gcxb" */
#define GCX_BOOTSTRAP_VERSION    2           /* 1: the unframed hello */
#define GCX_BOOTSTRAP_HEADER_LEN 12          /* magic, type, version, length */
/* connections rank 0 serves before they prove themselves; beyond, the
 * oldest is closed */
#define GCX_BOOTSTRAP_MAX_PENDING 64
/* seconds a connection has for its hello (at most GCX_TIMEOUT) */
#define GCX_BOOTSTRAP_HELLO_S 5.0
/* rejections logged at warn level per creation; the rest at debug */
#define GCX_BOOTSTRAP_LOGGED_REJECTS 16

/* message types */
enum {
    GCX_BOOTSTRAP_CHALLENGE = 1, /* root -> rank: nonce */
    GCX_BOOTSTRAP_HELLO     = 2, /* rank -> root: rank, size, nonce, mac */
    GCX_BOOTSTRAP_REPLY     = 3, /* root -> rank: status, rank, mac */
    GCX_BOOTSTRAP_DATA      = 4, /* allgather payload, length known */
};

/** A parsed fixed-size message (the fields of its type are set). */
typedef struct gcx_bootstrap_msg {
    unsigned type;
    uint32_t rank, size; /* HELLO; REPLY: rank */
    int32_t  status;     /* REPLY: GCX_INPROGRESS (admitted), else final */
    uint64_t nonce;      /* CHALLENGE, HELLO */
    uint64_t mac;        /* HELLO, REPLY */
} gcx_bootstrap_msg_t;

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

/**
 * The launcher's job id as "id.step" into @p buf: SLURM_JOB_ID (with
 * SLURM_STEP_ID), OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE and, with
 * @p with_torch, TORCHELASTIC_RUN_ID. @return the variable used, NULL if
 * none is set.
 */
const char *gcx_bootstrap_job_id(int with_torch, char *buf, size_t buflen);

/** SipHash-2-4 of @p len bytes under a 128-bit key. */
uint64_t gcx_bootstrap_siphash(const uint64_t key[2], const void *data,
                               size_t len);

/** The SipHash key of a job token. */
void gcx_bootstrap_key(const char *token, uint64_t key[2]);

/** MAC of a HELLO answering challenge @p root_nonce. */
uint64_t gcx_bootstrap_hello_mac(const uint64_t key[2], uint64_t root_nonce,
                                 const gcx_bootstrap_msg_t *hello);

/** MAC of a REPLY on the connection of the two nonces. */
uint64_t gcx_bootstrap_reply_mac(const uint64_t key[2], uint64_t root_nonce,
                                 uint64_t rank_nonce,
                                 const gcx_bootstrap_msg_t *reply);

/** Body length of a fixed-size message type; 0 for DATA and unknown. */
size_t gcx_bootstrap_body_len(unsigned type);

/**
 * Checks a message header of @p len bytes: magic, version, @p type and a
 * body length of exactly @p length. @return GCX_OK, or GCX_ERR_INVALID
 * with *why_p (if not NULL) naming what was wrong.
 */
gcx_status_t gcx_bootstrap_parse_header(const void *bytes, size_t len,
                                        unsigned type, size_t length,
                                        const char **why_p);

/**
 * Parses the body of a fixed-size message of @p type (@p len must be its
 * length). @return GCX_ERR_INVALID for a wrong length or type.
 */
gcx_status_t gcx_bootstrap_parse_body(unsigned type, const void *bytes,
                                      size_t len, gcx_bootstrap_msg_t *msg);

/* ---- shared among bootstrap*.c, not for other callers ------------------ */

/**
 * Where the job token comes from: "GCX_JOB_TOKEN" if set, else the
 * launcher's job id (written to @p buf, see gcx_bootstrap_job_id()).
 * @return the variable used, NULL if none is set (the token is then "").
 */
const char *gcx_bootstrap_token(const struct gcx_config *config, char *buf,
                                size_t buflen);

/** A fresh nonce: never repeated in practice, not secret. */
uint64_t gcx_bootstrap_nonce(void);

/** Writes a GCX_BOOTSTRAP_HEADER_LEN-byte header of @p type and body
 *  @p length at @p p. */
void gcx_bootstrap_put_header(uint8_t *p, unsigned type, uint32_t length);

/**
 * Header and body of fixed-size message @p msg into @p buf (room for
 * GCX_BOOTSTRAP_HEADER_LEN + 24 bytes). @return the bytes written.
 */
size_t gcx_bootstrap_pack(uint8_t *buf, const gcx_bootstrap_msg_t *msg);

#endif
