// hooks.cc - the C++ half of torch_gcx.hooks: compressed DDP communication
// hooks on gcx's compressors, error feedback, sparse allreduce and GraVAC
// controller (the Python half, hooks.py, handles warm-up and futures).
//
// Idea: one call per DDP bucket. On the calling thread (autograd's), with
// the GIL released, the bucket's gradient is added to its error-feedback
// residual and compressed; then ONE composite job goes to the engine (the
// sparse allreduce of what is sent, for GraVAC also a 4-double allreduce of
// the bucket's norms), so compression of bucket i+1 overlaps the
// communication of bucket i, and every rank issues in DDP's bucket order.
// When the job succeeds, the completer thread averages the result in the
// bucket tensor and commits what was sent to the residual (e -= sent); on a
// failure nothing is committed, so no gradient is lost (it stays in e).
//
// GraVAC over buckets: the controller sees the whole model. Squared norms
// add over buckets, so the summed norms of a step's buckets are the norms of
// the whole gradient. A step cannot wait for its own sums before sending
// (that would serialise the buckets), so the level a step sends is decided
// at its first bucket from the PREVIOUS step's sums (summed over ranks by
// the per-bucket norm allreduces, then over buckets in index order, so every
// rank decides bit-identically). Consequences, documented in the README:
// the level lags the gains by one step, and at a window end the chosen
// level is sent at the new thetas.
//
// Cost per bucket of n floats: one pass to accumulate, the compressor's
// passes (topk: two), a sparse allreduce of k = n / CF entries, and, at the
// dense level, one copy of n floats. No allocation after a bucket's first
// step.
#include "backend.h"
#include "tensor_args.h"

#include <gcx/compress.h>
#include <gcx/gravac.h>
#include <gcx/sparse.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_gcx {

namespace {

// torch_gcx.hooks' handle of a place in the engine's line (engine.h):
// used once by hooks_exchange; given up when dropped unused (an exception
// between the reservation and the exchange), so the line never stalls.
class PlaceTicket {
  public:
    explicit PlaceTicket(std::shared_ptr<Place> place)
        : place_(std::move(place))
    {
    }
    ~PlaceTicket() { cancel(); }
    PlaceTicket(const PlaceTicket &)            = delete;
    PlaceTicket &operator=(const PlaceTicket &) = delete;
    std::shared_ptr<Place> take()
    {
        std::lock_guard<std::mutex> lk(mu_);
        TORCH_CHECK(place_, "torch_gcx.hooks: a place used twice");
        return std::move(place_);
    }
    void cancel()
    {
        std::shared_ptr<Place> p;
        {
            std::lock_guard<std::mutex> lk(mu_);
            p = std::move(place_);
        }
        if (p) {
            p->cancel();
        }
    }

  private:
    std::mutex mu_;
    std::shared_ptr<Place> place_;
};

gcx_compress_kind_t parse_kind(const std::string &name)
{
    gcx_compress_kind_t kind;
    TORCH_CHECK(gcx_compress_kind_parse(name.c_str(), &kind) == GCX_OK,
                "torch_gcx.hooks: unknown compressor '", name,
                "' (topk, dgc, redsync, randomk, none)");
    return kind;
}

// The error-feedback state of one DDP bucket and its compressed levels.
struct Bucket {
    size_t n                  = 0;
    gcx_feedback_t *fb        = nullptr;
    gcx_compressor_t *comp    = nullptr;
    gcx_sparse_vec_t lv_min   = {};  // first level (top-k: the only one)
    gcx_sparse_vec_t lv_c     = {};  // GraVAC's second level
    gcx_gravac_norms_t norms  = {};  // this step's norms, summed in place
    uint64_t norms_step       = ~0ull; // hook step the norms belong to

    Bucket(size_t n_, gcx_compress_kind_t kind, uint64_t seed, double min_cf)
        : n(n_)
    {
        try {
            check_status(gcx_feedback_create(n, nullptr, &fb),
                         "gcx_feedback_create");
            check_status(gcx_compressor_create(kind, seed, &comp),
                         "gcx_compressor_create");
            size_t cap = 0;
            check_status(gcx_compress_capacity(kind, n, min_cf, &cap),
                         "gcx_compress_capacity");
            check_status(gcx_sparse_vec_alloc(cap, n, &lv_min),
                         "gcx_sparse_vec_alloc");
            check_status(gcx_sparse_vec_alloc(cap, n, &lv_c),
                         "gcx_sparse_vec_alloc");
        } catch (...) {
            release();
            throw;
        }
    }
    ~Bucket() { release(); }
    Bucket(const Bucket &)            = delete;
    Bucket &operator=(const Bucket &) = delete;

