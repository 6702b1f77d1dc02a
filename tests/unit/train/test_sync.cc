// Sync modes: the table, "name:k=v" option parsing with range checks and
// unknown-key errors, and the dense mode on one process.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "sync/sync.h"

namespace {

std::string quiet_stderr_begin()
{
    testing::internal::CaptureStderr();
    return "";
}

} // namespace

TEST(TrainSync, TableHasDense)
{
    const train_sync_ops_t *d = train_sync_find("dense");
    ASSERT_NE(d, nullptr);
    EXPECT_STREQ(d->name, "dense");
    EXPECT_NE(d->init, nullptr);
    EXPECT_NE(d->exchange, nullptr);
    EXPECT_NE(d->fini, nullptr);
    EXPECT_EQ(train_sync_find("nope"), nullptr);
    EXPECT_EQ(train_sync_find(""), nullptr);
}

TEST(TrainSync, KeyValueParsing)
{
    train_kv_t kv;
    ASSERT_EQ(train_kv_parse("cf=100,ef=1,name=x", &kv), GCX_OK);
    ASSERT_EQ(kv.n, 3);
    double cf;
    long ef;
    EXPECT_EQ(train_kv_double(&kv, "m", "cf", 1, 1, 1e6, &cf), GCX_OK);
    EXPECT_EQ(cf, 100);
    EXPECT_EQ(train_kv_long(&kv, "m", "ef", 0, 0, 1, &ef), GCX_OK);
    EXPECT_EQ(ef, 1);
    EXPECT_STREQ(train_kv_str(&kv, "name", "y"), "x");
    EXPECT_STREQ(train_kv_str(&kv, "other", "y"), "y");
    EXPECT_EQ(kv.used[0] + kv.used[1] + kv.used[2], 3);
    // Absent keys give the default.
    EXPECT_EQ(train_kv_double(&kv, "m", "absent", 2.5, 0, 10, &cf), GCX_OK);
    EXPECT_EQ(cf, 2.5);

    quiet_stderr_begin();
    EXPECT_EQ(train_kv_double(&kv, "m", "cf", 1, 1, 50, &cf), GCX_ERR_INVALID);
    EXPECT_EQ(train_kv_long(&kv, "m", "name", 0, 0, 1, &ef), GCX_ERR_INVALID);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("cf=100"), std::string::npos) << err;

    ASSERT_EQ(train_kv_parse(nullptr, &kv), GCX_OK);
    EXPECT_EQ(kv.n, 0);
    ASSERT_EQ(train_kv_parse("", &kv), GCX_OK);
    EXPECT_EQ(kv.n, 0);
    quiet_stderr_begin();
    EXPECT_EQ(train_kv_parse("novalue", &kv), GCX_ERR_INVALID);
    EXPECT_EQ(train_kv_parse("=3", &kv), GCX_ERR_INVALID);
    testing::internal::GetCapturedStderr();
}

TEST(TrainSync, CreateRejectsUnknownModesAndOptions)
{
    train_comm_t comm;
    train_comm_local(&comm);
    train_sync_t sync;

    quiet_stderr_begin();
    EXPECT_EQ(train_sync_create("bogus", &comm, 10, &sync), GCX_ERR_INVALID);
    EXPECT_EQ(train_sync_create("dense:cf=10", &comm, 10, &sync),
              GCX_ERR_INVALID);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("bogus"), std::string::npos) << err;
    EXPECT_NE(err.find("unknown option 'cf'"), std::string::npos) << err;
}

TEST(TrainSync, CodedModesNeedRanksAndCheckTheirOptions)
{
    train_comm_t comm;
    train_comm_local(&comm);
    train_sync_t sync;

    for (const char *mode : {"gc-fr", "gc-cr", "pgc-fr", "pgc-cr", "ignore"}) {
        const train_sync_ops_t *ops = train_sync_find(mode);
        ASSERT_NE(ops, nullptr) << mode;
        EXPECT_TRUE(ops->flags & TRAIN_SYNC_OWN_GRADIENT) << mode;
        EXPECT_TRUE(ops->flags & TRAIN_SYNC_BATCH_STATS) << mode;
        quiet_stderr_begin();
        EXPECT_EQ(train_sync_create(mode, &comm, 10, &sync), GCX_ERR_INVALID);
        std::string err = testing::internal::GetCapturedStderr();
        EXPECT_NE(err.find("needs at least 2 ranks"), std::string::npos)
            << err;
    }
}

