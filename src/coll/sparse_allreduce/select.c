/*
 * select.c - auto's decision: the cost model's formulas and the choice of
 * the algorithm that runs a call.
 *
 * Idea: each algorithm's time is predicted from the exchanged sizes and
 * the network model (α, β, γ: calibrate.c) by the formulas below (each
 * algorithm's file explains its own); with feedback each prediction is
 * scaled by the algorithm's measured ratio (feedback.c) and the cheapest
 * runs, except that a close contender with too few records of its own runs
 * first, to be measured. The formulas and the choice are pure functions of
 * a gcx_sparse_model_t (model.h), which a task fills from what every rank
 * holds alike, so every rank picks the same algorithm.
 * Cost: one prediction per algorithm per call, O(P^2 log P) for the split
 * variants (each owner's load from every rank's quantiles, a binary search
 * each) and no memory beyond the task's; no communication.
 */
#include "sparse_allreduce.h"

#include "base/config.h"

#include <math.h>
#include <stdio.h>

const gcx_config_value_t gcx_sparse_algo_names[] = {
    [GCX_SPARSE_ALGO_AUTO] =
        {GCX_SPARSE_ALGO_AUTO, "auto",
         "the cheapest by the alpha-beta model, corrected by feedback"},
    [GCX_SPARSE_ALGO_ALLGATHER] =
        {GCX_SPARSE_ALGO_ALLGATHER, "allgather",
         "allgatherv of every rank's pairs, local merge (baseline)"},
    [GCX_SPARSE_ALGO_RECURSIVE_DOUBLING] =
        {GCX_SPARSE_ALGO_RECURSIVE_DOUBLING, "recursive_doubling",
         "log2(P) rounds of swap + sorted merge-sum, dense on fill-in"},
    [GCX_SPARSE_ALGO_SPLIT] =
        {GCX_SPARSE_ALGO_SPLIT, "split",
         "sparse reduce-scatter over N/P index ranges + sparse or dense "
         "allgather"},
    [GCX_SPARSE_ALGO_BALANCED_SPLIT] =
        {GCX_SPARSE_ALGO_BALANCED_SPLIT, "balanced_split",
         "split with ranges from averaged local index quantiles"},
    {0, NULL, NULL},
};

/* The algorithm table: a new algorithm = one file + one row here, one in
 * gcx_sparse_algo_names (and a GCX_SPARSE_A_* index in feedback.h). */
const gcx_sparse_algo_t *const gcx_sparse_algos[GCX_SPARSE_NALGOS] = {
    [GCX_SPARSE_A_ALLGATHER]      = &gcx_sparse_algo_allgather,
    [GCX_SPARSE_A_RD]             = &gcx_sparse_algo_rd,
    [GCX_SPARSE_A_SPLIT]          = &gcx_sparse_algo_split,
    [GCX_SPARSE_A_BALANCED_SPLIT] = &gcx_sparse_algo_balanced_split,
};

void gcx_sparse_task_model(const gcx_sparse_task_t *t, gcx_sparse_model_t *m)
{
    m->alpha        = t->alpha;
    m->beta         = t->beta;
    m->gamma        = t->gamma;
    m->P            = t->super.comm->size;
    m->N            = t->N;
    m->nnz          = t->nnz;
    m->nnz_sum      = t->nnz_sum;
    m->nnz_max      = t->nnz_max;
    m->quant        = t->info + 2;
    m->quant_stride = t->info_len;
    m->union_est    = t->union_est;
    m->topk         = t->topk;
    m->dense_only   = t->dense_only;
}

/* ---- the cost model (model.h) -------------------------------------------- */

/* Exact for supports that share a fixed part and draw the rest at random
 * (u = the fraction each rank adds). */
double gcx_sparse_union_estimate(const gcx_sparse_model_t *m, double nranks)
{
    double d, kavg, u, K;
    int    P = m->P;

    if (m->N == 0) {
        return 0;
    }
    if (m->union_est > 0 && P > 1 && m->nnz_sum > 0) {
        kavg = (double)m->nnz_sum / P;
        u    = (m->union_est / kavg - 1.0) / (P - 1);
        u    = u < 0 ? 0 : u > 1 ? 1 : u;
        K    = kavg * (1.0 + (nranks - 1.0) * u);
        return K < (double)m->N ? K : (double)m->N;
    }
    d = (double)m->nnz_sum / ((double)P * (double)m->N);
    if (d >= 1) {
        return (double)m->N;
    }
    return (double)m->N * (1.0 - pow(1.0 - d, nranks));
}

