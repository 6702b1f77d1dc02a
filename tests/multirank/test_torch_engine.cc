// The torch plugin's progress engine (plugin/torch/csrc/engine.{h,cc})
// without torch: engine.cc includes only gcx.h and the C++ library, so it
// is compiled into this test as it is (included below), and the ThreadSanitizer pass of
// scripts/test.sh (suite 'threads') checks its engine thread, its
// completers (one more starting when a callback submits and waits, as
// torch's PowerSGD hook does) and the submitting threads for data races.
// Cost: a few hundred small allreduces, about a second.
#include "harness.h"

// the plugin's engine, compiled into this test as it is
#include "../../plugin/torch/csrc/engine.cc"

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

using torch_gcx::Engine;
using torch_gcx::Job;

namespace {

// An allreduce(SUM) of v as a job; done() checks the sum over ranks of
// base + rank, then calls `then`.
std::shared_ptr<Job> allreduce_job(gcx_comm_t *comm,
                                   std::shared_ptr<std::vector<int64_t>> v,
                                   int64_t base, std::atomic<int> *wrong,
                                   std::function<void(gcx_status_t)> then)
{
    auto job   = std::make_shared<Job>();
    job->name  = "allreduce";
    job->comm  = comm;
    job->start = [comm, v](std::vector<gcx_request_t *> &reqs) {
        gcx_request_t *req = nullptr;
        gcx_status_t   st  = gcx_allreduce(comm, GCX_IN_PLACE, v->data(),
                                           v->size(), GCX_DT_I64, GCX_OP_SUM,
                                           &req);
        if (st == GCX_OK) {
            reqs.push_back(req);
        }
        return st;
    };
    job->done = [v, base, wrong, then](gcx_status_t st) {
        const int64_t P = world_size();
        for (size_t i = 0; st == GCX_OK && i < v->size(); ++i) {
            const int64_t want = P * (base + static_cast<int64_t>(i)) + P * (P - 1) / 2;
            if ((*v)[i] != want) {
                ++*wrong;
                break;
            }
        }
        if (st != GCX_OK) {
            ++*wrong;
        }
        then(st);
    };
    return job;
}

std::shared_ptr<std::vector<int64_t>> input(size_t n, int64_t base)
{
    auto v = std::make_shared<std::vector<int64_t>>(n);
    for (size_t i = 0; i < n; ++i) {
        (*v)[i] = base + static_cast<int64_t>(i) + world_rank();
    }
    return v;
}

} // namespace

// Two submitting threads, each on its own communicator (gcx's order rule
// holds per communicator); every third completion submits a nested job from
// its callback and waits for it there; creation, destruction and shutdown
// through the engine.
TEST(TorchEngine, SubmittersCompletersAndNestedJobs)
{
    Engine &engine = Engine::get();
    gcx_comm_t *comms[2] = {nullptr, nullptr};
    engine.run_sync("comm_create", [&] {
        ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comms[0]));
        ASSERT_EQ(GCX_OK, gcx_comm_dup(g_world, &comms[1]));
    });
    ASSERT_NE(nullptr, comms[0]);
    ASSERT_NE(nullptr, comms[1]);

    std::atomic<int> wrong{0}, nested{0};
    constexpr int    kJobs = 60;
    auto submitter = [&](int t) {
        gcx_comm_t *comm = comms[t];
        std::vector<std::future<void>> futures;
        for (int j = 0; j < kJobs; ++j) {
            auto promise = std::make_shared<std::promise<void>>();
            futures.push_back(promise->get_future());
            const int64_t base = 1000 * t + j;
            const size_t  n    = (j % 5 == 0) ? 20000 : 17;
            bool nest = j % 3 == 0;
            engine.submit(allreduce_job(
                comm, input(n, base), base, &wrong,
                [&, comm, promise, nest, base](gcx_status_t) {
                    if (nest) {
                        // a callback that issues a collective and waits for
                        // it (the completer that runs it is busy meanwhile);
                        // its order on the communicator is the callback's,
                        // the same on every rank
                        auto inner = std::make_shared<std::promise<void>>();
                        auto f     = inner->get_future();
                        engine.submit(allreduce_job(
                            comm, input(5, -base), -base, &wrong,
                            [inner](gcx_status_t) { inner->set_value(); }));
                        f.wait();
                        ++nested;
                    }
                    promise->set_value();
                }));
            if (nest) {
                // the nested job must be issued before this thread's next
                // one on every rank: wait for this job's callback first
                futures.back().wait();
            }
        }
        for (auto &f : futures) {
            f.wait();
        }
    };
    std::thread a(submitter, 0), b(submitter, 1);
    a.join();
    b.join();
    EXPECT_EQ(0, wrong.load());
    EXPECT_EQ(2 * ((kJobs + 2) / 3), nested.load());

    engine.run_sync("comm_destroy", [&] { gcx_comm_destroy(comms[0]); },
                    comms[0]);
    engine.run_sync("comm_destroy", [&] { gcx_comm_destroy(comms[1]); },
                    comms[1]);
    engine.shutdown();
    EXPECT_FALSE(engine.running());
}
