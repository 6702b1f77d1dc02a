/*
 * comm.c - communicator lifecycle.
 *
 * Creation = configuration + identity (caller's OOB or the environment's
 * TCP star) + transport init + one allgather of transport addresses +
 * endpoints to every rank + a barrier that proves every pair can talk.
 * It is the only place that blocks for long, bounded by GCX_TIMEOUT.
 */
#include "comm.h"
#include "bootstrap.h"
#include "log.h"
#include "time.h"
#include "gcx_build_config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GCX_COMM_MAGIC 0x67637863u /* "gcxc" */

typedef struct gcx_comm_hello {
    uint32_t magic;
    uint32_t size;
    uint32_t comm_id;
    uint32_t addr_len;
} gcx_comm_hello_t;

/* Every communicator with GCX_PROGRESS_ALL, linked by registry_next. */
static pthread_mutex_t gcx_comm_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static gcx_comm_t     *gcx_comm_registry;

static void gcx_comm_register(gcx_comm_t *comm)
{
    pthread_mutex_lock(&gcx_comm_registry_lock);
    comm->registry_prev = NULL;
    comm->registry_next = gcx_comm_registry;
    if (gcx_comm_registry != NULL) {
        gcx_comm_registry->registry_prev = comm;
    }
    gcx_comm_registry = comm;
    comm->registered  = 1;
    pthread_mutex_unlock(&gcx_comm_registry_lock);
}

static void gcx_comm_unregister(gcx_comm_t *comm)
{
    if (!comm->registered) {
        return;
    }
    pthread_mutex_lock(&gcx_comm_registry_lock);
    if (comm->registry_prev != NULL) {
        comm->registry_prev->registry_next = comm->registry_next;
    } else {
        gcx_comm_registry = comm->registry_next;
    }
    if (comm->registry_next != NULL) {
        comm->registry_next->registry_prev = comm->registry_prev;
    }
    comm->registered = 0;
    pthread_mutex_unlock(&gcx_comm_registry_lock);
}

void gcx_comm_progress_others(gcx_comm_t *self)
{
    gcx_comm_t *c;

    if (pthread_mutex_trylock(&gcx_comm_registry_lock) != 0) {
        return;
    }
    for (c = gcx_comm_registry; c != NULL; c = c->registry_next) {
        if (c != self && c->error == GCX_OK) {
            c->tl->ops->progress(c->tl);
        }
    }
    pthread_mutex_unlock(&gcx_comm_registry_lock);
}

const char *gcx_version(void)
{
    return GCX_VERSION_STRING;
}

void *gcx_comm_scratch(gcx_comm_t *comm, size_t size)
{
    if (size > comm->scratch_size) {
        void *p = NULL;

        if (posix_memalign(&p, 64, size) != 0) {
            return NULL;
        }
        free(comm->scratch);
        comm->scratch      = p;
        comm->scratch_size = size;
    }
    return comm->scratch;
}

/* Exchanges transport addresses over the OOB and connects. */
static gcx_status_t gcx_comm_wireup(gcx_comm_t *comm, const gcx_oob_t *oob)
{
    gcx_comm_hello_t  mine, *all = NULL;
    const void      **addrs      = NULL;
    size_t           *lens       = NULL;
    char             *blobs      = NULL, *myblob = NULL;
    const void       *addr;
    size_t            len, maxlen = 0;
    gcx_status_t      status;
    int               r;

    status = comm->tl->ops->address(comm->tl, &addr, &len);
    if (status != GCX_OK) {
        return status;
    }
    mine.magic    = GCX_COMM_MAGIC;
    mine.size     = (uint32_t)comm->size;
    mine.comm_id  = (uint32_t)(getpid() ^ (uint32_t)(gcx_time_now() * 1e6));
    mine.addr_len = (uint32_t)len;
    all   = calloc((size_t)comm->size, sizeof(*all));
    addrs = calloc((size_t)comm->size, sizeof(*addrs));
    lens  = calloc((size_t)comm->size, sizeof(*lens));
    if (all == NULL || addrs == NULL || lens == NULL) {
        status = GCX_ERR_NOMEM;
        goto out;
    }
    status = oob->allgather(&mine, all, sizeof(mine), oob->ctx);
    if (status != GCX_OK) {
        gcx_error("out-of-band allgather failed: %s", gcx_strerror(status));
        goto out;
    }
    for (r = 0; r < comm->size; ++r) {
        if (all[r].magic != GCX_COMM_MAGIC ||
            all[r].size != (uint32_t)comm->size) {
            gcx_error("rank %d disagrees on the communicator (size %u vs %d)",
                      r, all[r].size, comm->size);
            status = GCX_ERR_MISMATCH;
            goto out;
        }
        if (all[r].addr_len > maxlen) {
            maxlen = all[r].addr_len;
        }
    }
    comm->id = all[0].comm_id & ((1u << GCX_TL_TAG_COMM_BITS) - 1);
    myblob   = calloc(1, maxlen);
    blobs    = calloc((size_t)comm->size, maxlen);
    if (myblob == NULL || blobs == NULL) {
        status = GCX_ERR_NOMEM;
        goto out;
    }
    memcpy(myblob, addr, len);
    status = oob->allgather(myblob, blobs, maxlen, oob->ctx);
    if (status != GCX_OK) {
        gcx_error("out-of-band allgather failed: %s", gcx_strerror(status));
        goto out;
    }
    for (r = 0; r < comm->size; ++r) {
        addrs[r] = blobs + (size_t)r * maxlen;
        lens[r]  = all[r].addr_len;
    }
    status = comm->tl->ops->connect(comm->tl, addrs, lens);
out:
    free(blobs);
    free(myblob);
    free(lens);
    free(addrs);
    free(all);
    return status;
}

