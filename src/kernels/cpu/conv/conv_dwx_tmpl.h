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

/* PX output pixels from ox0 times CV vectors of channels (x, wp, bp, y at the first channel;
 * when masked, only the lanes of vector v in m[v] are read or written, of every operand), taps ky
 * in [ky0, ky1) and kx in [kx0, kx1), all inside the input: PX * CV independent FMA chains. */
DWX_I void dwxn_block(const conv_dwx_last *g, const float *x, const float *wp, const float *bp,
                      const dw_m *m, float *y, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ox0,
                      int64_t kx0, int64_t kx1, const int PX, const int CV, const int masked) {
    dw_v acc[8][4];
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++)
#pragma GCC unroll 4
        for (int v = 0; v < CV; v++)
            acc[p][v] = masked ? DW_LOADM(bp + v * DW_VL, m[v]) : DW_LOAD(bp + v * DW_VL);
    const int64_t c = g->c, pstep = g->sw * c, xstep = g->dw * c;
    const int64_t ix0 = ox0 * g->sw - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const int64_t row = ((iy0 + ky * g->dh) * g->w + ix0) * c;
        const float *wr = wp + ky * g->kw * g->vpad;
        for (int64_t kx = kx0; kx < kx1; kx++) {
            const float *src = x + (row + kx * xstep);
#pragma GCC unroll 4
            for (int v = 0; v < CV; v++) {
                /* masked: the vectors past vpad are not there to read */
                const float *wq = wr + kx * g->vpad + v * DW_VL;
                const dw_v wv = masked ? DW_LOADM(wq, m[v]) : DW_LOAD(wq);
#pragma GCC unroll 8
                for (int p = 0; p < PX; p++) {
                    const float *q = src + p * pstep + v * DW_VL;
                    acc[p][v] = DW_FMA(wv, masked ? DW_LOADM(q, m[v]) : DW_LOAD(q), acc[p][v]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++)
#pragma GCC unroll 4
        for (int v = 0; v < CV; v++) {
            float *d = y + (ox0 + p) * c + v * DW_VL;
            if (masked)
                DW_STOREM(d, acc[p][v], m[v]);
            else
                DW_STORE(d, acc[p][v]);
        }
}

/* Pixels per block of the windowed kernel below: its window of PX + KW - 1 vectors, PX
 * accumulators and a weight fit the registers (32 with AVX-512, 16 with AVX2) up to KW = 7. */
#define DWXW_PX (DW_VL == 16 ? 8 : 4)

/* The interior block at stride 1 and dilation 1 with KW (3, 5 or 7) known: per kernel row, the
 * PX + KW - 1 input vectors are loaded once and shared by the pixels that read them (ConvNeXt's
 * 7x7: 14 loads per 56 FMAs instead of 63). */
DWX_I void dwxw_block(const conv_dwx_last *g, const float *x, const float *wp, const float *bp,
                      dw_m m, float *y, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ox0,
                      const int KW, const int masked) {
    enum { PX = DWXW_PX };
    dw_v acc[PX];
    const dw_v b = masked ? DW_LOADM(bp, m) : DW_LOAD(bp);
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++) acc[p] = b;
    const int64_t c = g->c, ix0 = ox0 - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *src = x + ((iy0 + ky) * g->w + ix0) * c;
        const float *wr = wp + ky * KW * g->vpad;
        dw_v v[PX + 6];
#pragma GCC unroll 14
        for (int j = 0; j < PX + KW - 1; j++)
            v[j] = masked ? DW_LOADM(src + j * c, m) : DW_LOAD(src + j * c);
#pragma GCC unroll 7
        for (int kx = 0; kx < KW; kx++) {
            const dw_v wv = masked ? DW_LOADM(wr + kx * g->vpad, m) : DW_LOAD(wr + kx * g->vpad);
#pragma GCC unroll 8
            for (int p = 0; p < PX; p++) acc[p] = DW_FMA(wv, v[p + kx], acc[p]);
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

/* Whether g's interior takes the windowed kernel. */
static inline bool dwxw_applies(const conv_dwx_last *g) {
    return g->sw == 1 && g->dw == 1 && (g->kw == 3 || g->kw == 5 || g->kw == 7);
}

/* Interior pixels [ox, ox + DWXW_PX) over every vector of channels through the windowed kernel. */
DWX_I void dwxw_pixels(const conv_dwx_last *g, const float *x, const float *wp, const float *bp,
                       float *y, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ox, const int KW) {
    int64_t c0 = 0;
    for (; c0 + DW_VL <= g->c; c0 += DW_VL)
        dwxw_block(g, x + c0, wp + c0, bp + c0, DW_MASK(DW_VL), y + c0, iy0, ky0, ky1, ox, KW, 0);
    if (c0 < g->c)
        dwxw_block(g, x + c0, wp + c0, bp + c0, DW_MASK(g->c - c0), y + c0, iy0, ky0, ky1, ox, KW,
                   1);
}

/* The lanes of the CV vectors of channels from c0 that hold channels (none past c). */
DWX_I void dwxn_masks(int64_t c, int64_t c0, dw_m *m, const int CV) {
#pragma GCC unroll 4
    for (int v = 0; v < CV; v++) {
        const int64_t left = c - c0 - v * DW_VL;
        m[v] = DW_MASK(left < 0 ? 0 : left);
    }
}

/* PX pixels from ox0 over every vector of channels: one at a time for blocks of pixels (PX
 * chains), CV at a time for a single pixel (a border pixel's or a remainder's chains are its
 * channel vectors); the last vectors masked. */
DWX_I void dwxn_pixels(const conv_dwx_last *g, const float *x, const float *wp, const float *bp,
                       float *y, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ox0, int64_t kx0,
                       int64_t kx1, const int PX, const int CV) {
    dw_m m[4];
    int64_t c0 = 0;
    dwxn_masks(g->c, 0, m, CV);
    for (; c0 + CV * DW_VL <= g->c; c0 += CV * DW_VL)
        dwxn_block(g, x + c0, wp + c0, bp + c0, m, y + c0, iy0, ky0, ky1, ox0, kx0, kx1, PX, CV, 0);
    if (c0 < g->c) {
        dwxn_masks(g->c, c0, m, CV);
        dwxn_block(g, x + c0, wp + c0, bp + c0, m, y + c0, iy0, ky0, ky1, ox0, kx0, kx1, PX, CV, 1);
    }
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

/* Interior pixels 8 at a time, then 4 (the channels' vectors inner, so a block's input rows stay
 * in L1 for the next channels), border pixels and the last few one at a time, border pixels
 * with only their taps inside. */
void DWX_ROW_FN(const conv_dwx_last *g, const float *x, const float *wp, const float *bp, float *y,
                int64_t oy) {
    const int64_t iy0 = oy * g->sh - g->pt;
    int64_t ky0, ky1, kx0, kx1;
    dwx_range(iy0, g->h, g->dh, g->kh, &ky0, &ky1);
    int64_t ox = 0;
    for (; ox < g->ox_lo; ox++) {
        dwx_range(ox * g->sw - g->pl, g->w, g->dw, g->kw, &kx0, &kx1);
        dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, kx0, kx1, 1, 4);
    }
    if (dwxw_applies(g))
        for (; ox + DWXW_PX <= g->ox_hi; ox += DWXW_PX) {
            if (g->kw == 3)
                dwxw_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 3);
            else if (g->kw == 5)
                dwxw_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 5);
            else
                dwxw_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 7);
        }
    for (; ox + 8 <= g->ox_hi; ox += 8)
        dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 0, g->kw, 8, 1);
    for (; ox + 4 <= g->ox_hi; ox += 4)
        dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 0, g->kw, 4, 1);
    for (; ox < g->ox_hi; ox++) dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, 0, g->kw, 1, 4);
    for (; ox < g->ow; ox++) {
        dwx_range(ox * g->sw - g->pl, g->w, g->dw, g->kw, &kx0, &kx1);
        dwxn_pixels(g, x, wp, bp, y, iy0, ky0, ky1, ox, kx0, kx1, 1, 4);
    }
}

#undef DWX_I
