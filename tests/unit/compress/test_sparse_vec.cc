/*
 * test_sparse_vec.cc - the sparse vector type, k from the compression factor,
 * the capacity rule and the table of compressor names.
 */
#include <gtest/gtest.h>

#include "compress_ref.h"

using namespace gcxtest;

TEST(SparseVec, InitWrapsCallerArrays)
{
    uint32_t idx[4];
    float val[4];
    gcx_sparse_vec_t sp;

    ASSERT_EQ(GCX_OK, gcx_sparse_vec_init(&sp, idx, val, 4, 10));
    EXPECT_EQ(idx, sp.idx);
    EXPECT_EQ(val, sp.val);
    EXPECT_EQ(0u, sp.nnz);
    EXPECT_EQ(4u, sp.capacity);
    EXPECT_EQ(10u, sp.dense_len);
    EXPECT_EQ(0, sp.owned);
    gcx_sparse_vec_free(&sp); /* must not free the caller's stack arrays */
    EXPECT_EQ(nullptr, sp.idx);
    EXPECT_EQ(0u, sp.capacity);

    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_init(&sp, nullptr, val, 4, 10));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_init(nullptr, idx, val, 4, 10));
    EXPECT_EQ(GCX_OK, gcx_sparse_vec_init(&sp, nullptr, nullptr, 0, 10));
    if (sizeof(size_t) > 4) {
        EXPECT_EQ(GCX_ERR_RANGE,
                  gcx_sparse_vec_init(&sp, idx, val, 4,
                                      (size_t)UINT32_MAX + 1));
        EXPECT_EQ(GCX_OK, gcx_sparse_vec_init(&sp, idx, val, 4, UINT32_MAX));
    }
}

TEST(SparseVec, AllocOwnsAndFrees)
{
    gcx_sparse_vec_t sp;

    ASSERT_EQ(GCX_OK, gcx_sparse_vec_alloc(100, 1000, &sp));
    EXPECT_EQ(1, sp.owned);
    EXPECT_EQ(100u, sp.capacity);
    for (uint32_t j = 0; j < 100; j++) {
        sp.idx[j] = 10 * j;
        sp.val[j] = (float)j;
    }
    sp.nnz = 100;
    EXPECT_EQ(GCX_OK, gcx_sparse_vec_check(&sp));
    gcx_sparse_vec_free(&sp); /* ASan reports a leak if this did not free */
    EXPECT_EQ(0, sp.owned);
    gcx_sparse_vec_free(&sp); /* twice is harmless */
    gcx_sparse_vec_free(nullptr);

    ASSERT_EQ(GCX_OK, gcx_sparse_vec_alloc(0, 0, &sp));
    EXPECT_EQ(GCX_OK, gcx_sparse_vec_check(&sp));
    gcx_sparse_vec_free(&sp);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_alloc(1, 1, nullptr));
}

TEST(SparseVec, CheckFindsBrokenInvariants)
{
    SparseBuf b(4, 10);
    uint32_t good[] = {0, 3, 7, 9};

    for (int j = 0; j < 4; j++) {
        b.idx[j] = good[j];
        b.val[j] = 1.0f;
    }
    b.sp.nnz = 4;
    EXPECT_EQ(GCX_OK, gcx_sparse_vec_check(&b.sp));
    b.idx[2] = 3; /* duplicate */
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_check(&b.sp));
    b.idx[2] = 2; /* not increasing */
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_check(&b.sp));
    b.idx[2] = 7;
    b.idx[3] = 10; /* == dense_len */
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_check(&b.sp));
    b.idx[3] = 9;
    b.sp.nnz = 5; /* > capacity */
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_check(&b.sp));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_check(nullptr));
}

