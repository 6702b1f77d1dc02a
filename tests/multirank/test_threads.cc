// Calls from several threads (gcx.h, "Threads"): worker threads each drive
// their own communicator split from one parent while one more thread only
// progresses and completes requests the workers hand it; messages go from
// one thread's communicator to another thread; communicators are created
// and destroyed while the others run; a master-less coded allreduce whose
// rounds a progress thread serves ahead of the main thread's calls. Built and run under ThreadSanitizer
// too (scripts/test.sh, suite 'threads'), where the interleavings these
// tests make are checked for data races.
// Cost: a few hundred small and medium collectives per thread, seconds.
#include "harness.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr int kWorkers = 3;

// Input of (rank, thread, iteration) at element i: integers, exact in f64.
double value(int rank, int t, int it, size_t i)
{
    return static_cast<double>((rank * 131 + t * 17 + it * 7 + static_cast<long>(i % 4099)) % 61) - 30;
}

// Requests handed from a worker to the progress thread, which tests them
// and fulfils the worker's promise with the final status.
class Mailbox {
public:
    std::future<gcx_status_t> hand(gcx_request_t *req)
    {
        std::lock_guard<std::mutex> g(mu_);
        items_.emplace_back(req, std::promise<gcx_status_t>());
        return items_.back().second.get_future();
    }

    // One pass: test each request; finished ones are freed and reported.
    void poll()
    {
        std::lock_guard<std::mutex> g(mu_);
        for (auto it = items_.begin(); it != items_.end();) {
            gcx_status_t st = gcx_test(it->first);
            if (st == GCX_INPROGRESS) {
                ++it;
                continue;
            }
            gcx_request_free(it->first);
            it->second.set_value(st);
            it = items_.erase(it);
        }
    }

private:
    std::mutex mu_;
    std::deque<std::pair<gcx_request_t *, std::promise<gcx_status_t>>> items_;
};

struct Shared {
    gcx_comm_t             *parent = nullptr;
    gcx_comm_t             *p2p    = nullptr; // one communicator, all threads
    std::atomic<bool>       stop{false};
    std::atomic<long>       progress_calls{0};
    Mailbox                 mailbox;
    std::mutex              turn_mu;
    std::condition_variable turn_cv;
    int                     turn = 0; // which worker may split now
    int                     wrong[kWorkers] = {};
    std::string             why[kWorkers];
};

void note(Shared &sh, int t, const std::string &what)
{
    if (sh.wrong[t]++ == 0) {
        sh.why[t] = what;
    }
}

