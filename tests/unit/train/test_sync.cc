// Sync modes: the table, "name:k=v" option parsing with range checks and
// unknown-key errors, and the dense mode on one process.
#include <gtest/gtest.h>

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

    for (const char *mode : {"gc-fr", "gc-cr", "pgc-fr", "pgc-cr"}) {
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
