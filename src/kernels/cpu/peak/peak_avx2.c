/* The AVX2 fp32 FMA peak loop (ymm). Compiled with -mavx2 -mfma (cmake/kernels.cmake) and called
 * only after core_hw_get() reported AVX2 + FMA.
 *
 * 12 independent accumulators cover latency (4-5 cycles) x throughput (2 ymm FMAs per cycle) on
 * every recent x86 core and leave registers for the two multiplicands in the 16 ymm registers. */
#include "peak.h"

#include <immintrin.h>

#define CHAINS 12
/* X(i) for every chain i. */
#define CHAINS_X(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

uint64_t peak_avx2_f32(uint64_t iters, float *sink) {
    __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-6f);
    /* One named variable per chain (an array would be kept in memory by gcc). */
#define DECL(i) __m256 acc##i = _mm256_set1_ps((float)i);
    CHAINS_X(DECL)
#undef DECL
    for (uint64_t it = 0; it < iters; it++) {
#define STEP(i) acc##i = _mm256_fmadd_ps(a, b, acc##i);
        CHAINS_X(STEP)
#undef STEP
        /* An empty asm that claims to change a multiplicand stops the compiler from folding
         * iterations together. */
        __asm__ volatile("" : "+v"(a));
    }
    __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, acc##i);
    CHAINS_X(SUM)
#undef SUM
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    for (int i = 0; i < 8; i++) *sink += lanes[i];
    return iters * CHAINS * 8u * 2u;
}
