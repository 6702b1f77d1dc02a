// Revoke and shrink (src/core/shrink.c): ranks die at seeded points of a
// seeded sequence of mixed collectives (allreduce, broadcast, allgather,
// barrier); every survivor fails, shrinks, and gets the same communicator
// of the survivors, ranked in order, whose collectives are right. Also: a
// rank that dies during the shrink, a shrink on request (a live rank
// excluded; the parent stays usable), revoke of pending and later
// operations, bad arguments. Run under gcxrun --keep-going (victims leave
// with _exit, as a killed process: no teardown), each case in its own
// processes. GCX_TEST_SEED picks the plan (the same on every rank).
// Deaths on this host are seen through the transport's process watch, so a
// generous GCX_TIMEOUT is never what ends a wait; no timing is asserted.
#include "harness.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

void vanish(const char *where)
{
    printf("rank %d: vanishing %s\n", world_rank(), where);
    fflush(stdout);
    _exit(0);
}

// One collective of the plan on `comm`; `tag` varies the values. Checks
// the result when it succeeds; returns the status.
gcx_status_t run_op(gcx_comm_t *comm, int op, int tag, int count,
                    bool die_inside)
{
    const int          size = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    std::vector<int32_t> buf(static_cast<size_t>(count) * size);
    gcx_request_t      *req = nullptr;
    gcx_status_t        st;

    for (int j = 0; j < count; ++j) {
        // the allgather's in-place block sits at rank * count
        buf[(op == 2 ? static_cast<size_t>(rank) * count : 0) + j] = rank * 1000 + j + tag;
    }
    switch (op) {
    case 0:
        st = gcx_allreduce(comm, GCX_IN_PLACE, buf.data(), count, GCX_DT_I32,
                           GCX_OP_SUM, &req);
        break;
    case 1:
        st = gcx_broadcast(comm, buf.data(), count, GCX_DT_I32, tag % size,
                           &req);
        break;
    case 2:
        st = gcx_allgather(comm, GCX_IN_PLACE, buf.data(), count, GCX_DT_I32,
                           &req);
        break;
    default:
        st = gcx_barrier(comm, &req);
        break;
    }
    if (st != GCX_OK) {
        return st;
    }
    if (die_inside) {
        (void)gcx_test(req); // get transfers going, then vanish
        (void)gcx_test(req);
        vanish("in the middle of a collective");
    }
    st = gcx_wait(req);
    gcx_request_free(req);
    if (st != GCX_OK) {
        return st;
    }
    for (int j = 0; j < count && op != 3; ++j) {
        if (op == 0) {
            int32_t want = 0;
            for (int r = 0; r < size; ++r) {
                want += r * 1000 + j + tag;
            }
            EXPECT_EQ(want, buf[j]) << "allreduce element " << j;
        } else if (op == 1) {
            EXPECT_EQ((tag % size) * 1000 + j + tag, buf[j]) << "broadcast";
        } else {
            for (int r = 0; r < size; ++r) {
                EXPECT_EQ(r * 1000 + j + tag, buf[static_cast<size_t>(r) * count + j])
                    << "allgather block " << r;
            }
        }
    }
    return GCX_OK;
}

// Checks a communicator that came out of a shrink: every member lists the
// same world ranks in order, and the collectives over it are right.
// Returns false when a collective failed (a member died after the shrink:
// shrink again). `members` gets the world ranks.
bool check_shrunk(gcx_comm_t *comm, std::vector<int32_t> &members)
{
    const int size = gcx_comm_size(comm), rank = gcx_comm_rank(comm);

    members.assign(size, -1);
    members[rank] = world_rank();
    if (gcx_allgather(comm, GCX_IN_PLACE, members.data(), 1, GCX_DT_I32,
                      nullptr) != GCX_OK) {
        return false;
    }
    for (int r = 1; r < size; ++r) {
        EXPECT_LT(members[r - 1], members[r]) << "ranked in their old order";
    }
    EXPECT_EQ(world_rank(), members[rank]);
    for (int op = 0; op < 4; ++op) {
        if (run_op(comm, op, 7 + op, 64, false) != GCX_OK) {
            return false;
        }
    }
    int32_t sum = world_rank() + 1, want = 0;
    for (int32_t m : members) {
        want += m + 1;
    }
    if (gcx_allreduce(comm, GCX_IN_PLACE, &sum, 1, GCX_DT_I32, GCX_OP_SUM,
                      nullptr) != GCX_OK) {
        return false;
    }
    EXPECT_EQ(want, sum) << "sum over the survivors";
    return true;
}

