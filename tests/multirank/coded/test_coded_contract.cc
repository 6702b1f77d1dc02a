// What include/gcx/coded.h promises about the coded collectives, one case
// per promise, so that a change of behaviour fails here (gcx issue 44,
// item 4). Every result is checked against a reference computed in the test
// from plain arithmetic, never against gcx itself.
// - CodedContract.WorkerIndexIsTheRank: worker w of a master-less object
//   (and of the star) is rank w of the communicator it was created over
//   (here a split whose ranks run opposite to the world's): a diagonal code
//   with weight 2^w per worker and one rank's message nonzero per round;
//   the decoded value says which weight the message got.
// - CodedContract.Skipped{Masterless,Star}: result->skipped is 0 for a rank
//   that entered before its round was decoded (the others wait for it), and
//   1 for one that entered with its real message once the round was decoded
//   without it (gcx_coded_ready), not only for one that abstains; the sum is
//   right in both.
// - CodedContract.ResultStorageIsTheCallers{Masterless,Star}: the result's
//   worker sets and arrival times are written into the caller's storage
//   (n workers' worth, nothing past it), and only where a field is not
//   NULL; the scalars always.
// - CodedContract.SurvivorsMeetThenDestroy{Masterless,Star} (suite failure,
//   --keep-going): a rank vanishes between two rounds; the survivors go on,
//   then follow the header's recipe -- gcx_comm_shrink_ranks() without
//   revoking, a barrier on the survivors' communicator, destroy -- while one
//   survivor still has its last round to run when the others start it; all
//   exit 0. A collective on the old communicator fails (why the recipe).
//   CodedContract.OwnerVanishesInTheLastRound (suite failure): the same
//   recipe when the dead owner's chunk of the last round reached only some
//   survivors (the next owner, already in the shrink, must serve it).
// - CodedContract.BufferBytesOfALaggingRank: stats.buffer_bytes of a rank
//   GCX_CODED_AHEAD rounds behind, against the header's bound and the
//   chunks it must hold (one published chunk per round of lag).
#include "../harness.h"
#include "coded_util.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace coded_test;

std::string marker(const char *name, int rank)
{
    return job_marker((std::string(name) + "-" + std::to_string(rank)).c_str());
}

// Waits, progressing @p comm, until every rank of @p comm but those in
// @p skip has touched its marker @p name.
void wait_for_ranks(gcx_comm_t *comm, const char *name, const std::vector<int> &skip)
{
    for (int q = 0; q < gcx_comm_size(comm); ++q) {
        if (std::find(skip.begin(), skip.end(), q) == skip.end()) {
            EXPECT_TRUE(wait_for_marker(marker(name, q), comm)) << "rank " << q << ": " << name;
        }
    }
}

// The smallest s >= 1 of an FR code on n workers, else CR with s = 1.
gcx_code_t *fr_or_cr(int n, int *s_p)
{
    int s = fr_s(n);
    *s_p  = s > 0 ? s : 1;
    return make_code(s > 0 ? GCX_CODE_FR : GCX_CODE_CR, n, *s_p);
}

// A coded object of @p count floats on @p comm with the code fr_or_cr()
// picks for its ranks (*code_p, *s_p), star or master-less; NULL (a test
// failure recorded) when it cannot be made.
gcx_coded_t *contract_coded(gcx_comm_t *comm, size_t count, bool masterless,
                            gcx_code_t **code_p, int *s_p)
{
    gcx_code_t *code = fr_or_cr(gcx_comm_size(comm), s_p);
    *code_p          = code;
    EXPECT_NE(nullptr, code);
    if (code == nullptr) {
        return nullptr;
    }
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = count;
    params.algo               = masterless ? GCX_CODED_ALGO_MASTERLESS : GCX_CODED_ALGO_STAR;
    gcx_coded_t *coded        = nullptr;
    EXPECT_EQ(GCX_OK, gcx_coded_create(comm, &params, &coded));
    EXPECT_EQ(masterless ? 1 : 0, coded != nullptr ? gcx_coded_masterless(coded) : -1);
    return coded;
}

// ---- 1. the worker index --------------------------------------------------

