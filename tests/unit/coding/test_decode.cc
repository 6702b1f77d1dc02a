/*
 * test_decode.cc - the decoder: every straggler pattern of FR and CR for
 * n <= 12, s <= 3; the worked example of the design; undecodable and
 * ill-conditioned sets; WEIGHTED decoding; the cache.
 */
#include "coding_test_util.h"

#include <cstring>

using namespace gcxtest;

namespace
{

constexpr int kLen = 16; /* length of the random "gradients" */

/* Random partition gradients g[j][k] in [-1, 1]. */
std::vector<std::vector<double>> random_grads(int n, std::mt19937_64 &rng)
{
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<std::vector<double>> g(n, std::vector<double>(kLen));
    for (auto &row : g) {
        for (double &x : row) {
            x = u(rng);
        }
    }
    return g;
}

/* Decode one arrived set of a code and check it against random gradients
 * both in double and through the float encode helper. */
void check_decodes(gcx_code_t *code, const std::vector<double> &b,
                   uint64_t arrived, std::mt19937_64 &rng)
{
    int n = gcx_code_workers(code);
    std::vector<double> a(n, 42.0);
    int dec = -1;

    ASSERT_EQ(gcx_code_decodable(code, ws(arrived), &dec), GCX_OK);
    ASSERT_EQ(dec, 1) << "arrived 0x" << std::hex << arrived;
    ASSERT_EQ(gcx_code_decode_vector(code, ws(arrived), a.data()), GCX_OK);
    for (int i = 0; i < n; i++) {
        if (!(arrived >> i & 1)) {
            EXPECT_EQ(a[i], 0.0) << "coefficient of a straggler";
        }
    }
    EXPECT_LE(residual(b, n, a), 1e-12) << "a_F^T B_F != 1";
    /* Amplification: how much message rounding can grow when decoding. */
    double amp = 0;
    for (int j = 0; j < n; j++) {
        double mag = 0;
        for (int i = 0; i < n; i++) {
            mag += std::fabs(a[i] * b[i * n + j]);
        }
        amp = std::max(amp, mag);
    }
    EXPECT_LE(amp, GCX_CODE_MAX_AMPLIFICATION);

    auto g = random_grads(n, rng);
    /* Messages m_i = sum_j B_ij g_j, in double and in float. */
    std::vector<std::vector<double>> m(n, std::vector<double>(kLen, 0.0));
    std::vector<std::vector<float>> gf(n, std::vector<float>(kLen));
    std::vector<std::vector<float>> mf(n, std::vector<float>(kLen));
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < kLen; k++) {
            gf[j][k] = (float)g[j][k];
        }
    }
    std::vector<const float *> gptr(n);
    for (int j = 0; j < n; j++) {
        gptr[j] = gf[j].data();
    }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            for (int k = 0; k < kLen; k++) {
                m[i][k] += b[i * n + j] * g[j][k];
            }
        }
        ASSERT_EQ(
            gcx_code_encode(n, &b[i * n], gptr.data(), kLen, mf[i].data()),
            GCX_OK);
    }
    std::vector<const float *> mptr(n);
    for (int i = 0; i < n; i++) {
        mptr[i] = mf[i].data();
    }
    std::vector<float> decf(kLen);
    ASSERT_EQ(gcx_code_encode(n, a.data(), mptr.data(), kLen, decf.data()),
              GCX_OK);

    for (int k = 0; k < kLen; k++) {
        double want = 0, got = 0, mag = 0;
        for (int j = 0; j < n; j++) {
            want += g[j][k];
            mag += std::fabs(g[j][k]);
        }
        for (int i = 0; i < n; i++) {
            got += a[i] * m[i][k];
        }
        /* Rounding of the messages, amplified at most amp times. */
        EXPECT_NEAR(got, want, 1e-14 * amp * (1 + mag));
        EXPECT_NEAR(decf[k], want, 1e-6 * amp * (1 + mag));
    }
}

/* The decoder's answer versus ground truth for a smaller set. */
bool fr_covers(int n, int s, uint64_t arrived)
{
    for (int g = 0; g < n / (s + 1); g++) {
        if (((arrived >> (g * (s + 1))) & all_mask(s + 1)) == 0) {
            return false;
        }
    }
    return true;
}

} // namespace

