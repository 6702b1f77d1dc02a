// gcx_comm_create_group: communicators made by their members only, over
// the parent's endpoints. Each case runs in its own processes (one meson
// test per case, --gtest_filter), most of them on 4 ranks: concurrent
// disjoint groups with one tag, a reordered group, overlapping groups with
// distinct tags, the parent's collectives and non-members going on
// meanwhile, members given different lists, a dead member, bad arguments,
// and ids released over more creations than there are ids.
#include "harness.h"

extern "C" {
#include "core/comm.h"
}

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <vector>

namespace {

double timeout_s()
{
    const char *t = getenv("GCX_TIMEOUT");
    return t ? atof(t) : 300.0;
}

bool member(const std::vector<int> &ranks)
{
    for (int r : ranks) {
        if (r == world_rank()) {
            return true;
        }
    }
    return false;
}

// A group over `ranks` of the world (the caller must be listed).
gcx_comm_t *make_group(const std::vector<int> &ranks, int tag)
{
    gcx_comm_t  *comm = nullptr;
    gcx_status_t st   = gcx_comm_create_group(
        g_world, static_cast<int>(ranks.size()), ranks.data(), tag, nullptr,
        &comm);
    EXPECT_EQ(GCX_OK, st) << gcx_strerror(st);
    return comm;
}

// The communicator is rank i = ranks[i] of the world: an allreduce of the
// world ranks and an allgather of them say so.
void expect_group(gcx_comm_t *comm, const std::vector<int> &ranks)
{
    ASSERT_NE(nullptr, comm);
    const int n = static_cast<int>(ranks.size());
    ASSERT_EQ(n, gcx_comm_size(comm));
    ASSERT_EQ(world_rank(), ranks[static_cast<size_t>(gcx_comm_rank(comm))]);
    std::vector<double> sum(1000);
    for (size_t i = 0; i < sum.size(); ++i) {
        sum[i] = 1000.0 * world_rank() + static_cast<double>(i);
    }
    ASSERT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, sum.data(), sum.size(),
                                    GCX_DT_F64, GCX_OP_SUM, nullptr));
    for (size_t i = 0; i < sum.size(); ++i) {
        double want = 0;
        for (int r : ranks) {
            want += 1000.0 * r + static_cast<double>(i);
        }
        ASSERT_EQ(want, sum[i]) << "element " << i;
    }
    int              me = world_rank();
    std::vector<int> all(ranks.size(), -1);
    ASSERT_EQ(GCX_OK, gcx_allgather(comm, &me, all.data(), 1, GCX_DT_I32,
                                    nullptr));
    EXPECT_EQ(ranks, all);
}

// An allreduce over the world: every rank's rank summed.
void expect_world_allreduce()
{
    int v = world_rank(), want = world_size() * (world_size() - 1) / 2;
    ASSERT_EQ(GCX_OK, gcx_allreduce(g_world, GCX_IN_PLACE, &v, 1, GCX_DT_I32,
                                    GCX_OP_SUM, nullptr));
    EXPECT_EQ(want, v);
}

