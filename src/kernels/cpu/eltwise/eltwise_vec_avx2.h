/* The vector vocabulary of eltwise_act.h (V, V_SET1 ... V_GE, V_ROUND, V_LDEXP, and with
 * ANVIL_HAVE_SLEEF V_EXP, V_TANH, V_LOG1P) on AVX2 + FMA registers, shared by the eltwise and the
 * GEMM AVX2 files. Include only from files compiled with AVX2 flags (cmake/kernels.cmake). */
#ifndef ANVIL_ELTWISE_VEC_AVX2_H
#define ANVIL_ELTWISE_VEC_AVX2_H

#include <immintrin.h>
#ifdef ANVIL_HAVE_SLEEF
#include <sleef.h>
#define V_EXP(x) Sleef_expf8_u10avx2(x)
#define V_TANH(x) Sleef_tanhf8_u10avx2(x)
#define V_LOG1P(x) Sleef_log1pf8_u10avx2(x)
#endif

#define V __m256
#define V_SET1(a) _mm256_set1_ps(a)
#define V_ADD(a, b) _mm256_add_ps((a), (b))
#define V_SUB(a, b) _mm256_sub_ps((a), (b))
#define V_MUL(a, b) _mm256_mul_ps((a), (b))
#define V_DIV(a, b) _mm256_div_ps((a), (b))
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_MAX(a, b) _mm256_max_ps((a), (b))
#define V_MIN(a, b) _mm256_min_ps((a), (b))
#define V_LT(a, b, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (b), _CMP_LT_OQ))
#define V_GE(a, b, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (b), _CMP_GE_OQ))
#define V_ROUND(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* p * 2^n for integral n in [-126, 127]: 2^n built in the exponent field */
#define V_LDEXP(p, n)                                                                              \
    _mm256_mul_ps((p), _mm256_castsi256_ps(_mm256_slli_epi32(                                      \
                           _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)))

#endif
