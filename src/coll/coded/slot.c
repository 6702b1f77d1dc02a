/*
 * slot.c - internal buffers of the coded gather that transfers may
 * outlive their round with.
 *
 * A slot = a block of count floats + one transfer request, or one per rank
 * while it serves a fan-out (gcx_coded_slot_fan). Slots
 * are pooled: taken from a free list, allocated when it is empty (so the
 * pool grows to what the slowest peer holds, at most GCX_CODED_MAX_LAG
 * result slots plus a few), put back when their transfers are done. A
 * block whose transfer was abandoned (a dead or evicted peer; destroy)
 * gets an extra reference that the transport drops when the transfer ends
 * with success (never otherwise: a rendezvous peer may still read it), and
 * the slot takes a fresh block: memory a transfer may still touch is never
 * reused or freed. A slot may instead stand for a received eager payload
 * kept in the transport's buffer (gcx_coded_slot_hold: no copy), released
 * when the slot goes back; such a slot, or one for a header-only message,
 * needs no block (gcx_coded_slot_get_bare), and one for header-only sends
 * a block with no data (gcx_coded_slot_get_ctl): blocks are given only to
 * what needs them (gcx_coded_slot_block), and stats.buffer_bytes counts
 * them. Cost: a list pop per use; a malloc only when the pool grows or a
 * slot needs a bigger block than the one it has.
 */
#include "coded_int.h"

#include <stdint.h>
#include <stdlib.h>

/* A block of @p bytes of data, with @p tail bytes of header storage after
 * its hdr (coded->hdr_tail). */
static gcx_coded_block_t *gcx_coded_block_new(size_t bytes, size_t tail)
{
    void *p = NULL;

    size_t head = (sizeof(gcx_coded_block_t) + tail + 63) & ~(size_t)63;

    if (posix_memalign(&p, 64, head + (bytes ? bytes : 1)) != 0) {
        return NULL;
    }
    gcx_coded_block_t *block = p;
    block->refs = 1;
    block->cap  = bytes;
    block->data = (float *)((char *)p + head);
    return block;
}

static void gcx_coded_block_unref(void *arg)
{
    gcx_coded_block_t *block = arg;

    if (--block->refs == 0) {
        free(block);
    }
}

/* The slot's block goes (a free slot's: no transfer holds it). */
static void gcx_coded_slot_drop_block(gcx_coded_t *coded,
                                      gcx_coded_slot_t *slot)
{
    coded->stats.buffer_bytes -= slot->block->cap;
    gcx_coded_block_unref(slot->block);
    slot->block = NULL;
}

static int gcx_coded_slot_block_of(gcx_coded_t *coded,
                                   gcx_coded_slot_t *slot, size_t bytes)
{
    if (slot->block != NULL && slot->block->cap >= bytes) {
        return 1;
    }
    if (slot->block != NULL) {
        gcx_coded_slot_drop_block(coded, slot);
    }
    slot->block = gcx_coded_block_new(bytes, coded->hdr_tail);
    if (slot->block == NULL) {
        return 0;
    }
    coded->stats.buffer_bytes += bytes;
    return 1;
}

int gcx_coded_slot_block(gcx_coded_t *coded, gcx_coded_slot_t *slot)
{
    return gcx_coded_slot_block_of(coded, slot, coded->bytes);
}

gcx_coded_slot_t *gcx_coded_slot_get_bare(gcx_coded_t *coded)
{
    gcx_coded_slot_t *slot = coded->free_slots;

    if (slot != NULL) {
        coded->free_slots = slot->next;
    } else {
        slot = calloc(1, sizeof(*slot));
        if (slot == NULL) {
            return NULL;
        }
        slot->reqs = &slot->req1;
        slot->cap  = 1;
    }
    slot->next  = NULL;
    slot->nreqs = 0;
    return slot;
}

static gcx_coded_slot_t *gcx_coded_slot_get_with(gcx_coded_t *coded,
                                                 size_t bytes)
{
    gcx_coded_slot_t *slot = gcx_coded_slot_get_bare(coded);

    if (slot != NULL && !gcx_coded_slot_block_of(coded, slot, bytes)) {
        slot->next        = coded->free_slots;
        coded->free_slots = slot;
        return NULL;
    }
    return slot;
}

gcx_coded_slot_t *gcx_coded_slot_get(gcx_coded_t *coded)
{
    return gcx_coded_slot_get_with(coded, coded->bytes);
}

