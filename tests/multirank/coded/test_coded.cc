// Coded gather: every round's decoded sum is checked on every rank against
// the serial sum of the partition gradients, which depend on the round, so
// a message of one round folded into another shows as a wrong sum. Random
// straggler delays (GCX_STRAGGLER_MEAN_MS) make messages late, early and
// unneeded; the test checks that these paths were taken at all (so it can
// tell "nothing was late" from "late messages were dropped").
// CodedAbstain.*: gcx_coded_abstain() -- a pipelined (PGC) training loop
// that skips decoded rounds and abstains while a slot is stale, checked
// term by term against the schedule; a round that abstentions make
// undecodable fails at once on every rank; a round with an abstention
// that the rest decode records it in result->abstained.
// CodedFailure.* are in test_coded_failure.cc, the shared helpers in
// coded_util.cc.
// CodedDestroy.*: the root destroys everything while a rank still has to
// pull its decoded sums; that rank must still get them right.
// CodedFlow.*: a rank paused more than GCX_CODED_MAX_LAG rounds behind the
// root is waited for; one paused past GCX_TIMEOUT is counted gone.
#include "../harness.h"
#include "coded_util.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>
namespace {

using namespace coded_test;

void random_stragglers(gcx_code_kind_t kind, int s, int root, int root_not_worker)
{
    std::string s_str = std::to_string(s);
    gcx_comm_t *comm  = make_comm({{"STRAGGLER_MEAN_MS", "3"}, {"STRAGGLER_SEED", "7"}});
    ASSERT_NE(nullptr, comm);
    RoundRun run;
    run_rounds(comm, kind, s, root, root_not_worker, run);
    gcx_comm_destroy(comm);
    EXPECT_EQ(0u, sum_over_world(static_cast<uint64_t>(run.wrong)));
    // the late / unneeded / skip paths were exercised somewhere
    EXPECT_GT(sum_over_world(run.late), 0u);
}

TEST(Coded, FrRandomStragglers)
{
    int s = fr_s(world_size());
    if (s == 0) {
        GTEST_SKIP() << "no FR code with s >= 1 for " << world_size() << " ranks";
    }
    random_stragglers(GCX_CODE_FR, s, 0, 0);
}

// An FR code whose s + 1 does not divide n (groups of s + 1 and more):
// every round's sum against the serial sum, stragglers random.
TEST(Coded, FrUnevenGroupsRandomStragglers)
{
    int s = fr_uneven_s(world_size());
    if (s == 0) {
        GTEST_SKIP() << "every s + 1 divides " << world_size() << " ranks";
    }
    random_stragglers(GCX_CODE_FR, s, 0, 0);
}

TEST(Coded, CrRandomStragglers)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    random_stragglers(GCX_CODE_CR, 1, world_size() - 1, 0);
}

TEST(Coded, CrTwoStragglers)
{
    if (world_size() < 4) {
        GTEST_SKIP() << "needs 4 ranks";
    }
    random_stragglers(GCX_CODE_CR, 2, 1, 0);
}

TEST(Coded, CrRootNotWorker)
{
    if (world_size() < 3) {
        GTEST_SKIP() << "needs 3 ranks";
    }
    random_stragglers(GCX_CODE_CR, 1, 0, 1);
}

// --- abstention ------------------------------------------------------------

