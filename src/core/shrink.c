/*
 * shrink.c - shrink: what survivors of a failure do to go on
 * (ULFM's MPI_Comm_shrink, NCCL's ncclCommShrink).
 *
 * It speaks control messages (comm_ctl.c: sent even by an aborted view,
 * heard even by a failed communicator, queued on the communicator by the
 * context's handler); revoke lives there, with the communicator. This file
 * is the agreement, which registers its own progress callback with the
 * context while it waits, and the public calls that run it. Nothing in
 * core calls into it: it is the top of the core's layers.
 *
 * Shrink: a flooding consensus (Chandra-Toueg / Lynch's FloodSet in the
 * early-deciding form of Cachin, Guerraoui and Rodrigues' "flooding
 * consensus") on the set of parent ranks that take part. Each caller
 * proposes itself (plus its exclude list and its communicator-id offer);
 * values are sets, merged by union, so a value is fixed by the set of
 * proposals it holds. In round r a rank sends what it knows to every rank
 * it does not know to be dead and waits for round r from each of them; a
 * rank is known dead when the transport says it is lost (UCX's error, or
 * on this host its ended process, which the transport sees within a
 * millisecond), when its round r has not come within the round's timeout,
 * or when a message of the agreement says another caller took it for dead
 * (the values carry the ranks their senders took for dead, so one
 * caller's verdict frees the others from waiting for that rank too). A
 * rank whose process the transport finds deaf (it no longer hears its
 * peers on its host: ucx_ctl.c) leaves with GCX_ERR_TRANSPORT, its own bit
 * in the dead set of a last message, instead of taking the silent live
 * ranks for dead and deciding alone (two communicators). The
 * round's timeout is GCX_TIMEOUT, or, when this rank's communicator failed
 * by GCX_TIMEOUT (a rank was silent for GCX_TIMEOUT already: a hung
 * process, a vanished host), the grace min(GCX_TIMEOUT, max(1 s,
 * GCX_TIMEOUT / 4)): the live ranks come at once, brought by the revoke,
 * and waiting GCX_TIMEOUT again for the silent one made a hung rank cost
 * two timeouts. Once
 * it heard from every rank it does not know to be dead: if those are the
 * ranks it heard from in round r - 1, nobody it relies on died in between
 * and it decides its value, else it goes to round r + 1. A rank that
 * decides sends DECIDED with the value to the others, and a rank that gets
 * DECIDED from a rank it does not know to be dead adopts it and passes it
 * on, so no correct rank waits for a rank that has left. Correct ranks
 * decide the same value (regular consensus) as long as the failure
 * detector is accurate (crash failures; a rank declared dead is dead):
 * every survivor then gets the same members. A rank that died in the
 * middle may be a member or not; the new communicator then fails on it,
 * as any communicator does, and may be shrunk again. A rank some caller
 * took for dead is never a member (it may have been only slow: it is left
 * out, and told so if it comes). Rounds: 2 with
 * deaths known before the shrink, one more per death seen during it; each
 * round is n(n-1) messages of 24 + 260 + 3n/8 bytes (the offers travel as
 * their union: the largest cursor and the OR of the used ids, which the
 * id agreement of context.c takes as one offer).
 *
 * Messages of rounds a rank has not reached wait in the queue; those of an
 * older shrink of the same parent (epoch) are dropped.
 */
#include "comm.h"
#include "ctl_wire.h"
#include "base/log.h"
#include "base/time.h"

#include <stdlib.h>
#include <string.h>

/*
 * A value: | cursor 4 | used ids GCX_CONTEXT_ID_PAIRS/8 | members nb |
 * exclude nb | dead nb | (bit r of members: rank r's proposal is in; of
 * exclude: some proposer asked rank r to be left out; of dead: some caller
 * took rank r for dead).
 */
#define GCX_SHRINK_USED_OFF 4
#define GCX_SHRINK_SETS_OFF (GCX_SHRINK_USED_OFF + GCX_CONTEXT_ID_PAIRS / 8)

