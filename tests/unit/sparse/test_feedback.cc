/*
 * test_feedback.cc - the feedback table of the sparse allreduce
 * (src/coll/sparse_allreduce/feedback.h) as a data structure: bucket
 * keying, lookups with no records, the median of the last records,
 * clamping, expiry, the hash and the fold of the ranks' records.
 */
#include <gtest/gtest.h>

extern "C" {
#include "coll/sparse_allreduce/feedback.h"
}

#include <cstring>
#include <vector>

namespace {

struct Table {
    gcx_sparse_fb_t fb;
    Table() { std::memset(&fb, 0, sizeof(fb)); }
};

/* P records of the exchanged layout, @p stride int64 apart. */
std::vector<int64_t> records(int P, size_t stride)
{
    return std::vector<int64_t>((size_t)P * stride, 0);
}

void set_record(std::vector<int64_t> &recs, size_t stride, int r,
                int64_t algo1, int64_t bucket, int64_t model_ns,
                int64_t measured_ns, int64_t hash)
{
    int64_t *rec = &recs[(size_t)r * stride];
    rec[0]       = algo1;
    rec[1]       = bucket;
    rec[2]       = model_ns;
    rec[3]       = measured_ns;
    rec[4]       = hash;
}

} // namespace

TEST(SparseFeedback, BucketsAreFactorsOfTwoFrom200us)
{
    EXPECT_EQ(0, gcx_sparse_fb_bucket(0));
    EXPECT_EQ(0, gcx_sparse_fb_bucket(150e-6));
    EXPECT_EQ(0, gcx_sparse_fb_bucket(199.9e-6));
    EXPECT_EQ(1, gcx_sparse_fb_bucket(200e-6));
    EXPECT_EQ(1, gcx_sparse_fb_bucket(399.9e-6));
    EXPECT_EQ(2, gcx_sparse_fb_bucket(400e-6));
    EXPECT_EQ(3, gcx_sparse_fb_bucket(1e-3));  /* [800 us, 1.6 ms) */
    EXPECT_EQ(9, gcx_sparse_fb_bucket(0.1)); /* [51.2, 102.4) ms */
    /* the last bucket is open-ended */
    EXPECT_EQ(GCX_SPARSE_FB_BUCKETS - 1, gcx_sparse_fb_bucket(1e3));
    EXPECT_EQ(GCX_SPARSE_FB_BUCKETS - 1, gcx_sparse_fb_bucket(1e300));
}

TEST(SparseFeedback, EmptyTableHasNoRecords)
{
    Table t;

    for (size_t a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        for (int b = 0; b < GCX_SPARSE_FB_BUCKETS; ++b) {
            EXPECT_EQ(0, gcx_sparse_fb_count(&t.fb, a, b));
            EXPECT_EQ(0.0, gcx_sparse_fb_ratio(&t.fb, a, b));
        }
    }
}

TEST(SparseFeedback, RecordIsKeyedByAlgorithmAndBucket)
{
    Table t;

    gcx_sparse_fb_insert(&t.fb, GCX_SPARSE_A_SPLIT, 4, 1.25);
    EXPECT_EQ(1, gcx_sparse_fb_count(&t.fb, GCX_SPARSE_A_SPLIT, 4));
    EXPECT_DOUBLE_EQ(1.25, gcx_sparse_fb_ratio(&t.fb, GCX_SPARSE_A_SPLIT, 4));
    for (size_t a = 0; a < GCX_SPARSE_NALGOS; ++a) {
        for (int b = 0; b < GCX_SPARSE_FB_BUCKETS; ++b) {
            if (a == GCX_SPARSE_A_SPLIT && b == 4) {
                continue;
            }
            EXPECT_EQ(0, gcx_sparse_fb_count(&t.fb, a, b)) << a << " " << b;
            EXPECT_EQ(0.0, gcx_sparse_fb_ratio(&t.fb, a, b)) << a << " " << b;
        }
    }
}

