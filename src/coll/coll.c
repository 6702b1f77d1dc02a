/*
 * coll.c - helpers shared by every algorithm: posting transfers with the
 * collective's tag, turning transfer states into task states, type names.
 */
#include "coll.h"

#include <stdint.h>

static const size_t gcx_dtype_sizes[GCX_DT_LAST] = {
    [GCX_DT_F32] = 4, [GCX_DT_F64] = 8,  [GCX_DT_I32] = 4, [GCX_DT_I64] = 8,
    [GCX_DT_F16] = 2, [GCX_DT_BF16] = 2, [GCX_DT_U8] = 1,
};
static const char *const gcx_dtype_names[GCX_DT_LAST] = {
    [GCX_DT_F32] = "f32", [GCX_DT_F64] = "f64",   [GCX_DT_I32] = "i32",
    [GCX_DT_I64] = "i64", [GCX_DT_F16] = "f16",   [GCX_DT_BF16] = "bf16",
    [GCX_DT_U8] = "u8",
};
static const char *const gcx_op_names[GCX_OP_LAST] = {
    [GCX_OP_SUM] = "sum",   [GCX_OP_MAX] = "max",   [GCX_OP_MIN] = "min",
    [GCX_OP_AVG] = "avg",   [GCX_OP_PROD] = "prod", [GCX_OP_BAND] = "band",
    [GCX_OP_BOR] = "bor",   [GCX_OP_BXOR] = "bxor",
};

size_t gcx_dtype_size(gcx_dtype_t dtype)
{
    return (unsigned)dtype < GCX_DT_LAST ? gcx_dtype_sizes[dtype] : 0;
}

const char *gcx_dtype_name(gcx_dtype_t dtype)
{
    return (unsigned)dtype < GCX_DT_LAST ? gcx_dtype_names[dtype] : NULL;
}

const char *gcx_op_name(gcx_op_t op)
{
    return (unsigned)op < GCX_OP_LAST ? gcx_op_names[op] : NULL;
}

int gcx_coll_req_state(gcx_task_t *task, gcx_tl_req_t *req, int peer,
                       size_t expected)
{
    gcx_tl_t *tl = task->comm->tl;

    switch (req->status) {
    case GCX_OK:
        if (expected != SIZE_MAX && req->length != expected) {
            gcx_error("%s #%u: rank %d sent %zu bytes, %zu expected",
                      task->name, task->seq, peer, req->length,
                      expected);
            task->status                  = GCX_ERR_MISMATCH;
            task->comm->transfer_mismatch = 1;
            return -1;
        }
        return 1;
    case GCX_INPROGRESS:
        if (tl->ops->peer_failed(tl, peer)) {
            gcx_error("%s #%u: rank %d is gone", task->name, task->seq,
                      peer);
            task->status = GCX_ERR_PEER;
            return -1;
        }
        return 0;
    default:
        if (req->status == GCX_ERR_MISMATCH) {
            gcx_error("%s #%u: rank %d sent more than the %zu bytes "
                      "expected", task->name, task->seq, peer, expected);
            task->comm->transfer_mismatch = 1;
        }
        task->status = req->status;
        return -1;
    }
}

int gcx_coll_sends_state(gcx_task_t *task, gcx_tl_req_t *reqs,
                         const int *peers, int n)
{
    int done = 1, i, state;

    for (i = 0; i < n; ++i) {
        state = gcx_coll_req_state(task, &reqs[i], peers[i], SIZE_MAX);
        if (state < 0) {
            return -1;
        }
        done &= state;
    }
    return done;
}

/* One contiguous transfer of a collective step; a failure to post is the
 * task's failure. */
static gcx_status_t gcx_coll_post(gcx_task_t *task, int peer, uint32_t step,
                                  void *buf, size_t len, gcx_tl_req_t *req,
                                  int is_recv, int eager)
{
    gcx_tl_t    *tl  = task->comm->tl;
    gcx_iov_t    iov = {buf, len};
    uint64_t     tag = gcx_coll_tag(task, step,
                                    is_recv ? (uint32_t)peer :
                                              (uint32_t)task->comm->rank);
    gcx_status_t status;

    if (is_recv) {
        status = eager ? tl->ops->recv_eager(tl, peer, tag, &iov, 1, req) :
                         tl->ops->recv(tl, peer, tag, GCX_TL_TAG_MATCH_ALL,
                                       &iov, 1, req);
    } else {
        status = eager ? tl->ops->send_eager(tl, peer, tag, &iov, 1, req) :
                         tl->ops->send(tl, peer, tag, &iov, 1, req);
    }
    if (status < 0) {
        task->status = status;
    }
    return status;
}

gcx_status_t gcx_coll_send(gcx_task_t *task, int peer, uint32_t step,
                           const void *buf, size_t len, gcx_tl_req_t *req)
{
    return gcx_coll_post(task, peer, step, (void *)buf, len, req, 0, 0);
}

gcx_status_t gcx_coll_recv(gcx_task_t *task, int peer, uint32_t step,
                           void *buf, size_t len, gcx_tl_req_t *req)
{
    return gcx_coll_post(task, peer, step, buf, len, req, 1, 0);
}

gcx_status_t gcx_coll_send_eager(gcx_task_t *task, int peer, uint32_t step,
                                 const void *buf, size_t len,
                                 gcx_tl_req_t *req)
{
    return gcx_coll_post(task, peer, step, (void *)buf, len, req, 0, 1);
}

gcx_status_t gcx_coll_recv_eager(gcx_task_t *task, int peer, uint32_t step,
                                 void *buf, size_t len, gcx_tl_req_t *req)
{
    return gcx_coll_post(task, peer, step, buf, len, req, 1, 1);
}

uint64_t gcx_coll_hash(uint64_t hash, const void *data, size_t len)
{
    const uint8_t *p = data;
    size_t         i;

    if (hash == 0) {
        hash = 1469598103934665603ull;
    }
    for (i = 0; i < len; ++i) {
        hash = (hash ^ p[i]) * 1099511628211ull;
    }
    return hash;
}

void gcx_coll_subtask_post(gcx_task_t *parent, gcx_task_t *sub,
                           uint32_t step_offset)
{
    sub->seq       = parent->seq;
    sub->step_base = parent->step_base + step_offset;
    sub->deadline  = parent->deadline;
    sub->ops->post(sub);
}

int gcx_coll_subtask_progress(gcx_task_t *parent, gcx_task_t *sub)
{
    if (sub->status == GCX_INPROGRESS) {
        sub->ops->progress(sub);
    }
    if (sub->status == GCX_INPROGRESS) {
        return 0;
    }
    if (sub->status != GCX_OK) {
        parent->status = sub->status;
        return -1;
    }
    return 1;
}