// A PGC-FR training loop under random stragglers. The gradient of partition
// j computed at step t is grad(j, t, i), so a slot left stale by a skipped
// step would show in the decoded sum. Workers keep slot_steps, skip the
// compute when the round is already decoded, and abstain while their
// message would read a stale slot. Every round's sum is checked on every
// rank against the FR schedule (partition j at staleness (t - j mod P) mod
// P), and on the root against the terms gcx_pgc_decode() reports.
void pgc_fr_stragglers(gcx_coded_algo_t algo)
{
    int size = world_size(), rank = world_rank();
    int s    = fr_s(size);
    if (s == 0) {
        GTEST_SKIP() << "no FR code with s >= 1 for " << size << " ranks";
    }
    gcx_comm_t *comm = make_comm({{"STRAGGLER_MEAN_MS", "3"}, {"STRAGGLER_SEED", "7"}});
    ASSERT_NE(nullptr, comm);
    gcx_code_params_t cp = {};
    cp.kind              = GCX_CODE_FR;
    cp.n                 = size;
    cp.s                 = s;
    gcx_code_t *code     = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    gcx_pgc_t *pgc = nullptr;
    ASSERT_EQ(GCX_OK, gcx_pgc_create(code, &pgc));
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 1000;
    params.root               = 0;
    params.algo               = algo;
    gcx_coded_t *coded        = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &coded));

    const int      rounds = 200;
    const size_t   count  = params.count;
    const int      P      = gcx_pgc_period(pgc);
    std::vector<std::vector<float>> slot(P, std::vector<float>(count));
    std::vector<const float *>      slot_ptr(P);
    for (int l = 0; l < P; ++l) {
        slot_ptr[l] = slot[l].data();
    }
    std::vector<int64_t>        slot_steps(P, -1);
    std::vector<double>         coeffs(P), a(size);
    std::vector<gcx_pgc_term_t> terms(gcx_pgc_max_terms(pgc));
    std::vector<float>          msg(count), sum(count);
    int                         wrong = 0, root_saw_abstained = 0;

    for (int r = 0; r < rounds; ++r) {
        int ready = 0, abstain = 1;
        ASSERT_EQ(GCX_OK, gcx_coded_ready(coded, &ready));
        if (!ready) { // compute this step's slot, at "this step's weights"
            int l = -1, j = -1, valid = 0;
            ASSERT_EQ(GCX_OK, gcx_pgc_compute(pgc, rank, r, &l, &j));
            for (size_t i = 0; i < count; ++i) {
                slot[l][i] = grad(j, r, i);
            }
            slot_steps[l] = r;
            ASSERT_EQ(GCX_OK, gcx_pgc_message_valid(pgc, rank, r, slot_steps.data(), &valid));
            if (valid) {
                ASSERT_EQ(GCX_OK, gcx_pgc_coeffs(pgc, rank, r, coeffs.data()));
                ASSERT_EQ(GCX_OK, gcx_code_encode(P, coeffs.data(), slot_ptr.data(), count,
                                                  msg.data()));
                abstain = 0;
            }
        }
        Result       res(size);
        gcx_status_t st = abstain ? gcx_coded_abstain(coded, sum.data(), res.get(), nullptr)
                                  : gcx_coded_gather(coded, msg.data(), sum.data(), res.get(),
                                                     nullptr);
        ASSERT_EQ(GCX_OK, st) << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res->round);
        ASSERT_NE(0u, res.used());
        if (algo == GCX_CODED_ALGO_STAR) {
            // the root decodes from what arrived there; master-less, used
            // is the union over the chunks, arrived this rank's chunk's
            ASSERT_EQ(res.used(), res.used() & res.arrived());
        }
        ASSERT_EQ(0u, res.arrived() & res.abstained()) << "round " << r;
        ASSERT_EQ(0u, res.used() & res.abstained()) << "round " << r;
        if (ready) {
            EXPECT_EQ(1, res->skipped) << "round " << r << ": ready but not skipped";
        }
        root_saw_abstained += res.abstained() != 0;
        // the FR schedule: partition j at staleness (t - j mod P) mod P
        double err = 0;
        for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int j = 0; j < size; ++j) {
                if (r >= j % P) {
                    want += grad(j, r - (r - j % P) % P, i);
                }
            }
            err = std::max(err, std::fabs(want - sum[i]));
        }
        if (rank == 0) { // and what the decoder says was summed
            gcx_pgc_info_t info;
            ASSERT_EQ(GCX_OK, gcx_pgc_decode(pgc, r, res->used, a.data(), terms.data(), &info));
            EXPECT_EQ(r >= P - 1 ? 1 : 0, info.exact) << "round " << r;
            for (size_t i = 0; i < count; ++i) {
                double want = 0;
                for (int q = 0; q < info.nterms; ++q) {
                    want += terms[q].weight *
                            grad(terms[q].partition, r - terms[q].staleness, i);
                }
                err = std::max(err, std::fabs(want - sum[i]));
            }
        }
        if (err > 0) {
            ++wrong;
            ADD_FAILURE() << "round " << r << ": decoded sum off by " << err << " (used 0x"
                          << std::hex << res.used() << ", abstained 0x" << res.abstained()
                          << ")";
        }
    }
    gcx_coded_stats_t st = {};
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &st));
    EXPECT_EQ(static_cast<uint64_t>(rounds), st.rounds);
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr)); // lagging ranks still pull sums
    printf("rank %d: %d rounds, skipped %llu abstained %llu late %llu early %llu, "
           "%d rounds with abstentions recorded, %d wrong\n",
           rank, rounds, (unsigned long long)st.skipped, (unsigned long long)st.abstained,
           (unsigned long long)st.late_dropped, (unsigned long long)st.early,
           root_saw_abstained, wrong);
    gcx_coded_destroy(coded);
    gcx_pgc_destroy(pgc);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
    EXPECT_EQ(0u, sum_over_world(static_cast<uint64_t>(wrong)));
    // not vacuous: some rounds were skipped, and (star) some abstained
    // from. Master-less, a rank behind finds the next rounds decoded
    // without it (its chunks are served ahead of its calls) and skips
    // them too, so it seldom has to abstain from an undecoded one: the
    // abstention paths are CodedAllreduce.Abstention*'s
    EXPECT_GT(sum_over_world(st.skipped), 0u);
    if (algo == GCX_CODED_ALGO_STAR) {
        EXPECT_GT(sum_over_world(st.abstained), 0u);
    }
}

