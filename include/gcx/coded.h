/**
 * @file coded.h
 * @brief Coded gradient gathering with early completion (gradient coding).
 *
 * Every worker sends one coded vector per round to a root; the root
 * completes the round as soon as the set of arrived workers is decodable
 * under a gradient code (gcx/coding.h), decodes the sum of the partition
 * gradients, and sends that decoded sum to every rank. Stragglers, and up
 * to s dead workers, do not slow a round down: their contributions are
 * dropped when they arrive late, without landing in any buffer, and can
 * never be mistaken for a later round's.
 *
 * Model:
 * - A coded gather object (gcx_coded_t) is created collectively over a
 *   communicator with a code, a vector length and a root. Workers are all
 *   ranks (the root too), or all ranks but the root (parameter-server
 *   style); worker w's message is row w of the code's encoding.
 * - Rounds are numbered 0, 1, 2, ... by call order. Every rank calls
 *   gcx_coded_gather() once per round, in the same order as its other
 *   collectives on the communicator.
 * - A rank that enters a round whose decoded sum has already arrived does
 *   not send (its message would be dropped) and completes at once: that is
 *   how a slow worker catches up. gcx_coded_ready() tells a training loop
 *   before it computes, so it can skip the computation too.
 * - A worker with nothing usable to send (pipelined gradient coding after a
 *   skipped computation, see gcx_pgc_message_valid()) calls
 *   gcx_coded_abstain() instead: it takes part in the round and receives
 *   the decoded sum, and tells the root, with a header-only message, that
 *   it will not contribute. The root then never waits for it; when the
 *   workers left cannot decode, the round fails at once.
 * - Failure: a worker whose connection is lost (also while the root pulls
 *   its contribution: the root then decodes from contributions it kept
 *   unpulled, stats.transfers_lost), or who holds GCX_CODED_MAX_LAG
 *   decoded sums it has not taken and takes none within the round's
 *   GCX_TIMEOUT, counts as a permanent straggler; one that abstains, as a
 *   straggler of that round. A live rank that far behind (paused,
 *   descheduled) is waited for instead: the root's next round completes
 *   once it takes a sum, so the others then wait for it (flow control). While the
 *   others can still decode, rounds go on. Otherwise the round fails on
 *   every rank, with GCX_ERR_UNDECODABLE (too few workers left; the root
 *   tells the workers it can reach) or GCX_ERR_TIMEOUT (GCX_TIMEOUT bounds
 *   the root's wait, and a root out of time tells the others so too; the
 *   other ranks wait 2 s longer, for that verdict), and the
 *   communicator fails as for any collective.
 * - Straggler injection for tests and perf (GCX_STRAGGLER_* variables):
 *   the delayed rank sleeps before it sends its contribution.
 *
 * Memory: every buffer argument is owned by the caller; gcx keeps internal
 * copies where a transfer may outlive the call (see the file comment of
 * src/coll/coded/star.c).
 */
#ifndef GCX_CODED_H
#define GCX_CODED_H

#include <gcx/coding.h>
#include <gcx/gcx.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque coded gather object. */
typedef struct gcx_coded gcx_coded_t;

/**
 * How a coded gather object aggregates (gcx_coded_params_t.algo).
 * Every rank must end with the same choice (part of the creation check).
 */
typedef enum gcx_coded_algo {
    /** From GCX_CODED_ALGO (default star). */
    GCX_CODED_ALGO_DEFAULT = 0,
    /**
     * The cheaper of star and master-less by an alpha-beta model
     * (GCX_NET_LATENCY_US, GCX_NET_BANDWIDTH_GBPS; 20 us and 10 Gbit/s when
     * unset) for the ranks and the vector size; star where master-less
     * cannot serve the parameters (root_not_worker, fewer than 3 ranks,
     * a chunk's s + 1 owners more than 64). The model
     * weighs no stragglers: master-less covers a rank still computing only
     * while its process progresses (a progress thread: see
     * gcx_coded_allreduce_t), the star whatever the rank does.
     */
    GCX_CODED_ALGO_AUTO       = 1,
    /** One root decodes and sends the sum to every rank. */
    GCX_CODED_ALGO_STAR       = 2,
    /**
     * No root: gcx_coded_gather() runs a master-less coded allreduce (see
     * gcx_coded_allreduce() below); root is ignored; root_not_worker is
     * GCX_ERR_INVALID.
     */
    GCX_CODED_ALGO_MASTERLESS = 3,
} gcx_coded_algo_t;

