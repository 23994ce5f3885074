/* The vector vocabulary of eltwise_act.h (V, V_SET1 ... V_GE, V_ROUND, V_LDEXP, and with
 * ANVIL_HAVE_SLEEF V_EXP, V_TANH, V_LOG1P) on AVX-512 registers, shared by the eltwise and the GEMM
 * AVX-512 files. Include only from files compiled with AVX-512 flags (cmake/kernels.cmake). */
#ifndef ANVIL_ELTWISE_VEC_AVX512_H
#define ANVIL_ELTWISE_VEC_AVX512_H

#include <immintrin.h>
#ifdef ANVIL_HAVE_SLEEF
#include <sleef.h>
#define V_EXP(x) Sleef_expf16_u10avx512f(x)
#define V_TANH(x) Sleef_tanhf16_u10avx512f(x)
#define V_LOG1P(x) Sleef_log1pf16_u10avx512f(x)
#endif

#define V __m512
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
#define V_ROUND(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* p * 2^n for integral n */
#define V_LDEXP(p, n) _mm512_scalef_ps((p), (n))

#endif
