// Master-less coded allreduce (gcx_coded_allreduce): every round's result is
// checked on every rank against the serial sum of the partition gradients
// (computed here, independently of gcx), against the coded gather's star
// fed the same messages in the same round, and across ranks bit for bit
// (every rank must hold the same bits). Random straggler delays
// (GCX_STRAGGLER_MEAN_MS) make chunks late, early and unneeded, so the
// owners decode from changing arrival sets; the test checks those paths were
// taken. Chunk sizes include 0 (count < ranks), 1 and odd ones. A rank
// slow to enter a round has its chunk served ahead of its call.
// CodedAllreduce.Abstention*: a whole FR group abstains from a round: it
// fails at once, or with lost_rounds is lost on every rank alike.
// CodedAllreduceFailure.*: ranks vanish in the middle of a round; the next
// owner of each of their chunks takes over and every survivor completes
// every round, right and with the same bits.
#include "../harness.h"
#include "coded_util.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace {

using namespace coded_test;

// in_place: received chunks read where the transport assembled them
// (GCX_CODED_IN_PLACE=y, the default) or copied into internal buffers first
void rounds(gcx_code_kind_t kind, int s, size_t count, int nrounds, bool in_place = true)
{
    gcx_comm_t *comm = make_comm({{"STRAGGLER_MEAN_MS", "3"},
                                  {"STRAGGLER_SEED", "11"},
                                  {"CODED_IN_PLACE", in_place ? "y" : "n"}});
    ASSERT_NE(nullptr, comm);
    int               n  = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    gcx_code_t *code = make_code(kind, n, s);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = count;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    gcx_coded_t *star = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &star));

    std::vector<float> msg(count), sum(count), star_sum(count);
    // FR decodes integers exactly; CR's least-squares coefficients round
    double tol = kind == GCX_CODE_FR ? 0.0 : 1e-3 * 11 * n;
    int    wrong = 0, unequal = 0, differ = 0;
    for (int r = 0; r < nrounds; ++r) {
        encode(code, rank, r, count, msg);
        Result res(n);
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr))
            << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res->round);
        ASSERT_EQ(GCX_OK, gcx_coded_gather(star, msg.data(), star_sum.data(), nullptr, nullptr));
        double err = max_err_from_serial(sum, n, r), star_err = 0;
        for (size_t i = 0; i < count; ++i) {
            star_err = std::max(star_err, std::fabs(double(star_sum[i]) - sum[i]));
        }
        if (err > tol) {
            ++wrong;
            ADD_FAILURE() << "round " << r << ": decoded sum off by " << err;
        }
        if (star_err > tol) {
            ++differ;
            ADD_FAILURE() << "round " << r << ": differs from the star by " << star_err;
        }
        if (!same_on_every_rank(comm, checksum(sum))) {
            ++unequal;
            ADD_FAILURE() << "round " << r << ": ranks hold different bits";
        }
    }
    gcx_coded_stats_t st = {};
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
    EXPECT_EQ(static_cast<uint64_t>(nrounds), st.rounds);
    printf("rank %d: count %zu: %d rounds, late %llu unneeded %llu early %llu skipped %llu "
           "in place %llu, %d wrong %d unequal %d differ\n",
           rank, count, nrounds, (unsigned long long)st.late_dropped,
           (unsigned long long)st.unneeded, (unsigned long long)st.early,
           (unsigned long long)st.skipped, (unsigned long long)st.in_place, wrong, unequal,
           differ);
    uint64_t late = st.late_dropped + st.unneeded + st.skipped + st.early;
    uint64_t kept_in_place = sum_over_world(st.in_place);
    gcx_coded_allreduce_destroy(car);
    gcx_coded_destroy(star);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
    if (n > 1 && count >= static_cast<size_t>(n)) {
        EXPECT_GT(sum_over_world(late), 0u); // the late/early paths ran somewhere
    }
    if (!in_place || count == 0) {
        // every chunk went through a copy; or none had a payload to keep
        // (header-only messages take no buffer at all)
        EXPECT_EQ(0u, kept_in_place);
    } else if (n > 1) {
        // UCX 1.13 hands every eager active message of these transports
        // (shared memory, TCP) over as persistent data: the receive without
        // a copy is the path these rounds took, not a fallback never run
        EXPECT_GT(kept_in_place, 0u);
    }
}

