/* The channels-last depthwise kernel, written once over the vector primitives of
 * conv_vec_<isa>.h (which the including file includes first, with DWN_ROW_FN naming the
 * conv_last_row_fn to define) and instantiated per ISA (conv_dw_avx512.c, conv_dw_avx2.c).
 *
 * In NHWC a tap of a vector of channels is one contiguous load, at any stride, so the kernel
 * needs no padded copy and no deinterleaving: a block is PX output pixels of one vector of
 * channels, PX independent FMA chains, and each input row of the block is loaded once per tap
 * column and shared by the pixels that read it ((PX - 1) * sx + kw loads per kernel row for
 * PX * kw FMAs; with dilation dx, (PX - 1) * sx + (kw - 1) * dx + 1). The pixels next to the
 * border and the interior's leftovers (all of a row, on small planes) run their valid taps on
 * several channel vectors at once instead. kh, kw, sx, dx and PX are compile-time constants in
 * every instance (the row dilation is the geometry's dh); the channel tail is a masked load and
 * store, so there is no separate tail code.
 *
 * X's element type is DWN_XT, read into fp32 vectors by DWN_LOADX(p, m): float and DW_LOADM
 * unless the including file defines them (conv_dw16_avx512.c: X stored in bf16, widened as it
 * is loaded; the arithmetic stays fp32). */

#define DWN_I __attribute__((always_inline)) static inline
#ifndef DWN_XT
#define DWN_XT float
#define DWN_LOADX(p, m) DW_LOADM((p), (m))
#endif

/* The geometry's fused activation (conv_last_geom.act_*) on one vector. */
DWN_I dw_v dwn_act(const conv_last_geom *g, dw_v y) {
    if (!g->act_on) return y;
    const dw_v v =
        DW_MIN(DW_BCAST(g->act_hi),
               DW_MAX(DW_BCAST(g->act_lo), DW_FMA(DW_BCAST(g->act_s), y, DW_BCAST(g->act_t))));
    return g->act_mul ? DW_MUL(y, v) : v;
}

/* Output pixels [ox0, ox0 + PX) of one vector of channels (mask m) of output row oy; all their
 * taps inside the input columns (rows outside are skipped by the caller's ky range). */
DWN_I void dwn_block(const conv_last_geom *g, const DWN_XT *x, const float *wp, dw_v bias, dw_m m,
                     float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox0, const int kh,
                     const int kw, const int sx, const int dx, const int PX) {
    (void)kh;
    dw_v acc[8];
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++) acc[p] = bias;
    const int64_t c = g->c, ix0 = ox0 * sx - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const DWN_XT *row = x + ((iy0 + ky * g->dh) * g->w + ix0) * c;
        const float *wr = wp + ky * kw * g->vpad;
        dw_v v[8 * 2 + 5];
#pragma GCC unroll 21
        for (int j = 0; j < (PX - 1) * sx + (kw - 1) * dx + 1; j++)
            v[j] = DWN_LOADX(row + j * c, m);
#pragma GCC unroll 5
        for (int kx = 0; kx < kw; kx++) {
            const dw_v wv = DW_LOAD(wr + kx * g->vpad);
#pragma GCC unroll 8
            for (int p = 0; p < PX; p++) acc[p] = DW_FMA(wv, v[p * sx + kx * dx], acc[p]);
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++) DW_STOREM(y + (ox0 + p) * c, dwn_act(g, acc[p]), m);
}

/* One output pixel next to the border, one vector: each tap tested (wide rows). */
DWN_I void dwn_edge(const conv_last_geom *g, const DWN_XT *x, const float *wp, dw_v bias, dw_m m,
                    float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox, const int kw,
                    const int sx) {
    dw_v acc = bias;
    const int64_t c = g->c, ix0 = ox * sx - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++)
        for (int kx = 0; kx < kw; kx++) {
            const int64_t ix = ix0 + kx * g->dw;
            if (ix < 0 || ix >= g->w) continue;
            acc = DW_FMA(DW_LOAD(wp + (ky * kw + kx) * g->vpad),
                         DWN_LOADX(x + ((iy0 + ky * g->dh) * g->w + ix) * c, m), acc);
        }
    DW_STOREM(y + ox * c, dwn_act(g, acc), m);
}