// Survivors: shrink until the new communicator works; returns its members.
// With @p cut_off, a shrink that leaves with GCX_ERR_TRANSPORT (this rank
// heard none of its live peers on this host: shrink.c) sets it and returns
// {}; without, any failure of a shrink is a test failure.
std::vector<int32_t> shrink_until_healthy(gcx_comm_t *parent,
                                          bool       *cut_off = nullptr)
{
    std::vector<int32_t> members;
    gcx_comm_t          *cur = parent;

    for (int attempt = 0; attempt < 4; ++attempt) {
        gcx_comm_t  *next = nullptr;
        gcx_status_t st   = gcx_comm_shrink(cur, &next);
        if (cut_off != nullptr && st == GCX_ERR_TRANSPORT) {
            *cut_off = true;
        } else {
            EXPECT_EQ(GCX_OK, st) << gcx_strerror(st);
        }
        if (cur != parent) {
            gcx_comm_destroy(cur);
        }
        if (st != GCX_OK || next == nullptr) {
            return {};
        }
        cur = next;
        printf("rank %d: shrunk to %d ranks (rank %d)\n", world_rank(),
               gcx_comm_size(cur), gcx_comm_rank(cur));
        if (check_shrunk(cur, members)) {
            gcx_comm_destroy(cur);
            return members;
        }
    }
    ADD_FAILURE() << "no working communicator after 4 shrinks";
    gcx_comm_destroy(cur);
    return {};
}

struct Plan {
    std::vector<int> victims;   // world ranks that die
    std::vector<int> kill_iter; // when (iteration of the plan)
    std::vector<int> inside;    // 1: in the middle of the collective
    std::vector<int> ops, counts;
};

Plan make_plan(int nvictims, int iters)
{
    std::mt19937 rng(test_seed());
    Plan         p;
    std::vector<int> ranks;
    for (int r = 0; r < world_size(); ++r) {
        ranks.push_back(r);
    }
    std::shuffle(ranks.begin(), ranks.end(), rng);
    for (int v = 0; v < nvictims; ++v) {
        p.victims.push_back(ranks[v]);
        p.kill_iter.push_back(static_cast<int>(rng() % iters));
        p.inside.push_back(static_cast<int>(rng() % 2));
    }
    for (int i = 0; i < iters; ++i) {
        p.ops.push_back(static_cast<int>(rng() % 4));
        p.counts.push_back(1 + static_cast<int>(rng() % 256)); // eager sizes
    }
    return p;
}

// The mixed sequence with deaths; the survivors shrink and check.
void kill_and_shrink(int nvictims)
{
    ASSERT_GE(world_size(), nvictims + 2);
    const int iters = 40;
    Plan      plan  = make_plan(nvictims, iters);
    int       mine  = -1; // index in plan.victims
    for (int v = 0; v < nvictims; ++v) {
        if (plan.victims[v] == world_rank()) {
            mine = v;
        }
        if (world_rank() == 0) {
            printf("seed %u: rank %d dies at iteration %d (%s)\n", test_seed(),
                   plan.victims[v], plan.kill_iter[v],
                   plan.inside[v] ? "inside the collective" : "before it");
        }
    }
    gcx_comm_t *comm = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comm));
    gcx_status_t st = GCX_OK;
    for (int i = 0; i < iters && st == GCX_OK; ++i) {
        const bool die = mine >= 0 && plan.kill_iter[mine] == i;
        if (die && !plan.inside[mine]) {
            vanish("before a collective");
        }
        st = run_op(comm, plan.ops[i], i, plan.counts[i], die);
    }
    if (st == GCX_OK) {
        // a victim's last collective may have finished here (a broadcast
        // that did not need it): the next one cannot
        st = gcx_barrier(comm, nullptr);
    }
    EXPECT_TRUE(st == GCX_ERR_PEER || st == GCX_ERR_REVOKED) << gcx_strerror(st);
    if (mine >= 0) {
        vanish("at its first failure"); // its death was planned after it
    }
    printf("rank %d: failed with '%s'; shrinking\n", world_rank(), gcx_strerror(st));
    std::vector<int32_t> want;
    for (int r = 0; r < world_size(); ++r) {
        bool dead = false;
        for (int v : plan.victims) {
            dead |= v == r;
        }
        if (!dead) {
            want.push_back(r);
        }
    }
    EXPECT_EQ(want, shrink_until_healthy(comm));
    gcx_comm_destroy(comm);
}

