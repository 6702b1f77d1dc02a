// coded.cc - the C++ half of torch_gcx.coded: coded data-parallel training
// (gradient coding FR/CR, pipelined gradient coding PGC-FR/PGC-CR) over
// libgcx's codes (gcx/coding.h) and coded gather (gcx/coded.h); the Python
// half (coded.py) computes the partition gradients and owns the loop.
//
// (Parameters on a GPU: coded.py keeps the slot buffers, the encoding and
// the top-k residual on the device and hands round() the coded message
// already staged into message(); round(encoded=true) encodes nothing and
// coefficients() tells coded.py the combination.)
//
// Idea: a worker's partition gradients land, flat, in this object's slot
// buffers (one per partition of its row for gc, one per pipeline slot for
// pgc; coded.py points the parameters' .grad at them, so backward writes
// there with no copy). round() then encodes the worker's message with the
// library (gcx_code_encode with its row of the code, or gcx_pgc_coeffs),
// optionally compresses it (top-k with error feedback, FR codes), and sends
// ONE composite job to the engine: gcx_coded_gather, or gcx_coded_abstain
// when a pipelined message would read a slot this worker skipped
// (gcx_pgc_message_valid). The root completes the round on the first
// decodable set of workers, decodes and sends the sum to every rank; the
// completer thread scales it by 1/n into the averaged gradient, which
// coded.py hands to the parameters' .grad. Nothing is decoded or encoded in
// Python. Every gcx call on the communicator runs on the engine thread;
// encoding and compression run on the caller's thread with the GIL
// released, as the DDP hooks do.
//
// Each vector carries one float more than the gradient: the partition's
// loss, coded and decoded with it, so a step's global loss needs no
// collective that would wait for a straggler (gcx-train does the same).
//
// Ignoring stragglers (code "ignore", the baseline the papers compare
// with): no code; a worker computes its own partition and sends it as it
// is. It runs on a CR code with weighted decoding, whose root folds the
// first n-s arrivals with weight n/((n-s)(s+1)) whatever they hold, so the
// decoded vector times s+1 is the sum of those n-s partitions scaled by
// n/(n-s): an estimate of the full sum, at uncoded compute (gcx-train's
// `ignore` does the same).
//
// Compression (FR only): the members of one FR group compute the same
// message (same partitions, coefficient 1), so when each adds it to its
// residual and sends top-k of it, their residuals and sent vectors stay
// equal bit for bit and the root's decode (one message per group) is the
// exact sum of the compressed vectors. A member that skips a round (decoded
// without it) adds nothing that round; README.md says what that costs.
//
// Progress between rounds (the root only): the root's round completes as
// soon as it has decoded, while the other ranks may still be pulling the
// sum from it; the engine progresses the network only while a job is in
// flight, so a root busy computing its next step (or in a gloo collective)
// would hold every other rank's sum back until its next round. The root
// therefore starts gcx's progress thread (gcx_progress_thread_enable: it
// runs when messages arrive, and sleeps otherwise). Master-less
// (GCX_CODED_ALGO): every rank owns a chunk of the round, and decodes and
// publishes it ahead of its own round when it progresses
// (gcx_coded_allreduce), so every rank starts it: a rank still computing
// its gradient does not hold the others back. (Before gcx had one, a
// keeper thread here submitted a gcx_progress job every millisecond.)
//
// Cost per round: encoding, one streaming pass per slot with a nonzero
// coefficient (s+1 for gc, P for pgc) over N+1 floats; with top-k, one
// accumulate pass, the compressor's passes and one scatter; the coded
// gather (root: n-s vectors in, size-1 out); one scaling pass over N floats
// on the completer. No allocation after creation.
#include "backend.h"
#include "tensor_args.h"

#include <gcx/coded.h>
#include <gcx/coding.h>
#include <gcx/compress.h>
#include <gcx/wset.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace torch_gcx {

