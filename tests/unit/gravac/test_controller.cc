// The GraVAC controller driven by synthetic gain sequences: one test per
// rule of Algorithm 1 (cascade, EWMA, window scaling, cap, raise,
// saturation), determinism, and bad inputs.
#include <gcx/gravac.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace
{

struct CtlDeleter {
    void operator()(gcx_gravac_t *c) const
    {
        gcx_gravac_destroy(c);
    }
};
using Ctl = std::unique_ptr<gcx_gravac_t, CtlDeleter>;

gcx_gravac_params_t base_params()
{
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    p.alpha = 1.0; // no smoothing unless a test asks for it
    return p;
}

Ctl make(const gcx_gravac_params_t &p)
{
    gcx_gravac_t *c = nullptr;
    EXPECT_EQ(GCX_OK, gcx_gravac_create(&p, &c));
    return Ctl(c);
}

// One decision with ||g_ef||^2 = 1, so the raw gains are min and c.
gcx_gravac_record_t step(gcx_gravac_t *ctl, double dmin, double dc,
                         double sps = 0.0)
{
    gcx_gravac_norms_t n = {1.0, dmin, dc, sps};
    gcx_gravac_record_t rec;
    memset(&rec, 0, sizeof(rec));
    EXPECT_EQ(GCX_OK, gcx_gravac_decide(ctl, &n, &rec));
    return rec;
}

gcx_gravac_state_t state(const gcx_gravac_t *ctl)
{
    gcx_gravac_state_t s;
    EXPECT_EQ(GCX_OK, gcx_gravac_get_state(ctl, &s));
    return s;
}

std::vector<double> candidates(const gcx_gravac_params_t &p)
{
    std::vector<double> cfs(64);
    size_t count = 0;
    EXPECT_EQ(GCX_OK,
              gcx_gravac_candidates(&p, cfs.data(), cfs.size(), &count));
    cfs.resize(count);
    return cfs;
}

} // namespace

TEST(GravacCascade, EpsilonPicksTheLevel)
{
    gcx_gravac_params_t p = base_params(); // epsilon 0.7
    struct Case {
        double dmin, dc;
        gcx_gravac_level_t level;
        double cf;
    } cases[] = {
        {0.9, 0.8, GCX_GRAVAC_LEVEL_C, 20},     // g_c good enough
        {0.9, 0.69, GCX_GRAVAC_LEVEL_MIN, 10},  // only g_min
        {0.69, 0.5, GCX_GRAVAC_LEVEL_DENSE, 1}, // neither
        {0.7, 0.7, GCX_GRAVAC_LEVEL_C, 20},     // >= epsilon is enough
        {0.7, 0.0, GCX_GRAVAC_LEVEL_MIN, 10},
        {1.0, 1.0, GCX_GRAVAC_LEVEL_C, 20},
    };
    for (const Case &c : cases) {
        Ctl ctl = make(p);
        gcx_gravac_record_t rec = step(ctl.get(), c.dmin, c.dc);
        EXPECT_EQ(c.level, rec.level) << c.dmin << " " << c.dc;
        EXPECT_EQ(c.cf, rec.cf) << c.dmin << " " << c.dc;
        EXPECT_EQ(c.dmin, rec.delta_min);
        EXPECT_EQ(c.dc, rec.delta_c);
        EXPECT_EQ(10.0, rec.theta_min);
        EXPECT_EQ(2.0, rec.theta_s);
        EXPECT_EQ(0u, rec.step);
        EXPECT_EQ(0u, rec.events);
    }
}

TEST(GravacCascade, GainsUseSummedNorms)
{
    gcx_gravac_params_t p = base_params();
    Ctl ctl = make(p);
    // two ranks: (4, 3.6, 3.0) + (6, 5.4, 3.0) = (10, 9, 6): 0.9 and 0.6
    gcx_gravac_norms_t n = {10.0, 9.0, 6.0, 0.0};
    gcx_gravac_record_t rec;
    ASSERT_EQ(GCX_OK, gcx_gravac_decide(ctl.get(), &n, &rec));
    EXPECT_DOUBLE_EQ(0.9, rec.delta_min);
    EXPECT_DOUBLE_EQ(0.6, rec.delta_c);
    EXPECT_EQ(GCX_GRAVAC_LEVEL_MIN, rec.level);
    // a zero gradient loses nothing: gains 1; rounding above 1 is clamped
    gcx_gravac_norms_t zero = {0.0, 0.0, 0.0, 0.0};
    ASSERT_EQ(GCX_OK, gcx_gravac_decide(ctl.get(), &zero, &rec));
    EXPECT_EQ(1.0, rec.delta_min);
    EXPECT_EQ(1.0, rec.delta_c);
    EXPECT_EQ(GCX_GRAVAC_LEVEL_C, rec.level);
    gcx_gravac_norms_t over = {1.0, 1.0000001, 0.9, 0.0};
    ASSERT_EQ(GCX_OK, gcx_gravac_decide(ctl.get(), &over, &rec));
    EXPECT_EQ(1.0, rec.delta_min);
    EXPECT_EQ(2u, rec.step);
}

