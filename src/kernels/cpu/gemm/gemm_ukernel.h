/* The GEMM micro-kernel template. An ISA file defines the vector primitives below and then
 * instantiates the body for each register tile it offers:
 *
 *   GEMM_VL           floats per vector
 *   gemm_v            the vector type
 *   GEMM_LOAD(p)      unaligned load of GEMM_VL floats
 *   GEMM_STORE(p, v)  unaligned store
 *   GEMM_BCAST(p)     *p in every lane
 *   GEMM_FMA(a, b, c) a*b + c, fused
 *   GEMM_ZERO()       all lanes 0
 *
 * The tile is MR rows by NV vectors of columns (NR = NV * GEMM_VL). mr and nv are compile-time
 * constants at every call site: with the loops fully unrolled, the MR*NV accumulators live in
 * registers (the instance list in each ISA file keeps MR*NV + NV + 1 within the register file).
 * Written as an always-inlined function rather than a macro so a debugger can step through it. */
#ifndef ANVIL_GEMM_UKERNEL_H
#define ANVIL_GEMM_UKERNEL_H

#define GEMM_MR_MAX 16
#define GEMM_NV_MAX 4

static inline __attribute__((always_inline)) void
gemm_ukernel_body(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                  int64_t ldc, int accumulate, const int mr, const int nv) {
    gemm_v acc[GEMM_MR_MAX][GEMM_NV_MAX];
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++)
            acc[i][j] = accumulate ? GEMM_LOAD(c + i * ldc + j * GEMM_VL) : GEMM_ZERO();
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++) {
        gemm_v bv[GEMM_NV_MAX];
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) bv[j] = GEMM_LOAD(b + j * GEMM_VL);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            gemm_v av = GEMM_BCAST(a + i);
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = GEMM_FMA(av, bv[j], acc[i][j]);
        }
        a += mr;
        b += nv * GEMM_VL;
    }
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) GEMM_STORE(c + i * ldc + j * GEMM_VL, acc[i][j]);
}

/* Defines `static void gemm_uk_<MR>x<NR>_<isa>(...)` for one tile. */
#define GEMM_UKERNEL_INSTANCE(MR, NV, NR, ISA)                                                     \
    static void gemm_uk_##MR##x##NR##_##ISA(int64_t kc, const float *a, const float *b, float *c,  \
                                            int64_t ldc, int accumulate) {                         \
        gemm_ukernel_body(kc, a, b, c, ldc, accumulate, MR, NV);                                   \
    }

#endif