    float *residual() { return gcx_feedback_residual(fb); }

  private:
    void release()
    {
        gcx_sparse_vec_free(&lv_c);
        gcx_sparse_vec_free(&lv_min);
        gcx_compressor_destroy(comp);
        gcx_feedback_destroy(fb);
        comp = nullptr;
        fb   = nullptr;
    }
};

// One line of a hook's trace: what a step sent.
struct StepTrace {
    uint64_t step       = 0;
    double cf           = 0;
    std::string level;       // "topk", "dense", "min", "c"
    uint64_t bytes      = 0; // payload this rank contributed (idx + val)
    uint64_t dense_bytes = 0; // 4 n summed over the step's buckets
    double delta_min = 0, delta_c = 0, theta_min = 0, theta_s = 0;
    double throughput = 0;
    unsigned events   = 0;
};

// What both hooks share: buckets by DDP index, the trace, checkpoints.
class HookBase {
  public:
    HookBase(const std::string &compressor, uint64_t seed, std::string algo,
             double min_cf)
        : kind_(parse_kind(compressor)), seed_(seed), algo_(std::move(algo)),
          min_cf_(min_cf)
    {
    }
    virtual ~HookBase() = default;

    uint64_t bytes_sent()
    {
        std::lock_guard<std::mutex> lk(mu_);
        return bytes_sent_;
    }

    py::list trace()
    {
        std::lock_guard<std::mutex> lk(mu_);
        py::list out;
        for (const StepTrace &t : trace_) {
            py::dict d;
            d["step"]        = t.step;
            d["cf"]          = t.cf;
            d["level"]       = t.level;
            d["bytes"]       = t.bytes;
            d["dense_bytes"] = t.dense_bytes;
            if (t.level != "topk") {
                d["delta_min"]  = t.delta_min;
                d["delta_c"]    = t.delta_c;
                d["theta_min"]  = t.theta_min;
                d["theta_s"]    = t.theta_s;
                d["throughput"] = t.throughput;
                d["events"]     = t.events;
            }
            out.append(d);
        }
        return out;
    }

    std::vector<int64_t> bucket_indices()
    {
        std::lock_guard<std::mutex> lk(mu_);
        std::vector<int64_t> out;
        for (auto &kv : buckets_) {
            out.push_back(kv.first);
        }
        return out;
    }

    at::Tensor residual(int64_t index)
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = buckets_.find(index);
        TORCH_CHECK(it != buckets_.end(), "torch_gcx.hooks: no bucket ",
                    index);
        Bucket &b = *it->second;
        at::Tensor t = at::empty({static_cast<int64_t>(b.n)}, at::kFloat);
        std::memcpy(t.data_ptr<float>(), b.residual(), b.n * sizeof(float));
        return t;
    }

    void set_residual(int64_t index, const at::Tensor &value)
    {
        TORCH_CHECK(value.device().is_cpu() &&
                        value.scalar_type() == at::kFloat && value.dim() == 1,
                    "torch_gcx.hooks: a residual is a 1-d float32 CPU tensor");
        at::Tensor v = value.contiguous();
        std::lock_guard<std::mutex> lk(mu_);
        auto b = std::make_unique<Bucket>(static_cast<size_t>(v.numel()),
                                          kind_, seed_ + index, min_cf_);
        std::memcpy(b->residual(), v.data_ptr<float>(), b->n * sizeof(float));
        gcx_feedback_touch(b->fb);
        buckets_[index] = std::move(b);
    }

