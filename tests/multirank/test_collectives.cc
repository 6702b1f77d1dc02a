// Broadcast, allgather(v), alltoallv and barrier against serial references.
#include "harness.h"

#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

uint8_t byte_of(int rank, size_t i)
{
    return static_cast<uint8_t>((rank * 31 + i * 7 + (i >> 8)) & 0xff);
}

class Broadcast : public ::testing::TestWithParam<const char *> {};

TEST_P(Broadcast, EveryRootAndSize)
{
    gcx_comm_t  *comm = make_comm({{"BCAST_ALGO", GetParam()}, {"PIPELINE_CHUNK", "64K"}});
    const size_t sizes[] = {0, 1, 1001, 300007};
    ASSERT_NE(nullptr, comm);
    for (int root = 0; root < world_size(); ++root) {
        for (size_t n : sizes) {
            std::vector<uint8_t> buf(n + 32, 0xA5);
            for (size_t i = 0; world_rank() == root && i < n; ++i) {
                buf[i] = byte_of(root, i);
            }
            ASSERT_EQ(GCX_OK, gcx_broadcast(comm, buf.data(), n, GCX_DT_U8,
                                            root, nullptr));
            for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(byte_of(root, i), buf[i]) << "root " << root << " size "
                                                    << n << " byte " << i;
            }
            for (size_t i = n; i < buf.size(); ++i) {
                ASSERT_EQ(0xA5, buf[i]);
            }
        }
    }
    // >= 16 MB of doubles from the last rank
    const size_t        count = (16u << 20) / 8 + 5;
    std::vector<double> big(count, -1.0);
    int                 root = world_size() - 1;
    if (world_rank() == root) {
        test_fill(big.data(), GCX_DT_F64, count, root);
    }
    ASSERT_EQ(GCX_OK, gcx_broadcast(comm, big.data(), count, GCX_DT_F64, root,
                                    nullptr));
    for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(test_value(root, i), big[i]) << i;
    }
    gcx_comm_destroy(comm);
}

INSTANTIATE_TEST_SUITE_P(Algos, Broadcast,
                         ::testing::Values("auto", "binomial", "chain"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                             return std::string(i.param);
                         });

TEST(Allgather, InAndOutOfPlace)
{
    const size_t counts[] = {0, 1, 1001, 70001};
    int          P = world_size(), me = world_rank();
    for (size_t n : counts) {
        for (int in_place = 0; in_place < 2; ++in_place) {
            std::vector<float> mine(n), all(n * P + 8, -99.0f);
            test_fill(mine.data(), GCX_DT_F32, n, me);
            if (in_place && n > 0) {
                memcpy(all.data() + n * me, mine.data(), n * sizeof(float));
            }
            ASSERT_EQ(GCX_OK, gcx_allgather(g_world, in_place ? GCX_IN_PLACE : mine.data(),
                                            all.data(), n, GCX_DT_F32, nullptr));
            for (int r = 0; r < P; ++r) {
                for (size_t i = 0; i < n; ++i) {
                    ASSERT_EQ(test_value(r, i), all[r * n + i]) << "rank " << r;
                }
            }
            for (size_t i = n * P; i < all.size(); ++i) {
                ASSERT_EQ(-99.0f, all[i]);
            }
        }
    }
}

TEST(Allgatherv, UnevenCountsWithGapsAndEmptyRanks)
{
    int                 P = world_size(), me = world_rank();
    std::vector<size_t> counts(P), displs(P);
    size_t              total = 0;
    for (int r = 0; r < P; ++r) {
        counts[r] = (r % 3 == 1) ? 0 : static_cast<size_t>(r * 5000 + 3);
        displs[r] = total + 2; // a gap of two elements before each block
        total     = displs[r] + counts[r];
    }
    std::vector<int64_t> mine(counts[me]), all(total + 4, -7);
    test_fill(mine.data(), GCX_DT_I64, counts[me], me);
    ASSERT_EQ(GCX_OK, gcx_allgatherv(g_world, mine.data(), counts[me], all.data(),
                                     counts.data(), displs.data(), GCX_DT_I64,
                                     nullptr));
    for (int r = 0; r < P; ++r) {
        EXPECT_EQ(-7, all[displs[r] - 1]) << "gap before block " << r;
        EXPECT_EQ(-7, all[displs[r] - 2]) << "gap before block " << r;
        for (size_t i = 0; i < counts[r]; ++i) {
            ASSERT_EQ(static_cast<int64_t>(test_value(r, i)), all[displs[r] + i]);
        }
    }
}

// c(i, j): elements rank i sends to rank j
size_t a2a_count(int i, int j)
{
    return static_cast<size_t>(((i * 2 + j) % 3) * 700 + i + (j == i ? 0 : 1));
}

double a2a_value(int i, int j, size_t k)
{
    return static_cast<double>(i * 100000 + j * 1000 + static_cast<int>(k % 997));
}

TEST(Alltoallv, UnevenCounts)
{
    int                 P = world_size(), me = world_rank();
    std::vector<size_t> sc(P), sd(P), rc(P), rd(P);
    size_t              stotal = 0, rtotal = 0;
    for (int j = 0; j < P; ++j) {
        sc[j] = a2a_count(me, j);
        sd[j] = stotal;
        stotal += sc[j] + 1;
        rc[j] = a2a_count(j, me);
        rd[j] = rtotal;
        rtotal += rc[j] + 1;
    }
    std::vector<double> send(stotal), recv(rtotal, -1.0);
    for (int j = 0; j < P; ++j) {
        for (size_t k = 0; k < sc[j]; ++k) {
            send[sd[j] + k] = a2a_value(me, j, k);
        }
    }
    ASSERT_EQ(GCX_OK, gcx_alltoallv(g_world, send.data(), sc.data(), sd.data(),
                                    recv.data(), rc.data(), rd.data(),
                                    GCX_DT_F64, nullptr));
    for (int i = 0; i < P; ++i) {
        for (size_t k = 0; k < rc[i]; ++k) {
            ASSERT_EQ(a2a_value(i, me, k), recv[rd[i] + k]) << "from " << i;
        }
        EXPECT_EQ(-1.0, recv[rd[i] + rc[i]]) << "guard after block " << i;
    }
}

TEST(Barrier, NobodyLeavesBeforeEveryoneArrived)
{
    // gcxrun is every rank's parent: its pid names a shared folder
    std::string dir = "/tmp/gcx-barrier-test-" + std::to_string(getppid());
    mkdir(dir.c_str(), 0700);
    for (int round = 0; round < 20; ++round) {
        if (world_rank() == round % world_size()) {
            usleep(20000); // one late rank per round
        }
        std::string mine = dir + "/" + std::to_string(round) + "." +
                           std::to_string(world_rank());
        FILE *f = fopen(mine.c_str(), "w");
        ASSERT_NE(nullptr, f);
        fclose(f);
        ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
        for (int r = 0; r < world_size(); ++r) {
            std::string other = dir + "/" + std::to_string(round) + "." +
                                std::to_string(r);
            EXPECT_EQ(0, access(other.c_str(), F_OK))
                << "rank " << r << " had not arrived in round " << round;
        }
    }
    ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    for (int round = 0; round < 20; ++round) {
        unlink((dir + "/" + std::to_string(round) + "." +
                std::to_string(world_rank())).c_str());
    }
    ASSERT_EQ(GCX_OK, gcx_barrier(g_world, nullptr));
    rmdir(dir.c_str());
}

} // namespace
