/*
 * test_model.cc - the cost model of the sparse allreduce and auto's
 * choice (src/coll/sparse_allreduce/model.h), single process: predicted
 * times against values worked out by hand from the formulas, the
 * allgather/split crossover, monotonicity in density, size and P, and
 * what auto runs with and without feedback.
 */
#include <gtest/gtest.h>

extern "C" {
#include "coll/sparse_allreduce/model.h"
}

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

const double US = 1e-6;

/*
 * A model of P ranks with k[r] pairs each whose indices spread evenly over
 * [0, span) (span = N: the whole vector): rank r's quantile q is q·span/P.
 * Network: α = 10 us, β = 1 ns/byte (8 Gbit/s), γ = 0 unless set.
 */
struct Model {
    std::vector<size_t>  nnz;
    std::vector<int64_t> quant;
    gcx_sparse_model_t   m;

    Model(int P, size_t N, const std::vector<size_t> &k, double union_est = 0,
          size_t span = 0)
        : nnz(k), quant((size_t)P * (size_t)(P > 1 ? P - 1 : 1))
    {
        std::memset(&m, 0, sizeof(m));
        if (span == 0) {
            span = N;
        }
        m.alpha = 10e-6;
        m.beta  = 1e-9;
        m.gamma = 0;
        m.P     = P;
        m.N     = N;
        for (int r = 0; r < P; ++r) {
            m.nnz_sum += nnz[(size_t)r];
            if (nnz[(size_t)r] > m.nnz_max) {
                m.nnz_max = nnz[(size_t)r];
            }
            for (int q = 1; q < P; ++q) {
                quant[(size_t)r * (size_t)(P - 1) + (size_t)q - 1] =
                    (int64_t)((size_t)q * span / (size_t)P);
            }
        }
        m.nnz          = nnz.data();
        m.quant        = quant.data();
        m.quant_stride = (size_t)(P - 1);
        m.union_est    = union_est;
    }
    /* every rank k pairs */
    Model(int P, size_t N, size_t k, double union_est = 0, size_t span = 0)
        : Model(P, N, std::vector<size_t>((size_t)P, k), union_est, span)
    {
    }
};

double cost(int a, const gcx_sparse_model_t *m)
{
    switch (a) {
    case GCX_SPARSE_A_ALLGATHER:
        return gcx_sparse_cost_allgather(m);
    case GCX_SPARSE_A_RD:
        return gcx_sparse_cost_rd(m);
    case GCX_SPARSE_A_SPLIT:
        return gcx_sparse_cost_split(m);
    default:
        return gcx_sparse_cost_balanced_split(m);
    }
}

const char *name(int a)
{
    static const char *names[] = {"allgather", "recursive_doubling", "split",
                                  "balanced_split"};
    return names[a];
}

} // namespace

/* ---- the pieces ------------------------------------------------------- */

TEST(SparseModel, UnionOfIndependentSupports)
{
    Model x(2, 1000, 100); /* density 10% each */

    EXPECT_DOUBLE_EQ(100.0, gcx_sparse_union_estimate(&x.m, 1));
    EXPECT_NEAR(190.0, gcx_sparse_union_estimate(&x.m, 2), 1e-9); /* 1-.9^2 */
    EXPECT_NEAR(271.0, gcx_sparse_union_estimate(&x.m, 3), 1e-9); /* 1-.9^3 */
    Model full(2, 1000, 1000);
    EXPECT_DOUBLE_EQ(1000.0, gcx_sparse_union_estimate(&full.m, 2));
    Model empty(2, 0, 0);
    EXPECT_DOUBLE_EQ(0.0, gcx_sparse_union_estimate(&empty.m, 2));
}