namespace {

// A worker set (gcx/wset.h: bit w % 64 of word w / 64) as a Python int
// with bit w for worker w, built from all the words (Python ints are
// unbounded, so any n; `mask >> w & 1` tests worker w).
py::int_ wset_to_int(const std::vector<uint64_t> &set)
{
    std::string bytes(set.size() * 8, '\0');
    for (size_t i = 0; i < set.size(); ++i) {
        for (size_t b = 0; b < 8; ++b) { // little-endian, whatever the host
            bytes[i * 8 + b] = static_cast<char>((set[i] >> (8 * b)) & 0xff);
        }
    }
    py::object from_bytes = py::module_::import("builtins")
                                .attr("int")
                                .attr("from_bytes");
    return from_bytes(py::bytes(bytes), "little");
}

gcx_code_kind_t parse_code(const std::string &kind)
{
    TORCH_CHECK(kind == "fr" || kind == "cr",
                "torch_gcx.coded: unknown code family '", kind,
                "' (fr, cr)");
    return kind == "fr" ? GCX_CODE_FR : GCX_CODE_CR;
}

// A gradient code and, for pipelined coding, its schedule (gcx/coding.h).
struct Code {
    gcx_code_t *code = nullptr;
    gcx_pgc_t *pgc   = nullptr;
    int n = 0, s = 0, load = 0;

    Code(const std::string &kind, bool pipelined, int n_, int s_,
         bool weighted)
        : n(n_), s(s_)
    {
        gcx_code_params_t cp = {};
        cp.kind              = parse_code(kind);
        cp.n                 = n;
        cp.s                 = s;
        cp.decoding =
            weighted ? GCX_CODE_DECODE_WEIGHTED : GCX_CODE_DECODE_EXACT;
        TORCH_CHECK(!(weighted && cp.kind == GCX_CODE_FR),
                    "torch_gcx.coded: weighted decoding is for CR codes only");
        gcx_status_t st = gcx_code_create(&cp, &code);
        TORCH_CHECK(st == GCX_OK, "torch_gcx.coded: no ", kind,
                    " code for n = ", n, " workers and s = ", s, ": ",
                    status_message("gcx_code_create", st));
        if (pipelined) {
            st = gcx_pgc_create(code, &pgc);
            if (st != GCX_OK) {
                gcx_code_destroy(code);
                check_status(st, "gcx_pgc_create");
            }
            load = gcx_pgc_period(pgc);
        } else {
            load = gcx_code_load(code);
        }
    }
    ~Code()
    {
        gcx_pgc_destroy(pgc);
        gcx_code_destroy(code);
    }
    Code(const Code &)            = delete;
    Code &operator=(const Code &) = delete;

    void check_worker(int w) const
    {
        TORCH_CHECK(w >= 0 && w < n, "torch_gcx.coded: worker ", w,
                    " out of range 0..", n - 1);
    }

    // gc: (partitions, coefficients) of worker w's row
    std::pair<std::vector<int>, std::vector<double>> assignment(int w) const
    {
        check_worker(w);
        std::vector<int> parts(static_cast<size_t>(gcx_code_load(code)));
        std::vector<double> coeffs(parts.size());
        int count = 0;
        check_status(gcx_code_assignment(code, w, parts.data(), coeffs.data(),
                                         &count),
                     "gcx_code_assignment");
        parts.resize(static_cast<size_t>(count));
        coeffs.resize(static_cast<size_t>(count));
        return {parts, coeffs};
    }

    // pgc: (slot, partition) worker w computes at step t (partition -1: none)
    std::pair<int, int> compute(int w, int64_t t) const
    {
        check_worker(w);
        TORCH_CHECK(pgc != nullptr, "torch_gcx.coded: not a pipelined code");
        TORCH_CHECK(t >= 0, "torch_gcx.coded: step must be >= 0, got ", t);
        int slot = -1, part = -1;
        check_status(gcx_pgc_compute(pgc, w, t, &slot, &part),
                     "gcx_pgc_compute");
        return {slot, part};
    }

