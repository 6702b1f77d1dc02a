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
// CodedFailure.*: ranks die mid-run; the survivors fail the first round
// that cannot be decoded, and a rank far behind still completes the rounds
// decoded before it.
// CodedDestroy.*: the root destroys everything while a rank still has to
// pull its decoded sums; that rank must still get them right.
#include "../harness.h"

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

// Partition gradient j of a round: small integers, exact in float.
float grad(int j, uint64_t round, size_t i)
{
    return static_cast<float>(static_cast<int>((j * 131 + round * 17 + i * 7) % 23) - 11);
}

// Elements of @p sum that differ from the sum of partitions 0..3 of round r.
size_t wrong_in_sum_of_4(const std::vector<float> &sum, uint64_t round)
{
    size_t bad = 0;
    for (size_t i = 0; i < sum.size(); ++i) {
        double want = 0;
        for (int j = 0; j < 4; ++j) {
            want += grad(j, round, i);
        }
        bad += want != sum[i];
    }
    return bad;
}

struct RoundRun {
    int      rounds    = 200;
    size_t   count     = 1000;
    int      wrong     = 0;
    uint64_t late      = 0; // dropped, unneeded or skipped (summed over ranks)
};

// Builds this worker's message of a round.
void encode(gcx_code_t *code, int worker, uint64_t round, size_t count, std::vector<float> &msg)
{
    int                 load = gcx_code_load(code), cnt = 0;
    std::vector<int>    parts(load);
    std::vector<double> coeffs(load);
    ASSERT_EQ(GCX_OK, gcx_code_assignment(code, worker, parts.data(), coeffs.data(), &cnt));
    std::vector<std::vector<float>> g(cnt, std::vector<float>(count));
    std::vector<const float *>      vecs(cnt);
    for (int k = 0; k < cnt; ++k) {
        for (size_t i = 0; i < count; ++i) {
            g[k][i] = grad(parts[k], round, i);
        }
        vecs[k] = g[k].data();
    }
    ASSERT_EQ(GCX_OK, gcx_code_encode(cnt, coeffs.data(), vecs.data(), count, msg.data()));
}

void run_rounds(gcx_comm_t *comm, gcx_code_kind_t kind, int s, int root, int root_not_worker,
                RoundRun &run, int die_rank = -1, int die_round = -1)
{
    int               size = gcx_comm_size(comm), rank = gcx_comm_rank(comm);
    int               n    = size - (root_not_worker ? 1 : 0);
    gcx_code_params_t cp   = {};
    cp.kind                = kind;
    cp.n                   = n;
    cp.s                   = s;
    gcx_code_t *code       = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = run.count;
    params.root               = root;
    params.root_not_worker    = root_not_worker;
    gcx_coded_t *coded        = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &coded));
    int worker = gcx_coded_worker(coded, rank);

    std::vector<float> msg(run.count), sum(run.count);
    double             tol = kind == GCX_CODE_FR ? 0.0 : 1e-3 * 11 * n;
    for (int r = 0; r < run.rounds; ++r) {
        if (rank == die_rank && r == die_round) {
            printf("rank %d: exiting before round %d\n", rank, r);
            fflush(stdout);
            _exit(0);
        }
        int ready = 0; // what a training loop asks before it computes
        ASSERT_EQ(GCX_OK, gcx_coded_ready(coded, &ready));
        if (worker >= 0 && !ready) {
            encode(code, worker, r, run.count, msg);
        }
        gcx_coded_result_t res;
        ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), &res, nullptr))
            << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res.round);
        ASSERT_NE(0u, res.used);
        ASSERT_EQ(res.used, res.used & res.arrived);
        double err = 0;
        for (size_t i = 0; i < run.count; ++i) {
            double want = 0;
            for (int j = 0; j < n; ++j) {
                want += grad(j, r, i);
            }
            err = std::max(err, std::fabs(want - sum[i]));
        }
        if (err > tol) {
            ++run.wrong;
            ADD_FAILURE() << "round " << r << ": decoded sum off by " << err << " (used 0x"
                          << std::hex << res.used << ")";
        }
    }
    gcx_coded_stats_t st;
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &st));
    EXPECT_EQ(static_cast<uint64_t>(run.rounds), st.rounds);
    run.late = st.late_dropped + st.unneeded + st.skipped;
    printf("rank %d: %d rounds, late %llu unneeded %llu early %llu skipped %llu gone 0x%llx, "
           "%d wrong\n",
           rank, run.rounds, (unsigned long long)st.late_dropped,
           (unsigned long long)st.unneeded, (unsigned long long)st.early,
           (unsigned long long)st.skipped, (unsigned long long)st.gone, run.wrong);
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
}

