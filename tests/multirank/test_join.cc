// Communicator creation when ranks never come or disagree on the world:
// single test process (plus a forked child), no launcher.
#include <gcx/gcx.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

int listen_loopback(int *port)
{
    int                fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {};
    socklen_t          len = sizeof(sa);
    sa.sin_family      = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0 ||
        listen(fd, 16) < 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &len) < 0) {
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

gcx_config_t *config_for(int rank, int size, int port, int fd)
{
    gcx_config_t *c = nullptr;
    EXPECT_EQ(GCX_OK, gcx_config_read(&c));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "RANK", std::to_string(rank).c_str()));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "WORLD_SIZE", std::to_string(size).c_str()));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "ROOT_ADDR", "127.0.0.1"));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "ROOT_PORT", std::to_string(port).c_str()));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "BOOTSTRAP_FD", std::to_string(fd).c_str()));
    EXPECT_EQ(GCX_OK, gcx_config_set(c, "TIMEOUT", "1.5"));
    return c;
}

TEST(Join, RankThatNeverComesTimesOut)
{
    int port, fd = listen_loopback(&port);
    ASSERT_GE(fd, 0);
    gcx_config_t *c    = config_for(0, 3, port, fd);
    gcx_comm_t   *comm = nullptr;
    auto          t0   = std::chrono::steady_clock::now();
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_TIMEOUT, gcx_comm_create(nullptr, c, &comm));
    std::string err = testing::internal::GetCapturedStderr();
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("creation failed after %.2f s: %s", elapsed, err.c_str());
    EXPECT_NE(std::string::npos, err.find("1 of 3 ranks joined"));
    EXPECT_EQ(nullptr, comm);
    EXPECT_LT(elapsed, 30.0); // returned, did not hang
    gcx_config_release(c);
    close(fd);
}

TEST(Join, RootThatNeverComesTimesOut)
{
    int port, fd = listen_loopback(&port);
    ASSERT_GE(fd, 0);
    close(fd); // nobody listens on that port any more
    gcx_config_t *c    = config_for(1, 2, port, -1);
    gcx_comm_t   *comm = nullptr;
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_TIMEOUT, gcx_comm_create(nullptr, c, &comm));
    EXPECT_NE(std::string::npos,
              testing::internal::GetCapturedStderr().find("cannot reach rank 0"));
    gcx_config_release(c);
}

TEST(Join, WorldSizeDisagreementFailsBothSides)
{
    int port, fd = listen_loopback(&port);
    ASSERT_GE(fd, 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(fd);
        gcx_config_t *c    = config_for(1, 3, port, -1);
        gcx_comm_t   *comm = nullptr;
        gcx_status_t  s    = gcx_comm_create(nullptr, c, &comm);
        _exit(s == GCX_ERR_MISMATCH ? 0 : 10 - s);
    }
    gcx_config_t *c    = config_for(0, 2, port, fd);
    gcx_comm_t   *comm = nullptr;
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_comm_create(nullptr, c, &comm));
    testing::internal::GetCapturedStderr();
    int wstatus = 0;
    ASSERT_EQ(child, waitpid(child, &wstatus, 0));
    EXPECT_TRUE(WIFEXITED(wstatus));
    EXPECT_EQ(0, WEXITSTATUS(wstatus)) << "the joining rank did not see the mismatch";
    gcx_config_release(c);
    close(fd);
}

TEST(Join, NoRankInTheEnvironment)
{
    for (const char *v : {"GCX_RANK", "GCX_WORLD_SIZE", "RANK", "WORLD_SIZE",
                          "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                          "SLURM_PROCID"}) {
        unsetenv(v);
    }
    gcx_comm_t *comm = nullptr;
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_create(nullptr, nullptr, &comm));
    EXPECT_NE(std::string::npos,
              testing::internal::GetCapturedStderr().find("GCX_RANK"));
}

TEST(Join, BadEnvironmentValueFailsCreation)
{
    setenv("GCX_RANK", "0", 1);
    setenv("GCX_WORLD_SIZE", "1", 1);
    setenv("GCX_PIPELINE_CHUNK", "lots", 1);
    gcx_comm_t *comm = nullptr;
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_INVALID, gcx_comm_create(nullptr, nullptr, &comm));
    EXPECT_NE(std::string::npos,
              testing::internal::GetCapturedStderr().find("GCX_PIPELINE_CHUNK='lots'"));
    unsetenv("GCX_PIPELINE_CHUNK");
    ASSERT_EQ(GCX_OK, gcx_comm_create(nullptr, nullptr, &comm)); // one rank works
    gcx_comm_destroy(comm);
}

} // namespace
