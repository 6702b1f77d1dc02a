// Reduce-scatter, reduce, gather and scatter against references computed
// locally from the deterministic per-rank inputs of the harness: every
// type, operation and root, in place and not, counts 0, 1, odd and large
// (the pipelined paths), non-blocking requests, mismatches and bad
// arguments.
#include "harness.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

const gcx_dtype_t kReduceTypes[] = {GCX_DT_F32, GCX_DT_F64, GCX_DT_I32,
                                    GCX_DT_I64, GCX_DT_F16, GCX_DT_BF16};
const gcx_dtype_t kAllTypes[]    = {GCX_DT_F32, GCX_DT_F64, GCX_DT_I32,
                                    GCX_DT_I64, GCX_DT_F16, GCX_DT_BF16,
                                    GCX_DT_U8};
const gcx_op_t    kOps[]         = {GCX_OP_SUM, GCX_OP_MAX, GCX_OP_MIN,
                                    GCX_OP_AVG};
// 20001 f32/f64/i32/i64 elements are above the binomial reduce's 64 KiB
const size_t      kCounts[]      = {0, 1, 7, 1001, 20001};
const size_t      kLarge         = 1u << 20;
const uint8_t     kSentinel      = 0xA7;
const size_t      kGuard         = 64; // bytes after every receive buffer

std::string what(gcx_dtype_t dt, gcx_op_t op, size_t n, int in_place,
                 int root = -1)
{
    return std::string(gcx_dtype_name(dt)) + " " +
           (op < GCX_OP_LAST ? gcx_op_name(op) : "-") + " count " +
           std::to_string(n) + (in_place ? " in place" : "") +
           (root >= 0 ? " root " + std::to_string(root) : "");
}

// A byte buffer of n elements plus a guard, all set to the sentinel.
std::vector<uint8_t> sentinel_buf(size_t n, gcx_dtype_t dt)
{
    return std::vector<uint8_t>(n * gcx_dtype_size(dt) + kGuard, kSentinel);
}

::testing::AssertionResult guard_intact(const std::vector<uint8_t> &buf,
                                        size_t from)
{
    for (size_t i = from; i < buf.size(); ++i) {
        if (buf[i] != kSentinel) {
            return ::testing::AssertionFailure() << "byte " << i << " past the "
                                                 << "result overwritten";
        }
    }
    return ::testing::AssertionSuccess();
}

// Compare n elements of buf with the reduction reference at global
// elements first .. first+n-1 (inputs are small integers: exact in every
// type, so the comparison is exact).
::testing::AssertionResult reduced_ok(const void *buf, gcx_dtype_t dt,
                                      gcx_op_t op, size_t first, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        double want = test_expected(dt, op, world_size(), first + i);
        double got  = test_read(buf, dt, i);
        if (want != got) {
            return ::testing::AssertionFailure()
                   << "element " << i << " (global " << first + i << "): got "
                   << got << ", want " << want;
        }
    }
    return ::testing::AssertionSuccess();
}

// Inputs of gather/scatter: non-negative integers exact in every type.
double gs_value(int rank, size_t i)
{
    return static_cast<double>((rank * 13 + static_cast<long>(i % 1009) * 7) % 101);
}

void gs_fill(void *buf, gcx_dtype_t dt, size_t n, int rank)
{
    for (size_t i = 0; i < n; ++i) {
        test_write(buf, dt, i, gs_value(rank, i));
    }
}

::testing::AssertionResult gs_ok(const void *buf, gcx_dtype_t dt, size_t n,
                                 int rank)
{
    for (size_t i = 0; i < n; ++i) {
        if (test_read(buf, dt, i) != gs_value(rank, i)) {
            return ::testing::AssertionFailure()
                   << "element " << i << " of rank " << rank << "'s block: got "
                   << test_read(buf, dt, i) << ", want " << gs_value(rank, i);
        }
    }
    return ::testing::AssertionSuccess();
}

