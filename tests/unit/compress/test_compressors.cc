/*
 * test_compressors.cc - every compressor against the sort-based reference,
 * on dense and sparse inputs, for every generated input and a range of
 * sizes and compression factors; multi-level compression; the statistics;
 * randomk's shared-seed contract.
 *
 * What each compressor must produce (positions in index order):
 *   none     every entry;
 *   topk     exactly the reference top k (ties: lower index);
 *   dgc      nnz in [ceil(0.8k), floor(1.3k)], and the reference top nnz;
 *   redsync  nnz in [ceil(k/2), 2k], and the reference top nnz;
 *   randomk  k distinct entries, copied values.
 * Sizes include 70001 (above the sampled-shortcut threshold of topk) and
 * smaller ones (radix path only; from 20011 on, its candidate buffer is
 * smaller than the input); inputs include ties, plateaus, crowded and
 * constant values, which push topk through its further radix digits and
 * exact-tie pass and dgc/redsync through their corrections.
 */
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "compress_ref.h"

using namespace gcxtest;

namespace
{

const size_t kSizes[] = {1, 2, 3, 17, 1000, 4099, 20011, 70001};
const double kCfs[] = {1, 1.5, 2, 3, 10, 100, 1000, INFINITY};

/* The input of one compression: values by position, their indices. */
struct View {
    const std::vector<float> &val;
    const std::vector<uint32_t> *map; /* nullptr: index = position */
    size_t dense_len;

