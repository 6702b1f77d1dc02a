// The step helper on real vectors: two-level compression of an
// error-feedback residual with every compressor kind, the norms it fills,
// the level it exposes, and the residual invariant
//   residual_after + sent == residual_before + g   (exactly, per entry).
#include <gcx/gravac.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace
{

struct Lcg {
    uint64_t s;
    double uniform() // [0, 1)
    {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return double(s >> 11) / double(1ull << 53);
    }
};

// Gradients with a few large entries among many small ones, so that the
// levels' gains spread over (0, 1].
std::vector<float> gradient(Lcg &lcg, size_t n)
{
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) {
        double u = lcg.uniform() * 2.0 - 1.0;
        double big = lcg.uniform() < 0.04 ? 50.0 : 1.0;
        g[i] = float(u * big);
    }
    return g;
}

struct Rank {
    gcx_gravac_t *ctl = nullptr;
    gcx_feedback_t *fb = nullptr;
    gcx_compressor_t *comp = nullptr;
    gcx_gravac_work_t *work = nullptr;

    Rank(const gcx_gravac_params_t &p, size_t n, gcx_compress_kind_t kind,
         uint64_t seed = 1234)
    {
        EXPECT_EQ(GCX_OK, gcx_gravac_create(&p, &ctl));
        EXPECT_EQ(GCX_OK, gcx_feedback_create(n, nullptr, &fb));
        EXPECT_EQ(GCX_OK, gcx_compressor_create(kind, seed, &comp));
        EXPECT_EQ(GCX_OK, gcx_gravac_work_create(ctl, fb, comp, comp, &work));
    }
    ~Rank()
    {
        gcx_gravac_work_destroy(work);
        gcx_compressor_destroy(comp);
        gcx_feedback_destroy(fb);
        gcx_gravac_destroy(ctl);
    }
    Rank(const Rank &) = delete;
    Rank &operator=(const Rank &) = delete;
};

const gcx_sparse_vec_t *level(const gcx_gravac_work_t *work,
                              const gcx_gravac_record_t &rec,
                              gcx_gravac_level_t lv)
{
    gcx_gravac_record_t r = rec;
    r.level = lv;
    return gcx_gravac_selected(work, &r);
}

double sqnorm(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; ++i) {
        s += double(x[i]) * double(x[i]);
    }
    return s;
}

