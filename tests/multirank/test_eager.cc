// Eager tagged messages of the transport (transport.h send_eager /
// recv_eager, src/transport/ucx/ucx_eager.c): a message that arrives before
// its receive waits in UCX's buffer, even for a communicator this process
// has not created yet; a receive posted first gets a copy on arrival; a
// message longer than the buffer is a mismatch and writes nothing; an
// aborted receive is never written again; and the ring sends its chunks
// eager exactly where GCX_RING_EAGER says. Rank 0 sends to rank 1 (other
// ranks sit the pair cases out); notices between them go by gcx_send.
#include "harness.h"

#include <gcx/sparse.h>

extern "C" {
#include "core/comm.h"
#include "core/context.h"
#include "transport/ucx/ucx_int.h"
}

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// an id no communicator of these tests takes, for views made by hand
constexpr uint32_t kSpareId = 4000;
// a collective sequence number the tests' collectives never reach
constexpr uint32_t kSeq = 0xABCDE;

gcx_tl_t *world_tl() { return g_world->tl; }

uint64_t eager_arrived() { return g_world->ctx->tl_ctx->eager_arrived; }

// progress until @p done() or a generous bound (a hang guard, not a timing)
template <typename F> bool progress_until(F done)
{
    auto t0 = std::chrono::steady_clock::now();
    while (!done()) {
        world_tl()->ops->progress(world_tl());
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) {
            return false;
        }
    }
    return true;
}

bool wait_req(gcx_tl_req_t *req)
{
    return progress_until([&] { return req->status != GCX_INPROGRESS; });
}

void notice_send(int peer, int tag)
{
    int one = 1;
    ASSERT_EQ(GCX_OK, gcx_send(g_world, &one, 1, GCX_DT_I32, peer, tag, nullptr));
}

void notice_recv(int peer, int tag)
{
    int one = 0;
    ASSERT_EQ(GCX_OK, gcx_recv(g_world, &one, 1, GCX_DT_I32, peer, tag, nullptr));
}

std::vector<unsigned char> pattern(size_t n, unsigned seed)
{
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<unsigned char>((i * 131 + seed * 7) & 0xff);
    }
    return v;
}

void send_eager(gcx_tl_t *tl, uint64_t tag, std::vector<unsigned char> &data)
{
    gcx_tl_req_t req{};
    gcx_iov_t    iov = {data.data(), data.size()};
    ASSERT_EQ(GCX_OK, tl->ops->send_eager(tl, 1, tag, &iov, 1, &req));
    ASSERT_TRUE(wait_req(&req));
    ASSERT_EQ(GCX_OK, req.status);
}

size_t staged_with_tag(uint64_t tag)
{
    const gcx_tl_ctx_t *ctx = g_world->ctx->tl_ctx;
    size_t              n   = 0;
    for (const gcx_tl_ucx_staged_t *m = ctx->staged.next; m != &ctx->staged;
         m = m->next) {
        n += m->tag == tag;
    }
    return n;
}

// a view of the world's ranks under communicator id @p id, made by hand
gcx_tl_t *spare_view(uint32_t id)
{
    std::vector<int> members;
    for (int r = 0; r < world_size(); ++r) {
        members.push_back(r);
    }
    gcx_tl_params_t params{};
    params.rank    = world_rank();
    params.size    = world_size();
    params.comm_id = id;
    gcx_tl_t *tl   = nullptr;
    EXPECT_EQ(GCX_OK, world_tl()->ops->derive(world_tl(), &params,
                                              members.data(), &tl));
    return tl;
}

} // namespace

