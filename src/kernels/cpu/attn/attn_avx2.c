/* The attention jobs for AVX2 + FMA: 16 queries per block (2 vectors; narrow blocks: 1) by 5 rows
 * per register tile: 10 accumulators, the 2 query vectors and a broadcast in 16 registers. */
#include "../eltwise/eltwise_vec_avx2.h"
#include "attn.h"

#define VW 8
#define V_LOAD(p) _mm256_load_ps(p)
#define V_STORE(p, v) _mm256_store_ps((p), (v))
#define ATT_ABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (x))
/* |t| with the sign of s */
#define ATT_COPYSIGN(t, s)                                                                         \
    _mm256_or_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), (t)),                                     \
                 _mm256_and_ps(_mm256_set1_ps(-0.0f), (s)))
#define ATT_R 5
#ifndef ATT_RV
#define ATT_RV 5
#endif

#define ATT_C 2
#include "attn_tmpl.h"
#undef ATT_C
#define ATT_C 1
#include "attn_tmpl.h"
#undef ATT_C

const attn_isa attn_isa_avx2 = {.mb = 2 * VW,
                                .narrow = VW,
                                .nb = 60,
                                .key_tile = ATT_R,
                                .rows = ATT_RV,
                                .block = att_block_2,
                                .block_narrow = att_block_1};
