/*
 * sync.h - sync modes: how the ranks turn their local gradients into the one
 * gradient that every rank applies.
 *
 * A sync mode is a small hand-written vtable {name, help, init, exchange,
 * fini}. Adding one (a static compressor at a fixed CF, GraVAC, gradient
 * coding, ...) is one new file sync_<name>.c defining a train_sync_ops_t,
 * one row in the table of sync.c and one line in meson.build.
 *
 * Options reach a mode as "name:key=value,key=value" (--sync topk:cf=100);
 * the mode reads them with train_kv_*() in init, and any key it did not read
 * is reported as an error, so a typo never passes silently.
 */
#ifndef GCX_TRAIN_SYNC_H
#define GCX_TRAIN_SYNC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <gcx/compress.h>
#include <gcx/status.h>

#include "ckpt.h"
#include "sync/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRAIN_KV_MAX 16

/** Parsed "key=value" options of a sync mode. */
typedef struct train_kv {
    int n;
    char key[TRAIN_KV_MAX][32];
    char val[TRAIN_KV_MAX][64];
    int used[TRAIN_KV_MAX]; /**< Set by the getters. */
} train_kv_t;

/** Parse "k=v,k=v" (NULL or "" gives none). */
gcx_status_t train_kv_parse(const char *text, train_kv_t *kv);

/**
 * Getters: set *out_p to the value of @p key, or to @p def when absent.
 * A value that does not parse or lies outside [min, max] is an error that
 * names the mode, the key and the range.
 */
gcx_status_t train_kv_double(train_kv_t *kv, const char *mode, const char *key,
                             double def, double min, double max, double *out_p);
gcx_status_t train_kv_long(train_kv_t *kv, const char *mode, const char *key,
                           long def, long min, long max, long *out_p);
/** String value (pointer into kv) or @p def. */
const char *train_kv_str(train_kv_t *kv, const char *key, const char *def);

/** Sums over some samples of a step: loss, correct predictions, count. */
typedef struct train_batch_stats {
    double loss_sum; /**< Sum of the samples' losses. */
    double hits;     /**< Samples predicted right. */
    double samples;
} train_batch_stats_t;

/** What one exchange cost and kept; reported per step. */
typedef struct train_sync_stats {
    double bytes_sent;  /**< Bytes this rank sent for the exchange. */
    double dense_bytes; /**< Bytes a dense ring allreduce would have sent. */
    double cf;          /**< Compression factor (dense = 1). */
    double gain;        /**< ||sent||^2 / ||gradient||^2 (dense = 1). */
    /**
     * TRAIN_SYNC_BATCH_STATS modes: the global batch's statistics as the
     * exchange combined them (the same on every rank).
     */
    train_batch_stats_t batch;
} train_sync_stats_t;

/**
 * Gradient source handed to exchange(), for modes that need gradients of
 * other parts of the step's global batch (gradient coding: a worker computes
 * the parts of its s+1 partitions).
 */
typedef struct train_grad_src {
    /**
     * Mean-loss gradient over part @p part of @p nparts equal, contiguous
     * parts of this step's global batch, at the current weights. Writes n
     * floats into @p grad and the part's sums into *stats_p. Does not
     * sleep for --straggler (see train_sync_delay()).
     */
    gcx_status_t (*compute)(void *ctx, int part, int nparts, float *grad,
                            train_batch_stats_t *stats_p);
    void *ctx;
} train_grad_src_t;

typedef struct train_sync train_sync_t;

/** Flags of a mode. */
enum {
    /**
     * The loop does not compute the rank's gradient before exchange();
     * the mode computes what it needs through the gradient source.
     */
    TRAIN_SYNC_OWN_GRADIENT = 1u << 0,
    /**
     * The mode combines the global batch statistics itself (into
     * train_sync_stats_t::batch), so the loop does not allreduce them: a
     * per-step allreduce would wait for every rank, stragglers included.
     */
    TRAIN_SYNC_BATCH_STATS = 1u << 1,
    /**
     * The mode needs progress while the rank computes (a master-less coded
     * round's owner serves its chunks ahead of its own call): the
     * communicator is opened with gcx's progress thread
     * (GCX_PROGRESS_THREAD=y, unless the variable is set).
     */
    TRAIN_SYNC_PROGRESS_THREAD = 1u << 2,
};

