/*
 * test_encode.cc - the float linear-combination kernels: against a double
 * reference across block boundaries, zero coefficients skipped, arguments.
 */
#include "coding_test_util.h"

#include <limits>

using namespace gcxtest;

TEST(CodingEncode, MatchesDoubleReference)
{
    std::mt19937_64 rng(21);
    std::uniform_real_distribution<float> u(-2, 2);
    std::uniform_real_distribution<double> cu(-3, 3);
    for (size_t len : {0ul, 1ul, 3ul, 4095ul, 4096ul, 4097ul, 10001ul}) {
        for (int count = 0; count <= 4; count++) {
            std::vector<std::vector<float>> v(count, std::vector<float>(len));
            std::vector<const float *> vp(count);
            std::vector<double> c(count);
            for (int k = 0; k < count; k++) {
                for (float &x : v[k]) {
                    x = u(rng);
                }
                vp[k] = v[k].data();
                c[k] = cu(rng);
            }
            std::vector<float> out(len + 1, 123.0f);
            ASSERT_EQ(
                gcx_code_encode(count, c.data(), vp.data(), len, out.data()),
                GCX_OK);
            for (size_t e = 0; e < len; e++) {
                double want = 0, mag = 0;
                for (int k = 0; k < count; k++) {
                    want += c[k] * v[k][e];
                    mag += std::fabs(c[k] * v[k][e]);
                }
                ASSERT_NEAR(out[e], want, 1e-6 * (1 + mag)) << len << " " << e;
            }
            EXPECT_EQ(out[len], 123.0f) << "wrote past the end";
        }
    }
}

TEST(CodingEncode, ZeroCoefficientsAreNotRead)
{
    const size_t len = 5000;
    std::vector<float> a(len, 1.0f);
    std::vector<float> nan(len, std::numeric_limits<float>::quiet_NaN());
    const float *vp[3] = {nullptr, a.data(), nan.data()};
    double c[3] = {0.0, 2.5, 0.0};
    std::vector<float> out(len, 9.0f);
    ASSERT_EQ(gcx_code_encode(3, c, vp, len, out.data()), GCX_OK);
    for (float x : out) {
        ASSERT_EQ(x, 2.5f);
    }
    /* Nothing nonzero: the output is zeroed. */
    double z[3] = {0, 0, 0};
    ASSERT_EQ(gcx_code_encode(3, z, vp, len, out.data()), GCX_OK);
    for (float x : out) {
        ASSERT_EQ(x, 0.0f);
    }
    ASSERT_EQ(gcx_code_accumulate(0.0, nan.data(), len, out.data()), GCX_OK);
    ASSERT_EQ(gcx_code_accumulate(0.0, nullptr, len, out.data()), GCX_OK);
    ASSERT_EQ(gcx_code_accumulate(-1.0, a.data(), len, out.data()), GCX_OK);
    ASSERT_EQ(gcx_code_accumulate(3.0, a.data(), len, out.data()), GCX_OK);
    for (float x : out) {
        ASSERT_EQ(x, 2.0f);
    }
}

TEST(CodingEncode, InvalidArguments)
{
    float out[4];
    const float *vp[1] = {nullptr};
    double c[1] = {1.0};
    EXPECT_EQ(gcx_code_encode(-1, c, vp, 4, out), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_encode(1, c, vp, 4, out), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_encode(1, nullptr, vp, 4, out), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_encode(1, c, nullptr, 4, out), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_encode(0, nullptr, nullptr, 4, nullptr),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_encode(0, nullptr, nullptr, 0, nullptr), GCX_OK);
    EXPECT_EQ(gcx_code_accumulate(1.0, nullptr, 4, out), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_code_accumulate(1.0, out, 4, nullptr), GCX_ERR_INVALID);
}
