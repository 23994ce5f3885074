/* Conv geometry and the two ways of feeding a convolution to the GEMM: an explicit im2col buffer
 * and im2col written straight into packed B panels (the implicit GEMM).
 *
 * The window attributes are parsed here rather than through the reference's private helpers
 * (src/ops/nn_common.h is private to the nn ops); the resolved output size is compared with the
 * inferred output shape, so any disagreement with the reference makes the variants decline the
 * node instead of computing something different. */
#include "conv.h"

#include "kernels/fusion.h"

#include <stdlib.h>
#include <string.h>

static bool static_f32(const op_tinfo *t, int rank) {
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape) &&
           t->shape.rank == rank;
}

/* One list attribute with `want` values (absent: every value dflt). */
static bool attr_list(const ir_node *n, const char *name, size_t want, int64_t dflt, int64_t *v) {
    const int64_t *p;
    size_t cnt;
    if (ir_attr_ints(n, name, &p, &cnt) != ANVIL_OK) return false;
    if (cnt == 0) {
        for (size_t i = 0; i < want; i++) v[i] = dflt;
        return true;
    }
    if (cnt != want) return false;
    for (size_t i = 0; i < want; i++) v[i] = p[i];
    return true;
}

/* Output size and begin pad of one spatial dim; false when the result is not a positive size. */
static bool resolve_dim(const char *auto_pad, int64_t x, int64_t k, int64_t s, int64_t d,
                        int64_t pb, int64_t pe, int64_t *out, int64_t *pad_begin) {
    int64_t ek = (k - 1) * d + 1, o;
    if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
        o = (x + s - 1) / s;
        int64_t total = (o - 1) * s + ek - x;
        if (total < 0) total = 0;
        *pad_begin = !strcmp(auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
    } else if (!strcmp(auto_pad, "VALID")) {
        o = x >= ek ? (x - ek) / s + 1 : 0;
        *pad_begin = 0;
    } else {
        int64_t span = x + pb + pe - ek;
        o = span < 0 ? 0 : span / s + 1;
        *pad_begin = pb;
    }
    *out = o;
    return o >= 1;
}

/* The window attributes of n, each as two values (H, W): a 1-D conv's single values are the W
 * ones, with H a unit window (kernel 1, stride 1, dilation 1, no padding). */
static bool window_attrs(const ir_node *n, bool one_d, int64_t kernel[2], int64_t strides[2],
                         int64_t dil[2], int64_t pads[4]) {
    if (!one_d)
        return attr_list(n, "kernel_shape", 2, 0, kernel) &&
               attr_list(n, "strides", 2, 1, strides) && attr_list(n, "dilations", 2, 1, dil) &&
               attr_list(n, "pads", 4, 0, pads);
    int64_t k, st, d, p[2];
    if (!attr_list(n, "kernel_shape", 1, 0, &k) || !attr_list(n, "strides", 1, 1, &st) ||
        !attr_list(n, "dilations", 1, 1, &d) || !attr_list(n, "pads", 2, 0, p))
        return false;
    kernel[0] = k ? 1 : 0;
    kernel[1] = k;
    strides[0] = dil[0] = 1;
    strides[1] = st;
    dil[1] = d;
    pads[0] = pads[2] = 0;
    pads[1] = p[0];
    pads[3] = p[1];
    return true;
}

/* X and Y: [N, C, H, W] and [N, M, OH, OW] for Conv, [N, H, W, C] and [N, OH, OW, M] for
 * anvil.ConvNhwc; everything else is the same. A 1-D Conv ([N, C, W], Silero VAD's and Whisper's
 * front ends) is the 2-D one with H = 1: the same bytes, so every NCHW variant takes it (it fell
 * to oneDNN, whose OpenMP threads woke for each of Silero's small convs). */
