/**
 * @file gravac.h
 * @brief GraVAC: adaptive compression factor from the gradient information
 *        that compression keeps (Tyagi & Swany, IEEE CLOUD 2023, Alg. 1).
 *
 * Idea. Each step the error-feedback residual g_ef is compressed in two
 * levels: g_min = C(g_ef, theta_min) and g_c = C(g_min, theta_s), so g_c has
 * the effective compression factor (CF) theta_min * theta_s. The gains
 *   delta_min = ||g_min||^2 / ||g_ef||^2,   delta_c = ||g_c||^2 / ||g_ef||^2
 * (norms summed over ranks, then EWMA-smoothed over steps) say how much of
 * the gradient each level keeps. The epsilon cascade picks what is sent:
 * g_c if delta_c >= epsilon, else g_min if delta_min >= epsilon, else the
 * dense g_ef. The residual becomes g_ef - sent. Every step also records the
 * compression throughput T[cf] = samples/s * delta of what was sent, dense
 * steps included (T[1] = samples/s: dense SGD is a candidate, as in the
 * paper). Every `window` steps the controller, in this order,
 *   1. checks saturation: when the two best T values T1 >= T2 are within
 *      omega of the second, |T1 - T2| / T2 <= omega (the paper's line 37),
 *      it settles on the lower CF of the two (CF 1: dense steps) and does
 *      not raise or scale in that window. By default the check is re-run
 *      at every window end with the latest T values, so a change of regime
 *      (a learning-rate decay, a slower link) moves the CF again: a settled
 *      controller that finds the two best apart resumes the search from
 *      where it settled (GCX_GRAVAC_SETTLE=window); GCX_GRAVAC_SETTLE=once
 *      keeps the first settlement for the rest of training;
 *   2. otherwise raises theta_min <- theta_min * theta_s when
 *      |delta_min - delta_c| / delta_min <= omega (compressing further lost
 *      nothing measurable), with the theta_s just measured, and
 *   3. then scales theta_s <- policy(theta_s), capped so that
 *      theta_min * theta_s <= theta_max.
 *
 * T per CF is the mean of the CF's samples in the latest window that sent
 * it. The paper keeps the latest value; a single step's samples/s is too
 * noisy to compare within omega (step times of a 4-rank gcx-train run on
 * the shared 2-core box had a coefficient of variation of 0.30), while the
 * window is the controller's own unit of
 * decision, so the latest window's mean is the paper's "latest" at the
 * resolution the controller decides at: a regime change replaces it within
 * one window, unlike a mean over all of training, which would take as many
 * steps to move as had been recorded.
 *
 * Agreement. Sparse collectives need every rank to send the same level.
 * The controller therefore decides only from numbers that all ranks share:
 * the caller sums the four numbers of gcx_gravac_norms_t over ranks (one
 * allreduce of 4 doubles, gcx_gravac_allreduce_norms()) before
 * gcx_gravac_decide(). Given the same summed norms, every rank's controller
 * takes bit-identical decisions; no clock or rank-local value is read.
 *
 * Two layers:
 * - The controller (gcx_gravac_t) is pure decision logic on numbers: no
 *   vectors, no network. It can be driven by synthetic gains.
 * - The workspace (gcx_gravac_work_t) holds the two compressed levels of
 *   one vector and runs the compress API on an error-feedback state
 *   (gcx_feedback_t) and commits the chosen level back to it.
 *
 * Usage (one vector of n floats, every rank):
 * @code
 *   gcx_gravac_params_t p;
 *   gcx_gravac_params_default(&p);
 *   p.nranks = gcx_comm_size(comm);                  // EWMA factor N/100
 *   gcx_gravac_params_from_config(gcx_comm_config(comm), &p); // GCX_GRAVAC_*
 *   gcx_gravac_create(&p, &ctl);
 *   gcx_feedback_create(n, NULL, &fb);
 *   gcx_compressor_create(GCX_COMPRESS_TOPK, seed, &comp); // any kind
 *   gcx_gravac_work_create(ctl, fb, comp, comp, &work);
 *   double sps = 0;                       // samples/s of the previous step
 *   for (;;) {
 *       gcx_feedback_accumulate(fb, grad);            // g_ef = e + g
 *       gcx_gravac_norms_t norms;
 *       gcx_gravac_compress(ctl, work, sps, &norms);  // g_min, g_c, norms
 *       gcx_gravac_allreduce_norms(comm, &norms);     // 4 doubles, SUM
 *       gcx_gravac_record_t rec;
 *       gcx_gravac_decide(ctl, &norms, &rec);         // same on all ranks
 *       const gcx_sparse_vec_t *s = gcx_gravac_selected(work, &rec);
 *       if (s != NULL) sparse_allreduce(s ...);       // rec.level MIN or C
 *       else dense_allreduce(gcx_feedback_residual(fb) ...);
 *       gcx_gravac_commit(work, &rec);                // e = g_ef - sent
 *       sps = local_batch / step_seconds;             // for the next step
 *   }
 * @endcode
 * The dense case sends the residual itself; commit then zeroes it, so the
 * caller may reduce it in place. Between gcx_gravac_compress() and
 * gcx_gravac_commit() the residual must not be written by anyone else.
 *
 * Threads: one controller and one workspace per thread at a time.
 * As everywhere in gcx, outputs are set only when GCX_OK is returned, and a
 * call that fails leaves the controller's state unchanged.
 */
