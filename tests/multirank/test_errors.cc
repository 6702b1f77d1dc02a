// Mismatched arguments across ranks must fail on every rank with
// GCX_ERR_MISMATCH, leave buffers unharmed (no overrun) and leave the
// communicator usable; locally invalid arguments give GCX_ERR_INVALID.
#include "harness.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

void expect_usable(gcx_comm_t *comm)
{
    std::vector<int32_t> v(100, 1);
    ASSERT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, v.data(), v.size(),
                                    GCX_DT_I32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(gcx_comm_size(comm), v[99]);
}

class Mismatch : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override
    {
        comm_ = make_comm({{"ALLREDUCE_ALGO", GetParam()}});
        ASSERT_NE(nullptr, comm_);
    }
    void TearDown() override
    {
        if (comm_ != nullptr) {
            expect_usable(comm_);
        }
        gcx_comm_destroy(comm_);
    }
    gcx_comm_t *comm_ = nullptr;
};

TEST_P(Mismatch, AllreduceCount)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs two ranks to disagree";
    }
    size_t               count = 100000 + (world_rank() == 1 ? 17 : 0);
    std::vector<float>   in(count, 1.0f), out(count + 64, 42.0f);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_allreduce(comm_, in.data(), out.data(), count,
                                              GCX_DT_F32, GCX_OP_SUM, nullptr));
    testing::internal::GetCapturedStderr();
    for (float x : out) {
        ASSERT_EQ(42.0f, x); // nothing written at all
    }
}

TEST_P(Mismatch, AllreduceTypeAndOp)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs two ranks to disagree";
    }
    std::vector<int64_t> v(64, 1);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_allreduce(comm_, GCX_IN_PLACE, v.data(), 32,
                            world_rank() == 0 ? GCX_DT_I64 : GCX_DT_F64,
                            GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_allreduce(comm_, GCX_IN_PLACE, v.data(), 32, GCX_DT_I64,
                            world_rank() == 0 ? GCX_OP_MAX : GCX_OP_SUM,
                            nullptr));
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(1, v[0]);
}

INSTANTIATE_TEST_SUITE_P(Algos, Mismatch,
                         ::testing::Values("recursive_doubling", "ring",
                                           "rabenseifner"));

TEST(MismatchOther, BroadcastRootAndCount)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs two ranks to disagree";
    }
    std::vector<uint8_t> buf(5000, 9);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_broadcast(g_world, buf.data(), 4000, GCX_DT_U8,
                                              world_rank() == 1 ? 1 : 0, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_broadcast(g_world, buf.data(), world_rank() == 0 ? 4000 : 3999,
                            GCX_DT_U8, 0, nullptr));
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(9, buf[4999]);
    expect_usable(g_world);
}

TEST(MismatchOther, AllgathervWrongSendCountOnOneRank)
{
    int                 P = world_size();
    std::vector<size_t> counts(P, 10), displs(P);
    for (int r = 0; r < P; ++r) {
        displs[r] = 10 * r;
    }
    std::vector<float> mine(11, 1.0f), all(10 * P, 0.0f);
    size_t             sendcount = world_rank() == P - 1 ? 11 : 10;
    testing::internal::CaptureStderr();
    EXPECT_EQ(P > 1 ? GCX_ERR_MISMATCH : GCX_ERR_INVALID,
              gcx_allgatherv(g_world, mine.data(), sendcount, all.data(),
                             counts.data(), displs.data(), GCX_DT_F32, nullptr));
    testing::internal::GetCapturedStderr();
    expect_usable(g_world);
}

TEST(MismatchOther, AllgathervCountsDifferBetweenRanks)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs two ranks to disagree";
    }
    int                 P = world_size();
    std::vector<size_t> counts(P, 10), displs(P);
    for (int r = 0; r < P; ++r) {
        displs[r] = 12 * r;
    }
    if (world_rank() == 0) {
        counts[P - 1] = 12; // rank 0 expects more from the last rank
    }
    std::vector<float> mine(12, 1.0f), all(12 * P, 0.0f);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_allgatherv(g_world, mine.data(), counts[world_rank()], all.data(),
                             counts.data(), displs.data(), GCX_DT_F32, nullptr));
    testing::internal::GetCapturedStderr();
    expect_usable(g_world);
}

