/*
 * soak_random.c - gcx_soak's differential parts (issue 31, item 2):
 * injected mismatches and bad arguments, seeded delays, kills and shrink,
 * the coded gather step and create_group, and what a failure prints (the
 * replay line) and exits with.
 *
 * Idea: everything here is drawn from the step's own generator, mixed
 * with a constant so that the plain soak's sequence stays as it was, and
 * so every rank agrees without talking on which step is injected, which
 * ranks lie and how, who sleeps, and who dies when. An injected step has
 * some ranks pass another count, type, operation, root, per-rank counts,
 * sparse algorithm, top-k, dense length, a bad index or too small an
 * output (GCX_ERR_MISMATCH on every rank, outputs byte for byte as they
 * were, the next collective on the communicator right: the soak checks
 * every one against its own reference), or some ranks first make a call
 * that is invalid locally (GCX_ERR_INVALID at once, no request, nothing
 * written, nothing started: the honest call that follows would otherwise
 * fall out of step). A kill step has one rank _exit before its collective
 * or after posting it; every survivor must get an error there or in a
 * barrier over the world (never GCX_OK with a wrong result), revokes what
 * it holds, shrinks the world and goes on with the new one, whose size
 * and ranks are checked.
 *
 * Cost: an injected step copies its output area once (the snapshot); an
 * invalid call costs nothing; a kill costs one shrink (a few rounds of
 * control messages); a coded step builds a code (a LAPACK decode at the
 * root for CR) and moves (s+1)-fold coded vectors.
 */
#include "soak.h"

#include <gcx/coded.h>
#include <gcx/coding.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const soak_inj_names[INJ_NKINDS] = {
    "none", "count", "type", "operation", "root", "per-rank counts",
    "sparse algorithm", "sparse index", "sparse capacity", "sparse top-k",
    "sparse dense length", "message size", "coded parameters",
    "group order", "invalid argument",
};

uint64_t soak_mix(uint64_t a, uint64_t b)
{
    uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ull);

    return soak_rng_next(&s);
}

/* ---- status, replay, exit ------------------------------------------------ */

/* gcxrun from the soak's own path (build/tests/soak/gcx_soak) */
static void soak_gcxrun_path(char *buf, size_t len)
{
    const char *self = S.opt.argv != NULL ? S.opt.argv[0] : "gcx_soak";
    const char *slash = strrchr(self, '/');

    char path[1024], *real;

    snprintf(buf, len, "gcxrun");
    if (slash != NULL) {
        snprintf(path, sizeof(path), "%.*s/../../programs/gcxrun/gcxrun",
                 (int)(slash - self), self);
        real = realpath(path, NULL);
        if (real != NULL && access(real, X_OK) == 0) {
            snprintf(buf, len, "%s", real);
        }
        free(real);
    }
}

void soak_replay_line(const char *why)
{
    static int printed;
    char       cmd[2048], run[1024], *self;
    size_t     m = 0;
    int        has_seed = 0;
    const char *env[] = {"GCX_TIMEOUT", "UCX_TLS", "GCX_UCX_ERR_MODE",
                         "MALLOC_MMAP_THRESHOLD_", NULL};

    if (printed++) {
        return;
    }
    cmd[0] = 0;
    for (int k = 0; env[k] != NULL; ++k) {
        const char *v = getenv(env[k]);
        if (v != NULL && m < sizeof(cmd)) {
            m += (size_t)snprintf(cmd + m, sizeof(cmd) - m, "%s=%s ", env[k], v);
        }
    }
    soak_gcxrun_path(run, sizeof(run));
    self = S.opt.argv != NULL ? realpath(S.opt.argv[0], NULL) : NULL;
    if (m < sizeof(cmd)) {
        m += (size_t)snprintf(cmd + m, sizeof(cmd) - m, "%s -n %d -t%s --",
                              run, S.size0,
                              S.opt.nkills > 0 ? " --keep-going" : "");
    }
    for (int i = 0; i < S.opt.argc && m < sizeof(cmd); ++i) {
        has_seed |= !strcmp(S.opt.argv[i], "--seed");
        m += (size_t)snprintf(cmd + m, sizeof(cmd) - m, " %s",
                              i == 0 && self != NULL ? self : S.opt.argv[i]);
    }
    free(self);
    if (!has_seed && m < sizeof(cmd)) {
        snprintf(cmd + m, sizeof(cmd) - m, " --seed %llu",
                 (unsigned long long)S.seed);
    }
    fprintf(stderr, "[soak rank %d] REPLAY (%s; seed %llu, step %lld, %d "
            "ranks, %d killed): %s\n", S.rank, why,
            (unsigned long long)S.seed, S.nstep, S.size0, S.killed, cmd);
    fflush(stderr);
}

/* A failure a kill explains: at the kill step, or before it on a rank
 * that lags (the survivors ahead revoked what it waits in, or the victim
 * it still waits for is gone): that rank then skips to the kill step
 * (soak_catch_up in soak.c). Only kills fail or revoke communicators, so
 * such an error with no kill to come is unexpected. */
static int soak_expected_failure(const soak_op_t *o, gcx_status_t st)
{
    int kill_error = st == GCX_ERR_PEER || st == GCX_ERR_REVOKED ||
                     (o != NULL && o->kind == K_CODED &&
                      st == GCX_ERR_UNDECODABLE);

    if (!kill_error) {
        return 0;
    }
    if (S.in_kill) {
        return 1;
    }
    if (S.kill_next < S.opt.nkills) {
        S.early = 1;
        return 1;
    }
    return 0;
}

/* every live communicator of this rank, so peers blocked in any of them
 * learn of the failure at once */
static void soak_revoke_all(void)
{
    for (int f = 0; f < SOAK_MAX_FAM; ++f) {
        if (S.fam[f].live && S.fam[f].comm != NULL) {
            (void)gcx_comm_revoke(S.fam[f].comm);
        }
    }
}

int soak_kill_explains(const soak_op_t *o, gcx_status_t st)
{
    if (!soak_expected_failure(o, st)) {
        return 0;
    }
    if (!S.kill_err) {
        S.kill_err = 1;
        soak_revoke_all();
    }
    return 1;
}

