/* attn_tmpl.h's vector vocabulary on AVX-512, for its fp32 (attn_avx512.c) and bf16
 * (attn_avx512bf16.c) instances: 64 queries per block (4 vectors; narrow blocks: 1) by 6 key rows
 * per register tile (24 accumulators, the 4 query vectors and a broadcast in 32 registers), and 4
 * head-size rows per output tile. */
#ifndef ANVIL_ATTN_VEC_AVX512_H
#define ANVIL_ATTN_VEC_AVX512_H

#include "../eltwise/eltwise_vec_avx512.h"
#include "attn.h"

#define VW 16
#define V_LOAD(p) _mm512_load_ps(p)
#define V_STORE(p, v) _mm512_store_ps((p), (v))
#define ATT_ABS(x) _mm512_abs_ps(x)
/* |t| with the sign of s */
#define ATT_COPYSIGN(t, s) _mm512_or_ps(_mm512_abs_ps(t), _mm512_and_ps(_mm512_set1_ps(-0.0f), (s)))
#define ATT_R 6
#ifndef ATT_RV
#define ATT_RV 4
#endif

#endif