TEST(GravacEwma, SmoothsTheGains)
{
    gcx_gravac_params_t p = base_params();
    p.alpha = 0.5;
    Ctl ctl = make(p);
    gcx_gravac_record_t r = step(ctl.get(), 0.8, 0.6);
    EXPECT_DOUBLE_EQ(0.8, r.delta_min); // seeded by the first sample
    EXPECT_DOUBLE_EQ(0.6, r.delta_c);
    r = step(ctl.get(), 0.4, 1.0);
    EXPECT_DOUBLE_EQ(0.6, r.delta_min);
    EXPECT_DOUBLE_EQ(0.8, r.delta_c);
    r = step(ctl.get(), 1.0, 0.2);
    EXPECT_DOUBLE_EQ(0.8, r.delta_min);
    EXPECT_DOUBLE_EQ(0.5, r.delta_c);
    // the cascade reads the smoothed gains: raw 0.2 would be dense
    EXPECT_EQ(GCX_GRAVAC_LEVEL_MIN, r.level);
}

TEST(GravacEwma, DefaultFactorIsWorkersOver100)
{
    gcx_gravac_params_t p = base_params();
    p.alpha = 0.0;
    p.nranks = 4; // alpha 0.04
    Ctl ctl = make(p);
    step(ctl.get(), 1.0, 1.0);
    gcx_gravac_record_t r = step(ctl.get(), 0.5, 0.0);
    EXPECT_DOUBLE_EQ(0.04 * 0.5 + 0.96 * 1.0, r.delta_min);
    EXPECT_DOUBLE_EQ(0.96, r.delta_c);

    p.nranks = 250; // N/100 > 1: no smoothing
    Ctl big = make(p);
    step(big.get(), 1.0, 1.0);
    r = step(big.get(), 0.5, 0.25);
    EXPECT_EQ(0.5, r.delta_min);
    EXPECT_EQ(0.25, r.delta_c);
}

TEST(GravacEwma, NewCandidateRestartsItsAverage)
{
    gcx_gravac_params_t p = base_params();
    p.alpha = 0.5;
    p.window = 2;
    Ctl ctl = make(p);
    step(ctl.get(), 0.95, 0.8);
    gcx_gravac_record_t r = step(ctl.get(), 0.95, 0.8);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SCALED);
    r = step(ctl.get(), 0.95, 0.72);
    EXPECT_EQ(4.0, r.theta_s);
    EXPECT_DOUBLE_EQ(0.72, r.delta_c);   // restarted for the new CF
    EXPECT_DOUBLE_EQ(0.95, r.delta_min); // theta_min unchanged: kept
}

// With gains that never agree (no raise) and no throughput (no
// saturation), the c level walks the candidate sequence one window each,
// then stays at theta_max.
static void walk_candidates(gcx_gravac_params_t p)
{
    const uint32_t window = 3;
    p.window = window;
    std::vector<double> expect = candidates(p);
    Ctl ctl = make(p);
    size_t n_windows = expect.size() + 2;
    for (size_t w = 0; w < n_windows; ++w) {
        // candidate w+1 (index 0 is theta_min alone), then theta_max
        double cf = expect[std::min(w + 1, expect.size() - 1)];
        for (uint32_t i = 0; i < window; ++i) {
            gcx_gravac_record_t r = step(ctl.get(), 0.95, 0.8);
            EXPECT_EQ(GCX_GRAVAC_LEVEL_C, r.level);
            EXPECT_EQ(cf, r.cf) << "window " << w << " step " << i;
            EXPECT_EQ(10.0, r.theta_min);
            EXPECT_EQ(w * window + i, r.step);
            if (i + 1 < window) {
                EXPECT_EQ(0u, r.events);
                continue;
            }
            EXPECT_TRUE(r.events & GCX_GRAVAC_EV_WINDOW);
            EXPECT_FALSE(r.events & GCX_GRAVAC_EV_RAISED);
            EXPECT_FALSE(r.events & GCX_GRAVAC_EV_SETTLED);
            // the next step's CF is theta_max
            bool capped = w + 2 >= expect.size() - 1;
            EXPECT_EQ(!capped ? 0u : (unsigned)GCX_GRAVAC_EV_CAPPED,
                      r.events & GCX_GRAVAC_EV_CAPPED)
                << "window " << w;
            EXPECT_EQ(w + 2 < expect.size(),
                      (r.events & GCX_GRAVAC_EV_SCALED) != 0)
                << "window " << w;
        }
    }
    EXPECT_EQ(0, state(ctl.get()).settled);
    EXPECT_EQ(0u, state(ctl.get()).n_throughput);
}

