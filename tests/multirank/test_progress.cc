// Progress (src/core/request.c, context.c, progress_thread.c): what a gcx
// call finishes, and what happens while the application calls nothing.
//
// - A gcx_progress() call completes every receive whose message arrived
//   (a drain: passes until one finds nothing), not a transport budget's
//   worth: before, one call took what one UCX progress call read (16
//   shared-memory messages).
// - With the progress thread (GCX_PROGRESS_THREAD=y, or
//   gcx_progress_thread_enable()) a rank that posts an allreduce and then
//   computes, calling nothing, still does its part: the other ranks
//   finish theirs during its compute. Without the thread they cannot (its
//   ring steps never go). The ranks tell each other through marker files
//   (harness.h), a channel outside gcx, so the computing rank makes no gcx
//   call while it waits. Results are checked against test_expected().
//
// No timing is asserted: the waits outside gcx are hang guards only.
#include "harness.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

// Marker @p what of rank @p rank of this job (harness.h).
std::string note_path(const char *what, int rank)
{
    return job_marker((std::string("progress-") + what + "-" + std::to_string(rank)).c_str());
}

void note(const char *what)
{
    touch_marker(note_path(what, world_rank()));
}

// Waits outside gcx until @p rank left note @p what; false after @p s.
bool noted(const char *what, int rank, int s)
{
    return wait_for_marker(note_path(what, rank), nullptr, s);
}

void forget(const char *what)
{
    unlink(note_path(what, world_rank()).c_str());
}

bool thread_on()
{
    const char *v = getenv("GCX_PROGRESS_THREAD");
    return v != nullptr && (v[0] == 'y' || v[0] == '1' || v[0] == 'o');
}

} // namespace

// Rank 1 sends 48 small messages to rank 0 (fewer than a shared-memory
// queue holds, so they all complete on the sender without rank 0); once
// they have, one gcx_progress() on rank 0 completes all its receives.
TEST(Progress, OneCallTakesEveryArrivedMessage)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    const int                    k = 48;
    std::vector<int32_t>         buf(k, -1);
    std::vector<gcx_request_t *> reqs(k, nullptr);
    const int                    me = world_rank();

    ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    if (me == 0) {
        for (int i = 0; i < k; ++i) {
            ASSERT_EQ(GCX_OK, gcx_recv(g_world, &buf[i], 1, GCX_DT_I32, 1, 100 + i,
                                       &reqs[i]));
        }
        note("posted");
        ASSERT_TRUE(noted("sent", 1, 120)) << "rank 1's sends did not complete";
        if (!thread_on()) {
            // the buffers, read without another gcx call (gcx_test would
            // progress again): a completed receive has written its value
            ASSERT_EQ(GCX_OK, gcx_progress(g_world));
            int done = 0;
            for (int i = 0; i < k; ++i) {
                done += buf[i] == 1000 + i;
            }
            EXPECT_EQ(k, done) << "receives done after one gcx_progress() "
                               << "call, all their messages had arrived";
        }
        for (int i = 0; i < k; ++i) {
            EXPECT_EQ(GCX_OK, gcx_wait(reqs[i]));
            gcx_request_free(reqs[i]);
            EXPECT_EQ(1000 + i, buf[i]);
        }
        forget("posted");
    } else if (me == 1) {
        ASSERT_TRUE(noted("posted", 0, 120));
        for (int i = 0; i < k; ++i) {
            buf[i] = 1000 + i;
            ASSERT_EQ(GCX_OK, gcx_send(g_world, &buf[i], 1, GCX_DT_I32, 0, 100 + i,
                                       &reqs[i]));
        }
        for (int i = 0; i < k; ++i) {
            EXPECT_EQ(GCX_OK, gcx_wait(reqs[i]));
            gcx_request_free(reqs[i]);
        }
        note("sent");
    }
    ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    forget("sent");
}

// Every rank posts an allreduce of 1M floats (a ring of many steps); the
// last rank then computes (sleeps in bounded slices, calling nothing)
// until every other rank has finished its allreduce, which it can only do
// if the last rank's part goes on without it. The thread comes from
// GCX_PROGRESS_THREAD=y, or else from gcx_progress_thread_enable() here
// (it then runs for the rest of the process: this case comes last).
TEST(Progress, CollectiveFinishesWhileARankComputes)
{
    EXPECT_EQ(GCX_ERR_INVALID, gcx_progress_thread_enable(nullptr));
    if (!thread_on()) {
        ASSERT_EQ(GCX_OK, gcx_progress_thread_enable(g_world));
    }
    ASSERT_EQ(GCX_OK, gcx_progress_thread_enable(g_world)); // idempotent
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    const size_t       n = (size_t)1 << 20;
    const int          me = world_rank(), computing = world_size() - 1;
    std::vector<float> in(n), out(n, -1.0f);
    gcx_request_t     *req = nullptr;

    test_fill(in.data(), GCX_DT_F32, n, me);
    ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    ASSERT_EQ(GCX_OK, gcx_allreduce(g_world, in.data(), out.data(), n, GCX_DT_F32,
                                    GCX_OP_SUM, &req));
    if (me == computing) {
        for (int r = 0; r < world_size(); ++r) {
            if (r != me) {
                EXPECT_TRUE(noted("done", r, 120))
                    << "rank " << r << " did not finish its allreduce while "
                    << "rank " << me << " computed";
            }
        }
    }
    EXPECT_EQ(GCX_OK, gcx_wait(req));
    gcx_request_free(req);
    if (me != computing) {
        note("done");
    }
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
        wrong += out[i] != static_cast<float>(test_expected(GCX_DT_F32, GCX_OP_SUM,
                                                            world_size(), i));
    }
    EXPECT_EQ(0u, wrong);
    ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    forget("done");
}