// A communicator split from the world with the ranks reversed (rank r of it
// is world rank P-1-r), a MATRIX code with s = 0 and B = diag(2^0, ...,
// 2^(P-1)) -- worker w's message m_w = 2^w g_w, decoded as
// sum_w 2^-w m_w -- and in round t every rank's message zero but rank t's,
// m[i] = i + 1. The decoded sum is then (i + 1) 2^-w where w is the worker
// index the objects gave rank t's message: it must be 2^-t (exact in
// float), on every rank and every chunk (every chunk has its own decoder).
// The same through gcx_coded_create with the master-less algorithm, whose
// gcx_coded_worker() must say the same, and through the star.
TEST(CodedContract, WorkerIndexIsTheRank)
{
    const int   P    = world_size();
    gcx_comm_t *comm = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_split(g_world, 0, P - 1 - world_rank(), &comm));
    const int rank = gcx_comm_rank(comm);
    ASSERT_EQ(P - 1 - world_rank(), rank);
    std::vector<double> b(static_cast<size_t>(P) * P, 0.0);
    for (int w = 0; w < P; ++w) {
        b[static_cast<size_t>(w) * P + w] = std::ldexp(1.0, w);
    }
    gcx_code_params_t cp = {};
    cp.kind              = GCX_CODE_MATRIX;
    cp.n                 = P;
    cp.s                 = 0;
    cp.matrix            = b.data();
    gcx_code_t *code     = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = static_cast<size_t>(3 * P + 1); // every chunk non-empty
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    gcx_coded_t *objs[2] = {nullptr, nullptr};
    const int    algos[2] = {GCX_CODED_ALGO_MASTERLESS, GCX_CODED_ALGO_STAR};
    for (int k = 0; k < 2; ++k) {
        params.algo = algos[k];
        ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &objs[k]));
        EXPECT_EQ(k == 0 ? 1 : 0, gcx_coded_masterless(objs[k]));
        for (int r = 0; r < P; ++r) {
            EXPECT_EQ(r, gcx_coded_worker(objs[k], r)) << "algo " << algos[k];
        }
    }
    std::vector<float> msg(params.count), sum(params.count);
    const uint64_t     all = P == 64 ? ~0ull : (1ull << P) - 1;
    for (int t = 0; t < P; ++t) {
        for (size_t i = 0; i < params.count; ++i) {
            msg[i] = rank == t ? static_cast<float>(i + 1) : 0.0f;
        }
        for (int k = 0; k < 3; ++k) {
            const char        *what = k == 0 ? "gcx_coded_allreduce" :
                                      k == 1 ? "master-less gcx_coded_gather" :
                                               "star gcx_coded_gather";
            Result res(P);
            std::fill(sum.begin(), sum.end(), -1.0f);
            ASSERT_EQ(GCX_OK, k == 0 ? gcx_coded_allreduce(car, msg.data(), sum.data(),
                                                           res.get(), nullptr) :
                                       gcx_coded_gather(objs[k - 1], msg.data(), sum.data(),
                                                        res.get(), nullptr))
                << what << ", round " << t;
            EXPECT_EQ(all, res.used()) << what << ": s = 0 decodes from every worker";
            size_t wrong = 0;
            for (size_t i = 0; i < params.count; ++i) {
                const float want = static_cast<float>(std::ldexp(double(i + 1), -t));
                if (sum[i] != want && wrong++ == 0) {
                    ADD_FAILURE() << what << ": rank " << t << "'s message (i + 1 at " << i
                                  << ") decoded as " << sum[i] << ", worker "
                                  << std::log2(double(i + 1) / sum[i]) << " instead of "
                                  << t;
                }
            }
            EXPECT_EQ(0u, wrong) << what << ", round " << t;
        }
    }
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr)); // the others still take our chunks
    gcx_coded_destroy(objs[0]);
    gcx_coded_destroy(objs[1]);
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

// ---- 3. result->skipped ---------------------------------------------------