// Worker t: splits its communicator from the parent in turn (every process
// creates in the same order), runs collectives on it, exchanges messages
// with the neighbouring thread over the shared point-to-point communicator,
// hands some requests to the progress thread, destroys its communicator.
void worker(Shared &sh, int t, int iters)
{
    const int P = world_size(), me = world_rank();
    gcx_comm_t *comm = nullptr;
    {
        std::unique_lock<std::mutex> lk(sh.turn_mu);
        sh.turn_cv.wait(lk, [&] { return sh.turn == t; });
        // keys rotate the ranks: each child has its own rank order
        gcx_status_t st = gcx_comm_split(sh.parent, 0, (me + t) % P, &comm);
        sh.turn++;
        sh.turn_cv.notify_all();
        if (st != GCX_OK) {
            note(sh, t, std::string("split: ") + gcx_strerror(st));
            return;
        }
    }
    const int crank = gcx_comm_rank(comm);
    if (gcx_comm_size(comm) != P || crank != (me + t) % P) {
        note(sh, t, "split ranks");
    }
    // world rank of child rank c: the one whose key (w + t) % P is c
    auto world_of = [&](int c) { return ((c - t) % P + P) % P; };

    const int right = (me + 1) % P, left = (me + P - 1) % P;
    const int from_t = (t + kWorkers - 1) % kWorkers; // who sends to me
    for (int it = 0; it < iters && sh.wrong[t] == 0; ++it) {
        const size_t n = (it % 4 == 0) ? 70001 : (it % 4 == 1) ? 4099 : 33;

        // allreduce, blocking
        std::vector<double> v(n);
        for (size_t i = 0; i < n; ++i) {
            v[i] = value(me, t, it, i);
        }
        gcx_status_t st = gcx_allreduce(comm, GCX_IN_PLACE, v.data(), n,
                                        GCX_DT_F64, GCX_OP_SUM, nullptr);
        if (st != GCX_OK) {
            note(sh, t, std::string("allreduce: ") + gcx_strerror(st));
            break;
        }
        for (size_t i = 0; i < n; ++i) {
            double want = 0;
            for (int r = 0; r < P; ++r) {
                want += value(r, t, it, i);
            }
            if (v[i] != want) {
                note(sh, t, "allreduce result");
                break;
            }
        }

        // broadcast, non-blocking, completed by the progress thread
        const int root = it % P;
        std::vector<double> b(n);
        if (crank == root) {
            for (size_t i = 0; i < n; ++i) {
                b[i] = value(world_of(root), t, it + 1000, i);
            }
        }
        gcx_request_t *req = nullptr;
        st = gcx_broadcast(comm, b.data(), n, GCX_DT_F64, root, &req);
        if (st != GCX_OK) {
            note(sh, t, std::string("broadcast: ") + gcx_strerror(st));
            break;
        }
        st = sh.mailbox.hand(req).get();
        if (st != GCX_OK) {
            note(sh, t, std::string("broadcast wait: ") + gcx_strerror(st));
            break;
        }
        for (size_t i = 0; i < n; ++i) {
            if (b[i] != value(world_of(root), t, it + 1000, i)) {
                note(sh, t, "broadcast result");
                break;
            }
        }

        // thread t of rank r sends to thread t+1 of rank r+1 (tag = sender
        // thread and iteration), over the one shared communicator
        std::vector<double> out(n), in(n, -1.0);
        for (size_t i = 0; i < n; ++i) {
            out[i] = value(me, t, it + 2000, i);
        }
        gcx_request_t *rreq = nullptr, *sreq = nullptr;
        st = gcx_recv(sh.p2p, in.data(), n, GCX_DT_F64, left,
                      from_t * 100000 + it, &rreq);
        if (st == GCX_OK) {
            st = gcx_send(sh.p2p, out.data(), n, GCX_DT_F64, right,
                          t * 100000 + it, &sreq);
        }
        if (st == GCX_OK) {
            st = gcx_wait(rreq);
            gcx_request_free(rreq);
            gcx_status_t st2 = gcx_wait(sreq);
            gcx_request_free(sreq);
            st = st != GCX_OK ? st : st2;
        }
        if (st != GCX_OK) {
            note(sh, t, std::string("send/recv: ") + gcx_strerror(st));
            break;
        }
        for (size_t i = 0; i < n; ++i) {
            if (in[i] != value(left, from_t, it + 2000, i)) {
                note(sh, t, "message content");
                break;
            }
        }

        // allgather, non-blocking, tested here until done
        std::vector<int32_t> mine(8), all(8 * static_cast<size_t>(P));
        for (int k = 0; k < 8; ++k) {
            mine[k] = me * 1000 + t * 100 + k;
        }
        st = gcx_allgather(comm, mine.data(), all.data(), 8, GCX_DT_I32, &req);
        if (st == GCX_OK) {
            while ((st = gcx_test(req)) == GCX_INPROGRESS) {
                std::this_thread::yield();
            }
            gcx_request_free(req);
        }
        if (st != GCX_OK) {
            note(sh, t, std::string("allgather: ") + gcx_strerror(st));
            break;
        }
        for (int c = 0; c < P; ++c) {
            for (int k = 0; k < 8; ++k) {
                if (all[c * 8 + k] != world_of(c) * 1000 + t * 100 + k) {
                    note(sh, t, "allgather result");
                }
            }
        }
    }
    gcx_comm_destroy(comm); // while the others still run
}

void progress_loop(Shared &sh)
{
    while (!sh.stop.load()) {
        sh.mailbox.poll();
        if (gcx_progress_wait(sh.parent) != GCX_OK) {
            break;
        }
        sh.progress_calls++;
    }
    sh.mailbox.poll();
}

} // namespace

