/* Backward kernels (ops/train/grad.c defines the ops and their reference kernels).
 *
 *   conv_grad_w_gemm  anvil.ConvGradW as one GEMM per group: dW_g [M_g, C_g*k] = dY_g [M_g, N*P]
 *                     x colT_g [N*P, C_g*k], where P is the output pixels. dY is NCHW, so a row of
 *                     dY_g is N runs of P floats: an indirect A (gemm_problem.a_ind, segments of
 *                     P), read in place; on maps under 256 pixels, whose segments would cut the
 *                     GEMM's depth into blocks of P (4 on a 2x2 map), dY_g is copied into a plain
 *                     [M_g, N*P] matrix first. colT holds each output pixel's input patch as a row
 * (an im2col transposed), built for a chunk of images at a time (at most 32 MiB); chunks after the
 * first add into dW.
 *   conv_grad_w_bf16  the same GEMM on bf16 tiles, for bf16 sessions (mixed-precision training);
 *                     the patches as the forward conv's im2col (conv_im2col, a patch element's
 *                     pixels in a row), which is colT by columns: the bf16 packer reads a B
 *                     stored by columns 16 pixels at a time with register transposes, where colT
 *                     was gathered one element at a time (13% of ResNet-18's bf16 step).
 *   act_grad_f32      anvil.ActGrad split across threads, one loop per activation (Relu's a select
 *                     the compiler vectorizes; the others the reference's formulas).
 *   batchnorm_train_*, batchnorm_grad_*, max_pool_grad_*  defined in bn_pool_grad.c, listed here.
 *   layernorm_grad_*  defined in ln_grad.c, listed here.
 *
 * Every pointer argument is borrowed for the call. */
#include "grad.h"

#include "kernels/cpu/conv/conv_layout.h"
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/family.h"
#include "ops/nn_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* ---- conv_grad_w_gemm ----------------------------------------------------------------------- */

#define COLT_BYTES ((size_t)32 << 20)

typedef struct cgw_plan {
    int64_t n, c, m, group, cg, mg;
    nn_geom g;     /* 2-D view (H = 1 for 1-D) */
    int64_t p, k;  /* output pixels per image; cg * kh * kw */
    int64_t chunk; /* images per colT */
    bool dense;    /* A gathered into a plain matrix (small maps) rather than read in place */
    bool by_cols;  /* colT stored by columns: im2col of the chunk's images side by side (bf16) */
    conv_shape cs; /* one group's conv as conv_im2col sees it (by_cols) */
    const gemm_kernel *kern;
    gemm_blocking blk;
    int threads;
    size_t colt_bytes, ind_bytes, acc_bytes, gemm_bytes;
} cgw_plan;

/* bf16: the GEMM on a bf16 tile (conv_grad_w_bf16), dY and the patches rounded to bf16 as they
 * are packed, dW summed in fp32; dY is then read in place only where its segments (P floats) are
 * even (gemm_takes_ind), else gathered like a small map's. */
