/* NHWC convolution kernels: X [n, h, w, c] -> Y [n, oh, ow, m], as one GEMM per image and group
 * with the pixels as rows: Y[pixels, m_g] = A[pixels, kh*kw*cg] x B[kh*kw*cg, m_g], where B is
 * the weights rearranged tap-major and packed once, and A is
 *   - X itself for an unpadded stride-1 1x1 conv (row stride c);
 *   - with 64 channels or more per group, X read in place through a table of a pointer per pixel
 *     and tap (an implicit GEMM, gemm_problem.a_ind), padding taps pointing at zeros;
 *   - otherwise an NHWC im2col (each tap copies cg contiguous channels).
 * The implicit GEMM spares the im2col's copy (oh*ow*kh*kw*cg floats per image, 7 MB at ResNet-50's
 * 64-channel 56x56 3x3) and, on one image over several threads, its fork-join. The variant keeps
 * its name, conv_nhwc_im2col_gemm, so forced names and tuning records stay valid.
 *
 * anvil's graph is NCHW, so the variant conv_nhwc_im2col_gemm transposes X in and Y out around
 * them. That pays only where the pixels-as-rows GEMM is much better shaped than the NCHW one:
 * few output pixels (a poor N for NCHW's Cout x pixels GEMM) and many channels (a cheap transpose
 * per FLOP). Measured on ResNet-50 (1 thread, min of 30, transposes included): 3x3 stride 2,
 * 256 ch 28x28 -> 2.54 ms vs 2.84 (implicit GEMM), 512 ch 14x14 -> 2.77 vs 3.19; but 128 ch
 * 56x56 -> 3.31 vs 2.88, and every 1x1 layer loses to the NCHW GEMM (the transposes cost as much
 * as the GEMM saves). The default cascade (conv_variants.c) takes it only for the first kind;
 * a layout pass that keeps whole chains in NHWC would make the transposes disappear.
 *
 * A fused epilogue (ir_fusion) costs nothing extra here: the activation is elementwise, so it is
 * applied in the GEMM epilogue before the transpose out, and the NCHW residual is read there as
 * the transposed matrix it is in pixel-major terms (rs_r = 1, cs_r = oh*ow). */
#include "conv.h"

#include "kernels/fusion.h"
#include "kernels/cpu/eltwise/eltwise.h"

#include <stdlib.h>
#include <string.h>

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

static bool direct_1x1(const conv_shape *s) {
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 &&
           s->oh == s->h && s->ow == s->w;
}

/* The GEMM kernel for s. The output channels are the GEMM's columns, and 24 of them (MobileNetV2's
 * 1x1 projections at 56x56) fit no AVX-512 tile: 16x16 spends a full tile on the last 8 and 14x32
 * on all 24, both through the edge path. 4x24 (AVX2, 8-float vectors) covers them exactly, and on a
 * CPU that splits 512-bit FMAs in two (Zen 4) its full tiles run at the AVX-512 ones' rate: 96 > 24
 * at 56x56 204 -> 144 us, 144 > 24 291 -> 209 us (1 thread, per node in the model). */
static const gemm_kernel *nhwc_tile(const conv_shape *s, int64_t pix, int64_t kdim) {
    const core_hw *hw = core_hw_get();
    const gemm_kernel *forced = conv_gemm_kernel_forced(hw);
    if (forced) return forced;
    const gemm_kernel *k24 = gemm_kernel_find("4x24_avx2");
    if (s->mg % 24 == 0 && s->mg <= 48 && k24 && gemm_kernel_usable(k24, hw)) return k24;
    return gemm_kernel_default(pix, s->mg, kdim, hw);
}

/* Channels per group from which A is read in place through a pointer table (an implicit GEMM)
 * rather than copied into an im2col: the GEMM's K blocks then stay inside one tap, cg deep, so
 * with few channels the C tile would be reloaded every few k steps. On ResNet-50 (medians of 3
 * alternated runs, ms, table vs copy) the 64-channel 56x56 3x3 measured the same within the
 * noise (1 thread 2.31-2.61 vs 2.41-2.62, 2 threads 1.27-1.28 vs 1.22-1.33), and 512ch 14->7
 * stride 2 gained 1-4% on 1 thread, where the copy had been 1-4% of the time (`perf`); fewer
 * channels were not measured. ANVIL_CONV_IM2COL=1 copies always (for comparisons). */
#define INDIRECT_MIN_CG 64