    // Forget a bucket (hooks.py moves its residual to other buckets when
    // DDP rebuilds them); a GraVAC hook keeps its norms for the decision.
    void drop(int64_t index)
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = buckets_.find(index);
        if (it != buckets_.end()) {
            carry(*it->second);
            buckets_.erase(it);
        }
    }

    // The device path (hooks.py keeps residuals and selects on the bucket's
    // device): account one bucket it sent, like run() does.
    void device_account(uint64_t bytes, size_t n, bool last)
    {
        std::lock_guard<std::mutex> lk(mu_);
        device_level(last);
        account(bytes, n, last);
    }

  protected:
    virtual void carry(const Bucket &) {}
    // under mu_: the trace fields of a device-path bucket
    virtual void device_level(bool /*last*/) {}

    // The bucket's state, created on first use; its size must match the
    // residual it was given (hooks.py re-lays residuals out when DDP
    // rebuilds its buckets).
    Bucket &bucket(int64_t index, size_t n)
    {
        auto it = buckets_.find(index);
        if (it == buckets_.end()) {
            it = buckets_
                     .emplace(index, std::make_unique<Bucket>(
                                         n, kind_, seed_ + index, min_cf_))
                     .first;
        }
        TORCH_CHECK(it->second->n == n, "torch_gcx.hooks: bucket ", index,
                    " has ", n, " gradient entries but its residual has ",
                    it->second->n,
                    " (its parameters changed without a re-layout)");
        return *it->second;
    }

    static at::Tensor checked_bucket(const at::Tensor &t, const char *hook)
    {
        check_tensor(t, hook, "the bucket");
        TORCH_CHECK(t.scalar_type() == at::kFloat, "torch_gcx.hooks.", hook,
                    " compresses float32 gradients; the bucket holds ",
                    t.scalar_type());
        TORCH_CHECK(t.numel() < (int64_t{1} << 32), "torch_gcx.hooks.", hook,
                    ": a bucket of ", t.numel(),
                    " entries is beyond 2^32 (lower bucket_cap_mb)");
        return t;
    }

    // Under mu_: the bucket's state for this step, with the gradient t
    // added to its residual.
    Bucket &take(int64_t index, const at::Tensor &t)
    {
        Bucket &b = bucket(index, static_cast<size_t>(t.numel()));
        gcx_compressor_set_step(b.comp, step_);
        gcx_status_t st = gcx_feedback_accumulate(b.fb, t.data_ptr<float>());
        TORCH_CHECK(st == GCX_OK, "torch_gcx.hooks: the gradient of bucket ",
                    index, " holds NaN or Inf (or its sum with the residual "
                    "overflows); nothing was sent: ",
                    status_message("gcx_feedback_accumulate", st));
        return b;
    }

    // Issue the bucket's collectives; on success average t and commit sent
    // (NULL: the whole residual was sent) to the residual.
    c10::intrusive_ptr<c10d::Work> submit(GcxBackend &backend,
                                          const at::Tensor &t, Bucket &b,
                                          const gcx_sparse_vec_t *sent,
                                          bool with_norms, const char *name)
    {
        Bucket *bp       = &b;
        float *out       = t.data_ptr<float>();
        size_t n         = b.n;
        float scale      = 1.0f / static_cast<float>(group_size(backend));
        const char *algo = algo_.empty() ? nullptr : algo_.c_str();
        StartFn start    = [bp, sent, out, n, with_norms,
                         algo](gcx_comm_t *c, auto &reqs) {
            if (sent != nullptr) {
                gcx_sparse_allreduce_opts_t opts = {};
                opts.algo = algo;
                GCX_ISSUE(gcx_sparse_allreduce(c, sent, out, nullptr, &opts,
                                               &r_));
            } else {
                GCX_ISSUE(gcx_allreduce(c, GCX_IN_PLACE, out, n, GCX_DT_F32,
                                        GCX_OP_SUM, &r_));
            }
            if (with_norms) {
                GCX_ISSUE(gcx_allreduce(c, GCX_IN_PLACE, &bp->norms, 4,
                                        GCX_DT_F64, GCX_OP_SUM, &r_));
            }
            return GCX_OK;
        };
        auto post = [bp, sent, out, n, scale] {
            for (size_t i = 0; i < n; ++i) {
                out[i] *= scale;
            }
            if (sent != nullptr) {
                gcx_feedback_commit(bp->fb, sent);
            } else {
                gcx_feedback_commit_dense(bp->fb);
            }
        };
        return submit_composite(backend, name, {t}, start, post);
    }

    gcx_compress_kind_t kind_;
    uint64_t seed_;
    std::string algo_;
    double min_cf_; // smallest CF ever sent sparsely: the levels' capacity

    std::mutex mu_;
    std::map<int64_t, std::unique_ptr<Bucket>> buckets_;
    std::vector<StepTrace> trace_;
    StepTrace cur_;        // the step being assembled
    uint64_t step_       = 0;
    uint64_t bytes_sent_ = 0;

    // Account one bucket; the last bucket of a step closes the trace line.
    void account(uint64_t bytes, size_t n, bool last)
    {
        cur_.bytes += bytes;
        cur_.dense_bytes += 4 * n;
        bytes_sent_ += bytes;
        if (last) {
            cur_.step = step_++;
            trace_.push_back(cur_);
            cur_ = StepTrace();
        }
    }
};

