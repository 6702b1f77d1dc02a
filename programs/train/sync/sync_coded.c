/*
 * sync_coded.c - gradient coding sync modes: gc-fr, gc-cr (Tandon et al.,
 * ICML 2017) and pgc-fr, pgc-cr (pipelined gradient coding, Su & Li) over
 * the coded gather collective (gcx/coded.h).
 *
 * Idea. The step's global batch is cut into n = ranks equal partitions.
 * With a code tolerating s stragglers, worker i holds s+1 partitions and
 * sends one coded combination of their gradients; the root (rank 0 unless
 * root=) completes a step as soon as the arrived set is decodable, decodes
 * the sum of all partition gradients and sends it to every rank. A slow or
 * dead rank (up to s of them) therefore never stalls a step: when it gets
 * to a step that is already decoded it skips the computation and catches
 * up (gcx_coded_ready()).
 * - gc-*: classic gradient coding. Every step a worker computes all s+1
 *   of its partitions: (s+1)x the compute of dense data parallelism.
 * - pgc-*: pipelined. Every step t a worker computes ONE partition (slot
 *   t mod P, P = s+1) and sends the combination of its latest P partition
 *   gradients, one fresh and one at each staleness 1..s (gcx_pgc_*). A
 *   step thus computes about n/P fresh partitions (exactly for FR, where
 *   each group computes one, and for CR with P | n, where the holders of
 *   a partition compute it together), so steps uP..uP+P-1 of an epoch
 *   share the epoch's global batch u (sync->steps_per_batch = P): over
 *   them each holder computes each of its partitions of batch u once, and
 *   an epoch, one pass over the data, takes P times the steps of gc or
 *   dense. A worker that skipped a step has a slot older than the
 *   schedule says; it abstains (gcx_coded_abstain()) from every round
 *   whose message would read that slot, until the slot is recomputed, so
 *   the decoded gradient is always exactly what gcx_pgc_decode() says it
 *   is.
 * - ignore: the "ignore stragglers" baseline, no code. Every step a
 *   worker computes its own partition (its shard, as dense) and sends it;
 *   the root adds the first n-s to arrive and scales them by n/(n-s): an
 *   estimate of the sum, unbiased only on average over who straggles, at
 *   dense's compute. It runs on the coded gather with a CR code and
 *   WEIGHTED decoding, whose root folds the first n-s arrivals with the
 *   weight n/((n-s)(s+1)) whatever they hold; a worker sends one partition
 *   gradient instead of the s+1 of its assignment, so the decoded vector
 *   times s+1 is the rescaled sum.
 * The global batch statistics (loss sum, hits, samples) ride along as
 * three more floats of every partition's vector and are decoded with it,
 * so no step ever needs an allreduce that would wait for a straggler
 * (TRAIN_SYNC_BATCH_STATS). The decoded vector is the sum over partitions
 * of partition-mean gradients; dividing by n gives the global-batch mean.
 *
 * Master (master=1): the root is not a worker, as in the papers' setting
 * (a parameter server): the code has n = ranks - 1 workers, the other
 * ranks in rank order (gcx_coded_params_t.root_not_worker); the master
 * computes no gradient, sleeps no straggler delay, decodes, and applies
 * the decoded update like every rank, so the weights stay identical.
 * The loop gives the global batch to the n workers only
 * (sync->workers, sync->worker). Without it the root is worker 0 too and
 * decodes only after its own computation and delay.
 *
 * Dead workers: the root knows which workers the coded gather counts gone
 * (gcx_coded_stats()); coded_survivors() tells the loop, whose weight
 * checks, evaluation and byte sums then skip them, so a run that lost up
 * to s workers still ends checked (the steps never needed them).
 *
 * Master-less (GCX_CODED_ALGO=masterless, or auto when it is cheaper):
 * gcx_coded_gather() runs gcx_coded_allreduce, where every rank decodes a
 * chunk of every round. A rank still computing serves its chunks ahead of
 * its own call only while its process progresses, so the coded modes open
 * the communicator with gcx's progress thread (TRAIN_SYNC_PROGRESS_THREAD:
 * it runs when messages arrive): a slow rank does not hold the others
 * back, and skips the steps decoded without it like any coded worker
 * (gcx_coded_ready()).
 *
 * Cost per step: compute of s+1 partitions (gc) or 1 (pgc) of
 * global/n samples each (per epoch both compute (s+1)x what dense does:
 * pgc in P times as many steps); every worker sends 4(N+3) bytes once,
 * the root receives at most the n-s it needs and sends 4(N+3) bytes to
 * each other rank (the decoded sum goes straight from the root to
 * everyone, no tree: any relaying rank could be the straggler). So the
 * root's link carries (n-s) + (n-1) vectors per step against 2(n-1)/n for
 * a ring allreduce: coding buys straggler tolerance with bandwidth at the
 * root.
 */