TEST(TrainSync, DenseOnOneProcessKeepsTheGradient)
{
    train_comm_t comm;
    train_comm_local(&comm);
    train_sync_t sync;
    ASSERT_EQ(train_sync_create("dense", &comm, 5, &sync), GCX_OK);
    EXPECT_EQ(sync.steps_per_batch, 1); // one step per global batch
    std::vector<float> g = {1, -2, 3.5f, 0, 1e-3f}, want = g;
    train_sync_stats_t st = {};
    ASSERT_EQ(sync.ops->exchange(&sync, g.data(), nullptr, &st), GCX_OK);
    EXPECT_EQ(g, want);
    EXPECT_EQ(st.cf, 1.0);
    EXPECT_EQ(st.gain, 1.0);
    EXPECT_EQ(st.bytes_sent, 0.0); // nothing to send alone
    EXPECT_EQ(st.dense_bytes, 0.0);
    train_sync_destroy(&sync);
    EXPECT_EQ(sync.ops, nullptr);
}

TEST(TrainSync, RingBytes)
{
    EXPECT_EQ(train_sync_ring_bytes(1000, 1), 0.0);
    EXPECT_EQ(train_sync_ring_bytes(1000, 2), 4000.0);
    EXPECT_EQ(train_sync_ring_bytes(1000, 4), 6000.0);
}

// --straggler exp:M: the draw is a pure function of (seed, step, rank,
// part), and over many draws it is a unit-mean exponential (fixed seeds:
// the statistics below are the same numbers on every run).
TEST(TrainSync, StragglerDrawIsRepeatableAndExponential)
{
    EXPECT_EQ(train_straggler_draw(1, 7, 2, 3),
              train_straggler_draw(1, 7, 2, 3));
    std::set<double> distinct = {
        train_straggler_draw(1, 7, 2, 3), train_straggler_draw(2, 7, 2, 3),
        train_straggler_draw(1, 8, 2, 3), train_straggler_draw(1, 7, 3, 3),
        train_straggler_draw(1, 7, 2, 4)};
    EXPECT_EQ(distinct.size(), 5u); // every input changes the draw

    const int N = 200000;
    double sum = 0, sq = 0, above1 = 0, minv = 1e300;
    for (int i = 0; i < N; i++) {
        // steps, ranks and parts as a run walks them
        double x = train_straggler_draw(42, i / 16, (i / 4) % 4, i % 4);
        ASSERT_TRUE(std::isfinite(x) && x > 0) << i;
        sum += x;
        sq += x * x;
        above1 += x > 1;
        minv = std::min(minv, x);
    }
    double mean = sum / N, var = sq / N - mean * mean;
    // standard error of the mean 1/sqrt(N) = 0.0022: 5 sigma
    EXPECT_NEAR(mean, 1.0, 0.012);
    EXPECT_NEAR(var, 1.0, 0.05);                    // Exp(1): variance 1
    EXPECT_NEAR(above1 / N, std::exp(-1.0), 0.006); // P(X > 1) = 1/e
    EXPECT_LT(minv, 1e-4);                          // no floor on the draw
}

// train_sync_computed() adds M x compute time x draw, and train_sync_delay()
// consumes it; without exp:M nothing accumulates.
TEST(TrainSync, StragglerDelayScalesWithComputeTime)
{
    train_comm_t comm;
    train_comm_local(&comm);
    train_sync_t sync;
    ASSERT_EQ(train_sync_create("dense", &comm, 5, &sync), GCX_OK);
    sync.step = 9;
    train_sync_computed(&sync, 0, 0.010);
    EXPECT_EQ(sync.pending_delay_s, 0.0); // off
    sync.straggler_exp = 0.5;
    sync.straggler_seed = 3;
    train_sync_computed(&sync, 0, 1e-4);
    train_sync_computed(&sync, 1, 2e-4);
    double want = 0.5 * 1e-4 * train_straggler_draw(3, 9, 0, 0) +
                  0.5 * 2e-4 * train_straggler_draw(3, 9, 0, 1);
    EXPECT_DOUBLE_EQ(sync.pending_delay_s, want);
    train_sync_delay(&sync); // sleeps it (well under a millisecond)
    EXPECT_EQ(sync.pending_delay_s, 0.0);
    train_sync_destroy(&sync);
}
