/* The chain kernel for AVX-512 (16 float lanes; tails through mask registers). */
#include "../eltwise/eltwise_vec_avx512.h"

#define VW 16
#define M __mmask16
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps((p), (v))
#define V_TAILMASK(n) ((__mmask16)((1u << (n)) - 1u))
#define V_MLOAD(p, m, fill) _mm512_mask_loadu_ps((fill), (m), (p))
#define V_MSTORE(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define V_SQRT(x) _mm512_sqrt_ps(x)
#define V_NEG(x) _mm512_xor_ps((x), _mm512_set1_ps(-0.0f))
#define V_FABS(x) _mm512_andnot_ps(_mm512_set1_ps(-0.0f), (x))
#define V_NANSEL(b, t) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((b), (b), _CMP_UNORD_Q), (t), (b))
/* 4 groups of 16: the running values, the input and the operands fit the 32 registers */
#define CHAIN_U 4
#define CHAIN_ISA_NAME chain_isa_avx512

#include "chain_simd.h"
