/*
 * test_stream.cc - streaming decode as the coded gather uses it: arrivals
 * one at a time in random order, the coefficient of each sender on arrival
 * (FR, UNCODED, WEIGHTED), the decodable predicate after each arrival, and
 * the used set reproducing the applied coefficients.
 */
#include "coding_test_util.h"

using namespace gcxtest;

namespace
{

constexpr size_t kLen = 257;

struct Round {
    uint64_t arrived = 0, used = 0;
    int complete_at = -1; /* arrivals when decodable first held */
    std::vector<double> applied;
    std::vector<float> acc;
};

/* Feed the workers in `order` to a streaming root; messages are the exact
 * float encodings of the given partition gradients. */
Round run_round(gcx_code_t *code, const std::vector<int> &order,
                const std::vector<std::vector<float>> &msgs)
{
    int n = gcx_code_workers(code);
    Round r;
    r.applied.assign(n, 0.0);
    r.acc.assign(kLen, 0.0f);
    for (size_t k = 0; k < order.size(); k++) {
        int w = order[k], known = -1, dec = -1;
        double coeff = -1;
        EXPECT_EQ(
            gcx_code_arrival_coeff(code, ws(r.arrived), w, &known, &coeff),
            GCX_OK);
        EXPECT_EQ(known, 1);
        EXPECT_EQ(
            gcx_code_accumulate(coeff, msgs[w].data(), kLen, r.acc.data()),
            GCX_OK);
        r.applied[w] = coeff;
        if (coeff != 0.0) {
            r.used |= UINT64_C(1) << w;
        }
        r.arrived |= UINT64_C(1) << w;
        EXPECT_EQ(gcx_code_decodable(code, ws(r.arrived), &dec), GCX_OK);
        if (dec && r.complete_at < 0) {
            r.complete_at = (int)k + 1;
            break; /* the gather completes here */
        }
    }
    return r;
}

void make_messages(gcx_code_t *code, std::mt19937_64 &rng,
                   std::vector<std::vector<float>> &msgs,
                   std::vector<double> &sum)
{
    int n = gcx_code_workers(code);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<std::vector<float>> g(n, std::vector<float>(kLen));
    std::vector<const float *> gp(n);
    sum.assign(kLen, 0.0);
    for (int j = 0; j < n; j++) {
        for (size_t k = 0; k < kLen; k++) {
            g[j][k] = u(rng);
            sum[k] += g[j][k];
        }
        gp[j] = g[j].data();
    }
    auto b = matrix_of(code);
    msgs.assign(n, std::vector<float>(kLen));
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(gcx_code_encode(n, &b[(size_t)i * n], gp.data(), kLen,
                                  msgs[i].data()),
                  GCX_OK);
    }
}

} // namespace

TEST(CodingStream, FractionalRepetitionFoldsFirstReplyPerGroup)
{
    std::mt19937_64 rng(11);
    for (int n : {2, 4, 5, 6, 7, 8, 11, 12}) { /* (s + 1) | n or not */
        for (int s = 1; s <= 3; s++) {
            if (s >= n) {
                continue;
            }
            auto bounds = fr_bounds(n, s);
            const int groups = (int)bounds.size() - 1;
            auto c = make_code(GCX_CODE_FR, n, s);
            ASSERT_TRUE(c);
            for (int rep = 0; rep < 30; rep++) {
                std::vector<std::vector<float>> msgs;
                std::vector<double> sum;
                make_messages(c.get(), rng, msgs, sum);
                std::vector<int> order(n);
                for (int i = 0; i < n; i++) {
                    order[i] = i;
                }
                std::shuffle(order.begin(), order.end(), rng);
                Round r = run_round(c.get(), order, msgs);

                /* Complete exactly when every group has replied. */
                uint64_t seen = 0;
                int want_at = -1;
                for (int k = 0; k < n && want_at < 0; k++) {
                    seen |= UINT64_C(1) << order[k];
                    bool all = true;
                    for (int g = 0; g < groups; g++) {
                        all = all && ((seen >> bounds[g]) &
                                      all_mask(bounds[g + 1] - bounds[g])) != 0;
                    }
                    if (all) {
                        want_at = k + 1;
                    }
                }
                ASSERT_EQ(r.complete_at, want_at);
                /* One used worker per group, the first to arrive. */
                EXPECT_EQ(popcount(r.used), groups);
                for (int k = 0; k < r.complete_at; k++) {
                    int w = order[k];
                    bool first = true;
                    for (int q = 0; q < k; q++) {
                        first = first && fr_group(bounds, order[q]) !=
                                             fr_group(bounds, w);
                    }
                    EXPECT_EQ(r.applied[w], first ? 1.0 : 0.0);
                }
                /* decode_vector(U) reproduces the applied coefficients. */
                std::vector<double> a(n);
                ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(r.used), a.data()),
                          GCX_OK);
                EXPECT_EQ(a, r.applied);
                for (size_t k = 0; k < kLen; k++) {
                    EXPECT_NEAR(r.acc[k], sum[k], 1e-5 * n);
                }
            }
        }
    }
}