/* The core requirement: every F with |F| = n - s decodes, FR and CR. */
TEST(CodingDecode, EveryStragglerPatternUpTo12)
{
    std::mt19937_64 rng(1);
    long checked = 0, expected = 0;

    for (int n = 1; n <= 12; n++) {
        for (int s = 0; s <= std::min(3, n - 1); s++) {
            for (auto kind : {GCX_CODE_FR, GCX_CODE_CR}) {
                SCOPED_TRACE(testing::Message()
                             << "kind " << kind << " n " << n << " s " << s);
                auto c = make_code(kind, n, s);
                ASSERT_TRUE(c);
                auto b = matrix_of(c.get());
                long cnt = 0;
                for_each_subset(n, n - s, [&](uint64_t f) {
                    check_decodes(c.get(), b, f, rng);
                    cnt++;
                });
                /* C(n, s) patterns */
                long binom = 1;
                for (int k = 0; k < s; k++) {
                    binom = binom * (n - k) / (k + 1);
                }
                EXPECT_EQ(cnt, binom);
                checked += cnt;
                expected += binom;
            }
        }
    }
    EXPECT_EQ(checked, expected);
    EXPECT_GT(checked, 1500);
}

/* More than n - s arrived: the minimum-norm solution still decodes. */
TEST(CodingDecode, SupersetsDecode)
{
    std::mt19937_64 rng(2);
    for (int n = 2; n <= 8; n++) {
        for (int s = 1; s <= std::min(3, n - 1); s++) {
            auto c = make_code(GCX_CODE_CR, n, s);
            ASSERT_TRUE(c);
            auto b = matrix_of(c.get());
            for (int k = n - s + 1; k <= n; k++) {
                for_each_subset(n, k, [&](uint64_t f) {
                    check_decodes(c.get(), b, f, rng);
                });
            }
        }
    }
}

/* Fewer than n - s workers: decodable exactly when 1 lies in the row space
 * of B_F (independent ground truth by rank), else the clear error with the
 * output untouched. A partition nobody arrived holds is never decodable. */
TEST(CodingDecode, TooFewWorkers)
{
    long undecodable = 0, decodable = 0;
    for (int n = 2; n <= 10; n++) {
        for (int s = 0; s <= std::min(3, n - 1); s++) {
            auto cr = make_code(GCX_CODE_CR, n, s);
            ASSERT_TRUE(cr);
            auto bc = matrix_of(cr.get());
            for (int k = 0; k < n - s; k++) {
                for_each_subset(n, k, [&](uint64_t f) {
                    int dec = -1;
                    std::vector<double> a(n, 42.0);
                    bool truth = truly_decodable(bc, n, f);
                    ASSERT_EQ(gcx_code_decodable(cr.get(), ws(f), &dec),
                              GCX_OK);
                    EXPECT_EQ(dec, truth ? 1 : 0) << "CR n " << n << " s " << s
                                                  << " F 0x" << std::hex << f;
                    gcx_status_t st =
                        gcx_code_decode_vector(cr.get(), ws(f), a.data());
                    if (truth) {
                        decodable++;
                        ASSERT_EQ(st, GCX_OK);
                        EXPECT_LE(residual(bc, n, a), 1e-12);
                    } else {
                        undecodable++;
                        EXPECT_EQ(st, GCX_ERR_UNDECODABLE);
                        EXPECT_EQ(a[0], 42.0) << "output written on failure";
                    }
                });
            }
            if (n % (s + 1) != 0) {
                continue;
            }
            /* FR decodes as soon as every group has replied, which can be
             * fewer than n - s workers. */
            auto fr = make_code(GCX_CODE_FR, n, s);
            ASSERT_TRUE(fr);
            auto b = matrix_of(fr.get());
            for (int k = 0; k <= n; k++) {
                for_each_subset(n, k, [&](uint64_t f) {
                    int dec = -1;
                    std::vector<double> a(n, 42.0);
                    ASSERT_EQ(gcx_code_decodable(fr.get(), ws(f), &dec),
                              GCX_OK);
                    EXPECT_EQ(dec, fr_covers(n, s, f) ? 1 : 0);
                    gcx_status_t st =
                        gcx_code_decode_vector(fr.get(), ws(f), a.data());
                    if (!dec) {
                        EXPECT_EQ(st, GCX_ERR_UNDECODABLE);
                        return;
                    }
                    ASSERT_EQ(st, GCX_OK);
                    EXPECT_LE(residual(b, n, a), 0.0);
                    /* lowest-numbered arrived worker per group */
                    for (int i = 0; i < n; i++) {
                        uint64_t lower =
                            f & all_mask(i) & ~all_mask(i / (s + 1) * (s + 1));
                        bool first = (f >> i & 1) && lower == 0;
                        EXPECT_EQ(a[i], first ? 1.0 : 0.0);
                    }
                });
            }
        }
    }
    /* Both outcomes occur: the test can fail either way. */
    EXPECT_GT(undecodable, 1000);
    EXPECT_GT(decodable, 0);
}

