/*
 * sync_dense.c - dense sync: one allreduce (average) of the whole gradient.
 *
 * The reference every compressed or coded mode is measured against. Cost:
 * a ring allreduce of n floats, 2(P-1)/P * 4n bytes sent per rank and
 * ~2(P-1) latency terms; CF and gain are 1 by definition. No options.
 */
#include "sync/sync.h"

static gcx_status_t dense_init(train_sync_t *sync, train_kv_t *args)
{
    (void)args;
    sync->priv = NULL;
    return GCX_OK;
}

static gcx_status_t dense_exchange(train_sync_t *sync, float *grad,
                                   const train_grad_src_t *src,
                                   train_sync_stats_t *stats)
{
    double bytes = train_sync_ring_bytes(sync->n, sync->comm->size);
    gcx_status_t status;

    (void)src;
    status =
        train_comm_allreduce(sync->comm, grad, sync->n, GCX_DT_F32, GCX_OP_AVG);
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
    sync->priv = NULL;
}

const train_sync_ops_t train_sync_dense = {
    .name = "dense",
    .help = "allreduce (average) of the full gradient; no options",
    .flags = 0,
    .init = dense_init,
    .exchange = dense_exchange,
    .fini = dense_fini,
    .save = train_sync_save_nothing,
    .load = train_sync_load_nothing,
};