#include "sync/sync.h"
#include "util.h"

#include <gcx/coded.h>
#include <gcx/coding.h>
#include <gcx/wset.h>

#include <stdlib.h>
#include <string.h>

#define CODED_EXTRA 3 /* loss sum, hits, samples after the gradient */

typedef struct coded_sync {
    gcx_code_t *code;
    gcx_pgc_t *pgc;   /* pipelined modes only */
    gcx_coded_t *coded;
    int worker;       /* this rank's worker index; -1: the master */
    int root;         /* the rank that decodes */
    int nparts;       /* n: partitions of the global batch */
    int load;         /* buffers: s+1 partitions (gc) or slots (pgc) */
    size_t count;     /* floats per vector: gradient + CODED_EXTRA */
    float **bufs;     /* gc: partition k of the assignment; pgc: slot l */
    float *msg;       /* the coded message */
    float *sum;       /* the decoded sum */
    double *coeffs;
    int *parts;       /* gc: the assignment */
    int nassigned;
    int64_t *slot_steps; /* pgc: step each slot was computed at, -1 never */
    uint64_t *gone;   /* the root: workers counted gone (a worker set over
                         nparts workers, gcx/wset.h), for coded_survivors */
    int ignore;       /* ignore: own partition only, first n-s rescaled */
    double scale;     /* decoded vector x scale = sum estimate (ignore: s+1) */
    long steps, skipped, abstained, lost; /* for the summary line of fini */
    long computed;    /* partition gradients this rank computed */
} coded_sync_t;

static void coded_free(coded_sync_t *cs)
{
    int k;

    if (cs == NULL) {
        return;
    }
    gcx_coded_destroy(cs->coded);
    gcx_pgc_destroy(cs->pgc);
    gcx_code_destroy(cs->code);
    for (k = 0; cs->bufs != NULL && k < cs->load; k++) {
        train_ffree(cs->bufs[k]);
    }
    free(cs->bufs);
    train_ffree(cs->msg);
    train_ffree(cs->sum);
    free(cs->coeffs);
    free(cs->parts);
    free(cs->slot_steps);
    free(cs->gone);
    free(cs);
}

