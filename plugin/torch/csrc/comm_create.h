// comm_create.h - how a group's gcx communicator is made (comm_create.cc):
// the default group's over its c10d Store, a later group of a gcx default
// group by its members from the default group's communicator.
#pragma once

#include <gcx/gcx.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_gcx {

// What torch's creator receives for a group.
struct GroupSpec {
    c10::intrusive_ptr<c10d::Store> store;
    int rank;
    int size;
    double timeout_s;                  // becomes GCX_TIMEOUT
    std::vector<int64_t> global_ranks; // in the default group; empty: it is
    std::string name;                  // torch's group name
    bool from_default;                 // may come from the default group's
};

// Make the group's communicator; on the engine thread. *how becomes
// "create_group" or "store". Throws, naming the gcx call and status.
gcx_comm_t *create_group_comm(const GroupSpec &spec, std::string *how);

// The communicator is about to be destroyed (engine thread): if it is the
// default group's, later groups go over their Store.
void forget_group_comm(gcx_comm_t *comm);

// A shrink made child from parent (engine thread): if parent is the
// default group's, child is (torch makes the shrunk group the default), so
// later groups are made from it.
void adopt_group_comm(gcx_comm_t *parent, gcx_comm_t *child);

} // namespace torch_gcx