// Static compression factor: every bucket sends its top-k (or another
// compressor's selection) of the residual at CF cf.
class TopkHook : public HookBase {
  public:
    TopkHook(double cf, const std::string &compressor, uint64_t seed,
             const std::string &algo)
        : HookBase(compressor, seed, algo, cf), cf_(cf)
    {
        size_t k = 0;
        TORCH_CHECK(gcx_compress_k(1, cf, &k) == GCX_OK,
                    "torch_gcx.hooks.TopkState: cf must be >= 1, got ", cf);
    }

    c10::intrusive_ptr<c10d::Work> run(const c10::intrusive_ptr<c10d::Backend> &pg,
                                       const at::Tensor &tensor, int64_t index,
                                       bool last)
    {
        GcxBackend &backend = as_gcx(pg);
        at::Tensor t        = checked_bucket(tensor, "topk_hook");
        std::lock_guard<std::mutex> lk(mu_);
        Bucket &b = take(index, t);
        gcx_compress_stats_t st;
        check_status(gcx_compress_dense(b.comp, b.residual(), b.n, cf_,
                                        &b.lv_min, &st),
                     "gcx_compress_dense");
        cur_.cf    = cf_;
        cur_.level = "topk";
        account(8 * b.lv_min.nnz, b.n, last);
        return submit(backend, t, b, &b.lv_min, false, "topk_hook");
    }

  private:
    void device_level(bool) override
    {
        cur_.cf    = cf_;
        cur_.level = "topk";
    }

    double cf_;
};

// GraVAC: the controller of gcx/gravac.h picks, per step, which level of a
// two-level compression every bucket sends (see the file comment).
class GravacHook : public HookBase {
  public:
    GravacHook(const gcx_gravac_params_t &params, double batch_size,
               const std::string &compressor, uint64_t seed,
               const std::string &algo)
        : HookBase(compressor, seed, algo, params.theta_min),
          batch_size_(batch_size)
    {
        TORCH_CHECK(batch_size >= 0, "torch_gcx.hooks.GravacState: batch_size "
                    "must be >= 0, got ", batch_size);
        gcx_gravac_t *ctl = nullptr;
        gcx_status_t st   = gcx_gravac_create(&params, &ctl);
        TORCH_CHECK(st == GCX_OK,
                    "torch_gcx.hooks.GravacState: bad GraVAC parameters "
                    "(theta_min >= 1, theta_max >= theta_min, epsilon in "
                    "(0, 1], omega in [0, 1), window >= 1, scale > 1, ratio "
                    "> 1, alpha in [0, 1]): ",
                    status_message("gcx_gravac_create", st));
        ctl_.reset(ctl);
    }

    c10::intrusive_ptr<c10d::Work> run(const c10::intrusive_ptr<c10d::Backend> &pg,
                                       const at::Tensor &tensor, int64_t index,
                                       bool last)
    {
        GcxBackend &backend = as_gcx(pg);
        at::Tensor t        = checked_bucket(tensor, "gravac_hook");
        std::lock_guard<std::mutex> lk(mu_);
        if (!in_step_) {
            begin_step();
        }
        Bucket &b = take(index, t);
        gcx_compress_stats_t s1, s2;
        check_status(gcx_compress_dense(b.comp, b.residual(), b.n, theta_min_,
                                        &b.lv_min, &s1),
                     "gcx_compress_dense");
        if (theta_s_ > 1.0) {
            check_status(gcx_compress_sparse(b.comp, &b.lv_min, theta_s_,
                                             &b.lv_c, &s2),
                         "gcx_compress_sparse");
        } else {
            s2 = s1;
        }
        b.norms      = {s1.in_sqnorm, s1.out_sqnorm, s2.out_sqnorm,
                        last ? samples_per_s_ : 0.0};
        b.norms_step = step_;
        const gcx_sparse_vec_t *sent = nullptr;
        uint64_t bytes               = 4 * b.n;
        if (level_ == GCX_GRAVAC_LEVEL_MIN) {
            sent = &b.lv_min;
        } else if (level_ == GCX_GRAVAC_LEVEL_C) {
            sent = theta_s_ > 1.0 ? &b.lv_c : &b.lv_min;
        } else {
            std::memcpy(t.data_ptr<float>(), b.residual(), 4 * b.n);
        }
        if (sent != nullptr) {
            bytes = 8 * sent->nnz;
        }
        if (last) {
            in_step_ = false;
        }
        account(bytes, b.n, last);
        return submit(backend, t, b, sent, true, "gravac_hook");
    }

