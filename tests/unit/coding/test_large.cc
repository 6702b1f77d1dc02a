/*
 * test_large.cc - codes past 64 workers: the limits (GCX_CODE_MAX_WORKERS
 * 65536; CR and MATRIX, decoded by a dense solve, up to
 * GCX_CODE_MAX_SOLVED_WORKERS 64), and FR, UNCODED and WEIGHTED at
 * n = 96 .. 65536 over worker sets of several words. Every answer of the
 * decoder (decodable, decode_vector, arrival_coeff, stream_need) is
 * checked against a reference computed here from the definitions (FR:
 * worker w and partition j are in group w / (s + 1)), over random arrival
 * orders with fixed seeds.
 */
#include "coding_test_util.h"

#include <gcx/wset.h>

#include <malloc.h>

/* glibc's mallinfo2() measures what a code allocates; elsewhere the
 * check of FrAtTheLimitStaysSmall is left out. */
#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define GCX_TEST_HEAP_BYTES 1
#endif

#include <cstring>
#include <string>

using namespace gcxtest;

namespace
{

/* Bytes in use on the heap (0 where it cannot be measured). */
double heap_in_use()
{
#ifdef GCX_TEST_HEAP_BYTES
    struct mallinfo2 mi = mallinfo2();
    /* small chunks (uordblks) and mmapped ones (hblkhd) */
    return (double)mi.uordblks + (double)mi.hblkhd;
#else
    return 0.0;
#endif
}

std::vector<int> random_order(int n, std::mt19937_64 &rng)
{
    std::vector<int> order(n);
    for (int i = 0; i < n; i++) {
        order[i] = i;
    }
    std::shuffle(order.begin(), order.end(), rng);
    return order;
}

/* Reference FR decoding vector of an arrived set (by definition): 1 for
 * the lowest-numbered arrived worker of each group, 0 elsewhere; empty
 * when some group has no arrived worker. */
std::vector<double> fr_reference_vector(int n, int s,
                                        const std::vector<bool> &arrived)
{
    auto b = fr_bounds(n, s);
    std::vector<double> a(n, 0.0);
    for (size_t group = 0; group + 1 < b.size(); group++) {
        int first = -1;
        for (int w = b[group]; w < b[group + 1]; w++) {
            if (arrived[w]) {
                first = w;
                break;
            }
        }
        if (first < 0) {
            return {};
        }
        a[first] = 1.0;
    }
    return a;
}

std::vector<uint64_t> set_of(const std::vector<bool> &members)
{
    int n = (int)members.size();
    auto set = empty_set(n);
    for (int w = 0; w < n; w++) {
        if (members[w]) {
            gcx_wset_add(set.data(), w);
        }
    }
    return set;
}

/*
 * One FR round with arrivals in @p order: before each arrival the
 * streaming coefficient (1 for the first of its group, 0 after), after it
 * the decodable predicate (every group covered) and, at the checkpoints,
 * the decoding vector; the nonzero coefficients reach stream_need exactly
 * when the set becomes decodable; decode_vector(used) reproduces the
 * applied coefficients. Arrivals go on past that point (late messages):
 * their coefficient is 0 and the set stays decodable.
 */
void fr_round(gcx_code_t *code, int n, int s, const std::vector<int> &order)
{
    const auto bounds = fr_bounds(n, s);
    const int groups = (int)bounds.size() - 1;
    int need = -1;
    ASSERT_EQ(gcx_code_stream_need(code, &need), GCX_OK);
    ASSERT_EQ(need, groups);

    auto arrived = empty_set(n), used = empty_set(n);
    std::vector<bool> ref_arrived(n, false), covered(groups, false);
    std::vector<double> applied(n, 0.0), a(n);
    int ncovered = 0, nonzero = 0, complete_at = -1;
    for (int k = 0; k < n; k++) {
        int w = order[k], known = -1, dec = -1;
        double coeff = -1;
        ASSERT_EQ(gcx_code_arrival_coeff(code, arrived.data(), w, &known,
                                         &coeff),
                  GCX_OK)
            << "arrival " << k;
        ASSERT_EQ(known, 1);
        int group = fr_group(bounds, w);
        bool first = !covered[group];
        ASSERT_EQ(coeff, first ? 1.0 : 0.0)
            << "worker " << w << " arrival " << k;
        if (first) {
            covered[group] = true;
            ncovered++;
            nonzero++;
            gcx_wset_add(used.data(), w);
            applied[w] = coeff;
        }
        gcx_wset_add(arrived.data(), w);
        ref_arrived[w] = true;
        ASSERT_EQ(gcx_code_decodable(code, arrived.data(), &dec), GCX_OK);
        ASSERT_EQ(dec, ncovered == groups ? 1 : 0) << "arrival " << k;
        ASSERT_EQ(dec, nonzero >= need ? 1 : 0) << "arrival " << k;
        if (dec && complete_at < 0) {
            complete_at = k + 1;
        }
        bool checkpoint = k + 1 == complete_at || k + 1 == n ||
                          k % std::max(1, n / 8) == 0 ||
                          (complete_at < 0 && n <= 128);
        if (!checkpoint) {
            continue;
        }
        auto want = fr_reference_vector(n, s, ref_arrived);
        std::fill(a.begin(), a.end(), 42.0);
        gcx_status_t st = gcx_code_decode_vector(code, arrived.data(),
                                                 a.data());
        if (want.empty()) {
            ASSERT_EQ(st, GCX_ERR_UNDECODABLE) << "arrival " << k;
            ASSERT_EQ(a[0], 42.0) << "output written on failure";
        } else {
            ASSERT_EQ(st, GCX_OK) << "arrival " << k;
            ASSERT_EQ(a, want) << "arrival " << k;
        }
    }
    ASSERT_GE(complete_at, groups);
    ASSERT_LE(complete_at, n - s) << "any n - s workers cover every group";
    EXPECT_EQ(gcx_wset_count(used.data(), n), groups);
    ASSERT_EQ(gcx_code_decode_vector(code, used.data(), a.data()), GCX_OK);
    EXPECT_EQ(a, applied) << "decode_vector(used) != applied coefficients";
}

} // namespace

