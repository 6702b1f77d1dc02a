/*
 * soak.h - internal to gcx_soak (tests/soak): the constants, types and
 * state its files share, and the functions one file calls in another.
 * soak.c holds the tables, the state and the run; soak_ops.c the
 * generator, inputs and one collective step; soak_sparse.c the sparse
 * allreduce step; soak_comm.c the communicators and the churn;
 * soak_random.c the differential parts (injected mismatches and bad
 * arguments, delays, kills and shrink, the coded gather step, exit
 * statuses and replay lines).
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

#define SOAK_MAX_RANKS 1024
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
    K_SPARSE,
    K_CODED,  /* --more only: coded gather (create, 1-3 rounds, destroy) */
    K_NCOLL,
    /* communicator events */
    K_CREATE = K_NCOLL, K_CREATE_ENV, K_SPLIT, K_DUP, K_DESTROY,
    K_GROUP, /* --more only: gcx_comm_create_group */
    K_NKINDS
};
/* the kinds the plain soak draws (K_CODED comes from --more) */
#define SOAK_NDRAWN (K_SPARSE + 1)

/* exit statuses (also gcxrun's, which passes on the first failing rank's) */
enum {
    SOAK_EXIT_OK         = 0,
    SOAK_EXIT_WRONG      = 1, /* a wrong result (or a memory verdict) */
    SOAK_EXIT_SETUP      = 2, /* setup failed (soak_die) */
    SOAK_EXIT_UNEXPECTED = 3, /* a call returned an error it should not */
    SOAK_EXIT_HANG       = 4, /* a call returned GCX_ERR_TIMEOUT */
};

/* what an injected step does wrong (soak_random.c) */
enum {
    INJ_NONE, INJ_COUNT, INJ_DTYPE, INJ_OP, INJ_ROOT, INJ_VCOUNTS,
    INJ_SP_ALGO, INJ_SP_INDEX, INJ_SP_CAP, INJ_SP_TOPK, INJ_SP_N,
    INJ_P2P_SIZE, INJ_CODED, INJ_GROUP, INJ_INVALID, INJ_NKINDS
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
    int         single;        /* one communicator: every rank holds it or
                                  none (not a split) */
    gcx_comm_t *comm;          /* NULL: this rank is in none of its comms */
    int         n;             /* members of this rank's communicator */
    int         members[SOAK_MAX_RANKS]; /* their world ranks, in order */
} soak_fam_t;

typedef struct {
    uint8_t *send, *recv;
    size_t   bytes; /* of each area */
    uint8_t *snap;  /* --inject: what the outputs held before (2 * bytes) */
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
    /* the differential run: counted alike on every rank (drawn) */
    uint64_t colls;            /* collectives drawn, every family's */
    uint64_t injected;         /* steps with a mismatch or bad argument */
    uint64_t per_inj[INJ_NKINDS];
    uint64_t invalid_calls;    /* local bad-argument calls this rank made */
    uint64_t kills, delays, follow;
    double   seconds[K_NKINDS + 1]; /* this rank's, by kind; batches last */
} soak_stats_t;

/* options of the differential run (soak_random.c) */
typedef struct {
    int         inject;       /* percent of collectives injected */
    int         delays;       /* percent of collectives with sleeps */
    int         more;         /* coded gather and create_group in the mix */
    int         only;         /* -1, or the one collective kind drawn */
    int         nkills;       /* ranks killed, at steps drawn from the seed */
    long long   kill_step[8]; /* steps (soak_step calls) of the kills */
    int         kill_rank[8]; /* -1: drawn then among the live ranks */
    int         kill_inside[8]; /* 1: after posting, 0: before */
    int         argc;
    char      **argv;
} soak_opts_t;

