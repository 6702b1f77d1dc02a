/*
 * reduce.h - element-wise reduction kernels for every type and operation.
 */
#ifndef GCX_COLL_REDUCE_H
#define GCX_COLL_REDUCE_H

#include <gcx/gcx.h>
#include <stddef.h>
#include <stdint.h>

/** dst[i] = a[i] op b[i]; dst may be a or b. */
typedef void (*gcx_reduce_fn_t)(void *dst, const void *a, const void *b,
                                size_t n);

/** Kernel for (dtype, op); AVG uses SUM. NULL if not a reduction type. */
gcx_reduce_fn_t gcx_reduce_fn(gcx_dtype_t dtype, gcx_op_t op);

/** Divide @p n elements by @p divisor (the AVG epilogue). */
void gcx_reduce_divide(void *buf, size_t n, gcx_dtype_t dtype, int divisor);

/** IEEE half <-> float, round to nearest even. */
float    gcx_half_to_float(uint16_t h);
uint16_t gcx_float_to_half(float f);
/** bfloat16 <-> float, round to nearest even (NaN kept quiet). */
float    gcx_bf16_to_float(uint16_t h);
uint16_t gcx_float_to_bf16(float f);

#endif