/** Parameters of gcx_coded_create(). Zero-initialise, then set. */
typedef struct gcx_coded_params {
    /**
     * The code (n workers, s stragglers); borrowed, it must outlive the
     * object. Every rank passes a code built from the same parameters (the
     * encoding matrices are compared). Only the root decodes with it, so a
     * code must not be used by two objects' roots at once from two threads.
     */
    gcx_code_t *code;
    size_t      count; /**< Floats per vector (may be 0). */
    int         root;  /**< Rank that decodes. */
    /**
     * 0 (default): every rank is a worker, worker w = rank w, n = size.
     * 1: the root is not a worker; workers are the other ranks in rank
     * order, n = size - 1.
     */
    int root_not_worker;
    /**
     * 0 (default): a round that cannot be decoded fails (see
     * gcx_coded_abstain()). 1: a round that only abstentions leave
     * undecodable -- the workers not gone could still decode later rounds
     * -- completes on every rank as lost instead (result->lost = 1,
     * recvbuf not written) and the object goes on; a round the workers not
     * gone can never decode still fails. Every call must then pass a result. Set it alike on every rank.
     */
    int lost_rounds;
    /** A gcx_coded_algo_t; 0: GCX_CODED_ALGO (default star). */
    int algo;
} gcx_coded_params_t;

/**
 * What a round was decoded from. Written only when the round succeeds
 * (or, with lost_rounds, is lost).
 *
 * The worker sets and the arrival times are written into the caller's
 * storage: zero-initialise the result, then point the fields wanted at
 * arrays for the object's n workers (or let gcx_coded_result_alloc() do
 * it); a NULL field is not written. Sets are worker sets over n workers
 * (gcx/wset.h: GCX_WSET_WORDS(n) words, bit w for worker w). The same
 * result can be passed to every round; the storage must stay valid until
 * the round completes (a non-blocking call writes it then).
 */
typedef struct gcx_coded_result {
    uint64_t round;   /**< Round number (0, 1, ... by call order). */
    /** Worker w's message reached the root before the round was
     *  decodable (master-less: the owner of a chunk). Out; caller storage. */
    uint64_t *arrived;
    /** Folded in with a nonzero coefficient; pass it to gcx_pgc_decode().
     *  used is a subset of arrived. Out; caller storage. */
    uint64_t *used;
    /**
     * Worker w abstained (gcx_coded_abstain()) and the root learned it
     * before the round was decodable. Never in arrived or used: an
     * abstention is not a message the round can be decoded from. Out;
     * caller storage.
     */
    uint64_t *abstained;
    /**
     * Per worker (n floats): seconds after the root entered the round at
     * which its message arrived (negative: before), NAN when it did not
     * arrive in time. Out; caller storage.
     */
    float *arrival;
    double round_time; /**< Seconds from the root entering the round to the
                            decoded sum (as measured by the root). */
    /**
     * 1 when this rank sent nothing for the round (no contribution, chunk
     * or abstention) because the round was already decided here when it
     * came to send -- star: the root's outcome (decoded sum, or lost) had
     * arrived; master-less: every chunk was final. Its vector then went
     * into no decode and sendbuf was not read. A rank that enters a round
     * late gets it with gcx_coded_gather() or gcx_coded_allreduce() and its
     * real message just as with an abstention: once gcx_coded_ready() or
     * gcx_coded_allreduce_ready() said 1, the next round is skipped; a
     * straggler delay (GCX_STRAGGLER_*) that outlasts the round gives it
     * too. 0 when it sent anything, even if that came too late to be used;
     * always 0 on the star's root. stats.skipped counts these rounds.
     */
    int skipped;
    int lost;    /**< 1 (lost_rounds only): the round could not be decoded
                      (too many abstentions); recvbuf was not written, the
                      other fields say who arrived and abstained. */
} gcx_coded_result_t;

