/*
 * cr.c - the cyclic-repetition encoding matrix (Tandon, Lei, Dimakis and
 * Karampatziakis, "Gradient Coding", ICML 2017, Algorithm 2), with a
 * deterministic, well-conditioned choice of H.
 *
 * Construction: worker i holds partitions S_i = {i, ..., i+s} mod n. Take
 * H (s x n) with orthonormal rows orthogonal to 1 and set B_ii = 1,
 * B_{i,S\i} = -H_{:,S\i}^{-1} H_{:,i}: every row of B lies in null(H), an
 * (n-s)-dimensional space containing 1, and when any n-s rows are
 * independent they span 1, so any n-s workers decode.
 *
 * Conditioning: B depends only on the row space of H, and a random one
 * (the paper's choice) decodes some straggler sets only with coefficients
 * in the thousands (measured: amplification up to 1e4 at n = 10, s = 3),
 * which float messages cannot afford. So the row space is chosen:
 * - n + s odd: the real Fourier rows of the s consecutive frequencies
 *   centred on n/2 (cos for k < n/2, sin for k > n/2, cos for k = n/2).
 *   B is then circulant, the generator of a real BCH code whose zeros are
 *   those frequencies: by the BCH bound any s erasures are decodable, and
 *   the decoding only inverts a Vandermonde matrix on the erased workers'
 *   roots of unity. Measured worst amplification over all straggler sets:
 *   1 for s = 1, below 30 for n <= 16, s <= 3 (828 at n = 64, s = 3).
 * - n + s even: no real circulant code exists (its zero set would have to
 *   be closed under conjugation, of size s and without 0, which forces
 *   n + s odd for consecutive zeros, and fails on antipodal stragglers for
 *   s = 2 whatever the zeros). We take an s-dimensional subspace of the
 *   s+1 Fourier rows for n + s + 1 (drop one direction v), try CR_SEEDS
 *   pseudo-random v and keep the B whose worst amplification is smallest:
 *   over every straggler set when that is cheap (CR_EXHAUSTIVE), else over
 *   a fixed sample (every run of s consecutive workers, a hard case, plus
 *   n/2 spread ones).
 *
 * Determinism: every rank must build the same B. Random numbers come from
 * a fixed-seed splitmix64 stream, the scoring is plain C (no threaded
 * BLAS), and angles are reduced exactly (k j mod n) before cos/sin, so the
 * same binary builds the same B bit for bit.
 *
 * Cost: O(s^2 n + n s^3) when n + s is odd; when even, CR_SEEDS times
 * O(n s^3) plus the scoring, about 1.5 n solves of O(n^3): ~0.1 s at
 * n = 64, once per code. Memory O(n^2).
 */
#include "code_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CR_SEED   UINT64_C(0x6763782d63722d31) /* "gcx-cr-1" */
#define CR_SEEDS  8
#define CR_PIVOT  1e-9
#define CR_MAXAMP 1e300
/* Score every straggler set while (sets * n^3) stays below this. */
#define CR_EXHAUSTIVE 3e7

static uint64_t cr_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z          = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z          = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) with 53 random bits: exact, no libm. */
static double cr_uniform(uint64_t *state)
{
    return (double)(cr_splitmix64(state) >> 11) * 0x1.0p-52 - 1.0;
}

/* Make the m rows of h (length len) orthonormal, and orthogonal to 1 when
 * ones is set (modified Gram-Schmidt, twice). 0 if a row vanishes. */
static int cr_orthonormalize(int m, int len, int ones, double *h)
{
    for (int r = 0; r < m; r++) {
        double *row = h + (size_t)r * len;
        double norm = 0.0;

        for (int pass = 0; pass < 2; pass++) {
            if (ones) {
                double mean = 0.0;
                for (int j = 0; j < len; j++) {
                    mean += row[j];
                }
                mean /= len;
                for (int j = 0; j < len; j++) {
                    row[j] -= mean;
                }
            }
            for (int q = 0; q < r; q++) {
                const double *prev = h + (size_t)q * len;
                double dot         = 0.0;
                for (int j = 0; j < len; j++) {
                    dot += row[j] * prev[j];
                }
                for (int j = 0; j < len; j++) {
                    row[j] -= dot * prev[j];
                }
            }
        }
        for (int j = 0; j < len; j++) {
            norm += row[j] * row[j];
        }
        norm = sqrt(norm);
        if (norm < 1e-6) {
            return 0;
        }
        for (int j = 0; j < len; j++) {
            row[j] /= norm;
        }
    }
    return 1;
}