/* Common init: kind = FR or CR, pipelined or not; ignore: see the top. */
static gcx_status_t coded_init(train_sync_t *sync, train_kv_t *args,
                               gcx_code_kind_t kind, int pipelined, int ignore)
{
    const char *mode = sync->ops->name, *decoding;
    gcx_code_params_t cp;
    gcx_coded_params_t params;
    coded_sync_t *cs;
    gcx_status_t status;
    long s, root, master = 0;
    int k, n;

    if (sync->comm->comm == NULL || sync->comm->size < 2) {
        train_error("--sync %s needs at least 2 ranks (one process has "
                    "nothing to code)",
                    mode);
        return GCX_ERR_INVALID;
    }
    status = train_kv_long(args, mode, "master", 0, 0, 1, &master);
    n = sync->comm->size - (int)master; /* the workers */
    if (status == GCX_OK) {
        status = train_kv_long(args, mode, "s", 1, 0, n - 1, &s);
    }
    if (status == GCX_OK) {
        status = train_kv_long(args, mode, "root", 0, 0, sync->comm->size - 1,
                               &root);
    }
    if (status != GCX_OK) {
        return status;
    }
    decoding = ignore ? "weighted" : train_kv_str(args, "decoding", "exact");
    memset(&cp, 0, sizeof(cp));
    cp.kind = kind;
    cp.n = n;
    cp.s = (int)s;
    if (strcmp(decoding, "exact") == 0) {
        cp.decoding = GCX_CODE_DECODE_EXACT;
    } else if (strcmp(decoding, "weighted") == 0 && kind == GCX_CODE_CR) {
        cp.decoding = GCX_CODE_DECODE_WEIGHTED;
    } else {
        train_error("--sync %s: decoding=%s: expected exact%s", mode, decoding,
                    kind == GCX_CODE_CR ? " or weighted" : "");
        return GCX_ERR_INVALID;
    }
    cs = calloc(1, sizeof(*cs));
    if (cs == NULL) {
        return GCX_ERR_NOMEM;
    }
    status = gcx_code_create(&cp, &cs->code);
    if (status != GCX_OK) {
        train_error("--sync %s: no code for n = %d, s = %ld: %s", mode, cp.n,
                    s, gcx_strerror(status));
        goto err;
    }
    if (pipelined) {
        status = gcx_pgc_create(cs->code, &cs->pgc);
        if (status != GCX_OK) {
            goto err;
        }
        cs->load = gcx_pgc_period(cs->pgc);
    } else {
        cs->load = gcx_code_load(cs->code);
    }
    cs->nparts = cp.n;
    cs->ignore = ignore;
    cs->scale = ignore ? (double)(s + 1) : 1.0;
    cs->count = sync->n + CODED_EXTRA;
    cs->bufs = calloc((size_t)cs->load, sizeof(*cs->bufs));
    cs->coeffs = calloc((size_t)cs->load, sizeof(*cs->coeffs));
    cs->parts = calloc((size_t)cs->load, sizeof(*cs->parts));
    cs->slot_steps = malloc((size_t)cs->load * sizeof(*cs->slot_steps));
    cs->gone = calloc(GCX_WSET_WORDS(cp.n), sizeof(*cs->gone));
    cs->msg = train_falloc(cs->count);
    cs->sum = train_falloc(cs->count);
    status = GCX_ERR_NOMEM;
    if (cs->bufs == NULL || cs->coeffs == NULL || cs->parts == NULL ||
        cs->slot_steps == NULL || cs->gone == NULL || cs->msg == NULL ||
        cs->sum == NULL) {
        goto err;
    }
    for (k = 0; k < cs->load; k++) {
        cs->slot_steps[k] = -1;
        cs->bufs[k] = train_falloc(cs->count);
        if (cs->bufs[k] == NULL) {
            goto err;
        }
    }
    memset(&params, 0, sizeof(params));
    params.code = cs->code;
    params.count = cs->count;
    params.root = (int)root;
    params.root_not_worker = (int)master;
    /* see coded_exchange; only pipelined workers abstain, so only they can
     * leave a round to lose (star and master-less alike) */
    params.lost_rounds = pipelined;
    cs->root = (int)root;
    status = gcx_coded_create(sync->comm->comm, &params, &cs->coded);
    if (status == GCX_OK && !ignore) {
        /* the loop's checks, evaluations and byte sums go over the live
         * ranks through the root (coded_survivors): its pair channels */
        status = train_comm_live_open(sync->comm, (int)root);
    }
    if (status != GCX_OK) {
        goto err;
    }
    cs->worker = gcx_coded_worker(cs->coded, sync->comm->rank);
    if (cs->worker >= 0) {
        status = gcx_code_assignment(cs->code, cs->worker, cs->parts,
                                     cs->coeffs, &cs->nassigned);
        if (status != GCX_OK) {
            goto err;
        }
    }
    sync->workers = n;
    sync->worker = cs->worker;
    sync->priv = cs;
    if (pipelined) {
        /* a step computes the partitions of one slot of P: P steps per
           global batch, or an epoch would see 1/P of the data */
        sync->steps_per_batch = cs->load;
    }
    return GCX_OK;

err:
    coded_free(cs);
    return status;
}

/* Gradient of partition @p part into @p buf, its statistics after it. */
static gcx_status_t coded_compute(coded_sync_t *cs, const train_grad_src_t *src,
                                  size_t n, int part, float *buf)
{
    train_batch_stats_t bs;
    gcx_status_t status;

    status = src->compute(src->ctx, part, cs->nparts, buf, &bs);
    if (status != GCX_OK) {
        return status;
    }
    cs->computed++;
    buf[n + 0] = (float)bs.loss_sum;
    buf[n + 1] = (float)bs.hits;
    buf[n + 2] = (float)bs.samples;
    return GCX_OK;
}

/*
 * This step's contribution: compute what the schedule asks (unless the
 * round is already decoded: then nothing), and say whether the message in
 * cs->msg is usable (*send_p = 1) or the rank must abstain (0).
 */
