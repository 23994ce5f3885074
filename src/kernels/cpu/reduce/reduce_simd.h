/* The reduce kernels written once over a small vector vocabulary, instantiated by reduce_avx512.c
 * (16 lanes, mask registers) and reduce_avx2.c (8 lanes, vector masks). Include only from those
 * files, after defining (V, V_SET1, V_ADD, V_SUB, V_MUL, V_FMA, V_MAX, V_MIN and with
 * ANVIL_HAVE_SLEEF V_EXP come from eltwise_vec_<isa>.h):
 *
 *   VW, M                    lanes, tail-mask type
 *   V_LOADU(p) V_STOREU(p,v) unaligned full loads / stores
 *   V_TAILMASK(n)            mask of the first n (< VW) lanes
 *   V_MLOAD(p,m,fill)        masked load, `fill` in the other lanes (never touches their memory)
 *   V_MSTORE(p,m,v)          masked store
 *   C                        a lanewise compare result
 *   V_CMP(a,b,P)             a P b for a _CMP_* predicate
 *   C_OR(a,b) C_ANDN(a,b)    a | b, a & ~b
 *   C_BITS(c)                the lanes of c as the low VW bits of an unsigned
 *   V_BLEND(c,a,b)           c ? b : a per lane
 *   V_ABS(x)                 |x|
 *   RED_ISA_NAME             name of the red_isa table to define
 *
 * Max and min must propagate NaN (the reference's ReduceMax/Min); the ISA's max/min return their
 * second operand when either is NaN, so nanmax(acc, x) = isnan(x) ? x : max(x, acc) keeps a NaN in
 * acc once it got there. */
#include "reduce_run.h"
#include "../eltwise/eltwise_exp.h"

#include <float.h>
#include <math.h>
#include <string.h>

static inline V v_nanmax(V acc, V x) {
    return V_BLEND(V_CMP(x, x, _CMP_UNORD_Q), V_MAX(x, acc), x);
}
static inline V v_nanmin(V acc, V x) {
    return V_BLEND(V_CMP(x, x, _CMP_UNORD_Q), V_MIN(x, acc), x);
}

static inline float s_nanmax(float a, float b) {
    return isnan(a) ? a : isnan(b) || b > a ? b : a;
}
static inline float s_nanmin(float a, float b) {
    return isnan(a) ? a : isnan(b) || b < a ? b : a;
}

/* ---- reductions over contiguous rows -------------------------------------------------------- */

/* Per op: the accumulator's identity (also the fill of masked tail lanes, which the step must
 * leave neutral), a vector step acc = f(acc, x), the combination of two accumulators, and the
 * scalar combination of the lanes. */
#define ST_SUM(a, x) V_ADD((a), (x))
#define ST_ASUM(a, x) V_ADD((a), V_ABS(x))
#define ST_SQSUM(a, x) V_FMA((x), (x), (a))
#define ST_MAX(a, x) v_nanmax((a), (x))
#define ST_MIN(a, x) v_nanmin((a), (x))
#define ST_PROD(a, x) V_MUL((a), (x))
#define CB_ADD(a, b) V_ADD((a), (b))
#define SC_ADD(a, b) ((a) + (b))
#define SC_MUL(a, b) ((a) * (b))

/* A function reducing x[0, n) with 4 vector accumulators (independent dependency chains). */
#define ROW_FN(NAME, ID, STEP, COMB, SCOMB)                                                        \
    static float NAME(const float *x, size_t n) {                                                  \
        const V id = V_SET1(ID);                                                                   \
        V a0 = id, a1 = id, a2 = id, a3 = id;                                                      \
        size_t i = 0;                                                                              \
        for (; i + 4 * VW <= n; i += 4 * VW) {                                                     \
            a0 = STEP(a0, V_LOADU(x + i));                                                         \
            a1 = STEP(a1, V_LOADU(x + i + VW));                                                    \
            a2 = STEP(a2, V_LOADU(x + i + 2 * VW));                                                \
            a3 = STEP(a3, V_LOADU(x + i + 3 * VW));                                                \
        }                                                                                          \
        for (; i + VW <= n; i += VW) a0 = STEP(a0, V_LOADU(x + i));                                \
        if (i < n) a1 = STEP(a1, V_MLOAD(x + i, V_TAILMASK(n - i), id));                           \
        V a = COMB(COMB(a0, a1), COMB(a2, a3));                                                    \
        float lanes[VW];                                                                           \
        V_STOREU(lanes, a);                                                                        \
        float r = lanes[0];                                                                        \
        for (int l = 1; l < VW; l++) r = SCOMB(r, lanes[l]);                                       \
        return r;                                                                                  \
    }

