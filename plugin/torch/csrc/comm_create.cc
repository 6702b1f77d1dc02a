// comm_create.cc - a group's gcx communicator (comm_create.h).
//
// Idea: torch calls the creator on the group's members only. The default
// group's communicator is made with gcx_comm_create and an OOB allgather
// over its c10d Store (never a second rendezvous port); a later group of a
// gcx default group is made by its members alone from that communicator
// with gcx_comm_create_group (a split would need every rank). Cost: the
// Store path is two OOB rounds of Store set/get per creation (a round trip
// to the Store's server each); the create_group path one gcx exchange of
// ceil(log2 n) rounds over endpoints the process already has.
#include "comm_create.h"
#include "engine.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

extern char **environ;

namespace torch_gcx {

namespace {

// ---- bootstrap: the OOB allgather over the group's c10d Store ------------

struct OobCtx {
    c10::intrusive_ptr<c10d::Store> store;
    std::string prefix; // unique per backend instance on this store
    int rank      = 0;
    int size      = 0;
    uint64_t call = 0;  // one key space per allgather call
    std::string error;  // what the store said, when it failed
};

gcx_status_t oob_allgather(const void *sendbuf, void *recvbuf, size_t len,
                           void *vctx)
{
    auto *ctx = static_cast<OobCtx *>(vctx);
    try {
        std::string base = ctx->prefix + "/" + std::to_string(ctx->call++);
        auto *src        = static_cast<const uint8_t *>(sendbuf);
        ctx->store->set(base + "/" + std::to_string(ctx->rank),
                        std::vector<uint8_t>(src, src + len));
        for (int r = 0; r < ctx->size; ++r) {
            auto v = ctx->store->get(base + "/" + std::to_string(r));
            if (v.size() != len) {
                ctx->error = "rank " + std::to_string(r) + " contributed " +
                             std::to_string(v.size()) + " bytes, expected " +
                             std::to_string(len);
                return GCX_ERR_MISMATCH;
            }
            if (len > 0) {
                std::memcpy(static_cast<uint8_t *>(recvbuf) + r * len,
                            v.data(), len);
            }
        }
        // the last rank to have read everything removes the keys
        if (ctx->store->add(base + "/read", 1) == ctx->size) {
            for (int r = 0; r < ctx->size; ++r) {
                ctx->store->deleteKey(base + "/" + std::to_string(r));
            }
            ctx->store->deleteKey(base + "/read");
        }
        return GCX_OK;
    } catch (const std::exception &e) {
        ctx->error = std::string("c10d Store: ") + e.what();
        return std::strstr(e.what(), "imeout") != nullptr ? GCX_ERR_TIMEOUT
                                                           : GCX_ERR_IO;
    }
}

// After gcx_config_read() failed: which GCX_* variables have a bad value?
// Reads the defaults with the GCX_* variables out of the environment (on
// the engine thread, which makes every gcx call), puts them back, and sets
// each on the defaults. Runs only on this error path.
std::string find_bad_variables()
{
    std::vector<std::pair<std::string, std::string>> vars;
    for (char **e = environ; *e != nullptr; ++e) {
        const char *eq = std::strchr(*e, '=');
        if (std::strncmp(*e, "GCX_", 4) == 0 && eq != nullptr) {
            vars.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)),
                              std::string(eq + 1));
        }
    }
    for (auto &v : vars) {
        unsetenv(v.first.c_str());
    }
    gcx_config_t *cfg = nullptr;
    gcx_status_t st   = gcx_config_read(&cfg);
    for (auto &v : vars) {
        setenv(v.first.c_str(), v.second.c_str(), 1);
    }
    std::string bad;
    if (st == GCX_OK) {
        for (auto &v : vars) {
            st = gcx_config_set(cfg, v.first.c_str(), v.second.c_str());
            if (st != GCX_OK && st != GCX_ERR_NOT_FOUND) {
                bad += (bad.empty() ? "" : ", ") + v.first + "='" + v.second +
                       "'";
            }
        }
        gcx_config_release(cfg);
    }
    return bad.empty() ? "a GCX_* environment variable has a bad value (see "
                         "gcx's error line above)"
                       : "bad environment value " + bad +
                             " (see gcx's error line above for the accepted "
                             "values)";
}