// Input of rank `me` for a reduction over n elements, in dt.
std::vector<uint8_t> reduce_input(gcx_dtype_t dt, size_t n)
{
    std::vector<uint8_t> in(n * gcx_dtype_size(dt) + 1);
    test_fill(in.data(), dt, n, world_rank());
    return in;
}

// ---- reduce-scatter -------------------------------------------------------

void check_reduce_scatter(gcx_comm_t *comm, gcx_dtype_t dt, gcx_op_t op,
                          size_t n, int in_place)
{
    int    P = world_size(), me = world_rank();
    size_t es = gcx_dtype_size(dt);
    auto   in = reduce_input(dt, n * P);
    std::vector<uint8_t> out;
    if (in_place) {
        out = sentinel_buf(n * P, dt);
        memcpy(out.data(), in.data(), n * P * es);
    } else {
        out = sentinel_buf(n, dt);
    }
    // in_place 2: sendbuf == recvbuf, which means in place too
    const void *send = in_place == 1 ? GCX_IN_PLACE : in_place ? out.data() : in.data();
    ASSERT_EQ(GCX_OK, gcx_reduce_scatter(comm, send, out.data(), n, dt, op, nullptr))
        << what(dt, op, n, in_place);
    ASSERT_TRUE(reduced_ok(out.data(), dt, op, n * me, n)) << what(dt, op, n, in_place);
    ASSERT_TRUE(guard_intact(out, (in_place ? n * P : n) * es))
        << what(dt, op, n, in_place);
}