TEST(SparseFeedback, RatioIsTheMedianOfTheLastFive)
{
    Table        t;
    const size_t a = GCX_SPARSE_A_RD;
    const int    b = 2;

    /* odd counts: the middle one */
    gcx_sparse_fb_insert(&t.fb, a, b, 3.0);
    EXPECT_DOUBLE_EQ(3.0, gcx_sparse_fb_ratio(&t.fb, a, b));
    gcx_sparse_fb_insert(&t.fb, a, b, 1.0);
    /* even counts: the lower middle (of two, the smaller) */
    EXPECT_DOUBLE_EQ(1.0, gcx_sparse_fb_ratio(&t.fb, a, b));
    gcx_sparse_fb_insert(&t.fb, a, b, 5.0);
    EXPECT_DOUBLE_EQ(3.0, gcx_sparse_fb_ratio(&t.fb, a, b));
    gcx_sparse_fb_insert(&t.fb, a, b, 4.0); /* 1 3 4 5 */
    EXPECT_DOUBLE_EQ(3.0, gcx_sparse_fb_ratio(&t.fb, a, b));
    gcx_sparse_fb_insert(&t.fb, a, b, 2.0); /* 1 2 3 4 5 */
    EXPECT_DOUBLE_EQ(3.0, gcx_sparse_fb_ratio(&t.fb, a, b));
    EXPECT_EQ(GCX_SPARSE_FB_WINDOW, gcx_sparse_fb_count(&t.fb, a, b));
    /* older records leave the window: 3 1 5 4 2 + 8 8 8 -> 4 2 8 8 8 */
    gcx_sparse_fb_insert(&t.fb, a, b, 8.0);
    gcx_sparse_fb_insert(&t.fb, a, b, 8.0);
    EXPECT_DOUBLE_EQ(5.0, gcx_sparse_fb_ratio(&t.fb, a, b)); /* 5 4 2 8 8 */
    gcx_sparse_fb_insert(&t.fb, a, b, 8.0);
    EXPECT_DOUBLE_EQ(8.0, gcx_sparse_fb_ratio(&t.fb, a, b)); /* 4 2 8 8 8 */
    EXPECT_EQ(GCX_SPARSE_FB_WINDOW, gcx_sparse_fb_count(&t.fb, a, b));
    /* an outlier does not move the median */
    gcx_sparse_fb_insert(&t.fb, a, b, 0.1);
    EXPECT_DOUBLE_EQ(8.0, gcx_sparse_fb_ratio(&t.fb, a, b)); /* 2 8 8 8 .1 */
}

TEST(SparseFeedback, RatiosAreClamped)
{
    Table t;

    gcx_sparse_fb_insert(&t.fb, 0, 0, 1000.0);
    EXPECT_DOUBLE_EQ(GCX_SPARSE_FB_CLAMP, gcx_sparse_fb_ratio(&t.fb, 0, 0));
    gcx_sparse_fb_insert(&t.fb, 1, 0, 1e-6);
    EXPECT_DOUBLE_EQ(1.0 / GCX_SPARSE_FB_CLAMP,
                     gcx_sparse_fb_ratio(&t.fb, 1, 0));
    gcx_sparse_fb_insert(&t.fb, 2, 0, 15.0); /* inside: kept */
    EXPECT_DOUBLE_EQ(15.0, gcx_sparse_fb_ratio(&t.fb, 2, 0));
}