/* m real Fourier rows of the consecutive frequencies centred on n/2
 * (needs n + m odd). */
static void cr_fourier_rows(int n, int m, double *h)
{
    const double two_pi = 6.283185307179586476925286766559;
    int k0              = (n - m + 1) / 2;

    for (int r = 0; r < m; r++) {
        int k = k0 + r;
        for (int j = 0; j < n; j++) {
            double th = two_pi * (double)(((long)k * j) % n) / n;
            h[(size_t)r * n + j] = (2 * k > n) ? sin(th) : cos(th);
        }
    }
}

/* Solve m x = rhs (s x s, row-major, both overwritten) by Gaussian
 * elimination with partial pivoting; 0 if a pivot is below CR_PIVOT. */
static int cr_solve_small(int s, double *m, double *rhs, double *x)
{
    for (int c = 0; c < s; c++) {
        int piv = c;
        for (int r = c + 1; r < s; r++) {
            if (fabs(m[r * s + c]) > fabs(m[piv * s + c])) {
                piv = r;
            }
        }
        if (fabs(m[piv * s + c]) < CR_PIVOT) {
            return 0;
        }
        if (piv != c) {
            for (int k = 0; k < s; k++) {
                double t       = m[c * s + k];
                m[c * s + k]   = m[piv * s + k];
                m[piv * s + k] = t;
            }
            double t = rhs[c];
            rhs[c]   = rhs[piv];
            rhs[piv] = t;
        }
        for (int r = c + 1; r < s; r++) {
            double f = m[r * s + c] / m[c * s + c];
            for (int k = c; k < s; k++) {
                m[r * s + k] -= f * m[c * s + k];
            }
            rhs[r] -= f * rhs[c];
        }
    }
    for (int c = s - 1; c >= 0; c--) {
        double v = rhs[c];
        for (int k = c + 1; k < s; k++) {
            v -= m[c * s + k] * x[k];
        }
        x[c] = v / m[c * s + c];
    }
    return 1;
}

typedef struct cr_work {
    int n, s;
    double *h;    /* [(s+1)*n] H, or the s+1 Fourier rows */
    double *hs;   /* [s*n] H built from them */
    double *m;    /* [s*s] */
    double *rhs;  /* [s] */
    double *x;    /* [s] */
    double *q;    /* [n*n] scoring: Q of B_F^T */
    double *r;    /* [n*n] scoring: R */
    double *cand; /* [n*n] candidate B */
} cr_work_t;

/* Rows of b from h (s x n); 0 if some H_{:,S\i} is too close to singular. */
static int cr_fill_rows(cr_work_t *w, const double *h, double *b)
{
    int n = w->n, s = w->s;

    memset(b, 0, sizeof(double) * (size_t)n * (size_t)n);
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < s; r++) {
            for (int k = 0; k < s; k++) {
                w->m[r * s + k] = h[(size_t)r * n + (i + 1 + k) % n];
            }
            w->rhs[r] = -h[(size_t)r * n + i];
        }
        if (!cr_solve_small(s, w->m, w->rhs, w->x)) {
            return 0;
        }
        b[(size_t)i * n + i] = 1.0;
        for (int k = 0; k < s; k++) {
            b[(size_t)i * n + (i + 1 + k) % n] = w->x[k];
        }
    }
    return 1;
}

/* Amplification max_j sum_i |a_i B_ij| of the decoding of the workers
 * outside `erased`, by least squares with modified Gram-Schmidt QR of
 * B_F^T (plain C, deterministic); CR_MAXAMP if it does not decode. */
