/*
 * sync_dense.c - dense sync: one allreduce (average) of the whole gradient,
 * started bucket by bucket during the backward pass.
 *
 * The reference every compressed or coded mode is measured against. With
 * overlap=1 (the default) the layers' gradient slices are gathered, from
 * the last layer down, into buckets of at least bucket_kb KB (a bucket is
 * one contiguous range: the slices come in descending order, each ending
 * where the previous began), and each full bucket's allreduce is posted at
 * once (non-blocking, in place) while the layers below still compute, as
 * PyTorch DDP's buckets are; exchange() posts the rest and waits for all.
 * Those allreduces advance while the rank computes only through gcx's
 * progress thread, which init turns on (unless GCX_PROGRESS_THREAD is set).
 * Every rank posts the same buckets in the same order (they follow the
 * network's shape), so the communicator's FIFO matches them up.
 *
 * Cost: a ring allreduce of n floats in all, 2(P-1)/P * 4n bytes sent per
 * rank, and ~2(P-1) latency terms per bucket (one per layer at most:
 * TRAIN_NET_MAX_LAYERS); CF and gain are 1 by definition. Options:
 * overlap=0|1, bucket_kb=K (0: one bucket per layer).
 */
#include "sync/sync.h"
#include "nn/net.h"
#include "util.h"

#include <stdlib.h>

typedef struct dense_state {
    int overlap;
    size_t bucket;     /* floats a bucket gathers before it is posted */
    size_t pend_off;   /* the slices ready, not posted: [pend_off, ...) */
    size_t pend_len;
    size_t posted_off; /* lowest offset posted this step (n: none) */
    int nreqs;
    gcx_request_t *reqs[TRAIN_NET_MAX_LAYERS + 1];
} dense_state_t;

/* Wait for and free every request posted this step; the first failure. */
static gcx_status_t dense_wait_all(dense_state_t *ds)
{
    gcx_status_t status = GCX_OK, st;
    int i;

    for (i = 0; i < ds->nreqs; i++) {
        st = gcx_wait(ds->reqs[i]);
        if (st != GCX_OK && status == GCX_OK) {
            status = st;
        }
        gcx_request_free(ds->reqs[i]);
        ds->reqs[i] = NULL;
    }
    ds->nreqs = 0;
    return status;
}

/* Post the allreduce of the pending slices. */
static gcx_status_t dense_post(train_sync_t *sync, float *grad)
{
    dense_state_t *ds = sync->priv;
    gcx_status_t status;

    if (ds->pend_len == 0) {
        return GCX_OK;
    }
    if (ds->nreqs == TRAIN_NET_MAX_LAYERS + 1) {
        train_error("dense: more than %d buckets in a step",
                    TRAIN_NET_MAX_LAYERS + 1);
        return GCX_ERR_INVALID;
    }
    status = gcx_allreduce(sync->comm->comm, GCX_IN_PLACE,
                           grad + ds->pend_off, ds->pend_len, GCX_DT_F32,
                           GCX_OP_AVG, &ds->reqs[ds->nreqs]);
    if (status != GCX_OK) {
        train_error("dense: allreduce of %zu floats at %zu failed: %s",
                    ds->pend_len, ds->pend_off, gcx_strerror(status));
        return status;
    }
    ds->nreqs++;
    ds->posted_off = ds->pend_off;
    ds->pend_len = 0;
    return GCX_OK;
}

static gcx_status_t dense_init(train_sync_t *sync, train_kv_t *args)
{
    dense_state_t *ds;
    long overlap, bucket_kb;
    gcx_status_t status;

    status = train_kv_long(args, "dense", "overlap", 1, 0, 1, &overlap);
    if (status == GCX_OK) {
        status = train_kv_long(args, "dense", "bucket_kb", 1024, 0,
                               1L << 30, &bucket_kb);
    }
    if (status != GCX_OK) {
        return status;
    }
    ds = calloc(1, sizeof(*ds));
    if (ds == NULL) {
        return GCX_ERR_NOMEM;
    }
    ds->overlap = (int)overlap;
    ds->bucket = (size_t)bucket_kb * 1024 / sizeof(float);
    ds->posted_off = sync->n;
    sync->priv = ds;
    if (ds->overlap && sync->comm->comm != NULL) {
        status = train_comm_progress_thread(sync->comm);
    }
    return status;
}

static gcx_status_t dense_grad_ready(train_sync_t *sync, float *grad,
                                     size_t off, size_t len)
{
    dense_state_t *ds = sync->priv;

    if (!ds->overlap || sync->comm->comm == NULL || len == 0) {
        return GCX_OK;
    }
    if (off + len != (ds->pend_len > 0 ? ds->pend_off : ds->posted_off)) {
        /* exchange() reduces [0, posted_off): a gap would go unreduced */
        train_error("dense: gradient slice [%zu, %zu) is not the one "
                    "right below the last (which began at %zu of %zu)",
                    off, off + len,
                    ds->pend_len > 0 ? ds->pend_off : ds->posted_off,
                    sync->n);
        return GCX_ERR_INVALID;
    }
    ds->pend_off = off;
    ds->pend_len += len;
    return ds->pend_len >= ds->bucket ? dense_post(sync, grad) : GCX_OK;
}

static gcx_status_t dense_exchange(train_sync_t *sync, float *grad,
                                   const train_grad_src_t *src,
                                   train_sync_stats_t *stats)
{
    dense_state_t *ds = sync->priv;
    double bytes = train_sync_ring_bytes(sync->n, sync->comm->size);
    gcx_status_t status, waited;

    (void)src;
    status = dense_post(sync, grad);
    if (status == GCX_OK && ds->posted_off > 0) {
        /* what no bucket covered (overlap off: everything) */
        status = train_comm_allreduce(sync->comm, grad, ds->posted_off,
                                      GCX_DT_F32, GCX_OP_AVG);
    }
    waited = dense_wait_all(ds);
    ds->posted_off = sync->n;
    ds->pend_len = 0;
    if (status == GCX_OK && waited != GCX_OK) {
        train_error("dense: a bucket's allreduce failed: %s",
                    gcx_strerror(waited));
        status = waited;
    }
    if (status != GCX_OK) {
        return status;
    }
    stats->bytes_sent = bytes;
    stats->dense_bytes = bytes;
    stats->cf = 1.0;
    stats->gain = 1.0;
    return GCX_OK;
}

static void dense_fini(train_sync_t *sync)
{
    dense_state_t *ds = sync->priv;

    if (ds != NULL) {
        (void)dense_wait_all(ds); /* a step that failed midway */
        free(ds);
    }
    sync->priv = NULL;
}

const train_sync_ops_t train_sync_dense = {
    .name = "dense",
    .help = "allreduce (average) of the full gradient, posted per bucket "
            "during the backward pass; overlap=1 (0: one allreduce after "
            "it), bucket_kb=1024 (0: one per layer)",
    .flags = 0,
    .init = dense_init,
    .exchange = dense_exchange,
    .grad_ready = dense_grad_ready,
    .fini = dense_fini,
    .save = train_sync_save_nothing,
    .load = train_sync_load_nothing,
};
