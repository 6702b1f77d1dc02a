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
 * Scoring is cheap because all decoding vectors are a0 + Y z (one solution
 * plus the left null space of B), so a straggler set costs an s x s solve
 * (cr_dual()). Measured worst amplification over all straggler sets for
 * s = 3, n odd: 2.5e3 (n = 27), 3.6e3 (35), 1.9e4 (55), 1.1e4 (63).
 *
 * Cost: O(s^2 n + n s^3) when n + s is odd; when even, CR_SEEDS times
 * O(n^3) for the dual plus O(s^3 + n s) per scored straggler set (at most
 * CR_EXHAUSTIVE): up to ~0.3 s at n = 64, s = 3, once per code. Memory
 * O(n^2).
 */
#include "code_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CR_SEED       UINT64_C(0x6763782d63722d31) /* "gcx-cr-1" */
#define CR_SEEDS      16
#define CR_PIVOT      1e-9
#define CR_MAXAMP     1e300
#define CR_EXHAUSTIVE 50000 /* score every straggler set up to this many */
#define CR_SAMPLE     2000  /* else this many pseudo-random ones */

static uint64_t cr_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
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
                double dot = 0.0;
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
    int k0 = (n - m + 1) / 2;

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
                double t = m[c * s + k];
                m[c * s + k] = m[piv * s + k];
                m[piv * s + k] = t;
            }
            double t = rhs[c];
            rhs[c] = rhs[piv];
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
    double *m;    /* [s*s] small system */
    double *rhs;  /* [s] */
    double *x;    /* [s] */
    double *u;    /* [n*n] scoring: B^T, eliminated */
    double *a0;   /* [n] scoring: a particular a with B^T a = 1 */
    double *y;    /* [s*n] scoring: basis of the left null space of B */
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

/*
 * Every decoding vector at once: with a0 one solution of B^T a = 1 and Y
 * (n x s) a basis of {y : B^T y = 0}, the decoding vectors are a0 + Y z,
 * and the one for erased workers E is fixed by a_E = 0, an s x s system
 * Y_E z = -a0_E. So scoring one straggler set costs O(s^3 + n s) instead
 * of a least-squares solve. a0 and Y come from Gaussian elimination with
 * complete pivoting of B^T, whose rank is n - s.
 */
static int cr_dual(cr_work_t *w, const double *b)
{
    int n = w->n, s = w->s, r0 = n - s, perm[GCX_CODE_MAX_SOLVED_WORKERS];
    double rhs[GCX_CODE_MAX_SOLVED_WORKERS];
    double x[GCX_CODE_MAX_SOLVED_WORKERS], big = 0.0;
    double *u = w->u;

    for (int j = 0; j < n; j++) {
        for (int i = 0; i < n; i++) {
            u[(size_t)j * n + i] = b[(size_t)i * n + j];
            big = fmax(big, fabs(b[(size_t)i * n + j]));
        }
        rhs[j] = 1.0;
    }
    for (int i = 0; i < n; i++) {
        perm[i] = i;
    }
    for (int r = 0; r < r0; r++) {
        int pr = r, pc = r;
        for (int q = r; q < n; q++) {
            for (int c = r; c < n; c++) {
                if (fabs(u[(size_t)q * n + c]) > fabs(u[(size_t)pr * n + pc])) {
                    pr = q;
                    pc = c;
                }
            }
        }
        if (!(fabs(u[(size_t)pr * n + pc]) > 1e-12 * big)) {
            return 0; /* rank below n - s */
        }
        for (int c = 0; c < n; c++) {
            double t = u[(size_t)r * n + c];
            u[(size_t)r * n + c] = u[(size_t)pr * n + c];
            u[(size_t)pr * n + c] = t;
        }
        double t = rhs[r];
        rhs[r] = rhs[pr];
        rhs[pr] = t;
        for (int q = 0; q < n; q++) {
            double v = u[(size_t)q * n + r];
            u[(size_t)q * n + r] = u[(size_t)q * n + pc];
            u[(size_t)q * n + pc] = v;
        }
        int p = perm[r];
        perm[r] = perm[pc];
        perm[pc] = p;
        for (int q = r + 1; q < n; q++) {
            double f = u[(size_t)q * n + r] / u[(size_t)r * n + r];
            for (int c = r; c < n; c++) {
                u[(size_t)q * n + c] -= f * u[(size_t)r * n + c];
            }
            rhs[q] -= f * rhs[r];
        }
    }
    /* Back substitution: a0 with the free unknowns 0, then one null vector
     * per free unknown. */
    for (int v = -1; v < s; v++) {
        double norm = 0.0;
        for (int c = r0; c < n; c++) {
            x[c] = (c - r0 == v) ? 1.0 : 0.0;
        }
        for (int r = r0 - 1; r >= 0; r--) {
            double acc = (v < 0) ? rhs[r] : 0.0;
            for (int c = r + 1; c < n; c++) {
                acc -= u[(size_t)r * n + c] * x[c];
            }
            x[r] = acc / u[(size_t)r * n + r];
        }
        double *dst = (v < 0) ? w->a0 : w->y + (size_t)v * n;
        for (int c = 0; c < n; c++) {
            dst[perm[c]] = x[c];
            norm += x[c] * x[c];
        }
        if (v >= 0) {
            norm = sqrt(norm);
            for (int c = 0; c < n; c++) {
                dst[c] /= norm;
            }
        }
    }
    return 1;
}