/**
 * Point every worker set and the arrival times of @p result at storage
 * for @p n workers, allocated here in one block (about n / 2 bytes), and
 * zero the rest of the result. Release it with gcx_coded_result_free().
 *
 * @return GCX_OK; GCX_ERR_INVALID (NULL, n < 1); GCX_ERR_NOMEM.
 */
GCX_API
gcx_status_t gcx_coded_result_alloc(gcx_coded_result_t *result, int n);

/** Free what gcx_coded_result_alloc() allocated and zero the result. NULL
 *  is allowed. */
GCX_API
void gcx_coded_result_free(gcx_coded_result_t *result);

/** Counters of one object (cumulative, this rank's view; buffer_bytes is
 *  a level). Zero-initialise; set gone to storage for n workers to get
 *  the set. */
typedef struct gcx_coded_stats {
    uint64_t rounds;        /**< Rounds completed here. */
    uint64_t late_dropped;  /**< Root: messages of finished rounds dropped. */
    uint64_t unneeded;      /**< Root: messages dropped as not needed
                                 (FR: a second reply of a group). */
    uint64_t early;         /**< Messages that arrived before their round
                                 was entered (staged in an internal buffer). */
    uint64_t skipped;       /**< Rounds with result->skipped = 1 (entered
                                 already decided, whatever the call). */
    uint64_t abstained;     /**< Rounds this rank (a worker) abstained from
                                 and said so: gcx_coded_abstain() calls
                                 that were not skipped. */
    /** Root (master-less: every rank): workers counted gone. Out, when not
     *  NULL: a worker set over n workers in the caller's storage. */
    uint64_t *gone;
    uint64_t gone_count;    /**< How many workers are counted gone. */
    uint64_t rounds_lost;   /**< Rounds completed as lost (lost_rounds). */
    uint64_t transfers_lost; /**< Root: contributions taken for decoding
                                 whose transfer then failed (the sender
                                 died mid-payload: counted gone) or was
                                 still landing at GCX_TIMEOUT (the sender
                                 stopped or starved mid-payload: given up
                                 for that round only); the round was
                                 decoded from the others when they
                                 could. */
    uint64_t in_place;      /**< Master-less allreduce: payloads received
                                 without a copy (kept in the transport's
                                 buffer and read there); the others were
                                 copied into an internal buffer. */
    /**
     * Not a counter: bytes of the blocks of B bytes that the object's
     * internal buffers hold now, in use or pooled (B = 4 count for the
     * star, 4 ceil(count / P), about n / P for n vector bytes, master-less;
     * payloads held in the transport's buffer are not counted). A pooled
     * buffer keeps its block, and the next internal buffer taken may carry
     * it, also one for a payload held in place or a header-only message;
     * so the level does not go down while the object lives (but for a block
     * left to a transfer to a dead peer) and can reach B times the most
     * internal buffers it has had in use at once, every message held
     * counting, not only those it needed a copy for. Master-less, with no
     * rank lost, on a rank that has never been more than k rounds behind
     * the others (rounds they finished that it had not; k <= A, the
     * window of gcx_coded_allreduce_create(), so take k = A when unknown):
     *
     *     buffer_bytes <= B ((k + 2) (3P + s) + s A)
     *
     * per round held (k + 1: those behind and the one the others are in)
     * its published chunk, up to P - 1 chunks taken for its decode, P - 1
     * decoded chunks received and up to P + s + 1 sends not done; one more
     * round of sends not done or of messages staged; s A kept copies (the
     * chunks of whose line it is a later owner, last A rounds). A lost owner
     * adds more (its chunk taken over, copies sent again): the bound is for
     * none lost. What needs a block of its own is the chunk published per
     * round behind (so at least k B while k rounds behind) and a round's P
     * sends; the rest is blocks that pooled buffers carry. Measured at
     * P = 6, s = 1, n = 400 KB (B = 66,668, bound 198 B at k = 8): 16 to
     * 19 B on a rank 8 rounds behind, 22 to 33 B once it caught up, 15 to
     * 25 B on the others (tests/multirank/coded,
     * CodedContract.BufferBytesOfALaggingRank); 46 B (3.1 MB) seen after
     * longer runs.
     */
    uint64_t buffer_bytes;
} gcx_coded_stats_t;