static bool shape_of(const kern_node *kn, conv_shape *s, ir_op op) {
    memset(s, 0, sizeof *s);
    const ir_node *n = kn->node;
    if (n->op != op || kn->n_in < 2 || kn->n_out < 1) return false;
    const bool last = op == IR_OP_CONV_NHWC;
    const bool one_d = !last && kn->in[0].shape.rank == 3;
    const int rank = one_d ? 3 : 4;
    if (!static_f32(&kn->in[0], rank) || !static_f32(&kn->in[1], rank) ||
        !static_f32(&kn->out[0], rank))
        return false;
    s->has_bias = kn->n_in > 2 && n->n_inputs > 2 && n->inputs[2] != IR_NONE;
    if (s->has_bias && !static_f32(&kn->in[2], 1)) return false;
    const int64_t *xd = kn->in[0].shape.d, *wd = kn->in[1].shape.d, *yd = kn->out[0].shape.d;
    int64_t x[4], y[4], w[4];
    if (one_d) {
        const int64_t x1[4] = {xd[0], xd[1], 1, xd[2]}, y1[4] = {yd[0], yd[1], 1, yd[2]},
                      w1[4] = {wd[0], wd[1], 1, wd[2]};
        memcpy(x, x1, sizeof x);
        memcpy(y, y1, sizeof y);
        memcpy(w, w1, sizeof w);
    } else {
        const int64_t x2[4] = {xd[0], xd[last ? 3 : 1], xd[last ? 1 : 2], xd[last ? 2 : 3]};
        const int64_t y2[4] = {yd[0], yd[last ? 3 : 1], yd[last ? 1 : 2], yd[last ? 2 : 3]};
        memcpy(x, x2, sizeof x);
        memcpy(y, y2, sizeof y);
        memcpy(w, wd, sizeof w);
    }
    if (op == IR_OP_CONV_PAIR) y[1] = w[0]; /* Y is the second conv's; s describes the first */
    int64_t kernel[2], strides[2], dil[2], pads[4];
    const char *auto_pad;
    if (!window_attrs(n, one_d, kernel, strides, dil, pads) ||
        ir_attr_string(n, "auto_pad", "NOTSET", &auto_pad) != ANVIL_OK ||
        ir_attr_int(n, "group", 1, &s->group) != ANVIL_OK)
        return false;
    s->n = x[0];
    s->c = x[1];
    s->h = x[2];
    s->w = x[3];
    s->m = w[0];
    s->kh = w[2];
    s->kw = w[3];
    if ((kernel[0] && kernel[0] != s->kh) || (kernel[1] && kernel[1] != s->kw)) return false;
    s->sh = strides[0];
    s->sw = strides[1];
    s->dh = dil[0];
    s->dw = dil[1];
    if (s->group < 1 || s->c % s->group || s->m % s->group || w[1] * s->group != s->c) return false;
    if (s->sh < 1 || s->sw < 1 || s->dh < 1 || s->dw < 1 || s->kh < 1 || s->kw < 1) return false;
    /* Far beyond real models (an audio front end's 1-D kernel spans a few hundred samples); keeps
     * every index product inside int64. */
    const int64_t lim = (int64_t)1 << 24;
    if (s->h > lim || s->w > lim || s->kh > 4096 || s->kw > 4096 || s->sh > lim || s->sw > lim ||
        s->dh > lim || s->dw > lim || pads[0] > lim || pads[1] > lim || pads[2] > lim ||
        pads[3] > lim)
        return false;
    if (!resolve_dim(auto_pad, s->h, s->kh, s->sh, s->dh, pads[0], pads[2], &s->oh, &s->pt) ||
        !resolve_dim(auto_pad, s->w, s->kw, s->sw, s->dw, pads[1], pads[3], &s->ow, &s->pl))
        return false;
    if (y[0] != s->n || y[1] != s->m || y[2] != s->oh || y[3] != s->ow) return false;
    if (s->has_bias && kn->in[2].shape.d[0] != s->m) return false;
    s->cg = s->c / s->group;
    s->mg = s->m / s->group;
    return true;
}