TEST(CodedAbstain, PgcFrStragglers)
{
    pgc_fr_stragglers(GCX_CODED_ALGO_STAR);
}

// The same through the master-less coded allreduce: every rank decodes a
// chunk, abstentions go to each chunk's owner as VOID messages.
TEST(CodedAbstain, PgcFrStragglersMasterless)
{
    pgc_fr_stragglers(GCX_CODED_ALGO_MASTERLESS);
}

// FR n = 4, s = 1 (groups {0, 1}, {2, 3}); both workers of one group
// abstain in round 5: every rank fails with GCX_ERR_UNDECODABLE at once,
// not after GCX_TIMEOUT (run with GCX_TIMEOUT far above the test's own
// timeout). The root fails round 5; a rank that lags behind (its group-mate
// carried rounds 3 and 4) fails the round it is in, since the root's
// failure fails the communicator.
void abstain_undecodable(int group)
{
    ASSERT_EQ(4, world_size());
    int         rank = world_rank();
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    FrGather fr;
    ASSERT_NO_FATAL_FAILURE(fr_create(comm, 4, 1, 4096, fr));
    gcx_coded_t       *coded = fr.coded;
    std::vector<float> msg(4096), sum(4096);
    gcx_status_t       status = GCX_OK;
    double             took   = 0;
    int                r;
    for (r = 0; r < 10; ++r) {
        bool abstain = r == 5 && rank / 2 == group;
        encode(fr.code, rank, r, msg.size(), msg);
        auto t0 = std::chrono::steady_clock::now();
        status  = abstain ? gcx_coded_abstain(coded, sum.data(), nullptr, nullptr)
                          : gcx_coded_gather(coded, msg.data(), sum.data(), nullptr, nullptr);
        took    = seconds_since(t0);
        if (status != GCX_OK) {
            break;
        }
    }
    printf("rank %d: round %d failed with '%s' after %.3f s\n", rank, r, gcx_strerror(status),
           took);
    if (rank == 0) {
        EXPECT_EQ(5, r) << "the round both workers of group " << group << " abstain from";
    } else {
        EXPECT_LE(r, 5);
    }
    EXPECT_EQ(GCX_ERR_UNDECODABLE, status) << gcx_strerror(status);
    EXPECT_LT(took, 10.0) << "waited for the timeout instead of failing at once";
    // and the next call says so at once
    EXPECT_EQ(status, gcx_coded_gather(coded, msg.data(), sum.data(), nullptr, nullptr));
    fr_release(fr);
    gcx_comm_destroy(comm);
}

