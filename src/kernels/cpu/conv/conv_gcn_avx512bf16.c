/* AVX512-BF16 kernel of convnhwc_grouped_avx512bf16 (conv_dw_nhwc.c): conv_gcn_avx512.c's blocks
 * over X stored in bf16, multiplied with vdpbf16ps. An NHWC pixel's input channels j and j + 1
 * are one 32-bit pair, broadcast to every lane inside the instruction, and each lane's weights
 * for them are one pair too, so one instruction does 32 products where the fp32 kernel's FMA does
 * 16; with groups of 8 output channels half are zeros either way (conv_gcn_avx512.c says why).
 *
 * The packed weights are pairs of bf16 (conv_gcn_pack16): [block][kh][kw][nin / 2][16 lanes], a
 * pair per lane, 32 bits like the float they are passed as (conv_last_row16_fn's wp). */
#include "conv_layout.h"

#include <immintrin.h>
#include <string.h>

#define GCN_I __attribute__((always_inline)) static inline

static inline __mmask16 gcn_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* The pair of bf16 at x (channels j, j + 1 of a pixel) in every lane. */
static inline __m512bh pair_at(const uint16_t *x) {
    int32_t v;
    memcpy(&v, x, sizeof v);
    return (__m512bh)_mm512_set1_epi32(v);
}

/* PX interior pixels from ox0; np = nin / 2 pairs; ldw: 32-bit pairs per tap. */
GCN_I void gcn16_block(const conv_last_geom *g, const uint16_t *x, const float *wb, __m512 bias,
                       float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox0, int64_t np,
                       int64_t ldw, __mmask16 mk, const int PX) {
    __m512 acc[12];
#pragma GCC unroll 12
    for (int p = 0; p < PX; p++) acc[p] = bias;
    const int64_t c = g->c, step = g->sw * c, ix0 = ox0 * g->sw - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const uint16_t *row = x + ((iy0 + ky) * g->w + ix0) * c;
        const float *wr = wb + ky * g->kw * ldw;
        for (int64_t kx = 0; kx < g->kw; kx++, row += c, wr += ldw)
            for (int64_t j = 0; j < np; j++) {
                const __m512bh wv = (__m512bh)_mm512_load_ps(wr + j * 16);
#pragma GCC unroll 12
                for (int p = 0; p < PX; p++)
                    acc[p] = _mm512_dpbf16_ps(acc[p], wv, pair_at(row + p * step + 2 * j));
            }
    }
#pragma GCC unroll 12
    for (int p = 0; p < PX; p++) _mm512_mask_storeu_ps(y + (ox0 + p) * g->m, mk, acc[p]);
}

/* One pixel next to the border, taps outside the image skipped, in 4 accumulators. */
static void gcn16_edge(const conv_last_geom *g, const uint16_t *x, const float *wb, __m512 bias,
                       float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox, int64_t np,
                       int64_t ldw, __mmask16 mk) {
    const int64_t c = g->c, ix0 = ox * g->sw - g->pl;
    __m512 acc[4] = {bias, _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t ky = ky0; ky < ky1; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            const int64_t ix = ix0 + kx;
            if (ix < 0 || ix >= g->w) continue;
            const uint16_t *px = x + ((iy0 + ky) * g->w + ix) * c;
            const float *wt = wb + (ky * g->kw + kx) * ldw;
            for (int64_t j = 0; j < np; j++)
                acc[j % 4] = _mm512_dpbf16_ps(acc[j % 4], (__m512bh)_mm512_load_ps(wt + j * 16),
                                              pair_at(px + 2 * j));
        }
    acc[0] = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_mask_storeu_ps(y + ox * g->m, mk, acc[0]);
}

static void gcn16_block_n(const conv_last_geom *g, const uint16_t *x, const float *wb, __m512 bias,
                          float *y, int64_t ky0, int64_t ky1, int64_t iy0, int64_t ox0, int64_t np,
                          int64_t ldw, __mmask16 mk, int64_t px) {
    switch (px) {
#define GCN_CASE(n)                                                                                \
    case n:                                                                                        \
        gcn16_block(g, x, wb, bias, y, ky0, ky1, iy0, ox0, np, ldw, mk, n);                        \
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

void conv_gcn_row16_avx512bf16(const conv_last_geom *g, const uint16_t *x, const float *wp,
                               const float *bp, float *y, int64_t oy) {
    const int64_t iy0 = oy * g->sh - g->pt;
    const int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = g->h - iy0 < g->kh ? g->h - iy0 : g->kh;
    const int64_t ldw = conv_gcn_nin(g) / 2 * 16, nb = g->vpad / 16;
    const int64_t inner = g->ox_hi - g->ox_lo, nblk = (inner + 11) / 12;
    for (int64_t b = 0; b < nb; b++) {
        int64_t cb, nin;
        conv_gcn_span(g, b, &cb, &nin);
        const uint16_t *xb = x + cb;
        const float *wb = wp + b * g->kh * g->kw * ldw;
        const __m512 bias = _mm512_load_ps(bp + b * 16);
        const __mmask16 mk = gcn_mask(g->m - b * 16);
        float *yb = y + b * 16;
        for (int64_t ox = 0; ox < g->ox_lo; ox++)
            gcn16_edge(g, xb, wb, bias, yb, ky0, ky1, iy0, ox, nin / 2, ldw, mk);
        for (int64_t k = 0, ox = g->ox_lo; k < nblk; k++) {
            const int64_t end = g->ox_lo + inner * (k + 1) / nblk;
            gcn16_block_n(g, xb, wb, bias, yb, ky0, ky1, iy0, ox, nin / 2, ldw, mk, end - ox);
            ox = end;
        }
        for (int64_t ox = g->ox_hi; ox < g->ow; ox++)
            gcn16_edge(g, xb, wb, bias, yb, ky0, ky1, iy0, ox, nin / 2, ldw, mk);
    }
}

void conv_gcn_round_avx512bf16(const float *x, uint16_t *y, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i),
                            (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 mk = gcn_mask((int64_t)(n - i));
        _mm256_mask_storeu_epi16(y + i, mk,
                                 (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, x + i)));
    }
}
