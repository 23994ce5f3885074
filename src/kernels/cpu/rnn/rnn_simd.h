/* The rnn kernels written once over the vector vocabulary of eltwise_act.h (V, V_SET1, V_ADD,
 * V_SUB, V_MUL, V_DIV, V_FMA, V_MAX, V_MIN, V_LT; from ../eltwise/eltwise_vec_<isa>.h),
 * instantiated by rnn_avx512.c and rnn_avx2.c, which define before including it:
 *
 *   VW                floats per vector (RNN_PAD is a multiple of it)
 *   V_LOADU V_STOREU  unaligned full loads / stores
 *   V_ROUND(x)        x rounded to the nearest integer (ties to even)
 *   V_LDEXP(p, n)     p * 2^n for integral n in [-126, 127] (a float vector)
 *   NV_WIDE           vectors per register tile of gemm_small for one row (<= 8)
 *   NV_NARROW         the same for 2..4 rows (<= 4; 4 x NV_NARROW accumulators must fit)
 *   RNN_ISA_NAME      the rnn_isa table to define */
#include "rnn.h"

#include <math.h>

#include "../eltwise/eltwise_act.h"

/* ---- gemm_small: register tiles of up to 4 rows x NV vectors, B streamed from the cache -------
 * For one row (a GEMV: the recurrent step at batch 1) the tile is NV_WIDE vectors wide so that
 * enough independent FMA chains hide the FMA latency; A's element is broadcast from memory. */

static inline __attribute__((always_inline)) void tile(int mr, int nv, int64_t k, const float *a,
                                                       int64_t lda, const float *b, int64_t ldb,
                                                       const float *bias, float *c, int64_t ldc) {
    V acc[4][8];
#pragma GCC unroll 8
    for (int j = 0; j < nv; j++) {
        V b0 = bias ? V_LOADU(bias + j * VW) : V_SET1(0.0f);
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) acc[i][j] = b0;
    }
    for (int64_t p = 0; p < k; p++) {
        const float *bp = b + p * ldb;
        V bv[8];
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) bv[j] = V_LOADU(bp + j * VW);
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            V av = V_SET1(a[i * lda + p]);
#pragma GCC unroll 8
            for (int j = 0; j < nv; j++) acc[i][j] = V_FMA(av, bv[j], acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) V_STOREU(c + i * ldc + j * VW, acc[i][j]);
}

typedef void (*tile_fn)(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                        const float *bias, float *c, int64_t ldc);

#define TILE(MR, NV)                                                                               \
    static void tile_##MR##_##NV(int64_t k, const float *a, int64_t lda, const float *b,           \
                                 int64_t ldb, const float *bias, float *c, int64_t ldc) {          \
        tile(MR, NV, k, a, lda, b, ldb, bias, c, ldc);                                             \
    }
#define TILES_NARROW(MR) TILE(MR, 1) TILE(MR, 2) TILE(MR, 3) TILE(MR, 4)
TILES_NARROW(1)
TILE(1, 5)
TILE(1, 6)
TILE(1, 7)
TILE(1, 8)
TILES_NARROW(2)
TILES_NARROW(3)
TILES_NARROW(4)

#define ROW_NARROW(MR) tile_##MR##_1, tile_##MR##_2, tile_##MR##_3, tile_##MR##_4
static const tile_fn tiles[4][8] = {
    {ROW_NARROW(1), tile_1_5, tile_1_6, tile_1_7, tile_1_8},
    {ROW_NARROW(2)},
    {ROW_NARROW(3)},
    {ROW_NARROW(4)},
};

/* Panels outside, then column blocks, rows inside: one column block of B (k x NV vectors) is
 * read from L1/L2 by every row block while A's few rows stay in L1. */
static void k_gemm_small(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const float *b, const float *bias, float *c, int64_t ldc) {
    const int wide = m == 1 ? NV_WIDE : NV_NARROW;
    for (int64_t j0 = 0; j0 < n; j0 += RNN_PANEL) {
        const int64_t pw = n - j0 < RNN_PANEL ? n - j0 : RNN_PANEL, nvec = pw / VW;
        const float *bp = b + j0 * k;
        for (int64_t j = 0; j < nvec;) {
            const int nv = nvec - j < wide ? (int)(nvec - j) : wide;
            for (int64_t i = 0; i < m; i += 4) {
                const int mr = m - i < 4 ? (int)(m - i) : 4;
                tiles[mr - 1][nv - 1](k, a + i * lda, lda, bp + j * VW, pw,
                                      bias ? bias + j0 + j * VW : NULL, c + i * ldc + j0 + j * VW,
                                      ldc);
            }
            j += nv;
        }
    }
}

/* ---- gates -------------------------------------------------------------------------------- */

/* Lower bound first, then upper, as the reference; NaN passes (it is the second operand). */
static inline V clipv(V x, V lim) {
    return V_MIN(lim, V_MAX(V_SUB(V_ZERO(), lim), x));
}

/* The gates' exponentials are eltwise_act.h's inline f_exp_clamped rather than SLEEF's calls,
 * around which every vector register is spilled: in an LSTM step (five transcendentals per
 * element) they took longer than the products (measured, H 128). */
/* 1 / (1 + e^-x): about 2 ulp; e^-x saturates (see f_exp_clamped), so the far tails are 1 and
 * ~1e-38. */
static inline V sigmoidv(V x) {
    return V_DIV(V_SET1(1.0f), V_ADD(V_SET1(1.0f), f_exp_clamped(V_SUB(V_ZERO(), x))));
}

