// engine.cc - the progress engine and the completer thread (see engine.h).
//
// Cost per job: two lock hand-offs (submit, completion); per poll round one
// gcx_test per unfinished request (each test progresses the whole process,
// so rounds are cheap when little is in flight).
#include "engine.h"

#include <atomic>
#include <future>
#include <stdexcept>

namespace torch_gcx {

const char *status_name(gcx_status_t status)
{
    switch (status) {
    case GCX_OK: return "GCX_OK";
    case GCX_INPROGRESS: return "GCX_INPROGRESS";
    case GCX_ERR_INVALID: return "GCX_ERR_INVALID";
    case GCX_ERR_NOMEM: return "GCX_ERR_NOMEM";
    case GCX_ERR_TIMEOUT: return "GCX_ERR_TIMEOUT";
    case GCX_ERR_PEER: return "GCX_ERR_PEER";
    case GCX_ERR_MISMATCH: return "GCX_ERR_MISMATCH";
    case GCX_ERR_TRANSPORT: return "GCX_ERR_TRANSPORT";
    case GCX_ERR_UNSUPPORTED: return "GCX_ERR_UNSUPPORTED";
    case GCX_ERR_NOT_FOUND: return "GCX_ERR_NOT_FOUND";
    case GCX_ERR_IO: return "GCX_ERR_IO";
    case GCX_ERR_RANGE: return "GCX_ERR_RANGE";
    case GCX_ERR_UNDECODABLE: return "GCX_ERR_UNDECODABLE";
    case GCX_ERR_CANCELED: return "GCX_ERR_CANCELED";
    case GCX_ERR_REVOKED: return "GCX_ERR_REVOKED";
    }
    return "GCX_ERR_?";
}

std::string status_message(const std::string &what, gcx_status_t status)
{
    return "gcx " + what + " failed: " + status_name(status) + " (" +
           gcx_strerror(status) + ")";
}

static std::atomic<Engine *> the_engine{nullptr};

// Set on completer threads: a job submitted from one comes from a callback,
// which may wait for it (see engine.h).
static thread_local bool tl_in_completer = false;

// Enough for any nesting of callbacks a hook builds; beyond it a callback
// that waits on a nested job waits for a busy completer to free up.
static constexpr size_t kMaxCompleters = 32;

Engine &Engine::get()
{
    // leaked on purpose: threads are joined by shutdown(), not by a static
    // destructor running after the interpreter is gone
    static Engine *engine = new Engine();
    the_engine.store(engine);
    return *engine;
}

Engine *Engine::existing()
{
    return the_engine.load();
}

Engine::Engine()
{
    engine_ = std::thread([this] { engine_loop(); });
    std::lock_guard<std::mutex> lk(cmu_);
    completers_.emplace_back([this] { completer_loop(); });
}

bool Engine::running()
{
    std::lock_guard<std::mutex> lk(mu_);
    return !stop_;
}

void Engine::submit(std::shared_ptr<Job> job)
{
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_) {
            throw std::runtime_error("torch_gcx: the gcx engine has been shut "
                                     "down; cannot run " + job->name);
        }
        queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    if (tl_in_completer) {
        // from a callback, which may wait for this job: make sure a
        // completer is free to complete it
        std::lock_guard<std::mutex> lk(cmu_);
        if (idle_completers_ == 0 && !cstop_ &&
            completers_.size() < kMaxCompleters) {
            completers_.emplace_back([this] { completer_loop(); });
        }
    }
}

void Engine::poke()
{
    {
        std::lock_guard<std::mutex> lk(mu_);
        poked_ = true;
    }
    cv_.notify_one();
}