uint64_t sum_over_world(uint64_t v)
{
    int64_t x = static_cast<int64_t>(v);
    EXPECT_EQ(GCX_OK, gcx_allreduce(g_world, GCX_IN_PLACE, &x, 1, GCX_DT_I64, GCX_OP_SUM, nullptr));
    return static_cast<uint64_t>(x);
}

// An FR code of n workers and s stragglers and a coded gather of @p count
// floats over @p comm (root 0); fr_release() frees both, before the
// communicator goes.
struct FrGather {
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
};

void fr_create(gcx_comm_t *comm, int n, int s, size_t count, FrGather &fr)
{
    gcx_code_params_t cp = {};
    cp.kind              = GCX_CODE_FR;
    cp.n                 = n;
    cp.s                 = s;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &fr.code));
    gcx_coded_params_t params = {};
    params.code               = fr.code;
    params.count              = count;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &fr.coded));
}

void fr_release(FrGather &fr)
{
    gcx_coded_destroy(fr.coded);
    gcx_code_destroy(fr.code);
    fr = FrGather();
}

int fr_s(int n)
{
    for (int s = 1; s < n; ++s) {
        if (n % (s + 1) == 0) {
            return s;
        }
    }
    return 0;
}

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

// --- failure: run under gcxrun --keep-going with a small GCX_TIMEOUT ---------

gcx_code_kind_t failure_kind()
{
    return world_size() % 2 == 0 ? GCX_CODE_FR : GCX_CODE_CR;
}

// A code over every rank with s = 1 and a coded gather of count floats to
// root 0 (a worker too), for the failure cases.
void make_coded(gcx_comm_t *comm, gcx_code_kind_t kind, size_t count, gcx_code_t **code_p,
                gcx_coded_t **coded_p, int lost_rounds = 0)
{
    gcx_code_params_t cp = {};
    cp.kind              = kind;
    cp.n                 = world_size();
    cp.s                 = 1;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, code_p));
    gcx_coded_params_t params = {};
    params.code               = *code_p;
    params.count              = count;
    params.root               = 0;
    params.lost_rounds        = lost_rounds;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, coded_p));
}

TEST(CodedFailure, OneRankDies)
{
    ASSERT_GE(world_size(), 3);
    gcx_comm_t *comm = make_comm({});
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
        gcx_coded_result_t res;
        if (rank == 0 && r == 20) {
            // enter round 20 and die inside it: the workers' contributions
            // have been sent, their results will never come
            gcx_request_t *req = nullptr;
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), &res, &req));
            usleep(200 * 1000);
            printf("rank 0 (the root): exiting inside round %d\n", r);
            fflush(stdout);
            _exit(0);
        }
        status = gcx_coded_gather(coded, msg.data(), sum.data(), &res, nullptr);
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

// A marker file shared by the ranks of one gcxrun job (same parent).
std::string job_marker(const char *name)
{
    return "/tmp/gcx-test-coded-" + std::to_string(getppid()) + "-" + name;
}

