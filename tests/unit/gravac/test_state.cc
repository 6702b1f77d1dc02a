// Checkpoints of the GraVAC controller (gcx_gravac_save / gcx_gravac_load):
// a restored controller decides bit-identically to one that never stopped,
// and every malformed or foreign blob is refused with the controller left
// unchanged.
#include <gcx/gravac.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace
{

struct CtlDeleter {
    void operator()(gcx_gravac_t *c) const { gcx_gravac_destroy(c); }
};
using Ctl = std::unique_ptr<gcx_gravac_t, CtlDeleter>;

gcx_gravac_params_t params()
{
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    p.window = 20; // windows close at 20, 40, 60, ...: some after the stop
    p.nranks = 4;
    return p;
}

Ctl make(const gcx_gravac_params_t &p)
{
    gcx_gravac_t *c = nullptr;
    EXPECT_EQ(GCX_OK, gcx_gravac_create(&p, &c));
    return Ctl(c);
}

// A deterministic, varied sequence of summed norms: gains that fall with
// the step, throughputs that move, so every rule gets exercised.
gcx_gravac_norms_t norms_at(uint64_t t)
{
    double ef = 1.0 + 0.01 * static_cast<double>(t % 7);
    double dmin = 0.95 - 0.002 * static_cast<double>(t % 50);
    double dc = dmin * (0.97 - 0.001 * static_cast<double>(t % 13));
    return {ef, ef * dmin, ef * dc, 100.0 + static_cast<double>(t % 11)};
}

std::vector<uint8_t> save(const gcx_gravac_t *c)
{
    std::vector<uint8_t> blob(gcx_gravac_save_size(c));
    size_t written = 0;
    EXPECT_EQ(GCX_OK, gcx_gravac_save(c, blob.data(), blob.size(), &written));
    EXPECT_EQ(blob.size(), written);
    return blob;
}

bool same_record(const gcx_gravac_record_t &a, const gcx_gravac_record_t &b)
{
    return a.step == b.step && a.level == b.level && a.cf == b.cf &&
           a.delta_min == b.delta_min && a.delta_c == b.delta_c &&
           a.theta_min == b.theta_min && a.theta_s == b.theta_s &&
           a.throughput == b.throughput && a.events == b.events;
}

} // namespace

TEST(GravacState, RestoredControllerDecidesIdentically)
{
    gcx_gravac_params_t p = params();
    Ctl straight = make(p), first = make(p);
    for (uint64_t t = 0; t < 37; ++t) { // stops mid-window
        gcx_gravac_norms_t n = norms_at(t);
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(straight.get(), &n, nullptr));
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(first.get(), &n, nullptr));
    }
    std::vector<uint8_t> blob = save(first.get());
    first.reset();
    Ctl resumed = make(p);
    ASSERT_EQ(GCX_OK, gcx_gravac_load(resumed.get(), blob.data(), blob.size()));

    gcx_gravac_state_t s1, s2;
    int moved = 0;
    for (uint64_t t = 37; t < 400; ++t) {
        gcx_gravac_norms_t n = norms_at(t);
        gcx_gravac_record_t a, b;
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(straight.get(), &n, &a));
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(resumed.get(), &n, &b));
        ASSERT_TRUE(same_record(a, b)) << "step " << t;
        moved |= a.events & (GCX_GRAVAC_EV_SCALED | GCX_GRAVAC_EV_SETTLED);
    }
    EXPECT_NE(0, moved) << "the sequence never changed the CF";
    ASSERT_EQ(GCX_OK, gcx_gravac_get_state(straight.get(), &s1));
    ASSERT_EQ(GCX_OK, gcx_gravac_get_state(resumed.get(), &s2));
    EXPECT_EQ(s1.step, s2.step);
    EXPECT_EQ(s1.n_throughput, s2.n_throughput);
    EXPECT_GT(s1.n_throughput, 1u);
    // and the saved bytes of the two agree
    EXPECT_EQ(save(straight.get()), save(resumed.get()));
}

TEST(GravacState, FreshControllerRoundTrips)
{
    gcx_gravac_params_t p = params();
    Ctl a = make(p), b = make(p);
    std::vector<uint8_t> blob = save(a.get());
    ASSERT_EQ(GCX_OK, gcx_gravac_load(b.get(), blob.data(), blob.size()));
    EXPECT_EQ(blob, save(b.get()));
}

TEST(GravacState, SaveIntoShortBufferWritesNothing)
{
    Ctl a = make(params());
    std::vector<uint8_t> blob(gcx_gravac_save_size(a.get()) - 1, 0xab);
    size_t written = 7;
    EXPECT_EQ(GCX_ERR_RANGE,
              gcx_gravac_save(a.get(), blob.data(), blob.size(), &written));
    EXPECT_EQ(7u, written);
    for (uint8_t byte : blob) {
        ASSERT_EQ(0xab, byte);
    }
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_save(nullptr, blob.data(), 1, nullptr));
    EXPECT_EQ(0u, gcx_gravac_save_size(nullptr));
}

