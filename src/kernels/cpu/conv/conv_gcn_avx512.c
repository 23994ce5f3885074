/* AVX-512 kernel of convnhwc_grouped_avx512 (conv_dw_nhwc.c): a channels-last grouped conv with
 * a few channels per group (RegNet's 8, ResNeXt's 4-32) computed directly from X.
 *
 * As a GEMM per group (conv_nhwc_gemm) every group is a problem of mg <= 16 columns and
 * kh*kw*cg rows of K, which no register tile fits; as oneDNN's per-group split (NCHW) it ran at
 * 80-120 GFLOP/s on a Zen 5 core. Here 16 output channels are the vector lanes: a block of them
 * spans 16 / mg whole groups (or lies inside one group), whose input channels are contiguous in
 * an NHWC pixel, so each tap multiplies one broadcast input value per pixel and input channel by
 * a weight vector that is zero in the lanes of the other groups. With mg = 8 half the products
 * are zeros, but every one is a full-width FMA with its broadcast folded into it, and X is read
 * in place: no copy, no permute. A block is up to 12 output pixels (as many accumulators) by one
 * vector of output channels; pixels whose taps leave the image take the taps one by one.
 *
 * Weights are packed per block [block][kh][kw][nin][16] (conv_gcn_pack), nin = conv_gcn_nin. */
#include "conv_layout.h"

#include <immintrin.h>

#define GCN_I __attribute__((always_inline)) static inline

static inline __mmask16 gcn_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* PX interior pixels from ox0 of block b (input channels from x's cb, weights wb). */
GCN_I void gcn_block(const conv_last_geom *g, const float *x, const float *wb, __m512 bias,
                     float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox0, int64_t nin,
                     int64_t ldw, __mmask16 mk, const int PX) {
    __m512 acc[12];
#pragma GCC unroll 12
    for (int p = 0; p < PX; p++) acc[p] = bias;
    const int64_t c = g->c, step = g->sw * c, ix0 = ox0 * g->sw - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *row = x + ((iy0 + ky) * g->w + ix0) * c;
        const float *wr = wb + ky * g->kw * ldw;
        for (int64_t kx = 0; kx < g->kw; kx++, row += c, wr += ldw)
            for (int64_t j = 0; j < nin; j++) {
                const __m512 wv = _mm512_load_ps(wr + j * 16);
#pragma GCC unroll 12
                for (int p = 0; p < PX; p++)
                    acc[p] = _mm512_fmadd_ps(wv, _mm512_set1_ps(row[p * step + j]), acc[p]);
            }
    }
#pragma GCC unroll 12
    for (int p = 0; p < PX; p++) _mm512_mask_storeu_ps(y + (ox0 + p) * g->m, mk, acc[p]);
}

/* One pixel next to the border: taps outside the image skipped. Its products are summed in 8
 * accumulators (by input channel mod 8) so that it is not one chain of dependent FMAs. */
static void gcn_edge(const conv_last_geom *g, const float *x, const float *wb, __m512 bias,
                     float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox, int64_t nin,
                     int64_t ldw, __mmask16 mk) {
    const int64_t c = g->c, ix0 = ox * g->sw - g->pl;
    __m512 acc[8];
    acc[0] = bias;
    for (int u = 1; u < 8; u++) acc[u] = _mm512_setzero_ps();
    for (int64_t ky = ky0; ky < ky1; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            const int64_t ix = ix0 + kx;
            if (ix < 0 || ix >= g->w) continue;
            const float *px = x + ((iy0 + ky) * g->w + ix) * c;
            const float *wt = wb + (ky * g->kw + kx) * ldw;
            int64_t j = 0;
            for (; j + 8 <= nin; j += 8)
#pragma GCC unroll 8
                for (int u = 0; u < 8; u++)
                    acc[u] = _mm512_fmadd_ps(_mm512_load_ps(wt + (j + u) * 16),
                                             _mm512_set1_ps(px[j + u]), acc[u]);
            for (; j < nin; j++)
                acc[j % 8] =
                    _mm512_fmadd_ps(_mm512_load_ps(wt + j * 16), _mm512_set1_ps(px[j]), acc[j % 8]);
        }
    for (int u = 4; u > 0; u /= 2)
        for (int v = 0; v < u; v++) acc[v] = _mm512_add_ps(acc[v], acc[v + u]);
    _mm512_mask_storeu_ps(y + ox * g->m, mk, acc[0]);
}

/* gcn_block for a run-time px in [1, 12], each size its own unrolled copy. */
static void gcn_block_n(const conv_last_geom *g, const float *x, const float *wb, __m512 bias,
                        float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox0, int64_t nin,
                        int64_t ldw, __mmask16 mk, int64_t px) {
    switch (px) {
#define GCN_CASE(n)                                                                                \
    case n:                                                                                        \
        gcn_block(g, x, wb, bias, y, ky0, ky1, iy0, ox0, nin, ldw, mk, n);                         \
        break;
        GCN_CASE(1)
        GCN_CASE(2)
        GCN_CASE(3)
        GCN_CASE(4)
        GCN_CASE(5)
        GCN_CASE(6)
        GCN_CASE(7)
        GCN_CASE(8)
        GCN_CASE(9)
        GCN_CASE(10)
        GCN_CASE(11)
        GCN_CASE(12)
#undef GCN_CASE
    default:
        break;
    }
}

/* The interior columns go in blocks of at most 12 pixels, as even as they divide (26 columns are
 * 9 + 9 + 8, not 12 + 12 + 1 + 1: a block of one pixel is one chain of dependent FMAs). */
void conv_gcn_row_avx512(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy) {
    const int64_t iy0 = oy * g->sh - g->pt;
    const int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = g->h - iy0 < g->kh ? g->h - iy0 : g->kh;
    const int64_t ldw = conv_gcn_nin(g) * 16, nb = g->vpad / 16;
    const int64_t inner = g->ox_hi - g->ox_lo, nblk = (inner + 11) / 12;
    for (int64_t b = 0; b < nb; b++) {
        int64_t cb, nin;
        conv_gcn_span(g, b, &cb, &nin);
        const float *xb = x + cb, *wb = wp + b * g->kh * g->kw * ldw;
        const __m512 bias = _mm512_load_ps(bp + b * 16);
        const __mmask16 mk = gcn_mask(g->m - b * 16);
        float *yb = y + b * 16;
        for (int64_t ox = 0; ox < g->ox_lo; ox++)
            gcn_edge(g, xb, wb, bias, yb, ky0, ky1, iy0, ox, nin, ldw, mk);
        for (int64_t k = 0, ox = g->ox_lo; k < nblk; k++) {
            const int64_t end = g->ox_lo + inner * (k + 1) / nblk;
            gcn_block_n(g, xb, wb, bias, yb, ky0, ky1, iy0, ox, nin, ldw, mk, end - ox);
            ox = end;
        }
        for (int64_t ox = g->ox_hi; ox < g->ow; ox++)
            gcn_edge(g, xb, wb, bias, yb, ky0, ky1, iy0, ox, nin, ldw, mk);
    }
}
