// Parameters of the GraVAC controller: defaults, validation, the GCX_GRAVAC_*
// rows of the config table, and the candidate CF sequences of both policies.
#include <gcx/gravac.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace
{

std::vector<double> candidates(const gcx_gravac_params_t &p)
{
    size_t count = 0;
    EXPECT_EQ(GCX_OK, gcx_gravac_candidates(&p, nullptr, 0, &count));
    std::vector<double> cfs(count);
    size_t again = 0;
    EXPECT_EQ(GCX_OK,
              gcx_gravac_candidates(&p, cfs.data(), cfs.size(), &again));
    EXPECT_EQ(count, again);
    return cfs;
}

} // namespace

TEST(GravacParams, DefaultsArePaperExponentialSetting)
{
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    EXPECT_EQ(GCX_OK, gcx_gravac_params_check(&p));
    EXPECT_EQ(10.0, p.theta_min);
    EXPECT_EQ(1000.0, p.theta_max);
    EXPECT_EQ(0.7, p.epsilon);
    EXPECT_EQ(0.01, p.omega);
    EXPECT_EQ(500u, p.window);
    EXPECT_EQ(GCX_GRAVAC_POLICY_EXPONENTIAL, p.policy);
    EXPECT_EQ(2.0, p.scale);
    EXPECT_EQ(1, p.nranks);
    EXPECT_EQ(GCX_GRAVAC_SETTLE_WINDOW, p.settle); // the paper re-checks
}

TEST(GravacParams, BadValuesAreInvalid)
{
    struct Case {
        const char *what;
        void (*set)(gcx_gravac_params_t *);
    };
    const Case cases[] = {
        {"theta_min < 1", [](gcx_gravac_params_t *p) { p->theta_min = 0.5; }},
        {"theta_min NaN", [](gcx_gravac_params_t *p) { p->theta_min = NAN; }},
        {"theta_min inf",
         [](gcx_gravac_params_t *p) { p->theta_min = INFINITY; }},
        {"theta_max < theta_min",
         [](gcx_gravac_params_t *p) { p->theta_max = 5; }},
        {"theta_max inf",
         [](gcx_gravac_params_t *p) { p->theta_max = INFINITY; }},
        {"epsilon 0", [](gcx_gravac_params_t *p) { p->epsilon = 0; }},
        {"epsilon > 1", [](gcx_gravac_params_t *p) { p->epsilon = 1.01; }},
        {"epsilon NaN", [](gcx_gravac_params_t *p) { p->epsilon = NAN; }},
        {"omega < 0", [](gcx_gravac_params_t *p) { p->omega = -0.1; }},
        {"omega 1", [](gcx_gravac_params_t *p) { p->omega = 1; }},
        {"window 0", [](gcx_gravac_params_t *p) { p->window = 0; }},
        {"scale 1", [](gcx_gravac_params_t *p) { p->scale = 1; }},
        {"scale NaN", [](gcx_gravac_params_t *p) { p->scale = NAN; }},
        {"ratio 1", [](gcx_gravac_params_t *p) { p->ratio = 1; }},
        {"alpha < 0", [](gcx_gravac_params_t *p) { p->alpha = -0.5; }},
        {"alpha > 1", [](gcx_gravac_params_t *p) { p->alpha = 1.5; }},
        {"nranks 0", [](gcx_gravac_params_t *p) { p->nranks = 0; }},
        {"policy",
         [](gcx_gravac_params_t *p) {
             p->policy = static_cast<gcx_gravac_policy_t>(7);
         }},
        {"settle",
         [](gcx_gravac_params_t *p) {
             p->settle = static_cast<gcx_gravac_settle_t>(2);
         }},
    };
    for (const Case &c : cases) {
        gcx_gravac_params_t p;
        gcx_gravac_params_default(&p);
        c.set(&p);
        EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_params_check(&p)) << c.what;
        gcx_gravac_t *ctl = reinterpret_cast<gcx_gravac_t *>(0x1);
        EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_create(&p, &ctl)) << c.what;
        EXPECT_EQ(reinterpret_cast<gcx_gravac_t *>(0x1), ctl) << c.what;
        size_t count = 0;
        EXPECT_EQ(GCX_ERR_INVALID,
                  gcx_gravac_candidates(&p, nullptr, 0, &count))
            << c.what;
    }
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_params_check(nullptr));
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_create(&p, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_create(nullptr, nullptr));
}

// Paper, exponential on DGC: 10x-1000x visits 10, 20, 40, 160, 1000.
// theta_s = 2, 4, 16, 256 -> capped at 1000 / 10 = 100.
TEST(GravacPolicy, ExponentialSequence)
{
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    EXPECT_EQ((std::vector<double>{10, 20, 40, 160, 1000}), candidates(p));
}

