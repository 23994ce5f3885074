/* Channels-last direct convs (anvil.ConvNhwc). Depthwise (group == C == M):
 * convnhwc_depthwise_avx512 / _avx2, 3x3 and 5x5 kernels, strides 1 and 2, no dilation (the
 * shapes of conv_depthwise.c); and few input channels: convnhwc_smallc_direct_avx512, at the
 * end of this file.
 *
 * With the channels in the vector lanes every tap is one load at any stride and any width, so,
 * unlike NCHW (conv_depthwise.c), there is no padded copy, no deinterleaving and no transpose:
 * the kernel (conv_dwn_tmpl.h) reads X where it lies. Threads take whole output rows; each row's
 * fused epilogue (activation, residual: NHWC like the output) runs right after it, in L1. */
#include "conv.h"

#include <stdlib.h>
#include <string.h>

typedef struct dwn_plan {
    conv_shape s;
    conv_dwn_geom g;
    int threads;
    conv_row_fusion fuse;
    float *wp; /* owned: [kh*kw][cpad] weights, 64-byte aligned */
} dwn_plan;

/* The output columns [lo, hi) whose taps all land inside the input's columns:
 * ox * sw - pl >= 0 and ox * sw - pl + kw - 1 < w (no dilation). */
static void interior(const conv_shape *s, int64_t *lo, int64_t *hi) {
    *lo = (s->pl + s->sw - 1) / s->sw;
    if (*lo > s->ow) *lo = s->ow;
    const int64_t last = s->w - s->kw + s->pl; /* the largest ox * sw of the interior */
    *hi = last < 0 ? 0 : last / s->sw + 1;
    if (*hi > s->ow) *hi = s->ow;
    if (*hi < *lo) *hi = *lo;
}

static bool dwn_plan_of(const kern_node *kn, dwn_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    if (!conv_shape_of_nhwc(kn, s) || !kn->in[1].value) return false;
    if (s->group != s->c || s->m != s->c) return false;
    if ((s->kh != 3 && s->kh != 5) || (s->kw != 3 && s->kw != 5)) return false;
    if ((s->sh != 1 && s->sh != 2) || (s->sw != 1 && s->sw != 2) || s->dh != 1 || s->dw != 1)
        return false;
    conv_dwn_geom *g = &p->g;
    *g = (conv_dwn_geom){.h = s->h,
                         .w = s->w,
                         .c = s->c,
                         .cpad = (s->c + 15) / 16 * 16,
                         .oh = s->oh,
                         .ow = s->ow,
                         .kh = s->kh,
                         .kw = s->kw,
                         .sh = s->sh,
                         .sw = s->sw,
                         .pt = s->pt,
                         .pl = s->pl};
    interior(s, &g->ox_lo, &g->ox_hi);
    p->threads = kn->threads > 0 ? kn->threads : 1;
    return true;
}

static bool dwn_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    dwn_plan p;
    return dwn_plan_of(kn, &p);
}

