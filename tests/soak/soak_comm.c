/*
 * soak_comm.c - gcx_soak's communicators: the families a run keeps (the
 * world, created over an OOB or from the environment, split, dup), one
 * communicator event (soak_event), and the communicator churn (--churn).
 *
 * Idea: an event is drawn the same on every rank, so each rank knows every
 * family's members and checks its rank and size in them; a split family
 * has one communicator per color and ranks outside every color hold none.
 * The churn creates and destroys N communicators, at most 4 alive, each
 * checked with an allreduce, and compares descriptors with a baseline.
 * A family is "single" when every rank holds its one communicator or none
 * (not a split): create_group (soak_random.c) picks its parent among
 * those. With kills, a failed creation or split on a rank that lags is
 * the kill's (soak_die returns then) and creation from the environment
 * becomes creation over the world.
 *
 * Cost: an event is one communicator creation (an allgather over the world
 * for the OOB); the churn is N of them plus N small allreduces.
 */
#include "soak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- communicators ------------------------------------------------------- */

gcx_status_t soak_world_allgather(const void *sendbuf, void *recvbuf,
                                  size_t len, void *ctx)
{
    return gcx_allgather((gcx_comm_t *)ctx, sendbuf, recvbuf, len, GCX_DT_U8,
                         NULL);
}

void soak_die(const char *what, gcx_status_t st)
{
    if (soak_kill_explains(NULL, st)) {
        return; /* a lagging rank after a kill: it skips to the kill step */
    }
    fprintf(stderr, "[soak rank %d] %s failed: %s\n", S.rank, what,
            gcx_strerror(st));
    soak_replay_line(st == GCX_ERR_TIMEOUT ? "hang" : "setup failed");
    exit(st == GCX_ERR_TIMEOUT ? SOAK_EXIT_HANG : SOAK_EXIT_SETUP);
}

static int soak_free_fam(void)
{
    for (int f = 1; f < SOAK_MAX_FAM; ++f) {
        if (!S.fam[f].live) {
            return f;
        }
    }
    return -1;
}

/* live families other than the world, in slot order */
int soak_live_list(int *list, int with_world)
{
    int m = 0;

    for (int f = with_world ? 0 : 1; f < SOAK_MAX_FAM; ++f) {
        if (S.fam[f].live) {
            list[m++] = f;
        }
    }
    return m;
}

static void soak_verify_fam(const soak_fam_t *fam)
{
    int me = -1;

    if (fam->comm == NULL) {
        return;
    }
    for (int i = 0; i < fam->n; ++i) {
        if (fam->members[i] == S.rank) {
            me = i;
        }
    }
    if (gcx_comm_size(fam->comm) != fam->n || gcx_comm_rank(fam->comm) != me) {
        fprintf(stderr,
                "[soak rank %d] WRONG family %d: rank %d of %d, expected %d of "
                "%d\n",
                S.rank, fam->id, gcx_comm_rank(fam->comm),
                gcx_comm_size(fam->comm), me, fam->n);
        ++S.st.wrong;
    }
}

static void soak_destroy_fam(int f)
{
    if (S.fam[f].comm != NULL) {
        gcx_comm_destroy(S.fam[f].comm);
    }
    memset(&S.fam[f], 0, sizeof(S.fam[f]));
}

void soak_destroy_all(void)
{
    for (int f = 1; f < SOAK_MAX_FAM; ++f) {
        if (S.fam[f].live) {
            soak_destroy_fam(f);
        }
    }
}

/* A communicator over the whole world: over the OOB (from_env = 0) or from
 * the environment, with configuration `config`. */
static gcx_comm_t *soak_create(int config, int from_env)
{
    gcx_config_t *cfg  = NULL;
    gcx_comm_t   *comm = NULL;
    gcx_oob_t     oob  = {soak_world_allgather, S.world, S.rank, S.size};
    gcx_status_t  st   = gcx_config_read(&cfg);

    for (int k = 0; st == GCX_OK && soak_configs[config][k] != NULL; k += 2) {
        st = gcx_config_set(cfg, soak_configs[config][k],
                            soak_configs[config][k + 1]);
    }
    if (st == GCX_OK) {
        st = gcx_comm_create(from_env ? NULL : &oob, cfg, &comm);
    }
    gcx_config_release(cfg);
    if (st != GCX_OK) {
        soak_die(from_env ? "gcx_comm_create (environment)" :
                            "gcx_comm_create (oob)", st);
    }
    return comm;
}

