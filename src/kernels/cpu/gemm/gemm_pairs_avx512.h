/* The packers of the GEMM tiles over pairs (gemm.h's kpair 2): fp32 operands in, 16-bit values
 * out, two of consecutive k in each 32-bit slot (k even in the low half). One body for every
 * 16-bit format: the including file defines how 16 and 32 floats are rounded to it, then gets
 * pack_a_pairs and pack_b_pairs (gemm_kernel.pack_a / .pack_b):
 *
 *   PAIRS_CVT16(x)      16 floats (__m512) to 16 values (__m256i), element order kept
 *   PAIRS_CVT32(lo, hi) 32 floats to 32 values (__m512i): lo's first, then hi's
 *
 * gemm_avx512bf16.c rounds to bf16, gemm_avx512fp16.c to IEEE half; both round to nearest even.
 * Included once per file, after immintrin.h and the file's target flags. */
#ifndef ANVIL_GEMM_PAIRS_AVX512_H
#define ANVIL_GEMM_PAIRS_AVX512_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* The 16 pair slots of up to 32 values x[0], x[cs], ... (count of them; zeros past count). */
static __m512i pairs_of(const float *x, int64_t cs, int64_t count) {
    __m512 lo, hi;
    if (cs == 1) {
        const int64_t nl = count < 16 ? count : 16;
        const int64_t nh = count > 32 ? 16 : count > 16 ? count - 16 : 0;
        lo = _mm512_maskz_loadu_ps((__mmask16)((1u << nl) - 1u), x);
        hi = _mm512_maskz_loadu_ps((__mmask16)((1u << nh) - 1u), x + 16);
    } else {
        float t[32];
        for (int64_t q = 0; q < 32; q++) t[q] = q < count ? x[q * cs] : 0.0f;
        lo = _mm512_loadu_ps(t);
        hi = _mm512_loadu_ps(t + 16);
    }
    return PAIRS_CVT32(lo, hi);
}

/* The slots of 16 columns at rows p and p + 1 of B (columns past n and a row past kc zero). */
static __m512i pairs_across(const float *b, int64_t rs, int64_t cs, int64_t p, int64_t kc,
                            int64_t n) {
    __m512 r0, r1 = _mm512_setzero_ps();
    const __mmask16 m = (__mmask16)((1u << (n < 16 ? n : 16)) - 1u);
    if (cs == 1) {
        r0 = _mm512_maskz_loadu_ps(m, b + p * rs);
        if (p + 1 < kc) r1 = _mm512_maskz_loadu_ps(m, b + (p + 1) * rs);
    } else {
        float t0[16], t1[16];
        for (int64_t j = 0; j < 16; j++) {
            t0[j] = j < n ? b[p * rs + j * cs] : 0.0f;
            t1[j] = j < n && p + 1 < kc ? b[(p + 1) * rs + j * cs] : 0.0f;
        }
        r0 = _mm512_loadu_ps(t0);
        r1 = _mm512_loadu_ps(t1);
    }
    const __m512i e0 = _mm512_cvtepu16_epi32(PAIRS_CVT16(r0));
    const __m512i e1 = _mm512_cvtepu16_epi32(PAIRS_CVT16(r1));
    return _mm512_or_si512(e0, _mm512_slli_epi32(e1, 16));
}

/* The first n (<= 16) of the 16 slots r[i] holds for each of 8 rows, written where an MR-row
 * panel keeps them: slot q of row i at d[q*mr + i], for the first nr (<= 8) rows only. A 32-bit
 * 8 x 16 transpose in registers (4x4 blocks within 128-bit lanes, then lanes exchanged): 32
 * shuffles for 128 slots, where writing each slot on its own took a store per slot and made
 * pack_a a tenth of MobileNetV3-small's time (its expand convs have K = 16). */
static void panel_slots(const __m512i r[8], int64_t n, int nr, int mr, uint32_t *d) {
    __m512i t[8], u[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    /* u[c] (c < 4): slot 4L + c of rows 0-3 in lane L; u[4 + c] the same of rows 4-7 */
    for (int h = 0; h < 2; h++) {
        const __m512i *a = t + 4 * h;
        u[4 * h + 0] = _mm512_unpacklo_epi64(a[0], a[2]);
        u[4 * h + 1] = _mm512_unpackhi_epi64(a[0], a[2]);
        u[4 * h + 2] = _mm512_unpacklo_epi64(a[1], a[3]);
        u[4 * h + 3] = _mm512_unpackhi_epi64(a[1], a[3]);
    }
    /* z[p]: slots 2p and 2p + 1 of rows 0-7 */
    __m512i z[8];
    for (int c = 0; c < 4; c += 2)
        for (int odd = 0; odd < 2; odd++) {
            /* slots c + 4L (w0) and c + 1 + 4L (w1) for L = odd, odd + 2 */
            const __m512i w0 = odd ? _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd)
                                   : _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
            const __m512i w1 = odd ? _mm512_shuffle_i32x4(u[c + 1], u[5 + c], 0xdd)
                                   : _mm512_shuffle_i32x4(u[c + 1], u[5 + c], 0x88);
            /* the pair (c + 4 odd, c + 1 + 4 odd) and the one 8 slots on */
            z[(c + 4 * odd) / 2] = _mm512_shuffle_i32x4(w0, w1, 0x88);
            z[(c + 4 * odd + 8) / 2] = _mm512_shuffle_i32x4(w0, w1, 0xdd);
        }
    const __mmask8 rows = (__mmask8)((1u << nr) - 1u);
    for (int p = 0; 2 * p < n; p++) {
        _mm256_mask_storeu_epi32(d + 2 * p * mr, rows, _mm512_castsi512_si256(z[p]));
        if (2 * p + 1 < n)
            _mm256_mask_storeu_epi32(d + (2 * p + 1) * mr, rows,
                                     _mm512_extracti64x4_epi64(z[p], 1));
    }
}

