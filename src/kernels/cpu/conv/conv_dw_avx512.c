/* AVX-512 instance of the depthwise plane kernel (conv_dw_tmpl.h). Called only after the
 * variant's KERN_NEEDS_AVX512 matched. */
#include "conv.h"

#include <immintrin.h>

typedef __m512 dw_v;
#define DW_VL 16
#define DW_LOAD(p) _mm512_loadu_ps(p)
#define DW_BCAST(x) _mm512_set1_ps(x)
#define DW_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define DW_STORE(p, v) _mm512_storeu_ps((p), (v))
#define DW_STORE_N(p, v, n) _mm512_mask_storeu_ps((p), (__mmask16)((1u << (n)) - 1u), (v))
#define DW_PLANE_FN conv_dw_plane_avx512

/* Even lanes of two consecutive vectors: the stride-2 taps of 16 outputs. */
static inline dw_v dw_load_s2(const float *p) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(_mm512_loadu_ps(p), even, _mm512_loadu_ps(p + 16));
}
#define DW_LOAD_S2(p) dw_load_s2(p)

#include "conv_dw_tmpl.h"