void soak_bad_status(soak_op_t *o, const char *what, gcx_status_t st)
{
    int hang = st == GCX_ERR_TIMEOUT;

    if (soak_kill_explains(o, st)) {
        return;
    }
    if (o != NULL) {
        fprintf(stderr,
                "[soak rank %d] %s step %lld (collective #%llu) %s on family "
                "%d (config %d, %d ranks, rank %d; type %s, op %s, count %zu, "
                "root %d%s%s) %s returned %s\n",
                S.rank, hang ? "HANG:" : "UNEXPECTED ERROR:", S.nstep,
                (unsigned long long)o->seq, soak_kind_names[o->kind],
                S.fam[o->fam].id, S.fam[o->fam].config, o->n, o->me,
                gcx_dtype_name(o->dt) ? gcx_dtype_name(o->dt) : "-",
                gcx_op_name(o->op) ? gcx_op_name(o->op) : "-", o->count,
                o->root, o->inj ? ", injected " : "",
                o->inj ? soak_inj_names[o->inj] : "", what, gcx_strerror(st));
    } else {
        fprintf(stderr, "[soak rank %d] %s step %lld: %s returned %s\n",
                S.rank, hang ? "HANG:" : "UNEXPECTED ERROR:", S.nstep, what,
                gcx_strerror(st));
    }
    soak_replay_line(hang ? "hang" : "unexpected error");
    exit(hang ? SOAK_EXIT_HANG : SOAK_EXIT_UNEXPECTED);
}

static void soak_wrong(const soak_op_t *o, const char *what)
{
    ++S.st.wrong;
    if (S.reported++ < 20) {
        fprintf(stderr, "[soak rank %d] WRONG step %lld (collective #%llu) "
                "%s on family %d (%d ranks, rank %d, injected %s, %s): %s\n",
                S.rank, S.nstep, o != NULL ? (unsigned long long)o->seq : 0ull,
                o != NULL ? soak_kind_names[o->kind] : "-",
                o != NULL ? S.fam[o->fam].id : 0, o != NULL ? o->n : 0,
                o != NULL ? o->me : 0, o != NULL ? soak_inj_names[o->inj] : "-",
                o != NULL && o->liar ? "liar" : "honest", what);
        soak_replay_line("wrong result");
    }
}

/* ---- delays ---------------------------------------------------------------- */

void soak_delay(const soak_op_t *o)
{
    if (o->delay_us > 0) {
        struct timespec ts = {0, 1000L * o->delay_us};
        nanosleep(&ts, NULL);
        ++S.st.delays;
    }
}

/* ---- injections: who, what ------------------------------------------------- */

void soak_inject_setup(soak_op_t *o)
{
    uint64_t x = soak_mix(o->rng, 0x696e6a65), d = soak_mix(o->rng, 0x64656c61);

    o->xrng       = x;
    o->force_algo = -1;
    o->want_inj   = S.opt.inject > 0 && !S.in_kill && !o->follow &&
                  (int)soak_rng_below(&x, 100) < S.opt.inject;
    if (o->comm != NULL && o->n >= 2 && o->n < 64) {
        /* a mask, as the sequences of small worlds always drew it */
        uint64_t mask = 0;
        if (o->n > 2 && soak_rng_below(&x, 4) == 0) {
            /* several liars, at least one honest rank */
            while (mask == 0 || mask == (1ull << o->n) - 1) {
                mask = soak_rng_next(&x) & ((1ull << o->n) - 1);
            }
        } else {
            mask = 1ull << soak_rng_below(&x, (size_t)o->n);
        }
        o->liars = mask;
        o->liar  = soak_liar_of(o, o->me);
    } else if (o->comm != NULL && o->n >= 64) {
        /* past a 64-bit mask: one liar, or a per-rank draw with rank
         * liar_one's successor honest and liar_one lying */
        o->liar_one  = (int)soak_rng_below(&x, (size_t)o->n);
        o->liar_seed = soak_rng_below(&x, 4) == 0 ? soak_rng_next(&x) | 1 : 0;
        o->liar      = soak_liar_of(o, o->me);
    }
    if (o->comm != NULL && S.opt.delays > 0 &&
        (int)soak_rng_below(&d, 100) < S.opt.delays) {
        /* each member of the communicator sleeps or not, 0-2 ms */
        for (int r = 0; r < o->n; ++r) {
            int sleeps = soak_rng_below(&d, 2) == 0;
            int us     = (int)soak_rng_below(&d, 2000);
            if (r == o->me && sleeps) {
                o->delay_us = us;
            }
        }
    }
    if (o->comm != NULL && o->me == 0) {
        ++S.st.colls; /* once per communicator that runs it */
    }
}

int soak_liar_of(const soak_op_t *o, int r)
{
    if (o->n < 64) {
        return (int)((o->liars >> r) & 1);
    }
    if (r == o->liar_one) {
        return 1;
    }
    if (o->liar_seed == 0 || r == (o->liar_one + 1) % o->n) {
        return 0; /* one liar; or the honest one of several */
    }
    return (int)(soak_mix(o->liar_seed, (uint64_t)r) & 1);
}

static int soak_reduction_kind(int kind)
{
    return kind == K_ALLREDUCE || kind == K_REDUCE ||
           kind == K_REDUCE_SCATTER;
}

void soak_inject_pick(soak_op_t *o)
{
    int cand[16], m = 0, checked;

    o->inj = INJ_NONE;
    if (!o->want_inj || o->comm == NULL || o->n < 2) {
        return;
    }
    /* GCX_CHECK_ARGS=n: no argument check, so mismatches are undefined
     * there; local bad arguments, message sizes and the coded gather's
     * own agreement still apply */
    checked = strcmp(soak_configs[S.fam[o->fam].config][0] ?
                         soak_configs[S.fam[o->fam].config][0] : "",
                     "CHECK_ARGS") != 0;
    cand[m++] = INJ_INVALID;
    switch (o->kind) {
    case K_ALLREDUCE:
    case K_REDUCE_SCATTER:
    case K_REDUCE:
    case K_BCAST:
    case K_ALLGATHER:
    case K_GATHER:
    case K_SCATTER:
        if (checked) {
            cand[m++] = INJ_COUNT;
            if (o->esz > 1) {
                cand[m++] = INJ_DTYPE;
            }
            if (soak_reduction_kind(o->kind)) {
                cand[m++] = INJ_OP;
            }
            if (o->kind == K_BCAST || o->kind == K_REDUCE ||
                o->kind == K_GATHER || o->kind == K_SCATTER) {
                cand[m++] = INJ_ROOT;
            }
        }
        break;
    case K_ALLGATHERV:
    case K_ALLTOALLV:
        if (checked) {
            cand[m++] = INJ_VCOUNTS;
            if (o->esz > 1) {
                cand[m++] = INJ_DTYPE;
            }
        }
        break;
    case K_SENDRECV:
        cand[m++] = INJ_P2P_SIZE;
        break;
    case K_SPARSE:
        if (checked) {
            cand[m++] = INJ_SP_ALGO;
            cand[m++] = INJ_SP_ALGO; /* the case issue 31 names */
            cand[m++] = INJ_SP_INDEX;
            cand[m++] = INJ_SP_TOPK;
            cand[m++] = INJ_SP_N;
            if (o->want_sparse && o->sp_K >= 1) {
                cand[m++] = INJ_SP_CAP;
            }
        }
        break;
    case K_CODED:
        cand[m++] = INJ_CODED;
        break;
    default:
        break;
    }
    o->inj     = cand[soak_rng_below(&o->xrng, (size_t)m)];
    o->inj_var = (int)(soak_rng_next(&o->xrng) & 0x7fffffff);
    if (o->inj == INJ_ROOT) {
        o->inplace = 0; /* in place is for the root alone: keep it valid */
    }
    if (o->me == 0) {
        ++S.st.injected;
        ++S.st.per_inj[o->inj];
    }
}