TEST(CodedAbstain, UndecodableGroupOfWorkers)
{
    abstain_undecodable(1);
}

TEST(CodedAbstain, UndecodableGroupOfRoot)
{
    abstain_undecodable(0); // the root abstains locally
}

// FR n = 4, s = 1, root 0: a worker abstains and the rest decode; the
// round completes with its bit in result->abstained (never in arrived or
// used) and the exact sum, on every rank. Its group-mate sends only once
// the abstention went out (a marker file the abstainer leaves after
// posting it), so it reaches the root first (one shared-memory queue, in
// order; staged messages are taken in the order they came); in round 11
// the root is held back too, so the void message is staged. (Before, the
// group-mate slept 500 ms: an abstainer descheduled longer on a loaded
// box lost its bit, 1 run in ~40.)
TEST(CodedAbstain, DecodableWithoutTheAbstainer)
{
    ASSERT_EQ(4, world_size());
    int         rank = world_rank();
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    FrGather fr;
    ASSERT_NO_FATAL_FAILURE(fr_create(comm, 4, 1, 4096, fr));
    gcx_coded_t       *coded = fr.coded;
    std::vector<float> msg(4096), sum(4096);
    // round -> the rank that abstains (rank 3, the root blocking, rank 3
    // with the root held back)
    auto abstainer = [](int r) { return r == 3 ? 3 : r == 7 ? 0 : r == 11 ? 3 : -1; };
    for (int r = 0; r < 16; ++r) {
        int who = abstainer(r);
        encode(fr.code, rank, r, msg.size(), msg);
        const std::string went = job_marker(("void-" + std::to_string(r)).c_str());
        if (who >= 0 && rank == (who ^ 1) && who != 0) { // the group-mate
            ASSERT_TRUE(wait_for_marker(went, comm)) << "round " << r;
        }
        if (r == 11 && rank == 0) {
            // the root enters late but keeps progressing (its round-10 sends
            // need it): rank 3's void message comes in between and is staged
            auto t0 = std::chrono::steady_clock::now();
            while (seconds_since(t0) < 0.25) {
                int ready = 0;
                ASSERT_EQ(GCX_OK, gcx_coded_ready(coded, &ready));
            }
        }
        Result       res(4);
        gcx_status_t st;
        if (rank == who && who != 0) { // through a request: posted, then the marker
            gcx_request_t *req = nullptr;
            ASSERT_EQ(GCX_OK, gcx_coded_abstain(coded, sum.data(), res.get(), &req));
            ASSERT_NE(nullptr, req);
            touch_marker(went);
            st = gcx_wait(req);
            gcx_request_free(req);
        } else if (rank == who) {
            st = gcx_coded_abstain(coded, sum.data(), res.get(), nullptr);
        } else {
            st = gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr);
        }
        ASSERT_EQ(GCX_OK, st) << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res->round);
        if (rank == who) { // held-back group-mate: the round waits for it
            EXPECT_EQ(0, res->skipped) << "round " << r;
        }
        uint64_t bit = who >= 0 ? 1ull << who : 0;
        EXPECT_EQ(bit, res.abstained()) << "round " << r;
        EXPECT_EQ(0u, res.arrived() & bit) << "round " << r;
        EXPECT_EQ(0u, res.used() & bit) << "round " << r;
        if (who >= 0) {
            EXPECT_NE(0u, res.used() & (1ull << (who ^ 1))) << "round " << r << ": the group-mate";
            EXPECT_TRUE(std::isnan(res->arrival[who]));
        }
        for (size_t i = 0; i < msg.size(); ++i) {
            double want = 0;
            for (int j = 0; j < 4; ++j) {
                want += grad(j, r, i);
            }
            ASSERT_EQ(want, sum[i]) << "round " << r << " element " << i << " skipped "
                                    << res->skipped << " used 0x" << std::hex << res.used()
                                    << " arrived 0x" << res.arrived();
        }
    }
    gcx_coded_stats_t st = {};
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &st));
    EXPECT_EQ(16u, st.rounds);
    EXPECT_EQ(rank == 3 ? 2u : rank == 0 ? 1u : 0u, st.abstained);
    if (rank == 0) {
        EXPECT_GT(st.early, 0u) << "round 11's void message was not staged";
    }
    // not needed since the transport keeps abandoned result memory (see
    // CodedDestroy.*); kept so this test stays about abstention
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr));
    fr_release(fr);
    gcx_comm_destroy(comm);
}

} // namespace

