/*
 * masterless_wire.c - the master-less coded allreduce's messages: the wire
 * header, sends (chunks and decoded chunks eager, header-only ACK / COMMIT /
 * VOID / LOST fan-outs in one slot), the AM handler that dispatches a
 * message to its round (or stages it for a round not entered yet, or drops
 * a finished round's), pulling a payload in place (GCX_CODED_IN_PLACE) and
 * the stash. Cost: one header parse and a walk of the rounds here (at most
 * the window) per message; a staged message holds its payload in place.
 */
#include "masterless_int.h"
#include "base/log.h"
#include "base/time.h"

#include <stdlib.h>
#include <string.h>

/* a header and its set fit the block's header storage (hdr + hdr_tail) */
_Static_assert(sizeof(gcx_car_hdr_t) <= sizeof(gcx_coded_hdr_t),
               "the master-less header fits where a block keeps the star's");

void gcx_car_hdr_init(gcx_coded_allreduce_t *car, uint64_t round,
                      int kind, int c, gcx_car_hdr_t *hdr)
{
    memset(hdr, 0, sizeof(*hdr));
    hdr->comm_id  = car->base.comm->id;
    hdr->instance = car->base.instance;
    hdr->round    = round;
    hdr->sender   = (uint16_t)car->base.comm->rank;
    hdr->kind     = (uint16_t)kind;
    hdr->chunk    = (uint32_t)c;
}

/* Request i of a slot: the block's header storage (big enough: hdr_tail)
 * holds the header while the send reads it, with @p used after it (a
 * DECODED's set; NULL for the other kinds); len floats of payload (0:
 * header only).
 * A failed send (peer gone) shows where its answer is waited for. Payloads
 * go eager (am_send_eager): each rank posts 2(P-1) of them at once, and
 * with rendezvous every one of those handshakes waited behind the data
 * queued on its TCP link (8 emulated ranks: 1.2-1.7x the ring's time with
 * rendezvous, 1.07-1.21x eager; perf/coded/README.md). A late chunk then
 * crosses the link before it is dropped. */
void gcx_car_send(gcx_coded_allreduce_t *car, gcx_coded_slot_t *slot,
                  int i, int peer, const gcx_car_hdr_t *hdr,
                  const uint64_t *used, size_t len)
{
    gcx_tl_t      *tl   = car->base.comm->tl;
    unsigned char *head = (unsigned char *)&slot->block->hdr;
    gcx_car_hdr_t *out  = (gcx_car_hdr_t *)(void *)head;
    size_t         hlen = sizeof(*hdr);
    gcx_iov_t      iov;

    memcpy(out, hdr, sizeof(*hdr));
    if (used != NULL) {
        out->nwords = (uint32_t)car->base.words;
        memcpy(head + hlen, used, car->base.words * sizeof(uint64_t));
        hlen += car->base.words * sizeof(uint64_t);
    }
    iov.buffer = slot->block->data;
    iov.length = len * sizeof(float);
    if (len > 0) {
        tl->ops->am_send_eager(tl, peer, car->base.am_id, head, hlen, &iov, 1,
                               &slot->reqs[i]);
    } else {
        tl->ops->am_send(tl, peer, car->base.am_id, head, hlen, NULL, 0,
                         &slot->reqs[i]);
    }
}

/* A slot whose sends may outlive the round: reclaimed when they end; with
 * a chunk-sized block (@p data) or for header-only sends; @p nreqs
 * requests (1, or the communicator's size for a fan-out, request r to rank
 * r). NULL when out of memory. */
gcx_coded_slot_t *gcx_car_out_slot(gcx_coded_allreduce_t *car,
                                   uint64_t round, int data, int nreqs)
{
    gcx_coded_slot_t *slot = data ? gcx_coded_slot_get(&car->base) :
                                    gcx_coded_slot_get_ctl(&car->base);

    if (slot != NULL && !gcx_coded_slot_fan(slot, nreqs)) {
        gcx_coded_slot_put(&car->base, slot);
        slot = NULL;
    }
    if (slot == NULL) {
        gcx_error("coded allreduce: out of memory for a send");
        return NULL;
    }
    slot->round        = round;
    slot->next         = car->base.inflight;
    car->base.inflight = slot;
    return slot;
}

