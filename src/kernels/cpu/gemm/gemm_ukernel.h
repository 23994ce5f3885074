/* The GEMM micro-kernel template. An ISA file defines the vector primitives below and then
 * instantiates the body for each register tile it offers:
 *
 *   GEMM_VL           floats per vector
 *   gemm_v            the vector type
 *   GEMM_LOAD(p)      unaligned load of GEMM_VL floats
 *   GEMM_STORE(p, v)  unaligned store
 *   GEMM_BCAST(p)     *p in every lane
 *   GEMM_FMA(a, b, c) a*b + c, fused
 *   GEMM_ADD(a, b)    a + b
 *   GEMM_ZERO()       all lanes 0
 *   GEMM_LOAD_N(p, n) the first n lanes (n <= GEMM_VL), 0 in the others, reading nothing past
 *                     p[n - 1]
 *   GEMM_UKC_SPLIT    independent partial sums per column in the column kernel (below)
 *
 * The tile is MR rows by NV vectors of columns (NR = NV * GEMM_VL). mr and nv are compile-time
 * constants at every call site: with the loops fully unrolled, the MR*NV accumulators live in
 * registers (the instance list in each ISA file keeps MR*NV + NV + 1 within the register file).
 * Written as an always-inlined function rather than a macro so a debugger can step through it. */
#ifndef ANVIL_GEMM_UKERNEL_H
#define ANVIL_GEMM_UKERNEL_H

/* GEMM_DOT(a, b, c): the k loop's multiply-add of a broadcast A slot a and a B vector b into c.
 * An fp32 file leaves it undefined (then it is GEMM_FMA); a bf16 file makes it the dot product
 * of bf16 pairs, while GEMM_FMA stays fp32 arithmetic for the epilogue. */
#ifndef GEMM_DOT
#define GEMM_DOT GEMM_FMA
#endif
/* GEMM_ACC_ADD(a, b): the sum of two accumulators (a K block's tile added to the last one's). An
 * int8 file, whose accumulators hold int32 sums in float vectors' bits, makes it an integer add
 * and defines GEMM_ACC_TO_F(a), the accumulator's int32 lanes as floats, for the epilogue. */
#ifndef GEMM_ACC_ADD
#define GEMM_ACC_ADD GEMM_ADD
#endif

#define GEMM_NV_MAX 4
/* k steps before the end at which the kernel prefetches its C tile: 8 lost 0.7-1.5% and 96
 * 1.4% at 1024^3 against 32 (128x3072x3072, 512x768x3072, 512x3072x768, 1024^3; 1 thread). */
#define GEMM_PF_C_K 32

/* ep applied to the accumulators of tile C[i0.., j0..] (gemm_epilogue_in_registers holds). */
static inline __attribute__((always_inline)) void
gemm_ukernel_epilogue(gemm_v acc[GEMM_MR_MAX][GEMM_NV_MAX], const gemm_epilogue *ep, int64_t i0,
                      int64_t j0, const int mr, const int nv) {
#ifdef GEMM_ACC_TO_F
    /* the int32 sums to floats (gemm_epilogue.col_scale); the compensation is added in int32,
     * exactly as the scalar epilogue adds it */
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++) {
        const gemm_v cs = GEMM_LOAD(ep->col_scale + j0 + j * GEMM_VL);
        const gemm_v cc = ep->col_comp ? GEMM_LOAD((const float *)(ep->col_comp + j0 + j * GEMM_VL))
                                       : GEMM_ZERO();
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
            acc[i][j] = GEMM_MUL(GEMM_ACC_TO_F(GEMM_ACC_ADD(acc[i][j], cc)), cs);
    }
    if (ep->row_scale)
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const gemm_v rs = GEMM_SET1(ep->row_scale[i0 + i]);
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = GEMM_MUL(acc[i][j], rs);
        }