ROW_FN(row_sum, 0.0f, ST_SUM, CB_ADD, SC_ADD)
ROW_FN(row_asum, 0.0f, ST_ASUM, CB_ADD, SC_ADD)
ROW_FN(row_sqsum, 0.0f, ST_SQSUM, CB_ADD, SC_ADD)
ROW_FN(row_max, -INFINITY, ST_MAX, v_nanmax, s_nanmax)
ROW_FN(row_min, INFINITY, ST_MIN, v_nanmin, s_nanmin)
ROW_FN(row_prod, 1.0f, ST_PROD, ST_PROD, SC_MUL)

/* Sums of long rows add blocks of this many elements in double, so that the fp32 accumulators
 * never hold more than a few hundred terms each. */
#define SUM_BLOCK 4096

static float blocked_sum(float (*f)(const float *, size_t), const float *x, size_t n) {
    if (n <= SUM_BLOCK) return f(x, n);
    double s = 0;
    for (size_t i = 0; i < n; i += SUM_BLOCK) s += f(x + i, n - i < SUM_BLOCK ? n - i : SUM_BLOCK);
    return (float)s;
}

/* LogSumExp of the n elements `stride` apart, the reference's way (for rows whose maximum is not
 * finite, and short ones): its running maximum makes one +inf give +inf and a second one NaN, and
 * a NaN gives NaN. */
static float lse_exact(const float *x, size_t n, size_t stride) {
    double acc = 0, aux = -INFINITY;
    for (size_t t = 0; t < n; t++) {
        double v = x[t * stride];
        if (v > aux) {
            acc = acc * exp(aux - v) + 1.0;
            aux = v;
        } else if (v != -INFINITY) {
            acc += exp(v - aux);
        }
    }
    return aux == -INFINITY ? -INFINITY : (float)(aux + log(acc));
}

#ifdef ANVIL_HAVE_SLEEF
/* max, then sum(exp(x - max)): exp never overflows. */
static float row_lse(const float *x, size_t n) {
    float m = row_max(x, n);
    if (m == -INFINITY) return -INFINITY; /* empty, or every element -inf */
    if (!isfinite(m)) return lse_exact(x, n, 1);
    const V vm = V_SET1(m);
    V a0 = V_SET1(0.0f), a1 = a0;
    size_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        a0 = V_ADD(a0, f_exp_clamped(V_SUB(V_LOADU(x + i), vm)));
        a1 = V_ADD(a1, f_exp_clamped(V_SUB(V_LOADU(x + i + VW), vm)));
    }
    for (; i + VW <= n; i += VW) a0 = V_ADD(a0, f_exp_clamped(V_SUB(V_LOADU(x + i), vm)));
    if (i < n)
        a1 = V_ADD(a1,
                   f_exp_clamped(V_SUB(V_MLOAD(x + i, V_TAILMASK(n - i), V_SET1(-INFINITY)), vm)));
    float lanes[VW];
    V_STOREU(lanes, V_ADD(a0, a1));
    double s = 0;
    for (int l = 0; l < VW; l++) s += lanes[l];
    return (float)((double)m + log(s));
}
#endif

/* Rows shorter than this go through a scalar loop: a vector per row would be mostly tail. */
#define SHORT_ROW 8

