/* The int8 family's vector loops on AVX-512 (quant.h). Rounding is the MXCSR's default, to
 * nearest even, as nearbyint in the reference kernels (ops/quant/); values are clamped in float
 * before the conversion to int32 so that a huge one saturates instead of becoming INT_MIN. */
#include "quant.h"

#include <immintrin.h>
#include <string.h>

/* 16 floats to 16 bytes: round, add zy, clamp to the type's range. */
static inline __m128i to_bytes(__m512 v, __m512i zy, __m512i lo, __m512i hi) {
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-1e9f)), _mm512_set1_ps(1e9f));
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), zy);
    q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
    return _mm512_cvtepi32_epi8(q);
}

/* Transposes 16 rows of 16 bytes in place: r[i] byte j becomes r[j] byte i (unpacks of 8, 16,
 * 32 and 64 bits: 64 instructions for 256 bytes). */
static inline void transpose16x16(__m128i r[16]) {
    __m128i t[16];
    for (int i = 0; i < 8; i++) {
        t[i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
        t[i + 8] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    }
    /* t[i]: rows 2i, 2i+1 interleaved, columns 0-7 (i < 8) or 8-15 (i >= 8) */
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) {
            r[h * 8 + i] = _mm_unpacklo_epi16(t[h * 8 + 2 * i], t[h * 8 + 2 * i + 1]);
            r[h * 8 + i + 4] = _mm_unpackhi_epi16(t[h * 8 + 2 * i], t[h * 8 + 2 * i + 1]);
        }
    for (int h = 0; h < 4; h++)
        for (int i = 0; i < 2; i++) {
            t[h * 4 + i] = _mm_unpacklo_epi32(r[h * 4 + 2 * i], r[h * 4 + 2 * i + 1]);
            t[h * 4 + i + 2] = _mm_unpackhi_epi32(r[h * 4 + 2 * i], r[h * 4 + 2 * i + 1]);
        }
    for (int h = 0; h < 8; h++) {
        r[h * 2] = _mm_unpacklo_epi64(t[h * 2], t[h * 2 + 1]);
        r[h * 2 + 1] = _mm_unpackhi_epi64(t[h * 2], t[h * 2 + 1]);
    }
}

void quant_store_avx512(const float *c, int64_t ldc, int64_t m, int64_t n, int32_t zy,
                        bool is_signed, uint8_t *y, int64_t rs_y, int64_t cs_y) {
    const __m512i z = _mm512_set1_epi32(zy);
    const __m512i lo = _mm512_set1_epi32(is_signed ? -128 : 0);
    const __m512i hi = _mm512_set1_epi32(is_signed ? 127 : 255);
    if (cs_y == 1) {
        for (int64_t i = 0; i < m; i++) {
            const float *src = c + i * ldc;
            uint8_t *dst = y + i * rs_y;
            for (int64_t j = 0; j < n; j += 16) {
                const __mmask16 k = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1u);
                _mm_mask_storeu_epi8(dst + j, k,
                                     to_bytes(_mm512_maskz_loadu_ps(k, src + j), z, lo, hi));
            }
        }
        return;
    }
    /* Transposed (NCHW planes): blocks of 16 rows x 16 columns made bytes, transposed in
     * registers, so that each column's 16 bytes go to its plane in one store (a gather of the
     * column's floats per 16 bytes cost a tenth of a ResNet's int8 convolutions) */
    for (int64_t i = 0; i < m; i += 16) {
        const int64_t rows = m - i < 16 ? m - i : 16;
        const __mmask16 rk = (__mmask16)((1u << rows) - 1u);
        for (int64_t j = 0; j < n; j += 16) {
            const int64_t cols = n - j < 16 ? n - j : 16;
            const __mmask16 ck = (__mmask16)((1u << cols) - 1u);
            __m128i r[16];
            for (int64_t q = 0; q < 16; q++)
                r[q] = q < rows
                           ? to_bytes(_mm512_maskz_loadu_ps(ck, c + (i + q) * ldc + j), z, lo, hi)
                           : _mm_setzero_si128();
            transpose16x16(r);
            for (int64_t q = 0; q < cols; q++)
                _mm_mask_storeu_epi8(y + (j + q) * cs_y + i * rs_y, rk, r[q]);
        }
    }
}

