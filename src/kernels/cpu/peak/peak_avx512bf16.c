/* The AVX512-BF16 peak loop: vdpbf16ps, each zmm instruction 32 bf16 pairs multiplied and added
 * into 16 fp32 lanes, counted as 64 flops (32 multiply-adds). Compiled with -mavx512bf16
 * (cmake/kernels.cmake) and called only after core_hw_get() reported AVX512-BF16.
 * 24 chains, as for the fp32 loop (latency 6 on Zen 4, so >= 6 needed there). */
#include "peak.h"

#include <immintrin.h>

#define CHAINS 24
/* X(i) for every chain i. */
#define CHAINS_X(X) CHAINS_LO(X) CHAINS_HI(X)
#define CHAINS_LO(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS_HI(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

uint64_t peak_avx512_bf16(uint64_t iters, float *sink) {
    __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
    __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    /* One named variable per chain (an array would be kept in memory by gcc). */
#define DECL(i) __m512 acc##i = _mm512_set1_ps((float)i);
    CHAINS_X(DECL)
#undef DECL
    for (uint64_t it = 0; it < iters; it++) {
#define STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
        CHAINS_X(STEP)
#undef STEP
        /* An empty asm that claims to change a multiplicand stops the compiler from folding
         * iterations together. */
        __asm__ volatile("" : "+v"(a));
    }
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, acc##i);
    CHAINS_X(SUM)
#undef SUM
    *sink += _mm512_reduce_add_ps(s);
    return iters * CHAINS * 32u * 2u;
}
