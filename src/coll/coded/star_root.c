/*
 * star_root.c - the root's side of a round: take arrivals until the set is
 * decodable, decode, send the decoded sum to every rank.
 *
 * Arrival of worker w's header (AM handler, or the stash of messages that
 * came before the root entered the round):
 * - the round is decodable already, or w's coefficient is known to be 0
 *   (FR: its group has replied): kept, not pulled (a rendezvous payload's
 *   descriptor, am_hold; a staged one's slot) until the round ends, when
 *   it is released; an eager one is dropped;
 * - the coefficient is known (UNCODED, FR, WEIGHTED: streaming): the first
 *   taken message with coefficient 1 is pulled straight into recvbuf (zero
 *   copy), the others into an internal block and folded with
 *   gcx_code_accumulate() as they land -- the decode costs one pass per
 *   used message, overlapped with the arrivals;
 * - not known (CR, MATRIX): pulled into a block; once decodable, one
 *   gcx_code_encode() pass with the decoding vector.
 * The root's own contribution (when it is a worker) arrives first, at the
 * moment the root enters the round, and is read from sendbuf in place.
 *
 * Publishing: the decoded sum is copied into a result slot (one memcpy) and
 * sent with one active message per rank; the round completes without
 * waiting for those sends, so a slow rank only holds a slot. A rank with
 * GCX_CODED_MAX_LAG results in flight holds the next publication back
 * until it takes one (flow control, gcx_coded_root_laggards); one that
 * takes none within the round's GCX_TIMEOUT, or whose connection is lost,
 * is counted gone: it gets no more results, its transfers are abandoned.
 *
 * Abstention: a worker's VOID message (or the root's own abstention) marks
 * it abstained for the round: never taken, never waited for. A VOID that
 * comes after the round is decodable changes nothing (dropped as late).
 *
 * Lost transfer: a taken payload whose pull fails (its sender died
 * mid-payload) counts its worker gone, and the round is rebuilt from what
 * is left, taking kept payloads in its place (gcx_coded_root_retake).
 * Stuck transfer: a taken payload still landing in an internal block at
 * GCX_TIMEOUT (its sender stopped or starved mid-payload; the root cannot
 * tell that from a slow link, so it waits the whole timeout) is given up
 * when the kept contributions make the round decodable without it: the
 * round is rebuilt from those, with GCX_CODED_GIVE_UP_GRACE more to land
 * them, and the late sender is left out of this round only (not counted
 * gone; its payload lands in the given-up block, which is reused once the
 * transfer ends). A payload landing straight into recvbuf (the zero-copy
 * base: a root that is not a worker, FR or uncoded) is never given up, as
 * its late bytes would overwrite the result: that round times out.
 *
 * Failure: when the arrived workers plus those that may still arrive (not
 * gone, not abstained) cannot be decoded, the round fails with
 * GCX_ERR_UNDECODABLE, when GCX_TIMEOUT passes first with GCX_ERR_TIMEOUT;
 * either way an ERROR message goes to every rank still reachable. So a round that abstentions leave undecodable fails as
 * soon as the last needed worker abstains, not after GCX_TIMEOUT.
 */
#include "coded_int.h"
#include "base/time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void gcx_coded_root_take(gcx_coded_op_t *op, int w, double coeff,
                                const gcx_tl_am_msg_t *msg,
                                gcx_coded_slot_t *slot, double t)
{
    gcx_coded_t       *coded = op->coded;
    gcx_tl_t          *tl    = coded->comm->tl;
    gcx_coded_entry_t *e     = &op->entries[op->nentries];
    gcx_iov_t          iov;

    e->worker = w;
    e->coeff  = coeff;
    e->slot   = slot;
    e->req    = NULL;
    if (slot != NULL) { /* staged before the round: maybe still landing */
        e->buf = slot->block->data;
        if (slot->reqs[0].status == GCX_INPROGRESS) {
            e->req = &slot->reqs[0];
        }
    } else if (msg == NULL) { /* the root's own */
        e->buf = op->sendbuf;
    } else {
        if (op->streaming && op->nentries == 0 && coeff == 1.0) {
            e->buf = op->recvbuf; /* zero copy: lands as the base */
        } else {
            e->slot = gcx_coded_slot_get(coded);
            if (e->slot == NULL) {
                op->super.status = GCX_ERR_NOMEM;
                return;
            }
            e->slot->nreqs = 1;
            e->buf         = e->slot->block->data;
        }
        iov.buffer = (void *)e->buf;
        iov.length = coded->bytes;
        /* not landed yet, or failed: the request tells (a failed pull is
         * a lost contribution, see gcx_coded_root_retake) */
        e->req = e->slot != NULL ? &e->slot->reqs[0] : &op->rreq;
        tl->ops->am_recv(tl, msg, &iov, 1, e->req);
        if (e->req->status == GCX_OK) {
            e->req = NULL;
        }
    }
    gcx_wset_add(op->arrived, w);
    op->arrival[w] = (float)t;
    if (op->streaming && coeff != 0.0) {
        gcx_wset_add(op->used, w);
        ++op->nused;
    }
    ++op->nentries;
}

/* Is the round decodable from what was taken? Streaming: the count of
 * nonzero coefficients reached gcx_code_stream_need() (O(1)); otherwise
 * the code's predicate on the arrived set. */
