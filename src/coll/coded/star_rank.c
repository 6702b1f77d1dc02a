/*
 * star_rank.c - a non-root rank's side of a round: send the contribution,
 * receive the decoded sum.
 *
 * Entering round r: one transport progress call collects what already came.
 * If the root's RESULT header of r is here, the round was decoded without
 * this rank: it neither sleeps (straggler injection) nor sends, and
 * completes once the sum has landed (catch-up). Otherwise it copies sendbuf
 * into an internal block (one memcpy, so a late transfer never holds the
 * caller's buffer and the next step is never blocked by it) and sends it
 * as one active message to the root. The send is not part of the round: it
 * completes whenever the root takes or drops it, and only then is the
 * block reused. An abstaining worker (gcx_coded_abstain()) sends a
 * header-only VOID message instead: no copy, no payload, no straggler
 * delay (it computes nothing).
 * The RESULT of the round being waited for is pulled straight into recvbuf
 * (zero copy); a RESULT of a later round (this rank is behind) is pulled
 * into a block and copied out when the rank gets there. An ERROR from the
 * root (it failed round R) fails this rank's first round whose result has
 * not come: R, or an earlier one if the root stopped sending to this rank.
 * A lost connection to the root fails the first round whose result is not
 * here or on its way, at once: results come only from the root. Waiting is
 * otherwise bounded by GCX_TIMEOUT (the queue).
 */
#include "coded_int.h"
#include "base/time.h"

#include <stdlib.h>
#include <string.h>

static gcx_coded_slot_t *gcx_coded_stash_find(gcx_coded_t *coded,
                                              uint64_t round, int unlink)
{
    gcx_coded_slot_t **pp = &coded->stash, *slot;

    for (; (slot = *pp) != NULL; pp = &slot->next) {
        if (slot->round == round) {
            if (unlink) {
                *pp = slot->next;
            }
            return slot;
        }
    }
    return NULL;
}

void gcx_coded_rank_on_result(gcx_coded_t *coded, const gcx_coded_hdr_t *hdr,
                              const unsigned char *sets,
                              const gcx_tl_am_msg_t *msg)
{
    size_t            sets_bytes = gcx_coded_sets_bytes(coded->n);
    gcx_coded_op_t   *op = coded->live;
    gcx_tl_t         *tl = coded->comm->tl;
    gcx_coded_slot_t *slot;
    gcx_iov_t         iov;

    int               lost = hdr->kind == GCX_CODED_LOST;

    if (msg->length != (lost ? 0 : coded->bytes)) {
        gcx_warn("coded gather: dropping a malformed result");
        return;
    }
    if (lost && op != NULL && hdr->round == op->round && !op->recv_posted &&
        op->super.status == GCX_INPROGRESS) {
        op->rhdr        = *hdr; /* nothing to pull: done at the next look */
        memcpy(op->rsets, sets, sets_bytes);
        op->recv_posted = 1;
        op->rreq.status = GCX_OK;
        return;
    }
    if (op != NULL && hdr->round == op->round && !op->recv_posted &&
        op->super.status == GCX_INPROGRESS) {
        iov.buffer      = op->recvbuf;
        iov.length      = coded->bytes;
        op->rhdr        = *hdr;
        memcpy(op->rsets, sets, sets_bytes);
        op->recv_posted = 1;
        tl->ops->am_recv(tl, msg, &iov, 1, &op->rreq);
        return;
    }
    if (hdr->round < coded->next_open ||
        gcx_coded_stash_find(coded, hdr->round, 0) != NULL) {
        gcx_warn("coded gather: dropping a duplicate result of round %llu",
                 (unsigned long long)hdr->round);
        return;
    }
    slot = gcx_coded_slot_get(coded);
    if (slot != NULL && slot->sets == NULL) {
        slot->sets = malloc(sets_bytes);
        if (slot->sets == NULL) {
            gcx_coded_slot_put(coded, slot);
            slot = NULL;
        }
    }
    if (slot == NULL) {
        gcx_error("coded gather: out of memory staging a result");
        return;
    }
    slot->round  = hdr->round;
    slot->hdr    = *hdr;
    memcpy(slot->sets, sets, sets_bytes);
    slot->nreqs  = 1;
    iov.buffer   = slot->block->data;
    iov.length   = coded->bytes;
    slot->reqs[0].status = GCX_OK;
    if (!lost) {
        tl->ops->am_recv(tl, msg, &iov, 1, &slot->reqs[0]);
    }
    slot->next   = coded->stash;
    coded->stash = slot;
    ++coded->stats.early;
}

static void gcx_coded_rank_done(gcx_coded_op_t *op, const gcx_coded_hdr_t *hdr,
                                const uint64_t *sets)
{
    gcx_coded_t *coded = op->coded;

    gcx_coded_fill_result(coded, hdr, sets, NULL, op->skipped, op->result);
    coded->next_open = op->round + 1;
    coded->live      = NULL;
    ++coded->stats.rounds;
    coded->stats.rounds_lost += hdr->kind == GCX_CODED_LOST;
    op->super.status = GCX_OK;
}

/* Has the result of this round been announced (here or on its way)? */
static int gcx_coded_rank_decided(gcx_coded_op_t *op)
{
    return op->recv_posted ||
           gcx_coded_stash_find(op->coded, op->round, 0) != NULL;
}