bool conv_shape_of(const kern_node *kn, conv_shape *s) {
    return shape_of(kn, s, IR_OP_CONV);
}

bool conv_shape_of_nhwc(const kern_node *kn, conv_shape *s) {
    return shape_of(kn, s, IR_OP_CONV_NHWC);
}

bool conv_shape_of_pair(const kern_node *kn, conv_shape *s) {
    return shape_of(kn, s, IR_OP_CONV_PAIR);
}

/* Conv GEMMs have M = output channels, typically 64..2048 (multiples of 8 and rarely of 14), and
 * the FMA-bound 32-column tiles run at the same speed for MR 8..14 on Zen 4, so the tile that
 * pads M least wins: measured (1 thread, implicit GEMM) 8x32 vs the default 14x32 on ResNet-50's
 * stem 3.20 vs 3.42 ms, 128 ch 3x3 s2 2.64 vs 2.84 ms, 256 ch 3x3 s2 2.67 vs 2.75 ms, and equal
 * where neither pads (M = 512, 2048). ANVIL_CONV_TILE=<kernel name> overrides, for experiments. */
const gemm_kernel *conv_gemm_kernel_forced(const core_hw *hw) {
    const char *force = getenv("ANVIL_CONV_TILE");
    const gemm_kernel *f = force ? gemm_kernel_find(force) : NULL;
    return f && gemm_kernel_usable(f, hw) ? f : NULL;
}

const gemm_kernel *conv_gemm_kernel(int64_t m, int64_t n, int64_t k, const core_hw *hw) {
    const gemm_kernel *f = conv_gemm_kernel_forced(hw);
    if (f) return f;
    const gemm_kernel *def = gemm_kernel_default(m, n, k, hw);
    /* The default takes 16x16 where one 16-column tile plus the GEMM's column kernel covers a
     * small image best on paper (49 columns: 3 tiles and 1 column). But 16x16 loads 17 values per
     * 16 FMAs and reads the image's rows at a 49-float stride; 8x48 needs 11 loads per 24 FMAs
     * and the same edge costs it one column too. MobileNetV2's 7x7 1x1 convs, 1 thread, us,
     * medians of 3 runs, 16x16 -> 8x48: 160>960 175 -> 163, 960>160 183 -> 168 and 190 -> 168,
     * 960>320 369 -> 334, 320>1280 460 -> 423; equal on its 14x14 ones (196 columns). */
    if (def == gemm_kernel_find("16x16_avx512") && n > 16) {
        const gemm_kernel *wide = gemm_kernel_find("8x48_avx512");
        if (wide && gemm_kernel_usable(wide, hw)) return wide;
    }
    if (m <= 4 || n <= 16 || def->nr != 32) return def;
    static const char *const tall[] = {"14x32_avx512", "12x32_avx512", "8x32_avx512"};
    const gemm_kernel *best = def;
    int64_t best_rows = (m + def->mr - 1) / def->mr * def->mr;
    for (size_t i = 0; i < sizeof tall / sizeof tall[0]; i++) {
        const gemm_kernel *c = gemm_kernel_find(tall[i]);
        if (!c || !gemm_kernel_usable(c, hw)) continue;
        int64_t rows = (m + c->mr - 1) / c->mr * c->mr;
        if (rows < best_rows) {
            best = c;
            best_rows = rows;
        }
    }
    return best;
}