typedef struct train_sync_ops {
    const char *name;
    const char *help; /**< One line, with its options, for --help. */
    unsigned flags;   /**< TRAIN_SYNC_* */
    /**
     * Set up sync->priv for gradients of sync->n floats on sync->comm.
     * Reads its options from @p args. Collective: all ranks call it.
     */
    gcx_status_t (*init)(train_sync_t *sync, train_kv_t *args);
    /**
     * In: @p grad holds this rank's mean gradient over its shard of the
     * step's global batch (unless TRAIN_SYNC_OWN_GRADIENT).
     * Out: @p grad holds the gradient to apply, bit-identical on every rank.
     * Collective and blocking; fills @p stats.
     */
    gcx_status_t (*exchange)(train_sync_t *sync, float *grad,
                             const train_grad_src_t *src,
                             train_sync_stats_t *stats);
    /**
     * Optional (a mode without TRAIN_SYNC_OWN_GRADIENT): the slice
     * [off, off + len) of @p grad, the vector exchange() then gets, is this
     * rank's final gradient there. Called during the backward pass, from
     * the last layer to the first (train_net_set_hook), in the same order
     * on every rank; the mode may start exchanging the slice (a
     * non-blocking collective that runs while the layers below compute,
     * as PyTorch DDP's buckets do); exchange() finishes what was started
     * and the rest. NULL: everything waits for exchange().
     */
    gcx_status_t (*grad_ready)(train_sync_t *sync, float *grad, size_t off,
                               size_t len);
    /** Release sync->priv. Not collective. */
    void (*fini)(train_sync_t *sync);
    /**
     * Checkpoints (--save/--resume). save appends the mode's state (what a
     * resumed run needs to continue bit-identically: residuals, a
     * controller) to @p out; load reads it back from @p in, checking what
     * it reads. NULL save: the mode cannot be checkpointed (coded modes:
     * their rounds and stragglers' late messages are in flight). Not
     * collective.
     */
    gcx_status_t (*save)(train_sync_t *sync, train_blob_t *out);
    gcx_status_t (*load)(train_sync_t *sync, train_blob_t *in);
    /**
     * Optional, for a mode that goes on when ranks die (coded: up to s
     * workers). Sets *root_p to the rank that knows which ranks are gone
     * and writes them to @p gone: caller storage for a rank set over the
     * comm's size ranks (GCX_WSET_WORDS(size) words in gcx/wset.h's
     * layout, bit r % 64 of word r / 64 for rank r), cleared first and
     * filled on that rank only. The loop's own reductions (weight checks,
     * evaluation, byte sums) then run over the live ranks through that rank
     * (train_comm_allreduce_live()) instead of waiting for a dead one;
     * the mode's init must have opened their channels
     * (train_comm_live_open() with the same root).
     */
    void (*survivors)(const train_sync_t *sync, int *root_p,
                      uint64_t *gone);
} train_sync_ops_t;

/** An instance of a sync mode. */
struct train_sync {
    const train_sync_ops_t *ops;
    train_comm_t *comm; /**< Ranks taking part. */
    size_t n;           /**< Gradient length in floats. */
    long step;          /**< Global step, set by the loop before exchange. */
    double delay_s;     /**< --straggler R:MS delay of this rank per step. */
    /**
     * --straggler exp:M: M, the mean delay as a multiple of the compute
     * time (0: off), and the seed of the draws (set by the loop).
     */
    double straggler_exp;
    uint64_t straggler_seed;
    /** exp:M delays of this step's computations, not yet slept. */
    double pending_delay_s;
    /**
     * Seconds this step spent computing gradients and sleeping for
     * --straggler (train_sync_computed() and train_sync_delay() add to it;
     * the loop resets it): a TRAIN_SYNC_OWN_GRADIENT mode's compute, which
     * the loop reports apart from its exchange.
     */
    double busy_s;
    void *priv;         /**< The mode's state. */
    /**
     * Steps that share one global batch (1; init may change it). A mode
     * whose step computes only 1/k of the global batch's parts, each part
     * once in every k consecutive steps (pipelined gradient coding: k = its
     * period P), sets k: an epoch then has k times as many steps, and
     * steps uk..uk+k-1 of an epoch all read the epoch's global batch u, so
     * that an epoch still computes every sample once.
     */
    int steps_per_batch;
    /**
     * Ranks that compute gradients, and this rank's index among them (-1:
     * it computes none). comm->size and comm->rank unless init changes
     * them: a coded mode with a master that is not a worker (master=1)
     * has size - 1 workers, the master -1. The global batch is workers x
     * --batch; worker w takes part w of it, and the --straggler exp:M
     * draws are keyed by the worker index.
     */
    int workers;
    int worker;
};