    uint32_t index(size_t pos) const
    {
        return map != nullptr ? (*map)[pos] : (uint32_t)pos;
    }
};

/* Compare out with the reference; returns a failure description or "". */
std::string check_output(gcx_compress_kind_t kind, const View &in,
                         const std::vector<uint32_t> &rank, size_t k,
                         const gcx_sparse_vec_t &out,
                         const gcx_compress_stats_t &st)
{
    std::ostringstream err;
    const size_t m = in.val.size();
    size_t want_lo = k, want_hi = k;

    if (kind == GCX_COMPRESS_NONE || k >= m) {
        want_lo = want_hi = m;
    } else if (k == 0) {
        want_lo = want_hi = 0;
    } else if (kind == GCX_COMPRESS_DGC) {
        want_lo = k - (2 * k) / 10;
        want_hi = k + (3 * k) / 10;
    } else if (kind == GCX_COMPRESS_REDSYNC) {
        want_lo = (k + 1) / 2;
        want_hi = std::min(2 * k, m);
    }
    if (out.nnz < want_lo || out.nnz > want_hi) {
        err << "nnz " << out.nnz << " not in [" << want_lo << ", " << want_hi
            << "]; ";
        return err.str();
    }
    if (out.dense_len != in.dense_len) {
        err << "dense_len " << out.dense_len << "; ";
    }
    if (st.nnz != out.nnz) {
        err << "stats.nnz " << st.nnz << "; ";
    }
    /* values copied, indices strictly increasing */
    std::vector<uint32_t> pos;
    if (kind == GCX_COMPRESS_RANDOMK && out.nnz < m) {
        size_t p = 0;
        for (size_t j = 0; j < out.nnz; j++) {
            while (p < m && in.index(p) < out.idx[j]) {
                p++;
            }
            if (p == m || in.index(p) != out.idx[j]) {
                err << "randomk index " << out.idx[j] << " not in input; ";
                return err.str();
            }
            pos.push_back((uint32_t)p);
        }
    } else {
        pos = ref_topk_rank(rank, out.nnz);
    }
    for (size_t j = 0; j < out.nnz; j++) {
        if (out.idx[j] != in.index(pos[j]) ||
            !same_bits(out.val[j], in.val[pos[j]])) {
            err << "entry " << j << ": got (" << out.idx[j] << ", "
                << out.val[j] << ") want (" << in.index(pos[j]) << ", "
                << in.val[pos[j]] << "); ";
            return err.str();
        }
        if (j > 0 && out.idx[j] <= out.idx[j - 1]) {
            err << "indices not increasing at " << j << "; ";
            return err.str();
        }
    }
    /* statistics of the same pass */
    double in_sq = naive_sqnorm(in.val.data(), m);
    double out_sq = naive_sqnorm(out.val, out.nnz);
    if (std::fabs(st.in_sqnorm - in_sq) > 1e-9 * in_sq ||
        std::fabs(st.out_sqnorm - out_sq) > 1e-9 * out_sq) {
        err << "sqnorm in " << st.in_sqnorm << " vs " << in_sq << ", out "
            << st.out_sqnorm << " vs " << out_sq << "; ";
    }
    return err.str();
}

/* A sparse input made of a pseudo-random third of the positions of x. */
void make_sparse(const std::vector<float> &x, uint32_t seed,
                 std::vector<uint32_t> &idx, std::vector<float> &val)
{
    std::mt19937 gen(seed);
    idx.clear();
    val.clear();
    for (size_t i = 0; i < x.size(); i++) {
        if (gen() % 3 == 0) {
            idx.push_back((uint32_t)i);
            val.push_back(x[i]);
        }
    }
}

/* Inputs and their reference ranks, shared by the five compressors (the
 * sort is the expensive part of a sanitizer run). */
struct RefCase {
    std::vector<float> x;        /* dense input */
    std::vector<uint32_t> rank;  /* its magnitude ranks */
    std::vector<uint32_t> sidx;  /* sparse input made from x */
    std::vector<float> sval;     /* ... its values */
    std::vector<uint32_t> srank; /* ... their ranks */
};

void make_sparse(const std::vector<float> &x, uint32_t seed,
                 std::vector<uint32_t> &idx, std::vector<float> &val);

const RefCase &ref_case(Input input, size_t n)
{
    static std::map<std::pair<int, size_t>, RefCase> cache;
    auto key = std::make_pair((int)input, n);
    auto it = cache.find(key);
    if (it == cache.end()) {
        RefCase c;
        c.x = make_input(input, n, (uint32_t)n);
        c.rank = magnitude_rank(magnitude_order(c.x));
        make_sparse(c.x, (uint32_t)n, c.sidx, c.sval);
        c.srank = magnitude_rank(magnitude_order(c.sval));
        it = cache.emplace(key, std::move(c)).first;
    }
    return it->second;
}

using Param = std::tuple<gcx_compress_kind_t, Input>;

class CompressorVsRef : public ::testing::TestWithParam<Param>
{
  protected:
    void SetUp() override
    {
        ASSERT_EQ(GCX_OK,
                  gcx_compressor_create(std::get<0>(GetParam()), 7, &comp_));
    }
    void TearDown() override
    {
        gcx_compressor_destroy(comp_);
    }
    gcx_compressor_t *comp_ = nullptr;
};

TEST_P(CompressorVsRef, Dense)
{
    const gcx_compress_kind_t kind = std::get<0>(GetParam());
    const Input input = std::get<1>(GetParam());

    for (size_t n : kSizes) {
        const RefCase &rc = ref_case(input, n);
        const std::vector<float> &x = rc.x;
        const std::vector<uint32_t> &rank = rc.rank;
        View in{x, nullptr, n};
        SparseBuf out(n);

        for (double cf : kCfs) {
            /* a few steps: other samples for dgc, other draws for randomk
             * (the other results do not depend on the step) */
            const bool seeded =
                kind == GCX_COMPRESS_DGC || kind == GCX_COMPRESS_RANDOMK;
            for (uint64_t step = 0; step < (n >= 1000 && seeded ? 3u : 1u);
                 step++) {
                gcx_compress_stats_t st;
                size_t k;
                gcx_compressor_set_step(comp_, step);
                ASSERT_EQ(GCX_OK, gcx_compress_k(n, cf, &k));
                ASSERT_EQ(GCX_OK, gcx_compress_dense(comp_, x.data(), n, cf,
                                                     &out.sp, &st))
                    << input_name(input) << " n=" << n << " cf=" << cf;
                EXPECT_EQ(kind == GCX_COMPRESS_NONE ? n : k, st.k);
                std::string e = check_output(kind, in, rank, k, out.sp, st);
                ASSERT_EQ("", e) << input_name(input) << " n=" << n
                                 << " cf=" << cf << " step=" << step;
            }
        }
    }
}

TEST_P(CompressorVsRef, Sparse)
{
    const gcx_compress_kind_t kind = std::get<0>(GetParam());
    const Input input = std::get<1>(GetParam());

    for (size_t n : kSizes) {
        const RefCase &rc = ref_case(input, n);
        std::vector<uint32_t> idx = rc.sidx;
        std::vector<float> val = rc.sval;
        const std::vector<uint32_t> &rank = rc.srank;
        View in{val, &idx, n};
        gcx_sparse_vec_t sp;
        ASSERT_EQ(GCX_OK,
                  gcx_sparse_vec_init(&sp, idx.data(), val.data(), idx.size(),
                                      n));
        sp.nnz = idx.size();
        SparseBuf out(idx.size());

        for (double cf : kCfs) {
            gcx_compress_stats_t st;
            size_t k;
            ASSERT_EQ(GCX_OK, gcx_compress_k(idx.size(), cf, &k));
            ASSERT_EQ(GCX_OK, gcx_compress_sparse(comp_, &sp, cf, &out.sp, &st))
                << input_name(input) << " n=" << n << " cf=" << cf;
            std::string e = check_output(kind, in, rank, k, out.sp, st);
            ASSERT_EQ("", e) << input_name(input) << " n=" << n << " cf=" << cf;
        }
    }
}

std::string param_name(const ::testing::TestParamInfo<Param> &info)
{
    return std::string(gcx_compress_kind_name(std::get<0>(info.param))) + "_" +
           input_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    AllInputs, CompressorVsRef,
    ::testing::Combine(::testing::Values(GCX_COMPRESS_NONE, GCX_COMPRESS_TOPK,
                                         GCX_COMPRESS_DGC, GCX_COMPRESS_REDSYNC,
                                         GCX_COMPRESS_RANDOMK),
                       ::testing::ValuesIn(all_inputs())),
    param_name);

} // namespace