size_t soak_arg_count(const soak_op_t *o, size_t honest)
{
    if (o->inj != INJ_COUNT || !o->liar) {
        return honest;
    }
    return honest == 0 || (o->inj_var & 1) ? honest + 1 : honest - 1;
}

gcx_dtype_t soak_arg_dt(const soak_op_t *o)
{
    gcx_dtype_t cand[GCX_DT_LAST];
    int         m = 0;

    if (o->inj != INJ_DTYPE || !o->liar) {
        return o->dt;
    }
    /* another type no wider (the buffers hold the honest one), of the same
     * class (a reduction type for reductions) */
    for (int t = 0; t < GCX_DT_LAST; ++t) {
        if (t == (int)o->dt || gcx_dtype_size((gcx_dtype_t)t) > o->esz ||
            (soak_reduction_kind(o->kind) && t == GCX_DT_U8)) {
            continue;
        }
        cand[m++] = (gcx_dtype_t)t;
    }
    return m == 0 ? o->dt : cand[(size_t)o->inj_var % (size_t)m];
}

gcx_op_t soak_arg_op(const soak_op_t *o)
{
    if (o->inj != INJ_OP || !o->liar) {
        return o->op;
    }
    /* another of sum, max, min, avg, prod: each applies to every type */
    return (gcx_op_t)(((int)o->op + 1 + o->inj_var % 4) % (GCX_OP_PROD + 1));
}

int soak_arg_root(const soak_op_t *o)
{
    if (o->inj != INJ_ROOT || !o->liar) {
        return o->root;
    }
    return (o->root + 1 + o->inj_var % (o->n - 1)) % o->n;
}

/* ---- snapshots: nothing written ---------------------------------------- */

void soak_snapshot(soak_op_t *o)
{
    soak_slot_t *sl = o->slot;

    if (o->inj == INJ_NONE || sl->snap == NULL) {
        return;
    }
    if (o->kind != K_SPARSE) {
        if (o->out == NULL) {
            o->snap_len = 0;
            return;
        }
        o->snap_off = (size_t)(o->out - SOAK_GUARD - sl->recv);
        o->snap_len = o->out_bytes + 2 * SOAK_GUARD;
        o->snap_flags = 0;
    }
    /* sparse: soak_sparse_prepare set the ranges */
    memcpy(sl->snap, sl->recv + o->snap_off, o->snap_len);
    if (o->snap_flags > 0) {
        memcpy(sl->snap + o->snap_len, o->flags, o->snap_flags);
    }
}

/* 1 when the outputs are as the snapshot has them */
static int soak_untouched(const soak_op_t *o, char *where, size_t len)
{
    const soak_slot_t *sl = o->slot;

    if (sl->snap == NULL) {
        return 1;
    }
    for (size_t i = 0; i < o->snap_len; ++i) {
        if (sl->recv[o->snap_off + i] != sl->snap[i]) {
            snprintf(where, len, "output byte %zd (from the start of the "
                     "output) written", (ptrdiff_t)i - SOAK_GUARD);
            return 0;
        }
    }
    for (size_t i = 0; i < o->snap_flags; ++i) {
        if (o->flags[i] != sl->snap[o->snap_len + i]) {
            snprintf(where, len, "in_result byte %zu written", i);
            return 0;
        }
    }
    if (o->kind == K_SPARSE && o->want_sparse && o->out_sp.nnz != 0xdead) {
        snprintf(where, len, "sparse_out->nnz set to %zu", o->out_sp.nnz);
        return 0;
    }
    return 1;
}

/* ---- local bad arguments ------------------------------------------------- */

static void soak_invalid_result(soak_op_t *o, const char *call,
                                gcx_status_t st, gcx_request_t *req,
                                gcx_request_t *sentinel)
{
    char where[160], msg[320];

    ++S.st.invalid_calls;
    if (st == GCX_ERR_INVALID && req == sentinel && soak_untouched(o, where, sizeof(where))) {
        return;
    }
    if (st != GCX_ERR_INVALID) {
        snprintf(msg, sizeof(msg), "local bad argument (%s) returned %s, not "
                 "GCX_ERR_INVALID", call, gcx_strerror(st));
    } else if (req != sentinel) {
        snprintf(msg, sizeof(msg), "local bad argument (%s): the request "
                 "pointer was set", call);
    } else {
        snprintf(msg, sizeof(msg), "local bad argument (%s): %s", call, where);
    }
    soak_wrong(o, msg);
    if (st == GCX_OK || st == GCX_INPROGRESS) {
        /* a collective started on this rank only: the ranks are out of
         * step from here, nothing after it means anything */
        fprintf(stderr, "[soak rank %d] a call with bad arguments started "
                "an operation; stopping\n", S.rank);
        exit(SOAK_EXIT_WRONG);
    }
}

