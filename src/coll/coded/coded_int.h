/*
 * coded_int.h - internal state of the coded object: the dispatch row of
 * its two algorithms (coded.c), and the star's state (see star.c for its
 * design: rounds, late messages, the FIFO), which the master-less coded
 * allreduce (masterless_int.h) builds on for its slots, injection and
 * creation check.
 *
 * Pieces: the wire header (one active message per contribution, result or
 * error), refcounted blocks and slots (internal buffers a transfer may
 * outlive the round with), the object, and the per-round task.
 */
#ifndef GCX_CODED_INT_H
#define GCX_CODED_INT_H

#include "coll/coll.h"

#include <gcx/coded.h>
#include <gcx/coding.h>
#include <stdint.h>
#include <string.h>

/* Most workers of a coded object, star or master-less: the star's RESULT
 * header carries three worker sets (40 + 3 n / 8 bytes: 6,184 at this n),
 * the master-less DECODED header one (32 + n / 8 bytes), and UCX bounds an
 * active message's header near 8 KB (ucp_worker_attr_t.max_am_header:
 * 8,100 to 8,139 bytes over tcp, posix, sysv and cma here). */
#define GCX_CODED_MAX_WORKERS 16384
/* Most owners per chunk (s + 1) of a master-less object: their line
 * positions are bits of one word (acked, committed, ACKs) */
#define GCX_CAR_LINE_MAX 64
#define GCX_CODED_COLL_ID (GCX_COLL_INTERNAL + 8) /* for the creation check */
#define GCX_CODED_AM_FIRST 1                      /* first AM id tried */
/* seconds a non-root rank waits past GCX_TIMEOUT for the root's verdict */
#define GCX_CODED_VERDICT_GRACE 2.0

/* Root: how long past GCX_TIMEOUT a round rebuilt from kept contributions
 * (taken ones given up as still landing) may take to land them and decode;
 * under GCX_CODED_VERDICT_GRACE, so that the other ranks hear the result. */
#define GCX_CODED_GIVE_UP_GRACE 1.0

enum {
    GCX_CODED_CONTRIB = 1, /* worker -> root: a coded vector of a round */
    GCX_CODED_RESULT  = 2, /* root -> rank: the decoded sum of a round */
    GCX_CODED_ERROR   = 3, /* root -> rank: the round failed (status) */
    GCX_CODED_VOID    = 4, /* worker -> root: abstains from a round (a
                              contribution flagged void, header only) */
    GCX_CODED_LOST    = 5, /* root -> rank: the round is lost (lost_rounds:
                              abstentions left it undecodable), header only */
};

/*
 * Wire header. RESULT and LOST carry the round's worker sets after it:
 * nwords words of arrived, then of used, then of abstained (nwords =
 * GCX_WSET_WORDS(n), 0 in the other kinds), so a header is O(n / 8)
 * bytes: 40 + 3 n / 8 (1.6 KB at n = 4096). The arrival times stay on the
 * root (they are its measurements; result->arrival is NAN elsewhere).
 */
typedef struct gcx_coded_hdr {
    uint32_t comm_id;
    uint32_t instance; /* which object on this communicator */
    uint64_t round;
    uint16_t sender;   /* rank */
    uint16_t kind;
    int32_t  status;   /* ERROR */
    double   round_time;
    uint32_t nwords;   /* RESULT, LOST: words of each set that follow */
    uint32_t reserved;
} gcx_coded_hdr_t;

/* Bytes of the sets that follow a RESULT or LOST header of @p n workers. */
static inline size_t gcx_coded_sets_bytes(int n)
{
    return 3 * GCX_WSET_WORDS(n) * sizeof(uint64_t);
}

/* 1 when none of the @p nsets worker sets of n workers at @p bytes (as
 * they came off the wire: consecutive, unaligned) names a worker at or
 * past n -- gcx_wset_valid for a message's sets (the star's RESULT/LOST
 * header, the master-less DECODED header). O(nsets). */