/* The GEMM kernel and blocking for s, and how A is formed (what conv_nhwc_workspace needs
 * before packing); kn (NULL: none) may carry the tuner's tile and KC. */
static void nhwc_kernel(const conv_shape *s, const kern_node *kn, conv_nhwc_weights *out) {
    const int64_t kdim = conv_kdim(s), pix = s->oh * s->ow;
    const core_hw *hw = core_hw_get();
    const gemm_kernel *tile = kn ? conv_config_tile(kn, hw) : NULL;
    out->k = tile ? tile : nhwc_tile(s, pix, kdim);
    out->blk =
        gemm_blocking_config(out->k, pix, s->mg, kdim, hw, kn ? conv_config_kc(kn) : 0, 0, 0);
    const char *env = getenv("ANVIL_CONV_IM2COL");
    out->indirect = !direct_1x1(s) && s->cg >= INDIRECT_MIN_CG && !(env && atoi(env) == 1);
}

static anvil_status weights_pack(const conv_shape *s, const kern_node *kn, const float *w,
                                 conv_nhwc_weights *out) {
    memset(out, 0, sizeof *out);
    const int64_t khw = s->kh * s->kw, kdim = conv_kdim(s);
    nhwc_kernel(s, kn, out);
    out->groups = s->group;
    out->pb = core_calloc((size_t)s->group, sizeof *out->pb);
    float *tmp = malloc(sizeof(float) * (size_t)(kdim * s->mg > 0 ? kdim * s->mg : 1));
    anvil_status st = ANVIL_ERR_OUT_OF_MEMORY;
    if (out->indirect && !(out->zeros = core_calloc((size_t)s->cg, sizeof(float)))) goto fail;
    if (!out->pb || !tmp) goto fail;
    for (int64_t g = 0; g < s->group; g++) {
        for (int64_t o = 0; o < s->mg; o++)
            for (int64_t ci = 0; ci < s->cg; ci++)
                for (int64_t t = 0; t < khw; t++)
                    tmp[(t * s->cg + ci) * s->mg + o] = w[((g * s->mg + o) * s->cg + ci) * khw + t];
        if ((st = gemm_pack_b(out->k, kdim, s->mg, tmp, s->mg, 1, &out->pb[g])) != ANVIL_OK)
            goto fail;
    }
    free(tmp);
    return ANVIL_OK;
fail:
    free(tmp);
    conv_nhwc_weights_free(out);
    return st;
}

anvil_status conv_nhwc_weights_pack(const conv_shape *s, const float *w, conv_nhwc_weights *out) {
    return weights_pack(s, NULL, w, out);
}

void conv_nhwc_weights_free(conv_nhwc_weights *pw) {
    if (!pw) return;
    if (pw->pb)
        for (int64_t g = 0; g < pw->groups; g++) gemm_packed_free(&pw->pb[g]);
    free(pw->pb);
    free(pw->zeros);
    memset(pw, 0, sizeof *pw);
}

/* A's storage per thread: the im2col, or the pointer table (one per pixel and tap). */
static size_t col_bytes(const conv_shape *s, const conv_nhwc_weights *pw) {
    const size_t pix = (size_t)(s->oh * s->ow);
    if (direct_1x1(s)) return 0;
    if (pw->indirect) return align64(pix * (size_t)(s->kh * s->kw) * sizeof(const float *));
    return align64(pix * (size_t)conv_kdim(s) * sizeof(float));
}

static size_t gemm_bytes(const conv_nhwc_weights *pw) {
    return align64(gemm_thread_workspace(pw->k, &pw->blk));
}

size_t conv_nhwc_workspace(const conv_shape *s, const conv_nhwc_weights *pw, int threads) {
    return (size_t)(threads > 0 ? threads : 1) * (gemm_bytes(pw) + col_bytes(s, pw));
}

static void copy_floats(float *restrict d, const float *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = s[i];
}

/* Rows [p0, p1) (output pixels) of the NHWC im2col of group g of one image. With one group and
 * no dilation, a kernel row's taps of a pixel whose taps are all inside the image are kw*c
 * consecutive floats of X: one copy (a network's first conv, 3 channels: 9 floats, where a
 * memcpy per tap cost more than the GEMM). */