static void gcx_coded_rank_progress(gcx_task_t *task)
{
    gcx_coded_op_t   *op    = (gcx_coded_op_t *)task;
    gcx_coded_t      *coded = op->coded;
    gcx_coded_slot_t *slot;

    if (task->status != GCX_INPROGRESS) {
        return;
    }
    gcx_coded_reclaim(coded);
    if (coded->error != GCX_OK && !gcx_coded_rank_decided(op)) {
        /* the root failed round error_round and decodes nothing after it.
         * A rank behind still completes the earlier rounds whose results
         * came (the root sent them before its ERROR, on the same
         * connection); one whose result is not here was never sent to
         * this rank (counted gone) and fails now, not at GCX_TIMEOUT. */
        gcx_error("coded gather round %llu: the root reports that round "
                  "%llu failed: %s",
                  (unsigned long long)op->round,
                  (unsigned long long)coded->error_round,
                  gcx_strerror(coded->error));
        task->status = coded->error;
        return;
    }
    if (!gcx_coded_rank_decided(op) &&
        coded->comm->tl->ops->peer_failed(coded->comm->tl, coded->root)) {
        /* results come only from the root: with its connection lost none
         * can come, so fail now, not at GCX_TIMEOUT */
        gcx_error("coded gather round %llu: the connection to the root "
                  "(rank %d) is lost; no result can come",
                  (unsigned long long)op->round, coded->root);
        task->status = GCX_ERR_PEER;
        return;
    }
    slot = gcx_coded_stash_find(coded, op->round, 0);
    if (slot != NULL) {
        if (slot->reqs[0].status == GCX_INPROGRESS) {
            return;
        }
        gcx_coded_stash_find(coded, op->round, 1);
        if (slot->reqs[0].status != GCX_OK) {
            task->status = slot->reqs[0].status;
        } else {
            if (slot->hdr.kind != GCX_CODED_LOST && coded->bytes > 0) {
                memcpy(op->recvbuf, slot->block->data, coded->bytes);
            }
            gcx_coded_rank_done(op, &slot->hdr, slot->sets);
        }
        gcx_coded_slot_put(coded, slot);
        return;
    }
    if (op->recv_posted) {
        if (op->rreq.status == GCX_INPROGRESS) {
            return;
        }
        if (op->rreq.status != GCX_OK) {
            task->status = op->rreq.status;
            return;
        }
        gcx_coded_rank_done(op, &op->rhdr, op->rsets);
    }
}

static void gcx_coded_rank_send(gcx_coded_op_t *op)
{
    gcx_coded_t      *coded = op->coded;
    gcx_tl_t         *tl    = coded->comm->tl;
    gcx_coded_hdr_t   hdr   = {0};
    gcx_coded_slot_t *slot;
    gcx_iov_t         iov;

    slot = gcx_coded_slot_get(coded);
    if (slot == NULL) {
        op->super.status = GCX_ERR_NOMEM;
        return;
    }
    if (coded->bytes > 0 && !op->abstain) {
        memcpy(slot->block->data, op->sendbuf, coded->bytes);
    }
    hdr.comm_id  = coded->comm->id;
    hdr.instance = coded->instance;
    hdr.round    = op->round;
    hdr.sender   = (uint16_t)coded->comm->rank;
    hdr.kind     = op->abstain ? GCX_CODED_VOID : GCX_CODED_CONTRIB;
    iov.buffer   = slot->block->data;
    iov.length   = coded->bytes;
    slot->round  = op->round;
    slot->nreqs  = 1;
    slot->block->hdr = hdr;
    tl->ops->am_send(tl, coded->root, coded->am_id, &slot->block->hdr,
                     sizeof(gcx_coded_hdr_t),
                     op->abstain ? NULL : &iov, op->abstain ? 0 : 1,
                     &slot->reqs[0]);
    /* a failed send (root gone) shows as a timeout of the round */
    slot->next      = coded->inflight;
    coded->inflight = slot;
}

static void gcx_coded_rank_post(gcx_task_t *task)
{
    gcx_coded_op_t *op    = (gcx_coded_op_t *)task;
    gcx_coded_t    *coded = op->coded;
    gcx_tl_t       *tl    = coded->comm->tl;
    double          delay_ms;

    coded->live = op;
    op->t_start = gcx_time_now();
    /* the root decides a round (decoded, lost, failed) at its GCX_TIMEOUT
     * at the latest and tells every rank; a rank that entered before the
     * root waits that much longer, so it learns the verdict instead of
     * failing alone by its own clock (a lost round would otherwise go on
     * at the others and fail here) */
    task->deadline += GCX_CODED_VERDICT_GRACE;
    tl->ops->progress(tl);
    if (coded->my_worker >= 0 && !op->abstain &&
        !gcx_coded_rank_decided(op)) {
        delay_ms = gcx_coded_straggler_delay(coded, coded->my_worker,
                                             op->round);
        if (delay_ms > 0) {
            gcx_coded_sleep(delay_ms * 1e-3);
            tl->ops->progress(tl);
        }
    }
    if (coded->my_worker >= 0 && !gcx_coded_rank_decided(op)) {
        gcx_coded_rank_send(op);
        coded->stats.abstained += (uint64_t)op->abstain;
    } else {
        op->skipped = coded->my_worker >= 0;
        coded->stats.skipped += (uint64_t)op->skipped;
    }
    gcx_coded_rank_progress(task);
}

const gcx_task_ops_t gcx_coded_rank_ops = {
    .name     = "coded_gather",
    .post     = gcx_coded_rank_post,
    .progress = gcx_coded_rank_progress,
    .finalize = gcx_coded_op_finalize,
};
