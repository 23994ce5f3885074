/* The rnn kernels for AVX2 + FMA (8 float lanes). */
#include "rnn.h"

#include "../eltwise/eltwise_vec_avx2.h"

#define VW 8
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps((p), (v))
/* 16 registers: 4 rows x 2 vectors of accumulators leave room for B's vectors */
#define NV_WIDE 8
#define NV_NARROW 2
#define RNN_ISA_NAME rnn_isa_avx2

#include "rnn_simd.h"
