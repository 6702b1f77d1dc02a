// CodedFailure.*: ranks die mid-run; the survivors fail the first round
// that cannot be decoded, a rank far behind still completes the rounds
// decoded before it, a worker lost mid-transfer is replaced by a
// contribution the root kept, and with lost_rounds a round that
// abstentions leave undecodable is lost, not failed. Run under gcxrun
// --keep-going (see meson.build for the transports and GCX_TIMEOUT).
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

TEST(CodedFailure, OneRankDies)
{
    ASSERT_GE(world_size(), 3);
    // GCX_CODED_MAX_LAG above the ~150 rounds the dead rank misses: its
    // results never pile up to the limit, so the root never waits the
    // round's GCX_TIMEOUT for it to take one (flow control, star_root.c:
    // a dead rank whose connection loss the transport does not report is
    // counted gone only then); what this test is about is that nobody
    // waits for the dead worker's contribution
    gcx_comm_t *comm = make_comm({{"CODED_MAX_LAG", "256"}});
    ASSERT_NE(nullptr, comm);
    RoundRun run;
    run.count = 64 * 1024; // large enough for rendezvous
    run_rounds(comm, failure_kind(), 1, 0, 0, run, world_size() - 1, 50);
    EXPECT_EQ(0, run.wrong);
    gcx_comm_destroy(comm);
}

// The root (rank 0, a worker too) dies inside round 20: the other ranks
// get GCX_ERR_PEER from the first round whose result can no longer come (a
// rank that lags behind loses the results still in flight when the root
// exits, so that round may be before 20) as soon as the connection is
// reported lost (run with GCX_TIMEOUT=300 under a
// 60 s test timeout: waiting for the timeout fails the test).
TEST(CodedFailure, RootDies)
{
    ASSERT_GE(world_size(), 3);
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    int          rank  = world_rank();
    size_t       count = 256; // eager: a worker's send completes at once
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
    ASSERT_NO_FATAL_FAILURE(make_coded(comm, GCX_CODE_CR, count, &code, &coded));
    std::vector<float> msg(count), sum(count);
    gcx_status_t       status = GCX_OK;
    int                r;
    for (r = 0; r < 200 && status == GCX_OK; ++r) {
        encode(code, gcx_coded_worker(coded, rank), r, count, msg);
        Result res(code);
        if (rank == 0 && r == 20) {
            // enter round 20 and die inside it: the workers' contributions
            // have been sent, their results will never come
            gcx_request_t *req = nullptr;
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), &req));
            usleep(200 * 1000);
            printf("rank 0 (the root): exiting inside round %d\n", r);
            fflush(stdout);
            _exit(0);
        }
        status = gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr);
    }
    printf("rank %d: round %d: %s\n", rank, r - 1, gcx_strerror(status));
    EXPECT_EQ(GCX_ERR_PEER, status);
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