TEST(Shrink, KillOneOfMixedCollectives)
{
    kill_and_shrink(1);
}

TEST(Shrink, KillTwoOfMixedCollectives)
{
    kill_and_shrink(2);
}

// A rank dies with many operations in flight (issue 31: ElasticDDP's
// buckets inside backward()): every rank posts allreduces of eager, chunked
// and rendezvous sizes on the communicator and on two duplicates of it
// (several transfers with each peer at once, on several views of the
// same endpoints), the victim vanishes after a seeded number of progress
// calls, and the survivors wait for them all (each fails or is right),
// shrink, and must get exactly the survivors. Before the fix an abort
// whose transfers with live peers outlasted its 0.4 s stopped the process's
// UCX worker: every communicator failed, the shrink with
// GCX_ERR_TRANSPORT, and the others counted that rank as dead (with a busy
// loop beside 4 ranks on 2 cores; GCX_TEST_SEED varies the moment).
TEST(Shrink, KillWithManyOperationsInFlight)
{
    ASSERT_GE(world_size(), 3);
    std::mt19937 rng(test_seed());
    const int    victim = 1 + static_cast<int>(rng() % (world_size() - 1));
    const int    polls  = static_cast<int>(rng() % 3000);
    const size_t counts[] = {3, 1000, 9000, 70000, 300000, 1u << 20};
    gcx_comm_t  *comms[3] = {nullptr, nullptr, nullptr};

    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comms[0]));
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comms[1]));
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comms[2]));
    if (world_rank() == 0) {
        printf("seed %u: rank %d vanishes after %d progress calls\n", test_seed(),
               victim, polls);
    }
    // warm the connections, so the death lands inside data transfers
    for (gcx_comm_t *c : comms) {
        ASSERT_EQ(GCX_OK, gcx_barrier(c, nullptr));
    }
    std::vector<std::vector<float>> bufs;
    std::vector<gcx_request_t *>    reqs;
    std::vector<gcx_status_t>       posted;
    for (int round = 0; round < 2; ++round) {
        for (size_t n : counts) {
            for (int c = 0; c < 3; ++c) {
                bufs.emplace_back(n, static_cast<float>(world_rank() + 1));
            }
        }
    }
    size_t b = 0;
    for (int round = 0; round < 2; ++round) {
        for (size_t n : counts) {
            for (gcx_comm_t *c : comms) {
                // a post fails once the communicator has (the victim may
                // die while this rank is still posting)
                gcx_request_t *req = nullptr;
                gcx_status_t   st  = gcx_allreduce(c, GCX_IN_PLACE, bufs[b].data(),
                                                   n, GCX_DT_F32, GCX_OP_SUM, &req);
                ASSERT_TRUE(st == GCX_OK || world_rank() != victim) << gcx_strerror(st);
                posted.push_back(st);
                reqs.push_back(st == GCX_OK ? req : nullptr);
                ++b;
            }
        }
    }
    if (world_rank() == victim) {
        for (int i = 0; i < polls; ++i) {
            (void)gcx_test(reqs[static_cast<size_t>(i) % reqs.size()]);
        }
        vanish("with its operations in flight");
    }
    // a survivor that has no transfer with the victim learns of the failure
    // from the revoke of one that has (ULFM: failures are local, revokes
    // propagate)
    const float want = static_cast<float>(world_size() * (world_size() + 1) / 2);
    int         failed = 0;
    bool        revoked[3] = {false, false, false};
    for (size_t i = 0; i < reqs.size(); ++i) {
        gcx_status_t st = posted[i];
        if (reqs[i] != nullptr) {
            st = gcx_wait(reqs[i]);
            gcx_request_free(reqs[i]);
        }
        if (st != GCX_OK && !revoked[i % 3]) {
            EXPECT_EQ(GCX_OK, gcx_comm_revoke(comms[i % 3]));
            revoked[i % 3] = true;
        }
        if (st == GCX_OK) {
            for (float x : bufs[i]) {
                ASSERT_EQ(want, x) << "operation " << i << " returned GCX_OK";
            }
        } else {
            EXPECT_TRUE(st == GCX_ERR_PEER || st == GCX_ERR_CANCELED ||
                        st == GCX_ERR_REVOKED) << gcx_strerror(st);
            ++failed;
        }
    }
    EXPECT_GT(failed, 0) << "nothing failed although a rank died";
    std::vector<int32_t> want_members;
    for (int r = 0; r < world_size(); ++r) {
        if (r != victim) {
            want_members.push_back(r);
        }
    }
    EXPECT_EQ(want_members, shrink_until_healthy(comms[0]));
    for (gcx_comm_t *c : comms) {
        gcx_comm_destroy(c);
    }
}