// P >= 3, a code with s >= 1, the last rank L. Round 2: L enters first and
// posts its round (its chunks or contribution go at once), and only then do
// the others enter (a marker): L's round cannot be decoded before it sent,
// so skipped is 0 and stats.skipped stays. Round 4: the others finish it
// first (markers) while L progresses; L waits until gcx_coded_ready() /
// gcx_coded_allreduce_ready() says the sum is all here, then enters with
// its real message (not an abstention): skipped is 1, nothing of it was
// used, stats.skipped counts it and stats.abstained does not. Every sum is
// checked against the serial sum of the partition gradients.
void skipped_case(bool masterless)
{
    const int P = world_size();
    if (P < 3) {
        GTEST_SKIP() << "needs 3 ranks";
    }
    gcx_comm_t *comm = make_comm({{"TIMEOUT", "30"}});
    ASSERT_NE(nullptr, comm);
    const int   rank = gcx_comm_rank(comm), late = P - 1;
    const char *name = masterless ? "skip-ml" : "skip-star";
    int                s;
    gcx_code_t        *code;
    const size_t       count = 6007;
    gcx_coded_t       *coded = contract_coded(comm, count, masterless, &code, &s);
    ASSERT_NE(nullptr, coded);
    std::vector<float> msg(count), sum(count);
    const double       tol = 1e-3 * 11 * P;
    std::string        go  = std::string(name) + "-go", done = std::string(name) + "-done";
    for (int r = 0; r < 7; ++r) {
        encode(code, rank, r, count, msg);
        gcx_coded_stats_t before = {}, after = {};
        Result            res(P);
        ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &before));
        if (r == 2 && rank != late) {
            EXPECT_TRUE(wait_for_marker(marker(go.c_str(), late), comm));
        }
        if (r == 4 && rank == late) {
            wait_for_ranks(comm, done.c_str(), {late});
            int ready = 0;
            for (int i = 0; i < 30000 && !ready; ++i) { // a deadline only against a hang
                ASSERT_EQ(GCX_OK, gcx_coded_ready(coded, &ready));
                if (!ready) {
                    usleep(1000);
                }
            }
            ASSERT_TRUE(ready) << "round 4's sum never all here";
        }
        gcx_request_t *req = nullptr;
        ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), &req));
        if (r == 2 && rank == late) {
            touch_marker(marker(go.c_str(), late)); // posted: its sends are out
        }
        ASSERT_EQ(GCX_OK, gcx_wait(req)) << "round " << r;
        gcx_request_free(req);
        ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, &after));
        EXPECT_LE(max_err_from_serial(sum, P, r), tol) << "round " << r;
        EXPECT_EQ(static_cast<uint64_t>(r), res->round);
        if (r == 4 && rank != late) {
            touch_marker(marker(done.c_str(), rank));
        }
        if (rank != late) {
            continue;
        }
        if (r == 2) {
            EXPECT_EQ(0, res->skipped) << "entered before its round was decoded";
            EXPECT_EQ(before.skipped, after.skipped);
        }
        if (r == 4) {
            EXPECT_EQ(1, res->skipped) << "entered once its round was decoded";
            EXPECT_EQ(0, gcx_wset_has(res->used, late)) << "used 0x" << std::hex << res.used();
            EXPECT_EQ(0, gcx_wset_has(res->arrived, late))
                << "arrived 0x" << std::hex << res.arrived();
            EXPECT_EQ(before.skipped + 1, after.skipped);
            EXPECT_EQ(before.abstained, after.abstained) << "it did not abstain";
        }
    }
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr)); // the others still take our chunks
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    unlink(marker(rank == late ? go.c_str() : done.c_str(), rank).c_str());
    gcx_comm_destroy(comm);
}

TEST(CodedContract, SkippedMasterless)
{
    skipped_case(true);
}

TEST(CodedContract, SkippedStar)
{
    skipped_case(false);
}

// ---- 1c. the result's storage is the caller's ------------------------------

