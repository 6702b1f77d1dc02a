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
// caller's tensor is replaced by the coalesced result, as with gloo: the
// union's values, written by gcx, become the result's values (no copy).
//
// Cost: on the calling thread a coalesce (none if coalesced) and one pass
// over the entries (int64 -> uint32 linear indices; the values are read in
// place); on the engine a blocking 1-element allreduce
// of the entry counts (it sizes the result: at most min(N, sum of nnz)),
// then the non-blocking gcx_sparse_allreduce; on completion one pass to
// turn the union's uint32 indices into COO int64 indices.
#include "backend.h"
#include "tensor_args.h"

#include <gcx/sparse.h>

#include <ATen/SparseTensorImpl.h>

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
    at::Tensor in_vals;          // the input's values, read in place by gcx
    at::Tensor out_idx;          // int32 storage of the union's uint32 idx
    at::Tensor out_vals;         // the union's values, become the result's
    gcx_sparse_vec_t in  = {};
    gcx_sparse_vec_t out = {};
    int64_t total_nnz    = 0;
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
    at::Tensor c   = tensor.coalesce();
    at::Tensor ind = c._indices().contiguous(); // [sparse_dim, nnz]
    job->in_vals   = c._values().contiguous();  // [nnz, dense...]
    int64_t nnz = ind.size(1), block = job->block, sd = job->sparse_dim;
    const int64_t *ip = ind.data_ptr<int64_t>();
    job->idx.resize(static_cast<size_t>(nnz * block));
    uint32_t *lin = job->idx.data();
    if (block == 1 && sd == 1) {
        for (int64_t j = 0; j < nnz; ++j) {
            lin[j] = static_cast<uint32_t>(ip[j]);
        }
    } else {
        for (int64_t j = 0; j < nnz; ++j) {
            int64_t row = 0; // row-major linear index over the sparse dims
            for (int64_t d = 0; d < sd; ++d) {
                row = row * job->sizes[d] + ip[d * nnz + j];
            }
            for (int64_t b = 0; b < block; ++b) {
                lin[j * block + b] = static_cast<uint32_t>(row * block + b);
            }
        }
    }
    size_t n = static_cast<size_t>(tensor.numel());
    gcx_status_t st =
        gcx_sparse_vec_init(&job->in, lin, job->in_vals.data_ptr<float>(),
                            job->idx.size(), n);
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
        int64_t cap = static_cast<int64_t>(
            std::min(n, static_cast<size_t>(job->total_nnz)));
        job->out_idx  = at::empty({cap}, at::kInt);
        job->out_vals = at::empty({cap}, at::kFloat);
        s = gcx_sparse_vec_init(
            &job->out, reinterpret_cast<uint32_t *>(job->out_idx.data_ptr()),
            job->out_vals.data_ptr<float>(), static_cast<size_t>(cap), n);
        if (s != GCX_OK) {
            return s;
        }
        GCX_ISSUE(gcx_sparse_allreduce(comm, &job->in, nullptr, &job->out,
                                       nullptr, &r_));
        return GCX_OK;
    };
    auto post = [job, scale] {
        const gcx_sparse_vec_t &u = job->out;
        const int64_t block = job->block, sd = job->sparse_dim;
        int64_t rows   = static_cast<int64_t>(u.nnz) / block;
        at::Tensor ind = at::empty({sd, rows}, at::kLong);
        int64_t *ip    = ind.data_ptr<int64_t>();
        if (block == 1 && sd == 1) { // a 1-d gradient: no division at all
            for (int64_t r = 0; r < rows; ++r) {
                ip[r] = u.idx[r];
            }
        } else {
            for (int64_t r = 0; r < rows; ++r) {
                int64_t row = u.idx[r * block] / block;
                for (int64_t d = sd - 1; d > 0; --d) {
                    ip[d * rows + r] = row % job->sizes[d];
                    row /= job->sizes[d];
                }
                ip[r] = row;
            }
        }
        if (scale != 1.0f) {
            for (size_t i = 0; i < u.nnz; ++i) {
                u.val[i] *= scale;
            }
        }
        // the union's values become the result's, in place: no copy
        std::vector<int64_t> vshape = {rows};
        vshape.insert(vshape.end(), job->sizes.begin() + sd, job->sizes.end());
        at::Tensor vals = job->out_vals.narrow(0, 0, rows * block).view(vshape);
        auto *impl = static_cast<at::SparseTensorImpl *>(
            job->t.unsafeGetTensorImpl());
        impl->set_indices_and_values_unsafe(ind, vals);
        impl->set_coalesced(true);
        job->out_idx  = at::Tensor();
        job->out_vals = at::Tensor();
        job->in_vals  = at::Tensor();
    };
    return submit_composite(backend, "gcx_sparse_allreduce", {tensor}, start,
                            post, c10d::OpType::ALLREDUCE);
}

} // namespace torch_gcx