void soak_invalid_calls(soak_op_t *o)
{
    static char      dummy_sentinel;
    gcx_request_t   *sentinel = (gcx_request_t *)(void *)&dummy_sentinel;
    gcx_request_t   *req = sentinel;
    gcx_request_t  **rq = &req;
    int              v = o->inj_var % 3, n = o->n;
    gcx_comm_t      *c = v == 0 ? NULL : o->comm;
    gcx_dtype_t      dt = v == 1 ? GCX_DT_LAST : o->dt;
    size_t           cnt = o->count > 0 ? o->count : 1;
    const char      *call = v == 0 ? "NULL communicator" :
                            v == 1 ? "type GCX_DT_LAST" : "";
    gcx_status_t     st = GCX_ERR_INVALID;

    if (o->inj != INJ_INVALID || !o->liar) {
        return;
    }
    switch (o->kind) {
    case K_ALLREDUCE:
        if (v == 2) {
            call = "u8 is not a reduction type";
            dt   = GCX_DT_U8;
        }
        st = gcx_allreduce(c, o->in != NULL ? o->in : GCX_IN_PLACE, o->out,
                           o->count, dt, o->op, rq);
        break;
    case K_BCAST:
        if (v == 2) {
            call = "root out of range";
        }
        st = gcx_broadcast(c, o->out, o->count, dt, v == 2 ? n : o->root, rq);
        break;
    case K_ALLGATHER:
        if (v == 2) {
            call = "NULL recvbuf";
        }
        st = gcx_allgather(c, o->inplace ? GCX_IN_PLACE : o->in,
                           v == 2 ? NULL : o->out, v == 2 ? cnt : o->count, dt,
                           rq);
        break;
    case K_ALLGATHERV:
        if (v == 2) {
            call = "NULL recvcounts";
        }
        st = gcx_allgatherv(c, o->in, o->counts[o->me], o->out,
                            v == 2 ? NULL : o->counts, o->displs, dt, rq);
        break;
    case K_ALLTOALLV:
        if (v == 2) {
            call = "GCX_IN_PLACE";
        }
        st = gcx_alltoallv(c, v == 2 ? GCX_IN_PLACE : o->in, o->scounts,
                           o->sdispls, o->out, o->counts, o->displs, dt, rq);
        break;
    case K_REDUCE_SCATTER:
        if (v == 2) {
            call = "NULL recvbuf";
        }
        st = gcx_reduce_scatter(c, o->inplace ? GCX_IN_PLACE : o->in,
                                v == 2 ? NULL : o->out,
                                v == 2 ? cnt : o->count, dt, o->op, rq);
        break;
    case K_REDUCE:
        if (v == 2) {
            call = "root -1";
        }
        st = gcx_reduce(c, o->inplace ? GCX_IN_PLACE : o->in, o->out, o->count,
                        dt, o->op, v == 2 ? -1 : o->root, rq);
        break;
    case K_GATHER:
        if (v == 2) {
            call = "root out of range";
        }
        st = gcx_gather(c, o->inplace ? GCX_IN_PLACE : o->in, o->count, o->out,
                        dt, v == 2 ? n : o->root, rq);
        break;
    case K_SCATTER:
        if (v == 2) {
            call = o->me != o->root ? "GCX_IN_PLACE at a non-root" :
                                      "root -1";
        }
        st = gcx_scatter(c, o->in,
                         v == 2 && o->me != o->root ? (void *)GCX_IN_PLACE :
                                                      o->out,
                         o->count, dt,
                         v == 2 && o->me == o->root ? -1 : o->root, rq);
        break;
    case K_BARRIER:
        call = "NULL communicator";
        st   = gcx_barrier(NULL, rq);
        break;
    case K_SENDRECV:
        if (v == 2) {
            call = o->inj_var & 8 ? "peer out of range" : "tag -1";
        }
        if (o->inj_var & 4) {
            st = gcx_recv(c, o->out, o->count, dt,
                          v == 2 && (o->inj_var & 8) ? n : (o->me + n - 1) % n,
                          v == 2 && !(o->inj_var & 8) ? -1 : o->tag, rq);
        } else {
            st = gcx_send(c, o->in, o->count, dt,
                          v == 2 && (o->inj_var & 8) ? n : (o->me + 1) % n,
                          v == 2 && !(o->inj_var & 8) ? -1 : o->tag, rq);
        }
        break;
    case K_SPARSE: {
        gcx_sparse_allreduce_opts_t opts = o->sp_opts;
        gcx_sparse_vec_t            alias = o->out_sp;
        const gcx_sparse_vec_t     *in = &o->in_sp;
        float                      *dense = o->want_dense ? (float *)o->out : NULL;
        gcx_sparse_vec_t           *sp = o->want_sparse ? &o->out_sp : NULL;
        switch (o->inj_var % 5) {
        case 0: call = "NULL communicator"; c = NULL; break;
        case 1: call = "NULL input"; c = o->comm; in = NULL; break;
        case 2: call = "no output"; c = o->comm; dense = NULL; sp = NULL; break;
        case 3: call = "unknown algorithm"; c = o->comm; opts.algo = "no_such_algo"; break;
        default:
            call = "sparse_out shares the input's arrays";
            c    = o->comm;
            if (o->in_sp.nnz == 0) {
                dense = NULL;
                sp    = NULL; /* no output then */
            } else {
                alias.idx = o->in_sp.idx;
                alias.val = o->in_sp.val;
                sp        = &alias;
            }
            break;
        }
        st = gcx_sparse_allreduce(c, in, dense, sp, &opts, rq);
        break;
    }
    default:
        return;
    }
    soak_invalid_result(o, call, st, req, sentinel);
}

/* ---- checks of injected steps ------------------------------------------- */

int soak_inject_check(soak_op_t *o)
{
    char where[160], msg[320];

    if (o->inj == INJ_NONE || o->inj == INJ_INVALID) {
        return 0;
    }
    if (o->inj == INJ_P2P_SIZE) {
        return 0; /* soak_check's send/recv case knows it */
    }
    if (o->status != GCX_ERR_MISMATCH) {
        snprintf(msg, sizeof(msg), "returned %s, not GCX_ERR_MISMATCH",
                 gcx_strerror(o->status));
        soak_wrong(o, msg);
        return 1;
    }
    if (!soak_untouched(o, where, sizeof(where))) {
        snprintf(msg, sizeof(msg), "GCX_ERR_MISMATCH but %s", where);
        soak_wrong(o, msg);
    }
    return 1;
}

/* ---- kills ------------------------------------------------------------- */