TEST(CodingLarge, Limits)
{
    EXPECT_EQ(GCX_CODE_MAX_WORKERS, 65536);
#ifdef GCX_CODE_MAX_SOLVED_WORKERS
    EXPECT_EQ(GCX_CODE_MAX_SOLVED_WORKERS, 64);
#else
    ADD_FAILURE() << "GCX_CODE_MAX_SOLVED_WORKERS is not defined";
#endif
}

/* CR and MATRIX are decoded by a dense least-squares solve: refused past
 * 64 workers with GCX_ERR_UNSUPPORTED and an error naming the limit. */
TEST(CodingLarge, SolvedCodesRefuseMoreThan64Workers)
{
    gcx_code_t *sentinel = reinterpret_cast<gcx_code_t *>(0x1);
    const int n = 65;
    std::vector<double> eye((size_t)n * n, 0.0);
    for (int i = 0; i < n; i++) {
        eye[(size_t)i * n + i] = 1.0;
    }
    gcx_code_params_t cr = params(GCX_CODE_CR, n, 1);
    gcx_code_params_t cr0 = params(GCX_CODE_CR, n, 0);
    gcx_code_params_t mat = params(GCX_CODE_MATRIX, n, 0);
    mat.matrix = eye.data();
    for (const gcx_code_params_t *p : {&cr, &cr0, &mat}) {
        gcx_code_t *c = sentinel;
        testing::internal::CaptureStderr();
        gcx_status_t st = gcx_code_create(p, &c);
        std::string err = testing::internal::GetCapturedStderr();
        EXPECT_EQ(st, GCX_ERR_UNSUPPORTED) << "kind " << p->kind;
        EXPECT_EQ(c, sentinel) << "output written on failure";
        EXPECT_NE(err.find("GCX_CODE_MAX_SOLVED_WORKERS"), std::string::npos)
            << "kind " << p->kind << ": " << err;
        if (st == GCX_OK) {
            gcx_code_destroy(c);
        }
    }
    /* 64 still builds, both kinds */
    std::vector<double> eye64(64 * 64, 0.0);
    for (int i = 0; i < 64; i++) {
        eye64[i * 64 + i] = 1.0;
    }
    mat = params(GCX_CODE_MATRIX, 64, 0);
    mat.matrix = eye64.data();
    EXPECT_TRUE(make_code(mat));
    EXPECT_TRUE(make_code(GCX_CODE_CR, 64, 1));
}