// Four rounds through gcx_coded_create (star, root 0; or master-less), each
// with a result pointing at a different part of caller storage: none (every
// field NULL), used only, used and arrival, all four. The scalars are
// written every round (sentinels before); a NULL field stays NULL and the
// others keep pointing where they did; exactly GCX_WSET_WORDS(P) words of
// a set and P floats are written (a guard after each stays), with no bit
// at or past P; used is never empty, nobody abstained, and on the star
// used is within arrived. Arrival times: NAN or finite; master-less all
// NAN; on the star's root finite for every arrived worker. Every sum is
// checked against the serial sum.
void result_storage(bool masterless)
{
    const int P = world_size();
    if (P < 3) {
        GTEST_SKIP() << "needs 3 ranks";
    }
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    const int   rank = gcx_comm_rank(comm);
    int                s;
    gcx_code_t        *code;
    const size_t       count = 1001;
    gcx_coded_t       *coded = contract_coded(comm, count, masterless, &code, &s);
    ASSERT_NE(nullptr, coded);
    const size_t       words = GCX_WSET_WORDS(P);
    const uint64_t     guard = 0xa5a5a5a5a5a5a5a5ull;
    const float        unset = -12345.0f;
    std::vector<float> msg(count), sum(count);
    for (int r = 0; r < 4; ++r) {
        encode(code, rank, r, count, msg);
        std::vector<uint64_t> arrived(words + 1, guard), used(words + 1, guard),
            abstained(words + 1, guard);
        std::vector<float>    arrival(P + 1, unset);
        gcx_coded_result_t    res = {};
        res.used      = r >= 1 ? used.data() : nullptr;
        res.arrival   = r >= 2 ? arrival.data() : nullptr;
        res.arrived   = r >= 3 ? arrived.data() : nullptr;
        res.abstained = r >= 3 ? abstained.data() : nullptr;
        res.round      = 777;
        res.round_time = -1.0;
        res.skipped    = 7;
        res.lost       = 7;
        ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), &res, nullptr))
            << "round " << r;
        EXPECT_LE(max_err_from_serial(sum, P, r), 1e-3 * 11 * P) << "round " << r;
        EXPECT_EQ(static_cast<uint64_t>(r), res.round);
        EXPECT_TRUE(res.skipped == 0 || res.skipped == 1) << res.skipped;
        EXPECT_EQ(0, res.lost);
        EXPECT_NE(-1.0, res.round_time) << "round_time not written";
        EXPECT_EQ(r >= 1 ? used.data() : nullptr, res.used) << "round " << r;
        EXPECT_EQ(r >= 2 ? arrival.data() : nullptr, res.arrival) << "round " << r;
        EXPECT_EQ(r >= 3 ? arrived.data() : nullptr, res.arrived) << "round " << r;
        EXPECT_EQ(r >= 3 ? abstained.data() : nullptr, res.abstained) << "round " << r;
        for (auto *set : {&arrived, &used, &abstained}) {
            EXPECT_EQ(guard, set->back()) << "round " << r << ": written past the set";
        }
        EXPECT_EQ(unset, arrival.back()) << "round " << r << ": written past P floats";
        if (r < 1) {
            EXPECT_EQ(guard, used[0]) << "a NULL used was written somewhere";
            continue;
        }
        EXPECT_GT(gcx_wset_count(used.data(), P), 0) << "round " << r;
        if (P % 64 != 0) {
            EXPECT_EQ(0u, used[words - 1] >> (P % 64)) << "bits past P";
        }
        if (r >= 2) {
            for (int w = 0; w < P; ++w) {
                float t = arrival[w];
                EXPECT_NE(unset, t) << "round " << r << " worker " << w << " not written";
                EXPECT_TRUE(std::isnan(t) || std::isfinite(t));
                if (masterless) {
                    EXPECT_TRUE(std::isnan(t)) << "round " << r << " worker " << w;
                }
            }
        }
        if (r >= 3) {
            EXPECT_EQ(0, gcx_wset_count(abstained.data(), P)) << "nobody abstained";
            if (P % 64 != 0) {
                EXPECT_EQ(0u, arrived[words - 1] >> (P % 64)) << "bits past P";
            }
            for (int w = 0; w < P && !masterless; ++w) {
                if (gcx_wset_has(used.data(), w)) {
                    EXPECT_TRUE(gcx_wset_has(arrived.data(), w)) << "used, not arrived: " << w;
                }
                if (rank == 0 && gcx_wset_has(arrived.data(), w)) {
                    EXPECT_TRUE(std::isfinite(arrival[w])) << "root: worker " << w;
                }
            }
        }
    }
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr)); // the others still take our chunks
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    gcx_comm_destroy(comm);
}

TEST(CodedContract, ResultStorageIsTheCallersMasterless)
{
    result_storage(true);
}

TEST(CodedContract, ResultStorageIsTheCallersStar)
{
    result_storage(false);
}

// ---- 2. meeting after a death ----------------------------------------------

