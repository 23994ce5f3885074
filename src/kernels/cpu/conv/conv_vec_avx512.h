/* The conv kernels' vector vocabulary on AVX-512 (16 floats), for the templates conv_rows_tmpl.h,
 * conv_dw_tmpl.h and conv_sc_tmpl.h; include it only from files compiled with AVX-512 flags. The
 * meaning of each macro is listed in conv_rows_tmpl.h. */
#ifndef ANVIL_CONV_VEC_AVX512_H
#define ANVIL_CONV_VEC_AVX512_H

#include <immintrin.h>

typedef __m512 dw_v;
#define DW_VL 16
#define DW_LOAD(p) _mm512_loadu_ps(p)
#define DW_BCAST(x) _mm512_set1_ps(x)
#define DW_ZERO() _mm512_setzero_ps()
#define DW_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define DW_MUL(a, b) _mm512_mul_ps((a), (b))
/* SSE semantics: NaN in either operand gives the second */
#define DW_MAX(a, b) _mm512_max_ps((a), (b))
#define DW_MIN(a, b) _mm512_min_ps((a), (b))
#define DW_STORE(p, v) _mm512_storeu_ps((p), (v))
#define DW_STORE_N(p, v, n) _mm512_mask_storeu_ps((p), (__mmask16)((1u << (n)) - 1u), (v))
#define DW_LOAD_N(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), (p))
/* A lane mask: the first n lanes (all of them for n >= 16); loads and stores under it. */
typedef __mmask16 dw_m;
#define DW_MASK(n) ((n) >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n)) - 1u))
#define DW_LOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define DW_STOREM(p, v, m) _mm512_mask_storeu_ps((p), (m), (v))
/* lanes [lo, hi) of p, zero elsewhere (0 <= lo <= hi <= 16); reads only those lanes */
#define DW_LOAD_RANGE(p, lo, hi)                                                                   \
    _mm512_maskz_loadu_ps((__mmask16)(((1u << (hi)) - 1u) & ~((1u << (lo)) - 1u)), (p))

/* The even and the odd lanes of 32 consecutive floats, one two-source permute each. */
#define DW_SPLIT2(lo, hi, ev, od)                                                                  \
    do {                                                                                           \
        const __m512 lo_ = (lo), hi_ = (hi);                                                       \
        (ev) = _mm512_permutex2var_ps(                                                             \
            lo_, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),     \
            hi_);                                                                                  \
        (od) = _mm512_permutex2var_ps(                                                             \
            lo_, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31),     \
            hi_);                                                                                  \
    } while (0)

/* The inverse: a and b's lanes alternating, lanes 0..7 of each into lo and 8..15 into hi. */
#define DW_INTERLEAVE2(a, b, lo, hi)                                                               \
    do {                                                                                           \
        const __m512 a_ = (a), b_ = (b);                                                           \
        (lo) = _mm512_permutex2var_ps(                                                             \
            a_, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), b_);    \
        (hi) = _mm512_permutex2var_ps(                                                             \
            a_, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31),   \
            b_);                                                                                   \
    } while (0)

#endif