/* C(C(x, cf1), cf2) with topk equals the direct top-k of x. */
TEST(MultiLevel, TopkOfTopkEqualsDirect)
{
    const double pairs[][2] = {{2, 5}, {10, 10}, {10, 1}, {3, 7}, {1, 100}};
    gcx_compressor_t *comp;
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_TOPK, 1, &comp));

    for (Input input : all_inputs()) {
        for (size_t n : {1000u, 70001u, 140009u}) {
            std::vector<float> x = make_input(input, n, 99);
            SparseBuf mid(n, 0), two(n, 0), direct(n, 0);
            for (const auto &p : pairs) {
                size_t k1, k2;
                ASSERT_EQ(GCX_OK, gcx_compress_k(n, p[0], &k1));
                ASSERT_EQ(GCX_OK, gcx_compress_k(k1, p[1], &k2));
                ASSERT_EQ(GCX_OK, gcx_compress_dense(comp, x.data(), n, p[0],
                                                     &mid.sp, nullptr));
                ASSERT_EQ(GCX_OK, gcx_compress_sparse(comp, &mid.sp, p[1],
                                                      &two.sp, nullptr));
                ASSERT_EQ(GCX_OK, gcx_compress_dense_k(comp, x.data(), n, k2,
                                                       &direct.sp, nullptr));
                ASSERT_EQ(k2, two.sp.nnz);
                ASSERT_EQ(k2, direct.sp.nnz);
                EXPECT_EQ(n, two.sp.dense_len);
                size_t j = 0;
                while (j < k2 && direct.idx[j] == two.idx[j] &&
                       same_bits(direct.val[j], two.val[j])) {
                    j++;
                }
                ASSERT_EQ(k2, j)
                    << input_name(input) << " n=" << n << " cf " << p[0]
                    << " x " << p[1] << ": first difference at entry " << j;
            }
        }
    }
    gcx_compressor_destroy(comp);
}

