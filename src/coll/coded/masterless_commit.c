/*
 * masterless_commit.c - the ACK/COMMIT agreement that gives every rank the
 * same bits: a later owner acknowledges an owner's decoded chunk once it
 * landed, the owner commits on the last ACK, a receiver takes a chunk as
 * final when it landed from the acting owner and that owner's COMMIT came;
 * then settling final chunks into recvbuf, the end of a round and the
 * release of its slots. Cost per chunk and round: s ACKs and P-1 COMMITs
 * (header only), one round trip after the chunk landed.
 */
#include "masterless_int.h"
#include "base/log.h"
#include "base/time.h"

#include <math.h>
#include <string.h>

void gcx_car_on_decoded(gcx_coded_allreduce_t *car,
                        const gcx_car_hdr_t *hdr,
                        const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t     *op = gcx_car_find(car, hdr->round);
    gcx_coded_slot_t *slot;
    size_t            off, len;
    int               c = (int)hdr->chunk, pos;

    pos = gcx_car_pos(car, c, hdr->sender);
    gcx_car_block(car, c, &off, &len);
    if (hdr->kind == GCX_CAR_LOST) {
        len = 0; /* the outcome "lost": no bits */
    }
    if (pos < 0 || msg->length != len * sizeof(float)) {
        gcx_warn("coded allreduce: dropping a decoded chunk %u from rank %u",
                 hdr->chunk, hdr->sender);
        return;
    }
    if (hdr->round < car->next_open) {
        /* a new owner sends on a chunk of a round this rank finished: as a
         * later owner of its line this rank took the same bits (committed
         * by the lost owner, whose copy the new owner had too), so it
         * answers ACK and the new owner can go on */
        if (gcx_car_pos(car, c, car->base.comm->rank) > pos) {
            (void)gcx_car_send_ctl(car, GCX_CAR_ACK, hdr->round, c,
                                   hdr->sender, 0);
        }
        return;
    }
    if (op != NULL && op->super.status == GCX_INPROGRESS) {
        if (op->ch[c].final) {
            /* as for a finished round: this rank has the same bits */
            if (gcx_car_pos(car, c, car->base.comm->rank) > pos) {
                (void)gcx_car_send_ctl(car, GCX_CAR_ACK, hdr->round, c,
                                       hdr->sender, 0);
            }
            return;
        }
        if (op->ch[c].copy[pos] != NULL) {
            gcx_warn("coded allreduce: dropping a duplicate decoded chunk");
            return;
        }
        slot = gcx_car_pull(car, hdr, msg);
        op->ch[c].copy[pos] = slot;
        return;
    }
    gcx_car_stage(car, hdr, msg); /* this rank is behind */
}

void gcx_car_on_ctl(gcx_coded_allreduce_t *car, const gcx_car_hdr_t *hdr,
                    const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = gcx_car_find(car, hdr->round);
    int           c  = (int)hdr->chunk, pos = gcx_car_pos(car, c, hdr->sender);

    if (op == NULL && hdr->kind == GCX_CAR_COMMIT &&
        hdr->round >= car->next_open) {
        gcx_car_stage(car, hdr, msg); /* a round this rank has not begun */
        return;
    }
    if (op == NULL || pos < 0) {
        return; /* of a finished round: nothing waits for it */
    }
    if (hdr->kind == GCX_CAR_ACK) {
        if (op->ch[c].own != NULL) { /* an ACK goes to earlier owners */
            op->ch[c].own->acks_got |= 1ull << pos;
        }
    } else {
        op->ch[c].committed |= 1ull << pos;
    }
}

/* The owner's publish slot of chunk c to the in-flight list (back in the
 * pool when its sends end). */
static void gcx_car_pub_release(gcx_coded_allreduce_t *car,
                                gcx_car_own_t *own)
{
    own->pub->next     = car->base.inflight;
    car->base.inflight = own->pub;
    own->pub           = NULL;
}

/* Chunk c, final: once the rank has entered the round, its bits go to
 * recvbuf -- from the owner's publish slot, which then goes to the
 * in-flight list (back in the pool when its sends end), or from the copy
 * received. Served ahead of the call, the slots keep them until then. */
void gcx_car_settle(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                    int c)
{
    gcx_car_chunk_t *ch = &op->ch[c];
    size_t           off, len;

    if (!op->entered || !ch->final || (car->base.lost_rounds && !op->whole)) {
        return; /* lost_rounds: recvbuf only once no chunk is lost */
    }
    gcx_car_block(car, c, &off, &len);
    if (ch->own != NULL && ch->own->ostate == GCX_CAR_DONE &&
        ch->own->pub != NULL) {
        gcx_car_copy(gcx_car_at(op->recvbuf, off), ch->own->pub->block->data,
                     len);
        gcx_car_pub_release(car, ch->own);
    } else if (ch->from > 0) {
        gcx_car_copy(gcx_car_at(op->recvbuf, off),
                     gcx_coded_slot_data(ch->copy[ch->from - 1]), len);
        ch->from = 0;
    }
}

/* Receiver of chunk c from its owner a: final once a's copy landed and
 * a's COMMIT came. */