static bool cgw_plan_of(const kern_node *kn, bool bf16, cgw_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const ir_node *n = kn->node;
    if (n->op != IR_OP_CONV_GRAD_W || kn->n_in < 2) return false;
    const op_tinfo *x = &kn->in[0], *dy = &kn->in[1];
    if (!kfam_f32_static(x) || !kfam_f32_static(dy) || !kfam_f32_static(&kn->out[0])) return false;
    const int rank = x->shape.rank, nsp = rank - 2;
    if ((nsp != 1 && nsp != 2) || dy->shape.rank != rank) return false;
    nn_window w;
    int64_t group;
    if (nn_window_parse(n, true, true, false, &w) != ANVIL_OK || w.n_kernel != (size_t)nsp ||
        ir_attr_int(n, "group", 1, &group) != ANVIL_OK || group < 1) {
        core_err_clear();
        return false;
    }
    nn_geom g;
    if (nn_window_resolve(n, &w, nsp, x->shape.d + 2, w.kernel, false, &g) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    if (nsp == 1) {
        nn_geom g2;
        memset(&g2, 0, sizeof g2);
        g2.nsp = 2;
        g2.in[0] = g2.out[0] = g2.kernel[0] = g2.stride[0] = g2.dil[0] = 1;
        g2.in[1] = g.in[0];
        g2.out[1] = g.out[0];
        g2.kernel[1] = g.kernel[0];
        g2.stride[1] = g.stride[0];
        g2.dil[1] = g.dil[0];
        g2.pad_begin[1] = g.pad_begin[0];
        g = g2;
    }
    pl->g = g;
    pl->n = x->shape.d[0];
    pl->c = x->shape.d[1];
    pl->m = dy->shape.d[1];
    pl->group = group;
    if (pl->c % group || pl->m % group || dy->shape.d[0] != pl->n) return false;
    pl->cg = pl->c / group;
    pl->mg = pl->m / group;
    pl->p = g.out[0] * g.out[1];
    if (kfam_numel(&dy->shape) != (size_t)(pl->n * pl->m * pl->p)) return false;
    pl->k = pl->cg * g.kernel[0] * g.kernel[1];
    const size_t row = (size_t)pl->p * (size_t)pl->k * sizeof(float);
    pl->chunk = row ? (int64_t)(COLT_BYTES / row) : pl->n;
    if (pl->chunk < 1) pl->chunk = 1;
    if (pl->chunk > pl->n) pl->chunk = pl->n;
    const core_hw *hw = core_hw_get();
    const int64_t depth = pl->chunk * pl->p;
    pl->kern = bf16 ? gemm_kernel_default_bf16(pl->mg, pl->k, depth, hw)
                    : gemm_kernel_default(pl->mg, pl->k, depth, hw);
    if (!pl->kern) return false;
    pl->blk = gemm_blocking_for(kn, pl->kern, pl->mg, pl->k, depth, hw, 0, 0, 0);
    pl->threads = kn->threads > 0 ? kn->threads : 1;
    pl->by_cols = bf16;
    pl->cs = (conv_shape){.n = pl->n,
                          .c = pl->cg,
                          .h = g.in[0],
                          .w = g.in[1],
                          .m = pl->mg,
                          .oh = g.out[0],
                          .ow = g.out[1],
                          .kh = g.kernel[0],
                          .kw = g.kernel[1],
                          .sh = g.stride[0],
                          .sw = g.stride[1],
                          .dh = g.dil[0],
                          .dw = g.dil[1],
                          .pt = g.pad_begin[0],
                          .pl = g.pad_begin[1],
                          .group = 1,
                          .cg = pl->cg,
                          .mg = pl->mg};
    pl->colt_bytes = align64((size_t)depth * (size_t)pl->k * sizeof(float));
    pl->dense = pl->p < 256 || !gemm_takes_ind(pl->kern, pl->p);
    pl->ind_bytes = pl->dense ? align64((size_t)pl->mg * (size_t)depth * sizeof(float))
                              : align64((size_t)pl->mg * (size_t)pl->chunk * sizeof(float *));
    pl->acc_bytes = pl->chunk < pl->n ? align64((size_t)pl->mg * (size_t)pl->k * sizeof(float)) : 0;
    pl->gemm_bytes = (size_t)pl->threads * align64(gemm_thread_workspace(pl->kern, &pl->blk));
    return pl->p > 0 && pl->k > 0;
}

static size_t cgw_workspace_as(const kern_node *kn, bool bf16) {
    cgw_plan pl;
    if (!cgw_plan_of(kn, bf16, &pl)) return 0;
    return pl.gemm_bytes + pl.colt_bytes + pl.ind_bytes + pl.acc_bytes;
}

static anvil_status cgw_prepare_as(const kern_node *kn, bool bf16, void **state) {
    cgw_plan *pl = core_calloc(1, sizeof *pl);
    if (!pl) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!cgw_plan_of(kn, bf16, pl)) {
        free(pl);
        return core_err(ANVIL_ERR_INTERNAL, "%s: %s prepared for a node it does not take",
                        ir_node_label(kn->node), bf16 ? "conv_grad_w_bf16" : "conv_grad_w_gemm");
    }
    *state = pl;
    return ANVIL_OK;
}

static bool cgw_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    cgw_plan pl;
    return cgw_plan_of(kn, false, &pl);
}

static size_t cgw_workspace(const kern_node *kn) {
    return cgw_workspace_as(kn, false);
}

static anvil_status cgw_prepare(const kern_node *kn, void **state) {
    return cgw_prepare_as(kn, false, state);
}

static bool cgw_supports_bf16(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    cgw_plan pl;
    return cgw_plan_of(kn, true, &pl);
}

static size_t cgw_workspace_bf16(const kern_node *kn) {
    return cgw_workspace_as(kn, true);
}

static anvil_status cgw_prepare_bf16(const kern_node *kn, void **state) {
    return cgw_prepare_as(kn, true, state);
}

typedef struct colt_job {
    const cgw_plan *pl;
    const float *x;
    float *colt;
    int64_t n0, grp;
    int64_t nb; /* images in this chunk */
} colt_job;