void quant_nchw_to_nhwc_avx512(const uint8_t *x, int64_t c, int64_t hw, int64_t plane, uint8_t flip,
                               uint8_t *xt) {
    const __m128i f = _mm_set1_epi8((char)flip);
    for (int64_t p = 0; p < hw; p += 16) {
        const int64_t px = hw - p < 16 ? hw - p : 16;
        const __mmask16 pk = (__mmask16)((1u << px) - 1u);
        for (int64_t ch = 0; ch < c; ch += 16) {
            const int64_t cs = c - ch < 16 ? c - ch : 16;
            const __mmask16 ck = (__mmask16)((1u << cs) - 1u);
            __m128i r[16];
            for (int64_t q = 0; q < 16; q++)
                r[q] = q < cs ? _mm_xor_si128(_mm_maskz_loadu_epi8(pk, x + (ch + q) * plane + p), f)
                              : _mm_setzero_si128();
            transpose16x16(r);
            for (int64_t q = 0; q < px; q++) _mm_mask_storeu_epi8(xt + (p + q) * c + ch, ck, r[q]);
        }
    }
}

/* n bytes from src to dst (or `fill` in each where src is NULL), 64 at a time */
static inline void copy_bytes(uint8_t *dst, const uint8_t *src, int64_t n, uint8_t fill) {
    const __m512i f = _mm512_set1_epi8((char)fill);
    for (int64_t i = 0; i < n; i += 64) {
        const __mmask64 k = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
        _mm512_mask_storeu_epi8(dst + i, k, src ? _mm512_maskz_loadu_epi8(k, src + i) : f);
    }
}

void quant_im2col_avx512(const uint8_t *x, int64_t h, int64_t w, int64_t c, const int64_t *kernel,
                         const int64_t *stride, const int64_t *pad, const int64_t *dil, int64_t ow,
                         int64_t r0, int64_t m, int64_t k4, uint8_t fill, uint8_t *dst) {
    const int64_t kh = kernel[0], kw = kernel[1], kdim = kh * kw * c;
    for (int64_t i = 0; i < m; i++) {
        const int64_t oy = (r0 + i) / ow, ox = (r0 + i) % ow;
        const int64_t ix0 = ox * stride[1] - pad[1];
        uint8_t *d = dst + i * k4;
        /* a row of taps inside the image, undilated, is kw * c consecutive bytes of x */
        const bool row_inside = dil[1] == 1 && ix0 >= 0 && ix0 + kw <= w;
        for (int64_t ky = 0; ky < kh; ky++, d += kw * c) {
            const int64_t iy = oy * stride[0] - pad[0] + ky * dil[0];
            if (iy < 0 || iy >= h) {
                copy_bytes(d, NULL, kw * c, fill);
            } else if (row_inside) {
                copy_bytes(d, x + (iy * w + ix0) * c, kw * c, fill);
            } else {
                for (int64_t kx = 0; kx < kw; kx++) {
                    const int64_t ix = ix0 + kx * dil[1];
                    copy_bytes(d + kx * c, ix < 0 || ix >= w ? NULL : x + (iy * w + ix) * c, c,
                               fill);
                }
            }
        }
        copy_bytes(dst + i * k4 + kdim, NULL, k4 - kdim, 0);
    }
}