static int gcx_coded_root_is_decodable(gcx_coded_op_t *op)
{
    int decodable = 0;

    if (op->streaming && op->need >= 0) {
        return op->nused >= op->need;
    }
    return gcx_code_decodable(op->coded->code, op->arrived, &decodable) ==
               GCX_OK &&
           decodable;
}

/* Let go of a contribution not taken: a staged slot is freed once its
 * transfer is done, a kept rendezvous payload is released (its sender
 * completes). */
static void gcx_coded_root_drop(gcx_coded_op_t *op,
                                const gcx_tl_am_msg_t *msg, int msg_held,
                                gcx_coded_slot_t *slot)
{
    gcx_coded_t *coded = op->coded;

    if (slot != NULL) {
        slot->next      = coded->inflight;
        coded->inflight = slot;
    } else if (msg != NULL && msg_held) {
        coded->comm->tl->ops->am_release(coded->comm->tl, msg);
    }
}

/* Keep worker w's contribution, not taken now, until the round ends: it
 * replaces a taken one whose transfer fails. A staged slot is kept as it
 * is, a rendezvous payload with am_hold(); an eager payload (here already,
 * so a taken eager one is never lost) is dropped. */
static void gcx_coded_root_keep(gcx_coded_op_t *op, int w,
                                const gcx_tl_am_msg_t *msg, int msg_held,
                                gcx_coded_slot_t *slot, double t, int late)
{
    gcx_coded_t      *coded = op->coded;
    gcx_tl_t         *tl    = coded->comm->tl;
    gcx_coded_held_t *h     = &op->held[op->nheld];

    if (op->nheld < op->coded->n &&
        (slot != NULL ||
         (msg != NULL &&
          (msg_held || (msg->rndv && tl->ops->am_hold(tl, msg) == GCX_OK))))) {
        h->worker = w;
        h->t      = t;
        h->late   = late;
        h->slot   = slot;
        if (msg != NULL) {
            h->msg               = *msg;
            h->msg.header        = NULL; /* valid only in the handler */
            h->msg.header_length = 0;
        }
        ++op->nheld;
        return;
    }
    gcx_coded_root_drop(op, msg, msg_held, slot);
    if (late) {
        ++coded->stats.late_dropped;
    } else {
        ++coded->stats.unneeded;
        gcx_wset_add(op->dropped, w);
    }
}

/* The round ends: what was kept is let go. */
static void gcx_coded_root_release_held(gcx_coded_op_t *op)
{
    int i;

    for (i = 0; i < op->nheld; ++i) {
        gcx_coded_held_t *h = &op->held[i];

        if (h->late) {
            ++op->coded->stats.late_dropped;
        } else {
            ++op->coded->stats.unneeded;
        }
        gcx_coded_root_drop(op, h->slot != NULL ? NULL : &h->msg, 1, h->slot);
    }
    op->nheld = 0;
}

/*
 * Decide about worker w's contribution: its payload @p msg (in the AM
 * handler; @p msg_held: kept earlier with am_hold), a staged @p slot, or
 * neither (the root's own, read from sendbuf). Taken, kept, or dropped.
 */
static void gcx_coded_root_arrive(gcx_coded_op_t *op, int w,
                                  const gcx_tl_am_msg_t *msg, int msg_held,
                                  gcx_coded_slot_t *slot, double t)
{
    gcx_coded_t *coded = op->coded;
    double       coeff = 0;
    int          known = 0;

    if (gcx_wset_has(op->arrived, w) || gcx_wset_has(op->abstained, w) ||
        op->super.status != GCX_INPROGRESS ||
        gcx_code_arrival_coeff(coded->code, op->arrived, w, &known,
                               &coeff) != GCX_OK) {
        ++coded->stats.late_dropped;
        gcx_coded_root_drop(op, msg, msg_held, slot);
        return;
    }
    if (op->decodable) {
        gcx_coded_root_keep(op, w, msg, msg_held, slot, t, 1);
        return;
    }
    if (op->nentries == 0) {
        op->streaming = known;
    }
    if (known && coeff == 0.0) {
        gcx_wset_add(op->arrived, w); /* arrived, not needed */
        op->arrival[w] = (float)t;
        gcx_coded_root_keep(op, w, msg, msg_held, slot, t, 0);
        return;
    }
    gcx_coded_root_take(op, w, coeff, msg, slot, t);
    if (gcx_coded_root_is_decodable(op)) {
        op->decodable = 1;
    }
}

/*
 * A taken contribution whose transfer failed (its sender died mid-payload,
 * or the pull could not start) is lost: the worker counts as gone, and the
 * round is rebuilt from what is left; one given up as stuck (op->given_up,
 * gcx_coded_root_give_up) is lost the same way for this round only.
 * Entries already folded into recvbuf stay (a lost one was never folded:
 * folding waits for its landing); the other taken ones are taken again
 * in their order with their buffers (their coefficients do not depend on
 * a later arrival); then the kept
 * contributions arrive again, in their order, and one of them may now be
 * taken (FR: another of the lost worker's group; CR: the next arrival).
 * Cost: O(n) per progress call to look, nothing more unless one is lost.
 */
