/*
 * sync.c - the table of sync modes, option parsing for them, and creation.
 *
 * A new mode is one row in train_sync_table. Nothing here is on the
 * per-step path but the straggler delay (--straggler): exchange() is
 * called straight through the vtable.
 */
#include "sync/sync.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const train_sync_ops_t *const train_sync_table[] = {
    &train_sync_dense,   &train_sync_topk,    &train_sync_dgc,
    &train_sync_redsync, &train_sync_randomk, &train_sync_gravac,
    &train_sync_gc_fr,   &train_sync_gc_cr,   &train_sync_pgc_fr,
    &train_sync_pgc_cr,  &train_sync_ignore,
};

#define TRAIN_SYNC_COUNT                                                       \
    (sizeof(train_sync_table) / sizeof(train_sync_table[0]))

const train_sync_ops_t *train_sync_find(const char *name)
{
    size_t i;

    for (i = 0; i < TRAIN_SYNC_COUNT; i++) {
        if (strcmp(train_sync_table[i]->name, name) == 0) {
            return train_sync_table[i];
        }
    }
    return NULL;
}

void train_sync_list(FILE *file)
{
    size_t i;

    for (i = 0; i < TRAIN_SYNC_COUNT; i++) {
        fprintf(file, "      %-10s %s\n", train_sync_table[i]->name,
                train_sync_table[i]->help);
    }
}

gcx_status_t train_kv_parse(const char *text, train_kv_t *kv)
{
    const char *p = text;

    memset(kv, 0, sizeof(*kv));
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ','), *eq;
        size_t len = end ? (size_t)(end - p) : strlen(p);

        eq = memchr(p, '=', len);
        if (eq == NULL || eq == p) {
            train_error("sync option '%.*s' is not key=value", (int)len, p);
            return GCX_ERR_INVALID;
        }
        if (kv->n == TRAIN_KV_MAX || (size_t)(eq - p) >= sizeof(kv->key[0]) ||
            len - (size_t)(eq - p) - 1 >= sizeof(kv->val[0])) {
            train_error("sync option '%.*s': too many or too long", (int)len,
                        p);
            return GCX_ERR_INVALID;
        }
        snprintf(kv->key[kv->n], sizeof(kv->key[0]), "%.*s", (int)(eq - p), p);
        snprintf(kv->val[kv->n], sizeof(kv->val[0]), "%.*s",
                 (int)(len - (size_t)(eq - p) - 1), eq + 1);
        kv->n++;
        p = end ? end + 1 : NULL;
    }
    return GCX_OK;
}

static int train_kv_find(train_kv_t *kv, const char *key)
{
    int i;

    for (i = 0; i < kv->n; i++) {
        if (strcmp(kv->key[i], key) == 0) {
            kv->used[i] = 1;
            return i;
        }
    }
    return -1;
}

gcx_status_t train_kv_double(train_kv_t *kv, const char *mode, const char *key,
                             double def, double min, double max, double *out_p)
{
    int i = train_kv_find(kv, key);
    char *end;
    double v;

    if (i < 0) {
        *out_p = def;
        return GCX_OK;
    }
    errno = 0;
    v = strtod(kv->val[i], &end);
    if (errno != 0 || end == kv->val[i] || *end != '\0' || !(v >= min) ||
        !(v <= max)) {
        train_error("--sync %s: %s=%s must be a number in [%g, %g]", mode, key,
                    kv->val[i], min, max);
        return GCX_ERR_INVALID;
    }
    *out_p = v;
    return GCX_OK;
}

gcx_status_t train_kv_long(train_kv_t *kv, const char *mode, const char *key,
                           long def, long min, long max, long *out_p)
{
    int i = train_kv_find(kv, key);
    char *end;
    long v;

    if (i < 0) {
        *out_p = def;
        return GCX_OK;
    }
    errno = 0;
    v = strtol(kv->val[i], &end, 10);
    if (errno != 0 || end == kv->val[i] || *end != '\0' || v < min || v > max) {
        train_error("--sync %s: %s=%s must be an integer in [%ld, %ld]", mode,
                    key, kv->val[i], min, max);
        return GCX_ERR_INVALID;
    }
    *out_p = v;
    return GCX_OK;
}

const char *train_kv_str(train_kv_t *kv, const char *key, const char *def)
{
    int i = train_kv_find(kv, key);

    return i < 0 ? def : kv->val[i];
}

/* The mode @p spec names, its name into @p name. */
static const train_sync_ops_t *train_sync_of(const char *spec,
                                             char name[32])
{
    const char *colon = strchr(spec, ':');

    snprintf(name, 32, "%.*s",
             (int)(colon ? (size_t)(colon - spec) : strlen(spec)), spec);
    return train_sync_find(name);
}

unsigned train_sync_flags(const char *spec)
{
    char name[32];
    const train_sync_ops_t *ops = train_sync_of(spec, name);

    return ops != NULL ? ops->flags : 0;
}

