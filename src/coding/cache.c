/*
 * cache.c - decoding vectors cached per arrived set.
 *
 * Idea: the same few straggler patterns recur from step to step, so the
 * root solves each arrived set once. Open addressing with linear probing
 * on the 64-bit mask (0, the empty set, is never stored: it is undecodable
 * before any lookup), at most half full. Failures are cached too, so the
 * "decodable?" predicate the gather evaluates after each arrival costs one
 * solve per set. Bounded memory: when `capacity` entries are used the
 * whole cache is emptied at once (no LRU bookkeeping on the hit path).
 *
 * Cost: O(1) expected per lookup and insert; memory
 * capacity * (n * 8 + 1) + 2 * slots * 12 bytes.
 */
#include "code_int.h"

#include <stdlib.h>
#include <string.h>

static uint32_t cache_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= UINT64_C(0xff51afd7ed558ccd);
    key ^= key >> 33;
    return (uint32_t)key;
}

gcx_status_t gcx_code_cache_init(gcx_code_cache_t *cache, int n, int capacity)
{
    uint32_t slots = 2;

    memset(cache, 0, sizeof(*cache));
    if (capacity < 1 || capacity > (1 << 24)) {
        return GCX_ERR_INVALID;
    }
    while (slots < 2u * (uint32_t)capacity) {
        slots <<= 1;
    }
    cache->n = n;
    cache->capacity = capacity;
    cache->mask = slots - 1;
    cache->keys = calloc(slots, sizeof(uint64_t));
    cache->entry = calloc(slots, sizeof(int32_t));
    cache->ok = calloc((size_t)capacity, sizeof(int8_t));
    cache->vectors = calloc((size_t)capacity * (size_t)n, sizeof(double));
    if (cache->keys == NULL || cache->entry == NULL || cache->ok == NULL ||
        cache->vectors == NULL) {
        gcx_code_cache_fini(cache);
        return GCX_ERR_NOMEM;
    }
    return GCX_OK;
}

void gcx_code_cache_fini(gcx_code_cache_t *cache)
{
    free(cache->vectors);
    free(cache->ok);
    free(cache->entry);
    free(cache->keys);
    memset(cache, 0, sizeof(*cache));
}

int gcx_code_cache_lookup(const gcx_code_cache_t *cache, uint64_t key,
                          const double **vec_p, int *ok_p)
{
    uint32_t slot = cache_hash(key) & cache->mask;

    while (cache->keys[slot] != 0) {
        if (cache->keys[slot] == key) {
            int32_t e = cache->entry[slot];
            *ok_p = cache->ok[e];
            *vec_p = cache->ok[e]
                         ? cache->vectors + (size_t)e * (size_t)cache->n
                         : NULL;
            return 1;
        }
        slot = (slot + 1) & cache->mask;
    }
    return 0;
}

void gcx_code_cache_insert(gcx_code_cache_t *cache, uint64_t key,
                           const double *vec, int ok)
{
    uint32_t slot;
    int32_t e;

    if (key == 0) {
        return;
    }
    if (cache->count == cache->capacity) {
        memset(cache->keys, 0, sizeof(uint64_t) * ((size_t)cache->mask + 1));
        cache->count = 0;
    }
    slot = cache_hash(key) & cache->mask;
    while (cache->keys[slot] != 0) {
        if (cache->keys[slot] == key) {
            return; /* already there */
        }
        slot = (slot + 1) & cache->mask;
    }
    e = cache->count++;
    cache->keys[slot] = key;
    cache->entry[slot] = e;
    cache->ok[e] = (int8_t)(ok != 0);
    if (ok) {
        memcpy(cache->vectors + (size_t)e * (size_t)cache->n, vec,
               sizeof(double) * (size_t)cache->n);
    }
}