/* Output pixel ox of CV channel vectors (masks m, all-zero past the channels; bias per vector):
 * the taps in rows [ky0, ky1) and inside the input columns, CV independent FMA chains. */
DWN_I void dwn_pixel(const conv_last_geom *g, const DWN_XT *x, const float *wp, const dw_v *bias,
                     const dw_m *m, float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox,
                     const int kw, const int sx, const int CV) {
    const int64_t c = g->c, ix0 = ox * sx - g->pl, d = g->dw;
    /* the taps kx with 0 <= ix0 + kx d < w */
    const int64_t kx0 = ix0 < 0 ? (-ix0 + d - 1) / d : 0;
    const int64_t left = g->w - ix0 > 0 ? (g->w - ix0 + d - 1) / d : 0;
    const int64_t kx1 = left < kw ? left : kw;
    dw_v acc[4];
#pragma GCC unroll 4
    for (int v = 0; v < CV; v++) acc[v] = bias[v];
    for (int64_t ky = ky0; ky < ky1; ky++)
        for (int64_t kx = kx0; kx < kx1; kx++) {
            const DWN_XT *xp = x + ((iy0 + ky * g->dh) * g->w + ix0 + kx * d) * c;
            const float *wq = wp + (ky * kw + kx) * g->vpad;
#pragma GCC unroll 4
            for (int v = 0; v < CV; v++)
                acc[v] =
                    DW_FMA(DW_LOADM(wq + v * DW_VL, m[v]), DWN_LOADX(xp + v * DW_VL, m[v]), acc[v]);
        }
#pragma GCC unroll 4
    for (int v = 0; v < CV; v++) DW_STOREM(y + ox * c + v * DW_VL, dwn_act(g, acc[v]), m[v]);
}

/* The pixels of [0, lo) and [hi, ow) (the borders, and what is left of the interior after the
 * blocks) of CV channel vectors from channel c0. One pixel's taps on one vector are a single
 * dependent chain, latency-bound, and on small planes (a 5x5 kernel on 7x7) most pixels of a row
 * are here: CV chains at once. */
DWN_I void dwn_pixels(const conv_last_geom *g, const DWN_XT *x, const float *wp, const float *bp,
                      float *y, int64_t c0, int64_t ky0, int64_t ky1, int64_t iy0, int64_t lo,
                      int64_t hi, const int kw, const int sx, const int CV) {
    dw_m m[4];
    dw_v bias[4];
#pragma GCC unroll 4
    for (int v = 0; v < CV; v++) {
        const int64_t left = g->c - c0 - v * DW_VL;
        m[v] = DW_MASK(left > 0 ? left : 0);
        bias[v] = DW_LOADM(bp + c0 + v * DW_VL, m[v]);
    }
    x += c0;
    wp += c0;
    y += c0;
    for (int64_t ox = 0; ox < lo; ox++)
        dwn_pixel(g, x, wp, bias, m, y, ky0, ky1, iy0, ox, kw, sx, CV);
    for (int64_t ox = hi; ox < g->ow; ox++)
        dwn_pixel(g, x, wp, bias, m, y, ky0, ky1, iy0, ox, kw, sx, CV);
}

/* The 8-pixel blocks of the interior up to b8, and a 4-pixel block [b8, b4) if b4 > b8. */
DWN_I void dwn_blocks(const conv_last_geom *g, const DWN_XT *x, const float *wp, const float *bp,
                      dw_m m, float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t b8,
                      int64_t b4, const int kh, const int kw, const int sx, const int dx) {
    const dw_v bias = DW_LOAD(bp);
    for (int64_t ox = g->ox_lo; ox < b8; ox += 8)
        dwn_block(g, x, wp, bias, m, y, ky0, ky1, iy0, ox, kh, kw, sx, dx, 8);
    if (b4 > b8) dwn_block(g, x, wp, bias, m, y, ky0, ky1, iy0, b8, kh, kw, sx, dx, 4);
}

