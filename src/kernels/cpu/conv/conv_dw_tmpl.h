/* The depthwise band kernel, written once over the vector primitives listed in conv_rows_tmpl.h
 * (which the including file includes first, with conv_vec_<isa>.h) and instantiated per ISA
 * (conv_dw_avx512.c, conv_dw_avx2.c). The including file also defines DW_BAND_FN, the name of the
 * conv_dw_band_fn to define.
 *
 * Vectors run along the output width, and the padded rows (conv_dw_geom in conv.h) make
 * every tap load unconditional and, at stride 2, contiguous. A block computes `rows` output rows
 * of `nv` vectors: rows x nv independent FMA chains hide the FMA latency, and with stride 1 the
 * rows share the input rows they load. The block shape follows the width so a narrow plane still
 * gets enough chains: 2 x 4 vectors, or 2 x 1 for rows of up to one vector (measured per plane
 * on Zen 4, AVX-512, 3x3, fill included: 14 wide 2x1 120 ns vs 8x1 146 vs 6x1 127). 4 x 2 for
 * rows of two vectors was faster still (28 wide: 380 vs 450 ns) but cost more compile time than
 * it was worth once AVX-512 took planes up to 28 wide to its channel-lanes kernel
 * (conv_dw_avx512.c). kh, kw, sx, rows and nv are compile-time constants in every instance. */

#define DW_I __attribute__((always_inline)) static inline

DW_I void dw_block(const float *restrict xp, int64_t ldp, int64_t half, int64_t sy,
                   const float *restrict w, float bias, float *restrict y, int64_t ldy, int64_t ox,
                   int64_t n_last, const int kh, const int kw, const int sx, const int rows,
                   const int nv) {
    dw_v acc[8][4];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = DW_BCAST(bias);
#pragma GCC unroll 5
    for (int ky = 0; ky < kh; ky++)
#pragma GCC unroll 5
        for (int kx = 0; kx < kw; kx++) {
            const dw_v wv = DW_BCAST(w[ky * kw + kx]);
            /* stride 2: column 2*ox + kx sits at ox + kx/2 of the even or the odd half */
            const int64_t col = sx == 1 ? ox + kx : (kx & 1) * half + ox + kx / 2;
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const float *src = xp + (r * sy + ky) * ldp + col;
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++)
                    acc[r][v] = DW_FMA(wv, DW_LOAD(src + v * DW_VL), acc[r][v]);
            }
        }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *d = y + r * ldy + ox + v * DW_VL;
            if (n_last < DW_VL && v == nv - 1)
                DW_STORE_N(d, acc[r][v], n_last);
            else
                DW_STORE(d, acc[r][v]);
        }
}

/* `rows` output rows from oy: blocks of nv vectors, then the rest of the width a vector at a
 * time (the last one masked). Few block shapes on purpose: each is unrolled for every one of the
 * 8 kernel cases below, and with a masked nv-vector tail and a 4 x 2 block as well this file
 * took 2m23s instead of 1m19s to compile under clang's sanitizers (no faster at 56 wide). */
DW_I void dw_strip(const float *xp, int64_t ldp, int64_t half, int64_t sy, const float *w,
                   float bias, float *y, int64_t oy, int64_t ow, const int kh, const int kw,
                   const int sx, const int rows, const int nv) {
    const float *x0 = xp + oy * sy * ldp;
    float *y0 = y + oy * ow;
    int64_t ox = 0;
    for (; ox + nv * DW_VL <= ow; ox += nv * DW_VL)
        dw_block(x0, ldp, half, sy, w, bias, y0, ow, ox, DW_VL, kh, kw, sx, rows, nv);
    for (; ox < ow; ox += DW_VL)
        dw_block(x0, ldp, half, sy, w, bias, y0, ow, ox, ow - ox < DW_VL ? ow - ox : DW_VL, kh, kw,
                 sx, rows, 1);
}

DW_I void dw_band(const float *xp, int64_t ldp, int64_t half, int64_t sy, const float *w,
                  float bias, float *y, int64_t oh, int64_t ow, const int kh, const int kw,
                  const int sx) {
    int64_t oy = 0;
    if (ow <= DW_VL) {
        for (; oy + 2 <= oh; oy += 2)
            dw_strip(xp, ldp, half, sy, w, bias, y, oy, ow, kh, kw, sx, 2, 1);
        if (oy < oh) dw_strip(xp, ldp, half, sy, w, bias, y, oy, ow, kh, kw, sx, 1, 1);
    } else {
        for (; oy + 2 <= oh; oy += 2)
            dw_strip(xp, ldp, half, sy, w, bias, y, oy, ow, kh, kw, sx, 2, 4);
        if (oy < oh) dw_strip(xp, ldp, half, sy, w, bias, y, oy, ow, kh, kw, sx, 1, 4);
    }
}

/* Fills the padded rows output rows [r0, r0 + nr) read, then computes them (see conv.h). Only
 * the columns input lands in are written (rows in the padding are zeroed whole), so the pad
 * columns keep the zeros the caller put there once: a memset per pad per row and a memcpy per
 * row (libc calls on rows of 7..112 floats) were 13% of MobileNetV2's time (perf, 1 thread). */
void DW_BAND_FN(const conv_dw_geom *g, const float *x, float *xb, const float *w, float bias,
                float *y, int64_t r0, int64_t nr) {
    const int64_t rows = (nr - 1) * g->sy + g->kh;
    for (int64_t i = 0; i < rows; i++) {
        const int64_t iy = r0 * g->sy + i - g->pt;
        dw_fill_row(xb + i * g->ldp, g->ldp, iy < 0 || iy >= g->h ? NULL : x + iy * g->w, g->n,
                    g->q0, g->half);
    }
#define DW_CASE(KH, KW, SX)                                                                        \
    if (g->kh == KH && g->kw == KW && g->sx == SX) {                                               \
        dw_band(xb, g->ldp, g->half, g->sy, w, bias, y, nr, g->ow, KH, KW, SX);                    \
        return;                                                                                    \
    }
    CONV_DW_INSTANCES(DW_CASE)
#undef DW_CASE
}

#undef DW_I