static void gcx_coded_root_retake(gcx_coded_op_t *op)
{
    gcx_coded_t       *coded = op->coded;
    gcx_coded_entry_t *again;
    gcx_coded_held_t  *kept;
    uint64_t          *lost = op->scratch;
    int                nlost = 0, nagain = 0, nkept, i, known;
    double             coeff;

    for (i = op->nfolded; i < op->nentries; ++i) {
        gcx_coded_entry_t *e = &op->entries[i];

        if (e->req == NULL || e->req->status == GCX_OK ||
            (e->req->status == GCX_INPROGRESS &&
             !gcx_wset_has(op->given_up, e->worker))) {
            continue;
        }
        ++nlost;
    }
    if (nlost == 0) {
        return; /* the common case: O(entries) */
    }
    again = malloc((size_t)op->nentries * sizeof(*again));
    kept  = malloc(((size_t)op->nheld + 1) * sizeof(*kept));
    if (again == NULL || kept == NULL) {
        free(again);
        free(kept);
        op->super.status = GCX_ERR_NOMEM;
        return;
    }
    gcx_wset_clear(lost, coded->n);
    for (i = op->nfolded; i < op->nentries; ++i) {
        gcx_coded_entry_t *e = &op->entries[i];

        if (e->req == NULL || e->req->status == GCX_OK ||
            (e->req->status == GCX_INPROGRESS &&
             !gcx_wset_has(op->given_up, e->worker))) {
            again[nagain++] = *e;
            continue;
        }
        if (e->req->status == GCX_INPROGRESS) {
            gcx_warn("coded gather round %llu: the contribution of worker "
                     "%d (rank %d) is still landing at GCX_TIMEOUT=%g s; "
                     "given up for this round (worker not counted gone), "
                     "decoding from the kept ones",
                     (unsigned long long)op->round, e->worker,
                     gcx_coded_rank_of(coded, e->worker),
                     coded->comm->config.timeout);
        } else {
            gcx_warn("coded gather round %llu: the contribution of worker "
                     "%d (rank %d) was lost mid-transfer (%s); worker "
                     "counted gone, decoding from the others",
                     (unsigned long long)op->round, e->worker,
                     gcx_coded_rank_of(coded, e->worker),
                     gcx_strerror(e->req->status));
            gcx_wset_add(coded->gone, e->worker);
        }
        gcx_wset_add(lost, e->worker);
        ++coded->stats.transfers_lost;
        gcx_coded_root_drop(op, NULL, 0, e->slot);
    }
    nkept = op->nheld;
    memcpy(kept, op->held, (size_t)nkept * sizeof(kept[0]));
    op->nheld     = 0;
    op->nentries  = op->nfolded;
    op->decodable = 0;
    op->nused     = 0;
    gcx_wset_copy(op->arrived, op->dropped, coded->n);
    gcx_wset_clear(op->used, coded->n);
    for (i = 0; i < (int)coded->words; ++i) {
        op->abstained[i] |= op->late_void[i] & ~lost[i];
    }
    gcx_wset_clear(op->late_void, coded->n);
    for (i = 0; i < op->nfolded; ++i) {
        gcx_wset_add(op->arrived, op->entries[i].worker);
        if (op->streaming && op->entries[i].coeff != 0.0) {
            gcx_wset_add(op->used, op->entries[i].worker);
            ++op->nused;
        }
    }
    for (i = 0; i < nagain; ++i) {
        gcx_coded_entry_t *e = &op->entries[op->nentries++];

        *e = again[i];
        if (gcx_code_arrival_coeff(coded->code, op->arrived, e->worker, &known,
                                   &coeff) == GCX_OK && known) {
            e->coeff = coeff;
        }
        gcx_wset_add(op->arrived, e->worker);
        if (op->streaming && e->coeff != 0.0) {
            gcx_wset_add(op->used, e->worker);
            ++op->nused;
        }
    }
    if (gcx_coded_root_is_decodable(op)) {
        op->decodable = 1;
    }
    for (i = 0; i < nkept; ++i) {
        gcx_coded_root_arrive(op, kept[i].worker,
                              kept[i].slot != NULL ? NULL : &kept[i].msg, 1,
                              kept[i].slot, kept[i].t);
    }
    free(again);
    free(kept);
}

/*
 * At GCX_TIMEOUT the round is decodable but taken payloads have not landed
 * (their senders stopped or starved mid-payload, or the links are slow):
 * give them up when the contributions kept since make the round decodable
 * without them, and give the rebuilt round GCX_CODED_GIVE_UP_GRACE to land
 * those. Once per round; never a payload landing in recvbuf. 1 when given
 * up (the caller rebuilds with gcx_coded_root_retake), else 0: the round
 * times out as before.
 */
static int gcx_coded_root_give_up(gcx_coded_op_t *op)
{
    gcx_coded_t *coded = op->coded;
    uint64_t    *stuck = op->given_up, *kept = op->scratch;
    int          i, nstuck = 0, decodable = 0;

    if (op->gave_up) {
        return 0;
    }
    for (i = op->nfolded; i < op->nentries; ++i) {
        const gcx_coded_entry_t *e = &op->entries[i];

        if (e->req == NULL || e->req->status != GCX_INPROGRESS) {
            continue;
        }
        if (e->slot == NULL) {
            gcx_wset_clear(stuck, coded->n);
            return 0; /* lands in recvbuf: its late bytes would corrupt it */
        }
        gcx_wset_add(stuck, e->worker);
        ++nstuck;
    }
    for (i = 0; i < (int)coded->words; ++i) {
        kept[i] = op->arrived[i] & ~stuck[i];
    }
    for (i = 0; i < op->nheld; ++i) {
        const gcx_coded_held_t *h = &op->held[i];

        if (h->slot == NULL || h->slot->reqs[0].status == GCX_OK) {
            gcx_wset_add(kept, h->worker); /* held, or staged and landed */
        }
    }
    if (nstuck == 0 ||
        gcx_code_decodable(coded->code, kept, &decodable) != GCX_OK ||
        !decodable) {
        gcx_wset_clear(stuck, coded->n);
        return 0;
    }
    op->gave_up        = 1;
    op->super.deadline = gcx_time_now() + GCX_CODED_GIVE_UP_GRACE;
    return 1;
}