TEST(CodingDecode, UncodedNeedsEveryone)
{
    auto c = make_code(GCX_CODE_UNCODED, 6, 0);
    ASSERT_TRUE(c);
    std::vector<double> a(6);
    EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(all_mask(6)), a.data()),
              GCX_OK);
    for (double x : a) {
        EXPECT_EQ(x, 1.0);
    }
    EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(all_mask(6) & ~4u), a.data()),
              GCX_ERR_UNDECODABLE);
}

/* DESIGN.md section 8: n = 3, s = 1, B = [[1/2,1,0],[0,1,-1],[1/2,0,1]];
 * 1-based F = {1,2}: a = (2,-1); {1,3}: (1,1); {2,3}: (1,2). */
TEST(CodingDecode, WorkedExampleCallerMatrix)
{
    std::vector<double> m = {0.5, 1, 0, 0, 1, -1, 0.5, 0, 1};
    auto p = params(GCX_CODE_MATRIX, 3, 1);
    p.matrix = m.data();
    auto c = make_code(p);
    ASSERT_TRUE(c);

    struct {
        uint64_t f;
        double a[3];
    } cases[] = {
        {0b011, {2, -1, 0}},
        {0b101, {1, 0, 1}},
        {0b110, {0, 1, 2}},
    };
    for (auto &cs : cases) {
        std::vector<double> a(3);
        ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(cs.f), a.data()), GCX_OK);
        for (int i = 0; i < 3; i++) {
            EXPECT_NEAR(a[i], cs.a[i], 1e-13) << "F 0x" << cs.f << " i " << i;
        }
    }
    std::mt19937_64 rng(3);
    check_decodes(c.get(), m, 0b111, rng);
    for (uint64_t f : {0b000, 0b001, 0b010, 0b100}) {
        int dec = -1;
        ASSERT_EQ(gcx_code_decodable(c.get(), ws(f), &dec), GCX_OK);
        EXPECT_EQ(dec, 0);
    }
}

TEST(CodingDecode, CallerMatrixThatCannotDecode)
{
    /* B = I claims s = 1: no worker is replicated. */
    std::vector<double> eye(16, 0.0);
    for (int i = 0; i < 4; i++) {
        eye[i * 5] = 1.0;
    }
    auto p = params(GCX_CODE_MATRIX, 4, 1);
    p.matrix = eye.data();
    auto c = make_code(p);
    ASSERT_TRUE(c);
    for_each_subset(4, 3, [&](uint64_t f) {
        std::vector<double> a(4, 7.0);
        int dec = -1;
        EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(f), a.data()),
                  GCX_ERR_UNDECODABLE);
        EXPECT_EQ(gcx_code_decodable(c.get(), ws(f), &dec), GCX_OK);
        EXPECT_EQ(dec, 0);
        EXPECT_EQ(a[0], 7.0);
    });

    /* Every partition covered, but 1 is not in the row space. */
    std::vector<double> m = {1, 2, 0, 0, 1, 1, 1, 0, 1};
    p = params(GCX_CODE_MATRIX, 3, 1);
    p.matrix = m.data();
    c = make_code(p);
    ASSERT_TRUE(c);
    std::vector<double> a(3);
    for (uint64_t f : {0b011, 0b101, 0b110}) {
        EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(f), a.data()),
                  GCX_ERR_UNDECODABLE)
            << f;
    }
    /* B is invertible: all three decode, a = B^-T 1 = (1/3, 1/3, 2/3). */
    ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(0b111), a.data()), GCX_OK);
    EXPECT_NEAR(a[0], 1.0 / 3, 1e-12);
    EXPECT_NEAR(a[1], 1.0 / 3, 1e-12);
    EXPECT_NEAR(a[2], 2.0 / 3, 1e-12);
}

