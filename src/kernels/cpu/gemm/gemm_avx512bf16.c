/* bf16 instances of the GEMM template: AVX-512 register tiles whose multiply is vdpbf16ps (this
 * file is compiled with AVX-512 and AVX512-BF16 flags; the driver calls it only where the CPU has
 * both, see cmake/kernels.cmake and kern_isa_ok).
 *
 * The micro-kernel is gemm_ukernel.h's, unchanged but for its multiply (GEMM_DOT; GEMM_FMA stays
 * fp32 for the epilogue's residual): each 32-bit slot of the
 * packed panels holds a pair of bf16 values of consecutive k, so the B vector of a slot is 16
 * columns x 2 k, the A "broadcast" is one row's pair, and vdpbf16ps adds both products into the
 * fp32 accumulator of each column. One instruction thus does the work of two FMAs; the
 * accumulators, the fused epilogue and the store are the fp32 tile's. Operands arrive in fp32 and
 * are rounded to nearest even when packed (A per block while the GEMM runs, constant weights once
 * per session), which is the only rounding: the sums are fp32. */
/* the k loop's product: the dot product of bf16 pairs (GEMM_FMA stays fp32, for the epilogue) */
#define GEMM_DOT(a, b, c) _mm512_dpbf16_ps((c), (__m512bh)(a), (__m512bh)(b))
#include "gemm_vec_avx512.h"

#include <string.h>

/* ---- packing: fp32 in, bf16 pairs out -------------------------------------------------------- */

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
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
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
    const __m512i e0 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(r0));
    const __m512i e1 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(r1));
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

/* gemm_kernel.pack_a: A (m x kc, A[i,p] at a[i*rs + p*cs]) into MR-row panels of pair slots,
 * slot q of row i at dst[q*mr + i]. */
__attribute__((unused)) static void pack_a_bf16(int mr, const float *a, int64_t rs, int64_t cs,
                                                int64_t m, int64_t kc, float *dst) {
    const int64_t slots = (kc + 1) / 2;
    uint32_t w[16];
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += slots * mr) {
        const int64_t rows = m - i0 < mr ? m - i0 : mr;
        uint32_t *d = (uint32_t *)dst;
        if (rs == 1) {
            /* A stored by columns (a transposed operand, a training graph's X^T dY): a slot row
             * pairs two of its columns, each MR contiguous floats */
            for (int64_t q = 0; q < slots; q++)
                _mm512_mask_storeu_epi32(d + q * mr, (__mmask16)((1u << mr) - 1u),
                                         pairs_across(a + i0, cs, 1, 2 * q, kc, rows));
            continue;
        }
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
 * slot q of column j at dst[q*nr + j]. */
__attribute__((unused)) static void pack_b_bf16(int nr, const float *b, int64_t rs, int64_t cs,
                                                int64_t kc, int64_t n, float *dst) {
    const int64_t slots = (kc + 1) / 2;
    uint32_t w[16];
    for (int64_t j0 = 0; j0 < n; j0 += nr, dst += slots * nr) {
        const int64_t cols = n - j0 < nr ? n - j0 : nr;
        if (rs == 1 && cs != 1) {
            /* B stored by columns (a transposed operand, dY W^T): each column's k run is
             * contiguous, 32 floats to 16 slots, written down the panel */
            uint32_t *d = (uint32_t *)dst;
            for (int64_t j = 0; j < nr; j++)
                for (int64_t q0 = 0; q0 < slots; q0 += 16) {
                    const int64_t nq = slots - q0 < 16 ? slots - q0 : 16;
                    if (j < cols)
                        _mm512_storeu_si512(w,
                                            pairs_of(b + (j0 + j) * cs + 2 * q0, 1, kc - 2 * q0));
                    else
                        memset(w, 0, sizeof w);
                    for (int64_t q = 0; q < nq; q++) d[(q0 + q) * nr + j] = w[q];
                }
            continue;
        }
        for (int64_t q = 0; q < slots; q++)
            for (int64_t j = 0; j < nr; j += 16)
                _mm512_storeu_si512(dst + q * nr + j,
                                    pairs_across(b + (j0 + j) * cs, rs, cs, 2 * q, kc,
                                                 cols - j > 0 ? cols - j : 0));
    }
}

/* ---- bf16 storage: A read, C written in bf16 (gemm_problem.a16, .c16) ---------------------- */

/* gemm_kernel.pack_a16: a bf16 row's values are its pair slots already (k even in the low half,
 * as pairs_of makes them), so a panel is the rows' 32-bit words interleaved, the odd k past kc
 * zeroed. */
__attribute__((unused)) static void pack_a16_bf16(int mr, const uint16_t *a, int64_t rs, int64_t m,
                                                  int64_t kc, float *dst) {
    const int64_t slots = (kc + 1) / 2;
    uint32_t w[16];
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += slots * mr) {
        const int64_t rows = m - i0 < mr ? m - i0 : mr;
        uint32_t *d = (uint32_t *)dst;
        for (int64_t i = 0; i < mr; i++) {
            const uint16_t *src = a + (i0 + i) * rs;
            for (int64_t q0 = 0; q0 < slots; q0 += 16) {
                const int64_t n = slots - q0 < 16 ? slots - q0 : 16;
                const int64_t count = kc - 2 * q0 < 32 ? kc - 2 * q0 : 32;
                const __mmask32 mask = count < 32 ? (__mmask32)((1u << count) - 1u) : ~(__mmask32)0;
                if (i < rows)
                    _mm512_storeu_si512(w, _mm512_maskz_loadu_epi16(mask, src + 2 * q0));
                else
                    memset(w, 0, sizeof w);
                for (int64_t q = 0; q < n; q++) d[(q0 + q) * mr + i] = w[q];
            }
        }
    }
}

/* gemm_kernel.store_c16: the packers' rounding (vcvtneps2bf16), 16 columns at a time. */
__attribute__((unused)) static void store_c16_bf16(const float *t, int64_t ldt, uint16_t *c,
                                                   int64_t ldc, int64_t m, int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j += 16) {
            const __mmask16 mask =
                n - j < 16 ? (__mmask16)((1u << (n - j)) - 1u) : (__mmask16)0xffffu;
            const __m512 x = _mm512_maskz_loadu_ps(mask, t + i * ldt + j);
            _mm256_mask_storeu_epi16(c + i * ldc + j, mask, (__m256i)_mm512_cvtneps_pbh(x));
        }
}

/* gemm.h's, for the AMX tile */
void gemm_bf16_pack_b(int nr, const float *b, int64_t rs, int64_t cs, int64_t kc, int64_t n,
                      float *dst) {
    pack_b_bf16(nr, b, rs, cs, kc, n, dst);
}
void gemm_bf16_store_c16(const float *t, int64_t ldt, uint16_t *c, int64_t ldc, int64_t m,
                         int64_t n) {
    store_c16_bf16(t, ldt, c, ldc, m, n);
}

GEMM_TILES_AVX512BF16(GEMM_UKERNEL_PACKED_INSTANCE)
GEMM_TILE_EPILOGUE(avx512bf16)
#define GEMM_PACK_A_avx512bf16 pack_a_bf16
#define GEMM_PACK_B_avx512bf16 pack_b_bf16
#define GEMM_PACK_A16_avx512bf16 pack_a16_bf16
#define GEMM_STORE_C16_avx512bf16 store_c16_bf16
GEMM_TILES_AVX512BF16(GEMM_KERNEL_DEF_PAIRS)