TEST(SparseVec, ScatterToDenseAndNorms)
{
    SparseBuf b(3, 6);
    b.idx[0] = 1;
    b.idx[1] = 4;
    b.idx[2] = 5;
    b.val[0] = 2.0f;
    b.val[1] = -3.0f;
    b.val[2] = 0.5f;
    b.sp.nnz = 3;

    std::vector<float> d(6, 7.0f);
    ASSERT_EQ(GCX_OK, gcx_sparse_vec_scatter(&b.sp, d.data()));
    EXPECT_EQ((std::vector<float>{7, 2, 7, 7, -3, 0.5f}), d);
    ASSERT_EQ(GCX_OK, gcx_sparse_vec_scatter_add(&b.sp, 2.0f, d.data()));
    EXPECT_EQ((std::vector<float>{7, 6, 7, 7, -9, 1.5f}), d);
    ASSERT_EQ(GCX_OK, gcx_sparse_vec_to_dense(&b.sp, d.data()));
    EXPECT_EQ((std::vector<float>{0, 2, 0, 0, -3, 0.5f}), d);
    EXPECT_DOUBLE_EQ(4.0 + 9.0 + 0.25, gcx_sparse_vec_sqnorm(&b.sp));
    EXPECT_DOUBLE_EQ(4.0 + 9.0 + 0.25, gcx_dense_sqnorm(d.data(), 6));
    EXPECT_DOUBLE_EQ(0.0, gcx_dense_sqnorm(d.data(), 0));

    b.idx[2] = 4; /* broken vector: no write */
    std::vector<float> e(6, 1.0f);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_scatter(&b.sp, e.data()));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_sparse_vec_to_dense(&b.sp, e.data()));
    EXPECT_EQ(std::vector<float>(6, 1.0f), e);
}

TEST(CompressK, CeilOfNOverCf)
{
    size_t k = 99;

    EXPECT_EQ(GCX_OK, gcx_compress_k(100, 1, &k));
    EXPECT_EQ(100u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(100, 3, &k));
    EXPECT_EQ(34u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(100, 1.5, &k));
    EXPECT_EQ(67u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(25000000, 100, &k));
    EXPECT_EQ(250000u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(25000000, 10, &k));
    EXPECT_EQ(2500000u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(1000000, 1000, &k));
    EXPECT_EQ(1000u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(5, 1000, &k));
    EXPECT_EQ(1u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(0, 10, &k));
    EXPECT_EQ(0u, k);
    EXPECT_EQ(GCX_OK, gcx_compress_k(100, INFINITY, &k));
    EXPECT_EQ(0u, k);
    k = 7;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_compress_k(100, 0.5, &k));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_compress_k(100, NAN, &k));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_compress_k(100, -INFINITY, &k));
    EXPECT_EQ(7u, k); /* outputs only on success */
}

TEST(CompressK, CapacityPerKind)
{
    size_t cap = 0;

    EXPECT_EQ(1000u, gcx_compress_capacity_k(GCX_COMPRESS_NONE, 1000, 10));
    EXPECT_EQ(10u, gcx_compress_capacity_k(GCX_COMPRESS_TOPK, 1000, 10));
    EXPECT_EQ(13u, gcx_compress_capacity_k(GCX_COMPRESS_DGC, 1000, 10));
    EXPECT_EQ(20u, gcx_compress_capacity_k(GCX_COMPRESS_REDSYNC, 1000, 10));
    EXPECT_EQ(10u, gcx_compress_capacity_k(GCX_COMPRESS_RANDOMK, 1000, 10));
    EXPECT_EQ(1000u, gcx_compress_capacity_k(GCX_COMPRESS_REDSYNC, 1000, 900));
    EXPECT_EQ(GCX_OK, gcx_compress_capacity(GCX_COMPRESS_DGC, 1000, 100, &cap));
    EXPECT_EQ(13u, cap);
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_capacity(GCX_COMPRESS_DGC, 1000, 0.1, &cap));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compress_capacity((gcx_compress_kind_t)99, 1000, 10, &cap));
}

TEST(CompressK, KindNames)
{
    for (int i = 0; i < GCX_COMPRESS_KIND_COUNT; i++) {
        gcx_compress_kind_t kind;
        const char *name = gcx_compress_kind_name((gcx_compress_kind_t)i);
        ASSERT_EQ(GCX_OK, gcx_compress_kind_parse(name, &kind)) << name;
        EXPECT_EQ(i, (int)kind);
    }
    EXPECT_STREQ("topk", gcx_compress_kind_name(GCX_COMPRESS_TOPK));
    EXPECT_STREQ("?", gcx_compress_kind_name((gcx_compress_kind_t)42));
    gcx_compress_kind_t kind = GCX_COMPRESS_DGC;
    EXPECT_EQ(GCX_ERR_NOT_FOUND, gcx_compress_kind_parse("topq", &kind));
    EXPECT_EQ(GCX_COMPRESS_DGC, kind);

    gcx_compressor_t *comp = nullptr;
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_compressor_create((gcx_compress_kind_t)5, 0, &comp));
    EXPECT_EQ(nullptr, comp);
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_REDSYNC, 0, &comp));
    EXPECT_EQ(GCX_COMPRESS_REDSYNC, gcx_compressor_kind(comp));
    gcx_compressor_destroy(comp);
    gcx_compressor_destroy(nullptr);
}