/* One communicator event, the same on every rank. */
void soak_event(int kind, uint64_t *rng)
{
    int          live[SOAK_MAX_FAM], nlive = soak_live_list(live, 0);
    int          f = soak_free_fam(), p;
    soak_fam_t  *fam;
    gcx_status_t st;

    if (kind == K_DESTROY) {
        if (nlive > 0) {
            soak_destroy_fam(live[soak_rng_below(rng, (size_t)nlive)]);
            ++S.st.per_kind[K_DESTROY];
        }
        return;
    }
    if (f < 0) { /* full: the oldest slot makes room */
        f = 1 + (int)soak_rng_below(rng, SOAK_MAX_FAM - 1);
        soak_destroy_fam(f);
        ++S.st.per_kind[K_DESTROY];
    }
    nlive = soak_live_list(live, 1);
    fam   = &S.fam[f];
    fam->id = ++S.next_fam_id;
    if (kind == K_CREATE_ENV && S.opt.nkills > 0) {
        kind = K_CREATE; /* the environment's world may have a dead rank */
    }
    fam->how = kind;
    fam->single = kind != K_SPLIT;
    switch (kind) {
    case K_CREATE:
    case K_CREATE_ENV:
        fam->config = (int)soak_rng_below(rng, SOAK_NCONFIGS);
        fam->comm   = soak_create(fam->config, kind == K_CREATE_ENV);
        fam->n      = S.size;
        for (int r = 0; r < S.size; ++r) {
            fam->members[r] = r;
        }
        break;
    case K_SPLIT:
    case K_DUP: {
        soak_fam_t *par;
        int         color[SOAK_MAX_RANKS], key[SOAK_MAX_RANKS];
        int         ncolors = 1 + (int)soak_rng_below(rng, 3), mine;

        p   = live[soak_rng_below(rng, (size_t)nlive)];
        par = &S.fam[p];
        for (int r = 0; r < S.size; ++r) { /* per world rank */
            color[r] = soak_rng_below(rng, 8) == 0 ? GCX_UNDEFINED :
                                                (int)soak_rng_below(rng, (size_t)ncolors);
            key[r]   = (int)soak_rng_below(rng, 4) - 2;
        }
        fam->config = par->config;
        if (kind == K_DUP) { /* the parent's members, known everywhere
                                when it is single */
            fam->single = par->single;
            fam->n      = par->n;
            memcpy(fam->members, par->members, sizeof(fam->members));
        }
        if (par->comm == NULL) {
            fam->comm = NULL; /* not in the parent: in none of its children */
            break;
        }
        if (kind == K_DUP) {
            st = gcx_comm_dup(par->comm, &fam->comm);
            if (st != GCX_OK) {
                soak_die("gcx_comm_dup", st);
            }
            break;
        }
        mine = color[S.rank];
        st   = gcx_comm_split(par->comm, mine, key[S.rank], &fam->comm);
        if (st != GCX_OK) {
            soak_die("gcx_comm_split", st);
        }
        if (mine == GCX_UNDEFINED) {
            if (fam->comm != NULL) {
                fprintf(stderr, "[soak rank %d] WRONG: GCX_UNDEFINED got a "
                                "communicator\n", S.rank);
                ++S.st.wrong;
                gcx_comm_destroy(fam->comm);
                fam->comm = NULL;
            }
            break;
        }
        /* members: same color, by (key, parent rank) (insertion sort) */
        fam->n = 0;
        for (int i = 0; i < par->n; ++i) {
            int w = par->members[i], j = fam->n++;
            if (color[w] != mine) {
                --fam->n;
                continue;
            }
            while (j > 0 && key[fam->members[j - 1]] > key[w]) {
                fam->members[j] = fam->members[j - 1];
                --j;
            }
            fam->members[j] = w;
        }
        break;
    }
    default:
        break;
    }
    fam->live = 1;
    soak_verify_fam(fam);
    ++S.st.per_kind[kind];
    ++S.st.events;
}