int soak_parse_kill(const char *arg)
{
    long long step;
    int       rank = -1, used = 0;
    char      where[16] = "";

    if (S.opt.nkills >= 8) {
        return -1;
    }
    if (sscanf(arg, "%lld:%d%n", &step, &rank, &used) < 2) {
        return -1;
    }
    if (arg[used] == ':') {
        snprintf(where, sizeof(where), "%s", arg + used + 1);
    }
    S.opt.kill_step[S.opt.nkills]   = step;
    S.opt.kill_rank[S.opt.nkills]   = rank;
    S.opt.kill_inside[S.opt.nkills] = !strcmp(where, "inside") ? 1 :
                                      !strcmp(where, "before") ? 0 :
                                      (int)(step & 1);
    S.opt.nkills++;
    return 0;
}

/* --kills N: steps spread over the first three quarters of the run (a
 * step of the count --ops gives; batches make fewer steps than --ops) */
void soak_draw_kills(uint64_t seed, uint64_t nsteps)
{
    uint64_t s = soak_mix(seed, 0x6b696c6c);
    int      n = S.opt.nkills;

    for (int k = 0; k < n; ++k) {
        S.opt.kill_step[k]   = 1 + (long long)soak_rng_below(&s, nsteps * 3 / 4 + 1);
        S.opt.kill_rank[k]   = -1;
        S.opt.kill_inside[k] = (int)soak_rng_below(&s, 2);
    }
    for (int i = 1; i < n; ++i) { /* in order */
        for (int j = i; j > 0 && S.opt.kill_step[j - 1] > S.opt.kill_step[j]; --j) {
            long long t = S.opt.kill_step[j];
            int       in = S.opt.kill_inside[j];
            S.opt.kill_step[j]       = S.opt.kill_step[j - 1];
            S.opt.kill_inside[j]     = S.opt.kill_inside[j - 1];
            S.opt.kill_step[j - 1]   = t;
            S.opt.kill_inside[j - 1] = in;
        }
    }
}

int soak_kill_now(void)
{
    int k = S.kill_next;

    if (k >= S.opt.nkills || S.nstep < S.opt.kill_step[k] || S.size < 2) {
        return 0;
    }
    S.victim = S.opt.kill_rank[k] >= 0 ?
                   S.opt.kill_rank[k] % S.size :
                   (int)(soak_mix(S.seed, 0x766963 + (uint64_t)k) % (uint64_t)S.size);
    S.in_kill  = 1;
    S.kill_err = S.early; /* a lagging rank saw it already */
    S.early    = 0;
    if (S.rank == 0) {
        printf("# kill %d: rank %d of %d dies at step %lld (%s)\n", k + 1,
               S.victim, S.size, S.nstep,
               S.opt.kill_inside[k] ? "inside its collective" :
                                      "before its collective");
        fflush(stdout);
    }
    return 1;
}

int soak_kill_victim(void)
{
    return S.in_kill && S.rank == S.victim;
}

int soak_kill_inside(void)
{
    return S.opt.kill_inside[S.kill_next];
}

void soak_vanish(soak_op_t *ops, int nposted, uint64_t tests)
{
    for (uint64_t t = 0; t < tests; ++t) {
        for (int b = 0; b < nposted; ++b) {
            for (int q = 0; q < ops[b].nreq; ++q) {
                (void)gcx_test(ops[b].req[q]); /* transfers under way */
            }
        }
    }
    printf("[soak rank %d] vanishing at step %lld (%s, %d posted)\n", S.rank,
           S.nstep, nposted > 0 ? "inside" : "before", nposted);
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}

/* Survivors: an error must have come, at the step or in a barrier over
 * the world; then shrink the world and go on with the new one. */
void soak_kill_recover(void)
{
    gcx_comm_t  *nw = NULL;
    gcx_status_t st;
    int          want_rank = S.rank - (S.rank > S.victim), n;
    int32_t      members[SOAK_MAX_RANKS];

    if (!S.kill_err) {
        st = gcx_barrier(S.world, NULL);
        if (st == GCX_OK) {
            soak_wrong(NULL, "a barrier over the world with a dead rank "
                             "returned GCX_OK");
        } else {
            soak_bad_status(NULL, "barrier over the world after a kill", st);
        }
    }
    soak_revoke_all();
    st = gcx_comm_shrink(S.world, &nw);
    S.in_kill = 0;
    if (st != GCX_OK) {
        soak_bad_status(NULL, "gcx_comm_shrink after a kill", st);
    }
    ++S.kill_next; /* a failure from here on is the next kill's */
    n = gcx_comm_size(nw);
    if (n != S.size - 1 || gcx_comm_rank(nw) != want_rank) {
        char msg[160];
        snprintf(msg, sizeof(msg), "shrunk world: rank %d of %d, expected %d "
                 "of %d (if a survivor failed, its error comes first)",
                 gcx_comm_rank(nw), n, want_rank, S.size - 1);
        soak_wrong(NULL, msg);
    }
    /* every member: the same survivors, in their old order */
    if (n <= SOAK_MAX_RANKS && gcx_comm_rank(nw) < n) {
        members[gcx_comm_rank(nw)] = S.rank;
        st = gcx_allgather(nw, GCX_IN_PLACE, members, 1, GCX_DT_I32, NULL);
        if (st != GCX_OK) {
            /* the next kill's survivors, ahead, revoked it: catch up */
            soak_bad_status(NULL, "allgather over the shrunk world", st);
            n = -n;
        }
        for (int r = 0; r < n; ++r) {
            if (members[r] != r + (r >= S.victim)) {
                soak_wrong(NULL, "shrunk world: members not the survivors in "
                                 "order");
                break;
            }
        }
    }
    n = gcx_comm_size(nw);
    soak_destroy_all();
    gcx_comm_destroy(S.world);
    S.world = nw;
    S.rank  = gcx_comm_rank(nw);
    S.size  = n;
    S.fam[0].comm = nw;
    S.fam[0].n    = n;
    for (int r = 0; r < n; ++r) {
        S.fam[0].members[r] = r;
    }
    ++S.killed;
    ++S.st.kills;
}

/* ---- coded gather --------------------------------------------------------- */

/* partition j's gradient in round r of step seq, element i */
static float soak_grad(uint64_t seq, int r, int j, size_t i)
{
    return (float)soak_val(seq * 4 + (uint64_t)r, (uint32_t)j, i);
}

/* Most partitions a worker of a coded op computes (FR's s + 1 is drawn
 * among the divisors up to it): the gradient arrays of a round below and
 * the send buffer's room are sized by it. Past GCX_CODE_MAX_SOLVED_WORKERS
 * workers a CR draw becomes FR (CR decodes by a dense solve up to it). */
