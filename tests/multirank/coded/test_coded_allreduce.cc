// Master-less coded allreduce (gcx_coded_allreduce): every round's result is
// checked on every rank against the serial sum of the partition gradients
// (computed here, independently of gcx), against the coded gather's star
// fed the same messages in the same round, and across ranks bit for bit
// (every rank must hold the same bits). Random straggler delays
// (GCX_STRAGGLER_MEAN_MS) make chunks late, early and unneeded, so the
// owners decode from changing arrival sets; the test checks those paths were
// taken. Chunk sizes include 0 (count < ranks), 1 and odd ones.
// CodedAllreduceFailure.OwnerDies: a rank exits; the others fail the round
// with GCX_ERR_PEER (its chunk has no other decoder yet), never a hang or a
// wrong result.
#include "../harness.h"
#include "coded_util.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace {

using namespace coded_test;

uint64_t checksum(const std::vector<float> &v)
{
    uint64_t h = 1469598103934665603ull;
    for (float f : v) {
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof(bits));
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

// max over ranks equals min over ranks
bool same_on_every_rank(gcx_comm_t *comm, uint64_t v)
{
    int64_t hi[2] = {static_cast<int64_t>(v >> 1), -static_cast<int64_t>(v >> 1)};
    EXPECT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, hi, 2, GCX_DT_I64, GCX_OP_MAX, nullptr));
    return hi[0] == -hi[1];
}

void rounds(gcx_code_kind_t kind, int s, size_t count, int nrounds)
{
    gcx_comm_t *comm = make_comm({{"STRAGGLER_MEAN_MS", "3"}, {"STRAGGLER_SEED", "11"}});
    ASSERT_NE(nullptr, comm);
    int               n  = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    gcx_code_params_t cp = {};
    cp.kind              = kind;
    cp.n                 = n;
    cp.s                 = s;
    gcx_code_t *code     = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
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
        gcx_coded_result_t res;
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), &res, nullptr))
            << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res.round);
        ASSERT_EQ(GCX_OK, gcx_coded_gather(star, msg.data(), star_sum.data(), nullptr, nullptr));
        double err = 0, star_err = 0;
        for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int j = 0; j < n; ++j) {
                want += grad(j, r, i);
            }
            err      = std::max(err, std::fabs(want - sum[i]));
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
    gcx_coded_stats_t st;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
    EXPECT_EQ(static_cast<uint64_t>(nrounds), st.rounds);
    printf("rank %d: count %zu: %d rounds, late %llu unneeded %llu early %llu skipped %llu, "
           "%d wrong %d unequal %d differ\n",
           rank, count, nrounds, (unsigned long long)st.late_dropped,
           (unsigned long long)st.unneeded, (unsigned long long)st.early,
           (unsigned long long)st.skipped, wrong, unequal, differ);
    uint64_t late = st.late_dropped + st.unneeded + st.skipped + st.early;
    gcx_coded_allreduce_destroy(car);
    gcx_coded_destroy(star);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
    if (n > 1 && count >= static_cast<size_t>(n)) {
        EXPECT_GT(sum_over_world(late), 0u); // the late/early paths ran somewhere
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

TEST(CodedAllreduce, CrRandomStragglers)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    for (size_t count : {size_t(1001), size_t(world_size() + 2)}) {
        rounds(GCX_CODE_CR, 1, count, count >= 1000 ? 120 : 10);
    }
}

TEST(CodedAllreduce, CrTwoStragglers)
{
    if (world_size() < 4) {
        GTEST_SKIP() << "needs 4 ranks";
    }
    rounds(GCX_CODE_CR, 2, 4099, 100);
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
    gcx_code_params_t cp = {};
    cp.kind              = GCX_CODE_CR;
    cp.n                 = n;
    cp.s                 = 1;
    gcx_code_t *code     = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 3000;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    uint64_t           used_slow = 0;
    for (int r = 0; r < 20; ++r) {
        encode(code, rank, r, params.count, msg);
        gcx_coded_result_t res;
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), &res, nullptr));
        for (size_t i = 0; i < params.count; ++i) {
            double want = 0;
            for (int j = 0; j < n; ++j) {
                want += grad(j, r, i);
            }
            ASSERT_NEAR(want, sum[i], 1e-3 * 11 * n) << "round " << r << " element " << i;
        }
        used_slow += (res.used >> 1) & 1;
    }
    gcx_coded_stats_t st;
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

TEST(CodedAllreduce, DifferentCountIsAMismatchOnEveryRank)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    gcx_code_params_t cp = {};
    cp.kind              = GCX_CODE_CR;
    cp.n                 = gcx_comm_size(comm);
    cp.s                 = 1;
    gcx_code_t *code     = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
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

// The last rank exits before round 5: the others fail with GCX_ERR_PEER (the
// chunk it owned has no other decoder), never GCX_OK with a wrong sum and
// never a hang (GCX_TIMEOUT is far above the test's timeout).
TEST(CodedAllreduceFailure, OwnerDies)
{
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    int               n  = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    gcx_code_params_t cp = {};
    cp.kind              = GCX_CODE_CR;
    cp.n                 = n;
    cp.s                 = 1;
    gcx_code_t *code     = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 100000;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::vector<float> msg(params.count), sum(params.count);
    gcx_status_t       status = GCX_OK;
    int                r;
    for (r = 0; r < 50 && status == GCX_OK; ++r) {
        if (rank == n - 1 && r == 5) {
            printf("rank %d: exiting before round %d\n", rank, r);
            fflush(stdout);
            _exit(0);
        }
        encode(code, rank, r, params.count, msg);
        status = gcx_coded_allreduce(car, msg.data(), sum.data(), nullptr, nullptr);
        if (status == GCX_OK) {
            for (size_t i = 0; i < params.count; ++i) {
                double want = 0;
                for (int j = 0; j < n; ++j) {
                    want += grad(j, r, i);
                }
                ASSERT_NEAR(want, sum[i], 1e-3 * 11 * n) << "round " << r;
            }
        }
    }
    EXPECT_EQ(GCX_ERR_PEER, status) << "round " << r - 1;
    EXPECT_GE(r - 1, 5);
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
}

} // namespace