/* Every kind accepts its own output as input (GraVAC's two levels). */
TEST(MultiLevel, EveryKindOnItsOwnOutput)
{
    std::vector<float> x = make_input(Input::Gauss, 100000, 5);
    for (int kind = 0; kind < GCX_COMPRESS_KIND_COUNT; kind++) {
        gcx_compressor_t *comp;
        gcx_compress_stats_t st1, st2;
        ASSERT_EQ(GCX_OK,
                  gcx_compressor_create((gcx_compress_kind_t)kind, 3, &comp));
        SparseBuf mid(100000), two(100000);
        ASSERT_EQ(GCX_OK, gcx_compress_dense(comp, x.data(), x.size(), 10,
                                             &mid.sp, &st1));
        ASSERT_EQ(GCX_OK,
                  gcx_compress_sparse(comp, &mid.sp, 10, &two.sp, &st2));
        EXPECT_EQ(GCX_OK, gcx_sparse_vec_check(&two.sp));
        EXPECT_EQ(x.size(), two.sp.dense_len);
        /* the second level reads the first's output: its input norm */
        EXPECT_EQ(st1.out_sqnorm, st2.in_sqnorm);
        EXPECT_EQ(gcx_dense_sqnorm(x.data(), x.size()), st1.in_sqnorm);
        EXPECT_EQ(gcx_sparse_vec_sqnorm(&two.sp), st2.out_sqnorm);
        EXPECT_LE(st2.out_sqnorm, st2.in_sqnorm);
        EXPECT_GT(gcx_compress_gain(&st1), 0.0);
        EXPECT_LE(gcx_compress_gain(&st1), 1.0);
        if (kind != GCX_COMPRESS_RANDOMK && kind != GCX_COMPRESS_NONE) {
            /* magnitude selection keeps most of the energy of a Gaussian */
            EXPECT_GT(gcx_compress_gain(&st1), 0.3) << kind;
        }
        gcx_compressor_destroy(comp);
    }
}

TEST(Stats, GainOfZeroInputIsOne)
{
    gcx_compress_stats_t st = {0, 0, 0, 0, 0};
    EXPECT_DOUBLE_EQ(1.0, gcx_compress_gain(&st));
    st.in_sqnorm = 4;
    st.out_sqnorm = 1;
    EXPECT_DOUBLE_EQ(0.25, gcx_compress_gain(&st));
}

/* Same seed and step: same indices on every "rank", whatever the values. */
TEST(RandomK, SharedSeedSameIndices)
{
    const size_t n = 50000;
    std::vector<float> a = make_input(Input::Gauss, n, 1);
    std::vector<float> b = make_input(Input::Ties, n, 2);
    gcx_compressor_t *r0, *r1;
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_RANDOMK, 77, &r0));
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_RANDOMK, 77, &r1));
    SparseBuf o0(n), o1(n), o2(n);

    for (double cf : {1.5, 10.0, 1000.0}) {
        gcx_compressor_set_step(r0, 12);
        gcx_compressor_set_step(r1, 12);
        ASSERT_EQ(GCX_OK,
                  gcx_compress_dense(r0, a.data(), n, cf, &o0.sp, nullptr));
        ASSERT_EQ(GCX_OK,
                  gcx_compress_dense(r1, b.data(), n, cf, &o1.sp, nullptr));
        ASSERT_EQ(o0.sp.nnz, o1.sp.nnz);
        EXPECT_TRUE(std::equal(o0.idx.begin(), o0.idx.begin() + o0.sp.nnz,
                               o1.idx.begin()));
        /* the next step draws other indices */
        gcx_compressor_set_step(r1, 13);
        ASSERT_EQ(GCX_OK,
                  gcx_compress_dense(r1, b.data(), n, cf, &o2.sp, nullptr));
        EXPECT_FALSE(std::equal(o0.idx.begin(), o0.idx.begin() + o0.sp.nnz,
                                o2.idx.begin()));
    }
    gcx_compressor_destroy(r0);
    gcx_compressor_destroy(r1);
}

/* Every index is drawn about k/n of the time (the draw is deterministic,
 * so this test cannot flake). */