    std::vector<int> slots(int w) const
    {
        check_worker(w);
        TORCH_CHECK(pgc != nullptr, "torch_gcx.coded: not a pipelined code");
        std::vector<int> parts(static_cast<size_t>(load));
        check_status(gcx_pgc_slots(pgc, w, parts.data()), "gcx_pgc_slots");
        return parts;
    }
};

// The code alone, for the sampler (no communicator).
class CodeInfo {
  public:
    CodeInfo(const std::string &kind, bool pipelined, int n, int s)
        : code_(kind, pipelined, n, s, false)
    {
    }
    int workers() const { return code_.n; }
    int stragglers() const { return code_.s; }
    int load() const { return code_.load; }
    bool pipelined() const { return code_.pgc != nullptr; }
    std::pair<std::vector<int>, std::vector<double>> assignment(int w) const
    {
        return code_.assignment(w);
    }
    std::pair<int, int> compute(int w, int64_t t) const
    {
        return code_.compute(w, t);
    }
    std::vector<int> slots(int w) const { return code_.slots(w); }

  private:
    Code code_;
};

// One coded gather over a gcx group, with the worker's buffers.
class CodedGather {
  public:
    CodedGather(const c10::intrusive_ptr<c10d::Backend> &pg,
                const std::string &kind, bool pipelined, int s, bool master,
                int root, int64_t nfloats, bool weighted, double cf,
                uint64_t seed, bool ignore)
        : pg_(pg), backend_(&as_gcx(pg)), nfloats_(static_cast<size_t>(nfloats)),
          ignore_(ignore)
    {
        int size = group_size(*backend_);
        int n    = size - (master ? 1 : 0);
        TORCH_CHECK(size >= 2, "torch_gcx.coded: needs a group of at least 2 "
                    "ranks, this one has ", size);
        TORCH_CHECK(root >= 0 && root < size, "torch_gcx.coded: root ", root,
                    " out of range 0..", size - 1);
        TORCH_CHECK(nfloats >= 0 && nfloats < (int64_t{1} << 32),
                    "torch_gcx.coded: ", nfloats,
                    " gradient entries (0..2^32)");
        TORCH_CHECK(!ignore || (parse_code(kind) == GCX_CODE_CR &&
                                !pipelined && weighted && cf == 0),
                    "torch_gcx.coded: ignore runs on a CR code with weighted "
                    "decoding, not pipelined, not compressed");
        code_  = std::make_unique<Code>(kind, pipelined, n, s, weighted);
        count_ = nfloats_ + 1; // + the partition's loss
        // the result's worker sets: caller storage over the n workers
        arrived_.assign(GCX_WSET_WORDS(n), 0);
        used_.assign(GCX_WSET_WORDS(n), 0);
        abstained_.assign(GCX_WSET_WORDS(n), 0);
        // ignore: one buffer, the worker's own partition
        for (int k = 0; k < (ignore_ ? 1 : code_->load); ++k) {
            bufs_.push_back(
                at::zeros({static_cast<int64_t>(count_)}, at::kFloat));
        }
        msg_  = at::zeros({static_cast<int64_t>(count_)}, at::kFloat);
        sum_  = at::zeros({static_cast<int64_t>(count_)}, at::kFloat);
        grad_ = at::zeros({static_cast<int64_t>(nfloats_)}, at::kFloat);
        slot_steps_.assign(static_cast<size_t>(code_->load), -1);
        if (cf > 0) {
            TORCH_CHECK(parse_code(kind) == GCX_CODE_FR,
                        "torch_gcx.coded: compress is for FR codes (gc-fr, "
                        "pgc-fr) only: the members of an FR group send the "
                        "same message, so their residuals stay equal");
            setup_compression(cf, seed);
        }

        gcx_coded_params_t params = {};
        params.code               = code_->code;
        params.count              = count_;
        params.root               = root;
        params.root_not_worker    = master ? 1 : 0;
        // pgc: a dead worker's mate abstains, which can leave a round to
        // lose (star and master-less alike); gc workers never abstain
        params.lost_rounds        = code_->pgc != nullptr ? 1 : 0;
        gcx_coded_t **out         = &coded_;
        try {
            submit_composite(*backend_, "gcx_coded_create", {},
                             [params, out](gcx_comm_t *c, auto &) {
                                 return gcx_coded_create(c, &params, out);
                             },
                             {})
                ->wait();
        } catch (...) {
            release_compression();
            throw;
        }
        worker_ = gcx_coded_worker(coded_, pg->getRank());
        if (worker_ >= 0 && ignore_) {
            parts_  = {worker_};
            coeffs_ = {1.0};
        } else if (worker_ >= 0 && !code_->pgc) {
            auto a   = code_->assignment(worker_);
            parts_   = a.first;
            coeffs_  = a.second;
        }
        pcoeffs_.assign(static_cast<size_t>(code_->load), 0.0);
        if (pg->getRank() == root || gcx_coded_masterless(coded_)) {
            submit_composite(*backend_, "gcx_progress_thread_enable", {},
                             [](gcx_comm_t *c, auto &) {
                                 return gcx_progress_thread_enable(c);
                             },
                             {})
                ->wait();
        }
    }