TEST(SparseModel, UnionFromTheSketchIsLinearInTheRanks)
{
    /* k_avg = 2500; u = (union/k_avg - 1)/(P-1) */
    Model disjoint(4, 1000000, 2500, 10000); /* u = 1 */
    EXPECT_DOUBLE_EQ(2500.0, gcx_sparse_union_estimate(&disjoint.m, 1));
    EXPECT_DOUBLE_EQ(5000.0, gcx_sparse_union_estimate(&disjoint.m, 2));
    EXPECT_DOUBLE_EQ(3750.0, gcx_sparse_union_estimate(&disjoint.m, 1.5));
    EXPECT_DOUBLE_EQ(10000.0, gcx_sparse_union_estimate(&disjoint.m, 4));
    Model same(4, 1000000, 2500, 2500); /* u = 0 */
    EXPECT_DOUBLE_EQ(2500.0, gcx_sparse_union_estimate(&same.m, 4));
    Model part(4, 1000000, 2500, 5500); /* u = 0.4 */
    EXPECT_NEAR(3500.0, gcx_sparse_union_estimate(&part.m, 2), 1e-9);
    EXPECT_NEAR(5500.0, gcx_sparse_union_estimate(&part.m, 4), 1e-9);
    /* u is clamped to [0, 1], the union to N */
    Model over(4, 1000000, 2500, 40000);
    EXPECT_DOUBLE_EQ(10000.0, gcx_sparse_union_estimate(&over.m, 4));
    Model under(4, 1000000, 2500, 1000);
    EXPECT_DOUBLE_EQ(2500.0, gcx_sparse_union_estimate(&under.m, 4));
    Model small(4, 6000, 2500, 10000);
    EXPECT_DOUBLE_EQ(6000.0, gcx_sparse_union_estimate(&small.m, 4));
}

TEST(SparseModel, RankCdfInterpolatesTheQuantiles)
{
    /* P = 2: one quantile; 100 pairs of which 50 below index 200 */
    Model x(2, 1000, 100, 0, 400);

    EXPECT_DOUBLE_EQ(0.0, gcx_sparse_rank_cdf(&x.m, 0, 0));
    EXPECT_DOUBLE_EQ(25.0, gcx_sparse_rank_cdf(&x.m, 0, 100));
    EXPECT_DOUBLE_EQ(50.0, gcx_sparse_rank_cdf(&x.m, 0, 200));
    EXPECT_DOUBLE_EQ(75.0, gcx_sparse_rank_cdf(&x.m, 0, 600));
    EXPECT_DOUBLE_EQ(100.0, gcx_sparse_rank_cdf(&x.m, 0, 1000));
    EXPECT_DOUBLE_EQ(100.0, gcx_sparse_rank_cdf(&x.m, 1, 5000));
}

TEST(SparseModel, EvenAndBalancedRanges)
{
    Model  x(3, 10, 0);
    size_t b[4];

    gcx_sparse_even_bounds(&x.m, b); /* gcx_coll_block: 4 3 3 */
    EXPECT_EQ(0u, b[0]);
    EXPECT_EQ(4u, b[1]);
    EXPECT_EQ(7u, b[2]);
    EXPECT_EQ(10u, b[3]);
    /* no pairs anywhere: balanced falls back to the even ranges */
    gcx_sparse_balanced_bounds(&x.m, b);
    EXPECT_EQ(4u, b[1]);
    EXPECT_EQ(7u, b[2]);

    /* the nnz-weighted mean of the ranks' quantiles */
    Model y(2, 10000, std::vector<size_t>{100, 300});
    y.quant[0] = 1000;
    y.quant[1] = 2000;
    gcx_sparse_balanced_bounds(&y.m, b);
    EXPECT_EQ(0u, b[0]);
    EXPECT_EQ(1750u, b[1]);
    EXPECT_EQ(10000u, b[2]);

    /* kept non-decreasing and within N */
    Model z(3, 1000, 10);
    for (int r = 0; r < 3; ++r) {
        z.quant[(size_t)r * 2]     = 5000;
        z.quant[(size_t)r * 2 + 1] = 300;
    }
    gcx_sparse_balanced_bounds(&z.m, b);
    EXPECT_EQ(1000u, b[1]);
    EXPECT_EQ(1000u, b[2]);
    EXPECT_EQ(1000u, b[3]);
}