/** The modes compiled in. */
extern const train_sync_ops_t train_sync_dense;
extern const train_sync_ops_t train_sync_topk;
extern const train_sync_ops_t train_sync_dgc;
extern const train_sync_ops_t train_sync_redsync;
extern const train_sync_ops_t train_sync_randomk;
extern const train_sync_ops_t train_sync_gravac;
extern const train_sync_ops_t train_sync_gc_fr;
extern const train_sync_ops_t train_sync_gc_cr;
extern const train_sync_ops_t train_sync_pgc_fr;
extern const train_sync_ops_t train_sync_pgc_cr;
extern const train_sync_ops_t train_sync_ignore;

/** Find a mode by name; NULL if none. */
const train_sync_ops_t *train_sync_find(const char *name);

/** The TRAIN_SYNC_* flags of the mode @p spec names ("name" or
 *  "name:k=v,..."); 0 for an unknown name (train_sync_create says so). */
unsigned train_sync_flags(const char *spec);

/** Print "  name  help" for every mode. */
void train_sync_list(FILE *file);

/**
 * Create the mode named by @p spec ("name" or "name:k=v,..."), for gradients
 * of @p n floats. Collective.
 */
gcx_status_t train_sync_create(const char *spec, train_comm_t *comm, size_t n,
                               train_sync_t *sync_p);

/** Finish a sync instance. */
void train_sync_destroy(train_sync_t *sync);

/**
 * Sleep sync->delay_s (a --straggler R:MS rank) plus the exp:M delays
 * that train_sync_computed() drew since the last call (nothing otherwise).
 * Called once per step in which this rank computes gradients: by the
 * loop, or by TRAIN_SYNC_OWN_GRADIENT modes after they computed.
 */
void train_sync_delay(train_sync_t *sync);

/**
 * Sleep only the exp:M delays drawn since the last call: the end of a step
 * whose sync->delay_s the loop already slept before the rank's first
 * gradient slice went out (a mode with grad_ready).
 */
void train_sync_delay_drawn(train_sync_t *sync);

/**
 * The gradient source computed part @p part of this step (sync->step) in
 * @p compute_s seconds: with --straggler exp:M, add
 * M * compute_s * train_straggler_draw(seed, step, sync->worker, part) to
 * what the next train_sync_delay() sleeps. So a step's delay has the mean M x its
 * compute time: M x one partition's for dense and pgc, (s+1)x that for gc.
 */
void train_sync_computed(train_sync_t *sync, int part, double compute_s);

/**
 * A unit-mean exponential draw, a pure function of its arguments: every
 * run with the same seed delays the same (step, rank, part) by the same
 * multiple of its compute time. -log(U) with U uniform in (0, 1) from a
 * counter-based hash (SplitMix64 finalizer over the four inputs).
 */
double train_straggler_draw(uint64_t seed, long step, int rank, int part);

/**
 * Checkpoint helpers for the modes: an error-feedback state (residual, and
 * velocity when it has one) as its floats; load checks the sizes and tells
 * the state its arrays were written (gcx_feedback_touch). Also the
 * save/load of a mode with no state of its own (dense).
 */
void train_sync_put_feedback(train_blob_t *out, gcx_feedback_t *fb);
gcx_status_t train_sync_get_feedback(train_blob_t *in, gcx_feedback_t *fb,
                                     const char *mode);
gcx_status_t train_sync_save_nothing(train_sync_t *sync, train_blob_t *out);
gcx_status_t train_sync_load_nothing(train_sync_t *sync, train_blob_t *in);

/** Bytes a ring allreduce of @p n floats sends per rank: 2(P-1)/P * 4n. */
double train_sync_ring_bytes(size_t n, int size);

#ifdef __cplusplus
}
#endif

#endif