TEST(GravacScaling, ExponentialWindowByWindow)
{
    gcx_gravac_params_t p = base_params();
    // 20, 40, 160, 1000 (theta_s 2, 4, 16, 100 = capped 256)
    walk_candidates(p);
    Ctl ctl = make(p);
    for (int i = 0; i < 1500; ++i) {
        step(ctl.get(), 0.95, 0.8);
    }
    EXPECT_EQ(100.0, state(ctl.get()).theta_s); // 256 capped at 1000 / 10
}

TEST(GravacScaling, GeometricWindowByWindow)
{
    gcx_gravac_params_t p = base_params();
    p.policy = GCX_GRAVAC_POLICY_GEOMETRIC;
    p.theta_max = 2000;
    walk_candidates(p); // 20, 40, ..., 1280, 2000
    p.ratio = 1.5;
    p.theta_max = 100;
    walk_candidates(p);
}

TEST(GravacScaling, WindowIsThePeriod)
{
    gcx_gravac_params_t p = base_params();
    p.window = 5;
    Ctl ctl = make(p);
    for (int i = 0; i < 20; ++i) {
        gcx_gravac_record_t r = step(ctl.get(), 0.95, 0.8);
        EXPECT_EQ((i + 1) % 5 == 0, (r.events & GCX_GRAVAC_EV_WINDOW) != 0);
    }
    EXPECT_EQ(20u, state(ctl.get()).step);
}

TEST(GravacRaise, AgreeingGainsRaiseThetaMin)
{
    gcx_gravac_params_t p = base_params(); // omega 0.01
    p.window = 2;
    Ctl ctl = make(p);
    step(ctl.get(), 0.9, 0.895);
    gcx_gravac_record_t r = step(ctl.get(), 0.9, 0.895); // 0.005 <= 0.009
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_RAISED);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SCALED);
    gcx_gravac_state_t s = state(ctl.get());
    EXPECT_EQ(20.0, s.theta_min); // theta_s * theta_min
    EXPECT_EQ(4.0, s.theta_s);    // then the policy: 2 -> 4
    r = step(ctl.get(), 0.9, 0.8);
    EXPECT_EQ(80.0, r.cf);
    EXPECT_EQ(GCX_GRAVAC_LEVEL_C, r.level);
    r = step(ctl.get(), 0.9, 0.5);
    EXPECT_EQ(GCX_GRAVAC_LEVEL_MIN, r.level);
    EXPECT_EQ(20.0, r.cf); // the fallback is the raised theta_min
}

TEST(GravacRaise, DisagreeingGainsKeepThetaMin)
{
    gcx_gravac_params_t p = base_params();
    p.window = 2;
    Ctl ctl = make(p);
    step(ctl.get(), 0.9, 0.88);
    gcx_gravac_record_t r = step(ctl.get(), 0.9, 0.88); // 0.02 > 0.009
    EXPECT_FALSE(r.events & GCX_GRAVAC_EV_RAISED);
    EXPECT_EQ(10.0, state(ctl.get()).theta_min);
    EXPECT_EQ(4.0, state(ctl.get()).theta_s);
    // omega is relative to delta_min: 0.02 <= 0.05 * 0.9
    p.omega = 0.05;
    Ctl loose = make(p);
    step(loose.get(), 0.9, 0.88);
    r = step(loose.get(), 0.9, 0.88);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_RAISED);
}

