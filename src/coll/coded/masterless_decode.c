/*
 * masterless_decode.c - ownership and decode: a worker's chunks to their
 * acting owners (shift order), an owner taking the chunks that landed until
 * the set is decodable (the code's predicate, as the star's root), and
 * decoding its chunk from that set alone -- or adopting the bits an earlier
 * owner of the line sent before it was lost -- then publishing it to every
 * rank. Cost per round on an owner: |used| c/P multiply-adds and P-1 eager
 * sends of c/P floats (c: the vector's floats).
 */
#include "masterless_int.h"
#include "base/log.h"

/* Owner: the taken chunks that have landed (this rank's own: always),
 * into @p landed (a worker set). O(n/64 + taken). */
void gcx_car_landed_bits(const gcx_coded_allreduce_t *car,
                         const gcx_car_own_t *own, uint64_t *landed)
{
    size_t   k, words = car->base.words;
    uint64_t bits;
    int      w, me = car->base.comm->rank;

    for (k = 0; k < words; ++k) {
        landed[k] = 0;
        for (bits = own->taken[k]; bits != 0; bits &= bits - 1) {
            w = (int)(k * 64) + __builtin_ctzll(bits);
            if (w == me || own->in[w]->reqs[0].status == GCX_OK) {
                landed[k] |= bits & -bits;
            }
        }
    }
}

/* gcx_car_landed_bits into car->scratch, after letting go of a taken
 * chunk whose transfer failed (its sender died mid-payload): a straggler
 * that never comes. */
static uint64_t *gcx_car_landed(gcx_coded_allreduce_t *car,
                                gcx_car_own_t *own)
{
    gcx_tl_req_t *req;
    size_t        k;
    uint64_t      bits;
    int           w, me = car->base.comm->rank;

    for (k = 0; k < car->base.words; ++k) {
        for (bits = own->taken[k]; bits != 0; bits &= bits - 1) {
            w   = (int)(k * 64) + __builtin_ctzll(bits);
            req = w != me ? &own->in[w]->reqs[0] : NULL;
            if (req != NULL && req->status != GCX_OK &&
                req->status != GCX_INPROGRESS) {
                gcx_wset_del(own->taken, w);
                gcx_car_drop(car, own->in[w]);
                own->in[w] = NULL;
                gcx_wset_add(car->base.gone, w);
            }
        }
    }
    gcx_car_landed_bits(car, own, car->scratch);
    return car->scratch;
}

/* Owner: is another worker's chunk still needed? Until the chunks that
 * landed are decodable, every arrival is taken: one taken earlier may
 * still fail with its sender, and a dropped one cannot be had again. */
static int gcx_car_wanted(gcx_coded_allreduce_t *car, gcx_car_own_t *own)
{
    int decodable = 0;

    /* whatever the state: the look lets go of failed transfers */
    gcx_code_decodable(car->base.code, gcx_car_landed(car, own), &decodable);
    return own->ostate == GCX_CAR_COLLECT && !decodable;
}

/* Owner of chunk c: worker w's chunk, in msg (live) or in a staged slot. */
void gcx_car_take(gcx_coded_allreduce_t *car, gcx_car_own_t *own,
                  int w, const gcx_car_hdr_t *hdr,
                  const gcx_tl_am_msg_t *msg, gcx_coded_slot_t *slot)
{
    if (gcx_wset_has(own->arrived, w)) {
        if (slot != NULL) {
            gcx_car_drop(car, slot);
        }
        return; /* sent again after a change of owner: have it */
    }
    gcx_wset_add(own->arrived, w);
    if (!gcx_car_wanted(car, own)) {
        ++car->base.stats.unneeded;
        if (slot != NULL) {
            gcx_car_drop(car, slot);
        }
        return; /* msg: dropped (not copied), its sender completes */
    }
    if (slot == NULL) {
        slot = gcx_car_pull(car, hdr, msg);
        if (slot == NULL) {
            return;
        }
    }
    own->in[w] = slot;
    gcx_wset_add(own->taken, w);
}

