/* OpenBLAS as variants of MatMul and Gemm ("openblas_sgemm"), through cblas_sgemm.
 *
 * Threads: the pthread flavour of OpenBLAS keeps one global thread count. Each call sets it to
 * the session's count first (only when it differs, the call takes a lock), so OpenBLAS never
 * runs more threads than the session was given. Two sessions with different counts running
 * OpenBLAS nodes at the same moment would race on that global; the last setter wins for both
 * (results stay correct, only the thread count differs). */
#ifdef ANVIL_HAVE_OPENBLAS

#include "vendor_blas.h"

#include <cblas.h>
#include <limits.h>

static void openblas_sgemm(const vblas_call *c) {
    if (openblas_get_num_threads() != c->threads) openblas_set_num_threads(c->threads);
    cblas_sgemm(CblasRowMajor, c->trans_a ? CblasTrans : CblasNoTrans,
                c->trans_b ? CblasTrans : CblasNoTrans, (blasint)c->m, (blasint)c->n, (blasint)c->k,
                c->alpha, c->a, (blasint)c->lda, c->b, (blasint)c->ldb, c->beta, c->c,
                (blasint)c->ldc);
}

static bool supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return vblas_supports(kn, sizeof(blasint) >= 8 ? INT64_MAX : INT_MAX);
}

static anvil_status run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)workspace;
    return vblas_run(openblas_sgemm, state, in, n_in, out, ctx);
}

const kern_variant kern_openblas_matmul = {
    "openblas_sgemm", IR_OP_MATMUL, 0, supports, NULL, vblas_prepare, vblas_release, run, NULL,
};
const kern_variant kern_openblas_gemm = {
    "openblas_sgemm", IR_OP_GEMM, 0, supports, NULL, vblas_prepare, vblas_release, run, NULL,
};

#endif
