/*
 * test_feedback.cc - error feedback: the invariant
 * residual_after + sent == residual_before + g (bit for bit) for every
 * compressor over several steps, DGC momentum correction and masking
 * against a hand-written simulation, multi-level commits, dense commits,
 * and failure atomicity (NaN/Inf gradient, overflow, small output).
 */
#include <gtest/gtest.h>

#include <cfloat>

#include "compress_ref.h"

using namespace gcxtest;

namespace
{

class Feedback : public ::testing::TestWithParam<gcx_compress_kind_t>
{
  protected:
    void SetUp() override
    {
        ASSERT_EQ(GCX_OK, gcx_compressor_create(GetParam(), 9, &comp_));
    }
    void TearDown() override
    {
        gcx_compressor_destroy(comp_);
    }
    gcx_compressor_t *comp_ = nullptr;
};

TEST_P(Feedback, ResidualPlusSentIsResidualPlusGradient)
{
    for (size_t n : {1u, 1000u, 70001u}) {
        gcx_feedback_t *fb;
        ASSERT_EQ(GCX_OK, gcx_feedback_create(n, nullptr, &fb));
        SparseBuf out(n);
        std::vector<float> sent(n);

        for (uint32_t step = 0; step < 5; step++) {
            std::vector<float> g = make_input(Input::Gauss, n, step + 1);
            const float *e = gcx_feedback_residual(fb);
            std::vector<float> expect(n);
            for (size_t i = 0; i < n; i++) {
                expect[i] = e[i] + g[i]; /* residual_before + g, in float */
            }
            gcx_compressor_set_step(comp_, step);
            ASSERT_EQ(GCX_OK, gcx_feedback_step(fb, comp_, g.data(), 10,
                                                &out.sp, nullptr));
            ASSERT_EQ(GCX_OK, gcx_sparse_vec_to_dense(&out.sp, sent.data()));
            for (size_t i = 0; i < n; i++) {
                ASSERT_TRUE(same_bits(expect[i], e[i] + sent[i]) ||
                            expect[i] == e[i] + sent[i])
                    << "n=" << n << " step=" << step << " i=" << i;
            }
            /* the sent entries are exactly zero in the residual */
            for (size_t j = 0; j < out.sp.nnz; j++) {
                ASSERT_EQ(0.0f, e[out.idx[j]]);
            }
        }
        gcx_feedback_destroy(fb);
    }
}

/* GraVAC's path: two levels, commit of the second level only. */
TEST_P(Feedback, MultiLevelCommit)
{
    const size_t n = 50000;
    gcx_feedback_t *fb;
    ASSERT_EQ(GCX_OK, gcx_feedback_create(n, nullptr, &fb));
    SparseBuf mid(n), two(n);
    std::vector<float> g = make_input(Input::Gauss, n, 3), sent(n);

    ASSERT_EQ(GCX_OK, gcx_feedback_accumulate(fb, g.data()));
    std::vector<float> before(gcx_feedback_residual(fb),
                              gcx_feedback_residual(fb) + n);
    ASSERT_EQ(GCX_OK, gcx_compress_dense(comp_, gcx_feedback_residual(fb), n,
                                         10, &mid.sp, nullptr));
    ASSERT_EQ(GCX_OK,
              gcx_compress_sparse(comp_, &mid.sp, 10, &two.sp, nullptr));
    ASSERT_EQ(GCX_OK, gcx_feedback_commit(fb, &two.sp));
    ASSERT_EQ(GCX_OK, gcx_sparse_vec_to_dense(&two.sp, sent.data()));
    const float *e = gcx_feedback_residual(fb);
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(before[i], e[i] + sent[i]) << i;
    }
    gcx_feedback_destroy(fb);
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, Feedback,
    ::testing::Values(GCX_COMPRESS_NONE, GCX_COMPRESS_TOPK, GCX_COMPRESS_DGC,
                      GCX_COMPRESS_REDSYNC, GCX_COMPRESS_RANDOMK),
    [](const ::testing::TestParamInfo<gcx_compress_kind_t> &info) {
        return std::string(gcx_compress_kind_name(info.param));
    });

} // namespace

/* u = m u + g; e += u; send top-k of e; e -= s; u[s] = 0 (masking). */
TEST(FeedbackMomentum, MatchesDgcSimulation)
{
    const size_t n = 3000;
    const float m = 0.9f;

    for (int mask = 0; mask < 2; mask++) {
        gcx_feedback_params_t params = {};
        params.momentum = m;
        params.mask_momentum = mask;
        gcx_feedback_t *fb;
        gcx_compressor_t *comp;
        ASSERT_EQ(GCX_OK, gcx_feedback_create(n, &params, &fb));
        ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_TOPK, 0, &comp));
        ASSERT_NE(nullptr, gcx_feedback_velocity(fb));
        std::vector<float> u(n, 0), e(n, 0);
        SparseBuf out(n);

        for (uint32_t step = 0; step < 6; step++) {
            std::vector<float> g = make_input(Input::Gauss, n, 40 + step);
            for (size_t i = 0; i < n; i++) {
                u[i] = m * u[i] + g[i];
                e[i] += u[i];
            }
            ASSERT_EQ(GCX_OK, gcx_feedback_step(fb, comp, g.data(), 20, &out.sp,
                                                nullptr));
            for (size_t j = 0; j < out.sp.nnz; j++) {
                ASSERT_EQ(e[out.idx[j]], out.val[j]);
                e[out.idx[j]] = 0;
                if (mask) {
                    u[out.idx[j]] = 0;
                }
            }
            for (size_t i = 0; i < n; i++) {
                ASSERT_EQ(e[i], gcx_feedback_residual(fb)[i]) << step;
                ASSERT_EQ(u[i], gcx_feedback_velocity(fb)[i]) << step;
            }
        }
        gcx_compressor_destroy(comp);
        gcx_feedback_destroy(fb);
    }
}

