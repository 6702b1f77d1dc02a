// Communicator creation when ranks never come or disagree on the world, and
// a rendezvous flooded with junk connections: single test process (plus
// forked children), no launcher.
#include <gcx/gcx.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <signal.h>
#include <string>
#include <vector>
#include <sys/socket.h>
#include <sys/time.h>
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
        listen(fd, 128) < 0 ||
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

// Forks rank 1 of @p size (job token @p token unless NULL), which exits 0
// when its creation fails with @p expect and its log names @p needle.
pid_t refused_rank(int port, int fd, int size, const char *token,
                   gcx_status_t expect, const char *needle)
{
    pid_t child = fork();
    if (child == 0) {
        close(fd);
        gcx_config_t *c    = config_for(1, size, port, -1);
        gcx_comm_t   *comm = nullptr;
        if (token != nullptr) {
            gcx_config_set(c, "JOB_TOKEN", token);
            gcx_config_set(c, "TIMEOUT", "60"); // a refusal must not wait
        }
        testing::internal::CaptureStderr();
        gcx_status_t s   = gcx_comm_create(nullptr, c, &comm);
        std::string  err = testing::internal::GetCapturedStderr();
        _exit(s != expect ? 10 - s : err.find(needle) == std::string::npos ? 20 : 0);
    }
    return child;
}

// Waits for @p child and expects it to have exited 0.
void expect_exit_0(pid_t child, const char *what)
{
    int wstatus = 0;
    ASSERT_EQ(child, waitpid(child, &wstatus, 0));
    EXPECT_TRUE(WIFEXITED(wstatus));
    EXPECT_EQ(0, WEXITSTATUS(wstatus)) << what;
}

TEST(Join, WorldSizeDisagreementFailsBothSides)
{
    int port, fd = listen_loopback(&port);
    ASSERT_GE(fd, 0);
    pid_t child = refused_rank(port, fd, 3, nullptr, GCX_ERR_MISMATCH,
                               "refused");
    ASSERT_GE(child, 0);
    gcx_config_t *c    = config_for(0, 2, port, fd);
    gcx_comm_t   *comm = nullptr;
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_MISMATCH, gcx_comm_create(nullptr, c, &comm));
    testing::internal::GetCapturedStderr();
    expect_exit_0(child, "the joining rank did not see the mismatch");
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

// ---- a rendezvous under a flood of junk connections -----------------------

// A bootstrap message header as src/core/bootstrap.c frames it: magic
// "gcxb", type, version, body length, little-endian.
std::string header(unsigned type, unsigned version, uint32_t length)
{
    uint8_t h[12] = {0x62, 0x78, 0x63, 0x67,
                     uint8_t(type), uint8_t(type >> 8),
                     uint8_t(version), uint8_t(version >> 8),
                     uint8_t(length), uint8_t(length >> 8),
                     uint8_t(length >> 16), uint8_t(length >> 24)};
    return std::string(reinterpret_cast<char *>(h), sizeof(h));
}

