// coded_util.h - helpers shared by the coded gather's multi-rank tests
// (definitions and their comments in coded_util.cc).
#ifndef GCX_TESTS_CODED_UTIL_H
#define GCX_TESTS_CODED_UTIL_H

#include "../harness.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace coded_test {

struct RoundRun {
    int      rounds    = 200;
    size_t   count     = 1000;
    int      wrong     = 0;
    uint64_t late      = 0; // dropped, unneeded or skipped (summed over ranks)
};

// An FR code of n workers and s stragglers and a coded gather of @p count
// floats over @p comm (root 0); fr_release() frees both, before the
// communicator goes.
struct FrGather {
    gcx_code_t  *code  = nullptr;
    gcx_coded_t *coded = nullptr;
};

// A round's result with storage for n workers' sets and arrival times
// (gcx_coded_result_alloc, freed with the object). get() is what the
// coded calls take; -> reads the scalars and the arrival times. The tests
// run on a few ranks, so their sets fit one word: arrived(), used() and
// abstained() return it (bit w: worker w) for the checks written as
// masks, and fail the test for n > 64.
class Result {
public:
    explicit Result(int n);
    explicit Result(const gcx_code_t *code) : Result(gcx_code_workers(code)) {}
    ~Result() { gcx_coded_result_free(&res_); }
    Result(const Result &)            = delete;
    Result &operator=(const Result &) = delete;

    gcx_coded_result_t       *get() { return &res_; }
    const gcx_coded_result_t *operator->() const { return &res_; }
    int                       n() const { return n_; }
    uint64_t                  arrived() const { return word(res_.arrived); }
    uint64_t                  used() const { return word(res_.used); }
    uint64_t                  abstained() const { return word(res_.abstained); }

private:
    uint64_t           word(const uint64_t *set) const;
    int                n_;
    gcx_coded_result_t res_ = {};
};

// Counters with storage for the set of gone workers (n workers). get() for
// gcx_coded_stats() / gcx_coded_allreduce_stats(), -> for the counters;
// gone() is the gone set as one word (n <= 64) and checks gone_count
// against it.
class Stats {
public:
    explicit Stats(int n);
    explicit Stats(const gcx_code_t *code) : Stats(gcx_code_workers(code)) {}
    Stats(const Stats &)            = delete;
    Stats &operator=(const Stats &) = delete;

    gcx_coded_stats_t       *get() { return &st_; }
    const gcx_coded_stats_t *operator->() const { return &st_; }
    uint64_t                 gone() const;

private:
    int                   n_;
    std::vector<uint64_t> gone_;
    gcx_coded_stats_t     st_ = {};
};

float    grad(int j, uint64_t round, size_t i);
size_t   wrong_in_sum_of_4(const std::vector<float> &sum, uint64_t round);
double   max_err_from_serial(const std::vector<float> &sum, int n, uint64_t round);
gcx_code_t *make_code(gcx_code_kind_t kind, int n, int s);
void     encode(gcx_code_t *code, int worker, uint64_t round, size_t count,
                std::vector<float> &msg);
void     run_rounds(gcx_comm_t *comm, gcx_code_kind_t kind, int s, int root,
                    int root_not_worker, RoundRun &run, int die_rank = -1,
                    int die_round = -1);
uint64_t sum_over_world(uint64_t v);
void     fr_create(gcx_comm_t *comm, int n, int s, size_t count, FrGather &fr);
void     fr_release(FrGather &fr);
int      fr_s(int n);
// The smallest s >= 1 whose s + 1 does not divide n (an FR code with groups
// of unequal size: floor(n / (s + 1)) of them), 0 when there is none.
int      fr_uneven_s(int n);
gcx_code_kind_t failure_kind();
void     make_coded(gcx_comm_t *comm, gcx_code_kind_t kind, size_t count,
                    gcx_code_t **code_p, gcx_coded_t **coded_p,
                    int lost_rounds = 0);
// job_marker, touch_marker, wait_for_marker: ../harness.h
// The end of a run in which ranks died: the survivors other than the root
// leave a marker once their rounds are done, and the root waits for all of
// them (progressing comm) before it goes on to destroy and exit. A rank
// that lags behind the root still pulls the decoded sums of finished rounds
// from the root's process (gcx_coded_destroy), so an exiting root would
// fail that rank's last rounds: a test's race, not the behaviour tested.
void     root_waits_for_survivors(gcx_comm_t *comm, int root, const std::vector<int> &dead,
                                  const char *name);
double   seconds_since(std::chrono::steady_clock::time_point t0);
// FNV-1a over the bits of @p v (a round's result, compared across ranks).
uint64_t checksum(const std::vector<float> &v);
// Whether @p v is the same on every rank of @p comm (max equals min).
bool     same_on_every_rank(gcx_comm_t *comm, uint64_t v);

} // namespace coded_test

#endif