// kWorkers threads, each on its own child of one parent, one progress
// thread completing the broadcasts they hand it, messages between threads.
TEST(Threads, WorkersOnSplitChildrenWithAProgressThread)
{
    Shared sh;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &sh.parent));
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &sh.p2p));
    std::thread progress(progress_loop, std::ref(sh));
    std::vector<std::thread> workers;
    for (int t = 0; t < kWorkers; ++t) {
        workers.emplace_back(worker, std::ref(sh), t, 24);
    }
    for (auto &w : workers) {
        w.join();
    }
    sh.stop = true;
    progress.join();
    for (int t = 0; t < kWorkers; ++t) {
        EXPECT_EQ(0, sh.wrong[t]) << "thread " << t << ": " << sh.why[t];
    }
    EXPECT_GT(sh.progress_calls.load(), 0);
    gcx_comm_destroy(sh.p2p);
    EXPECT_EQ(GCX_OK, gcx_barrier(sh.parent, nullptr));
    gcx_comm_destroy(sh.parent);
}

// A split waits for the other ranks' splits; meanwhile another thread of
// the same process must be able to run a collective that a peer needs
// before it can reach its split. Rank 0 splits at once and, a little later,
// joins an allreduce on another communicator; the other ranks do the
// allreduce first and split after it. If the split kept the process's lock
// while it waited, rank 0's allreduce could not start, the others would
// never split, and both would end in GCX_TIMEOUT (10 s here).
TEST(Threads, SplitLetsOtherThreadsRunCollectives)
{
    if (world_size() < 2) {
        GTEST_SKIP() << "needs a peer";
    }
    gcx_comm_t *parent = make_comm({{"TIMEOUT", "10"}});
    gcx_comm_t *other  = make_comm({{"TIMEOUT", "10"}});
    ASSERT_NE(nullptr, parent);
    ASSERT_NE(nullptr, other);

    std::promise<void> reduced;
    gcx_status_t       split_st = GCX_ERR_INVALID, reduce_st = GCX_ERR_INVALID;
    gcx_comm_t        *child    = nullptr;
    int64_t            x        = world_rank() + 1;

    auto splitter = [&] {
        if (world_rank() != 0) {
            reduced.get_future().wait();
        }
        split_st = gcx_comm_split(parent, 0, 0, &child);
    };
    auto reducer = [&] {
        if (world_rank() == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        reduce_st = gcx_allreduce(other, GCX_IN_PLACE, &x, 1, GCX_DT_I64,
                                  GCX_OP_SUM, nullptr);
        reduced.set_value();
    };
    std::thread a(splitter), b(reducer);
    a.join();
    b.join();
    EXPECT_EQ(GCX_OK, reduce_st) << gcx_strerror(reduce_st);
    EXPECT_EQ(GCX_OK, split_st) << gcx_strerror(split_st);
    EXPECT_EQ(static_cast<int64_t>(world_size()) * (world_size() + 1) / 2, x);
    if (child != nullptr) {
        EXPECT_EQ(GCX_OK, gcx_barrier(child, nullptr));
        gcx_comm_destroy(child);
    }
    gcx_comm_destroy(other);
    gcx_comm_destroy(parent);
}

// Communicators created and destroyed on one thread while another keeps
// collectives going on its own communicator: the context's list of
// communicators changes under the progress of the other thread.
TEST(Threads, CreateAndDestroyWhileAnotherThreadRuns)
{
    gcx_comm_t *busy = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &busy));
    std::atomic<bool> done{false};
    int               wrong = 0, rounds = 0;

    std::thread runner([&] {
        for (;;) {
            int64_t x = world_rank();
            if (gcx_allreduce(busy, GCX_IN_PLACE, &x, 1, GCX_DT_I64,
                              GCX_OP_SUM, nullptr) != GCX_OK ||
                x != static_cast<int64_t>(world_size()) * (world_size() - 1) / 2) {
                ++wrong;
                break;
            }
            // every rank runs the same number of rounds: agree to go on
            int64_t go = done.load() && rounds >= 5 ? 0 : 1;
            if (gcx_allreduce(busy, GCX_IN_PLACE, &go, 1, GCX_DT_I64,
                              GCX_OP_MIN, nullptr) != GCX_OK) {
                ++wrong;
                break;
            }
            ++rounds;
            if (go == 0) {
                break;
            }
        }
    });
    for (int i = 0; i < 30; ++i) {
        gcx_comm_t *c = nullptr;
        if (i % 3 == 0) {
            c = make_comm({});
        } else {
            ASSERT_EQ(GCX_OK, i % 3 == 1 ? gcx_comm_dup(g_world, &c)
                                         : gcx_comm_split(g_world, world_rank() % 2,
                                                          0, &c));
        }
        ASSERT_NE(nullptr, c);
        EXPECT_EQ(GCX_OK, gcx_barrier(c, nullptr));
        gcx_comm_destroy(c);
    }
    done = true;
    runner.join();
    EXPECT_EQ(0, wrong);
    gcx_comm_destroy(busy);
}

