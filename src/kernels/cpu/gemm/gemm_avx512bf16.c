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

/* ---- packing: fp32 in, bf16 pairs out (the shared packers, rounding with vcvtne[2]ps2bf16) --- */

#define PAIRS_CVT16(x) ((__m256i)_mm512_cvtneps_pbh(x))
#define PAIRS_CVT32(lo, hi) ((__m512i)_mm512_cvtne2ps_pbh((hi), (lo)))
#include "gemm_pairs_avx512.h"

/* ---- bf16 storage: A read, C written in bf16 (gemm_problem.a16, .c16) ---------------------- */

/* gemm_kernel.pack_a16: a bf16 row's values are its pair slots already (k even in the low half,
 * as pairs_of makes them), so a panel is the rows' 32-bit words interleaved, the odd k past kc
 * zeroed: 8 rows' 16 slots at a time through pack_a_pairs' register transpose (panel_slots). A
 * slot at a time, this packer made the bf16-stored expansions of EfficientNet-B0 7% slower than
 * reading them in fp32 (their K is 16 to 240). */
__attribute__((unused)) static void pack_a16_bf16(int mr, const uint16_t *a, int64_t rs, int64_t m,
                                                  int64_t kc, float *dst) {
    const int64_t slots = (kc + 1) / 2;
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += slots * mr) {
        const int64_t rows = m - i0 < mr ? m - i0 : mr;
        uint32_t *d = (uint32_t *)dst;
        for (int64_t q0 = 0; q0 < slots; q0 += 16) {
            const int64_t n = slots - q0 < 16 ? slots - q0 : 16;
            const int64_t count = kc - 2 * q0 < 32 ? kc - 2 * q0 : 32;
            const __mmask32 mask = count < 32 ? (__mmask32)((1u << count) - 1u) : ~(__mmask32)0;
            for (int g = 0; g < mr; g += 8) {
                __m512i r[8];
                for (int i = 0; i < 8; i++)
                    r[i] = g + i < rows
                               ? _mm512_maskz_loadu_epi16(mask, a + (i0 + g + i) * rs + 2 * q0)
                               : _mm512_setzero_si512();
                panel_slots(r, n, mr - g < 8 ? mr - g : 8, mr, d + q0 * mr + g);
            }
        }
    }
}

/* gemm_kernel.store_c16: the packers' rounding (vcvtneps2bf16), 16 columns at a time, masked
 * only at a row's end: masked 16-bit stores throughout made a binary op's bf16 output (an SE
 * gate's Mul, rows of 512 rounded at once) a third slower than its fp32 one on Zen 5. */
__attribute__((unused)) static void store_c16_bf16(const float *t, int64_t ldt, uint16_t *c,
                                                   int64_t ldc, int64_t m, int64_t n) {
    for (int64_t i = 0; i < m; i++) {
        const float *src = t + i * ldt;
        uint16_t *dst = c + i * ldc;
        int64_t j = 0;
        for (; j + 16 <= n; j += 16)
            _mm256_storeu_si256((__m256i *)(dst + j),
                                (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j)));
        if (j < n) {
            const __mmask16 mask = (__mmask16)((1u << (n - j)) - 1u);
            const __m512 x = _mm512_maskz_loadu_ps(mask, src + j);
            _mm256_mask_storeu_epi16(dst + j, mask, (__m256i)_mm512_cvtneps_pbh(x));
        }
    }
}

/* gemm.h's, for the AMX tile */
void gemm_bf16_pack_b(int nr, const float *b, int64_t rs, int64_t cs, int64_t kc, int64_t n,
                      float *dst) {
    pack_b_pairs(nr, b, rs, cs, kc, n, dst);
}
void gemm_bf16_store_c16(const float *t, int64_t ldt, uint16_t *c, int64_t ldc, int64_t m,
                         int64_t n) {
    store_c16_bf16(t, ldt, c, ldc, m, n);
}

GEMM_TILES_AVX512BF16(GEMM_UKERNEL_PACKED_INSTANCE)
GEMM_TILE_EPILOGUE(avx512bf16)
/* the column kernel over pair slots: an edge of few columns (a 7x7 map's 49th pixel) costs a
 * dot product per column and slot instead of a whole register tile */
GEMM_UKERNEL_COLS(avx512bf16)
#define GEMM_UKC_avx512bf16 gemm_ukc_avx512bf16
#define GEMM_PACK_A_avx512bf16 pack_a_pairs
#define GEMM_PACK_B_avx512bf16 pack_b_pairs
#define GEMM_PACK_A16_avx512bf16 pack_a16_bf16
#define GEMM_STORE_C16_avx512bf16 store_c16_bf16
/* the micro-kernel on a bf16 A in place: gemm_ukernel_body with the row stride in slots and one
 * slot per k step, the broadcast reading each row's pair where it lies */
#define BF16_ROWS_INSTANCE(MR, NV, NR, ISA)                                                        \
    GEMM_UKERNEL_LDA(gemm_ukr_##MR##x##NR##_##ISA, MR, NV, NR, lda, 1)
GEMM_TILES_AVX512BF16(BF16_ROWS_INSTANCE)
#define GEMM_UKR16_avx512bf16(MR, NR) gemm_ukr_##MR##x##NR##_avx512bf16
GEMM_TILES_AVX512BF16(GEMM_KERNEL_DEF_PAIRS)