void quant_f32_avx512(const float *x, int64_t n, float s, int32_t zy, bool is_signed, uint8_t *y) {
    const __m512i z = _mm512_set1_epi32(zy);
    const __m512i lo = _mm512_set1_epi32(is_signed ? -128 : 0);
    const __m512i hi = _mm512_set1_epi32(is_signed ? 127 : 255);
    const __m512 sv = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1u);
        /* a division, as the reference's x / s (a reciprocal's product rounds differently) */
        const __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(k, x + i), sv);
        /* NaN becomes 0 in the reference (q_saturate), not the zero point */
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        const __m128i b = _mm_mask_mov_epi8(to_bytes(v, z, lo, hi), nan, _mm_setzero_si128());
        _mm_mask_storeu_epi8(y + i, k, b);
    }
}

void quant_dequant_f32_avx512(const uint8_t *x, int64_t n, float s, int32_t zx, bool is_signed,
                              float *y) {
    const __m512i z = _mm512_set1_epi32(zx);
    const __m512 sv = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m128i b = _mm_maskz_loadu_epi8(k, x + i);
        const __m512i w = is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
        _mm512_mask_storeu_ps(y + i, k,
                              _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(w, z)), sv));
    }
}

void quant_maxpool_avx512(const uint8_t *x, const quant_pool *g, bool is_signed, uint8_t *row,
                          uint8_t *y) {
    /* the smallest value of the type pads the row, so a padded tap never wins */
    const uint8_t lowest = is_signed ? 0x80 : 0;
    const int64_t len = g->row_len;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        /* the window's rows, max'd vertically into row[pl ..] */
        memset(row, lowest, (size_t)len + 128);
        int64_t y0 = oy * g->sh - g->pt, y1 = y0 + g->kh;
        if (y0 < 0) y0 = 0;
        if (y1 > g->ih) y1 = g->ih;
        for (int64_t i = 0; i < g->iw; i += 64) {
            const __mmask64 k =
                g->iw - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (g->iw - i)) - 1);
            __m512i m = _mm512_set1_epi8((char)lowest);
            for (int64_t iy = y0; iy < y1; iy++) {
                const __m512i v = _mm512_mask_loadu_epi8(m, k, x + iy * g->iw + i);
                m = is_signed ? _mm512_max_epi8(m, v) : _mm512_max_epu8(m, v);
            }
            _mm512_mask_storeu_epi8(row + g->pl + i, k, m);
        }
        /* then across: h[x] = max(row[x .. x + kw)), taken at x = ox * sw */
        uint8_t *out = y + oy * g->ow;
        const int64_t step = g->sw <= 64 ? 64 / g->sw : 1; /* outputs per 64 window starts */
        for (int64_t ox = 0; ox < g->ow; ox += step) {
            const int64_t x0 = ox * g->sw;
            __m512i m = _mm512_loadu_si512(row + x0);
            for (int64_t kx = 1; kx < g->kw; kx++) {
                const __m512i v = _mm512_loadu_si512(row + x0 + kx);
                m = is_signed ? _mm512_max_epi8(m, v) : _mm512_max_epu8(m, v);
            }
            if (g->sw == 1) {
                const int64_t n = g->ow - ox < 64 ? g->ow - ox : 64;
                _mm512_mask_storeu_epi8(out + ox,
                                        n == 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1), m);
            } else if (g->sw == 2) {
                /* the even bytes: the low byte of each 16-bit lane */
                const int64_t n = g->ow - ox < 32 ? g->ow - ox : 32;
                _mm256_mask_storeu_epi8(out + ox,
                                        n == 32 ? ~(__mmask32)0 : (((__mmask32)1 << n) - 1),
                                        _mm512_cvtepi16_epi8(m));
            } else {
                uint8_t h[64];
                _mm512_storeu_si512(h, m);
                for (int64_t q = 0; q < step && ox + q < g->ow; q++) out[ox + q] = h[q * g->sw];
            }
        }
    }
}

/* 16 8-bit values widened to floats, their zero point subtracted */
static inline __m512 widen(const uint8_t *x, __mmask16 k, bool is_signed, __m512i z) {
    const __m128i b = _mm_maskz_loadu_epi8(k, x);
    const __m512i w = is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(w, z));
}