TEST(Eager, MessagesThatComeFirstWaitForTheirReceives)
{
    ASSERT_GE(world_size(), 2);
    const size_t sizes[] = {0, 100, (1u << 20) + 3};
    uint64_t     tags[3];
    for (int i = 0; i < 3; ++i) {
        tags[i] = gcx_tl_tag(g_world->id, kSeq, 10 + i, 0);
    }
    if (world_rank() == 0) {
        for (int i = 0; i < 3; ++i) {
            auto data = pattern(sizes[i], i);
            send_eager(world_tl(), tags[i], data);
        }
        notice_send(1, 1);
    } else if (world_rank() == 1) {
        notice_recv(0, 1);
        ASSERT_TRUE(progress_until([&] {
            return staged_with_tag(tags[0]) + staged_with_tag(tags[1]) +
                       staged_with_tag(tags[2]) == 3;
        }));
        for (int i = 2; i >= 0; --i) { // the other order than sent
            std::vector<unsigned char> buf(sizes[i] + 8, 0x5a);
            gcx_tl_req_t               req{};
            gcx_iov_t                  iov = {buf.data(), sizes[i]};
            ASSERT_EQ(GCX_OK, world_tl()->ops->recv_eager(world_tl(), 0, tags[i],
                                                          &iov, 1, &req));
            ASSERT_EQ(GCX_OK, req.status) << "a staged message completes the post";
            EXPECT_EQ(sizes[i], req.length);
            auto want = pattern(sizes[i], i);
            EXPECT_TRUE(std::equal(want.begin(), want.end(), buf.begin()));
            EXPECT_EQ(0x5a, buf[sizes[i]]) << "written past the message";
            EXPECT_EQ(0u, staged_with_tag(tags[i]));
        }
    }
}

TEST(Eager, AReceivePostedFirstGetsACopyOnArrival)
{
    ASSERT_GE(world_size(), 2);
    const size_t   n   = (2u << 20) + 5; // many TCP fragments
    const uint64_t tag = gcx_tl_tag(g_world->id, kSeq, 20, 0);
    if (world_rank() == 0) {
        notice_recv(1, 2);
        auto data = pattern(n, 9);
        send_eager(world_tl(), tag, data);
    } else if (world_rank() == 1) {
        std::vector<unsigned char> buf(n, 0);
        gcx_tl_req_t               req{};
        gcx_iov_t                  iov[2] = {{buf.data(), 1000},
                                             {buf.data() + 1000, n - 1000}};
        ASSERT_EQ(GCX_OK, world_tl()->ops->recv_eager(world_tl(), 0, tag, iov,
                                                      2, &req));
        EXPECT_EQ(GCX_INPROGRESS, req.status);
        notice_send(0, 2);
        ASSERT_TRUE(wait_req(&req));
        ASSERT_EQ(GCX_OK, req.status);
        EXPECT_EQ(n, req.length);
        EXPECT_EQ(pattern(n, 9), buf);
    }
}

TEST(Eager, ALongerMessageIsAMismatchAndWritesNothing)
{
    ASSERT_GE(world_size(), 2);
    const uint64_t long_tag  = gcx_tl_tag(g_world->id, kSeq, 30, 0);
    const uint64_t short_tag = gcx_tl_tag(g_world->id, kSeq, 31, 0);
    if (world_rank() == 0) {
        notice_recv(1, 3);
        auto longer  = pattern(4096, 1);
        auto shorter = pattern(10, 2);
        send_eager(world_tl(), long_tag, longer);
        send_eager(world_tl(), short_tag, shorter);
    } else if (world_rank() == 1) {
        std::vector<unsigned char> a(1000, 0x5a), b(1000, 0x5a);
        gcx_tl_req_t               ra{}, rb{};
        gcx_iov_t                  ia = {a.data(), a.size()}, ib = {b.data(), b.size()};
        ASSERT_EQ(GCX_OK, world_tl()->ops->recv_eager(world_tl(), 0, long_tag,
                                                      &ia, 1, &ra));
        ASSERT_EQ(GCX_OK, world_tl()->ops->recv_eager(world_tl(), 0, short_tag,
                                                      &ib, 1, &rb));
        notice_send(0, 3);
        ASSERT_TRUE(wait_req(&ra));
        ASSERT_TRUE(wait_req(&rb));
        EXPECT_EQ(GCX_ERR_MISMATCH, ra.status);
        EXPECT_EQ(4096u, ra.length);
        EXPECT_EQ(std::vector<unsigned char>(1000, 0x5a), a);
        EXPECT_EQ(GCX_OK, rb.status);
        EXPECT_EQ(10u, rb.length);
        auto want = pattern(10, 2);
        EXPECT_EQ(0, memcmp(want.data(), b.data(), 10));
        EXPECT_EQ(0x5a, b[10]);
    }
}

