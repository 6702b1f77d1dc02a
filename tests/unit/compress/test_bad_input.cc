/*
 * test_bad_input.cc - the documented policy for bad input, for every
 * compressor: N = 0, k = 0, k >= N, zeros, NaN/Inf anywhere (error, output
 * untouched), capacity too small, NULL and malformed arguments.
 */
#include <gtest/gtest.h>

#include "compress_ref.h"

using namespace gcxtest;

namespace
{

class BadInput : public ::testing::TestWithParam<gcx_compress_kind_t>
{
  protected:
    void SetUp() override
    {
        ASSERT_EQ(GCX_OK, gcx_compressor_create(GetParam(), 3, &comp_));
    }
    void TearDown() override
    {
        gcx_compressor_destroy(comp_);
    }
    gcx_compressor_t *comp_ = nullptr;
};

/* Fill an output with a sentinel pattern; true if it is still there. */
void poison(SparseBuf &b)
{
    std::fill(b.idx.begin(), b.idx.end(), 0xdeadbeefu);
    std::fill(b.val.begin(), b.val.end(), -123.0f);
    b.sp.nnz = 3;
    b.sp.dense_len = 17;
}

bool untouched(const SparseBuf &b)
{
    for (size_t j = 0; j < b.idx.size(); j++) {
        if (b.idx[j] != 0xdeadbeefu || b.val[j] != -123.0f) {
            return false;
        }
    }
    return b.sp.nnz == 3 && b.sp.dense_len == 17;
}

TEST_P(BadInput, EmptyInput)
{
    SparseBuf out(4);
    gcx_compress_stats_t st;
    float dummy = 1.0f;

    poison(out);
    ASSERT_EQ(GCX_OK, gcx_compress_dense(comp_, nullptr, 0, 10, &out.sp, &st));
    EXPECT_EQ(0u, out.sp.nnz);
    EXPECT_EQ(0u, out.sp.dense_len);
    EXPECT_EQ(0.0, st.in_sqnorm);
    EXPECT_EQ(0.0, st.out_sqnorm);
    ASSERT_EQ(GCX_OK, gcx_compress_dense(comp_, &dummy, 0, 1, &out.sp, &st));
    EXPECT_EQ(0u, out.sp.nnz);

    /* a sparse input with no entries */
    SparseBuf in(0, 1000);
    ASSERT_EQ(GCX_OK, gcx_compress_sparse(comp_, &in.sp, 10, &out.sp, &st));
    EXPECT_EQ(0u, out.sp.nnz);
    EXPECT_EQ(1000u, out.sp.dense_len);
}

TEST_P(BadInput, KZeroStillMeasures)
{
    std::vector<float> x = {1, -2, 3};
    SparseBuf out(0); /* capacity 0 is enough for k = 0 ... */
    gcx_compress_stats_t st;

    if (GetParam() == GCX_COMPRESS_NONE) {
        /* none sends everything whatever the CF: it needs room for all */
        SparseBuf all(3);
        EXPECT_EQ(GCX_ERR_RANGE, gcx_compress_dense(comp_, x.data(), 3,
                                                    INFINITY, &out.sp, &st));
        ASSERT_EQ(GCX_OK, gcx_compress_dense(comp_, x.data(), 3, INFINITY,
                                             &all.sp, &st));
        EXPECT_EQ(3u, all.sp.nnz);
        EXPECT_EQ(3u, st.k);
        return;
    }
    ASSERT_EQ(GCX_OK,
              gcx_compress_dense(comp_, x.data(), 3, INFINITY, &out.sp, &st));
    EXPECT_EQ(0u, out.sp.nnz);
    EXPECT_EQ(0u, st.k);
    EXPECT_DOUBLE_EQ(14.0, st.in_sqnorm);
    EXPECT_EQ(GCX_OK,
              gcx_compress_dense_k(comp_, x.data(), 3, 0, &out.sp, &st));
    /* ... and NaN is still refused */
    x[1] = NAN;
    EXPECT_EQ(GCX_ERR_RANGE,
              gcx_compress_dense(comp_, x.data(), 3, INFINITY, &out.sp, &st));
}

TEST_P(BadInput, KAtLeastNReturnsEverything)
{
    std::vector<float> x = {0, -2, 0, 3, -0.0f};
    SparseBuf out(5);
    gcx_compress_stats_t st;

    for (size_t k : {5u, 6u, 1000u}) {
        ASSERT_EQ(GCX_OK,
                  gcx_compress_dense_k(comp_, x.data(), 5, k, &out.sp, &st));
        ASSERT_EQ(5u, out.sp.nnz);
        for (uint32_t i = 0; i < 5; i++) {
            EXPECT_EQ(i, out.idx[i]);
            EXPECT_TRUE(same_bits(x[i], out.val[i]));
        }
        EXPECT_DOUBLE_EQ(13.0, st.out_sqnorm);
        EXPECT_DOUBLE_EQ(1.0, gcx_compress_gain(&st));
    }
    ASSERT_EQ(GCX_OK, gcx_compress_dense(comp_, x.data(), 5, 1, &out.sp, &st));
    EXPECT_EQ(5u, out.sp.nnz);
}

TEST_P(BadInput, AllZerosGiveLowestIndices)
{
    std::vector<float> x(1000, 0.0f);
    SparseBuf out(1000);
    gcx_compress_stats_t st;

    ASSERT_EQ(GCX_OK,
              gcx_compress_dense(comp_, x.data(), 1000, 10, &out.sp, &st));
    EXPECT_EQ(0.0, st.in_sqnorm);
    EXPECT_DOUBLE_EQ(1.0, gcx_compress_gain(&st));
    if (GetParam() == GCX_COMPRESS_TOPK || GetParam() == GCX_COMPRESS_DGC ||
        GetParam() == GCX_COMPRESS_REDSYNC) {
        /* every magnitude ties: the lower indices win */
        ASSERT_EQ(100u, out.sp.nnz);
        for (uint32_t i = 0; i < 100; i++) {
            EXPECT_EQ(i, out.idx[i]);
        }
    }
}

TEST_P(BadInput, NanAndInfAreRefused)
{
    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
    const size_t sizes[] = {1, 5, 1000, 70001};

    for (size_t n : sizes) {
        std::vector<float> x = make_input(Input::Gauss, n, 4);
        SparseBuf out(n);
        for (float b : bad) {
            for (size_t at : {(size_t)0, n / 2, n - 1}) {
                std::vector<float> y = x;
                y[at] = b;
                gcx_compress_stats_t st = {1, 2, 3, 4, 5};
                for (double cf : {1.0, 3.0, 100.0}) {
                    poison(out);
                    EXPECT_EQ(GCX_ERR_RANGE,
                              gcx_compress_dense(comp_, y.data(), n, cf,
                                                 &out.sp, &st))
                        << "n=" << n << " at=" << at << " value=" << b;
                    EXPECT_TRUE(untouched(out)) << "n=" << n << " at=" << at;
                    EXPECT_EQ(3u, st.k); /* stats untouched too */
                }
                /* the same in a sparse input */
                std::vector<uint32_t> idx(n);
                for (size_t i = 0; i < n; i++) {
                    idx[i] = (uint32_t)(2 * i);
                }
                gcx_sparse_vec_t in;
                ASSERT_EQ(GCX_OK,
                          gcx_sparse_vec_init(&in, idx.data(), y.data(), n,
                                              2 * n));
                in.nnz = n;
                poison(out);
                EXPECT_EQ(GCX_ERR_RANGE,
                          gcx_compress_sparse(comp_, &in, 10, &out.sp, &st));
                EXPECT_TRUE(untouched(out));
            }
        }
    }
}

TEST_P(BadInput, CapacityTooSmall)
{
    const size_t n = 1000;
    std::vector<float> x = make_input(Input::Gauss, n, 8);

    for (double cf : {1.0, 3.0, 10.0, 100.0}) {
        size_t need;
        ASSERT_EQ(GCX_OK, gcx_compress_capacity(GetParam(), n, cf, &need));
        ASSERT_GT(need, 0u);
        SparseBuf small(need - 1), enough(need);
        poison(small);
        EXPECT_EQ(GCX_ERR_RANGE, gcx_compress_dense(comp_, x.data(), n, cf,
                                                    &small.sp, nullptr));
        EXPECT_TRUE(untouched(small));
        EXPECT_EQ(GCX_OK, gcx_compress_dense(comp_, x.data(), n, cf, &enough.sp,
                                             nullptr));
        EXPECT_LE(enough.sp.nnz, need);
    }
}

TEST_P(BadInput, InvalidArguments)
{
    std::vector<float> x = {1, 2, 3, 4};
    SparseBuf out(4), in(4, 10);
    gcx_compress_stats_t st;

    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_dense(nullptr, x.data(), 4, 2, &out.sp, &st));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_dense(comp_, nullptr, 4, 2, &out.sp, &st));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_dense(comp_, x.data(), 4, 2, nullptr, &st));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_dense(comp_, x.data(), 4, 0.99, &out.sp, &st));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_dense(comp_, x.data(), 4, NAN, &out.sp, &st));
    if (sizeof(size_t) > 4) {
        EXPECT_EQ(GCX_ERR_RANGE,
                  gcx_compress_dense_k(comp_, x.data(), (size_t)UINT32_MAX + 1,
                                       1, &out.sp, &st));
    }
    /* output aliasing the input */
    gcx_sparse_vec_t alias;
    ASSERT_EQ(GCX_OK, gcx_sparse_vec_init(&alias, in.idx.data(), x.data(), 4,
                                          4));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_dense(comp_, x.data(), 4, 1, &alias, &st));

    /* malformed sparse inputs */
    in.idx[0] = 1;
    in.idx[1] = 5;
    in.idx[2] = 5;
    in.idx[3] = 7;
    in.sp.nnz = 4;
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_sparse(comp_, &in.sp, 2, &out.sp, &st));
    in.idx[2] = 6;
    in.idx[3] = 10; /* == dense_len */
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_sparse(comp_, &in.sp, 2, &out.sp, &st));
    in.idx[3] = 9;
    EXPECT_EQ(GCX_OK, gcx_compress_sparse(comp_, &in.sp, 2, &out.sp, &st));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_sparse(comp_, &in.sp, 2, &in.sp, &st));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_sparse(comp_, nullptr, 2, &out.sp, &st));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_sparse(comp_, &in.sp, 0, &out.sp, &st));
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, BadInput,
    ::testing::Values(GCX_COMPRESS_NONE, GCX_COMPRESS_TOPK, GCX_COMPRESS_DGC,
                      GCX_COMPRESS_REDSYNC, GCX_COMPRESS_RANDOMK),
    [](const ::testing::TestParamInfo<gcx_compress_kind_t> &info) {
        return std::string(gcx_compress_kind_name(info.param));
    });

} // namespace