/* The cdf's knot j = 1..P: quantile j (x_P = N); 0 at j = 0. */
static double gcx_sparse_knot(const gcx_sparse_model_t *m, const int64_t *q,
                              int j)
{
    return j == 0 ? 0 : j < m->P ? (double)q[j - 1] : (double)m->N;
}

/* The segment that holds x is the first knot j with x < x_j: a binary
 * search, as the knots are in order (gcx_sparse_info_parse checks the
 * exchanged quantiles), O(log P) per call. */
double gcx_sparse_rank_cdf(const gcx_sparse_model_t *m, int r, double x)
{
    int            P = m->P, lo = 1, hi = P + 1, mid, j;
    const int64_t *q = m->quant + (size_t)r * m->quant_stride;
    double         n = (double)m->nnz[r], x0, y0, x1, y1;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (x < gcx_sparse_knot(m, q, mid)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    j = lo;
    if (j > P) {
        return n;
    }
    x0 = gcx_sparse_knot(m, q, j - 1);
    y0 = j > 1 ? floor((double)(j - 1) * n / P) : 0;
    x1 = gcx_sparse_knot(m, q, j);
    y1 = j < P ? floor((double)j * n / P) : n;
    return x1 > x0 ? y0 + (y1 - y0) * (x - x0) / (x1 - x0) : y0;
}

/* The baseline: two allgatherv rings carry every other rank's pairs, then
 * the tree merge of the P lists: ceil(log2 P) passes over ~K pairs. */
double gcx_sparse_cost_allgather(const gcx_sparse_model_t *m)
{
    int    P = m->P, r;
    size_t nmin = m->nnz_max;

    for (r = 0; r < P; ++r) {
        nmin = m->nnz[r] < nmin ? m->nnz[r] : nmin;
    }
    return 2.0 * (P - 1) * m->alpha +
           8.0 * (double)(m->nnz_sum - nmin) * m->beta +
           m->gamma * gcx_sparse_union_estimate(m, P) *
               ceil(log2((double)P));
}

/* log2(p2) swap-and-merge rounds over lists that grow with the union (a
 * dense vector once that is smaller, when only the dense sum is wanted),
 * plus a fold-in and a hand-back when P is not a power of two. */
double gcx_sparse_cost_rd(const gcx_sparse_model_t *m)
{
    int    P = m->P, p2, rem, vrank, j;
    double cost = 0, msg, dense = 4.0 * (double)m->N, ranks;

    gcx_coll_rd_layout(P, 0, &p2, &rem, &vrank);
    if (rem > 0) {
        cost += m->alpha + 8.0 * (double)m->nnz_max * m->beta;
    }
    for (j = 1; j < p2; j <<= 1) { /* each list covers P·j/p2 ranks */
        ranks = (double)P * j / p2;
        msg   = 8.0 * gcx_sparse_union_estimate(m, ranks);
        if (m->dense_only && msg > dense) {
            msg = dense;
        }
        /* + the merge of the two lists, whose output covers twice the ranks */
        cost += m->alpha + msg * m->beta +
                m->gamma * gcx_sparse_union_estimate(m, 2 * ranks);
    }
    if (rem > 0) {
        msg = 8.0 * gcx_sparse_union_estimate(m, P);
        if (m->dense_only && msg > dense) {
            msg = dense;
        }
        cost += m->alpha + msg * m->beta;
    }
    return cost;
}

/* Where a split cost's ranges come from: an array of P + 1 bounds, or
 * the even or balanced ones computed bound by bound (no array per
 * prediction). */
enum {
    GCX_SPARSE_RANGES_ARRAY = 0,
    GCX_SPARSE_RANGES_EVEN,
    GCX_SPARSE_RANGES_BALANCED,
};

static size_t gcx_sparse_bound(const gcx_sparse_model_t *m, int ranges,
                               const size_t *bounds, int q, size_t prev)
{
    switch (ranges) {
    case GCX_SPARSE_RANGES_ARRAY:
        return bounds[q];
    case GCX_SPARSE_RANGES_EVEN:
        return gcx_sparse_even_bound(m, q);
    default:
        return gcx_sparse_balanced_bound(m, q, prev);
    }
}

/* The split engine for the given ranges: sparse reduce-scatter, each
 * owner's tree merge, the sizes ring and the sparse (or dense) allgather;
 * with top-k its 4 histogram allreduces. Each owner's load from every
 * rank's cdf: O(P^2 log P). */
static double gcx_sparse_cost_ranges(const gcx_sparse_model_t *m, int ranges,
                                     const size_t *bounds)
{
    int    P = m->P, r, j;
    double load_max = 0, send_max, kj_max = 0, width_max = 0, K, a = m->alpha;
    double cost;
    size_t lo, hi = 0;

    K = gcx_sparse_union_estimate(m, P);
    if (m->topk > 0 && (double)m->topk < K) {
        K = (double)m->topk;
    }
    lo = gcx_sparse_bound(m, ranges, bounds, 0, 0);
    for (j = 0; j < P; ++j, lo = hi) {
        double load = 0, w;

        hi = gcx_sparse_bound(m, ranges, bounds, j + 1, lo);
        w  = (double)(hi - lo);
        for (r = 0; r < P; ++r) {
            load += gcx_sparse_rank_cdf(m, r, (double)hi) -
                    gcx_sparse_rank_cdf(m, r, (double)lo);
        }
        load_max = load > load_max ? load : load_max;
        if (m->nnz_sum > 0 && K * load / (double)m->nnz_sum > kj_max) {
            kj_max = K * load / (double)m->nnz_sum;
        }
        width_max = w > width_max ? w : width_max;
    }
    send_max = (double)m->nnz_max * (P - 1) / P;
    cost = (P - 1) * a + 8.0 * m->beta *
                             fmax(send_max, load_max * (P - 1) / P);
    /* the owner's tree merge of the P slices of its range */
    cost += m->gamma * kj_max * ceil(log2((double)P));
    if (m->dense_only && 8.0 * K >= 4.0 * (double)m->N) {
        cost += 3 * (P - 1) * a + m->beta * (P - 1) * 4.0 * width_max;
    } else {
        cost += 3 * (P - 1) * a + m->beta * (P - 1) * 8.0 * kj_max;
    }
    if (m->topk > 0) {
        cost += 4 * (ceil(log2(P)) + 2) * (a + m->beta * P * 2048.0);
    }
    return cost;
}

double gcx_sparse_cost_split_ranges(const gcx_sparse_model_t *m,
                                    const size_t *bounds)
{
    return gcx_sparse_cost_ranges(m, GCX_SPARSE_RANGES_ARRAY, bounds);
}

double gcx_sparse_cost_split(const gcx_sparse_model_t *m)
{
    return gcx_sparse_cost_ranges(m, GCX_SPARSE_RANGES_EVEN, NULL);
}

double gcx_sparse_cost_balanced_split(const gcx_sparse_model_t *m)
{
    return gcx_sparse_cost_ranges(m, GCX_SPARSE_RANGES_BALANCED, NULL);
}

/* ---- the choice ---------------------------------------------------------- */

/*
 * Exploring measures an algorithm the model overrates too, once per expiry
 * period, and one slow first call does not rule a contender out (at 0.01%
 * on the emulated cluster a single allgather call in slow start left auto
 * on recursive doubling, 1.35-1.44 ms against allgather's 1.13-1.16).
 */
void gcx_sparse_choose(const gcx_sparse_model_t *m, const gcx_sparse_fb_t *fb,
                       gcx_sparse_choice_t *c)
{
    int i, best = 0, explore = -1;

    for (i = 0; i < GCX_SPARSE_NALGOS; ++i) {
        c->model[i]  = gcx_sparse_algos[i]->cost(m);
        c->bucket[i] = gcx_sparse_fb_bucket(c->model[i]);
        c->ratio[i]  = 0;
        c->count[i]  = 0;
        if (fb != NULL) {
            c->count[i] = gcx_sparse_fb_count(fb, (size_t)i, c->bucket[i]);
            c->ratio[i] = gcx_sparse_fb_ratio(fb, (size_t)i, c->bucket[i]);
        }
        c->cost[i] = c->ratio[i] > 0 ? c->model[i] * c->ratio[i] : c->model[i];
        if (c->cost[i] < c->cost[best]) {
            best = i;
        }
    }
    for (i = 0; fb != NULL && c->ratio[best] > 0 && i < GCX_SPARSE_NALGOS;
         ++i) {
        if (i != best && c->count[i] < GCX_SPARSE_FB_SAMPLES &&
            c->cost[i] <= GCX_SPARSE_FB_EXPLORE * c->cost[best] &&
            (explore < 0 || c->cost[i] < c->cost[explore])) {
            explore = i;
        }
    }
    c->explore = explore >= 0;
    c->best    = explore >= 0 ? explore : best;
}

/* ---- the task's side ----------------------------------------------------- */

const gcx_sparse_algo_t *gcx_sparse_find(int id)
{
    size_t i;

    for (i = 0; i < GCX_SPARSE_NALGOS; ++i) {
        if (gcx_sparse_algos[i]->id == id) {
            return gcx_sparse_algos[i];
        }
    }
    return gcx_sparse_algos[0];
}

/* The info line of a selection: every algorithm's corrected time. */
static void gcx_sparse_log_choice(const gcx_sparse_task_t *t,
                                  const gcx_sparse_choice_t *c)
{
    char   line[640], note[32];
    size_t i, used = 0;

    for (i = 0; i < GCX_SPARSE_NALGOS; ++i) {
        note[0] = '\0';
        if (c->ratio[i] > 0) {
            snprintf(note, sizeof(note), " (x%.2f measured)",
                     c->ratio[i]);
        }
        used += (size_t)snprintf(line + used, sizeof(line) - used,
                                 "%s%s %.3f ms%s", i ? ", " : "",
                                 gcx_sparse_algo_names[gcx_sparse_algos[i]->id].name, c->cost[i] * 1e3,
                                 note);
        if (used >= sizeof(line)) {
            used = sizeof(line) - 1;
        }
    }
    gcx_info("sparse allreduce #%u: N %zu, P %d, nnz sum %zu max %zu, topk "
             "%zu, alpha %.1f us, beta %.3f Gbit/s, merge %.1f ns/pair -> %s%s "
             "(model: %s)",
             t->super.seq, t->N, t->super.comm->size, t->nnz_sum, t->nnz_max,
             t->topk, t->alpha * 1e6, 8.0 / t->beta / 1e9, t->gamma * 1e9,
             gcx_sparse_algo_names[gcx_sparse_algos[c->best]->id].name,
             c->explore ? " (to measure it)" : "", line);
}

/* The choice for a task: from what every rank holds alike; the feedback
 * table only for auto calls with GCX_SPARSE_FEEDBACK. */
const gcx_sparse_algo_t *gcx_sparse_select(gcx_sparse_task_t *t)
{
    const gcx_sparse_comm_state_t *e = gcx_sparse_state(t->super.comm);
    gcx_sparse_model_t             m;
    gcx_sparse_choice_t            c;

    gcx_sparse_task_model(t, &m);
    gcx_sparse_choose(&m, gcx_sparse_feedback_on(t) ? &e->fb : NULL, &c);
    t->fb_algo   = c.best + 1;
    t->fb_bucket = c.bucket[c.best];
    t->fb_model  = c.model[c.best];
    if (GCX_LOG_INFO <= gcx_log_level()) { /* not on the hot path */
        gcx_sparse_log_choice(t, &c);
    }
    return gcx_sparse_algos[c.best];
}

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_entry_t gcx_sparse_config_rows[] = {
    {"SPARSE_ALGO", GCX_CONFIG_ENUM, "auto",
     "Sparse allreduce algorithm; auto: the cheapest by the alpha-beta model "
     "(GCX_NET_LATENCY_US, GCX_NET_BANDWIDTH_GBPS) for N, P and the ranks' "
     "nnz",
     offsetof(struct gcx_config, sparse_algo), 0, 0, gcx_sparse_algo_names},
    {"SPARSE_FEEDBACK", GCX_CONFIG_BOOL, "y",
     "Sparse allreduce auto: scale each algorithm's modelled time by "
     "measured/modelled of its earlier calls of similar cost on the "
     "communicator (agreed by every rank); n: the model alone",
     offsetof(struct gcx_config, sparse_feedback), 0, 0, NULL},
    {"NET_LATENCY_US", GCX_CONFIG_DOUBLE, "0",
     "Network latency alpha (microseconds) for cost models; 0: measured "
     "at the first sparse allreduce that needs it",
     offsetof(struct gcx_config, net_latency_us), 0, 1e7, NULL},
    {"NET_BANDWIDTH_GBPS", GCX_CONFIG_DOUBLE, "0",
     "Per-link bandwidth 1/beta (Gbit/s) for cost models; 0: measured at "
     "the first sparse allreduce that needs it",
     offsetof(struct gcx_config, net_bandwidth_gbps), 0, 1e6, NULL},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_COLL, "coll/sparse_allreduce",
                    gcx_sparse_config_rows)