// A peer that finished a split first may send before this rank has made
// the new view: the message waits, as UCX keeps an unexpected tagged one;
// a released view drops what it never received.
TEST(Eager, MessagesForAViewNotMadeYetAreKeptAndDroppedWithIt)
{
    ASSERT_GE(world_size(), 2);
    ASSERT_EQ(nullptr, g_world->ctx->tl_ctx->views[kSpareId]);
    const uint64_t tag  = gcx_tl_tag(kSpareId, kSeq, 1, 0);
    const uint64_t tag2 = gcx_tl_tag(kSpareId, kSeq, 2, 0);
    if (world_rank() == 0) {
        auto data = pattern(300000, 4);
        send_eager(world_tl(), tag, data);
        notice_send(1, 4);
        notice_recv(1, 5);
        send_eager(world_tl(), tag2, data);
        notice_send(1, 6);
    } else if (world_rank() == 1) {
        notice_recv(0, 4);
        ASSERT_TRUE(progress_until([&] { return staged_with_tag(tag) == 1; }));
        gcx_tl_t *view = spare_view(kSpareId);
        ASSERT_NE(nullptr, view);
        std::vector<unsigned char> buf(300000);
        gcx_tl_req_t               req{};
        gcx_iov_t                  iov = {buf.data(), buf.size()};
        ASSERT_EQ(GCX_OK, view->ops->recv_eager(view, 0, tag, &iov, 1, &req));
        EXPECT_EQ(GCX_OK, req.status);
        EXPECT_EQ(pattern(300000, 4), buf);
        // a message the view never receives goes with the view
        notice_send(0, 5);
        notice_recv(0, 6);
        ASSERT_TRUE(progress_until([&] { return staged_with_tag(tag2) == 1; }));
        EXPECT_EQ(1, view->ops->fini(view, 1.0));
        EXPECT_EQ(0u, staged_with_tag(tag2));
    }
}

// Run alone (it aborts a view, which changes how the process tears down).
TEST(EagerAbort, ACancelledReceiveIsNeverWritten)
{
    ASSERT_GE(world_size(), 2);
    const uint64_t tag = gcx_tl_tag(kSpareId, kSeq, 3, 0);
    if (world_rank() == 0) {
        notice_recv(1, 7);
        auto data = pattern(1u << 20, 5);
        send_eager(world_tl(), tag, data);
        notice_send(1, 8);
    } else if (world_rank() == 1) {
        gcx_tl_t *view = spare_view(kSpareId);
        ASSERT_NE(nullptr, view);
        std::vector<unsigned char> buf(1u << 20, 0x5a);
        gcx_tl_req_t               req{};
        gcx_iov_t                  iov = {buf.data(), buf.size()};
        ASSERT_EQ(GCX_OK, view->ops->recv_eager(view, 0, tag, &iov, 1, &req));
        view->ops->abort(view);
        EXPECT_EQ(GCX_ERR_CANCELED, req.status);
        uint64_t before = eager_arrived();
        notice_send(0, 7);
        notice_recv(0, 8);
        ASSERT_TRUE(progress_until([&] { return eager_arrived() > before; }));
        EXPECT_EQ(GCX_ERR_CANCELED, req.status);
        EXPECT_EQ(std::vector<unsigned char>(1u << 20, 0x5a), buf);
        EXPECT_EQ(0u, staged_with_tag(tag)) << "an aborted view's message is dropped";
        view->ops->fini(view, 1.0);
    }
}

