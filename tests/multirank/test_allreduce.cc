// Allreduce against a serial reference: every algorithm, type, operation,
// sizes 0, 1, odd, above the small-message threshold and >= 16 MB, in place
// and out of place. Inputs are small integers, so results compare exactly.
#include "harness.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char *const kAlgos[] = {"auto", "recursive_doubling", "ring",
                              "rabenseifner"};

class Allreduce : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override
    {
        comm_ = make_comm({{"ALLREDUCE_ALGO", GetParam()},
                           {"PIPELINE_CHUNK", "64K"}});
        ASSERT_NE(nullptr, comm_);
    }
    void TearDown() override
    {
        gcx_comm_destroy(comm_);
    }

    // Runs one allreduce and checks every element plus the guard bytes.
    void check(gcx_dtype_t dtype, gcx_op_t op, size_t count, bool in_place)
    {
        size_t               es = gcx_dtype_size(dtype);
        std::vector<uint8_t> send(count * es + 1), recv(count * es + 64, 0xA5);
        test_fill(send.data(), dtype, count, gcx_comm_rank(comm_));
        if (in_place) {
            memcpy(recv.data(), send.data(), count * es);
        }
        bool bitwise = op == GCX_OP_BAND || op == GCX_OP_BOR || op == GCX_OP_BXOR;
        if (bitwise && dtype != GCX_DT_I32 && dtype != GCX_DT_I64) {
            // bitwise operations are for integers: refused on every rank
            ASSERT_EQ(GCX_ERR_INVALID,
                      gcx_allreduce(comm_, in_place ? GCX_IN_PLACE : send.data(),
                                    recv.data(), count, dtype, op, nullptr))
                << gcx_dtype_name(dtype) << " " << gcx_op_name(op);
            for (size_t i = in_place ? count * es : 0; i < recv.size(); ++i) {
                ASSERT_EQ(0xA5, recv[i]) << "a refused call wrote byte " << i;
            }
            return;
        }
        ASSERT_EQ(GCX_OK, gcx_allreduce(comm_, in_place ? GCX_IN_PLACE : send.data(),
                                        recv.data(), count, dtype, op, nullptr))
            << gcx_dtype_name(dtype) << " " << gcx_op_name(op) << " " << count;
        // a product in f16/bf16 rounds its partial products (|x| <= 3125)
        double tolerance = op != GCX_OP_PROD      ? 0 :
                           dtype == GCX_DT_F16  ? 1.0 / 512 :
                           dtype == GCX_DT_BF16 ? 1.0 / 64 : 0;
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
            double e = test_expected(dtype, op, gcx_comm_size(comm_), i);
            double got = test_read(recv.data(), dtype, i);
            if (std::fabs(got - e) > tolerance * std::fabs(e) && wrong++ < 3) {
                ADD_FAILURE() << gcx_dtype_name(dtype) << " " << gcx_op_name(op)
                              << " count " << count << " element " << i << ": got "
                              << test_read(recv.data(), dtype, i) << " expected " << e;
            }
        }
        EXPECT_EQ(0u, wrong);
        for (size_t i = count * es; i < recv.size(); ++i) {
            ASSERT_EQ(0xA5, recv[i]) << "write past the end at byte " << i;
        }
    }

    gcx_comm_t *comm_ = nullptr;
};

TEST_P(Allreduce, EveryTypeOpAndSize)
{
    const size_t sizes[] = {0, 1, 7, 1001, 70001};
    int          n       = 0;
    for (int dt = 0; dt < GCX_DT_U8; ++dt) {
        for (int op = 0; op < GCX_OP_LAST; ++op) {
            for (size_t count : sizes) {
                check(static_cast<gcx_dtype_t>(dt), static_cast<gcx_op_t>(op),
                      count, (n++ % 2) == 1);
            }
        }
    }
}

TEST_P(Allreduce, SixteenMegabytesOutOfPlaceAndInPlace)
{
    const size_t count = (16u << 20) / 4 + 3; // > 16 MB of f32, not divisible by P
    check(GCX_DT_F32, GCX_OP_SUM, count, false);
    check(GCX_DT_F32, GCX_OP_SUM, count, true);
}

TEST_P(Allreduce, CountSmallerThanRanks)
{
    for (size_t count = 1; count < 6; ++count) {
        check(GCX_DT_I64, GCX_OP_SUM, count, false);
    }
}

TEST_P(Allreduce, NonBlockingRequestsCompleteInOrder)
{
    const size_t           n = 5000;
    std::vector<float>     in(n), out[3];
    gcx_request_t         *req[3];
    test_fill(in.data(), GCX_DT_F32, n, gcx_comm_rank(comm_));
    for (int k = 0; k < 3; ++k) {
        out[k].assign(n, 0);
        ASSERT_EQ(GCX_OK, gcx_allreduce(comm_, in.data(), out[k].data(), n,
                                        GCX_DT_F32, GCX_OP_SUM, &req[k]));
    }
    for (int k = 2; k >= 0; --k) { // waiting out of order is fine
        EXPECT_EQ(GCX_OK, gcx_wait(req[k]));
        EXPECT_EQ(GCX_OK, gcx_test(req[k]));
        gcx_request_free(req[k]);
    }
    for (int k = 0; k < 3; ++k) {
        for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(test_expected(GCX_DT_F32, GCX_OP_SUM, gcx_comm_size(comm_), i),
                      out[k][i]);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Algos, Allreduce, ::testing::ValuesIn(kAlgos),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(info.param);
                         });

TEST(AllreduceBits, EveryRankGetsIdenticalBits)
{
    // real-valued inputs: the sum depends on the order, which must be the
    // same on every rank (weights of data-parallel training stay identical)
    const size_t       n = 100003;
    std::vector<float> in(n), out(n);
    for (size_t i = 0; i < n; ++i) {
        in[i] = 1.0f / static_cast<float>(1 + i + 13 * world_rank());
    }
    for (const char *algo : kAlgos) {
        gcx_comm_t *comm = make_comm({{"ALLREDUCE_ALGO", algo}});
        ASSERT_EQ(GCX_OK, gcx_allreduce(comm, in.data(), out.data(), n,
                                        GCX_DT_F32, GCX_OP_SUM, nullptr));
        std::vector<float> mx(out), mn(out);
        ASSERT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, mx.data(), n,
                                        GCX_DT_F32, GCX_OP_MAX, nullptr));
        ASSERT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, mn.data(), n,
                                        GCX_DT_F32, GCX_OP_MIN, nullptr));
        EXPECT_EQ(0, memcmp(mx.data(), mn.data(), n * sizeof(float))) << algo;
        gcx_comm_destroy(comm);
    }
}

} // namespace