static void im2col_nhwc(const conv_shape *s, const float *x, int64_t g, int64_t p0, int64_t p1,
                        float *col) {
    const int64_t kdim = conv_kdim(s);
    const bool rows = s->group == 1 && s->dw == 1;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t oy = p / s->ow, ox = p % s->ow;
        float *d = col + p * kdim;
        const int64_t ix0 = ox * s->sw - s->pl;
        if (rows && ix0 >= 0 && ix0 + s->kw <= s->w) {
            for (int64_t ky = 0; ky < s->kh; ky++, d += s->kw * s->c) {
                const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
                if (iy < 0 || iy >= s->h)
                    memset(d, 0, sizeof(float) * (size_t)(s->kw * s->c));
                else
                    copy_floats(d, x + (iy * s->w + ix0) * s->c, s->kw * s->c);
            }
            continue;
        }
        for (int64_t ky = 0; ky < s->kh; ky++) {
            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
            for (int64_t kx = 0; kx < s->kw; kx++, d += s->cg) {
                const int64_t ix = ox * s->sw - s->pl + kx * s->dw;
                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                    memset(d, 0, sizeof(float) * (size_t)s->cg);
                else
                    memcpy(d, x + (iy * s->w + ix) * s->c + g * s->cg,
                           sizeof(float) * (size_t)s->cg);
            }
        }
    }
}

/* The implicit GEMM's table for group g of one image: row p (an output pixel) is its kh*kw taps,
 * each the tap's cg channels in X or, in the padding, `zeros` (cg of them). */
static void pointer_table(const conv_shape *s, const float *x, int64_t g, const float *zeros,
                          const float **tab) {
    for (int64_t p = 0; p < s->oh * s->ow; p++) {
        const int64_t oy = p / s->ow, ox = p % s->ow;
        for (int64_t ky = 0; ky < s->kh; ky++) {
            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
            for (int64_t kx = 0; kx < s->kw; kx++) {
                const int64_t ix = ox * s->sw - s->pl + kx * s->dw;
                *tab++ = iy < 0 || iy >= s->h || ix < 0 || ix >= s->w
                             ? zeros
                             : x + (iy * s->w + ix) * s->c + g * s->cg;
            }
        }
    }
}

/* A for one item into `col` (the thread's slice): the table, or the im2col of all pixels. */
static void form_a(const conv_shape *s, const conv_nhwc_weights *pw, const float *x_img, int64_t g,
                   void *col) {
    if (pw->indirect)
        pointer_table(s, x_img, g, pw->zeros, col);
    else
        im2col_nhwc(s, x_img, g, 0, s->oh * s->ow, col);
}

typedef struct nhwc_job {
    const conv_shape *s;
    const conv_nhwc_weights *pw;
    const float *x, *bias;
    float *y;
    char *ws;
    int threads;
    int64_t img, g;        /* the shared item (im2col_chunk) */
    const ir_fusion *fuse; /* applied in the epilogue, or NULL */
    const float *res;      /* its residual, or NULL */
    bool res_nhwc;         /* res is NHWC like y (else NCHW) */
} nhwc_job;

static void item_problem(const nhwc_job *j, int64_t img, int64_t g, const void *col,
                         gemm_problem *p) {
    const conv_shape *s = j->s;
    memset(p, 0, sizeof *p);
    p->m = s->oh * s->ow;
    p->n = s->mg;
    p->k = conv_kdim(s);
    if (col && j->pw->indirect) {
        p->a_ind = col;
        p->a_seg = s->cg;
    } else if (col) {
        p->a = col;
        p->rs_a = p->k;
    } else {
        p->a = j->x + img * s->h * s->w * s->c + g * s->cg;
        p->rs_a = s->c;
    }
    p->cs_a = 1;
    p->pb = &j->pw->pb[g];
    p->c = j->y + img * p->m * s->m + g * s->mg;
    p->ldc = s->m;
    p->ep = kern_fusion_epilogue(j->fuse);
    if (j->bias) p->ep.col_bias = j->bias + g * s->mg;
    if (j->res && j->res_nhwc) {
        p->ep.r = j->res + img * p->m * s->m + g * s->mg;
        p->ep.rs_r = s->m;
        p->ep.cs_r = 1;
        p->ep.beta = 1.0f;
    } else if (j->res) {
        /* C[pixel, channel] of this item is residual[img][g*mg + channel][pixel] */
        p->ep.r = j->res + (img * s->m + g * s->mg) * p->m;
        p->ep.rs_r = 1;
        p->ep.cs_r = p->m;
        p->ep.beta = 1.0f;
    }
}