bool wait_for_marker(const std::string &path, gcx_comm_t *comm)
{
    for (int i = 0; i < 6000; ++i) { // 60 s
        if (access(path.c_str(), F_OK) == 0) {
            return true;
        }
        if (comm != nullptr) {
            gcx_progress(comm);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
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
        FILE *f = fopen(root_failed.c_str(), "w");
        ASSERT_NE(nullptr, f);
        fclose(f);
        EXPECT_TRUE(wait_for_marker(lagger_done, comm)) << "rank 1 never finished";
        unlink(root_failed.c_str());
        unlink(lagger_done.c_str());
    } else {
        FILE *f = fopen(lagger_done.c_str(), "w");
        ASSERT_NE(nullptr, f);
        fclose(f);
    }
    fr_release(fr);
    gcx_comm_destroy(comm);
}

// Worker 3's contribution to round 5 is taken by the root (its header came
// first in its FR group {2,3}; for CR, it made the set decodable), then
// worker 3 dies before its payload moved: it posts the rendezvous send and
// never progresses again. Worker 2's contribution comes after 3's was
// taken, so the root did not need it when it came. The root must count the
// lost transfer, take worker 2's contribution instead and decode round 5
// right; rounds 6..19 go on without rank 3. The ranks meet through marker
// files so that the order is the one described, whatever the load.
// mate_abstains: worker 2 abstains from round 5 instead (after worker 3's
// contribution was taken, so the round looked decodable when it came);
// with lost_rounds, round 5 is then lost on every survivor, not failed.
void taken_worker_dies(gcx_code_kind_t kind, bool mate_abstains = false)
{
    ASSERT_EQ(4, world_size());
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    const size_t count = 256 * 1024; // 1 MB: rendezvous
    const int    die_round = 5;
    int          rank  = world_rank();
    std::string  posted = job_marker("taken-posted"), sent2 = job_marker("taken-sent2");
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
    ASSERT_NO_FATAL_FAILURE(make_coded(comm, kind, count, &code, &coded, mate_abstains ? 1 : 0));
    std::vector<float> msg(count), sum(count);
    double             tol = kind == GCX_CODE_FR ? 0.0 : 1e-3 * 11 * 4;
    for (int r = 0; r < 20; ++r) {
        encode(code, gcx_coded_worker(coded, rank), r, count, msg);
        gcx_coded_result_t res = {};
        if (r == die_round && rank == 3) {
            gcx_request_t *req = nullptr;
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), &res, &req));
            FILE *f = fopen(posted.c_str(), "w"); // the header is on its way
            ASSERT_NE(nullptr, f);
            fclose(f);
            EXPECT_TRUE(wait_for_marker(sent2, nullptr)) << "rank 2 never sent";
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            unlink(posted.c_str());
            unlink(sent2.c_str());
            printf("rank 3: exiting with its round %d payload unsent\n", r);
            fflush(stdout);
            _exit(0);
        }
        if (r == die_round && rank == 2) {
            // the root must have taken rank 3's header first: give it time
            ASSERT_TRUE(wait_for_marker(posted, nullptr)) << "rank 3 never posted";
            std::this_thread::sleep_for(std::chrono::milliseconds(600));
            gcx_request_t *req = nullptr;
            if (mate_abstains) {
                ASSERT_EQ(GCX_OK, gcx_coded_abstain(coded, sum.data(), &res, &req));
            } else {
                ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), &res, &req));
            }
            FILE *f = fopen(sent2.c_str(), "w");
            ASSERT_NE(nullptr, f);
            fclose(f);
            ASSERT_EQ(GCX_OK, gcx_wait(req)) << "round " << r;
            gcx_request_free(req);
        } else {
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), &res, nullptr))
                << "rank " << rank << " round " << r;
        }
        if (mate_abstains && r == die_round) {
            EXPECT_EQ(1, res.lost) << "rank " << rank << ": round " << r << " must be lost";
            continue;
        }
        EXPECT_EQ(0, res.lost) << "rank " << rank << " round " << r;
        double err = 0;
        for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int j = 0; j < 4; ++j) {
                want += grad(j, r, i);
            }
            err = std::max(err, std::fabs(want - sum[i]));
        }
        EXPECT_LE(err, tol) << "rank " << rank << " round " << r << " used 0x" << std::hex
                            << res.used;
        if (r == die_round) {
            EXPECT_FALSE(res.used & (1u << 3)) << "round " << r << " used the lost worker";
        }
    }
    gcx_coded_stats_t st;
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &st));
    printf("rank %d: 20 rounds, lost %llu gone 0x%llx\n", rank, (unsigned long long)st.transfers_lost,
           (unsigned long long)st.gone);
    if (rank == 0) {
        EXPECT_EQ(1u, st.transfers_lost) << "the root never took rank 3's contribution";
        EXPECT_EQ(1u << 3, st.gone);
    }
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

