/* The reduce kernels for AVX-512 (16 float lanes; tails and compares through mask registers). */
#include "../eltwise/eltwise_vec_avx512.h"

#define VW 16
#define M __mmask16
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps((p), (v))
#define V_TAILMASK(n) ((__mmask16)((1u << (n)) - 1u))
#define V_MLOAD(p, m, fill) _mm512_mask_loadu_ps((fill), (m), (p))
#define V_MSTORE(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define C __mmask16
#define V_CMP(a, b, P) _mm512_cmp_ps_mask((a), (b), (P))
#define C_OR(a, b) ((__mmask16)((a) | (b)))
#define C_ANDN(a, b) ((__mmask16)((a) & ~(b)))
#define C_BITS(c) ((unsigned)(c))
#define V_BLEND(c, a, b) _mm512_mask_blend_ps((c), (a), (b))
#define V_ABS(x) _mm512_abs_ps(x)
#define RED_ISA_NAME reduce_isa_avx512

#include "reduce_simd.h"