    ~CodedGather()
    {
        try {
            if (PyGILState_Check()) {
                py::gil_scoped_release nogil;
                close();
            } else {
                close();
            }
        } catch (...) {
            // the group is gone: the object stays (the code with it), as
            // gcx_coded_destroy() needs a live communicator
            coded_ = nullptr;
            (void)code_.release();
        }
        release_compression();
    }
    CodedGather(const CodedGather &)            = delete;
    CodedGather &operator=(const CodedGather &) = delete;

    int worker() const { return worker_; }
    int workers() const { return code_->n; }
    int load() const { return static_cast<int>(bufs_.size()); }
    at::Tensor buffer(int k) const
    {
        TORCH_CHECK(k >= 0 && k < load(), "torch_gcx.coded: buffer ", k,
                    " out of range");
        return bufs_[static_cast<size_t>(k)];
    }
    at::Tensor message() const { return msg_; }
    at::Tensor grad() const { return grad_; }
    double loss() const { return loss_; }
    std::pair<std::vector<int>, std::vector<double>> assignment() const
    {
        return {parts_, coeffs_};
    }
    std::pair<int, int> pgc_compute(int64_t t) const
    {
        return code_->compute(worker_, t);
    }

    // Whether this rank's next round is already decoded (skip computing).
    bool ready()
    {
        auto flag = std::make_shared<int>(0);
        gcx_coded_t *cd = live();
        submit_composite(*backend_, "gcx_coded_ready", {},
                         [cd, flag](gcx_comm_t *, auto &) {
                             return gcx_coded_ready(cd, flag.get());
                         },
                         {})
            ->wait();
        return *flag != 0;
    }

    // pgc: slot recomputed at step t
    void computed(int slot, int64_t t)
    {
        TORCH_CHECK(slot >= 0 && slot < code_->load, "torch_gcx.coded: slot ",
                    slot, " out of range");
        slot_steps_[static_cast<size_t>(slot)] = t;
    }