// --- destroy while ranks lag ---------------------------------------------------

// The root runs its rounds and destroys the object and the communicator at
// once (no barrier) while the last rank is still asleep: that rank then
// pulls every decoded sum (rendezvous) out of the root's result slots after
// the root let go of them. As long as the root process lives, those sums
// must still arrive intact (gcx_coded_destroy() hands the slots to the
// transport, which keeps their memory until the peer is done with it); a
// GCX_OK round with a wrong sum is the failure this test is about. The
// root meanwhile allocates and scribbles over fresh memory, so a slot that
// was freed too early would likely show as a wrong sum.
// comm: the default GCX_TIMEOUT, or 0.1 s (a short close grace); either
// way the root destroys its UCP worker before the rank pulls (the flush
// does not wait for a rendezvous peer).
void root_destroys_while_ranks_lag(gcx_comm_t *comm)
{
    ASSERT_EQ(4, world_size());
    const int    rounds = 8;
    const size_t count  = 64 * 1024; // rendezvous
    int          rank   = world_rank();
    ASSERT_NE(nullptr, comm);
    FrGather fr; // groups {0,1} {2,3}: rank 2 covers rank 3
    ASSERT_NO_FATAL_FAILURE(fr_create(comm, 4, 1, count, fr));
    gcx_coded_t *coded = fr.coded;
    std::vector<float> msg(count), sum(count);
    int                wrong = 0, failed = 0;
    for (int r = 0; r < rounds; ++r) {
        if (r == 1 && rank == 3) { // round 0 together: connections are up
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        encode(fr.code, rank, r, count, msg);
        Result       res(4);
        gcx_status_t st = gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr);
        if (st != GCX_OK) {
            ++failed;
            ADD_FAILURE() << "rank " << rank << " round " << r << ": " << gcx_strerror(st);
            break;
        }
        size_t bad = wrong_in_sum_of_4(sum, r);
        if (bad > 0) {
            ++wrong;
            ADD_FAILURE() << "rank " << rank << " round " << r << ": GCX_OK with " << bad
                          << " wrong elements of " << count << " (skipped " << res->skipped
                          << ")";
        }
    }
    gcx_coded_stats_t stats = {};
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &stats));
    printf("rank %d: %d rounds, skipped %llu early %llu, %d wrong, %d failed\n", rank, rounds,
           (unsigned long long)stats.skipped, (unsigned long long)stats.early, wrong, failed);
    fr_release(fr); // the root: rank 3 has not pulled anything yet
    gcx_comm_destroy(comm);
    std::vector<std::vector<float>> scribble;
    if (rank == 0) { // reuse the memory a freed slot would have given back
        for (int k = 0; k < 2 * rounds; ++k) {
            scribble.emplace_back(count, NAN);
        }
    }
    // keep every process alive until the lagging rank is done
    EXPECT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
}

TEST(CodedDestroy, RootDestroysWhileRanksLag)
{
    root_destroys_while_ranks_lag(make_comm({}));
}

// The same with a short close grace on the root.
TEST(CodedDestroy, RootClosesBeforeRanksPull)
{
    root_destroys_while_ranks_lag(make_comm({{"TIMEOUT", "0.1"}}));
}

// --- flow control of the results ---------------------------------------------