void quant_add_avx512(const quant_add_params *p, const uint8_t *a, const uint8_t *b, int64_t n,
                      uint8_t *y) {
    const __m512i za = _mm512_set1_epi32(p->za), zb = _mm512_set1_epi32(p->zb);
    const __m512i zy = _mm512_set1_epi32(p->zy);
    const __m512 sa = _mm512_set1_ps(p->sa), sb = _mm512_set1_ps(p->sb), sy = _mm512_set1_ps(p->sy);
    const __m512i lo = _mm512_set1_epi32(p->y_signed ? -128 : 0);
    const __m512i hi = _mm512_set1_epi32(p->y_signed ? 127 : 255);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1u);
        /* the unfused nodes' operations one by one: two products, their sum, the division */
        const __m512 da = _mm512_mul_ps(widen(a + i, k, p->a_signed, za), sa);
        const __m512 db = _mm512_mul_ps(widen(b + i, k, p->b_signed, zb), sb);
        const __m512 q = _mm512_div_ps(_mm512_add_ps(da, db), sy);
        _mm_mask_storeu_epi8(y + i, k, to_bytes(q, zy, lo, hi));
    }
}

void quant_rows_dynamic_avx512(const float *a, int64_t m, int64_t k, uint8_t *dst, int64_t k4,
                               float *scale) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < m; i++) {
        const float *row = a + i * k;
        __m512 mx = _mm512_setzero_ps();
        for (int64_t p = 0; p < k; p += 16) {
            const __mmask16 km = k - p >= 16 ? 0xffff : (__mmask16)((1u << (k - p)) - 1u);
            mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_maskz_loadu_ps(km, row + p), absmask));
        }
        const float top = _mm512_reduce_max_ps(mx);
        const float s = top > 0.0f && top < __builtin_inff() ? top / 127.0f : 1.0f;
        scale[i] = s;
        const __m512 inv = _mm512_set1_ps(1.0f / s);
        const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
        const __m512i shift = _mm512_set1_epi32(128);
        uint8_t *d = dst + i * k4;
        for (int64_t p = 0; p < k4; p += 16) {
            const __mmask16 km = k - p >= 16 ? 0xffff
                                 : k > p     ? (__mmask16)((1u << (k - p)) - 1u)
                                             : 0;
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(km, row + p), inv));
            q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), shift);
            const __mmask16 ks = k4 - p >= 16 ? 0xffff : (__mmask16)((1u << (k4 - p)) - 1u);
            _mm_mask_storeu_epi8(d + p, ks, _mm512_cvtepi32_epi8(q));
        }
    }
}

/* 16 bytes of a padded row for outputs ox .. ox + 15 at tap kx: stride 1 consecutive bytes,
 * stride 2 the even bytes of 32, else picked one by one. */
static inline __attribute__((always_inline)) __m128i dw_taps(const uint8_t *row, int64_t ox,
                                                             int64_t kx, const int64_t sw) {
    if (sw == 1) return _mm_loadu_si128((const __m128i *)(row + ox + kx));
    if (sw == 2)
        return _mm256_cvtepi16_epi8(_mm256_loadu_si256((const __m256i *)(row + 2 * ox + kx)));
    uint8_t t[16];
    for (int q = 0; q < 16; q++) t[q] = row[(ox + q) * sw + kx];
    return _mm_loadu_si128((const __m128i *)t);
}

/* One output row, nv vectors of 16 columns at a time (each weight broadcast once per 16 nv
 * outputs; nv 1 or 2 for maps of 16 or 32 columns, whose other vectors would be padding) over
 * the valid input rows r[0 .. nr) and their weights wr[i] (kw each); sw and nv constants in the
 * instances below, so the stride-1 and stride-2 loads are straight lines. */
