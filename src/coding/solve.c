/*
 * solve.c - decoding vector of an arrived set by least squares (LAPACK).
 *
 * Idea: for the arrived set F (k = |F| workers) find a_F with
 * B_F^T a_F = 1, an n x k system: overdetermined when k < n, rank-deficient
 * when more than n-s arrived (any n-s rows already span the row space).
 * LAPACK dgelsd (SVD, divide and conquer) returns the minimum-norm
 * least-squares solution, treating singular values below
 * GCX_CODE_RCOND * sigma_max as zero. The result is then checked, in double:
 *   residual       max_j |sum_{i in F} a_i B_ij - 1| <= GCX_CODE_RESIDUAL_TOL
 *   amplification  max_j sum_{i in F} |a_i B_ij|     <=
 * params.max_amplification The first rejects sets that cannot decode (1 not in
 * the row space); the second rejects sets that decode only by cancelling huge
 * coefficients, which would amplify the float rounding of the messages.
 *
 * Cost: O(n k^2) flops per solve (about 0.1 ms at n = 64); the workspace
 * for every k <= n is sized once at creation, so a solve never allocates.
 */
#include "code_int.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>

struct gcx_code_solver {
    int n;
    double *a;    /* [n*n] B_F^T, column-major, overwritten. */
    double *rhs;  /* [n] right-hand side, then solution. */
    double *sv;   /* [n] singular values. */
    double *work; /* [lwork] */
    lapack_int lwork;
    lapack_int *iwork; /* [liwork] */
};

/* Largest workspace dgelsd asks for over every k in 1..n. */
static int solver_query(int n, lapack_int *lwork_p, lapack_int *liwork_p)
{
    lapack_int lwork = 1, liwork = 1;

    for (int k = 1; k <= n; k++) {
        double wq = 0.0;
        lapack_int iq = 0, rank = 0;
        lapack_int info =
            LAPACKE_dgelsd_work(LAPACK_COL_MAJOR, n, k, 1, NULL, n, NULL, n,
                                NULL, GCX_CODE_RCOND, &rank, &wq, -1, &iq);
        if (info != 0) {
            return 0;
        }
        if ((lapack_int)wq > lwork) {
            lwork = (lapack_int)wq;
        }
        if (iq > liwork) {
            liwork = iq;
        }
    }
    *lwork_p = lwork;
    *liwork_p = liwork;
    return 1;
}

gcx_status_t gcx_code_solver_create(int n, gcx_code_solver_t **solver_p)
{
    gcx_code_solver_t *sv;
    lapack_int liwork;

    sv = calloc(1, sizeof(*sv));
    if (sv == NULL) {
        return GCX_ERR_NOMEM;
    }
    sv->n = n;
    if (!solver_query(n, &sv->lwork, &liwork)) {
        free(sv);
        return GCX_ERR_INVALID;
    }
    sv->a = malloc(sizeof(double) * (size_t)n * (size_t)n);
    sv->rhs = malloc(sizeof(double) * (size_t)n);
    sv->sv = malloc(sizeof(double) * (size_t)n);
    sv->work = malloc(sizeof(double) * (size_t)sv->lwork);
    sv->iwork = malloc(sizeof(lapack_int) * (size_t)liwork);
    if (sv->a == NULL || sv->rhs == NULL || sv->sv == NULL ||
        sv->work == NULL || sv->iwork == NULL) {
        gcx_code_solver_destroy(sv);
        return GCX_ERR_NOMEM;
    }
    *solver_p = sv;
    return GCX_OK;
}

void gcx_code_solver_destroy(gcx_code_solver_t *solver)
{
    if (solver == NULL) {
        return;
    }
    free(solver->iwork);
    free(solver->work);
    free(solver->sv);
    free(solver->rhs);
    free(solver->a);
    free(solver);
}

/* Residual and amplification checks of a candidate a (length n, 0 outside
 * arrived). */
static int solver_accept(const double *b, int n, uint64_t arrived,
                         double max_amp, const double *a)
{
    for (int j = 0; j < n; j++) {
        double sum = 0.0, mag = 0.0;
        for (int i = 0; i < n; i++) {
            if (arrived & (UINT64_C(1) << i)) {
                double t = a[i] * b[(size_t)i * n + j];
                sum += t;
                mag += fabs(t);
            }
        }
        if (!(fabs(sum - 1.0) <= GCX_CODE_RESIDUAL_TOL) || !(mag <= max_amp)) {
            return 0; /* also rejects NaN */
        }
    }
    return 1;
}

gcx_status_t gcx_code_solver_solve(gcx_code_solver_t *solver, const double *b,
                                   int n, uint64_t arrived, double max_amp,
                                   double *a)
{
    int k = 0, idx[GCX_CODE_MAX_SOLVED_WORKERS];
    lapack_int rank = 0, info;

    for (int i = 0; i < n; i++) {
        if (arrived & (UINT64_C(1) << i)) {
            idx[k++] = i;
        }
    }
    if (k == 0) {
        return GCX_ERR_UNDECODABLE;
    }
    /* Column c of B_F^T is row idx[c] of B. */
    for (int c = 0; c < k; c++) {
        for (int j = 0; j < n; j++) {
            solver->a[(size_t)c * n + j] = b[(size_t)idx[c] * n + j];
        }
    }
    for (int j = 0; j < n; j++) {
        solver->rhs[j] = 1.0;
    }
    info = LAPACKE_dgelsd_work(
        LAPACK_COL_MAJOR, n, k, 1, solver->a, n, solver->rhs, n, solver->sv,
        GCX_CODE_RCOND, &rank, solver->work, solver->lwork, solver->iwork);
    if (info != 0) {
        return GCX_ERR_UNDECODABLE; /* the SVD did not converge */
    }
    for (int i = 0; i < n; i++) {
        a[i] = 0.0;
    }
    for (int c = 0; c < k; c++) {
        a[idx[c]] = solver->rhs[c];
    }
    return solver_accept(b, n, arrived, max_amp, a) ? GCX_OK
                                                    : GCX_ERR_UNDECODABLE;
}