TEST(CodedAllreduce, FrRandomStragglers)
{
    int s = fr_s(world_size());
    if (s == 0) {
        GTEST_SKIP() << "no FR code with s >= 1 for " << world_size() << " ranks";
    }
    for (size_t count : {size_t(1000), size_t(1), size_t(0), size_t(world_size() - 1)}) {
        rounds(GCX_CODE_FR, s, count, count >= 1000 ? 120 : 10);
    }
}

// FR with groups of unequal size (s + 1 does not divide n): master-less
// and star, each against the serial sum
TEST(CodedAllreduce, FrUnevenGroups)
{
    int s = fr_uneven_s(world_size());
    if (s == 0) {
        GTEST_SKIP() << "every s + 1 divides " << world_size() << " ranks";
    }
    rounds(GCX_CODE_FR, s, 1000, 60);
}

TEST(CodedAllreduce, CrRandomStragglers)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    for (size_t count : {size_t(1001), size_t(world_size() + 2)}) {
        rounds(GCX_CODE_CR, 1, count, count >= 1000 ? 120 : 10);
    }
}

// The same rounds with every received chunk copied into an internal buffer
// first (GCX_CODED_IN_PLACE=n): the path for a transport that cannot keep
// a payload in place.
TEST(CodedAllreduce, CopiedChunks)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    rounds(GCX_CODE_CR, 1, 1001, 60, false);
    int s = fr_s(world_size());
    if (s > 0) {
        rounds(GCX_CODE_FR, s, size_t(world_size() - 1), 10, false);
    }
}

TEST(CodedAllreduce, CrTwoStragglers)
{
    if (world_size() < 4) {
        GTEST_SKIP() << "needs 4 ranks";
    }
    rounds(GCX_CODE_CR, 2, 4099, 100);
}

// FR n = 4, s = 1 (groups {0, 1} and {2, 3}): both workers of one group
// abstain from round 5 (gcx_coded_allreduce_abstain: a VOID to every
// chunk's owner; group 0 owns chunks 0 and 1 itself, so its abstention is
// also local), which no decode can do without. Without lost_rounds every
// rank fails round 5 with GCX_ERR_UNDECODABLE (every chunk's owner sees
// the same VOIDs), at once rather than after GCX_TIMEOUT (the test's own
// timeout is far below it). With lost_rounds round 5 completes on every
// rank as lost -- result.lost, used 0, recvbuf untouched -- and the rounds
// around it are decoded right, from the serial sum.
void abstaining_group(int group, bool lost_rounds)
{
    if (world_size() != 4) {
        GTEST_SKIP() << "needs 4 ranks";
    }
    const float sentinel = -7.25f;
    gcx_comm_t *comm     = make_comm({});
    ASSERT_NE(nullptr, comm);
    int         rank = gcx_comm_rank(comm);
    gcx_code_t *code = make_code(GCX_CODE_FR, 4, 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 4099;
    params.lost_rounds        = lost_rounds ? 1 : 0;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    gcx_status_t       status = GCX_OK;
    int                r;
    for (r = 0; r < 10; ++r) {
        bool abstain = r == 5 && rank / 2 == group;
        encode(code, rank, r, params.count, msg);
        std::fill(sum.begin(), sum.end(), sentinel);
        Result res(4);
        status = abstain ? gcx_coded_allreduce_abstain(car, sum.data(), res.get(), nullptr)
                         : gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr);
        if (status != GCX_OK) {
            break;
        }
        if (r == 5) {
            EXPECT_EQ(1, res->lost) << "round 5 was decoded from 0x" << std::hex << res.used();
            EXPECT_EQ(0u, res.used());
            EXPECT_EQ(params.count, static_cast<size_t>(std::count(sum.begin(), sum.end(),
                                                                   sentinel)))
                << "a lost round wrote recvbuf";
        } else {
            EXPECT_EQ(0, res->lost) << "round " << r;
            EXPECT_LE(max_err_from_serial(sum, 4, r), 1e-3 * 11 * 4) << "round " << r;
        }
        if (abstain) {
            EXPECT_NE(0u, res.abstained() & (1ull << rank)) << "its own VOID, as owner";
        }
    }
    gcx_coded_stats_t st = {};
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
    printf("rank %d: stopped at round %d with '%s'; rounds %llu, lost %llu, abstained %llu\n",
           rank, r, gcx_strerror(status), (unsigned long long)st.rounds,
           (unsigned long long)st.rounds_lost, (unsigned long long)st.abstained);
    if (lost_rounds) {
        EXPECT_EQ(GCX_OK, status);
        EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr)); // the others still take our chunks
        EXPECT_EQ(10, r);
        EXPECT_EQ(1u, st.rounds_lost);
        EXPECT_EQ(rank / 2 == group ? 1u : 0u, st.abstained);
    } else {
        EXPECT_EQ(GCX_ERR_UNDECODABLE, status) << gcx_strerror(status);
        EXPECT_EQ(5, r) << "the round the group abstained from";
    }
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