// One training step on one rank with the invariant checked; returns the
// level sent.
gcx_gravac_level_t checked_step(Rank &r, Lcg &lcg, size_t n,
                                gcx_compress_kind_t kind)
{
    std::vector<float> g = gradient(lcg, n);
    float *e = gcx_feedback_residual(r.fb);
    std::vector<float> expect(n);
    for (size_t i = 0; i < n; ++i) {
        expect[i] = e[i] + g[i]; // what accumulate computes, in float
    }
    EXPECT_EQ(GCX_OK, gcx_feedback_accumulate(r.fb, g.data()));

    gcx_gravac_norms_t norms;
    EXPECT_EQ(GCX_OK, gcx_gravac_compress(r.ctl, r.work, 100.0, &norms));
    gcx_gravac_record_t rec;
    EXPECT_EQ(GCX_OK, gcx_gravac_decide(r.ctl, &norms, &rec));

    // the norms are those of e, g_min and g_c
    const gcx_sparse_vec_t *gmin = level(r.work, rec, GCX_GRAVAC_LEVEL_MIN);
    const gcx_sparse_vec_t *gc = level(r.work, rec, GCX_GRAVAC_LEVEL_C);
    EXPECT_NEAR(sqnorm(e, n), norms.ef_sqnorm, 1e-9 * norms.ef_sqnorm);
    EXPECT_NEAR(gcx_sparse_vec_sqnorm(gmin), norms.min_sqnorm,
                1e-9 * norms.ef_sqnorm);
    EXPECT_NEAR(gcx_sparse_vec_sqnorm(gc), norms.c_sqnorm,
                1e-9 * norms.ef_sqnorm);
    EXPECT_EQ(100.0, norms.samples_per_s);
    EXPECT_EQ(GCX_OK, gcx_sparse_vec_check(gmin));
    EXPECT_EQ(GCX_OK, gcx_sparse_vec_check(gc));

    // sizes: k = ceil(n / theta_min), then ceil(k / theta_s)
    size_t k_min = 0, k_c = 0;
    EXPECT_EQ(GCX_OK, gcx_compress_k(n, rec.theta_min, &k_min));
    EXPECT_EQ(GCX_OK, gcx_compress_k(gmin->nnz, rec.theta_s, &k_c));
    if (kind == GCX_COMPRESS_TOPK || kind == GCX_COMPRESS_RANDOMK) {
        EXPECT_EQ(k_min, gmin->nnz);
        EXPECT_EQ(k_c, gc->nnz);
    }
    // g_c is a subset of g_min with the same values (multi-level)
    size_t j = 0;
    for (size_t i = 0; i < gc->nnz; ++i) {
        while (j < gmin->nnz && gmin->idx[j] < gc->idx[i]) {
            ++j;
        }
        EXPECT_TRUE(j < gmin->nnz && gmin->idx[j] == gc->idx[i]);
        if (j < gmin->nnz) {
            EXPECT_EQ(gmin->val[j], gc->val[i]);
        }
    }

    // what is sent, as a dense vector
    const gcx_sparse_vec_t *s = gcx_gravac_selected(r.work, &rec);
    std::vector<float> sent(n, 0.0f);
    if (s == nullptr) {
        EXPECT_EQ(GCX_GRAVAC_LEVEL_DENSE, rec.level);
        memcpy(sent.data(), e, n * sizeof(float));
    } else {
        EXPECT_EQ(rec.level == GCX_GRAVAC_LEVEL_C ? gc : gmin, s);
        EXPECT_EQ(GCX_OK, gcx_sparse_vec_to_dense(s, sent.data()));
    }
    EXPECT_EQ(GCX_OK, gcx_gravac_commit(r.work, &rec));
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
        wrong += (e[i] + sent[i] != expect[i]);
        wrong += (sent[i] != 0.0f && e[i] != 0.0f); // sent -> exact zero
    }
    EXPECT_EQ(0u, wrong) << "step " << rec.step;
    return rec.level;
}

} // namespace

class GravacWork : public ::testing::TestWithParam<gcx_compress_kind_t>
{
};

TEST_P(GravacWork, ResidualInvariantAtEveryLevel)
{
    const gcx_compress_kind_t kind = GetParam();
    const size_t n = 20000;
    std::set<int> levels;
    for (double eps : {0.01, 0.5, 0.8, 1.0}) {
        gcx_gravac_params_t p;
        gcx_gravac_params_default(&p);
        p.alpha = 1.0;
        p.window = 4;
        p.epsilon = eps;
        p.policy = GCX_GRAVAC_POLICY_GEOMETRIC;
        Rank r(p, n, kind);
        Lcg lcg{uint64_t(eps * 1000) + 1};
        for (int t = 0; t < 24; ++t) {
            levels.insert(checked_step(r, lcg, n, kind));
        }
    }
    // the magnitude compressors keep enough of this gradient to reach
    // all three levels over the epsilons; randomk and none at least two
    EXPECT_GE(levels.size(),
              kind == GCX_COMPRESS_RANDOMK || kind == GCX_COMPRESS_NONE ? 2u
                                                                        : 3u);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, GravacWork,
    ::testing::Values(GCX_COMPRESS_TOPK, GCX_COMPRESS_DGC, GCX_COMPRESS_REDSYNC,
                      GCX_COMPRESS_RANDOMK, GCX_COMPRESS_NONE),
    [](const auto &info) {
        return std::string(gcx_compress_kind_name(info.param));
    });