/* this rank's run: families, buffers, statistics */
typedef struct {
    int          rank, size;
    int          size0;     /* the world's size at the start */
    int          killed;    /* ranks dead so far (the world was shrunk) */
    int          kill_next; /* index of the next kill */
    int          in_kill;   /* a kill step: failures are expected */
    int          kill_err;  /* a failure was seen at the kill step */
    int          early;     /* ... or before it: skip to it */
    long long    nstep;     /* soak_step calls so far */
    uint64_t     seed;      /* rank 0's, for replay lines */
    int          victim;    /* rank of the world that dies at this kill */
    soak_opts_t  opt;
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
    /* the differential run (soak_random.c) */
    uint64_t         xrng;   /* injections and delays: drawn alike */
    int              inj;    /* INJ_*, or INJ_NONE */
    int              want_inj; /* this step may be injected */
    int              liar;   /* 1: this rank passes the wrong argument */
    uint64_t         liars;  /* n <= 64: the liars, bit r for comm rank r */
    uint64_t         liar_seed; /* n > 64: who lies is drawn per rank from
                                   it (soak_liar_of) */
    int              liar_one;  /* n > 64: -1, or the only liar */
    int              inj_var; /* variant of the injection */
    gcx_status_t     status; /* the collective's status, once waited */
    gcx_status_t     rst[2 * SOAK_MAX_MSGS]; /* each request's */
    size_t           lie_counts[SOAK_MAX_RANKS], lie_displs[SOAK_MAX_RANKS];
    size_t           snap_off, snap_len, snap_flags; /* saved ranges */
    int              delay_us; /* this rank sleeps before posting */
    size_t           sp_K;    /* result size of a sparse step */
    int              follow;  /* a follow-up of an injected step */
    int              force_algo; /* sparse: -1, or the algo_index to use */
    /* coded gather */
    int              cd_kind, cd_s, cd_rnw, cd_rounds;
    int              cd_algo; /* GCX_CODED_ALGO_STAR or _MASTERLESS */
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

/* An output region with poisoned guards on both sides, at an
 * element-aligned offset inside the area. */
uint8_t *soak_place(uint64_t *rng, uint8_t *area, size_t area_bytes,
                    size_t bytes, size_t esz, int poison_body);
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
gcx_status_t soak_world_allgather(const void *sendbuf, void *recvbuf,
                                  size_t len, void *ctx);
int  soak_churn(uint64_t seed, int total, int fd_exact);

/* ---- memory and descriptors (soak.c) ------------------------------------- */

long   soak_rss_kb(void);
long   soak_fds(void);
double soak_now(void);
void   soak_max(int64_t *v, size_t n); /* over ranks, on the world */

/* ---- the differential run (soak_random.c) ------------------------------- */

uint64_t soak_mix(uint64_t a, uint64_t b);
/* decides (alike on every rank) whether o is injected, which ranks lie and
 * sleep; called once o's family is known */
void soak_inject_setup(soak_op_t *o);
/* 1 when comm rank @p r of the step lies (passes the wrong argument). */
int  soak_liar_of(const soak_op_t *o, int r);
/* picks the injection of o from those its kind and draws allow */
void soak_inject_pick(soak_op_t *o);
/* the argument this rank passes */
size_t       soak_arg_count(const soak_op_t *o, size_t honest);
gcx_dtype_t  soak_arg_dt(const soak_op_t *o);
gcx_op_t     soak_arg_op(const soak_op_t *o);
int          soak_arg_root(const soak_op_t *o);
/* saves the output ranges of o (before the call) */
void soak_snapshot(soak_op_t *o);
/* the local bad-argument calls of INJ_INVALID, before the real one */
void soak_invalid_calls(soak_op_t *o);
/* checks o when injected (status and untouched outputs): 1 if handled */
int  soak_inject_check(soak_op_t *o);
/* a status that is not GCX_OK: expected (kill step), a hang or an error */
void soak_bad_status(soak_op_t *o, const char *what, gcx_status_t st);
/* 1 when a kill explains st (then every communicator is revoked) */
int  soak_kill_explains(const soak_op_t *o, gcx_status_t st);
void soak_replay_line(const char *why);
void soak_delay(const soak_op_t *o);
/* kills: is this step one, and the victim's end; the survivors' recovery */
int  soak_kill_now(void); /* 1 when this collective step is a kill step */
int  soak_kill_victim(void); /* 1 on the rank that dies */
int  soak_kill_inside(void);
void soak_vanish(soak_op_t *ops, int nposted, uint64_t tests);
void soak_kill_recover(void);
/* the coded gather step */
gcx_status_t soak_coded_run(soak_op_t *o, size_t max_bytes, int die_inside);
/* create_group event */
void soak_group_event(uint64_t *rng);
int  soak_parse_kill(const char *arg);
void soak_draw_kills(uint64_t seed, uint64_t nsteps);

#endif