/**
 * Create a coded gather object; collective and blocking.
 *
 * @param comm      Communicator (must outlive the object).
 * @param params    Parameters; the code is borrowed.
 * @param[out] coded_p  New object, owned by the caller
 *                  (gcx_coded_destroy()).
 * @return GCX_OK; GCX_ERR_INVALID (bad root, n not matching the number of
 *         workers, bad GCX_STRAGGLER_RANKS); GCX_ERR_MISMATCH (ranks
 *         disagree on code, count or root); GCX_ERR_UNSUPPORTED (no free
 *         active-message id; more than 16384 workers, whose sets the
 *         star's RESULT header (three) and the master-less DECODED header
 *         (one) carry within UCX's active-message header limit, about
 *         8 KB; for master-less a chunk's s + 1 owners more than 64, see
 *         gcx_coded_allreduce_create(); an error logged says which);
 *         GCX_ERR_NOMEM; the communicator's error.
 */
GCX_API
gcx_status_t gcx_coded_create(gcx_comm_t *comm,
                              const gcx_coded_params_t *params,
                              gcx_coded_t **coded_p);

/**
 * Destroy the object; not collective. Transfers still in flight (to a dead
 * or lagging rank) are handed to the transport, which frees their internal
 * buffers when they end with success. Rounds in flight must be finished
 * (or the communicator failed). NULL is allowed.
 *
 * On the root, no barrier is needed before it: a lagging rank still pulls
 * the decoded sums of finished rounds out of the root's result buffers,
 * and gets them right. A buffer whose transfer has not ended when the
 * root's communicator is destroyed (or ended with an error) is kept, never
 * freed, until the root process exits, so a rank pulling it later still
 * gets the right sum.
 * Once the root process is gone, such a rank's round fails (GCX_ERR_PEER or
 * GCX_ERR_TIMEOUT); it never completes with wrong data. So the root's
 * process must not exit before every rank has its sums, and a master-less
 * object (gcx_coded_masterless()) has the rule of
 * gcx_coded_allreduce_destroy(): every rank meets the others before it
 * exits, as described there -- a barrier while every rank lives; after a
 * death, gcx_comm_shrink_ranks() with flags 0 and a barrier on the
 * survivors' communicator, then destroy.
 */
GCX_API
void gcx_coded_destroy(gcx_coded_t *coded);

/**
 * One round: contribute @p sendbuf (this worker's coded vector, count
 * floats) and receive the decoded sum into @p recvbuf (count floats).
 *
 * @param sendbuf  Ignored on a root that is not a worker. Read during the
 *                 call (non-root ranks copy it before sending, so a late
 *                 transfer never holds it); the root reads it until the
 *                 request completes.
 * @param recvbuf  Written until the request completes; must not overlap
 *                 sendbuf.
 * @param result   Filled on success, or NULL.
 * @param req_p    Request, or NULL to block.
 * @return GCX_OK (request posted, or round done when blocking);
 *         GCX_ERR_INVALID; GCX_ERR_UNDECODABLE, GCX_ERR_TIMEOUT,
 *         GCX_ERR_PEER when the round failed (communicator failed).
 */
GCX_API
gcx_status_t gcx_coded_gather(gcx_coded_t *coded, const float *sendbuf,
                              float *recvbuf, gcx_coded_result_t *result,
                              gcx_request_t **req_p);