static void pack_b_pairs(int nr, const float *b, int64_t rs, int64_t cs, int64_t kc, int64_t n,
                         float *dst);

/* gemm_kernel.pack_a: A (m x kc, A[i,p] at a[i*rs + p*cs]) into MR-row panels of pair slots,
 * slot q of row i at dst[q*mr + i]. An A stored by columns (a transposed operand, a training
 * graph's X^T dY) is a B by rows to pack_b_pairs, whose panels are laid out the same way. */
__attribute__((unused)) static void pack_a_pairs(int mr, const float *a, int64_t rs, int64_t cs,
                                                 int64_t m, int64_t kc, float *dst) {
    if (rs == 1 && cs != 1) {
        pack_b_pairs(mr, a, cs, 1, kc, m, dst);
        return;
    }
    const int64_t slots = (kc + 1) / 2;
    uint32_t w[16];
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += slots * mr) {
        const int64_t rows = m - i0 < mr ? m - i0 : mr;
        uint32_t *d = (uint32_t *)dst;
        if (cs == 1) {
            /* rows in groups of 8, each group's slots transposed in registers */
            for (int64_t q0 = 0; q0 < slots; q0 += 16) {
                const int64_t n = slots - q0 < 16 ? slots - q0 : 16;
                for (int g = 0; g < mr; g += 8) {
                    __m512i r[8];
                    for (int i = 0; i < 8; i++)
                        r[i] = g + i < rows
                                   ? pairs_of(a + (i0 + g + i) * rs + 2 * q0, 1, kc - 2 * q0)
                                   : _mm512_setzero_si512();
                    panel_slots(r, n, mr - g < 8 ? mr - g : 8, mr, d + q0 * mr + g);
                }
            }
            continue;
        }
        for (int64_t i = 0; i < mr; i++) {
            const float *src = a + (i0 + i) * rs;
            for (int64_t q0 = 0; q0 < slots; q0 += 16) {
                const int64_t n = slots - q0 < 16 ? slots - q0 : 16;
                if (i < rows)
                    _mm512_storeu_si512(w, pairs_of(src + 2 * q0 * cs, cs, kc - 2 * q0));
                else
                    memset(w, 0, sizeof w);
                for (int64_t q = 0; q < n; q++) d[(q0 + q) * mr + i] = w[q];
            }
        }
    }
}

/* gemm_kernel.pack_b: B (kc x n, B[p,j] at b[p*rs + j*cs]) into NR-column panels of pair slots,
 * slot q of column j at dst[q*nr + j]. A B stored by columns (a transposed operand, dY W^T) is
 * an A by rows to pack_a_pairs: its 8 x 16 register transposes instead of a store per slot. */
__attribute__((unused)) static void pack_b_pairs(int nr, const float *b, int64_t rs, int64_t cs,
                                                 int64_t kc, int64_t n, float *dst) {
    if (rs == 1 && cs != 1) {
        pack_a_pairs(nr, b, cs, 1, n, kc, dst);
        return;
    }
    const int64_t slots = (kc + 1) / 2;
    /* By rows: each pair of B's rows is read once across the block and dealt to the panels, the
     * rows 8 ahead prefetched. A B that changes every step (a training graph's weights and
     * gradients) comes from memory, a row on another 4 KiB page at N = 512, and the hardware
     * prefetchers do not cross pages: pack_b took 30% of a training step's 1024x512x2048 GEMM.
     * Packing 2048x512 from memory (1 thread, Zen 5): panel by panel 0.55-0.59 ms, by rows
     * 0.42-0.50, by rows with the prefetch 0.20-0.23. */
    for (int64_t q = 0; q < slots; q++) {
        if (cs == 1 && 2 * q + 9 < kc)
            for (int64_t j = 0; j < n; j += 16) {
                _mm_prefetch((const char *)(b + (2 * q + 8) * rs + j), _MM_HINT_T0);
                _mm_prefetch((const char *)(b + (2 * q + 9) * rs + j), _MM_HINT_T0);
            }
        for (int64_t j0 = 0; j0 < n; j0 += nr) {
            float *d = dst + (j0 / nr) * slots * nr + q * nr;
            for (int64_t j = 0; j < nr; j += 16) {
                /* an A panel's MR (pack_a_pairs) need not be a multiple of 16 */
                const int64_t width = nr - j < 16 ? nr - j : 16, left = n - j0 - j;
                _mm512_mask_storeu_epi32(d + j, (__mmask16)((1u << width) - 1u),
                                         pairs_across(b + (j0 + j) * cs, rs, cs, 2 * q, kc,
                                                      left <= 0      ? 0
                                                      : left < width ? left
                                                                     : width));
            }
        }
    }
}

#endif