TEST(GravacRaise, CapAtThetaMax)
{
    gcx_gravac_params_t p = base_params();
    p.window = 1;
    p.theta_max = 40;
    Ctl ctl = make(p);
    gcx_gravac_record_t r = step(ctl.get(), 0.9, 0.9);
    EXPECT_EQ(20.0, r.cf);
    EXPECT_EQ(unsigned(GCX_GRAVAC_EV_WINDOW | GCX_GRAVAC_EV_RAISED |
                       GCX_GRAVAC_EV_CAPPED),
              r.events); // theta_min 20, theta_s min(4, 40/20) = 2
    r = step(ctl.get(), 0.9, 0.9);
    EXPECT_EQ(40.0, r.cf);
    EXPECT_EQ(unsigned(GCX_GRAVAC_EV_WINDOW | GCX_GRAVAC_EV_RAISED |
                       GCX_GRAVAC_EV_SCALED | GCX_GRAVAC_EV_CAPPED),
              r.events); // theta_min 40 = theta_max, theta_s 1
    for (int i = 0; i < 5; ++i) {
        r = step(ctl.get(), 0.9, 0.3); // c is ignored without a 2nd level
        EXPECT_EQ(GCX_GRAVAC_LEVEL_MIN, r.level);
        EXPECT_EQ(40.0, r.cf);
        EXPECT_EQ(1.0, r.theta_s);
        EXPECT_EQ(r.delta_min, r.delta_c);
        EXPECT_EQ(unsigned(GCX_GRAVAC_EV_WINDOW | GCX_GRAVAC_EV_CAPPED),
                  r.events);
    }
    // never above theta_max, whatever the gains
    gcx_gravac_params_t q = base_params();
    q.window = 1;
    q.theta_max = 700;
    q.policy = GCX_GRAVAC_POLICY_GEOMETRIC;
    q.ratio = 3;
    Ctl c2 = make(q);
    for (int i = 0; i < 50; ++i) {
        r = step(c2.get(), 0.9, i % 2 ? 0.9 : 0.8);
        EXPECT_LE(r.cf, 700.0);
        EXPECT_LE(r.theta_min * r.theta_s, 700.0 * (1 + 1e-12));
    }
    EXPECT_EQ(700.0, r.cf);
}

TEST(GravacThroughput, RecordedOneStepLateForWhatWasSent)
{
    gcx_gravac_params_t p = base_params();
    p.window = 1000;
    Ctl ctl = make(p);
    gcx_gravac_record_t r = step(ctl.get(), 0.95, 0.8, 500.0);
    EXPECT_EQ(0.0, r.throughput);           // nothing sent before step 0
    r = step(ctl.get(), 0.95, 0.5, 1000.0); // T[20] = 1000 * 0.8
    EXPECT_DOUBLE_EQ(800.0, r.throughput);
    r = step(ctl.get(), 0.5, 0.5, 2000.0); // T[10] = 2000 * 0.95
    EXPECT_DOUBLE_EQ(1900.0, r.throughput);
    EXPECT_EQ(GCX_GRAVAC_LEVEL_DENSE, r.level);
    r = step(ctl.get(), 0.95, 0.8, 3000.0); // dense: T[1] = 3000 * 1
    EXPECT_DOUBLE_EQ(3000.0, r.throughput);
    r = step(ctl.get(), 0.95, 0.8, 0.0); // not measured: not recorded
    EXPECT_EQ(0.0, r.throughput);
    r = step(ctl.get(), 0.95, 0.8, 1200.0); // mean of 800 and 960
    double t = 0;
    ASSERT_EQ(GCX_OK, gcx_gravac_throughput(ctl.get(), 20.0, &t));
    EXPECT_DOUBLE_EQ(880.0, t);
    ASSERT_EQ(GCX_OK, gcx_gravac_throughput(ctl.get(), 10.0, &t));
    EXPECT_DOUBLE_EQ(1900.0, t);
    ASSERT_EQ(GCX_OK, gcx_gravac_throughput(ctl.get(), 1.0, &t));
    EXPECT_DOUBLE_EQ(3000.0, t);
    EXPECT_EQ(GCX_ERR_NOT_FOUND, gcx_gravac_throughput(ctl.get(), 40.0, &t));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_throughput(ctl.get(), 20.0, nullptr));
    EXPECT_EQ(3u, state(ctl.get()).n_throughput);
}