static float short_row(red_op op, const float *x, size_t n) {
    float a;
    switch (op) {
    case RED_OP_MAX:
        a = -INFINITY;
        for (size_t i = 0; i < n; i++) a = s_nanmax(a, x[i]);
        return a;
    case RED_OP_MIN:
        a = INFINITY;
        for (size_t i = 0; i < n; i++) a = s_nanmin(a, x[i]);
        return a;
    case RED_OP_PROD:
        a = 1.0f;
        for (size_t i = 0; i < n; i++) a *= x[i];
        return a;
    case RED_OP_LSE:
        return lse_exact(x, n, 1);
    case RED_OP_ASUM:
        a = 0.0f;
        for (size_t i = 0; i < n; i++) a += fabsf(x[i]);
        return a;
    case RED_OP_SQSUM:
        a = 0.0f;
        for (size_t i = 0; i < n; i++) a += x[i] * x[i];
        return a;
    default:
        a = 0.0f;
        for (size_t i = 0; i < n; i++) a += x[i];
        return a;
    }
}

static void k_rows(red_op op, const float *x, size_t len, size_t rows, float *y) {
    if (len < SHORT_ROW) {
        for (size_t r = 0; r < rows; r++) y[r] = short_row(op, x + r * len, len);
        return;
    }
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        switch (op) {
        case RED_OP_SUM:
            y[r] = blocked_sum(row_sum, xr, len);
            break;
        case RED_OP_ASUM:
            y[r] = blocked_sum(row_asum, xr, len);
            break;
        case RED_OP_SQSUM:
            y[r] = blocked_sum(row_sqsum, xr, len);
            break;
        case RED_OP_MAX:
            y[r] = row_max(xr, len);
            break;
        case RED_OP_MIN:
            y[r] = row_min(xr, len);
            break;
        case RED_OP_PROD:
            y[r] = row_prod(xr, len);
            break;
        case RED_OP_LSE:
#ifdef ANVIL_HAVE_SLEEF
            y[r] = row_lse(xr, len);
#else
            y[r] = lse_exact(xr, len, 1);
#endif
            break;
        }
    }
}

/* ---- reductions down columns ---------------------------------------------------------------- */

/* y[c] = op over the len rows (inner apart) of columns [0, ncols): 4 vectors of columns at a
 * time, each row's part one contiguous load per vector, then single vectors, then a masked one. */
#define COL_FN(NAME, ID, STEP)                                                                     \
    static void NAME(const float *x, size_t len, size_t inner, size_t ncols, float *y) {           \
        const V id = V_SET1(ID);                                                                   \
        size_t c = 0;                                                                              \
        for (; c + 4 * VW <= ncols; c += 4 * VW) {                                                 \
            V a0 = id, a1 = id, a2 = id, a3 = id;                                                  \
            const float *p = x + c;                                                                \
            for (size_t l = 0; l < len; l++, p += inner) {                                         \
                a0 = STEP(a0, V_LOADU(p));                                                         \
                a1 = STEP(a1, V_LOADU(p + VW));                                                    \
                a2 = STEP(a2, V_LOADU(p + 2 * VW));                                                \
                a3 = STEP(a3, V_LOADU(p + 3 * VW));                                                \
            }                                                                                      \
            V_STOREU(y + c, a0);                                                                   \
            V_STOREU(y + c + VW, a1);                                                              \
            V_STOREU(y + c + 2 * VW, a2);                                                          \
            V_STOREU(y + c + 3 * VW, a3);                                                          \
        }                                                                                          \
        for (; c + VW <= ncols; c += VW) {                                                         \
            V a0 = id;                                                                             \
            const float *p = x + c;                                                                \
            for (size_t l = 0; l < len; l++, p += inner) a0 = STEP(a0, V_LOADU(p));                \
            V_STOREU(y + c, a0);                                                                   \
        }                                                                                          \
        if (c < ncols) {                                                                           \
            M m = V_TAILMASK(ncols - c);                                                           \
            V a0 = id;                                                                             \
            const float *p = x + c;                                                                \
            for (size_t l = 0; l < len; l++, p += inner) a0 = STEP(a0, V_MLOAD(p, m, id));         \
            V_MSTORE(y + c, m, a0);                                                                \
        }                                                                                          \
    }