#endif
    if (ep->scale != 1.0f) {
        const gemm_v s = GEMM_SET1(ep->scale);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = GEMM_MUL(acc[i][j], s);
    }
    if (ep->row_bias)
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const gemm_v rb = GEMM_SET1(ep->row_bias[i0 + i]);
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = GEMM_ADD(acc[i][j], rb);
        }
    if (ep->col_bias)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) {
            const gemm_v cb = GEMM_LOAD(ep->col_bias + j0 + j * GEMM_VL);
#pragma GCC unroll 16
            for (int i = 0; i < mr; i++) acc[i][j] = GEMM_ADD(acc[i][j], cb);
        }
    if (ep->r) {
        const gemm_v beta = GEMM_SET1(ep->beta);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const float *r = ep->r + (i0 + i) * ep->rs_r + j0 * ep->cs_r;
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++)
                acc[i][j] = GEMM_FMA(beta, ep->cs_r ? GEMM_LOAD(r + j * GEMM_VL) : GEMM_SET1(*r),
                                     acc[i][j]);
        }
    }
    if (ep->act == IR_ACT_RELU || ep->act == IR_ACT_CLIP) {
        const bool clip = ep->act == IR_ACT_CLIP;
        const gemm_v lo = GEMM_SET1(clip ? ep->lo : 0.0f), hi = GEMM_SET1(ep->hi);
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) {
                acc[i][j] = GEMM_MAX(acc[i][j], lo);
                if (clip) acc[i][j] = GEMM_MIN(acc[i][j], hi);
            }
    }
#ifdef GEMM_HAVE_ACT_VEC
    /* The eltwise family's functions (eltwise_act.h): the numbers the unfused node gives. */
#define IR_ACT_ALL(EXPR)                                                                           \
    _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++)                                          \
        _Pragma("GCC unroll 4") for (int j = 0; j < nv; j++) {                                     \
        const gemm_v x = acc[i][j];                                                                \
        acc[i][j] = (EXPR);                                                                        \
    }
    const gemm_v alpha = GEMM_SET1(ep->alpha), beta_act = GEMM_SET1(ep->beta_act);
    switch (ep->act) {
    case IR_ACT_LEAKY_RELU:
        IR_ACT_ALL(f_leaky(x, alpha));
        break;
    case IR_ACT_HARD_SIGMOID:
        IR_ACT_ALL(f_hardsigmoid(x, alpha, beta_act));
        break;
    case IR_ACT_HARD_SWISH:
        IR_ACT_ALL(f_hardswish(x));
        break;
    case IR_ACT_SIGMOID:
        IR_ACT_ALL(f_sigmoid(x));
        break;
    case IR_ACT_GELU_ERF:
        IR_ACT_ALL(f_gelu(x));
        break;
    case IR_ACT_SILU:
        IR_ACT_ALL(f_silu(x));
        break;
#ifdef ANVIL_HAVE_SLEEF /* tanh is SLEEF's; the ones above need only eltwise_act.h's exp */
    case IR_ACT_TANH:
        IR_ACT_ALL(V_TANH(x));
        break;
    case IR_ACT_GELU_TANH:
        IR_ACT_ALL(f_gelu_tanh(x));
        break;
#endif
    default:
        break;
    }
#undef IR_ACT_ALL
#endif
}

/* Which activations the instances of this file apply in registers (gemm_kernel's field). */
#define GEMM_ACTS_RELU_CLIP ((1u << IR_ACT_NONE) | (1u << IR_ACT_RELU) | (1u << IR_ACT_CLIP))
#if defined(GEMM_HAVE_ACT_VEC) && defined(ANVIL_HAVE_SLEEF)
#define GEMM_ACTS_IN_REGISTERS 0xffffffffu
#elif defined(GEMM_HAVE_ACT_VEC)
#define GEMM_ACTS_IN_REGISTERS                                                                     \
    (GEMM_ACTS_RELU_CLIP | (1u << IR_ACT_LEAKY_RELU) | (1u << IR_ACT_HARD_SIGMOID) |               \
     (1u << IR_ACT_HARD_SWISH) | (1u << IR_ACT_SIGMOID) | (1u << IR_ACT_GELU_ERF) |                \
     (1u << IR_ACT_SILU))