#ifndef GCX_GRAVAC_H
#define GCX_GRAVAC_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/compress.h>
#include <gcx/gcx.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */
/* ------------------------------------------------------------------------ */

/** How theta_s grows at the end of each window (before the theta_max cap). */
typedef enum gcx_gravac_policy {
    /** theta_s <- theta_s^2 (from theta_s = scale: 2, 4, 16, 256, ...). */
    GCX_GRAVAC_POLICY_EXPONENTIAL = 0,
    /** theta_s <- theta_s * ratio (from theta_s = scale: 2, 4, 8, ...). */
    GCX_GRAVAC_POLICY_GEOMETRIC = 1,
} gcx_gravac_policy_t;

/** When the saturation check runs once the controller has settled. */
typedef enum gcx_gravac_settle {
    /** At every window end, with the latest T values; a settled controller
     *  whose two best T values are no longer within omega resumes the
     *  search (the paper's Algorithm 1). */
    GCX_GRAVAC_SETTLE_WINDOW = 0,
    /** Never again: the first settlement holds for the rest of training. */
    GCX_GRAVAC_SETTLE_ONCE = 1,
} gcx_gravac_settle_t;

/**
 * Controller parameters. Fill with gcx_gravac_params_default() first; the
 * defaults are the paper's exponential setting on DGC.
 * Environment / config names in brackets (see gcx_gravac_params_from_config).
 */
typedef struct gcx_gravac_params {
    /** Initial first-level CF, >= 1 [GRAVAC_THETA_MIN, 10]. */
    double theta_min;
    /** Largest effective CF, >= theta_min [GRAVAC_THETA_MAX, 1000]. */
    double theta_max;
    /** Gain a level needs to be sent, in (0, 1] [GRAVAC_EPSILON, 0.7]. */
    double epsilon;
    /** Relative tolerance of the raise and saturation rules, in [0, 1)
     *  [GRAVAC_OMEGA, 0.01]. */
    double omega;
    /** Steps between two scaling decisions, >= 1 [GRAVAC_WINDOW, 500]. */
    uint32_t window;
    /** Scaling policy [GRAVAC_POLICY, exponential]. */
    gcx_gravac_policy_t policy;
    /** Initial theta_s, > 1 [GRAVAC_SCALE, 2]. */
    double scale;
    /** Geometric policy's ratio, > 1 [GRAVAC_RATIO, 2]. */
    double ratio;
    /** EWMA weight of the newest gain, in [0, 1]; 0 = min(1, nranks / 100)
     *  [GRAVAC_ALPHA, 0]. 1 disables smoothing. */
    double alpha;
    /** Number of workers N (for alpha = 0), >= 1; default 1. */
    int nranks;
    /** Re-check saturation after settling [GRAVAC_SETTLE, window]. */
    gcx_gravac_settle_t settle;
} gcx_gravac_params_t;

/** Fill @p params with the defaults listed in gcx_gravac_params_t. */
GCX_API
void gcx_gravac_params_default(gcx_gravac_params_t *params);

/**
 * Check parameters: GCX_OK, or GCX_ERR_INVALID for NULL, NaN, or any value
 * outside the ranges listed in gcx_gravac_params_t.
 */
GCX_API
gcx_status_t gcx_gravac_params_check(const gcx_gravac_params_t *params);

/**
 * Overwrite theta_min, theta_max, epsilon, omega, window, policy, scale,
 * ratio, alpha and settle with the GCX_GRAVAC_* values of @p config (read through
 * gcx_config_get(); defaults and validation live in the one config table).
 * nranks is left as it is. Real values pass through the table's text form
 * ("%g": 6 significant digits).
 * @return GCX_OK; GCX_ERR_INVALID (NULL argument or a combination that
 *         gcx_gravac_params_check() rejects, e.g. theta_max < theta_min);
 *         @p params is changed only on success.
 */
