/*
 * loop_ckpt.c - gcx-train's checkpoints (--save PATH / --resume PATH).
 *
 * Every rank writes PATH.<rank> at the end of the run: a header (magic,
 * version, byte-order marker), the identity a resuming run must share
 * (ranks, rank, parameters, seed, batch, steps per global batch, model and
 * --sync text), the position of the next step, the weights, the SGD
 * velocity, then the sync mode's own state (sync.h save/load). The data
 * order is a function of (seed, epoch) and the learning rate of the global
 * step, so a resumed run computes exactly what an uninterrupted one would.
 * Reading checks everything before the run uses it. Cost: one file write or
 * read of O(parameters) per run.
 */
#include "loop_int.h"
#include "ckpt.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

#define TRAIN_CKPT_MAGIC   "GCXTRAIN"
#define TRAIN_CKPT_VERSION 1u
#define TRAIN_CKPT_ORDER   0x01020304u /* refuses a host of the other order */

static void train_ckpt_path(const char *prefix, int rank, char *path,
                            size_t len)
{
    snprintf(path, len, "%s.%d", prefix, rank);
}

/* What a checkpoint must agree on with the run that resumes it. */
static void train_ckpt_put_identity(train_blob_t *b, const train_state_t *st)
{
    train_blob_put_u64(b, (uint64_t)st->comm->size);
    train_blob_put_u64(b, (uint64_t)st->comm->rank);
    train_blob_put_u64(b, st->net.nparams);
    train_blob_put_u64(b, st->opts->seed);
    train_blob_put_u64(b, (uint64_t)st->opts->batch);
    train_blob_put_u64(b, (uint64_t)st->sync.steps_per_batch);
    train_blob_put_str(b, st->net.desc);
    train_blob_put_str(b, st->opts->sync);
}

gcx_status_t train_ckpt_save(train_state_t *st,
                                    const train_position_t *next)
{
    char path[1100];
    uint32_t head[2] = {TRAIN_CKPT_VERSION, TRAIN_CKPT_ORDER};
    train_blob_t b;
    gcx_status_t status;

    train_ckpt_path(st->opts->save, st->comm->rank, path, sizeof(path));
    train_blob_init(&b);
    train_blob_put(&b, TRAIN_CKPT_MAGIC, 8);
    train_blob_put(&b, head, sizeof(head));
    train_ckpt_put_identity(&b, st);
    train_blob_put_u64(&b, (uint64_t)next->step);
    train_blob_put_u64(&b, (uint64_t)next->epoch);
    train_blob_put_u64(&b, (uint64_t)next->step_in_epoch);
    train_blob_put(&b, st->params, st->net.nparams * sizeof(float));
    train_blob_put(&b, st->sgd.velocity, st->net.nparams * sizeof(float));
    status = st->sync.ops->save(&st->sync, &b);
    if (status == GCX_OK) {
        status = train_blob_write_file(&b, path);
    }
    train_blob_free(&b);
    if (status == GCX_OK) {
        train_info("checkpoint %s: next step %ld (epoch %d, step %ld of it)",
                   path, next->step, next->epoch, next->step_in_epoch);
    }
    return status;
}

gcx_status_t train_ckpt_load(train_state_t *st, train_position_t *pos)
{
    char path[1100], magic[8];
    uint32_t head[2];
    train_blob_t b, mine;
    train_position_t p;
    gcx_status_t status;
    int same;

    train_ckpt_path(st->opts->resume, st->comm->rank, path, sizeof(path));
    status = train_blob_read_file(&b, path);
    if (status != GCX_OK) {
        return status;
    }
    train_blob_get(&b, magic, sizeof(magic));
    train_blob_get(&b, head, sizeof(head));
    if (!b.ok || memcmp(magic, TRAIN_CKPT_MAGIC, 8) != 0 ||
        head[0] != TRAIN_CKPT_VERSION || head[1] != TRAIN_CKPT_ORDER) {
        train_error("--resume: %s is not a gcx-train checkpoint of this "
                    "version and byte order",
                    path);
        train_blob_free(&b);
        return GCX_ERR_INVALID;
    }
    /* the identity block must match this run's byte for byte */
    train_blob_init(&mine);
    train_ckpt_put_identity(&mine, st);
    same = mine.ok && b.len - b.pos >= mine.len &&
           memcmp(b.data + b.pos, mine.data, mine.len) == 0;
    b.pos += same ? mine.len : 0;
    train_blob_free(&mine);
    if (!same) {
        train_error("--resume: %s was written by another run: ranks, model, "
                    "--batch, --seed and --sync must be the same "
                    "(this run: %d ranks, %s, batch %d, seed %llu, sync %s)",
                    path, st->comm->size, st->net.desc, st->opts->batch,
                    (unsigned long long)st->opts->seed, st->opts->sync);
        train_blob_free(&b);
        return GCX_ERR_MISMATCH;
    }
    p.step = (long)train_blob_get_u64(&b);
    p.epoch = (int)train_blob_get_u64(&b);
    p.step_in_epoch = (long)train_blob_get_u64(&b);
    train_blob_get(&b, st->params, st->net.nparams * sizeof(float));
    train_blob_get(&b, st->sgd.velocity, st->net.nparams * sizeof(float));
    status = b.ok ? st->sync.ops->load(&st->sync, &b) : GCX_ERR_INVALID;
    if (status == GCX_OK && (!b.ok || b.pos != b.len || p.epoch < 1 ||
                             p.step_in_epoch < 0 ||
                             p.step_in_epoch >= st->spe || p.step < 0)) {
        status = GCX_ERR_INVALID;
    }
    if (status == GCX_OK) {
        *pos = p;
        train_info("resumed from %s at step %ld (epoch %d, step %ld of it)",
                   path, p.step, p.epoch, p.step_in_epoch);
    } else if (status == GCX_ERR_INVALID) {
        train_error("--resume: %s is damaged or cut short", path);
    }
    train_blob_free(&b);
    return status;
}
