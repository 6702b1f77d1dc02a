/*
 * test_internals.cc - white-box tests of the engines under the compressors
 * (src/compress/compress_int.h): quickselect, sample rank, candidate
 * selection, the bounded generator.
 */
#include <gtest/gtest.h>

extern "C" {
#include "compress/compress_int.h"
}

#include "compress_ref.h"

using namespace gcxtest;

TEST(Internals, SelectU64Descending)
{
    std::mt19937_64 gen(2);
    for (size_t n : {1u, 2u, 30u, 1000u, 20000u}) {
        std::vector<uint64_t> a(n);
        for (size_t i = 0; i < n; i++) {
            a[i] = n > 1000 ? (uint64_t)i : gen(); /* also sorted input */
        }
        std::vector<uint64_t> sorted = a;
        std::sort(sorted.rbegin(), sorted.rend());
        for (size_t r : {(size_t)1, n / 3 + 1, n}) {
            std::vector<uint64_t> b = a;
            EXPECT_EQ(sorted[r - 1],
                      gcx_compress_select_u64_desc(b.data(), n, r))
                << n << " " << r;
        }
    }
}

TEST(Internals, KeysRankWithDuplicates)
{
    std::mt19937 gen(3);
    for (size_t s : {1u, 7u, 4096u}) {
        std::vector<uint32_t> keys(s), tmp(s);
        for (auto &k : keys) {
            k = gen() % 3 == 0 ? 0x3f800000u : gen() & 0x7fffffffu;
        }
        std::vector<uint32_t> sorted = keys;
        std::sort(sorted.rbegin(), sorted.rend());
        for (size_t r = 1; r <= s; r += 1 + s / 50) {
            EXPECT_EQ(sorted[r - 1],
                      gcx_cand_keys_rank(keys.data(), s, r, tmp.data()))
                << s << " " << r;
        }
    }
}

TEST(Internals, CandKeepTopKeepsOrderAndTies)
{
    gcx_compressor_t *comp;
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_TOPK, 0, &comp));
    std::vector<float> v = make_input(Input::Ties, 3000, 4);
    std::vector<uint32_t> idx(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        idx[i] = (uint32_t)(3 * i);
    }
    std::vector<uint32_t> order = magnitude_order(v);
    for (size_t r : {0u, 1u, 10u, 1500u, 2999u, 3000u}) {
        std::vector<uint32_t> ci = idx, oi(v.size());
        std::vector<float> cv = v, ov(v.size());
        ASSERT_EQ(GCX_OK,
                  gcx_cand_keep_top(comp, ci.data(), cv.data(), v.size(), r,
                                    oi.data(), ov.data()));
        std::vector<uint32_t> want = ref_topk(order, r);
        for (size_t j = 0; j < r; j++) {
            ASSERT_EQ(3 * want[j], oi[j]) << r << " " << j;
            ASSERT_EQ(v[want[j]], ov[j]);
        }
        /* in place */
        ASSERT_EQ(GCX_OK,
                  gcx_cand_keep_top(comp, ci.data(), cv.data(), v.size(), r,
                                    ci.data(), cv.data()));
        EXPECT_TRUE(std::equal(oi.begin(), oi.begin() + r, ci.begin()));
    }
    gcx_compressor_destroy(comp);
}

TEST(Internals, RngBelowIsInRangeAndDeterministic)
{
    gcx_compress_rng_t a, b;
    gcx_compress_rng_seed(&a, 1, 2, 3, 4);
    gcx_compress_rng_seed(&b, 1, 2, 3, 4);
    for (uint64_t bound : {1ull, 2ull, 3ull, 1000ull, 1ull << 40}) {
        for (int i = 0; i < 1000; i++) {
            uint64_t x = gcx_compress_rng_below(&a, bound);
            ASSERT_LT(x, bound);
            ASSERT_EQ(x, gcx_compress_rng_below(&b, bound));
        }
    }
    gcx_compress_rng_seed(&b, 1, 2, 3, 5);
    EXPECT_NE(gcx_compress_rng_next(&a), gcx_compress_rng_next(&b));
}