static gcx_status_t coded_contribute(train_sync_t *sync, coded_sync_t *cs,
                                     const train_grad_src_t *src, int *send_p)
{
    const float *const *bufs = (const float *const *)cs->bufs;
    int ready = 0, slot, part, k, valid;
    gcx_status_t status;

    *send_p = 0;
    if (cs->worker < 0) { /* the master computes nothing; sends nothing */
        *send_p = 1;
        return GCX_OK;
    }
    status = gcx_coded_ready(cs->coded, &ready);
    if (status != GCX_OK || ready) {
        return status; /* decoded without us: skip the computation */
    }
    if (cs->ignore) { /* its own partition, as it is */
        status = coded_compute(cs, src, sync->n, cs->worker, cs->msg);
        if (status == GCX_OK) {
            train_sync_delay(sync);
            *send_p = 1;
        }
        return status;
    }
    if (cs->pgc == NULL) { /* classic: all assigned partitions, fresh */
        for (k = 0; k < cs->nassigned; k++) {
            status = coded_compute(cs, src, sync->n, cs->parts[k], cs->bufs[k]);
            if (status != GCX_OK) {
                return status;
            }
        }
        train_sync_delay(sync);
        *send_p = 1;
        return gcx_code_encode(cs->nassigned, cs->coeffs, bufs, cs->count,
                               cs->msg);
    }
    status = gcx_pgc_compute(cs->pgc, cs->worker, sync->step, &slot, &part);
    if (status != GCX_OK) {
        return status;
    }
    if (part >= 0) {
        status = coded_compute(cs, src, sync->n, part, cs->bufs[slot]);
        if (status != GCX_OK) {
            return status;
        }
        cs->slot_steps[slot] = sync->step;
        train_sync_delay(sync);
    }
    status = gcx_pgc_message_valid(cs->pgc, cs->worker, sync->step,
                                   cs->slot_steps, &valid);
    if (status != GCX_OK || !valid) {
        return status; /* a skipped slot is still read: abstain */
    }
    status = gcx_pgc_coeffs(cs->pgc, cs->worker, sync->step, cs->coeffs);
    if (status != GCX_OK) {
        return status;
    }
    *send_p = 1;
    return gcx_code_encode(cs->load, cs->coeffs, bufs, cs->count, cs->msg);
}

static gcx_status_t coded_exchange(train_sync_t *sync, float *grad,
                                   const train_grad_src_t *src,
                                   train_sync_stats_t *stats)
{
    coded_sync_t *cs = sync->priv;
    gcx_coded_result_t result;
    double inv = cs->scale / (double)cs->nparts;
    double bytes = 4.0 * (double)cs->count;
    int send, size = sync->comm->size;
    gcx_status_t status;
    size_t i;

    status = coded_contribute(sync, cs, src, &send);
    if (status != GCX_OK) {
        return status;
    }
    /* only the scalars are read: no worker sets, no arrival times */
    memset(&result, 0, sizeof(result));
    status = send ? gcx_coded_gather(cs->coded, cs->msg, cs->sum, &result,
                                     NULL)
                  : gcx_coded_abstain(cs->coded, cs->sum, &result, NULL);
    if (status != GCX_OK) {
        return status;
    }
    cs->steps++;
    cs->skipped += result.skipped;
    cs->abstained += !send && !result.skipped;
    if (result.lost) {
        /* abstentions left the step undecodable (pgc: a dead worker's
         * group-mate still had a skipped slot in its message): every rank
         * got the same verdict, so every rank steps with a zero gradient
         * and the weights stay equal */
        cs->lost++;
        memset(cs->sum, 0, cs->count * sizeof(*cs->sum));
    }
    for (i = 0; i < sync->n; i++) {
        grad[i] = (float)((double)cs->sum[i] * inv);
    }
    stats->batch.loss_sum = cs->scale * cs->sum[sync->n + 0];
    stats->batch.hits = cs->scale * cs->sum[sync->n + 1];
    stats->batch.samples = cs->scale * cs->sum[sync->n + 2];
    if (sync->comm->rank == cs->root) {
        stats->bytes_sent = bytes * (double)(size - 1);
    } else {
        stats->bytes_sent = send && !result.skipped ? bytes : 0;
    }
    /* a dense run of this computation: a ring over the workers */
    stats->dense_bytes =
        cs->worker < 0 ? 0 : train_sync_ring_bytes(sync->n, sync->workers);
    stats->cf = 1.0;
    stats->gain = 1.0;
    return GCX_OK;
}

static void coded_fini(train_sync_t *sync)
{
    coded_sync_t *cs = sync->priv;

    if (cs != NULL && cs->steps > 0 && cs->worker < 0) {
        train_info("%s: this rank is the master, not a worker: it decoded "
                   "%ld steps of %d workers and computed %ld partition "
                   "gradients",
                   sync->ops->name, cs->steps, sync->workers, cs->computed);
    } else if (cs != NULL && cs->steps > 0) {
        train_info("%s: %ld of %ld steps were decoded without this rank's "
                   "gradient (whether it computed it or not) and it "
                   "abstained from %ld (a skipped slot was still in its "
                   "message); it computed %ld partition gradients; %ld "
                   "steps were lost (undecodable: a zero gradient)",
                   sync->ops->name, cs->skipped, cs->steps, cs->abstained,
                   cs->computed, cs->lost);
    }
    coded_free(sync->priv);
    sync->priv = NULL;
}

