/*
 * masterless_failure.c - lost owners: the acting owner of each chunk (the
 * first of its line whose connection is not lost; lost ranks counted gone),
 * the committed copies a later owner keeps for `window` rounds and sends
 * again, with its COMMIT, when the owner is found lost, and what a round
 * past GCX_TIMEOUT waits for (describe). Cost: O(P) per progress pass for
 * the acting owners; s x window kept slots.
 */
#include "masterless_int.h"
#include "base/log.h"

#include <stdio.h>

/* Owner of chunk c now, into acting[c]: the first owner of its line whose
 * connection is not lost (this rank's view); -1 when every one is lost.
 * Ranks whose connection is lost are counted gone (stats.gone: what a
 * training loop leaves out of its checks, as the star's root reports
 * them). */
void gcx_car_acting(gcx_coded_allreduce_t *car, int *acting)
{
    gcx_tl_t *tl = car->base.comm->tl;
    int       c, pos, r, me = car->base.comm->rank;

    for (r = 0; r < car->base.n; ++r) {
        if (r != me && tl->ops->peer_failed(tl, r) &&
            !gcx_wset_has(car->base.gone, r)) {
            gcx_warn("coded allreduce: rank %d is gone: connection lost", r);
            gcx_wset_add(car->base.gone, r);
        }
    }
    for (c = 0; c < car->base.n; ++c) {
        acting[c] = -1;
        for (pos = 0; pos < car->line; ++pos) {
            r = gcx_car_owner(car, c, pos);
            if (r == me || !tl->ops->peer_failed(tl, r)) {
                acting[c] = r;
                break;
            }
        }
    }
}

/*
 * A later owner of chunk c's line finishes a round with the copy its owner
 * committed; if that owner then dies while sending the copy to the ranks
 * outside the line, some of them still wait for chunk c of that round, and
 * now take this rank for its owner. So the copy is kept for `window`
 * rounds (a rank can be at most that many rounds behind a live peer: the
 * peer's next round needs every live owner's chunk, which a rank serves
 * only that far ahead of its call, gcx_car_ahead), and sent again to every
 * other rank once its owner is lost: a rank that has it drops it (finished
 * round), one that waits takes it -- the same bits as everyone else's.
 */
/* Send @p kept (chunk c of a finished round) again, with its COMMIT, to
 * every other live rank but the earlier owners of the line. */
