/*
 * star.c - the star coded gather (coded gradient gathering with early
 * completion): its creation, active-message dispatch and round
 * submission; the root's side of a round is star_root.c, the others'
 * star_rank.c. One row of the coded object's dispatch (coded.c).
 *
 * Idea. Every worker sends one coded vector per round to the root; the
 * root finishes the round as soon as the arrived set is decodable (the
 * code's predicate), decodes the sum (streaming where coefficients are
 * known on arrival: FR, uncoded, weighted; all at once for CR), and sends
 * the decoded sum to every rank. Cost per round: each worker sends count
 * floats once; the root receives at most the messages it needs (a message
 * that is not needed is dropped before its payload moves), does one
 * multiply-add pass per used message, one memcpy, and sends count floats
 * to each of the P-1 other ranks. Non-root ranks do one memcpy of their
 * contribution (see below).
 *
 * Rounds and late messages. Rounds are numbered by call order (the same on
 * every rank) and every message is an active message whose header carries
 * (comm id, object instance, round, sender). The AM handler looks at the
 * header before any payload moves:
 * - root, round not finished and entered: taken or dropped as star_root.c
 *   says (pulled straight into recvbuf where possible);
 * - root, round not entered yet (the root is behind): pulled into an
 *   internal block and used when the root enters it;
 * - root, round finished: dropped -- the handler returns without pulling,
 *   UCX completes the sender, and nothing lands anywhere. Since a round
 *   number is never reused, a late message cannot reach a later round.
 * - other ranks: the decoded sum of the round being waited for is pulled
 *   into recvbuf; one of a later round (this rank is behind) into a block.
 * A different instance (an object destroyed and re-created on the same AM
 * id) or communicator id is dropped.
 *
 * Rounds and the FIFO. A round is one task in the communicator's FIFO, on
 * every rank, like any collective, but no task ever waits for a straggler:
 * - the root's task waits for a decodable set, not for everyone, and does
 *   not wait for its result sends (they live in result slots that outlast
 *   the round);
 * - a worker's task waits only for the root's decoded sum; its own send
 *   lives in an internal block and outlasts the round;
 * - a straggler entering a round that is already decoded finds the sum
 *   waiting and completes at once without sending, so it catches up.
 * Messages arrive through the handler whatever task heads the FIFO. The
 * root's result slots are what a slow rank costs: at most
 * GCX_CODED_MAX_LAG per rank; a rank holding that many holds the root's
 * next round back until it takes one (star_root.c, flow control). There
 * is no per-round argument check (it would be an exchange with every rank,
 * i.e. wait for the straggler); arguments are agreed once, at creation.
 * The existing tree broadcast is not reused for the decoded sum for the
 * same reason: any relaying rank may be the straggler; the root sends to
 * every rank directly.
 *
 * Abstention (gcx_coded_abstain()): the worker takes part in the round as
 * with a contribution, but its message is a header-only VOID: the root
 * records the worker as abstained (never arrived or used) and stops
 * waiting for it. Cost: one header per abstention, no payload. VOID
 * messages go through the same round rules (dropped when finished, staged
 * when early).
 *
 * Dead workers: a lost connection, or GCX_CODED_MAX_LAG results not taken
 * within GCX_TIMEOUT, make a worker gone; rounds go on while the rest can
 * decode; otherwise the root fails the round with GCX_ERR_UNDECODABLE and
 * tells every reachable rank (ERROR message); the others time out
 * (GCX_TIMEOUT). The same check with
 * the abstained workers taken out makes a round that only abstentions
 * leave undecodable fail at once.
 */
#include "coded_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gcx_coded_fill_result(const gcx_coded_t *coded, const gcx_coded_hdr_t *hdr,
                           const uint64_t *sets, const float *arrival,
                           int skipped, gcx_coded_result_t *result)
{
    gcx_coded_result_sets_t out;

    if (result == NULL) {
        return;
    }
    out.round      = hdr->round;
    out.arrived    = sets;
    out.used       = sets + coded->words;
    out.abstained  = sets + 2 * coded->words;
    out.arrival    = arrival;
    out.round_time = hdr->round_time;
    out.skipped    = skipped;
    out.lost       = hdr->kind == GCX_CODED_LOST;
    gcx_coded_result_write(result, coded->n, &out);
}

gcx_status_t gcx_coded_hdr_parse(const void *bytes, size_t len, int n,
                                 gcx_coded_hdr_t *hdr,
                                 const unsigned char **sets_p)
{
    int with_sets;

    if (len < sizeof(*hdr)) {
        return GCX_ERR_INVALID;
    }
    memcpy(hdr, bytes, sizeof(*hdr)); /* may be unaligned */
    with_sets = hdr->kind == GCX_CODED_RESULT || hdr->kind == GCX_CODED_LOST;
    if (len != sizeof(*hdr) + (with_sets ? gcx_coded_sets_bytes(n) : 0) ||
        hdr->nwords != (with_sets ? GCX_WSET_WORDS(n) : 0)) {
        return GCX_ERR_INVALID;
    }
    if (with_sets &&
        !gcx_coded_wire_sets_valid((const unsigned char *)bytes + sizeof(*hdr),
                                   3, n)) {
        return GCX_ERR_INVALID; /* a worker at or past n */
    }
    *sets_p = with_sets ? (const unsigned char *)bytes + sizeof(*hdr) : NULL;
    return GCX_OK;
}