// {0,2} and {1,3} with the same tag at the same time, then {3,1,0} with
// another while the parent has a collective in flight that cannot finish
// before the non-member (rank 2) joins it, which it does only when rank 0
// tells it (a message on the parent) after the group is made: a creation
// queued behind the parent's collectives would wait forever (GCX_TIMEOUT).
TEST(Group, DisjointPairsAndAReorderedTriple)
{
    if (world_size() != 4) {
        GTEST_SKIP() << "needs 4 ranks";
    }
    const int        rank = world_rank();
    std::vector<int> pair = rank % 2 == 0 ? std::vector<int>{0, 2}
                                          : std::vector<int>{1, 3};
    gcx_comm_t      *half = make_group(pair, 7);
    ASSERT_NO_FATAL_FAILURE(expect_group(half, pair));
    ASSERT_NO_FATAL_FAILURE(expect_world_allreduce());

    const std::vector<int> triple = {3, 1, 0};
    int                    go = 0, v = rank;
    gcx_request_t         *parent_req;
    gcx_comm_t            *three = nullptr;
    if (member(triple)) {
        ASSERT_EQ(GCX_OK, gcx_allreduce(g_world, GCX_IN_PLACE, &v, 1,
                                        GCX_DT_I32, GCX_OP_SUM, &parent_req));
        three = make_group(triple, 8);
        ASSERT_NO_FATAL_FAILURE(expect_group(three, triple));
        if (rank == 0) {
            go = 1;
            ASSERT_EQ(GCX_OK, gcx_send(g_world, &go, 1, GCX_DT_I32, 2, 5,
                                       nullptr));
        }
        ASSERT_EQ(GCX_OK, gcx_wait(parent_req));
        gcx_request_free(parent_req);
    } else {
        // the non-member goes on with the parent meanwhile
        ASSERT_EQ(GCX_OK, gcx_recv(g_world, &go, 1, GCX_DT_I32, 0, 5,
                                   nullptr));
        ASSERT_EQ(1, go);
        ASSERT_EQ(GCX_OK, gcx_allreduce(g_world, GCX_IN_PLACE, &v, 1,
                                        GCX_DT_I32, GCX_OP_SUM, nullptr));
    }
    EXPECT_EQ(6, v);
    // the children and the parent interleave
    for (int round = 0; round < 3; ++round) {
        ASSERT_NO_FATAL_FAILURE(expect_group(half, pair));
        ASSERT_NO_FATAL_FAILURE(expect_world_allreduce());
        if (three != nullptr) {
            ASSERT_NO_FATAL_FAILURE(expect_group(three, triple));
        }
    }
    gcx_comm_destroy(three);
    gcx_comm_destroy(half);
}

// A = {0,1,2} (tag 1) and B = {1,2,3} (tag 2): ranks 1 and 2 make A then
// B; rank 3 starts B at once, so its messages reach ranks 1 and 2 while
// they are still making A.
TEST(Group, OverlappingGroupsWithDistinctTags)
{
    if (world_size() != 4) {
        GTEST_SKIP() << "needs 4 ranks";
    }
    const std::vector<int> a = {0, 1, 2}, b = {1, 2, 3};
    gcx_comm_t            *ga = nullptr, *gb = nullptr;
    if (member(a)) {
        ga = make_group(a, 1);
    }
    if (member(b)) {
        gb = make_group(b, 2);
    }
    for (int round = 0; round < 3; ++round) {
        if (ga != nullptr) {
            ASSERT_NO_FATAL_FAILURE(expect_group(ga, a));
        }
        if (gb != nullptr) {
            ASSERT_NO_FATAL_FAILURE(expect_group(gb, b));
        }
        ASSERT_NO_FATAL_FAILURE(expect_world_allreduce());
    }
    if (ga != nullptr && gb != nullptr) {
        EXPECT_NE(ga->id, gb->id);
    }
    gcx_comm_destroy(ga);
    gcx_comm_destroy(gb);
}

// Members given the same ranks in other orders: GCX_ERR_MISMATCH on every
// member at once, and the parent stays usable (no message left behind).
TEST(Group, DifferentOrderIsAMismatchOnEveryMember)
{
    if (world_size() < 3) {
        GTEST_SKIP() << "needs 3 ranks";
    }
    std::vector<int> ranks = {0, 1, 2};
    if (world_rank() == 2) {
        ranks = {2, 1, 0};
    }
    if (member(ranks)) {
        gcx_comm_t  *comm = nullptr;
        gcx_status_t st   = gcx_comm_create_group(g_world, 3, ranks.data(), 4,
                                                  nullptr, &comm);
        EXPECT_EQ(GCX_ERR_MISMATCH, st) << gcx_strerror(st);
        EXPECT_EQ(nullptr, comm);
    }
    ASSERT_NO_FATAL_FAILURE(expect_world_allreduce());
    // the same tag works once the members agree
    if (member(ranks)) {
        const std::vector<int> agreed = {0, 1, 2};
        gcx_comm_t            *comm   = make_group(agreed, 4);
        ASSERT_NO_FATAL_FAILURE(expect_group(comm, agreed));
        gcx_comm_destroy(comm);
    }
}