/* The cdf by its definition: the first knot j (quantile j, N at j = P)
 * with x below it, scanned linearly (as the model did before its binary
 * search). */
double cdf_by_scan(const gcx_sparse_model_t *m, int r, double x)
{
    const int64_t *q = m->quant + (size_t)r * m->quant_stride;
    double         n = (double)m->nnz[r], x0 = 0, y0 = 0;

    for (int j = 1; j <= m->P; ++j) {
        double x1 = j < m->P ? (double)q[j - 1] : (double)m->N;
        double y1 = j < m->P ? std::floor((double)j * n / m->P) : n;
        if (x < x1) {
            return x1 > x0 ? y0 + (y1 - y0) * (x - x0) / (x1 - x0) : y0;
        }
        x0 = x1;
        y0 = y1;
    }
    return n;
}

/* P ranks whose quantiles are random, sorted, repeats and ends included. */
Model random_model(int P, size_t N, unsigned seed)
{
    std::vector<size_t> k((size_t)P);
    for (int r = 0; r < P; ++r) {
        seed = seed * 1103515245u + 12345u;
        k[(size_t)r] = (seed >> 8) % 5000;
    }
    Model x(P, N, k, 0.0);
    for (int r = 0; r < P && P > 1; ++r) {
        int64_t *q = &x.quant[(size_t)r * (size_t)(P - 1)];
        for (int j = 0; j < P - 1; ++j) {
            seed = seed * 1103515245u + 12345u;
            q[j] = (int64_t)((seed >> 4) % (N + 1));
        }
        std::sort(q, q + P - 1);
        if (r % 3 == 0) {
            q[0] = 0;
            q[P - 2] = (int64_t)N;
        }
    }
    x.m.gamma = 10e-9;
    return x;
}

TEST(SparseModel, RankCdfSearchMatchesTheScan)
{
    for (int P : {1, 2, 3, 7, 64}) {
        Model x = random_model(P, 100000, (unsigned)P);
        for (int r = 0; r < P; ++r) {
            for (double v : {0.0, 1.0, 77.5, 5000.0, 49999.0, 99999.0,
                             100000.0, 200000.0}) {
                EXPECT_EQ(cdf_by_scan(&x.m, r, v),
                          gcx_sparse_rank_cdf(&x.m, r, v))
                    << "P " << P << " rank " << r << " x " << v;
            }
            for (int j = 0; j + 1 < P; ++j) { /* on every knot */
                double v = (double)x.quant[(size_t)r * (size_t)(P - 1) + j];
                EXPECT_EQ(cdf_by_scan(&x.m, r, v),
                          gcx_sparse_rank_cdf(&x.m, r, v));
            }
        }
    }
}

/* The split costs compute their ranges bound by bound (no array of P+1):
 * the same as over the arrays gcx_sparse_*_bounds fill, bit for bit; also
 * past the 1000 ranks the stack arrays once capped them at. */
TEST(SparseModel, SplitCostsWithoutRangeArrays)
{
    for (int P : {1, 2, 5, 33, 1100}) {
        Model               x = random_model(P, 10000000, 7u * (unsigned)P);
        std::vector<size_t> b((size_t)P + 1);

        gcx_sparse_even_bounds(&x.m, b.data());
        EXPECT_EQ(gcx_sparse_cost_split_ranges(&x.m, b.data()),
                  gcx_sparse_cost_split(&x.m)) << "P " << P;
        gcx_sparse_balanced_bounds(&x.m, b.data());
        for (int q = 0; q < P; ++q) {
            ASSERT_LE(b[(size_t)q], b[(size_t)q + 1]);
        }
        EXPECT_EQ(10000000u, b[(size_t)P]);
        EXPECT_EQ(gcx_sparse_cost_split_ranges(&x.m, b.data()),
                  gcx_sparse_cost_balanced_split(&x.m)) << "P " << P;
        if (P > 1) { /* one rank sends nothing */
            EXPECT_GT(gcx_sparse_cost_split(&x.m), 0);
        }
    }
}