/* ---- communicator churn --------------------------------------------------- */

static void soak_churn_check(gcx_comm_t *comm, int id)
{
    int64_t      v[3] = {id, S.rank, 1};
    int          n    = gcx_comm_size(comm);
    gcx_status_t st   = gcx_allreduce(comm, GCX_IN_PLACE, v, 3, GCX_DT_I64,
                                      GCX_OP_SUM, NULL);

    if (st != GCX_OK) {
        soak_die("churn allreduce", st);
    }
    if (v[0] != (int64_t)id * n || v[2] != n) {
        fprintf(stderr, "[soak rank %d] WRONG churn communicator %d: sums "
                "%lld %lld\n", S.rank, id, (long long)v[0], (long long)v[2]);
        ++S.st.wrong;
    }
}

int soak_churn(uint64_t seed, int total, int fd_exact)
{
    enum { LIVE = 4 };
    gcx_comm_t *live[LIVE] = {0};
    uint64_t    rng = seed;
    int         made = 0, by[4] = {0, 0, 0, 0}, fail = 0;
    long        rss0 = 0, fd0 = 0, rss_max = 0, fd_max = 0, rss1, fd1;
    double      t0 = soak_now();
    int64_t     v[6];

    fd0 = fd_max = soak_fds(); /* only the world is alive */
    while (made < total) {
        int          k    = (int)soak_rng_below(&rng, LIVE), how;
        gcx_comm_t  *c    = NULL;
        gcx_comm_t  *from = live[soak_rng_below(&rng, LIVE)];
        gcx_status_t st   = GCX_OK;

        if (from == NULL) {
            from = S.world;
        }
        how = made % 50 == 0 ? 0 : 1 + (int)soak_rng_below(&rng, 3);
        switch (how) {
        case 0: c = soak_create((int)soak_rng_below(&rng, SOAK_NCONFIGS), 1); break;
        case 1: c = soak_create((int)soak_rng_below(&rng, SOAK_NCONFIGS), 0); break;
        case 2: {
            int color = (gcx_comm_rank(from) + (int)soak_rng_below(&rng, 2)) % 2;
            /* every member draws alike; the rank decides the color */
            st = gcx_comm_split(from, color, 0, &c);
            break;
        }
        default: st = gcx_comm_dup(from, &c); break;
        }
        if (st != GCX_OK) {
            soak_die("churn split/dup", st);
        }
        if (live[k] != NULL) { /* maybe `from`: a child outlives its parent */
            gcx_comm_destroy(live[k]);
        }
        live[k] = c;
        soak_churn_check(c, made);
        ++by[how];
        ++made;
        if (made == 20) { /* resident memory: after the first ones */
            rss0 = rss_max = soak_rss_kb();
        }
        {
            long r = soak_rss_kb(), d = soak_fds();
            rss_max = r > rss_max ? r : rss_max;
            fd_max  = d > fd_max ? d : fd_max;
        }
    }
    for (int k = 0; k < LIVE; ++k) {
        if (live[k] != NULL) {
            gcx_comm_destroy(live[k]);
        }
    }
    rss1 = soak_rss_kb();
    fd1  = soak_fds();
    if (fd_exact && fd1 != fd0) {
        fprintf(stderr, "[soak rank %d] open descriptors %ld after the churn, "
                "%ld at the baseline\n", S.rank, fd1, fd0);
        fail = 1;
    }
    v[0] = (int64_t)S.st.wrong;
    v[1] = fail;
    v[2] = rss1 - rss0;
    v[3] = rss_max;
    v[4] = fd1 - fd0;
    v[5] = fd_max;
    soak_max(v, 6);
    if (S.rank == 0) {
        printf("# churn: %d ranks, %d communicators (environment %d, oob %d, "
               "split %d, dup %d) in %.1f s, %lld wrong; rss growth %lld kB "
               "(max %lld kB), fds end-baseline %lld (max %lld)\n",
               S.size, made, by[0], by[1], by[2], by[3], soak_now() - t0,
               (long long)v[0], (long long)v[2], (long long)v[3],
               (long long)v[4], (long long)v[5]);
    }
    return v[0] != 0 || v[1] != 0;
}