// Two ranks with different gradients: randomk picks the same indices on
// both (same seed and step), and both controllers, fed the summed norms,
// take the same decisions.
TEST(GravacWorkRanks, SummedNormsAgreeAndRandomkIndicesMatch)
{
    const size_t n = 5000;
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    p.nranks = 2;
    p.window = 3;
    p.epsilon = 0.05;
    Rank a(p, n, GCX_COMPRESS_RANDOMK, 99), b(p, n, GCX_COMPRESS_RANDOMK, 99);
    Lcg la{1}, lb{2};
    for (int t = 0; t < 15; ++t) {
        std::vector<float> ga = gradient(la, n), gb = gradient(lb, n);
        ASSERT_EQ(GCX_OK, gcx_feedback_accumulate(a.fb, ga.data()));
        ASSERT_EQ(GCX_OK, gcx_feedback_accumulate(b.fb, gb.data()));
        gcx_gravac_norms_t na, nb;
        ASSERT_EQ(GCX_OK, gcx_gravac_compress(a.ctl, a.work, 10.0, &na));
        ASSERT_EQ(GCX_OK, gcx_gravac_compress(b.ctl, b.work, 20.0, &nb));
        gcx_gravac_norms_t sum = {
            na.ef_sqnorm + nb.ef_sqnorm, na.min_sqnorm + nb.min_sqnorm,
            na.c_sqnorm + nb.c_sqnorm, na.samples_per_s + nb.samples_per_s};
        gcx_gravac_record_t ra, rb;
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(a.ctl, &sum, &ra));
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(b.ctl, &sum, &rb));
        EXPECT_EQ(0, memcmp(&ra, &rb, sizeof(ra))) << t;
        for (gcx_gravac_level_t lv :
             {GCX_GRAVAC_LEVEL_MIN, GCX_GRAVAC_LEVEL_C}) {
            const gcx_sparse_vec_t *sa = level(a.work, ra, lv);
            const gcx_sparse_vec_t *sb = level(b.work, rb, lv);
            ASSERT_EQ(sa->nnz, sb->nnz);
            EXPECT_EQ(0, memcmp(sa->idx, sb->idx, sa->nnz * sizeof(uint32_t)));
        }
        ASSERT_EQ(GCX_OK, gcx_gravac_commit(a.work, &ra));
        ASSERT_EQ(GCX_OK, gcx_gravac_commit(b.work, &rb));
    }
    gcx_gravac_state_t s;
    ASSERT_EQ(GCX_OK, gcx_gravac_get_state(a.ctl, &s));
    EXPECT_GT(s.theta_min * s.theta_s, 20.0); // the search moved on
}

TEST(GravacWorkEdge, NoSecondLevelWhenThetaMinIsThetaMax)
{
    const size_t n = 1000;
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    p.theta_max = p.theta_min; // theta_s = 1
    p.epsilon = 0.01;
    Rank r(p, n, GCX_COMPRESS_TOPK);
    Lcg lcg{5};
    for (int t = 0; t < 5; ++t) {
        std::vector<float> g = gradient(lcg, n);
        ASSERT_EQ(GCX_OK, gcx_feedback_accumulate(r.fb, g.data()));
        gcx_gravac_norms_t norms;
        ASSERT_EQ(GCX_OK, gcx_gravac_compress(r.ctl, r.work, 0.0, &norms));
        EXPECT_EQ(norms.min_sqnorm, norms.c_sqnorm);
        gcx_gravac_record_t rec;
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(r.ctl, &norms, &rec));
        EXPECT_EQ(GCX_GRAVAC_LEVEL_MIN, rec.level);
        EXPECT_EQ(10.0, rec.cf);
        EXPECT_EQ(100u, gcx_gravac_selected(r.work, &rec)->nnz);
        ASSERT_EQ(GCX_OK, gcx_gravac_commit(r.work, &rec));
    }
}

