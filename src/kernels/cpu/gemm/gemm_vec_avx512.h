/* The GEMM template's vector primitives on AVX-512 (gemm_ukernel.h lists them), for the files that
 * instantiate it on zmm registers: gemm_avx512.c (fp32) and gemm_avx512bf16.c (bf16 pairs, which
 * defines GEMM_DOT before including this). Then the micro-kernel template and its epilogue. */
#ifndef ANVIL_GEMM_VEC_AVX512_H
#define ANVIL_GEMM_VEC_AVX512_H

#include "gemm.h"

#include <immintrin.h>

typedef __m512 gemm_v;
#define GEMM_VL 16
#define GEMM_LOAD(p) _mm512_loadu_ps(p)
#define GEMM_STORE(p, v) _mm512_storeu_ps((p), (v))
/* the 32 bits at p in every lane (a float, or a bf16 tile's pair: a broadcast never rounds) */
#define GEMM_BCAST(p) _mm512_set1_ps(*(p))
#define GEMM_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define GEMM_ADD(a, b) _mm512_add_ps((a), (b))
#define GEMM_ZERO() _mm512_setzero_ps()
#define GEMM_LOAD_N(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), (p))
/* Partial sums per column of the column kernel (gemm_ukernel.h): 4 hide the FMA latency, and
 * with 4 columns take 16 of the 32 registers. */
#define GEMM_UKC_SPLIT 4
#define GEMM_SET1(x) _mm512_set1_ps(x)
#define GEMM_MUL(a, b) _mm512_mul_ps((a), (b))
#define GEMM_MAX(a, b) _mm512_max_ps((a), (b))
#define GEMM_MIN(a, b) _mm512_min_ps((a), (b))
/* The eltwise vocabulary (eltwise_simd.h) on the same registers, for the activations the
 * micro-kernel applies to its accumulators (eltwise_act.h). */
#include "kernels/cpu/eltwise/eltwise_vec_avx512.h"
#include "kernels/cpu/eltwise/eltwise_act.h"
#define GEMM_HAVE_ACT_VEC 1
#include "gemm_epilogue.h"
#include "gemm_ukernel.h"

#endif