// P = 5, CR with s = 2, through gcx_coded_create (star with root 0, or
// master-less). Rank 1 vanishes (_exit, no teardown) between rounds 4 and 5;
// the survivors run all 12 rounds, right. Then, as the header says: every
// survivor but the last leaves a marker and calls gcx_comm_shrink_ranks
// without revoking; the last (rank 4) waits for those markers, progressing,
// so the others are in the shrink before it runs its round 11 -- which must
// still succeed (gcx_comm_shrink would revoke the communicator under it) --
// and shrinks too. A barrier and a bit comparison on the survivors'
// communicator, then the object is destroyed; a barrier on the old
// communicator fails (GCX_ERR_PEER: the dead rank is a member). Every
// survivor returns normally and its process exits 0.
void survivors_meet(bool masterless)
{
    const int P = world_size();
    ASSERT_EQ(5, P) << "registered with 5 ranks";
    const int   victim = 1, last = P - 1, rounds = 12, die_before = 5;
    gcx_comm_t *comm   = make_comm({{"TIMEOUT", "60"}});
    ASSERT_NE(nullptr, comm);
    const int   rank = gcx_comm_rank(comm);
    gcx_code_t *code = make_code(GCX_CODE_CR, P, 2);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 40001;
    params.algo               = masterless ? GCX_CODED_ALGO_MASTERLESS : GCX_CODED_ALGO_STAR;
    gcx_coded_t *coded        = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &coded));
    const char *name = masterless ? "meet-ml" : "meet-star";
    std::vector<float> msg(params.count), sum(params.count);
    uint64_t           bits = 0;
    for (int r = 0; r < rounds; ++r) {
        if (rank == victim && r == die_before) {
            printf("rank %d: vanishing before round %d\n", rank, r);
            fflush(stdout);
            _exit(0);
        }
        if (rank == last && r == rounds - 1) {
            // the others are done and about to shrink; give their shrink
            // messages a moment to come (progressing: nothing asserted on
            // time, the round must succeed whenever it runs)
            wait_for_ranks(comm, name, {victim, last});
            for (int i = 0; i < 200; ++i) {
                gcx_progress(comm);
                usleep(1000);
            }
        }
        encode(code, rank, r, params.count, msg);
        Result res(P);
        ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr))
            << "round " << r;
        ASSERT_LE(max_err_from_serial(sum, P, r), 1e-3 * 11 * P) << "round " << r;
        if (r >= die_before) {
            EXPECT_EQ(0, gcx_wset_has(res->used, victim)) << "round " << r;
        }
        bits = bits * 1099511628211ull ^ checksum(sum);
    }
    Stats st(P);
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, st.get()));
    if (masterless) {
        // its chunks of rounds 5.. needed a new owner, so every survivor saw
        // the connection lost (the star's root may not have yet: a worker
        // it does not wait for is counted gone when the transport says so,
        // or after GCX_CODED_MAX_LAG rounds)
        EXPECT_EQ(1ull << victim, st.gone());
    }
    if (rank != last) {
        touch_marker(marker(name, rank));
    }
    gcx_comm_t *survivors = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_shrink_ranks(comm, nullptr, 0, 0, &survivors));
    EXPECT_EQ(P - 1, gcx_comm_size(survivors));
    EXPECT_EQ(GCX_OK, gcx_barrier(survivors, nullptr));
    EXPECT_TRUE(same_on_every_rank(survivors, bits)) << "survivors hold different bits";
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    EXPECT_EQ(GCX_OK, gcx_barrier(survivors, nullptr));
    gcx_comm_destroy(survivors);
    unlink(marker(name, rank).c_str());
    gcx_status_t st_old = gcx_barrier(comm, nullptr);
    EXPECT_TRUE(st_old == GCX_ERR_PEER || st_old == GCX_ERR_TIMEOUT) << gcx_strerror(st_old);
    gcx_comm_destroy(comm);
    printf("rank %d: destroyed cleanly\n", rank);
}

TEST(CodedContract, SurvivorsMeetThenDestroyMasterless)
{
    survivors_meet(true);
}

TEST(CodedContract, SurvivorsMeetThenDestroyStar)
{
    survivors_meet(false);
}