/**
 * One round in which this rank takes part without contributing: the same
 * round numbering and FIFO order as gcx_coded_gather(), and the decoded sum
 * is received into @p recvbuf just the same. Use it when this worker's
 * message would not be what the code expects, e.g. a pipelined-coding
 * message reading a slot that was not recomputed (gcx_pgc_message_valid()).
 *
 * A worker sends the root a header-only void message instead of its
 * contribution (no straggler delay: it computes nothing). The root never
 * folds it in: the worker's bit is set in result->abstained, not in
 * arrived or used, and the root waits no longer for it. A root that is a
 * worker records its own abstention locally. Void messages follow the
 * rules of contributions: one of a finished round is dropped, one of a
 * round the root has not entered yet is remembered. A rank that enters a
 * round already decoded completes at once (result->skipped), as with
 * gcx_coded_gather(). On a root that is not a worker this is
 * gcx_coded_gather() (it contributes nothing anyway).
 *
 * When every worker that is not gone has arrived or abstained (more
 * generally: as soon as the arrived workers and those that may still
 * arrive cannot be decoded), the round fails at once on every rank with
 * GCX_ERR_UNDECODABLE, without waiting for GCX_TIMEOUT, and the
 * communicator fails as for any collective -- unless the object was
 * created with lost_rounds and the workers not gone could decode a round
 * without abstentions: then the round completes on every rank as lost
 * (result->lost) and the next one starts afresh. With lost_rounds, a round
 * some worker abstained from that is still not decodable when GCX_TIMEOUT
 * passes (a worker that could still make it decodable is alive but late:
 * stopped, starved, behind a slow link) is lost the same way, instead of
 * failing; the late worker is not counted gone. Without abstentions, a
 * round not decodable within GCX_TIMEOUT fails with GCX_ERR_TIMEOUT.
 *
 * @param recvbuf  Written until the request completes (count floats).
 * @param result   Filled on success, or NULL.
 * @param req_p    Request, or NULL to block.
 * @return As gcx_coded_gather().
 */
GCX_API
gcx_status_t gcx_coded_abstain(gcx_coded_t *coded, float *recvbuf,
                               gcx_coded_result_t *result,
                               gcx_request_t **req_p);

/**
 * Whether the decoded sum of this rank's next round has already arrived,
 * after one progress call: a training loop may then skip computing its
 * contribution (gcx_coded_gather() and gcx_coded_abstain() will not send,
 * and report result->skipped = 1).
 *
 * @param[out] ready_p  1 or 0.
 */
GCX_API
gcx_status_t gcx_coded_ready(gcx_coded_t *coded, int *ready_p);

/** 1 when the object runs the master-less algorithm, else 0 (star). */
GCX_API
int gcx_coded_masterless(const gcx_coded_t *coded);

/**
 * Worker index of @p rank, a rank of the object's communicator (not of the
 * world or the launcher: a split or shrunk communicator numbers its own):
 * @p rank itself, but with root_not_worker -1 for the root and rank - 1
 * above it. Worker w sends row w of the code's encoding and is worker w
 * of the result's worker sets. Master-less: always @p rank.
 */
GCX_API
int gcx_coded_worker(const gcx_coded_t *coded, int rank);

/** Counters so far. stats_p->gone is read first: when not NULL, the set
 *  of workers counted gone is written there (n workers). */
GCX_API
gcx_status_t gcx_coded_stats(const gcx_coded_t *coded,
                             gcx_coded_stats_t *stats_p);

/* ---- master-less coded allreduce ----------------------------------------- */