namespace {

// Rank 3 stops calling gcx for @p pause_ms after round 1 (descheduled,
// paused by a debugger, a long garbage collection) while ranks 0..2 go on:
// FR groups {0,1} {2,3}, so the root decodes every round without it and
// runs ahead, its decoded sums (rendezvous) waiting in the root's result
// slots. comm: GCX_CODED_MAX_LAG=4. Every GCX_OK round on every rank is
// checked against the serial sum; returns the root's stats.gone (0
// elsewhere) and, through @p failed_p, rank 3's first failed round (-1:
// none).
uint64_t run_with_a_paused_rank(gcx_comm_t *comm, int pause_ms, int rounds, int *failed_p)
{
    const size_t count = 64 * 1024; // rendezvous: a result stays in flight
    int          rank  = world_rank();
    uint64_t     gone  = 0;
    *failed_p          = -1;
    EXPECT_EQ(4, world_size());
    EXPECT_NE(nullptr, comm);
    if (world_size() != 4 || comm == nullptr) {
        return ~0ull;
    }
    FrGather fr;
    fr_create(comm, 4, 1, count, fr);
    EXPECT_NE(nullptr, fr.coded);
    if (fr.coded == nullptr) {
        return ~0ull;
    }
    std::vector<float> msg(count), sum(count);
    for (int r = 0; r < rounds; ++r) {
        if (r == 2 && rank == 3) { // rounds 0, 1 together: connections are up
            std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        }
        encode(fr.code, rank, r, count, msg);
        Result       res(4);
        gcx_status_t st = gcx_coded_gather(fr.coded, msg.data(), sum.data(), res.get(), nullptr);
        if (st != GCX_OK) {
            *failed_p = r;
            printf("rank %d: round %d failed: %s\n", rank, r, gcx_strerror(st));
            break;
        }
        EXPECT_EQ(0u, wrong_in_sum_of_4(sum, r)) << "rank " << rank << " round " << r;
    }
    if (rank == 0) {
        Stats stats(4);
        EXPECT_EQ(GCX_OK, gcx_coded_stats(fr.coded, stats.get()));
        gone = stats.gone();
    }
    // every process stays until rank 3 is done pulling from the root's slots
    EXPECT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    fr_release(fr);
    gcx_comm_destroy(comm);
    return gone;
}

} // namespace

// A rank that is alive but paused far behind the root (more rounds than
// GCX_CODED_MAX_LAG) is waited for, not counted gone: once it holds that
// many results the root's next round waits until it takes one, and every
// rank gets every round right. (Before: the root counted it gone at the
// limit, and the rank, once awake, got no more results -- a live rank lost
// to a pause of a few hundred ms, as a loaded CI box produced in gcx-train.)
TEST(CodedFlow, APausedRankIsWaitedForNotCountedGone)
{
    int      failed = -1;
    uint64_t gone   = run_with_a_paused_rank(
        make_comm({{"CODED_MAX_LAG", "4"}, {"TIMEOUT", "20"}}), 600, 24, &failed);
    EXPECT_EQ(-1, failed) << "rank " << world_rank();
    EXPECT_EQ(0u, gone);
}

// A rank that takes none of its GCX_CODED_MAX_LAG results within the root's
// GCX_TIMEOUT is counted gone (a stopped process must not stall the others
// for good): ranks 0..2 finish every round right; rank 3, awake again after
// its results were abandoned, fails a round (never GCX_OK with a wrong sum).
TEST(CodedFlow, ARankPausedPastTheTimeoutIsCountedGone)
{
    int      failed = -1;
    uint64_t gone   = run_with_a_paused_rank(
        make_comm({{"CODED_MAX_LAG", "4"}, {"TIMEOUT", "2"}}), 5000, 16, &failed);
    if (world_rank() == 0) {
        EXPECT_EQ(1ull << 3, gone);
    }
    if (world_rank() == 3) {
        EXPECT_GE(failed, 2);
    } else {
        EXPECT_EQ(-1, failed) << "rank " << world_rank();
    }
}