/* Amplification max_j sum_i |a_i B_ij| of the decoding vector for the
 * erased workers e[0..s-1]; CR_MAXAMP when Y_E is singular. */
static double cr_pattern_amp(cr_work_t *w, const double *b, const int *e)
{
    int n = w->n, s = w->s;
    double a[GCX_CODE_MAX_SOLVED_WORKERS], worst = 0.0;

    for (int r = 0; r < s; r++) {
        for (int k = 0; k < s; k++) {
            w->m[r * s + k] = w->y[(size_t)k * n + e[r]];
        }
        w->rhs[r] = -w->a0[e[r]];
    }
    if (!cr_solve_small(s, w->m, w->rhs, w->x)) {
        return CR_MAXAMP;
    }
    for (int i = 0; i < n; i++) {
        double v = w->a0[i];
        for (int k = 0; k < s; k++) {
            v += w->y[(size_t)k * n + i] * w->x[k];
        }
        a[i] = v;
    }
    for (int r = 0; r < s; r++) {
        a[e[r]] = 0.0;
    }
    /* Partition j is held by workers j-s..j (mod n). */
    for (int j = 0; j < n; j++) {
        double mag = 0.0;
        for (int k = 0; k <= s; k++) {
            int i = (j - k + n) % n;
            mag += fabs(a[i] * b[(size_t)i * n + j]);
        }
        worst = fmax(worst, mag);
    }
    return worst;
}

/* Worst amplification over every straggler set when there are at most
 * CR_EXHAUSTIVE of them, else over a fixed sample (every run of s
 * consecutive workers, a hard case, plus CR_SAMPLE pseudo-random sets);
 * stops early once above `bound`. */
static double cr_score(cr_work_t *w, const double *b, double bound)
{
    int n = w->n, s = w->s, e[GCX_CODE_MAX_SOLVED_WORKERS];
    uint64_t state = CR_SEED ^ UINT64_C(0x5c0e);
    double worst = 0.0, binom = 1.0;

    if (!cr_dual(w, b)) {
        return CR_MAXAMP;
    }
    for (int k = 0; k < s; k++) {
        binom = binom * (n - k) / (k + 1);
    }
    if (binom <= CR_EXHAUSTIVE) {
        /* Erased sets e[0] < ... < e[s-1], in lexicographic order. */
        for (int k = 0; k < s; k++) {
            e[k] = k;
        }
        while (worst < bound) {
            worst = fmax(worst, cr_pattern_amp(w, b, e));
            int k = s - 1;
            while (k >= 0 && e[k] == n - s + k) {
                k--;
            }
            if (k < 0) {
                break;
            }
            e[k]++;
            for (int q = k + 1; q < s; q++) {
                e[q] = e[q - 1] + 1;
            }
        }
        return worst;
    }
    for (int t = 0; t < n + CR_SAMPLE && worst < bound; t++) {
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
        for (int i = 0, k = 0; i < n; i++) {
            if (erased & (UINT64_C(1) << i)) {
                e[k++] = i;
            }
        }
        worst = fmax(worst, cr_pattern_amp(w, b, e));
    }
    return worst;
}

/* n + s even: best of CR_SEEDS projections of the s+1 Fourier rows. */
static int cr_fill_projected(cr_work_t *w, double *b)
{
    int n = w->n, s = w->s, m = s + 1, found = 0;
    uint64_t state = CR_SEED;
    double best = CR_MAXAMP;
    double g[GCX_CODE_MAX_SOLVED_WORKERS * GCX_CODE_MAX_SOLVED_WORKERS];

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
            best = score;
            found = 1;
            memcpy(b, w->cand, sizeof(double) * (size_t)n * (size_t)n);
        }
    }
    return found;
}

gcx_status_t gcx_code_cr_fill(int n, int s, double *b)
{
    cr_work_t w = {.n = n, .s = s};
    size_t nn = (size_t)n * (size_t)n;
    int ok = 0;

    memset(b, 0, sizeof(double) * nn);
    if (s == 0) {
        for (int i = 0; i < n; i++) {
            b[(size_t)i * n + i] = 1.0;
        }
        return GCX_OK;
    }

    w.h = malloc(sizeof(double) * (size_t)(s + 1) * (size_t)n);
    w.hs = malloc(sizeof(double) * (size_t)s * (size_t)n);
    w.m = malloc(sizeof(double) * (size_t)s * (size_t)s);
    w.rhs = malloc(sizeof(double) * (size_t)s);
    w.x = malloc(sizeof(double) * (size_t)s);
    w.u = malloc(sizeof(double) * nn);
    w.a0 = malloc(sizeof(double) * (size_t)n);
    w.y = malloc(sizeof(double) * (size_t)s * (size_t)n);
    w.cand = malloc(sizeof(double) * nn);
    if (w.h == NULL || w.hs == NULL || w.m == NULL || w.rhs == NULL ||
        w.x == NULL || w.u == NULL || w.a0 == NULL || w.y == NULL ||
        w.cand == NULL) {
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
    free(w.y);
    free(w.a0);
    free(w.u);
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
