/* The rnn kernels for AVX-512 (16 float lanes). */
#include "rnn.h"

#include "../eltwise/eltwise_vec_avx512.h"

#define VW 16
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps((p), (v))
/* 32 registers: 4 rows x 4 vectors of accumulators leave room for B's vectors */
#define NV_WIDE 8
#define NV_NARROW 4
#define RNN_ISA_NAME rnn_isa_avx512

#include "rnn_simd.h"
