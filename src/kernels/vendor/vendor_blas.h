/* MatMul and Gemm on a BLAS-style sgemm (OpenBLAS, BLIS): the part that is the same for every
 * such library. A library supplies one function that computes
 *     C = alpha * op(A) op(B) + beta * C      (row-major, op = transpose or not)
 * on a given number of threads; this layer maps the node onto calls of it (MatMul batches as a
 * loop, or folded into one call when B is one matrix; Gemm's C broadcast into Y first, then
 * beta; K = 0 and empty outputs without a call).
 *
 * Compiled only when at least one such library is (see cmake/vendor.cmake). */
#ifndef ANVIL_KERNELS_VENDOR_BLAS_H
#define ANVIL_KERNELS_VENDOR_BLAS_H

#include "kernels/kernels.h"

/* One sgemm call. Pointers are borrowed for the call; m, n, k >= 1. */
typedef struct vblas_call {
    bool trans_a, trans_b;
    int64_t m, n, k;
    float alpha;
    const float *a; /* m x k, or k x m when trans_a; rows lda apart */
    int64_t lda;
    const float *b; /* k x n, or n x k when trans_b; rows ldb apart */
    int64_t ldb;
    float beta;
    float *c; /* m x n, rows ldc apart; not read when beta == 0 */
    int64_t ldc;
    int threads; /* the session's thread count: the library must use exactly this many */
} vblas_call;

typedef void (*vblas_sgemm_fn)(const vblas_call *call);

/* Whether the layer can run kn (MatMul or Gemm, float32, static shapes) with every dimension
 * and leading dimension at most max_dim (the library's integer range). */
bool vendor_blas_supports(const kern_node *kn, int64_t max_dim);
/* The plan-time geometry; *state is released with vendor_blas_release. */
anvil_status vendor_blas_prepare(const kern_node *kn, void **state);
void vendor_blas_release(void *state);
/* Computes the node with `sgemm`, on op_ctx_threads(ctx) threads. */
anvil_status vendor_blas_run(vblas_sgemm_fn sgemm, void *state, const op_tensor *const *in,
                             int n_in, op_tensor *const *out, op_ctx *ctx);

#endif