/*
 * The root decodes and knows which workers it counts gone; worker w is
 * rank w, or with a master the w-th rank that is not the root.
 */
static void coded_survivors(const train_sync_t *sync, int *root_p,
                            uint64_t *gone)
{
    const coded_sync_t *cs = sync->priv;
    gcx_coded_stats_t st;
    int r;

    *root_p = cs->root;
    gcx_wset_clear(gone, sync->comm->size);
    if (sync->comm->rank != cs->root) {
        return;
    }
    memset(&st, 0, sizeof(st));
    st.gone = cs->gone; /* nparts workers */
    if (gcx_coded_stats(cs->coded, &st) != GCX_OK) {
        return;
    }
    for (r = 0; r < sync->comm->size; r++) {
        int w = gcx_coded_worker(cs->coded, r);

        if (w >= 0 && gcx_wset_has(cs->gone, w)) {
            gcx_wset_add(gone, r);
        }
    }
}

static gcx_status_t gc_fr_init(train_sync_t *sync, train_kv_t *args)
{
    return coded_init(sync, args, GCX_CODE_FR, 0, 0);
}

static gcx_status_t gc_cr_init(train_sync_t *sync, train_kv_t *args)
{
    return coded_init(sync, args, GCX_CODE_CR, 0, 0);
}

static gcx_status_t pgc_fr_init(train_sync_t *sync, train_kv_t *args)
{
    return coded_init(sync, args, GCX_CODE_FR, 1, 0);
}

static gcx_status_t pgc_cr_init(train_sync_t *sync, train_kv_t *args)
{
    return coded_init(sync, args, GCX_CODE_CR, 1, 0);
}

static gcx_status_t ignore_init(train_sync_t *sync, train_kv_t *args)
{
    return coded_init(sync, args, GCX_CODE_CR, 0, 1);
}

#define CODED_FLAGS                                                            \
    (TRAIN_SYNC_OWN_GRADIENT | TRAIN_SYNC_BATCH_STATS |                        \
     TRAIN_SYNC_PROGRESS_THREAD)

const train_sync_ops_t train_sync_gc_fr = {
    .name = "gc-fr",
    .help = "gradient coding, fractional repetition: s+1 partitions per "
            "rank, the fastest decodable set wins; s=1, root=0, master=0|1 "
            "(1: the root is a master, not a worker)",
    .flags = CODED_FLAGS,
    .init = gc_fr_init,
    .exchange = coded_exchange,
    .fini = coded_fini,
    .survivors = coded_survivors,
};

const train_sync_ops_t train_sync_gc_cr = {
    .name = "gc-cr",
    .help = "gradient coding, cyclic repetition; s=1, root=0, master=0|1, "
            "decoding=exact|weighted",
    .flags = CODED_FLAGS,
    .init = gc_cr_init,
    .exchange = coded_exchange,
    .fini = coded_fini,
    .survivors = coded_survivors,
};

const train_sync_ops_t train_sync_pgc_fr = {
    .name = "pgc-fr",
    .help = "pipelined gradient coding (FR): one partition per rank per "
            "step, stale up to s; an epoch takes s+1 times the steps; s=1, "
            "root=0, master=0|1",
    .flags = CODED_FLAGS,
    .init = pgc_fr_init,
    .exchange = coded_exchange,
    .fini = coded_fini,
    .survivors = coded_survivors,
};

const train_sync_ops_t train_sync_pgc_cr = {
    .name = "pgc-cr",
    .help = "pipelined gradient coding (CR): as pgc-fr, an epoch takes "
            "s+1 times the steps; s=1, root=0, master=0|1, "
            "decoding=exact|weighted",
    .flags = CODED_FLAGS,
    .init = pgc_cr_init,
    .exchange = coded_exchange,
    .fini = coded_fini,
    .survivors = coded_survivors,
};

const train_sync_ops_t train_sync_ignore = {
    .name = "ignore",
    .help = "ignore stragglers: own partition, the root sums the first "
            "n-s to arrive x n/(n-s) (inexact); s=1, root=0, master=0|1",
    .flags = CODED_FLAGS,
    .init = ignore_init,
    .exchange = coded_exchange,
    .fini = coded_fini,
};