void gcx_car_on_chunk(gcx_coded_allreduce_t *car,
                      const gcx_car_hdr_t *hdr,
                      const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = gcx_car_find(car, hdr->round);
    size_t        off, len;
    int           c = (int)hdr->chunk, me = car->base.comm->rank;

    gcx_car_block(car, c, &off, &len);
    if (gcx_car_pos(car, c, me) < 0 || msg->length != len * sizeof(float)) {
        gcx_warn("coded allreduce: dropping a malformed chunk from rank %u",
                 hdr->sender);
        return;
    }
    if (hdr->round < car->next_open) {
        ++car->base.stats.late_dropped; /* finished: drop unread */
        return;
    }
    if (op != NULL && op->super.status == GCX_INPROGRESS &&
        op->acting[c] == me) {
        if (op->ch[c].own->ostate != GCX_CAR_COLLECT) {
            ++car->base.stats.late_dropped; /* decoded already */
            return;
        }
        gcx_car_take(car, op->ch[c].own, hdr->sender, hdr, msg, NULL);
        return;
    }
    /* a round not entered yet, or a chunk this rank may act for later */
    gcx_car_stage(car, hdr, msg);
}

/* Owner of chunk c: worker hdr->sender abstains from the round (no chunk
 * will come from it: the decode must do without, or the round is lost). */
void gcx_car_on_void(gcx_coded_allreduce_t *car,
                     const gcx_car_hdr_t *hdr,
                     const gcx_tl_am_msg_t *msg)
{
    gcx_car_op_t *op = gcx_car_find(car, hdr->round);
    int           c  = (int)hdr->chunk, me = car->base.comm->rank;

    if (gcx_car_pos(car, c, me) < 0 || hdr->round < car->next_open) {
        return; /* not a chunk this rank can own, or a finished round */
    }
    if (op != NULL && op->super.status == GCX_INPROGRESS &&
        op->acting[c] == me) {
        gcx_wset_add(op->ch[c].own->abstained, hdr->sender);
        return;
    }
    gcx_car_stage(car, hdr, msg); /* as a chunk would be */
}

/* Worker: this rank's chunks to their owners (again, if an owner
 * changed), chunk me+1 first (shift order, see gcx_car_publish_to); when
 * it abstains, a header-only VOID to each instead. */
void gcx_car_contribute(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t *slot;
    gcx_car_chunk_t  *ch;
    gcx_car_hdr_t     hdr;
    size_t            off, len;
    int               k, c, me = car->base.comm->rank;

    for (k = 1; k <= car->base.n; ++k) {
        c  = (me + k) % car->base.n;
        ch = &op->ch[c];
        if (ch->final || ch->sent_to == op->acting[c]) {
            continue;
        }
        ch->sent_to = op->acting[c];
        if (op->abstain) { /* a VOID to the owner; noted here if it is me */
            if (op->acting[c] == me) {
                gcx_wset_add(ch->own->abstained, me);
            } else if (gcx_car_send_ctl(car, GCX_CAR_VOID, op->round, c,
                                        op->acting[c], 0) != GCX_OK) {
                op->super.status = GCX_ERR_NOMEM;
                return;
            }
            ++op->nvoid;
            continue;
        }
        if (op->acting[c] == me) {
            if (ch->own->ostate == GCX_CAR_COLLECT &&
                !gcx_wset_has(ch->own->arrived, me)) {
                gcx_wset_add(ch->own->arrived, me); /* read from sendbuf */
                gcx_wset_add(ch->own->taken, me);
            }
            continue;
        }
        slot = gcx_car_out_slot(car, op->round, 1, 1);
        if (slot == NULL) {
            op->super.status = GCX_ERR_NOMEM;
            return;
        }
        gcx_car_block(car, c, &off, &len);
        gcx_car_copy(slot->block->data, gcx_car_at(op->sendbuf, off), len);
        gcx_car_hdr_init(car, op->round, GCX_CAR_CHUNK, c, &hdr);
        gcx_car_send(car, slot, 0, op->acting[c], &hdr, NULL, len);
        ++op->nsent;
    }
}

/* Owner: send the decoded chunk c of @p round (in @p slot, decoded from
 * the workers of @p used; @p lost: the outcome "round lost", header only)
 * to the ranks @p to and @p below name (gcx_car_fan_to), in shift order
 * from this rank (as gcx_car_contribute sends its chunks): all
 * owners starting at rank 0 put every fan-out's first bytes on one download
 * (16 emulated ranks at 200 Mbit/s: 7,700-10,300 TCP retransmits per 22
 * rounds in rank order, 420-1,100 in shift order; the round time the same
 * within the runs' spread). */
