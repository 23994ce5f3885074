/* The attention job for AVX-512: 64 queries per block (4 vectors) by 6 rows per register tile,
 * 24 accumulators, the 4 query vectors and a broadcast in 32 registers. */
#include "../eltwise/eltwise_vec_avx512.h"
#include "attn.h"

#define VW 16
#define V_LOAD(p) _mm512_load_ps(p)
#define V_STORE(p, v) _mm512_store_ps((p), (v))
#define ATT_C 4
#define ATT_R 6
#define ATT_NB 60
#define ATT_ISA_NAME attn_isa_avx512

#include "attn_tmpl.h"