// P = 4, CR with s = 1, master-less. Rank 1 vanishes in the middle of the
// last round, a seeded number of progress calls (half a millisecond apart)
// after it posted it, while rank 3 has not entered that round and makes no
// progress (300 ms): rank 1's decoded chunk and COMMIT for rank 3 are still
// queued when it dies, so rank 3 must take chunk 1 from rank 2, the next
// owner of its line, which has it committed, finished the round, and is
// already in the shrink of the recipe. Rank 2 must still send its kept
// copy: before the fix it did so only from a later round, and rank 3's
// round failed at GCX_TIMEOUT, leaving it out of the shrink (12 of 12 seeds
// over TCP, 10 of 12 over shared memory; the others: rank 1 died before it
// committed). Every survivor completes every round right, holds the same
// bits and is in the survivors' communicator.
TEST(CodedContract, OwnerVanishesInTheLastRound)
{
    const int P = world_size();
    ASSERT_EQ(4, P) << "registered with 4 ranks";
    std::mt19937 rng(test_seed());
    const int    victim = 1, slow = 3, rounds = 6, polls = static_cast<int>(rng() % 240);
    gcx_comm_t  *comm = make_comm({{"TIMEOUT", "20"}});
    ASSERT_NE(nullptr, comm);
    const int   rank = gcx_comm_rank(comm);
    gcx_code_t *code = make_code(GCX_CODE_CR, P, 1);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 150001;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    if (rank == 0) {
        printf("rank %d vanishes in round %d after %d progress calls\n", victim, rounds - 1,
               polls);
    }
    std::vector<float> msg(params.count), sum(params.count);
    uint64_t           bits = 0;
    for (int r = 0; r < rounds; ++r) {
        encode(code, rank, r, params.count, msg);
        if (rank == slow && r == rounds - 1) {
            usleep(300000); // no progress: what the victim sends it waits
        }
        gcx_request_t *req = nullptr;
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), nullptr, &req));
        if (rank == victim && r == rounds - 1) {
            for (int i = 0; i < polls; ++i) {
                (void)gcx_test(req);
                usleep(500);
            }
            printf("rank %d: vanishing in round %d\n", rank, r);
            fflush(stdout);
            _exit(0);
        }
        ASSERT_EQ(GCX_OK, gcx_wait(req)) << "round " << r;
        gcx_request_free(req);
        ASSERT_LE(max_err_from_serial(sum, P, r), 1e-3 * 11 * P) << "round " << r;
        bits = bits * 1099511628211ull ^ checksum(sum);
    }
    gcx_comm_t *survivors = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_shrink_ranks(comm, nullptr, 0, 0, &survivors));
    EXPECT_EQ(P - 1, gcx_comm_size(survivors));
    EXPECT_EQ(GCX_OK, gcx_barrier(survivors, nullptr));
    EXPECT_TRUE(same_on_every_rank(survivors, bits)) << "survivors hold different bits";
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    gcx_comm_destroy(survivors);
    gcx_comm_destroy(comm);
}

// ---- 4. stats.buffer_bytes -------------------------------------------------

// The bound of include/gcx/coded.h (gcx_coded_stats_t.buffer_bytes) for a
// master-less object: count floats, P ranks, s stragglers, GCX_CODED_AHEAD
// A, a rank at most k rounds behind the others.
uint64_t buffer_bound(size_t count, int P, int s, int A, int k)
{
    const uint64_t chunk = (count + P - 1) / P * sizeof(float);
    return chunk * (static_cast<uint64_t>(k + 2) * (3 * P + s) + static_cast<uint64_t>(s) * A);
}