void gcx_car_publish_to(gcx_coded_allreduce_t *car, uint64_t round,
                        int c, const uint64_t *used, int lost,
                        gcx_coded_slot_t *slot, int to, int below)
{
    gcx_car_hdr_t hdr;
    size_t        off, len;
    int           k, r;

    gcx_car_block(car, c, &off, &len);
    gcx_car_hdr_init(car, round, lost ? GCX_CAR_LOST : GCX_CAR_DECODED, c,
                     &hdr);
    len = lost ? 0 : len;
    for (k = 1; k <= car->base.comm->size; ++k) {
        r = (car->base.comm->rank + k) % car->base.comm->size;
        if (gcx_car_fan_to(car, c, to, below, r)) {
            gcx_car_send(car, slot, r, r, &hdr, lost ? NULL : used, len);
        }
    }
}

/* Owner of chunk c: the bits to publish -- a copy that an earlier owner of
 * the line sent here before it was lost (it may have reached others: the
 * same bits must go on), else a decode of the taken set. 1 when ready. */
static int gcx_car_owner_bits(gcx_coded_allreduce_t *car, gcx_car_op_t *op,
                              int c, float *out)
{
    const float     **vecs = car->vecs;
    double           *a    = car->coeffs;
    gcx_car_chunk_t  *ch   = &op->ch[c];
    gcx_car_own_t    *own  = ch->own;
    gcx_coded_slot_t *copy;
    gcx_status_t      status;
    size_t            off, len;
    uint64_t         *landed;
    int               pos, w, mypos, decodable = 0;
    int               me = car->base.comm->rank;

    gcx_car_block(car, c, &off, &len);
    mypos = gcx_car_pos(car, c, me);
    for (pos = 0; pos < mypos; ++pos) {
        copy = ch->copy[pos];
        if (copy == NULL) {
            continue;
        }
        if (copy->reqs[0].status == GCX_INPROGRESS) {
            return 0; /* wait: it lands, or fails with its sender */
        }
        if (copy->reqs[0].status == GCX_OK) {
            ch->lost = copy->hdr.kind == GCX_CAR_LOST;
            gcx_wset_clear(own->used, car->base.n);
            if (!ch->lost) {
                gcx_wset_copy(own->used, copy->sets, car->base.n);
                gcx_car_copy(out, gcx_coded_slot_data(copy), len);
            }
            return 1;
        }
    }
    /* decode from the chunks that landed, once they are decodable; the
     * ones still on their way are not waited for */
    landed = gcx_car_landed(car, own);
    gcx_code_decodable(car->base.code, landed, &decodable);
    if (!decodable) {
        return 0;
    }
    status = gcx_code_decode_vector(car->base.code, landed, a);
    if (status != GCX_OK) {
        gcx_error("coded allreduce round %llu: chunk %d cannot be decoded "
                  "from the %d workers that landed: %s",
                  (unsigned long long)op->round, c,
                  gcx_wset_count(landed, car->base.n), gcx_strerror(status));
        op->super.status = status;
        return 0;
    }
    gcx_wset_clear(own->used, car->base.n);
    for (w = 0; w < car->base.n; ++w) {
        vecs[w] = NULL;
        if (a[w] != 0) {
            gcx_wset_add(own->used, w);
            vecs[w] = w == me ? gcx_car_at(op->sendbuf, off) :
                              gcx_coded_slot_data(own->in[w]);
        }
    }
    /* canonical: the same taken set gives the same bits on any rank */
    gcx_code_encode(car->base.n, a, vecs, len, out);
    return 1;
}

/* Can chunk c still be decoded (this rank acting for it)? With
 * @p abstentions 0, whatever the abstentions: could the workers not lost
 * decode it (then only abstentions stand in the way: a lost round). */