void gcx_car_receive(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                     int c)
{
    gcx_car_chunk_t  *ch = &op->ch[c];
    gcx_coded_slot_t *copy;
    int               pos, apos, mypos, me = car->base.comm->rank;

    /* acknowledge every landed copy from an earlier owner of the line */
    mypos = gcx_car_pos(car, c, me);
    for (pos = 0; mypos > 0 && pos < mypos; ++pos) {
        copy = ch->copy[pos];
        if (copy != NULL && copy->reqs[0].status == GCX_OK &&
            !(ch->acked & (1ull << pos))) {
            ch->acked |= 1ull << pos;
            (void)gcx_car_send_ctl(car, GCX_CAR_ACK, op->round, c,
                                   gcx_car_owner(car, c, pos), 0);
        }
    }
    apos = gcx_car_pos(car, c, op->acting[c]);
    copy = ch->copy[apos];
    if (copy == NULL || copy->reqs[0].status == GCX_INPROGRESS) {
        return;
    }
    if (copy->reqs[0].status != GCX_OK) {
        /* its sender was lost mid-payload: a later owner takes over */
        gcx_car_drop(car, copy);
        ch->copy[apos] = NULL;
        return;
    }
    if (!(ch->committed & (1ull << apos))) {
        return;
    }
    gcx_car_union(car, op->used_union, gcx_car_copy_used(copy));
    ch->final = 1;
    ch->lost  = copy->hdr.kind == GCX_CAR_LOST;
    ch->keep  = mypos > apos ? apos + 1 : 0;
    ch->from  = apos + 1;
    gcx_car_settle(car, op, c);
}

/* Free the round's slots; a transfer still in flight is handed to the
 * transport with its block. */
void gcx_car_release(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t **pp = &car->base.stash, *slot;
    gcx_car_chunk_t   *ch;
    gcx_car_own_t     *own;
    gcx_car_kept_t    *kept;
    int                c, i;

    for (c = 0; op->ch != NULL && c < car->base.n; ++c) {
        ch = &op->ch[c];
        if (ch->keep && op->super.status == GCX_OK) {
            i    = ch->keep - 1; /* its owner may have been lost since */
            kept = gcx_car_kept(car, c, op->round);
            if (kept->slot != NULL) {
                gcx_coded_slot_put(&car->base, kept->slot);
            }
            kept->slot   = ch->copy[i];
            kept->served = 0;
            ch->copy[i]  = NULL;
        }
        for (i = 0; i < car->line; ++i) {
            if (ch->copy[i] != NULL) {
                gcx_car_drop(car, ch->copy[i]);
                ch->copy[i] = NULL;
            }
        }
        own = ch->own;
        if (own == NULL) {
            continue;
        }
        for (i = 0; i < car->base.n; ++i) {
            if (own->in[i] != NULL) {
                gcx_car_drop(car, own->in[i]);
                own->in[i] = NULL;
            }
        }
        if (own->pub != NULL) { /* a failed round, half published */
            for (i = 0; i < own->pub->nreqs; ++i) {
                gcx_coded_slot_abandon_req(&car->base, own->pub, i);
            }
            gcx_coded_slot_put(&car->base, own->pub);
            own->pub = NULL;
        }
    }
    /* staged messages of this round nobody took (chunks for an owner that
     * was not lost after all, duplicates) */
    while ((slot = *pp) != NULL) {
        if (slot->round <= op->round) {
            *pp = slot->next;
            gcx_car_drop(car, slot);
        } else {
            pp = &slot->next;
        }
    }
}

void gcx_car_done(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_result_t *res = op->result;
    int                 c, skipped, lost = 0, me = car->base.comm->rank;

    /* lost_rounds: the decoded chunks go to recvbuf now, unless a chunk's
     * agreed outcome is "lost" (every rank sees the same outcomes): then
     * recvbuf stays as it was and the decoded chunks' slots go */
    for (c = 0; c < car->base.n; ++c) {
        lost |= op->ch[c].lost;
    }
    op->whole = !lost;
    for (c = 0; c < car->base.n; ++c) {
        if (!lost) {
            gcx_car_settle(car, op, c);
        } else if (op->ch[c].own != NULL && op->ch[c].own->pub != NULL) {
            gcx_car_pub_release(car, op->ch[c].own);
        }
    }

    /* skipped: this rank's vector went into no decode and it said no
     * abstention (no chunk or VOID sent, its own not taken by a chunk it
     * acts for): every chunk was final first */
    skipped = op->nsent == 0 && op->nvoid == 0;
    for (c = 0; c < car->base.n; ++c) {
        if (op->ch[c].own != NULL && gcx_wset_has(op->ch[c].own->taken, me)) {
            skipped = 0;
        }
    }

    if (lost) {
        gcx_wset_clear(op->used_union, car->base.n); /* no sum: none used */
    }
    if (res != NULL) {
        gcx_coded_result_sets_t sets = {
            .round      = op->round,
            .arrived    = op->ch[me].own->arrived,
            .used       = op->used_union,
            .abstained  = op->ch[me].own->abstained,
            .arrival    = NULL, /* no root times arrivals */
            .round_time = gcx_time_now() - op->t_start,
            .skipped    = skipped,
            .lost       = lost,
        };
        gcx_coded_result_write(res, car->base.n, &sets);
    }
    car->base.stats.skipped += (uint64_t)skipped;
    car->base.stats.abstained += (uint64_t)(op->abstain && !skipped);
    car->base.stats.rounds_lost += (uint64_t)lost;
    ++car->base.stats.rounds;
    op->super.status = GCX_OK;
    gcx_car_release(car, op);
    car->next_open   = op->round + 1;
    car->rounds      = op->next; /* the lowest round */
}
