/* The general depthwise kernels (conv_dwx.h), written once over the vector primitives of
 * conv_vec_<isa>.h and the padded-row copy of conv_rows_tmpl.h (which the including file includes
 * first) and instantiated per ISA (conv_dwx_avx512.c, conv_dwx_avx2.c). The including file
 * defines DWX_BAND_FN and DWX_ROW_FN, the names of the conv_dwx_band_fn and conv_dwx_row_fn to
 * define.
 *
 * The taps come from a table (NCHW) or two runtime loops (NHWC), not from compile-time kernel
 * sizes: a block's rows x vectors (NCHW) or pixels (NHWC) are the compile-time part, and they
 * give the independent FMA chains. So every kernel size, stride and dilation runs the same few
 * instances, and the file compiles in seconds. */

#define DWX_I __attribute__((always_inline)) static inline

/* ---- NCHW: bands of padded rows ------------------------------------------------------------ */

/* rows x nv vectors of outputs whose first padded float is x0 (row r's at x0 + r * rstep); the
 * last vector keeps n_last lanes. */
DWX_I void dwx_block(const float *restrict x0, int64_t rstep, const int64_t *restrict off,
                     int64_t ntaps, const float *restrict w, float bias, float *restrict y,
                     int64_t ldy, int64_t n_last, const int rows, const int nv) {
    dw_v acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = DW_BCAST(bias);
    for (int64_t t = 0; t < ntaps; t++) {
        const dw_v wv = DW_BCAST(w[t]);
        const float *p = x0 + off[t];
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[r][v] = DW_FMA(wv, DW_LOAD(p + r * rstep + v * DW_VL), acc[r][v]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *d = y + r * ldy + v * DW_VL;
            if (v == nv - 1 && n_last < DW_VL)
                DW_STORE_N(d, acc[r][v], n_last);
            else
                DW_STORE(d, acc[r][v]);
        }
}

/* `rows` output rows: blocks of 4 vectors, then one block of the 1..3 vectors left (each block's
 * last vector masked to the row's end). */
DWX_I void dwx_strip(const conv_dwx_rows *g, const float *x0, const float *w, float bias, float *y,
                     const int rows) {
    const int64_t rstep = g->sy * g->ldp, ow = g->ow;
    int64_t ox = 0;
    for (; ow - ox > 3 * DW_VL; ox += 4 * DW_VL) {
        const int64_t last = ow - ox - 3 * DW_VL;
        dwx_block(x0 + ox, rstep, g->off, g->ntaps, w, bias, y + ox, ow,
                  last < DW_VL ? last : DW_VL, rows, 4);
    }
    const int64_t left = ow - ox, nv = (left + DW_VL - 1) / DW_VL, last = left - (nv - 1) * DW_VL;
    if (nv == 3)
        dwx_block(x0 + ox, rstep, g->off, g->ntaps, w, bias, y + ox, ow, last, rows, 3);
    else if (nv == 2)
        dwx_block(x0 + ox, rstep, g->off, g->ntaps, w, bias, y + ox, ow, last, rows, 2);
    else if (nv == 1)
        dwx_block(x0 + ox, rstep, g->off, g->ntaps, w, bias, y + ox, ow, last, rows, 1);
}

/* Copies n input floats into a padded row of sx >= 3 phases from padded column q0; stride 3 and
 * more are rare enough in depthwise convs for a scalar copy. */
DWX_I void dwx_fill_phases(float *restrict row, const float *restrict src, int64_t n, int64_t q0,
                           int64_t sx, int64_t lp) {
    for (int64_t f = 0; f < sx; f++) {
        float *d = row + f * lp;
        for (int64_t k = ((f - q0) % sx + sx) % sx; k < n; k += sx) d[(q0 + k) / sx] = src[k];
    }
}

void DWX_BAND_FN(const conv_dwx_rows *g, const float *x, float *xb, const float *w, float bias,
                 float *y, int64_t r0, int64_t nr) {
    const int64_t rows = (nr - 1) * g->sy + g->ext;
    for (int64_t i = 0; i < rows; i++) {
        const int64_t iy = r0 * g->sy + i - g->pt;
        float *row = xb + i * g->ldp;
        const float *src = iy < 0 || iy >= g->h ? NULL : x + iy * g->w;
        if (src && g->sx > 2)
            dwx_fill_phases(row, src, g->n, g->q0, g->sx, g->lp);
        else
            dw_fill_row(row, g->ldp, src, g->n, g->q0, g->sx == 2 ? g->lp : 0);
    }
    /* Rows per strip by width, for enough independent FMA chains: 4 x 1-2 vectors, 2 x 3-4. */
    const int64_t rstep = g->sy * g->ldp;
    int64_t oy = 0;
    if (g->ow <= 2 * DW_VL)
        for (; oy + 4 <= nr; oy += 4) dwx_strip(g, xb + oy * rstep, w, bias, y + oy * g->ow, 4);
    for (; oy + 2 <= nr; oy += 2) dwx_strip(g, xb + oy * rstep, w, bias, y + oy * g->ow, 2);
    if (oy < nr) dwx_strip(g, xb + oy * rstep, w, bias, y + oy * g->ow, 1);
}

/* ---- NHWC: channels in the lanes ----------------------------------------------------------- */

/* PX output pixels from ox0 of one vector of channels (x, wp, y at its first channel; lanes m
 * when masked), taps ky in [ky0, ky1) and kx in [kx0, kx1), all inside the input. */
DWX_I void dwxn_block(const conv_dwx_last *g, const float *x, const float *wp, dw_v bias, dw_m m,
                      float *y, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ox0, int64_t kx0,
                      int64_t kx1, const int PX, const int masked) {
    dw_v acc[8];
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++) acc[p] = bias;
    const int64_t c = g->c, pstep = g->sw * c, xstep = g->dw * c;
    const int64_t ix0 = ox0 * g->sw - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const int64_t row = ((iy0 + ky * g->dh) * g->w + ix0) * c;
        const float *wr = wp + ky * g->kw * g->vpad;
        for (int64_t kx = kx0; kx < kx1; kx++) {
            const dw_v wv = DW_LOAD(wr + kx * g->vpad);
            const float *src = x + (row + kx * xstep);
#pragma GCC unroll 8
            for (int p = 0; p < PX; p++)
                acc[p] = DW_FMA(
                    wv, masked ? DW_LOADM(src + p * pstep, m) : DW_LOAD(src + p * pstep), acc[p]);
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++) {
        if (masked)
            DW_STOREM(y + (ox0 + p) * c, acc[p], m);
        else
            DW_STORE(y + (ox0 + p) * c, acc[p]);
    }
}

