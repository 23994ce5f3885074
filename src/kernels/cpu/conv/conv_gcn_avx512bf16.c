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

/* One block of 16 output channels: its input channels (from x at its first), weights, bias,
 * output (y at its first channel) and store mask. */
typedef struct gcn16_blk {
    const uint16_t *x;
    const float *w;
    __m512 bias;
    float *y;
    __mmask16 mk;
} gcn16_blk;

/* PX interior pixels from ox0 of NB blocks at once (NB = 2 where the pixels are few, so that
 * there are PX * NB independent sums); np = nin / 2 pairs; ldw: 32-bit pairs per tap. */
GCN_I void gcn16_block(const conv_last_geom *g, const gcn16_blk *bk, int64_t ky0, int64_t ky1,
                       int64_t iy0, int64_t ox0, int64_t np, int64_t ldw, const int PX,
                       const int NB) {
    __m512 acc[2][12];
#pragma GCC unroll 2
    for (int v = 0; v < NB; v++)
#pragma GCC unroll 12
        for (int p = 0; p < PX; p++) acc[v][p] = bk[v].bias;
    const int64_t c = g->c, step = g->sw * c, ix0 = ox0 * g->sw - g->pl;
    for (int64_t ky = ky0; ky < ky1; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            const int64_t at = ((iy0 + ky) * g->w + ix0 + kx) * c, wt = (ky * g->kw + kx) * ldw;
            for (int64_t j = 0; j < np; j++)
#pragma GCC unroll 2
                for (int v = 0; v < NB; v++) {
                    const __m512bh wv = (__m512bh)_mm512_load_ps(bk[v].w + wt + j * 16);
                    const uint16_t *row = bk[v].x + at + 2 * j;
#pragma GCC unroll 12
                    for (int p = 0; p < PX; p++)
                        acc[v][p] = _mm512_dpbf16_ps(acc[v][p], wv, pair_at(row + p * step));
                }
        }
#pragma GCC unroll 2
    for (int v = 0; v < NB; v++)
#pragma GCC unroll 12
        for (int p = 0; p < PX; p++)
            _mm512_mask_storeu_ps(bk[v].y + (ox0 + p) * g->m, bk[v].mk, acc[v][p]);
}

/* One pixel next to the border, taps outside the image skipped, in 8 accumulators (by pair mod
 * 8) so that it is not a few chains of dependent products. */
static void gcn16_edge(const conv_last_geom *g, const gcn16_blk *bk, int64_t ky0, int64_t ky1,
                       int64_t iy0, int64_t ox, int64_t np, int64_t ldw) {
    const int64_t c = g->c, ix0 = ox * g->sw - g->pl;
    __m512 acc[8];
    acc[0] = bk->bias;
    for (int u = 1; u < 8; u++) acc[u] = _mm512_setzero_ps();
    for (int64_t ky = ky0; ky < ky1; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            const int64_t ix = ix0 + kx;
            if (ix < 0 || ix >= g->w) continue;
            const uint16_t *px = bk->x + ((iy0 + ky) * g->w + ix) * c;
            const float *wt = bk->w + (ky * g->kw + kx) * ldw;
            for (int64_t j = 0; j < np; j++)
                acc[j % 8] = _mm512_dpbf16_ps(acc[j % 8], (__m512bh)_mm512_load_ps(wt + j * 16),
                                              pair_at(px + 2 * j));
        }
    for (int u = 4; u > 0; u /= 2)
        for (int v = 0; v < u; v++) acc[v] = _mm512_add_ps(acc[v], acc[v + u]);
    _mm512_mask_storeu_ps(bk->y + ox * g->m, bk->mk, acc[0]);
}

/* gcn16_block for a run-time px in [1, 12] (nb 1) or [1, 6] (nb 2), each its own unrolled copy. */
static void gcn16_block_n(const conv_last_geom *g, const gcn16_blk *bk, int64_t ky0, int64_t ky1,
                          int64_t iy0, int64_t ox0, int64_t np, int64_t ldw, int64_t px, int nb) {
    switch (px * 4 + nb) {
#define GCN_CASE(n, b)                                                                             \
    case n * 4 + b:                                                                                \
        gcn16_block(g, bk, ky0, ky1, iy0, ox0, np, ldw, n, b);                                     \
        break;
        GCN_CASE(1, 1)
        GCN_CASE(2, 1)
        GCN_CASE(3, 1)
        GCN_CASE(4, 1)
        GCN_CASE(5, 1)
        GCN_CASE(6, 1)
        GCN_CASE(7, 1)
        GCN_CASE(8, 1)
        GCN_CASE(9, 1)
        GCN_CASE(10, 1)
        GCN_CASE(11, 1)
        GCN_CASE(12, 1)
        GCN_CASE(1, 2)
        GCN_CASE(2, 2)
        GCN_CASE(3, 2)
        GCN_CASE(4, 2)
        GCN_CASE(5, 2)
        GCN_CASE(6, 2)
#undef GCN_CASE
    default:
        break;
    }
}

static gcn16_blk blk_of(const conv_last_geom *g, const uint16_t *x, const float *wp,
                        const float *bp, float *y, int64_t ldw, int64_t b, int64_t *nin) {
    int64_t cb;
    conv_gcn_span(g, b, &cb, nin);
    return (gcn16_blk){x + cb, wp + b * g->kh * g->kw * ldw, _mm512_load_ps(bp + b * 16),
                       y + b * 16, gcn_mask(g->m - b * 16)};
}

/* The interior columns go in blocks of at most 12 pixels, as even as they divide; where they
 * divide into blocks of 6 or fewer, two blocks of channels (of as many input channels) go
 * together. */
void conv_gcn_row16_avx512bf16(const conv_last_geom *g, const uint16_t *x, const float *wp,
                               const float *bp, float *y, int64_t oy) {
    const int64_t iy0 = oy * g->sh - g->pt;
    const int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = g->h - iy0 < g->kh ? g->h - iy0 : g->kh;
    const int64_t ldw = conv_gcn_nin(g) / 2 * 16, nb = g->vpad / 16;
    const int64_t inner = g->ox_hi - g->ox_lo, nblk = (inner + 11) / 12;
    const bool pairs = inner > 0 && (inner + nblk - 1) / nblk <= 6;
    for (int64_t b = 0; b < nb;) {
        gcn16_blk bk[2];
        int64_t nin, nin1 = -1;
        bk[0] = blk_of(g, x, wp, bp, y, ldw, b, &nin);
        if (pairs && b + 1 < nb) bk[1] = blk_of(g, x, wp, bp, y, ldw, b + 1, &nin1);
        const int two = nin1 == nin ? 2 : 1;
        for (int v = 0; v < two; v++) {
            for (int64_t ox = 0; ox < g->ox_lo; ox++)
                gcn16_edge(g, &bk[v], ky0, ky1, iy0, ox, nin / 2, ldw);
            for (int64_t ox = g->ox_hi; ox < g->ow; ox++)
                gcn16_edge(g, &bk[v], ky0, ky1, iy0, ox, nin / 2, ldw);
        }
        for (int64_t k = 0, ox = g->ox_lo; k < nblk; k++) {
            const int64_t end = g->ox_lo + inner * (k + 1) / nblk;
            gcn16_block_n(g, bk, ky0, ky1, iy0, ox, nin / 2, ldw, end - ox, two);
            ox = end;
        }
        b += two;
    }
}