/* Worker w abstains from the live round (VOID, or the root's own). */
static void gcx_coded_root_abstain(gcx_coded_op_t *op, int w)
{
    if (op->decodable || gcx_wset_has(op->arrived, w) ||
        gcx_wset_has(op->abstained, w) || op->super.status != GCX_INPROGRESS) {
        ++op->coded->stats.late_dropped; /* changes nothing any more */
        if (op->decodable && op->super.status == GCX_INPROGRESS) {
            gcx_wset_add(op->late_void, w); /* unless a taken one is lost */
        }
        return;
    }
    gcx_wset_add(op->abstained, w);
}

void gcx_coded_root_on_contrib(gcx_coded_t *coded, const gcx_coded_hdr_t *hdr,
                               const gcx_tl_am_msg_t *msg)
{
    gcx_coded_op_t   *op = coded->live;
    gcx_coded_slot_t *slot;
    gcx_tl_t         *tl = coded->comm->tl;
    gcx_iov_t         iov;
    int               w  = gcx_coded_worker(coded, hdr->sender);
    int               is_void = hdr->kind == GCX_CODED_VOID;

    if (w < 0 || msg->length != (is_void ? 0 : coded->bytes)) {
        gcx_warn("coded gather: dropping a malformed message from rank %u",
                 hdr->sender);
        return;
    }
    if (hdr->round < coded->next_open) {
        ++coded->stats.late_dropped; /* a finished round: never pulled */
        return;
    }
    if (op != NULL && hdr->round == op->round) {
        if (is_void) {
            gcx_coded_root_abstain(op, w);
        } else {
            gcx_coded_root_arrive(op, w, msg, 0, NULL,
                                  gcx_time_now() - op->t_start);
        }
        return;
    }
    /* a round the root has not entered yet: stage it (a VOID: its header) */
    slot = gcx_coded_slot_get(coded);
    if (slot == NULL) {
        gcx_error("coded gather: out of memory staging a message");
        return;
    }
    slot->round     = hdr->round;
    slot->worker    = w;
    slot->t_arrival = gcx_time_now();
    slot->hdr       = *hdr;
    if (!is_void) {
        slot->nreqs = 1;
        iov.buffer  = slot->block->data;
        iov.length  = coded->bytes;
        tl->ops->am_recv(tl, msg, &iov, 1, &slot->reqs[0]);
    }
    slot->next   = coded->stash;
    coded->stash = slot;
    ++coded->stats.early;
}

/* ---- failure --------------------------------------------------------------- */

/* The header of what the root sends when the round ends, and its sets
 * (arrived, used, abstained: 3 coded->words words at @p sets). */
static void gcx_coded_root_hdr(const gcx_coded_op_t *op, unsigned kind,
                               gcx_coded_hdr_t *hdr, uint64_t *sets)
{
    const gcx_coded_t *coded = op->coded;

    memset(hdr, 0, sizeof(*hdr));
    hdr->comm_id    = coded->comm->id;
    hdr->instance   = coded->instance;
    hdr->round      = op->round;
    hdr->sender     = (uint16_t)coded->comm->rank;
    hdr->kind       = (uint16_t)kind;
    hdr->round_time = gcx_time_now() - op->t_start;
    if (kind != GCX_CODED_RESULT && kind != GCX_CODED_LOST) {
        return;
    }
    hdr->nwords = (uint32_t)coded->words;
    gcx_wset_copy(sets, op->arrived, coded->n);
    if (kind == GCX_CODED_RESULT) {
        gcx_wset_copy(sets + coded->words, op->used, coded->n);
    } else {
        gcx_wset_clear(sets + coded->words, coded->n);
    }
    gcx_wset_copy(sets + 2 * coded->words, op->abstained, coded->n);
}

/* The root's own result: the arrival times of the workers that arrived
 * (NAN for the others) into op->arrival. */
static void gcx_coded_root_arrival_times(gcx_coded_op_t *op)
{
    int w;

    for (w = 0; w < op->coded->n; ++w) {
        if (!gcx_wset_has(op->arrived, w)) {
            op->arrival[w] = NAN;
        }
    }
}

/* Bytes of a header of @p kind sent from a block: the sets follow hdr in
 * the block's hdr_tail. */
static size_t gcx_coded_root_hdr_len(const gcx_coded_t *coded, unsigned kind)
{
    return sizeof(gcx_coded_hdr_t) +
           (kind == GCX_CODED_RESULT || kind == GCX_CODED_LOST ?
                gcx_coded_sets_bytes(coded->n) :
                0);
}

/* The round ends without a sum: tell every rank still reachable with a
 * header-only ERROR (@p status) or LOST message; the header and its sets
 * also go to the root's own result (@p hdr_p, @p sets). */
