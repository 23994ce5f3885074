/* Private to src/kernels/cpu/reduce: the per-ISA kernel table the reduce family calls into, and
 * the variant lists of its files.
 *
 * The baseline files (reduce_variants.c: Reduce*, ArgMax/ArgMin, GlobalMaxPool; norm_variants.c:
 * Instance/Group/RMS/LpNormalization; topk.c: TopK) decide what a node means and split the work
 * across threads; the arithmetic lives in these tables, each compiled in its own ISA file
 * (reduce_avx512.c, reduce_avx2.c, both instantiating reduce_simd.h), declared in reduce_run.h.
 * Nothing in a table may be called unless the CPU has that ISA (the variant's `needs` matched).
 *
 * Every pointer is borrowed for the call. Float semantics follow the reference kernels
 * (src/ops/math/reduce.c): ReduceMax/Min propagate NaN, the empty set gives the identity, and the
 * sums accumulate in fp32 with several vector accumulators (the reference uses double; results
 * agree within float tolerance, not bit for bit). */
#ifndef ANVIL_KERNELS_REDUCE_H
#define ANVIL_KERNELS_REDUCE_H

#include "kernels/kernels.h"
#include "reduce_run.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The variants of norm_variants.c and topk.c; reduce_variants.c lists them in
 * kern_family_reduce. */
#define RED_NORM_VARIANTS(X)                                                                       \
    X(instancenorm)                                                                                \
    X(groupnorm)                                                                                   \
    X(rmsnorm)                                                                                     \
    X(lpnorm)
#define RED_DECLARE(ID)                                                                            \
    extern const kern_variant reduce_v_##ID##_avx512;                                              \
    extern const kern_variant reduce_v_##ID##_avx2;
RED_NORM_VARIANTS(RED_DECLARE)
extern const kern_variant reduce_v_topk;

#endif