/* The assignment and the matrix of FR at n = 96 are the definition:
 * B_ij = 1 when i and j are in the same group of s + 1, else 0. */
TEST(CodingLarge, FrAssignmentAndMatrixAt96)
{
    const int n = 96;
    for (int s : {0, 1, 2, 3, 5, 7, 11, 95}) {
        ASSERT_EQ(n % (s + 1), 0);
        SCOPED_TRACE(testing::Message() << "s " << s);
        auto c = make_code(GCX_CODE_FR, n, s);
        ASSERT_TRUE(c);
        EXPECT_EQ(gcx_code_workers(c.get()), n);
        EXPECT_EQ(gcx_code_stragglers(c.get()), s);
        ASSERT_EQ(gcx_code_load(c.get()), s + 1);
        auto b = matrix_of(c.get());
        ASSERT_EQ(b.size(), (size_t)n * n);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                ASSERT_EQ(b[(size_t)i * n + j],
                          i / (s + 1) == j / (s + 1) ? 1.0 : 0.0)
                    << "i " << i << " j " << j;
            }
        }
        expect_fr_assignment(c.get(), n, s);
        int parts1[1], cnt;
        double coeffs1[1];
        EXPECT_EQ(gcx_code_assignment(c.get(), n, parts1, coeffs1, &cnt),
                  GCX_ERR_INVALID);
    }
}

/* FR at n = 96, 1024, 4096, s = 1, 3, 7: arrivals in random order (fixed
 * seed) against the group-coverage reference. */
TEST(CodingLarge, FrStreamingMatchesGroupCoverage)
{
    std::mt19937_64 rng(31);
    for (int n : {96, 1000, 1024, 4096}) {
        /* s + 1 dividing n, and not: s = 2 and s = n / 8 (groups of s + 1
         * and s + 2 workers) */
        for (int s : {1, 2, 3, 7, n / 8}) {
            SCOPED_TRACE(testing::Message() << "n " << n << " s " << s);
            auto c = make_code(GCX_CODE_FR, n, s);
            ASSERT_TRUE(c);
            ASSERT_NO_FATAL_FAILURE(expect_fr_assignment(c.get(), n, s));
            int reps = n <= 96 ? 20 : n <= 1024 ? 3 : 1;
            for (int rep = 0; rep < reps; rep++) {
                ASSERT_NO_FATAL_FAILURE(
                    fr_round(c.get(), n, s, random_order(n, rng)))
                    << "rep " << rep;
            }
            /* arrivals group by group, lowest group last: decodable only
             * at the very first arrival of the last group */
            const int first_end = fr_bounds(n, s)[1];
            std::vector<int> order;
            for (int w = first_end; w < n; w++) {
                order.push_back(w);
            }
            for (int w = first_end - 1; w >= 0; w--) {
                order.push_back(w);
            }
            ASSERT_NO_FATAL_FAILURE(fr_round(c.get(), n, s, order));
        }
    }
}

/* FR decodes from one arrived worker per group, any of them; one group
 * with nobody arrived is undecodable however many others arrived. */