#else
#define GEMM_ACTS_IN_REGISTERS GEMM_ACTS_RELU_CLIP
#endif

static inline __attribute__((always_inline)) void
gemm_ukernel_body(int64_t kc, const float *restrict a, int64_t a_rs, int64_t a_ks,
                  const float *const *rows, const float *restrict b, int64_t b_ks,
                  float *restrict c, int64_t ldc, int accumulate, const float *pf, int64_t pf_n,
                  const gemm_epilogue *ep, int64_t i0, int64_t j0, const int mr, const int nv) {
    gemm_v acc[GEMM_MR_MAX][GEMM_NV_MAX];
    /* Indirect A (rows non-NULL, a constant NULL in the other instances): row i at rows[i],
     * copied out first so the pointers sit in registers rather than being reloaded per step. */
    const float *row[GEMM_MR_MAX];
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) row[i] = rows ? rows[i] : NULL;
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) acc[i][j] = GEMM_ZERO();
    /* C is added after the k loop rather than loaded before it, and its lines are prefetched
     * GEMM_PF_C_K steps before the end: loaded up front, the tile (in L2 or L3 by then) stalled
     * the first FMAs, and prefetched earlier it would be evicted by the B panel streaming
     * through L1. Loading C first instead: 112.1 vs 112.9 GFLOP/s at 128x3072x3072, 112.1 vs
     * 113.3 at 512x768x3072, 112.1 vs 114.0 at 512x3072x3072 (1 thread, 4x64, medians of 3
     * interleaved runs, everything else as now). The prefetch is for writing, and also when
     * the tile is only stored (first K block), so the stores do not wait on the line: +0.5%
     * at 128x3072x768 and 512x3072x768, +1.1% at 1024^3, within 0.3% elsewhere. */
    const int64_t k_main = kc > GEMM_PF_C_K ? kc - GEMM_PF_C_K : 0;
    /* Phases: 0 prefetches a line of the next B block per step (see gemm_ukernel_fn), 1 runs
     * plain up to k_main, then C is prefetched, and 2 finishes (prefetching if pf_n reaches
     * into it, for short kc). Unrolled, so each phase's loop is specialised. */
    const int64_t k_pf = pf_n < k_main ? pf_n : k_main;
    int64_t p = 0;
#pragma GCC unroll 3
    for (int phase = 0; phase < 3; phase++) {
        const int64_t p_end = phase == 0 ? k_pf : phase == 1 ? k_main : kc;
#pragma GCC unroll 4
        for (; p < p_end; p++) {
            gemm_v bv[GEMM_NV_MAX];
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) bv[j] = GEMM_LOAD(b + j * GEMM_VL);
            if (phase == 0 || (phase == 2 && p < pf_n)) __builtin_prefetch(pf + p * 16, 0, 2);
#pragma GCC unroll 16
            for (int i = 0; i < mr; i++) {
                gemm_v av = rows ? GEMM_BCAST(row[i] + p) : GEMM_BCAST(a + i * a_rs);
#pragma GCC unroll 4
                for (int j = 0; j < nv; j++) acc[i][j] = GEMM_DOT(av, bv[j], acc[i][j]);
            }
            a += a_ks;
            b += b_ks;
        }
        if (phase == 1)
#pragma GCC unroll 16
            for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
                for (int j = 0; j < nv; j++) __builtin_prefetch(c + i * ldc + j * GEMM_VL, 1, 3);
    }
    if (accumulate)
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++)
                acc[i][j] = GEMM_ACC_ADD(acc[i][j], GEMM_LOAD(c + i * ldc + j * GEMM_VL));
    /* Applied here the epilogue costs no second pass over the tile: as a pass after the store
     * it made ResNet-50's fused convs 15-25% slower than the unfused conv + BN + Relu nodes. */
    if (ep) gemm_ukernel_epilogue(acc, ep, i0, j0, mr, nv);
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) GEMM_STORE(c + i * ldc + j * GEMM_VL, acc[i][j]);
}