Place::Place(const std::string &name, gcx_comm_t *comm)
    : state_(std::make_shared<State>()), placeholder_(std::make_shared<Job>())
{
    std::shared_ptr<State> st = state_;
    placeholder_->name        = name;
    placeholder_->comm        = comm;
    placeholder_->ready_pokes = true;
    placeholder_->ready = [st] { return st->given.load(); };
    // ready() was true: the job (or none) is there; read it under the lock
    auto job_of = [st] {
        std::lock_guard<std::mutex> lk(st->mu);
        return st->job;
    };
    placeholder_->start = [job_of](std::vector<gcx_request_t *> &reqs) {
        std::shared_ptr<Job> job = job_of();
        return job ? job->start(reqs) : GCX_OK;
    };
    placeholder_->on_request = [job_of](gcx_request_t *req, gcx_status_t s) {
        std::shared_ptr<Job> job = job_of();
        if (job && job->on_request) {
            job->on_request(req, s);
        }
    };
    placeholder_->settled = [job_of](gcx_status_t status) {
        std::shared_ptr<Job> job = job_of();
        if (job && job->settled) {
            job->settled(status);
        }
    };
    placeholder_->done = [job_of](gcx_status_t status) {
        std::shared_ptr<Job> job = job_of();
        if (job) {
            job->done(status);
        }
    };
}

void Place::give(std::shared_ptr<Job> job)
{
    {
        std::lock_guard<std::mutex> lk(state_->mu);
        if (state_->given.load()) {
            if (job) {
                throw std::logic_error("torch_gcx: a place in the engine's "
                                       "line was filled twice");
            }
            return; // cancel after fill: nothing to do
        }
        state_->job = std::move(job);
        state_->given.store(true);
    }
    if (Engine *e = Engine::existing()) {
        e->poke();
    }
}

void Place::fill(std::shared_ptr<Job> job) { give(std::move(job)); }

void Place::cancel() { give(nullptr); }

void Engine::run_sync(const std::string &name, std::function<void()> fn,
                      gcx_comm_t *destroys)
{
    auto promise = std::make_shared<std::promise<void>>();
    auto future  = promise->get_future();
    auto job     = std::make_shared<Job>();
    auto error   = std::make_shared<std::exception_ptr>();

    job->name          = name;
    job->comm          = destroys;
    job->destroys_comm = destroys != nullptr;
    job->inline_done   = true;
    job->start = [fn, error](std::vector<gcx_request_t *> &) {
        try {
            fn();
        } catch (...) {
            *error = std::current_exception();
        }
        return GCX_OK;
    };
    job->done = [promise, error, name](gcx_status_t status) {
        if (*error) {
            promise->set_exception(*error);
        } else if (status != GCX_OK) {
            promise->set_exception(std::make_exception_ptr(
                std::runtime_error(status_message(name, status))));
        } else {
            promise->set_value();
        }
    };
    submit(job);
    future.get();
}

void Engine::complete(std::shared_ptr<Job> job)
{
    if (job->settled) {
        try {
            job->settled(job->status);
        } catch (...) {
            // settled() does not throw by design; done() still runs
        }
    }
    if (job->inline_done) {
        job->done(job->status); // fulfils a promise; takes no lock of ours
        return;
    }
    {
        std::lock_guard<std::mutex> lk(cmu_);
        done_.push_back(std::move(job));
    }
    ccv_.notify_one();
}

static void free_requests(Job &job, gcx_status_t status)
{
    for (auto &req : job.reqs) {
        if (req != nullptr) {
            gcx_request_free(req); // cancels one still in progress
            req = nullptr;
        }
    }
    if (job.status == GCX_OK) {
        job.status = status;
    }
}