COL_FN(col_sum, 0.0f, ST_SUM)
COL_FN(col_asum, 0.0f, ST_ASUM)
COL_FN(col_sqsum, 0.0f, ST_SQSUM)
COL_FN(col_max, -INFINITY, ST_MAX)
COL_FN(col_min, INFINITY, ST_MIN)
COL_FN(col_prod, 1.0f, ST_PROD)

#ifdef ANVIL_HAVE_SLEEF
/* exp(x - m) summed down the columns, m[c] the column's maximum. */
static void col_sumexp(const float *x, size_t len, size_t inner, size_t ncols, const float *m,
                       float *y) {
    size_t c = 0;
    for (; c + 2 * VW <= ncols; c += 2 * VW) {
        V a0 = V_SET1(0.0f), a1 = a0;
        const V m0 = V_LOADU(m + c), m1 = V_LOADU(m + c + VW);
        const float *p = x + c;
        for (size_t l = 0; l < len; l++, p += inner) {
            a0 = V_ADD(a0, f_exp_clamped(V_SUB(V_LOADU(p), m0)));
            a1 = V_ADD(a1, f_exp_clamped(V_SUB(V_LOADU(p + VW), m1)));
        }
        V_STOREU(y + c, a0);
        V_STOREU(y + c + VW, a1);
    }
    for (; c < ncols; c += VW) {
        M mk = V_TAILMASK(ncols - c < VW ? ncols - c : 0);
        bool full = ncols - c >= VW;
        V a0 = V_SET1(0.0f);
        const V m0 = full ? V_LOADU(m + c) : V_MLOAD(m + c, mk, V_SET1(0.0f));
        const float *p = x + c;
        for (size_t l = 0; l < len; l++, p += inner)
            a0 = V_ADD(a0, f_exp_clamped(V_SUB(full ? V_LOADU(p) : V_MLOAD(p, mk, m0), m0)));
        if (full)
            V_STOREU(y + c, a0);
        else
            V_MSTORE(y + c, mk, a0);
    }
}
#endif

/* LogSumExp down columns: the maxima into y, the sums of exp(x - max) into scratch rows of the
 * stack, then y = max + log(sum); columns whose maximum is +inf or NaN take the exact path. */
static void col_lse(const float *x, size_t len, size_t inner, size_t ncols, float *y) {
    col_max(x, len, inner, ncols, y);
#ifdef ANVIL_HAVE_SLEEF
    float s[64];
    for (size_t c0 = 0; c0 < ncols; c0 += 64) {
        size_t nc = ncols - c0 < 64 ? ncols - c0 : 64;
        float mcopy[64];
        for (size_t c = 0; c < nc; c++) {
            float mv = y[c0 + c];
            /* a finite stand-in for columns finished below, so exp stays quiet */
            mcopy[c] = isfinite(mv) ? mv : 0.0f;
        }
        col_sumexp(x + c0, len, inner, nc, mcopy, s);
        for (size_t c = 0; c < nc; c++) {
            float mv = y[c0 + c];
            if (mv == -INFINITY) continue;
            y[c0 + c] = isfinite(mv) ? (float)((double)mv + log((double)s[c]))
                                     : lse_exact(x + c0 + c, len, inner);
        }
    }
#else
    for (size_t c = 0; c < ncols; c++)
        if (y[c] != -INFINITY) y[c] = lse_exact(x + c, len, inner);
#endif
}

