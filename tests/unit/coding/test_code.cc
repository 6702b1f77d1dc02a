/*
 * test_code.cc - building codes: parameter checks, assignments, the CR
 * construction (support, null-space property, determinism).
 */
#include "coding_test_util.h"

#include <cstring>
#include <limits>

using namespace gcxtest;

namespace
{

gcx_status_t try_create(const gcx_code_params_t &p)
{
    gcx_code_t *sentinel = reinterpret_cast<gcx_code_t *>(0x1);
    gcx_code_t *c = sentinel;
    gcx_status_t st = gcx_code_create(&p, &c);
    if (st == GCX_OK) {
        gcx_code_destroy(c);
    } else {
        EXPECT_EQ(c, sentinel) << "output written on failure";
    }
    return st;
}

} // namespace

TEST(CodingCreate, RejectsBadParameters)
{
    gcx_code_t *c = nullptr;
    EXPECT_EQ(gcx_code_create(nullptr, &c), GCX_ERR_INVALID);
    auto p = params(GCX_CODE_CR, 4, 1);
    EXPECT_EQ(gcx_code_create(&p, nullptr), GCX_ERR_INVALID);

    EXPECT_EQ(try_create(params(GCX_CODE_CR, 0, 0)), GCX_ERR_INVALID);
    EXPECT_EQ(try_create(params(GCX_CODE_CR, 4, -1)), GCX_ERR_INVALID);
    EXPECT_EQ(try_create(params(GCX_CODE_CR, 4, 4)), GCX_ERR_INVALID);
    EXPECT_EQ(try_create(params(GCX_CODE_FR, 5, 1)), GCX_OK); /* 2 + 3 */
    EXPECT_EQ(try_create(params(GCX_CODE_FR, 6, 2)), GCX_OK);
    /* WEIGHTED needs s + 1 holders per partition: FR with (s + 1) | n */
    EXPECT_EQ(try_create(params(GCX_CODE_FR, 5, 1, GCX_CODE_DECODE_WEIGHTED)),
              GCX_ERR_INVALID);
    EXPECT_EQ(try_create(params(GCX_CODE_FR, 6, 1, GCX_CODE_DECODE_WEIGHTED)),
              GCX_OK);
    EXPECT_EQ(try_create(params(GCX_CODE_UNCODED, 4, 1)), GCX_ERR_INVALID);
    EXPECT_EQ(try_create(params(GCX_CODE_MATRIX, 4, 1)), GCX_ERR_INVALID);
    EXPECT_EQ(try_create(params((gcx_code_kind_t)9, 4, 1)), GCX_ERR_INVALID);
    EXPECT_EQ(try_create(params(GCX_CODE_CR, 4, 1, (gcx_code_decoding_t)5)),
              GCX_ERR_INVALID);
    p = params(GCX_CODE_CR, 4, 1);
    p.cache_size = -1;
    EXPECT_EQ(try_create(p), GCX_ERR_INVALID);

    /* The limits: codes decoded by a solve (CR, MATRIX) up to 64 workers
     * (GCX_CODE_MAX_SOLVED_WORKERS), the others up to 65536
     * (GCX_CODE_MAX_WORKERS); CodingLarge.* tests them further. */
    EXPECT_EQ(try_create(params(GCX_CODE_CR, 64, 3)), GCX_OK);
    EXPECT_EQ(try_create(params(GCX_CODE_CR, 65, 3)), GCX_ERR_UNSUPPORTED);
    EXPECT_EQ(try_create(params(GCX_CODE_FR, 66, 1)), GCX_OK);
    EXPECT_EQ(try_create(params(GCX_CODE_FR, 65538, 1)), GCX_ERR_UNSUPPORTED);

    /* Caller matrices. */
    std::vector<double> m(9, 0.0);
    p = params(GCX_CODE_MATRIX, 3, 1);
    p.matrix = m.data();
    EXPECT_EQ(try_create(p), GCX_ERR_INVALID) << "all-zero matrix";
    m = {0.5, 1, 0, 0, 1, -1, 0.5, 0, 1};
    p.matrix = m.data();
    EXPECT_EQ(try_create(p), GCX_OK);
    m[4] = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(try_create(p), GCX_ERR_RANGE);
    m[4] = std::numeric_limits<double>::infinity();
    EXPECT_EQ(try_create(p), GCX_ERR_RANGE);

    /* WEIGHTED needs s+1 holders per partition. */
    m = {1, 1, 0, 0, 1, 1, 1, 0, 1};
    p.matrix = m.data();
    p.decoding = GCX_CODE_DECODE_WEIGHTED;
    EXPECT_EQ(try_create(p), GCX_OK);
    m = {1, 1, 1, 0, 1, 1, 1, 0, 1};
    p.matrix = m.data();
    EXPECT_EQ(try_create(p), GCX_ERR_INVALID);
}