void Engine::engine_loop()
{
    std::vector<std::shared_ptr<Job>> inflight;
    // jobs taken from the queue, not issued yet: the first waits for its
    // ready() (a staged chunk), the others for it (FIFO)
    std::deque<std::shared_ptr<Job>> waiting;

    for (;;) {
        std::deque<std::shared_ptr<Job>> fresh;
        bool stopping;
        {
            std::unique_lock<std::mutex> lk(mu_);
            if (inflight.empty() && waiting.empty()) {
                // idle: sleep until a job or the stop comes
                cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
            }
            stopping = stop_;
            for (auto &job : queue_) {
                waiting.push_back(std::move(job));
            }
            queue_.clear();
        }
        // issue in order, up to the first job that is not ready
        while (!waiting.empty() && !stopping) {
            const auto &head = waiting.front();
            bool ok = true;
            if (head->ready) {
                try {
                    ok = head->ready();
                } catch (...) {
                    ok = true; // start() then fails the job
                }
            }
            if (!ok) {
                break;
            }
            fresh.push_back(head);
            waiting.pop_front();
        }
        if (stopping) {
            for (auto &job : waiting) {
                fresh.push_back(job);
            }
            waiting.clear();
            for (auto &job : fresh) {
                job->status = GCX_ERR_CANCELED;
                complete(job);
            }
            for (auto &job : inflight) {
                free_requests(*job, GCX_ERR_CANCELED);
                complete(job);
            }
            break;
        }

        bool progressed = !fresh.empty();
        for (auto &job : fresh) {
            if (job->destroys_comm) {
                for (size_t i = 0; i < inflight.size();) {
                    if (inflight[i]->comm != job->comm) {
                        ++i;
                        continue;
                    }
                    free_requests(*inflight[i], GCX_ERR_CANCELED);
                    complete(inflight[i]);
                    inflight.erase(inflight.begin() + static_cast<long>(i));
                }
            }
            gcx_status_t st;
            try {
                st = job->start(job->reqs);
            } catch (...) {
                st = GCX_ERR_INVALID; // start() does not throw by design
            }
            job->status = st;
            if (job->reqs.empty()) {
                complete(job);
            } else {
                inflight.push_back(job);
            }
        }

        for (size_t i = 0; i < inflight.size();) {
            Job &job     = *inflight[i];
            bool pending = false;
            for (auto &req : job.reqs) {
                if (req == nullptr) {
                    continue;
                }
                gcx_status_t st = gcx_test(req);
                if (st == GCX_INPROGRESS) {
                    pending = true;
                    continue;
                }
                if (job.on_request) {
                    job.on_request(req, st);
                }
                gcx_request_free(req);
                req = nullptr;
                if (st != GCX_OK && job.status == GCX_OK) {
                    job.status = st;
                }
            }
            if (pending) {
                ++i;
                continue;
            }
            progressed = true;
            complete(inflight[i]);
            inflight.erase(inflight.begin() + static_cast<long>(i));
        }
        if (!progressed && !waiting.empty() && inflight.empty() &&
            waiting.front()->ready_pokes) {
            // a place not filled yet, nothing else to do: sleep until its
            // fill (or a new job, or the stop) pokes
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [this] { return stop_ || poked_ || !queue_.empty(); });
            poked_ = false;
        } else if (!progressed && !waiting.empty()) {
            // a staged chunk's copy is still landing: poll it soon (never
            // sleep on the transport, which would not wake for it)
            if (!inflight.empty()) {
                (void)gcx_progress(inflight.front()->comm);
            }
            std::this_thread::yield();
        } else if (!progressed && !inflight.empty()) {
            // in flight, nothing finished: wait as gcx_wait() would (sleep
            // on the transport with GCX_PROGRESS_SLEEP, else yield)
            gcx_progress_wait(inflight.front()->comm);
        }
    }

    {
        std::lock_guard<std::mutex> lk(cmu_);
        cstop_ = true;
    }
    ccv_.notify_all();
}

void Engine::completer_loop()
{
    tl_in_completer = true;
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::unique_lock<std::mutex> lk(cmu_);
            ++idle_completers_;
            ccv_.wait(lk, [this] { return cstop_ || !done_.empty(); });
            --idle_completers_;
            if (done_.empty()) {
                return; // stopped and drained
            }
            job = std::move(done_.front());
            done_.pop_front();
        }
        // no plugin lock held here: done() marks the Work and its Future,
        // which runs the user's callbacks
        try {
            if (job->done) {
                job->done(job->status);
            }
        } catch (...) {
            // a callback's exception is the Future's business, not ours
        }
    }
}

void Engine::shutdown()
{
    std::lock_guard<std::mutex> slk(shutdown_mu_);
    if (joined_) {
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_one();
    // called from the engine or a completer thread itself (a callback at
    // exit): detach instead of joining ourselves
    bool self = engine_.get_id() == std::this_thread::get_id() ||
                tl_in_completer;
    if (self) {
        engine_.detach();
    } else {
        engine_.join(); // it stops the completers (cstop_) on its way out
    }
    std::vector<std::thread> completers;
    {
        std::lock_guard<std::mutex> lk(cmu_);
        completers.swap(completers_); // no more are started after cstop_
    }
    for (auto &t : completers) {
        if (self) {
            t.detach();
        } else {
            t.join();
        }
    }
    joined_ = true;
}

} // namespace torch_gcx