TEST(MismatchOther, AlltoallvCountsDoNotMatchPeers)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs two ranks to disagree";
    }
    int                 P = world_size(), me = world_rank();
    std::vector<size_t> sc(P, 50), sd(P), rc(P, 50), rd(P);
    for (int j = 0; j < P; ++j) {
        sd[j] = 60 * j;
        rd[j] = 60 * j;
    }
    if (me == 0) {
        sc[1] = 55; // rank 1 expects only 50 from rank 0: truncated, not overrun
    }
    if (me == 1) {
        rc[P - 1] = 45; // ... and less than the last rank sends
    }
    std::vector<int32_t> send(60 * P, 3), recv(60 * P, -1);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_alltoallv(g_world, send.data(), sc.data(), sd.data(), recv.data(),
                            rc.data(), rd.data(), GCX_DT_I32, nullptr));
    testing::internal::GetCapturedStderr();
    for (int j = 0; j < P; ++j) {
        for (size_t k = rc[j]; k < 60; ++k) {
            ASSERT_EQ(-1, recv[rd[j] + k]) << "overrun after block " << j;
        }
    }
    expect_usable(g_world);
}

TEST(MismatchOther, AlltoallvWritesNothingOnMismatch)
{
    // the last rank sends 30 elements to rank 0, which expects 20; every
    // other pair agrees. No rank may write any of its receive buffer.
    if (world_size() < 2) {
        GTEST_SKIP() << "needs two ranks to disagree";
    }
    int                 P = world_size(), me = world_rank();
    std::vector<size_t> sc(P, 20), sd(P), rc(P, 20), rd(P);
    for (int j = 0; j < P; ++j) {
        sd[j] = 40 * j;
        rd[j] = 40 * j;
    }
    if (me == P - 1) {
        sc[0] = 30;
    }
    std::vector<int32_t> send(40 * P, 3), recv(40 * P, -7);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_alltoallv(g_world, send.data(), sc.data(), sd.data(), recv.data(),
                            rc.data(), rd.data(), GCX_DT_I32, nullptr));
    std::string err = testing::internal::GetCapturedStderr();
    for (size_t k = 0; k < recv.size(); ++k) {
        ASSERT_EQ(-7, recv[k]) << "element " << k << " written on a mismatch";
    }
    if (me == 0) { // the rank that saw it names the peer and both counts
        EXPECT_NE(std::string::npos,
                  err.find("rank " + std::to_string(P - 1) + " sends 30"))
            << err;
    }
    expect_usable(g_world);
}

TEST(Alltoallv, NullBuffersWithZeroCounts)
{
    int                 P = world_size();
    std::vector<size_t> zero(P, 0);
    EXPECT_EQ(GCX_OK, gcx_alltoallv(g_world, nullptr, zero.data(), zero.data(),
                                    nullptr, zero.data(), zero.data(),
                                    GCX_DT_F32, nullptr));
    std::vector<float> v(1, 1.0f);
    testing::internal::CaptureStderr();
    std::vector<size_t> one(P, 1), displs(P, 0);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_alltoallv(g_world, nullptr, one.data(),
                                             displs.data(), v.data(), zero.data(),
                                             zero.data(), GCX_DT_F32, nullptr));
    testing::internal::GetCapturedStderr();
    expect_usable(g_world);
}

TEST(Invalid, LocallyBadArgumentsAreRejectedBeforeAnyTraffic)
{
    std::vector<float> v(8, 1.0f);
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID, gcx_allreduce(g_world, v.data(), v.data(), 8,
                                             static_cast<gcx_dtype_t>(77),
                                             GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_allreduce(g_world, v.data(), v.data(), 8,
                                             GCX_DT_U8, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_allreduce(g_world, nullptr, v.data(), 8,
                                             GCX_DT_F32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_broadcast(g_world, v.data(), 8, GCX_DT_F32,
                                             world_size(), nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_broadcast(g_world, v.data(), 8, GCX_DT_F32,
                                             -1, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_alltoallv(g_world, GCX_IN_PLACE, nullptr, nullptr,
                                             v.data(), nullptr, nullptr,
                                             GCX_DT_F32, nullptr));
    testing::internal::GetCapturedStderr();
    expect_usable(g_world);
}

TEST(Invalid, UnknownAlgorithmInEnvironmentFailsCreation)
{
    gcx_config_t *config = nullptr;
    ASSERT_EQ(GCX_OK, gcx_config_read(&config));
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID, gcx_config_set(config, "GCX_ALLREDUCE_ALGO", "magic"));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, err.find("GCX_ALLREDUCE_ALGO"));
    EXPECT_NE(std::string::npos, err.find("recursive_doubling|ring"));
    gcx_config_release(config);
}

TEST(Checks, DisabledCheckStillComputes)
{
    gcx_comm_t *comm = make_comm({{"CHECK_ARGS", "n"}});
    ASSERT_NE(nullptr, comm);
    expect_usable(comm);
    gcx_comm_destroy(comm);
}

} // namespace