static anvil_status dwn_prepare(const kern_node *kn, void **state) {
    dwn_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!dwn_plan_of(kn, p)) {
        free(p);
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: channels-last depthwise variant prepared for a node it does not "
                        "support",
                        ir_node_label(kn->node));
    }
    const conv_shape *s = &p->s;
    const int64_t taps = s->kh * s->kw, cpad = p->g.cpad;
    p->wp = core_aligned_alloc(64, sizeof(float) * (size_t)(taps * cpad));
    if (!p->wp) {
        free(p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    memset(p->wp, 0, sizeof(float) * (size_t)(taps * cpad));
    const float *w = kn->in[1].value;
    for (int64_t ch = 0; ch < s->c; ch++)
        for (int64_t t = 0; t < taps; t++) p->wp[t * cpad + ch] = w[ch * taps + t];
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    *state = p;
    return ANVIL_OK;
}

static void dwn_release(void *state) {
    dwn_plan *p = state;
    if (p) free(p->wp);
    free(p);
}

typedef struct dwn_job {
    const dwn_plan *p;
    conv_dwn_row_fn row;
    const float *x, *bias, *res;
    float *y;
} dwn_job;

/* Thread t's share of the output rows of all images. */
static void dwn_chunk(void *arg, size_t begin, size_t end) {
    const dwn_job *j = arg;
    const dwn_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t rows = s->n * s->oh, T = p->threads, rowf = s->ow * s->m;
    for (size_t t = begin; t < end; t++)
        for (int64_t r = rows * (int64_t)t / T; r < rows * ((int64_t)t + 1) / T; r++) {
            const int64_t img = r / s->oh, oy = r % s->oh;
            j->row(&p->g, j->x + img * s->h * s->w * s->c, p->wp, j->bias, j->y + r * rowf, oy);
            if (p->fuse.on)
                conv_row_fusion_apply(&p->fuse, j->res ? j->res + r * rowf : NULL, j->y + r * rowf,
                                      rowf);
        }
}

/* The bias is copied into the workspace, zero-padded to cpad, per run: B is an input, constant
 * in every model the pass turns but not promised to be. */
static anvil_status dwn_run(const dwn_plan *p, conv_dwn_row_fn row, const op_tensor *const *in,
                            int n_in, op_tensor *const *out, void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n * s->oh * s->ow * s->c == 0) return ANVIL_OK;
    float *bias = ws;
    memset(bias, 0, sizeof(float) * (size_t)p->g.cpad);
    if (s->has_bias && n_in > 2 && in[2]) memcpy(bias, in[2]->data, sizeof(float) * (size_t)s->c);
    dwn_job j = {p,           row, in[0]->data, bias, conv_row_fusion_residual(&p->fuse, in, n_in),
                 out[0]->data};
    op_parallel_for(ctx, (size_t)p->threads, dwn_chunk, &j);
    return ANVIL_OK;
}

static size_t dwn_workspace(const kern_node *kn) {
    dwn_plan p;
    return dwn_plan_of(kn, &p) ? sizeof(float) * (size_t)p.g.cpad : 0;
}

static anvil_status dwn_run_avx512(const ir_node *n, void *state, const op_tensor *const *in,
                                   int n_in, op_tensor *const *out, int n_out, void *ws,
                                   op_ctx *ctx) {
    (void)n;
    (void)n_out;
    return dwn_run(state, conv_dwn_row_avx512, in, n_in, out, ws, ctx);
}

static anvil_status dwn_run_avx2(const ir_node *n, void *state, const op_tensor *const *in,
                                 int n_in, op_tensor *const *out, int n_out, void *ws,
                                 op_ctx *ctx) {
    (void)n;
    (void)n_out;
    return dwn_run(state, conv_dwn_row_avx2, in, n_in, out, ws, ctx);
}

const kern_variant convnhwc_v_depthwise_avx512 = {"convnhwc_depthwise_avx512",
                                                  IR_OP_CONV_NHWC,
                                                  KERN_NEEDS_AVX512,
                                                  dwn_supports,
                                                  dwn_workspace,
                                                  dwn_prepare,
                                                  dwn_release,
                                                  dwn_run_avx512,
                                                  conv_fuses};
const kern_variant convnhwc_v_depthwise_avx2 = {"convnhwc_depthwise_avx2",
                                                IR_OP_CONV_NHWC,
                                                KERN_NEEDS_AVX2,
                                                dwn_supports,
                                                dwn_workspace,
                                                dwn_prepare,
                                                dwn_release,
                                                dwn_run_avx2,
                                                conv_fuses};

/* ---- few input channels: convnhwc_smallc_direct_avx512 (conv_scn_avx512.c) ------------------ */

typedef struct scn_plan {
    conv_shape s;
    conv_scn_geom g;
    int threads;
    conv_row_fusion fuse;
    float *wp; /* owned: [kh][kw][c][mpad], 64-byte aligned */
} scn_plan;

/* One group, at most 4 input channels (conv_smallc.c's rule) and 64 output channels (4 vectors),
 * no dilation, kernels up to 11 and strides up to 4. */