TEST(CodingDecode, IllConditionedIsUndecodable)
{
    /* B^T a = 1 with B = [[1,0],[1,eps]]: a = (1 - 1/eps, 1/eps), an
     * amplification of about 2/eps. */
    for (double eps : {1e-3, 1e-9}) {
        std::vector<double> m = {1, 0, 1, eps};
        auto p = params(GCX_CODE_MATRIX, 2, 0);
        p.matrix = m.data();
        auto c = make_code(p);
        ASSERT_TRUE(c);
        std::vector<double> a(2);
        gcx_status_t st = gcx_code_decode_vector(c.get(), ws(0b11), a.data());
        if (2.0 / eps <= GCX_CODE_MAX_AMPLIFICATION) {
            ASSERT_EQ(st, GCX_OK) << eps;
            EXPECT_NEAR(a[1], 1.0 / eps, 1e-6 / eps);
        } else {
            EXPECT_EQ(st, GCX_ERR_UNDECODABLE) << eps;
        }
    }
}

TEST(CodingDecode, InvalidArguments)
{
    auto c = make_code(GCX_CODE_CR, 5, 1);
    ASSERT_TRUE(c);
    std::vector<double> a(5);
    int dec;
    EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(0x20), a.data()),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_decodable(c.get(), ws(0x3f), &dec), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(0xf), nullptr),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_decodable(c.get(), ws(0xf), nullptr), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_decode_vector(nullptr, ws(0xf), a.data()),
              GCX_ERR_INVALID);
    /* a NULL set */
    EXPECT_EQ(gcx_code_decode_vector(c.get(), nullptr, a.data()),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_decodable(c.get(), nullptr, &dec), GCX_ERR_INVALID);
}

TEST(CodingDecode, WeightedDecoding)
{
    for (auto kind : {GCX_CODE_FR, GCX_CODE_CR}) {
        for (int n : {4, 6, 9, 12}) {
            for (int s = 1; s <= 3; s++) {
                if (kind == GCX_CODE_FR && n % (s + 1) != 0) {
                    continue; /* refused: CodingCreate.RejectsBadParameters */
                }
                auto c = make_code(kind, n, s, GCX_CODE_DECODE_WEIGHTED);
                ASSERT_TRUE(c);
                auto b = matrix_of(c.get());
                double w = (double)n / ((n - s) * (s + 1));
                /* Exact average over all straggler patterns: weight 1 per
                 * partition (unbiased), though no single pattern need be. */
                std::vector<double> mean(n, 0.0);
                long npat = 0;
                for_each_subset(n, n - s, [&](uint64_t f) {
                    std::vector<double> a(n);
                    ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(f), a.data()),
                              GCX_OK);
                    for (int i = 0; i < n; i++) {
                        EXPECT_EQ(a[i], (f >> i & 1) ? w : 0.0);
                        for (int j = 0; j < n; j++) {
                            mean[j] += a[i] * b[i * n + j];
                        }
                    }
                    npat++;
                });
                for (int j = 0; j < n; j++) {
                    EXPECT_NEAR(mean[j] / npat, 1.0, 1e-12);
                }
                /* Too few: undecodable; more: the n-s lowest are used. */
                std::vector<double> a(n);
                int dec = -1;
                uint64_t few = all_mask(n - s - 1);
                EXPECT_EQ(gcx_code_decodable(c.get(), ws(few), &dec), GCX_OK);
                EXPECT_EQ(dec, 0);
                EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(few), a.data()),
                          GCX_ERR_UNDECODABLE);
                ASSERT_EQ(
                    gcx_code_decode_vector(c.get(), ws(all_mask(n)), a.data()),
                    GCX_OK);
                for (int i = 0; i < n; i++) {
                    EXPECT_EQ(a[i], i < n - s ? w : 0.0);
                }
            }
        }
    }
}