TEST(CodedAllreduce, AbstentionsFailTheRound)
{
    abstaining_group(1, false);
}

TEST(CodedAllreduce, AbstentionsLoseTheRound)
{
    abstaining_group(1, true);
}

TEST(CodedAllreduce, AbstentionsOfOwnersLoseTheRound)
{
    abstaining_group(0, true);
}

// lost_rounds: every call passes a result (it says whether the round was
// lost); without one the call is refused, before any message goes.
TEST(CodedAllreduce, LostRoundsNeedAResult)
{
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    int         n    = gcx_comm_size(comm);
    gcx_code_t *code = make_code(GCX_CODE_CR, n, n > 1 ? 1 : 0);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 16;
    params.lost_rounds        = 1;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count, 1.0f), sum(params.count);
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_coded_allreduce(car, msg.data(), sum.data(), nullptr, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_coded_allreduce_abstain(car, sum.data(), nullptr, nullptr));
    Result res(n);
    encode(code, gcx_comm_rank(comm), 0, params.count, msg);
    EXPECT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr));
    EXPECT_EQ(0u, res->round) << "the refused calls took no round number";
    EXPECT_EQ(0, res->lost);
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr)); // the others still take our chunk
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// One fixed slow rank: its chunks come after every owner decoded without
// them (dropped unread) or are not sent at all (skipped), and the results
// stay right.
TEST(CodedAllreduce, FixedStragglerIsNeverWaitedFor)
{
    if (world_size() < 3) {
        GTEST_SKIP() << "needs 3 ranks";
    }
    gcx_comm_t *comm = make_comm({{"STRAGGLER_RANKS", "1"}, {"STRAGGLER_DELAY_MS", "30"}});
    ASSERT_NE(nullptr, comm);
    int               n  = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    gcx_code_t *code = make_code(GCX_CODE_CR, n, 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 3000;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    uint64_t           used_slow = 0;
    for (int r = 0; r < 20; ++r) {
        encode(code, rank, r, params.count, msg);
        Result res(n);
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr));
        ASSERT_LE(max_err_from_serial(sum, n, r), 1e-3 * 11 * n) << "round " << r;
        used_slow += gcx_wset_has(res->used, 1);
    }
    gcx_coded_stats_t st = {};
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
    // no chunk was ever decoded from the slow rank's message: it was never
    // waited for (every round's owners had a decodable set before it sent)
    EXPECT_EQ(0u, used_slow);
    if (rank == 1) {
        EXPECT_GT(st.skipped, 0u);
    }
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// A rank slow to *enter* a round (still computing its gradient, while its
// process progresses, as a framework's progress thread does): the chunk it
// owns is decoded and published ahead of its call, so the others complete
// the round without it. Ordered by marker files, not by time: the late rank
// enters round 5 only once every other rank has finished round 5, and
// progresses the communicator while it waits. Without serving ahead the
// others wait for its chunk until GCX_TIMEOUT (20 s) fails them.
std::string car_marker(const char *name, int rank)
{
    return job_marker((std::string(name) + "-" + std::to_string(rank)).c_str());
}

// The late rank waits, progressing the communicator, until every other
// rank has touched its marker @p name (what it has done: @p what).
void wait_for_the_others(gcx_comm_t *comm, int late, const char *name, const std::string &what)
{
    for (int q = 0; q < gcx_comm_size(comm); ++q) {
        if (q != late) {
            EXPECT_TRUE(wait_for_marker(car_marker(name, q), comm))
                << "rank " << q << " never " << what << " without the late rank";
        }
    }
}