TEST(CodedFailure, TwoRanksDie)
{
    ASSERT_GE(world_size(), 4);
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    int          size = world_size(), rank = world_rank();
    size_t       count = 4096;
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
    ASSERT_NO_FATAL_FAILURE(make_coded(comm, failure_kind(), count, &code, &coded));
    std::vector<float> msg(count, 1.0f), sum(count);
    gcx_status_t       status = GCX_OK;
    int                r;
    for (r = 0; r < 200; ++r) {
        if (r == 20 && rank >= size - 2) {
            printf("rank %d: exiting before round %d\n", rank, r);
            fflush(stdout);
            _exit(0);
        }
        status = gcx_coded_gather(coded, msg.data(), sum.data(), nullptr, nullptr);
        if (status != GCX_OK) {
            break;
        }
    }
    printf("rank %d: round %d failed with '%s'\n", rank, r, gcx_strerror(status));
    EXPECT_EQ(20, r) << "rounds after the deaths must fail";
    EXPECT_TRUE(status == GCX_ERR_UNDECODABLE || status == GCX_ERR_TIMEOUT ||
                status == GCX_ERR_PEER)
        << gcx_strerror(status);
    // and the next call says so at once
    EXPECT_EQ(status, gcx_coded_gather(coded, msg.data(), sum.data(), nullptr, nullptr));
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// Rank 1 stops before round 10 until the root has decoded rounds 10..19
// without it (FR groups {0,1} {2,3}: rank 0 covers it) and has failed
// round 20, when ranks 2 and 3 are dead. The results of 10..19 and the
// root's ERROR are all waiting when rank 1 goes on: it must complete
// rounds 10..19 with the right sums and fail at round 20, not at the round
// it happens to be in when the ERROR is read.
TEST(CodedFailure, LaggingRank)
{
    ASSERT_EQ(4, world_size());
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    const size_t count = 256;
    int          rank  = world_rank();
    std::string  root_failed = job_marker("root-failed"), lagger_done = job_marker("lagger-done");
    FrGather     fr;
    ASSERT_NO_FATAL_FAILURE(fr_create(comm, 4, 1, count, fr));
    std::vector<float> msg(count), sum(count);
    gcx_status_t       status = GCX_OK;
    int                r;
    for (r = 0; r < 40; ++r) {
        if (r == 20 && rank >= 2) {
            _exit(0);
        }
        if (r == 10 && rank == 1) {
            ASSERT_TRUE(wait_for_marker(root_failed, nullptr)) << "the root never failed";
        }
        encode(fr.code, rank, r, count, msg);
        status = gcx_coded_gather(fr.coded, msg.data(), sum.data(), nullptr, nullptr);
        if (status != GCX_OK) {
            break;
        }
        size_t bad = wrong_in_sum_of_4(sum, r);
        EXPECT_EQ(0u, bad) << "rank " << rank << " round " << r;
    }
    printf("rank %d: round %d failed with '%s'\n", rank, r, gcx_strerror(status));
    EXPECT_EQ(20, r) << "rounds before the failed one must complete, that one must fail";
    EXPECT_NE(GCX_OK, status);
    if (rank == 0) { // keep the connection up until rank 1 has read everything
        touch_marker(root_failed);
        EXPECT_TRUE(wait_for_marker(lagger_done, comm)) << "rank 1 never finished";
        unlink(root_failed.c_str());
        unlink(lagger_done.c_str());
    } else {
        touch_marker(lagger_done);
    }
    fr_release(fr);
    gcx_comm_destroy(comm);
}

// Worker 3's contribution to round 5 is taken by the root (its header came
// first in its FR group {2,3}; for CR, it made the set decodable), then
// worker 3 stops progressing before its payload moved: it posts the
// rendezvous send and never progresses again. Worker 2's contribution comes
// after 3's was taken, so the root did not need it when it came. The ranks
// meet through marker files so that the order is the one described,
// whatever the load.
// Dies: worker 3 exits. The root must count the lost transfer, take worker
// 2's contribution instead and decode round 5 right; rounds 6..19 go on
// without rank 3.
// MateAbstains: worker 3 exits and worker 2 abstains from round 5 instead
// (after worker 3's contribution was taken, so the round looked decodable
// when it came); with lost_rounds, round 5 is then lost on every survivor.
// Stalls: worker 3 is alive but does not progress (stopped, starved) until
// the root is done with round 5: the root gives its payload up at
// GCX_TIMEOUT, decodes round 5 from worker 2's kept contribution (before:
// every rank failed with "timed out", perf/chaos runs 86 and 98), and
// worker 3, not counted gone, gets round 5's sum once it progresses again;
// rounds 6..19 go on with all four. The root enters round 5 only after
// worker 3 posted, so worker 3's own deadline (GCX_TIMEOUT + the verdict
// grace) is not reached before the root's verdict comes.
enum class Taken { Dies, MateAbstains, Stalls };

void taken_worker(gcx_code_kind_t kind, Taken how)
{
    ASSERT_EQ(4, world_size());
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    const size_t count = 256 * 1024; // 1 MB: rendezvous
    const int    die_round = 5;
    const bool   mate_abstains = how == Taken::MateAbstains;
    int          rank  = world_rank();
    std::string  posted = job_marker("taken-posted"), sent2 = job_marker("taken-sent2");
    std::string  root_done = job_marker("taken-root-done"), woke = job_marker("taken-woke");
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
    ASSERT_NO_FATAL_FAILURE(make_coded(comm, kind, count, &code, &coded, mate_abstains ? 1 : 0));
    std::vector<float> msg(count), sum(count);
    double             tol = kind == GCX_CODE_FR ? 0.0 : 1e-3 * 11 * 4;
    for (int r = 0; r < 20; ++r) {
        encode(code, gcx_coded_worker(coded, rank), r, count, msg);
        Result res(code);
        if (r == die_round && rank == 3) {
            gcx_request_t *req = nullptr;
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), &req));
            touch_marker(posted); // the header is on its way
            if (how == Taken::Stalls) {
                // no progress until the root decoded round 5 without us
                EXPECT_TRUE(wait_for_marker(root_done, nullptr)) << "the root never finished";
                unlink(root_done.c_str());
                ASSERT_EQ(GCX_OK, gcx_wait(req)) << "round " << r;
                gcx_request_free(req);
                touch_marker(woke);
            } else {
                EXPECT_TRUE(wait_for_marker(sent2, nullptr)) << "rank 2 never sent";
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                unlink(posted.c_str());
                unlink(sent2.c_str());
                printf("rank 3: exiting with its round %d payload unsent\n", r);
                fflush(stdout);
                _exit(0);
            }
        } else if (r == die_round && rank == 2) {
            // the root must have taken rank 3's header first: give it time
            ASSERT_TRUE(wait_for_marker(posted, nullptr)) << "rank 3 never posted";
            std::this_thread::sleep_for(std::chrono::milliseconds(600));
            gcx_request_t *req = nullptr;
            if (mate_abstains) {
                ASSERT_EQ(GCX_OK, gcx_coded_abstain(coded, sum.data(), res.get(), &req));
            } else {
                ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), &req));
            }
            touch_marker(sent2);
            ASSERT_EQ(GCX_OK, gcx_wait(req)) << "round " << r;
            gcx_request_free(req);
        } else if (r == die_round && rank == 0 && how == Taken::Stalls) {
            ASSERT_TRUE(wait_for_marker(posted, comm)) << "rank 3 never posted";
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr))
                << "round " << r;
            touch_marker(root_done);
            // round 6 on only once rank 3 has its sum: results to a rank that
            // does not progress would count it gone (GCX_CODED_MAX_LAG)
            EXPECT_TRUE(wait_for_marker(woke, comm)) << "rank 3 never woke";
            unlink(woke.c_str());
            unlink(posted.c_str());
            unlink(sent2.c_str());
        } else {
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr))
                << "rank " << rank << " round " << r;
        }
        if (mate_abstains && r == die_round) {
            EXPECT_EQ(1, res->lost) << "rank " << rank << ": round " << r << " must be lost";
            continue;
        }
        EXPECT_EQ(0, res->lost) << "rank " << rank << " round " << r;
        EXPECT_LE(max_err_from_serial(sum, 4, r), tol)
            << "rank " << rank << " round " << r << " used 0x" << std::hex << res.used();
        if (r == die_round) {
            EXPECT_FALSE(gcx_wset_has(res->used, 3))
                << "rank " << rank << ": round " << r << " used worker 3's payload";
        }
    }
    Stats st(code);
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, st.get()));
    printf("rank %d: 20 rounds, lost %llu gone 0x%llx\n", rank,
           (unsigned long long)st->transfers_lost, (unsigned long long)st.gone());
    if (rank == 0) {
        EXPECT_EQ(1u, st->transfers_lost) << "the root never took rank 3's contribution";
        EXPECT_EQ(how == Taken::Stalls ? 0u : 1u << 3, st.gone());
    }
    root_waits_for_survivors(comm, 0, how == Taken::Stalls ? std::vector<int>{} : std::vector<int>{3},
                             "taken-done");
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