TEST(SparseFeedback, ExpiresAfter64RecordsOfItsBucket)
{
    Table     t;
    const int b = 5;

    gcx_sparse_fb_insert(&t.fb, GCX_SPARSE_A_ALLGATHER, b, 2.0);
    /* records of other buckets do not age it */
    for (int i = 0; i < 200; ++i) {
        gcx_sparse_fb_insert(&t.fb, GCX_SPARSE_A_SPLIT, b + 1, 1.0);
    }
    EXPECT_EQ(1, gcx_sparse_fb_count(&t.fb, GCX_SPARSE_A_ALLGATHER, b));
    /* records of other algorithms in its bucket do */
    for (int i = 0; i < GCX_SPARSE_FB_EXPIRE - 1; ++i) {
        gcx_sparse_fb_insert(&t.fb, GCX_SPARSE_A_SPLIT, b, 1.0);
    }
    EXPECT_EQ(1, gcx_sparse_fb_count(&t.fb, GCX_SPARSE_A_ALLGATHER, b));
    EXPECT_DOUBLE_EQ(2.0,
                     gcx_sparse_fb_ratio(&t.fb, GCX_SPARSE_A_ALLGATHER, b));
    gcx_sparse_fb_insert(&t.fb, GCX_SPARSE_A_SPLIT, b, 1.0);
    EXPECT_EQ(0, gcx_sparse_fb_count(&t.fb, GCX_SPARSE_A_ALLGATHER, b));
    EXPECT_EQ(0.0, gcx_sparse_fb_ratio(&t.fb, GCX_SPARSE_A_ALLGATHER, b));
    /* a new record starts afresh: the expired one is not in the median */
    gcx_sparse_fb_insert(&t.fb, GCX_SPARSE_A_ALLGATHER, b, 0.5);
    EXPECT_EQ(1, gcx_sparse_fb_count(&t.fb, GCX_SPARSE_A_ALLGATHER, b));
    EXPECT_DOUBLE_EQ(0.5,
                     gcx_sparse_fb_ratio(&t.fb, GCX_SPARSE_A_ALLGATHER, b));
}

TEST(SparseFeedback, ExpiryCountsFromTheFirstRecordNotTheLast)
{
    Table        t;
    const size_t a = GCX_SPARSE_A_BALANCED_SPLIT;

    /* an algorithm measured on every call is measured afresh too */
    for (int i = 0; i < GCX_SPARSE_FB_EXPIRE; ++i) {
        gcx_sparse_fb_insert(&t.fb, a, 0, 3.0);
    }
    EXPECT_EQ(GCX_SPARSE_FB_WINDOW, gcx_sparse_fb_count(&t.fb, a, 0));
    EXPECT_DOUBLE_EQ(3.0, gcx_sparse_fb_ratio(&t.fb, a, 0));
    gcx_sparse_fb_insert(&t.fb, a, 0, 1.5); /* the 65th: a new period */
    EXPECT_EQ(1, gcx_sparse_fb_count(&t.fb, a, 0));
    EXPECT_DOUBLE_EQ(1.5, gcx_sparse_fb_ratio(&t.fb, a, 0));
}

TEST(SparseFeedback, HashFollowsTheContents)
{
    Table a, b;

    EXPECT_EQ(gcx_sparse_fb_hash(&a.fb), gcx_sparse_fb_hash(&b.fb));
    EXPECT_GE(gcx_sparse_fb_hash(&a.fb), 0);
    gcx_sparse_fb_insert(&a.fb, 1, 3, 1.5);
    EXPECT_NE(gcx_sparse_fb_hash(&a.fb), gcx_sparse_fb_hash(&b.fb));
    EXPECT_GE(gcx_sparse_fb_hash(&a.fb), 0);
    gcx_sparse_fb_insert(&b.fb, 1, 3, 1.5);
    EXPECT_EQ(gcx_sparse_fb_hash(&a.fb), gcx_sparse_fb_hash(&b.fb));
}