static void items_chunk(void *arg, size_t begin, size_t end) {
    const nhwc_job *j = arg;
    const conv_shape *s = j->s;
    const int64_t items = s->n * s->group, T = j->threads;
    for (size_t t = begin; t < end; t++) {
        void *gws = j->ws + t * gemm_bytes(j->pw);
        void *col =
            direct_1x1(s) ? NULL : j->ws + (size_t)T * gemm_bytes(j->pw) + t * col_bytes(s, j->pw);
        for (int64_t i = items * (int64_t)t / T; i < items * ((int64_t)t + 1) / T; i++) {
            const int64_t img = i / s->group, g = i % s->group;
            if (col) form_a(s, j->pw, j->x + img * s->h * s->w * s->c, g, col);
            gemm_problem p;
            item_problem(j, img, g, col, &p);
            gemm_run_serial(j->pw->k, &j->pw->blk, &p, gws);
        }
    }
}

static void im2col_chunk(void *arg, size_t begin, size_t end) {
    const nhwc_job *j = arg;
    const conv_shape *s = j->s;
    const int64_t pix = s->oh * s->ow, T = j->threads;
    float *col = (float *)(j->ws + (size_t)T * gemm_bytes(j->pw));
    for (size_t t = begin; t < end; t++)
        im2col_nhwc(s, j->x + j->img * s->h * s->w * s->c, j->g, pix * (int64_t)t / T,
                    pix * ((int64_t)t + 1) / T, col);
}

void conv_nhwc_run(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                   const float *bias, float *y, void *ws, op_ctx *ctx) {
    conv_nhwc_run_fused(s, pw, x, bias, NULL, NULL, false, y, ws, ctx);
}

void conv_nhwc_run_fused(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                         const float *bias, const ir_fusion *f, const float *res, bool res_nhwc,
                         float *y, void *ws, op_ctx *ctx) {
    const int threads = op_ctx_threads(ctx);
    nhwc_job j = {s, pw, x, bias, y, ws, threads, 0, 0, f, f ? res : NULL, res_nhwc};
    const int64_t items = s->n * s->group;
    if (items == 0 || s->mg == 0 || s->oh * s->ow == 0) return;
    if (threads > 1 && items >= threads) {
        op_parallel_for(ctx, (size_t)threads, items_chunk, &j);
        return;
    }
    for (int64_t i = 0; i < items; i++) {
        j.img = i / s->group;
        j.g = i % s->group;
        void *col = NULL;
        if (pw->indirect) {
            /* a table of oh*ow*kh*kw pointers: not worth a fork-join */
            col = (char *)ws + (size_t)threads * gemm_bytes(pw);
            pointer_table(s, x + j.img * s->h * s->w * s->c, j.g, pw->zeros, col);
        } else if (!direct_1x1(s)) {
            op_parallel_for(ctx, (size_t)threads, im2col_chunk, &j);
            col = (char *)ws + (size_t)threads * gemm_bytes(pw);
        }
        gemm_problem p;
        item_problem(&j, j.img, j.g, col, &p);
        gemm_run(pw->k, &pw->blk, &p, ws, ctx);
    }
}

/* ---- the variant: NCHW in and out, NHWC inside ------------------------------------------------
 */

typedef struct nhwc_plan {
    conv_shape s;
    bool last; /* anvil.ConvNhwc: X and Y are channels-last already */
    int threads;
    size_t xt_bytes, yt_bytes, run_bytes;
} nhwc_plan;

typedef struct nhwc_state {
    nhwc_plan p;
    conv_nhwc_weights w;
    const ir_fusion *fusion; /* what run applies (NULL: none, or the runtime does) */
} nhwc_state;

/* Both variants' plan: Conv (NCHW, transposed in and out through the workspace) or
 * anvil.ConvNhwc (channels-last already, no transposes), told apart by the node's op. */
static bool nhwc_plan_of(const kern_node *kn, nhwc_plan *p) {
    memset(p, 0, sizeof *p);
    const bool last = kn->node->op == IR_OP_CONV_NHWC;
    if (!(last ? conv_shape_of_nhwc(kn, &p->s) : conv_shape_of(kn, &p->s)) || !kn->in[1].value)
        return false;
    p->last = last;
    const conv_shape *s = &p->s;
    conv_nhwc_weights sizing;
    memset(&sizing, 0, sizeof sizing);
    nhwc_kernel(s, kn, &sizing);
    p->threads = kn->threads > 0 ? kn->threads : 1;
    if (!last) {
        p->xt_bytes = align64((size_t)(s->n * s->c * s->h * s->w) * sizeof(float));
        p->yt_bytes = align64((size_t)(s->n * s->m * s->oh * s->ow) * sizeof(float));
    }
    p->run_bytes = conv_nhwc_workspace(s, &sizing, p->threads);
    return true;
}

