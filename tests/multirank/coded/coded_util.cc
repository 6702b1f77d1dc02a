// Helpers shared by the coded gather's multi-rank tests (test_coded.cc,
// test_coded_failure.cc): partition gradients that depend on the round, a
// round loop that checks every decoded sum, codes and coded gathers built
// the same way everywhere, and marker files through which the ranks of one
// job meet in a chosen order. Cost: nothing beyond the tests that call them.
#include "coded_util.h"
#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unistd.h>

namespace coded_test {

Result::Result(int n) : n_(n)
{
    EXPECT_EQ(GCX_OK, gcx_coded_result_alloc(&res_, n)) << "n " << n;
}

uint64_t Result::word(const uint64_t *set) const
{
    if (set == nullptr || n_ > 64) {
        ADD_FAILURE() << "a result's set read as one word, n " << n_;
        return ~0ull;
    }
    return set[0];
}

Stats::Stats(int n) : n_(n), gone_(GCX_WSET_WORDS(n > 0 ? n : 1), ~0ull)
{
    st_.gone = gone_.data(); // all ones: written by every stats call
}

uint64_t Stats::gone() const
{
    EXPECT_EQ(gone_.data(), st_.gone) << "the stats call changed the gone pointer";
    EXPECT_EQ(static_cast<uint64_t>(gcx_wset_count(gone_.data(), n_)), st_.gone_count);
    if (n_ > 64) {
        ADD_FAILURE() << "the gone set read as one word, n " << n_;
        return ~0ull;
    }
    return gone_[0];
}

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

// Largest |serial sum of partitions 0..n-1 of round r - sum[i]| over i: the
// independent reference every decoded sum is checked against.
double max_err_from_serial(const std::vector<float> &sum, int n, uint64_t round)
{
    double err = 0;
    for (size_t i = 0; i < sum.size(); ++i) {
        double want = 0;
        for (int j = 0; j < n; ++j) {
            want += grad(j, round, i);
        }
        err = std::max(err, std::fabs(want - sum[i]));
    }
    return err;
}

// A code of n workers and s stragglers (nullptr and a test failure when the
// parameters have none).
gcx_code_t *make_code(gcx_code_kind_t kind, int n, int s)
{
    gcx_code_params_t cp = {};
    cp.kind              = kind;
    cp.n                 = n;
    cp.s                 = s;
    gcx_code_t *code     = nullptr;
    EXPECT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    return code;
}

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
                RoundRun &run, int die_rank, int die_round)
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
        Result res(n);
        ASSERT_EQ(GCX_OK, gcx_coded_gather(coded, msg.data(), sum.data(), res.get(), nullptr))
            << "round " << r;
        ASSERT_EQ(static_cast<uint64_t>(r), res->round);
        ASSERT_NE(0u, res.used());
        ASSERT_EQ(res.used(), res.used() & res.arrived());
        double err = max_err_from_serial(sum, n, r);
        if (err > tol) {
            ++run.wrong;
            ADD_FAILURE() << "round " << r << ": decoded sum off by " << err << " (used 0x"
                          << std::hex << res.used() << ")";
        }
    }
    Stats st(n);
    ASSERT_EQ(GCX_OK, gcx_coded_stats(coded, st.get()));
    EXPECT_EQ(static_cast<uint64_t>(run.rounds), st->rounds);
    run.late = st->late_dropped + st->unneeded + st->skipped;
    printf("rank %d: %d rounds, late %llu unneeded %llu early %llu skipped %llu gone 0x%llx, "
           "%d wrong\n",
           rank, run.rounds, (unsigned long long)st->late_dropped,
           (unsigned long long)st->unneeded, (unsigned long long)st->early,
           (unsigned long long)st->skipped, (unsigned long long)st.gone(), run.wrong);
    if (die_rank >= 0) {
        root_waits_for_survivors(comm, root, {die_rank}, "rounds-done");
    }
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
}

uint64_t sum_over_world(uint64_t v)
{
    int64_t x = static_cast<int64_t>(v);
    EXPECT_EQ(GCX_OK, gcx_allreduce(g_world, GCX_IN_PLACE, &x, 1, GCX_DT_I64, GCX_OP_SUM, nullptr));
    return static_cast<uint64_t>(x);
}


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

int fr_uneven_s(int n)
{
    for (int s = 1; s < n; ++s) {
        if (n % (s + 1) != 0) {
            return s;
        }
    }
    return 0;
}


gcx_code_kind_t failure_kind()
{
    return world_size() % 2 == 0 ? GCX_CODE_FR : GCX_CODE_CR;
}

// A code over every rank with s = 1 and a coded gather of count floats to
// root 0 (a worker too), for the failure cases.
void make_coded(gcx_comm_t *comm, gcx_code_kind_t kind, size_t count, gcx_code_t **code_p,
                gcx_coded_t **coded_p, int lost_rounds)
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

void root_waits_for_survivors(gcx_comm_t *comm, int root, const std::vector<int> &dead,
                              const char *name)
{
    int rank = gcx_comm_rank(comm), size = gcx_comm_size(comm);
    auto marker = [name](int r) { return job_marker((std::string(name) + "-" +
                                                     std::to_string(r)).c_str()); };
    auto is_dead = [&dead](int r) { return std::find(dead.begin(), dead.end(), r) != dead.end(); };
    if (rank != root) {
        touch_marker(marker(rank));
        return;
    }
    for (int r = 0; r < size; ++r) {
        if (r != root && !is_dead(r)) {
            EXPECT_TRUE(wait_for_marker(marker(r), comm)) << "rank " << r << " never finished";
            unlink(marker(r).c_str());
        }
    }
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t checksum(const std::vector<float> &v)
{
    uint64_t h = 1469598103934665603ull;
    for (float f : v) {
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof(bits));
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

bool same_on_every_rank(gcx_comm_t *comm, uint64_t v)
{
    int64_t hi[2] = {static_cast<int64_t>(v >> 1), -static_cast<int64_t>(v >> 1)};
    EXPECT_EQ(GCX_OK, gcx_allreduce(comm, GCX_IN_PLACE, hi, 2, GCX_DT_I64, GCX_OP_MAX, nullptr));
    return hi[0] == -hi[1];
}

} // namespace coded_test