// Every refusal leaves the target as it was: compare its saved bytes.
class GravacStateRefused : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        p_ = params();
        src_ = make(p_);
        dst_ = make(p_);
        for (uint64_t t = 0; t < 23; ++t) {
            gcx_gravac_norms_t n = norms_at(t);
            ASSERT_EQ(GCX_OK, gcx_gravac_decide(src_.get(), &n, nullptr));
        }
        gcx_gravac_norms_t n = norms_at(99);
        ASSERT_EQ(GCX_OK, gcx_gravac_decide(dst_.get(), &n, nullptr));
        blob_ = save(src_.get());
        before_ = save(dst_.get());
    }

    void expect_refused(const std::vector<uint8_t> &blob, gcx_status_t want)
    {
        EXPECT_EQ(want, gcx_gravac_load(dst_.get(), blob.data(), blob.size()));
        EXPECT_EQ(before_, save(dst_.get()));
    }

    // overwrite the f64 at byte offset off
    std::vector<uint8_t> with_f64(size_t off, double v)
    {
        std::vector<uint8_t> b = blob_;
        uint64_t bits;
        std::memcpy(&bits, &v, sizeof(bits));
        for (int i = 0; i < 8; ++i) {
            b[off + i] = static_cast<uint8_t>(bits >> (8 * i));
        }
        return b;
    }

    gcx_gravac_params_t p_;
    Ctl src_, dst_;
    std::vector<uint8_t> blob_, before_;
};

// Offsets in the layout of src/gravac/state.c.
constexpr size_t kParams = 16;         // after magic, version, n_tput
constexpr size_t kState = kParams + 72; // step
constexpr size_t kThetaMin = kState + 8;
constexpr size_t kDeltaMin = kState + 24;
constexpr size_t kTable = kState + 68;

TEST_F(GravacStateRefused, TruncatedOrExtended)
{
    for (size_t len : {size_t{0}, size_t{8}, size_t{16}, kTable - 1, kTable,
                       blob_.size() - 1}) {
        std::vector<uint8_t> b(blob_.begin(), blob_.begin() + len);
        expect_refused(b, GCX_ERR_INVALID);
    }
    std::vector<uint8_t> longer = blob_;
    longer.push_back(0);
    expect_refused(longer, GCX_ERR_INVALID);
}

TEST_F(GravacStateRefused, NotAGravacState)
{
    std::vector<uint8_t> b = blob_;
    b[0] ^= 1;
    expect_refused(b, GCX_ERR_INVALID);
    b = blob_;
    b[8] = 1; // version 1: mean-over-training throughputs, refused
    expect_refused(b, GCX_ERR_INVALID);
    b = blob_;
    b[12] = 200; // more CFs than the table (and than the length)
    expect_refused(b, GCX_ERR_INVALID);
}

TEST_F(GravacStateRefused, ValuesNoControllerHolds)
{
    expect_refused(with_f64(kThetaMin, NAN), GCX_ERR_INVALID);
    expect_refused(with_f64(kThetaMin, 0.5), GCX_ERR_INVALID);
    expect_refused(with_f64(kThetaMin, 1e9), GCX_ERR_INVALID); // > theta_max
    expect_refused(with_f64(kDeltaMin, 1.5), GCX_ERR_INVALID);
    expect_refused(with_f64(kDeltaMin, -0.1), GCX_ERR_INVALID);
    expect_refused(with_f64(kTable, 0.0), GCX_ERR_INVALID); // a CF of 0
    expect_refused(with_f64(kTable + 9, INFINITY), GCX_ERR_INVALID); // value
    expect_refused(with_f64(kTable + 17, -1.0), GCX_ERR_INVALID); // window
    std::vector<uint8_t> b = blob_;
    b[kDeltaMin + 8] = 2; // a flag that is neither 0 nor 1
    expect_refused(b, GCX_ERR_INVALID);
    b = blob_;
    b[kTable + 8] = 2; // has_value
    expect_refused(b, GCX_ERR_INVALID);
    b = blob_;
    b[kTable + 8] = 0; // neither a closed window nor an open one
    std::memset(&b[kTable + 9], 0, 8);
    std::memset(&b[kTable + 17], 0, 16);
    expect_refused(b, GCX_ERR_INVALID);
}

TEST_F(GravacStateRefused, OtherParameters)
{
    gcx_gravac_params_t q = p_;
    q.epsilon = 0.5;
    Ctl other = make(q);
    std::vector<uint8_t> b = save(other.get());
    expect_refused(b, GCX_ERR_MISMATCH);
    q = p_;
    q.nranks = 8;
    other = make(q);
    expect_refused(save(other.get()), GCX_ERR_MISMATCH);
    q = p_;
    q.settle = GCX_GRAVAC_SETTLE_ONCE;
    other = make(q);
    expect_refused(save(other.get()), GCX_ERR_MISMATCH);
}

TEST_F(GravacStateRefused, NullArguments)
{
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_load(nullptr, blob_.data(), blob_.size()));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_load(dst_.get(), nullptr, 5));
    EXPECT_EQ(before_, save(dst_.get()));
}