    // Encode this step's message (unless nothing was computed: the round is
    // already decoded), and start the round. Returns the Work; after it, the
    // averaged gradient is grad(), result() says what it was decoded from.
    //
    // encoded: coded.py's device path encoded (and compressed) the message
    // on the parameters' device and staged it into message(); nothing is
    // encoded here.
    c10::intrusive_ptr<c10d::Work> round(int64_t t, bool did_compute,
                                         bool encoded)
    {
        gcx_coded_t *cd = live();
        bool send       = true;
        if (worker_ >= 0 && did_compute) {
            if (code_->pgc == nullptr) {
                if (!encoded) {
                    encode(static_cast<int>(parts_.size()), coeffs_.data());
                }
            } else {
                int valid = 0;
                check_status(gcx_pgc_message_valid(code_->pgc, worker_, t,
                                                   slot_steps_.data(), &valid),
                             "gcx_pgc_message_valid");
                send = valid != 0;
                if (send && !encoded) {
                    check_status(gcx_pgc_coeffs(code_->pgc, worker_, t,
                                                pcoeffs_.data()),
                                 "gcx_pgc_coeffs");
                    encode(code_->load, pcoeffs_.data());
                }
            }
        } else if (worker_ >= 0 && code_->pgc != nullptr) {
            // skipped (decoded without us): the round completes at once;
            // abstain rather than send a message that is not ours
            send = false;
        }
        sent_ = send;
        // the sets are written only when the round completes: empty until
        // then (and after a failed round), as the zeroed masks were
        std::fill(arrived_.begin(), arrived_.end(), 0);
        std::fill(used_.begin(), used_.end(), 0);
        std::fill(abstained_.begin(), abstained_.end(), 0);
        res_           = {};
        res_.arrived   = arrived_.data();
        res_.used      = used_.data();
        res_.abstained = abstained_.data(); // arrival: NULL, not written
        float *msg = msg_.data_ptr<float>(), *sum = sum_.data_ptr<float>();
        float *g = grad_.data_ptr<float>();
        gcx_coded_result_t *res = &res_;
        double *loss = &loss_;
        size_t nf = nfloats_;
        // the decoded sum over partitions / n; ignore: the root's weighted
        // fold is n/((n-s)(s+1)) x the first n-s own partitions, so x (s+1)
        // makes it the rescaled sum of the partitions that came
        double inv = (ignore_ ? code_->s + 1.0 : 1.0) /
                     static_cast<double>(code_->n);
        StartFn start = [cd, send, msg, sum, res](gcx_comm_t *, auto &reqs) {
            if (send) {
                GCX_ISSUE(gcx_coded_gather(cd, msg, sum, res, &r_));
            } else {
                GCX_ISSUE(gcx_coded_abstain(cd, sum, res, &r_));
            }
            return GCX_OK;
        };
        auto post = [res, sum, g, nf, inv, loss] {
            if (res->lost) { // every rank alike: a zero gradient
                std::memset(g, 0, nf * sizeof(float));
                *loss = NAN;
                return;
            }
            for (size_t i = 0; i < nf; ++i) {
                g[i] = static_cast<float>(static_cast<double>(sum[i]) * inv);
            }
            *loss = static_cast<double>(sum[nf]) * inv;
        };
        return submit_composite(*backend_, send ? "gcx_coded_gather"
                                                : "gcx_coded_abstain",
                                {grad_}, start, post);
    }

    // The device path: the coefficients of round t's message over the
    // worker's buffers (gc: its row, ignore: {1}; pgc: one per slot), or
    // None when this rank sends no message of its own (a master, or a
    // pipelined message that would read a slot it skipped).
    py::object coefficients(int64_t t)
    {
        if (worker_ < 0) {
            return py::none();
        }
        if (code_->pgc == nullptr) {
            return py::cast(coeffs_);
        }
        int valid = 0;
        check_status(gcx_pgc_message_valid(code_->pgc, worker_, t,
                                           slot_steps_.data(), &valid),
                     "gcx_pgc_message_valid");
        if (!valid) {
            return py::none();
        }
        std::vector<double> c(static_cast<size_t>(code_->load), 0.0);
        check_status(gcx_pgc_coeffs(code_->pgc, worker_, t, c.data()),
                     "gcx_pgc_coeffs");
        return py::cast(c);
    }

    py::dict result() const
    {
        py::dict d;
        d["round"]      = res_.round;
        d["arrived"]    = wset_to_int(arrived_);
        d["used"]       = wset_to_int(used_);
        d["abstained"]  = wset_to_int(abstained_);
        d["skipped"]    = static_cast<bool>(res_.skipped);
        d["lost"]       = static_cast<bool>(res_.lost);
        d["round_time"] = res_.round_time;
        d["sent"]       = sent_;
        return d;
    }

    py::dict stats()
    {
        auto st   = std::make_shared<gcx_coded_stats_t>(); // zeroed
        auto gone = std::make_shared<std::vector<uint64_t>>(
            GCX_WSET_WORDS(code_->n), 0); // the gone set's storage
        st->gone        = gone->data();
        gcx_coded_t *cd = live();
        {
            py::gil_scoped_release nogil; // the engine may wait for a callback
            submit_composite(*backend_, "gcx_coded_stats", {},
                             [cd, st, gone](gcx_comm_t *, auto &) {
                                 return gcx_coded_stats(cd, st.get());
                             },
                             {})
                ->wait();
        }
        py::dict d;
        d["rounds"]         = st->rounds;
        d["late_dropped"]   = st->late_dropped;
        d["unneeded"]       = st->unneeded;
        d["early"]          = st->early;
        d["skipped"]        = st->skipped;
        d["abstained"]      = st->abstained;
        d["gone"]           = wset_to_int(*gone);
        d["gone_count"]     = st->gone_count;
        d["rounds_lost"]    = st->rounds_lost;
        d["transfers_lost"] = st->transfers_lost;
        d["in_place"]       = st->in_place;
        d["buffer_bytes"]   = st->buffer_bytes;
        return d;
    }

