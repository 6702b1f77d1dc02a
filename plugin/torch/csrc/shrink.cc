// shrink.cc - the survivors of a failure agree on who is left and get a
// communicator of them: gcx_comm_shrink_ranks (libgcx's flooding consensus,
// ULFM's MPI_Comm_shrink), which tells each member only its own new rank,
// then one allgather of the members' old ranks over the new communicator,
// so each survivor knows whom the group lost (torch keeps its group's
// ranks by global rank). Cost: the agreement (two rounds of n(n-1) small
// messages when the deaths are known before it, one more per death during
// it) and an allgather of one int32 per member.
#include "shrink.h"

#include "engine.h"

#include <torch/extension.h>

#include <algorithm>
#include <set>

namespace torch_gcx {

std::vector<int> check_exclude(const std::vector<int64_t> &ranks, int rank,
                               int size)
{
    std::set<int> seen;
    for (int64_t r : ranks) {
        TORCH_CHECK(r >= 0 && r < size, "gcx shrink: rank ", r,
                    " in ranks_to_exclude is out of range for a group of ",
                    size);
        TORCH_CHECK(r != rank, "gcx shrink: rank ", r,
                    " excludes itself (a rank that leaves does not call "
                    "shrink; only the ranks that stay do)");
        TORCH_CHECK(seen.insert(static_cast<int>(r)).second,
                    "gcx shrink: rank ", r,
                    " is listed twice in ranks_to_exclude");
    }
    TORCH_CHECK(static_cast<int>(seen.size()) < size,
                "gcx shrink: ranks_to_exclude leaves no rank of ", size);
    return std::vector<int>(seen.begin(), seen.end());
}

Shrunk shrink_comm(gcx_comm_t *parent, int rank,
                   const std::vector<int> &exclude, int flags)
{
    TORCH_CHECK(parent != nullptr,
                "gcx shrink: the process group has been shut down");
    Shrunk out;
    gcx_status_t st = gcx_comm_shrink_ranks(
        parent, exclude.empty() ? nullptr : exclude.data(),
        static_cast<int>(exclude.size()), flags, &out.comm);
    if (st != GCX_OK) {
        throw std::runtime_error(status_message("gcx_comm_shrink_ranks", st));
    }
    int32_t me = rank;
    std::vector<int32_t> all(static_cast<size_t>(gcx_comm_size(out.comm)));
    st = gcx_allgather(out.comm, &me, all.data(), 1, GCX_DT_I32, nullptr);
    if (st != GCX_OK) {
        gcx_comm_destroy(out.comm);
        throw std::runtime_error(
            status_message("gcx_allgather (who survived the shrink)", st));
    }
    out.members.assign(all.begin(), all.end());
    return out;
}

std::vector<int> left_out(const Shrunk &s, int size)
{
    std::vector<int> out;
    for (int r = 0; r < size; ++r) {
        if (std::find(s.members.begin(), s.members.end(), r) ==
            s.members.end()) {
            out.push_back(r);
        }
    }
    return out;
}

std::string rank_list(const std::vector<int> &ranks)
{
    std::string s = "[";
    for (size_t i = 0; i < ranks.size(); ++i) {
        s += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return s + "]";
}

} // namespace torch_gcx