static void gcx_coded_am_handler(void *arg, const gcx_tl_am_msg_t *msg)
{
    gcx_coded_t         *coded = arg;
    gcx_coded_hdr_t      hdr;
    const unsigned char *sets;

    /* another object's message (a destroyed one's, whose AM id this object
     * took, and whose sets were sized by its own n) is dropped before its
     * length is held against this object's n */
    if (msg->header_length >= sizeof(hdr)) {
        memcpy(&hdr, msg->header, sizeof(hdr)); /* may be unaligned */
        if (hdr.comm_id != coded->comm->id ||
            hdr.instance != coded->instance) {
            return;
        }
    }
    if (gcx_coded_hdr_parse(msg->header, msg->header_length, coded->n, &hdr,
                            &sets) != GCX_OK) {
        gcx_warn("coded gather: dropping a message with a bad header "
                 "(%zu bytes)", msg->header_length);
        return;
    }
    if (hdr.sender >= (unsigned)coded->comm->size) {
        gcx_warn("coded gather: dropping a message from rank %u of %d",
                 hdr.sender, coded->comm->size);
        return;
    }
    switch (hdr.kind) {
    case GCX_CODED_CONTRIB:
    case GCX_CODED_VOID:
        if (coded->comm->rank == coded->root) {
            gcx_coded_root_on_contrib(coded, &hdr, msg);
        }
        break;
    case GCX_CODED_RESULT:
    case GCX_CODED_LOST:
        if (coded->comm->rank != coded->root) {
            gcx_coded_rank_on_result(coded, &hdr, sets, msg);
        }
        break;
    case GCX_CODED_ERROR:
        if (coded->error == GCX_OK && hdr.status < 0) {
            coded->error       = (gcx_status_t)hdr.status;
            coded->error_round = hdr.round;
        }
        break;
    default:
        gcx_warn("coded gather: dropping a message of kind %u", hdr.kind);
        break;
    }
}

/* The star's state in @p coded (comm set): the code's workers are the
 * ranks (less the root if it is not a worker); an AM id; agreed. */
static gcx_status_t gcx_coded_star_create(gcx_coded_t *coded,
                                          const gcx_coded_params_t *params)
{
    gcx_comm_t  *comm = coded->comm;
    gcx_tl_t    *tl   = comm->tl;
    gcx_status_t status;
    unsigned     id;
    int          workers;

    workers = comm->size - (params->root_not_worker ? 1 : 0);
    if (gcx_code_workers(params->code) != workers || workers < 1) {
        gcx_error("gcx_coded_create: the code has %d workers, the "
                  "communicator %d",
                  gcx_code_workers(params->code), workers);
        return GCX_ERR_INVALID;
    }
    if (workers > GCX_CODED_MAX_WORKERS) {
        gcx_error("gcx_coded_create: %d workers: the star's RESULT header "
                  "carries three worker sets, within UCX's active-message "
                  "header limit (about 8 KB) for at most %d workers "
                  "(GCX_CODED_MAX_WORKERS)",
                  workers, GCX_CODED_MAX_WORKERS);
        return GCX_ERR_UNSUPPORTED;
    }
    coded->code            = params->code;
    coded->count           = params->count;
    coded->bytes           = params->count * sizeof(float);
    coded->root            = params->root;
    coded->root_not_worker = params->root_not_worker ? 1 : 0;
    coded->lost_rounds     = params->lost_rounds ? 1 : 0;
    coded->n               = workers;
    coded->s               = gcx_code_stragglers(params->code);
    coded->my_worker       = gcx_coded_worker(coded, comm->rank);
    coded->instance        = comm->seq;
    coded->hdr_tail        = gcx_coded_sets_bytes(workers);
    status = gcx_coded_sets_init(coded);
    if (status == GCX_OK) {
        status = gcx_coded_straggler_init(coded);
    }
    if (status != GCX_OK) {
        gcx_coded_sets_free(coded);
        return status;
    }
    for (id = GCX_CODED_AM_FIRST; id < GCX_TL_AM_MAX_ID; ++id) {
        if (tl->ops->am_handler(tl, id, gcx_coded_am_handler, coded) ==
            GCX_OK) {
            break;
        }
    }
    if (id == GCX_TL_AM_MAX_ID) {
        gcx_error("gcx_coded_create: no free active-message id");
        gcx_coded_sets_free(coded);
        return GCX_ERR_UNSUPPORTED;
    }
    coded->am_id = id;
    /* registered before the exchange: once any rank is past it, every
     * rank can take this object's messages */
    status = gcx_coded_agree(coded, GCX_CODED_COLL_ID);
    if (status != GCX_OK) {
        tl->ops->am_handler(tl, coded->am_id, NULL, NULL);
        gcx_coded_sets_free(coded);
    }
    return status;
}

