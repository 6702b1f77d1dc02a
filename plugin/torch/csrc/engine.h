// engine.h - the one progress engine of the process: every gcx call of the
// torch plugin (communicator creation and destruction included) is made by
// one thread, which issues jobs in FIFO order and polls their requests.
//
// Idea: the Python-facing methods only build a Job and enqueue it; the order
// of enqueueing is the order of issue, so every rank issues the collectives
// of a group in the same order (gcx's rule). A second thread, the completer,
// runs each job's done() (copy-out, marking the Work and its Future, user
// callbacks) with no plugin lock held, so a callback can never stall the
// engine. A callback may itself issue a collective and wait for it (torch's
// PowerSGD hook does): when a completer thread submits a job and no other
// completer is idle, one more completer is started, so the nested job can
// complete while the outer callback waits (one extra thread per level of
// nesting, kept until shutdown). Cost: one mutex + condition variable
// hand-off per job and per
// completion; while idle both threads sleep on condition variables (no
// polling); while requests are in flight the engine polls gcx_test and,
// between polls that finished nothing, waits as gcx_wait() does
// (gcx_progress_wait: with GCX_PROGRESS_SLEEP=y on TCP it sleeps on the
// transport's events, else it yields).
#pragma once

#include <gcx/gcx.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace torch_gcx {

struct Job {
    std::string name; // for messages: "allreduce", "comm_create", ...
    // Runs on the engine thread: issues non-blocking gcx calls, appending
    // their requests to reqs. A status other than GCX_OK ends the job at
    // once with that status (requests already issued are still waited for).
    // It may also do blocking work (creation) and issue nothing.
    std::function<gcx_status_t(std::vector<gcx_request_t *> &reqs)> start;
    // Runs on the completer thread with the job's final status (the first
    // error of its requests, or GCX_OK), holding no plugin lock.
    std::function<void(gcx_status_t status)> done;
    // Optional: runs on the engine thread for each request that completed
    // (with its status), before the request is freed (e.g. to read the
    // source of an any-source receive).
    std::function<void(gcx_request_t *req, gcx_status_t status)> on_request;
    // Optional: runs on the engine thread when the job is over (any
    // status, cancellation included), before done() is handed to the
    // completer. Must be quick and must not block: it may not depend on a
    // completer (a stream-mode staged chunk opens its gate here, so a
    // completer blocked on the device can never hold a gate shut).
    std::function<void(gcx_status_t status)> settled;
    // Optional: the job is issued only once ready() returns true (the
    // host copy of a staged chunk has landed, staging.cc). The engine keeps
    // FIFO order: jobs behind a job that is not ready wait for it, while
    // the requests already in flight keep progressing.
    std::function<bool()> ready;
    // ready() turns true only together with a poke() (a Place): while
    // nothing is in flight the engine sleeps until then instead of polling
    bool ready_pokes = false;
    // The communicator the job uses; a job with destroys_comm set first
    // cancels (frees) the requests still in flight on it, since
    // gcx_comm_destroy() invalidates them.
    gcx_comm_t *comm   = nullptr;
    bool destroys_comm = false;
    // done() runs on the engine thread itself (only for run_sync, whose
    // done() just fulfils a promise), so that a caller waiting with the GIL
    // held (a destructor) never depends on the completer thread.
    bool inline_done = false;

    // engine-private
    std::vector<gcx_request_t *> reqs;
    gcx_status_t status = GCX_OK;
};

class Engine {
  public:
    // The process's engine, started on first use. Never destroyed: it is
    // stopped by shutdown() (atexit of torch_gcx), so no static destructor
    // joins threads at exit.
    static Engine &get();
    // The engine if get() has started it, else nullptr (starts nothing).
    static Engine *existing();

    // Enqueue a job; throws if the engine has been shut down.
    void submit(std::shared_ptr<Job> job);

    // Run fn on the engine thread and wait for it (the caller must not hold
    // the GIL). Used for creation and destruction of communicators.
    void run_sync(const std::string &name, std::function<void()> fn,
                  gcx_comm_t *destroys = nullptr);

    // Stop both threads: queued jobs fail with GCX_ERR_CANCELED, in-flight
    // requests are freed (which cancels them and fails their communicator),
    // their jobs fail with GCX_ERR_CANCELED. Idempotent; never hangs on the
    // network.
    void shutdown();

    bool running();

    // Wake the engine: a job's ready() (ready_pokes) may have turned true.
    void poke();

  private:
    Engine();
    void engine_loop();
    void completer_loop();
    void complete(std::shared_ptr<Job> job);

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    bool stop_  = false;
    bool poked_ = false;

    std::mutex cmu_;
    std::condition_variable ccv_;
    std::deque<std::shared_ptr<Job>> done_;
    bool cstop_ = false;
    int idle_completers_ = 0;              // waiting for work (under cmu_)
    std::vector<std::thread> completers_;  // grows by nesting (under cmu_)

    std::thread engine_;
    std::mutex shutdown_mu_;
    bool joined_ = false;
};

// A place in the engine's line, taken now; its job is given later (fill),
// from any thread, or never (cancel: it completes having issued nothing).
// The jobs behind it wait for it (FIFO), so a job built on another thread
// keeps, on every rank, the order in which its place was taken: the hooks'
// device path takes its bucket's place on DDP's thread, in bucket order,
// and fills it on its issuer thread once the staging copy has landed; a
// collective DDP calls in between (its unused-parameter allreduce) stays
// behind it. Cost: one job; while the engine has nothing else in flight it
// sleeps until the fill (poke) instead of polling.
class Place {
  public:
    Place(const std::string &name, gcx_comm_t *comm);
    // the placeholder to submit, once
    std::shared_ptr<Job> placeholder() const { return placeholder_; }
    // give the job (its start, done and on_request run in the place); once
    void fill(std::shared_ptr<Job> job);
    // complete the place issuing nothing, unless it was filled
    void cancel();

  private:
    struct State {
        std::mutex mu;
        std::shared_ptr<Job> job; // null: cancelled
        std::atomic<bool> given{false};
    };
    std::shared_ptr<State> state_;
    std::shared_ptr<Job> placeholder_;
    void give(std::shared_ptr<Job> job);
};

// "gcx_allreduce failed: GCX_ERR_MISMATCH (ranks disagree ...)"
std::string status_message(const std::string &what, gcx_status_t status);
const char *status_name(gcx_status_t status);

} // namespace torch_gcx
