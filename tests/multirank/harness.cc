// Harness: main() creates the world communicator from the environment
// (gcxrun sets it), runs the tests, destroys it.
#include "harness.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

extern "C" {
#include "coll/reduce.h"
}

gcx_comm_t *g_world = nullptr;

int world_rank()
{
    return gcx_comm_rank(g_world);
}

int world_size()
{
    return gcx_comm_size(g_world);
}

static gcx_status_t world_oob_allgather(const void *sendbuf, void *recvbuf,
                                        size_t len, void *ctx)
{
    return gcx_allgather(static_cast<gcx_comm_t *>(ctx), sendbuf, recvbuf,
                         len, GCX_DT_U8, nullptr);
}

gcx_status_t try_make_comm(std::initializer_list<std::pair<const char *, const char *>> overrides,
                           gcx_comm_t **comm_p)
{
    gcx_config_t *config = nullptr;
    gcx_oob_t     oob    = {world_oob_allgather, g_world, world_rank(),
                            world_size()};
    gcx_status_t  status;

    *comm_p = nullptr;
    EXPECT_EQ(GCX_OK, gcx_config_read(&config));
    for (const auto &kv : overrides) {
        EXPECT_EQ(GCX_OK, gcx_config_set(config, kv.first, kv.second));
    }
    status = gcx_comm_create(&oob, config, comm_p);
    gcx_config_release(config);
    return status;
}

gcx_comm_t *make_comm(std::initializer_list<std::pair<const char *, const char *>> overrides)
{
    gcx_comm_t *comm = nullptr;

    EXPECT_EQ(GCX_OK, try_make_comm(overrides, &comm));
    return comm;
}

double test_value(int rank, size_t i)
{
    return static_cast<double>((rank * 7 + static_cast<long>(i % 1000) * 3) % 11) - 5.0;
}

void test_write(void *buf, gcx_dtype_t dtype, size_t i, double v)
{
    switch (dtype) {
    case GCX_DT_F32: static_cast<float *>(buf)[i] = static_cast<float>(v); break;
    case GCX_DT_F64: static_cast<double *>(buf)[i] = v; break;
    case GCX_DT_I32: static_cast<int32_t *>(buf)[i] = static_cast<int32_t>(v); break;
    case GCX_DT_I64: static_cast<int64_t *>(buf)[i] = static_cast<int64_t>(v); break;
    case GCX_DT_F16: static_cast<uint16_t *>(buf)[i] = gcx_float_to_half(static_cast<float>(v)); break;
    case GCX_DT_BF16: static_cast<uint16_t *>(buf)[i] = gcx_float_to_bf16(static_cast<float>(v)); break;
    default: static_cast<uint8_t *>(buf)[i] = static_cast<uint8_t>(v); break;
    }
}

double test_read(const void *buf, gcx_dtype_t dtype, size_t i)
{
    switch (dtype) {
    case GCX_DT_F32: return static_cast<const float *>(buf)[i];
    case GCX_DT_F64: return static_cast<const double *>(buf)[i];
    case GCX_DT_I32: return static_cast<const int32_t *>(buf)[i];
    case GCX_DT_I64: return static_cast<double>(static_cast<const int64_t *>(buf)[i]);
    case GCX_DT_F16: return gcx_half_to_float(static_cast<const uint16_t *>(buf)[i]);
    case GCX_DT_BF16: return gcx_bf16_to_float(static_cast<const uint16_t *>(buf)[i]);
    default: return static_cast<const uint8_t *>(buf)[i];
    }
}

void test_fill(void *buf, gcx_dtype_t dtype, size_t count, int rank)
{
    for (size_t i = 0; i < count; ++i) {
        test_write(buf, dtype, i, test_value(rank, i));
    }
}

double test_expected(gcx_dtype_t dtype, gcx_op_t op, int size, size_t i)
{
    double  sum = 0, mx = -1e300, mn = 1e300, prod = 1;
    int64_t band = -1, bor = 0, bxor = 0; // the values are small integers
    for (int r = 0; r < size; ++r) {
        double  v = test_value(r, i);
        int64_t b = static_cast<int64_t>(v);
        sum += v;
        prod *= v;
        mx = std::max(mx, v);
        mn = std::min(mn, v);
        band &= b;
        bor |= b;
        bxor ^= b;
    }
    switch (op) {
    case GCX_OP_MAX: return mx;
    case GCX_OP_MIN: return mn;
    case GCX_OP_SUM: return sum;
    case GCX_OP_PROD: return prod; // exact but in f16/bf16 (test_allreduce.cc)
    case GCX_OP_BAND: return static_cast<double>(band);
    case GCX_OP_BOR: return static_cast<double>(bor);
    case GCX_OP_BXOR: return static_cast<double>(bxor);
    default: break;
    }
    // AVG: the sum (exact) divided in the element type
    switch (dtype) {
    case GCX_DT_I32:
    case GCX_DT_I64: return std::trunc(sum / size);
    case GCX_DT_F32: return static_cast<float>(sum) / static_cast<float>(size);
    case GCX_DT_F16: return gcx_half_to_float(gcx_float_to_half(static_cast<float>(sum) / size));
    case GCX_DT_BF16: return gcx_bf16_to_float(gcx_float_to_bf16(static_cast<float>(sum) / size));
    default: return sum / size;
    }
}

int main(int argc, char **argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    gcx_status_t status = gcx_comm_create(nullptr, nullptr, &g_world);
    if (status != GCX_OK) {
        fprintf(stderr, "cannot create the world communicator: %s\n",
                gcx_strerror(status));
        return 1;
    }
    int rc = RUN_ALL_TESTS();
    gcx_comm_destroy(g_world);
    return rc;
}

std::string job_marker(const char *name)
{
    const char *token = getenv("GCX_JOB_TOKEN");
    return std::string("/tmp/gcx-test-") + (token != nullptr ? token : "none") + "-" +
           name;
}

void touch_marker(const std::string &path)
{
    FILE *f = fopen(path.c_str(), "w");
    ASSERT_NE(nullptr, f) << path;
    fclose(f);
}

bool wait_for_marker(const std::string &path, gcx_comm_t *comm, int seconds)
{
    for (int i = 0; i < seconds * 100; ++i) {
        if (access(path.c_str(), F_OK) == 0) {
            return true;
        }
        if (comm != nullptr) {
            gcx_progress(comm);
        }
        usleep(10 * 1000);
    }
    return false;
}

unsigned test_seed()
{
    const char *s = getenv("GCX_TEST_SEED");
    return s != nullptr ? static_cast<unsigned>(strtoul(s, nullptr, 10)) : 1u;
}