TEST(CodingCreate, UncodedIsIdentity)
{
    auto c = make_code(GCX_CODE_UNCODED, 5, 0);
    ASSERT_TRUE(c);
    EXPECT_EQ(gcx_code_workers(c.get()), 5);
    EXPECT_EQ(gcx_code_stragglers(c.get()), 0);
    EXPECT_EQ(gcx_code_load(c.get()), 1);
    auto b = matrix_of(c.get());
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 5; j++) {
            EXPECT_EQ(b[i * 5 + j], i == j ? 1.0 : 0.0);
        }
    }
}

/* FR for every n <= 40 and s < n, (s + 1) | n or not: the groups of the
 * definition (fr_bounds), Tandon et al.'s groups of s + 1 when (s + 1) | n. */
TEST(CodingCreate, FractionalRepetitionAssignment)
{
    for (int n = 1; n <= 40; n++) {
        for (int s = 0; s < n; s++) {
            SCOPED_TRACE(testing::Message() << "n " << n << " s " << s);
            auto c = make_code(GCX_CODE_FR, n, s);
            ASSERT_TRUE(c);
            if (n % (s + 1) == 0) {
                ASSERT_EQ(gcx_code_load(c.get()), s + 1);
            }
            expect_fr_assignment(c.get(), n, s);
        }
    }
    /* a worked case: n = 7, s = 2: groups {0..3}, {4..6}, load 4 */
    auto c = make_code(GCX_CODE_FR, 7, 2);
    ASSERT_TRUE(c);
    EXPECT_EQ(gcx_code_load(c.get()), 4);
    auto b = matrix_of(c.get());
    for (int i = 0; i < 7; i++) {
        for (int j = 0; j < 7; j++) {
            EXPECT_EQ(b[i * 7 + j], (i < 4) == (j < 4) ? 1.0 : 0.0);
        }
    }
}

TEST(CodingCreate, CyclicRepetitionStructure)
{
    for (int n = 1; n <= 20; n++) {
        for (int s = 0; s < std::min(n, 5); s++) {
            auto c = make_code(GCX_CODE_CR, n, s);
            ASSERT_TRUE(c);
            ASSERT_EQ(gcx_code_load(c.get()), s + 1);
            auto b = matrix_of(c.get());
            std::vector<int> parts(s + 1);
            std::vector<double> coeffs(s + 1);
            for (int i = 0; i < n; i++) {
                int cnt = -1;
                ASSERT_EQ(gcx_code_assignment(c.get(), i, parts.data(),
                                              coeffs.data(), &cnt),
                          GCX_OK);
                ASSERT_EQ(cnt, s + 1) << "n " << n << " s " << s;
                /* Support {i..i+s} mod n, listed in increasing order. */
                std::vector<int> want;
                for (int k = 0; k <= s; k++) {
                    want.push_back((i + k) % n);
                }
                std::sort(want.begin(), want.end());
                for (int k = 0; k <= s; k++) {
                    EXPECT_EQ(parts[k], want[k]);
                    EXPECT_EQ(coeffs[k], b[i * n + parts[k]]);
                }
                EXPECT_EQ(b[i * n + i], 1.0);
            }
            /* All rows and 1 lie in one (n-s)-dimensional space. */
            std::vector<double> with_ones = b;
            with_ones.insert(with_ones.end(), n, 1.0);
            EXPECT_EQ(rank_of(b, n, n), n - s) << "n " << n << " s " << s;
            EXPECT_EQ(rank_of(with_ones, n + 1, n), n - s);
        }
    }
}

TEST(CodingCreate, CyclicRepetitionIsDeterministic)
{
    for (int n : {7, 12, 33, 64}) {
        auto c1 = make_code(GCX_CODE_CR, n, 3);
        auto c2 = make_code(GCX_CODE_CR, n, 3);
        ASSERT_TRUE(c1 && c2);
        auto b1 = matrix_of(c1.get()), b2 = matrix_of(c2.get());
        EXPECT_EQ(std::memcmp(b1.data(), b2.data(), b1.size() * 8), 0);
    }
}