#define SOAK_CODED_MAX_LOAD 64

/* 1 when every worker of @p sub (a set over n workers) is in @p set. */
static int soak_wset_subset(const uint64_t *sub, const uint64_t *set, int n)
{
    for (size_t k = 0; k < GCX_WSET_WORDS(n); ++k) {
        if ((sub[k] & ~set[k]) != 0) {
            return 0;
        }
    }
    return 1;
}

/* A worker set as hex words, the highest first ("0x..."), into buf. */
static const char *soak_wset_hex(const uint64_t *set, int n, char *buf,
                                 size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "0x");
    for (size_t k = GCX_WSET_WORDS(n); k-- > 0 && used < len;) {
        used += (size_t)snprintf(buf + used, len - used,
                                 k + 1 == GCX_WSET_WORDS(n) ? "%llx" : "%016llx",
                                 (unsigned long long)set[k]);
    }
    return buf;
}

static gcx_status_t soak_code_make(int kind, int n, int s, gcx_code_t **code)
{
    gcx_code_params_t cp;

    memset(&cp, 0, sizeof(cp));
    cp.kind = (gcx_code_kind_t)kind;
    cp.n    = n;
    cp.s    = s;
    return gcx_code_create(&cp, code);
}

/* Coded gather: a code drawn for the communicator (uncoded, FR, CR; root
 * a worker or not), the star or, every rank a worker, the master-less
 * algorithm, 1-3 rounds, each rank checks the decoded sum (exact for
 * uncoded and FR, within 1e-3 * 11 n for CR, as the coded suite). */