    // A copy of the error-feedback residual (compress only).
    at::Tensor residual() const
    {
        TORCH_CHECK(fb_ != nullptr, "torch_gcx.coded: no compression");
        at::Tensor t = at::empty({static_cast<int64_t>(nfloats_)}, at::kFloat);
        std::memcpy(t.data_ptr<float>(), gcx_feedback_residual(fb_),
                    nfloats_ * sizeof(float));
        return t;
    }

    uint64_t sent_entries() const { return sent_entries_; }

    // Destroy the coded gather on the engine (not collective); idempotent.
    void close()
    {
        if (coded_ == nullptr) {
            return;
        }
        gcx_coded_t *cd = coded_;
        coded_          = nullptr;
        submit_composite(*backend_, "gcx_coded_destroy", {},
                         [cd](gcx_comm_t *, auto &) {
                             gcx_coded_destroy(cd);
                             return GCX_OK;
                         },
                         {})
            ->wait();
    }

  private:
    gcx_coded_t *live() const
    {
        TORCH_CHECK(coded_ != nullptr, "torch_gcx.coded: closed");
        return coded_;
    }

    // msg = sum_k coeffs[k] bufs[k]; with compression msg's gradient part
    // becomes top-k of (residual + it), the residual keeping the rest.
    void encode(int count, const double *coeffs)
    {
        std::vector<const float *> vecs(static_cast<size_t>(count));
        for (int k = 0; k < count; ++k) {
            vecs[static_cast<size_t>(k)] =
                bufs_[static_cast<size_t>(k)].data_ptr<float>();
        }
        float *msg = msg_.data_ptr<float>();
        check_status(gcx_code_encode(count, coeffs, vecs.data(), count_, msg),
                     "gcx_code_encode");
        if (fb_ == nullptr) {
            return;
        }
        gcx_status_t st = gcx_feedback_accumulate(fb_, msg);
        TORCH_CHECK(st == GCX_OK, "torch_gcx.coded: the coded message holds "
                    "NaN or Inf (or its sum with the residual overflows): ",
                    status_message("gcx_feedback_accumulate", st));
        gcx_compress_stats_t cs;
        check_status(gcx_compress_dense(comp_, gcx_feedback_residual(fb_),
                                        nfloats_, cf_, &sent_sv_, &cs),
                     "gcx_compress_dense");
        check_status(gcx_feedback_commit(fb_, &sent_sv_),
                     "gcx_feedback_commit");
        float loss = msg[nfloats_];
        check_status(gcx_sparse_vec_to_dense(&sent_sv_, msg),
                     "gcx_sparse_vec_to_dense");
        msg[nfloats_] = loss;
        sent_entries_ += sent_sv_.nnz;
    }

    void setup_compression(double cf, uint64_t seed)
    {
        gcx_compress_kind_t kind;
        check_status(gcx_compress_kind_parse("topk", &kind),
                     "gcx_compress_kind_parse");
        size_t cap = 0;
        gcx_status_t st = gcx_compress_capacity(kind, nfloats_, cf, &cap);
        TORCH_CHECK(st == GCX_OK, "torch_gcx.coded: topk(cf): cf must be >= 1, "
                    "got ", cf);
        cf_ = cf;
        try {
            check_status(gcx_feedback_create(nfloats_, nullptr, &fb_),
                         "gcx_feedback_create");
            check_status(gcx_compressor_create(kind, seed, &comp_),
                         "gcx_compressor_create");
            check_status(gcx_sparse_vec_alloc(cap, nfloats_, &sent_sv_),
                         "gcx_sparse_vec_alloc");
        } catch (...) {
            release_compression();
            throw;
        }
    }

    void release_compression()
    {
        gcx_sparse_vec_free(&sent_sv_);
        gcx_compressor_destroy(comp_);
        gcx_feedback_destroy(fb_);
        comp_ = nullptr;
        fb_   = nullptr;
    }