// T of a CF is the mean of its latest window, not of all of training.
TEST(GravacThroughput, LatestWindowReplacesOlderOnes)
{
    gcx_gravac_params_t p = base_params();
    p.window = 2;
    p.theta_max = 20; // the c level stays at 20
    Ctl ctl = make(p);
    step(ctl.get(), 0.95, 0.8, 0.0);    // sends 20
    step(ctl.get(), 0.95, 0.8, 1000.0); // T[20] = 800; window end
    double t = 0;
    ASSERT_EQ(GCX_OK, gcx_gravac_throughput(ctl.get(), 20.0, &t));
    EXPECT_DOUBLE_EQ(800.0, t);
    step(ctl.get(), 0.95, 0.8, 500.0);  // T[20] = 400
    ASSERT_EQ(GCX_OK, gcx_gravac_throughput(ctl.get(), 20.0, &t));
    EXPECT_DOUBLE_EQ(800.0, t); // the closed window's value until the next
    step(ctl.get(), 0.95, 0.8, 1000.0); // T[20] = 800; window end
    ASSERT_EQ(GCX_OK, gcx_gravac_throughput(ctl.get(), 20.0, &t));
    EXPECT_DOUBLE_EQ(600.0, t); // mean of 400 and 800, the first window gone
    step(ctl.get(), 0.95, 0.8, 250.0);
    step(ctl.get(), 0.95, 0.8, 250.0); // window end
    ASSERT_EQ(GCX_OK, gcx_gravac_throughput(ctl.get(), 20.0, &t));
    EXPECT_DOUBLE_EQ(200.0, t); // a mean over all would read 500
}

// Window 2: T[20] = 800 from window 1, T[40] from window 2.
static Ctl two_windows(double sps_at_40, gcx_gravac_record_t *last,
                       gcx_gravac_params_t p = base_params())
{
    p.window = 2;
    Ctl ctl = make(p);
    step(ctl.get(), 0.95, 0.8, 0.0);    // sends 20
    step(ctl.get(), 0.95, 0.8, 1000.0); // T[20] = 800; sends 20; scale
    step(ctl.get(), 0.95, 0.8, 1000.0); // T[20] = 800; sends 40
    *last = step(ctl.get(), 0.95, 0.8, sps_at_40); // T[40]; window end
    return ctl;
}

static gcx_gravac_params_t settle_once()
{
    gcx_gravac_params_t p = base_params();
    p.settle = GCX_GRAVAC_SETTLE_ONCE;
    return p;
}

TEST(GravacSaturation, SettlesOnTheLowerOfTwoCloseCfs)
{
    gcx_gravac_record_t r;
    // T[40] = 804 within 1% of 800; once: the later, drifting T (900 at
    // CF 20 below) do not move it
    Ctl ctl = two_windows(1005.0, &r, settle_once());
    EXPECT_EQ(40.0, r.cf);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SETTLED);
    gcx_gravac_state_t s = state(ctl.get());
    EXPECT_TRUE(s.settled);
    EXPECT_EQ(20.0, s.settled_cf); // the lower CF, though 40 was best
    EXPECT_EQ(10.0, s.theta_min);
    EXPECT_EQ(2.0, s.theta_s);
    for (int i = 0; i < 10; ++i) { // no more scaling or raising
        r = step(ctl.get(), 0.9, 0.9, 1000.0);
        EXPECT_EQ(20.0, r.cf);
        EXPECT_EQ(GCX_GRAVAC_LEVEL_C, r.level);
        EXPECT_FALSE(r.events & (GCX_GRAVAC_EV_SCALED | GCX_GRAVAC_EV_RAISED |
                                 GCX_GRAVAC_EV_SETTLED));
    }
    r = step(ctl.get(), 0.9, 0.5, 1000.0); // the cascade still applies
    EXPECT_EQ(GCX_GRAVAC_LEVEL_MIN, r.level);
    EXPECT_EQ(10.0, r.cf);
}

TEST(GravacSaturation, FarApartKeepsSearching)
{
    gcx_gravac_record_t r;
    Ctl ctl = two_windows(1100.0, &r); // T[40] = 880: 10% apart
    EXPECT_FALSE(r.events & GCX_GRAVAC_EV_SETTLED);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SCALED);
    EXPECT_FALSE(state(ctl.get()).settled);
    EXPECT_EQ(16.0, state(ctl.get()).theta_s);
}