static inline int gcx_coded_wire_sets_valid(const unsigned char *bytes,
                                            size_t nsets, int n)
{
    size_t   words = GCX_WSET_WORDS(n), k;
    uint64_t last;

    for (k = 1; n % 64 != 0 && k <= nsets; ++k) {
        memcpy(&last, bytes + (k * words - 1) * sizeof(uint64_t),
               sizeof(last));
        if (last >> (n % 64) != 0) {
            return 0;
        }
    }
    return 1;
}

/**
 * A received header of @p len bytes into @p hdr and, for RESULT and LOST,
 * a pointer to its sets in @p bytes (*sets_p; NULL for the other kinds):
 * exactly the fixed part, or the fixed part and 3 nwords words with
 * nwords = GCX_WSET_WORDS(@p n) for RESULT and LOST. Pure: the AM handler
 * and the fuzz target (tests/fuzz/fuzz_coded.c) call it.
 * @return GCX_ERR_INVALID for any other length or nwords, or a set with a
 *         worker at or past n.
 */
gcx_status_t gcx_coded_hdr_parse(const void *bytes, size_t len, int n,
                                 gcx_coded_hdr_t *hdr,
                                 const unsigned char **sets_p);

/*
 * A buffer of count floats with a reference count: the owner holds one,
 * every abandoned transfer that still reads or writes it holds one, so it
 * is freed only when nothing can touch it any more.
 */
typedef struct gcx_coded_block {
    int              refs;
    size_t           cap;  /* bytes of data (0: a header-only send's) */
    float           *data; /* 64-byte aligned, inside the same allocation */
    gcx_coded_hdr_t  hdr;  /* header of a send from this block: UCX 1.13
                              reads it until the send completes ... */
    uint64_t         hdr_tail[]; /* ... with what follows it: the sets of a
                                    RESULT or LOST (coded->hdr_tail bytes;
                                    the master-less: the rest of its own
                                    header) */
} gcx_coded_block_t;

/* An internal buffer and the transfers on it. */
typedef struct gcx_coded_slot {
    struct gcx_coded_slot *next;
    gcx_coded_block_t     *block;
    uint64_t               round;
    int                    worker;    /* contribution stash: sender's index */
    double                 t_arrival; /* when its header arrived */
    gcx_coded_hdr_t        hdr;       /* stashed header (kind: CONTRIB,
                                         VOID, or the root's RESULT) */
    uint64_t              *sets;      /* a stashed RESULT's or LOST's sets
                                         (3 GCX_WSET_WORDS(n) words); the
                                         master-less: a DECODED chunk's
                                         used set (one); allocated on
                                         first use */
    int                    nreqs;     /* in use: 1, or one per rank for
                                         a fan-out (gcx_coded_slot_fan) */
    int                    cap;       /* entries of reqs */
    gcx_tl_req_t          *reqs;      /* &req1, or a fan-out's array */
    gcx_tl_req_t           req1;      /* a single transfer's request */
    /* a received eager payload kept where the transport put it (am_hold,
     * in_place; held.data non-NULL): read there instead of block->data,
     * released when the slot goes back (gcx_coded_slot_put) */
    gcx_tl_am_msg_t        held;
} gcx_coded_slot_t;

/* The slot's payload: the held one, else its block's (NULL for a slot
 * without either: a header-only message). */
static inline const float *gcx_coded_slot_data(const gcx_coded_slot_t *slot)
{
    return slot->held.data != NULL ? (const float *)slot->held.data :
           slot->block != NULL     ? slot->block->data :
                                     NULL;
}

/* Root: one taken message of the live round. */
typedef struct gcx_coded_entry {
    int               worker;
    double            coeff;  /* streaming: final coefficient */
    const float      *buf;    /* where its data lands */
    gcx_tl_req_t     *req;    /* NULL: landed already */
    gcx_coded_slot_t *slot;   /* internal buffer holding it, or NULL */
} gcx_coded_entry_t;

/* Root: a contribution of the live round kept but not taken (not needed
 * when it came), so that it can replace a taken one whose transfer fails. */
