/* Activations between plain NCHW fp32 and oneDNN's channel blockings (layout_blocked.h): the
 * reorders of dnnl_conv_split_bf16, done here instead of by oneDNN.
 *
 * oneDNN's bf16 grouped convolution takes its source as bf16 in channel blocks of 8 or 16
 * (aBcd8b: [N][C/8][H][W][8]) and writes fp32 in the same blocking. The reorder primitives
 * oneDNN 2.6 makes for plain fp32 NCHW to that bf16 layout ("jit:uni") ran at ~6 GB/s on a Zen 4
 * core: RegNetY-400MF spent 0.75 ms of its 7.3 ms there, more than in the convolutions' own
 * kernels on some layers. Here a block of 8 channels x 16 pixels is loaded as 8 rows, rounded
 * to bf16 (to nearest even, vcvtneps2bf16, as oneDNN's reorder rounds on this ISA) and
 * transposed in registers into 16 pixels of 8 channels; the way back is an 8 x 8 fp32
 * transpose. Channels past C in the last block are written as zeros by the first and never read
 * by the second, as oneDNN's padding requires. */
#include "layout_blocked.h"

#include <immintrin.h>

/* Rows j < nc of 16 fp32 pixels (row j at x + j * xc, pixels < np) as bf16, transposed: pixel p's
 * 8 channels written to y + p * yp. Rows past nc and pixels past np read as zero; pixels past
 * np are not written. */
static inline void tile_to_bf16(const float *x, size_t xc, int nc, int np, uint16_t *y, size_t yp) {
    const __mmask16 m = np >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << np) - 1);
    __m256i r[8];
    for (int j = 0; j < 8; j++) {
        __m512 v = j < nc ? _mm512_maskz_loadu_ps(m, x + (size_t)j * xc) : _mm512_setzero_ps();
        r[j] = (__m256i)_mm512_cvtneps_pbh(v);
    }
    /* 16-bit 8 x 8 transpose in each 128-bit lane: lane 0 holds pixels 0-7, lane 1 pixels 8-15 */
    __m256i a0 = _mm256_unpacklo_epi16(r[0], r[1]), a1 = _mm256_unpackhi_epi16(r[0], r[1]);
    __m256i a2 = _mm256_unpacklo_epi16(r[2], r[3]), a3 = _mm256_unpackhi_epi16(r[2], r[3]);
    __m256i a4 = _mm256_unpacklo_epi16(r[4], r[5]), a5 = _mm256_unpackhi_epi16(r[4], r[5]);
    __m256i a6 = _mm256_unpacklo_epi16(r[6], r[7]), a7 = _mm256_unpackhi_epi16(r[6], r[7]);
    __m256i b0 = _mm256_unpacklo_epi32(a0, a2), b1 = _mm256_unpackhi_epi32(a0, a2);
    __m256i b2 = _mm256_unpacklo_epi32(a1, a3), b3 = _mm256_unpackhi_epi32(a1, a3);
    __m256i b4 = _mm256_unpacklo_epi32(a4, a6), b5 = _mm256_unpackhi_epi32(a4, a6);
    __m256i b6 = _mm256_unpacklo_epi32(a5, a7), b7 = _mm256_unpackhi_epi32(a5, a7);
    __m256i c[8] = {_mm256_unpacklo_epi64(b0, b4), _mm256_unpackhi_epi64(b0, b4),
                    _mm256_unpacklo_epi64(b1, b5), _mm256_unpackhi_epi64(b1, b5),
                    _mm256_unpacklo_epi64(b2, b6), _mm256_unpackhi_epi64(b2, b6),
                    _mm256_unpacklo_epi64(b3, b7), _mm256_unpackhi_epi64(b3, b7)};
    for (int k = 0; k < 8; k++) {
        if (k < np) _mm_storeu_si128((__m128i *)(y + (size_t)k * yp), _mm256_castsi256_si128(c[k]));
        if (k + 8 < np)
            _mm_storeu_si128((__m128i *)(y + (size_t)(k + 8) * yp),
                             _mm256_extracti128_si256(c[k], 1));
    }
}

void data_nchw_to_bf16_blocked(const float *x, int64_t n, int64_t c, int64_t hw, size_t xn,
                               size_t xc, uint16_t *y, int blk, size_t yn, size_t ycb) {
    for (int64_t b = 0; b < n; b++)
        for (int64_t c0 = 0; c0 < c; c0 += 8) {
            int nc = c - c0 < 8 ? (int)(c - c0) : 8;
            const float *xs = x + (size_t)b * xn + (size_t)c0 * xc;
            uint16_t *ys = y + (size_t)b * yn + (size_t)(c0 / blk) * ycb + (size_t)(c0 % blk);
            for (int64_t p = 0; p < hw; p += 16)
                tile_to_bf16(xs + p, xc, nc, hw - p < 16 ? (int)(hw - p) : 16, ys + (size_t)p * blk,
                             (size_t)blk);
        }
}

/* 8 pixels of 8 fp32 channels (pixel i at t + i * tp, pixels < np) transposed: channel j's
 * pixels written to y + j * yc for j < nc, pixels past np neither read nor written. */
static inline void tile_to_nchw(const float *t, size_t tp, int nc, int np, float *y, size_t yc) {
    __m256 r[8];
    for (int i = 0; i < 8; i++)
        r[i] = i < np ? _mm256_loadu_ps(t + (size_t)i * tp) : _mm256_setzero_ps();
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    __m256 col[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                     _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                     _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                     _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
    const __mmask8 m = np >= 8 ? (__mmask8)0xff : (__mmask8)((1u << np) - 1);
    for (int j = 0; j < nc; j++) _mm256_mask_storeu_ps(y + (size_t)j * yc, m, col[j]);
}

void data_blocked_to_nchw_f32(const float *t, int64_t n, int64_t c, int64_t hw, int blk, size_t tn,
                              size_t tcb, float *y, size_t yn, size_t yc) {
    for (int64_t b = 0; b < n; b++)
        for (int64_t c0 = 0; c0 < c; c0 += 8) {
            int nc = c - c0 < 8 ? (int)(c - c0) : 8;
            const float *ts = t + (size_t)b * tn + (size_t)(c0 / blk) * tcb + (size_t)(c0 % blk);
            float *ys = y + (size_t)b * yn + (size_t)c0 * yc;
            for (int64_t p = 0; p < hw; p += 8)
                tile_to_nchw(ts + (size_t)p * blk, (size_t)blk, nc, hw - p < 8 ? (int)(hw - p) : 8,
                             ys + p, yc);
        }
}