static void gcx_coded_root_tell(gcx_coded_op_t *op, unsigned kind,
                                gcx_status_t status, gcx_coded_hdr_t *hdr_p,
                                uint64_t *sets)
{
    gcx_coded_t      *coded = op->coded;
    gcx_tl_t         *tl    = coded->comm->tl;
    gcx_coded_hdr_t   hdr   = {0};
    gcx_coded_slot_t *slot  = gcx_coded_slot_get(coded);
    int               r, w;

    if (slot != NULL && !gcx_coded_slot_fan(slot, coded->comm->size)) {
        gcx_coded_slot_put(coded, slot);
        slot = NULL; /* best effort, as below */
    }
    gcx_coded_root_release_held(op);
    gcx_coded_root_hdr(op, kind, &hdr, sets);
    hdr.status = status;
    *hdr_p     = hdr;
    if (slot != NULL) { /* best effort: the others would time out anyway */
        slot->block->hdr = hdr;
        if (hdr.nwords > 0) {
            memcpy(slot->block->hdr_tail, sets,
                   gcx_coded_sets_bytes(coded->n));
        }
        for (r = 0; r < coded->comm->size; ++r) {
            w = gcx_coded_worker(coded, r);
            if (r == coded->comm->rank || tl->ops->peer_failed(tl, r) ||
                (kind == GCX_CODED_LOST && w >= 0 &&
                 gcx_wset_has(coded->gone, w))) {
                continue; /* a rank counted gone gets no more rounds */
            }
            tl->ops->am_send(tl, r, coded->am_id, &slot->block->hdr,
                             gcx_coded_root_hdr_len(coded, kind), NULL, 0,
                             &slot->reqs[r]);
        }
        slot->next      = coded->inflight;
        coded->inflight = slot;
    }
}

static void gcx_coded_root_fail(gcx_coded_op_t *op, gcx_status_t status)
{
    gcx_coded_hdr_t hdr;

    gcx_coded_root_tell(op, GCX_CODED_ERROR, status, &hdr, op->scratch);
    op->super.status = status;
}

/* A worker set as text for a log line, into @p buf: "{1,5,9}", at most the
 * first 16 members and a count of the rest. */
static const char *gcx_coded_root_set_str(const gcx_coded_t *coded,
                                          const uint64_t *set, char *buf,
                                          size_t len)
{
    size_t off = 0;
    int    w, shown = 0, total = gcx_wset_count(set, coded->n);

    off += (size_t)snprintf(buf + off, len - off, "{");
    for (w = 0; w < coded->n && shown < 16 && off < len; ++w) {
        if (gcx_wset_has(set, w)) {
            off += (size_t)snprintf(buf + off, len - off, "%s%d",
                                    shown ? "," : "", w);
            ++shown;
        }
    }
    if (off < len && total > shown) {
        off += (size_t)snprintf(buf + off, len - off, ",... %d more",
                                total - shown);
    }
    if (off < len) {
        snprintf(buf + off, len - off, "}");
    }
    return buf;
}

/* lost_rounds: the round completes without a sum on every rank. */
static void gcx_coded_root_lose(gcx_coded_op_t *op)
{
    gcx_coded_t    *coded = op->coded;
    gcx_coded_hdr_t hdr;
    uint64_t       *sets  = malloc(gcx_coded_sets_bytes(coded->n));
    char            a[160], b[160], g[160];

    gcx_warn("coded gather round %llu: lost: workers arrived %s, abstained "
             "%s, gone %s cannot decode it; every rank goes on without it",
             (unsigned long long)op->round,
             gcx_coded_root_set_str(coded, op->arrived, a, sizeof(a)),
             gcx_coded_root_set_str(coded, op->abstained, b, sizeof(b)),
             gcx_coded_root_set_str(coded, coded->gone, g, sizeof(g)));
    if (sets == NULL) {
        gcx_coded_root_fail(op, GCX_ERR_NOMEM);
        return;
    }
    gcx_coded_root_arrival_times(op);
    gcx_coded_root_tell(op, GCX_CODED_LOST, GCX_OK, &hdr, sets);
    gcx_coded_fill_result(coded, &hdr, sets, op->arrival, 0, op->result);
    free(sets);
    coded->next_open = op->round + 1;
    coded->live      = NULL;
    ++coded->stats.rounds;
    ++coded->stats.rounds_lost;
    op->super.status = GCX_OK;
}

/* GCX_TIMEOUT has come for the round: 10 ms before the queue's own check
 * (task.c), so that the root's rules (give up a stuck payload, lose or fail
 * the round) decide, on the first look past it. */
static int gcx_coded_root_out_of_time(const gcx_coded_op_t *op)
{
    return gcx_time_now() > op->super.deadline - 0.01;
}

/* Worker w, not gone yet: 1 and counted gone (with a warning) when the
 * transport reports its connection lost. */
static int gcx_coded_root_lost(gcx_coded_t *coded, int w)
{
    gcx_tl_t *tl = coded->comm->tl;

    if (!tl->ops->peer_failed(tl, gcx_coded_rank_of(coded, w))) {
        return 0;
    }
    gcx_warn("coded gather: worker %d (rank %d) is gone: connection lost", w,
             gcx_coded_rank_of(coded, w));
    gcx_wset_add(coded->gone, w);
    return 1;
}

/* Cannot finish: too few workers left, or out of time. Cost O(n) per look
 * (a peer check per worker, two sets). */
