/*
 * sync_compress.c - static compression at a fixed CF with error feedback:
 * the modes topk, dgc, redsync and randomk (one implementation, one vtable
 * per compressor, the kind taken from the mode's name).
 *
 * Per step: residual += g; s = C(residual, cf); residual -= s (error
 * feedback, src/compress); then the ranks average their s. topk, dgc and
 * redsync pick different supports on each rank, so s goes through gcx's
 * sparse allreduce (cost ~ 8 bytes per kept entry and rank, see
 * src/coll/sparse_allreduce); randomk draws the same indices on every rank
 * (seeded by the step), so its k values go through a dense allreduce of
 * length k. The gradient applied is the average, bit-identical everywhere.
 * Options: cf=<compression factor, default 100>.
 */
#include "sync/sync.h"
#include "util.h"

#include <gcx/compress.h>
#include <stdlib.h>
#include <string.h>

#define SYNC_COMPRESS_SEED 0x67637863u

typedef struct sync_compress {
    gcx_compress_kind_t kind;
    double              cf;
    gcx_compressor_t   *comp;
    gcx_feedback_t     *fb;
    gcx_sparse_vec_t    sent; /* library-owned arrays */
} sync_compress_t;

static void compress_fini(train_sync_t *sync)
{
    sync_compress_t *sc = sync->priv;

    if (sc != NULL) {
        gcx_sparse_vec_free(&sc->sent);
        gcx_feedback_destroy(sc->fb);
        gcx_compressor_destroy(sc->comp);
        free(sc);
    }
    sync->priv = NULL;
}

static gcx_status_t compress_init(train_sync_t *sync, train_kv_t *args)
{
    sync_compress_t *sc;
    gcx_status_t     status;
    size_t           capacity;

    sc = calloc(1, sizeof(*sc));
    if (sc == NULL) {
        return GCX_ERR_NOMEM;
    }
    sync->priv = sc;
    status = gcx_compress_kind_parse(sync->ops->name, &sc->kind);
    if (status == GCX_OK) {
        status = train_kv_double(args, sync->ops->name, "cf", 100.0, 1.0,
                                 (double)sync->n, &sc->cf);
    }
    if (status == GCX_OK) {
        status = gcx_compressor_create(sc->kind, SYNC_COMPRESS_SEED, &sc->comp);
    }
    if (status == GCX_OK) {
        status = gcx_feedback_create(sync->n, NULL, &sc->fb);
    }
    if (status == GCX_OK) {
        status = gcx_compress_capacity(sc->kind, sync->n, sc->cf, &capacity);
    }
    if (status == GCX_OK) {
        status = gcx_sparse_vec_alloc(capacity, sync->n, &sc->sent);
    }
    if (status != GCX_OK) {
        train_error("sync %s: setup failed: %s", sync->ops->name,
                    gcx_strerror(status));
        compress_fini(sync);
    }
    return status;
}

static gcx_status_t compress_exchange(train_sync_t *sync, float *grad,
                                      const train_grad_src_t *src,
                                      train_sync_stats_t *stats)
{
    sync_compress_t     *sc = sync->priv;
    gcx_compress_stats_t cs;
    gcx_status_t         status;
    double               bytes = 0;

    (void)src;
    gcx_compressor_set_step(sc->comp, (uint64_t)sync->step);
    status = gcx_feedback_step(sc->fb, sc->comp, grad, sc->cf, &sc->sent, &cs);
    if (status != GCX_OK) {
        train_error("sync %s: compression failed: %s", sync->ops->name,
                    gcx_strerror(status));
        return status;
    }
    if (sc->kind == GCX_COMPRESS_RANDOMK) {
        /* same indices on every rank: average the k values densely */
        status = train_comm_allreduce(sync->comm, sc->sent.val, sc->sent.nnz,
                                      GCX_DT_F32, GCX_OP_AVG);
        memset(grad, 0, sync->n * sizeof(float));
        if (status == GCX_OK) {
            status = gcx_sparse_vec_scatter(&sc->sent, grad);
        }
        bytes = train_sync_ring_bytes(sc->sent.nnz, sync->comm->size);
    } else {
        status = train_comm_sparse_average(sync->comm, &sc->sent, grad, &bytes);
    }
    if (status != GCX_OK) {
        return status;
    }
    stats->bytes_sent  = bytes;
    stats->dense_bytes = train_sync_ring_bytes(sync->n, sync->comm->size);
    stats->cf   = sc->sent.nnz ? (double)sync->n / (double)sc->sent.nnz : 0;
    stats->gain = gcx_compress_gain(&cs);
    return GCX_OK;
}

/* The checkpointed state is the error feedback; the compressors draw from
 * (seed, step) only. */
static gcx_status_t compress_save(train_sync_t *sync, train_blob_t *out)
{
    sync_compress_t *sc = sync->priv;

    train_sync_put_feedback(out, sc->fb);
    return GCX_OK;
}

static gcx_status_t compress_load(train_sync_t *sync, train_blob_t *in)
{
    sync_compress_t *sc = sync->priv;

    return train_sync_get_feedback(in, sc->fb, sync->ops->name);
}

/* one vtable per compressor; the kind comes from the name in init */
const train_sync_ops_t train_sync_topk = {
    .name     = "topk",
    .help     = "exact top-k + error feedback, sparse allreduce; cf=100",
    .flags    = 0,
    .init     = compress_init,
    .exchange = compress_exchange,
    .fini     = compress_fini,
    .save     = compress_save,
    .load     = compress_load,
};

const train_sync_ops_t train_sync_dgc = {
    .name     = "dgc",
    .help     = "DGC sampled threshold + error feedback, sparse allreduce; cf=100",
    .flags    = 0,
    .init     = compress_init,
    .exchange = compress_exchange,
    .fini     = compress_fini,
    .save     = compress_save,
    .load     = compress_load,
};

const train_sync_ops_t train_sync_redsync = {
    .name     = "redsync",
    .help     = "RedSync threshold search + error feedback, sparse allreduce; cf=100",
    .flags    = 0,
    .init     = compress_init,
    .exchange = compress_exchange,
    .fini     = compress_fini,
    .save     = compress_save,
    .load     = compress_load,
};

const train_sync_ops_t train_sync_randomk = {
    .name     = "randomk",
    .help     = "shared random-k + error feedback, dense allreduce of the k values; cf=100",
    .flags    = 0,
    .init     = compress_init,
    .exchange = compress_exchange,
    .fini     = compress_fini,
    .save     = compress_save,
    .load     = compress_load,
};