/* Negative values and ties: magnitude decides, the lower index wins. */
TEST(TopkTies, LowerIndexWinsAndSignIgnored)
{
    std::vector<float> x = {1, -3, 3, -1, 3, 2, -3, 0};
    gcx_compressor_t *comp;
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_TOPK, 0, &comp));
    SparseBuf out(8);

    ASSERT_EQ(GCX_OK,
              gcx_compress_dense_k(comp, x.data(), 8, 2, &out.sp, nullptr));
    ASSERT_EQ(2u, out.sp.nnz);
    EXPECT_EQ(1u, out.idx[0]);
    EXPECT_EQ(2u, out.idx[1]);
    EXPECT_EQ(-3.0f, out.val[0]);
    ASSERT_EQ(GCX_OK,
              gcx_compress_dense_k(comp, x.data(), 8, 4, &out.sp, nullptr));
    ASSERT_EQ(4u, out.sp.nnz);
    EXPECT_EQ((std::vector<uint32_t>{1, 2, 4, 6}),
              std::vector<uint32_t>(out.idx.begin(), out.idx.begin() + 4));
    ASSERT_EQ(GCX_OK,
              gcx_compress_dense_k(comp, x.data(), 8, 6, &out.sp, nullptr));
    EXPECT_EQ((std::vector<uint32_t>{0, 1, 2, 4, 5, 6}),
              std::vector<uint32_t>(out.idx.begin(), out.idx.begin() + 6));
    gcx_compressor_destroy(comp);
}
