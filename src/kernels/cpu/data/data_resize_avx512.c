/* The AVX-512 row kernel of linear resize (see data_resize.h). Upsampling and mild downsampling
 * read a 16-column output block from at most 32 consecutive input columns, so two masked loads
 * and a two-source permute replace a gather; other blocks gather. */
#include "data_resize.h"

#include <immintrin.h>

static inline __mmask16 tail_mask(size_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* row[i] = a * r0[i] + b * r1[i] for i < n (a * r0[i] when b == 0). */
static void blend(float *row, const float *r0, const float *r1, float a, float b, size_t n) {
    const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    size_t i = 0;
    if (b == 0) {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(row + i, _mm512_mul_ps(va, _mm512_loadu_ps(r0 + i)));
        if (i < n) {
            __mmask16 m = tail_mask(n - i);
            _mm512_mask_storeu_ps(row + i, m, _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, r0 + i)));
        }
        return;
    }
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(row + i, _mm512_add_ps(_mm512_mul_ps(va, _mm512_loadu_ps(r0 + i)),
                                                _mm512_mul_ps(vb, _mm512_loadu_ps(r1 + i))));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_add_ps(_mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, r0 + i)),
                                 _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, r1 + i)));
        _mm512_mask_storeu_ps(row + i, m, v);
    }
}

void data_resize_linear_row_avx512(const rz_hplan *p, const float *r0, const float *r1, float a,
                                   float b, bool w_resized, float *tmp, float *dst) {
    if (!w_resized) {
        blend(dst, r0, r1, a, b, p->iw);
        return;
    }
    const float *row = r0;
    if (b != 0 || a != 1) {
        blend(tmp, r0, r1, a, b, p->iw);
        row = tmp;
    }
    const size_t iw = p->iw, ow = p->ow;
    for (size_t o = 0, k = 0; o < ow; o += 16, k++) {
        __mmask16 m = tail_mask(ow - o);
        size_t base = (size_t)p->base[k];
        __m512i i0 = _mm512_maskz_loadu_epi32(m, p->off0 + o);
        __m512i i1 = _mm512_maskz_loadu_epi32(m, p->off1 + o);
        __m512 x0, x1;
        if (p->fits[k]) {
            size_t left = iw - base;
            __m512 lo = _mm512_maskz_loadu_ps(tail_mask(left), row + base);
            __m512 hi = _mm512_maskz_loadu_ps(left > 16 ? tail_mask(left - 16) : 0,
                                              row + base + (left > 16 ? 16 : 0));
            x0 = _mm512_permutex2var_ps(lo, i0, hi);
            x1 = _mm512_permutex2var_ps(lo, i1, hi);
        } else {
            x0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, i0, row + base, 4);
            x1 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, i1, row + base, 4);
        }
        __m512 w0 = _mm512_maskz_loadu_ps(m, p->w0 + o), w1 = _mm512_maskz_loadu_ps(m, p->w1 + o);
        _mm512_mask_storeu_ps(dst + o, m,
                              _mm512_add_ps(_mm512_mul_ps(w0, x0), _mm512_mul_ps(w1, x1)));
    }
}
