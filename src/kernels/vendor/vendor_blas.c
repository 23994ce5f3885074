/* The shared MatMul/Gemm driver of the BLAS-style vendor variants (vendor_blas.h). */
#if defined(ANVIL_HAVE_OPENBLAS) || defined(ANVIL_HAVE_BLIS)

#include "vendor_blas.h"

#include "vendor_common.h"

#include <stdlib.h>

typedef struct vblas_state {
    vk_mm g;
    bool is_gemm;
} vblas_state;

bool vendor_blas_supports(const kern_node *kn, int64_t max_dim) {
    ir_op op = kn->node->op;
    if ((op != IR_OP_MATMUL && op != IR_OP_GEMM) || kn->n_in < 2 || kn->n_out < 1) return false;
    if (!vk_all_static_f32(kn, 2)) return false;
    vk_mm g;
    if (op == IR_OP_GEMM) {
        if (kn->in[0].shape.rank != 2 || kn->in[1].shape.rank != 2) return false;
        if (vk_gemm_geometry(kn, &g) != ANVIL_OK) return false;
        if (g.has_c && kn->in[2].shape.rank > 2) return false;
    } else {
        if (kn->in[0].shape.rank < 1 || kn->in[1].shape.rank < 1) return false;
        vk_matmul_geometry(kn, &g);
    }
    /* m, n and k are also the leading dimensions (row-major, dense). */
    return g.m <= max_dim && g.n <= max_dim && g.k <= max_dim;
}

anvil_status vendor_blas_prepare(const kern_node *kn, void **state) {
    vblas_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    s->is_gemm = kn->node->op == IR_OP_GEMM;
    anvil_status st = ANVIL_OK;
    if (s->is_gemm)
        st = vk_gemm_geometry(kn, &s->g);
    else
        vk_matmul_geometry(kn, &s->g);
    if (st != ANVIL_OK) {
        free(s);
        return st;
    }
    *state = s;
    return ANVIL_OK;
}

void vendor_blas_release(void *state) {
    free(state);
}

static anvil_status matmul_run(vblas_sgemm_fn sgemm, const vk_mm *g, const op_tensor *a,
                               const op_tensor *b, op_tensor *y, int threads) {
    if (g->m == 0 || g->n == 0) return ANVIL_OK;
    int64_t items = g->fold ? 1 : g->batch;
    if (g->k == 0) {
        memset(y->data, 0, (size_t)(items * g->m * g->n) * sizeof(float));
        return ANVIL_OK;
    }
    vblas_call c = {.m = g->m,
                    .n = g->n,
                    .k = g->k,
                    .alpha = 1.0f,
                    .lda = g->k,
                    .ldb = g->n,
                    .beta = 0.0f,
                    .ldc = g->n,
                    .threads = threads};
    /* The loop is serial with the library's threads inside each product: its pool is the only
     * one busy, so there is no oversubscription. */
    for (int64_t i = 0; i < items; i++) {
        int64_t oa = 0, ob = 0;
        if (!g->fold) vk_batch_offsets(a, b, y, i, &oa, &ob);
        c.a = (const float *)a->data + oa;
        c.b = (const float *)b->data + ob;
        c.c = (float *)y->data + i * g->m * g->n;
        sgemm(&c);
    }
    return ANVIL_OK;
}

static anvil_status gemm_run(vblas_sgemm_fn sgemm, const vk_mm *g, const op_tensor *const *in,
                             int n_in, op_tensor *y, int threads) {
    const op_tensor *c = g->has_c && n_in > 2 ? in[2] : NULL;
    if (g->m == 0 || g->n == 0) return ANVIL_OK;
    if (g->k == 0) {
        vk_gemm_k0(g, c, y);
        return ANVIL_OK;
    }
    bool use_c = c && c->data && g->beta != 0.0f;
    /* Y starts as C broadcast to [M, N]; the library then scales it by beta and adds. */
    if (use_c) vk_broadcast_c(y->data, g->m, g->n, c->data, g->c_rows, g->c_cols, 1.0f);
    vblas_call call = {.trans_a = g->trans_a,
                       .trans_b = g->trans_b,
                       .m = g->m,
                       .n = g->n,
                       .k = g->k,
                       .alpha = g->alpha,
                       .a = in[0]->data,
                       .lda = g->trans_a ? g->m : g->k,
                       .b = in[1]->data,
                       .ldb = g->trans_b ? g->k : g->n,
                       .beta = use_c ? g->beta : 0.0f,
                       .c = y->data,
                       .ldc = g->n,
                       .threads = threads};
    sgemm(&call);
    return ANVIL_OK;
}

anvil_status vendor_blas_run(vblas_sgemm_fn sgemm, void *state, const op_tensor *const *in,
                             int n_in, op_tensor *const *out, op_ctx *ctx) {
    const vblas_state *s = state;
    int threads = op_ctx_threads(ctx);
    if (threads < 1) threads = 1;
    if (s->is_gemm) return gemm_run(sgemm, &s->g, in, n_in, out[0], threads);
    return matmul_run(sgemm, &s->g, in[0], in[1], out[0], threads);
}

#endif