static double cr_amplification(cr_work_t *w, const double *b,
                               uint64_t erased)
{
    int n = w->n, k = 0, idx[GCX_CODE_MAX_WORKERS];
    double a[GCX_CODE_MAX_WORKERS], qt1[GCX_CODE_MAX_WORKERS], worst = 0.0;

    for (int i = 0; i < n; i++) {
        if (!(erased & (UINT64_C(1) << i))) {
            idx[k++] = i;
        }
    }
    for (int c = 0; c < k; c++) {
        double *qc = w->q + (size_t)c * n;
        double n0 = 0.0, nn = 0.0;
        memcpy(qc, b + (size_t)idx[c] * n, sizeof(double) * (size_t)n);
        for (int j = 0; j < n; j++) {
            n0 += qc[j] * qc[j];
        }
        for (int p = 0; p < c; p++) {
            w->r[(size_t)p * n + c] = 0.0;
        }
        for (int pass = 0; pass < 2; pass++) {
            for (int p = 0; p < c; p++) {
                const double *qp = w->q + (size_t)p * n;
                double dot       = 0.0;
                for (int j = 0; j < n; j++) {
                    dot += qp[j] * qc[j];
                }
                for (int j = 0; j < n; j++) {
                    qc[j] -= dot * qp[j];
                }
                w->r[(size_t)p * n + c] += dot;
            }
        }
        for (int j = 0; j < n; j++) {
            nn += qc[j] * qc[j];
        }
        nn = sqrt(nn);
        if (!(nn > 1e-10 * sqrt(n0))) {
            return CR_MAXAMP; /* dependent rows */
        }
        for (int j = 0; j < n; j++) {
            qc[j] /= nn;
        }
        w->r[(size_t)c * n + c] = nn;
        qt1[c]                  = 0.0;
        for (int j = 0; j < n; j++) {
            qt1[c] += qc[j];
        }
    }
    for (int c = k - 1; c >= 0; c--) {
        double v = qt1[c];
        for (int p = c + 1; p < k; p++) {
            v -= w->r[(size_t)c * n + p] * a[p];
        }
        a[c] = v / w->r[(size_t)c * n + c];
    }
    for (int j = 0; j < n; j++) {
        double sum = 0.0, mag = 0.0;
        for (int c = 0; c < k; c++) {
            double t = a[c] * b[(size_t)idx[c] * n + j];
            sum += t;
            mag += fabs(t);
        }
        if (!(fabs(sum - 1.0) <= GCX_CODE_RESIDUAL_TOL)) {
            return CR_MAXAMP;
        }
        if (mag > worst) {
            worst = mag;
        }
    }
    return worst;
}

/* Next s-subset of n bits in increasing order (Gosper); 0 after the last. */
static uint64_t cr_next_subset(uint64_t x, int n)
{
    uint64_t c = x & (~x + 1), r = x + c;
    x = (((r ^ x) >> 2) / c) | r;
    return (n < 64 && (x >> n)) || r == 0 ? 0 : x;
}

/* Worst amplification over every straggler set when that is cheap, else
 * over a fixed sample; stops early above `bound`. */
static double cr_score(cr_work_t *w, const double *b, double bound)
{
    int n = w->n, s = w->s;
    uint64_t state = CR_SEED ^ UINT64_C(0x5c0e);
    double worst   = 0.0, binom = 1.0;

    for (int k = 0; k < s; k++) {
        binom = binom * (n - k) / (k + 1);
    }
    if (binom * n * n * n <= CR_EXHAUSTIVE) {
        for (uint64_t e = (UINT64_C(1) << s) - 1; e != 0 && worst < bound;
             e = cr_next_subset(e, n)) {
            double amp = cr_amplification(w, b, e);
            if (amp > worst) {
                worst = amp;
            }
        }
        return worst;
    }
    for (int t = 0; t < n + n / 2 && worst < bound; t++) {
        uint64_t erased = 0;
        if (t < n) {
            for (int k = 0; k < s; k++) {
                erased |= UINT64_C(1) << ((t + k) % n);
            }
        } else {
            while (gcx_code_popcount(erased) < s) {
                erased |= UINT64_C(1) << (cr_splitmix64(&state) % n);
            }
        }
        double amp = cr_amplification(w, b, erased);
        if (amp > worst) {
            worst = amp;
        }
    }
    return worst;
}