/* PX pixels from ox0 over every vector of channels (the last one masked). */
DWX_I void dwxn_pixels(const conv_dwx_last *g, const float *x, const float *wp, const float *bp,
                       float *y, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ox0, int64_t kx0,
                       int64_t kx1, const int PX) {
    int64_t c0 = 0;
    for (; c0 + DW_VL <= g->c; c0 += DW_VL)
        dwxn_block(g, x + c0, wp + c0, DW_LOAD(bp + c0), DW_MASK(DW_VL), y + c0, iy0, ky0, ky1, ox0,
                   kx0, kx1, PX, 0);
    if (c0 < g->c)
        dwxn_block(g, x + c0, wp + c0, DW_LOAD(bp + c0), DW_MASK(g->c - c0), y + c0, iy0, ky0, ky1,
                   ox0, kx0, kx1, PX, 1);
}

/* The taps [k0, k1) of a kernel axis that land inside [0, n) from input position i0 (dilation
 * d, k taps). */
static inline void dwx_range(int64_t i0, int64_t n, int64_t d, int64_t k, int64_t *k0,
                             int64_t *k1) {
    *k0 = i0 < 0 ? (-i0 + d - 1) / d : 0;
    const int64_t room = n - i0; /* taps kx with i0 + kx * d < n */
    *k1 = room <= 0 ? 0 : (room + d - 1) / d;
    if (*k1 > k) *k1 = k;
    if (*k0 > *k1) *k0 = *k1;
}

/* Interior pixels 8 at a time (the channels' vectors inner, so a block's input rows stay in L1
 * for the next channels), border pixels one at a time with only their taps inside. */
void DWX_ROW_FN(const conv_dwx_last *g, const float *x, const float *wp, const float *bp, float *y,
                int64_t oy) {
    const int64_t iy0 = oy * g->sh - g->pt;
    int64_t ky0, ky1, kx0, kx1;
    dwx_range(iy0, g->h, g->dh, g->kh, &ky0, &ky1);
    int64_t ox = 0;
    for (; ox < g->ox_lo; ox++) {
        dwx_range(ox * g->sw - g->pl, g->w, g->dw, g->kw, &kx0, &kx1);
        dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, kx0, kx1, 1);
    }
    for (; ox + 8 <= g->ox_hi; ox += 8)
        dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 0, g->kw, 8);
    for (; ox < g->ox_hi; ox++) dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 0, g->kw, 1);
    for (; ox < g->ow; ox++) {
        dwx_range(ox * g->sw - g->pl, g->w, g->dw, g->kw, &kx0, &kx1);
        dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, kx0, kx1, 1);
    }
}

#undef DWX_I