TEST(CodedFailure, TakenWorkerDiesFr)
{
    taken_worker(GCX_CODE_FR, Taken::Dies);
}

TEST(CodedFailure, TakenWorkerDiesCr)
{
    taken_worker(GCX_CODE_CR, Taken::Dies);
}

TEST(CodedFailure, TakenWorkerDiesMateAbstains)
{
    taken_worker(GCX_CODE_FR, Taken::MateAbstains);
}

TEST(CodedFailure, TakenWorkerStallsFr)
{
    taken_worker(GCX_CODE_FR, Taken::Stalls);
}

TEST(CodedFailure, TakenWorkerStallsCr)
{
    taken_worker(GCX_CODE_CR, Taken::Stalls);
}

// lost_rounds, what a pipelined-coding run meets when a worker dies: FR
// n = 4, s = 1, groups {0,1} {2,3}; rank 3 exits before round 5 and its
// group-mate, rank 2, abstains from round 5 (its message would read a
// skipped slot). The workers not gone could decode a round, so round 5
// completes on every survivor as lost (result.lost, recvbuf untouched)
// instead of failing the communicator, and rounds 6..11 decode from rank
// 2. Without lost_rounds the same round fails (GCX_ERR_UNDECODABLE): see
// CodedAbstain.UndecodableGroupOfWorkers.
TEST(CodedFailure, LostRoundGoesOn)
{
    ASSERT_EQ(4, world_size());
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    const size_t count = 4096;
    int          rank  = world_rank();
    std::string  gone  = job_marker("lost-gone");
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
    ASSERT_NO_FATAL_FAILURE(make_coded(comm, GCX_CODE_FR, count, &code, &coded, 1));
    std::vector<float> msg(count), sum(count);
    EXPECT_EQ(GCX_ERR_INVALID, gcx_coded_gather(coded, msg.data(), sum.data(), nullptr, nullptr))
        << "lost_rounds needs a result";
    for (int r = 0; r < 12; ++r) {
        if (r == 5 && rank == 3) {
            touch_marker(gone);
            printf("rank 3: exiting before round %d\n", r);
            fflush(stdout);
            _exit(0);
        }
        encode(code, rank, r, count, msg);
        std::fill(sum.begin(), sum.end(), -12345.0f);
        Result res(code);
        if (r == 5 && rank == 2) {
            // abstain only once rank 3 is gone for the root too
            ASSERT_TRUE(wait_for_marker(gone, comm));
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            ASSERT_EQ(GCX_OK, gcx_coded_abstain(coded, sum.data(), res.get(), nullptr));
        } else {
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr))
                << "rank " << rank << " round " << r;
        }
        if (r == 5) {
            EXPECT_EQ(1, res->lost) << "rank " << rank;
            EXPECT_EQ(5u, res->round);
            EXPECT_EQ(-12345.0f, sum[0]) << "a lost round must not write recvbuf";
            EXPECT_EQ(-12345.0f, sum[count - 1]);
        } else {
            EXPECT_EQ(0, res->lost) << "rank " << rank << " round " << r;
            EXPECT_EQ(0u, wrong_in_sum_of_4(sum, r)) << "rank " << rank << " round " << r;
        }
    }
    Stats st(code);
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, st.get()));
    EXPECT_EQ(1u, st->rounds_lost);
    EXPECT_EQ(12u, st->rounds);
    if (rank == 0) {
        EXPECT_EQ(1u << 3, st.gone());
        unlink(gone.c_str());
    }
    root_waits_for_survivors(comm, 0, {3}, "lost-done");
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// lost_rounds, what a pipelined-coding run meets when a worker is stopped
// (SIGSTOP, a starved CPU, a slow link) while another abstains: FR n = 4,
// s = 1, groups {0,1} {2,3}; in round 5 rank 3 abstains and rank 2, alive,
// does not come within GCX_TIMEOUT (it waits for rank 1 to be done with
// round 5). The round could still be decoded if rank 2 came, so it is not
// lost at once; at GCX_TIMEOUT it is lost on every rank (before: it failed
// every rank with GCX_ERR_UNDECODABLE, the chaos run perf/chaos run 7),
// rank 2 enters it decided (skipped, lost) and rounds 6..11 decode with
// everyone. Nobody is counted gone. Ranks 0, 1 and 3 enter round 5 in any
// order: a rank that comes before the root waits 2 s past GCX_TIMEOUT for
// the root's verdict (GCX_CODED_VERDICT_GRACE).
TEST(CodedFailure, LateWorkerAndAbstentionLoseTheRound)
{
    ASSERT_EQ(4, world_size());
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    const size_t count = 4096;
    int          rank  = world_rank();
    std::string  done1 = job_marker("late-done1");
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
    ASSERT_NO_FATAL_FAILURE(make_coded(comm, GCX_CODE_FR, count, &code, &coded, 1));
    std::vector<float> msg(count), sum(count);
    for (int r = 0; r < 12; ++r) {
        encode(code, rank, r, count, msg);
        std::fill(sum.begin(), sum.end(), -12345.0f);
        Result res(code);
        if (r == 5 && rank == 2) {
            ASSERT_TRUE(wait_for_marker(done1, comm)); // "stopped" till then
        }
        if (r == 5 && rank == 3) {
            ASSERT_EQ(GCX_OK, gcx_coded_abstain(coded, sum.data(), res.get(), nullptr));
        } else {
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr))
                << "rank " << rank << " round " << r;
        }
        if (r == 5 && rank == 1) {
            touch_marker(done1);
        }
        if (r == 5) {
            EXPECT_EQ(1, res->lost) << "rank " << rank;
            EXPECT_EQ(5u, res->round);
            EXPECT_EQ(-12345.0f, sum[0]) << "a lost round must not write recvbuf";
            EXPECT_EQ(-12345.0f, sum[count - 1]);
            if (rank == 2) {
                EXPECT_EQ(1, res->skipped) << "rank 2 came after the verdict";
            }
        } else {
            EXPECT_EQ(0, res->lost) << "rank " << rank << " round " << r;
            EXPECT_EQ(0u, wrong_in_sum_of_4(sum, r)) << "rank " << rank << " round " << r;
        }
    }
    Stats st(code);
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, st.get()));
    EXPECT_EQ(1u, st->rounds_lost);
    EXPECT_EQ(12u, st->rounds);
    if (rank == 0) {
        EXPECT_EQ(0u, st.gone()) << "a late worker is not gone";
    }
    root_waits_for_survivors(comm, 0, {}, "late-done");
    if (rank == 0) {
        unlink(done1.c_str());
    }
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

} // namespace