// Paper, geometric x2: 10x-2000x.
TEST(GravacPolicy, GeometricSequence)
{
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    p.policy = GCX_GRAVAC_POLICY_GEOMETRIC;
    p.ratio = 2;
    p.theta_max = 2000;
    p.window = 2000;
    EXPECT_EQ((std::vector<double>{10, 20, 40, 80, 160, 320, 640, 1280, 2000}),
              candidates(p));
}

TEST(GravacPolicy, OtherSettings)
{
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    p.theta_max = 10; // theta_min == theta_max: no second level
    EXPECT_EQ((std::vector<double>{10}), candidates(p));
    p.theta_max = 15; // the first scaling is already capped
    EXPECT_EQ((std::vector<double>{10, 15}), candidates(p));
    p.theta_max = 160; // the cap hits a candidate exactly
    EXPECT_EQ((std::vector<double>{10, 20, 40, 160}), candidates(p));
    p.policy = GCX_GRAVAC_POLICY_GEOMETRIC;
    p.ratio = 3;
    p.scale = 3;
    p.theta_min = 1;
    p.theta_max = 100;
    EXPECT_EQ((std::vector<double>{1, 3, 9, 27, 81, 100}), candidates(p));

    double two[2];
    size_t count = 0;
    ASSERT_EQ(GCX_OK, gcx_gravac_candidates(&p, two, 2, &count));
    EXPECT_EQ(6u, count); // the whole length, only 2 written
    EXPECT_EQ(1.0, two[0]);
    EXPECT_EQ(3.0, two[1]);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_candidates(&p, nullptr, 2, &count));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_candidates(&p, two, 2, nullptr));
}

TEST(GravacConfig, DefaultsMatchTheParamDefaults)
{
    gcx_config_t *config = nullptr;
    ASSERT_EQ(GCX_OK, gcx_config_read(&config));
    gcx_gravac_params_t from_config, defaults;
    gcx_gravac_params_default(&defaults);
    gcx_gravac_params_default(&from_config);
    ASSERT_EQ(GCX_OK, gcx_gravac_params_from_config(config, &from_config));
    EXPECT_EQ(defaults.theta_min, from_config.theta_min);
    EXPECT_EQ(defaults.theta_max, from_config.theta_max);
    EXPECT_EQ(defaults.epsilon, from_config.epsilon);
    EXPECT_EQ(defaults.omega, from_config.omega);
    EXPECT_EQ(defaults.window, from_config.window);
    EXPECT_EQ(defaults.policy, from_config.policy);
    EXPECT_EQ(defaults.scale, from_config.scale);
    EXPECT_EQ(defaults.ratio, from_config.ratio);
    EXPECT_EQ(defaults.alpha, from_config.alpha);
    EXPECT_EQ(defaults.settle, from_config.settle);
    gcx_config_release(config);
}

TEST(GravacConfig, VariablesReachTheParams)
{
    gcx_config_t *config = nullptr;
    ASSERT_EQ(GCX_OK, gcx_config_read(&config));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GCX_GRAVAC_POLICY", "geometric"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_THETA_MAX", "2000"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_WINDOW", "2000"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_EPSILON", "0.9"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_OMEGA", "0.05"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_RATIO", "1.5"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_SCALE", "4"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_ALPHA", "0.25"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_THETA_MIN", "20"));
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_SETTLE", "once"));
    gcx_gravac_params_t p;
    gcx_gravac_params_default(&p);
    p.nranks = 7;
    ASSERT_EQ(GCX_OK, gcx_gravac_params_from_config(config, &p));
    EXPECT_EQ(GCX_GRAVAC_POLICY_GEOMETRIC, p.policy);
    EXPECT_EQ(2000.0, p.theta_max);
    EXPECT_EQ(2000u, p.window);
    EXPECT_EQ(0.9, p.epsilon);
    EXPECT_EQ(0.05, p.omega);
    EXPECT_EQ(1.5, p.ratio);
    EXPECT_EQ(4.0, p.scale);
    EXPECT_EQ(0.25, p.alpha);
    EXPECT_EQ(20.0, p.theta_min);
    EXPECT_EQ(GCX_GRAVAC_SETTLE_ONCE, p.settle);
    EXPECT_EQ(7, p.nranks); // not a variable: left as it was

    // bad single values are refused by the table itself
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_config_set(config, "GRAVAC_POLICY", "linear"));
    EXPECT_EQ(GCX_ERR_INVALID,
              gcx_config_set(config, "GRAVAC_SETTLE", "never"));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_config_set(config, "GRAVAC_EPSILON", "0"));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_config_set(config, "GRAVAC_WINDOW", "0"));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_config_set(config, "GRAVAC_SCALE", "1"));
    // a bad combination is refused by params_from_config, p unchanged
    ASSERT_EQ(GCX_OK, gcx_config_set(config, "GRAVAC_THETA_MIN", "5000"));
    gcx_gravac_params_t before = p;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_params_from_config(config, &p));
    EXPECT_EQ(before.theta_min, p.theta_min);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_params_from_config(nullptr, &p));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gravac_params_from_config(config, nullptr));
    gcx_config_release(config);
}