/* colT rows of images [n0 + begin, n0 + end): row (image, pixel) holds the patch of group grp */
static void colt_range(void *arg, size_t begin, size_t end) {
    const colt_job *j = arg;
    const cgw_plan *pl = j->pl;
    const nn_geom *g = &pl->g;
    const int64_t ih = g->in[0], iw = g->in[1], ow = g->out[1];
    const int64_t kh = g->kernel[0], kw = g->kernel[1];
    for (size_t b = begin; b < end; b++) {
        const float *xi = j->x + ((j->n0 + (int64_t)b) * pl->c + j->grp * pl->cg) * ih * iw;
        float *row = j->colt + (int64_t)b * pl->p * pl->k;
        for (int64_t q = 0; q < pl->p; q++, row += pl->k) {
            const int64_t oy = q / ow, ox = q % ow;
            float *d = row;
            for (int64_t c = 0; c < pl->cg; c++)
                for (int64_t ky = 0; ky < kh; ky++) {
                    const int64_t y = oy * g->stride[0] - g->pad_begin[0] + ky * g->dil[0];
                    const float *xr = xi + (c * ih + y) * iw;
                    for (int64_t kx = 0; kx < kw; kx++) {
                        const int64_t xx = ox * g->stride[1] - g->pad_begin[1] + kx * g->dil[1];
                        *d++ = y >= 0 && y < ih && xx >= 0 && xx < iw ? xr[xx] : 0.0f;
                    }
                }
        }
    }
}

/* The patches of images [n0 + begin, n0 + end) by columns: image b's im2col (group grp) in
 * columns [b*P, (b+1)*P) of a [K, chunk*P] matrix. */
static void col_range(void *arg, size_t begin, size_t end) {
    const colt_job *j = arg;
    const cgw_plan *pl = j->pl;
    const int64_t plane = pl->cs.h * pl->cs.w, ld = j->nb * pl->p;
    for (size_t b = begin; b < end; b++)
        conv_im2col(&pl->cs, j->x + ((j->n0 + (int64_t)b) * pl->c + j->grp * pl->cg) * plane, 0,
                    pl->k, 0, pl->p, j->colt + (int64_t)b * pl->p, ld);
}

static anvil_status cgw_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    const cgw_plan *pl = state;
    const float *x = in[0]->data, *dy = in[1]->data;
    float *dw = out[0]->data;
    char *base = ws;
    float *colt = (float *)(base + pl->gemm_bytes);
    const float **ind = (const float **)(base + pl->gemm_bytes + pl->colt_bytes);
    float *acc = (float *)(base + pl->gemm_bytes + pl->colt_bytes + pl->ind_bytes);
    for (int64_t grp = 0; grp < pl->group; grp++) {
        float *dwg = dw + grp * pl->mg * pl->k;
        for (int64_t n0 = 0; n0 < pl->n; n0 += pl->chunk) {
            const int64_t nb = pl->n - n0 < pl->chunk ? pl->n - n0 : pl->chunk;
            colt_job cj = {pl, x, colt, n0, grp, nb};
            op_parallel_for(ctx, (size_t)nb, pl->by_cols ? col_range : colt_range, &cj);
            /* row r of A: image b's channel (grp * mg + r) of dY, P floats each */
            float *dense = (float *)ind;
            for (int64_t r = 0; r < pl->mg; r++)
                for (int64_t b = 0; b < nb; b++) {
                    const float *src = dy + ((n0 + b) * pl->m + grp * pl->mg + r) * pl->p;
                    if (pl->dense)
                        memcpy(dense + (r * nb + b) * pl->p, src, sizeof(float) * (size_t)pl->p);
                    else
                        ind[r * nb + b] = src;
                }
            float *c = n0 == 0 ? dwg : acc;
            gemm_problem p = {.m = pl->mg,
                              .n = pl->k,
                              .k = nb * pl->p,
                              .b = colt,
                              .rs_b = pl->by_cols ? 1 : pl->k,
                              .cs_b = pl->by_cols ? nb * pl->p : 1,
                              .c = c,
                              .ldc = pl->k,
                              .ep = gemm_epilogue_none()};
            if (pl->dense) {
                p.a = dense;
                p.rs_a = nb * pl->p;
                p.cs_a = 1;
            } else {
                p.a_ind = ind;
                p.a_seg = pl->p;
            }
            gemm_run(pl->kern, &pl->blk, &p, base, ctx);
            if (n0 > 0)
                for (int64_t e = 0; e < pl->mg * pl->k; e++) dwg[e] += acc[e];
        }
    }
    return ANVIL_OK;
}

static const kern_variant v_conv_grad_w = {.name = "conv_grad_w_gemm",
                                           .op = IR_OP_CONV_GRAD_W,
                                           .supports = cgw_supports,
                                           .workspace_size = cgw_workspace,
                                           .prepare = cgw_prepare,
                                           .release = free,
                                           .run = cgw_run};

