// Unit tests of status strings, bootstrap helpers, tags and reductions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include "coll/reduce.h"
#include "core/bootstrap.h"
#include "base/config.h"
#include "transport/transport.h"
}

namespace {

TEST(Status, EveryCodeHasText)
{
    for (int s = GCX_ERR_CANCELED; s <= GCX_INPROGRESS; ++s) {
        std::string text = gcx_strerror(static_cast<gcx_status_t>(s));
        EXPECT_FALSE(text.empty());
        EXPECT_NE("unknown status", text) << s;
    }
    EXPECT_STREQ("unknown status", gcx_strerror(static_cast<gcx_status_t>(-99)));
}

TEST(Bootstrap, FirstHostOfSlurmLists)
{
    char host[64];
    ASSERT_EQ(GCX_OK, gcx_bootstrap_first_host("node[03-05,9]", host, 64));
    EXPECT_STREQ("node03", host);
    ASSERT_EQ(GCX_OK, gcx_bootstrap_first_host("gpu1,gpu2", host, 64));
    EXPECT_STREQ("gpu1", host);
    ASSERT_EQ(GCX_OK, gcx_bootstrap_first_host("login", host, 64));
    EXPECT_STREQ("login", host);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_first_host("node[", host, 64));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_first_host("[1-2]", host, 64));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_first_host("node[a]", host, 64));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_bootstrap_first_host("averyveryverylongname", host, 8));
}

TEST(Bootstrap, SipHashReferenceVector)
{
    // SipHash-2-4 paper, appendix A: key 00..0f, message 00..0e
    uint64_t key[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
    uint8_t  msg[15];
    for (int i = 0; i < 15; ++i) {
        msg[i] = uint8_t(i);
    }
    EXPECT_EQ(0xa129ca6149be45e5ull, gcx_bootstrap_siphash(key, msg, 15));
}

TEST(Bootstrap, MessagesParseAndMacsBindTheirFields)
{
    // "gcxb", HELLO (2), version 2, 24 bytes
    const uint8_t hdr[12] = {0x62, 0x78, 0x63, 0x67, 2, 0, 2, 0, 24, 0, 0, 0};
    const char   *why     = nullptr;
    EXPECT_EQ(GCX_OK, gcx_bootstrap_parse_header(hdr, 12, GCX_BOOTSTRAP_HELLO,
                                                 24, &why));
    EXPECT_EQ(nullptr, why);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_parse_header(hdr, 11,
                                   GCX_BOOTSTRAP_HELLO, 24, &why));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_parse_header(hdr, 12,
                                   GCX_BOOTSTRAP_REPLY, 16, &why));
    EXPECT_STREQ("an unexpected message type", why);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_parse_header(hdr, 12,
                                   GCX_BOOTSTRAP_DATA, 100, &why));
    uint8_t bad[12];
    memcpy(bad, hdr, 12);
    bad[8] = 0xff; // length
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_parse_header(bad, 12,
                                   GCX_BOOTSTRAP_HELLO, 24, &why));
    EXPECT_STREQ("a length other than the expected one", why);
    bad[8] = 24;
    bad[6] = 1; // version
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_parse_header(bad, 12,
                                   GCX_BOOTSTRAP_HELLO, 24, &why));

    uint8_t body[24] = {3, 0, 0, 0, 5, 0, 0, 0, 9};
    gcx_bootstrap_msg_t hello;
    ASSERT_EQ(GCX_OK, gcx_bootstrap_parse_body(GCX_BOOTSTRAP_HELLO, body, 24,
                                               &hello));
    EXPECT_EQ(3u, hello.rank);
    EXPECT_EQ(5u, hello.size);
    EXPECT_EQ(9u, hello.nonce);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_parse_body(GCX_BOOTSTRAP_HELLO,
                                                        body, 23, &hello));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_bootstrap_parse_body(GCX_BOOTSTRAP_DATA,
                                                        body, 0, &hello));

    uint64_t k1[2], k2[2];
    gcx_bootstrap_key("job-a", k1);
    gcx_bootstrap_key("job-b", k2);
    uint64_t mac = gcx_bootstrap_hello_mac(k1, 77, &hello);
    EXPECT_NE(mac, gcx_bootstrap_hello_mac(k2, 77, &hello)); // token
    EXPECT_NE(mac, gcx_bootstrap_hello_mac(k1, 78, &hello)); // challenge
    hello.rank = 4;
    EXPECT_NE(mac, gcx_bootstrap_hello_mac(k1, 77, &hello)); // a claim
}

class Identity : public ::testing::Test {
  protected:
    void SetUp() override
    {
        for (const char *v : kVars) {
            unsetenv(v);
        }
        gcx_config_defaults(&config_);
    }
    void TearDown() override
    {
        for (const char *v : kVars) {
            unsetenv(v);
        }
    }
    static constexpr const char *kVars[] = {
        "RANK",         "WORLD_SIZE",   "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
        "SLURM_PROCID", "SLURM_NTASKS"};
    struct gcx_config config_;
    int               rank_ = -7, size_ = -7;
    const char       *source_ = nullptr;
};