static void k_cols(red_op op, const float *x, size_t len, size_t inner, size_t ncols, float *y) {
    switch (op) {
    case RED_OP_SUM:
        col_sum(x, len, inner, ncols, y);
        break;
    case RED_OP_ASUM:
        col_asum(x, len, inner, ncols, y);
        break;
    case RED_OP_SQSUM:
        col_sqsum(x, len, inner, ncols, y);
        break;
    case RED_OP_MAX:
        col_max(x, len, inner, ncols, y);
        break;
    case RED_OP_MIN:
        col_min(x, len, inner, ncols, y);
        break;
    case RED_OP_PROD:
        col_prod(x, len, inner, ncols, y);
        break;
    case RED_OP_LSE:
        col_lse(x, len, inner, ncols, y);
        break;
    }
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------------ */

/* The reference's order (red_cmp): NaN above every number and equal to NaN, -0 == +0. ArgMax
 * picks the maximum; ArgMin the minimum, which a NaN never is unless every element is NaN. Per
 * row: the extreme value with one vector pass (ArgMin's plain min ignores NaN), then the first
 * (last) element equal to it. */
static size_t find_eq(const float *x, size_t len, float v, bool last) {
    const bool nan = isnan(v);
    const V vv = V_SET1(v);
    if (!last) {
        size_t i = 0;
        for (; i + VW <= len; i += VW) {
            V a = V_LOADU(x + i);
            unsigned b = C_BITS(nan ? V_CMP(a, a, _CMP_UNORD_Q) : V_CMP(a, vv, _CMP_EQ_OQ));
            if (b) return i + (size_t)__builtin_ctz(b);
        }
        for (; i < len; i++)
            if (nan ? isnan(x[i]) : x[i] == v) return i;
        return len;
    }
    size_t i = len;
    for (; i >= VW; i -= VW) {
        V a = V_LOADU(x + i - VW);
        unsigned b = C_BITS(nan ? V_CMP(a, a, _CMP_UNORD_Q) : V_CMP(a, vv, _CMP_EQ_OQ));
        if (b) return i - VW + (size_t)(31 - __builtin_clz(b));
    }
    while (i-- > 0)
        if (nan ? isnan(x[i]) : x[i] == v) return i;
    return len;
}

static float row_plainmin(const float *x, size_t n) {
    V a = V_SET1(INFINITY);
    size_t i = 0;
    for (; i + VW <= n; i += VW) a = V_MIN(V_LOADU(x + i), a);
    if (i < n) a = V_MIN(V_MLOAD(x + i, V_TAILMASK(n - i), V_SET1(INFINITY)), a);
    float lanes[VW];
    V_STOREU(lanes, a);
    float r = lanes[0];
    for (int l = 1; l < VW; l++) r = lanes[l] < r ? lanes[l] : r;
    return r;
}

static void k_arg_rows(bool is_max, bool last, const float *x, size_t len, size_t rows,
                       int64_t *y) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        float v = is_max ? row_max(xr, len) : row_plainmin(xr, len);
        size_t at = find_eq(xr, len, v, last);
        /* ArgMin of a row of NaN only: every element ties */
        if (at == len) at = last ? len - 1 : 0;
        y[r] = (int64_t)at;
    }
}

/* One vector of columns: the best value and its index per lane, replaced when the element ranks
 * above (or, with last, ties with) the best; indices in float lanes (exact below 2^24). */
static inline void arg_col_vec(bool is_max, bool last, const float *p, size_t len, size_t inner,
                               M m, bool full, V *bv, V *bi) {
    V best = full ? V_LOADU(p) : V_MLOAD(p, m, V_SET1(0.0f)), bidx = V_SET1(0.0f);
    p += inner;
    for (size_t l = 1; l < len; l++, p += inner) {
        V a = full ? V_LOADU(p) : V_MLOAD(p, m, V_SET1(0.0f));
        C an = V_CMP(a, a, _CMP_UNORD_Q), bn = V_CMP(best, best, _CMP_UNORD_Q), take;
        if (is_max)
            take = last ? C_OR(V_CMP(a, best, _CMP_GE_OQ), an)
                        : C_OR(V_CMP(a, best, _CMP_GT_OQ), C_ANDN(an, bn));
        else
            take = last ? C_OR(V_CMP(a, best, _CMP_LE_OQ), bn)
                        : C_OR(V_CMP(a, best, _CMP_LT_OQ), C_ANDN(bn, an));
        best = V_BLEND(take, best, a);
        bidx = V_BLEND(take, bidx, V_SET1((float)l));
    }
    *bv = best;
    *bi = bidx;
}