    // The device path, at a step's first bucket: decide the step's level
    // from the previous step's norms that hooks.py summed (over ranks, then
    // over buckets in index order); (level, theta_min, theta_s, samples/s).
    py::tuple device_begin(bool have, const std::vector<double> &sums)
    {
        TORCH_CHECK(sums.size() == 4, "torch_gcx.hooks: 4 sums expected");
        std::lock_guard<std::mutex> lk(mu_);
        TORCH_CHECK(buckets_.empty(), "torch_gcx.hooks: a hook state serves "
                    "the device path or the host path, not both");
        carried_have_ = have;
        carried_sums_ = {sums[0], sums[1], sums[2], sums[3]};
        begin_step();
        return py::make_tuple(std::string(gcx_gravac_level_name(level_)),
                              theta_min_, theta_s_, samples_per_s_);
    }

    // (controller blob, hook step, whether sums are pending, the sums)
    py::tuple save()
    {
        std::lock_guard<std::mutex> lk(mu_);
        TORCH_CHECK(!in_step_, "torch_gcx.hooks.GravacState.state_dict: "
                    "called in the middle of a backward pass");
        std::string blob(gcx_gravac_save_size(ctl_.get()), '\0');
        check_status(gcx_gravac_save(ctl_.get(), &blob[0], blob.size(), nullptr),
                     "gcx_gravac_save");
        gcx_gravac_norms_t sums = {};
        bool have               = summed(&sums);
        return py::make_tuple(py::bytes(blob), step_, have,
                              py::make_tuple(sums.ef_sqnorm, sums.min_sqnorm,
                                             sums.c_sqnorm,
                                             sums.samples_per_s));
    }

    void load(const std::string &blob, uint64_t step, bool have,
              const std::vector<double> &sums)
    {
        TORCH_CHECK(sums.size() == 4, "torch_gcx.hooks: 4 sums expected");
        std::lock_guard<std::mutex> lk(mu_);
        gcx_status_t st = gcx_gravac_load(ctl_.get(), blob.data(), blob.size());
        TORCH_CHECK(st == GCX_OK,
                    st == GCX_ERR_MISMATCH
                        ? "torch_gcx.hooks.GravacState.load_state_dict: the "
                          "checkpoint was saved with other GraVAC parameters "
                          "(or another world size)"
                        : "torch_gcx.hooks.GravacState.load_state_dict: not a "
                          "valid GraVAC controller state",
                    " (", status_message("gcx_gravac_load", st), ")");
        step_         = step;
        carried_have_ = have;
        carried_sums_ = {sums[0], sums[1], sums[2], sums[3]};
        last_start_valid_ = false;
        samples_per_s_    = 0;
    }

    py::dict controller_state()
    {
        std::lock_guard<std::mutex> lk(mu_);
        gcx_gravac_state_t s;
        check_status(gcx_gravac_get_state(ctl_.get(), &s),
                     "gcx_gravac_get_state");
        py::dict d;
        d["decisions"]  = s.step;
        d["theta_min"]  = s.theta_min;
        d["theta_s"]    = s.theta_s;
        d["delta_min"]  = s.delta_min;
        d["delta_c"]    = s.delta_c;
        d["settled"]    = static_cast<bool>(s.settled);
        d["settled_cf"] = s.settled_cf;
        return d;
    }

  private:
    void device_level(bool last) override
    {
        if (last) {
            in_step_ = false;
        }
    }

    struct CtlDeleter {
        void operator()(gcx_gravac_t *c) const { gcx_gravac_destroy(c); }
    };

    // sums += the bucket's norms if they are the previous step's
    bool add_previous(const Bucket &b, gcx_gravac_norms_t *sums) const
    {
        if (step_ == 0 || b.norms_step != step_ - 1) {
            return false;
        }
        sums->ef_sqnorm += b.norms.ef_sqnorm;
        sums->min_sqnorm += b.norms.min_sqnorm;
        sums->c_sqnorm += b.norms.c_sqnorm;
        sums->samples_per_s += b.norms.samples_per_s;
        return true;
    }

