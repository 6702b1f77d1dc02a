// Optimizer: the SGD update against a hand computation, and every schedule
// (warmup, const, step, cosine) at its boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nn/optim.h"

TEST(TrainOptim, SgdMomentumAndWeightDecay)
{
    train_sgd_t opt;
    ASSERT_EQ(train_sgd_init(&opt, 2, 0.9, 0.1), GCX_OK);
    std::vector<float> w = {1.0f, -2.0f};
    const float g[3][2] = {{0.5f, 0.0f}, {-1.0f, 1.0f}, {0.0f, 0.0f}};
    double rw[2] = {1.0, -2.0}, rv[2] = {0, 0};
    const double lr[3] = {0.1, 0.05, 0.2};
    for (int t = 0; t < 3; t++) {
        train_sgd_step(&opt, w.data(), g[t], lr[t]);
        for (int i = 0; i < 2; i++) {
            double gg = g[t][i] + 0.1 * rw[i];
            rv[i] = 0.9 * rv[i] + gg;
            rw[i] -= lr[t] * rv[i];
            EXPECT_NEAR(w[i], rw[i], 1e-6) << "step " << t << " i " << i;
        }
    }
    train_sgd_fini(&opt);
}

TEST(TrainOptim, PlainSgdWithoutMomentum)
{
    train_sgd_t opt;
    ASSERT_EQ(train_sgd_init(&opt, 1, 0.0, 0.0), GCX_OK);
    float w = 3.0f, g = 2.0f;
    train_sgd_step(&opt, &w, &g, 0.5);
    EXPECT_FLOAT_EQ(w, 2.0f);
    train_sgd_step(&opt, &w, &g, 0.5);
    EXPECT_FLOAT_EQ(w, 1.0f); // no memory of the first step
    train_sgd_fini(&opt);
}

TEST(TrainOptim, ScheduleNames)
{
    EXPECT_EQ(train_sched_parse("const"), TRAIN_SCHED_CONST);
    EXPECT_EQ(train_sched_parse("step"), TRAIN_SCHED_STEP);
    EXPECT_EQ(train_sched_parse("cosine"), TRAIN_SCHED_COSINE);
    EXPECT_EQ(train_sched_parse("linear"), -1);
    EXPECT_STREQ(train_sched_name(TRAIN_SCHED_COSINE), "cosine");
}

TEST(TrainOptim, WarmupThenConst)
{
    train_sched_t s = {};
    s.kind = TRAIN_SCHED_CONST;
    s.base_lr = 0.4;
    s.warmup_steps = 4;
    s.total_steps = 100;
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 0), 0.1);
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 1), 0.2);
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 3), 0.4);
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 4), 0.4);
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 99), 0.4);
}

TEST(TrainOptim, StepDecay)
{
    train_sched_t s = {};
    s.kind = TRAIN_SCHED_STEP;
    s.base_lr = 1.0;
    s.gamma = 0.1;
    s.step_size = 10;
    s.warmup_steps = 0;
    s.total_steps = 50;
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 0), 1.0);
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 9), 1.0);
    EXPECT_NEAR(train_sched_lr(&s, 10), 0.1, 1e-15);
    EXPECT_NEAR(train_sched_lr(&s, 25), 0.01, 1e-15);
    // With warmup the decay counts from the end of the warmup.
    s.warmup_steps = 5;
    EXPECT_DOUBLE_EQ(train_sched_lr(&s, 14), 1.0);
    EXPECT_NEAR(train_sched_lr(&s, 15), 0.1, 1e-15);
}

TEST(TrainOptim, CosineEndpoints)
{
    train_sched_t s = {};
    s.kind = TRAIN_SCHED_COSINE;
    s.base_lr = 0.2;
    s.min_lr = 0.02;
    s.warmup_steps = 10;
    s.total_steps = 110;
    EXPECT_NEAR(train_sched_lr(&s, 9), 0.2, 1e-15); // warmup's last step
    EXPECT_NEAR(train_sched_lr(&s, 10), 0.2, 1e-15);
    EXPECT_NEAR(train_sched_lr(&s, 60), 0.11, 1e-12); // half way
    EXPECT_NEAR(train_sched_lr(&s, 110), 0.02, 1e-15);
    EXPECT_NEAR(train_sched_lr(&s, 500), 0.02, 1e-15);
    double prev = 1;
    for (long t = 10; t <= 110; t++) {
        double lr = train_sched_lr(&s, t);
        EXPECT_LE(lr, prev + 1e-15);
        prev = lr;
    }
}