TEST(CodingLarge, FrOneWorkerPerGroup)
{
    std::mt19937_64 rng(32);
    for (int n : {96, 1000, 1024, 4096}) {
        for (int s : {1, 2, 3, 7, n / 8}) { /* (s + 1) | n or not */
            SCOPED_TRACE(testing::Message() << "n " << n << " s " << s);
            const auto bounds = fr_bounds(n, s);
            const int groups = (int)bounds.size() - 1;
            auto c = make_code(GCX_CODE_FR, n, s);
            ASSERT_TRUE(c);
            std::vector<double> a(n);
            for (int rep = 0; rep < 5; rep++) {
                std::vector<bool> members(n, false);
                for (int group = 0; group < groups; group++) {
                    int size = bounds[group + 1] - bounds[group];
                    members[bounds[group] + (int)(rng() % (uint64_t)size)] =
                        true;
                }
                auto set = set_of(members);
                int dec = -1;
                ASSERT_EQ(gcx_code_decodable(c.get(), set.data(), &dec),
                          GCX_OK);
                EXPECT_EQ(dec, 1);
                ASSERT_EQ(gcx_code_decode_vector(c.get(), set.data(),
                                                 a.data()),
                          GCX_OK);
                for (int w = 0; w < n; w++) {
                    ASSERT_EQ(a[w], members[w] ? 1.0 : 0.0) << "w " << w;
                }
                /* every worker but those of one group */
                int hole = (int)(rng() % (uint64_t)groups);
                std::vector<bool> most(n, true);
                for (int w = bounds[hole]; w < bounds[hole + 1]; w++) {
                    most[w] = false;
                }
                set = set_of(most);
                ASSERT_EQ(gcx_code_decodable(c.get(), set.data(), &dec),
                          GCX_OK);
                EXPECT_EQ(dec, 0) << "group " << hole << " missing";
                EXPECT_EQ(gcx_code_decode_vector(c.get(), set.data(),
                                                 a.data()),
                          GCX_ERR_UNDECODABLE);
            }
            /* everyone: the lowest-numbered worker of each group */
            std::vector<bool> all(n, true);
            auto set = set_of(all);
            ASSERT_EQ(gcx_code_decode_vector(c.get(), set.data(), a.data()),
                      GCX_OK);
            for (int w = 0; w < n; w++) {
                bool lowest = std::find(bounds.begin(), bounds.end(), w) !=
                              bounds.end();
                ASSERT_EQ(a[w], lowest ? 1.0 : 0.0) << "w " << w;
            }
            /* nobody */
            auto none = empty_set(n);
            int dec = -1;
            ASSERT_EQ(gcx_code_decodable(c.get(), none.data(), &dec), GCX_OK);
            EXPECT_EQ(dec, 0);
        }
    }
}

/* UNCODED at n = 1000: every worker needed, coefficient 1 on arrival. */
TEST(CodingLarge, UncodedAt1000)
{
    const int n = 1000;
    std::mt19937_64 rng(33);
    auto c = make_code(GCX_CODE_UNCODED, n, 0);
    ASSERT_TRUE(c);
    int need = -1;
    ASSERT_EQ(gcx_code_stream_need(c.get(), &need), GCX_OK);
    EXPECT_EQ(need, n);
    auto b = matrix_of(c.get());
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            ASSERT_EQ(b[(size_t)i * n + j], i == j ? 1.0 : 0.0);
        }
    }
    auto order = random_order(n, rng);
    auto arrived = empty_set(n);
    std::vector<double> a(n);
    for (int k = 0; k < n; k++) {
        int known = -1, dec = -1;
        double coeff = -1;
        ASSERT_EQ(gcx_code_arrival_coeff(c.get(), arrived.data(), order[k],
                                         &known, &coeff),
                  GCX_OK);
        ASSERT_EQ(known, 1);
        ASSERT_EQ(coeff, 1.0);
        gcx_wset_add(arrived.data(), order[k]);
        ASSERT_EQ(gcx_code_decodable(c.get(), arrived.data(), &dec), GCX_OK);
        ASSERT_EQ(dec, k + 1 == n ? 1 : 0) << "arrival " << k;
        if (k == n - 2 || k % 200 == 0) {
            EXPECT_EQ(gcx_code_decode_vector(c.get(), arrived.data(),
                                             a.data()),
                      GCX_ERR_UNDECODABLE);
        }
    }
    ASSERT_EQ(gcx_code_decode_vector(c.get(), arrived.data(), a.data()),
              GCX_OK);
    for (int w = 0; w < n; w++) {
        ASSERT_EQ(a[w], 1.0);
    }
}