    c10::intrusive_ptr<c10d::Backend> pg_; // keeps the group's backend alive
    GcxBackend *backend_;
    size_t nfloats_;
    bool ignore_; // the ignore-stragglers baseline: own partition, no code
    size_t count_ = 0;
    std::unique_ptr<Code> code_;
    gcx_coded_t *coded_ = nullptr;
    int worker_ = -1;
    std::vector<at::Tensor> bufs_;
    at::Tensor msg_, sum_, grad_;
    std::vector<int> parts_;
    std::vector<double> coeffs_, pcoeffs_;
    std::vector<int64_t> slot_steps_;
    // the last round's result; its worker sets point into the vectors
    // below (GCX_WSET_WORDS(n) words each, n = the code's workers)
    gcx_coded_result_t res_ = {};
    std::vector<uint64_t> arrived_, used_, abstained_;
    bool sent_              = false;
    double loss_            = 0;
    // compression
    double cf_               = 0;
    gcx_feedback_t *fb_      = nullptr;
    gcx_compressor_t *comp_  = nullptr;
    gcx_sparse_vec_t sent_sv_ = {};
    uint64_t sent_entries_   = 0;
};

} // namespace

void bind_coded(py::module_ &m)
{
    using Rel = py::call_guard<py::gil_scoped_release>;
    // the code's limits (gcx/coding.h): FR up to the first, CR (exact or
    // weighted) up to the second, which torch_gcx.coded checks against
    m.attr("CODE_MAX_WORKERS")        = GCX_CODE_MAX_WORKERS;
    m.attr("CODE_MAX_SOLVED_WORKERS") = GCX_CODE_MAX_SOLVED_WORKERS;
    py::class_<CodeInfo>(m, "CodeInfo")
        .def(py::init<const std::string &, bool, int, int>(), py::arg("kind"),
             py::arg("pipelined"), py::arg("n"), py::arg("s"))
        .def("workers", &CodeInfo::workers)
        .def("stragglers", &CodeInfo::stragglers)
        .def("load", &CodeInfo::load)
        .def("pipelined", &CodeInfo::pipelined)
        .def("assignment", &CodeInfo::assignment)
        .def("compute", &CodeInfo::compute)
        .def("slots", &CodeInfo::slots);
    py::class_<CodedGather>(m, "CodedGather")
        .def(py::init<const c10::intrusive_ptr<c10d::Backend> &,
                      const std::string &, bool, int, bool, int, int64_t, bool,
                      double, uint64_t, bool>(),
             py::arg("backend"), py::arg("kind"), py::arg("pipelined"),
             py::arg("s"), py::arg("master"), py::arg("root"),
             py::arg("nfloats"), py::arg("weighted"), py::arg("cf"),
             py::arg("seed"), py::arg("ignore") = false, Rel())
        .def("worker", &CodedGather::worker)
        .def("workers", &CodedGather::workers)
        .def("load", &CodedGather::load)
        .def("buffer", &CodedGather::buffer)
        .def("message", &CodedGather::message)
        .def("grad", &CodedGather::grad)
        .def("loss", &CodedGather::loss)
        .def("assignment", &CodedGather::assignment)
        .def("pgc_compute", &CodedGather::pgc_compute)
        .def("ready", &CodedGather::ready, Rel())
        .def("computed", &CodedGather::computed)
        .def("round", &CodedGather::round, Rel(), py::arg("t"),
             py::arg("did_compute"), py::arg("encoded") = false,
             "Encode this step's message (encoded: it is in message() "
             "already) and start its coded round; a Work.")
        .def("coefficients", &CodedGather::coefficients)
        .def("result", &CodedGather::result,
             "The last round: round, arrived / used / abstained as ints with "
             "bit w for worker w (any number of workers), skipped, lost, "
             "round_time, sent.")
        .def("stats", &CodedGather::stats,
             "gcx_coded_stats's counters; gone: an int with bit w for each "
             "worker counted gone, gone_count: how many.")
        .def("residual", &CodedGather::residual)
        .def("sent_entries", &CodedGather::sent_entries)
        .def("close", &CodedGather::close, Rel());
}

} // namespace torch_gcx