/* n + s even: best of CR_SEEDS projections of the s+1 Fourier rows. */
static int cr_fill_projected(cr_work_t *w, double *b)
{
    int n = w->n, s = w->s, m = s + 1, found = 0;
    uint64_t state = CR_SEED;
    double best    = CR_MAXAMP;
    double g[GCX_CODE_MAX_WORKERS * GCX_CODE_MAX_WORKERS];

    cr_fourier_rows(n, m, w->h);
    if (!cr_orthonormalize(m, n, 1, w->h)) {
        return 0;
    }
    for (int seed = 0; seed < CR_SEEDS; seed++) {
        /* g: rows v, e_0, ..., e_s; orthonormalising and dropping the
         * first leaves an orthonormal basis of v-perp in rows 1..s. */
        for (int k = 0; k < m; k++) {
            g[k] = cr_uniform(&state);
        }
        int r = 1;
        for (int e = 0; e < m && r <= s; e++) {
            for (int k = 0; k < m; k++) {
                g[r * m + k] = (k == e) ? 1.0 : 0.0;
            }
            if (cr_orthonormalize(r + 1, m, 0, g)) {
                r++;
            }
        }
        if (r <= s) {
            continue;
        }
        for (int row = 0; row < s; row++) {
            for (int j = 0; j < n; j++) {
                double v = 0.0;
                for (int k = 0; k < m; k++) {
                    v += g[(row + 1) * m + k] * w->h[(size_t)k * n + j];
                }
                w->hs[(size_t)row * n + j] = v;
            }
        }
        if (!cr_fill_rows(w, w->hs, w->cand)) {
            continue;
        }
        double score = cr_score(w, w->cand, best);
        if (score < best) {
            best  = score;
            found = 1;
            memcpy(b, w->cand, sizeof(double) * (size_t)n * (size_t)n);
        }
    }
    return found;
}

gcx_status_t gcx_code_cr_fill(int n, int s, double *b)
{
    cr_work_t w = {.n = n, .s = s};
    size_t nn   = (size_t)n * (size_t)n;
    int ok      = 0;

    memset(b, 0, sizeof(double) * nn);
    if (s == 0) {
        for (int i = 0; i < n; i++) {
            b[(size_t)i * n + i] = 1.0;
        }
        return GCX_OK;
    }

    w.h    = malloc(sizeof(double) * (size_t)(s + 1) * (size_t)n);
    w.hs   = malloc(sizeof(double) * (size_t)s * (size_t)n);
    w.m    = malloc(sizeof(double) * (size_t)s * (size_t)s);
    w.rhs  = malloc(sizeof(double) * (size_t)s);
    w.x    = malloc(sizeof(double) * (size_t)s);
    w.q    = malloc(sizeof(double) * nn);
    w.r    = malloc(sizeof(double) * nn);
    w.cand = malloc(sizeof(double) * nn);
    if (w.h == NULL || w.hs == NULL || w.m == NULL || w.rhs == NULL ||
        w.x == NULL || w.q == NULL || w.r == NULL || w.cand == NULL) {
        ok = -1;
        goto out_free;
    }
    if ((n + s) % 2 == 1) {
        cr_fourier_rows(n, s, w.h);
        ok = cr_orthonormalize(s, n, 1, w.h) && cr_fill_rows(&w, w.h, b);
    } else {
        ok = cr_fill_projected(&w, b);
    }

out_free:
    free(w.cand);
    free(w.r);
    free(w.q);
    free(w.x);
    free(w.rhs);
    free(w.m);
    free(w.hs);
    free(w.h);
    if (ok < 0) {
        return GCX_ERR_NOMEM;
    }
    return ok ? GCX_OK : GCX_ERR_UNDECODABLE;
}