/* WEIGHTED FR at n = 1000: the first n - s arrivals are folded in with
 * n / ((n - s)(s + 1)), later ones with 0; decodable exactly from n - s
 * arrivals; decode_vector uses the n - s lowest-numbered arrived. */
TEST(CodingLarge, WeightedFrAt1000)
{
    const int n = 1000;
    std::mt19937_64 rng(34);
    for (int s : {1, 4, 9}) {
        ASSERT_EQ(n % (s + 1), 0);
        SCOPED_TRACE(testing::Message() << "s " << s);
        auto c = make_code(GCX_CODE_FR, n, s, GCX_CODE_DECODE_WEIGHTED);
        ASSERT_TRUE(c);
        const double w = (double)n / ((double)(n - s) * (s + 1));
        int need = -1;
        ASSERT_EQ(gcx_code_stream_need(c.get(), &need), GCX_OK);
        EXPECT_EQ(need, n - s);
        for (int rep = 0; rep < 2; rep++) {
            auto order = random_order(n, rng);
            auto arrived = empty_set(n), used = empty_set(n);
            std::vector<double> applied(n, 0.0), a(n);
            int nonzero = 0;
            for (int k = 0; k < n; k++) {
                int known = -1, dec = -1;
                double coeff = -1;
                ASSERT_EQ(gcx_code_arrival_coeff(c.get(), arrived.data(),
                                                 order[k], &known, &coeff),
                          GCX_OK);
                ASSERT_EQ(known, 1);
                ASSERT_EQ(coeff, k < n - s ? w : 0.0) << "arrival " << k;
                if (coeff != 0.0) {
                    nonzero++;
                    applied[order[k]] = coeff;
                    gcx_wset_add(used.data(), order[k]);
                }
                gcx_wset_add(arrived.data(), order[k]);
                ASSERT_EQ(gcx_code_decodable(c.get(), arrived.data(), &dec),
                          GCX_OK);
                ASSERT_EQ(dec, k + 1 >= n - s ? 1 : 0) << "arrival " << k;
                ASSERT_EQ(dec, nonzero >= need ? 1 : 0);
                if (k + 1 == n - s - 1) {
                    EXPECT_EQ(gcx_code_decode_vector(c.get(), arrived.data(),
                                                     a.data()),
                              GCX_ERR_UNDECODABLE);
                }
            }
            ASSERT_EQ(gcx_code_decode_vector(c.get(), used.data(), a.data()),
                      GCX_OK);
            EXPECT_EQ(a, applied);
            ASSERT_EQ(gcx_code_decode_vector(c.get(), arrived.data(),
                                             a.data()),
                      GCX_OK);
            for (int i = 0; i < n; i++) {
                ASSERT_EQ(a[i], i < n - s ? w : 0.0) << "i " << i;
            }
        }
    }
}

/* Bits at and past n in the last word, and workers out of range, are
 * invalid; so are NULL sets. */