TEST(FeedbackState, CreateResetDenseCommit)
{
    gcx_feedback_t *fb = nullptr;
    gcx_feedback_params_t params = {};

    params.momentum = 1.0f;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_feedback_create(10, &params, &fb));
    params.momentum = -0.1f;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_feedback_create(10, &params, &fb));
    params.momentum = NAN;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_feedback_create(10, &params, &fb));
    EXPECT_EQ(nullptr, fb);

    /* caller-owned buffers with an initial residual */
    std::vector<float> e = {1, 2, 3, 4}, u = {0, 0, 0, 0};
    params.residual = e.data();
    params.velocity = u.data();
    params.momentum = 0.5f;
    params.mask_momentum = 1;
    ASSERT_EQ(GCX_OK, gcx_feedback_create(4, &params, &fb));
    EXPECT_EQ(e.data(), gcx_feedback_residual(fb));
    EXPECT_EQ(u.data(), gcx_feedback_velocity(fb));
    EXPECT_EQ(4u, gcx_feedback_size(fb));
    std::vector<float> g = {1, 1, 1, 1};
    ASSERT_EQ(GCX_OK, gcx_feedback_accumulate(fb, g.data()));
    EXPECT_EQ((std::vector<float>{2, 3, 4, 5}), e);
    EXPECT_EQ((std::vector<float>{1, 1, 1, 1}), u);
    gcx_feedback_commit_dense(fb);
    EXPECT_EQ(std::vector<float>(4, 0.0f), e);
    EXPECT_EQ(std::vector<float>(4, 0.0f), u); /* masked */
    e[2] = 7;
    gcx_feedback_touch(fb);
    ASSERT_EQ(GCX_OK, gcx_feedback_accumulate(fb, g.data()));
    EXPECT_EQ(8.0f, e[2]);
    gcx_feedback_reset(fb);
    EXPECT_EQ(std::vector<float>(4, 0.0f), e);
    gcx_feedback_destroy(fb); /* must not free the caller's vectors */
    gcx_feedback_destroy(nullptr);

    /* commit of a vector of another length */
    ASSERT_EQ(GCX_OK, gcx_feedback_create(4, nullptr, &fb));
    EXPECT_EQ(nullptr, gcx_feedback_velocity(fb));
    SparseBuf s(1, 5);
    s.idx[0] = 4;
    s.val[0] = 1;
    s.sp.nnz = 1;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_feedback_commit(fb, &s.sp));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_feedback_commit(fb, nullptr));
    gcx_feedback_destroy(fb);
}

/* A bad gradient leaves the state as it was: the step can be skipped. */
TEST(FeedbackState, FailureLeavesResidualUnchanged)
{
    const size_t n = 1000;
    gcx_feedback_params_t params = {};
    params.momentum = 0.5f;
    gcx_feedback_t *fb;
    gcx_compressor_t *comp;
    ASSERT_EQ(GCX_OK, gcx_feedback_create(n, &params, &fb));
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_TOPK, 0, &comp));
    std::vector<float> g = make_input(Input::Gauss, n, 1);
    SparseBuf out(n);
    ASSERT_EQ(GCX_OK,
              gcx_feedback_step(fb, comp, g.data(), 10, &out.sp, nullptr));
    std::vector<float> e0(gcx_feedback_residual(fb),
                          gcx_feedback_residual(fb) + n);
    std::vector<float> u0(gcx_feedback_velocity(fb),
                          gcx_feedback_velocity(fb) + n);
    auto unchanged = [&]() {
        return std::equal(e0.begin(), e0.end(), gcx_feedback_residual(fb)) &&
               std::equal(u0.begin(), u0.end(), gcx_feedback_velocity(fb));
    };

    for (float bad : {NAN, INFINITY, -INFINITY}) {
        std::vector<float> b = g;
        b[n - 1] = bad;
        EXPECT_EQ(GCX_ERR_RANGE, gcx_feedback_accumulate(fb, b.data()));
        EXPECT_TRUE(unchanged());
        EXPECT_EQ(GCX_ERR_RANGE,
                  gcx_feedback_step(fb, comp, b.data(), 10, &out.sp, nullptr));
        EXPECT_TRUE(unchanged());
    }
    /* too small an output is refused before the residual is touched */
    SparseBuf small(10);
    EXPECT_EQ(GCX_ERR_RANGE,
              gcx_feedback_step(fb, comp, g.data(), 10, &small.sp, nullptr));
    EXPECT_TRUE(unchanged());
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_feedback_step(fb, comp, g.data(), 0.5, &out.sp, nullptr));
    EXPECT_TRUE(unchanged());

    /* finite gradient whose sum with the residual overflows */
    std::vector<float> big(n, FLT_MAX);
    std::vector<float> e1(n, FLT_MAX / 2);
    gcx_feedback_params_t p2 = {};
    p2.residual = e1.data();
    gcx_feedback_t *fb2;
    ASSERT_EQ(GCX_OK, gcx_feedback_create(n, &p2, &fb2));
    EXPECT_EQ(GCX_ERR_RANGE, gcx_feedback_accumulate(fb2, big.data()));
    EXPECT_EQ(std::vector<float>(n, FLT_MAX / 2), e1);
    /* large but safe values go through the exact check */
    std::vector<float> half(n, FLT_MAX / 4);
    EXPECT_EQ(GCX_OK, gcx_feedback_accumulate(fb2, half.data()));
    EXPECT_EQ(FLT_MAX / 2 + FLT_MAX / 4, e1[0]);
    gcx_feedback_destroy(fb2);

    gcx_compressor_destroy(comp);
    gcx_feedback_destroy(fb);
}
