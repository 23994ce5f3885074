/* The rnn kernels for AVX2 + FMA (8 float lanes). */
#include "rnn.h"

#include "../eltwise/eltwise_vec_avx2.h"

#define VW 8
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps((p), (v))
#define V_ROUND(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* 2^n built in the exponent field (n + 127 is a normal exponent for n in [-126, 127]) */
#define V_LDEXP(p, n)                                                                              \
    _mm256_mul_ps((p), _mm256_castsi256_ps(_mm256_slli_epi32(                                      \
                           _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)))
/* 16 registers: 4 rows x 2 vectors of accumulators leave room for B's vectors */
#define NV_WIDE 8
#define NV_NARROW 2
#define RNN_ISA_NAME rnn_isa_avx2

#include "rnn_simd.h"