/* The same GEMM on bf16 tiles, for sessions that accept bf16 (mixed-precision training): first in
 * the family, so a bf16 session's cascade takes it where bf16 measured faster (registry.c). */
static const kern_variant v_conv_grad_w_bf16 = {.name = "conv_grad_w_bf16",
                                                .op = IR_OP_CONV_GRAD_W,
                                                .needs = KERN_NEEDS_AVX512 |
                                                         KERN_NEEDS_AVX512_BF16 | KERN_ROUNDS_BF16,
                                                .supports = cgw_supports_bf16,
                                                .workspace_size = cgw_workspace_bf16,
                                                .prepare = cgw_prepare_bf16,
                                                .release = free,
                                                .run = cgw_run};

/* ---- act_grad_f32 ---------------------------------------------------------------------------- */

static bool ag_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return kn->n_in >= 2 && kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->in[1]) &&
           ir_shape_equal(&kn->in[0].shape, &kn->in[1].shape) && kn->node->params;
}

typedef struct ag_job {
    const ir_fusion *f;
    bool avx512;
    const float *dy, *x;
    float *dx;
    size_t n, parts;
} ag_job;

static float sig(float v) {
    return 1.0f / (1.0f + expf(-v));
}

static void ag_range(void *arg, size_t begin, size_t end) {
    const ag_job *j = arg;
    const ir_fusion *f = j->f;
    for (size_t part = begin; part < end; part++) {
        const size_t lo = j->n * part / j->parts, hi = j->n * (part + 1) / j->parts;
        const float *restrict dy = j->dy, *restrict x = j->x;
        float *restrict dx = j->dx;
        switch (f->act) {
        case IR_ACT_RELU:
            if (j->avx512)
                train_relu_avx512(dy + lo, x + lo, dx + lo, hi - lo);
            else
                for (size_t i = lo; i < hi; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
            break;
        case IR_ACT_LEAKY_RELU:
            for (size_t i = lo; i < hi; i++) dx[i] = x[i] < 0.0f ? f->alpha * dy[i] : dy[i];
            break;
        case IR_ACT_SIGMOID:
            for (size_t i = lo; i < hi; i++) {
                const float s = sig(x[i]);
                dx[i] = dy[i] * s * (1.0f - s);
            }
            break;
        case IR_ACT_TANH:
            for (size_t i = lo; i < hi; i++) {
                const float t = tanhf(x[i]);
                dx[i] = dy[i] * (1.0f - t * t);
            }
            break;
        case IR_ACT_GELU_ERF:
            if (j->avx512) {
                train_gelu_erf_avx512(dy + lo, x + lo, dx + lo, hi - lo);
                break;
            }
            for (size_t i = lo; i < hi; i++) {
                const float v = x[i];
                const float pdf = expf(-0.5f * v * v) * 0.3989422804014327f;
                dx[i] = dy[i] * (0.5f * (1.0f + erff(v * 0.70710678118654752f)) + v * pdf);
            }
            break;
        default:
            /* the rest, rarely on a hot path: through the reference's derivative */
            return;
        }
    }
}

static anvil_status ag_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)state;
    (void)ws;
    const ir_fusion *f = n->params;
    if (f->act != IR_ACT_RELU && f->act != IR_ACT_LEAKY_RELU && f->act != IR_ACT_SIGMOID &&
        f->act != IR_ACT_TANH && f->act != IR_ACT_GELU_ERF)
        return op_get(n->op)->run(n, in, n_in, out, n_out, ctx);
    const size_t count = op_tensor_numel(out[0]);
    const int threads = op_ctx_threads(ctx);
    ag_job j = {f,
                kern_isa_ok(KERN_NEEDS_AVX512, core_hw_get()),
                in[0]->data,
                in[1]->data,
                out[0]->data,
                count,
                count < 65536 ? 1 : (size_t)threads};
    op_parallel_for(ctx, j.parts, ag_range, &j);
    return ANVIL_OK;
}

static const kern_variant v_act_grad = {
    .name = "act_grad_f32", .op = IR_OP_ACT_GRAD, .supports = ag_supports, .run = ag_run};

const kern_variant *const kern_family_train[] = {&v_conv_grad_w_bf16,
                                                 &v_conv_grad_w,
                                                 &v_act_grad,
                                                 &train_v_bn_train_avx512,
                                                 &train_v_bn_train_f32,
                                                 &train_v_bn_grad_avx512,
                                                 &train_v_bn_grad_f32,
                                                 &train_v_max_pool_grad_avx512,
                                                 &train_v_max_pool_grad_f32,
                                                 &train_v_ln_grad_avx512,
                                                 &train_v_ln_grad_f32,
                                                 NULL};