gcx_status_t soak_coded_run(soak_op_t *o, size_t max_bytes, int die_inside)
{
    soak_slot_t       *sl = o->slot;
    int                n = o->n, workers, s = 0, kind, worker;
    gcx_code_t        *code = NULL, *other = NULL;
    gcx_coded_t       *coded = NULL;
    gcx_coded_params_t params;
    gcx_coded_result_t res;
    gcx_status_t       st;
    size_t             count;
    float             *msg, *g, *out;
    double             tol;

    o->dt  = GCX_DT_F32;
    o->esz = 4;
    count  = soak_rng_size(&o->rng, max_bytes / 16) / 4;
    o->count = count;
    o->root  = (int)soak_rng_below(&o->rng, (size_t)n);
    o->cd_rnw = n >= 2 && soak_rng_below(&o->rng, 4) == 0;
    workers = n - o->cd_rnw;
    kind    = (int)soak_rng_below(&o->rng, 3);
    if (workers > GCX_CODE_MAX_SOLVED_WORKERS && kind == GCX_CODE_CR) {
        kind = GCX_CODE_FR;
    }
    if (kind == GCX_CODE_FR) { /* s + 1 divides the workers */
        int divs[SOAK_CODED_MAX_LOAD], nd = 0;
        for (int d = 1; d <= workers && d <= SOAK_CODED_MAX_LOAD; ++d) {
            if (workers % d == 0) {
                divs[nd++] = d;
            }
        }
        s = divs[soak_rng_below(&o->rng, (size_t)nd)] - 1;
    } else if (kind == GCX_CODE_CR) {
        s = (int)soak_rng_below(&o->rng, (size_t)(workers < 4 ? workers : 4));
    }
    o->cd_kind   = kind;
    o->cd_s      = s;
    o->cd_rounds = 1 + (int)soak_rng_below(&o->rng, 3);
    /* the star, or (every rank a worker) the master-less algorithm */
    o->cd_algo = !o->cd_rnw && soak_rng_below(&o->rng, 2) ?
                     GCX_CODED_ALGO_MASTERLESS : GCX_CODED_ALGO_STAR;
    soak_inject_pick(o);
    st = soak_code_make(kind, workers, s, &code);
    if (st != GCX_OK) {
        soak_bad_status(o, "gcx_code_create", st);
        return st;
    }
    memset(&params, 0, sizeof(params));
    params.code            = code;
    params.count           = count;
    params.root            = o->root;
    params.root_not_worker = o->cd_rnw;
    params.algo            = (gcx_coded_algo_t)o->cd_algo;
    /* outputs: the decoded sum between guards */
    o->out_bytes = count * 4;
    o->out = soak_place(&o->rng, sl->recv, sl->bytes, o->out_bytes, 4, 1);
    out    = (float *)(void *)o->out;
    msg    = (float *)(void *)sl->send;
    g      = msg + count;
    soak_snapshot(o);
    soak_delay(o);
    if (o->inj == INJ_INVALID && o->liar) {
        static char        sent;
        gcx_coded_t       *sentinel = (gcx_coded_t *)(void *)&sent, *cp = sentinel;
        gcx_coded_params_t bad = params;
        const char        *call;
        switch (o->inj_var % 3) {
        case 0: call = "root out of range"; bad.root = n; st = gcx_coded_create(o->comm, &bad, &cp); break;
        case 1: call = "NULL parameters"; st = gcx_coded_create(o->comm, NULL, &cp); break;
        default: call = "NULL code"; bad.code = NULL; st = gcx_coded_create(o->comm, &bad, &cp); break;
        }
        ++S.st.invalid_calls;
        if (st != GCX_ERR_INVALID || cp != sentinel) {
            char m2[200];
            snprintf(m2, sizeof(m2), "gcx_coded_create with %s returned %s%s",
                     call, gcx_strerror(st), cp != sentinel ? " and set the object" : "");
            soak_wrong(o, m2);
            if (st == GCX_OK) {
                exit(SOAK_EXIT_WRONG);
            }
        }
    }
    if (o->inj == INJ_CODED) {
        /* the liars create with another count, root or code: every rank
         * must get GCX_ERR_MISMATCH and no object */
        static char        sent;
        gcx_coded_t       *sentinel = (gcx_coded_t *)(void *)&sent, *cp = sentinel;
        gcx_coded_params_t lie = params;
        if (o->liar) {
            switch (o->inj_var % 3) {
            case 0: lie.count = count + 1; break;
            case 1: /* master-less ignores the root: lie about count */
                if (o->cd_algo == GCX_CODED_ALGO_MASTERLESS) {
                    lie.count = count + 1;
                } else {
                    lie.root = (o->root + 1) % n;
                }
                break;
            default: /* another matrix: all ones or the identity */
                if (workers >= 2 &&
                    soak_code_make(s == 0 ? GCX_CODE_FR : GCX_CODE_UNCODED,
                                   workers, s == 0 ? workers - 1 : 0,
                                   &other) == GCX_OK) {
                    lie.code = other;
                } else {
                    lie.count = count + 1;
                }
                break;
            }
        }
        st = gcx_coded_create(o->comm, &lie, &cp);
        o->status = st;
        if (st == GCX_OK) {
            soak_wrong(o, "gcx_coded_create with disagreeing parameters "
                          "returned GCX_OK");
            gcx_coded_destroy(cp);
        } else if (st != GCX_ERR_MISMATCH) {
            soak_bad_status(o, "gcx_coded_create (injected)", st);
        } else if (cp != sentinel) {
            soak_wrong(o, "gcx_coded_create returned GCX_ERR_MISMATCH and set "
                          "the object");
        }
        gcx_code_destroy(other);
        o->inj = INJ_NONE; /* the honest creation and rounds follow */
    }
    st = gcx_coded_create(o->comm, &params, &coded);
    if (st != GCX_OK) {
        soak_bad_status(o, "gcx_coded_create", st);
        gcx_code_destroy(code);
        return st;
    }
    worker = gcx_coded_worker(coded, o->me);
    tol    = kind == GCX_CODE_CR ? 1e-3 * 11 * workers : 0.0;
    /* the result's sets and arrival times, for every round */
    memset(&res, 0, sizeof(res));
    st = gcx_coded_result_alloc(&res, workers);
    if (st != GCX_OK) {
        soak_bad_status(o, "gcx_coded_result_alloc", st);
        gcx_coded_destroy(coded);
        gcx_code_destroy(code);
        return st;
    }
    for (int r = 0; r < o->cd_rounds; ++r) {
        gcx_request_t     *req = NULL;
        int                load = gcx_code_load(code), cnt = 0;
        int                parts[SOAK_CODED_MAX_LOAD];
        double             coeffs[SOAK_CODED_MAX_LOAD];
        const float       *vecs[SOAK_CODED_MAX_LOAD];
        char               hex1[40], hex2[40];

        if (worker >= 0) {
            if (load > SOAK_CODED_MAX_LOAD ||
                gcx_code_assignment(code, worker, parts, coeffs, &cnt) != GCX_OK ||
                cnt > load) {
                soak_wrong(o, "gcx_code_assignment failed");
                break;
            }
            for (int k = 0; k < cnt; ++k) {
                for (size_t i = 0; i < count; ++i) {
                    g[(size_t)k * count + i] = soak_grad(o->seq, r, parts[k], i);
                }
                vecs[k] = g + (size_t)k * count;
            }
            if (gcx_code_encode(cnt, coeffs, vecs, count, msg) != GCX_OK) {
                soak_wrong(o, "gcx_code_encode failed");
                break;
            }
        }
        memset(out, SOAK_POISON, count * 4);
        st = gcx_coded_gather(coded, msg, out, &res,
                              die_inside || !o->blocking ? &req : NULL);
        if (st == GCX_OK && die_inside) {
            o->req[0] = req;
            o->nreq   = 1;
            soak_vanish(o, 1, soak_rng_below(&o->rng, 4));
        }
        if (st == GCX_OK && req != NULL) {
            st = gcx_wait(req);
            gcx_request_free(req);
        }
        if (st != GCX_OK) {
            o->status = st;
            soak_bad_status(o, "gcx_coded_gather", st); /* returns on a kill */
            break;
        }
        /* the star decodes once (used within arrived); master-less per
         * chunk (used is the union, arrived its own chunk's) */
        if (res.round != (uint64_t)r || gcx_wset_count(res.used, workers) == 0 ||
            !gcx_wset_valid(res.used, workers) ||
            !gcx_wset_valid(res.arrived, workers) ||
            (o->cd_algo == GCX_CODED_ALGO_STAR &&
             !soak_wset_subset(res.used, res.arrived, workers))) {
            char m2[160];
            snprintf(m2, sizeof(m2), "round %d: result round %llu, used %s, "
                     "arrived %s", r, (unsigned long long)res.round,
                     soak_wset_hex(res.used, workers, hex1, sizeof(hex1)),
                     soak_wset_hex(res.arrived, workers, hex2, sizeof(hex2)));
            soak_wrong(o, m2);
        }
        for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int j = 0; j < workers; ++j) {
                want += soak_grad(o->seq, r, j, i);
            }
            if (!(fabs(want - out[i]) <= tol)) {
                char m2[200];
                snprintf(m2, sizeof(m2), "round %d: decoded sum %g at %zu, "
                         "expected %g (code %d, s %d, %s, used %s)", r,
                         (double)out[i], i, want, kind, s,
                         o->cd_algo == GCX_CODED_ALGO_STAR ? "star" :
                                                             "master-less",
                         soak_wset_hex(res.used, workers, hex1, sizeof(hex1)));
                soak_wrong(o, m2);
                break;
            }
        }
        soak_check_guards(o, o->out, o->out_bytes);
    }
    gcx_coded_result_free(&res);
    gcx_coded_destroy(coded);
    gcx_code_destroy(code);
    return o->status;
}

/* ---- create_group ------------------------------------------------------- */

static void soak_follow_parent(int p, uint64_t *rng);

/* A group of some members of a family whose every rank holds one
 * communicator (or none), in a drawn order; with --inject sometimes some
 * members first pass the same ranks in another order (GCX_ERR_MISMATCH on
 * every member, no communicator, the parent usable) or bad arguments
 * (GCX_ERR_INVALID at once). */
