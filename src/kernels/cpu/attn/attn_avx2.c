/* The attention job for AVX2 + FMA: 16 queries per block (2 vectors) by 5 rows per register tile,
 * 10 accumulators, the 2 query vectors and a broadcast in 16 registers. */
#include "../eltwise/eltwise_vec_avx2.h"
#include "attn.h"

#define VW 8
#define V_LOAD(p) _mm256_load_ps(p)
#define V_STORE(p, v) _mm256_store_ps((p), (v))
#define ATT_C 2
#define ATT_R 5
#define ATT_NB 60
#define ATT_ISA_NAME attn_isa_avx2

#include "attn_tmpl.h"
