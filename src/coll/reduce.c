/*
 * reduce.c - reduction kernels.
 *
 * Plain loops over restrict-free pointers: dst may alias an input, and GCC
 * vectorises these loops with a runtime overlap check (-O2 -ftree-vectorize
 * in release builds), so a sum runs at memory speed. MAX/MIN use fmax/fmin
 * so that a NaN does not make the result depend on the argument order:
 * every rank must compute bit-identical values. f16 and bf16 are storage
 * types: each element is widened to float, reduced and rounded back.
 */
#include "reduce.h"

#include <math.h>
#include <string.h>

/* One kernel per (type, op). Written with a macro body but each function is
 * named and listed in the table below by hand. */
#define GCX_REDUCE_LOOP(_type, _expr)                                          \
    _type       *d = dst;                                                      \
    const _type *x = a, *y = b;                                                \
    size_t       i;                                                            \
    for (i = 0; i < n; ++i) {                                                  \
        d[i] = _expr;                                                          \
    }

static void sum_f32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(float, x[i] + y[i])
}
static void max_f32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(float, fmaxf(x[i], y[i]))
}
static void min_f32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(float, fminf(x[i], y[i]))
}
static void sum_f64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(double, x[i] + y[i])
}
static void max_f64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(double, fmax(x[i], y[i]))
}
static void min_f64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(double, fmin(x[i], y[i]))
}
/* integer sums wrap like unsigned arithmetic instead of being UB */
static void sum_i32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int32_t, (int32_t)((uint32_t)x[i] + (uint32_t)y[i]))
}
static void max_i32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int32_t, x[i] > y[i] ? x[i] : y[i])
}
static void min_i32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int32_t, x[i] < y[i] ? x[i] : y[i])
}
static void sum_i64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int64_t, (int64_t)((uint64_t)x[i] + (uint64_t)y[i]))
}
static void max_i64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int64_t, x[i] > y[i] ? x[i] : y[i])
}
static void min_i64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int64_t, x[i] < y[i] ? x[i] : y[i])
}
static void sum_f16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_half(gcx_half_to_float(x[i]) +
                                                gcx_half_to_float(y[i])))
}
static void max_f16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_half(fmaxf(
                                  gcx_half_to_float(x[i]),
                                  gcx_half_to_float(y[i]))))
}
static void min_f16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_half(fminf(
                                  gcx_half_to_float(x[i]),
                                  gcx_half_to_float(y[i]))))
}
static void sum_bf16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_bf16(gcx_bf16_to_float(x[i]) +
                                                gcx_bf16_to_float(y[i])))
}
static void max_bf16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_bf16(fmaxf(
                                  gcx_bf16_to_float(x[i]),
                                  gcx_bf16_to_float(y[i]))))
}
static void min_bf16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_bf16(fminf(
                                  gcx_bf16_to_float(x[i]),
                                  gcx_bf16_to_float(y[i]))))
}

static void prod_f32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(float, x[i] * y[i])
}
static void prod_f64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(double, x[i] * y[i])
}
static void prod_i32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int32_t, (int32_t)((uint32_t)x[i] * (uint32_t)y[i]))
}
static void prod_i64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int64_t, (int64_t)((uint64_t)x[i] * (uint64_t)y[i]))
}
static void prod_f16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_half(gcx_half_to_float(x[i]) *
                                                gcx_half_to_float(y[i])))
}
static void prod_bf16(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(uint16_t, gcx_float_to_bf16(gcx_bf16_to_float(x[i]) *
                                                gcx_bf16_to_float(y[i])))
}
static void band_i32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int32_t, x[i] & y[i])
}
static void bor_i32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int32_t, x[i] | y[i])
}
static void bxor_i32(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int32_t, x[i] ^ y[i])
}
static void band_i64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int64_t, x[i] & y[i])
}
static void bor_i64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int64_t, x[i] | y[i])
}
static void bxor_i64(void *dst, const void *a, const void *b, size_t n)
{
    GCX_REDUCE_LOOP(int64_t, x[i] ^ y[i])
}

/* [dtype][op]; AVG reuses SUM; bitwise ops on integers only (NULL: not
 * defined, the collective's GCX_ERR_INVALID); U8 has no reductions */
#define GCX_REDUCE_FLOAT_ROW(_t)                                               \
    {                                                                          \
        [GCX_OP_SUM] = sum_##_t, [GCX_OP_MAX] = max_##_t,                      \
        [GCX_OP_MIN] = min_##_t, [GCX_OP_AVG] = sum_##_t,                      \
        [GCX_OP_PROD] = prod_##_t,                                             \
    }