// The master-less coded allreduce with one progress thread per process
// (torch_gcx's keeper, gcx-train's): the last rank sleeps before it enters
// every other round, without a gcx call from its main thread, while its
// progress thread serves its chunks ahead (the context's progress callback
// runs on that thread, the round's own progress on the main one); a round
// found ready is abstained from. FR with s = n - 1 (every worker holds
// every partition): every round is the exact serial sum.
TEST(Threads, MasterlessRoundsServedAheadByAProgressThread)
{
    int n = gcx_comm_size(g_world), rank = gcx_comm_rank(g_world);
    if (n < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    gcx_comm_t *comm = nullptr;
    ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comm));
    gcx_code_params_t cp = {};
    cp.kind              = GCX_CODE_FR;
    cp.n                 = n;
    cp.s                 = n - 1;
    gcx_code_t *code     = nullptr;
    ASSERT_EQ(GCX_OK, gcx_code_create(&cp, &code));
    gcx_coded_params_t params = {};
    params.code               = code;
    params.count              = 4099;
    gcx_coded_allreduce_t *car = nullptr;
    ASSERT_EQ(GCX_OK, gcx_coded_allreduce_create(comm, &params, &car));
    std::atomic<bool> stop{false};
    std::thread       keeper([&] {
        while (!stop.load()) {
            (void)gcx_progress(comm);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    });
    std::vector<int>    parts(static_cast<size_t>(n));
    std::vector<double> coeffs(static_cast<size_t>(n));
    int                 nparts = 0, wrong = 0, abstained = 0;
    ASSERT_EQ(GCX_OK, gcx_code_assignment(code, rank, parts.data(), coeffs.data(), &nparts));
    std::vector<float> msg(params.count), sum(params.count);
    for (int r = 0; r < 20; ++r) {
        if (rank == n - 1 && r % 2 == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        int ready = 0;
        ASSERT_EQ(GCX_OK, gcx_coded_allreduce_ready(car, &ready));
        if (ready) {
            ASSERT_EQ(GCX_OK, gcx_coded_allreduce_abstain(car, sum.data(), nullptr, nullptr));
            ++abstained;
        } else {
            for (size_t i = 0; i < params.count; ++i) {
                double m = 0;
                for (int k = 0; k < nparts; ++k) {
                    m += coeffs[static_cast<size_t>(k)] * value(parts[static_cast<size_t>(k)], 0, r, i);
                }
                msg[i] = static_cast<float>(m);
            }
            ASSERT_EQ(GCX_OK, gcx_coded_allreduce(car, msg.data(), sum.data(), nullptr, nullptr));
        }
        for (size_t i = 0; i < params.count; ++i) {
            double want = 0;
            for (int p = 0; p < n; ++p) {
                want += value(p, 0, r, i);
            }
            wrong += sum[i] != static_cast<float>(want);
        }
    }
    stop = true;
    keeper.join();
    EXPECT_EQ(0, wrong);
    printf("rank %d: abstained from %d of 20 rounds\n", rank, abstained);
    gcx_coded_allreduce_destroy(car);
    gcx_code_destroy(code);
    EXPECT_EQ(GCX_OK, gcx_barrier(comm, nullptr));
    gcx_comm_destroy(comm);
}

