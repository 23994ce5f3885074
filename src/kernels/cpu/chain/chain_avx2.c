/* The chain kernel for AVX2 + FMA (8 float lanes; tails through vector masks and vmaskmov,
 * which never touches the masked-off lanes' memory). */
#include "../eltwise/eltwise_vec_avx2.h"

static inline __m256i chain_avx2_tailmask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256 chain_avx2_mload(const float *p, __m256i m, __m256 fill) {
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

#define VW 8
#define M __m256i
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps((p), (v))
#define V_TAILMASK(n) chain_avx2_tailmask(n)
#define V_MLOAD(p, m, fill) chain_avx2_mload((p), (m), (fill))
#define V_MSTORE(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define V_SQRT(x) _mm256_sqrt_ps(x)
#define V_NEG(x) _mm256_xor_ps((x), _mm256_set1_ps(-0.0f))
#define V_FABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (x))
#define V_NANSEL(b, t) _mm256_blendv_ps((t), (b), _mm256_cmp_ps((b), (b), _CMP_UNORD_Q))
/* 16 registers: two groups of 8 leave room for the input copies and the operands */
#define CHAIN_U 2
#define CHAIN_ISA_NAME chain_isa_avx2

#include "chain_simd.h"
