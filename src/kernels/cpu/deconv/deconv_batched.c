/* deconv_batched_gemm: ConvTranspose over a batch of small inputs as one GEMM. deconv_gemm runs
 * a GEMM per image, col [M*K, P] = W^T X_n, whose P columns are few on a small map (a training
 * graph's backward-data of ResNet-18's 2x2 to 8x8 stages: the ConvTranspose of dY) and which
 * re-packs all of W for every image. Here X of every image is gathered side by side, [C, N*P],
 * the GEMM runs once, and each image's block of columns is scattered into its output
 * (deconv_col2im_add) after the bias fill. Group 1, two images or more, inputs under 64
 * positions, the batch's columns within 64 MiB; first in the family list, so it takes those. */
#include "deconv.h"

#include "kernels/cpu/gemm/gemm.h"

#include <stdlib.h>
#include <string.h>

#define BATCHED_BYTES ((size_t)64 << 20)

typedef struct dbatch {
    deconv_geom g;
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads;
    size_t gemm_ws, x_bytes, col_bytes;
    gemm_packed pa; /* W^T packed once when W is a constant */
    const deconv_rows *rk;
} dbatch;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* bf16: the GEMM on a bf16 tile (deconv_batched_bf16), W and X rounded to bf16 as they are
 * packed, the columns summed in fp32. */
static bool plan_of(const kern_node *kn, bool bf16, dbatch *p) {
    memset(p, 0, sizeof *p);
    if (!deconv_geom_of(kn, &p->g)) return false;
    const deconv_geom *g = &p->g;
    const int64_t cols = g->n * g->in_size, rows = g->m * g->k_size;
    if (g->group != 1 || g->n < 2 || g->in_size >= 64 || cols <= 0) return false;
    p->x_bytes = align64((size_t)g->c * (size_t)cols * sizeof(float));
    p->col_bytes = align64((size_t)rows * (size_t)cols * sizeof(float));
    if (p->col_bytes + p->x_bytes > BATCHED_BYTES) return false;
    const core_hw *hw = core_hw_get();
    p->k = bf16 ? gemm_kernel_default_bf16(rows, cols, g->c, hw)
                : gemm_kernel_default(rows, cols, g->c, hw);
    if (!p->k) return false;
    p->blk = gemm_blocking_for(kn, p->k, rows, cols, g->c, hw, 0, 0, 0);
    p->threads = kn->threads > 0 ? kn->threads : 1;
    p->gemm_ws = (size_t)p->threads * align64(gemm_thread_workspace(p->k, &p->blk));
    p->rk = deconv_rows_for(hw);
    return true;
}

static bool db_supports_as(const kern_node *kn, bool bf16) {
    dbatch p;
    return plan_of(kn, bf16, &p);
}

static size_t db_ws_as(const kern_node *kn, bool bf16) {
    dbatch p;
    return plan_of(kn, bf16, &p) ? p.gemm_ws + p.x_bytes + p.col_bytes : 0;
}

static bool db_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return db_supports_as(kn, false);
}

static size_t db_ws(const kern_node *kn) {
    return db_ws_as(kn, false);
}

static bool db_supports_bf16(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return db_supports_as(kn, true);
}

static size_t db_ws_bf16(const kern_node *kn) {
    return db_ws_as(kn, true);
}

static void db_release(void *state) {
    dbatch *p = state;
    if (!p) return;
    gemm_packed_free(&p->pa);
    free(p);
}

/* A[(m*K + t), c] = W[c, m, t]: W^T read with row stride 1 and column stride M*K */
static anvil_status db_prepare_as(const kern_node *kn, bool bf16, void **state) {
    dbatch *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan_of(kn, bf16, p)) {
        free(p);
        return core_err(ANVIL_ERR_INTERNAL, "%s: %s prepared for a node it does not take",
                        ir_node_label(kn->node),
                        bf16 ? "deconv_batched_bf16" : "deconv_batched_gemm");
    }
    const float *w = kn->in[1].value;
    if (w) {
        const int64_t rows = p->g.m * p->g.k_size;
        anvil_status st = gemm_pack_a(p->k, rows, p->g.c, w, 1, rows, &p->pa);
        if (st != ANVIL_OK) {
            free(p);
            return st;
        }
        kern_node_mark_copied(kn, 1);
    }
    *state = p;
    return ANVIL_OK;
}