    void carry(const Bucket &b) override
    {
        carried_have_ |= add_previous(b, &carried_sums_);
    }

    // The previous step's norms summed over ranks (by the allreduces) and
    // over buckets in index order; false when no step was compressed yet.
    bool summed(gcx_gravac_norms_t *sums)
    {
        *sums = {};
        bool have = false;
        if (carried_have_) {
            *sums = carried_sums_;
            have  = true;
        }
        for (auto &kv : buckets_) {
            have |= add_previous(*kv.second, sums);
        }
        return have;
    }

    void begin_step()
    {
        auto now = std::chrono::steady_clock::now();
        samples_per_s_ = 0;
        if (last_start_valid_ && batch_size_ > 0) {
            double dt = std::chrono::duration<double>(now - last_start_).count();
            samples_per_s_ = dt > 0 ? batch_size_ / dt : 0;
        }
        last_start_       = now;
        last_start_valid_ = true;

        gcx_gravac_norms_t sums;
        if (summed(&sums)) {
            gcx_gravac_record_t rec;
            check_status(gcx_gravac_decide(ctl_.get(), &sums, &rec),
                         "gcx_gravac_decide");
            level_          = rec.level;
            cur_.delta_min  = rec.delta_min;
            cur_.delta_c    = rec.delta_c;
            cur_.throughput = rec.throughput;
            cur_.events     = rec.events;
        } else {
            level_ = GCX_GRAVAC_LEVEL_MIN; // the paper starts at theta_min
        }
        carried_have_ = false;
        carried_sums_ = {};
        gcx_gravac_state_t s;
        check_status(gcx_gravac_get_state(ctl_.get(), &s),
                     "gcx_gravac_get_state");
        theta_min_      = s.theta_min;
        theta_s_        = s.theta_s;
        cur_.theta_min  = theta_min_;
        cur_.theta_s    = theta_s_;
        cur_.level      = gcx_gravac_level_name(level_);
        cur_.cf         = level_ == GCX_GRAVAC_LEVEL_DENSE ? 1.0
                          : level_ == GCX_GRAVAC_LEVEL_MIN ? theta_min_
                                                           : theta_min_ * theta_s_;
        in_step_ = true;
    }

    std::unique_ptr<gcx_gravac_t, CtlDeleter> ctl_;
    double batch_size_;
    bool in_step_ = false;
    gcx_gravac_level_t level_ = GCX_GRAVAC_LEVEL_MIN;
    double theta_min_ = 1, theta_s_ = 1;
    double samples_per_s_ = 0;
    std::chrono::steady_clock::time_point last_start_;
    bool last_start_valid_ = false;
    // norms of the previous step that no bucket holds any more (a restored
    // checkpoint, or buckets dropped by a re-layout)
    bool carried_have_ = false;
    gcx_gravac_norms_t carried_sums_ = {};
};

// The host half of the device path (hooks.py): one bucket's staged
// selection, nnz strictly increasing indices below n (int32, read as
// uint32) and their float32 values, summed over the group by
// gcx_sparse_allreduce into out_idx / out_vals (capacity cap >= the union;
// out_nnz[0] gets its size), the values scaled by 1/size. idx None: vals
// holds the n dense floats, summed in place by gcx_allreduce and scaled.
// norms (GraVAC: 4 float64) are summed in place in the same job. Every
// tensor is a contiguous CPU tensor (pinned, for the copies) that the
// caller keeps untouched until the Work completes.
struct Exchange {
    at::Tensor idx, vals, out_idx, out_vals, out_nnz, norms;
    gcx_sparse_vec_t in = {}, out = {};
    std::string algo;
};

void check_host(const at::Tensor &t, at::ScalarType type, const char *what)
{
    TORCH_CHECK(t.device().is_cpu() && t.is_contiguous() &&
                    t.scalar_type() == type && t.dim() == 1,
                "torch_gcx.hooks: ", what, " must be a contiguous 1-d ",
                type, " CPU tensor, got ", t.scalar_type(), " on ",
                t.device());
}

