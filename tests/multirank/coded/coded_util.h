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
