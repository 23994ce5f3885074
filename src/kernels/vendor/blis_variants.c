/* BLIS as variants of MatMul and Gemm ("blis_sgemm"), through the typed expert API
 * bli_sgemm_ex. Only bli_-prefixed symbols are used: libblis also exports cblas_sgemm and
 * sgemm_, which clash with OpenBLAS's when both are linked (cmake/vendor.cmake links OpenBLAS
 * first, so those names bind to OpenBLAS and BLIS is reached only through bli_*).
 *
 * Threads: a runtime object (rntm_t) per call carries the session's thread count, so BLIS's
 * global setting is never touched and sessions with different counts do not interfere.
 *
 * Sub-configuration: BLIS picks its kernels by CPUID at init. On AMD Zen 4 the Debian build
 * (0.9.0, configuration family x86_64) picks "zen3" (AVX2 6x16 kernels), which runs at about
 * the FMA peak of the machine; the build offers no way to force another one, because
 * BLIS_ARCH_TYPE is broken in 0.9.0: any value aborts the process inside bli_init. The variant
 * therefore declines (supports() false) when that variable is set with BLIS 0.9.x, instead of
 * letting the first call abort the process. */
#ifdef ANVIL_HAVE_BLIS

#include "vendor_blas.h"

#include <blis.h>
#include <stdlib.h>
#include <string.h>

static void blis_sgemm(const vblas_call *c) {
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(c->threads, &rntm);
    float alpha = c->alpha, beta = c->beta;
    /* A transpose is only a swap of row and column strides for BLIS. */
    inc_t rs_a = c->trans_a ? 1 : c->lda, cs_a = c->trans_a ? c->lda : 1;
    inc_t rs_b = c->trans_b ? 1 : c->ldb, cs_b = c->trans_b ? c->ldb : 1;
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, c->m, c->n, c->k, &alpha, (float *)c->a,
                 rs_a, cs_a, (float *)c->b, rs_b, cs_b, &beta, c->c, c->ldc, 1, NULL, &rntm);
}

/* False when BLIS would abort at init (see the top of the file). BLIS_ARCH_TYPE is BLIS's own
 * variable, read here because BLIS reads it; anvil's are read by src/api/env.c only. */
static bool blis_usable(void) {
    const char *forced = getenv("BLIS_ARCH_TYPE");
    return !(forced && *forced && !strncmp(bli_info_get_version_str(), "0.9.", 4));
}

static bool supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return blis_usable() && vendor_blas_supports(kn, INT64_MAX);
}

static anvil_status run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)workspace;
    return vendor_blas_run(blis_sgemm, state, in, n_in, out, ctx);
}

const kern_variant vendor_blis_matmul = {"blis_sgemm",
                                         IR_OP_MATMUL,
                                         KERN_OWN_THREADS,
                                         supports,
                                         NULL,
                                         vendor_blas_prepare,
                                         vendor_blas_release,
                                         run,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL};
const kern_variant vendor_blis_gemm = {"blis_sgemm",
                                       IR_OP_GEMM,
                                       KERN_OWN_THREADS,
                                       supports,
                                       NULL,
                                       vendor_blas_prepare,
                                       vendor_blas_release,
                                       run,
                                       NULL,
                                       NULL,
                                       NULL,
                                       NULL};

#endif