/* Output columns [lo, hi) whose tap at input offset `off` (= kx*dw - pl) lands inside [0, w). */
static void valid_cols(int64_t ow, int64_t sw, int64_t off, int64_t w, int64_t *lo, int64_t *hi) {
    /* ox*sw + off >= 0  and  ox*sw + off < w */
    int64_t a = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t b = w - off <= 0 ? 0 : (w - off + sw - 1) / sw;
    if (b > ow) b = ow;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* d[j] = s[2j]: with the stride a constant the compiler vectorizes it (even-lane shuffles);
 * the general strided loop stays scalar. */
static void copy_stride2(float *restrict d, const float *restrict s, int64_t n) {
    for (int64_t j = 0; j < n; j++) d[j] = s[2 * j];
}

void conv_im2col(const conv_shape *s, const float *x, int64_t k0, int64_t k1, int64_t p0,
                 int64_t np, float *col, int64_t ldc) {
    const int64_t khw = s->kh * s->kw, plane = s->h * s->w;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t c = k / khw, ky = k % khw / s->kw, kx = k % s->kw;
        const float *xc = x + c * plane;
        float *dst = col + k * ldc;
        int64_t lo, hi;
        valid_cols(s->ow, s->sw, kx * s->dw - s->pl, s->w, &lo, &hi);
        for (int64_t p = p0; p < p0 + np;) {
            const int64_t oy = p / s->ow, ox0 = p % s->ow;
            int64_t ox1 = s->ow < ox0 + (p0 + np - p) ? s->ow : ox0 + (p0 + np - p);
            float *d = dst + (p - p0);
            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
            if (iy < 0 || iy >= s->h) {
                memset(d, 0, sizeof(float) * (size_t)(ox1 - ox0));
            } else {
                /* zeros left of the valid columns, the strided copy, zeros right of them */
                const int64_t a = lo > ox0 ? (lo < ox1 ? lo : ox1) : ox0;
                const int64_t b = hi < ox1 ? (hi > a ? hi : a) : ox1;
                for (int64_t ox = ox0; ox < a; ox++) d[ox - ox0] = 0.0f;
                if (b > a) {
                    /* input column of output column a; never a pointer before the image */
                    const float *src = xc + iy * s->w + a * s->sw + kx * s->dw - s->pl;
                    if (s->sw == 1)
                        memcpy(d + (a - ox0), src, sizeof(float) * (size_t)(b - a));
                    else if (s->sw == 2)
                        copy_stride2(d + (a - ox0), src, b - a);
                    else
                        for (int64_t ox = a; ox < b; ox++) d[ox - ox0] = src[(ox - a) * s->sw];
                }
                for (int64_t ox = b; ox < ox1; ox++) d[ox - ox0] = 0.0f;
            }
            p += ox1 - ox0;
        }
    }
}

void conv_pack_b_panels(const conv_shape *s, const gemm_kernel *k, const float *x, int64_t p0,
                        int64_t np, float *dst) {
    const int nr = k->nr;
    const int64_t kdim = conv_kdim(s), plane = s->h * s->w, sw = s->sw;
    /* A panel's pixels as runs within one output row (NR <= 64, so at most 64 runs): run r is
     * panel columns [j0[r], j1[r]), reading input row iy[r] + ky*dh from column ix[r] + kx*dw at
     * stride sw. Per tap, each run is zeros, a strided copy, zeros. */
    int64_t rj0[64], rj1[64], riy[64], rix[64];
    for (int64_t c0 = 0; c0 < np; c0 += nr, dst += kdim * nr) {
        const int cols = np - c0 < nr ? (int)(np - c0) : nr;
        int runs = 0;
        for (int j = 0; j < cols;) {
            const int64_t p = p0 + c0 + j, oy = p / s->ow, ox = p % s->ow;
            int len = (int)(s->ow - ox < cols - j ? s->ow - ox : cols - j);
            rj0[runs] = j;
            rj1[runs] = j + len;
            riy[runs] = oy * s->sh - s->pt;
            rix[runs] = ox * sw - s->pl;
            runs++;
            j += len;
        }
        int64_t kk = 0;
        for (int64_t c = 0; c < s->cg; c++) {
            const float *xc = x + c * plane;
            for (int64_t ky = 0; ky < s->kh; ky++)
                for (int64_t kx = 0; kx < s->kw; kx++, kk++) {
                    float *d = dst + kk * nr;
                    const int64_t dy = ky * s->dh, dx = kx * s->dw;
                    for (int r = 0; r < runs; r++) {
                        float *dr = d + rj0[r];
                        const int64_t n = rj1[r] - rj0[r], iy = riy[r] + dy;
                        if (iy < 0 || iy >= s->h) {
                            memset(dr, 0, sizeof(float) * (size_t)n);
                            continue;
                        }
                        int64_t lo, hi;
                        valid_cols(n, sw, rix[r] + dx, s->w, &lo, &hi);
                        for (int64_t j = 0; j < lo; j++) dr[j] = 0.0f;
                        if (hi > lo) {
                            /* the first valid tap; never form a pointer before the image */
                            const float *src = xc + iy * s->w + rix[r] + dx + lo * sw;
                            if (sw == 1)
                                memcpy(dr + lo, src, sizeof(float) * (size_t)(hi - lo));
                            else if (sw == 2)
                                copy_stride2(dr + lo, src, hi - lo);
                            else
                                for (int64_t j = 0; j < hi - lo; j++) dr[lo + j] = src[j * sw];
                        }
                        for (int64_t j = hi; j < n; j++) dr[j] = 0.0f;
                    }
                    for (int j = cols; j < nr; j++) d[j] = 0.0f;
                }
        }
    }
}