void late_entrant(gcx_code_kind_t kind, int s)
{
    gcx_comm_t *comm = make_comm({{"TIMEOUT", "20"}});
    ASSERT_NE(nullptr, comm);
    int         n = gcx_comm_size(comm), rank = gcx_comm_rank(comm), late = n - 1;
    gcx_code_t *code = make_code(kind, n, s);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 10007;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    double             tol = kind == GCX_CODE_FR ? 0.0 : 1e-3 * 11 * n;
    for (int r = 0; r < 10; ++r) {
        encode(code, rank, r, params.count, msg);
        if (rank == late && r == 5) {
            wait_for_the_others(comm, late, "car-late", "finished round 5");
            ASSERT_FALSE(::testing::Test::HasFailure());
        }
        Result res(n);
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr))
            << "round " << r;
        EXPECT_LE(max_err_from_serial(sum, n, r), tol) << "round " << r;
        if (r == 5) {
            // every chunk of round 5 was decoded without the late rank
            EXPECT_EQ(0, gcx_wset_has(res->used, late)) << "used " << res.used();
            if (rank != late) {
                touch_marker(car_marker("car-late", rank));
            }
        }
        EXPECT_TRUE(same_on_every_rank(comm, checksum(sum))) << "round " << r;
    }
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    unlink(car_marker("car-late", rank).c_str());
    gcx_comm_destroy(comm);
}

TEST(CodedAllreduce, LateEntrantOwnerIsServedAheadCr)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    late_entrant(GCX_CODE_CR, 1);
}

TEST(CodedAllreduce, LateEntrantOwnerIsServedAheadFr)
{
    int s = fr_s(world_size());
    if (s == 0) {
        GTEST_SKIP() << "no FR code with s >= 1 for " << world_size() << " ranks";
    }
    late_entrant(GCX_CODE_FR, s);
}

// A rank far behind: it enters round 0 only once every other rank has
// finished rounds 0..lag-1, progressing meanwhile. Its chunks of all those
// rounds were served ahead, so the others never waited; it then finds each
// of those rounds' sums here (gcx_coded_allreduce_ready) and abstains from
// them without computing, as a training loop catches up; the next four
// rounds run as usual. @p ahead: GCX_CODED_AHEAD (NULL: the default).
static void lagging_rank_catches_up(int lag, const char *ahead)
{
    gcx_comm_t *comm = ahead != nullptr ?
                           make_comm({{"TIMEOUT", "20"}, {"CODED_AHEAD", ahead}}) :
                           make_comm({{"TIMEOUT", "20"}});
    ASSERT_NE(nullptr, comm);
    int         n = gcx_comm_size(comm), rank = gcx_comm_rank(comm), late = n - 1;
    gcx_code_t *code = make_code(GCX_CODE_CR, n, 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 5003;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    int                abstained = 0;
    uint64_t           bits = 0, held_bytes = 0;
    for (int r = 0; r < lag + 4; ++r) {
        if (rank == late && r == 0) {
            wait_for_the_others(comm, late, "car-lag", "finished " + std::to_string(lag) + " rounds");
            ASSERT_FALSE(::testing::Test::HasFailure());
        }
        Result res(n);
        if (rank == late && r < lag) {
            // the others finished round r: its decoded chunks reach this
            // rank (a deadline only so that a failure cannot hang)
            int ready = 0;
            for (int i = 0; i < 60000 && !ready; ++i) {
                ASSERT_EQ(GCX_OK, gcx_coded_allreduce_ready(car, &ready));
                if (!ready) {
                    usleep(1000);
                }
            }
            ASSERT_TRUE(ready) << "round " << r << " never complete here";
            if (r == 0) {
                // every round of the lag is here, served ahead: what that
                // holds in internal buffers
                gcx_coded_stats_t st = {};
                ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
                held_bytes = st.buffer_bytes;
            }
            ASSERT_EQ(GCX_OK, gcx_coded_allreduce_abstain(car, sum.data(), res.get(), nullptr))
                << "round " << r;
            EXPECT_EQ(1, res->skipped) << "round " << r;
            ++abstained;
        } else {
            encode(code, rank, r, params.count, msg);
            ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr))
                << "round " << r;
        }
        ASSERT_EQ(static_cast<uint64_t>(r), res->round);
        EXPECT_LE(max_err_from_serial(sum, n, r), 1e-3 * 11 * n) << "round " << r;
        if (r < lag) {
            EXPECT_EQ(0, gcx_wset_has(res->used, late)) << "round " << r << " used "
                                                          << res.used();
        }
        if (r == lag - 1 && rank != late) {
            touch_marker(car_marker("car-lag", rank));
        }
        bits = bits * 1099511628211ull ^ checksum(sum);
    }
    EXPECT_TRUE(same_on_every_rank(comm, bits)) << "ranks hold different bits";
    EXPECT_EQ(rank == late ? lag : 0, abstained);
    if (rank == late) {
        // per round served ahead: the chunk it decoded and published (one
        // block, its sends may outlive the round); the others' decoded
        // chunks and COMMITs are held in place or header-only and take none
        // (before, one chunk-sized block each: about 2 vectors per round)
        size_t chunk = (params.count + n - 1) / n * sizeof(float);
        printf("rank %d: %d rounds behind: %llu bytes of buffers, chunk %zu\n", rank, lag,
               (unsigned long long)held_bytes, chunk);
        EXPECT_LE(held_bytes, (lag + 2) * chunk) << "chunk " << chunk;
    }
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    unlink(car_marker("car-lag", rank).c_str());
    gcx_comm_destroy(comm);
}