/* Defines, for one tile, `static void gemm_uk_<MR>x<NR>_<isa>(...)` on a packed A micro-panel
 * (A[i,p] at a[p*MR + i]), `gemm_ukr_<MR>x<NR>_<isa>(...)` on A read in place from row-major
 * storage (A[i,p] at a[i*lda + p]), which spares the driver packing A, and
 * `gemm_ukb_<MR>x<NR>_<isa>(...)` on packed A and B read in place (B[p,j] at b[p*ldb + j]) and
 * `gemm_ukt_<MR>x<NR>_<isa>(...)` on A read in place by columns (A[i,p] at a[p*lda + i]) and
 * `gemm_uki_<MR>x<NR>_<isa>(...)` on an indirect A (A[i,p] at rows[i][p]). */
/* The column kernel, for an edge tile of few columns: vectors run along the MR rows of the
 * packed A panel (one masked load per k step, MR <= GEMM_VL) and each column's B value is
 * broadcast into them, so a column costs one FMA per k step where the register tile would spend
 * a full MR x NR tile on the edge's few columns. Columns go in groups of up to 4 (ncols, a
 * compile-time constant), each summed in GEMM_UKC_SPLIT interleaved partial sums so a single
 * column is not one latency-bound FMA chain. t[i*ldt + j] (+)= sum_p a[p*mr + i] * b[p*ldb + j]
 * for i < mr, j < ncols. The multiply is GEMM_DOT, so a bf16 file's column kernel runs over the
 * pair slots of its panels (kc counts slots; each product a dot product of two pairs). */
static inline __attribute__((always_inline)) void
gemm_ukc_group(int64_t kc, const float *restrict a, int mr, const float *restrict b, int64_t ldb,
               float *restrict t, int64_t ldt, int accumulate, const int ncols) {
    gemm_v acc[GEMM_UKC_SPLIT][4];
#pragma GCC unroll 4
    for (int u = 0; u < GEMM_UKC_SPLIT; u++)
#pragma GCC unroll 4
        for (int j = 0; j < ncols; j++) acc[u][j] = GEMM_ZERO();
    int64_t p = 0;
    for (; p + GEMM_UKC_SPLIT <= kc; p += GEMM_UKC_SPLIT)
#pragma GCC unroll 4
        for (int u = 0; u < GEMM_UKC_SPLIT; u++) {
            const gemm_v av = GEMM_LOAD_N(a + (p + u) * mr, mr);
#pragma GCC unroll 4
            for (int j = 0; j < ncols; j++)
                acc[u][j] = GEMM_DOT(av, GEMM_BCAST(b + (p + u) * ldb + j), acc[u][j]);
        }
    for (; p < kc; p++) {
        const gemm_v av = GEMM_LOAD_N(a + p * mr, mr);
#pragma GCC unroll 4
        for (int j = 0; j < ncols; j++)
            acc[0][j] = GEMM_DOT(av, GEMM_BCAST(b + p * ldb + j), acc[0][j]);
    }
    float col[GEMM_VL];
#pragma GCC unroll 4
    for (int j = 0; j < ncols; j++) {
        gemm_v sum = acc[0][j];
#pragma GCC unroll 4
        for (int u = 1; u < GEMM_UKC_SPLIT; u++) sum = GEMM_ADD(sum, acc[u][j]);
        GEMM_STORE(col, sum);
        for (int i = 0; i < mr; i++) t[i * ldt + j] = (accumulate ? t[i * ldt + j] : 0.0f) + col[i];
    }
}

/* Defines `static void gemm_ukc_<isa>(...)`, the column kernel over nn columns (gemm.h). Marked
 * unused: a library written by anvil compile may instantiate none of the ISA's tiles. */