static int gcx_coded_root_check_failure(gcx_coded_op_t *op)
{
    gcx_coded_t *coded = op->coded;
    uint64_t    *possible = op->scratch, last;
    size_t       i, words = coded->words;
    int          w, decodable = 0, alive_decodable = -1, abstained = 0;
    char         a[160], b[160], g[160];

    for (w = 0; w < coded->n; ++w) {
        if (!gcx_wset_has(coded->gone, w)) {
            gcx_coded_root_lost(coded, w);
        }
    }
    /* workers not gone: the complement of gone within n (into possible,
     * to ask whether they decode at all) */
    last = coded->n % 64 ? (UINT64_C(1) << (coded->n % 64)) - 1 : ~UINT64_C(0);
    for (i = 0; i < words; ++i) {
        possible[i] = ~coded->gone[i] & (i + 1 == words ? last : ~UINT64_C(0));
        abstained |= op->abstained[i] != 0;
    }
    if (coded->lost_rounds &&
        gcx_code_decodable(coded->code, possible, &decodable) == GCX_OK) {
        alive_decodable = decodable;
    }
    /* abstained and given-up workers will not contribute to this round */
    for (i = 0; i < words; ++i) {
        possible[i] = op->arrived[i] |
                      (possible[i] & ~op->abstained[i] & ~op->given_up[i]);
    }
    if (gcx_code_decodable(coded->code, possible, &decodable) == GCX_OK &&
        !decodable) {
        if (alive_decodable == 1) {
            gcx_coded_root_lose(op); /* only abstentions stand in the way */
            return 1;
        }
        gcx_error("coded gather round %llu: undecodable: workers arrived "
                  "%s, abstained %s, gone %s; those that may still arrive "
                  "cannot make it decodable (s = %d)",
                  (unsigned long long)op->round,
                  gcx_coded_root_set_str(coded, op->arrived, a, sizeof(a)),
                  gcx_coded_root_set_str(coded, op->abstained, b, sizeof(b)),
                  gcx_coded_root_set_str(coded, coded->gone, g, sizeof(g)),
                  coded->s);
        gcx_coded_root_fail(op, GCX_ERR_UNDECODABLE);
        return 1;
    }
    if (gcx_coded_root_out_of_time(op)) {
        if (abstained && alive_decodable == 1) {
            /* abstentions took the slack that a worker late past
             * GCX_TIMEOUT (stopped, starved, behind a slow link) would
             * have been covered by: the round is lost on every rank, as
             * one that abstentions alone leave undecodable; the late
             * worker is not counted gone (its message is dropped as late
             * when it comes) */
            for (i = 0; i < words; ++i) {
                possible[i] &= ~op->arrived[i]; /* the late ones */
            }
            gcx_warn("coded gather round %llu: workers %s did not arrive "
                     "within GCX_TIMEOUT=%g s and %s abstained",
                     (unsigned long long)op->round,
                     gcx_coded_root_set_str(coded, possible, a, sizeof(a)),
                     coded->comm->config.timeout,
                     gcx_coded_root_set_str(coded, op->abstained, b,
                                            sizeof(b)));
            gcx_coded_root_lose(op);
            return 1;
        }
        gcx_error("coded gather round %llu: only workers %s arrived (%s "
                  "abstained) within GCX_TIMEOUT=%g s; not decodable in "
                  "time",
                  (unsigned long long)op->round,
                  gcx_coded_root_set_str(coded, op->arrived, a, sizeof(a)),
                  gcx_coded_root_set_str(coded, op->abstained, b, sizeof(b)),
                  coded->comm->config.timeout);
        /* out of time, not out of workers: every rank says "timed out"
         * (coded.h), so a run stopped by a slow link or stalled workers
         * names the cause */
        gcx_coded_root_fail(op, GCX_ERR_TIMEOUT);
        return 1;
    }
    return 0;
}

/* ---- decode and publish ------------------------------------------------------ */

static int gcx_coded_entry_landed(gcx_coded_entry_t *e)
{
    if (e->req != NULL) {
        if (e->req->status != GCX_OK) { /* in flight, or lost: retake */
            return 0;
        }
        e->req = NULL;
    }
    return 1;
}

/* Streaming: fold landed messages in order; 1 when all are folded. */
static int gcx_coded_root_fold(gcx_coded_op_t *op)
{
    gcx_coded_t *coded = op->coded;

    while (op->nfolded < op->nentries) {
        gcx_coded_entry_t *e = &op->entries[op->nfolded];

        if (!gcx_coded_entry_landed(e)) {
            return 0;
        }
        if (op->nfolded == 0) {
            if (e->buf != op->recvbuf) {
                const float *vec = e->buf;
                gcx_code_encode(1, &e->coeff, &vec, coded->count,
                                op->recvbuf);
            }
        } else {
            gcx_code_accumulate(e->coeff, e->buf, coded->count, op->recvbuf);
        }
        ++op->nfolded;
    }
    return 1;
}

/* Not streaming (CR, MATRIX: n <= GCX_CODE_MAX_SOLVED_WORKERS): decode all
 * at once when everything landed. */