typedef struct gcx_shrink {
    gcx_task_t super;    /* super.comm: the parent */
    gcx_progress_cb_t progress_cb; /* registered while it waits */
    int        n, nb, me;
    size_t     vlen;
    uint32_t   epoch;
    uint8_t   *correct;  /* ranks not known dead (nb bytes) */
    int        round;
    int        maxround;
    uint8_t  **from;     /* [r]: ranks heard in round r */
    uint8_t  **val;      /* [r]: union of round r's values */
    uint8_t   *decision;
    double     deadline; /* of the current round */
    double     round_timeout; /* seconds a round waits for a rank */
    uint8_t   *out;      /* a message being built: header + value */
} gcx_shrink_t;

static int gcx_bit(const uint8_t *set, int r)
{
    return (set[r / 8] >> (r % 8)) & 1;
}

static void gcx_bit_set(uint8_t *set, int r)
{
    set[r / 8] |= (uint8_t)(1u << (r % 8));
}

static void gcx_bit_clear(uint8_t *set, int r)
{
    set[r / 8] &= (uint8_t)~(1u << (r % 8));
}

/* ---- the agreement --------------------------------------------------------- */

static void gcx_shrink_merge(const gcx_shrink_t *sh, uint8_t *dst,
                             const uint8_t *src)
{
    uint32_t a, b;
    size_t   i;

    memcpy(&a, dst, sizeof(a));
    memcpy(&b, src, sizeof(b));
    if (b > a) {
        memcpy(dst, &b, sizeof(b));
    }
    for (i = GCX_SHRINK_USED_OFF; i < sh->vlen; ++i) {
        dst[i] |= src[i];
    }
}

/* The sets of round @p r (allocated on first use); NULL: out of memory. */
static int gcx_shrink_touch(gcx_shrink_t *sh, int r)
{
    if (sh->from[r] == NULL) {
        sh->from[r] = calloc(1, (size_t)sh->nb);
        sh->val[r]  = calloc(1, sh->vlen);
    }
    return sh->from[r] != NULL && sh->val[r] != NULL;
}

/* Rank @p r is taken for dead: not waited for, and named in the value of
 * the current round, so the next message tells the others. */
static void gcx_shrink_dead(gcx_shrink_t *sh, int r)
{
    gcx_bit_clear(sh->correct, r);
    gcx_bit_set(sh->val[sh->round] + GCX_SHRINK_SETS_OFF + 2 * sh->nb, r);
}

/* Sends @p type with @p value to every rank not known dead. */
static void gcx_shrink_send(gcx_shrink_t *sh, uint32_t type, int round,
                            const uint8_t *value)
{
    gcx_comm_t   *comm = sh->super.comm;
    gcx_ctl_hdr_t hdr  = {GCX_CTL_MAGIC, type, sh->epoch, (uint32_t)round,
                          sh->me, sh->n};
    int           r;

    memcpy(sh->out, &hdr, sizeof(hdr));
    memcpy(sh->out + sizeof(hdr), value, sh->vlen);
    for (r = 0; r < sh->n; ++r) {
        gcx_status_t st;

        if (r == sh->me || !gcx_bit(sh->correct, r)) {
            continue;
        }
        st = comm->tl->ops->ctl_send(comm->tl, r, sh->out,
                                     sizeof(hdr) + sh->vlen);
        if (st == GCX_ERR_PEER) {
            gcx_shrink_dead(sh, r);
        } else if (st != GCX_OK) {
            gcx_error("gcx_comm_shrink: cannot send to rank %d: %s", r,
                      gcx_strerror(st));
            sh->super.status = st;
            return;
        }
    }
}

static void gcx_shrink_decide(gcx_shrink_t *sh, const uint8_t *value)
{
    memcpy(sh->decision, value, sh->vlen);
    gcx_shrink_send(sh, GCX_CTL_DECIDED, sh->round, value);
    if (sh->super.status == GCX_INPROGRESS) {
        sh->super.status = GCX_OK;
    }
}

/* Starts round @p round: what this rank knew in the round before, to all
 * (and to itself). */
static void gcx_shrink_start_round(gcx_shrink_t *sh, int round,
                                   const uint8_t *value)
{
    sh->round    = round;
    sh->deadline = gcx_time_now() + sh->round_timeout;
    if (!gcx_shrink_touch(sh, round)) {
        sh->super.status = GCX_ERR_NOMEM;
        return;
    }
    gcx_bit_set(sh->from[round], sh->me);
    gcx_shrink_merge(sh, sh->val[round], value);
    gcx_shrink_send(sh, GCX_CTL_PROPOSAL, round, value);
}