TEST_F(Identity, NothingSetIsAClearError)
{
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    EXPECT_NE(std::string::npos,
              testing::internal::GetCapturedStderr().find("GCX_RANK"));
    EXPECT_EQ(-7, rank_);
}

TEST_F(Identity, LaunchersInOrder)
{
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    ASSERT_EQ(GCX_OK, gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    EXPECT_EQ(3, rank_);
    EXPECT_EQ(8, size_);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    ASSERT_EQ(GCX_OK, gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    EXPECT_EQ(1, rank_);
    EXPECT_EQ(4, size_);
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "5", 1);
    ASSERT_EQ(GCX_OK, gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    EXPECT_EQ(2, rank_);
    config_.rank       = 0;
    config_.world_size = 2;
    ASSERT_EQ(GCX_OK, gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    EXPECT_EQ(0, rank_);
    EXPECT_EQ(2, size_);
    EXPECT_STREQ("GCX_RANK/GCX_WORLD_SIZE", source_);
}

TEST_F(Identity, BadValuesAreRejected)
{
    testing::internal::CaptureStderr();
    setenv("RANK", "4", 1);
    setenv("WORLD_SIZE", "4", 1); // rank >= size
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    setenv("RANK", "one", 1);
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    config_.rank = 1; // GCX_RANK without GCX_WORLD_SIZE
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_bootstrap_identity(&config_, &rank_, &size_, &source_));
    testing::internal::GetCapturedStderr();
}

TEST_F(Identity, RendezvousAddressAndPort)
{
    char host[256];
    int  port = 0;
    setenv("MASTER_ADDR", "10.0.0.9", 1);
    setenv("MASTER_PORT", "1234", 1);
    ASSERT_EQ(GCX_OK, gcx_bootstrap_root(&config_, host, sizeof(host), &port));
    EXPECT_STREQ("10.0.0.9", host);
    EXPECT_EQ(1234, port);
    strcpy(config_.root_addr, "head");
    config_.root_port = 4321;
    ASSERT_EQ(GCX_OK, gcx_bootstrap_root(&config_, host, sizeof(host), &port));
    EXPECT_STREQ("head", host);
    EXPECT_EQ(4321, port);
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
}

TEST(Tags, FieldsRoundTrip)
{
    uint64_t tag = gcx_tl_tag(0xabc, 0x12345, 0x4001, 77);
    EXPECT_EQ(77u, gcx_tl_tag_src(tag));
    EXPECT_EQ(0x4001u, gcx_tl_tag_step(tag));
    EXPECT_EQ(0x12345u, gcx_tl_tag_seq(tag));
    // the sequence number wraps inside its field, never into the comm id
    EXPECT_EQ(gcx_tl_tag(1, 0, 0, 0) >> 52,
              gcx_tl_tag(1, 1u << GCX_TL_TAG_SEQ_BITS, 0, 0) >> 52);
    EXPECT_NE(gcx_tl_tag(1, 5, 0, 0), gcx_tl_tag(1, 6, 0, 0));
}

TEST(Reduce, EveryTypeAndOp)
{
    const double a[5] = {1, -2, 3.5, 0, 8};
    const double b[5] = {4, 2, -1.5, 0, -8};
    for (int dt = 0; dt < GCX_DT_U8; ++dt) {
        for (int op = 0; op < GCX_OP_LAST; ++op) {
            gcx_dtype_t     dtype = static_cast<gcx_dtype_t>(dt);
            gcx_reduce_fn_t fn    = gcx_reduce_fn(dtype, static_cast<gcx_op_t>(op));
            bool          integer = dtype == GCX_DT_I32 || dtype == GCX_DT_I64;
            bool          bitwise = op == GCX_OP_BAND || op == GCX_OP_BOR || op == GCX_OP_BXOR;
            if (bitwise && !integer) {
                EXPECT_EQ(nullptr, fn) << "type " << dt << " op " << op; // integers only
                continue;
            }
            ASSERT_NE(nullptr, fn) << "type " << dt << " op " << op;
            unsigned char x[5 * 8], y[5 * 8], out[5 * 8];
            for (int i = 0; i < 5; ++i) {
                double av = integer ? std::trunc(a[i]) : a[i];
                double bv = integer ? std::trunc(b[i]) : b[i];
                switch (dtype) {
                case GCX_DT_F32: reinterpret_cast<float *>(x)[i] = av; reinterpret_cast<float *>(y)[i] = bv; break;
                case GCX_DT_F64: reinterpret_cast<double *>(x)[i] = av; reinterpret_cast<double *>(y)[i] = bv; break;
                case GCX_DT_I32: reinterpret_cast<int32_t *>(x)[i] = av; reinterpret_cast<int32_t *>(y)[i] = bv; break;
                case GCX_DT_I64: reinterpret_cast<int64_t *>(x)[i] = av; reinterpret_cast<int64_t *>(y)[i] = bv; break;
                case GCX_DT_F16: reinterpret_cast<uint16_t *>(x)[i] = gcx_float_to_half(av); reinterpret_cast<uint16_t *>(y)[i] = gcx_float_to_half(bv); break;
                default: reinterpret_cast<uint16_t *>(x)[i] = gcx_float_to_bf16(av); reinterpret_cast<uint16_t *>(y)[i] = gcx_float_to_bf16(bv); break;
                }
            }
            fn(out, x, y, 5);
            for (int i = 0; i < 5; ++i) {
                double av = integer ? std::trunc(a[i]) : a[i];
                double bv = integer ? std::trunc(b[i]) : b[i];
                int64_t ai = static_cast<int64_t>(av), bi = static_cast<int64_t>(bv);
                // products here are exact in every type (-5.25 included)
                double e  = op == GCX_OP_MAX  ? std::max(av, bv) :
                            op == GCX_OP_MIN  ? std::min(av, bv) :
                            op == GCX_OP_PROD ? av * bv :
                            op == GCX_OP_BAND ? static_cast<double>(ai & bi) :
                            op == GCX_OP_BOR  ? static_cast<double>(ai | bi) :
                            op == GCX_OP_BXOR ? static_cast<double>(ai ^ bi) : av + bv;
                double got;
                switch (dtype) {
                case GCX_DT_F32: got = reinterpret_cast<float *>(out)[i]; break;
                case GCX_DT_F64: got = reinterpret_cast<double *>(out)[i]; break;
                case GCX_DT_I32: got = reinterpret_cast<int32_t *>(out)[i]; break;
                case GCX_DT_I64: got = reinterpret_cast<int64_t *>(out)[i]; break;
                case GCX_DT_F16: got = gcx_half_to_float(reinterpret_cast<uint16_t *>(out)[i]); break;
                default: got = gcx_bf16_to_float(reinterpret_cast<uint16_t *>(out)[i]); break;
                }
                EXPECT_EQ(e, got) << "type " << dt << " op " << op << " i " << i;
            }
        }
    }
    EXPECT_EQ(nullptr, gcx_reduce_fn(GCX_DT_U8, GCX_OP_SUM));
    EXPECT_EQ(nullptr, gcx_reduce_fn(static_cast<gcx_dtype_t>(99), GCX_OP_SUM));
}

TEST(Reduce, MaxIgnoresNaNWhicheverSideItIsOn)
{
    float x[2] = {NAN, 1.0f}, y[2] = {2.0f, NAN}, o1[2], o2[2];
    gcx_reduce_fn(GCX_DT_F32, GCX_OP_MAX)(o1, x, y, 2);
    gcx_reduce_fn(GCX_DT_F32, GCX_OP_MAX)(o2, y, x, 2);
    EXPECT_EQ(0, memcmp(o1, o2, sizeof(o1)));
}

TEST(Reduce, DivideForAverage)
{
    float   f[3] = {3, 6, 9};
    int32_t i[3] = {3, 7, -7};
    gcx_reduce_divide(f, 3, GCX_DT_F32, 3);
    gcx_reduce_divide(i, 3, GCX_DT_I32, 2);
    EXPECT_EQ(1.0f, f[0]);
    EXPECT_EQ(3.0f, f[2]);
    EXPECT_EQ(1, i[0]);
    EXPECT_EQ(3, i[1]);
    EXPECT_EQ(-3, i[2]);
}

TEST(Half, RoundTripAndRounding)
{
    // every finite half survives half -> float -> half
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) {
            continue; // NaN payloads may be quieted
        }
        EXPECT_EQ(h, gcx_float_to_half(gcx_half_to_float(static_cast<uint16_t>(h))))
            << std::hex << h;
    }
    EXPECT_EQ(0x3c00, gcx_float_to_half(1.0f));
    EXPECT_EQ(0x7c00, gcx_float_to_half(1e6f));    // overflow -> Inf
    EXPECT_EQ(0x0001, gcx_float_to_half(6e-8f));   // smallest subnormal
    EXPECT_EQ(0x3c00, gcx_float_to_half(1.0f + 0.00048828125f)); // tie to even
    EXPECT_EQ(0x3c02, gcx_float_to_half(1.0f + 3 * 0.00048828125f));
    EXPECT_TRUE(std::isnan(gcx_half_to_float(gcx_float_to_half(NAN))));
}

TEST(BFloat16, RoundTripAndRounding)
{
    EXPECT_EQ(0x3f80, gcx_float_to_bf16(1.0f));
    EXPECT_EQ(1.0f, gcx_bf16_to_float(0x3f80));
    EXPECT_EQ(0x3f80, gcx_float_to_bf16(1.00390625f)); // tie to even
    EXPECT_EQ(0x3f82, gcx_float_to_bf16(1.01171875f));
    EXPECT_TRUE(std::isnan(gcx_bf16_to_float(gcx_float_to_bf16(NAN))));
}

} // namespace