static inline __attribute__((always_inline)) void
dw_row(const quant_dw *g, const uint8_t *const *r, const int32_t *const *wr, int nr, int32_t bias,
       __m512 m, uint8_t *out, const int64_t sw, const bool x_signed, const int nv) {
    const __m512i zx = _mm512_set1_epi32(g->zx), zy = _mm512_set1_epi32(g->zy);
    const __m512i lo = _mm512_set1_epi32(g->y_signed ? -128 : 0);
    const __m512i hi = _mm512_set1_epi32(g->y_signed ? 127 : 255);
    for (int64_t ox = 0; ox < g->ow; ox += 16 * nv) {
        __m512i acc[4];
        for (int v = 0; v < nv; v++) acc[v] = _mm512_set1_epi32(bias);
        for (int i = 0; i < nr; i++)
            for (int64_t kx = 0; kx < g->kw; kx++) {
                const __m512i w = _mm512_set1_epi32(wr[i][kx]);
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) {
                    const __m128i b = dw_taps(r[i], ox + 16 * v, kx, sw);
                    const __m512i x = x_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
                    acc[v] =
                        _mm512_add_epi32(acc[v], _mm512_mullo_epi32(_mm512_sub_epi32(x, zx), w));
                }
            }
        /* the reference's requantization: (float)(sum + bias) * multiplier, rounded */
        for (int v = 0; v < nv && ox + 16 * v < g->ow; v++) {
            const int64_t n = g->ow - ox - 16 * v < 16 ? g->ow - ox - 16 * v : 16;
            const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[v]), m);
            _mm_mask_storeu_epi8(out + ox + 16 * v, (__mmask16)((1u << n) - 1u),
                                 to_bytes(f, zy, lo, hi));
        }
    }
}

void quant_dwconv_avx512(const uint8_t *x, const quant_dw *g, const int32_t *w, int32_t bias,
                         float mult, uint8_t *rows, uint8_t *y) {
    const __m512 m = _mm512_set1_ps(mult);
    const int64_t stride_rows = g->row_len + 64;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        /* the window's input rows, padded with the zero point (a padded tap then adds
         * (zx - zx) * w = 0); rows outside the image are left out */
        const uint8_t *r[16];
        const int32_t *wr[16];
        int nr = 0;
        for (int64_t ky = 0; ky < g->kh; ky++) {
            const int64_t iy = oy * g->sh - g->pt + ky;
            if (iy < 0 || iy >= g->ih) continue;
            uint8_t *row = rows + ky * stride_rows;
            memset(row, (int)(uint8_t)g->zx, (size_t)g->pl);
            memcpy(row + g->pl, x + iy * g->iw, (size_t)g->iw);
            memset(row + g->pl + g->iw, (int)(uint8_t)g->zx, (size_t)(stride_rows - g->pl - g->iw));
            r[nr] = row;
            wr[nr++] = w + ky * g->kw;
        }
        uint8_t *out = y + oy * g->ow;
        const int nv = g->ow <= 16 ? 1 : g->ow <= 32 ? 2 : 4;
#define DW_ROW(SW, SIGNED, NV) dw_row(g, r, wr, nr, bias, m, out, SW, SIGNED, NV)
#define DW_NV(SW, SIGNED)                                                                          \
    do {                                                                                           \
        if (nv == 1)                                                                               \
            DW_ROW(SW, SIGNED, 1);                                                                 \
        else if (nv == 2)                                                                          \
            DW_ROW(SW, SIGNED, 2);                                                                 \
        else                                                                                       \
            DW_ROW(SW, SIGNED, 4);                                                                 \
    } while (0)
        if (g->sw == 1 && !g->x_signed)
            DW_NV(1, false);
        else if (g->sw == 2 && !g->x_signed)
            DW_NV(2, false);
        else if (g->sw == 1)
            DW_NV(1, true);
        else if (g->sw == 2)
            DW_NV(2, true);
        else
            DW_ROW(g->sw, g->x_signed, 4);
#undef DW_NV
#undef DW_ROW
    }
}