#define GCX_REDUCE_INT_ROW(_t)                                                 \
    {                                                                          \
        [GCX_OP_SUM] = sum_##_t, [GCX_OP_MAX] = max_##_t,                      \
        [GCX_OP_MIN] = min_##_t, [GCX_OP_AVG] = sum_##_t,                      \
        [GCX_OP_PROD] = prod_##_t, [GCX_OP_BAND] = band_##_t,                  \
        [GCX_OP_BOR] = bor_##_t, [GCX_OP_BXOR] = bxor_##_t,                    \
    }
static const gcx_reduce_fn_t gcx_reduce_table[GCX_DT_LAST][GCX_OP_LAST] = {
    [GCX_DT_F32]  = GCX_REDUCE_FLOAT_ROW(f32),
    [GCX_DT_F64]  = GCX_REDUCE_FLOAT_ROW(f64),
    [GCX_DT_I32]  = GCX_REDUCE_INT_ROW(i32),
    [GCX_DT_I64]  = GCX_REDUCE_INT_ROW(i64),
    [GCX_DT_F16]  = GCX_REDUCE_FLOAT_ROW(f16),
    [GCX_DT_BF16] = GCX_REDUCE_FLOAT_ROW(bf16),
};

gcx_reduce_fn_t gcx_reduce_fn(gcx_dtype_t dtype, gcx_op_t op)
{
    if ((unsigned)dtype >= GCX_DT_LAST || (unsigned)op >= GCX_OP_LAST) {
        return NULL;
    }
    return gcx_reduce_table[dtype][op];
}

void gcx_reduce_divide(void *buf, size_t n, gcx_dtype_t dtype, int divisor)
{
    size_t i;

    switch (dtype) {
    case GCX_DT_F32: {
        float *p = buf, s = 1.0f / (float)divisor;
        /* multiply by the reciprocal only when it is exact */
        if ((divisor & (divisor - 1)) == 0) {
            for (i = 0; i < n; ++i) {
                p[i] *= s;
            }
        } else {
            for (i = 0; i < n; ++i) {
                p[i] /= (float)divisor;
            }
        }
        break;
    }
    case GCX_DT_F64: {
        double *p = buf;
        for (i = 0; i < n; ++i) {
            p[i] /= (double)divisor;
        }
        break;
    }
    case GCX_DT_I32: {
        int32_t *p = buf;
        for (i = 0; i < n; ++i) {
            p[i] /= divisor;
        }
        break;
    }
    case GCX_DT_I64: {
        int64_t *p = buf;
        for (i = 0; i < n; ++i) {
            p[i] /= divisor;
        }
        break;
    }
    case GCX_DT_F16: {
        uint16_t *p = buf;
        for (i = 0; i < n; ++i) {
            p[i] = gcx_float_to_half(gcx_half_to_float(p[i]) /
                                     (float)divisor);
        }
        break;
    }
    case GCX_DT_BF16: {
        uint16_t *p = buf;
        for (i = 0; i < n; ++i) {
            p[i] = gcx_float_to_bf16(gcx_bf16_to_float(p[i]) /
                                     (float)divisor);
        }
        break;
    }
    default:
        break;
    }
}

static inline uint32_t gcx_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float gcx_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

float gcx_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp  = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) { /* Inf / NaN */
        return gcx_bits_float(sign | 0x7f800000u | (mant << 13));
    }
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 */
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return gcx_bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t gcx_float_to_half(float f)
{
    uint32_t u    = gcx_float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t absu = u & 0x7fffffffu;

    if (absu >= 0x7f800000u) { /* Inf or NaN (keep NaN quiet) */
        return sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0);
    }
    if (absu >= 0x477ff000u) { /* rounds to >= 65520: overflow to Inf */
        return sign | 0x7c00u;
    }
    if (absu < 0x38800000u) { /* below the smallest normal half: subnormal */
        /* scale to units of 2^-24 and round to nearest even */
        float    v = gcx_bits_float(absu) * 16777216.0f;
        uint32_t m = (uint32_t)v;
        float    r = v - (float)m;
        if (r > 0.5f || (r == 0.5f && (m & 1u))) {
            ++m;
        }
        return sign | (uint16_t)m;
    }
    {
        /* normal: drop 13 mantissa bits with round to nearest even */
        uint32_t rounded = absu + 0xfffu + ((absu >> 13) & 1u);
        return sign | (uint16_t)((rounded - 0x38000000u) >> 13);
    }
}

float gcx_bf16_to_float(uint16_t h)
{
    return gcx_bits_float((uint32_t)h << 16);
}

uint16_t gcx_float_to_bf16(float f)
{
    uint32_t u = gcx_float_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