TEST(RandomK, DrawIsUniform)
{
    const size_t n = 40, steps = 4000;
    std::vector<float> x(n, 1.0f);
    std::vector<size_t> hits(n, 0), hits_big(n, 0);
    gcx_compressor_t *comp;
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_RANDOMK, 5, &comp));
    SparseBuf out(n);

    for (uint64_t s = 0; s < steps; s++) {
        gcx_compressor_set_step(comp, s);
        ASSERT_EQ(GCX_OK,
                  gcx_compress_dense_k(comp, x.data(), n, 4, &out.sp, nullptr));
        for (size_t j = 0; j < out.sp.nnz; j++) {
            hits[out.idx[j]]++;
        }
        /* k > n/2 draws the excluded set instead */
        ASSERT_EQ(GCX_OK, gcx_compress_dense_k(comp, x.data(), n, 30, &out.sp,
                                               nullptr));
        for (size_t j = 0; j < out.sp.nnz; j++) {
            hits_big[out.idx[j]]++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        /* expected 400 and 3000; binomial sd 19 and 27 */
        EXPECT_NEAR(400.0, (double)hits[i], 100.0) << i;
        EXPECT_NEAR(3000.0, (double)hits_big[i], 140.0) << i;
    }
    gcx_compressor_destroy(comp);
}

/* dgc stays within [0.8k, 1.3k] on adversarial inputs over many steps,
 * and its corrections are exercised (passes > 1) on some of them. */
TEST(Dgc, CountWithinRangeAndCorrections)
{
    gcx_compressor_t *comp;
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_DGC, 11, &comp));
    unsigned corrected = 0;

    for (Input input : all_inputs()) {
        const size_t n = 100003;
        std::vector<float> x = make_input(input, n, 123);
        SparseBuf out(n);
        for (double cf : {4.0, 10.0, 100.0, 1000.0, 20000.0}) {
            for (uint64_t step = 0; step < 3; step++) {
                gcx_compress_stats_t st;
                size_t k;
                gcx_compressor_set_step(comp, step);
                ASSERT_EQ(GCX_OK, gcx_compress_k(n, cf, &k));
                ASSERT_EQ(GCX_OK, gcx_compress_dense(comp, x.data(), n, cf,
                                                     &out.sp, &st));
                EXPECT_GE(st.nnz, k - (2 * k) / 10)
                    << input_name(input) << " cf " << cf;
                EXPECT_LE(st.nnz, k + (3 * k) / 10)
                    << input_name(input) << " cf " << cf;
                corrected += st.passes > 1;
            }
        }
    }
    EXPECT_GT(corrected, 0u);
    gcx_compressor_destroy(comp);
}

/* The radix select's deeper paths are taken (and exact) where expected:
 * crowded magnitudes need the further digits, a constant input resolves
 * all 31 bits and breaks every tie by index; Gauss takes the sampled
 * one-pass shortcut. */
TEST(TopkPaths, PassesPerInput)
{
    struct {
        Input input;
        size_t n;
        unsigned min_passes, max_passes;
    } cases[] = {
        {Input::Crowded, 20011, 3, 4},  /* hist, hist, (hist), emit */
        {Input::Constant, 20011, 4, 4}, /* hist x3, exact emit */
        {Input::Constant, 70001, 5, 5}, /* failed shortcut + the above */
        {Input::Gauss, 70001, 1, 1},    /* shortcut */
        {Input::Gauss, 4099, 2, 2},     /* hist, emit */
    };
    gcx_compressor_t *comp;
    ASSERT_EQ(GCX_OK, gcx_compressor_create(GCX_COMPRESS_TOPK, 0, &comp));
    for (const auto &c : cases) {
        std::vector<float> x = make_input(c.input, c.n, 17);
        std::vector<uint32_t> order = magnitude_order(x);
        SparseBuf out(c.n);
        gcx_compress_stats_t st;
        ASSERT_EQ(GCX_OK,
                  gcx_compress_dense(comp, x.data(), c.n, 10, &out.sp, &st));
        EXPECT_GE(st.passes, c.min_passes) << input_name(c.input) << c.n;
        EXPECT_LE(st.passes, c.max_passes) << input_name(c.input) << c.n;
        std::vector<uint32_t> want = ref_topk(order, st.k);
        ASSERT_EQ(want.size(), out.sp.nnz);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), out.idx.begin()));
    }
    gcx_compressor_destroy(comp);
}