gcx_status_t gcx_comm_create(const gcx_oob_t *oob, const gcx_config_t *config,
                             gcx_comm_t **comm_p)
{
    gcx_bootstrap_t    *bootstrap = NULL;
    gcx_oob_t           env_oob;
    gcx_tl_params_t     tl_params;
    const gcx_tl_ops_t *tl_ops;
    const char         *source = "the caller's OOB";
    gcx_comm_t         *comm;
    gcx_config_t       *env_config;
    gcx_status_t        status;

    if (comm_p == NULL ||
        (oob != NULL && (oob->allgather == NULL || oob->size < 1 ||
                         oob->rank < 0 || oob->rank >= oob->size))) {
        gcx_error("gcx_comm_create: invalid arguments");
        return GCX_ERR_INVALID;
    }
    comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        return GCX_ERR_NOMEM;
    }
    if (config != NULL) {
        comm->config = *config;
    } else {
        status = gcx_config_read(&env_config);
        if (status != GCX_OK) {
            goto err_free;
        }
        comm->config = *env_config;
        gcx_config_release(env_config);
    }
    gcx_log_configure(comm->config.log_level, -1);

    if (oob != NULL) {
        comm->rank = oob->rank;
        comm->size = oob->size;
    } else {
        status = gcx_bootstrap_identity(&comm->config, &comm->rank,
                                        &comm->size, &source);
        if (status != GCX_OK) {
            goto err_free;
        }
    }
    gcx_log_configure(comm->config.log_level, comm->rank);
    if (comm->size > GCX_TL_MAX_RANKS) {
        gcx_error("%d ranks: at most %d are supported", comm->size,
                  GCX_TL_MAX_RANKS);
        status = GCX_ERR_UNSUPPORTED;
        goto err_free;
    }
    if (oob == NULL) {
        status = gcx_bootstrap_connect(&comm->config, comm->rank, comm->size,
                                       &bootstrap);
        if (status != GCX_OK) {
            goto err_free;
        }
        env_oob.allgather = gcx_bootstrap_allgather;
        env_oob.ctx       = bootstrap;
        env_oob.rank      = comm->rank;
        env_oob.size      = comm->size;
        oob               = &env_oob;
    }

    tl_ops = gcx_tl_ops_find(comm->config.transport);
    if (tl_ops == NULL) {
        gcx_error("GCX_TRANSPORT=%s is not available in this build",
                  gcx_config_enum_name(gcx_config_find("TRANSPORT"),
                                       comm->config.transport));
        status = GCX_ERR_UNSUPPORTED;
        goto err_close_bootstrap;
    }
    tl_params.rank = comm->rank;
    tl_params.size = comm->size;
    tl_params.peer_failure_detection =
        comm->config.ucx_err_mode == GCX_UCX_ERR_MODE_PEER;
    status         = tl_ops->init(&tl_params, &comm->tl);
    if (status != GCX_OK) {
        goto err_close_bootstrap;
    }
    status = gcx_comm_wireup(comm, oob);
    if (status != GCX_OK) {
        goto err_fini_tl;
    }
    if (bootstrap != NULL) {
        gcx_bootstrap_close(bootstrap);
        bootstrap = NULL;
    }
    /* every pair talks once, so the first real collective finds the
     * connections up, and a broken network shows here */
    status = gcx_barrier(comm, NULL);
    if (status != GCX_OK) {
        gcx_error("the first barrier failed: %s", gcx_strerror(status));
        goto err_fini_tl;
    }
    gcx_info("communicator %u: rank %d of %d (identity from %s), "
             "transport %s",
             comm->id, comm->rank, comm->size, source, tl_ops->name);
    if (comm->config.progress_all) {
        gcx_comm_register(comm);
    }
    *comm_p = comm;
    return GCX_OK;

err_fini_tl:
    comm->tl->ops->fini(comm->tl);
err_close_bootstrap:
    if (bootstrap != NULL) {
        gcx_bootstrap_close(bootstrap);
    }
err_free:
    free(comm);
    return status;
}

int gcx_comm_rank(const gcx_comm_t *comm)
{
    return comm->rank;
}

int gcx_comm_size(const gcx_comm_t *comm)
{
    return comm->size;
}

const gcx_config_t *gcx_comm_config(const gcx_comm_t *comm)
{
    return &comm->config;
}

void gcx_comm_destroy(gcx_comm_t *comm)
{
    double grace;
    int    i;

    if (comm == NULL) {
        return;
    }
    gcx_comm_unregister(comm);
    if (comm->head != NULL) {
        gcx_warn("communicator destroyed with collectives in flight");
        gcx_comm_fail(comm, GCX_ERR_CANCELED);
    }
    if (comm->error == GCX_OK) {
        /* let the last messages reach their peers before closing */
        grace = comm->config.timeout < 10.0 ? comm->config.timeout : 10.0;
        comm->tl->ops->flush_close(comm->tl, grace);
    }
    comm->tl->ops->fini(comm->tl);
    for (i = 0; i < GCX_COMM_STATE_MAX; ++i) {
        if (comm->state[i].release != NULL) {
            comm->state[i].release(comm->state[i].data);
        }
    }
    free(comm->scratch);
    free(comm);
}
