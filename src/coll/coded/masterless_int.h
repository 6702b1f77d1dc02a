/*
 * masterless_int.h - the master-less coded allreduce's internals: the wire
 * header, parsed by a pure function that the AM handler calls and
 * tests/fuzz/fuzz_coded.c fuzzes; the object and its round state; and the
 * functions its files share -- masterless.c (design, the round task, API),
 * masterless_wire.c (messages), masterless_decode.c (ownership and decode),
 * masterless_commit.c (the ACK/COMMIT agreement, final chunks),
 * masterless_ahead.c (serving ahead of the call), masterless_failure.c
 * (lost owners, kept copies).
 */
#ifndef GCX_CODED_ALLREDUCE_INT_H
#define GCX_CODED_ALLREDUCE_INT_H

#include "coded_int.h"

#include <string.h>

enum {
    GCX_CAR_CHUNK   = 1, /* worker -> owner: one chunk of a coded message */
    GCX_CAR_DECODED = 2, /* owner -> rank: the decoded sum of a chunk */
    GCX_CAR_ACK     = 3, /* backup -> owner: your decoded chunk landed here */
    GCX_CAR_COMMIT  = 4, /* owner -> rank: every live backup has it */
    GCX_CAR_VOID    = 5, /* worker -> owner: abstains from the round */
    GCX_CAR_LOST    = 6, /* owner -> rank: the chunk's outcome is "round
                            lost" (lost_rounds; acknowledged and committed
                            as a DECODED chunk is) */
};

/* Wire header (starts with the communicator id: gcx_tl_am_prefix_t). A
 * DECODED header is followed by the set of workers the chunk was decoded
 * from: nwords = GCX_WSET_WORDS(size) words (unaligned on the wire); the
 * other kinds carry none (nwords 0). */
typedef struct gcx_car_hdr {
    uint32_t comm_id;
    uint32_t instance;
    uint64_t round;
    uint16_t sender;
    uint16_t kind;
    uint32_t chunk;
    uint32_t nwords;   /* DECODED: words of the used set that follows */
    uint32_t reserved;
} gcx_car_hdr_t;

/* Header bytes of a message of @p kind for @p size ranks. */
static inline size_t gcx_car_hdr_len(int kind, int size)
{
    return sizeof(gcx_car_hdr_t) +
           (kind == GCX_CAR_DECODED ? GCX_WSET_WORDS(size) * 8 : 0);
}

/**
 * A received header of @p len bytes with @p payload bytes into @p hdr,
 * for a communicator of @p size ranks, lines of @p line owners and vectors
 * of @p count floats: the length is its kind's (gcx_car_hdr_len), the
 * sender and chunk are ranks, the kind is known, the payload is the
 * chunk's size (CHUNK, DECODED) or 0 (ACK, COMMIT, VOID, LOST), DECODED,
 * LOST, COMMIT come from an owner of the chunk, ACK from a later one, and
 * a DECODED's used set names no worker at or past @p size; *used_p (when
 * not NULL) is then that set's first byte in @p bytes (unaligned), NULL
 * for the other kinds.
 * Pure. @return GCX_ERR_INVALID otherwise.
 */
gcx_status_t gcx_car_hdr_parse(const void *bytes, size_t len, size_t payload,
                               int size, int line, size_t count,
                               gcx_car_hdr_t *hdr,
                               const unsigned char **used_p);

/* ---- the object and its rounds (shared by masterless*.c) ------------------ */

#define GCX_CAR_COLL_ID (GCX_COLL_INTERNAL + 9) /* for the creation check */
#define GCX_CAR_AHEAD_MAX 256 /* largest window (GCX_CODED_AHEAD) */
#define GCX_CAR_AHEAD_MIN 8   /* smallest window GCX_CODED_AHEAD=0 picks */

typedef struct gcx_car_op gcx_car_op_t;

/* A committed copy kept by a later owner, and whether it was sent again. */
typedef struct gcx_car_kept {
    gcx_coded_slot_t *slot;
    int               served;
} gcx_car_kept_t;

