/*
 * masterless_ahead.c - serving rounds ahead of the call: the round states
 * of the window (linked in round order), made for a round whose messages
 * came before the rank entered it, and the progress callback that serves
 * them while the application computes. Cost: a walk of the stash per
 * progress call between rounds; on a rank behind, up to `window` round
 * states (see the comment at gcx_car_link).
 */
#include "masterless_int.h"

#include <stdlib.h>

/*
 * Serving rounds ahead of the call. A rank that has not entered round r
 * yet (still computing its gradient) owns its chunks of round r all the
 * same, and the other ranks wait for them. So whenever this process
 * progresses (any gcx call, gcx_progress from a framework's progress
 * thread: a progress callback of the context), a round r of the window
 * next_open .. next_open + window - 1 (gcx_car_window) whose messages are
 * here gets its state without the rank's vector (entered 0): the owner
 * part decodes its chunks from the other workers' chunks and publishes
 * them, the rank's own chunk being one more straggler's; a later owner
 * acknowledges the copies it holds; the decoded chunks of the others wait
 * in their slots. The rank's call then takes that state over (gcx_car_post):
 * its chunks still go to the owners that have not decoded yet, and the
 * round completes with the chunks already there -- or, every chunk there
 * (gcx_coded_allreduce_ready), the rank need not compute its vector at all
 * and abstains. The others can thus be `window` rounds in front of a rank
 * that computes slowly; one round further they need a chunk it does not
 * serve yet, which bounds how far behind a rank can be (the rule
 * gcx_car_serve_kept relies on). Cost: a walk of the stash per progress
 * call between rounds (a few entries) and, with no round here at all, a
 * look at the P peers' connections and at the chunks it acts for (kept
 * copies to send again when an owner is lost); on a rank behind, up to
 * `window` round states, each holding the chunks taken for its decode and
 * the decoded chunks received (about two vectors, in the transport's
 * buffers when held in place) and the chunk it published (a block of its
 * own: its sends may outlive the round). Received messages held in place
 * and header-only ones (COMMIT, ACK, VOID, LOST) need no block of ours
 * (gcx_car_pull; but a pooled slot taken for one keeps the block it had,
 * so the pool's blocks grow towards one per message held at once: see
 * gcx_coded_stats_t.buffer_bytes); a header-only fan-out is one slot whose
 * block holds the header alone (gcx_car_send_ctl).
 */
/* A round with a fresh state (gcx_car_state_new: no chunk sent yet),
 * linked into car->rounds in round order. */
void gcx_car_link(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_car_op_t **pp;

    for (pp = &car->rounds; *pp != NULL && (*pp)->round < op->round;
         pp = &(*pp)->next) {
    }
    op->next = *pp;
    *pp      = op;
}

static gcx_car_op_t *gcx_car_ahead_make(gcx_coded_allreduce_t *car,
                                        uint64_t round)
{
    gcx_car_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        return NULL; /* served once the rank enters */
    }
    op->super.status = GCX_INPROGRESS;
    op->car          = car;
    op->round        = round;
    if (gcx_car_state_new(car, op) != GCX_OK) {
        free(op);
        return NULL;
    }
    gcx_car_link(car, op);
    return op;
}

int gcx_car_ahead(void *arg)
{
    gcx_coded_allreduce_t *car = arg;
    gcx_coded_slot_t      *slot;
    gcx_car_op_t          *op, *next;
    uint64_t               end = car->next_open + (uint64_t)car->base.window;
    int                    made = 0;

    if (car->base.comm->error != GCX_OK) {
        return 0;
    }
    for (slot = car->base.stash; slot != NULL; slot = slot->next) {
        if (slot->round >= car->next_open && slot->round < end &&
            gcx_car_find(car, slot->round) == NULL) {
            if (gcx_car_ahead_make(car, slot->round) == NULL) {
                break;
            }
            made = 1;
        }
    }
    for (op = car->rounds; op != NULL; op = next) {
        next = op->next; /* a round served ahead never completes here */
        if (!op->entered) {
            gcx_car_progress(&op->super);
        }
    }
    if (car->rounds == NULL) {
        /* no round here: the kept copies a lost owner's chunks need are
         * sent from here, or a rank still in the last round the others
         * ran would wait for one until GCX_TIMEOUT (nothing else runs
         * gcx_car_serve_kept once this rank has stopped calling) */
        gcx_car_acting(car, car->acting);
        (void)gcx_car_serve_kept(car, car->acting, car->next_open);
    }
    return made;
}

/* Unlink @p op from car->rounds. */
void gcx_car_unlink(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_car_op_t **pp;

    for (pp = &car->rounds; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            return;
        }
    }
}

/* A round served ahead of this rank's call, dropped (the object goes, or a
 * failed round left one below the next call). */
void gcx_car_ahead_drop(gcx_coded_allreduce_t *car, gcx_car_op_t *op)
{
    gcx_car_unlink(car, op);
    gcx_car_release(car, op);
    free(op->state);
    free(op);
}