static int gcx_car_decodable_still(gcx_coded_allreduce_t *car,
                                   gcx_car_op_t *op, int c, int abstentions)
{
    gcx_tl_t      *tl    = car->base.comm->tl;
    gcx_car_own_t *own   = op->ch[c].own;
    uint64_t      *alive = car->scratch;
    int            w, decodable = 0, me = car->base.comm->rank;

    gcx_wset_clear(alive, car->base.n);
    for (w = 0; w < car->base.n; ++w) {
        if (gcx_wset_has(own->taken, w) ||
            (!gcx_wset_has(own->arrived, w) &&
             (!abstentions || !gcx_wset_has(own->abstained, w)) &&
             (w == me || !tl->ops->peer_failed(tl, w)))) {
            gcx_wset_add(alive, w); /* taken, or may still come */
        }
    }
    gcx_code_decodable(car->base.code, alive, &decodable);
    return decodable;
}

/* Owner of chunk c: decode (or adopt) and send it to every rank; once the
 * later owners of the line all have it, COMMIT to every rank. */
void gcx_car_own(gcx_coded_allreduce_t *car, gcx_car_op_t *op, int c)
{
    gcx_tl_t         *tl  = car->base.comm->tl;
    gcx_car_chunk_t  *ch  = &op->ch[c];
    gcx_car_own_t    *own = ch->own;
    gcx_coded_slot_t *slot;
    size_t            off, len;
    int               pos, mypos, me = car->base.comm->rank;

    gcx_car_block(car, c, &off, &len);
    mypos = gcx_car_pos(car, c, me);
    if (own->ostate == GCX_CAR_COLLECT) {
        /* the publish slot, taken once for the round (off the in-flight
         * list until both fan-outs are posted and the rank has its bits:
         * gcx_car_settle; gcx_car_release frees it if the round fails
         * first) */
        if (own->pub == NULL) {
            slot = gcx_coded_slot_get(&car->base);
            if (slot == NULL) {
                op->super.status = GCX_ERR_NOMEM;
                return;
            }
            if (!gcx_coded_slot_fan(slot, car->base.comm->size)) {
                gcx_coded_slot_put(&car->base, slot);
                op->super.status = GCX_ERR_NOMEM;
                return;
            }
            slot->round = op->round;
            own->pub    = slot;
        }
        slot = own->pub;
        if (!gcx_car_owner_bits(car, op, c, slot->block->data)) {
            if (op->super.status != GCX_INPROGRESS ||
                gcx_car_decodable_still(car, op, c, 1)) {
                return; /* wait for more */
            }
            if (!car->base.lost_rounds ||
                !gcx_car_decodable_still(car, op, c, 0)) {
                gcx_error("coded allreduce round %llu: chunk %d can no "
                          "longer be decoded (%d workers lost, %d "
                          "abstained)",
                          (unsigned long long)op->round, c,
                          gcx_wset_count(car->base.gone, car->base.n),
                          gcx_wset_count(own->abstained, car->base.n));
                op->super.status = GCX_ERR_UNDECODABLE;
                return;
            }
            /* only abstentions stand in the way: the outcome of the
             * chunk, agreed as bits would be, is "round lost" */
            ch->lost = 1;
            gcx_wset_clear(own->used, car->base.n);
        }
        own->acks_wanted = 0;
        for (pos = mypos + 1; pos < car->line; ++pos) {
            if (!tl->ops->peer_failed(tl, gcx_car_owner(car, c, pos))) {
                own->acks_wanted |= 1ull << pos;
            }
        }
        gcx_car_publish_to(car, op->round, c, own->used, ch->lost, slot,
                           GCX_CAR_OTHERS, 0);
        own->ostate = GCX_CAR_ACKS;
    }
    if (own->ostate == GCX_CAR_ACKS) {
        for (pos = mypos + 1; pos < car->line; ++pos) {
            if ((own->acks_wanted & (1ull << pos)) &&
                tl->ops->peer_failed(tl, gcx_car_owner(car, c, pos))) {
                own->acks_wanted &= ~(1ull << pos);
            }
        }
        if ((own->acks_got & own->acks_wanted) != own->acks_wanted) {
            return;
        }
        if (gcx_car_send_ctl(car, GCX_CAR_COMMIT, op->round, c,
                             GCX_CAR_OTHERS, 0) != GCX_OK) {
            op->super.status = GCX_ERR_NOMEM;
            return;
        }
        gcx_car_union(car, op->used_union, own->used);
        own->ostate = GCX_CAR_DONE;
        ch->final   = 1;
        gcx_car_settle(car, op, c);
    }
}