bool conv_fuses(const kern_node *kn) {
    const ir_fusion *f = kn->node->fusion;
    if (!f) return true;
    return kern_fusion_gemm_ok(f) && f->bias < 0 && f->residual < kn->n_in;
}

const float *conv_fused_residual(const ir_fusion *f, const op_tensor *const *in, int n_in) {
    if (!f || f->residual < 0 || f->residual >= n_in || !in[f->residual]) return NULL;
    return in[f->residual]->data;
}

anvil_status conv_prepare_unsupported(const kern_node *kn, const char *what) {
    return core_err(ANVIL_ERR_INTERNAL, "%s: %s prepared for a node it does not support",
                    ir_node_label(kn->node), what);
}

void conv_row_fusion_init(const kern_node *kn, conv_row_fusion *f) {
    const ir_fusion *fu = kn->node->fusion;
    f->on = fu && conv_fuses(kn);
    f->residual = f->on ? fu->residual : -1;
    f->ep = kern_fusion_epilogue(f->on ? fu : NULL);
    f->fn = kern_fusion_rows_fn();
}

const float *conv_row_fusion_residual(const conv_row_fusion *f, const op_tensor *const *in,
                                      int n_in) {
    return f->residual >= 0 && f->residual < n_in && in[f->residual] ? in[f->residual]->data : NULL;
}

void conv_row_fusion_apply(const conv_row_fusion *f, const float *res, float *y, int64_t n) {
    gemm_epilogue ep = f->ep;
    if (res) {
        ep.r = res;
        ep.cs_r = 1;
        ep.beta = 1.0f;
    }
    f->fn(&ep, y, n, 0, 0, 1, n);
}

/* The last vector of a row may read CONV_DW_PAD_FLOATS past the last output's taps; at stride 2
 * that is kx/2 < 16 past the outputs rounded up to whole vectors, in each half. Padded column q
 * holds input column q - pl; columns past the row are not copied. */
void conv_dw_geom_init(const conv_shape *s, conv_dw_geom *g) {
    *g = (conv_dw_geom){.h = s->h,
                        .w = s->w,
                        .pt = s->pt,
                        .sy = s->sh,
                        .sx = s->sw,
                        .kh = s->kh,
                        .kw = s->kw,
                        .ow = s->ow};
    if (s->sw == 1) {
        g->ldp = ((s->ow - 1) + s->kw + CONV_DW_PAD_FLOATS + 15) / 16 * 16;
    } else {
        g->half = (s->ow + 15) / 16 * 16 + 16;
        g->ldp = 2 * g->half;
    }
    g->q0 = s->pl < g->ldp ? s->pl : g->ldp;
    g->n = s->pl + s->w > g->ldp ? g->ldp - g->q0 : s->w;
}