// 6 rounds behind: within GCX_CODED_AHEAD=8
TEST(CodedAllreduce, LaggingRankCatchesUpBySkipping)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    lagging_rank_catches_up(6, "8");
}

// 40 rounds behind with the default window (GCX_CODED_AHEAD=0): 5003 floats
// are 20 KB, so GCX_CODED_AHEAD_BYTES' 64 MB spans the largest window, 256
// rounds; with a window of 8 the others would wait for this rank at round
// 8 and the test would time out.
TEST(CodedAllreduce, LaggingRankFarBehindWithTheDefaultWindow)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    lagging_rank_catches_up(40, nullptr);
}

// Every rank must serve the same window (a later owner keeps its copies of
// a chunk for as many rounds as a rank can lag): creation fails on every
// rank when one rank's GCX_CODED_AHEAD differs.
TEST(CodedAllreduce, WindowsThatDifferFailTheCreation)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    gcx_comm_t *comm = make_comm({{"TIMEOUT", "20"},
                                  {"CODED_AHEAD", world_rank() == 0 ? "4" : "8"}});
    ASSERT_NE(nullptr, comm);
    gcx_code_t *code = make_code(GCX_CODE_CR, gcx_comm_size(comm), 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 1000;
    gcx_coded_allreduce_t *car = nullptr;
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_coded_allreduce_create(comm, &params, &car));
    EXPECT_EQ(nullptr, car);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// A COMMIT that comes before its round has a state here (GCX_CODED_AHEAD=1:
// the window is the round the rank has not finished). The other ranks finish
// round 0 (the late rank serves its part ahead of its call), wait for the
// late rank's go, and enter round 1: their chunks for the late rank, their
// decoded chunks and the COMMITs of the owners whose line does not hold the
// late rank (3P-4 messages) all reach it before it has begun round 1, and
// are staged. The late rank counts them landing (stats.early; round 0 stages
// nothing more once the others finished it), then runs every round: round 1
// completes only with the staged COMMITs. Every round against the serial
// sum, bits equal on every rank.
TEST(CodedAllreduce, CommitBeforeTheRoundBeganIsStaged)
{
    if (world_size() < 3) {
        GTEST_SKIP() << "needs 3 ranks (with 2 the late rank is in every line)";
    }
    gcx_comm_t *comm = make_comm({{"TIMEOUT", "20"}, {"CODED_AHEAD", "1"}});
    ASSERT_NE(nullptr, comm);
    int         n = gcx_comm_size(comm), rank = gcx_comm_rank(comm), late = n - 1;
    gcx_code_t *code = make_code(GCX_CODE_CR, n, 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 4001;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    uint64_t           bits = 0;
    for (int r = 0; r < 6; ++r) {
        if (rank == late && r == 0) {
            wait_for_the_others(comm, late, "car-commit0", "finished round 0");
            ASSERT_FALSE(::testing::Test::HasFailure());
            gcx_coded_stats_t st = {};
            ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
            const uint64_t early0 = st.early, want = 3u * static_cast<unsigned>(n) - 4u;
            touch_marker(car_marker("car-commit-go", late));
            for (int i = 0; i < 30000 && st.early - early0 < want; ++i) { // 30 s
                gcx_progress(comm);
                usleep(1000);
                ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
            }
            ASSERT_EQ(want, st.early - early0) << "messages of round 1 staged here";
        }
        if (rank != late && r == 1) {
            EXPECT_TRUE(wait_for_marker(car_marker("car-commit-go", late), comm));
        }
        encode(code, rank, r, params.count, msg);
        Result res(n);
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr))
            << "round " << r;
        EXPECT_LE(max_err_from_serial(sum, n, r), 1e-3 * 11 * n) << "round " << r;
        if (r == 0 && rank != late) {
            touch_marker(car_marker("car-commit0", rank));
        }
        bits = bits * 1099511628211ull ^ checksum(sum);
    }
    EXPECT_TRUE(same_on_every_rank(comm, bits)) << "ranks hold different bits";
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    unlink(car_marker(rank == late ? "car-commit-go" : "car-commit0", rank).c_str());
    gcx_comm_destroy(comm);
}

// gcx_coded_create with algo: masterless runs the master-less allreduce
// behind gcx_coded_gather (right sums, gcx_coded_masterless), auto picks it
// for a large vector on 3+ ranks (lost_rounds or not) and the star for a
// small one, and masterless with root_not_worker is refused.
TEST(CodedAllreduce, GatherObjectChoosesItsAlgorithm)
{
    if (world_size() < 3) {
        GTEST_SKIP() << "needs 3 ranks";
    }
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    int               n  = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    gcx_code_t *code = make_code(GCX_CODE_CR, n, 1);
    ASSERT_NE(nullptr, code);
    struct Case {
        int algo, lost_rounds;
        size_t count;
        int want_masterless;
    } cases[] = {{GCX_CODED_ALGO_MASTERLESS, 0, 1001, 1},
                 {GCX_CODED_ALGO_AUTO, 0, 1 << 20, 1},
                 {GCX_CODED_ALGO_AUTO, 0, 16, 0},
                 {GCX_CODED_ALGO_AUTO, 1, 1 << 20, 1},
                 {GCX_CODED_ALGO_MASTERLESS, 1, 1001, 1},
                 {GCX_CODED_ALGO_DEFAULT, 0, 1 << 20, 0}};
    for (const Case &c : cases) {
        gcx_coded_params_t params = {};
        params.code               = code;
        params.count              = c.count;
        params.algo               = c.algo;
        params.lost_rounds        = c.lost_rounds;
        gcx_coded_t *coded        = nullptr;
        ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &coded));
        EXPECT_EQ(c.want_masterless, gcx_coded_masterless(coded))
            << "algo " << c.algo << " count " << c.count;
        std::vector<float> msg(c.count), sum(c.count);
        for (int r = 0; r < 3; ++r) {
            encode(code, rank, r, c.count, msg);
            Result res(n);
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr));
            ASSERT_LE(max_err_from_serial(sum, n, r), 1e-3 * 11 * n) << "round " << r;
        }
        gcx_coded_destroy(coded);
    }
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 10;
    params.algo               = GCX_CODED_ALGO_MASTERLESS;
    params.root_not_worker    = 1;
    gcx_coded_t *coded        = nullptr;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_coded_create(comm, &params, &coded));
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