DWN_I void dwn_row(const conv_last_geom *g, const DWN_XT *x, const float *wp, const float *bp,
                   float *y, int64_t oy, const int kh, const int kw, const int sx, const int dx) {
    const int64_t iy0 = oy * g->sh - g->pt, dy = g->dh;
    /* the kernel rows ky with 0 <= iy0 + ky dy < h */
    const int64_t ky0 = iy0 < 0 ? (-iy0 + dy - 1) / dy : 0;
    const int64_t below = g->h - iy0 > 0 ? (g->h - iy0 + dy - 1) / dy : 0;
    const int64_t ky1 = below < kh ? below : kh;
    const int64_t b8 = g->ox_lo + (g->ox_hi - g->ox_lo) / 8 * 8;
    const int64_t b4 = g->ox_hi - b8 >= 4 ? b8 + 4 : b8;
    /* Narrow rows (all the input rows four vectors read fit in L1 with room to spare): the
     * blocks of four channel vectors, then their other pixels four vectors at once, which still
     * find their inputs in L1. */
    if ((int64_t)kh * g->w * 4 * DW_VL * (int64_t)sizeof(float) <= 24576) {
        for (int64_t c0 = 0; c0 < g->c; c0 += 4 * DW_VL) {
            const int64_t end = c0 + 4 * DW_VL < g->c ? c0 + 4 * DW_VL : g->c;
            for (int64_t c1 = c0; c1 < end; c1 += DW_VL)
                dwn_blocks(g, x + c1, wp + c1, bp + c1, DW_MASK(g->c - c1), y + c1, ky0, ky1, iy0,
                           b8, b4, kh, kw, sx, dx);
            const int64_t vecs = (end - c0 + DW_VL - 1) / DW_VL;
            if (vecs >= 3)
                dwn_pixels(g, x, wp, bp, y, c0, ky0, ky1, iy0, g->ox_lo, b4, kw, sx, 4);
            else if (vecs == 2)
                dwn_pixels(g, x, wp, bp, y, c0, ky0, ky1, iy0, g->ox_lo, b4, kw, sx, 2);
            else
                dwn_pixels(g, x, wp, bp, y, c0, ky0, ky1, iy0, g->ox_lo, b4, kw, sx, 1);
        }
        return;
    }
    /* Wide rows: one vector at a time, its border and leftover pixels right after its blocks. */
    for (int64_t c0 = 0; c0 < g->c; c0 += DW_VL) {
        const dw_m m = DW_MASK(g->c - c0);
        const dw_v bias = DW_LOAD(bp + c0);
        const DWN_XT *xc = x + c0;
        const float *wc = wp + c0;
        float *yc = y + c0;
        for (int64_t ox = 0; ox < g->ox_lo; ox++)
            dwn_edge(g, xc, wc, bias, m, yc, ky0, ky1, iy0, ox, kw, sx);
        dwn_blocks(g, xc, wc, bp + c0, m, yc, ky0, ky1, iy0, b8, b4, kh, kw, sx, dx);
        for (int64_t ox = b4; ox < g->ox_hi; ox++)
            dwn_block(g, xc, wc, bias, m, yc, ky0, ky1, iy0, ox, kh, kw, sx, dx, 1);
        for (int64_t ox = g->ox_hi; ox < g->ow; ox++)
            dwn_edge(g, xc, wc, bias, m, yc, ky0, ky1, iy0, ox, kw, sx);
    }
}

void DWN_ROW_FN(const conv_last_geom *g, const DWN_XT *x, const float *wp, const float *bp,
                float *y, int64_t oy) {
#define DWN_CASE(KH, KW, SX, DX)                                                                   \
    if (g->kh == KH && g->kw == KW && g->sw == SX && g->dw == DX) {                                \
        dwn_row(g, x, wp, bp, y, oy, KH, KW, SX, DX);                                              \
        return;                                                                                    \
    }
    CONV_DWN_INSTANCES(DWN_CASE)
#undef DWN_CASE
}

#undef DWN_I
#undef DWN_XT
#undef DWN_LOADX