static void k_arg_cols(bool is_max, bool last, const float *x, size_t len, size_t inner,
                       size_t ncols, int64_t *y) {
    for (size_t c = 0; c < ncols; c += VW) {
        size_t nc = ncols - c < VW ? ncols - c : VW;
        V bv, bi;
        arg_col_vec(is_max, last, x + c, len, inner, V_TAILMASK(nc < VW ? nc : 0), nc == VW, &bv,
                    &bi);
        float idx[VW];
        V_STOREU(idx, bi);
        for (size_t k = 0; k < nc; k++) y[c + k] = (int64_t)idx[k];
    }
}

/* ---- normalizations ------------------------------------------------------------------------- */

static float k_sqdev(const float *x, size_t n, float mean) {
    const V vm = V_SET1(mean);
    double s = 0;
    for (size_t b = 0; b < n; b += SUM_BLOCK) {
        size_t e = n - b < SUM_BLOCK ? n : b + SUM_BLOCK;
        V a0 = V_SET1(0.0f), a1 = a0;
        size_t i = b;
        for (; i + 2 * VW <= e; i += 2 * VW) {
            V d0 = V_SUB(V_LOADU(x + i), vm), d1 = V_SUB(V_LOADU(x + i + VW), vm);
            a0 = V_FMA(d0, d0, a0);
            a1 = V_FMA(d1, d1, a1);
        }
        for (; i + VW <= e; i += VW) {
            V d = V_SUB(V_LOADU(x + i), vm);
            a0 = V_FMA(d, d, a0);
        }
        if (i < e) {
            V d = V_SUB(V_MLOAD(x + i, V_TAILMASK(e - i), vm), vm);
            a1 = V_FMA(d, d, a1);
        }
        float lanes[VW];
        V_STOREU(lanes, V_ADD(a0, a1));
        for (int l = 0; l < VW; l++) s += lanes[l];
    }
    return (float)s;
}

#define MAP_LOOP(EXPR)                                                                             \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + VW <= n; i += VW) {                                                             \
            V v = V_LOADU(x + i);                                                                  \
            V_STOREU(y + i, EXPR);                                                                 \
        }                                                                                          \
        if (i < n) {                                                                               \
            M m = V_TAILMASK(n - i);                                                               \
            V v = V_MLOAD(x + i, m, V_SET1(0.0f));                                                 \
            V_MSTORE(y + i, m, EXPR);                                                              \
        }                                                                                          \
    } while (0)

static void k_norm_apply(float *y, const float *x, size_t n, float mean, float a, float b) {
    const V vm = V_SET1(mean), va = V_SET1(a), vb = V_SET1(b);
    MAP_LOOP(V_FMA(V_SUB(v, vm), va, vb));
}

static void k_scale(float *y, const float *x, size_t n, float a, const float *s) {
    const V va = V_SET1(a);
    if (!s) {
        MAP_LOOP(V_MUL(v, va));
        return;
    }
    size_t i = 0;
    for (; i + VW <= n; i += VW) V_STOREU(y + i, V_MUL(V_MUL(V_LOADU(x + i), va), V_LOADU(s + i)));
    if (i < n) {
        M m = V_TAILMASK(n - i);
        V v = V_MUL(V_MLOAD(x + i, m, V_SET1(0.0f)), va);
        V_MSTORE(y + i, m, V_MUL(v, V_MLOAD(s + i, m, V_SET1(0.0f))));
    }
}

const red_isa RED_ISA_NAME = {
    .rows = k_rows,
    .cols = k_cols,
    .arg_rows = k_arg_rows,
    .arg_cols = k_arg_cols,
    .sqdev = k_sqdev,
    .norm_apply = k_norm_apply,
    .scale = k_scale,
};