// The paper's test is relative to the second best: |T1 - T2| / T2 <= omega.
// T1 = 885, T2 = 800, omega 0.1: 85 <= 0.1 * 885 but 85 > 0.1 * 800, so
// the paper keeps searching where a test against T1 would settle.
TEST(GravacSaturation, ToleranceIsRelativeToTheSecondBest)
{
    gcx_gravac_params_t p = base_params();
    p.omega = 0.1;
    gcx_gravac_record_t r;
    Ctl ctl = two_windows(1106.25, &r, p); // T[40] = 885
    EXPECT_FALSE(r.events & GCX_GRAVAC_EV_SETTLED);
    EXPECT_FALSE(state(ctl.get()).settled);
    ctl = two_windows(1100.0, &r, p); // T[40] = 880: exactly 10% of 800
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SETTLED);
    EXPECT_EQ(20.0, state(ctl.get()).settled_cf);
}

// By default the check runs at every window end with the latest T: while
// the two best stay within omega the CF holds; when they drift apart the
// search resumes from the settled thetas.
TEST(GravacSaturation, RecheckedEveryWindowByDefault)
{
    gcx_gravac_record_t r;
    Ctl ctl = two_windows(1005.0, &r); // settled on 20: T[20] 800, T[40] 804
    ASSERT_TRUE(r.events & GCX_GRAVAC_EV_SETTLED);
    // window 3: T[40] = 804 (step 3's send), T[20] = 800: still saturated
    r = step(ctl.get(), 0.95, 0.8, 1005.0);
    EXPECT_EQ(20.0, r.cf);
    r = step(ctl.get(), 0.95, 0.8, 1000.0);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_WINDOW);
    EXPECT_FALSE(r.events & (GCX_GRAVAC_EV_SETTLED | GCX_GRAVAC_EV_UNSETTLED |
                             GCX_GRAVAC_EV_SCALED));
    EXPECT_TRUE(state(ctl.get()).settled);
    // window 4: the regime changes, CF 20 now reaches T 1000 against 804
    r = step(ctl.get(), 0.95, 0.8, 1250.0);
    EXPECT_EQ(20.0, r.cf);
    r = step(ctl.get(), 0.95, 0.8, 1250.0);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_UNSETTLED);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SCALED);
    gcx_gravac_state_t s = state(ctl.get());
    EXPECT_FALSE(s.settled);
    EXPECT_EQ(0.0, s.settled_cf);
    EXPECT_EQ(10.0, s.theta_min);
    EXPECT_EQ(4.0, s.theta_s); // the search goes on from theta_s 2
    r = step(ctl.get(), 0.95, 0.8, 1250.0);
    EXPECT_EQ(40.0, r.cf);
}

// Dense SGD is a candidate: its T (samples/s, gain 1) is recorded, and a
// tie between dense and CF 20 settles on dense steps.
TEST(GravacSaturation, DenseIsACandidate)
{
    gcx_gravac_params_t p = base_params();
    p.window = 2;
    Ctl ctl = make(p);
    gcx_gravac_record_t r = step(ctl.get(), 0.5, 0.4, 0.0);
    EXPECT_EQ(GCX_GRAVAC_LEVEL_DENSE, r.level);
    r = step(ctl.get(), 0.95, 0.8, 1000.0); // T[1] = 1000; sends 20
    EXPECT_DOUBLE_EQ(1000.0, r.throughput);
    EXPECT_EQ(20.0, r.cf);
    EXPECT_FALSE(r.events & GCX_GRAVAC_EV_SETTLED); // one candidate only
    r = step(ctl.get(), 0.95, 0.8, 1250.0); // T[20] = 1000; sends 40
    EXPECT_EQ(40.0, r.cf);
    r = step(ctl.get(), 0.5, 0.4, 500.0); // T[40] = 400; dense; window end
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SETTLED); // T[1] = T[20]: lower
    gcx_gravac_state_t s = state(ctl.get());
    EXPECT_TRUE(s.settled);
    EXPECT_EQ(1.0, s.settled_cf);
    EXPECT_EQ(3u, s.n_throughput);
    for (int i = 0; i < 3; ++i) { // good gains, yet dense while settled
        r = step(ctl.get(), 0.95, 0.9, 1000.0);
        EXPECT_EQ(GCX_GRAVAC_LEVEL_DENSE, r.level);
        EXPECT_EQ(1.0, r.cf);
    }
}