/* Takes the queued messages of this shrink; returns how many. */
static int gcx_shrink_consume(gcx_shrink_t *sh)
{
    gcx_comm_t     *comm = sh->super.comm;
    gcx_ctl_msg_t **pp   = &comm->ctl_head, *msg;
    int             taken = 0;

    while ((msg = *pp) != NULL && sh->super.status == GCX_INPROGRESS) {
        const gcx_ctl_hdr_t *h = &msg->hdr;
        int                  keep = 0;

        if (h->epoch > sh->epoch) {
            keep = 1; /* a later shrink of the same parent */
        } else if (h->epoch == sh->epoch &&
                   msg->length == sizeof(*h) + sh->vlen) {
            const uint8_t *dead =
                msg->value + GCX_SHRINK_SETS_OFF + 2 * sh->nb;
            int            r;

            ++taken;
            /* the ranks the sender took for dead: not waited for here */
            for (r = 0; r < sh->n; ++r) {
                if (r != sh->me && gcx_bit(dead, r) &&
                    gcx_bit(sh->correct, r)) {
                    gcx_info("gcx_comm_shrink: rank %d taken for dead, as "
                             "rank %d says", r, h->src);
                    gcx_shrink_dead(sh, r);
                }
            }
            if (h->type == GCX_CTL_PROPOSAL && h->round >= 1 &&
                (int)h->round <= sh->maxround) {
                if (gcx_shrink_touch(sh, (int)h->round)) {
                    gcx_bit_set(sh->from[h->round], h->src);
                    gcx_shrink_merge(sh, sh->val[h->round], msg->value);
                } else {
                    sh->super.status = GCX_ERR_NOMEM;
                }
            } else if (h->type == GCX_CTL_DECIDED &&
                       gcx_bit(sh->correct, h->src)) {
                gcx_shrink_decide(sh, msg->value);
            }
        }
        if (keep) {
            pp = &msg->next;
        } else {
            *pp = msg->next;
            free(msg);
        }
    }
    comm->ctl_tail = NULL;
    for (msg = comm->ctl_head; msg != NULL; msg = msg->next) {
        comm->ctl_tail = msg;
    }
    return taken;
}

/* Whether every rank of @p a is in @p b. */
static int gcx_shrink_subset(const gcx_shrink_t *sh, const uint8_t *a,
                             const uint8_t *b)
{
    int i;

    for (i = 0; i < sh->nb; ++i) {
        if ((a[i] & ~b[i]) != 0) {
            return 0;
        }
    }
    return 1;
}

/* This rank leaves the agreement with @p status: it tells the others it
 * is out (its bit in the dead set), so they need not wait for it. */
static void gcx_shrink_leave(gcx_shrink_t *sh, gcx_status_t status)
{
    gcx_shrink_dead(sh, sh->me);
    gcx_shrink_send(sh, GCX_CTL_PROPOSAL, sh->round, sh->val[sh->round]);
    sh->super.status = status;
}