TEST(CodingLarge, BitsPastNAreInvalid)
{
    struct Case {
        gcx_code_kind_t kind;
        int n, s;
        gcx_code_decoding_t dec;
    } cases[] = {
        {GCX_CODE_FR, 96, 1, GCX_CODE_DECODE_EXACT},
        {GCX_CODE_FR, 200, 7, GCX_CODE_DECODE_EXACT},
        {GCX_CODE_UNCODED, 1000, 0, GCX_CODE_DECODE_EXACT},
        {GCX_CODE_FR, 1000, 4, GCX_CODE_DECODE_WEIGHTED},
        {GCX_CODE_FR, 65, 0, GCX_CODE_DECODE_EXACT},
    };
    for (const Case &cs : cases) {
        const int n = cs.n;
        SCOPED_TRACE(testing::Message() << "kind " << cs.kind << " n " << n
                                        << " s " << cs.s);
        ASSERT_NE(n % 64, 0);
        auto c = make_code(params(cs.kind, n, cs.s, cs.dec));
        ASSERT_TRUE(c);
        std::vector<double> a(n, 42.0);
        int dec = -1, known = -1;
        double coeff = -1;
        /* the full set decodes; the same with a bit past n does not */
        auto full = empty_set(n);
        for (int w = 0; w < n; w++) {
            gcx_wset_add(full.data(), w);
        }
        ASSERT_EQ(gcx_code_decodable(c.get(), full.data(), &dec), GCX_OK);
        EXPECT_EQ(dec, 1);
        for (int bit : {n % 64, 63}) {
            auto bad = full;
            bad.back() |= UINT64_C(1) << bit;
            dec = -1;
            std::fill(a.begin(), a.end(), 42.0);
            EXPECT_EQ(gcx_code_decodable(c.get(), bad.data(), &dec),
                      GCX_ERR_INVALID)
                << "bit " << bit;
            EXPECT_EQ(dec, -1) << "output written on failure";
            EXPECT_EQ(gcx_code_decode_vector(c.get(), bad.data(), a.data()),
                      GCX_ERR_INVALID)
                << "bit " << bit;
            EXPECT_EQ(a[0], 42.0) << "output written on failure";
            /* a before-set with a bit past n, worker 0 not in it */
            auto before = empty_set(n);
            before.back() |= UINT64_C(1) << bit;
            EXPECT_EQ(gcx_code_arrival_coeff(c.get(), before.data(), 0,
                                             &known, &coeff),
                      GCX_ERR_INVALID)
                << "bit " << bit;
        }
        auto none = empty_set(n);
        EXPECT_EQ(gcx_code_arrival_coeff(c.get(), none.data(), n, &known,
                                         &coeff),
                  GCX_ERR_INVALID);
        EXPECT_EQ(gcx_code_arrival_coeff(c.get(), none.data(), -1, &known,
                                         &coeff),
                  GCX_ERR_INVALID);
        /* the worker already arrived, in the last word */
        auto last = empty_set(n);
        gcx_wset_add(last.data(), n - 1);
        EXPECT_EQ(gcx_code_arrival_coeff(c.get(), last.data(), n - 1, &known,
                                         &coeff),
                  GCX_ERR_INVALID);
        EXPECT_EQ(gcx_code_arrival_coeff(c.get(), nullptr, 0, &known, &coeff),
                  GCX_ERR_INVALID);
        EXPECT_EQ(gcx_code_decodable(c.get(), nullptr, &dec),
                  GCX_ERR_INVALID);
        EXPECT_EQ(gcx_code_decode_vector(c.get(), nullptr, a.data()),
                  GCX_ERR_INVALID);
    }
}

/* stream_need per kind, at small n (UNCODED n, FR n / (s + 1), WEIGHTED
 * n - s; exact CR and MATRIX have none). */
TEST(CodingLarge, StreamNeedPerKind)
{
    int need = -1;
    auto un = make_code(GCX_CODE_UNCODED, 5, 0);
    auto fr = make_code(GCX_CODE_FR, 12, 2);
    auto frw = make_code(GCX_CODE_FR, 12, 2, GCX_CODE_DECODE_WEIGHTED);
    auto crw = make_code(GCX_CODE_CR, 7, 2, GCX_CODE_DECODE_WEIGHTED);
    auto cr = make_code(GCX_CODE_CR, 7, 2);
    std::vector<double> m = {0.5, 1, 0, 0, 1, -1, 0.5, 0, 1};
    auto mp = params(GCX_CODE_MATRIX, 3, 1);
    mp.matrix = m.data();
    auto mat = make_code(mp);
    ASSERT_TRUE(un && fr && frw && crw && cr && mat);
    ASSERT_EQ(gcx_code_stream_need(un.get(), &need), GCX_OK);
    EXPECT_EQ(need, 5);
    ASSERT_EQ(gcx_code_stream_need(fr.get(), &need), GCX_OK);
    EXPECT_EQ(need, 4);
    ASSERT_EQ(gcx_code_stream_need(frw.get(), &need), GCX_OK);
    EXPECT_EQ(need, 10);
    ASSERT_EQ(gcx_code_stream_need(crw.get(), &need), GCX_OK);
    EXPECT_EQ(need, 5);
    need = -1;
    EXPECT_EQ(gcx_code_stream_need(cr.get(), &need), GCX_ERR_UNSUPPORTED);
    EXPECT_EQ(gcx_code_stream_need(mat.get(), &need), GCX_ERR_UNSUPPORTED);
    EXPECT_EQ(gcx_code_stream_need(nullptr, &need), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_stream_need(fr.get(), nullptr), GCX_ERR_INVALID);
}

