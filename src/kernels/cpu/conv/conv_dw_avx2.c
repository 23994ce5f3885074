/* AVX2 instance of the depthwise plane kernel (conv_dw_tmpl.h). Called only after the variant's
 * KERN_NEEDS_AVX2 matched. */
#include "conv.h"

#include <immintrin.h>

typedef __m256 dw_v;
#define DW_VL 8
#define DW_LOAD(p) _mm256_loadu_ps(p)
#define DW_BCAST(x) _mm256_set1_ps(x)
#define DW_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define DW_STORE(p, v) _mm256_storeu_ps((p), (v))
#define DW_PLANE_FN conv_dw_plane_avx2

static inline void dw_store_n(float *p, dw_v v, int64_t n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane), v);
}
#define DW_STORE_N(p, v, n) dw_store_n((p), (v), (n))

/* Even lanes of two consecutive vectors: shuffle pairs within 128-bit halves, then put the
 * halves in order. */
static inline dw_v dw_load_s2(const float *p) {
    __m256 s =
        _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), 0xD8));
}
#define DW_LOAD_S2(p) dw_load_s2(p)

#include "conv_dw_tmpl.h"
