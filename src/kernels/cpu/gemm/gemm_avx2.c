/* AVX2+FMA instances of the GEMM template (compiled with AVX2 flags; called only where the CPU
 * has AVX2 and FMA). Tiles (GEMM_TILES_AVX2 in gemm.h), for 16 ymm registers: 6x16 (12 accumulators
 * + 2 B + 1 broadcast) is the classic shape; 4x24 loads more B per broadcast; 8x8 suits narrow N.
 */
#include "gemm.h"

#include <immintrin.h>

typedef __m256 gemm_v;
#define GEMM_VL 8
#define GEMM_LOAD(p) _mm256_loadu_ps(p)
#define GEMM_STORE(p, v) _mm256_storeu_ps((p), (v))
#define GEMM_BCAST(p) _mm256_broadcast_ss(p)
#define GEMM_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define GEMM_ADD(a, b) _mm256_add_ps((a), (b))
#define GEMM_ZERO() _mm256_setzero_ps()
static inline __m256 gemm_load_n(const float *p, int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
}
#define GEMM_LOAD_N(p, n) gemm_load_n((p), (n))
/* Partial sums per column of the column kernel (gemm_ukernel.h): 2, as 4 columns x 4 would not
 * fit the 16 registers. */
#define GEMM_UKC_SPLIT 2
#define GEMM_SET1(x) _mm256_set1_ps(x)
#define GEMM_MUL(a, b) _mm256_mul_ps((a), (b))
#define GEMM_MAX(a, b) _mm256_max_ps((a), (b))
#define GEMM_MIN(a, b) _mm256_min_ps((a), (b))
/* The eltwise vocabulary (eltwise_simd.h) on the same registers, for the activations the
 * micro-kernel applies to its accumulators (eltwise_act.h). */
#include "kernels/cpu/eltwise/eltwise_vec_avx2.h"
#include "kernels/cpu/eltwise/eltwise_act.h"
#define GEMM_HAVE_ACT_VEC 1
#include "gemm_epilogue.h"
#include "gemm_ukernel.h"

GEMM_TILES_AVX2(GEMM_UKERNEL_INSTANCE)
GEMM_UKERNEL_COLS(avx2)
GEMM_TILE_EPILOGUE(avx2)
GEMM_TILES_AVX2(GEMM_KERNEL_DEF)