// Members given different member sets (rank 1 leaves rank 2 out): an error
// on every member, within GCX_TIMEOUT, not a hang; the parent has failed.
// Run with a small GCX_TIMEOUT under gcxrun --keep-going.
TEST(Group, DifferentMemberSetsFailEveryMember)
{
    if (world_size() != 4) {
        GTEST_SKIP() << "needs 4 ranks";
    }
    if (world_rank() == 3) {
        return; // not a member in anyone's list
    }
    std::vector<int> ranks = {0, 1, 2};
    if (world_rank() == 1) {
        ranks = {0, 1};
    }
    auto         t0   = std::chrono::steady_clock::now();
    gcx_comm_t  *comm = nullptr;
    gcx_status_t st   = gcx_comm_create_group(
        g_world, static_cast<int>(ranks.size()), ranks.data(), 3, nullptr,
        &comm);
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
    printf("rank %d: create_group failed with '%s' after %.2f s "
           "(GCX_TIMEOUT=%g)\n",
           world_rank(), gcx_strerror(st), elapsed, timeout_s());
    // a member that saw the mismatch first fails and exits: the others may
    // see that (gcx watches local processes) before the mismatch reaches them
    EXPECT_TRUE(st == GCX_ERR_MISMATCH || st == GCX_ERR_TIMEOUT || st == GCX_ERR_PEER)
        << gcx_strerror(st);
    EXPECT_EQ(nullptr, comm);
    EXPECT_LT(elapsed, 2 * timeout_s() + 10); // returned, did not hang
    EXPECT_NE(GCX_OK, gcx_progress(g_world)); // the parent failed
}

// A member that is gone: the others get an error within GCX_TIMEOUT. Run
// with a small GCX_TIMEOUT under gcxrun --keep-going.
TEST(Group, ADeadMemberIsAnErrorWithinTheTimeout)
{
    ASSERT_GE(world_size(), 2);
    std::vector<int> all(static_cast<size_t>(world_size()));
    for (int r = 0; r < world_size(); ++r) {
        all[static_cast<size_t>(r)] = r;
    }
    if (world_rank() == world_size() - 1) {
        fflush(stdout);
        _exit(0);
    }
    auto         t0   = std::chrono::steady_clock::now();
    gcx_comm_t  *comm = nullptr;
    gcx_status_t st   = gcx_comm_create_group(g_world, world_size(),
                                              all.data(), 0, nullptr, &comm);
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
    printf("rank %d: create_group failed with '%s' after %.2f s\n",
           world_rank(), gcx_strerror(st), elapsed);
    EXPECT_TRUE(st == GCX_ERR_TIMEOUT || st == GCX_ERR_PEER) << gcx_strerror(st);
    EXPECT_LT(elapsed, 2 * timeout_s() + 10);
}