GCX_API
gcx_status_t gcx_gravac_params_from_config(const gcx_config_t *config,
                                           gcx_gravac_params_t *params);

/**
 * The candidate effective CFs the policy visits while theta_min does not
 * move: theta_min, then theta_min * theta_s for each scaling until the
 * theta_max cap (the last entry is theta_max when the cap cut the sequence).
 * Defaults: 10, 20, 40, 160, 1000. Geometric x2, theta_max 2000: 10, 20,
 * 40, 80, 160, 320, 640, 1280, 2000.
 *
 * @param[out] cfs    Up to @p max entries.
 * @param[out] count_p Number of entries of the whole sequence (may exceed
 *                    @p max; only @p max are written).
 * @return GCX_OK, GCX_ERR_INVALID (bad parameters, NULL pointers).
 */
GCX_API
gcx_status_t gcx_gravac_candidates(const gcx_gravac_params_t *params,
                                   double *cfs, size_t max, size_t *count_p);

/* ------------------------------------------------------------------------ */
/* Controller                                                               */
/* ------------------------------------------------------------------------ */

/** Opaque controller: parameters, thetas, smoothed gains, T table. */
typedef struct gcx_gravac gcx_gravac_t;

/** Which level a step sends. */
typedef enum gcx_gravac_level {
    GCX_GRAVAC_LEVEL_DENSE = 0, /**< The whole residual g_ef, CF 1. */
    GCX_GRAVAC_LEVEL_MIN   = 1, /**< g_min, CF theta_min. */
    GCX_GRAVAC_LEVEL_C     = 2, /**< g_c, CF theta_min * theta_s. */
} gcx_gravac_level_t;

/**
 * The numbers a rank contributes to a decision. Sum them over ranks
 * (allreduce of 4 GCX_DT_F64 with GCX_OP_SUM; the struct is exactly four
 * doubles) before gcx_gravac_decide().
 */
typedef struct gcx_gravac_norms {
    double ef_sqnorm;     /**< ||g_ef||^2 */
    double min_sqnorm;    /**< ||g_min||^2 */
    double c_sqnorm;      /**< ||g_c||^2 */
    /** This rank's samples/s of the PREVIOUS step (0: not measured). The
     *  sum is the system throughput T_system of that step. */
    double samples_per_s;
} gcx_gravac_norms_t;

/** Events of gcx_gravac_record_t.events (set on window ends). */
enum {
    GCX_GRAVAC_EV_WINDOW  = 1u << 0, /**< This step closed a window. */
    GCX_GRAVAC_EV_RAISED  = 1u << 1, /**< theta_min was raised. */
    GCX_GRAVAC_EV_SCALED  = 1u << 2, /**< theta_s changed by the policy. */
    GCX_GRAVAC_EV_CAPPED  = 1u << 3, /**< theta_min*theta_s is theta_max. */
    /** Saturation: the search stopped at a new settled CF. */
    GCX_GRAVAC_EV_SETTLED   = 1u << 4,
    /** The two best T values drifted apart: the search resumed
     *  (GCX_GRAVAC_SETTLE_WINDOW only). */
    GCX_GRAVAC_EV_UNSETTLED = 1u << 5,
};

/**
 * Decision and trace record of one step (what to log per step).
 * theta_min / theta_s are the values this step used; the values for the
 * next step are in gcx_gravac_get_state().
 */
typedef struct gcx_gravac_record {
    uint64_t step;            /**< 0, 1, 2, ... (decisions taken before). */
    gcx_gravac_level_t level; /**< What to send. */
    double cf;                /**< Nominal CF: 1, theta_min, or c's. */
    double delta_min;         /**< Smoothed gain of g_min. */
    double delta_c;           /**< Smoothed gain of g_c. */
    double theta_min;         /**< First-level CF of this step. */
    double theta_s;           /**< Second-level CF of this step. */
    /** T = T_system * delta recorded at this step for the PREVIOUS step's
     *  send (the summed samples_per_s arrives one step late; a dense send
     *  has delta 1); 0 if none. */
    double throughput;
    unsigned events;          /**< GCX_GRAVAC_EV_* bits. */
} gcx_gravac_record_t;

