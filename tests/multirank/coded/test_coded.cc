// Coded gather: every round's decoded sum is checked on every rank against
// the serial sum of the partition gradients, which depend on the round, so
// a message of one round folded into another shows as a wrong sum. Random
// straggler delays (GCX_STRAGGLER_MEAN_MS) make messages late, early and
// unneeded; the test checks that these paths were taken at all (so it can
// tell "nothing was late" from "late messages were dropped").
#include "../harness.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// Partition gradient j of a round: small integers, exact in float.
float grad(int j, uint64_t round, size_t i)
{
    return static_cast<float>(static_cast<int>((j * 131 + round * 17 + i * 7) % 23) - 11);
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

TEST(CodedFailure, TwoRanksDie)
{
    ASSERT_GE(world_size(), 4);
    gcx_comm_t *comm = make_comm({});
    ASSERT_NE(nullptr, comm);
    int               size = world_size(), rank = world_rank();
    gcx_code_params_t cp   = {};
    cp.kind                = failure_kind();
    cp.n                   = size;
    cp.s                   = 1;
    gcx_code_t *code       = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 4096;
    gcx_coded_t *coded        = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_create(comm, &params, &coded));
    std::vector<float> msg(params.count, 1.0f), sum(params.count);
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

} // namespace
