/* The eltwise kernels for AVX-512 (16 float lanes; tails through mask registers). */
#include <immintrin.h>
#ifdef ANVIL_HAVE_SLEEF
#include <sleef.h>
#endif

#define V __m512
#define VW 16
#define M __mmask16
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps((p), (v))
#define V_TAILMASK(n) ((__mmask16)((1u << (n)) - 1u))
#define V_MLOAD(p, m, fill) _mm512_mask_loadu_ps((fill), (m), (p))
#define V_MSTORE(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define V_IDX(s)                                                                                   \
    _mm512_castsi512_ps(_mm512_mullo_epi32(                                                        \
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),                   \
        _mm512_set1_epi32(s)))
#define V_GATHER(base, idx, m, full, fill)                                                         \
    _mm512_mask_i32gather_ps((fill), (full) ? (__mmask16)0xffff : (m), _mm512_castps_si512(idx),   \
                             (base), 4)
#define V_SET1(a) _mm512_set1_ps(a)
#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define V_SUB(a, b) _mm512_sub_ps((a), (b))
#define V_MUL(a, b) _mm512_mul_ps((a), (b))
#define V_DIV(a, b) _mm512_div_ps((a), (b))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_MAX(a, b) _mm512_max_ps((a), (b))
#define V_MIN(a, b) _mm512_min_ps((a), (b))
#define V_LT(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ), (y), (x))
#define V_GE(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (b), _CMP_GE_OQ), (y), (x))
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define V_HMAX(v) _mm512_reduce_max_ps(v)
#define V_EXP(x) Sleef_expf16_u10avx512f(x)
#define V_TANH(x) Sleef_tanhf16_u10avx512f(x)
#define V_LOG1P(x) Sleef_log1pf16_u10avx512f(x)
#define ELT_ISA_NAME elt_isa_avx512

#include "eltwise_simd.h"