/* tanh, about 2 ulp: below |x| = 0.625, x P(x^2) with P a degree-5 fit of tanh(x)/x (1.2 ulp);
 * above, 1 - 2 / (1 + e^2|x|), which no longer cancels there; |x| clamped at 10, past which
 * tanh is 1 in float. The sign is put back last. NaN passes (second operands throughout). */
static inline V tanhv(V x) {
    const V ax = V_MIN(V_SET1(10.0f), V_ABS(x)), t = V_MUL(ax, ax);
    V p = V_SET1(-0.0056974031031131744f);
    p = V_FMA(p, t, V_SET1(0.020630208775401115f));
    p = V_FMA(p, t, V_SET1(-0.05373583734035492f));
    p = V_FMA(p, t, V_SET1(0.13331365585327148f));
    p = V_FMA(p, t, V_SET1(-0.33333274722099304f));
    const V small = V_FMA(V_MUL(p, t), ax, ax);
    const V e = f_exp_clamped(V_ADD(ax, ax));
    const V big = V_SUB(V_SET1(1.0f), V_DIV(V_SET1(2.0f), V_ADD(V_SET1(1.0f), e)));
    const V y = V_LT(ax, V_SET1(0.625f), small, big);
    return V_LT(x, V_ZERO(), V_SUB(V_ZERO(), y), y);
}

static void k_lstm_row(int64_t n, int64_t hp, const float *xw, const float *rec, const float *p,
                       float *c, float *h, float clip) {
    const V lim = V_SET1(clip);
    for (int64_t j = 0; j < n; j += VW) {
        const V cp = V_LOADU(c + j);
        V xi = V_ADD(V_LOADU(xw + j), V_LOADU(rec + j));
        V xf = V_ADD(V_LOADU(xw + 2 * hp + j), V_LOADU(rec + 2 * hp + j));
        V xo = V_ADD(V_LOADU(xw + hp + j), V_LOADU(rec + hp + j));
        const V xc = V_ADD(V_LOADU(xw + 3 * hp + j), V_LOADU(rec + 3 * hp + j));
        if (p) {
            xi = V_FMA(V_LOADU(p + j), cp, xi);
            xf = V_FMA(V_LOADU(p + 2 * hp + j), cp, xf);
        }
        const V ig = sigmoidv(clipv(xi, lim));
        const V fg = sigmoidv(clipv(xf, lim));
        const V cc = tanhv(clipv(xc, lim));
        const V cn = V_FMA(fg, cp, V_MUL(ig, cc));
        if (p) xo = V_FMA(V_LOADU(p + hp + j), cn, xo);
        const V og = sigmoidv(clipv(xo, lim));
        V_STOREU(c + j, cn);
        V_STOREU(h + j, V_MUL(og, tanhv(cn)));
    }
}

static void k_gru_lbr_row(int64_t n, int64_t hp, const float *xw, const float *rec,
                          const float *rbh, float *h, float clip) {
    const V lim = V_SET1(clip);
    for (int64_t j = 0; j < n; j += VW) {
        const V z = sigmoidv(clipv(V_ADD(V_LOADU(xw + j), V_LOADU(rec + j)), lim));
        const V r = sigmoidv(clipv(V_ADD(V_LOADU(xw + hp + j), V_LOADU(rec + hp + j)), lim));
        const V lin = V_ADD(V_LOADU(rec + 2 * hp + j), V_LOADU(rbh + j));
        const V hh = tanhv(clipv(V_FMA(r, lin, V_LOADU(xw + 2 * hp + j)), lim));
        const V hv = V_LOADU(h + j);
        V_STOREU(h + j, V_FMA(z, V_SUB(hv, hh), hh));
    }
}

static void k_gru_zr_row(int64_t hp, float *xw, const float *rec, const float *h, float *rh,
                         float clip) {
    const V lim = V_SET1(clip);
    for (int64_t j = 0; j < hp; j += VW) {
        const V z = sigmoidv(clipv(V_ADD(V_LOADU(xw + j), V_LOADU(rec + j)), lim));
        const V r = sigmoidv(clipv(V_ADD(V_LOADU(xw + hp + j), V_LOADU(rec + hp + j)), lim));
        V_STOREU(xw + j, z);
        V_STOREU(rh + j, V_MUL(r, V_LOADU(h + j)));
    }
}

static void k_gru_h_row(int64_t hp, const float *xw_h, const float *prod, const float *z, float *h,
                        float clip) {
    const V lim = V_SET1(clip);
    for (int64_t j = 0; j < hp; j += VW) {
        const V hh = tanhv(clipv(V_ADD(V_LOADU(xw_h + j), V_LOADU(prod + j)), lim));
        const V hv = V_LOADU(h + j);
        V_STOREU(h + j, V_FMA(V_LOADU(z + j), V_SUB(hv, hh), hh));
    }
}

static void k_rnn_row(int64_t hp, const float *xw, const float *rec, float *h, float clip) {
    const V lim = V_SET1(clip);
    for (int64_t j = 0; j < hp; j += VW)
        V_STOREU(h + j, tanhv(clipv(V_ADD(V_LOADU(xw + j), V_LOADU(rec + j)), lim)));
}

const rnn_isa RNN_ISA_NAME = {
    .gemm_small = k_gemm_small,
    .lstm_row = k_lstm_row,
    .gru_lbr_row = k_gru_lbr_row,
    .gru_zr_row = k_gru_zr_row,
    .gru_h_row = k_gru_h_row,
    .rnn_row = k_rnn_row,
};
