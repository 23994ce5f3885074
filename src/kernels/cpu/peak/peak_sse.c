/* The baseline fp32 peak loop: mulps + addps on xmm, which every x86-64 CPU has (SSE2 is part of
 * the baseline), so a CPU without AVX, or one capped to scalar by ANVIL_ISA, still has an fp32
 * peak. Counted as 4 + 4 = 8 flops per multiply and add pair. Compiled with the baseline flags.
 *
 * Each chain is acc = acc * a + b (it tends to b / (1 - a), so it never overflows nor turns
 * denormal), so every multiply is a distinct one that the compiler cannot share between chains.
 * 12 independent chains: a multiply and an add in a row (5-8 cycles) at 2 of each per cycle want
 * 10-16 in flight, and 12 is what the 16 xmm registers hold beside the two operands. */
#include "peak.h"

#include <immintrin.h>

#define CHAINS 12
/* X(i) for every chain i. */
#define CHAINS_X(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

uint64_t peak_sse_f32(uint64_t iters, float *sink) {
    __m128 a = _mm_set1_ps(0.999f), b = _mm_set1_ps(1e-6f);
    /* One named variable per chain (an array would be kept in memory by gcc). */
#define DECL(i) __m128 acc##i = _mm_set1_ps((float)i);
    CHAINS_X(DECL)
#undef DECL
    for (uint64_t it = 0; it < iters; it++) {
#define STEP(i) acc##i = _mm_add_ps(_mm_mul_ps(acc##i, a), b);
        CHAINS_X(STEP)
#undef STEP
        /* An empty asm that claims to change a multiplicand stops the compiler from folding
         * iterations together. */
        __asm__ volatile("" : "+x"(a));
    }
    __m128 s = _mm_setzero_ps();
#define SUM(i) s = _mm_add_ps(s, acc##i);
    CHAINS_X(SUM)
#undef SUM
    float lanes[4];
    _mm_storeu_ps(lanes, s);
    for (int i = 0; i < 4; i++) *sink += lanes[i];
    return iters * CHAINS * 4u * 2u;
}