/* ---- predicted times against the formulas, by hand ------------------- */

TEST(SparseModel, AllgatherByHand)
{
    /* 2(P-1)α + 8(S - nnz_min)β + γ·K·ceil(log2 P):
     * 60 us + 8·9000 ns + 10 ns·10000·2 = 60 + 72 + 200 us */
    Model x(4, 1000000, std::vector<size_t>{1000, 2000, 3000, 4000}, 10000);
    x.m.gamma = 10e-9;
    EXPECT_NEAR(332 * US, gcx_sparse_cost_allgather(&x.m), 1e-12);
    /* P = 3: ceil(log2 3) = 2 merge passes; 40 + 8·2000 ns + 10·3000·2 ns */
    Model y(3, 1000000, 1000, 3000);
    y.m.gamma = 10e-9;
    EXPECT_NEAR(116 * US, gcx_sparse_cost_allgather(&y.m), 1e-12);
}

TEST(SparseModel, RecursiveDoublingByHand)
{
    /* P = 4, disjoint (U(r) = 2500 r): rounds j = 1, 2:
     * 2α + 8β(U1 + U2) + γ(U2 + U4) = 20 + 60 + 150 us */
    Model x(4, 1000000, 2500, 10000);
    x.m.gamma = 10e-9;
    EXPECT_NEAR(230 * US, gcx_sparse_cost_rd(&x.m), 1e-12);
    /* P = 3 (p2 = 2, rem = 1): fold-in α + 8·nnz_max·β = 30 us, one round
     * over 1.5 ranks α + 8·3750β + γ·U3 = 10 + 30 + 75 us, hand-back
     * α + 8·U3·β = 70 us */
    Model y(3, 1000000, 2500, 7500);
    y.m.gamma = 10e-9;
    EXPECT_NEAR(215 * US, gcx_sparse_cost_rd(&y.m), 1e-12);
    /* dense output only: a message costs at most the dense 4N bytes;
     * N = 3000, U = 1000, 2000, 3000: 2α + (8000 + min(16000, 12000))β */
    Model z(4, 3000, 1000, 4000);
    EXPECT_NEAR(44 * US, gcx_sparse_cost_rd(&z.m), 1e-12);
    z.m.dense_only = 1;
    EXPECT_NEAR(40 * US, gcx_sparse_cost_rd(&z.m), 1e-12);
}

TEST(SparseModel, SplitByHand)
{
    /* P = 4, 2500 pairs each spread evenly, disjoint (K = 10000): every
     * owner receives L = 2500 pairs, K_j = 2500:
     * (P-1)α + 8β·max(nnz_max, L)·3/4 = 30 + 15 us; merge γ·K_j·2 = 50;
     * 3(P-1)α + (P-1)·8·K_j·β = 90 + 60 us */
    Model x(4, 1000000, 2500, 10000);
    x.m.gamma = 10e-9;
    EXPECT_NEAR(245 * US, gcx_sparse_cost_split(&x.m), 1e-12);
    EXPECT_NEAR(245 * US, gcx_sparse_cost_balanced_split(&x.m), 1e-12);

    /* the same pairs all in [0, N/4): by its quantiles (at q·N/16) each
     * rank has 3/4 of its pairs below 3N/16 and the last 1/4 spread over
     * [3N/16, N), so owner 0 of the even ranges gets
     * L = 4·(1875 + 625·(N/16)/(13N/16)) = 7500 + 2500/13 pairs:
     * 120 us of latency + L·(6β + 24β + 2γ) = 120 us + L·50 ns */
    Model c(4, 1000000, 2500, 10000, 250000);
    c.m.gamma = 10e-9;
    EXPECT_NEAR(120 * US + (7500 + 2500.0 / 13) * 50e-9,
                gcx_sparse_cost_split(&c.m), 1e-12);
    /* balanced ranges (q·N/16) give every owner 2500 again */
    EXPECT_NEAR(245 * US, gcx_sparse_cost_balanced_split(&c.m), 1e-12);

    /* top-k: K <- k for the spread, + 4(ceil(log2 P) + 2)(α + 2048Pβ) */
    Model t(4, 1000000, 2500, 10000);
    t.m.gamma = 10e-9;
    t.m.topk  = 1000; /* K_j = 250 */
    EXPECT_NEAR((30 + 15 + 5 + 90 + 6) * US + 16 * (10 * US + 8192e-9),
                gcx_sparse_cost_split(&t.m), 1e-12);

    /* dense output only and 8K >= 4N: the allgather spreads dense blocks,
     * (P-1)·4·(N/P)·β: N = 20000, K = 10000 -> 3·4·5000 ns */
    Model d(4, 20000, 2500, 10000);
    d.m.dense_only = 1;
    EXPECT_NEAR((30 + 15 + 90 + 60) * US, gcx_sparse_cost_split(&d.m), 1e-12);
}

