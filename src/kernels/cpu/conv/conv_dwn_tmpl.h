/* The channels-last depthwise kernel, written once over the vector primitives of
 * conv_vec_<isa>.h (which the including file includes first, with DWN_ROW_FN naming the
 * conv_last_row_fn to define) and instantiated per ISA (conv_dw_avx512.c, conv_dw_avx2.c).
 *
 * In NHWC a tap of a vector of channels is one contiguous load, at any stride, so the kernel
 * needs no padded copy and no deinterleaving: a block is PX output pixels of one vector of
 * channels, PX independent FMA chains, and each input row of the block is loaded once per tap
 * column and shared by the pixels that read it ((PX - 1) * sx + kw loads per kernel row for
 * PX * kw FMAs). The taps of pixels next to the border are tested one by one; the interior needs
 * no test. kh, kw, sx and PX are compile-time constants in every instance; the channel tail is
 * a masked load and store, so there is no separate tail code. */

#define DWN_I __attribute__((always_inline)) static inline

/* Output pixels [ox0, ox0 + PX) of one vector of channels (mask m) of output row oy; all their
 * taps inside the input columns (rows outside are skipped by the caller's ky range). */
DWN_I void dwn_block(const conv_last_geom *g, const float *x, const float *wp, dw_v bias, dw_m m,
                     float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox0, const int kh,
                     const int kw, const int sx, const int PX) {
    (void)kh;
    dw_v acc[8];
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++) acc[p] = bias;
    const int64_t c = g->c, ix0 = ox0 * sx - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *row = x + ((iy0 + ky) * g->w + ix0) * c;
        const float *wr = wp + ky * kw * g->vpad;
        dw_v v[8 * 2 + 5];
#pragma GCC unroll 21
        for (int j = 0; j < (PX - 1) * sx + kw; j++) v[j] = DW_LOADM(row + j * c, m);
#pragma GCC unroll 5
        for (int kx = 0; kx < kw; kx++) {
            const dw_v wv = DW_LOAD(wr + kx * g->vpad);
#pragma GCC unroll 8
            for (int p = 0; p < PX; p++) acc[p] = DW_FMA(wv, v[p * sx + kx], acc[p]);
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++) DW_STOREM(y + (ox0 + p) * c, acc[p], m);
}

/* One output pixel next to the border: each tap tested. */
DWN_I void dwn_edge(const conv_last_geom *g, const float *x, const float *wp, dw_v bias, dw_m m,
                    float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox, const int kw,
                    const int sx) {
    dw_v acc = bias;
    const int64_t c = g->c, ix0 = ox * sx - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++)
        for (int kx = 0; kx < kw; kx++) {
            const int64_t ix = ix0 + kx;
            if (ix < 0 || ix >= g->w) continue;
            acc = DW_FMA(DW_LOAD(wp + (ky * kw + kx) * g->vpad),
                         DW_LOADM(x + ((iy0 + ky) * g->w + ix) * c, m), acc);
        }
    DW_STOREM(y + ox * c, acc, m);
}

DWN_I void dwn_row(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                   float *y, int64_t oy, const int kh, const int kw, const int sx) {
    const int64_t iy0 = oy * g->sh - g->pt;
    const int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = g->h - iy0 < kh ? g->h - iy0 : kh;
    for (int64_t c0 = 0; c0 < g->c; c0 += DW_VL) {
        const dw_m m = DW_MASK(g->c - c0);
        const dw_v bias = DW_LOAD(bp + c0);
        const float *xc = x + c0, *wc = wp + c0;
        float *yc = y + c0;
        int64_t ox = 0;
        for (; ox < g->ox_lo; ox++) dwn_edge(g, xc, wc, bias, m, yc, ky0, ky1, iy0, ox, kw, sx);
        for (; ox + 8 <= g->ox_hi; ox += 8)
            dwn_block(g, xc, wc, bias, m, yc, ky0, ky1, iy0, ox, kh, kw, sx, 8);
        for (; ox < g->ox_hi; ox++)
            dwn_block(g, xc, wc, bias, m, yc, ky0, ky1, iy0, ox, kh, kw, sx, 1);
        for (; ox < g->ow; ox++) dwn_edge(g, xc, wc, bias, m, yc, ky0, ky1, iy0, ox, kw, sx);
    }
}

void DWN_ROW_FN(const conv_last_geom *g, const float *x, const float *wp, const float *bp, float *y,
                int64_t oy) {
#define DWN_CASE(KH, KW, SX)                                                                       \
    if (g->kh == KH && g->kw == KW && g->sw == SX) {                                               \
        dwn_row(g, x, wp, bp, y, oy, KH, KW, SX);                                                  \
        return;                                                                                    \
    }
    CONV_DW_INSTANCES(DWN_CASE)
#undef DWN_CASE
}

#undef DWN_I