typedef struct gcx_coded_held {
    int               worker;
    double            t;     /* arrival, s after the round began */
    int               late;  /* came once decodable (else: not needed) */
    gcx_tl_am_msg_t   msg;   /* a rendezvous payload kept (am_hold) ... */
    gcx_coded_slot_t *slot;  /* ... or a staged one's slot (non-NULL) */
} gcx_coded_held_t;

typedef struct gcx_coded_op gcx_coded_op_t;

/*
 * One aggregation algorithm behind gcx_coded_t (GCX_CODED_ALGO picks the
 * row at creation): coded.c checks the arguments of every API call and
 * dispatches through the object's row. create fills @p coded (comm set, the rest zero; on failure leaves
 * nothing to release) and agrees with every rank, under the context lock;
 * destroy releases what create made (not @p coded), under the lock;
 * submit, ready and stats take the lock themselves where they need it.
 */
typedef struct gcx_coded_impl {
    const char *name;
    gcx_status_t (*create)(gcx_coded_t *coded,
                           const gcx_coded_params_t *params);
    void (*destroy)(gcx_coded_t *coded);
    /* a round: with sendbuf, or abstaining (sendbuf NULL) */
    gcx_status_t (*submit)(gcx_coded_t *coded, const float *sendbuf,
                           float *recvbuf, int abstain,
                           gcx_coded_result_t *result,
                           gcx_request_t **req_p);
    gcx_status_t (*ready)(gcx_coded_t *coded, int *ready_p);
    gcx_status_t (*stats)(const gcx_coded_t *coded,
                          gcx_coded_stats_t *stats_p);
} gcx_coded_impl_t;

extern const gcx_coded_impl_t gcx_coded_impl_star;      /* star.c */
extern const gcx_coded_impl_t gcx_coded_impl_masterless; /* masterless.c */

struct gcx_coded {
    gcx_comm_t  *comm;
    const gcx_coded_impl_t *impl; /* star or master-less (coded.c) */
    /* master-less: the calls go to this object, nothing below is used
     * but comm (star: NULL) */
    gcx_coded_allreduce_t *car;
    gcx_code_t  *code;
    size_t       count;
    size_t       bytes;
    int          root;
    int          root_not_worker;
    int          lost_rounds;   /* gcx_coded_params_t.lost_rounds */
    int          window;        /* master-less: rounds served ahead (every
                                   rank's must be the same: agreed) */
    int          n, s;
    size_t       words;     /* GCX_WSET_WORDS(n): a worker set's words */
    size_t       hdr_tail;  /* header bytes a block holds after its hdr */
    int          my_worker; /* -1: the root that is not a worker */
    unsigned     am_id;
    uint32_t     instance;
    uint64_t     next_round;    /* round number of the next call */
    uint64_t     next_open;     /* lowest round not finished here */
    gcx_coded_op_t *live;       /* the round in progress here, if any */
    gcx_status_t error;         /* an ERROR message from the root */
    uint64_t     error_round;   /* the round it failed */
    uint64_t    *gone;          /* root (master-less: every rank):
                                   workers counted gone, a worker set */
    gcx_coded_slot_t *free_slots;
    gcx_coded_slot_t *inflight; /* sends that may outlive their round */
    gcx_coded_slot_t *stash;    /* messages of rounds not entered yet */
    gcx_coded_stats_t stats;    /* stats.buffer_bytes: the blocks of the
                                   slots (slot.c) */
    /* straggler injection */
    uint64_t    *straggler_set;  /* workers delayed every round (a
                                    worker set) */
    double       straggler_delay_ms;
    double       straggler_mean_ms;
    int          straggler_count;
    int          straggler_seed;
};