/* FR (s = 0, 1) and UNCODED build at the limit n = 65536 without an
 * n x n matrix (which would be 32 GiB): the heap grows by a few MB at
 * most; they decode; n = 65537 is refused. */
TEST(CodingLarge, FrAtTheLimitStaysSmall)
{
    const int n = 65536;
    for (auto kind : {GCX_CODE_FR, GCX_CODE_UNCODED}) {
        for (int s : {0, 1}) {
            if (kind == GCX_CODE_UNCODED && s != 0) {
                continue;
            }
            SCOPED_TRACE(testing::Message() << "kind " << kind << " s " << s);
            double before = heap_in_use();
            gcx_code_params_t p = params(kind, n, s);
            gcx_code_t *c = nullptr;
            ASSERT_EQ(gcx_code_create(&p, &c), GCX_OK);
            double grown = heap_in_use() - before;
            RecordProperty("create_bytes_" + std::to_string(kind) + "_s" +
                               std::to_string(s),
                           std::to_string(grown));
            EXPECT_LT(grown, 64.0 * 1024 * 1024)
                << "creating the code took " << grown << " bytes";
            EXPECT_EQ(gcx_code_workers(c), n);
            EXPECT_EQ(gcx_code_load(c), s + 1);
            int need = -1;
            ASSERT_EQ(gcx_code_stream_need(c, &need), GCX_OK);
            EXPECT_EQ(need, n / (s + 1));

            /* every worker arrived: the first of each group */
            auto full = empty_set(n);
            for (int w = 0; w < n; w++) {
                gcx_wset_add(full.data(), w);
            }
            std::vector<double> a(n, 42.0);
            int dec = -1;
            ASSERT_EQ(gcx_code_decodable(c, full.data(), &dec), GCX_OK);
            EXPECT_EQ(dec, 1);
            ASSERT_EQ(gcx_code_decode_vector(c, full.data(), a.data()),
                      GCX_OK);
            for (int w = 0; w < n; w++) {
                ASSERT_EQ(a[w], w % (s + 1) == 0 ? 1.0 : 0.0) << "w " << w;
            }
            /* the last worker missing */
            gcx_wset_del(full.data(), n - 1);
            ASSERT_EQ(gcx_code_decodable(c, full.data(), &dec), GCX_OK);
            EXPECT_EQ(dec, s == 0 ? 0 : 1);
            /* its coefficient on arrival, the others in */
            int known = -1;
            double coeff = -1;
            ASSERT_EQ(gcx_code_arrival_coeff(c, full.data(), n - 1, &known,
                                             &coeff),
                      GCX_OK);
            EXPECT_EQ(known, 1);
            EXPECT_EQ(coeff, s == 0 ? 1.0 : 0.0);
            int parts[2], cnt = -1;
            double coeffs[2];
            ASSERT_EQ(gcx_code_assignment(c, n - 1, parts, coeffs, &cnt),
                      GCX_OK);
            ASSERT_EQ(cnt, s + 1);
            EXPECT_EQ(parts[0], n - 1 - s);
            EXPECT_EQ(parts[cnt - 1], n - 1);
            gcx_code_destroy(c);
        }
    }
    for (auto kind : {GCX_CODE_FR, GCX_CODE_UNCODED}) {
        gcx_code_params_t p = params(kind, n + 1, 0);
        gcx_code_t *c = nullptr;
        EXPECT_EQ(gcx_code_create(&p, &c), GCX_ERR_UNSUPPORTED) << kind;
        EXPECT_EQ(c, nullptr);
    }
}