TEST(ReduceScatter, EveryTypeOpAndCount)
{
    for (gcx_dtype_t dt : kReduceTypes) {
        for (gcx_op_t op : kOps) {
            for (size_t n : kCounts) {
                for (int in_place = 0; in_place < 3; ++in_place) {
                    check_reduce_scatter(g_world, dt, op, n, in_place);
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
}

TEST(ReduceScatter, LargeAndSmallChunks)
{
    // 4 KiB chunks: many chunks per block, partial sums staged in recvbuf
    gcx_comm_t *comm = make_comm({{"PIPELINE_CHUNK", "4K"}});
    ASSERT_NE(nullptr, comm);
    for (int in_place = 0; in_place < 2; ++in_place) {
        check_reduce_scatter(comm, GCX_DT_F32, GCX_OP_SUM, 10007, in_place);
        check_reduce_scatter(comm, GCX_DT_BF16, GCX_OP_AVG, 3001, in_place);
        check_reduce_scatter(comm, GCX_DT_I64, GCX_OP_MIN, 5000, in_place);
        // products and bitwise operations (products of |v| <= 5: exact here)
        check_reduce_scatter(comm, GCX_DT_I64, GCX_OP_PROD, 5000, in_place);
        check_reduce_scatter(comm, GCX_DT_F32, GCX_OP_PROD, 3001, in_place);
        check_reduce_scatter(comm, GCX_DT_I32, GCX_OP_BXOR, 3001, in_place);
    }
    gcx_comm_destroy(comm);
    for (int in_place = 0; in_place < 2; ++in_place) {
        check_reduce_scatter(g_world, GCX_DT_F32, GCX_OP_SUM, kLarge / world_size() + 3,
                             in_place);
        check_reduce_scatter(g_world, GCX_DT_F16, GCX_OP_MAX, kLarge / world_size() + 1,
                             in_place);
    }
}

// ---- reduce ---------------------------------------------------------------

void check_reduce(gcx_comm_t *comm, gcx_dtype_t dt, gcx_op_t op, size_t n,
                  int root, int in_place)
{
    int  me      = world_rank();
    bool is_root = me == root;
    auto in      = reduce_input(dt, n);
    auto out     = sentinel_buf(n, dt);
    if (in_place && is_root) {
        memcpy(out.data(), in.data(), n * gcx_dtype_size(dt));
    }
    // in place only at the root; elsewhere the recvbuf is ignored: NULL
    ASSERT_EQ(GCX_OK, gcx_reduce(comm, in_place && is_root ? GCX_IN_PLACE : in.data(),
                                 is_root ? out.data() : nullptr, n, dt, op,
                                 root, nullptr))
        << what(dt, op, n, in_place, root);
    if (is_root) {
        ASSERT_TRUE(reduced_ok(out.data(), dt, op, 0, n)) << what(dt, op, n, in_place, root);
        ASSERT_TRUE(guard_intact(out, n * gcx_dtype_size(dt)))
            << what(dt, op, n, in_place, root);
    }
}

TEST(Reduce, EveryTypeOpRootAndCount)
{
    for (int root = 0; root < world_size(); ++root) {
        for (gcx_dtype_t dt : kReduceTypes) {
            for (gcx_op_t op : kOps) {
                for (size_t n : kCounts) {
                    for (int in_place = 0; in_place < 2; ++in_place) {
                        check_reduce(g_world, dt, op, n, root, in_place);
                        if (HasFatalFailure()) {
                            return;
                        }
                    }
                }
            }
        }
    }
}

TEST(Reduce, LargeAndSmallChunks)
{
    int         last = world_size() - 1;
    gcx_comm_t *comm = make_comm({{"PIPELINE_CHUNK", "4K"}});
    ASSERT_NE(nullptr, comm);
    for (int in_place = 0; in_place < 2; ++in_place) {
        check_reduce(comm, GCX_DT_F64, GCX_OP_SUM, 30011, last, in_place);
        check_reduce(comm, GCX_DT_F16, GCX_OP_AVG, 50001, 0, in_place);
        check_reduce(comm, GCX_DT_F64, GCX_OP_PROD, 30011, 0, in_place);
        check_reduce(comm, GCX_DT_I64, GCX_OP_BOR, 20001, last, in_place);
        check_reduce(comm, GCX_DT_I32, GCX_OP_BAND, 1001, 0, in_place);
    }
    gcx_comm_destroy(comm);
    for (int in_place = 0; in_place < 2; ++in_place) {
        check_reduce(g_world, GCX_DT_F32, GCX_OP_SUM, kLarge, 0, in_place);
        check_reduce(g_world, GCX_DT_I64, GCX_OP_MAX, kLarge + 3, last, in_place);
        check_reduce(g_world, GCX_DT_BF16, GCX_OP_AVG, kLarge - 1, last / 2, in_place);
    }
}

// ---- gather and scatter ---------------------------------------------------

void check_gather(gcx_dtype_t dt, size_t n, int root, int in_place)
{
    int                  P = world_size(), me = world_rank();
    size_t               es = gcx_dtype_size(dt);
    bool                 is_root = me == root;
    std::vector<uint8_t> in(n * es + 1);
    auto                 out = sentinel_buf(n * P, dt);
    gs_fill(in.data(), dt, n, me);
    if (in_place && is_root) {
        memcpy(out.data() + root * n * es, in.data(), n * es);
    }
    ASSERT_EQ(GCX_OK, gcx_gather(g_world, in_place && is_root ? GCX_IN_PLACE : in.data(),
                                 n, is_root ? out.data() : nullptr, dt, root,
                                 nullptr))
        << what(dt, GCX_OP_LAST, n, in_place, root);
    if (is_root) {
        for (int r = 0; r < P; ++r) {
            ASSERT_TRUE(gs_ok(out.data() + r * n * es, dt, n, r))
                << what(dt, GCX_OP_LAST, n, in_place, root);
        }
        ASSERT_TRUE(guard_intact(out, n * P * es));
    }
}

void check_scatter(gcx_dtype_t dt, size_t n, int root, int in_place)
{
    int                  P = world_size(), me = world_rank();
    size_t               es = gcx_dtype_size(dt);
    bool                 is_root = me == root;
    std::vector<uint8_t> in(n * P * es + 1);
    auto                 out = sentinel_buf(n, dt);
    if (is_root) {
        for (int r = 0; r < P; ++r) {
            gs_fill(in.data() + r * n * es, dt, n, r);
        }
    }
    auto saved = in;
    ASSERT_EQ(GCX_OK, gcx_scatter(g_world, is_root ? in.data() : nullptr,
                                  in_place && is_root ? const_cast<void *>(GCX_IN_PLACE)
                                                      : out.data(),
                                  n, dt, root, nullptr))
        << what(dt, GCX_OP_LAST, n, in_place, root);
    ASSERT_EQ(saved, in) << "sendbuf changed";
    if (in_place && is_root) {
        ASSERT_TRUE(guard_intact(out, 0)) << "in place: recvbuf must not be used";
        return;
    }
    ASSERT_TRUE(gs_ok(out.data(), dt, n, me)) << what(dt, GCX_OP_LAST, n, in_place, root);
    ASSERT_TRUE(guard_intact(out, n * es));
}

TEST(Gather, EveryTypeRootAndCount)
{
    for (int root = 0; root < world_size(); ++root) {
        for (gcx_dtype_t dt : kAllTypes) {
            for (size_t n : kCounts) {
                for (int in_place = 0; in_place < 2; ++in_place) {
                    check_gather(dt, n, root, in_place);
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
    check_gather(GCX_DT_F32, kLarge, world_size() - 1, 0);
    check_gather(GCX_DT_U8, kLarge + 1, 0, 1);
}

TEST(Scatter, EveryTypeRootAndCount)
{
    for (int root = 0; root < world_size(); ++root) {
        for (gcx_dtype_t dt : kAllTypes) {
            for (size_t n : kCounts) {
                for (int in_place = 0; in_place < 2; ++in_place) {
                    check_scatter(dt, n, root, in_place);
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
    check_scatter(GCX_DT_F64, kLarge, world_size() - 1, 0);
    check_scatter(GCX_DT_U8, kLarge + 1, 0, 1);
}

// ---- non-blocking ----------------------------------------------------------

TEST(Rooted, NonBlockingPairsInterleaved)
{
    int    P = world_size(), me = world_rank(), root = P - 1;
    size_t n = 70001; // reduce: the ring path; reduce-scatter: many chunks

    for (int round = 0; round < 3; ++round) {
        auto rs_in  = reduce_input(GCX_DT_F32, n * P);
        auto rs_out = sentinel_buf(n, GCX_DT_F32);
        auto rd_in  = reduce_input(GCX_DT_I32, n);
        auto rd_out = sentinel_buf(n, GCX_DT_I32);
        gcx_request_t *a = nullptr, *b = nullptr;
        ASSERT_EQ(GCX_OK, gcx_reduce_scatter(g_world, rs_in.data(), rs_out.data(), n,
                                             GCX_DT_F32, GCX_OP_SUM, &a));
        ASSERT_EQ(GCX_OK, gcx_reduce(g_world, rd_in.data(), rd_out.data(), n,
                                     GCX_DT_I32, GCX_OP_MAX, root, &b));
        // wait in the opposite order on odd rounds
        if (round % 2) {
            std::swap(a, b);
        }
        EXPECT_EQ(GCX_OK, gcx_wait(a));
        EXPECT_EQ(GCX_OK, gcx_wait(b));
        gcx_request_free(a);
        gcx_request_free(b);
        ASSERT_TRUE(reduced_ok(rs_out.data(), GCX_DT_F32, GCX_OP_SUM, n * me, n));
        if (me == root) {
            ASSERT_TRUE(reduced_ok(rd_out.data(), GCX_DT_I32, GCX_OP_MAX, 0, n));
        }

        size_t               m = 1001;
        std::vector<uint8_t> g_in(m * 8), g_out(m * 8 * P), s_in(m * 8 * P),
                             s_out(m * 8);
        gs_fill(g_in.data(), GCX_DT_I64, m, me);
        for (int r = 0; r < P; ++r) {
            gs_fill(s_in.data() + r * m * 8, GCX_DT_I64, m, r);
        }
        ASSERT_EQ(GCX_OK, gcx_gather(g_world, g_in.data(), m, g_out.data(),
                                     GCX_DT_I64, round % P, &a));
        ASSERT_EQ(GCX_OK, gcx_scatter(g_world, s_in.data(), s_out.data(), m,
                                      GCX_DT_I64, (round + 1) % P, &b));
        while (gcx_test(a) == GCX_INPROGRESS || gcx_test(b) == GCX_INPROGRESS) {
        }
        EXPECT_EQ(GCX_OK, gcx_test(a));
        EXPECT_EQ(GCX_OK, gcx_test(b));
        gcx_request_free(a);
        gcx_request_free(b);
        if (me == round % P) {
            for (int r = 0; r < P; ++r) {
                ASSERT_TRUE(gs_ok(g_out.data() + r * m * 8, GCX_DT_I64, m, r));
            }
        }
        ASSERT_TRUE(gs_ok(s_out.data(), GCX_DT_I64, m, me));
    }
}

// ---- mismatches: every rank fails, nothing is written ----------------------

void expect_usable()
{
    std::vector<int32_t> v(100, 1);
    ASSERT_EQ(GCX_OK, gcx_allreduce(g_world, GCX_IN_PLACE, v.data(), v.size(),
                                    GCX_DT_I32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(world_size(), v[99]);
}

TEST(RootedMismatch, CountsTypesOpsAndRoots)
{
    int P = world_size(), me = world_rank();
    if (P < 2) {
        GTEST_SKIP() << "needs two ranks to disagree";
    }
    size_t n     = 3000;
    size_t mine  = me == 1 ? n + 1 : n; // rank 1 disagrees on the count
    int    root1 = me == 1 ? 1 : 0;     // and on the root
    auto   in    = reduce_input(GCX_DT_F32, (n + 1) * P);
    auto   out   = sentinel_buf((n + 1) * P, GCX_DT_F32);

    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_reduce_scatter(g_world, in.data(), out.data(), mine,
                                                   GCX_DT_F32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_reduce_scatter(g_world, in.data(), out.data(), n, GCX_DT_F32,
                                 me == 0 ? GCX_OP_MAX : GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH,
              gcx_reduce_scatter(g_world, in.data(), out.data(), n,
                                 me == 0 ? GCX_DT_I32 : GCX_DT_F32, GCX_OP_SUM,
                                 nullptr));
    // in place: recvbuf is the input; must stay as it was
    std::vector<uint8_t> inplace(in.begin(), in.end());
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_reduce_scatter(g_world, GCX_IN_PLACE, inplace.data(),
                                                   mine, GCX_DT_F32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(in, inplace);
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_reduce(g_world, in.data(), out.data(), mine,
                                           GCX_DT_F32, GCX_OP_SUM, 0, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_reduce(g_world, in.data(), out.data(), n,
                                           GCX_DT_F32, GCX_OP_SUM, root1, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_reduce(g_world, in.data(), out.data(), kLarge / 8,
                                           GCX_DT_F32, GCX_OP_SUM, root1, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_reduce(g_world, in.data(), out.data(), n,
                                           GCX_DT_F32, me == 0 ? GCX_OP_AVG : GCX_OP_SUM,
                                           0, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_gather(g_world, in.data(), mine, out.data(),
                                           GCX_DT_F32, 0, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_gather(g_world, in.data(), n, out.data(),
                                           GCX_DT_F32, root1, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_gather(g_world, in.data(), n, out.data(),
                                           me == 0 ? GCX_DT_U8 : GCX_DT_F32, 0, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_scatter(g_world, in.data(), out.data(), mine,
                                            GCX_DT_F32, 0, nullptr));
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_scatter(g_world, in.data(), out.data(), n,
                                            GCX_DT_F32, root1, nullptr));
    testing::internal::GetCapturedStderr();
    EXPECT_TRUE(guard_intact(out, 0)) << "a mismatched collective wrote";
    expect_usable();
}

// ---- invalid arguments: GCX_ERR_INVALID, nothing sent -----------------------

TEST(RootedInvalid, BadArguments)
{
    int                  P = world_size(), me = world_rank();
    std::vector<uint8_t> in(1000 * 8 * P), out(1000 * 8 * P, kSentinel);
    void                *o = out.data();
    const void          *i = in.data();
    const auto           bad_dt = static_cast<gcx_dtype_t>(GCX_DT_LAST);
    const auto           bad_op = static_cast<gcx_op_t>(GCX_OP_LAST);

    testing::internal::CaptureStderr();
    // reduce-scatter
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce_scatter(nullptr, i, o, 10, GCX_DT_F32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce_scatter(g_world, i, o, 10, GCX_DT_U8, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce_scatter(g_world, i, o, 10, bad_dt, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce_scatter(g_world, i, o, 10, GCX_DT_F32, bad_op, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce_scatter(g_world, nullptr, o, 10, GCX_DT_F32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce_scatter(g_world, i, nullptr, 10, GCX_DT_F32, GCX_OP_SUM, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce_scatter(g_world, out.data() + 8, o, 10, GCX_DT_F32,
                                                  GCX_OP_SUM, nullptr)); // overlap
    // reduce
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, i, o, 10, GCX_DT_F32, GCX_OP_SUM, -1, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, i, o, 10, GCX_DT_F32, GCX_OP_SUM, P, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, i, o, 10, GCX_DT_U8, GCX_OP_MAX, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, i, o, 10, bad_dt, GCX_OP_SUM, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, i, o, 10, GCX_DT_I32, bad_op, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, nullptr, o, 10, GCX_DT_F32, GCX_OP_SUM, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, i, me == 0 ? nullptr : o, 10, GCX_DT_F32,
                                          GCX_OP_SUM, me == 0 ? 0 : -1, nullptr));
    // gather
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gather(g_world, i, 10, o, GCX_DT_F32, P, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gather(g_world, i, 10, o, bad_dt, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gather(g_world, nullptr, 10, o, GCX_DT_F32, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_gather(g_world, i, 10, me == 0 ? nullptr : o, GCX_DT_F32,
                                          me == 0 ? 0 : -1, nullptr));
    // scatter
    EXPECT_EQ(GCX_ERR_INVALID, gcx_scatter(g_world, i, o, 10, GCX_DT_F32, -2, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_scatter(g_world, i, o, 10, bad_dt, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_scatter(g_world, i, nullptr, 10, GCX_DT_F32, 0, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_scatter(g_world, me == 0 ? nullptr : i, o, 10, GCX_DT_F32,
                                           me == 0 ? 0 : P, nullptr));
    // GCX_IN_PLACE off the root: the non-roots fail at once (the root does
    // not call, so nobody waits)
    if (me != 0) {
        EXPECT_EQ(GCX_ERR_INVALID, gcx_reduce(g_world, GCX_IN_PLACE, o, 10, GCX_DT_F32,
                                              GCX_OP_SUM, 0, nullptr));
        EXPECT_EQ(GCX_ERR_INVALID, gcx_gather(g_world, GCX_IN_PLACE, 10, o, GCX_DT_F32, 0,
                                              nullptr));
        EXPECT_EQ(GCX_ERR_INVALID, gcx_scatter(g_world, i, const_cast<void *>(GCX_IN_PLACE),
                                               10, GCX_DT_F32, 0, nullptr));
    }
    std::string log = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, log.find("is not a reduction")) << log;
    EXPECT_NE(std::string::npos, log.find("root")) << log;
    EXPECT_NE(std::string::npos, log.find("NULL")) << log;
    for (uint8_t b : out) {
        ASSERT_EQ(kSentinel, b);
    }
    expect_usable();
}

} // namespace
