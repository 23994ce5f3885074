/* The AVX512-FP16 peak loop: vfmadd231ph on zmm, 32 half lanes x 2 = 64 flops per instruction.
 * Compiled with -mavx512fp16 when the compiler knows the flag (ANVIL_CC_AVX512FP16, set by
 * cmake/kernels.cmake), else a stub reporting that the build has no such loop. Called only after
 * core_hw_get() reported AVX512-FP16. */
#include "peak.h"

#ifdef ANVIL_CC_AVX512FP16
#include <immintrin.h>

#define CHAINS 24
/* X(i) for every chain i. */
#define CHAINS_X(X) CHAINS_LO(X) CHAINS_HI(X)
#define CHAINS_LO(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS_HI(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

bool peak_build_has_fp16(void) {
    return true;
}

uint64_t peak_avx512_fp16(uint64_t iters, float *sink) {
    /* Increments that stay normal in fp16 (no denormal slow paths on any core). */
    __m512h a = _mm512_set1_ph((_Float16)0.5f), b = _mm512_set1_ph((_Float16)0.001f);
    /* One named variable per chain (an array would be kept in memory by gcc). */
#define DECL(i) __m512h acc##i = _mm512_set1_ph((_Float16)(float)i);
    CHAINS_X(DECL)
#undef DECL
    for (uint64_t it = 0; it < iters; it++) {
#define STEP(i) acc##i = _mm512_fmadd_ph(a, b, acc##i);
        CHAINS_X(STEP)
#undef STEP
        /* An empty asm that claims to change a multiplicand stops the compiler from folding
         * iterations together. */
        __asm__ volatile("" : "+v"(a));
    }
    __m512h s = _mm512_setzero_ph();
#define SUM(i) s = _mm512_add_ph(s, acc##i);
    CHAINS_X(SUM)
#undef SUM
    *sink += (float)_mm512_reduce_add_ph(s);
    return iters * CHAINS * 32u * 2u;
}
#else
bool peak_build_has_fp16(void) {
    return false;
}

uint64_t peak_avx512_fp16(uint64_t iters, float *sink) {
    (void)iters;
    (void)sink;
    return 0;
}
#endif
