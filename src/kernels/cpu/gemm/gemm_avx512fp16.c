/* fp16 tiles of the GEMM (gemm.h, kpair 2) for CPUs with AVX512-FP16, whose vfmadd231ph does 32
 * half-precision multiply-adds per instruction where vfmadd231ps does 16 (a Sapphire Rapids core
 * without AMX, anvil_kbench peak: 380 GFLOP/s fp16, 182 fp32, and 86 for its vdpbf16ps, so on
 * such a CPU fp16 is the reduced precision that pays). This file is compiled with AVX512-FP16
 * flags (cmake/kernels.cmake); without a compiler that knows them its tiles have no micro-kernel
 * and gemm_kernel_usable refuses them.
 *
 * The panels are the bf16 tiles' (gemm_pairs_avx512.h, rounding to IEEE half instead): each
 * 32-bit slot holds the values of k and k + 1. The A "broadcast" is a row's slot, so one
 * vfmadd231ph multiplies 16 columns at two k at once: lane 2j of an accumulator sums column j's
 * even k, lane 2j + 1 its odd k. Those running sums are fp16, whose 11-bit mantissa and 65504
 * range would not survive a long K, so they cover at most FP16_CHUNK slots: then they are
 * widened to fp32 and added to the fp32 sums of the tile (kept on the stack, in L1), and start
 * again from zero. The two lanes of a column are added once, at the end, and from there the fp32
 * tile is the template's: the accumulate, the fused epilogue (gemm_ukernel_epilogue) and the
 * store. Operands are rounded once, when packed; the products are exact in fp32 terms only up to
 * the fp16 sum's rounding, about 2^-11 of the running sum per step.
 *
 * Like the bf16 tiles they are listed apart (gemm_kernels_fp16), so no fp32 choice can pick one,
 * and have no in-place kernels and no bf16 storage (pack_a16, store_c16 NULL). */
#include "gemm_vec_avx512.h"

#ifdef ANVIL_CC_AVX512FP16

/* Slots per fp16 run before it is widened (two k each). Widening costs about 7 vector operations
 * per accumulator against one vfmadd231ph per accumulator per slot, so its share of the time is
 * about 7 / FP16_CHUNK, while the fp16 sum's error grows with the run (a random walk of
 * FP16_CHUNK roundings of the running sum). anvil_kbench gemm --precision fp16, 1 thread, Xeon
 * without AMX, 4x64 at 512x3072x768 (6x64 at 1024^3), GFLOP/s and max error relative to the
 * output's scale: 64: 301 (292), 1.5e-3 (1.3e-3); 128: 321 (323), 1.7e-3 (2.3e-3); 256: 328
 * (320), 2.3e-3 (2.5e-3). 128 takes most of the speed for little of the error; bf16's is ~1e-2. */
#define FP16_CHUNK 128

#define PAIRS_CVT16(x) _mm512_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define PAIRS_CVT32(lo, hi)                                                                        \
    _mm512_inserti64x4(_mm512_castsi256_si512(PAIRS_CVT16(lo)), PAIRS_CVT16(hi), 1)
#include "gemm_pairs_avx512.h"

static inline __attribute__((always_inline)) void
fp16_body(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
          int64_t ldc, int accumulate, const float *pf, int64_t pf_n, const gemm_epilogue *ep,
          int64_t i0, int64_t j0, const int mr, const int nv) {
    /* the fp32 sums of each accumulator's 32 lanes, (i * nv + j) * 32 + lane */
    float sums[GEMM_MR_MAX * GEMM_NV_MAX * 32] __attribute__((aligned(64)));
    __m512h acc[GEMM_MR_MAX][GEMM_NV_MAX];
    int64_t p = 0;
    for (int run = 0; run == 0 || p < kc; run++) {
        const int64_t end = kc - p > FP16_CHUNK ? p + FP16_CHUNK : kc;
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = _mm512_setzero_ph();
#pragma GCC unroll 2
        for (; p < end; p++) {
            __m512h bv[GEMM_NV_MAX];
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) bv[j] = _mm512_castps_ph(_mm512_loadu_ps(b + j * 16));
            if (p < pf_n) __builtin_prefetch(pf + p * 16, 0, 2);
#pragma GCC unroll 16
            for (int i = 0; i < mr; i++) {
                const __m512h av = _mm512_castps_ph(_mm512_set1_ps(a[i]));
#pragma GCC unroll 4
                for (int j = 0; j < nv; j++) acc[i][j] = _mm512_fmadd_ph(av, bv[j], acc[i][j]);
            }
            a += mr;
            b += nv * 16;
        }
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) {
                const __m512i x = _mm512_castph_si512(acc[i][j]);
                __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(x));
                __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(x, 1));
                float *s = sums + (i * nv + j) * 32;
                if (run) {
                    lo = _mm512_add_ps(lo, _mm512_load_ps(s));
                    hi = _mm512_add_ps(hi, _mm512_load_ps(s + 16));
                }
                _mm512_store_ps(s, lo);
                _mm512_store_ps(s + 16, hi);
            }
    }
    /* lanes 2j and 2j + 1 of the 32 (columns j of lo, then of hi) into column j */
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    gemm_v out[GEMM_MR_MAX][GEMM_NV_MAX];
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) {
            const float *s = sums + (i * nv + j) * 32;
            const __m512 lo = _mm512_load_ps(s), hi = _mm512_load_ps(s + 16);
            out[i][j] = _mm512_add_ps(_mm512_permutex2var_ps(lo, even, hi),
                                      _mm512_permutex2var_ps(lo, odd, hi));
            if (accumulate)
                out[i][j] = _mm512_add_ps(out[i][j], _mm512_loadu_ps(c + i * ldc + j * 16));
        }
    if (ep) gemm_ukernel_epilogue(out, ep, i0, j0, mr, nv);
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) _mm512_storeu_ps(c + i * ldc + j * 16, out[i][j]);
}

#define FP16_INSTANCE(MR, NV, NR, ISA)                                                             \
    static void gemm_uk_##MR##x##NR##_##ISA(                                                       \
        int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate,         \
        const float *pf, int64_t pf_n, const gemm_epilogue *ep, int64_t i0, int64_t j0) {          \
        fp16_body(kc, a, b, c, ldc, accumulate, pf, pf_n, ep, i0, j0, MR, NV);                     \
    }

GEMM_TILES_AVX512FP16(FP16_INSTANCE)
GEMM_TILE_EPILOGUE(avx512fp16)
#define GEMM_PACK_A_avx512fp16 pack_a_pairs
#define GEMM_PACK_B_avx512fp16 pack_b_pairs
#define GEMM_PACK_A16_avx512fp16 NULL
#define GEMM_STORE_C16_avx512fp16 NULL
#define GEMM_UKC_avx512fp16 NULL
#define GEMM_UKR16_avx512fp16(MR, NR) NULL
GEMM_TILES_AVX512FP16(GEMM_KERNEL_DEF_PAIRS)

#else
/* No compiler support: the tiles exist (gemm.c lists them) but have no micro-kernel. */
#define FP16_ABSENT(MR, NV, NR, ISA)                                                               \
    const gemm_kernel gemm_kernel_##MR##x##NR##_##ISA = {                                          \
        .name = #MR "x" #NR "_" #ISA, .mr = MR, .nr = NR, .needs = GEMM_NEEDS_##ISA, .kpair = 2};
GEMM_TILES_AVX512FP16(FP16_ABSENT)
#endif