TEST(SparseModel, AllgatherSplitCrossoverAtTheDensityTheFormulasGive)
{
    /* Identical supports (u = 0, K = k), P = 4, γ = 0: allgather
     * 6α + 24kβ, split 12α + 12kβ: equal at k = α/(2β) = 5000 pairs, a
     * density of 0.5% at N = 10^6. */
    for (size_t k : {4000u, 4996u, 5000u, 5004u, 6000u}) {
        Model  x(4, 1000000, k, (double)k);
        double ag = gcx_sparse_cost_allgather(&x.m);
        double sp = gcx_sparse_cost_split(&x.m);

        EXPECT_NEAR(60 * US + 24e-9 * (double)k, ag, 1e-12) << k;
        EXPECT_NEAR(120 * US + 12e-9 * (double)k, sp, 1e-12) << k;
        if (k < 5000) {
            EXPECT_LT(ag, sp) << k;
        } else if (k > 5000) {
            EXPECT_GT(ag, sp) << k;
        } else {
            EXPECT_NEAR(ag, sp, 1e-12);
        }
    }
}

/* ---- monotonicity ------------------------------------------------------ */

TEST(SparseModel, MoreDensityCostsMore)
{
    for (int dense_only = 0; dense_only < 2; ++dense_only) {
        for (int a = 0; a < GCX_SPARSE_NALGOS; ++a) {
            double prev = 0;

            for (size_t k = 10; k <= 500000; k *= 2) {
                Model x(4, 1000000, k);
                x.m.gamma      = 10e-9;
                x.m.dense_only = dense_only;
                double c       = cost(a, &x.m);
                /* with a dense form the cost may stop growing */
                if (dense_only) {
                    EXPECT_GE(c, prev) << name(a) << " k " << k;
                } else {
                    EXPECT_GT(c, prev) << name(a) << " k " << k;
                }
                prev = c;
            }
        }
    }
}

TEST(SparseModel, LargerVectorsCostMore)
{
    for (int a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        double prev = 0;

        for (size_t N = 1000; N <= 10000000; N *= 10) { /* density 1% */
            Model x(4, N, N / 100);
            x.m.gamma = 10e-9;
            double c  = cost(a, &x.m);
            EXPECT_GT(c, prev) << name(a) << " N " << N;
            prev = c;
        }
    }
}

TEST(SparseModel, MoreRanksCostMore)
{
    for (int a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        double prev = 0;

        for (int P = 2; P <= 16; ++P) {
            /* recursive doubling charges a non-power of two two extra
             * steps; compare it across powers of two */
            if (a == GCX_SPARSE_A_RD && (P & (P - 1)) != 0) {
                continue;
            }
            Model x(P, 1000000, 1000);
            x.m.gamma = 10e-9;
            double c  = cost(a, &x.m);
            EXPECT_GT(c, prev) << name(a) << " P " << P;
            prev = c;
        }
    }
}