static bool nhwc_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    nhwc_plan p;
    return nhwc_plan_of(kn, &p);
}

static size_t nhwc_ws(const kern_node *kn) {
    nhwc_plan p;
    return nhwc_plan_of(kn, &p) ? p.xt_bytes + p.yt_bytes + p.run_bytes : 0;
}

static void nhwc_release(void *state) {
    nhwc_state *st = state;
    if (!st) return;
    conv_nhwc_weights_free(&st->w);
    free(st);
}

static anvil_status nhwc_prepare(const kern_node *kn, void **state) {
    nhwc_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!nhwc_plan_of(kn, &st->p)) {
        free(st);
        return conv_prepare_unsupported(kn, "NHWC GEMM conv variant");
    }
    anvil_status e = weights_pack(&st->p.s, kn, kn->in[1].value, &st->w);
    if (e != ANVIL_OK) {
        free(st);
        return e;
    }
    kern_node_mark_copied(kn, 1);
    /* where the runtime applies the fusion after run, run must not apply it too */
    st->fusion = conv_fuses(kn) ? kn->node->fusion : NULL;
    *state = st;
    return ANVIL_OK;
}

/* The split lives in conv_layout.c (shared with the emitted libraries); the row transposes are the
 * eltwise family's 8x8 register blocks. */
void conv_transpose_f32(const float *src, float *dst, int64_t mats, int64_t rows, int64_t cols,
                        op_ctx *ctx) {
    conv_transpose_run(src, dst, mats, rows, cols, elt_transpose_f32, ctx);
}

/* Conv: X transposed to NHWC through the workspace, the GEMMs, Y transposed back to NCHW;
 * anvil.ConvNhwc (p.last): the GEMMs alone, on X and Y where they lie. */
static anvil_status nhwc_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const nhwc_state *st = state;
    const conv_shape *s = &st->p.s;
    const float *bias = conv_bias(s, in, n_in), *res = conv_fused_residual(st->fusion, in, n_in);
    if (s->n == 0 || s->m == 0) return ANVIL_OK;
    if (st->p.last) {
        conv_nhwc_run_fused(s, &st->w, in[0]->data, bias, st->fusion, res, true, out[0]->data, ws,
                            ctx);
        return ANVIL_OK;
    }
    float *xt = ws, *yt = (float *)((char *)ws + st->p.xt_bytes);
    void *run_ws = (char *)ws + st->p.xt_bytes + st->p.yt_bytes;
    conv_transpose_f32(in[0]->data, xt, s->n, s->c, s->h * s->w, ctx);
    conv_nhwc_run_fused(s, &st->w, xt, bias, st->fusion, res, false, yt, run_ws, ctx);
    conv_transpose_f32(yt, out[0]->data, s->n, s->oh * s->ow, s->m, ctx);
    return ANVIL_OK;
}

/* The GEMMs the variant runs for kn under configuration c (its space's view). */
static bool nhwc_view(const kern_node *kn, const kern_config *c, conv_gemm_view *v) {
    kern_node k2 = *kn;
    k2.config = c;
    nhwc_plan p;
    if (!nhwc_plan_of(&k2, &p)) return false;
    conv_nhwc_weights w;
    memset(&w, 0, sizeof w);
    nhwc_kernel(&p.s, &k2, &w);
    v->k = w.k;
    v->blk = w.blk;
    v->kdim = conv_kdim(&p.s);
    v->a_seg = w.indirect ? p.s.cg : 0;
    return true;
}

CONV_SPACE(nhwc_space, nhwc_view);

const kern_variant conv_v_nhwc = {"conv_nhwc_im2col_gemm",
                                  IR_OP_CONV,
                                  0,
                                  nhwc_supports,
                                  nhwc_ws,
                                  nhwc_prepare,
                                  nhwc_release,
                                  nhwc_run,
                                  conv_fuses,
                                  &nhwc_space,
                                  NULL};

/* anvil.ConvNhwc through the same GEMMs, no transposes. */
const kern_variant convnhwc_v_gemm = {
    "convnhwc_gemm", IR_OP_CONV_NHWC, 0,          nhwc_supports, nhwc_ws, nhwc_prepare,
    nhwc_release,    nhwc_run,        conv_fuses, NULL,          NULL};