c10::intrusive_ptr<c10d::Work>
exchange(const c10::intrusive_ptr<c10d::Backend> &pg,
         std::optional<at::Tensor> idx, at::Tensor vals, int64_t nnz,
         int64_t n, std::optional<at::Tensor> out_idx,
         std::optional<at::Tensor> out_vals, std::optional<at::Tensor> out_nnz,
         std::optional<at::Tensor> norms, const std::string &algo,
         std::shared_ptr<PlaceTicket> place)
{
    GcxBackend &backend = as_gcx(pg);
    auto job            = std::make_shared<Exchange>();
    job->algo           = algo;
    TORCH_CHECK(n >= 0 && n < (int64_t{1} << 32),
                "torch_gcx.hooks: a bucket of ", n,
                " entries is beyond 2^32 (lower bucket_cap_mb)");
    check_host(vals, at::kFloat, "the staged values");
    job->vals = vals;
    std::vector<at::Tensor> outputs;
    if (idx.has_value()) {
        TORCH_CHECK(out_idx && out_vals && out_nnz,
                    "torch_gcx.hooks: a sparse exchange needs its outputs");
        check_host(*idx, at::kInt, "the staged indices");
        check_host(*out_idx, at::kInt, "the result's indices");
        check_host(*out_vals, at::kFloat, "the result's values");
        check_host(*out_nnz, at::kLong, "the result's size");
        TORCH_CHECK(nnz >= 0 && nnz <= idx->numel() && nnz <= vals.numel() &&
                        out_idx->numel() == out_vals->numel() &&
                        out_nnz->numel() == 1,
                    "torch_gcx.hooks: inconsistent exchange sizes");
        job->idx      = *idx;
        job->out_idx  = *out_idx;
        job->out_vals = *out_vals;
        job->out_nnz  = *out_nnz;
        check_status(gcx_sparse_vec_init(
                         &job->in,
                         reinterpret_cast<uint32_t *>(job->idx.data_ptr()),
                         job->vals.data_ptr<float>(), static_cast<size_t>(nnz),
                         static_cast<size_t>(n)),
                     "gcx_sparse_vec_init");
        job->in.nnz = static_cast<size_t>(nnz);
        check_status(gcx_sparse_vec_init(
                         &job->out,
                         reinterpret_cast<uint32_t *>(job->out_idx.data_ptr()),
                         job->out_vals.data_ptr<float>(),
                         static_cast<size_t>(job->out_idx.numel()),
                         static_cast<size_t>(n)),
                     "gcx_sparse_vec_init");
        outputs = {job->out_idx, job->out_vals, job->out_nnz};
    } else {
        TORCH_CHECK(vals.numel() == n, "torch_gcx.hooks: a dense exchange "
                    "takes the bucket's ", n, " floats, got ", vals.numel());
        outputs = {job->vals};
    }
    if (norms.has_value()) {
        check_host(*norms, at::kDouble, "the norms");
        TORCH_CHECK(norms->numel() == 4, "torch_gcx.hooks: 4 norms");
        job->norms = *norms;
        outputs.push_back(job->norms);
    }
    float scale   = 1.0f / static_cast<float>(group_size(backend));
    StartFn start = [job, n](gcx_comm_t *c, auto &reqs) {
        if (job->idx.defined()) {
            gcx_sparse_allreduce_opts_t opts = {};
            opts.algo = job->algo.empty() ? nullptr : job->algo.c_str();
            GCX_ISSUE(gcx_sparse_allreduce(c, &job->in, nullptr, &job->out,
                                           &opts, &r_));
        } else {
            GCX_ISSUE(gcx_allreduce(c, GCX_IN_PLACE,
                                    job->vals.data_ptr<float>(),
                                    static_cast<size_t>(n), GCX_DT_F32,
                                    GCX_OP_SUM, &r_));
        }
        if (job->norms.defined()) {
            GCX_ISSUE(gcx_allreduce(c, GCX_IN_PLACE,
                                    job->norms.data_ptr<double>(), 4,
                                    GCX_DT_F64, GCX_OP_SUM, &r_));
        }
        return GCX_OK;
    };
    auto post = [job, scale] {
        float *v = job->idx.defined() ? job->out.val : job->vals.data_ptr<float>();
        size_t m = job->idx.defined() ? job->out.nnz
                                      : static_cast<size_t>(job->vals.numel());
        for (size_t i = 0; i < m; ++i) {
            v[i] *= scale;
        }
        if (job->idx.defined()) {
            job->out_nnz.data_ptr<int64_t>()[0] = static_cast<int64_t>(m);
        }
    };
    if (place) {
        std::shared_ptr<Place> p = place->take();
        try {
            return submit_composite(backend, "hooks_exchange", outputs, start,
                                    post, c10d::OpType::UNKNOWN, p.get());
        } catch (...) {
            p->cancel(); // never filled: the line must not stall on it
            throw;
        }
    }
    return submit_composite(backend, "hooks_exchange", outputs, start, post);
}