// P ranks, 100000 floats (400 KB), FR or CR with s = 1 where FR has none,
// GCX_CODED_AHEAD = 8, for a lag k of 3 and of 8 (= A). Three rounds as
// usual; then the last rank L stops calling while the others run the next k
// rounds (served ahead by L's progress) and wait; L reads its stats, catches
// up by abstaining from the k decoded rounds, and everyone runs three more
// (markers order the phases, so L is never more than k rounds behind). On
// L: buffer_bytes at the lag holds at least the k chunks L published (one
// per round of lag) and at most the header's bound for k, and it does not
// go down afterwards. On every rank: at most the bound for k = A.
void lagging_rank(gcx_comm_t *comm, int k)
{
    const int   P = gcx_comm_size(comm), A = 8, warm = 3, after = 3;
    const int   rank = gcx_comm_rank(comm), late = P - 1;
    int         s;
    gcx_code_t *code = fr_or_cr(P, &s);
    ASSERT_NE(nullptr, code);
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 100000;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    const uint64_t     chunk = (params.count + P - 1) / P * sizeof(float);
    const std::string  warm_m = "buf-warm-" + std::to_string(k),
                       lag_m = "buf-lag-" + std::to_string(k),
                       caught_m = "buf-caught-" + std::to_string(k);
    std::vector<float> msg(params.count), sum(params.count);
    uint64_t           at_lag = 0, bits = 0;
    for (int r = 0; r < warm + k + after; ++r) {
        Result res(P);
        if (rank != late && r == warm) {
            EXPECT_TRUE(wait_for_marker(marker(warm_m.c_str(), late), comm));
        }
        if (rank != late && r == warm + k) {
            EXPECT_TRUE(wait_for_marker(marker(caught_m.c_str(), late), comm));
        }
        if (rank == late && r >= warm && r < warm + k) {
            if (r == warm) {
                wait_for_ranks(comm, lag_m.c_str(), {late});
                ASSERT_FALSE(::testing::Test::HasFailure());
            }
            int ready = 0;
            for (int i = 0; i < 30000 && !ready; ++i) { // a deadline only against a hang
                ASSERT_EQ(GCX_OK, gcx_coded_allreduce_ready(car, &ready));
                if (!ready) {
                    usleep(1000);
                }
            }
            ASSERT_TRUE(ready) << "round " << r << " never all here";
            if (r == warm) {
                gcx_coded_stats_t st = {};
                ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
                at_lag = st.buffer_bytes;
            }
            ASSERT_EQ(GCX_OK, gcx_coded_allreduce_abstain(car, sum.data(), res.get(), nullptr));
            EXPECT_EQ(1, res->skipped) << "round " << r;
        } else {
            encode(code, rank, r, params.count, msg);
            ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), res.get(), nullptr))
                << "round " << r;
        }
        EXPECT_LE(max_err_from_serial(sum, P, r), 1e-3 * 11 * P) << "round " << r;
        if (rank == late && r == warm - 1) {
            touch_marker(marker(warm_m.c_str(), late));
        }
        if (rank != late && r == warm + k - 1) {
            touch_marker(marker(lag_m.c_str(), rank));
        }
        if (rank == late && r == warm + k - 1) {
            touch_marker(marker(caught_m.c_str(), late));
        }
        bits = bits * 1099511628211ull ^ checksum(sum);
    }
    EXPECT_TRUE(same_on_every_rank(comm, bits)) << "ranks hold different bits";
    gcx_coded_stats_t st = {};
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_stats(car, &st));
    printf("rank %d: P %d s %d chunk %llu: buffer_bytes %llu at %d rounds behind (%.1f chunks), "
           "%llu at the end (%.1f chunks); bound %llu (k = %d), %llu (k = A)\n",
           rank, P, s, (unsigned long long)chunk, (unsigned long long)at_lag, k,
           double(at_lag) / chunk, (unsigned long long)st.buffer_bytes,
           double(st.buffer_bytes) / chunk,
           (unsigned long long)buffer_bound(params.count, P, s, A, k), k,
           (unsigned long long)buffer_bound(params.count, P, s, A, A));
    if (rank == late) {
        EXPECT_GE(at_lag, static_cast<uint64_t>(k) * chunk) << "the chunks it published";
        EXPECT_LE(at_lag, buffer_bound(params.count, P, s, A, k));
        EXPECT_GE(st.buffer_bytes, at_lag) << "a level that does not go down";
        EXPECT_LE(st.buffer_bytes, buffer_bound(params.count, P, s, A, k));
    }
    EXPECT_LE(st.buffer_bytes, buffer_bound(params.count, P, s, A, A));
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    unlink(marker((rank == late ? warm_m : lag_m).c_str(), rank).c_str());
    if (rank == late) {
        unlink(marker(caught_m.c_str(), late).c_str());
    }
}

TEST(CodedContract, BufferBytesOfALaggingRank)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    gcx_comm_t *comm = make_comm({{"TIMEOUT", "30"}, {"CODED_AHEAD", "8"}});
    ASSERT_NE(nullptr, comm);
    for (int k : {3, 8}) {
        lagging_rank(comm, k);
        if (::testing::Test::HasFatalFailure()) {
            break;
        }
    }
    gcx_comm_destroy(comm);
}

} // namespace