static anvil_status db_prepare(const kern_node *kn, void **state) {
    return db_prepare_as(kn, false, state);
}

static anvil_status db_prepare_bf16(const kern_node *kn, void **state) {
    return db_prepare_as(kn, true, state);
}

typedef struct db_job {
    const dbatch *p;
    const float *x, *bias;
    float *xs, *col, *y;
} db_job;

/* channels [begin, end) of every image side by side: xs[c, n*P + i] = X[n, c, i] */
static void gather_range(void *arg, size_t begin, size_t end) {
    const db_job *j = arg;
    const deconv_geom *g = &j->p->g;
    const int64_t cols = g->n * g->in_size;
    for (size_t c = begin; c < end; c++)
        for (int64_t n = 0; n < g->n; n++)
            memcpy(j->xs + (int64_t)c * cols + n * g->in_size,
                   j->x + (n * g->c + (int64_t)c) * g->in_size, sizeof(float) * (size_t)g->in_size);
}

/* output channels [begin, end) of every image: bias, then the scatter of its columns */
static void scatter_range(void *arg, size_t begin, size_t end) {
    const db_job *j = arg;
    const deconv_geom *g = &j->p->g;
    const int64_t cols = g->n * g->in_size;
    for (size_t m = begin; m < end; m++)
        for (int64_t n = 0; n < g->n; n++) {
            float *plane = j->y + (n * g->m + (int64_t)m) * g->out_size;
            deconv_fill_rows(g, 0, g->out[0], j->bias ? j->bias[m] : 0.0f, plane);
            deconv_col2im_add(g, j->p->rk, j->col + (int64_t)m * g->k_size * cols + n * g->in_size,
                              cols, 0, g->in[0], 0, g->out[0], plane);
        }
}

static anvil_status db_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const dbatch *p = state;
    const deconv_geom *g = &p->g;
    char *base = ws;
    db_job j = {p,
                in[0]->data,
                g->has_bias && n_in > 2 && in[2] ? in[2]->data : NULL,
                (float *)(base + p->gemm_ws),
                (float *)(base + p->gemm_ws + p->x_bytes),
                out[0]->data};
    op_parallel_for(ctx, (size_t)g->c, gather_range, &j);
    const int64_t cols = g->n * g->in_size, rows = g->m * g->k_size;
    gemm_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.m = rows;
    pr.n = cols;
    pr.k = g->c;
    if (p->pa.data) {
        pr.pa = &p->pa;
    } else {
        pr.a = in[1]->data;
        pr.rs_a = 1;
        pr.cs_a = rows;
    }
    pr.b = j.xs;
    pr.rs_b = cols;
    pr.cs_b = 1;
    pr.c = j.col;
    pr.ldc = cols;
    pr.ep = gemm_epilogue_none();
    gemm_run(p->k, &p->blk, &pr, base, ctx);
    op_parallel_for(ctx, (size_t)g->m, scatter_range, &j);
    return ANVIL_OK;
}

const kern_variant deconv_v_batched = {.name = "deconv_batched_gemm",
                                       .op = IR_OP_CONVTRANSPOSE,
                                       .supports = db_supports,
                                       .workspace_size = db_ws,
                                       .prepare = db_prepare,
                                       .release = db_release,
                                       .run = db_run};

/* The same on bf16 tiles, for sessions that accept bf16 (the backward-data of mixed-precision
 * training); before deconv_batched_gemm in the family. */
const kern_variant deconv_v_batched_bf16 = {.name = "deconv_batched_bf16",
                                            .op = IR_OP_CONVTRANSPOSE,
                                            .needs = KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 |
                                                     KERN_ROUNDS_BF16,
                                            .supports = db_supports_bf16,
                                            .workspace_size = db_ws_bf16,
                                            .prepare = db_prepare_bf16,
                                            .release = db_release,
                                            .run = db_run};