static bool scn_plan_of(const kern_node *kn, scn_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    if (!conv_shape_of_nhwc(kn, s) || !kn->in[1].value) return false;
    if (s->group != 1 || s->c > 4 || s->m > 64 || s->dh != 1 || s->dw != 1 || s->kh > 11 ||
        s->kw > 11 || s->sh > 4 || s->sw > 4)
        return false;
    conv_scn_geom *g = &p->g;
    *g = (conv_scn_geom){.h = s->h,
                         .w = s->w,
                         .c = s->c,
                         .m = s->m,
                         .mpad = (s->m + 15) / 16 * 16,
                         .oh = s->oh,
                         .ow = s->ow,
                         .kh = s->kh,
                         .kw = s->kw,
                         .sh = s->sh,
                         .sw = s->sw,
                         .pt = s->pt,
                         .pl = s->pl};
    interior(s, &g->ox_lo, &g->ox_hi);
    p->threads = kn->threads > 0 ? kn->threads : 1;
    return true;
}

static bool scn_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    scn_plan p;
    return scn_plan_of(kn, &p);
}

static size_t scn_workspace(const kern_node *kn) {
    scn_plan p;
    return scn_plan_of(kn, &p) ? sizeof(float) * (size_t)p.g.mpad : 0;
}

static anvil_status scn_prepare(const kern_node *kn, void **state) {
    scn_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!scn_plan_of(kn, p)) {
        free(p);
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: channels-last few-channel conv prepared for a node it does not "
                        "support",
                        ir_node_label(kn->node));
    }
    const conv_shape *s = &p->s;
    const int64_t taps = s->kh * s->kw * s->c, mpad = p->g.mpad;
    p->wp = core_aligned_alloc(64, sizeof(float) * (size_t)(taps * mpad + 1));
    if (!p->wp) {
        free(p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    memset(p->wp, 0, sizeof(float) * (size_t)(taps * mpad + 1));
    const float *w = kn->in[1].value; /* [m][c][kh][kw] */
    for (int64_t o = 0; o < s->m; o++)
        for (int64_t ci = 0; ci < s->c; ci++)
            for (int64_t ky = 0; ky < s->kh; ky++)
                for (int64_t kx = 0; kx < s->kw; kx++)
                    p->wp[((ky * s->kw + kx) * s->c + ci) * mpad + o] =
                        w[((o * s->c + ci) * s->kh + ky) * s->kw + kx];
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    *state = p;
    return ANVIL_OK;
}

static void scn_release(void *state) {
    scn_plan *p = state;
    if (p) free(p->wp);
    free(p);
}

typedef struct scn_job {
    const scn_plan *p;
    const float *x, *bias, *res;
    float *y;
} scn_job;

static void scn_chunk(void *arg, size_t begin, size_t end) {
    const scn_job *j = arg;
    const scn_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t rows = s->n * s->oh, T = p->threads, rowf = s->ow * s->m;
    for (size_t t = begin; t < end; t++)
        for (int64_t r = rows * (int64_t)t / T; r < rows * ((int64_t)t + 1) / T; r++) {
            const int64_t img = r / s->oh, oy = r % s->oh;
            conv_scn_row_avx512(&p->g, j->x + img * s->h * s->w * s->c, p->wp, j->bias,
                                j->y + r * rowf, oy);
            if (p->fuse.on)
                conv_row_fusion_apply(&p->fuse, j->res ? j->res + r * rowf : NULL, j->y + r * rowf,
                                      rowf);
        }
}

static anvil_status scn_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const scn_plan *p = state;
    const conv_shape *s = &p->s;
    if (s->n * s->oh * s->ow * s->m == 0) return ANVIL_OK;
    float *bias = ws; /* zero-padded to mpad, per run as in dwn_run */
    memset(bias, 0, sizeof(float) * (size_t)p->g.mpad);
    if (s->has_bias && n_in > 2 && in[2]) memcpy(bias, in[2]->data, sizeof(float) * (size_t)s->m);
    scn_job j = {p, in[0]->data, bias, conv_row_fusion_residual(&p->fuse, in, n_in), out[0]->data};
    op_parallel_for(ctx, (size_t)p->threads, scn_chunk, &j);
    return ANVIL_OK;
}

const kern_variant convnhwc_v_smallc_avx512 = {"convnhwc_smallc_direct_avx512",
                                               IR_OP_CONV_NHWC,
                                               KERN_NEEDS_AVX512,
                                               scn_supports,
                                               scn_workspace,
                                               scn_prepare,
                                               scn_release,
                                               scn_run,
                                               conv_fuses};