struct gcx_coded_allreduce {
    /* comm, code, n, s, instance, am_id, the pool of chunk-sized slots,
     * stats and straggler injection of the coded gather (base.bytes: the
     * largest chunk; base.count: the whole vector, for the check) */
    gcx_coded_t   base;
    int           line;       /* owners per chunk: min(s + 1, n) */
    /* the rounds in progress here, by round: the one this rank's call
     * entered (the lowest, next_open) and those served ahead of its call
     * (entered 0; rounds next_open .. next_open + base.window - 1: the
     * window, gcx_car_window) */
    gcx_car_op_t *rounds;
    int           in_place;   /* GCX_CODED_IN_PLACE: read received chunks
                                 in the transport's buffer (gcx_car_pull) */
    gcx_progress_cb_t ahead_cb; /* gcx_car_ahead, while the object lives */
    /* the copies this rank, a later owner of the line of chunk c, took in
     * the last base.window rounds it finished (gcx_car_serve_kept): a row
     * per position pos = 1 .. line - 1 in that line, indexed by round %
     * window (gcx_car_kept_row) */
    gcx_car_kept_t *kept;
    /* scratch of the owner's checks and decode (one user at a time, under
     * the context lock): a worker set, n coefficients, n vectors, and the
     * acting owners of gcx_car_ahead */
    uint64_t     *scratch;
    double       *coeffs;
    const float **vecs;
    int          *acting;
    uint64_t      next_round; /* number of the next call */
    uint64_t      next_open;  /* lowest round not finished here */
    /* what the AM handler saw, for gcx_car_describe after GCX_TIMEOUT:
     * messages taken, by kind (GCX_CAR_CHUNK .. GCX_CAR_LOST), and those
     * dropped as another object's, with the last such (comm id, instance) */
    uint64_t      rx[GCX_CAR_LOST + 1];
    uint64_t      rx_foreign;
    uint32_t      rx_foreign_comm, rx_foreign_instance;
};

enum { GCX_CAR_COLLECT, GCX_CAR_ACKS, GCX_CAR_DONE };

/* The owner part of a chunk in this rank's line (it acts for the chunk
 * when the earlier owners are lost): worker sets of n, a slot per worker.
 * A rank holds line of them per round, not n: O(line n) bits and pointers
 * per round, the chunks it does not own cost O(line) each (below). */
typedef struct gcx_car_own {
    int               ostate;
    uint64_t         *arrived, *taken, *used;
    uint64_t         *abstained;             /* workers that sent VOID */
    uint64_t          acks_wanted, acks_got; /* later owners: positions */
    gcx_coded_slot_t **in;                   /* taken chunks, by worker */
    gcx_coded_slot_t *pub;                   /* the decoded chunk sent;
                                                held after the round's
                                                publish until the rank has
                                                entered (gcx_car_settle) */
} gcx_car_own_t;

/* One chunk of a round, as worker, owner and receiver. */
typedef struct gcx_car_chunk {
    /* worker: the owner this rank's chunk went to (-1: not yet) */
    int               sent_to;
    /* owner: non-NULL for the line chunks this rank may act for */
    gcx_car_own_t    *own;
    /* receiver: copies by line position of their sender (line entries);
     * the final one is copied into recvbuf */
    gcx_coded_slot_t **copy;
    uint64_t          acked;        /* line positions acknowledged */
    uint64_t          committed;    /* line positions whose COMMIT came */
    int               final;
    int               lost;         /* final outcome: the round is lost
                                       (LOST, lost_rounds only) */
    int               keep;         /* final from the copy of the earlier
                                       owner at line position keep - 1 */
    int               from;         /* final, served ahead: the bits are in
                                       copy[from - 1] until the rank enters
                                       (gcx_car_settle); else 0 */
} gcx_car_chunk_t;