static int gcx_coded_root_decode(gcx_coded_op_t *op)
{
    gcx_coded_t *coded = op->coded;
    double       a[GCX_CODE_MAX_SOLVED_WORKERS]    = {0};
    const float *vecs[GCX_CODE_MAX_SOLVED_WORKERS] = {0};
    gcx_status_t status;
    int          i;
    char         buf[160];

    if (coded->n > GCX_CODE_MAX_SOLVED_WORKERS) {
        gcx_coded_root_fail(op, GCX_ERR_UNSUPPORTED); /* never: see code.c */
        return 0;
    }
    for (i = 0; i < op->nentries; ++i) {
        if (!gcx_coded_entry_landed(&op->entries[i])) {
            return 0;
        }
        vecs[op->entries[i].worker] = op->entries[i].buf;
    }
    status = gcx_code_decode_vector(coded->code, op->arrived, a);
    if (status != GCX_OK) {
        gcx_error("coded gather round %llu: decoding %s failed: %s",
                  (unsigned long long)op->round,
                  gcx_coded_root_set_str(coded, op->arrived, buf, sizeof(buf)),
                  gcx_strerror(status));
        gcx_coded_root_fail(op, status);
        return 0;
    }
    for (i = 0; i < coded->n; ++i) {
        if (a[i] != 0.0) {
            gcx_wset_add(op->used, i);
        }
    }
    gcx_code_encode(coded->n, a, vecs, coded->count, op->recvbuf);
    return 1;
}

/*
 * Flow control of the results: counts the result sends in flight per rank.
 * A rank holding GCX_CODED_MAX_LAG results it has not taken (descheduled,
 * paused, behind a slow link) holds this publication back until it takes
 * one -- 1: wait; a rank whose connection is lost, or that takes none
 * before the round's GCX_TIMEOUT runs out, is counted gone. The result
 * sends to every gone rank are abandoned. Evicting a rank at the limit
 * instead would lose a live rank to a pause of 64 short rounds (a few
 * hundred ms); waiting costs the others nothing until a rank is that far
 * behind, and a compute straggler catches up (it skips the work of a round
 * decoded without it). Cost: two passes over the slots in flight.
 */
static int gcx_coded_root_laggards(gcx_coded_op_t *op)
{
    gcx_coded_t      *coded = op->coded;
    int              *held  = op->lag;
    gcx_coded_slot_t *slot;
    int               r, w, lagging = 0;

    memset(held, 0, (size_t)coded->n * sizeof(*held));
    for (slot = coded->inflight; slot != NULL; slot = slot->next) {
        for (r = 0; r < slot->nreqs; ++r) {
            w = gcx_coded_worker(coded, r);
            if (w >= 0 && slot->reqs[r].status == GCX_INPROGRESS) {
                ++held[w];
            }
        }
    }
    for (w = 0; w < coded->n; ++w) {
        if (held[w] >= coded->comm->config.coded_max_lag &&
            !gcx_wset_has(coded->gone, w) && !gcx_coded_root_lost(coded, w)) {
            ++lagging;
        } else {
            held[w] = 0; /* not lagging */
        }
    }
    if (lagging != 0 && !gcx_coded_root_out_of_time(op)) {
        return 1; /* alive as far as the transport knows: wait */
    }
    for (w = 0; lagging != 0 && w < coded->n; ++w) {
        if (held[w] != 0) {
            gcx_warn("coded gather: worker %d (rank %d) took none of the %d "
                     "decoded sums held for it (GCX_CODED_MAX_LAG) within "
                     "GCX_TIMEOUT=%g s; counted gone",
                     w, gcx_coded_rank_of(coded, w), held[w],
                     coded->comm->config.timeout);
            gcx_wset_add(coded->gone, w);
        }
    }
    for (slot = coded->inflight; slot != NULL; slot = slot->next) {
        for (r = 0; r < slot->nreqs; ++r) {
            w = gcx_coded_worker(coded, r);
            if (w >= 0 && gcx_wset_has(coded->gone, w)) {
                gcx_coded_slot_abandon_req(coded, slot, r);
            }
        }
    }
    return 0;
}

static void gcx_coded_root_publish(gcx_coded_op_t *op)
{
    gcx_coded_t      *coded = op->coded;
    gcx_tl_t         *tl    = coded->comm->tl;
    gcx_coded_hdr_t   hdr   = {0};
    gcx_coded_slot_t *slot  = NULL;
    uint64_t         *sets;
    gcx_iov_t         iov;
    int               r, w;

    gcx_coded_root_release_held(op);
    if (coded->comm->size > 1) {
        gcx_coded_reclaim(coded);
        op->decoded = 1; /* recvbuf holds the sum: progress comes back here */
        if (gcx_coded_root_laggards(op)) {
            return;
        }
        slot = gcx_coded_slot_get(coded);
        if (slot != NULL &&
            !gcx_coded_slot_fan(slot, coded->comm->size)) {
            gcx_coded_slot_put(coded, slot);
            slot = NULL;
        }
        if (slot == NULL) {
            op->super.status = GCX_ERR_NOMEM;
            return;
        }
    }
    /* the sets follow the header in the block UCX sends from (a root
     * alone has none: a buffer for its own result) */
    sets = slot != NULL ? slot->block->hdr_tail : NULL;
    if (sets == NULL) {
        sets = malloc(gcx_coded_sets_bytes(coded->n));
        if (sets == NULL) {
            op->super.status = GCX_ERR_NOMEM;
            return;
        }
    }
    gcx_coded_root_hdr(op, GCX_CODED_RESULT, &hdr, sets);
    if (slot != NULL) {
        if (coded->bytes > 0) { /* count 0: recvbuf may be NULL */
            memcpy(slot->block->data, op->recvbuf, coded->bytes);
        }
        slot->block->hdr = hdr;
        slot->round = op->round;
        iov.buffer  = slot->block->data;
        iov.length  = coded->bytes;
        for (r = 0; r < coded->comm->size; ++r) {
            w = gcx_coded_worker(coded, r);
            if (r == coded->comm->rank ||
                (w >= 0 && gcx_wset_has(coded->gone, w))) {
                continue;
            }
            tl->ops->am_send(tl, r, coded->am_id, &slot->block->hdr,
                             gcx_coded_root_hdr_len(coded, GCX_CODED_RESULT),
                             &iov, 1, &slot->reqs[r]);
        }
        slot->next      = coded->inflight;
        coded->inflight = slot;
    }
    gcx_coded_root_arrival_times(op);
    gcx_coded_fill_result(coded, &hdr, sets, op->arrival, 0, op->result);
    if (slot == NULL) {
        free(sets);
    }
    coded->next_open = op->round + 1;
    coded->live      = NULL;
    ++coded->stats.rounds;
    op->super.status = GCX_OK;
}

