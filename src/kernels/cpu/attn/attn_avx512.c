/* The attention jobs for AVX-512: 64 queries per block (4 vectors; narrow blocks: 1) by 6 rows
 * per register tile: 24 accumulators, the 4 query vectors and a broadcast in 32 registers. */
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

#define ATT_C 4
#include "attn_tmpl.h"
#undef ATT_C
#define ATT_C 1
#include "attn_tmpl.h"
#undef ATT_C

const attn_isa attn_isa_avx512 = {.mb = 4 * VW,
                                  .narrow = VW,
                                  .nb = 120,
                                  .key_tile = ATT_R,
                                  .rows = ATT_RV,
                                  .block = att_block_4,
                                  .block_narrow = att_block_1};
