/* The int8 family's vector loops on AVX-512 (quant.h). Rounding is the MXCSR's default, to
 * nearest even, as nearbyint in the reference kernels (ops/quant/); values are clamped in float
 * before the conversion to int32 so that a huge one saturates instead of becoming INT_MIN. */
#include "quant.h"

#include <immintrin.h>

/* 16 floats to 16 bytes: round, add zy, clamp to the type's range. */
static inline __m128i to_bytes(__m512 v, __m512i zy, __m512i lo, __m512i hi) {
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-1e9f)), _mm512_set1_ps(1e9f));
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zy);
    q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
    return _mm512_cvtepi32_epi8(q);
}

void quant_store_avx512(const float *c, int64_t ldc, int64_t m, int64_t n, int32_t zy,
                        bool is_signed, uint8_t *y, int64_t rs_y, int64_t cs_y) {
    const __m512i z = _mm512_set1_epi32(zy);
    const __m512i lo = _mm512_set1_epi32(is_signed ? -128 : 0);
    const __m512i hi = _mm512_set1_epi32(is_signed ? 127 : 255);
    if (cs_y == 1) {
        for (int64_t i = 0; i < m; i++) {
            const float *src = c + i * ldc;
            uint8_t *dst = y + i * rs_y;
            for (int64_t j = 0; j < n; j += 16) {
                const __mmask16 k = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1u);
                _mm_mask_storeu_epi8(dst + j, k,
                                     to_bytes(_mm512_maskz_loadu_ps(k, src + j), z, lo, hi));
            }
        }
        return;
    }
    /* Transposed (NCHW planes): 16 rows of one column at a time, gathered ldc apart; a column's
     * bytes are then consecutive in y. */
    const __m512i rows =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int32_t)ldc));
    for (int64_t i = 0; i < m; i += 16) {
        const __mmask16 k = m - i >= 16 ? 0xffff : (__mmask16)((1u << (m - i)) - 1u);
        for (int64_t j = 0; j < n; j++) {
            const __m512 v =
                _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, rows, c + i * ldc + j, 4);
            _mm_mask_storeu_epi8(y + j * cs_y + i * rs_y, k, to_bytes(v, z, lo, hi));
        }
    }
}

void quant_f32_avx512(const float *x, int64_t n, float s, int32_t zy, bool is_signed, uint8_t *y) {
    const __m512i z = _mm512_set1_epi32(zy);
    const __m512i lo = _mm512_set1_epi32(is_signed ? -128 : 0);
    const __m512i hi = _mm512_set1_epi32(is_signed ? 127 : 255);
    const __m512 sv = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1u);
        /* a division, as the reference's x / s (a reciprocal's product rounds differently) */
        const __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(k, x + i), sv);
        /* NaN becomes 0 in the reference (q_saturate), not the zero point */
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        const __m128i b = _mm_mask_mov_epi8(to_bytes(v, z, lo, hi), nan, _mm_setzero_si128());
        _mm_mask_storeu_epi8(y + i, k, b);
    }
}

void dequant_f32_avx512(const uint8_t *x, int64_t n, float s, int32_t zx, bool is_signed,
                        float *y) {
    const __m512i z = _mm512_set1_epi32(zx);
    const __m512 sv = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m128i b = _mm_maskz_loadu_epi8(k, x + i);
        const __m512i w = is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
        _mm512_mask_storeu_ps(y + i, k,
                              _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(w, z)), sv));
    }
}
