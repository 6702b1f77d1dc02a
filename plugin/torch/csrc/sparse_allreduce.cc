// sparse_allreduce.cc - dist.all_reduce of a sparse COO tensor on the gcx
// backend: gcx's zero-copy sparse allreduce (algorithm chosen by its cost
// model) instead of gloo's allgather of every rank's indices and values.
//
// Idea: a COO tensor of shape S (sparse dims D, dense block of B values per
// sparse entry) is, to gcx, a sparse float vector of length numel(S): its
// coalesced entries, each dense block expanded to B consecutive linear
// indices, which stay strictly increasing. The result's union is made of
// whole blocks (every rank contributes whole blocks, and gcx keeps an index
// in the union even when its sum is 0), so it folds back into rows. The
// caller's tensor is replaced by the coalesced result, as with gloo.
//
// Cost: on the calling thread a coalesce and one pass over the entries (int64
// -> uint32 linear indices); on the engine a blocking 1-element allreduce
// of the entry counts (it sizes the result: at most min(N, sum of nnz)),
// then the non-blocking gcx_sparse_allreduce; on completion one pass to fold
// the union back into COO indices and values.
#include "backend.h"
#include "tensor_args.h"

#include <gcx/sparse.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace torch_gcx {

namespace {

struct SparseJob {
    at::Tensor t;                // the caller's tensor: the result lands here
    std::vector<int64_t> sizes;  // its shape
    int64_t sparse_dim = 0;
    int64_t block      = 1;      // values per sparse entry (dense dims)
    std::vector<uint32_t> idx;   // linear indices of the input
    std::vector<float> val;
    gcx_sparse_vec_t in  = {};
    gcx_sparse_vec_t out = {};   // the union, allocated on the engine
    int64_t total_nnz    = 0;

    ~SparseJob() { gcx_sparse_vec_free(&out); }
};

} // namespace

c10::intrusive_ptr<c10d::Work>
sparse_allreduce(GcxBackend &backend, at::Tensor &tensor,
                 const c10d::AllreduceOptions &opts)
{
    const char *op = "allreduce (sparse)";
    TORCH_CHECK(tensor.device().is_cpu(), "gcx ", op,
                ": the tensor must be on the CPU, it is on ", tensor.device());
    TORCH_CHECK(tensor.scalar_type() == at::kFloat, "gcx ", op,
                ": sparse values must be float32, got ", tensor.scalar_type());
    auto rop = opts.reduceOp.op_;
    TORCH_CHECK(rop == c10d::ReduceOp::SUM || rop == c10d::ReduceOp::AVG,
                "gcx ", op, ": only SUM and AVG, got ReduceOp.",
                reduce_op_name(rop));
    TORCH_CHECK(tensor.numel() < (int64_t{1} << 32), "gcx ", op, ": ",
                tensor.numel(), " elements is beyond gcx's 2^32 indices");

    auto job        = std::make_shared<SparseJob>();
    job->t          = tensor;
    job->sizes      = tensor.sizes().vec();
    job->sparse_dim = tensor.sparse_dim();
    for (int64_t d = job->sparse_dim; d < tensor.dim(); ++d) {
        job->block *= job->sizes[d];
    }
    at::Tensor c = tensor.coalesce();
    at::Tensor ind = c.indices().contiguous();   // [sparse_dim, nnz]
    at::Tensor vals = c.values().contiguous();   // [nnz, dense...]
    int64_t nnz = ind.size(1);
    const int64_t *ip = ind.data_ptr<int64_t>();
    const float *vp = vals.data_ptr<float>();
    job->idx.resize(static_cast<size_t>(nnz * job->block));
    job->val.assign(vp, vp + nnz * job->block);
    for (int64_t j = 0; j < nnz; ++j) {
        int64_t row = 0; // row-major linear index over the sparse dims
        for (int64_t d = 0; d < job->sparse_dim; ++d) {
            row = row * job->sizes[d] + ip[d * nnz + j];
        }
        for (int64_t b = 0; b < job->block; ++b) {
            job->idx[j * job->block + b] =
                static_cast<uint32_t>(row * job->block + b);
        }
    }
    size_t n = static_cast<size_t>(tensor.numel());
    gcx_status_t st = gcx_sparse_vec_init(&job->in, job->idx.data(),
                                          job->val.data(), job->idx.size(), n);
    TORCH_CHECK(st == GCX_OK, status_message("gcx_sparse_vec_init", st));
    job->in.nnz = job->idx.size();

    float scale = rop == c10d::ReduceOp::AVG
                      ? 1.0f / static_cast<float>(group_size(backend))
                      : 1.0f;
    StartFn start = [job, n](gcx_comm_t *comm, auto &reqs) {
        // size the union: min(N, sum of the ranks' entries)
        job->total_nnz = static_cast<int64_t>(job->in.nnz);
        gcx_status_t s = gcx_allreduce(comm, GCX_IN_PLACE, &job->total_nnz, 1,
                                       GCX_DT_I64, GCX_OP_SUM, nullptr);
        if (s != GCX_OK) {
            return s;
        }
        size_t cap = std::min(n, static_cast<size_t>(job->total_nnz));
        s          = gcx_sparse_vec_alloc(cap, n, &job->out);
        if (s != GCX_OK) {
            return s;
        }
        GCX_ISSUE(gcx_sparse_allreduce(comm, &job->in, nullptr, &job->out,
                                       nullptr, &r_));
        return GCX_OK;
    };
    auto post = [job, scale] {
        const gcx_sparse_vec_t &u = job->out;
        int64_t rows = static_cast<int64_t>(u.nnz) / job->block;
        at::Tensor ind = at::empty({job->sparse_dim, rows}, at::kLong);
        std::vector<int64_t> vshape = {rows};
        vshape.insert(vshape.end(), job->sizes.begin() + job->sparse_dim,
                      job->sizes.end());
        at::Tensor vals = at::empty(vshape, at::kFloat);
        int64_t *ip = ind.data_ptr<int64_t>();
        float *vp = vals.data_ptr<float>();
        for (int64_t r = 0; r < rows; ++r) {
            int64_t row = u.idx[r * job->block] / job->block;
            for (int64_t d = job->sparse_dim - 1; d >= 0; --d) {
                ip[d * rows + r] = row % job->sizes[d];
                row /= job->sizes[d];
            }
        }
        for (size_t i = 0; i < u.nnz; ++i) {
            vp[i] = u.val[i] * scale;
        }
        at::Tensor result =
            at::_sparse_coo_tensor_unsafe(ind, vals, job->sizes)
                ._coalesced_(true);
        job->t.copy_(result);
    };
    return submit_composite(backend, "gcx_sparse_allreduce", {tensor}, start,
                            post, c10d::OpType::ALLREDUCE);
}

} // namespace torch_gcx
