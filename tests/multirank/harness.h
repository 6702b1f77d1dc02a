// Multi-rank test harness: every rank runs the same gtest binary under
// gcxrun; the world communicator comes from the environment, and tests can
// make communicators with other settings through an OOB over the world.
#ifndef GCX_TEST_HARNESS_H
#define GCX_TEST_HARNESS_H

#include <gcx/gcx.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

extern gcx_comm_t *g_world;

// A communicator over the same ranks with GCX_* overrides ({"NAME", "v"}).
gcx_comm_t *make_comm(std::initializer_list<std::pair<const char *, const char *>> overrides);
// The same, returning gcx_comm_create's status (for creations that must fail).
gcx_status_t try_make_comm(std::initializer_list<std::pair<const char *, const char *>> overrides,
                           gcx_comm_t **comm_p);

int world_rank();
int world_size();

// Deterministic small integer input of rank r at element i (exact in all
// types, negative too), and element access in any type.
double test_value(int rank, size_t i);
void   test_fill(void *buf, gcx_dtype_t dtype, size_t count, int rank);
double test_read(const void *buf, gcx_dtype_t dtype, size_t i);
void   test_write(void *buf, gcx_dtype_t dtype, size_t i, double v);

// Expected allreduce result at element i, as the library must produce it.
// The reduction of test_value() over `size` ranks at index i, as the
// element type computes it; PROD in f16/bf16 is the exact product (products
// of up to five values of |v| <= 5 round there, in an order of the
// algorithm's: compare with the type's precision).
double test_expected(gcx_dtype_t dtype, gcx_op_t op, int size, size_t i);

// GCX_TEST_SEED (1 when unset): what seeds a test's random plan, the same
// on every rank of a job.
unsigned test_seed();

// Marker files: how the ranks of one job tell each other something outside
// gcx (a rank that must make no gcx call, or whose communicator is broken).
// The path of marker @p name of this gcxrun job (in /tmp, named by the
// job's GCX_JOB_TOKEN: 128 random bits, so no other run's marker matches).
std::string job_marker(const char *name);
// Leave the (empty) marker file @p path; a test failure when it cannot.
void touch_marker(const std::string &path);
// Wait until @p path exists, calling gcx_progress(@p comm) meanwhile
// unless @p comm is NULL; false after @p seconds (a hang guard).
bool wait_for_marker(const std::string &path, gcx_comm_t *comm, int seconds = 60);

#endif