void soak_group_event(uint64_t *rng)
{
    int          live[SOAK_MAX_FAM], nlive = soak_live_list(live, 1), ns = 0;
    int          single[SOAK_MAX_FAM], p, f = -1, k, me = -1, mine = -1;
    int          order[SOAK_MAX_RANKS], list[SOAK_MAX_RANKS];
    int          inject, liar, tag;
    soak_fam_t  *par, *fam;
    gcx_status_t st;

    for (int i = 0; i < nlive; ++i) {
        if (S.fam[live[i]].single) {
            single[ns++] = live[i];
        }
    }
    p   = single[soak_rng_below(rng, (size_t)ns)];
    par = &S.fam[p];
    for (int i = 1; i < SOAK_MAX_FAM; ++i) {
        if (!S.fam[i].live) {
            f = i;
            break;
        }
    }
    if (f < 0) { /* full: a slot other than the parent makes room */
        do {
            f = 1 + (int)soak_rng_below(rng, SOAK_MAX_FAM - 1);
        } while (f == p);
        if (S.fam[f].comm != NULL) {
            gcx_comm_destroy(S.fam[f].comm);
        }
        memset(&S.fam[f], 0, sizeof(S.fam[f]));
        ++S.st.per_kind[K_DESTROY];
    }
    /* members: k of the parent's ranks, shuffled */
    for (int i = 0; i < par->n; ++i) {
        order[i] = i;
    }
    for (int i = par->n - 1; i > 0; --i) {
        int j = (int)soak_rng_below(rng, (size_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    k      = 1 + (int)soak_rng_below(rng, (size_t)par->n);
    tag    = (int)(soak_rng_next(rng) & 0x7fffffff);
    inject = S.opt.inject > 0 && k >= 2 &&
             (int)soak_rng_below(rng, 100) < 2 * S.opt.inject;
    liar   = (int)soak_rng_below(rng, (size_t)k); /* a member, by index */
    fam         = &S.fam[f];
    fam->id     = ++S.next_fam_id;
    fam->how    = K_GROUP;
    fam->config = par->config;
    fam->single = 1;
    fam->n      = k;
    for (int i = 0; i < k; ++i) {
        fam->members[i] = par->members[order[i]];
        if (par->comm != NULL && fam->members[i] == S.rank) {
            mine = i;
        }
    }
    fam->live = 1;
    ++S.st.per_kind[K_GROUP];
    ++S.st.events;
    if (par->comm != NULL) {
        me = gcx_comm_rank(par->comm);
    }
    if (mine >= 0) {
        for (int i = 0; i < k; ++i) {
            list[i] = order[i];
        }
        if (inject) {
            static char  sent;
            gcx_comm_t  *sentinel = (gcx_comm_t *)(void *)&sent, *nc = sentinel;
            int          lie[SOAK_MAX_RANKS];
            memcpy(lie, list, sizeof(int) * (size_t)k);
            if (mine == liar) { /* the same ranks, two swapped */
                int t = lie[0];
                lie[0] = lie[1];
                lie[1] = t;
            }
            st = gcx_comm_create_group(par->comm, k, lie, tag, NULL, &nc);
            /* NULL or untouched: comm.c clears it before the exchange */
            if (st != GCX_ERR_MISMATCH || (nc != sentinel && nc != NULL)) {
                soak_op_t o;
                char      m2[200];
                memset(&o, 0, sizeof(o));
                o.kind = K_GROUP;
                o.fam  = p;
                o.n    = par->n;
                o.me   = me;
                o.inj  = INJ_GROUP;
                o.liar = mine == liar;
                snprintf(m2, sizeof(m2), "create_group with the members in "
                         "another order on one of them returned %s%s",
                         gcx_strerror(st), nc != sentinel ? " and a communicator" : "");
                if (st == GCX_ERR_TIMEOUT) {
                    soak_bad_status(&o, "create_group (injected)", st);
                }
                soak_wrong(&o, m2);
                if (st == GCX_OK && nc != sentinel && nc != NULL) {
                    gcx_comm_destroy(nc);
                }
            }
        }
        if (S.opt.inject > 0 && (tag & 3) == 0) { /* local bad arguments */
            static char  sent;
            gcx_comm_t  *sentinel = (gcx_comm_t *)(void *)&sent, *nc = sentinel;
            int          bad[SOAK_MAX_RANKS + 1];
            memcpy(bad, list, sizeof(int) * (size_t)k);
            switch ((tag >> 2) % 3) {
            case 0: st = gcx_comm_create_group(par->comm, k, list, -1, NULL, &nc); break;
            case 1: bad[k] = bad[0]; /* listed twice */
                st = gcx_comm_create_group(par->comm, k + 1, bad, tag, NULL, &nc); break;
            default: st = gcx_comm_create_group(par->comm, 0, list, tag, NULL, &nc); break;
            }
            ++S.st.invalid_calls;
            if (st != GCX_ERR_INVALID || nc != sentinel) {
                soak_op_t o;
                char      m2[160];
                memset(&o, 0, sizeof(o));
                o.kind = K_GROUP;
                o.fam  = p;
                o.inj  = INJ_INVALID;
                snprintf(m2, sizeof(m2), "create_group with bad arguments (%d) "
                         "returned %s", (tag >> 2) % 3, gcx_strerror(st));
                soak_wrong(&o, m2);
            }
        }
        st = gcx_comm_create_group(par->comm, k, list, tag, NULL, &fam->comm);
        if (st != GCX_OK) {
            soak_die("gcx_comm_create_group", st); /* returns after a kill */
            fam->comm = NULL;
        }
        if (fam->comm != NULL &&
            (gcx_comm_size(fam->comm) != k || gcx_comm_rank(fam->comm) != mine)) {
            fprintf(stderr, "[soak rank %d] WRONG group %d: rank %d of %d, "
                    "expected %d of %d\n", S.rank, fam->id,
                    gcx_comm_rank(fam->comm), gcx_comm_size(fam->comm), mine, k);
            ++S.st.wrong;
            soak_replay_line("wrong result");
        }
    }
    if (inject) {
        if (S.rank == 0) {
            ++S.st.injected;
            ++S.st.per_inj[INJ_GROUP];
        }
        soak_follow_parent(p, rng);
    }
}

/* the parent after an injected create_group: one allreduce of the world
 * ranks over it, on every rank that holds it */
static void soak_follow_parent(int p, uint64_t *rng)
{
    soak_fam_t  *par = &S.fam[p];
    int64_t      v[2];
    int64_t      want = 0;
    gcx_status_t st;

    (void)rng;
    if (par->comm == NULL) {
        return;
    }
    v[0] = S.rank;
    v[1] = 1;
    for (int i = 0; i < par->n; ++i) {
        want += par->members[i];
    }
    st = gcx_allreduce(par->comm, GCX_IN_PLACE, v, 2, GCX_DT_I64, GCX_OP_SUM,
                       NULL);
    if (st != GCX_OK) {
        soak_bad_status(NULL, "allreduce on the parent after an injected "
                              "create_group", st);
        return;
    }
    if (v[0] != want || v[1] != par->n) {
        soak_wrong(NULL, "allreduce on the parent after an injected "
                         "create_group");
    }
    S.st.follow += gcx_comm_rank(par->comm) == 0;
}