#define GEMM_UKERNEL_COLS(ISA)                                                                     \
    __attribute__((unused)) static void gemm_ukc_##ISA(int64_t kc, const float *a, int mr,         \
                                                       const float *b, int64_t ldb, int64_t nn,    \
                                                       float *t, int64_t ldt, int accumulate) {    \
        int64_t j = 0;                                                                             \
        for (; j + 4 <= nn; j += 4)                                                                \
            gemm_ukc_group(kc, a, mr, b + j, ldb, t + j, ldt, accumulate, 4);                      \
        switch (nn - j) {                                                                          \
        case 3:                                                                                    \
            gemm_ukc_group(kc, a, mr, b + j, ldb, t + j, ldt, accumulate, 3);                      \
            break;                                                                                 \
        case 2:                                                                                    \
            gemm_ukc_group(kc, a, mr, b + j, ldb, t + j, ldt, accumulate, 2);                      \
            break;                                                                                 \
        case 1:                                                                                    \
            gemm_ukc_group(kc, a, mr, b + j, ldb, t + j, ldt, accumulate, 1);                      \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

/* Defines NAME, a gemm_ukernel_rows_fn on A read in place: A[i,p] at a[i*A_RS + p*A_KS], A_RS
 * and A_KS each lda or 1. */
#define GEMM_UKERNEL_LDA(NAME, MR, NV, NR, A_RS, A_KS)                                             \
    static void NAME(int64_t kc, const float *a, int64_t lda, const float *b, float *c,            \
                     int64_t ldc, int accumulate, const float *pf, int64_t pf_n,                   \
                     const gemm_epilogue *ep, int64_t i0, int64_t j0) {                            \
        gemm_ukernel_body(kc, a, A_RS, A_KS, NULL, b, NR, c, ldc, accumulate, pf, pf_n, ep, i0,    \
                          j0, MR, NV);                                                             \
    }

#define GEMM_UKERNEL_INSTANCE(MR, NV, NR, ISA)                                                     \
    GEMM_UKERNEL_PACKED_INSTANCE(MR, NV, NR, ISA)                                                  \
    static void gemm_ukb_##MR##x##NR##_##ISA(int64_t kc, const float *a, const float *b,           \
                                             int64_t ldb, float *c, int64_t ldc, int accumulate,   \
                                             const float *pf, int64_t pf_n,                        \
                                             const gemm_epilogue *ep, int64_t i0, int64_t j0) {    \
        gemm_ukernel_body(kc, a, 1, MR, NULL, b, ldb, c, ldc, accumulate, pf, pf_n, ep, i0, j0,    \
                          MR, NV);                                                                 \
    }                                                                                              \
    GEMM_UKERNEL_LDA(gemm_ukr_##MR##x##NR##_##ISA, MR, NV, NR, lda, 1)                             \
    GEMM_UKERNEL_LDA(gemm_ukt_##MR##x##NR##_##ISA, MR, NV, NR, 1, lda)                             \
    static void gemm_uki_##MR##x##NR##_##ISA(int64_t kc, const float *const *rows, const float *b, \
                                             float *c, int64_t ldc, int accumulate,                \
                                             const float *pf, int64_t pf_n,                        \
                                             const gemm_epilogue *ep, int64_t i0, int64_t j0) {    \
        gemm_ukernel_body(kc, NULL, 0, 0, rows, b, NR, c, ldc, accumulate, pf, pf_n, ep, i0, j0,   \
                          MR, NV);                                                                 \
    }

/* Defines only `static void gemm_uk_<MR>x<NR>_<isa>(...)`, on packed panels: the first of
 * GEMM_UKERNEL_INSTANCE's kernels, and all that the tiles whose panels hold something other than
 * floats (bf16 pairs) have, since those can only be read packed. */
#define GEMM_UKERNEL_PACKED_INSTANCE(MR, NV, NR, ISA)                                              \
    static void gemm_uk_##MR##x##NR##_##ISA(                                                       \
        int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate,         \
        const float *pf, int64_t pf_n, const gemm_epilogue *ep, int64_t i0, int64_t j0) {          \
        gemm_ukernel_body(kc, a, 1, MR, NULL, b, NR, c, ldc, accumulate, pf, pf_n, ep, i0, j0, MR, \
                          NV);                                                                     \
    }

/* Defines `static void tile_epilogue_<isa>(...)`, the gemm_tile_epilogue_fn of the ISA's kernels:
 * gemm_epilogue_body written plainly, which the compiler vectorizes for the file's ISA (the row
 * loops of the common cases: bias, residual, ReLU/Clip). Unused where no tile is instantiated
 * (as gemm_ukc_<isa>). */
#define GEMM_TILE_EPILOGUE(ISA)                                                                    \
    __attribute__((unused)) static void tile_epilogue_##ISA(const gemm_epilogue *ep, float *c,     \
                                                            int64_t ldc, int64_t i0, int64_t j0,   \
                                                            int64_t m, int64_t n) {                \
        gemm_epilogue_body(ep, c, ldc, i0, j0, m, n);                                              \
    }

