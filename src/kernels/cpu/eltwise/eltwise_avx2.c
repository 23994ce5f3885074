/* The eltwise kernels for AVX2 + FMA (8 float lanes; tails through vector masks and
 * vmaskmov, which never touches the masked-off lanes' memory). */
#include "eltwise_vec_avx2.h"

static inline __m256 avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm256_castps128_ps256(s);
}

static inline __m256 avx2_hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm256_castps128_ps256(s);
}

static inline __m256i avx2_tailmask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256 avx2_mload(const float *p, __m256i m, __m256 fill) {
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

#define VW 8
#define M __m256i
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps((p), (v))
#define V_TAILMASK(n) avx2_tailmask(n)
#define V_MLOAD(p, m, fill) avx2_mload((p), (m), (fill))
#define V_MSTORE(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define V_IDX(s)                                                                                   \
    _mm256_castsi256_ps(                                                                           \
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(s)))
#define V_GATHER(base, idx, m, full, fill)                                                         \
    _mm256_mask_i32gather_ps((fill), (base), _mm256_castps_si256(idx),                             \
                             _mm256_castsi256_ps((full) ? _mm256_set1_epi32(-1) : (m)), 4)
/* The even lanes of the 2 * VW floats lo:hi: per 128-bit half the even ones of each, then the
 * 64-bit pieces put in order. */
#define V_EVEN2(lo, hi)                                                                            \
    _mm256_castpd_ps(_mm256_permute4x64_pd(                                                        \
        _mm256_castps_pd(_mm256_shuffle_ps((lo), (hi), _MM_SHUFFLE(2, 0, 2, 0))),                  \
        _MM_SHUFFLE(3, 1, 2, 0)))
#define V_HSUM(v) _mm256_cvtss_f32(avx2_hsum(v))
#define V_HMAX(v) _mm256_cvtss_f32(avx2_hmax(v))
#define ELT_ISA_NAME elt_isa_avx2

#include "eltwise_simd.h"
