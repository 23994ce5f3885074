/* The AVX512-VNNI int8 peak loop: vpdpbusd zmm, each instruction 64 u8 x s8 products summed four
 * at a time into 16 int32 lanes, counted as 128 ops (64 multiply-adds). Compiled with
 * -mavx512vnni (cmake/kernels.cmake, by the file's suffix) and called only after core_hw_get()
 * reported AVX512-VNNI.
 *
 * 24 independent accumulators: the latency (4-5 cycles on Zen 4/5 and Intel) times the zmm
 * throughput (up to 2 per cycle) needs at most 10 in flight; 24 leaves room to spare and still fits
 * the 32 zmm registers beside the two multiplicands. */
#include "peak.h"

#include <immintrin.h>

#define CHAINS 24
/* X(i) for every chain i. */
#define CHAINS_X(X) CHAINS_LO(X) CHAINS_HI(X)
#define CHAINS_LO(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS_HI(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

uint64_t peak_avx512_vnni_i8(uint64_t iters, float *sink) {
    /* u8 1 x s8 1: each instruction adds 4 to every lane; int32 lanes wrap silently on very long
     * runs (the instruction does not saturate), which does not matter to the timing. */
    __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
    /* One named variable per chain (an array would be kept in memory by gcc). */
#define DECL(i) __m512i acc##i = _mm512_set1_epi32(i);
    CHAINS_X(DECL)
#undef DECL
    for (uint64_t it = 0; it < iters; it++) {
        /* The instruction in asm rather than its intrinsic: GCC 12 gives the intrinsic's result a
         * register of its own, then copies it back to the accumulator and even spills it, which
         * halved the measured rate. asm ties the accumulator to the instruction's operand. */
#define STEP(i) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc##i) : "v"(a), "v"(b));
        CHAINS_X(STEP)
#undef STEP
        /* An empty asm that claims to change a multiplicand stops the compiler from folding
         * iterations together. */
        __asm__ volatile("" : "+v"(a));
    }
    __m512i s = _mm512_setzero_si512();
#define SUM(i) s = _mm512_add_epi32(s, acc##i);
    CHAINS_X(SUM)
#undef SUM
    /* folded as unsigned: the lanes may have wrapped, and _mm512_reduce_add_epi32 adds them as
     * signed ints (UBSan's signed overflow once a Sapphire Rapids core ran the loop long enough) */
    uint32_t lanes[16], total = 0;
    _mm512_storeu_si512(lanes, s);
    for (int i = 0; i < 16; i++) total += lanes[i];
    *sink += (float)total;
    return iters * CHAINS * 64u * 2u;
}
