/* int8 instances of the GEMM template: AVX-512 register tiles whose multiply is vpdpbusd (this
 * file is compiled with AVX-512 and AVX512-VNNI flags; the driver calls it only where the CPU has
 * both, see cmake/kernels.cmake and kern_isa_ok).
 *
 * The micro-kernel is gemm_ukernel.h's with three primitives changed: each 32-bit slot of the
 * panels holds four 8-bit values of consecutive k (u8 in A's, s8 in B's), so the A "broadcast" is
 * one row's four values and GEMM_DOT adds the four products of each column into its int32
 * accumulator, four FMAs' work in one instruction; a K block's tile is added to the previous
 * one's as integers (GEMM_ACC_ADD); and the epilogue first turns the int32 sums into floats with
 * the zero point's compensation and the scales (GEMM_ACC_TO_F, gemm_epilogue.col_scale). The sums
 * are exact (K up to 2^16 stays inside int32 for any operands), so the only rounding is that
 * conversion's. */
#define GEMM_DOT(a, b, c) ((__m512)_mm512_dpbusd_epi32((__m512i)(c), (__m512i)(a), (__m512i)(b)))
#define GEMM_ACC_ADD(a, b) ((__m512)_mm512_add_epi32((__m512i)(a), (__m512i)(b)))
#define GEMM_ACC_TO_F(a) _mm512_cvtepi32_ps((__m512i)(a))
#include "gemm_vec_avx512.h"

#include <string.h>

/* gemm_kernel.pack_a8: u8 rows (A[i,p] at a[i*rs + p]) into MR-row panels, slot q of row i (its
 * values 4q .. 4q + 3) at dst[q*mr + i], zero past kc and past m. Only the rows the micro-kernel
 * cannot read in place come here (a last partial panel, rows crowding one L1 set), so a plain
 * copy serves. */
__attribute__((unused)) static void pack_a8_vnni(int mr, const uint8_t *a, int64_t rs, int64_t m,
                                                 int64_t kc, float *dst) {
    const int64_t slots = (kc + 3) / 4;
    for (int64_t i0 = 0; i0 < m; i0 += mr, dst += slots * mr) {
        uint8_t *d = (uint8_t *)dst;
        for (int64_t i = 0; i < mr; i++) {
            const uint8_t *src = i0 + i < m ? a + (i0 + i) * rs : NULL;
            for (int64_t q = 0; q < slots; q++) {
                uint8_t *slot = d + (q * mr + i) * 4;
                const int64_t have = src ? (kc - 4 * q < 4 ? kc - 4 * q : 4) : 0;
                for (int64_t t = 0; t < 4; t++) slot[t] = t < have ? src[4 * q + t] : 0;
            }
        }
    }
}

GEMM_TILES_AVX512VNNI(GEMM_UKERNEL_PACKED_INSTANCE)
GEMM_TILE_EPILOGUE(avx512vnni)
/* the micro-kernel on a u8 A in place: one slot (four k) per step, row stride in slots */
#define VNNI_ROWS_INSTANCE(MR, NV, NR, ISA)                                                        \
    GEMM_UKERNEL_LDA(gemm_ukr_##MR##x##NR##_##ISA, MR, NV, NR, lda, 1)
GEMM_TILES_AVX512VNNI(VNNI_ROWS_INSTANCE)

/* No column kernel (an edge tile runs as a whole tile) and no fp32 packers: the operands come in
 * 8 bits only (gemm_problem.a8, gemm_pack_b8). */
#define VNNI_KERNEL_DEF(MR, NV, NR, ISA)                                                           \
    const gemm_kernel gemm_kernel_##MR##x##NR##_##ISA = {                                          \
        .name = #MR "x" #NR "_" #ISA,                                                              \
        .mr = MR,                                                                                  \
        .nr = NR,                                                                                  \
        .needs = GEMM_NEEDS_##ISA,                                                                 \
        .ukernel = gemm_uk_##MR##x##NR##_##ISA,                                                    \
        .epilogue = tile_epilogue_##ISA,                                                           \
        .acts_in_registers = GEMM_ACTS_IN_REGISTERS,                                               \
        .kpair = 4,                                                                                \
        .ukernel_rows_narrow = gemm_ukr_##MR##x##NR##_##ISA,                                       \
        .pack_a8 = pack_a8_vnni};
GEMM_TILES_AVX512VNNI(VNNI_KERNEL_DEF)
