/* OpenBLAS as variants of MatMul and Gemm ("openblas_sgemm"), through cblas_sgemm.
 *
 * The library is loaded with dlopen when the first openblas_sgemm node is prepared, not linked:
 * the pthread OpenBLAS starts its worker threads as soon as it is loaded and they spin for about
 * 100 ms, which on a 2-core machine took the second core from anvil's own threads in every
 * process, used or not (cmake/vendor.cmake). dlsym on the handle also pins cblas_sgemm to
 * OpenBLAS's, whatever other BLAS is loaded.
 *
 * Threads: the pthread flavour of OpenBLAS keeps one global thread count. Each call sets it to
 * the session's count first (only when it differs, the call takes a lock), so OpenBLAS never
 * runs more threads than the session was given. Two sessions with different counts running
 * OpenBLAS nodes at the same moment would race on that global; the last setter wins for both
 * (results stay correct, only the thread count differs). */
#ifdef ANVIL_HAVE_OPENBLAS

#include "vendor_blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                         const enum CBLAS_TRANSPOSE, const blasint, const blasint, const blasint,
                         const float, const float *, const blasint, const float *, const blasint,
                         const float, float *, const blasint);
static struct {
    sgemm_fn sgemm;
    void (*set_threads)(int);
    int (*get_threads)(void);
    char error[256];
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_load(void) {
    void *h = dlopen(ANVIL_OPENBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lib.error, sizeof lib.error, "%s", dlerror());
        return;
    }
    *(void **)&lib.sgemm = dlsym(h, "cblas_sgemm");
    *(void **)&lib.set_threads = dlsym(h, "openblas_set_num_threads");
    *(void **)&lib.get_threads = dlsym(h, "openblas_get_num_threads");
    if (!lib.sgemm || !lib.set_threads || !lib.get_threads) {
        snprintf(lib.error, sizeof lib.error, "%s lacks cblas_sgemm or its thread controls",
                 ANVIL_OPENBLAS_PATH);
        lib.sgemm = NULL;
    }
}

static void openblas_sgemm(const vblas_call *c) {
    if (lib.get_threads() != c->threads) lib.set_threads(c->threads);
    lib.sgemm(CblasRowMajor, c->trans_a ? CblasTrans : CblasNoTrans,
              c->trans_b ? CblasTrans : CblasNoTrans, (blasint)c->m, (blasint)c->n, (blasint)c->k,
              c->alpha, c->a, (blasint)c->lda, c->b, (blasint)c->ldb, c->beta, c->c,
              (blasint)c->ldc);
}

static bool supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return vendor_blas_supports(kn, sizeof(blasint) >= 8 ? INT64_MAX : INT_MAX);
}

static anvil_status prepare(const kern_node *kn, void **state) {
    pthread_once(&lib_once, lib_load);
    if (!lib.sgemm)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: variant openblas_sgemm cannot load OpenBLAS (%s); install "
                        "libopenblas0-pthread or force another variant",
                        ir_node_label(kn->node), lib.error);
    return vendor_blas_prepare(kn, state);
}

static anvil_status run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)workspace;
    return vendor_blas_run(openblas_sgemm, state, in, n_in, out, ctx);
}

const kern_variant vendor_openblas_matmul = {"openblas_sgemm",
                                             IR_OP_MATMUL,
                                             KERN_OWN_THREADS,
                                             supports,
                                             NULL,
                                             prepare,
                                             vendor_blas_release,
                                             run,
                                             NULL,
                                             NULL,
                                             NULL,
                                             NULL};
const kern_variant vendor_openblas_gemm = {"openblas_sgemm",
                                           IR_OP_GEMM,
                                           KERN_OWN_THREADS,
                                           supports,
                                           NULL,
                                           prepare,
                                           vendor_blas_release,
                                           run,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL};

#endif