/* ---- task ---------------------------------------------------------------- */

static void gcx_coded_root_progress(gcx_task_t *task)
{
    gcx_coded_op_t *op = (gcx_coded_op_t *)task;
    int             ready;

    if (task->status != GCX_INPROGRESS) {
        return;
    }
    if (op->decoded) { /* waiting for a rank to take its results */
        gcx_coded_root_publish(op);
        return;
    }
    gcx_coded_root_retake(op);
    if (!op->decodable) {
        gcx_coded_root_check_failure(op);
        return;
    }
    ready = op->streaming ? gcx_coded_root_fold(op) : gcx_coded_root_decode(op);
    if (!ready && task->status == GCX_INPROGRESS &&
        gcx_coded_root_out_of_time(op) && gcx_coded_root_give_up(op)) {
        gcx_coded_root_retake(op);
        if (!op->decodable) {
            gcx_coded_root_check_failure(op);
            return;
        }
        ready = op->streaming ? gcx_coded_root_fold(op) :
                                gcx_coded_root_decode(op);
    }
    if (ready && task->status == GCX_INPROGRESS) {
        gcx_coded_root_publish(op);
    }
}

static void gcx_coded_root_post(gcx_task_t *task)
{
    gcx_coded_op_t   *op    = (gcx_coded_op_t *)task;
    gcx_coded_t      *coded = op->coded;
    gcx_coded_slot_t **pp, *slot, *mine;
    double            delay_ms;

    /* an abstaining root computes nothing: no straggler delay */
    delay_ms = op->abstain ? 0 :
                             gcx_coded_straggler_delay(coded, coded->my_worker,
                                                       op->round);
    if (delay_ms > 0) {
        gcx_coded_sleep(delay_ms * 1e-3);
    }
    coded->live = op;
    op->t_start = gcx_time_now();
    if (gcx_code_stream_need(coded->code, &op->need) != GCX_OK) {
        op->need = -1; /* CR, MATRIX: the code's predicate */
    }
    if (op->abstain) {
        gcx_coded_root_abstain(op, coded->my_worker);
        ++coded->stats.abstained;
    } else if (coded->my_worker >= 0) {
        gcx_coded_root_arrive(op, coded->my_worker, NULL, 0, NULL, 0.0);
    }
    /* messages that came before the root entered the round, in the order
     * they came (the stash is newest first): a worker's abstention that
     * came before its group-mate's contribution counts, as it would in a
     * live round */
    mine = NULL;
    pp   = &coded->stash;
    while ((slot = *pp) != NULL) {
        if (slot->round != op->round) {
            pp = &slot->next;
            continue;
        }
        *pp        = slot->next;
        slot->next = mine;
        mine       = slot;
    }
    while ((slot = mine) != NULL) {
        mine = slot->next;
        if (slot->hdr.kind == GCX_CODED_VOID) {
            gcx_coded_root_abstain(op, slot->worker);
            gcx_coded_slot_put(coded, slot); /* no transfer on it */
        } else {
            gcx_coded_root_arrive(op, slot->worker, NULL, 0, slot,
                                  slot->t_arrival - op->t_start);
        }
    }
    gcx_coded_root_progress(task);
}

void gcx_coded_op_finalize(gcx_task_t *task)
{
    gcx_coded_op_t *op    = (gcx_coded_op_t *)task;
    gcx_coded_t    *coded = op->coded;
    int             i;

    if (coded == NULL) { /* the object was destroyed first */
        free(op);
        return;
    }
    if (coded->live == op) {
        coded->live = NULL;
    }
    gcx_coded_root_release_held(op); /* after a failure or abort */
    for (i = 0; i < op->nentries; ++i) {
        gcx_coded_slot_t *slot = op->entries[i].slot;

        if (slot != NULL) { /* back to the pool once its pull is done */
            slot->next      = coded->inflight;
            coded->inflight = slot;
        }
    }
    if (op->rreq.status == GCX_INPROGRESS) {
        /* only after a failure, when the transport was aborted */
        coded->comm->tl->ops->abandon(coded->comm->tl, &op->rreq, NULL, NULL);
    }
    free(op);
}

const gcx_task_ops_t gcx_coded_root_ops = {
    .name     = "coded_gather(root)",
    .post     = gcx_coded_root_post,
    .progress = gcx_coded_root_progress,
    .finalize = gcx_coded_op_finalize,
};