struct gcx_car_op {
    gcx_task_t             super;
    gcx_coded_allreduce_t *car;
    gcx_car_op_t          *next;     /* car->rounds, by round */
    uint64_t               round;
    const float           *sendbuf;
    float                 *recvbuf;
    gcx_coded_result_t    *result;
    int                    abstain;  /* sends VOIDs (sendbuf unread) */
    int                    whole;    /* lost_rounds: every chunk final and
                                        none lost, recvbuf may be written
                                        (gcx_car_settle) */
    int                    entered;  /* 0: served ahead of the call */
    double                 t_start;
    double                 t_send;   /* chunk messages go from this time */
    int                    sending;  /* t_send has passed */
    int                    nsent;    /* chunk messages sent */
    int                    nvoid;    /* abstentions said (VOIDs sent, or
                                        recorded for a chunk it owns) */
    /* the round's state, one allocation sized by n (gcx_car_state_new;
     * a call taking over a round served ahead takes it over) */
    void                  *state;
    uint64_t              *used_union;  /* a worker set */
    int                   *acting;      /* [n]: owner of each chunk */
    gcx_car_chunk_t       *ch;          /* [n] */
};

/* ---- small helpers ---------------------------------------------------------- */

/* memcpy of n floats; nothing for n = 0 (the buffers may then be NULL) */
static inline void gcx_car_copy(float *dst, const float *src, size_t n)
{
    if (n > 0) {
        memcpy(dst, src, n * sizeof(float));
    }
}

/* dst |= src over the object's n workers (src NULL: nothing) */
static inline void gcx_car_union(const gcx_coded_allreduce_t *car,
                                 uint64_t *dst, const uint64_t *src)
{
    size_t k;

    for (k = 0; src != NULL && k < car->base.words; ++k) {
        dst[k] |= src[k];
    }
}

/* The used set a received DECODED copy carries (NULL: a LOST one, none) */
static inline const uint64_t *gcx_car_copy_used(const gcx_coded_slot_t *slot)
{
    return slot->hdr.kind == GCX_CAR_DECODED ? slot->sets : NULL;
}

/* base + off, NULL for a NULL base (count 0: the buffers may be NULL) */
static inline float *gcx_car_at(const float *base, size_t off)
{
    return base != NULL ? (float *)(uintptr_t)(base + off) : NULL;
}

static inline void gcx_car_block(const gcx_coded_allreduce_t *car, int c,
                          size_t *off_p, size_t *len_p)
{
    gcx_coll_block(car->base.count, car->base.n, c, off_p, len_p);
}

/* Position of @p rank in chunk @p c's line of owners, or -1. */
static inline int gcx_car_pos(const gcx_coded_allreduce_t *car, int c, int rank)
{
    int pos = gcx_coll_mod(rank - c, car->base.n);

    return pos < car->line ? pos : -1;
}

static inline int gcx_car_owner(const gcx_coded_allreduce_t *car, int c, int pos)
{
    return (c + pos) % car->base.n;
}

/* Entries of car->kept: (line - 1) positions x window rounds. */
static inline size_t gcx_car_kept_len(const gcx_coded_allreduce_t *car)
{
    return (size_t)(car->line - 1) * (size_t)car->base.window;
}

/* The kept copies of chunk c, by round % window; this rank is a later
 * owner of c's line (pos >= 1). */
static inline gcx_car_kept_t *gcx_car_kept_row(gcx_coded_allreduce_t *car, int pos)
{
    return &car->kept[(size_t)(pos - 1) * (size_t)car->base.window];
}

/* The kept copy of chunk c in @p round's place (ch->keep: this rank is a
 * later owner of c's line). */
static inline gcx_car_kept_t *gcx_car_kept(gcx_coded_allreduce_t *car, int c,
                                    uint64_t round)
{
    return gcx_car_kept_row(car, gcx_car_pos(car, c, car->base.comm->rank)) +
           round % (uint64_t)car->base.window;
}

/* ---- functions shared across the files (each defined, with its comment,
 *      in the file named) --------------------------------------------------- */

/* masterless.c */
int gcx_car_window(const struct gcx_config *config, size_t count);
gcx_status_t gcx_car_state_new(gcx_coded_allreduce_t *car, gcx_car_op_t *op);
void gcx_car_progress(gcx_task_t *task);
void gcx_car_post(gcx_task_t *task);

/* masterless_wire.c */
void gcx_car_hdr_init(gcx_coded_allreduce_t *car, uint64_t round,
                      int kind, int c, gcx_car_hdr_t *hdr);