/**
 * Opaque master-less coded allreduce object (gcx_coded_allreduce()).
 *
 * The same rounds, codes and straggler tolerance as the coded gather, with
 * no root: the vector is cut into one chunk per rank (the ring's block
 * layout); every worker sends chunk c of its coded vector to rank c, which
 * decodes it from the first decodable set of chunks it receives and sends
 * the decoded chunk to every rank. Each link carries about two vectors per
 * round (as a ring allreduce does) instead of the root's P; every chunk has
 * one decoder, so every rank ends with the same bits. Late chunks of a
 * straggler are dropped unread, as the coded gather drops a late
 * contribution.
 *
 * Deaths: chunk c has owners c, c+1, ..., c+s; when the acting owner's
 * connection is lost, the next one decodes the chunk (or sends on the lost
 * owner's bits: no rank takes a chunk as final before every later owner
 * holds it), so up to s dead ranks cost no round and every rank still ends
 * with the same bits.
 *
 * Slow ranks: a rank owns its chunks of a round before it calls it. Each
 * time its process progresses (any gcx call, or gcx_progress() from a
 * thread while it computes) it decodes and publishes them from the other
 * workers' chunks, its own being one more straggler's, for up to A rounds
 * ahead of its calls (the window: GCX_CODED_AHEAD rounds when set; by
 * default as many as GCX_CODED_AHEAD_BYTES, 64 MB, of the vector hold, 8
 * to 256; the same on every rank, or the creation fails with
 * GCX_ERR_MISMATCH); the others do not wait for a rank still computing,
 * and such a rank can skip computing a round whose sum is already here
 * (gcx_coded_allreduce_ready(), gcx_coded_allreduce_abstain()). A rank
 * that computes for d seconds without any progress holds its chunks for
 * d; gcx's progress thread (GCX_PROGRESS_THREAD) makes that progress.
 *
 * Abstentions (gcx_coded_allreduce_abstain(), what pipelined codes need)
 * reach every chunk's owner as VOID messages; a round they leave
 * undecodable fails on every rank with GCX_ERR_UNDECODABLE, or with
 * lost_rounds completes on every rank as lost (the chunks' outcomes are
 * agreed as their bits are; recvbuf is then not written). Results: arrived
 * and abstained are what this rank saw as the owner of its chunk, used the
 * union of the sets the chunks were decoded from. What it does not do
 * (yet): a root that is not a worker; lost_rounds' GCX_TIMEOUT rule (a
 * round some worker abstained from that is still undecodable at
 * GCX_TIMEOUT fails here, where the star loses it).
 */
typedef struct gcx_coded_allreduce gcx_coded_allreduce_t;

/**
 * Create a master-less coded allreduce object; collective and blocking.
 *
 * @param comm      Communicator of n ranks, all workers (must outlive the
 *                  object): worker w is rank w of @p comm (its rank in this
 *                  communicator, whatever it is in the world), so rank w
 *                  passes row w of the code's encoding to
 *                  gcx_coded_allreduce(), and worker w of a result's sets
 *                  is rank w.
 * @param params    code (n workers, borrowed), count and lost_rounds (as
 *                  for gcx_coded_create()); root is ignored;
 *                  root_not_worker must be 0.
 * @param[out] car_p  New object (gcx_coded_allreduce_destroy()); NULL on
 *                  error.
 * @return GCX_OK; GCX_ERR_INVALID (bad parameters, code size not the
 *         communicator's, bad GCX_STRAGGLER_RANKS); GCX_ERR_MISMATCH (ranks
 *         disagree on code or count); GCX_ERR_UNSUPPORTED (no free
 *         active-message id; more than 16384 workers, whose set would not
 *         fit a message header; or a chunk's s + 1 owners more than 64;
 *         each with an error logged that says so); GCX_ERR_NOMEM; the
 *         communicator's error. Memory per round in progress: O(n) for
 *         the chunks' state plus O((s + 1) n) for the chunks this rank
 *         may own (about 56 KB at n = 1024, s = 1).
 */
GCX_API
gcx_status_t gcx_coded_allreduce_create(gcx_comm_t *comm,
                                        const gcx_coded_params_t *params,
                                        gcx_coded_allreduce_t **car_p);

/**
 * One round: contribute @p sendbuf (this worker's coded vector, count
 * floats) and receive the decoded sum into @p recvbuf, as
 * gcx_coded_gather(). Every rank calls it once per round, in the same order
 * as its other collectives on the communicator.
 *
 * result->used is the union of the workers the chunks were decoded from
 * (empty for a lost round), result->arrived the workers whose chunk reached
 * this rank's own chunk, result->abstained those whose VOID did,
 * result->skipped 1 when every chunk was final here before this rank sent
 * any (gcx_coded_result_t: a late entrant, whose own chunk it served ahead
 * from the others'; sendbuf is then not read), result->lost 1 for a round
 * lost (lost_rounds: recvbuf not written), result->arrival is NAN (no
 * root times the arrivals). With
 * lost_rounds every call must pass a result (GCX_ERR_INVALID otherwise).
 *
 * @param sendbuf  Read until the request completes (chunks are copied
 *                 into internal buffers before they are sent, and sent
 *                 again to a new owner when one is lost); must not overlap
 *                 recvbuf.
 * @param recvbuf  Written until the request completes.
 * @return GCX_OK; GCX_ERR_INVALID; GCX_ERR_UNDECODABLE (the workers left
 *         cannot decode a chunk), GCX_ERR_PEER (every owner of a chunk is
 *         lost),
 *         GCX_ERR_TIMEOUT, when the round failed (communicator failed).
 */
