// backend.h - what the rest of the plugin (the DDP hooks, hooks.cc) needs
// of the gcx backend (backend.cc): find it behind a process group and run a
// job of several gcx calls on its communicator through the engine, in the
// group's FIFO order like every other operation.
#pragma once

#include "engine.h"

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <string>
#include <vector>

namespace torch_gcx {

// Issue helper inside a job's start(): one non-blocking gcx call whose
// request goes to reqs; a failed call ends start() with its status.
#define GCX_ISSUE(_call)                                                       \
    do {                                                                       \
        gcx_request_t *r_ = nullptr;                                           \
        gcx_status_t s_   = (_call);                                           \
        if (s_ != GCX_OK) {                                                    \
            return s_;                                                         \
        }                                                                      \
        reqs.push_back(r_);                                                    \
    } while (0)

// Runs on the engine thread: issue the job's gcx calls on the communicator.
using StartFn =
    std::function<gcx_status_t(gcx_comm_t *, std::vector<gcx_request_t *> &)>;

class GcxBackend;

// The gcx backend behind a process group's CPU backend; raises, naming the
// backend found, when it is not gcx.
GcxBackend &as_gcx(const c10::intrusive_ptr<c10d::Backend> &backend);

// Enqueue a job: start() on the engine thread, then, when all its requests
// completed without error, post() on the completer thread, then the Work
// (and its Future, whose value is `outputs`) completes. On an error post()
// does not run and the Work fails with the gcx status named.
c10::intrusive_ptr<c10d::Work> submit_composite(GcxBackend &backend,
                                                const std::string &name,
                                                std::vector<at::Tensor> outputs,
                                                StartFn start,
                                                std::function<void()> post,
                                                c10d::OpType type =
                                                    c10d::OpType::UNKNOWN,
                                                Place *place = nullptr);

// Take a place in the engine's line now for a submit_composite given
// later with it, from any thread (engine.h, Place).
std::shared_ptr<Place> reserve_place(GcxBackend &backend,
                                     const std::string &name);

int group_size(const GcxBackend &backend);

// sparse_allreduce.cc: all_reduce of a sparse COO tensor (float32 values,
// SUM or AVG); the tensor is replaced by the coalesced sum.
c10::intrusive_ptr<c10d::Work>
sparse_allreduce(GcxBackend &backend, at::Tensor &tensor,
                 const c10d::AllreduceOptions &opts);

// hooks.cc: the classes behind torch_gcx.hooks (it calls bind_coded too)
void bind_hooks(pybind11::module_ &m);

// coded.cc: the classes behind torch_gcx.coded
void bind_coded(pybind11::module_ &m);

} // namespace torch_gcx