TEST(GravacSaturation, CanSettleBelowARaisedThetaMin)
{
    gcx_gravac_params_t p = base_params();
    p.window = 3;
    Ctl ctl = make(p);
    step(ctl.get(), 0.9, 0.5, 0.0);    // sends 10
    step(ctl.get(), 0.9, 0.5, 1000.0); // T[10] = 900; sends 10
    gcx_gravac_record_t r = step(ctl.get(), 0.9, 0.9, 1000.0); // sends 20
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_RAISED); // theta_min 20, theta_s 4
    r = step(ctl.get(), 0.9, 0.85, 500.0);        // T[20] = 450; sends 80
    EXPECT_EQ(80.0, r.cf);
    step(ctl.get(), 0.9, 0.85, 1060.0);            // T[80] = 901
    r = step(ctl.get(), 0.9, 0.85, 1060.0);        // T[80] = 901; window end
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_SETTLED); // 901 vs 900: lower = 10
    gcx_gravac_state_t s = state(ctl.get());
    EXPECT_EQ(10.0, s.settled_cf);
    EXPECT_EQ(10.0, s.theta_min);
    EXPECT_EQ(1.0, s.theta_s);
    r = step(ctl.get(), 0.9, 0.85, 1000.0); // T[80] = 901 (step 5's send)
    EXPECT_EQ(GCX_GRAVAC_LEVEL_MIN, r.level);
    EXPECT_EQ(10.0, r.cf);
    // the window's T[10] = 1800 leaves T[80] far behind: the search
    // resumes, and theta_s starts again at the initial scale, not at 1
    step(ctl.get(), 0.9, 0.85, 2000.0);
    r = step(ctl.get(), 0.9, 0.85, 2000.0);
    EXPECT_TRUE(r.events & GCX_GRAVAC_EV_UNSETTLED);
    s = state(ctl.get());
    EXPECT_EQ(10.0, s.theta_min);
    EXPECT_EQ(2.0, s.theta_s);
    r = step(ctl.get(), 0.9, 0.85, 2000.0);
    EXPECT_EQ(GCX_GRAVAC_LEVEL_C, r.level);
    EXPECT_EQ(20.0, r.cf);
}

TEST(GravacSaturation, OnlyDenseIsNoSaturation)
{
    gcx_gravac_params_t p = base_params();
    p.window = 2;
    Ctl ctl = make(p);
    for (int i = 0; i < 10; ++i) {
        gcx_gravac_record_t r = step(ctl.get(), 0.5, 0.4, 1000.0);
        EXPECT_EQ(GCX_GRAVAC_LEVEL_DENSE, r.level);
    }
    EXPECT_EQ(1u, state(ctl.get()).n_throughput);
    EXPECT_FALSE(state(ctl.get()).settled);
}

namespace
{

// A fixed pseudo-random gain and throughput sequence.
struct Lcg {
    uint64_t s;
    double next()
    {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return double(s >> 11) / double(1ull << 53);
    }
};

std::vector<gcx_gravac_record_t> run(uint64_t seed, int steps)
{
    gcx_gravac_params_t p = base_params();
    p.alpha = 0.0;
    p.nranks = 8;
    p.window = 25;
    p.omega = 0.03;
    Ctl ctl = make(p);
    Lcg lcg{seed};
    std::vector<gcx_gravac_record_t> recs;
    for (int i = 0; i < steps; ++i) {
        double ef = 1.0 + 100.0 * lcg.next();
        double dmin = 0.6 + 0.4 * lcg.next();
        double dc = dmin * (0.7 + 0.3 * lcg.next());
        gcx_gravac_norms_t n = {ef, ef * dmin, ef * dc,
                                1000.0 + 100.0 * lcg.next()};
        gcx_gravac_record_t rec;
        EXPECT_EQ(GCX_OK, gcx_gravac_decide(ctl.get(), &n, &rec));
        recs.push_back(rec);
    }
    return recs;
}

} // namespace

