/*
 * calibrate.c - the measured network model of the sparse allreduce: α
 * (latency, s), β (s/byte) and γ (s per merged pair), which the cost model
 * (select.c) turns into predicted times.
 *
 * Idea: α and β come from GCX_NET_LATENCY_US / GCX_NET_BANDWIDTH_GBPS where
 * set; otherwise the first auto call on a communicator measures them (and
 * γ) once and keeps them in the communicator's sparse state: 8 bytes to and
 * from every pair first (connection setup, untimed), then the fastest of 5
 * small rings (α), the fastest of 3 shifts of 4 MB to the right neighbour
 * (β: every link loaded at once, as in a ring's step) and a local 1M-pair
 * merge (γ), agreed by a MAX allreduce so every rank models alike.
 * Cost: once per communicator, 7(P-1) small messages and 12 MB sent per
 * rank, a buffer of max(8 MB, 8P bytes), freed before ~2 merges of 2M
 * pairs (the peak is the larger of the two); nothing on later calls.
 * (It was one ring of 4 MB per rank: 4(P-1) MB sent and 4P MB held per
 * rank, 256 MB at 64 ranks.)
 */
#include "sparse_allreduce.h"

#include "base/config.h"
#include "base/time.h"

#include <stdlib.h>
#include <string.h>

/* α (s), β (s/byte) and γ (s/merged pair) from the variables or the
 * measured cache; 0 when they still have to be measured. */
int gcx_sparse_model_params(gcx_sparse_task_t *t)
{
    const struct gcx_config       *cfg = &t->super.comm->config;
    const gcx_sparse_comm_state_t *e   = gcx_sparse_state(t->super.comm);
    double                         alpha = e->alpha, beta = e->beta;
    double                         gamma = e->gamma;

    if (cfg->net_latency_us > 0) {
        alpha = cfg->net_latency_us * 1e-6;
    }
    if (cfg->net_bandwidth_gbps > 0) {
        beta = 8.0 / (cfg->net_bandwidth_gbps * 1e9);
    }
    if (gamma == 0 && cfg->net_latency_us > 0 && cfg->net_bandwidth_gbps > 0) {
        gamma = GCX_SPARSE_DEFAULT_GAMMA; /* no calibration will run */
    }
    t->alpha = alpha;
    t->beta  = beta;
    t->gamma = gamma;
    return alpha > 0 && beta > 0 && gamma > 0;
}

/*
 * ---- calibration: timed ring allgathers, agreed by a MAX allreduce ----
 * First, untimed, 8 bytes to and from every other rank: the first message
 * between two ranks may set up the connection (UCX wires endpoints lazily;
 * milliseconds over TCP). Left to the algorithms, that would be charged to
 * the first one to use a pair (the ring's neighbours are not all of them):
 * as latency to the α measured here, and as a measured/modelled ratio of
 * 3-7 to the first algorithm auto runs (recursive doubling at 0.01% on the
 * emulated cluster), which then would not run again for an expiry period.
 * Then the fastest of 5 small rings (α: one late scheduling of a rank
 * sharing a core would otherwise count as latency; per step, small_s /
 * (P - 1)), the fastest of 3 shifts (every rank sends 4 MB to rank + 1
 * and receives 4 MB from rank - 1 at once: a ring step's load on every
 * link, so β = (shift - α) / 4 MB whatever P) and a local merge (γ). Once
 * per communicator: 7(P-1) small messages and 12 MB per rank.
 */

#define GCX_SPARSE_CAL_BYTES  (4u << 20) /* per shift: near the streaming rate */
#define GCX_SPARSE_CAL_SMALL  5          /* small rings; the fastest counts */
#define GCX_SPARSE_CAL_SHIFTS 3          /* big shifts; the fastest counts */

struct gcx_sparse_cal {
    int         stage; /* -1 wiring, 0 small rings, 1 shifts, 2 agree */
    int         small_done, shifts_done;
    gcx_tl_req_t *wire; /* stage -1: [0, P) receives, [P, 2P) sends */
    gcx_tl_req_t shift[2]; /* stage 1: the receive, the send */
    double      t0, small_s, shift_s;
    gcx_task_t *ring;
    char       *buf;
    size_t     *counts;
    gcx_task_t  rd_task;
    gcx_rd_t    rd;
    double      vals[3], tmp[3];
};

static const gcx_task_ops_t gcx_sparse_pseudo_ops = {
    .name = "sparse allreduce (calibration)",
};

static gcx_task_t *gcx_sparse_cal_ring(gcx_sparse_task_t *t,
                                       gcx_sparse_cal_t *cal, size_t per_rank)
{
    int P = t->super.comm->size, r;

    for (r = 0; r < P; ++r) {
        cal->counts[r]     = per_rank;
        cal->counts[P + r] = (size_t)r * per_rank;
    }
    return gcx_sparse_ring(t->super.comm, cal->buf, NULL, cal->counts,
                           cal->counts + P, GCX_DT_U8);
}