/* Defines the gemm_kernel gemm_kernel_<MR>x<NR>_<isa> ("<MR>x<NR>_<isa>") of a tile instantiated
 * above, for the tile lists of gemm.h (GEMM_TILES_AVX512, ...). */
#define GEMM_KERNEL_DEF(MR, NV, NR, ISA)                                                           \
    const gemm_kernel gemm_kernel_##MR##x##NR##_##ISA = {#MR "x" #NR "_" #ISA,                     \
                                                         MR,                                       \
                                                         NR,                                       \
                                                         GEMM_NEEDS_##ISA,                         \
                                                         gemm_uk_##MR##x##NR##_##ISA,              \
                                                         tile_epilogue_##ISA,                      \
                                                         gemm_ukr_##MR##x##NR##_##ISA,             \
                                                         gemm_ukb_##MR##x##NR##_##ISA,             \
                                                         gemm_ukc_##ISA,                           \
                                                         GEMM_ACTS_IN_REGISTERS,                   \
                                                         gemm_ukt_##MR##x##NR##_##ISA,             \
                                                         gemm_uki_##MR##x##NR##_##ISA,             \
                                                         1,                                        \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         NULL};

/* The gemm_kernel of a GEMM_UKERNEL_PACKED_INSTANCE tile over bf16 pairs (kpair 2), whose ISA
 * file names its packers GEMM_PACK_A_<isa> and GEMM_PACK_B_<isa>, its column kernel
 * GEMM_UKC_<isa> (NULL: none) and, as GEMM_UKR16_<isa>(MR, NR), its kernel on a bf16 A read in
 * place (NULL: none). */
#define GEMM_KERNEL_DEF_PAIRS(MR, NV, NR, ISA)                                                     \
    const gemm_kernel gemm_kernel_##MR##x##NR##_##ISA = {#MR "x" #NR "_" #ISA,                     \
                                                         MR,                                       \
                                                         NR,                                       \
                                                         GEMM_NEEDS_##ISA,                         \
                                                         gemm_uk_##MR##x##NR##_##ISA,              \
                                                         tile_epilogue_##ISA,                      \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         GEMM_UKC_##ISA,                           \
                                                         GEMM_ACTS_IN_REGISTERS,                   \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         2,                                        \
                                                         GEMM_PACK_A_##ISA,                        \
                                                         GEMM_PACK_B_##ISA,                        \
                                                         GEMM_PACK_A16_##ISA,                      \
                                                         GEMM_STORE_C16_##ISA,                     \
                                                         NULL,                                     \
                                                         NULL,                                     \
                                                         GEMM_UKR16_##ISA(MR, NR),                 \
                                                         NULL};

#endif