// Bad arguments are refused before anything is sent.
TEST(Group, BadArgumentsAreRefusedLocally)
{
    const int   size = world_size(), rank = world_rank();
    gcx_comm_t *comm = nullptr;
    auto        bad  = [&](std::vector<int> ranks, int tag) {
        return gcx_comm_create_group(g_world, static_cast<int>(ranks.size()),
                                     ranks.data(), tag, nullptr, &comm);
    };
    int me = rank;
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_create_group(nullptr, 1, &me, 0,
                                                     nullptr, &comm));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_create_group(g_world, 1, nullptr, 0,
                                                     nullptr, &comm));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_create_group(g_world, 1, &me, 0,
                                                     nullptr, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_create_group(g_world, 0, &me, 0,
                                                     nullptr, &comm));
    std::vector<int> too_many(static_cast<size_t>(size) + 1, rank);
    EXPECT_EQ(GCX_ERR_INVALID, bad(too_many, 0));           // n > size
    EXPECT_EQ(GCX_ERR_INVALID, bad({rank, rank}, 0));       // duplicate
    EXPECT_EQ(GCX_ERR_INVALID, bad({rank, size}, 0));       // out of range
    EXPECT_EQ(GCX_ERR_INVALID, bad({rank, -1}, 0));         // out of range
    EXPECT_EQ(GCX_ERR_INVALID, bad({rank}, -1));            // tag < 0
    if (size > 1) {
        EXPECT_EQ(GCX_ERR_INVALID, bad({(rank + 1) % size}, 0)); // not listed
    }
    EXPECT_EQ(nullptr, comm);
    // nothing was sent: the world is in step, and a group of one works
    ASSERT_NO_FATAL_FAILURE(expect_world_allreduce());
    comm = make_group({rank}, 0);
    ASSERT_NO_FATAL_FAILURE(expect_group(comm, {rank}));
    gcx_comm_destroy(comm);
}

// More creations than there are id pairs (2048): destroy gives the id back.
// Each cycle makes two groups alive at once (the ranks of one parity in
// ascending, then in descending order): all members agree on each id, and
// no two live communicators of a process share one.
TEST(Group, IdsAreUniqueAndReleased)
{
    const int size = world_size(), rank = world_rank();
    const int cycles = 3000;
    uint32_t  last = 0;
    int       wraps = 0; // ids went round all 2048 pairs
    for (int i = 0; i < cycles; ++i) {
        std::vector<int> up;
        for (int r = 0; r < size; ++r) {
            if ((r + i) % 2 == (rank + i) % 2) {
                up.push_back(r);
            }
        }
        std::vector<int> down(up.rbegin(), up.rend());
        gcx_comm_t *a = nullptr, *b = nullptr;
        ASSERT_EQ(GCX_OK, gcx_comm_create_group(
                              g_world, static_cast<int>(up.size()), up.data(),
                              2 * i, nullptr, &a));
        ASSERT_EQ(GCX_OK, gcx_comm_create_group(
                              g_world, static_cast<int>(down.size()),
                              down.data(), 2 * i + 1, nullptr, &b));
        ASSERT_NE(a->id, b->id);
        wraps += (a->id < last) + (b->id < a->id);
        last = b->id;
        ASSERT_NE(a->id, g_world->id);
        ASSERT_NE(b->id, g_world->id);
        int32_t ids[2] = {static_cast<int32_t>(a->id),
                          static_cast<int32_t>(b->id)};
        int32_t mx[2] = {ids[0], ids[1]}, mn[2] = {ids[0], ids[1]};
        ASSERT_EQ(GCX_OK, gcx_allreduce(a, GCX_IN_PLACE, mx, 2, GCX_DT_I32,
                                        GCX_OP_MAX, nullptr));
        ASSERT_EQ(GCX_OK, gcx_allreduce(b, GCX_IN_PLACE, mn, 2, GCX_DT_I32,
                                        GCX_OP_MIN, nullptr));
        ASSERT_EQ(ids[0], mx[0]) << "cycle " << i;
        ASSERT_EQ(ids[1], mx[1]) << "cycle " << i;
        ASSERT_EQ(ids[0], mn[0]) << "cycle " << i;
        ASSERT_EQ(ids[1], mn[1]) << "cycle " << i;
        gcx_comm_destroy(b);
        gcx_comm_destroy(a);
    }
    EXPECT_GE(wraps, 2);
    ASSERT_NO_FATAL_FAILURE(expect_world_allreduce());
}

} // namespace
