/* The AVX-VNNI int8 peak loop: the VEX-encoded vpdpbusd on ymm (CPUID 7.1 EAX bit 4, the AVX2-era
 * form that CPUs without AVX-512 have too), each instruction 32 u8 x s8 products summed four at a
 * time into 8 int32 lanes, counted as 64 ops. Compiled with -mavx2 -mavxvnni when the compiler
 * knows the flag (ANVIL_CC_AVXVNNI, set by cmake/kernels.cmake), else a stub; the file gets no
 * AVX-512 flag, so the compiler can only pick the VEX encoding. Called only after core_hw_get()
 * reported AVX-VNNI.
 *
 * 12 independent accumulators, as for the AVX2 fp32 loop: latency (4-5 cycles) x throughput (2
 * per cycle) in the 16 ymm registers beside the two multiplicands. */
#include "peak.h"

#ifdef ANVIL_CC_AVXVNNI
#include <immintrin.h>

#define CHAINS 12
/* X(i) for every chain i. */
#define CHAINS_X(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

bool peak_build_has_avx_vnni(void) {
    return true;
}

uint64_t peak_avx_vnni_i8(uint64_t iters, float *sink) {
    /* u8 1 x s8 1: int32 lanes wrap silently on very long runs, which the timing ignores. */
    __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(1);
    /* One named variable per chain (an array would be kept in memory by gcc). */
#define DECL(i) __m256i acc##i = _mm256_set1_epi32(i);
    CHAINS_X(DECL)
#undef DECL
    for (uint64_t it = 0; it < iters; it++) {
        /* The instruction in asm rather than its intrinsic: GCC 12 gives the intrinsic's result a
         * register of its own, then copies it back to the accumulator and even spills it, which
         * halved the measured rate. asm ties the accumulator to the instruction's operand; the
         * {vex} prefix (braces escaped in GCC's asm template) asks the assembler for the VEX
         * encoding, the one AVX-VNNI defines. */
#define STEP(i) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc##i) : "x"(a), "x"(b));
        CHAINS_X(STEP)
#undef STEP
        /* An empty asm that claims to change a multiplicand stops the compiler from folding
         * iterations together. */
        __asm__ volatile("" : "+x"(a));
    }
    __m256i s = _mm256_setzero_si256();
#define SUM(i) s = _mm256_add_epi32(s, acc##i);
    CHAINS_X(SUM)
#undef SUM
    int32_t lanes[8];
    _mm256_storeu_si256((__m256i *)(void *)lanes, s);
    for (int i = 0; i < 8; i++) *sink += (float)lanes[i];
    return iters * CHAINS * 32u * 2u;
}
#else
bool peak_build_has_avx_vnni(void) {
    return false;
}

uint64_t peak_avx_vnni_i8(uint64_t iters, float *sink) {
    (void)iters;
    (void)sink;
    return 0;
}
#endif