TEST(SparseModel, SlowerNetworkCostsMore)
{
    for (int a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        Model  x(5, 1000000, 3000);
        double c0 = cost(a, &x.m);

        x.m.alpha *= 2;
        double c1 = cost(a, &x.m);
        EXPECT_GT(c1, c0) << name(a);
        x.m.beta *= 2;
        double c2 = cost(a, &x.m);
        EXPECT_GT(c2, c1) << name(a);
        x.m.gamma = 10e-9;
        EXPECT_GT(cost(a, &x.m), c2) << name(a);
    }
}

/* ---- auto's choice ------------------------------------------------------ */

namespace {

gcx_sparse_choice_t choose(const Model &x, const gcx_sparse_fb_t *fb)
{
    gcx_sparse_choice_t c;

    gcx_sparse_choose(&x.m, fb, &c);
    return c;
}

} // namespace

TEST(SparseChoice, ModelAloneTakesTheCheapest)
{
    /* identical supports, 0.5%: rd 2α + 16kβ = 100 us beats 180 us */
    Model same(4, 1000000, 5000, 5000);
    auto  c = choose(same, NULL);
    EXPECT_EQ(GCX_SPARSE_A_RD, c.best);
    EXPECT_EQ(0, c.explore);
    EXPECT_NEAR(100 * US, c.model[GCX_SPARSE_A_RD], 1e-12);
    for (int a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        EXPECT_EQ(c.model[a], c.cost[a]); /* no feedback: no correction */
        EXPECT_EQ(0.0, c.ratio[a]);
        EXPECT_EQ(cost(a, &same.m), c.model[a]) << name(a);
        EXPECT_EQ(gcx_sparse_fb_bucket(c.model[a]), c.bucket[a]);
    }

    /* P = 3, disjoint, 0.1%: rd pays for the odd rank (74 us), split for
     * its latency (~101 us); allgather 4α + 16kβ = 56 us */
    Model odd(3, 1000000, 1000, 3000);
    c = choose(odd, NULL);
    EXPECT_EQ(GCX_SPARSE_A_ALLGATHER, c.best);
    EXPECT_NEAR(56 * US, c.model[GCX_SPARSE_A_ALLGATHER], 1e-12);
    EXPECT_NEAR(74 * US, c.model[GCX_SPARSE_A_RD], 1e-12);

    /* 25% density, dense output only: the dense allgather of split
     * (P-1)·4N/P·β; split and balanced split tie on even supports and the
     * first row wins */
    Model dense(4, 1000000, 250000);
    dense.m.dense_only = 1;
    c = choose(dense, NULL);
    EXPECT_EQ(GCX_SPARSE_A_SPLIT, c.best);
    EXPECT_EQ(c.model[GCX_SPARSE_A_SPLIT],
              c.model[GCX_SPARSE_A_BALANCED_SPLIT]);
    EXPECT_NEAR(4620 * US, c.model[GCX_SPARSE_A_SPLIT], 1e-9);

    /* the same 2% on every rank, all in the first quarter of the
     * vector: balanced ranges share the work out, even ones do not */
    Model clustered(4, 1000000, 20000, 20000, 250000);
    clustered.m.gamma = 10e-9;
    c = choose(clustered, NULL);
    EXPECT_EQ(GCX_SPARSE_A_BALANCED_SPLIT, c.best);
    EXPECT_NEAR(460 * US, c.model[GCX_SPARSE_A_BALANCED_SPLIT], 1e-12);
    EXPECT_NEAR(740 * US, c.model[GCX_SPARSE_A_RD], 1e-12);
}

