/* Private to src/kernels/cpu/reduce: the per-ISA kernel table the reduce family calls into, and
 * the variant lists of its files.
 *
 * The baseline files (reduce_variants.c: Reduce*, ArgMax/ArgMin, GlobalMaxPool; norm_variants.c:
 * Instance/Group/RMS/LpNormalization; topk.c: TopK) decide what a node means and split the work
 * across threads; the arithmetic lives in these tables, each compiled in its own ISA file
 * (reduce_avx512.c, reduce_avx2.c, both instantiating reduce_simd.h). Nothing in a table may be
 * called unless the CPU has that ISA (the variant's `needs` matched).
 *
 * Every pointer is borrowed for the call. Float semantics follow the reference kernels
 * (src/ops/math/reduce.c): ReduceMax/Min propagate NaN, the empty set gives the identity, and the
 * sums accumulate in fp32 with several vector accumulators (the reference uses double; results
 * agree within float tolerance, not bit for bit). */
#ifndef ANVIL_KERNELS_REDUCE_H
#define ANVIL_KERNELS_REDUCE_H

#include "kernels/kernels.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What one reduction pass computes per output element over its `len` inputs. */
typedef enum red_op {
    RED_OP_SUM,   /* sum x */
    RED_OP_ASUM,  /* sum |x| */
    RED_OP_SQSUM, /* sum x*x */
    RED_OP_MAX,   /* max, NaN if any input is NaN; -inf for none */
    RED_OP_MIN,   /* min, NaN if any input is NaN; +inf for none */
    RED_OP_PROD,  /* product; 1 for none */
    RED_OP_LSE,   /* log(sum(exp(x))), -inf for none; only with ANVIL_HAVE_SLEEF */
} red_op;

typedef struct red_isa {
    /* y[r] = op over the contiguous row x[r * len, r * len + len), r < rows. */
    void (*rows)(red_op op, const float *x, size_t len, size_t rows, float *y);
    /* y[c] = op over x[l * inner + c] for l < len, c < ncols (a block of columns of one
     * [len, inner] slice; ncols <= inner). */
    void (*cols)(red_op op, const float *x, size_t len, size_t inner, size_t ncols, float *y);
    /* ArgMax (is_max) / ArgMin of each row (as cols: of each column) with the reference's
     * ordering: NaN ranks above every number, ties go to the first index, or to the last with
     * last. len >= 1; cols needs len <= 2^24 (indices travel in float lanes). */
    void (*arg_rows)(bool is_max, bool last, const float *x, size_t len, size_t rows, int64_t *y);
    void (*arg_cols)(bool is_max, bool last, const float *x, size_t len, size_t inner, size_t ncols,
                     int64_t *y);
    /* sum (x[i] - mean)^2, i < n. */
    float (*sqdev)(const float *x, size_t n, float mean);
    /* y[i] = (x[i] - mean) * a + b, i < n (y may be x). */
    void (*norm_apply)(float *y, const float *x, size_t n, float mean, float a, float b);
    /* y[i] = x[i] * a * s[i] (s NULL: x[i] * a), i < n (y may be x). */
    void (*scale)(float *y, const float *x, size_t n, float a, const float *s);
} red_isa;

extern const red_isa red_isa_avx512;
extern const red_isa red_isa_avx2;

/* The variants of norm_variants.c and topk.c; reduce_variants.c lists them in
 * kern_family_reduce. */
#define RED_NORM_VARIANTS(X)                                                                       \
    X(instancenorm)                                                                                \
    X(groupnorm)                                                                                   \
    X(rmsnorm)                                                                                     \
    X(lpnorm)
#define RED_DECLARE(ID)                                                                            \
    extern const kern_variant red_v_##ID##_avx512;                                                 \
    extern const kern_variant red_v_##ID##_avx2;
RED_NORM_VARIANTS(RED_DECLARE)
extern const kern_variant red_v_topk;

#endif