// A rank dies while a live peer is half way through an eager message to a
// survivor (run with UCX_RNDV_THRESH=inf: an 8 MB message goes as eager
// fragments) and that peer does not run for a while (it sleeps 1 s). The
// survivor's abort finds its receive matched and unfinished: UCX cannot
// cancel it, and the peer may still write into it. Before the fix the
// survivor stopped its UCX worker 0.4 s into the abort (every communicator
// failed, its shrink with GCX_ERR_TRANSPORT, and the others counted it
// dead); now it waits until the peer's message ends or its purge notice
// comes, and all three survivors shrink to exactly themselves. Ranks: the
// receiver 0, the sender 1, the victim 2, any others idle.
TEST(Shrink, DeathWhileALivePeerIsMidMessage)
{
    ASSERT_GE(world_size(), 3);
    const int    me = world_rank(), victim = 2;
    const size_t n  = (size_t)2 << 20; // floats: 8 MB
    gcx_comm_t  *comm = nullptr;

    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comm));
    ASSERT_EQ(GCX_OK, gcx_barrier(comm, nullptr));
    std::vector<float> buf(n, static_cast<float>(me + 1));
    gcx_request_t     *req = nullptr;
    gcx_status_t       st  = GCX_OK;
    if (me == 0) {
        // the receive, and a barrier that the victim's death fails, which
        // aborts the communicator with the receive half done
        gcx_request_t *barrier = nullptr;
        ASSERT_EQ(GCX_OK, gcx_recv(comm, buf.data(), n, GCX_DT_F32, 1, 5, &req));
        ASSERT_EQ(GCX_OK, gcx_barrier(comm, &barrier));
        EXPECT_NE(GCX_OK, gcx_wait(barrier));
        gcx_request_free(barrier);
    } else if (me == 1) {
        ASSERT_EQ(GCX_OK, gcx_send(comm, buf.data(), n, GCX_DT_F32, 0, 5, &req));
        for (int i = 0; i < 50; ++i) {
            (void)gcx_test(req); // some fragments out, then stop running
        }
        usleep(1000 * 1000);
    } else if (me == victim) {
        usleep(300 * 1000);
        vanish("while rank 1 is half way through its message to rank 0");
    }
    if (req != nullptr) {
        st = gcx_wait(req);
        gcx_request_free(req);
    } else {
        st = gcx_barrier(comm, nullptr); // fails: the victim is gone
    }
    if (st == GCX_OK && me == 1) {
        st = gcx_barrier(comm, nullptr);
    }
    EXPECT_TRUE(me == 0 || st != GCX_OK) << "rank " << me;
    EXPECT_EQ(GCX_OK, gcx_comm_revoke(comm));
    std::vector<int32_t> want;
    for (int r = 0; r < world_size(); ++r) {
        if (r != victim) {
            want.push_back(r);
        }
    }
    EXPECT_EQ(want, shrink_until_healthy(comm));
    gcx_comm_destroy(comm);
}

// Where a rank cut off in a shrink says so to the others of its job.
std::string cut_off_note(int world)
{
    return job_marker(("shrink-cut-off-" + std::to_string(world)).c_str());
}