static void gcx_coded_star_destroy(gcx_coded_t *coded)
{
    gcx_tl_t *tl = coded->comm->tl;

    if (coded->live != NULL) {
        gcx_warn("coded gather destroyed with a round in flight");
        coded->live->coded = NULL;
    }
    /* give slow transfers a moment, then hand them to the transport */
    if (coded->comm->error == GCX_OK) {
        tl->ops->progress(tl);
        gcx_coded_reclaim(coded);
    }
    tl->ops->am_handler(tl, coded->am_id, NULL, NULL);
    gcx_coded_slots_release(coded);
    gcx_coded_sets_free(coded);
}

gcx_coded_op_t *gcx_coded_op_new(gcx_coded_t *coded, int is_root)
{
    size_t          n = (size_t)coded->n, set = coded->words * sizeof(uint64_t);
    size_t          head = (sizeof(gcx_coded_op_t) + 7) & ~(size_t)7;
    size_t          bytes;
    gcx_coded_op_t *op;
    char           *p;

    /* root: 7 sets, then entries, held, lag, arrival; others: 3 sets */
    bytes = is_root ? 7 * set + n * (sizeof(gcx_coded_entry_t) +
                                     sizeof(gcx_coded_held_t) + sizeof(int) +
                                     sizeof(float))
                    : 3 * set;
    op = calloc(1, head + bytes);
    if (op == NULL) {
        return NULL;
    }
    p = (char *)op + head;
    if (!is_root) {
        op->rsets = (uint64_t *)p;
        return op;
    }
    op->arrived   = (uint64_t *)p;
    op->used      = (uint64_t *)(p + set);
    op->abstained = (uint64_t *)(p + 2 * set);
    op->dropped   = (uint64_t *)(p + 3 * set);
    op->late_void = (uint64_t *)(p + 4 * set);
    op->given_up  = (uint64_t *)(p + 5 * set);
    op->scratch   = (uint64_t *)(p + 6 * set);
    p += 7 * set;
    op->entries = (gcx_coded_entry_t *)p;
    p += n * sizeof(gcx_coded_entry_t);
    op->held = (gcx_coded_held_t *)p;
    p += n * sizeof(gcx_coded_held_t);
    op->lag = (int *)p;
    p += n * sizeof(int);
    op->arrival = (float *)p;
    return op;
}

/* One round task; abstain: no sendbuf, a VOID message instead. */
static gcx_status_t gcx_coded_star_submit(gcx_coded_t *coded,
                                          const float *sendbuf,
                                          float *recvbuf, int abstain,
                                          gcx_coded_result_t *result,
                                          gcx_request_t **req_p)
{
    gcx_coded_op_t *op;
    int             is_root;

    if (coded->lost_rounds && result == NULL) {
        gcx_error("gcx_coded_%s: the object was created with lost_rounds: "
                  "pass a result, it says whether the round was lost",
                  abstain ? "abstain" : "gather");
        return GCX_ERR_INVALID;
    }
    is_root = coded->comm->rank == coded->root;
    op      = gcx_coded_op_new(coded, is_root);
    if (op == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_task_init(&op->super,
                  is_root ? &gcx_coded_root_ops : &gcx_coded_rank_ops,
                  coded->comm);
    op->coded   = coded;
    op->round   = coded->next_round++;
    op->sendbuf = sendbuf;
    op->recvbuf = recvbuf;
    op->result  = result;
    op->abstain = abstain && coded->my_worker >= 0;
    op->rreq.status = GCX_OK;
    return gcx_task_submit(&op->super, req_p);
}

/* A rank other than the root: is the result of its next round here? */
static gcx_status_t gcx_coded_star_ready(gcx_coded_t *coded, int *ready_p)
{
    gcx_coded_slot_t *slot;
    gcx_tl_t         *tl = coded->comm->tl;
    gcx_status_t      status = GCX_OK;

    gcx_context_lock();
    if (coded->comm->error != GCX_OK) {
        status = coded->comm->error;
        goto out;
    }
    tl->ops->progress(tl);
    *ready_p = 0;
    for (slot = coded->stash; slot != NULL; slot = slot->next) {
        if (coded->comm->rank != coded->root &&
            slot->round == coded->next_round) {
            *ready_p = 1;
        }
    }
out:
    gcx_context_unlock();
    return status;
}

static gcx_status_t gcx_coded_star_stats(const gcx_coded_t *coded,
                                         gcx_coded_stats_t *stats_p)
{
    gcx_coded_stats_write(&coded->stats, coded->gone, coded->n, stats_p);
    return GCX_OK;
}

const gcx_coded_impl_t gcx_coded_impl_star = {
    .name    = "star",
    .create  = gcx_coded_star_create,
    .destroy = gcx_coded_star_destroy,
    .submit  = gcx_coded_star_submit,
    .ready   = gcx_coded_star_ready,
    .stats   = gcx_coded_star_stats,
};
