// Coded aggregation past 64 workers (issue 45): worker sets of more than one
// 64-bit word, in the public results and on the wire, through both
// algorithms of the coded object. An FR code (s = 1, groups {2g, 2g+1}) on
// every rank of a job of more than 64 ranks; the last worker (its set bit
// in the second word or later) is delayed in every round
// (GCX_STRAGGLER_RANKS), so each round decodes from its group-mate. Every
// round, on every rank: the decoded sum equals the serial sum of the
// partition gradients, computed here from their definition (exact small
// integers in float); used never holds the delayed worker, always its
// mate, and at least one worker of each group; nothing is set past n.
// CodedWide.StarFrPastOneWord: the star (one decode, so used has exactly
// one worker of each group and is a subset of arrived; the root's arrival
// times are finite for what arrived).
// CodedWide.MasterlessFrPastOneWord: the master-less coded allreduce (a
// decode per chunk: used is their union; arrived, what reached this rank's
// own chunk, has a worker of each group, and arrival times are NAN).
// CodedWide.MasterlessRefusesMoreThan64Owners: s + 1 > 64 is refused by
// master-less on every rank (auto takes the star), the world goes on.
#include "../harness.h"
#include "coded_util.h"

#include <gcx/coded.h>
#include <gcx/coding.h>
#include <gcx/wset.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace coded_test;

// Partition j's gradient at round r, element i (small integers: any sum
// of them is exact in float).
float wide_grad(int j, int r, size_t i)
{
    return static_cast<float>((j % 13) - 6 + (r % 5) + static_cast<int>(i % 7));
}

// The checks above, through the object's algorithm @p algo.
void fr_past_one_word(gcx_coded_algo_t algo)
{
    const int n = world_size(), rank = world_rank(), rounds = 4;
    const bool star = algo == GCX_CODED_ALGO_STAR;
    const size_t count = 256;
    if (n <= 64 || n % 2 != 0) {
        GTEST_SKIP() << "needs an even number of ranks above 64, has " << n;
    }
    const int late = n - 1; // worker n-1: a bit of the last word
    std::string late_str = std::to_string(late);
    gcx_comm_t *comm = make_comm({{"STRAGGLER_RANKS", late_str.c_str()},
                                  {"STRAGGLER_DELAY_MS", "300"}});
    ASSERT_NE(nullptr, comm);

    gcx_code_t *code = make_code(GCX_CODE_FR, n, 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code  = code;
    params.count = count;
    params.root  = 0;
    params.algo  = algo;
    gcx_coded_t *coded = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &coded));

    Result res(n);
    std::vector<float> msg(count), sum(count);
    int wrong = 0;
    for (int r = 0; r < rounds; ++r) {
        // worker `rank` holds partitions 2g and 2g+1 of its group g
        for (size_t i = 0; i < count; ++i) {
            msg[i] = wide_grad(rank & ~1, r, i) + wide_grad(rank | 1, r, i);
        }
        ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr))
            << "round " << r;
        for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int j = 0; j < n; ++j) {
                want += wide_grad(j, r, i);
            }
            wrong += sum[i] != want;
        }
        const gcx_coded_result_t *out = res.get();
        EXPECT_EQ(static_cast<uint64_t>(r), out->round);
        for (int g = 0; g < n / 2; ++g) {
            int in_used = gcx_wset_has(out->used, 2 * g) + gcx_wset_has(out->used, 2 * g + 1);
            if (star) {
                EXPECT_EQ(1, in_used) << "round " << r << " group " << g;
            } else {
                EXPECT_LE(1, in_used) << "round " << r << " group " << g;
                EXPECT_LE(1, gcx_wset_has(out->arrived, 2 * g) +
                                 gcx_wset_has(out->arrived, 2 * g + 1))
                    << "round " << r << " group " << g << ": this rank's chunk decoded without it";
            }
        }
        EXPECT_FALSE(gcx_wset_has(out->used, late)) << "round " << r << ": the delayed worker";
        EXPECT_TRUE(gcx_wset_has(out->used, late - 1)) << "round " << r << ": its group-mate";
        for (size_t k = 0; star && k < GCX_WSET_WORDS(n); ++k) {
            EXPECT_EQ(0u, out->used[k] & ~out->arrived[k]) << "round " << r << " word " << k;
        }
        if (n % 64 != 0) {
            size_t last = GCX_WSET_WORDS(n) - 1;
            EXPECT_EQ(0u, out->arrived[last] >> (n % 64)) << "round " << r;
            EXPECT_EQ(0u, out->used[last] >> (n % 64)) << "round " << r;
            EXPECT_EQ(0u, out->abstained[last] >> (n % 64)) << "round " << r;
        }
        if (star && rank == 0) { // the root timed the arrivals
            for (int w = 0; w < n; ++w) {
                EXPECT_EQ(gcx_wset_has(out->arrived, w) != 0, std::isfinite(out->arrival[w]))
                    << "round " << r << " worker " << w;
            }
        } else if (!star) { // no root: nobody times arrivals
            for (int w = 0; w < n; ++w) {
                EXPECT_TRUE(std::isnan(out->arrival[w])) << "round " << r << " worker " << w;
            }
        }
    }
    EXPECT_EQ(0, wrong);
    Stats st(n);
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, st.get()));
    EXPECT_EQ(0u, st->gone_count);

    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr));
    gcx_comm_destroy(comm);
    EXPECT_EQ(0u, sum_over_world(static_cast<uint64_t>(wrong)));
}

TEST(CodedWide, StarFrPastOneWord)
{
    fr_past_one_word(GCX_CODED_ALGO_STAR);
}

TEST(CodedWide, MasterlessFrPastOneWord)
{
    fr_past_one_word(GCX_CODED_ALGO_MASTERLESS);
}

// A chunk's owners are bits of one word: a code whose s + 1 passes 64 is
// refused by the master-less algorithm on every rank alike (after the
// ranks agreed on the code, so none waits for one that refused alone),
// and the communicator goes on.
TEST(CodedWide, MasterlessRefusesMoreThan64Owners)
{
    const int n = world_size();
    if (n <= 64) {
        GTEST_SKIP() << "needs more than 64 ranks, has " << n;
    }
    gcx_code_t *code = make_code(GCX_CODE_FR, n, n - 1); // one group of n
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code  = code;
    params.count = 16;
    params.algo  = GCX_CODED_ALGO_MASTERLESS;
    gcx_coded_t *coded = nullptr;
    EXPECT_EQ(GCX_ERR_UNSUPPORTED, gcx_coded_create(g_world, &params, &coded));
    EXPECT_EQ(nullptr, coded);
    params.algo = GCX_CODED_ALGO_AUTO; // auto takes the star for it
    ASSERT_EQ(GCX_OK, gcx_coded_create(g_world, &params, &coded));
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    EXPECT_EQ(GCX_OK, gcx_barrier(g_world, nullptr)); // nothing was broken
}

} // namespace