// One rank dies in collectives; a second one enters the shrink and dies
// while it runs (at a seeded delay); after its shrink returns it takes no
// part in anything, so whether the others counted it or not, they find out
// on the new communicator and shrink again. All end with the same three,
// unless the second died while writing into a survivor's shared-memory
// queue (it is killed at any instruction: its shrink runs on another
// thread), which stops that queue for good (UCX 1.13: a writer claims a
// slot, then fills it). That survivor then hears none of the others: its
// shrink must leave with GCX_ERR_TRANSPORT (seen in 1 of ~150 loaded runs;
// before, it decided alone while the others decided without it, two
// communicators), and the others must get exactly the rest.
TEST(Shrink, RankDiesDuringTheShrink)
{
    ASSERT_GE(world_size(), 4);
    std::mt19937 rng(test_seed());
    const int    first = static_cast<int>(rng() % world_size());
    const int    second = (first + 1 + static_cast<int>(rng() % (world_size() - 1))) %
                       world_size();
    const int    delay_us = static_cast<int>(rng() % 4000);
    if (world_rank() == 0) {
        printf("seed %u: rank %d dies first, rank %d %d us into the shrink\n",
               test_seed(), first, second, delay_us);
    }
    gcx_comm_t *comm = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comm));
    std::vector<float> v(256, 1.0f);
    ASSERT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, v.data(), v.size(),
                                    GCX_DT_F32, GCX_OP_SUM, nullptr));
    // every rank is done with it before anyone dies (a rank that finished
    // early would otherwise see the death, revoke, and fail the others'
    // allreduce with GCX_ERR_REVOKED, as it should)
    ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    if (world_rank() == first) {
        vanish("before an allreduce");
    }
    gcx_status_t st = gcx_allreduce(comm, GCX_IN_PLACE, v.data(), v.size(),
                                    GCX_DT_F32, GCX_OP_SUM, nullptr);
    EXPECT_TRUE(st == GCX_ERR_PEER || st == GCX_ERR_REVOKED) << gcx_strerror(st);
    if (world_rank() == second) {
        std::thread([comm] {
            gcx_comm_t *nc = nullptr;
            (void)gcx_comm_shrink(comm, &nc);
            for (;;) {
                pause(); // takes part in nothing more
            }
        }).detach();
        usleep(static_cast<useconds_t>(delay_us));
        vanish("during the shrink");
    }
    std::vector<int32_t> want;
    for (int r = 0; r < world_size(); ++r) {
        if (r != first && r != second) {
            want.push_back(r);
        }
    }
    bool                 cut_off = false;
    std::vector<int32_t> got     = shrink_until_healthy(comm, &cut_off);
    if (cut_off) {
        printf("rank %d: cut off in the shrink\n", world_rank());
        touch_marker(cut_off_note(world_rank()));
    } else if (got != want) {
        // a live rank is missing only if it was cut off, and it alone
        std::vector<int32_t> missing;
        std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                            std::back_inserter(missing));
        EXPECT_TRUE(std::includes(want.begin(), want.end(), got.begin(),
                                  got.end()));
        ASSERT_EQ(1u, missing.size()) << "members: " << ::testing::PrintToString(got);
        const std::string note = cut_off_note(missing[0]);
        EXPECT_TRUE(wait_for_marker(note, nullptr, 120))
            << "rank " << missing[0] << " is alive and was left out, but "
            << "its shrink did not say it was cut off";
        printf("rank %d: rank %d was cut off; the others shrank without it\n",
               world_rank(), missing[0]);
    }
    gcx_comm_destroy(comm);
}

// A live rank is asked to leave: the others shrink without it (no revoke),
// and the parent still works for all of them, the excluded rank included.
TEST(Shrink, OnRequestExcludesALiveRank)
{
    ASSERT_GE(world_size(), 2);
    const int   leaver = world_size() / 2;
    gcx_comm_t *comm   = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comm));
    if (world_rank() != leaver) {
        gcx_comm_t  *nc = nullptr;
        gcx_status_t st = gcx_comm_shrink_ranks(comm, &leaver, 1, 0, &nc);
        ASSERT_EQ(GCX_OK, st) << gcx_strerror(st);
        ASSERT_NE(nullptr, nc);
        EXPECT_EQ(world_size() - 1, gcx_comm_size(nc));
        EXPECT_EQ(world_rank() - (world_rank() > leaver), gcx_comm_rank(nc));
        std::vector<int32_t> members;
        EXPECT_TRUE(check_shrunk(nc, members));
        std::vector<int32_t> want;
        for (int r = 0; r < world_size(); ++r) {
            if (r != leaver) {
                want.push_back(r);
            }
        }
        EXPECT_EQ(want, members);
        gcx_comm_destroy(nc);
    }
    EXPECT_EQ(GCX_OK, gcx_comm_error(comm));
    for (int op = 0; op < 4; ++op) {
        EXPECT_EQ(GCX_OK, run_op(comm, op, 3, 100, false));
    }
    gcx_comm_destroy(comm);
}