/** Snapshot of a controller (what the next step will use). */
typedef struct gcx_gravac_state {
    uint64_t step;      /**< Decisions taken so far. */
    double theta_min;   /**< First-level CF of the next step. */
    double theta_s;     /**< Second-level CF of the next step. */
    double delta_min;   /**< Smoothed gains (0 before the first sample). */
    double delta_c;
    int settled;        /**< Non-zero while saturation holds the search. */
    double settled_cf;  /**< CF settled on, 1 = dense (0 while searching). */
    size_t n_throughput; /**< Distinct CFs with a recorded T. */
} gcx_gravac_state_t;

/**
 * Create a controller.
 * @param[out] ctl_p Owned by the caller; release with gcx_gravac_destroy().
 * @return GCX_OK, GCX_ERR_INVALID (see gcx_gravac_params_check()),
 *         GCX_ERR_NOMEM.
 */
GCX_API
gcx_status_t gcx_gravac_create(const gcx_gravac_params_t *params,
                               gcx_gravac_t **ctl_p);

/** Release a controller. NULL is allowed. */
GCX_API
void gcx_gravac_destroy(gcx_gravac_t *ctl);

/**
 * Take the decision of one step from norms summed over all ranks, then,
 * when this step closes a window, apply the window rules (which change the
 * thetas of the NEXT step).
 *
 * Gains with ef_sqnorm = 0 are 1 (nothing to lose); gains are clamped to
 * [0, 1] against rounding. O(1) except the saturation check, O(#CFs).
 *
 * @param summed  Norms summed over ranks (see gcx_gravac_norms_t).
 * @param[out] rec_p Decision and trace record, or NULL.
 * @return GCX_OK; GCX_ERR_RANGE (a NaN or infinite norm), GCX_ERR_INVALID
 *         (NULL, a negative value). On error nothing changes.
 */
GCX_API
gcx_status_t gcx_gravac_decide(gcx_gravac_t *ctl,
                               const gcx_gravac_norms_t *summed,
                               gcx_gravac_record_t *rec_p);

/** Current state (for logging and tests). */
GCX_API
gcx_status_t gcx_gravac_get_state(const gcx_gravac_t *ctl,
                                  gcx_gravac_state_t *state_p);

/**
 * Compression throughput of CF @p cf as the saturation check sees it: the
 * mean of its samples in the latest closed window that sent it, or, before
 * a window with it has closed, the mean of the open window's samples.
 * CF 1 is dense SGD.
 * @return GCX_OK, GCX_ERR_NOT_FOUND (no sample for this CF), GCX_ERR_INVALID.
 */
GCX_API
gcx_status_t gcx_gravac_throughput(const gcx_gravac_t *ctl, double cf,
                                   double *throughput_p);

/** Name of a level: "dense", "min", "c", or "?". */
GCX_API
const char *gcx_gravac_level_name(gcx_gravac_level_t level);

/** Name of a policy: "exponential", "geometric", or "?". */
GCX_API
const char *gcx_gravac_policy_name(gcx_gravac_policy_t policy);

/** CSV header matching gcx_gravac_record_format(), without newline. */
GCX_API
const char *gcx_gravac_record_header(void);

/**
 * Format a record as one CSV line (no newline) into buf.
 * @return GCX_OK, GCX_ERR_RANGE (buf too small), GCX_ERR_INVALID.
 */
GCX_API
gcx_status_t gcx_gravac_record_format(const gcx_gravac_record_t *rec,
                                      char *buf, size_t buflen);

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                              */
/* ------------------------------------------------------------------------ */

/**
 * Bytes gcx_gravac_save() writes for @p ctl now (it grows with the number
 * of CFs that have a recorded throughput; at most a few KB). 0 for NULL.
 */
GCX_API
size_t gcx_gravac_save_size(const gcx_gravac_t *ctl);

/**
 * Save the controller's whole state (thetas, smoothed gains, the pending
 * send, the throughput table, the step count) and its parameters into
 * @p buf, in a versioned little-endian layout that does not depend on the
 * host (src/gravac/state.c). A controller restored from it with
 * gcx_gravac_load() takes bit-identical decisions from then on.
 *
 * @param buf       At least gcx_gravac_save_size() bytes.
 * @param len       Bytes available in @p buf.
 * @param[out] written_p Bytes written, or NULL.
 * @return GCX_OK; GCX_ERR_RANGE (@p len too small: nothing written);
 *         GCX_ERR_INVALID (NULL).
 */
GCX_API
gcx_status_t gcx_gravac_save(const gcx_gravac_t *ctl, void *buf, size_t len,
                             size_t *written_p);