TEST(CodingCreate, CyclicRepetitionBuildsUpToTheLimit)
{
    for (int n : {1, 2, 3, 5, 8, 13, 21, 31, 32, 33, 63, 64}) {
        for (int s : {0, 1, 2, 3, 7, n / 2, n - 1}) {
            if (s < 0 || s >= n) {
                continue;
            }
            gcx_code_params_t p = params(GCX_CODE_CR, n, s);
            gcx_code_t *c = nullptr;
            gcx_status_t st = gcx_code_create(&p, &c);
            if (s <= 7 || s == n - 1) {
                EXPECT_EQ(st, GCX_OK) << "n " << n << " s " << s;
            } else {
                /* Real cyclic codes are hopelessly conditioned for large s:
                 * a clear error is acceptable there. */
                EXPECT_TRUE(st == GCX_OK || st == GCX_ERR_UNDECODABLE)
                    << "n " << n << " s " << s;
            }
            gcx_code_destroy(c);
        }
    }
}

TEST(CodingCreate, WeightedUsesSupportIndicator)
{
    auto c = make_code(GCX_CODE_CR, 7, 2, GCX_CODE_DECODE_WEIGHTED);
    ASSERT_TRUE(c);
    auto b = matrix_of(c.get());
    for (int i = 0; i < 7; i++) {
        for (int j = 0; j < 7; j++) {
            bool held = ((j - i + 7) % 7) <= 2;
            EXPECT_EQ(b[i * 7 + j], held ? 1.0 : 0.0);
        }
    }
}

TEST(CodingCreate, MatrixLoadAndAssignment)
{
    std::vector<double> m = {0.5, 1, 0, 0, 1, -1, 0.5, 0, 1};
    auto p = params(GCX_CODE_MATRIX, 3, 1);
    p.matrix = m.data();
    auto c = make_code(p);
    ASSERT_TRUE(c);
    m[0] = 99; /* the code keeps its own copy */
    EXPECT_EQ(gcx_code_load(c.get()), 2);
    int parts[3], cnt;
    double coeffs[3];
    ASSERT_EQ(gcx_code_assignment(c.get(), 1, parts, coeffs, &cnt), GCX_OK);
    ASSERT_EQ(cnt, 2);
    EXPECT_EQ(parts[0], 1);
    EXPECT_EQ(parts[1], 2);
    EXPECT_EQ(coeffs[0], 1.0);
    EXPECT_EQ(coeffs[1], -1.0);
    ASSERT_EQ(gcx_code_assignment(c.get(), 0, parts, coeffs, &cnt), GCX_OK);
    EXPECT_EQ(coeffs[0], 0.5);
    EXPECT_EQ(gcx_code_assignment(c.get(), 3, parts, coeffs, &cnt),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_assignment(c.get(), -1, parts, coeffs, &cnt),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_matrix(c.get(), nullptr), GCX_ERR_INVALID);
}

/* n + s odd: the Fourier construction makes B circulant (a real BCH code);
 * s = 1 with n even gives rows (1, 1). */
TEST(CodingCreate, CyclicRepetitionCirculantWhenNPlusSOdd)
{
    for (int n : {2, 5, 8, 11, 16, 33, 64}) {
        for (int s = 1; s <= std::min(4, n - 1); s++) {
            if ((n + s) % 2 == 0) {
                continue;
            }
            auto c = make_code(GCX_CODE_CR, n, s);
            ASSERT_TRUE(c);
            auto b = matrix_of(c.get());
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < n; j++) {
                    EXPECT_NEAR(b[i * n + j], b[(j - i + n) % n], 1e-9)
                        << "n " << n << " s " << s;
                    if (s == 1 && n % 2 == 0) {
                        bool held = j == i || j == (i + 1) % n;
                        EXPECT_NEAR(b[i * n + j], held ? 1.0 : 0.0, 1e-12);
                    }
                }
            }
        }
    }
}

TEST(CodingCreate, AmplificationLimitParameter)
{
    /* B^T a = 1 with B = [[1,0],[1,1e-3]] needs amplification ~2000. */
    std::vector<double> m = {1, 0, 1, 1e-3};
    auto p = params(GCX_CODE_MATRIX, 2, 0);
    p.matrix = m.data();
    std::vector<double> a(2);
    for (double limit : {0.0, 1e4, 100.0}) {
        p.max_amplification = limit;
        auto c = make_code(p);
        ASSERT_TRUE(c);
        EXPECT_EQ(gcx_code_decode_vector(c.get(), ws(0b11), a.data()),
                  limit == 100.0 ? GCX_ERR_UNDECODABLE : GCX_OK)
            << limit;
    }
    gcx_code_t *c = nullptr;
    for (double bad : {0.5, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
        p.max_amplification = bad;
        EXPECT_EQ(gcx_code_create(&p, &c), GCX_ERR_INVALID) << bad;
    }
}
