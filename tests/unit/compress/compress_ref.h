/*
 * compress_ref.h - naive references and input generators for the
 * compressor tests.
 *
 * The reference top-k sorts every position by (|x| descending, index
 * ascending) with std::sort - obviously right, O(N log N) - and takes the
 * first k, in index order. The generators make the inputs the issue lists:
 * random, ties, plateaus, a few huge values, periodic structure that
 * defeats strided sampling, all zeros, negative values, denormals, and
 * patterns that are bad for quickselect (sorted, reversed).
 */
#ifndef GCX_TEST_COMPRESS_REF_H
#define GCX_TEST_COMPRESS_REF_H

#include <gcx/compress.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace gcxtest
{

/* Magnitude key: the float bits without the sign (orders like |x|). */
inline uint32_t mag_key(float v)
{
    uint32_t u;
    std::memcpy(&u, &v, sizeof(u));
    return u & 0x7fffffffu;
}

inline bool same_bits(float a, float b)
{
    return std::memcmp(&a, &b, sizeof(a)) == 0;
}

/* Positions 0..n-1 by (|v| descending, position ascending): a plain sort
 * of 64-bit composites (fast enough in a sanitizer build too). */
inline std::vector<uint32_t> magnitude_order(const std::vector<float> &v)
{
    std::vector<uint64_t> c(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        c[i] = ((uint64_t)(0x7fffffffu - mag_key(v[i])) << 32) | i;
    }
    std::sort(c.begin(), c.end());
    std::vector<uint32_t> order(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        order[i] = (uint32_t)c[i];
    }
    return order;
}

/* rank[pos]: where position pos stands in the magnitude order. */
inline std::vector<uint32_t> magnitude_rank(const std::vector<uint32_t> &order)
{
    std::vector<uint32_t> rank(order.size());
    for (size_t r = 0; r < order.size(); r++) {
        rank[order[r]] = (uint32_t)r;
    }
    return rank;
}

/* Reference top-k positions in index order, from the ranks: O(N), no
 * sort per k. */
inline std::vector<uint32_t> ref_topk_rank(const std::vector<uint32_t> &rank,
                                           size_t k)
{
    std::vector<uint32_t> pos;
    pos.reserve(std::min(k, rank.size()));
    for (size_t p = 0; p < rank.size(); p++) {
        if (rank[p] < k) {
            pos.push_back((uint32_t)p);
        }
    }
    return pos;
}

/* Reference top-k positions (index order), from a magnitude order. */
inline std::vector<uint32_t> ref_topk(const std::vector<uint32_t> &order,
                                      size_t k)
{
    std::vector<uint32_t> pos(order.begin(),
                              order.begin() + std::min(k, order.size()));
    std::sort(pos.begin(), pos.end());
    return pos;
}

/* A sparse vector backed by std::vectors (caller-owned arrays). */
struct SparseBuf {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    gcx_sparse_vec_t sp;

    explicit SparseBuf(size_t capacity, size_t dense_len = 0)
        : idx(capacity + 1), val(capacity + 1)
    {
        gcx_sparse_vec_init(&sp, idx.data(), val.data(), capacity, dense_len);
    }
    SparseBuf(const SparseBuf &) = delete;
    SparseBuf &operator=(const SparseBuf &) = delete;
};

enum class Input {
    Gauss,      /* N(0,1) times a scale per block of 4096 */
    Ties,       /* few distinct magnitudes, both signs */
    Plateaus,   /* long runs of one value */
    Huge,       /* small noise plus a few values near FLT_MAX/1e3 */
    Periodic,   /* spikes at one phase of period 100 (strided samples miss
                 * or hit all of them) */
    Period64,   /* spikes every 64 entries, aligned with cache lines */
    Zeros,      /* all zeros */
    Negative,   /* only negative values */
    Denormal,   /* magnitudes around 1e-42 (subnormal floats) */
    Ascending,  /* magnitudes increasing with the index */
    Descending, /* magnitudes decreasing with the index */
    FewNonzero, /* 5 non-zeros among zeros */
    Crowded,    /* all magnitudes within 1% of 1: one radix bucket */
    Constant,   /* one value everywhere: every entry ties */
};

inline const char *input_name(Input in)
{
    switch (in) {
    case Input::Gauss:
        return "Gauss";
    case Input::Ties:
        return "Ties";
    case Input::Plateaus:
        return "Plateaus";
    case Input::Huge:
        return "Huge";
    case Input::Periodic:
        return "Periodic";
    case Input::Period64:
        return "Period64";
    case Input::Zeros:
        return "Zeros";
    case Input::Negative:
        return "Negative";
    case Input::Denormal:
        return "Denormal";
    case Input::Ascending:
        return "Ascending";
    case Input::Descending:
        return "Descending";
    case Input::FewNonzero:
        return "FewNonzero";
    case Input::Crowded:
        return "Crowded";
    case Input::Constant:
        return "Constant";
    }
    return "?";
}

inline std::vector<float> make_input(Input kind, size_t n, uint32_t seed)
{
    std::mt19937 gen(seed);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::uniform_int_distribution<int> small(-3, 3);
    std::vector<float> x(n);
    float scale = 1;

    switch (kind) {
    case Input::Gauss:
        for (size_t i = 0; i < n; i++) {
            if (i % 4096 == 0) {
                scale = std::pow(10.0f, -2.0f * (float)(gen() % 1000) / 1000);
            }
            x[i] = scale * gauss(gen);
        }
        break;
    case Input::Ties:
        for (size_t i = 0; i < n; i++) {
            x[i] = 0.5f * (float)small(gen);
        }
        break;
    case Input::Plateaus: {
        size_t i = 0;
        while (i < n) {
            size_t len = 1 + gen() % (n / 8 + 2);
            float v = (float)(gen() % 5) - 2.0f;
            for (size_t j = 0; j < len && i < n; j++, i++) {
                x[i] = v;
            }
        }
        break;
    }
    case Input::Huge:
        for (size_t i = 0; i < n; i++) {
            x[i] = 1e-3f * gauss(gen);
        }
        for (size_t j = 0; j < 5 && n > 0; j++) {
            x[gen() % n] = (j % 2 ? -3e35f : 3e35f) * (float)(j + 1);
        }
        break;
    case Input::Periodic:
        for (size_t i = 0; i < n; i++) {
            x[i] = (i % 100 == 37 ? 10.0f : 0.01f) * (1 + 0.1f * gauss(gen));
        }
        break;
    case Input::Period64:
        for (size_t i = 0; i < n; i++) {
            x[i] = (i % 64 == 0 ? -5.0f : 1e-3f) * (1 + 0.1f * gauss(gen));
        }
        break;
    case Input::Zeros:
        break;
    case Input::Negative:
        for (size_t i = 0; i < n; i++) {
            x[i] = -std::fabs(gauss(gen));
        }
        break;
    case Input::Denormal:
        for (size_t i = 0; i < n; i++) {
            x[i] = 1e-42f * (float)(gen() % 1000) * (gen() % 2 ? 1 : -1);
        }
        break;
    case Input::Ascending:
        for (size_t i = 0; i < n; i++) {
            x[i] = (i % 2 ? -1.0f : 1.0f) * (float)i * 1e-3f;
        }
        break;
    case Input::Descending:
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)(n - i) * 1e-3f;
        }
        break;
    case Input::FewNonzero:
        for (size_t j = 0; j < 5 && n > 0; j++) {
            x[gen() % n] = gauss(gen);
        }
        break;
    case Input::Crowded:
        for (size_t i = 0; i < n; i++) {
            x[i] = (gen() % 2 ? 1.0f : -1.0f) *
                   (1.0f + 0.01f * (float)(gen() % 100000) / 100000);
        }
        break;
    case Input::Constant:
        for (size_t i = 0; i < n; i++) {
            x[i] = 0.25f;
        }
        break;
    }
    return x;
}

inline const std::vector<Input> &all_inputs()
{
    static const std::vector<Input> v = {
        Input::Gauss,    Input::Ties,      Input::Plateaus,   Input::Huge,
        Input::Periodic, Input::Period64,  Input::Zeros,      Input::Negative,
        Input::Denormal, Input::Ascending, Input::Descending, Input::FewNonzero,
        Input::Crowded,  Input::Constant};
    return v;
}

inline double naive_sqnorm(const float *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)v[i] * v[i];
    }
    return s;
}

} // namespace gcxtest

#endif