int connect_to(int port)
{
    int                fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {};
    struct timeval     tv = {10, 0}; // a stuck read cannot stall the test
    sa.sin_family      = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port        = htons(uint16_t(port));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// Reads until the other side closes (rank 0 rejected us) or 10 s pass.
void drain(int fd)
{
    char buf[256];
    while (recv(fd, buf, sizeof(buf), 0) > 0) {
    }
}

// One junk connection of kind k; with wait, until rank 0 has closed it.
// Returns a connection to keep open (slow-loris) or -1.
int junk(int port, int k, bool wait)
{
    int fd = connect_to(port);
    if (fd < 0) {
        return -1;
    }
    std::string msg;
    switch (k) {
    case 0: // a port scanner: connect and close
        close(fd);
        return -1;
    case 1: // a truncated header
        msg = "gcx";
        break;
    case 2: // an oversized length
        msg = header(2, 2, 0xffffffffu);
        break;
    case 3: // not ours at all
        msg = "GET / HTTP/1.0\r\n\r\n";
        break;
    case 4: // another protocol version
        msg = header(2, 1, 24);
        break;
    case 5: // a well-formed hello with a wrong token (its MAC is wrong)
        msg = header(2, 2, 24) + std::string(24, '\x5a');
        break;
    case 6: // a truncated hello
        msg = header(2, 2, 24) + std::string(10, '\x01');
        break;
    default: // slow-loris: one byte, then silence
        send(fd, "g", 1, MSG_NOSIGNAL);
        return fd;
    }
    send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    if (k == 1 || k == 6) {
        shutdown(fd, SHUT_WR); // and nothing more: rank 0 sees the end
    }
    if (wait) {
        drain(fd);
    }
    close(fd);
    return -1;
}

const int kJunkKinds = 8;

// Rank 0 (this process) and ranks 1, 2 (children) create a communicator
// while a helper floods rank 0's port: first one connection of every kind,
// each until rank 0 has closed it (so each is handled before the ranks
// come), then as fast as it can until the job is done. The job must
// complete with a correct allreduce, and every kind be rejected with its
// reason in rank 0's log.
TEST(Join, JunkConnectionsDoNotStopTheJob)
{
    int port, fd = listen_loopback(&port);
    ASSERT_GE(fd, 0);
    int go[2];
    ASSERT_EQ(0, pipe(go));
    pid_t flood = fork();
    ASSERT_GE(flood, 0);
    if (flood == 0) {
        close(fd);
        std::vector<int> keep;
        for (int k = 0; k < kJunkKinds; ++k) {
            int s = junk(port, k, true);
            if (s >= 0) {
                keep.push_back(s);
            }
        }
        if (write(go[1], "gg", 2) != 2) {
            _exit(1);
        }
        for (unsigned i = 0;; ++i) { // until killed
            int s = junk(port, int(i % kJunkKinds), false);
            if (s >= 0) {
                keep.push_back(s); // rank 0 closes them in time
            }
        }
    }
    pid_t ranks[2];
    for (int r = 1; r <= 2; ++r) {
        ranks[r - 1] = fork();
        ASSERT_GE(ranks[r - 1], 0);
        if (ranks[r - 1] == 0) {
            close(fd);
            char c;
            if (read(go[0], &c, 1) != 1) {
                _exit(20);
            }
            gcx_config_t *c2   = config_for(r, 3, port, -1);
            gcx_comm_t   *comm = nullptr;
            gcx_config_set(c2, "TIMEOUT", "60");
            gcx_status_t s = gcx_comm_create(nullptr, c2, &comm);
            if (s != GCX_OK) {
                _exit(30 - s);
            }
            float in = float(r), out = 0;
            s = gcx_allreduce(comm, &in, &out, 1, GCX_DT_F32, GCX_OP_SUM,
                              nullptr);
            gcx_comm_destroy(comm);
            _exit(s != GCX_OK ? 40 - s : out == 3.0f ? 0 : 50);
        }
    }
    gcx_config_t *c    = config_for(0, 3, port, fd);
    gcx_comm_t   *comm = nullptr;
    ASSERT_EQ(GCX_OK, gcx_config_set(c, "TIMEOUT", "60"));
    testing::internal::CaptureStderr();
    gcx_status_t s = gcx_comm_create(nullptr, c, &comm);
    std::string  err = testing::internal::GetCapturedStderr();
    kill(flood, SIGKILL);
    EXPECT_EQ(GCX_OK, s) << err;
    if (s == GCX_OK) {
        float in = 0, out = -1;
        EXPECT_EQ(GCX_OK, gcx_allreduce(comm, &in, &out, 1, GCX_DT_F32,
                                        GCX_OP_SUM, nullptr));
        EXPECT_EQ(3.0f, out);
        gcx_comm_destroy(comm);
    }
    for (pid_t pid : ranks) {
        expect_exit_0(pid, "a rank failed");
    }
    waitpid(flood, nullptr, 0);
    printf("rank 0's log:\n%s", err.c_str());
    for (const char *why : {"closed after 0 bytes", "closed after 3 bytes",
                            "a length other than the expected one",
                            "bad magic", "another protocol version",
                            "wrong job token", "closed after 22 bytes"}) {
        EXPECT_NE(std::string::npos, err.find(why)) << "no rejection: " << why;
    }
    gcx_config_release(c);
    close(fd);
    close(go[0]);
    close(go[1]);
}

// A rank whose job token differs is refused at once, naming the token; the
// root keeps waiting for its real rank 1 (and times out here).
TEST(Join, RankWithAnotherTokenIsRefused)
{
    int port, fd = listen_loopback(&port);
    ASSERT_GE(fd, 0);
    pid_t child = refused_rank(port, fd, 2, "another-job", GCX_ERR_MISMATCH,
                               "job token");
    ASSERT_GE(child, 0);
    gcx_config_t *c    = config_for(0, 2, port, fd);
    gcx_comm_t   *comm = nullptr;
    ASSERT_EQ(GCX_OK, gcx_config_set(c, "JOB_TOKEN", "this-job"));
    testing::internal::CaptureStderr();
    EXPECT_EQ(GCX_ERR_TIMEOUT, gcx_comm_create(nullptr, c, &comm));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string::npos, err.find("wrong job token")) << err;
    expect_exit_0(child, "the rank was not refused by its token");
    gcx_config_release(c);
    close(fd);
}

} // namespace
