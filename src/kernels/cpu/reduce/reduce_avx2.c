/* The reduce kernels for AVX2 + FMA (8 float lanes; tails through vector masks and vmaskmov, which
 * never touches the masked-off lanes' memory). */
#include "../eltwise/eltwise_vec_avx2.h"

static inline __m256i red_avx2_tailmask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256 red_avx2_mload(const float *p, __m256i m, __m256 fill) {
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

#define VW 8
#define M __m256i
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps((p), (v))
#define V_TAILMASK(n) red_avx2_tailmask(n)
#define V_MLOAD(p, m, fill) red_avx2_mload((p), (m), (fill))
#define V_MSTORE(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define C __m256
#define V_CMP(a, b, P) _mm256_cmp_ps((a), (b), (P))
#define C_OR(a, b) _mm256_or_ps((a), (b))
#define C_ANDN(a, b) _mm256_andnot_ps((b), (a))
#define C_BITS(c) ((unsigned)_mm256_movemask_ps(c))
#define V_BLEND(c, a, b) _mm256_blendv_ps((a), (b), (c))
#define V_ABS(x) _mm256_and_ps((x), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
#define RED_ISA_NAME reduce_isa_avx2

#include "reduce_simd.h"