gcx_coded_slot_t *gcx_coded_slot_get_ctl(gcx_coded_t *coded)
{
    return gcx_coded_slot_get_with(coded, 0);
}

int gcx_coded_slot_hold(gcx_coded_t *coded, gcx_coded_slot_t *slot,
                        const gcx_tl_am_msg_t *msg)
{
    gcx_tl_t *tl = coded->comm->tl;

    if (msg->rndv || !msg->in_place || msg->data == NULL ||
        (uintptr_t)msg->data % _Alignof(float) != 0 ||
        tl->ops->am_hold(tl, msg) != GCX_OK) {
        return 0;
    }
    slot->held               = *msg;
    slot->held.header        = NULL; /* valid only in the handler */
    slot->held.header_length = 0;
    return 1;
}

static void gcx_coded_slot_unhold(gcx_coded_t *coded, gcx_coded_slot_t *slot)
{
    if (slot->held.data != NULL) {
        coded->comm->tl->ops->am_release(coded->comm->tl, &slot->held);
        slot->held.data = NULL;
    }
}

int gcx_coded_slot_fan(gcx_coded_slot_t *slot, int n)
{
    gcx_tl_req_t *reqs;
    int           i;

    if (n > slot->cap) {
        reqs = calloc((size_t)n, sizeof(*reqs));
        if (reqs == NULL) {
            return 0;
        }
        if (slot->reqs != &slot->req1) {
            free(slot->reqs);
        }
        slot->reqs = reqs;
        slot->cap  = n;
    }
    slot->nreqs = n;
    for (i = 0; i < n; ++i) {
        slot->reqs[i].status = GCX_OK;
    }
    return 1;
}

/* Back to one request (every one settled or abandoned: detached) */
static void gcx_coded_slot_unfan(gcx_coded_slot_t *slot)
{
    if (slot->reqs != &slot->req1) {
        free(slot->reqs);
        slot->reqs = &slot->req1;
        slot->cap  = 1;
    }
}

void gcx_coded_slot_put(gcx_coded_t *coded, gcx_coded_slot_t *slot)
{
    gcx_coded_slot_unhold(coded, slot);
    if (slot->block != NULL && slot->block->refs > 1) {
        /* an abandoned transfer still holds it: let go, take a new one */
        gcx_coded_slot_drop_block(coded, slot);
    }
    gcx_coded_slot_unfan(slot);
    slot->nreqs       = 0;
    slot->next        = coded->free_slots;
    coded->free_slots = slot;
}

int gcx_coded_slot_busy(const gcx_coded_slot_t *slot)
{
    int i, busy = 0;

    for (i = 0; i < slot->nreqs; ++i) {
        busy += slot->reqs[i].status == GCX_INPROGRESS;
    }
    return busy;
}

void gcx_coded_slot_abandon_req(gcx_coded_t *coded, gcx_coded_slot_t *slot,
                                int i)
{
    gcx_tl_t *tl = coded->comm->tl;

    if (slot->reqs[i].status != GCX_INPROGRESS) {
        return;
    }
    ++slot->block->refs;
    tl->ops->abandon(tl, &slot->reqs[i], gcx_coded_block_unref, slot->block);
}

void gcx_coded_reclaim(gcx_coded_t *coded)
{
    gcx_coded_slot_t **pp = &coded->inflight, *slot;

    while ((slot = *pp) != NULL) {
        if (gcx_coded_slot_busy(slot) == 0) {
            *pp = slot->next;
            gcx_coded_slot_put(coded, slot);
        } else {
            pp = &slot->next;
        }
    }
}

static void gcx_coded_list_release(gcx_coded_t *coded, gcx_coded_slot_t *slot)
{
    gcx_coded_slot_t *next;
    int               i;

    for (; slot != NULL; slot = next) {
        next = slot->next;
        for (i = 0; i < slot->nreqs; ++i) {
            gcx_coded_slot_abandon_req(coded, slot, i);
        }
        gcx_coded_slot_unhold(coded, slot);
        if (slot->block != NULL) {
            gcx_coded_slot_drop_block(coded, slot);
        }
        free(slot->sets);
        gcx_coded_slot_unfan(slot);
        free(slot);
    }
}

void gcx_coded_slots_release(gcx_coded_t *coded)
{
    gcx_coded_list_release(coded, coded->inflight);
    gcx_coded_list_release(coded, coded->stash);
    gcx_coded_list_release(coded, coded->free_slots);
    coded->inflight = coded->stash = coded->free_slots = NULL;
}