struct gcx_coded_op {
    gcx_task_t          super;
    gcx_coded_t        *coded;
    uint64_t            round;
    const float        *sendbuf;
    float              *recvbuf;
    gcx_coded_result_t *result;
    double              t_start;
    int                 abstain;  /* gcx_coded_abstain(): nothing to send */
    /* root: worker sets (coded->words words each, in the op's allocation) */
    uint64_t           *arrived, *used;
    uint64_t           *abstained; /* workers that abstained */
    uint64_t           *dropped;  /* not needed, eager: gone for good */
    uint64_t           *late_void; /* abstained once decodable: counts
                                      again if the round is rebuilt */
    uint64_t           *given_up; /* taken, still landing at GCX_TIMEOUT:
                                     left out of this round, not gone */
    uint64_t           *scratch;  /* a set for the checks (one at a time) */
    int                *lag;      /* [n] laggards' count of results held */
    int                 gave_up;  /* given_up was decided (once a round) */
    int                 need;     /* streaming: nonzero coefficients that
                                     make the round decodable (-1: ask
                                     gcx_code_decodable) */
    int                 nused;    /* streaming: nonzero coefficients taken */
    int                 decodable, streaming;
    int                 decoded;  /* recvbuf holds the sum; publishing
                                     waits for a rank GCX_CODED_MAX_LAG
                                     results behind (gcx_coded_root_laggards) */
    int                 nentries, nfolded;
    gcx_coded_entry_t  *entries;  /* [n] */
    float              *arrival;  /* [n] */
    int                 nheld;
    gcx_coded_held_t   *held;     /* [n] */
    /* other ranks */
    int                 skipped;
    int                 recv_posted;
    gcx_tl_req_t        rreq;
    gcx_coded_hdr_t     rhdr;
    uint64_t           *rsets;    /* rhdr's sets (RESULT, LOST): 3 words */
};

/** A round task for the object's n workers, with its sets and arrays in
 *  the same allocation (the root's: O(n) bytes; the others': their
 *  result's sets). Freed with free(). NULL when out of memory. */
gcx_coded_op_t *gcx_coded_op_new(gcx_coded_t *coded, int is_root);

/**
 * Creation check of a coded object (the coded gather, or the master-less
 * coded allreduce that builds on this state): every rank passes the same
 * code (matrix), count, root, AM id and options; a mismatch fails on every
 * rank with GCX_ERR_MISMATCH. Doubles as a barrier. @p coll_id tells the
 * two kinds of object apart.
 */
gcx_status_t gcx_coded_agree(gcx_coded_t *coded, uint32_t coll_id);

/** The object's worker sets for its n workers (gone, straggler_set; n
 *  set): one allocation, freed by gcx_coded_sets_free() (shared.c). */
gcx_status_t gcx_coded_sets_init(gcx_coded_t *coded);
void gcx_coded_sets_free(gcx_coded_t *coded);

/* ---- slots (slot.c) ------------------------------------------------ */

/** A slot with a block no transfer holds; NULL when out of memory. */
gcx_coded_slot_t *gcx_coded_slot_get(gcx_coded_t *coded);

/** A slot that may have no block (a received message held in place or
 *  header-only needs none; gcx_coded_slot_block() gives it one); NULL when
 *  out of memory. */
gcx_coded_slot_t *gcx_coded_slot_get_bare(gcx_coded_t *coded);

/** Give @p slot a block of the object's size if it has none or a smaller
 *  one; 0 when out of memory. */
int gcx_coded_slot_block(gcx_coded_t *coded, gcx_coded_slot_t *slot);

/** A slot for header-only sends: its block may hold no data (the header
 *  storage alone); NULL when out of memory. */
gcx_coded_slot_t *gcx_coded_slot_get_ctl(gcx_coded_t *coded);

/** Keep the eager payload of @p msg in place as the slot's data (inside
 *  the handler; am_hold with in_place, float-aligned). 1: kept; 0: not
 *  possible (copy it). */
int gcx_coded_slot_hold(gcx_coded_t *coded, gcx_coded_slot_t *slot,
                        const gcx_tl_am_msg_t *msg);

/** Requests for a fan-out to @p n ranks (a slot just taken, no transfer
 *  on it): nreqs = n, each done (GCX_OK) until its send is posted. A slot
 *  holds one request otherwise, so the pool costs O(1) per slot, not
 *  O(P): the array goes when the slot goes back. 0 when out of memory. */
int gcx_coded_slot_fan(gcx_coded_slot_t *slot, int n);

/** Back to the free list (its transfers must be done; a held payload is
 *  released). */