// The gcx configuration of a new group: the environment's GCX_* variables
// with the group's timeout t (seconds) as GCX_TIMEOUT, and sleeping waits
// (GCX_PROGRESS_SLEEP=y) unless the environment says otherwise. The engine
// thread shares the cores with torch's compute; a wait that polls takes a
// core from it. Where the transport can sleep (UCX on tcp and self only) the
// engine now sleeps on its events: DDP dense, 4 ranks on 2 cores, 1 Gbit/s
// emulated links, 7.62-7.76 steps/s polling against 8.58 sleeping and gloo's
// 8.60-8.72 (perf/torch/README.md). Engine thread.
gcx_config_t *group_config(double t)
{
    gcx_config_t *cfg = nullptr;
    gcx_status_t st   = gcx_config_read(&cfg);
    if (st != GCX_OK) {
        throw std::runtime_error(status_message("gcx_config_read", st) +
                                 ": " + find_bad_variables());
    }
    if (std::getenv("GCX_PROGRESS_SLEEP") == nullptr &&
        (st = gcx_config_set(cfg, "PROGRESS_SLEEP", "y")) != GCX_OK) {
        gcx_config_release(cfg);
        throw std::runtime_error(
            status_message("gcx_config_set(PROGRESS_SLEEP)", st));
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6f", t);
    st = gcx_config_set(cfg, "TIMEOUT", buf);
    if (st != GCX_OK) {
        gcx_config_release(cfg);
        throw std::runtime_error(
            status_message("gcx_config_set(TIMEOUT)", st) +
            ": the process group's timeout " + buf +
            " s is not a valid GCX_TIMEOUT");
    }
    return cfg;
}

// The communicator of torch's default group when its backend is gcx: the
// parent of every later gcx group, which its members make alone with
// gcx_comm_create_group. Read and written on the engine thread only (every
// creation and destruction runs there).
gcx_comm_t *world_comm = nullptr;

// The gcx_comm_create_group tag of a group, from its name, which every
// member has the same: torch names groups by a counter ("1", "2", ...), a
// tag of its own; other names (hashed ones) map to an FNV-1a hash. Two
// groups with one tag cannot be confused: creations are serialized in a
// process and torch makes every rank create its groups in the same order,
// gcx's messages between two ranks with one tag arrive in order, and the
// members compare their member lists (a mismatch is an error, not a wrong
// group).
int group_tag(const std::string &name)
{
    char *end  = nullptr;
    long long v = std::strtoll(name.c_str(), &end, 10);
    if (!name.empty() && *end == '\0' && v >= 0 && v <= INT32_MAX) {
        return static_cast<int>(v);
    }
    uint32_t h = 2166136261u;
    for (unsigned char c : name) {
        h = (h ^ c) * 16777619u;
    }
    return static_cast<int>(h & 0x7fffffffu);
}

// The parent ranks of a sub-group in world_comm, or empty when it cannot be
// made from it (no gcx default group, or ranks that do not fit it).
std::vector<int> world_ranks(const std::vector<int64_t> &global, int rank,
                             int size)
{
    std::vector<int> ranks;
    if (world_comm == nullptr || global.empty() ||
        static_cast<int>(global.size()) != size) {
        return ranks;
    }
    for (int64_t g : global) {
        if (g < 0 || g >= gcx_comm_size(world_comm)) {
            return {};
        }
        ranks.push_back(static_cast<int>(g));
    }
    if (ranks[static_cast<size_t>(rank)] != gcx_comm_rank(world_comm)) {
        return {};
    }
    return ranks;
}

// Per group name, how many of its communicators were made over a Store: the key
// prefix of each creation's exchange (every member of a group has its name
// and creates it as often as the others, so the counters agree). Not per
// store object: torch gives each group a new one, whose address the
// allocator reuses on some ranks and not on others.
std::string next_prefix(const std::string &group_name)
{
    static std::mutex mu;
    static std::map<std::string, uint64_t> counts;
    std::lock_guard<std::mutex> lk(mu);
    return "gcx_oob/" + std::to_string(counts[group_name]++);
}

} // namespace

gcx_comm_t *create_group_comm(const GroupSpec &spec, std::string *how)
{
    // clamp to GCX_TIMEOUT's range (0.001..1e6 s); 0 (no timeout in
    // torch's sense) becomes the largest
    double t = spec.timeout_s <= 0
                   ? 1e6
                   : std::min(std::max(spec.timeout_s, 0.001), 1e6);
    gcx_config_t *cfg = group_config(t);
    gcx_comm_t *comm  = nullptr;
    gcx_status_t st;
    std::vector<int> ranks;
    if (spec.from_default) {
        ranks = world_ranks(spec.global_ranks, spec.rank, spec.size);
    }
    if (!ranks.empty()) {
        // a later group of a gcx default group: its members make it from
        // the default group's communicator (no Store traffic)
        st = gcx_comm_create_group(world_comm, spec.size, ranks.data(),
                                   group_tag(spec.name), cfg, &comm);
        gcx_config_release(cfg);
        if (st != GCX_OK) {
            throw std::runtime_error(
                status_message("gcx_comm_create_group", st) + " (group " +
                spec.name + ")");
        }
        *how = "create_group";
        return comm;
    }
    OobCtx ctx;
    ctx.store  = spec.store;
    ctx.prefix = next_prefix(spec.name);
    ctx.rank   = spec.rank;
    ctx.size   = spec.size;
    gcx_oob_t oob;
    oob.allgather = oob_allgather;
    oob.ctx       = &ctx;
    oob.rank      = spec.rank;
    oob.size      = spec.size;
    st            = gcx_comm_create(&oob, cfg, &comm);
    gcx_config_release(cfg);
    if (st != GCX_OK) {
        throw std::runtime_error(status_message("gcx_comm_create", st) +
                                 (ctx.error.empty() ? "" : ": " + ctx.error));
    }
    *how = "store";
    if (spec.global_ranks.empty()) {
        world_comm = comm;
    }
    return comm;
}

void forget_group_comm(gcx_comm_t *comm)
{
    if (comm == world_comm) {
        world_comm = nullptr;
    }
}

void adopt_group_comm(gcx_comm_t *parent, gcx_comm_t *child)
{
    if (parent != nullptr && parent == world_comm) {
        world_comm = child;
    }
}

} // namespace torch_gcx
