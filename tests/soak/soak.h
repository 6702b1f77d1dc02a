/*
 * soak.h - internal to gcx_soak (tests/soak): the constants, types and
 * state its files share, and the functions one file calls in another.
 * soak.c holds the tables, the state and the run; soak_ops.c the
 * generator, inputs and one collective step; soak_sparse.c the sparse
 * allreduce step; soak_comm.c the communicators and the churn.
 *
 * Idea: one process-wide state S (this rank's families, buffers and
 * statistics), defined in soak.c, as when the soak was one file.
 * Cost: none; the element access soak_val stays inline.
 * Public gcx headers only.
 */
#ifndef GCX_TESTS_SOAK_H
#define GCX_TESTS_SOAK_H

#include <gcx/gcx.h>
#include <gcx/sparse.h>
#include <gcx/sparse_vec.h>

#include <stddef.h>
#include <stdint.h>

#define SOAK_MAX_RANKS 64
#define SOAK_MAX_FAM   8   /* live families, the world included */
#define SOAK_MAX_BATCH 4
#define SOAK_GUARD     64  /* bytes checked on each side of an output */
#define SOAK_POISON    0xA5
#define SOAK_MAX_MSGS  3   /* send/recv messages per step */
#define SOAK_NSLOT     SOAK_MAX_BATCH
#define SOAK_NCONFIGS  11  /* rows of soak_configs */

enum {
    K_ALLREDUCE, K_BCAST, K_ALLGATHER, K_ALLGATHERV, K_ALLTOALLV,
    K_REDUCE_SCATTER, K_REDUCE, K_GATHER, K_SCATTER, K_BARRIER, K_SENDRECV,
    K_SPARSE, K_NCOLL,
    /* communicator events */
    K_CREATE = K_NCOLL, K_CREATE_ENV, K_SPLIT, K_DUP, K_DESTROY, K_NKINDS
};

/* ---- tables (soak.c) ---------------------------------------------------- */

extern const char *const soak_kind_names[K_NKINDS];
/* Configurations a created communicator may get: forced algorithms, small
 * pipeline chunks and thresholds ({name, value}, ..., NULL). */
extern const char *const soak_configs[SOAK_NCONFIGS][9];
/* GCX_SPARSE_ALGO per call, by name (NULL: the communicator's) */
extern const char *const soak_sparse_algos[];

/* ---- state ------------------------------------------------------------------ */

typedef struct {
    int         live;
    int         id;            /* running number, for messages */
    int         config;        /* index into soak_configs */
    int         how;           /* K_CREATE.. or -1 for the world */
    gcx_comm_t *comm;          /* NULL: this rank is in none of its comms */
    int         n;             /* members of this rank's communicator */
    int         members[SOAK_MAX_RANKS]; /* their world ranks, in order */
} soak_fam_t;

typedef struct {
    uint8_t *send, *recv;
    size_t   bytes; /* of each area */
} soak_slot_t;

typedef struct {
    uint64_t ops, wrong, events;
    uint64_t per_kind[K_NKINDS];
    uint64_t per_config[SOAK_NCONFIGS];
    uint64_t per_type[GCX_DT_LAST];
    uint64_t per_op[GCX_OP_LAST];
    uint64_t per_sparse_algo[6];
    uint64_t batches, nonblocking;
    uint64_t bytes;
    double   seconds[K_NKINDS + 1]; /* this rank's, by kind; batches last */
} soak_stats_t;

/* this rank's run: families, buffers, statistics */
typedef struct {
    int          rank, size;
    gcx_comm_t  *world;
    soak_fam_t   fam[SOAK_MAX_FAM];
    int          next_fam_id;
    soak_slot_t  slot[SOAK_NSLOT];
    uint8_t     *ref;       /* expected results */
    uint8_t     *aux;       /* sparse reference: flags, order */
    size_t       aux_bytes;
    soak_stats_t st;
    int          reported;  /* mismatches printed so far */
} soak_state_t;

extern soak_state_t S;

/* ---- one collective step ------------------------------------------------- */

typedef struct {
    int            kind, fam;
    uint64_t       seq;
    gcx_comm_t    *comm;
    int            n, me;
    gcx_dtype_t    dt;
    gcx_op_t       op;
    size_t         count, esz;
    int            root, inplace, blocking;
    soak_slot_t   *slot;
    uint8_t       *out;     /* where the checked result lands */
    size_t         out_bytes;
    uint8_t       *in;      /* send buffer */
    size_t         counts[SOAK_MAX_RANKS], displs[SOAK_MAX_RANKS];
    size_t         scounts[SOAK_MAX_RANKS], sdispls[SOAK_MAX_RANKS];
    gcx_request_t *req[2 * SOAK_MAX_MSGS];
    int            nreq;
    int            nmsg, tag;
    /* sparse */
    gcx_sparse_vec_t in_sp, out_sp;
    const char      *algo;
    int              algo_index;
    gcx_sparse_allreduce_opts_t sp_opts;
    int              want_dense, want_sparse, want_flags;
    uint8_t         *flags;
    uint64_t         sp_seed; /* of the members' inputs */
    size_t           sp_gap;  /* mean distance of their indices */
    uint64_t         rng;    /* the step's own generator */
} soak_op_t;

/* ---- generator, inputs, one collective step (soak_ops.c) ----------------- */

uint64_t soak_rng_next(uint64_t *s);
size_t   soak_rng_below(uint64_t *s, size_t n);
/* log-uniform in [0, max]: 0 with probability 1/32 */
size_t   soak_rng_size(uint64_t *s, size_t max);

extern int8_t soak_t1[4096], soak_t2[1024];
void soak_tables_init(void);

/* Input of step `seq`, stream `a` (a rank, or a pair), element i: an
 * integer in [-8, 8], aperiodic over 4M elements. Sums over 64 ranks stay
 * exact in f16 and bf16. */
static inline int soak_val(uint64_t seq, uint32_t a, size_t i)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull + (uint64_t)a * 0xc2b2ae3d27d4eb4full;

    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return soak_t1[(i + h) & 4095] + soak_t2[((i >> 12) + (h >> 20)) & 1023];
}

void soak_report(const soak_op_t *o, const char *what, size_t index,
                 const char *detail);
void soak_check_guards(const soak_op_t *o, const uint8_t *p, size_t bytes);
void soak_compare(const soak_op_t *o, const char *what, const uint8_t *got,
                  const uint8_t *want, size_t count, size_t esz);
/* posts step o (blocking or not); soak_check checks it once complete */
gcx_status_t soak_post(soak_op_t *o, size_t max_bytes);
void soak_check(soak_op_t *o);

/* ---- sparse allreduce (soak_sparse.c) ------------------------------------ */

/* the sparse parts of soak_post and soak_check */
void soak_sparse_prepare(soak_op_t *o, size_t max_bytes);
void soak_sparse_check(soak_op_t *o);

/* ---- communicators (soak_comm.c) ----------------------------------------- */

void soak_die(const char *what, gcx_status_t st); /* exit 2 */
int  soak_live_list(int *list, int with_world);
void soak_destroy_all(void);
void soak_event(int kind, uint64_t *rng); /* the same on every rank */
int  soak_churn(uint64_t seed, int total, int fd_exact);

/* ---- memory and descriptors (soak.c) ------------------------------------- */

long   soak_rss_kb(void);
long   soak_fds(void);
double soak_now(void);
void   soak_max(int64_t *v, size_t n); /* over ranks, on the world */

#endif