// Every rank but the last waits in a collective the last one never joins;
// the last one revokes: the waits end with GCX_ERR_REVOKED (with
// GCX_TIMEOUT=60, a revoke that did not arrive would end them with
// GCX_ERR_TIMEOUT a minute later), and so does every later operation on
// every rank, while the world they were split from goes on. Then all of
// them shrink it: nobody died, so the new communicator has every rank, in
// the same order, and works.
TEST(Shrink, RevokeFailsPendingAndLaterOperations)
{
    ASSERT_GE(world_size(), 2);
    gcx_comm_t *comm = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comm));
    const int          last = world_size() - 1;
    std::vector<float> v(100, 1.0f);
    if (world_rank() != last) {
        gcx_request_t *req = nullptr;
        ASSERT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, v.data(), v.size(),
                                        GCX_DT_F32, GCX_OP_SUM, &req));
        // past the post before the last rank revokes (the world's barrier
        // is another communicator)
        ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
        EXPECT_EQ(GCX_ERR_REVOKED, gcx_wait(req));
        gcx_request_free(req);
    } else {
        ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
        EXPECT_EQ(GCX_OK, gcx_comm_revoke(comm));
        EXPECT_EQ(GCX_OK, gcx_comm_revoke(comm)); // idempotent
    }
    EXPECT_EQ(GCX_ERR_REVOKED, gcx_comm_error(comm));
    EXPECT_EQ(GCX_ERR_REVOKED, gcx_allreduce(comm, GCX_IN_PLACE, v.data(),
                                             v.size(), GCX_DT_F32, GCX_OP_SUM,
                                             nullptr));
    EXPECT_EQ(GCX_ERR_REVOKED, gcx_barrier(comm, nullptr));
    EXPECT_EQ(GCX_ERR_REVOKED, gcx_progress(comm));
    // the world is untouched by a revoke of its child
    EXPECT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    std::vector<int32_t> ranks(world_size(), world_rank());
    EXPECT_EQ(GCX_OK, gcx_allgather(g_world, GCX_IN_PLACE, ranks.data(), 1,
                                    GCX_DT_I32, nullptr));
    for (int r = 0; r < world_size(); ++r) {
        EXPECT_EQ(r, ranks[r]);
    }
    gcx_comm_t *nc = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_shrink(comm, &nc));
    EXPECT_EQ(world_size(), gcx_comm_size(nc));
    EXPECT_EQ(world_rank(), gcx_comm_rank(nc));
    std::vector<int32_t> members;
    EXPECT_TRUE(check_shrunk(nc, members));
    gcx_comm_destroy(nc);
    gcx_comm_destroy(comm);
}

// A shrink of a healthy communicator that excludes nobody (flags 0): a
// communicator of every rank whose collectives work, the parent untouched.
TEST(Shrink, OfAHealthyCommunicatorKeepsEveryRank)
{
    gcx_comm_t *comm = nullptr, *nc = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comm));
    ASSERT_EQ(GCX_OK, gcx_comm_shrink_ranks(comm, nullptr, 0, 0, &nc));
    EXPECT_EQ(world_size(), gcx_comm_size(nc));
    std::vector<int32_t> members;
    EXPECT_TRUE(check_shrunk(nc, members));
    EXPECT_EQ(GCX_OK, gcx_comm_error(comm));
    EXPECT_EQ(GCX_OK, run_op(comm, 0, 5, 10, false));
    gcx_comm_destroy(nc);
    gcx_comm_destroy(comm);
}

TEST(Shrink, BadArgumentsAreRefused)
{
    gcx_comm_t *nc   = nullptr;
    const int   me   = world_rank();
    const int   out  = world_size();
    const int   two[2] = {(me + 1) % world_size(), (me + 1) % world_size()};
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_revoke(nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_error(nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink(nullptr, &nc));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink(g_world, nullptr));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink_ranks(g_world, nullptr, 1, 0, &nc));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink_ranks(g_world, &me, -1, 0, &nc));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink_ranks(g_world, &me, 1, 0, &nc));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink_ranks(g_world, &out, 1, 0, &nc));
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink_ranks(g_world, nullptr, 0, 8, &nc));
    if (world_size() >= 3) {
        EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_shrink_ranks(g_world, two, 2, 0, &nc));
    }
    EXPECT_EQ(nullptr, nc);
    // nothing was sent: the world still works
    EXPECT_EQ(GCX_OK, gcx_comm_error(g_world));
    EXPECT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
}

} // namespace