// The ring's chunks go eager where GCX_RING_EAGER says (auto: where every
// rank reaches the others over TCP only), and the sums are right each way.
TEST(Eager, RingChunksGoEagerWhereChosen)
{
    const size_t n = 1u << 20; // 4 MB of floats: ring chunks of 512K
    struct Case {
        const char *eager;
        bool        expect;
    } cases[] = {{"auto", g_world->network_only != 0},
                 {"on", true},
                 {"off", false}};
    for (const Case &c : cases) {
        gcx_comm_t *comm = make_comm({{"RING_EAGER", c.eager},
                                      {"ALLREDUCE_ALGO", "ring"}});
        ASSERT_NE(nullptr, comm);
        std::vector<float> in(n), out(n);
        for (size_t i = 0; i < n; ++i) {
            in[i] = static_cast<float>(test_value(world_rank(), i));
        }
        uint64_t before = eager_arrived();
        ASSERT_EQ(GCX_OK, gcx_allreduce(comm, in.data(), out.data(), n,
                                        GCX_DT_F32, GCX_OP_SUM, nullptr));
        EXPECT_EQ(c.expect, eager_arrived() > before) << "GCX_RING_EAGER=" << c.eager;
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i) {
            wrong += out[i] != static_cast<float>(
                                   test_expected(GCX_DT_F32, GCX_OP_SUM, world_size(), i));
        }
        EXPECT_EQ(0u, wrong) << "GCX_RING_EAGER=" << c.eager;
        gcx_comm_destroy(comm);
    }
}

// Every rank agrees on network_only, which the choice above depends on.
TEST(Eager, NetworkOnlyIsAgreed)
{
    const bool expect = std::getenv("GCX_TEST_EXPECT_TCP_ONLY") != nullptr;
    EXPECT_EQ(expect, g_world->network_only != 0);
    EXPECT_EQ(g_world->ctx->network_only, g_world->network_only);
}

// Ranks that would send their ring chunks differently would wait on each
// other until GCX_TIMEOUT: creating such a communicator fails at once.
TEST(Eager, DifferentRingEagerSettingsAreAMismatch)
{
    ASSERT_GE(world_size(), 2);
    gcx_comm_t *comm = nullptr;
    EXPECT_EQ(GCX_ERR_MISMATCH,
              try_make_comm({{"RING_EAGER", world_rank() == 0 ? "on" : "off"}}, &comm));
    EXPECT_EQ(nullptr, comm);
}

// The sparse allreduce keeps its rings tagged under auto (its merges want
// the CPU that eager copies would take); GCX_RING_EAGER=on still applies.
TEST(Eager, SparseRingsStayTaggedUnderAuto)
{
    const size_t          N = 1u << 20, nnz = 20000;
    std::vector<uint32_t> idx(nnz);
    std::vector<float>    val(nnz, 1.0f), dense(N);
    for (size_t j = 0; j < nnz; ++j) {
        idx[j] = static_cast<uint32_t>(j * 50 + static_cast<size_t>(world_rank()));
    }
    gcx_sparse_vec_t input{idx.data(), val.data(), nnz, nnz, N, 0};
    gcx_sparse_allreduce_opts_t opts{};
    opts.algo = "allgather";
    for (const char *eager : {"auto", "on"}) {
        gcx_comm_t *comm = make_comm({{"RING_EAGER", eager}});
        ASSERT_NE(nullptr, comm);
        uint64_t before = eager_arrived();
        ASSERT_EQ(GCX_OK, gcx_sparse_allreduce(comm, &input, dense.data(), nullptr,
                                               &opts, nullptr));
        EXPECT_EQ(std::string(eager) == "on" && world_size() > 1,
                  eager_arrived() > before) << "GCX_RING_EAGER=" << eager;
        size_t wrong = 0;
        for (size_t i = 0; i < N; ++i) {
            const bool hit = i % 50 < static_cast<size_t>(world_size()) && i / 50 < nnz;
            wrong += dense[i] != (hit ? 1.0f : 0.0f);
        }
        EXPECT_EQ(0u, wrong) << "GCX_RING_EAGER=" << eager;
        gcx_comm_destroy(comm);
    }
}