/* Is rank r among the receivers that @p to and @p below name for a
 * fan-out about chunk c (GCX_CAR_OTHERS)? */
int gcx_car_fan_to(const gcx_coded_allreduce_t *car, int c, int to,
                   int below, int r)
{
    gcx_tl_t *tl = car->base.comm->tl;
    int       pos;

    if (to >= 0) {
        return r == to;
    }
    pos = gcx_car_pos(car, c, r);
    return r != car->base.comm->rank && !tl->ops->peer_failed(tl, r) &&
           !(pos >= 0 && pos < below);
}

/* A header-only ACK, COMMIT (the decoded bits sent before are final) or
 * VOID about chunk c of @p round to the ranks @p to and @p below name
 * (gcx_car_fan_to): one slot, the same header for all. */
gcx_status_t gcx_car_send_ctl(gcx_coded_allreduce_t *car, int kind,
                              uint64_t round, int c, int to, int below)
{
    gcx_coded_slot_t *slot;
    gcx_car_hdr_t     hdr;
    int               r;

    slot = gcx_car_out_slot(car, round, 0, to >= 0 ? 1 : car->base.comm->size);
    if (slot == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_car_hdr_init(car, round, kind, c, &hdr);
    if (to >= 0) {
        gcx_car_send(car, slot, 0, to, &hdr, NULL, 0);
        return GCX_OK;
    }
    for (r = 0; r < car->base.comm->size; ++r) {
        if (gcx_car_fan_to(car, c, to, below, r)) {
            gcx_car_send(car, slot, r, r, &hdr, NULL, 0);
        }
    }
    return GCX_OK;
}

/* The state of @p round here (entered or served ahead), or NULL. */
gcx_car_op_t *gcx_car_find(gcx_coded_allreduce_t *car, uint64_t round)
{
    gcx_car_op_t *op;

    for (op = car->rounds; op != NULL && op->round < round; op = op->next) {
    }
    return op != NULL && op->round == round ? op : NULL;
}

static gcx_coded_slot_t *gcx_car_stash_find(gcx_coded_allreduce_t *car,
                                            uint64_t round, int kind,
                                            int sender, int chunk, int unlink)
{
    gcx_coded_slot_t **pp = &car->base.stash, *slot;

    for (; (slot = *pp) != NULL; pp = &slot->next) {
        if (slot->round == round && slot->hdr.kind == kind &&
            slot->hdr.sender == sender && slot->worker == chunk) {
            if (unlink) {
                *pp = slot->next;
            }
            return slot;
        }
    }
    return NULL;
}

/* A slot whose receive may still be in flight: the transport keeps its
 * block until the transfer ends; the slot goes back to the pool. */
void gcx_car_drop(gcx_coded_allreduce_t *car, gcx_coded_slot_t *slot)
{
    gcx_coded_slot_abandon_req(&car->base, slot, 0);
    gcx_coded_slot_put(&car->base, slot);
}

/* A payload into a fresh slot (hdr kept in slot->hdr, chunk in
 * slot->worker): kept where the transport assembled it when it can
 * (gcx_coded_slot_hold: no copy), else copied into the slot's block. A
 * slot that holds its payload in place or has none (a header-only kind)
 * takes no block: a rank behind stages (P-1) COMMITs and decoded chunks
 * per round, which would otherwise pin a chunk-sized block each. NULL
 * when out of memory. */
gcx_coded_slot_t *gcx_car_pull(gcx_coded_allreduce_t *car,
                               const gcx_car_hdr_t *hdr,
                               const gcx_tl_am_msg_t *msg)
{
    gcx_tl_t         *tl = car->base.comm->tl;
    gcx_coded_slot_t *slot;
    gcx_iov_t         iov;

    slot = gcx_coded_slot_get_bare(&car->base);
    if (slot == NULL) {
        gcx_error("coded allreduce: out of memory taking a message");
        return NULL;
    }
    if (hdr->kind == GCX_CAR_DECODED && slot->sets == NULL) {
        slot->sets = malloc(car->base.words * sizeof(uint64_t));
        if (slot->sets == NULL) {
            gcx_coded_slot_put(&car->base, slot);
            gcx_error("coded allreduce: out of memory taking a message");
            return NULL;
        }
    }
    if (hdr->kind == GCX_CAR_DECODED) { /* the set after the header */
        memcpy(slot->sets, (const unsigned char *)msg->header + sizeof(*hdr),
               car->base.words * sizeof(uint64_t));
    }
    memset(&slot->hdr, 0, sizeof(slot->hdr));
    slot->round          = hdr->round;
    slot->hdr.round      = hdr->round;
    slot->hdr.sender     = hdr->sender;
    slot->hdr.kind       = hdr->kind;
    slot->worker         = (int)hdr->chunk;
    slot->t_arrival      = gcx_time_now();
    slot->nreqs          = 1;
    slot->reqs[0].status = GCX_OK;
    if (msg->length == 0) {
        return slot; /* header only: nothing to receive */
    }
    if (car->in_place && gcx_coded_slot_hold(&car->base, slot, msg)) {
        ++car->base.stats.in_place;
        return slot;
    }
    if (!gcx_coded_slot_block(&car->base, slot)) {
        gcx_coded_slot_put(&car->base, slot);
        gcx_error("coded allreduce: out of memory taking a message");
        return NULL;
    }
    iov.buffer           = slot->block->data;
    iov.length           = msg->length;
    tl->ops->am_recv(tl, msg, &iov, 1, &slot->reqs[0]);
    return slot;
}

void gcx_car_stage(gcx_coded_allreduce_t *car, const gcx_car_hdr_t *hdr,
                   const gcx_tl_am_msg_t *msg)
{
    gcx_coded_slot_t *slot;

    if (gcx_car_stash_find(car, hdr->round, hdr->kind, hdr->sender,
                           (int)hdr->chunk, 0) != NULL) {
        gcx_warn("coded allreduce: dropping a duplicate message of round "
                 "%llu from rank %u",
                 (unsigned long long)hdr->round, hdr->sender);
        return;
    }
    slot = gcx_car_pull(car, hdr, msg);
    if (slot != NULL) {
        slot->next      = car->base.stash;
        car->base.stash = slot;
        ++car->base.stats.early;
    }
}

gcx_status_t gcx_car_hdr_parse(const void *bytes, size_t len, size_t payload,
                               int size, int line, size_t count,
                               gcx_car_hdr_t *hdr,
                               const unsigned char **used_p)
{
    const unsigned char *used = (const unsigned char *)bytes + sizeof(*hdr);
    size_t               off, clen, words = GCX_WSET_WORDS(size);
    int                  pos;

    if (used_p != NULL) {
        *used_p = NULL;
    }
    if (len < sizeof(*hdr) || size < 1 || line < 1) {
        return GCX_ERR_INVALID;
    }
    memcpy(hdr, bytes, sizeof(*hdr)); /* may be unaligned */
    if (len != gcx_car_hdr_len(hdr->kind, size) ||
        hdr->nwords != (hdr->kind == GCX_CAR_DECODED ? words : 0) ||
        hdr->sender >= (unsigned)size || hdr->chunk >= (unsigned)size) {
        return GCX_ERR_INVALID;
    }
    if (hdr->kind == GCX_CAR_DECODED &&
        !gcx_coded_wire_sets_valid(used, 1, size)) {
        return GCX_ERR_INVALID; /* a worker at or past n */
    }
    gcx_coll_block(count, size, (int)hdr->chunk, &off, &clen);
    pos = gcx_coll_mod((int)hdr->sender - (int)hdr->chunk, size);
    switch (hdr->kind) {
    case GCX_CAR_CHUNK: /* from any worker */
        return payload == clen * sizeof(float) ? GCX_OK : GCX_ERR_INVALID;
    case GCX_CAR_DECODED: /* from an owner of the chunk */
        if (payload != clen * sizeof(float) || pos >= line) {
            return GCX_ERR_INVALID;
        }
        if (used_p != NULL) {
            *used_p = used;
        }
        return GCX_OK;
    case GCX_CAR_ACK: /* from a later owner */
        return payload == 0 && pos > 0 && pos < line ? GCX_OK :
                                                       GCX_ERR_INVALID;
    case GCX_CAR_COMMIT: /* from an owner */
    case GCX_CAR_LOST:
        return payload == 0 && pos < line ? GCX_OK : GCX_ERR_INVALID;
    case GCX_CAR_VOID: /* from any worker */
        return payload == 0 ? GCX_OK : GCX_ERR_INVALID;
    default:
        return GCX_ERR_INVALID;
    }
}

void gcx_car_am_handler(void *arg, const gcx_tl_am_msg_t *msg)
{
    gcx_coded_allreduce_t *car = arg;
    gcx_car_hdr_t          hdr;

    /* another object's message (a destroyed one's, whose AM id this object
     * took: its lengths follow its own size and count) is counted foreign
     * before its lengths are held against this object's */
    if (msg->header_length >= sizeof(hdr)) {
        memcpy(&hdr, msg->header, sizeof(hdr)); /* may be unaligned */
        if (hdr.comm_id != car->base.comm->id ||
            hdr.instance != car->base.instance) {
            ++car->rx_foreign;
            car->rx_foreign_comm     = hdr.comm_id;
            car->rx_foreign_instance = hdr.instance;
            return;
        }
    }
    if (gcx_car_hdr_parse(msg->header, msg->header_length, msg->length,
                          car->base.comm->size, car->line, car->base.count,
                          &hdr, NULL) != GCX_OK) {
        gcx_warn("coded allreduce: dropping a malformed message");
        return;
    }
    if (hdr.sender == (unsigned)car->base.comm->rank) {
        ++car->rx_foreign; /* not from a peer: drop */
        car->rx_foreign_comm     = hdr.comm_id;
        car->rx_foreign_instance = hdr.instance;
        return;
    }
    ++car->rx[hdr.kind]; /* a known kind: checked by the parse */
    switch (hdr.kind) {
    case GCX_CAR_CHUNK:
        gcx_car_on_chunk(car, &hdr, msg);
        break;
    case GCX_CAR_DECODED:
    case GCX_CAR_LOST:
        gcx_car_on_decoded(car, &hdr, msg);
        break;
    case GCX_CAR_VOID:
        gcx_car_on_void(car, &hdr, msg);
        break;
    default: /* ACK, COMMIT */
        gcx_car_on_ctl(car, &hdr, msg);
        break;
    }
}

/* Staged messages of this round that can be used now. */
void gcx_car_unstash(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_coded_slot_t **pp = &car->base.stash, *slot;
    int                c, pos, me = car->base.comm->rank;

    while ((slot = *pp) != NULL) {
        c = slot->worker;
        if (slot->round != op->round ||
            ((slot->hdr.kind == GCX_CAR_CHUNK ||
              slot->hdr.kind == GCX_CAR_VOID) && op->acting[c] != me)) {
            pp = &slot->next;
            continue;
        }
        *pp = slot->next;
        if (slot->hdr.kind == GCX_CAR_CHUNK) {
            /* landed or not: the taken slot's request is checked later */
            gcx_car_take(car, op->ch[c].own, slot->hdr.sender, NULL, NULL,
                         slot);
            continue;
        }
        if (slot->hdr.kind == GCX_CAR_VOID) {
            gcx_wset_add(op->ch[c].own->abstained, slot->hdr.sender);
            gcx_car_drop(car, slot);
            continue;
        }
        pos = gcx_car_pos(car, c, slot->hdr.sender);
        if (slot->hdr.kind == GCX_CAR_COMMIT) {
            op->ch[c].committed |= 1ull << pos;
            gcx_car_drop(car, slot);
            continue;
        }
        if (op->ch[c].copy[pos] == NULL) {
            op->ch[c].copy[pos] = slot;
        } else {
            gcx_car_drop(car, slot);
        }
    }
}