TEST(SparseFeedback, FoldTakesTheSlowestRankOverTheModel)
{
    Table        t;
    const size_t stride = 9; /* records sit inside longer info records */
    const int    P      = 3;
    auto         recs   = records(P, stride);
    int64_t      h      = gcx_sparse_fb_hash(&t.fb);
    int          differ = -1;

    /* algorithm index 1 (+1 on the wire), bucket 3 */
    set_record(recs, stride, 0, 2, 3, 1000000, 1500000, h);
    set_record(recs, stride, 1, 2, 3, 1000000, 3000000, h);
    set_record(recs, stride, 2, 2, 3, 1000000, 2000000, h);
    EXPECT_EQ(1, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, &differ));
    EXPECT_EQ(-1, differ);
    EXPECT_EQ(1, gcx_sparse_fb_count(&t.fb, 1, 3));
    EXPECT_DOUBLE_EQ(3.0, gcx_sparse_fb_ratio(&t.fb, 1, 3));
    EXPECT_EQ(0, gcx_sparse_fb_count(&t.fb, 0, 3));
    EXPECT_EQ(0, gcx_sparse_fb_count(&t.fb, 1, 2));
}

TEST(SparseFeedback, FoldLearnsNothingWithoutACommonRecord)
{
    Table        t;
    const size_t stride = GCX_SPARSE_FB_LEN;
    const int    P      = 2;
    auto         recs   = records(P, stride);
    int64_t      h      = gcx_sparse_fb_hash(&t.fb);

    /* no record (the first call, or a named one before) */
    set_record(recs, stride, 0, 0, 0, 0, 0, h);
    set_record(recs, stride, 1, 0, 0, 0, 0, h);
    EXPECT_EQ(0, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, NULL));
    /* ranks disagree on the algorithm or the bucket */
    set_record(recs, stride, 0, 1, 2, 1000, 2000, h);
    set_record(recs, stride, 1, 2, 2, 1000, 2000, h);
    EXPECT_EQ(0, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, NULL));
    set_record(recs, stride, 1, 1, 3, 1000, 2000, h);
    EXPECT_EQ(0, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, NULL));
    /* out of range */
    set_record(recs, stride, 0, GCX_SPARSE_NALGOS + 1, 2, 1000, 2000, h);
    set_record(recs, stride, 1, GCX_SPARSE_NALGOS + 1, 2, 1000, 2000, h);
    EXPECT_EQ(0, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, NULL));
    set_record(recs, stride, 0, 1, GCX_SPARSE_FB_BUCKETS, 1000, 2000, h);
    set_record(recs, stride, 1, 1, GCX_SPARSE_FB_BUCKETS, 1000, 2000, h);
    EXPECT_EQ(0, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, NULL));
    /* no modelled time */
    set_record(recs, stride, 0, 1, 2, 0, 2000, h);
    set_record(recs, stride, 1, 1, 2, 0, 2000, h);
    EXPECT_EQ(0, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, NULL));
    EXPECT_EQ(h, gcx_sparse_fb_hash(&t.fb)); /* untouched */
}

TEST(SparseFeedback, FoldEmptiesTheTableWhenHashesDiffer)
{
    Table        t;
    const size_t stride = GCX_SPARSE_FB_LEN;
    const int    P      = 4;
    auto         recs   = records(P, stride);
    int          differ = -1;
    int64_t      h;

    gcx_sparse_fb_insert(&t.fb, 0, 1, 2.0);
    gcx_sparse_fb_insert(&t.fb, 3, 7, 0.5);
    h = gcx_sparse_fb_hash(&t.fb);
    for (int r = 0; r < P; ++r) {
        set_record(recs, stride, r, 1, 1, 1000, 1000, r == 2 ? h + 1 : h);
    }
    EXPECT_EQ(-1, gcx_sparse_fb_fold(&t.fb, recs.data(), P, stride, &differ));
    EXPECT_EQ(2, differ);
    EXPECT_EQ(0, gcx_sparse_fb_count(&t.fb, 0, 1));
    EXPECT_EQ(0, gcx_sparse_fb_count(&t.fb, 3, 7));
    Table empty;
    EXPECT_EQ(gcx_sparse_fb_hash(&empty.fb), gcx_sparse_fb_hash(&t.fb));
}