TEST(GravacDeterminism, SameInputsSameDecisions)
{
    std::vector<gcx_gravac_record_t> a = run(42, 3000), b = run(42, 3000);
    ASSERT_EQ(a.size(), b.size());
    unsigned levels = 0, events = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].step, b[i].step);
        EXPECT_EQ(a[i].level, b[i].level) << i;
        EXPECT_EQ(a[i].cf, b[i].cf) << i;
        EXPECT_EQ(a[i].delta_min, b[i].delta_min) << i;
        EXPECT_EQ(a[i].delta_c, b[i].delta_c) << i;
        EXPECT_EQ(a[i].theta_min, b[i].theta_min) << i;
        EXPECT_EQ(a[i].theta_s, b[i].theta_s) << i;
        EXPECT_EQ(a[i].throughput, b[i].throughput) << i;
        EXPECT_EQ(a[i].events, b[i].events) << i;
        levels |= 1u << a[i].level;
        events |= a[i].events;
    }
    // the sequence exercises more than one level and the window rules
    EXPECT_NE(0u, levels & (1u << GCX_GRAVAC_LEVEL_C));
    EXPECT_NE(0u, events & GCX_GRAVAC_EV_WINDOW);
    // another sequence gives other decisions
    std::vector<gcx_gravac_record_t> c = run(7, 3000);
    bool differ = false;
    for (size_t i = 0; i < a.size() && !differ; ++i) {
        differ = a[i].delta_c != c[i].delta_c;
    }
    EXPECT_TRUE(differ);
}

TEST(GravacBadInput, NormsAreChecked)
{
    gcx_gravac_params_t p = base_params();
    Ctl ctl = make(p);
    gcx_gravac_record_t rec;
    memset(&rec, 0x5a, sizeof(rec));
    const gcx_gravac_record_t untouched = rec;
    const gcx_gravac_norms_t bad_range[] = {
        {NAN, 1, 1, 0}, {1, NAN, 1, 0}, {1, 1, INFINITY, 0}, {1, 1, 1, NAN}};
    for (const gcx_gravac_norms_t &n : bad_range) {
        EXPECT_EQ(GCX_ERR_RANGE, gcx_gravac_decide(ctl.get(), &n, &rec));
    }
    const gcx_gravac_norms_t bad_sign[] = {
        {-1, 1, 1, 0}, {1, -1, 1, 0}, {1, 1, -1, 0}, {1, 1, 1, -5}};
    for (const gcx_gravac_norms_t &n : bad_sign) {
        EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_decide(ctl.get(), &n, &rec));
    }
    EXPECT_EQ(0, memcmp(&rec, &untouched, sizeof(rec)));
    EXPECT_EQ(0u, state(ctl.get()).step); // nothing changed
    EXPECT_EQ(0.0, state(ctl.get()).delta_min);
    gcx_gravac_norms_t ok = {1, 1, 1, 0};
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_decide(nullptr, &ok, &rec));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_decide(ctl.get(), nullptr, &rec));
    EXPECT_EQ(GCX_OK, gcx_gravac_decide(ctl.get(), &ok, nullptr));
    gcx_gravac_state_t s;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_get_state(nullptr, &s));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_get_state(ctl.get(), nullptr));
    gcx_gravac_destroy(nullptr);
}

TEST(GravacRecord, CsvLine)
{
    EXPECT_STREQ("step,level,cf,delta_min,delta_c,throughput,theta_min,"
                 "theta_s,events",
                 gcx_gravac_record_header());
    gcx_gravac_record_t r;
    memset(&r, 0, sizeof(r));
    r.step = 12;
    r.level = GCX_GRAVAC_LEVEL_C;
    r.cf = 160;
    r.delta_min = 0.95;
    r.delta_c = 0.75;
    r.throughput = 812.5;
    r.theta_min = 10;
    r.theta_s = 16;
    r.events = GCX_GRAVAC_EV_WINDOW | GCX_GRAVAC_EV_SCALED;
    char buf[256];
    ASSERT_EQ(GCX_OK, gcx_gravac_record_format(&r, buf, sizeof(buf)));
    EXPECT_STREQ("12,c,160,0.950000,0.750000,812.5,10,16,5", buf);
    char small[8] = "keep";
    EXPECT_EQ(GCX_ERR_RANGE,
              gcx_gravac_record_format(&r, small, sizeof(small)));
    EXPECT_STREQ("keep", small);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_record_format(nullptr, buf, 8));
    EXPECT_STREQ("dense", gcx_gravac_level_name(GCX_GRAVAC_LEVEL_DENSE));
    EXPECT_STREQ("min", gcx_gravac_level_name(GCX_GRAVAC_LEVEL_MIN));
    EXPECT_STREQ("?",
                 gcx_gravac_level_name(static_cast<gcx_gravac_level_t>(9)));
    EXPECT_STREQ("geometric",
                 gcx_gravac_policy_name(GCX_GRAVAC_POLICY_GEOMETRIC));
}