void gcx_car_send(gcx_coded_allreduce_t *car, gcx_coded_slot_t *slot,
                  int i, int peer, const gcx_car_hdr_t *hdr,
                  const uint64_t *used, size_t len);
gcx_coded_slot_t *gcx_car_out_slot(gcx_coded_allreduce_t *car,
                                   uint64_t round, int data, int nreqs);
/* Receivers of a fan-out: to >= 0 names one rank; GCX_CAR_OTHERS every
 * other rank whose connection is not lost, but the owners of the chunk's
 * line before position `below` (0: none left out). */
#define GCX_CAR_OTHERS (-1)
int gcx_car_fan_to(const gcx_coded_allreduce_t *car, int c, int to,
                   int below, int r);
gcx_status_t gcx_car_send_ctl(gcx_coded_allreduce_t *car, int kind,
                              uint64_t round, int c, int to, int below);
gcx_car_op_t *gcx_car_find(gcx_coded_allreduce_t *car, uint64_t round);
void gcx_car_drop(gcx_coded_allreduce_t *car, gcx_coded_slot_t *slot);
gcx_coded_slot_t *gcx_car_pull(gcx_coded_allreduce_t *car,
                               const gcx_car_hdr_t *hdr,
                               const gcx_tl_am_msg_t *msg);
void gcx_car_stage(gcx_coded_allreduce_t *car, const gcx_car_hdr_t *hdr,
                   const gcx_tl_am_msg_t *msg);
void gcx_car_am_handler(void *arg, const gcx_tl_am_msg_t *msg);
void gcx_car_unstash(gcx_coded_allreduce_t *car, gcx_car_op_t *op);

/* masterless_decode.c */
void gcx_car_landed_bits(const gcx_coded_allreduce_t *car,
                         const gcx_car_own_t *own, uint64_t *landed);
void gcx_car_take(gcx_coded_allreduce_t *car, gcx_car_own_t *own,
                  int w, const gcx_car_hdr_t *hdr,
                  const gcx_tl_am_msg_t *msg, gcx_coded_slot_t *slot);
void gcx_car_on_chunk(gcx_coded_allreduce_t *car,
                      const gcx_car_hdr_t *hdr,
                      const gcx_tl_am_msg_t *msg);
void gcx_car_on_void(gcx_coded_allreduce_t *car,
                     const gcx_car_hdr_t *hdr,
                     const gcx_tl_am_msg_t *msg);
void gcx_car_contribute(gcx_coded_allreduce_t *car, gcx_car_op_t *op);
void gcx_car_publish_to(gcx_coded_allreduce_t *car, uint64_t round,
                        int c, const uint64_t *used, int lost,
                        gcx_coded_slot_t *slot, int to, int below);
void gcx_car_own(gcx_coded_allreduce_t *car, gcx_car_op_t *op, int c);

/* masterless_commit.c */
void gcx_car_on_decoded(gcx_coded_allreduce_t *car,
                        const gcx_car_hdr_t *hdr,
                        const gcx_tl_am_msg_t *msg);
void gcx_car_on_ctl(gcx_coded_allreduce_t *car, const gcx_car_hdr_t *hdr,
                    const gcx_tl_am_msg_t *msg);
void gcx_car_settle(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                    int c);
void gcx_car_receive(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                     int c);
void gcx_car_release(gcx_coded_allreduce_t *car, gcx_car_op_t *op);
void gcx_car_done(gcx_coded_allreduce_t *car, gcx_car_op_t *op);

/* masterless_ahead.c */
void gcx_car_link(gcx_coded_allreduce_t *car, gcx_car_op_t *op);
int gcx_car_ahead(void *arg);
void gcx_car_unlink(gcx_coded_allreduce_t *car, gcx_car_op_t *op);
void gcx_car_ahead_drop(gcx_coded_allreduce_t *car, gcx_car_op_t *op);

/* masterless_failure.c */
void gcx_car_acting(gcx_coded_allreduce_t *car, int *acting);
gcx_status_t gcx_car_serve_kept(gcx_coded_allreduce_t *car,
                                const int *acting, uint64_t round);
void gcx_car_describe(const gcx_task_t *task);

#endif