TEST(CodingDecode, CacheReturnsIdenticalVectors)
{
    auto c = make_code(GCX_CODE_CR, 10, 3);
    ASSERT_TRUE(c);
    std::vector<uint64_t> sets;
    for_each_subset(10, 7, [&](uint64_t f) { sets.push_back(f); });
    std::vector<std::vector<double>> first;
    for (uint64_t f : sets) {
        std::vector<double> a(10);
        ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(f), a.data()), GCX_OK);
        first.push_back(a);
    }
    for (size_t k = 0; k < sets.size(); k++) {
        std::vector<double> a(10);
        int dec = 0;
        ASSERT_EQ(gcx_code_decodable(c.get(), ws(sets[k]), &dec), GCX_OK);
        EXPECT_EQ(dec, 1);
        ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(sets[k]), a.data()),
                  GCX_OK);
        EXPECT_EQ(std::memcmp(a.data(), first[k].data(), 80), 0);
    }
    /* Failures are cached too and stay failures. */
    for (int rep = 0; rep < 3; rep++) {
        int dec = -1;
        ASSERT_EQ(gcx_code_decodable(c.get(), ws(0b111111), &dec), GCX_OK);
        EXPECT_EQ(dec, 0);
    }
}

TEST(CodingDecode, SmallCacheStaysCorrectWhenEmptied)
{
    /* A cache of 5 entries cycled through 120 sets: emptied many times,
     * every answer still equals a fresh code's, bit for bit. */
    auto p = params(GCX_CODE_CR, 10, 3);
    p.cache_size = 5;
    auto small = make_code(p);
    auto big = make_code(GCX_CODE_CR, 10, 3);
    ASSERT_TRUE(small && big);
    std::vector<uint64_t> sets;
    for_each_subset(10, 7, [&](uint64_t f) { sets.push_back(f); });
    std::mt19937_64 rng(4);
    for (int rep = 0; rep < 600; rep++) {
        uint64_t f = sets[rng() % sets.size()];
        if (rep % 7 == 0) {
            f &= ~(f & (~f + 1)); /* drop one: undecodable */
        }
        std::vector<double> a1(10, 1.5), a2(10, 1.5);
        gcx_status_t s1 = gcx_code_decode_vector(small.get(), ws(f), a1.data());
        gcx_status_t s2 = gcx_code_decode_vector(big.get(), ws(f), a2.data());
        ASSERT_EQ(s1, s2);
        EXPECT_EQ(std::memcmp(a1.data(), a2.data(), 80), 0);
    }
}

/* The bitmask limit n = 64: random straggler patterns of CR and FR. */
TEST(CodingDecode, SixtyFourWorkers)
{
    std::mt19937_64 rng(5);
    for (auto kind : {GCX_CODE_FR, GCX_CODE_CR}) {
        for (int s : {1, 3}) {
            auto c = make_code(kind, 64, s);
            ASSERT_TRUE(c);
            auto b = matrix_of(c.get());
            double amp = 0;
            for (int rep = 0; rep < 60; rep++) {
                uint64_t f = random_subset(64, 64 - s, rng);
                check_decodes(c.get(), b, f, rng);
                std::vector<double> a(64);
                ASSERT_EQ(gcx_code_decode_vector(c.get(), ws(f), a.data()),
                          GCX_OK);
                for (int j = 0; j < 64; j++) {
                    double mag = 0;
                    for (int i = 0; i < 64; i++) {
                        mag += std::fabs(a[i] * b[i * 64 + j]);
                    }
                    amp = std::max(amp, mag);
                }
            }
            RecordProperty("max_amplification_" + std::to_string(kind) + "_s" +
                               std::to_string(s),
                           std::to_string(amp));
            EXPECT_LT(amp, GCX_CODE_MAX_AMPLIFICATION);
        }
    }
    /* all 64 arrived (mask ~0) */
    auto c = make_code(GCX_CODE_CR, 64, 2);
    ASSERT_TRUE(c);
    std::vector<double> a(64);
    EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(~UINT64_C(0)), a.data()),
              GCX_OK);
}