TEST(CodedAllreduce, DifferentCountIsAMismatchOnEveryRank)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    gcx_code_t *code = make_code(GCX_CODE_CR, gcx_comm_size(comm), 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = gcx_comm_rank(comm) == 1 ? 101 : 100;
    gcx_coded_allreduce_t *car = reinterpret_cast<gcx_coded_allreduce_t *>(&params);
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_coded_allreduce_create(comm, &params, &car));
    EXPECT_EQ(nullptr, car);
    params.root_not_worker = 1;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_coded_allreduce_create(comm, &params, &car));
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// A rank vanishes (_exit: no teardown, as a killed process) in the middle of
// a round, after a seeded number of progress calls with its chunks and its
// decoded chunk in flight; GCX_TEST_SEED picks the rank, the round and the
// moment. It owns a chunk of every round: the next rank of that chunk's line
// takes over. Every survivor must complete every round with GCX_OK and the
// serial sum, and all must hold the same bits (checked over the shrunk
// communicator at the end). Codes: CR with s = 1 and, with 5 ranks, s = 2
// and two victims.
void vanish_mid_round(int nvictims)
{
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    int               n  = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    std::mt19937      rng(test_seed());
    std::vector<int>  victims, die_round, polls;
    for (int v = 0; v < nvictims; ++v) {
        int cand;
        do {
            cand = 1 + static_cast<int>(rng() % static_cast<unsigned>(n - 1));
        } while (std::find(victims.begin(), victims.end(), cand) != victims.end());
        victims.push_back(cand);
        die_round.push_back(static_cast<int>(rng() % 12));
        polls.push_back(static_cast<int>(rng() % 400));
    }
    if (rank == 0) {
        for (int v = 0; v < nvictims; ++v) {
            printf("seed %u: rank %d vanishes in round %d after %d progress calls\n",
                   test_seed(), victims[v], die_round[v], polls[v]);
        }
    }
    gcx_code_t *code = make_code(GCX_CODE_CR, n, nvictims);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 150001;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    uint64_t           bits = 0;
    for (int r = 0; r < 20; ++r) {
        encode(code, rank, r, params.count, msg);
        gcx_request_t *req = nullptr;
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), nullptr, &req));
        for (int v = 0; v < nvictims; ++v) {
            if (rank == victims[v] && r == die_round[v]) {
                for (int i = 0; i < polls[v]; ++i) {
                    (void)gcx_test(req);
                }
                printf("rank %d: vanishing in round %d\n", rank, r);
                fflush(stdout);
                _exit(0);
            }
        }
        ASSERT_EQ(GCX_OK, gcx_wait(req)) << "round " << r;
        gcx_request_free(req);
        ASSERT_LE(max_err_from_serial(sum, n, r), 1e-3 * 11 * n) << "round " << r;
        bits = bits * 1099511628211ull ^ checksum(sum);
    }
    Stats st(n);
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, st.get()));
    printf("rank %d: 20 rounds, late %llu unneeded %llu early %llu gone 0x%llx\n", rank,
           (unsigned long long)st->late_dropped, (unsigned long long)st->unneeded,
           (unsigned long long)st->early, (unsigned long long)st.gone());
    // the dead are counted gone, the live not (a victim dies by round 11:
    // a later round needed its chunk from the next owner, so every survivor
    // saw its connection lost)
    uint64_t dead = 0;
    for (int v : victims) {
        dead |= 1ull << v;
    }
    EXPECT_EQ(dead, st.gone());
    // a survivor that shrinks revokes the communicator: every survivor must
    // be done with its rounds first (they meet through marker files, each
    // progressing the communicator so the others' last chunks can move)
    auto marker = [](int r) { return job_marker(("car-done-" + std::to_string(r)).c_str()); };
    touch_marker(marker(rank));
    for (int r = 0; r < n; ++r) {
        if (std::find(victims.begin(), victims.end(), r) == victims.end()) {
            EXPECT_TRUE(wait_for_marker(marker(r), comm)) << "rank " << r << " never finished";
        }
    }
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    gcx_comm_t *survivors = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_shrink(comm, &survivors));
    unlink(marker(rank).c_str());
    EXPECT_EQ(n - nvictims, gcx_comm_size(survivors));
    EXPECT_TRUE(same_on_every_rank(survivors, bits)) << "survivors hold different bits";
    gcx_comm_destroy(survivors);
    gcx_comm_destroy(comm);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST(CodedAllreduceFailure, OwnerVanishesMidRound)
{
    ASSERT_GE(world_size(), 3);
    vanish_mid_round(1);
}

TEST(CodedAllreduceFailure, TwoOwnersVanishMidRound)
{
    ASSERT_GE(world_size(), 5);
    vanish_mid_round(2);
}

} // namespace