/* One step of the agreement; returns events (0: idle). */
static int gcx_shrink_progress(gcx_shrink_t *sh)
{
    gcx_comm_t *comm   = sh->super.comm;
    int         events = 0, r;

    if (sh->super.status != GCX_INPROGRESS) {
        return 0;
    }
    events += gcx_shrink_consume(sh);
    if (sh->super.status != GCX_INPROGRESS) {
        return events + 1;
    }
    /* this process hears none of its peers on this host any more (a peer
     * killed inside a write into its shared-memory queue): taking the
     * silent live ones for dead would make it decide alone */
    if (comm->tl->ops->deaf(comm->tl)) {
        gcx_error("gcx_comm_shrink: this process no longer hears its peers "
                  "on this host: it leaves the shrink (the others go on "
                  "without it)");
        gcx_shrink_leave(sh, GCX_ERR_TRANSPORT);
        return events + 1;
    }
    /* the failure detector: the transport's word, or GCX_TIMEOUT */
    for (r = 0; r < sh->n; ++r) {
        if (r != sh->me && gcx_bit(sh->correct, r) &&
            comm->tl->ops->peer_lost(comm->tl, r)) {
            gcx_debug("gcx_comm_shrink: rank %d is gone", r);
            gcx_shrink_dead(sh, r);
            ++events;
        }
    }
    if (gcx_time_now() > sh->deadline) {
        for (r = 0; r < sh->n; ++r) {
            if (gcx_bit(sh->correct, r) && !gcx_bit(sh->from[sh->round], r)) {
                if (sh->round_timeout < comm->config.timeout) {
                    gcx_warn("gcx_comm_shrink: rank %d not heard in round "
                             "%d within %g s after the communicator failed "
                             "by GCX_TIMEOUT=%g s: taken for dead", r,
                             sh->round, sh->round_timeout,
                             comm->config.timeout);
                } else {
                    gcx_warn("gcx_comm_shrink: rank %d not heard in round "
                             "%d within GCX_TIMEOUT=%g s: taken for dead", r,
                             sh->round, comm->config.timeout);
                }
                gcx_shrink_dead(sh, r);
                ++events;
            }
        }
    }
    while (sh->super.status == GCX_INPROGRESS &&
           gcx_shrink_subset(sh, sh->correct, sh->from[sh->round])) {
        ++events;
        if (memcmp(sh->from[sh->round], sh->from[sh->round - 1],
                   (size_t)sh->nb) == 0) {
            gcx_shrink_decide(sh, sh->val[sh->round]);
        } else if (sh->round == sh->maxround) {
            /* every round lost a rank it relied on: not with n ranks */
            gcx_error("gcx_comm_shrink: no agreement after %d rounds",
                      sh->round);
            sh->super.status = GCX_ERR_TIMEOUT;
        } else {
            gcx_shrink_start_round(sh, sh->round + 1, sh->val[sh->round]);
        }
    }
    return events;
}

static void gcx_shrink_post(gcx_task_t *task)
{
    (void)task; /* started by gcx_shrink_new */
}

static void gcx_shrink_task_progress(gcx_task_t *task)
{
    (void)gcx_shrink_progress((gcx_shrink_t *)task);
}

/* The progress callback a shrink registers while it waits. */
static int gcx_shrink_progress_cb(void *arg)
{
    gcx_shrink_t *sh = arg;

    gcx_context_waiting(sh->super.comm->ctx);
    return gcx_shrink_progress(sh);
}

static void gcx_shrink_finalize(gcx_task_t *task)
{
    gcx_shrink_t *sh = (gcx_shrink_t *)task;
    int           r;

    for (r = 0; sh->from != NULL && r <= sh->maxround; ++r) {
        free(sh->from[r]);
        free(sh->val[r]);
    }
    free(sh->from);
    free(sh->val);
    free(sh->correct);
    free(sh->decision);
    free(sh->out);
    free(sh);
}

static const gcx_task_ops_t gcx_shrink_ops = {
    .name     = "shrink",
    .post     = gcx_shrink_post,
    .progress = gcx_shrink_task_progress,
    .finalize = gcx_shrink_finalize,
};