std::shared_ptr<PlaceTicket> reserve(const c10::intrusive_ptr<c10d::Backend> &pg)
{
    return std::make_shared<PlaceTicket>(reserve_place(as_gcx(pg), "hooks_exchange"));
}

} // namespace

void bind_hooks(py::module_ &m)
{
    using Rel = py::call_guard<py::gil_scoped_release>;
    m.def("hooks_exchange", &exchange, Rel(), py::arg("pg"), py::arg("idx"),
          py::arg("vals"), py::arg("nnz"), py::arg("n"), py::arg("out_idx"),
          py::arg("out_vals"), py::arg("out_nnz"), py::arg("norms"),
          py::arg("algo"),
          py::arg("place") = nullptr,
          "The host half of torch_gcx.hooks' device path: a staged "
          "selection's sparse allreduce (idx None: dense), averaged; a Work. "
          "With a place (hooks_reserve), it is issued there in the line.");
    py::class_<PlaceTicket, std::shared_ptr<PlaceTicket>>(m, "_Place")
        .def("cancel", &PlaceTicket::cancel,
             "Give the place up (it completes issuing nothing); no-op once "
             "used.");
    m.def("hooks_reserve", &reserve, Rel(), py::arg("pg"),
          "Take a place in the engine's line for a hooks_exchange given "
          "later (from another thread): collectives called after this wait "
          "for it on every rank. Given up if dropped unused.");
    py::class_<HookBase>(m, "_HookBase")
        .def("device_account", &HookBase::device_account)
        .def("bytes_sent", &HookBase::bytes_sent)
        .def("trace", &HookBase::trace)
        .def("bucket_indices", &HookBase::bucket_indices)
        .def("residual", &HookBase::residual)
        .def("set_residual", &HookBase::set_residual)
        .def("drop", &HookBase::drop);
    py::class_<TopkHook, HookBase>(m, "TopkHook")
        .def(py::init<double, const std::string &, uint64_t,
                      const std::string &>(),
             py::arg("cf"), py::arg("compressor"), py::arg("seed"),
             py::arg("algo"))
        .def("run", &TopkHook::run, Rel(),
             "Compress one bucket and start its sparse allreduce; a Work.");
    py::class_<GravacHook, HookBase>(m, "GravacHook")
        .def(py::init([](double theta_min, double theta_max, double epsilon,
                         double omega, uint32_t window,
                         const std::string &policy, double scale, double ratio,
                         double alpha, int nranks, double batch_size,
                         const std::string &compressor, uint64_t seed,
                         const std::string &algo) {
                 gcx_gravac_params_t p;
                 gcx_gravac_params_default(&p);
                 p.theta_min = theta_min;
                 p.theta_max = theta_max;
                 p.epsilon   = epsilon;
                 p.omega     = omega;
                 p.window    = window;
                 TORCH_CHECK(policy == "exponential" || policy == "geometric",
                             "torch_gcx.hooks.GravacState: policy must be "
                             "'exponential' or 'geometric', got '", policy,
                             "'");
                 p.policy = policy == "exponential"
                                ? GCX_GRAVAC_POLICY_EXPONENTIAL
                                : GCX_GRAVAC_POLICY_GEOMETRIC;
                 p.scale  = scale;
                 p.ratio  = ratio;
                 p.alpha  = alpha;
                 p.nranks = nranks;
                 return std::make_unique<GravacHook>(p, batch_size, compressor,
                                                     seed, algo);
             }),
             py::arg("theta_min"), py::arg("theta_max"), py::arg("epsilon"),
             py::arg("omega"), py::arg("window"), py::arg("policy"),
             py::arg("scale"), py::arg("ratio"), py::arg("alpha"),
             py::arg("nranks"), py::arg("batch_size"), py::arg("compressor"),
             py::arg("seed"), py::arg("algo"))
        .def("run", &GravacHook::run, Rel(),
             "Compress one bucket at the step's level and start its "
             "allreduces; a Work.")
        .def("device_begin", &GravacHook::device_begin)
        .def("save", &GravacHook::save)
        .def("load", &GravacHook::load)
        .def("controller_state", &GravacHook::controller_state);
    bind_coded(m); // torch_gcx.coded's classes (coded.cc)
}

} // namespace torch_gcx
