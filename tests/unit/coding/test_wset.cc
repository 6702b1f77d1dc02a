/*
 * test_wset.cc - the worker-set helpers of gcx/wset.h (sets of any n,
 * GCX_WSET_WORDS(n) words, worker w = bit w % 64 of word w / 64) against a
 * std::vector<bool> reference, across word boundaries; and the storage of
 * a coded result (gcx_coded_result_alloc/free).
 */
#include "coding_test_util.h"

#include <gcx/coded.h>
#include <gcx/wset.h>

#include <cstring>

using namespace gcxtest;

namespace
{

constexpr uint64_t kGuard = UINT64_C(0xa5a5a5a5a5a5a5a5);

/* A set over n workers followed by a guard word no helper may touch. */
struct Guarded {
    int n;
    std::vector<uint64_t> words;
    explicit Guarded(int n_) : n(n_), words(GCX_WSET_WORDS(n_) + 1, 0)
    {
        words.back() = kGuard;
    }
    uint64_t *set()
    {
        return words.data();
    }
    bool guard_intact() const
    {
        return words.back() == kGuard;
    }
};

void expect_matches(const Guarded &g, const std::vector<bool> &ref)
{
    int count = 0;
    for (int w = 0; w < g.n; w++) {
        ASSERT_EQ(gcx_wset_has(g.words.data(), w), ref[w] ? 1 : 0)
            << "n " << g.n << " worker " << w;
        count += ref[w];
    }
    EXPECT_EQ(gcx_wset_count(g.words.data(), g.n), count) << "n " << g.n;
    /* bits at and past n stay zero */
    size_t words = GCX_WSET_WORDS(g.n);
    if (g.n % 64 != 0) {
        EXPECT_EQ(g.words[words - 1] >> (g.n % 64), 0u) << "n " << g.n;
    }
    EXPECT_TRUE(g.guard_intact()) << "n " << g.n;
}

} // namespace

TEST(CodingWset, WordsPerSet)
{
    EXPECT_EQ(GCX_WSET_WORDS(1), 1u);
    EXPECT_EQ(GCX_WSET_WORDS(63), 1u);
    EXPECT_EQ(GCX_WSET_WORDS(64), 1u);
    EXPECT_EQ(GCX_WSET_WORDS(65), 2u);
    EXPECT_EQ(GCX_WSET_WORDS(128), 2u);
    EXPECT_EQ(GCX_WSET_WORDS(129), 3u);
    EXPECT_EQ(GCX_WSET_WORDS(200), 4u);
    EXPECT_EQ(GCX_WSET_WORDS(65536), 1024u);
}

/* Worker w is bit w % 64 of word w / 64, alone in its set. */
TEST(CodingWset, BitLayout)
{
    for (int n : {1, 63, 64, 65, 200}) {
        for (int w = 0; w < n; w++) {
            Guarded g(n);
            gcx_wset_add(g.set(), w);
            for (size_t k = 0; k < GCX_WSET_WORDS(n); k++) {
                EXPECT_EQ(g.words[k], k == (size_t)w / 64
                                          ? UINT64_C(1) << (w % 64)
                                          : UINT64_C(0))
                    << "n " << n << " w " << w << " word " << k;
            }
            EXPECT_EQ(gcx_wset_count(g.set(), n), 1);
            EXPECT_TRUE(g.guard_intact());
        }
    }
}

/* add / has / del / count around every word boundary, then random
 * operations against the reference. */
TEST(CodingWset, AddHasDelCountAcrossWordBoundaries)
{
    std::mt19937_64 rng(21);
    for (int n : {1, 63, 64, 65, 200}) {
        SCOPED_TRACE(testing::Message() << "n " << n);
        Guarded g(n);
        std::vector<bool> ref(n, false);
        expect_matches(g, ref);

        /* the workers on each side of every word boundary, and the ends */
        std::vector<int> edge;
        for (int w : {0, 1, 62, 63, 64, 65, 127, 128, 129, 191, 192, 199,
                      n - 2, n - 1}) {
            if (w >= 0 && w < n) {
                edge.push_back(w);
            }
        }
        for (int w : edge) {
            gcx_wset_add(g.set(), w);
            ref[w] = true;
            expect_matches(g, ref);
        }
        gcx_wset_add(g.set(), edge[0]); /* adding twice: no change */
        expect_matches(g, ref);
        for (int w : edge) {
            gcx_wset_del(g.set(), w);
            ref[w] = false;
            expect_matches(g, ref);
        }
        gcx_wset_del(g.set(), edge[0]); /* deleting an absent worker */
        expect_matches(g, ref);
        EXPECT_EQ(gcx_wset_count(g.set(), n), 0);

        /* every worker, then none */
        for (int w = 0; w < n; w++) {
            gcx_wset_add(g.set(), w);
            ref[w] = true;
        }
        expect_matches(g, ref);
        EXPECT_EQ(gcx_wset_count(g.set(), n), n);
        gcx_wset_clear(g.set(), n);
        std::fill(ref.begin(), ref.end(), false);
        expect_matches(g, ref);

        for (int op = 0; op < 2000; op++) {
            int w = (int)(rng() % (uint64_t)n);
            if (rng() % 2) {
                gcx_wset_add(g.set(), w);
                ref[w] = true;
            } else {
                gcx_wset_del(g.set(), w);
                ref[w] = false;
            }
            if (op % 97 == 0) {
                expect_matches(g, ref);
            }
        }
        expect_matches(g, ref);
    }
}

/* copy and equal use exactly GCX_WSET_WORDS(n) words; clear empties them
 * and nothing past them. */
