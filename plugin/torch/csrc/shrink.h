// shrink.h - shrinking a group's gcx communicator to the survivors of a
// failure (shrink.cc), for GcxBackend::shrink() and the agreement that
// torch_gcx.elastic runs first to learn who is gone.
#pragma once

#include <gcx/gcx.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_gcx {

// A new communicator of the survivors and who they are.
struct Shrunk {
    gcx_comm_t *comm = nullptr;
    std::vector<int> members; // their ranks in the parent, in new-rank order
};

// torch's ranks_to_exclude of a group of `size` in which this process is
// `rank`, checked (in range, each once, not this rank, not every rank) and
// sorted; raises naming the bad entry.
std::vector<int> check_exclude(const std::vector<int64_t> &ranks, int rank,
                               int size);

// On the engine thread: gcx_comm_shrink_ranks(parent, exclude, flags), then
// one gcx_allgather of each member's parent rank over the new communicator
// (gcx tells a member its new rank, not the others' old ones). Throws,
// naming the gcx call and its status; the new communicator is destroyed
// when the allgather fails.
Shrunk shrink_comm(gcx_comm_t *parent, int rank,
                   const std::vector<int> &exclude, int flags);

// The parent ranks of a group of `size` that are not members, ascending.
std::vector<int> left_out(const Shrunk &s, int size);

// "[1, 3]"
std::string rank_list(const std::vector<int> &ranks);

} // namespace torch_gcx