void gcx_sparse_cal_free(gcx_sparse_cal_t *cal)
{
    if (cal->ring != NULL) {
        cal->ring->ops->finalize(cal->ring);
    }
    free(cal->buf);
    free(cal->counts);
    free(cal->wire);
    free(cal);
}

/* Stage -1: post 8 bytes to and from every other rank (into and from
 * cal->buf, which the rings overwrite later); < 0 on failure, with
 * t->super.status set. */
static int gcx_sparse_cal_wire_post(gcx_sparse_task_t *t,
                                    gcx_sparse_cal_t *cal)
{
    int P = t->super.comm->size, rank = t->super.comm->rank, k;

    for (k = 1; k < P; ++k) {
        int from = gcx_coll_mod(rank - k, P), to = gcx_coll_mod(rank + k, P);

        if (gcx_coll_recv(&t->super, from, GCX_SPARSE_SLOT(9),
                          cal->buf + 8 * (size_t)from, 8,
                          &cal->wire[from]) < 0 ||
            gcx_coll_send(&t->super, to, GCX_SPARSE_SLOT(9),
                          cal->buf + 8 * (size_t)rank, 8,
                          &cal->wire[P + to]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Stage -1 done: 1, in progress: 0, failed: -1 (t->super.status set). */
static int gcx_sparse_cal_wire_test(gcx_sparse_task_t *t,
                                    gcx_sparse_cal_t *cal)
{
    int P = t->super.comm->size, rank = t->super.comm->rank, i, state;
    int done = 1;

    for (i = 0; i < 2 * P; ++i) {
        if (i % P == rank) {
            continue;
        }
        state = gcx_coll_req_state(&t->super, &cal->wire[i], i % P,
                                   i < P ? 8 : SIZE_MAX);
        if (state < 0) {
            return -1;
        }
        done &= state;
    }
    return done;
}

/* Stage 1: post one shift (4 MB from rank - 1 into the buffer's second
 * half, 4 MB from its first half to rank + 1); < 0 on failure, with
 * t->super.status set. */
static int gcx_sparse_cal_shift_post(gcx_sparse_task_t *t,
                                     gcx_sparse_cal_t *cal)
{
    int      P = t->super.comm->size, rank = t->super.comm->rank;
    uint32_t slot = GCX_SPARSE_SLOT(10 + GCX_SPARSE_CAL_SMALL +
                                    cal->shifts_done);

    memset(cal->shift, 0, sizeof(cal->shift));
    cal->t0 = gcx_time_now();
    if (gcx_coll_recv(&t->super, gcx_coll_mod(rank - 1, P), slot,
                      cal->buf + GCX_SPARSE_CAL_BYTES, GCX_SPARSE_CAL_BYTES,
                      &cal->shift[0]) < 0 ||
        gcx_coll_send(&t->super, gcx_coll_mod(rank + 1, P), slot, cal->buf,
                      GCX_SPARSE_CAL_BYTES, &cal->shift[1]) < 0) {
        return -1;
    }
    return 0;
}

/* Stage 1 done: 1, in progress: 0, failed: -1 (t->super.status set). */
static int gcx_sparse_cal_shift_test(gcx_sparse_task_t *t,
                                     gcx_sparse_cal_t *cal)
{
    int P = t->super.comm->size, rank = t->super.comm->rank, recv, send;

    recv = gcx_coll_req_state(&t->super, &cal->shift[0],
                              gcx_coll_mod(rank - 1, P), GCX_SPARSE_CAL_BYTES);
    if (recv < 0) {
        return -1;
    }
    send = gcx_coll_req_state(&t->super, &cal->shift[1],
                              gcx_coll_mod(rank + 1, P), SIZE_MAX);
    return send < 0 ? -1 : recv && send;
}

/* A timed exchange begun at @p t0 ended now: count it, keep the fastest. */
static void gcx_sparse_cal_fastest(double t0, int *done, double *best_s)
{
    double dt = gcx_time_now() - t0;

    if ((*done)++ == 0 || dt < *best_s) {
        *best_s = dt;
    }
}

void gcx_sparse_cal_start(gcx_sparse_task_t *t)
{
    int               P   = t->super.comm->size;
    size_t            bytes = 8 * (size_t)P > 2 * (size_t)GCX_SPARSE_CAL_BYTES ?
                                  8 * (size_t)P :
                                  2 * (size_t)GCX_SPARSE_CAL_BYTES;
    gcx_sparse_cal_t *cal = calloc(1, sizeof(*cal));

    if (cal == NULL || (cal->buf = calloc(1, bytes)) == NULL ||
        (cal->counts = malloc(2 * (size_t)P * sizeof(size_t))) == NULL ||
        (cal->wire = calloc(2 * (size_t)P, sizeof(*cal->wire))) == NULL) {
        if (cal != NULL) {
            gcx_sparse_cal_free(cal);
        }
        t->super.status = GCX_ERR_NOMEM;
        return;
    }
    t->algo_state = cal;
    cal->stage    = -1;
    gcx_sparse_cal_wire_post(t, cal); /* sets t->super.status on failure */
}

/* 1 done (t->alpha, t->beta set), 0 in progress, -1 failed. */
int gcx_sparse_cal_progress(gcx_sparse_task_t *t)
{
    gcx_sparse_cal_t *cal = t->algo_state;
    int               P = t->super.comm->size, state;

    for (;;) {
        switch (cal->stage) {
        case -1:
        case 0:
        case 1:
            state = cal->stage == -1 ? gcx_sparse_cal_wire_test(t, cal) :
                    cal->stage == 1  ? gcx_sparse_cal_shift_test(t, cal) :
                        gcx_coll_subtask_progress(&t->super, cal->ring);
            if (state <= 0) {
                return state;
            }
            if (cal->ring != NULL) {
                cal->ring->ops->finalize(cal->ring);
                cal->ring = NULL;
            }
            if (cal->stage == 0) { /* the fastest small ring: latency */
                gcx_sparse_cal_fastest(cal->t0, &cal->small_done,
                                       &cal->small_s);
            }
            if (cal->stage == -1 ||
                (cal->stage == 0 && cal->small_done < GCX_SPARSE_CAL_SMALL)) {
                /* connections are up (after -1): time small rings, one tag
                 * slot each */
                cal->ring = gcx_sparse_cal_ring(t, cal, 8);
                if (cal->ring == NULL) {
                    t->super.status = GCX_ERR_NOMEM;
                    return -1;
                }
                cal->t0 = gcx_time_now();
                gcx_coll_subtask_post(&t->super, cal->ring,
                                      GCX_SPARSE_SLOT(10 + cal->small_done));
                cal->stage = 0;
                break;
            }
            if (cal->stage == 1) { /* the fastest shift: bandwidth */
                gcx_sparse_cal_fastest(cal->t0, &cal->shifts_done,
                                       &cal->shift_s);
            }
            if (cal->stage == 0 || cal->shifts_done < GCX_SPARSE_CAL_SHIFTS) {
                if (gcx_sparse_cal_shift_post(t, cal) < 0) {
                    return -1;
                }
                cal->stage = 1;
                break;
            }
            cal->vals[0] = cal->small_s / (P - 1);
            cal->vals[1] = (cal->shift_s - cal->vals[0]) /
                           (double)GCX_SPARSE_CAL_BYTES;
            /* the transfers are done: the 8 MB buffer goes before the
             * merge allocates its own (the calibration's peak) */
            free(cal->buf);
            cal->buf     = NULL;
            cal->vals[2] = gcx_sparse_measure_merge();
            gcx_task_init(&cal->rd_task, &gcx_sparse_pseudo_ops,
                          t->super.comm);
            cal->rd_task.seq       = t->super.seq;
            cal->rd_task.step_base = t->super.step_base + GCX_SPARSE_SLOT(3);
            gcx_rd_start(&cal->rd, &cal->rd_task, cal->vals, cal->tmp, 3,
                         GCX_DT_F64, GCX_OP_MAX);
            cal->stage = 2;
            break;
        default:
            state = gcx_rd_progress(&cal->rd);
            if (state < 0) {
                t->super.status = cal->rd_task.status;
                return -1;
            }
            if (state == 0) {
                return 0;
            }
            t->alpha = cal->vals[0] > 1e-7 ? cal->vals[0] : 1e-7;
            t->beta  = cal->vals[1] > 1e-12 ? cal->vals[1] : 1e-12;
            t->gamma = cal->vals[2] > 1e-12 ? cal->vals[2] : 1e-12;
            {
                gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);

                e->alpha = t->alpha;
                e->beta  = t->beta;
                e->gamma = t->gamma;
            }
            gcx_info("sparse allreduce: measured alpha %.1f us, link %.3f "
                     "Gbit/s, merge %.1f ns/pair (set GCX_NET_LATENCY_US / "
                     "GCX_NET_BANDWIDTH_GBPS to skip)",
                     t->alpha * 1e6, 8.0 / t->beta / 1e9, t->gamma * 1e9);
            gcx_sparse_cal_free(cal);
            t->algo_state = NULL;
            return 1;
        }
    }
}
