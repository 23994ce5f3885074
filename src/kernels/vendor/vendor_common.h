/* Helpers shared by the vendor variants (oneDNN, OpenBLAS, BLIS): the MatMul / Gemm geometry of
 * a node and the parts of Gemm's semantics the libraries do not cover (C broadcast, K = 0).
 * Private to src/kernels/vendor; everything is static inline so each file takes what it uses.
 * Pointers passed in are borrowed for the call. */
#ifndef ANVIL_KERNELS_VENDOR_COMMON_H
#define ANVIL_KERNELS_VENDOR_COMMON_H

#include "kernels/kernels.h"

#include <string.h>

/* A float32 tensor whose shape is fully known at plan time. */
static inline bool vk_static_f32(const op_tinfo *t) {
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape);
}

/* True when every input and output of kn is float32 with a static shape (omitted optional
 * inputs have an unknown shape and dtype 0: they are skipped when `optional_from` <= i). */
static inline bool vk_all_static_f32(const kern_node *kn, int optional_from) {
    for (int i = 0; i < kn->n_in; i++) {
        bool omitted =
            i >= optional_from && (i >= kn->node->n_inputs || kn->node->inputs[i] == IR_NONE);
        if (!omitted && !vk_static_f32(&kn->in[i])) return false;
    }
    for (int i = 0; i < kn->n_out; i++)
        if (!vk_static_f32(&kn->out[i])) return false;
    return true;
}

/* The shape of one MatMul or Gemm: Y[batch][m][n] = A[m][k] B[k][n] per batch item. */
typedef struct vk_mm {
    int64_t m, n, k;
    int64_t batch; /* output batch items; 1 when folded or for Gemm */
    bool fold;     /* MatMul whose B is one matrix: A's batch dims fold into m */
    /* Gemm only */
    bool trans_a, trans_b;
    float alpha, beta;
    bool has_c;
    int64_t c_rows, c_cols; /* C's extent as broadcast to [m, n]: 1 or m, 1 or n */
} vk_mm;

/* MatMul geometry with numpy's 1-D promotion (a 1-D A is one row, a 1-D B one column). When B
 * holds a single matrix the batch of A folds into m: A's rows are contiguous, so it is one GEMM. */
static inline void vk_matmul_geometry(const kern_node *kn, vk_mm *g) {
    const ir_shape *a = &kn->in[0].shape, *b = &kn->in[1].shape, *y = &kn->out[0].shape;
    memset(g, 0, sizeof *g);
    g->k = a->d[a->rank - 1];
    g->m = a->rank >= 2 ? a->d[a->rank - 2] : 1;
    g->n = b->rank >= 2 ? b->d[b->rank - 1] : 1;
    g->alpha = 1.0f;
    int batch_rank = y->rank - (a->rank >= 2) - (b->rank >= 2);
    int64_t ybatch = 1, bbatch = 1;
    for (int i = 0; i < batch_rank; i++) ybatch *= y->d[i];
    for (int i = 0; i < b->rank - 2; i++) bbatch *= b->d[i];
    g->fold = bbatch == 1;
    g->batch = g->fold ? 1 : ybatch;
    if (g->fold) g->m *= ybatch;
}

/* Gemm geometry and attributes; C's broadcast extent when C is given. */
static inline anvil_status vk_gemm_geometry(const kern_node *kn, vk_mm *g) {
    memset(g, 0, sizeof *g);
    const ir_node *n = kn->node;
    CORE_TRY(ir_attr_flag(n, "transA", false, &g->trans_a));
    CORE_TRY(ir_attr_flag(n, "transB", false, &g->trans_b));
    CORE_TRY(ir_attr_float(n, "alpha", 1.0f, &g->alpha));
    CORE_TRY(ir_attr_float(n, "beta", 1.0f, &g->beta));
    const ir_shape *a = &kn->in[0].shape, *y = &kn->out[0].shape;
    g->m = y->d[0];
    g->n = y->d[1];
    g->k = g->trans_a ? a->d[0] : a->d[1];
    g->batch = 1;
    g->fold = true;
    g->has_c = kn->n_in > 2 && n->n_inputs > 2 && n->inputs[2] != IR_NONE;
    if (g->has_c) {
        const ir_shape *c = &kn->in[2].shape;
        g->c_rows = c->rank == 2 ? c->d[0] : 1;
        g->c_cols = c->rank >= 1 ? c->d[c->rank - 1] : 1;
    }
    return ANVIL_OK;
}

/* Element offsets of batch item idx (row-major over Y's batch dims) in A and B, with numpy
 * broadcasting: a batch dim of size 1 (or a missing one) does not advance. */
static inline void vk_batch_offsets(const op_tensor *a, const op_tensor *b, const op_tensor *y,
                                    int64_t idx, int64_t *oa, int64_t *ob) {
    int batch_rank = y->rank - (a->rank >= 2) - (b->rank >= 2);
    int a_batch = a->rank - 2, b_batch = b->rank - 2; /* may be negative: none */
    int64_t step_a = a->dims[a->rank - 1] * (a->rank >= 2 ? a->dims[a->rank - 2] : 1);
    int64_t step_b = b->rank >= 2 ? b->dims[b->rank - 2] * b->dims[b->rank - 1] : b->dims[0];
    *oa = *ob = 0;
    for (int i = batch_rank - 1; i >= 0; i--) {
        int64_t pos = idx % y->dims[i];
        idx /= y->dims[i];
        int ia = i - (batch_rank - a_batch), ib = i - (batch_rank - b_batch);
        if (ia >= 0) {
            if (a->dims[ia] != 1) *oa += pos * step_a;
            step_a *= a->dims[ia];
        }
        if (ib >= 0) {
            if (b->dims[ib] != 1) *ob += pos * step_b;
            step_b *= b->dims[ib];
        }
    }
}

/* y[m][n] = scale * c broadcast (c is c_rows x c_cols, each 1 or the full extent). */
static inline void vk_broadcast_c(float *y, int64_t m, int64_t n, const float *c, int64_t c_rows,
                                  int64_t c_cols, float scale) {
    for (int64_t i = 0; i < m; i++) {
        const float *cr = c + (c_rows == 1 ? 0 : i * c_cols);
        float *yr = y + i * n;
        if (c_cols == 1)
            for (int64_t j = 0; j < n; j++) yr[j] = scale * cr[0];
        else
            for (int64_t j = 0; j < n; j++) yr[j] = scale * cr[j];
    }
}

/* The result of a Gemm with K = 0 (no products): beta * C, or zeros. Libraries differ on K = 0,
 * so no library is called for it. */
static inline void vk_gemm_k0(const vk_mm *g, const op_tensor *c, op_tensor *y) {
    if (g->has_c && c && c->data && g->beta != 0.0f)
        vk_broadcast_c(y->data, g->m, g->n, c->data, g->c_rows, g->c_cols, g->beta);
    else
        memset(y->data, 0, (size_t)(g->m * g->n) * sizeof(float));
}

#endif
