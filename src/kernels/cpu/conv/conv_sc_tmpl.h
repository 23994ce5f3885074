/* The few-input-channels conv kernel (conv_sc_geom in conv.h), written once over the vector
 * primitives of conv_rows_tmpl.h and instantiated per ISA (conv_sc_avx512.c, conv_sc_avx2.c). The
 * including file defines SC_MB (output channels per block) and SC_BAND_FN (the name of the
 * conv_sc_band_fn to define).
 *
 * A block is SC_MB output channels x nv vectors of one output row: SC_MB * nv accumulators that
 * stay in registers over all c * kh * kw taps. Each tap loads nv input vectors once and
 * broadcasts SC_MB weights (contiguous in the packed layout, so one cache line serves all of
 * them): 3 + 8 loads per 24 FMAs on AVX-512, 3 + 4 per 12 on AVX2, the register file's limit
 * (32 and 16 registers). The taps' loop bounds stay run-time values, so one instance serves every
 * kernel size; only the stride and nv are constants. */

#define SC_I __attribute__((always_inline)) static inline

/* Output row `row0` (the band row pointer of its first tap row, channel 0) for output channels
 * [0, mv) of the block whose packed weights are wp and whose first output channel's plane row is
 * y; columns [ox, ox + nv * DW_VL), of which only n_last lanes of the last vector are stored. */
SC_I void sc_block(const conv_sc_geom *g, const float *restrict row0, const float *restrict wp,
                   const float *restrict bias, int mv, float *restrict y, int64_t ox,
                   int64_t n_last, const int sx, const int nv) {
    const int64_t ldp = g->g.ldp, half = g->g.half, chan = g->band_rows * ldp;
    const int kh = (int)g->g.kh, kw = (int)g->g.kw;
    dw_v acc[SC_MB][3];
#pragma GCC unroll 8
    for (int m = 0; m < SC_MB; m++) {
        const dw_v b = DW_BCAST(bias && m < mv ? bias[m] : 0.0f);
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) acc[m][v] = b;
    }
    const float *wk = wp;
    for (int64_t ci = 0; ci < g->c; ci++)
        for (int ky = 0; ky < kh; ky++) {
            const float *row = row0 + ci * chan + ky * ldp;
            for (int kx = 0; kx < kw; kx++, wk += SC_MB) {
                /* stride 2: column 2*ox + kx sits at ox + kx/2 of the even or the odd half */
                const float *src = row + (sx == 1 ? ox + kx : (kx & 1) * half + ox + kx / 2);
                dw_v in[3];
#pragma GCC unroll 3
                for (int v = 0; v < nv; v++) in[v] = DW_LOAD(src + v * DW_VL);
#pragma GCC unroll 8
                for (int m = 0; m < SC_MB; m++) {
                    const dw_v wv = DW_BCAST(wk[m]);
#pragma GCC unroll 3
                    for (int v = 0; v < nv; v++) acc[m][v] = DW_FMA(wv, in[v], acc[m][v]);
                }
            }
        }
#pragma GCC unroll 8
    for (int m = 0; m < SC_MB; m++) {
        if (m >= mv) break;
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) {
            float *d = y + m * g->ohw + ox + v * DW_VL;
            if (v == nv - 1 && n_last < DW_VL)
                DW_STORE_N(d, acc[m][v], n_last);
            else
                DW_STORE(d, acc[m][v]);
        }
    }
}

/* One output row of the blocks [b0, b1): 3-vector blocks, then the rest a vector at a time. */
SC_I void sc_row(const conv_sc_geom *g, const float *row0, const float *wp, const float *bias,
                 float *y, int64_t oy, int64_t b0, int64_t b1, const int sx) {
    const int64_t ow = g->g.ow, wblock = g->c * g->g.kh * g->g.kw * SC_MB;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t m0 = b * SC_MB;
        const int mv = (int)(g->m - m0 < SC_MB ? g->m - m0 : SC_MB);
        const float *wb = wp + b * wblock, *bb = bias ? bias + m0 : NULL;
        float *yb = y + m0 * g->ohw + oy * ow;
        int64_t ox = 0;
        for (; ox + 3 * DW_VL <= ow; ox += 3 * DW_VL)
            sc_block(g, row0, wb, bb, mv, yb, ox, DW_VL, sx, 3);
        for (; ox < ow; ox += DW_VL)
            sc_block(g, row0, wb, bb, mv, yb, ox, ow - ox < DW_VL ? ow - ox : DW_VL, sx, 1);
    }
}

void SC_BAND_FN(const conv_sc_geom *g, const float *x, float *xb, const float *wp,
                const float *bias, float *y, int64_t r0, int64_t nr, int64_t b0, int64_t b1) {
    const conv_dw_geom *d = &g->g;
    const int64_t rows = (nr - 1) * d->sy + d->kh;
    for (int64_t ci = 0; ci < g->c; ci++)
        for (int64_t i = 0; i < rows; i++) {
            const int64_t iy = r0 * d->sy + i - d->pt;
            dw_fill_row(xb + (ci * g->band_rows + i) * d->ldp, d->ldp,
                        iy < 0 || iy >= d->h ? NULL : x + (ci * d->h + iy) * d->w, d->n, d->q0,
                        d->half);
        }
    for (int64_t oy = r0; oy < r0 + nr; oy++) {
        const float *row0 = xb + (oy - r0) * d->sy * d->ldp;
        if (d->sx == 1)
            sc_row(g, row0, wp, bias, y, oy, b0, b1, 1);
        else
            sc_row(g, row0, wp, bias, y, oy, b0, b1, 2);
    }
}

#undef SC_I
