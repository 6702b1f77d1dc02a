/*
 * coding_test_util.h - helpers shared by the gradient-coding unit tests:
 * RAII wrappers, subset enumeration and a small deterministic RNG.
 */
#ifndef GCX_TEST_CODING_UTIL_H
#define GCX_TEST_CODING_UTIL_H

#include <gcx/coding.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

namespace gcxtest
{

struct CodeDeleter {
    void operator()(gcx_code_t *c) const
    {
        gcx_code_destroy(c);
    }
};
struct PgcDeleter {
    void operator()(gcx_pgc_t *p) const
    {
        gcx_pgc_destroy(p);
    }
};
using CodePtr = std::unique_ptr<gcx_code_t, CodeDeleter>;
using PgcPtr = std::unique_ptr<gcx_pgc_t, PgcDeleter>;

inline gcx_code_params_t params(gcx_code_kind_t kind, int n, int s,
                                gcx_code_decoding_t dec = GCX_CODE_DECODE_EXACT)
{
    gcx_code_params_t p{};
    p.kind = kind;
    p.decoding = dec;
    p.n = n;
    p.s = s;
    return p;
}

/* Build a code; fails the test (and returns null) when creation fails. */
inline CodePtr make_code(const gcx_code_params_t &p)
{
    gcx_code_t *c = nullptr;
    gcx_status_t st = gcx_code_create(&p, &c);
    EXPECT_EQ(st, GCX_OK) << "kind " << p.kind << " n " << p.n << " s " << p.s
                          << ": " << gcx_strerror(st);
    return CodePtr(c);
}

inline CodePtr make_code(gcx_code_kind_t kind, int n, int s,
                         gcx_code_decoding_t dec = GCX_CODE_DECODE_EXACT)
{
    return make_code(params(kind, n, s, dec));
}

/*
 * The groups of an FR code over n workers tolerating s, from the
 * definition in coding.h: q = floor(n / (s + 1)) groups of consecutive
 * workers, the first n mod q of them floor(n / q) + 1 long, the others
 * floor(n / q). Returns the q + 1 bounds: group k is [b[k], b[k + 1]).
 */
inline std::vector<int> fr_bounds(int n, int s)
{
    int q = n / (s + 1);
    std::vector<int> b{0};
    for (int k = 0; k < q; k++) {
        b.push_back(b.back() + n / q + (k < n % q ? 1 : 0));
    }
    return b;
}

/* The group of worker w in those bounds (a scan: the reference). */
inline int fr_group(const std::vector<int> &bounds, int w)
{
    int k = 0;
    while (bounds[k + 1] <= w) {
        k++;
    }
    return k;
}

/* Every worker's assignment of an FR code is its group's partitions,
 * coefficient 1 (fr_bounds above). */
inline void expect_fr_assignment(const gcx_code_t *c, int n, int s)
{
    auto b = fr_bounds(n, s);
    int load = 0;
    for (size_t k = 0; k + 1 < b.size(); k++) {
        load = std::max(load, b[k + 1] - b[k]);
        ASSERT_GE(b[k + 1] - b[k], s + 1) << "group " << k;
    }
    ASSERT_EQ(b.back(), n);
    ASSERT_EQ(gcx_code_load(c), load);
    std::vector<int> parts(load, -7);
    std::vector<double> coeffs(load, -7.0);
    for (int i = 0; i < n; i++) {
        int cnt = -1, g = fr_group(b, i);
        ASSERT_EQ(gcx_code_assignment(c, i, parts.data(), coeffs.data(), &cnt),
                  GCX_OK);
        ASSERT_EQ(cnt, b[g + 1] - b[g]) << "worker " << i;
        for (int k = 0; k < cnt; k++) {
            EXPECT_EQ(parts[k], b[g] + k) << "worker " << i;
            EXPECT_EQ(coeffs[k], 1.0) << "worker " << i;
        }
    }
}

inline std::vector<double> matrix_of(const gcx_code_t *c)
{
    int n = gcx_code_workers(c);
    std::vector<double> b((size_t)n * n);
    EXPECT_EQ(gcx_code_matrix(c, b.data()), GCX_OK);
    return b;
}

/*
 * A worker set over n <= 64 workers held in one word, where the API takes
 * a worker set (const uint64_t *, gcx/wset.h): ws(0b101) passes workers 0
 * and 2. The word is a temporary that lives to the end of the full
 * expression, i.e. through the call.
 */
struct OneWordSet {
    uint64_t word;
    operator const uint64_t *() const
    {
        return &word;
    }
};

inline OneWordSet ws(uint64_t mask)
{
    return OneWordSet{mask};
}

/* A worker set over any n (GCX_WSET_WORDS(n) words, all empty). */
inline std::vector<uint64_t> empty_set(int n)
{
    return std::vector<uint64_t>(GCX_WSET_WORDS(n), 0);
}

inline uint64_t all_mask(int n)
{
    return n == 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
}

inline int popcount(uint64_t x)
{
    return __builtin_popcountll(x);
}

/* Call f on every subset of {0..n-1} of size k (Gosper's hack). */
inline void for_each_subset(int n, int k,
                            const std::function<void(uint64_t)> &f)
{
    if (k == 0) {
        f(0);
        return;
    }
    if (k > n) {
        return;
    }
    uint64_t x = all_mask(k);
    uint64_t end = all_mask(n);
    while (true) {
        f(x);
        if (x == (end & ~all_mask(n - k)) || k == n) {
            break; /* the highest k bits: last subset */
        }
        uint64_t c = x & (~x + 1), r = x + c;
        x = (((r ^ x) >> 2) / c) | r;
    }
}

/* A uniformly random subset of size k. */
inline uint64_t random_subset(int n, int k, std::mt19937_64 &rng)
{
    std::vector<int> idx(n);
    for (int i = 0; i < n; i++) {
        idx[i] = i;
    }
    std::shuffle(idx.begin(), idx.end(), rng);
    uint64_t m = 0;
    for (int i = 0; i < k; i++) {
        m |= UINT64_C(1) << idx[i];
    }
    return m;
}

/* max_j |sum_{i} a_i B_ij - 1| */
inline double residual(const std::vector<double> &b, int n,
                       const std::vector<double> &a)
{
    double worst = 0;
    for (int j = 0; j < n; j++) {
        double sum = 0;
        for (int i = 0; i < n; i++) {
            sum += a[i] * b[(size_t)i * n + j];
        }
        worst = std::max(worst, std::fabs(sum - 1.0));
    }
    return worst;
}

/* Rank of a row-major m x n matrix by Gaussian elimination. */
inline int rank_of(std::vector<double> a, int m, int n, double tol = 1e-9)
{
    int rank = 0;
    for (int c = 0; c < n && rank < m; c++) {
        int piv = rank;
        for (int r = rank + 1; r < m; r++) {
            if (std::fabs(a[r * n + c]) > std::fabs(a[piv * n + c])) {
                piv = r;
            }
        }
        if (std::fabs(a[piv * n + c]) < tol) {
            continue;
        }
        for (int k = 0; k < n; k++) {
            std::swap(a[rank * n + k], a[piv * n + k]);
        }
        for (int r = rank + 1; r < m; r++) {
            double f = a[r * n + c] / a[rank * n + c];
            for (int k = c; k < n; k++) {
                a[r * n + k] -= f * a[rank * n + k];
            }
        }
        rank++;
    }
    return rank;
}

/* 1 lies in the row space of B_F (rank test, independent of LAPACK). */
inline bool truly_decodable(const std::vector<double> &b, int n, uint64_t f)
{
    std::vector<double> rows, with_ones;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (f >> i & 1) {
            rows.insert(rows.end(), b.begin() + i * n, b.begin() + (i + 1) * n);
            k++;
        }
    }
    with_ones = rows;
    with_ones.insert(with_ones.end(), n, 1.0);
    return k > 0 && rank_of(rows, k, n) == rank_of(with_ones, k + 1, n);
}

} // namespace gcxtest

#endif