TEST(GravacWorkEdge, Misuse)
{
    const size_t n = 100;
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    Rank r(p, n, GCX_COMPRESS_TOPK);
    gcx_gravac_work_t *w = reinterpret_cast<gcx_gravac_work_t *>(0x1);
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_gravac_work_create(nullptr, r.fb, r.comp, r.comp, &w));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_gravac_work_create(r.ctl, nullptr, r.comp, r.comp, &w));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_gravac_work_create(r.ctl, r.fb, nullptr, r.comp, &w));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_gravac_work_create(r.ctl, r.fb, r.comp, nullptr, &w));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_gravac_work_create(r.ctl, r.fb, r.comp, r.comp, nullptr));
    EXPECT_EQ(reinterpret_cast<gcx_gravac_work_t *>(0x1), w);
    gcx_gravac_work_destroy(nullptr);

    gcx_gravac_record_t rec;
    memset(&rec, 0, sizeof(rec));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_commit(r.work, &rec)); // no compress
    gcx_gravac_norms_t norms;
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_gravac_compress(r.ctl, r.work, -1.0, &norms));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_compress(r.ctl, r.work, NAN, &norms));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_compress(r.ctl, r.work, 0, nullptr));

    std::vector<float> g(n, 1.0f);
    ASSERT_EQ(GCX_OK, gcx_feedback_accumulate(r.fb, g.data()));
    ASSERT_EQ(GCX_OK, gcx_gravac_compress(r.ctl, r.work, 0.0, &norms));
    ASSERT_EQ(GCX_OK, gcx_gravac_decide(r.ctl, &norms, &rec));
    gcx_gravac_record_t other = rec;
    other.step = rec.step + 1;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_commit(r.work, &other));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_commit(r.work, nullptr));
    EXPECT_EQ(GCX_OK, gcx_gravac_commit(r.work, &rec));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_commit(r.work, &rec)); // twice
    EXPECT_EQ(nullptr, gcx_gravac_selected(nullptr, &rec));
    EXPECT_EQ(nullptr, gcx_gravac_selected(r.work, nullptr));

    // NaN in the residual: compress fails, nothing to commit
    gcx_gravac_norms_t before = norms;
    gcx_feedback_residual(r.fb)[3] = NAN;
    gcx_feedback_touch(r.fb);
    EXPECT_EQ(GCX_ERR_RANGE, gcx_gravac_compress(r.ctl, r.work, 0.0, &norms));
    EXPECT_EQ(0, memcmp(&before, &norms, sizeof(norms)));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_commit(r.work, &rec));

    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_allreduce_norms(nullptr, &norms));
}

namespace
{

gcx_status_t self_allgather(const void *sendbuf, void *recvbuf, size_t len,
                            void *)
{
    memcpy(recvbuf, sendbuf, len);
    return GCX_OK;
}

} // namespace

// The norms allreduce on a one-rank communicator (the multi-rank sum is the
// dense allreduce's own test): the sum of one rank is its value, in place.
TEST(GravacAllreduce, OneRankCommunicator)
{
    gcx_oob_t oob;
    oob.allgather = self_allgather;
    oob.ctx = nullptr;
    oob.rank = 0;
    oob.size = 1;
    gcx_comm_t *comm = nullptr;
    gcx_status_t st = gcx_comm_create(&oob, nullptr, &comm);
    if (st != GCX_OK) {
        GTEST_SKIP() << "no one-rank communicator here: " << gcx_strerror(st);
    }
    gcx_gravac_norms_t norms = {4.0, 3.0, 2.5, 128.0};
    EXPECT_EQ(GCX_OK, gcx_gravac_allreduce_norms(comm, &norms));
    EXPECT_EQ(4.0, norms.ef_sqnorm);
    EXPECT_EQ(3.0, norms.min_sqnorm);
    EXPECT_EQ(2.5, norms.c_sqnorm);
    EXPECT_EQ(128.0, norms.samples_per_s);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_allreduce_norms(comm, nullptr));
    gcx_comm_destroy(comm);
}