static gcx_status_t gcx_car_resend_kept(gcx_coded_allreduce_t *car, int c,
                                        const gcx_coded_slot_t *kept)
{
    gcx_coded_slot_t *slot;
    size_t            off, len;
    int               mypos = gcx_car_pos(car, c, car->base.comm->rank);

    slot = gcx_car_out_slot(car, kept->round, 1, car->base.comm->size);
    if (slot == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_car_block(car, c, &off, &len);
    if (kept->hdr.kind != GCX_CAR_LOST) {
        gcx_car_copy(slot->block->data, gcx_coded_slot_data(kept), len);
    }
    gcx_car_publish_to(car, kept->round, c, gcx_car_copy_used(kept),
                       kept->hdr.kind == GCX_CAR_LOST, slot, GCX_CAR_OTHERS,
                       mypos);
    return gcx_car_send_ctl(car, GCX_CAR_COMMIT, kept->round, c,
                            GCX_CAR_OTHERS, mypos);
}

/* The kept copies of the chunks this rank acts for now (@p acting: their
 * owner is lost), each sent again once, those of the `window` rounds below
 * @p round. Every kept round is below next_open, so the lowest round in
 * progress sees all the window holds; with no round in progress (between
 * calls, or after the last one: gcx_car_ahead) next_open does. */
gcx_status_t gcx_car_serve_kept(gcx_coded_allreduce_t *car,
                                const int *acting, uint64_t round)
{
    gcx_car_kept_t *kept;
    int             c, k, pos, me = car->base.comm->rank;

    for (c = 0; c < car->base.n; ++c) {
        pos = gcx_car_pos(car, c, me);
        if (acting[c] != me || pos < 1) {
            continue; /* not acting, or its own chunk: nothing kept */
        }
        kept = gcx_car_kept_row(car, pos);
        for (k = 0; k < car->base.window; ++k, ++kept) {
            if (kept->slot == NULL || kept->served ||
                kept->slot->round >= round ||
                kept->slot->round + (uint64_t)car->base.window < round) {
                continue;
            }
            kept->served = 1;
            if (gcx_car_resend_kept(car, c, kept->slot) != GCX_OK) {
                return GCX_ERR_NOMEM;
            }
        }
    }
    return GCX_OK;
}

/* A worker set for a log line: 0x and its words, the highest first (the
 * word 0 of a one-word set is its mask as before); a set too long for
 * @p buf ends in "..." after its count. */
static const char *gcx_car_set_text(const gcx_coded_allreduce_t *car,
                                    const uint64_t *set, char *buf,
                                    size_t size)
{
    size_t k = car->base.words, used;
    int    len;

    len = snprintf(buf, size, "0x");
    used = len > 0 ? (size_t)len : 0;
    while (k-- > 0 && used < size) {
        len = snprintf(buf + used, size - used,
                       k + 1 == car->base.words ? "%llx" : "%016llx",
                       (unsigned long long)set[k]);
        used += len > 0 ? (size_t)len : 0;
    }
    if (used >= size) {
        (void)snprintf(buf, size, "%d workers (...)",
                       gcx_wset_count(set, car->base.n));
    }
    return buf;
}

/* After GCX_TIMEOUT: what the round waits for here -- a line for the round,
 * one per chunk not final (at most n), one for the rounds served ahead and
 * the staged messages. Sets are of ranks, except an owner's ACKs and a
 * receiver's copies and COMMITs (line positions of the chunk's owners). */
void gcx_car_describe(const gcx_task_t *task)
{
    static const char *const states[] = {"collecting", "waiting for ACKs",
                                         "done"};
    const gcx_car_op_t          *op  = (const gcx_car_op_t *)task;
    gcx_coded_allreduce_t       *car = op->car;
    const gcx_car_chunk_t       *ch;
    const gcx_car_op_t          *r;
    const gcx_coded_slot_t      *slot;
    const gcx_car_own_t         *own;
    unsigned long long           landed, flying;
    char                         t1[160], t2[160], t3[160];
    int                          c, w, ahead = 0, staged = 0, me;

    if (car == NULL || op->ch == NULL) {
        return; /* the object was destroyed under it, or no state */
    }
    me = car->base.comm->rank;
    gcx_error("coded allreduce round %llu: %s, %d chunk(s) and %d VOID(s) "
              "sent; ranks gone %s",
              (unsigned long long)op->round,
              op->sending ? "sending" : "not sending yet (straggler delay)",
              op->nsent, op->nvoid,
              gcx_car_set_text(car, car->base.gone, t1, sizeof(t1)));
    for (c = 0; c < car->base.n; ++c) {
        ch = &op->ch[c];
        if (ch->final) {
            continue;
        }
        if (op->acting[c] == me) {
            own = ch->own;
            gcx_car_landed_bits(car, own, car->scratch);
            gcx_error("  chunk %d: owned here, %s: arrived %s, landed %s, "
                      "abstained %s, ACKs (later owners' line positions) "
                      "wanted 0x%llx got 0x%llx",
                      c, states[own->ostate],
                      gcx_car_set_text(car, own->arrived, t1, sizeof(t1)),
                      gcx_car_set_text(car, car->scratch, t2, sizeof(t2)),
                      gcx_car_set_text(car, own->abstained, t3, sizeof(t3)),
                      (unsigned long long)own->acks_wanted,
                      (unsigned long long)own->acks_got);
            continue;
        }
        landed = flying = 0;
        for (w = 0; w < car->line; ++w) {
            if (ch->copy[w] != NULL) {
                if (ch->copy[w]->reqs[0].status == GCX_OK) {
                    landed |= 1ull << w;
                } else if (ch->copy[w]->reqs[0].status == GCX_INPROGRESS) {
                    flying |= 1ull << w;
                }
            }
        }
        gcx_error("  chunk %d: owner rank %d (this rank's chunk sent to %d): "
                  "decoded copies landed 0x%llx, in flight 0x%llx, COMMITs "
                  "0x%llx",
                  c, op->acting[c], ch->sent_to, landed, flying,
                  (unsigned long long)ch->committed);
    }
    for (r = car->rounds; r != NULL; r = r->next) {
        ahead += !r->entered;
    }
    for (slot = car->base.stash; slot != NULL; slot = slot->next) {
        ++staged;
    }
    gcx_error("  %d round(s) served ahead, %d message(s) staged; next round "
              "to finish here %llu",
              ahead, staged, (unsigned long long)car->next_open);
    gcx_error("  messages taken by this object since its creation: %llu "
              "chunk, %llu decoded, %llu ACK, %llu COMMIT, %llu VOID, %llu "
              "LOST; %llu dropped as another object's (last: comm %u "
              "instance %u; this object: comm %u instance %u)",
              (unsigned long long)car->rx[GCX_CAR_CHUNK],
              (unsigned long long)car->rx[GCX_CAR_DECODED],
              (unsigned long long)car->rx[GCX_CAR_ACK],
              (unsigned long long)car->rx[GCX_CAR_COMMIT],
              (unsigned long long)car->rx[GCX_CAR_VOID],
              (unsigned long long)car->rx[GCX_CAR_LOST],
              (unsigned long long)car->rx_foreign, car->rx_foreign_comm,
              car->rx_foreign_instance, car->base.comm->id,
              car->base.instance);
}