gcx_status_t train_sync_create(const char *spec, train_comm_t *comm, size_t n,
                               train_sync_t *sync_p)
{
    const char *colon = strchr(spec, ':');
    const train_sync_ops_t *ops;
    train_sync_t sync;
    char name[32];
    gcx_status_t status;
    train_kv_t kv;
    int i;

    ops = train_sync_of(spec, name);
    if (ops == NULL) {
        train_error("unknown sync mode '%s' (see --help for the list)", name);
        return GCX_ERR_INVALID;
    }
    status = train_kv_parse(colon ? colon + 1 : NULL, &kv);
    if (status != GCX_OK) {
        return status;
    }
    memset(&sync, 0, sizeof(sync));
    sync.ops = ops;
    sync.comm = comm;
    sync.n = n;
    sync.steps_per_batch = 1;
    sync.workers = comm->size;
    sync.worker = comm->rank;
    status = ops->init(&sync, &kv);
    if (status != GCX_OK) {
        return status;
    }
    for (i = 0; i < kv.n; i++) {
        if (!kv.used[i]) {
            train_error("--sync %s: unknown option '%s'", name, kv.key[i]);
            ops->fini(&sync);
            return GCX_ERR_INVALID;
        }
    }
    *sync_p = sync;
    return GCX_OK;
}

void train_sync_destroy(train_sync_t *sync)
{
    if (sync->ops != NULL) {
        sync->ops->fini(sync);
        sync->ops = NULL;
    }
}

double train_sync_ring_bytes(size_t n, int size)
{
    if (size <= 1) {
        return 0;
    }
    return 2.0 * (double)(size - 1) / (double)size * 4.0 * (double)n;
}

/* Sleep @p delay seconds (counted in busy_s) and the exp:M draws pending. */
static void train_sync_sleep(train_sync_t *sync, double delay)
{
    struct timespec ts;

    delay += sync->pending_delay_s;
    sync->pending_delay_s = 0;
    if (!(delay > 0)) {
        return;
    }
    sync->busy_s += delay;
    ts.tv_sec = (time_t)delay;
    ts.tv_nsec = (long)((delay - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void train_sync_delay(train_sync_t *sync)
{
    train_sync_sleep(sync, sync->delay_s);
}

void train_sync_delay_drawn(train_sync_t *sync)
{
    train_sync_sleep(sync, 0);
}

static uint64_t train_straggler_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

double train_straggler_draw(uint64_t seed, long step, int rank, int part)
{
    uint64_t h = train_straggler_mix(seed ^ 0x5354524147474c45ULL);
    double u;

    h = train_straggler_mix(h ^ (uint64_t)step);
    h = train_straggler_mix(h ^ (uint64_t)(uint32_t)rank);
    h = train_straggler_mix(h ^ (uint64_t)(uint32_t)part);
    u = ((double)(h >> 11) + 0.5) * 0x1.0p-53; /* (0, 1): log is finite */
    return -log(u);
}

void train_sync_computed(train_sync_t *sync, int part, double compute_s)
{
    sync->busy_s += compute_s;
    if (sync->straggler_exp <= 0 || !(compute_s > 0)) {
        return;
    }
    sync->pending_delay_s +=
        sync->straggler_exp * compute_s *
        train_straggler_draw(sync->straggler_seed, sync->step,
                             sync->worker, part);
}

void train_sync_put_feedback(train_blob_t *out, gcx_feedback_t *fb)
{
    size_t n = gcx_feedback_size(fb);
    float *u = gcx_feedback_velocity(fb);

    train_blob_put_u64(out, n);
    train_blob_put_u64(out, u != NULL);
    train_blob_put(out, gcx_feedback_residual(fb), n * sizeof(float));
    if (u != NULL) {
        train_blob_put(out, u, n * sizeof(float));
    }
}

gcx_status_t train_sync_get_feedback(train_blob_t *in, gcx_feedback_t *fb,
                                     const char *mode)
{
    size_t n = gcx_feedback_size(fb);
    float *u = gcx_feedback_velocity(fb);
    uint64_t saved_n = train_blob_get_u64(in);
    uint64_t saved_u = train_blob_get_u64(in);

    if (!in->ok || saved_n != n || saved_u != (u != NULL)) {
        train_error("--resume: sync %s: the checkpoint's residual has %llu "
                    "floats%s, this run's %zu%s",
                    mode, (unsigned long long)saved_n,
                    saved_u ? " with a velocity" : "", n,
                    u != NULL ? " with a velocity" : "");
        return GCX_ERR_MISMATCH;
    }
    train_blob_get(in, gcx_feedback_residual(fb), n * sizeof(float));
    if (u != NULL) {
        train_blob_get(in, u, n * sizeof(float));
    }
    gcx_feedback_touch(fb);
    return in->ok ? GCX_OK : GCX_ERR_INVALID;
}

gcx_status_t train_sync_save_nothing(train_sync_t *sync, train_blob_t *out)
{
    (void)sync;
    (void)out;
    return GCX_OK;
}

gcx_status_t train_sync_load_nothing(train_sync_t *sync, train_blob_t *in)
{
    (void)sync;
    (void)in;
    return GCX_OK;
}