TEST(CodingStream, WeightedFoldsFirstNMinusS)
{
    std::mt19937_64 rng(12);
    for (int n : {3, 5, 8}) {
        for (int s = 1; s <= 2; s++) {
            auto c = make_code(GCX_CODE_CR, n, s, GCX_CODE_DECODE_WEIGHTED);
            ASSERT_TRUE(c);
            double w = (double)n / ((n - s) * (s + 1));
            for (int rep = 0; rep < 10; rep++) {
                std::vector<std::vector<float>> msgs;
                std::vector<double> sum;
                make_messages(c.get(), rng, msgs, sum);
                std::vector<int> order(n);
                for (int i = 0; i < n; i++) {
                    order[i] = i;
                }
                std::shuffle(order.begin(), order.end(), rng);
                Round r = run_round(c.get(), order, msgs);
                ASSERT_EQ(r.complete_at, n - s);
                EXPECT_EQ(popcount(r.used), n - s);
                std::vector<double> a(n);
                ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(r.used), a.data()),
                          GCX_OK);
                EXPECT_EQ(a, r.applied);
                for (int i = 0; i < n; i++) {
                    EXPECT_EQ(a[i], (r.used >> i & 1) ? w : 0.0);
                }
                /* A late arrival is dropped (coefficient 0). */
                int late = order[n - 1], known = 0;
                double coeff = -1;
                ASSERT_EQ(gcx_code_arrival_coeff(c.get(), ws(r.arrived), late,
                                                 &known, &coeff),
                          GCX_OK);
                EXPECT_EQ(known, 1);
                EXPECT_EQ(coeff, 0.0);
            }
        }
    }
}

TEST(CodingStream, ExactCyclicRepetitionWaitsForTheSet)
{
    std::mt19937_64 rng(13);
    for (int n : {3, 5, 7, 10}) {
        for (int s = 1; s <= std::min(3, n - 1); s++) {
            auto c = make_code(GCX_CODE_CR, n, s);
            ASSERT_TRUE(c);
            auto b = matrix_of(c.get());
            for (int rep = 0; rep < 10; rep++) {
                std::vector<int> order(n);
                for (int i = 0; i < n; i++) {
                    order[i] = i;
                }
                std::shuffle(order.begin(), order.end(), rng);
                uint64_t arrived = 0;
                for (int k = 0; k < n; k++) {
                    int known = -1, dec = -1;
                    double coeff = -1;
                    ASSERT_EQ(gcx_code_arrival_coeff(c.get(), ws(arrived),
                                                     order[k], &known, &coeff),
                              GCX_OK);
                    EXPECT_EQ(known, 0);
                    EXPECT_EQ(coeff, 0.0);
                    arrived |= UINT64_C(1) << order[k];
                    ASSERT_EQ(gcx_code_decodable(c.get(), ws(arrived), &dec),
                              GCX_OK);
                    /* Any n - s decode; fewer only when 1 is in the span
                     * (the structured CR of gcx sometimes allows it). */
                    bool truth =
                        k + 1 >= n - s || truly_decodable(b, n, arrived);
                    EXPECT_EQ(dec, truth ? 1 : 0);
                }
            }
        }
    }
}

TEST(CodingStream, UncodedAndInvalidArrivals)
{
    auto c = make_code(GCX_CODE_UNCODED, 4, 0);
    ASSERT_TRUE(c);
    int known;
    double coeff;
    ASSERT_EQ(gcx_code_arrival_coeff(c.get(), ws(0b0101), 1, &known, &coeff),
              GCX_OK);
    EXPECT_EQ(known, 1);
    EXPECT_EQ(coeff, 1.0);
    EXPECT_EQ(gcx_code_arrival_coeff(c.get(), ws(0b0101), 2, &known, &coeff),
              GCX_ERR_INVALID)
        << "worker already arrived";
    EXPECT_EQ(gcx_code_arrival_coeff(c.get(), ws(0), 4, &known, &coeff),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_arrival_coeff(c.get(), ws(0x10), 1, &known, &coeff),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_arrival_coeff(c.get(), ws(0), 1, nullptr, &coeff),
              GCX_ERR_INVALID);
}