TEST(CodedFailure, TakenWorkerDiesFr)
{
    taken_worker_dies(GCX_CODE_FR);
}

TEST(CodedFailure, TakenWorkerDiesCr)
{
    taken_worker_dies(GCX_CODE_CR);
}

TEST(CodedFailure, TakenWorkerDiesMateAbstains)
{
    taken_worker_dies(GCX_CODE_FR, true);
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
            FILE *f = fopen(gone.c_str(), "w");
            ASSERT_NE(nullptr, f);
            fclose(f);
            printf("rank 3: exiting before round %d\n", r);
            fflush(stdout);
            _exit(0);
        }
        encode(code, rank, r, count, msg);
        std::fill(sum.begin(), sum.end(), -12345.0f);
        gcx_coded_result_t res = {};
        if (r == 5 && rank == 2) {
            // abstain only once rank 3 is gone for the root too
            ASSERT_TRUE(wait_for_marker(gone, comm));
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            ASSERT_EQ(GCX_OK, gcx_coded_abstain(coded, sum.data(), &res, nullptr));
        } else {
            ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), &res, nullptr))
                << "rank " << rank << " round " << r;
        }
        if (r == 5) {
            EXPECT_EQ(1, res.lost) << "rank " << rank;
            EXPECT_EQ(5u, res.round);
            EXPECT_EQ(-12345.0f, sum[0]) << "a lost round must not write recvbuf";
            EXPECT_EQ(-12345.0f, sum[count - 1]);
        } else {
            EXPECT_EQ(0, res.lost) << "rank " << rank << " round " << r;
            EXPECT_EQ(0u, wrong_in_sum_of_4(sum, r)) << "rank " << rank << " round " << r;
        }
    }
    gcx_coded_stats_t st;
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &st));
    EXPECT_EQ(1u, st.rounds_lost);
    EXPECT_EQ(12u, st.rounds);
    if (rank == 0) {
        EXPECT_EQ(1u << 3, st.gone);
        unlink(gone.c_str());
    }
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// --- abstention ------------------------------------------------------------

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A PGC-FR training loop under random stragglers. The gradient of partition
// j computed at step t is grad(j, t, i), so a slot left stale by a skipped
// step would show in the decoded sum. Workers keep slot_steps, skip the
// compute when the round is already decoded, and abstain while their
// message would read a stale slot. Every round's sum is checked on every
// rank against the FR schedule (partition j at staleness (t - j mod P) mod
// P), and on the root against the terms gcx_pgc_decode() reports.
TEST(CodedAbstain, PgcFrStragglers)
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
        gcx_coded_result_t res;
        gcx_status_t       st = abstain ? gcx_coded_abstain(coded, sum.data(), &res, nullptr)
                                        : gcx_coded_gather(coded, msg.data(), sum.data(), &res,
                                                           nullptr);
        ASSERT_EQ(GCX_OK, st) << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res.round);
        ASSERT_NE(0u, res.used);
        ASSERT_EQ(res.used, res.used & res.arrived);
        ASSERT_EQ(0u, res.arrived & res.abstained) << "round " << r;
        if (ready) {
            EXPECT_EQ(1, res.skipped) << "round " << r << ": ready but not skipped";
        }
        root_saw_abstained += res.abstained != 0;
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
            ASSERT_EQ(GCX_OK, gcx_pgc_decode(pgc, r, res.used, a.data(), terms.data(), &info));
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
                          << std::hex << res.used << ", abstained 0x" << res.abstained << ")";
        }
    }
    gcx_coded_stats_t st;
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
    // not vacuous: some rounds were skipped, and some abstained from
    EXPECT_GT(sum_over_world(st.skipped), 0u);
    EXPECT_GT(sum_over_world(st.abstained), 0u);
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
// used) and the exact sum, on every rank. Its group-mate is held back so
// that the abstention reaches the root before the round is decodable; in
// round 11 the root is held back too, so the void message is staged.
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
    // round -> the rank that abstains (rank 3 blocking, the root, rank 3
    // through a request)
    auto abstainer = [](int r) { return r == 3 ? 3 : r == 7 ? 0 : r == 11 ? 3 : -1; };
    for (int r = 0; r < 16; ++r) {
        int who = abstainer(r);
        encode(fr.code, rank, r, msg.size(), msg);
        if (who >= 0 && rank == (who ^ 1) && who != 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500)); // the group-mate
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
        gcx_coded_result_t res;
        gcx_status_t       st;
        if (rank == who && r == 11) {
            gcx_request_t *req = nullptr;
            ASSERT_EQ(GCX_OK, gcx_coded_abstain(coded, sum.data(), &res, &req));
            ASSERT_NE(nullptr, req);
            st = gcx_wait(req);
            gcx_request_free(req);
        } else if (rank == who) {
            st = gcx_coded_abstain(coded, sum.data(), &res, nullptr);
        } else {
            st = gcx_coded_gather(coded, msg.data(), sum.data(), &res, nullptr);
        }
        ASSERT_EQ(GCX_OK, st) << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res.round);
        if (rank == who) { // held-back group-mate: the round waits for it
            EXPECT_EQ(0, res.skipped) << "round " << r;
        }
        uint64_t bit = who >= 0 ? 1ull << who : 0;
        EXPECT_EQ(bit, res.abstained) << "round " << r;
        EXPECT_EQ(0u, res.arrived & bit) << "round " << r;
        EXPECT_EQ(0u, res.used & bit) << "round " << r;
        if (who >= 0) {
            EXPECT_NE(0u, res.used & (1ull << (who ^ 1))) << "round " << r << ": the group-mate";
            EXPECT_TRUE(std::isnan(res.arrival[who]));
        }
        for (size_t i = 0; i < msg.size(); ++i) {
            double want = 0;
            for (int j = 0; j < 4; ++j) {
                want += grad(j, r, i);
            }
            ASSERT_EQ(want, sum[i]) << "round " << r << " element " << i << " skipped "
                                    << res.skipped << " used 0x" << std::hex << res.used
                                    << " arrived 0x" << res.arrived;
        }
    }
    gcx_coded_stats_t st;
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
        gcx_coded_result_t res;
        gcx_status_t st = gcx_coded_gather(coded, msg.data(), sum.data(), &res, nullptr);
        if (st != GCX_OK) {
            ++failed;
            ADD_FAILURE() << "rank " << rank << " round " << r << ": " << gcx_strerror(st);
            break;
        }
        size_t bad = wrong_in_sum_of_4(sum, r);
        if (bad > 0) {
            ++wrong;
            ADD_FAILURE() << "rank " << rank << " round " << r << ": GCX_OK with " << bad
                          << " wrong elements of " << count << " (skipped " << res.skipped
                          << ")";
        }
    }
    gcx_coded_stats_t stats;
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