/* A new agreement on @p comm, its first round sent; NULL: out of memory. */
static gcx_shrink_t *gcx_shrink_new(gcx_comm_t *comm, const int *exclude,
                                    int nexclude)
{
    gcx_shrink_t       *sh = calloc(1, sizeof(*sh));
    gcx_comm_id_offer_t offer;
    uint8_t            *mine;
    int                 r;

    if (sh == NULL) {
        return NULL;
    }
    gcx_task_init(&sh->super, &gcx_shrink_ops, comm);
    sh->n        = comm->size;
    sh->nb       = (comm->size + 7) / 8;
    sh->me       = comm->rank;
    sh->vlen     = GCX_SHRINK_SETS_OFF + 3 * (size_t)sh->nb;
    sh->epoch    = comm->shrink_epoch++;
    sh->maxround = comm->size + 1;
    /* the parent failed by timeout: some rank was silent for GCX_TIMEOUT
     * already, and the live ones come at once (file comment) */
    sh->round_timeout = comm->config.timeout;
    if (comm->error == GCX_ERR_TIMEOUT) {
        double grace = comm->config.timeout / 4 > 1.0 ?
                           comm->config.timeout / 4 : 1.0;

        if (grace < sh->round_timeout) {
            sh->round_timeout = grace;
        }
    }
    sh->correct  = calloc(1, (size_t)sh->nb);
    sh->from     = calloc((size_t)sh->maxround + 1, sizeof(*sh->from));
    sh->val      = calloc((size_t)sh->maxround + 1, sizeof(*sh->val));
    sh->decision = calloc(1, sh->vlen);
    sh->out      = malloc(sizeof(gcx_ctl_hdr_t) + sh->vlen);
    mine         = calloc(1, sh->vlen);
    if (sh->correct == NULL || sh->from == NULL || sh->val == NULL ||
        sh->decision == NULL || sh->out == NULL || mine == NULL ||
        !gcx_shrink_touch(sh, 0)) {
        free(mine);
        gcx_shrink_finalize(&sh->super);
        return NULL;
    }
    /* round 0: everybody, as if heard */
    for (r = 0; r < sh->n; ++r) {
        gcx_bit_set(sh->from[0], r);
        gcx_bit_set(sh->correct, r);
    }
    /* this rank's proposal: itself, its exclude list, its id offer */
    gcx_context_id_offer(comm->ctx, &offer);
    memcpy(mine, &offer.cursor, sizeof(offer.cursor));
    memcpy(mine + GCX_SHRINK_USED_OFF, offer.used, sizeof(offer.used));
    gcx_bit_set(mine + GCX_SHRINK_SETS_OFF, sh->me);
    for (r = 0; r < nexclude; ++r) {
        gcx_bit_set(mine + GCX_SHRINK_SETS_OFF + sh->nb, exclude[r]);
        gcx_bit_clear(sh->correct, exclude[r]); /* never waited for */
    }
    gcx_shrink_start_round(sh, 1, mine);
    free(mine);
    return sh;
}

/* The new communicator from the decision (lock held). */
static gcx_status_t gcx_shrink_finish(gcx_comm_t *comm, gcx_shrink_t *sh,
                                      gcx_comm_t **newcomm_p)
{
    const uint8_t      *members = sh->decision + GCX_SHRINK_SETS_OFF;
    const uint8_t      *excl    = members + sh->nb;
    const uint8_t      *dead    = excl + sh->nb;
    gcx_comm_id_offer_t offer;
    gcx_status_t        status;
    int                *ranks, n = 0, newrank = -1, r;

    if (!gcx_bit(members, sh->me) || gcx_bit(dead, sh->me)) {
        gcx_error("gcx_comm_shrink: this rank (%d) was left out: the others "
                  "did not hear it within GCX_TIMEOUT=%g s",
                  sh->me, comm->config.timeout);
        return GCX_ERR_TIMEOUT;
    }
    if (gcx_bit(excl, sh->me)) {
        gcx_error("gcx_comm_shrink: another rank's exclude list names this "
                  "rank (%d), which called: the lists must be the same",
                  sh->me);
        return GCX_ERR_MISMATCH;
    }
    ranks = malloc((size_t)sh->n * sizeof(*ranks));
    if (ranks == NULL) {
        return GCX_ERR_NOMEM;
    }
    for (r = 0; r < sh->n; ++r) {
        if (gcx_bit(members, r) && !gcx_bit(excl, r) && !gcx_bit(dead, r)) {
            if (r == sh->me) {
                newrank = n;
            }
            ranks[n++] = r;
            /* an endpoint the parent's abort closed to a live member */
            if (r != sh->me) {
                status = comm->tl->ops->revive(comm->tl, r);
                if (status == GCX_ERR_TRANSPORT) {
                    free(ranks);
                    return status;
                }
            }
        }
    }
    /* the union of the offers: an id no member uses */
    memcpy(&offer.cursor, sh->decision, sizeof(offer.cursor));
    memcpy(offer.used, sh->decision + GCX_SHRINK_USED_OFF, sizeof(offer.used));
    status = gcx_comm_derive(comm, &comm->config, &offer, 0, NULL, ranks, n,
                             newrank, newcomm_p);
    if (status == GCX_OK) {
        gcx_info("shrink of communicator %u (%d ranks): rank %d of %d in "
                 "communicator %u after %d rounds", comm->id, sh->n, newrank,
                 n, (*newcomm_p)->id, sh->round);
    }
    free(ranks);
    return status;
}

