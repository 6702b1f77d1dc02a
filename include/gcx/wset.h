/**
 * @file wset.h
 * @brief Sets of workers of a gradient code, sized by the number of workers.
 *
 * A worker set over n workers is an array of GCX_WSET_WORDS(n) uint64_t
 * words: worker w is bit (w % 64) of word (w / 64), and the bits at and
 * past n are zero. The caller owns the words. Every API that takes or
 * returns a set of workers (gcx_code_decodable(), gcx_coded_result_t, ...)
 * uses this layout, for any n the code allows: it replaces the single
 * 64-bit masks of gcx 0.1, which capped a code at 64 workers.
 *
 * Cost: a set takes n / 8 bytes (512 bytes at n = 4096); the helpers below
 * are O(1), but for count, clear, copy and equal, O(n / 64).
 *
 * @code
 *   uint64_t *arrived = calloc(GCX_WSET_WORDS(n), sizeof(uint64_t));
 *   gcx_wset_add(arrived, 3);
 *   gcx_code_decodable(code, arrived, &ok);
 *   free(arrived);
 * @endcode
 */
#ifndef GCX_WSET_H
#define GCX_WSET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Words of a set over @p n workers. */
#define GCX_WSET_WORDS(n) (((size_t)(n) + 63u) / 64u)

/** 1 when worker @p w is in the set, else 0. */
static inline int gcx_wset_has(const uint64_t *set, int w)
{
    return (int)((set[(unsigned)w / 64u] >> ((unsigned)w % 64u)) & 1u);
}

/** Put worker @p w in the set. */
static inline void gcx_wset_add(uint64_t *set, int w)
{
    set[(unsigned)w / 64u] |= (uint64_t)1 << ((unsigned)w % 64u);
}

/** Take worker @p w out of the set. */
static inline void gcx_wset_del(uint64_t *set, int w)
{
    set[(unsigned)w / 64u] &= ~((uint64_t)1 << ((unsigned)w % 64u));
}

/** Empty the set over @p n workers. */
static inline void gcx_wset_clear(uint64_t *set, int n)
{
    memset(set, 0, GCX_WSET_WORDS(n) * sizeof(uint64_t));
}

/** dst = src, both over @p n workers. */
static inline void gcx_wset_copy(uint64_t *dst, const uint64_t *src, int n)
{
    memcpy(dst, src, GCX_WSET_WORDS(n) * sizeof(uint64_t));
}

/** 1 when the two sets over @p n workers are equal, else 0. */
static inline int gcx_wset_equal(const uint64_t *a, const uint64_t *b, int n)
{
    return memcmp(a, b, GCX_WSET_WORDS(n) * sizeof(uint64_t)) == 0;
}

/** 1 when no bit at or past @p n is set in the set's last word (a set
 *  over n workers must have none), else 0. */
static inline int gcx_wset_valid(const uint64_t *set, int n)
{
    unsigned tail = (unsigned)n % 64u;

    return tail == 0 || (set[GCX_WSET_WORDS(n) - 1] >> tail) == 0;
}

/** Number of workers in the set over @p n workers. */
static inline int gcx_wset_count(const uint64_t *set, int n)
{
    int count = 0;
    size_t i;

    for (i = 0; i < GCX_WSET_WORDS(n); i++) {
#if defined(__GNUC__) || defined(__clang__)
        count += __builtin_popcountll(set[i]);
#else
        uint64_t x = set[i];
        for (; x != 0; x &= x - 1) {
            count++;
        }
#endif
    }
    return count;
}

#ifdef __cplusplus
}
#endif

#endif /* GCX_WSET_H */
