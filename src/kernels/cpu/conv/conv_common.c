/* Conv geometry from the ir_node (conv_shape_of), the GEMM tile choice and the fusion helpers
 * that look at the node. The pure layout helpers (im2col, implicit-GEMM panel packing, padded
 * rows) are in conv_layout.c, which `anvil compile` copies into the libraries it emits.
 *
 * The window attributes are parsed here rather than through the reference's private helpers
 * (src/ops/nn_common.h is private to the nn ops); the resolved output size is compared with the
 * inferred output shape, so any disagreement with the reference makes the variants decline the
 * node instead of computing something different. */
#include "conv.h"

#include "kernels/fusion.h"

#include <stdio.h>
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
 * where neither pads (M = 512, 2048). The knob conv_tile (ANVIL_CONV_TILE) overrides, for
 * experiments. */
const gemm_kernel *conv_gemm_kernel_forced(const kern_node *kn, const core_hw *hw) {
    const char *force = kern_knobs_of(kn)->conv_tile;
    const gemm_kernel *f = force[0] ? gemm_kernel_find(force) : NULL;
    return f && gemm_kernel_usable(f, hw) ? f : NULL;
}

const gemm_kernel *conv_gemm_kernel(const kern_node *kn, int64_t m, int64_t n, int64_t k,
                                    const core_hw *hw) {
    const gemm_kernel *f = conv_gemm_kernel_forced(kn, hw);
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

/* ---- emitting (anvil compile) ---------------------------------------------------------------- */

anvil_status conv_emit_files_need(kern_emit *e) {
    CORE_TRY(gemm_emit_files_need(e));
    CORE_TRY(e->need(e, "kernels/cpu/conv/conv_layout.c"));
    return e->include(e, "kernels/cpu/conv/conv_layout.h");
}

void conv_emit_shape(kern_emit *e, const char *var, const conv_shape *s) {
    e->code(e,
            "%s = (conv_shape){%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
            "%lld, %lld, %lld, %lld, %lld, %lld, %lld, %s};\n",
            var, (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w,
            (long long)s->m, (long long)s->oh, (long long)s->ow, (long long)s->kh, (long long)s->kw,
            (long long)s->sh, (long long)s->sw, (long long)s->dh, (long long)s->dw,
            (long long)s->pt, (long long)s->pl, (long long)s->group, (long long)s->cg,
            (long long)s->mg, s->has_bias ? "true" : "false");
}

void conv_emit_tile(kern_emit *e, const gemm_kernel *k) {
    /* gemm.h declares no tile: the emitted library compiles only the tiles its code names */
    e->decl(e, "extern const gemm_kernel gemm_kernel_%s;\n", k->name);
}

anvil_status conv_emit_row_fusion(kern_emit *e, const char *var, const conv_row_fusion *f) {
    /* the run-time function is a tile's epilogue (kern_fusion_rows_fn); the emitted code names
     * the same tile's, which the copied GEMM files define */
    char fn[64] = "";
    if (f->fn == gemm_epilogue_apply) snprintf(fn, sizeof fn, "gemm_epilogue_apply");
    for (int i = 0; !*fn && gemm_kernels[i]; i++)
        if (gemm_kernels[i]->epilogue == f->fn) {
            conv_emit_tile(e, gemm_kernels[i]);
            snprintf(fn, sizeof fn, "gemm_kernel_%s.epilogue", gemm_kernels[i]->name);
        }
    if (!*fn)
        return core_err(ANVIL_ERR_UNSUPPORTED, "a conv's fused epilogue runs a function that no "
                                               "GEMM tile names");
    char ep[80];
    snprintf(ep, sizeof ep, "%s_ep", var);
    kern_emit_epilogue(e, ep, &f->ep, NULL, NULL, NULL);
    e->code(e, "const conv_row_fusion %s = {%s, %d, %s, %s};\n", var, f->on ? "true" : "false",
            f->residual, ep, fn);
    return ANVIL_OK;
}

anvil_status conv_emit_direct_files(kern_emit *e) {
    static const char *const files[] = {
        "kernels/cpu/conv/conv_direct_run.c", "kernels/cpu/conv/conv_dwx.h",
        "kernels/cpu/conv/conv_vec_avx512.h", "kernels/cpu/conv/conv_vec_avx2.h",
        "kernels/cpu/conv/conv_rows_tmpl.h",  "kernels/cpu/conv/conv_dw_tmpl.h",
        "kernels/cpu/conv/conv_dwn_tmpl.h",   "kernels/cpu/conv/conv_dwx_tmpl.h"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) CORE_TRY(e->need(e, files[i]));
    return ANVIL_OK;
}

const char *conv_emit_in(kern_emit *e, int i, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", i < 0 ? "NULL" : e->in(e, i));
    return buf;
}

anvil_status conv_emit_packed(kern_emit *e, const char *var, const gemm_packed *pk, int64_t n,
                              bool is_a) {
    if (n < 1) return core_err(ANVIL_ERR_UNSUPPORTED, "a conv with no packed operand");
    const gemm_kernel *k = pk[0].kernel;
    const int64_t rows = pk[0].rows, cols = pk[0].cols;
    const int64_t width = is_a ? k->mr : k->nr, across = is_a ? rows : cols;
    /* 32-bit slots: a bf16 tile's panels hold pairs along k */
    const int64_t depth = gemm_slots(k, is_a ? cols : rows);
    const size_t floats = (size_t)((across + width - 1) / width * width * depth),
                 stride = (floats + 15) / 16 * 16;
    for (int64_t i = 1; i < n; i++)
        if (pk[i].kernel != k || pk[i].rows != rows || pk[i].cols != cols)
            return core_err(ANVIL_ERR_UNSUPPORTED, "a conv's packed operands differ in shape");
    float *all = core_calloc(stride * (size_t)n, sizeof(float));
    if (!all) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) memcpy(all + (size_t)i * stride, pk[i].data, floats * 4);
    char blob[96];
    anvil_status rc = e->blob(e, all, stride * (size_t)n * sizeof(float), blob, sizeof blob);
    free(all);
    CORE_TRY(rc);
    conv_emit_tile(e, k);
    e->code(e, "gemm_packed %s[%lld];\n", var, (long long)n);
    e->code(e,
            "for (int64_t i = 0; i < %lld; i++)\n"
            "    %s[i] = (gemm_packed){&gemm_kernel_%s, %lld, %lld, (float *)(%s) + i * %zu};\n",
            (long long)n, var, k->name, (long long)rows, (long long)cols, blob, stride);
    return ANVIL_OK;
}

anvil_status conv_emit_cl_geom(kern_emit *e, const char *var, const conv_dw_cl_geom *c,
                               const int32_t *base) {
    const int64_t ohw8 = (c->ohw + 7) / 8 * 8, n = c->hw + ohw8 + c->ntaps;
    char idx[96];
    CORE_TRY(e->blob(e, base, (size_t)n * sizeof(int32_t), idx, sizeof idx));
    e->code(e,
            "%s = (conv_dw_cl_geom){%lld, %lld, %lld, (const int32_t *)(%s) + %lld, "
            "(const int32_t *)(%s) + %lld, (const int32_t *)(%s) + %lld};\n",
            var, (long long)c->hw, (long long)c->ohw, (long long)c->ntaps, idx,
            (long long)(c->in_at - base), idx, (long long)(c->out_at - base), idx,
            (long long)(c->tap_at - base));
    return ANVIL_OK;
}