/* Checks the arguments; GCX_OK or GCX_ERR_INVALID (logged). */
static gcx_status_t gcx_shrink_check(const gcx_comm_t *comm,
                                     const int *exclude, int nexclude,
                                     int flags, gcx_comm_t **newcomm_p)
{
    int i, j;

    if (comm == NULL || newcomm_p == NULL ||
        (exclude == NULL && nexclude > 0)) {
        gcx_error("gcx_comm_shrink: %s is NULL",
                  comm == NULL ? "the communicator" :
                  newcomm_p == NULL ? "newcomm_p" : "exclude");
        return GCX_ERR_INVALID;
    }
    if (nexclude < 0 || nexclude > comm->size - 1) {
        gcx_error("gcx_comm_shrink: nexclude = %d: 0..%d (the size less "
                  "the caller)", nexclude, comm->size - 1);
        return GCX_ERR_INVALID;
    }
    if ((flags & ~GCX_SHRINK_REVOKE) != 0) {
        gcx_error("gcx_comm_shrink: unknown flags 0x%x (GCX_SHRINK_REVOKE "
                  "is the only one)", (unsigned)flags);
        return GCX_ERR_INVALID;
    }
    for (i = 0; i < nexclude; ++i) {
        if (exclude[i] < 0 || exclude[i] >= comm->size) {
            gcx_error("gcx_comm_shrink: exclude[%d] = %d is not a rank "
                      "(0..%d)", i, exclude[i], comm->size - 1);
            return GCX_ERR_INVALID;
        }
        if (exclude[i] == comm->rank) {
            gcx_error("gcx_comm_shrink: exclude[%d] is the caller (rank "
                      "%d); an excluded rank does not call", i, comm->rank);
            return GCX_ERR_INVALID;
        }
        for (j = 0; j < i; ++j) {
            if (exclude[j] == exclude[i]) {
                gcx_error("gcx_comm_shrink: exclude[%d] and exclude[%d] are "
                          "both %d", j, i, exclude[i]);
                return GCX_ERR_INVALID;
            }
        }
    }
    return GCX_OK;
}

gcx_status_t gcx_comm_shrink_ranks(gcx_comm_t *comm, const int *exclude,
                                   int nexclude, int flags,
                                   gcx_comm_t **newcomm_p)
{
    gcx_shrink_t *sh;
    gcx_status_t  status = gcx_shrink_check(comm, exclude, nexclude, flags,
                                            newcomm_p);

    if (status != GCX_OK) {
        return status;
    }
    *newcomm_p = NULL;
    gcx_context_create_lock();
    gcx_context_lock();
    if (flags & GCX_SHRINK_REVOKE) {
        gcx_comm_revoke_locked(comm);
    }
    sh = gcx_shrink_new(comm, exclude, nexclude);
    if (sh == NULL) {
        gcx_context_unlock();
        gcx_context_create_unlock();
        return GCX_ERR_NOMEM;
    }
    gcx_context_progress_register(comm->ctx, &sh->progress_cb,
                                  gcx_shrink_progress_cb, sh);
    /* the wait drops the context lock between progress calls (the
     * creation lock stays), as a split's exchange does */
    gcx_context_unlock();
    status = gcx_wait((gcx_request_t *)&sh->super);
    gcx_context_lock();
    gcx_context_progress_unregister(comm->ctx, &sh->progress_cb);
    if (status == GCX_OK) {
        status = gcx_shrink_finish(comm, sh, newcomm_p);
    }
    gcx_shrink_finalize(&sh->super);
    gcx_context_unlock();
    gcx_context_create_unlock();
    return status;
}

gcx_status_t gcx_comm_shrink(gcx_comm_t *comm, gcx_comm_t **newcomm_p)
{
    return gcx_comm_shrink_ranks(comm, NULL, 0, GCX_SHRINK_REVOKE, newcomm_p);
}