void gcx_coded_slot_put(gcx_coded_t *coded, gcx_coded_slot_t *slot);

/** Number of the slot's transfers still in flight. */
int gcx_coded_slot_busy(const gcx_coded_slot_t *slot);

/** Hand the slot's in-flight transfer @p i to the transport. */
void gcx_coded_slot_abandon_req(gcx_coded_t *coded, gcx_coded_slot_t *slot,
                                int i);

/** Return done slots of the in-flight list to the free list. */
void gcx_coded_reclaim(gcx_coded_t *coded);

/** Abandon every transfer and free every slot (destroy). */
void gcx_coded_slots_release(gcx_coded_t *coded);

/* ---- rounds (star_root.c, star_rank.c) --------------------------------- */

extern const gcx_task_ops_t gcx_coded_root_ops;
extern const gcx_task_ops_t gcx_coded_rank_ops;

/** Root: a CONTRIB or VOID header arrived (from the AM handler). */
void gcx_coded_root_on_contrib(gcx_coded_t *coded, const gcx_coded_hdr_t *hdr,
                               const gcx_tl_am_msg_t *msg);

/** Other ranks: a RESULT header arrived (from the AM handler). */
void gcx_coded_rank_on_result(gcx_coded_t *coded, const gcx_coded_hdr_t *hdr,
                              const unsigned char *sets,
                              const gcx_tl_am_msg_t *msg);

/** Finalize of both round tasks. */
void gcx_coded_op_finalize(gcx_task_t *task);

/** What a round's public result says, in the object's own storage (sets
 *  over n workers; arrival NULL: NAN for every worker). */
typedef struct gcx_coded_result_sets {
    uint64_t        round;
    const uint64_t *arrived, *used, *abstained;
    const float    *arrival;
    double          round_time;
    int             skipped, lost;
} gcx_coded_result_sets_t;

/** Write a round's result into the caller's storage (shared.c): the
 *  scalars, and each set or the arrival times where the caller gave
 *  storage. O(n). */
void gcx_coded_result_write(gcx_coded_result_t *result, int n,
                            const gcx_coded_result_sets_t *sets);

/** Counters out (shared.c): @p counters with the caller's gone pointer
 *  kept, gone_count, and the gone set written where it points. */
void gcx_coded_stats_write(const gcx_coded_stats_t *counters,
                           const uint64_t *gone, int n,
                           gcx_coded_stats_t *stats_p);

/** Fill the public result from a header and its sets (3 coded->words
 *  words: arrived, used, abstained) and, on the root, the arrival times
 *  (NULL elsewhere: NAN). */
void gcx_coded_fill_result(const gcx_coded_t *coded, const gcx_coded_hdr_t *hdr,
                           const uint64_t *sets, const float *arrival,
                           int skipped, gcx_coded_result_t *result);

/* ---- straggler injection (straggler.c) ----------------------------- */

/**
 * The workers of a GCX_STRAGGLER_RANKS list ("1,3") on a communicator of
 * @p size ranks, into @p set, a worker set of GCX_WSET_WORDS(size) words
 * (a root that is not a worker is left out). Pure: the fuzz target
 * tests/fuzz/fuzz_config.c calls it.
 * @return GCX_ERR_INVALID (the set left empty) on a bad list.
 */
gcx_status_t gcx_coded_straggler_parse(const char *list, int size, int root,
                                       int root_not_worker, uint64_t *set);

/** Parse GCX_STRAGGLER_* for this object; GCX_ERR_INVALID on a bad list. */
gcx_status_t gcx_coded_straggler_init(gcx_coded_t *coded);

/** Milliseconds worker @p worker is delayed in @p round (0: none). */
double gcx_coded_straggler_delay(const gcx_coded_t *coded, int worker,
                                 uint64_t round);

/** Sleep (straggler injection). */
void gcx_coded_sleep(double seconds);

/** Rank of worker index @p w. */
static inline int gcx_coded_rank_of(const gcx_coded_t *coded, int w)
{
    return coded->root_not_worker && w >= coded->root ? w + 1 : w;
}

#endif
