/* AVX-512 kernel of convnhwc_smallc_direct_avx512 (conv_dw_nhwc.c): a channels-last conv with few
 * input channels (a network's first conv, RGB) computed directly from X.
 *
 * With c*kh*kw = 27 the NHWC im2col + GEMM moved as many bytes as it computed (MobileNetV2's stem:
 * 390 us). Here the output channels (at most 64) are the vector lanes: a block is 8 output pixels
 * (4 where there are more than 2 vectors of channels) by every channel vector, and each tap is one
 * broadcast of an input value per pixel times the tap's weight vectors, so X is read in place and
 * nothing is copied. Pixels whose taps leave the image take the taps one by one. */
#include "conv_layout.h"

#include <immintrin.h>

#define SCN_I __attribute__((always_inline)) static inline

static inline __mmask16 scn_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* PX interior pixels from ox0 of the row at y (NHWC, m channels each); NV vectors of channels. */
SCN_I void scn_block(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                     float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox0, const int NV,
                     const int PX) {
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[p][v] = _mm512_load_ps(bp + v * 16);
    const int64_t c = g->c, ix0 = ox0 * g->sw - g->pl, step = g->sw * c;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *row = x + ((iy0 + ky) * g->w + ix0) * c;
        const float *wr = wp + ky * g->kw * c * g->vpad;
        for (int64_t t = 0; t < g->kw * c; t++) {
            __m512 wv[4];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) wv[v] = _mm512_load_ps(wr + t * g->vpad + v * 16);
#pragma GCC unroll 8
            for (int p = 0; p < PX; p++) {
                const __m512 b = _mm512_set1_ps(row[p * step + t]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) acc[p][v] = _mm512_fmadd_ps(wv[v], b, acc[p][v]);
            }
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < PX; p++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            _mm512_mask_storeu_ps(y + (ox0 + p) * g->m + v * 16, scn_mask(g->m - v * 16),
                                  acc[p][v]);
}

/* One pixel next to the border: taps outside the image skipped. */
static void scn_edge(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                     float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox) {
    const int64_t c = g->c, ix0 = ox * g->sw - g->pl, nv = g->vpad / 16;
    for (int64_t v = 0; v < nv; v++) {
        __m512 acc = _mm512_load_ps(bp + v * 16);
        for (int64_t ky = ky0; ky < ky1; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++) {
                const int64_t ix = ix0 + kx;
                if (ix < 0 || ix >= g->w) continue;
                const float *px = x + ((iy0 + ky) * g->w + ix) * c;
                const float *wt = wp + (ky * g->kw + kx) * c * g->vpad + v * 16;
                for (int64_t ci = 0; ci < c; ci++)
                    acc = _mm512_fmadd_ps(_mm512_load_ps(wt + ci * g->vpad), _mm512_set1_ps(px[ci]),
                                          acc);
            }
        _mm512_mask_storeu_ps(y + ox * g->m + v * 16, scn_mask(g->m - v * 16), acc);
    }
}

SCN_I void scn_row(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                   float *y, int64_t oy, const int NV, const int PX) {
    const int64_t iy0 = oy * g->sh - g->pt;
    const int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = g->h - iy0 < g->kh ? g->h - iy0 : g->kh;
    int64_t ox = 0;
    for (; ox < g->ox_lo; ox++) scn_edge(g, x, wp, bp, y, ky0, ky1, iy0, ox);
    for (; ox + PX <= g->ox_hi; ox += PX) scn_block(g, x, wp, bp, y, ky0, ky1, iy0, ox, NV, PX);
    for (; ox < g->ox_hi; ox++) scn_block(g, x, wp, bp, y, ky0, ky1, iy0, ox, NV, 1);
    for (; ox < g->ow; ox++) scn_edge(g, x, wp, bp, y, ky0, ky1, iy0, ox);
}

void conv_scn_row_avx512(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy) {
    switch (g->vpad / 16) {
    case 1:
        scn_row(g, x, wp, bp, y, oy, 1, 8);
        break;
    case 2:
        scn_row(g, x, wp, bp, y, oy, 2, 8);
        break;
    case 3:
        scn_row(g, x, wp, bp, y, oy, 3, 4);
        break;
    default:
        scn_row(g, x, wp, bp, y, oy, 4, 4);
        break;
    }
}