TEST(CodingWset, CopyEqualClear)
{
    std::mt19937_64 rng(22);
    for (int n : {1, 63, 64, 65, 200}) {
        SCOPED_TRACE(testing::Message() << "n " << n);
        Guarded a(n), b(n);
        b.words.back() = ~kGuard; /* different guards: not compared */
        for (int w = 0; w < n; w++) {
            if (rng() % 3 == 0) {
                gcx_wset_add(a.set(), w);
            }
        }
        gcx_wset_add(a.set(), n - 1);
        EXPECT_EQ(gcx_wset_equal(a.set(), b.set(), n), 0);
        gcx_wset_copy(b.set(), a.set(), n);
        EXPECT_EQ(b.words.back(), ~kGuard) << "copy wrote past the set";
        EXPECT_TRUE(a.guard_intact());
        EXPECT_EQ(gcx_wset_equal(a.set(), b.set(), n), 1);
        EXPECT_EQ(gcx_wset_equal(b.set(), a.set(), n), 1);
        EXPECT_EQ(gcx_wset_count(b.set(), n), gcx_wset_count(a.set(), n));
        for (int w = 0; w < n; w++) {
            EXPECT_EQ(gcx_wset_has(b.set(), w), gcx_wset_has(a.set(), w));
        }
        /* one worker differs, in any word: not equal */
        for (int w : {0, n / 2, n - 1}) {
            gcx_wset_copy(b.set(), a.set(), n);
            if (gcx_wset_has(b.set(), w)) {
                gcx_wset_del(b.set(), w);
            } else {
                gcx_wset_add(b.set(), w);
            }
            EXPECT_EQ(gcx_wset_equal(a.set(), b.set(), n), 0) << "w " << w;
            EXPECT_EQ(gcx_wset_equal(b.set(), a.set(), n), 0) << "w " << w;
        }
        gcx_wset_clear(a.set(), n);
        EXPECT_EQ(gcx_wset_count(a.set(), n), 0);
        for (size_t k = 0; k < GCX_WSET_WORDS(n); k++) {
            EXPECT_EQ(a.words[k], 0u);
        }
        EXPECT_TRUE(a.guard_intact()) << "clear wrote past the set";
        gcx_wset_clear(b.set(), n);
        EXPECT_EQ(gcx_wset_equal(a.set(), b.set(), n), 1);
    }
}

/* gcx_coded_result_alloc points the three sets and the arrival times at
 * distinct, zeroed storage for n workers; gcx_coded_result_free zeroes the
 * whole result. */
TEST(CodedResult, AllocAndFree)
{
    const int n = 100;
    const size_t words = GCX_WSET_WORDS(n);
    gcx_coded_result_t r;
    std::memset(&r, 0x5a, sizeof(r)); /* alloc must zero the scalars */
    ASSERT_EQ(gcx_coded_result_alloc(&r, n), GCX_OK);
    ASSERT_NE(r.arrived, nullptr);
    ASSERT_NE(r.used, nullptr);
    ASSERT_NE(r.abstained, nullptr);
    ASSERT_NE(r.arrival, nullptr);
    EXPECT_EQ(r.round, 0u);
    EXPECT_EQ(r.round_time, 0.0);
    EXPECT_EQ(r.skipped, 0);
    EXPECT_EQ(r.lost, 0);
    uint64_t *sets[3] = {r.arrived, r.used, r.abstained};
    for (uint64_t *set : sets) {
        EXPECT_EQ(gcx_wset_count(set, n), 0);
        for (size_t k = 0; k < words; k++) {
            EXPECT_EQ(set[k], 0u);
        }
    }
    /* distinct and not overlapping: fill each region with its own pattern
     * (whole words, n floats) and read every one back */
    const void *starts[4] = {r.arrived, r.used, r.abstained, r.arrival};
    for (int i = 0; i < 4; i++) {
        for (int j = i + 1; j < 4; j++) {
            EXPECT_NE(starts[i], starts[j]) << i << " " << j;
        }
    }
    for (int k = 0; k < 3; k++) {
        for (size_t q = 0; q < words; q++) {
            sets[k][q] = UINT64_C(0x0101010101010101) * (uint64_t)(k + 1);
        }
    }
    for (int w = 0; w < n; w++) {
        r.arrival[w] = (float)w + 0.5f;
    }
    for (int k = 0; k < 3; k++) {
        for (size_t q = 0; q < words; q++) {
            EXPECT_EQ(sets[k][q],
                      UINT64_C(0x0101010101010101) * (uint64_t)(k + 1))
                << "set " << k << " word " << q;
        }
    }
    for (int w = 0; w < n; w++) {
        EXPECT_EQ(r.arrival[w], (float)w + 0.5f) << w;
    }
    gcx_coded_result_free(&r);
    gcx_coded_result_t zero;
    std::memset(&zero, 0, sizeof(zero));
    EXPECT_EQ(std::memcmp(&r, &zero, sizeof(r)), 0) << "free zeroes it";
    gcx_coded_result_free(&r); /* a zeroed result: nothing to free */
    gcx_coded_result_free(nullptr);

    EXPECT_EQ(gcx_coded_result_alloc(&r, 0), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_coded_result_alloc(&r, -1), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_coded_result_alloc(nullptr, 4), GCX_ERR_INVALID);

    /* one worker, and sizes around a word boundary */
    for (int m : {1, 64, 65}) {
        ASSERT_EQ(gcx_coded_result_alloc(&r, m), GCX_OK) << m;
        EXPECT_EQ(gcx_wset_count(r.used, m), 0);
        for (int w = 0; w < m; w++) {
            r.arrival[w] = 1.0f;
        }
        gcx_wset_add(r.abstained, m - 1);
        EXPECT_EQ(gcx_wset_count(r.arrived, m), 0);
        EXPECT_EQ(gcx_wset_count(r.used, m), 0);
        gcx_coded_result_free(&r);
    }
}