TEST(SparseChoice, FeedbackScalesTheModel)
{
    /* identical supports, k = 4800: allgather 6α + 24kβ = 175.2 us, rd
     * 2α + 16kβ = 96.8, split and balanced split 12α + 12kβ = 177.6
     * (all in bucket 0) */
    Model           x(4, 1000000, 4800, 4800);
    gcx_sparse_fb_t fb;
    std::memset(&fb, 0, sizeof(fb));

    /* an empty table changes nothing */
    auto c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_RD, c.best);
    EXPECT_EQ(0, c.explore);
    for (int a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        EXPECT_EQ(0, c.bucket[a]);
        EXPECT_EQ(0, c.count[a]);
    }

    /* everyone measured; rd at 2x: 193.6 us, allgather runs */
    for (int a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        for (int i = 0; i < GCX_SPARSE_FB_SAMPLES; ++i) {
            gcx_sparse_fb_insert(&fb, (size_t)a, 0,
                                 a == GCX_SPARSE_A_RD ? 2.0 : 1.0);
        }
    }
    c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_ALLGATHER, c.best);
    EXPECT_EQ(0, c.explore);
    EXPECT_DOUBLE_EQ(2.0, c.ratio[GCX_SPARSE_A_RD]);
    EXPECT_NEAR(193.6 * US, c.cost[GCX_SPARSE_A_RD], 1e-12);
    EXPECT_EQ(GCX_SPARSE_FB_SAMPLES, c.count[GCX_SPARSE_A_RD]);

    /* without feedback (named calls, GCX_SPARSE_FEEDBACK=0) the table is
     * not read */
    c = choose(x, NULL);
    EXPECT_EQ(GCX_SPARSE_A_RD, c.best);

    /* a ratio of another bucket does not apply */
    gcx_sparse_fb_t other;
    std::memset(&other, 0, sizeof(other));
    for (int i = 0; i < 3; ++i) {
        gcx_sparse_fb_insert(&other, GCX_SPARSE_A_RD, 3, 5.0);
    }
    c = choose(x, &other);
    EXPECT_EQ(GCX_SPARSE_A_RD, c.best);
    EXPECT_EQ(0.0, c.ratio[GCX_SPARSE_A_RD]);
}

TEST(SparseChoice, ContendersWithinExploreGetTheirRecords)
{
    /* allgather 175.2, rd 96.8, split and balanced split 177.6 us */
    Model           x(4, 1000000, 4800, 4800);
    gcx_sparse_fb_t fb;
    std::memset(&fb, 0, sizeof(fb));

    /* rd measured at 1.0: 96.8 us; the others are beyond 1.5x of it */
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_RD, 0, 1.0);
    auto c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_RD, c.best);
    EXPECT_EQ(0, c.explore);

    /* rd at 1.3x: 125.84 us, and 177.6 <= 1.5·125.84: the cheapest
     * contender without records runs (allgather) */
    std::memset(&fb, 0, sizeof(fb));
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_RD, 0, 1.3);
    c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_ALLGATHER, c.best);
    EXPECT_EQ(1, c.explore);

    /* one record is not enough: GCX_SPARSE_FB_SAMPLES (2) */
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_ALLGATHER, 0, 1.0);
    c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_ALLGATHER, c.best);
    EXPECT_EQ(1, c.explore);
    EXPECT_EQ(1, c.count[GCX_SPARSE_A_ALLGATHER]);

    /* with two, the next contender (split and balanced split tie: the
     * first row) */
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_ALLGATHER, 0, 1.0);
    c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_SPLIT, c.best);
    EXPECT_EQ(1, c.explore);

    /* a contender measured cheaper than the rest is explored first */
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_BALANCED_SPLIT, 0, 0.9);
    c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_BALANCED_SPLIT, c.best);
    EXPECT_EQ(1, c.explore);

    /* everyone has its records: the cheapest corrected time again */
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_BALANCED_SPLIT, 0, 0.9);
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_SPLIT, 0, 1.0);
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_SPLIT, 0, 1.0);
    c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_RD, c.best); /* 125.84 < 159.84 < 175.2 */
    EXPECT_EQ(0, c.explore);

    /* nothing is explored while the cheapest itself is unmeasured */
    std::memset(&fb, 0, sizeof(fb));
    gcx_sparse_fb_insert(&fb, GCX_SPARSE_A_SPLIT, 0, 1.0);
    c = choose(x, &fb);
    EXPECT_EQ(GCX_SPARSE_A_RD, c.best);
    EXPECT_EQ(0, c.explore);
}