GCX_API
gcx_status_t gcx_coded_allreduce(gcx_coded_allreduce_t *car,
                                 const float *sendbuf, float *recvbuf,
                                 gcx_coded_result_t *result,
                                 gcx_request_t **req_p);

/**
 * One round without a contribution: this rank sends no chunk, a
 * header-only VOID to each chunk's owner instead (none for a round
 * gcx_coded_allreduce_ready() reported decoded: result->skipped), and
 * receives the decoded sum into @p recvbuf. The owners decode without this
 * rank's chunks if the code allows; a round the abstentions leave
 * undecodable fails on every rank at once with GCX_ERR_UNDECODABLE, or
 * with lost_rounds is lost on every rank (result->lost).
 *
 * @return As gcx_coded_allreduce().
 */
GCX_API
gcx_status_t gcx_coded_allreduce_abstain(gcx_coded_allreduce_t *car,
                                         float *recvbuf,
                                         gcx_coded_result_t *result,
                                         gcx_request_t **req_p);

/**
 * Whether the decoded sum of this rank's next round is all here already,
 * after one progress call (which also serves the chunks this rank owns
 * ahead of its call): a training loop may then skip computing its vector
 * and call gcx_coded_allreduce_abstain(). Either call then sends nothing
 * and reports result->skipped = 1.
 *
 * @param[out] ready_p  1 or 0.
 * @return GCX_OK; GCX_ERR_INVALID; the communicator's error.
 */
GCX_API
gcx_status_t gcx_coded_allreduce_ready(gcx_coded_allreduce_t *car,
                                       int *ready_p);

/**
 * Destroy; not collective, rounds must be finished. NULL is allowed. A rank
 * that finished its last round may still have messages of it on their way
 * to the others (its decoded chunks, its COMMITs; they go on after this
 * call while the communicator lives, but a process that exits at once can
 * cut them), and while the object lives it sends again, to a rank still in
 * a round, a lost owner's chunk that it holds as that chunk's next owner.
 * So meet the others before destroying and exiting. While every rank
 * lives, any collective on the communicator does (a barrier). After a
 * death none can complete (the dead rank is a member: GCX_ERR_PEER); the
 * survivors, each after its last round:
 * @code
 *   gcx_comm_t *alive;
 *   gcx_comm_shrink_ranks(comm, NULL, 0, 0, &alive); // flags 0: no revoke
 *   gcx_barrier(alive, NULL);
 *   gcx_coded_allreduce_destroy(car);
 *   gcx_comm_destroy(alive);
 *   gcx_comm_destroy(comm);
 * @endcode
 * The shrink returns once every survivor has called it, so has finished
 * its rounds; meanwhile the objects of those waiting in it serve the others
 * (the barrier then keeps a survivor from exiting while another is still
 * in the shrink). Not gcx_comm_shrink(): it revokes the communicator first,
 * which fails the last round of a survivor still in it (GCX_ERR_REVOKED)
 * and leaves that rank out. The survivors must reach the shrink within
 * GCX_TIMEOUT of each other (a rank not heard from by then is left out).
 * After a round failed (the communicator failed), gcx_comm_shrink() is the
 * recovery instead.
 */
GCX_API
void gcx_coded_allreduce_destroy(gcx_coded_allreduce_t *car);

/** Counters so far: every field of gcx_coded_stats_t but transfers_lost
 *  (0), for this rank (late_dropped, unneeded: chunks of the chunks it
 *  acts for; gone: its view). */
GCX_API
gcx_status_t gcx_coded_allreduce_stats(const gcx_coded_allreduce_t *car,
                                       gcx_coded_stats_t *stats_p);

#ifdef __cplusplus
}
#endif

#endif /* GCX_CODED_H */
