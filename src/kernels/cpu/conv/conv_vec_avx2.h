/* The conv kernels' vector vocabulary on AVX2 + FMA (8 floats), for the templates conv_rows_tmpl.h,
 * conv_dw_tmpl.h and conv_sc_tmpl.h; include it only from files compiled with AVX2 flags. The
 * meaning of each macro is listed in conv_rows_tmpl.h. */
#ifndef ANVIL_CONV_VEC_AVX2_H
#define ANVIL_CONV_VEC_AVX2_H

#include <immintrin.h>

typedef __m256 dw_v;
#define DW_VL 8
#define DW_LOAD(p) _mm256_loadu_ps(p)
#define DW_BCAST(x) _mm256_set1_ps(x)
#define DW_ZERO() _mm256_setzero_ps()
#define DW_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define DW_MUL(a, b) _mm256_mul_ps((a), (b))
/* SSE semantics: NaN in either operand gives the second */
#define DW_MAX(a, b) _mm256_max_ps((a), (b))
#define DW_MIN(a, b) _mm256_min_ps((a), (b))
#define DW_STORE(p, v) _mm256_storeu_ps((p), (v))

static inline void dw_store_n(float *p, dw_v v, int64_t n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane), v);
}
#define DW_STORE_N(p, v, n) dw_store_n((p), (v), (n))

static inline dw_v dw_load_n(const float *p, int64_t n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane));
}
#define DW_LOAD_N(p, n) dw_load_n((p), (n))

/* A lane mask: the first n lanes (all of them for n >= 8); loads and stores under it. */
typedef __m256i dw_m;
static inline dw_m dw_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define DW_MASK(n) dw_mask(n)
#define DW_LOADM(p, m) _mm256_maskload_ps((p), (m))
#define DW_STOREM(p, v, m) _mm256_maskstore_ps((p), (m), (v))

/* lanes [lo, hi) of p, zero elsewhere (0 <= lo <= hi <= 8); reads only those lanes */
static inline dw_v dw_load_range(const float *p, int64_t lo, int64_t hi) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), lane),
                                           _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane));
    return _mm256_maskload_ps(p, in);
}
#define DW_LOAD_RANGE(p, lo, hi) dw_load_range((p), (lo), (hi))

/* The even and the odd lanes of 16 consecutive floats: shuffle pairs within the 128-bit halves,
 * then put the 64-bit pieces in order. */
#define DW_SPLIT2(lo, hi, ev, od)                                                                  \
    do {                                                                                           \
        const __m256 lo_ = (lo), hi_ = (hi);                                                       \
        (ev) = _mm256_castpd_ps(_mm256_permute4x64_pd(                                             \
            _mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));        \
        (od) = _mm256_castpd_ps(_mm256_permute4x64_pd(                                             \
            _mm256_castps_pd(_mm256_shuffle_ps(lo_, hi_, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));        \
    } while (0)

/* The inverse: a and b's lanes alternating, lanes 0..3 of each into lo and 4..7 into hi. */
#define DW_INTERLEAVE2(a, b, lo, hi)                                                               \
    do {                                                                                           \
        const __m256 a_ = (a), b_ = (b);                                                           \
        const __m256 l_ = _mm256_unpacklo_ps(a_, b_), h_ = _mm256_unpackhi_ps(a_, b_);             \
        (lo) = _mm256_permute2f128_ps(l_, h_, 0x20);                                               \
        (hi) = _mm256_permute2f128_ps(l_, h_, 0x31);                                               \
    } while (0)

#endif