/**
 * Restore a state saved by gcx_gravac_save() into @p ctl, which must have
 * been created with the same parameters (nranks included).
 *
 * @return GCX_OK; GCX_ERR_INVALID (NULL, wrong length, not a gcx GraVAC
 *         state, another version, or a value no controller can hold: NaN,
 *         a gain outside [0, 1], a CF below 1 or above theta_max, more CFs
 *         than the table); GCX_ERR_MISMATCH (a well-formed state saved under
 *         other parameters). On error @p ctl is unchanged.
 */
GCX_API
gcx_status_t gcx_gravac_load(gcx_gravac_t *ctl, const void *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Step helper: two-level compression on an error-feedback state            */
/* ------------------------------------------------------------------------ */

/** Opaque workspace: g_min and g_c of one vector, plus borrowed objects. */
typedef struct gcx_gravac_work gcx_gravac_work_t;

/**
 * Create the workspace of one vector. It borrows (does not own) @p fb,
 * @p comp_min and @p comp_c, which must outlive it; comp_min may equal
 * comp_c. Both sparse levels are allocated once, for the initial theta_min
 * of @p ctl (no CF the controller can choose later needs more).
 *
 * @param ctl      Controller the workspace will be used with.
 * @param fb       Error-feedback state of n floats (the residual g_ef).
 * @param comp_min Compressor of the first level (any kind).
 * @param comp_c   Compressor of the second level (any kind).
 * @param[out] work_p Owned by the caller; gcx_gravac_work_destroy().
 * @return GCX_OK, GCX_ERR_INVALID (NULL), GCX_ERR_NOMEM, GCX_ERR_RANGE.
 */
GCX_API
gcx_status_t gcx_gravac_work_create(const gcx_gravac_t *ctl,
                                    gcx_feedback_t *fb,
                                    gcx_compressor_t *comp_min,
                                    gcx_compressor_t *comp_c,
                                    gcx_gravac_work_t **work_p);

/** Release a workspace (not the borrowed objects). NULL is allowed. */
GCX_API
void gcx_gravac_work_destroy(gcx_gravac_work_t *work);

/**
 * Compress the residual in two levels with the controller's current thetas:
 * g_min = C(e, theta_min) (dense input), g_c = C(g_min, theta_s) (sparse
 * input; skipped, g_c = g_min, when theta_s = 1). Both compressors get the
 * controller's step (gcx_compressor_set_step), so randomk draws agree
 * across ranks. Cost: one compression of n floats plus one of nnz(g_min).
 *
 * @param samples_per_s This rank's samples/s of the previous step (0 if
 *                      unknown), copied into the norms.
 * @param[out] norms_p  This rank's norms, to be summed over ranks.
 * @return GCX_OK; errors of gcx_compress_dense / gcx_compress_sparse
 *         (GCX_ERR_RANGE for NaN/Inf in the residual); GCX_ERR_INVALID.
 *         The residual is never written here.
 */
GCX_API
gcx_status_t gcx_gravac_compress(gcx_gravac_t *ctl, gcx_gravac_work_t *work,
                                 double samples_per_s,
                                 gcx_gravac_norms_t *norms_p);

/**
 * The sparse vector to send for @p rec (g_min or g_c), or NULL when the
 * decision is dense (send gcx_feedback_residual()). Owned by the workspace;
 * valid until the next gcx_gravac_compress().
 */
GCX_API
const gcx_sparse_vec_t *gcx_gravac_selected(const gcx_gravac_work_t *work,
                                            const gcx_gravac_record_t *rec);

/**
 * Commit the decision to the residual: e -= sent (sparse levels), or e = 0
 * (dense). Afterwards e_after + sent == e_before exactly.
 * @return GCX_OK; GCX_ERR_INVALID (NULL, no compress since the last commit,
 *         or @p rec is not the decision of the last compress's step).
 */
GCX_API
gcx_status_t gcx_gravac_commit(gcx_gravac_work_t *work,
                               const gcx_gravac_record_t *rec);

/**
 * Sum @p norms over the ranks of @p comm in place (blocking allreduce of
 * 4 doubles). Every rank gets bit-identical sums.
 * @return GCX_OK or the allreduce's error (norms unchanged on error).
 */
GCX_API
gcx_status_t gcx_gravac_allreduce_norms(gcx_comm_t *comm,
                                        gcx_gravac_norms_t *norms);

#ifdef __cplusplus
}
#endif

#endif /* GCX_GRAVAC_H */
