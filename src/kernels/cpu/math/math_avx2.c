/* The math family's AVX2 + FMA kernels (8 float lanes). Tails go through vmaskmov, which never
 * touches the masked-off lanes' memory, so no kernel reads or writes past its row. Each function
 * reproduces the reference kernel's arithmetic lane by lane as math_avx512.c does (same SLEEF u10
 * functions, same special cases); Cast is not here (math_isa_avx2.cast is NULL: its conversions
 * lean on AVX-512's int64 instructions). */
#include "mathk.h"

#include "../eltwise/eltwise.h"
#include "../eltwise/eltwise_vec_avx2.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "../eltwise/eltwise_act.h"

#define VW 8
typedef __m256i M;

static inline M tailmask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline __m256 mload(const float *p, M m, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
/* yes where the lanes of c are all-ones, no elsewhere */
static inline __m256 blend_if(__m256 c, __m256 no, __m256 yes) {
    return _mm256_blendv_ps(no, yes, c);
}

/* Runs EXPR (a function of the vector x) over in[0..n) into out. */
#define UNARY_LOOP(EXPR)                                                                           \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + VW <= n; i += VW) {                                                             \
            __m256 x = _mm256_loadu_ps(in + i);                                                    \
            _mm256_storeu_ps(out + i, (EXPR));                                                     \
        }                                                                                          \
        if (i < n) {                                                                               \
            M m_ = tailmask(n - i);                                                                \
            __m256 x = mload(in + i, m_, 1.0f);                                                    \
            _mm256_maskstore_ps(out + i, m_, (EXPR));                                              \
        }                                                                                          \
    } while (0)

/* ---- unary ---------------------------------------------------------------------------------- */

static inline __m256 v_abs(__m256 x) {
    return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

/* x^e for e >= 1 by binary exponentiation. */
static inline __m256 v_powu(__m256 x, unsigned e) {
    __m256 r = _mm256_set1_ps(1.0f);
    bool first = true;
    while (e) {
        if (e & 1) {
            r = first ? x : _mm256_mul_ps(r, x);
            first = false;
        }
        e >>= 1;
        if (e) x = _mm256_mul_ps(x, x);
    }
    return r;
}

/* sqrt(x) as pow(x, 0.5) has it: +0 for -0 (adding +0 turns -0 into +0), +inf for -inf. */
static inline __m256 v_pow_half(__m256 x) {
    __m256 r = _mm256_add_ps(_mm256_sqrt_ps(x), _mm256_setzero_ps());
    return blend_if(_mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ), r,
                    _mm256_set1_ps(INFINITY));
}

static inline __m256 v_sign(__m256 x) {
    __m256 r = blend_if(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ), x, _mm256_set1_ps(1.0f));
    return blend_if(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ), r, _mm256_set1_ps(-1.0f));
}

#ifdef ANVIL_HAVE_SLEEF
static inline __m256 v_elu(__m256 x, __m256 a) {
    __m256 neg = _mm256_mul_ps(a, Sleef_expm1f8_u10avx2(x));
    return blend_if(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ), x, neg);
}
/* SLEEF's asinh and acosh overflow to inf for |x| beyond about 1e18; there ln(2|x|) is the
 * value in float (the next term, 1 / (4 x^2), is below 2^-26 once |x| > 2^12). */
#define MK_BIG_ARC 65536.0f
static inline __m256 v_ln2x(__m256 ax) {
    return _mm256_add_ps(Sleef_logf8_u10avx2(ax), _mm256_set1_ps(0.6931471805599453f));
}
static inline __m256 v_asinh(__m256 x) {
    const __m256 ax = v_abs(x);
    const __m256 big = _mm256_or_ps(v_ln2x(ax), _mm256_and_ps(x, _mm256_set1_ps(-0.0f)));
    return blend_if(_mm256_cmp_ps(ax, _mm256_set1_ps(MK_BIG_ARC), _CMP_GT_OQ),
                    Sleef_asinhf8_u10avx2(x), big);
}
static inline __m256 v_acosh(__m256 x) {
    return blend_if(_mm256_cmp_ps(x, _mm256_set1_ps(MK_BIG_ARC), _CMP_GT_OQ),
                    Sleef_acoshf8_u10avx2(x), v_ln2x(x));
}
/* gamma * x for x > 0, gamma * (alpha * expm1(x)) otherwise (NaN too, as the reference). */
static inline __m256 v_selu(__m256 x, __m256 a, __m256 g) {
    __m256 neg = _mm256_mul_ps(g, _mm256_mul_ps(a, Sleef_expm1f8_u10avx2(x)));
    return blend_if(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ), neg, _mm256_mul_ps(g, x));
}
/* (x > 0 ? x : 0) + (neg >= 0 ? 0 : neg), neg = a * expm1(x / a): NaN stays NaN. */
static inline __m256 v_celu(__m256 x, __m256 a) {
    const __m256 z = _mm256_setzero_ps();
    __m256 neg = _mm256_mul_ps(a, Sleef_expm1f8_u10avx2(_mm256_div_ps(x, a)));
    __m256 pos = blend_if(_mm256_cmp_ps(x, z, _CMP_GT_OQ), z, x);
    return _mm256_add_ps(pos, blend_if(_mm256_cmp_ps(neg, z, _CMP_GE_OQ), neg, z));
}
#endif

static void k_unary(mk_unary k, const mk_uparam *p, float *out, const float *in, size_t n) {
    const __m256 va = _mm256_set1_ps(p ? p->a : 0.0f);
    const __m256 one = _mm256_set1_ps(1.0f);
    switch (k) {
    case MK_COPY:
        if (out != in) memmove(out, in, n * sizeof(float));
        break;
    case MK_FILL:
        UNARY_LOOP(((void)x, va));
        break;
    case MK_SQRT:
        UNARY_LOOP(_mm256_sqrt_ps(x));
        break;
    case MK_POW_HALF:
        UNARY_LOOP(v_pow_half(x));
        break;
    case MK_POW_MHALF:
        UNARY_LOOP(_mm256_div_ps(one, v_pow_half(x)));
        break;
    case MK_POWI: {
        const int e = p->n;
        const unsigned u = (unsigned)(e < 0 ? -e : e);
        if (e == 2)
            UNARY_LOOP(_mm256_mul_ps(x, x));
        else if (e == 3)
            UNARY_LOOP(_mm256_mul_ps(_mm256_mul_ps(x, x), x));
        else if (e == -1)
            UNARY_LOOP(_mm256_div_ps(one, x));
        else if (e > 0)
            UNARY_LOOP(v_powu(x, u));
        else
            UNARY_LOOP(_mm256_div_ps(one, v_powu(x, u)));
        break;
    }
    case MK_NEG:
        UNARY_LOOP(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
        break;
    case MK_ABS:
        UNARY_LOOP(v_abs(x));
        break;
    case MK_RECIP:
        UNARY_LOOP(_mm256_div_ps(one, x));
        break;
    case MK_FLOOR:
        UNARY_LOOP(_mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
        break;
    case MK_CEIL:
        UNARY_LOOP(_mm256_round_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
        break;
    case MK_ROUND:
        UNARY_LOOP(_mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        break;
    case MK_SIGN:
        UNARY_LOOP(v_sign(x));
        break;
    case MK_SOFTSIGN:
        UNARY_LOOP(_mm256_div_ps(x, _mm256_add_ps(one, v_abs(x))));
        break;
    case MK_THRELU:
        /* x <= alpha gives 0; x > alpha and NaN keep x */
        UNARY_LOOP(_mm256_and_ps(_mm256_cmp_ps(x, va, _CMP_NLE_UQ), x));
        break;
    case MK_DIVC:
        UNARY_LOOP(_mm256_div_ps(x, va));
        break;
#ifdef ANVIL_HAVE_SLEEF
    case MK_POWC:
        UNARY_LOOP(Sleef_powf8_u10avx2(x, va));
        break;
    case MK_LOG:
        UNARY_LOOP(Sleef_logf8_u10avx2(x));
        break;
    case MK_SIN:
        UNARY_LOOP(Sleef_sinf8_u10avx2(x));
        break;
    case MK_COS:
        UNARY_LOOP(Sleef_cosf8_u10avx2(x));
        break;
    case MK_TAN:
        UNARY_LOOP(Sleef_tanf8_u10avx2(x));
        break;
    case MK_ASIN:
        UNARY_LOOP(Sleef_asinf8_u10avx2(x));
        break;
    case MK_ACOS:
        UNARY_LOOP(Sleef_acosf8_u10avx2(x));
        break;
    case MK_ATAN:
        UNARY_LOOP(Sleef_atanf8_u10avx2(x));
        break;
    case MK_SINH:
        UNARY_LOOP(Sleef_sinhf8_u10avx2(x));
        break;
    case MK_COSH:
        UNARY_LOOP(Sleef_coshf8_u10avx2(x));
        break;
    case MK_ASINH:
        UNARY_LOOP(v_asinh(x));
        break;
    case MK_ACOSH:
        UNARY_LOOP(v_acosh(x));
        break;
    case MK_ATANH:
        UNARY_LOOP(Sleef_atanhf8_u10avx2(x));
        break;
    case MK_ELU:
        UNARY_LOOP(v_elu(x, va));
        break;
    case MK_SELU: {
        const __m256 vg = _mm256_set1_ps(p->b);
        UNARY_LOOP(v_selu(x, va, vg));
        break;
    }
    case MK_CELU:
        UNARY_LOOP(v_celu(x, va));
        break;
    case MK_MISH:
        UNARY_LOOP(_mm256_mul_ps(x, Sleef_tanhf8_u10avx2(f_softplus(x))));
        break;
    case MK_SWISH:
        UNARY_LOOP(f_times_sigmoid(x, _mm256_mul_ps(va, x)));
        break;
#endif
    default:
        break;
    }
}

/* ---- binary --------------------------------------------------------------------------------- */

/* np.maximum: a when a > b or a is NaN, else b (so a NaN b wins too). */
static inline __m256 v_max(__m256 a, __m256 b) {
    __m256 m = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, m);
}
static inline __m256 v_min(__m256 a, __m256 b) {
    __m256 m = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, m);
}
static inline __m256 v_prelu(__m256 a, __m256 b) {
    return _mm256_blendv_ps(a, _mm256_mul_ps(b, a),
                            _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_LT_OQ));
}

/* Loads lane i.. of an operand: a full or masked vector when contiguous, its broadcast else. */
#define OPND(p, s, bc, i, m, full)                                                                 \
    ((s) ? ((full) ? _mm256_loadu_ps((p) + (i)) : mload((p) + (i), (m), 1.0f)) : (bc))

#define BINARY_LOOP(OPV)                                                                           \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        const M full_ = _mm256_set1_epi32(-1);                                                     \
        for (; i + VW <= n; i += VW)                                                               \
            _mm256_storeu_ps(                                                                      \
                out + i, OPV(OPND(a, sa, va, i, full_, true), OPND(b, sb, vb, i, full_, true)));   \
        if (i < n) {                                                                               \
            M m = tailmask(n - i);                                                                 \
            _mm256_maskstore_ps(out + i, m,                                                        \
                                OPV(OPND(a, sa, va, i, m, false), OPND(b, sb, vb, i, m, false)));  \
        }                                                                                          \
    } while (0)

#define V_ADDF(a, b) _mm256_add_ps((a), (b))
#ifdef ANVIL_HAVE_SLEEF
#define V_POWF(a, b) Sleef_powf8_u10avx2((a), (b))
#endif

static void k_binary(mk_binary k, float *out, const float *a, const float *b, int sa, int sb,
                     size_t n) {
    const __m256 va = _mm256_set1_ps(a[0]), vb = _mm256_set1_ps(b[0]);
    switch (k) {
    case MK_ADD:
        BINARY_LOOP(V_ADDF);
        break;
    case MK_MAX:
        BINARY_LOOP(v_max);
        break;
    case MK_MIN:
        BINARY_LOOP(v_min);
        break;
    case MK_PRELU:
        BINARY_LOOP(v_prelu);
        break;
#ifdef ANVIL_HAVE_SLEEF
    case MK_POW:
        BINARY_LOOP(V_POWF);
        break;
#endif
    default:
        break;
    }
}

/* The low cnt bits of an 8-lane compare's sign mask as BOOL bytes. */
static inline void store_bool(uint8_t *out, __m256 r, size_t cnt) {
    const unsigned bits = (unsigned)_mm256_movemask_ps(r);
    for (size_t j = 0; j < cnt; j++) out[j] = (uint8_t)((bits >> j) & 1u);
}

static void k_compare(mk_binary k, uint8_t *out, const float *a, const float *b, int sa, int sb,
                      size_t n) {
    const __m256 va = _mm256_set1_ps(a[0]), vb = _mm256_set1_ps(b[0]);
    for (size_t i = 0; i < n; i += VW) {
        bool full = i + VW <= n;
        M m = full ? _mm256_set1_epi32(-1) : tailmask(n - i);
        __m256 u = OPND(a, sa, va, i, m, full), v = OPND(b, sb, vb, i, m, full);
        __m256 r;
        /* the predicate must be an immediate */
        switch (k) {
        case MK_EQ:
            r = _mm256_cmp_ps(u, v, _CMP_EQ_OQ);
            break;
        case MK_LT:
            r = _mm256_cmp_ps(u, v, _CMP_LT_OQ);
            break;
        case MK_LE:
            r = _mm256_cmp_ps(u, v, _CMP_LE_OQ);
            break;
        case MK_GT:
            r = _mm256_cmp_ps(u, v, _CMP_GT_OQ);
            break;
        default:
            r = _mm256_cmp_ps(u, v, _CMP_GE_OQ);
            break;
        }
        store_bool(out + i, r, full ? VW : n - i);
    }
}

/* Plain loops over bytes: the compiler vectorizes them with AVX2. */
static void k_logic(mk_binary k, uint8_t *out, const uint8_t *a, const uint8_t *b, int sa, int sb,
                    size_t n) {
    const size_t ia = (size_t)sa, ib = (size_t)sb;
    switch (k) {
    case MK_NOT:
        for (size_t i = 0; i < n; i++) out[i] = a[i] == 0;
        break;
    case MK_AND:
        for (size_t i = 0; i < n; i++) out[i] = (a[i * ia] != 0) & (b[i * ib] != 0);
        break;
    case MK_OR:
        for (size_t i = 0; i < n; i++) out[i] = (a[i * ia] != 0) | (b[i * ib] != 0);
        break;
    default:
        for (size_t i = 0; i < n; i++) out[i] = (a[i * ia] != 0) ^ (b[i * ib] != 0);
        break;
    }
}

/* ---- Where ------------------------------------------------------------------------------------
 * 4-byte elements 8 per step (the condition bytes widened to a lane mask that blends X over Y),
 * other sizes and the tail element by element. A broadcast condition picks a whole row. */

static void where_row_const(size_t es, void *out, const void *src, int s, size_t n) {
    char *o = out;
    if (s) {
        memmove(o, src, n * es);
        return;
    }
    for (size_t i = 0; i < n; i++) memcpy(o + i * es, src, es);
}

#define WHERE_SCALAR(T, from)                                                                      \
    do {                                                                                           \
        const T *xp = x, *yp = y;                                                                  \
        T *op = out;                                                                               \
        for (size_t i = (from); i < n; i++)                                                        \
            op[i] = c[i] ? xp[i * (size_t)sx] : yp[i * (size_t)sy];                                \
    } while (0)

static void k_where(size_t es, void *out, const uint8_t *c, const void *x, const void *y, int sc,
                    int sx, int sy, size_t n) {
    if (!sc) {
        where_row_const(es, out, c[0] ? x : y, c[0] ? sx : sy, n);
        return;
    }
    switch (es) {
    case 4: {
        const float *xp = x, *yp = y;
        float *op = out;
        const __m256 bx = _mm256_set1_ps(xp[0]), by = _mm256_set1_ps(yp[0]);
        size_t i = 0;
        for (; i + VW <= n; i += VW) {
            __m256i cv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + i)));
            __m256 sel = _mm256_castsi256_ps(_mm256_cmpeq_epi32(cv, _mm256_setzero_si256()));
            __m256 a = sx ? _mm256_loadu_ps(xp + i) : bx, b = sy ? _mm256_loadu_ps(yp + i) : by;
            /* blendv picks on the sign bit: raw bit patterns pass through unchanged */
            _mm256_storeu_ps(op + i, _mm256_blendv_ps(a, b, sel));
        }
        WHERE_SCALAR(uint32_t, i);
        break;
    }
    case 2:
        WHERE_SCALAR(uint16_t, 0);
        break;
    case 1:
        WHERE_SCALAR(uint8_t, 0);
        break;
    default:
        WHERE_SCALAR(uint64_t, 0);
        break;
    }
}

/* ---- Softmax / LogSoftmax along a strided axis --------------------------------------------------
 * 8 adjacent lines at a time, one per lane: the maximum, then e^(x - max) summed in double (as
 * the reference does), then the division (Softmax) or x - (max + log(sum)) in double
 * (LogSoftmax). Softmax keeps the exponentials in y between the passes. */
#ifdef ANVIL_HAVE_SLEEF
static inline __m256 join_pd(__m256d lo, __m256d hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi),
                                1);
}
#define LO_PD(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define HI_PD(v) _mm256_cvtps_pd(_mm256_extractf128_ps((v), 1))

static void k_softmax_cols(float *y, const float *x, size_t len, size_t inner, size_t cols,
                           bool logsm) {
    for (size_t c = 0; c < cols; c += VW) {
        const M m = c + VW <= cols ? _mm256_set1_epi32(-1) : tailmask(cols - c);
        const float *xc = x + c;
        float *yc = y + c;
        __m256 mx = mload(xc, m, 0.0f);
        for (size_t j = 1; j < len; j++) mx = _mm256_max_ps(mload(xc + j * inner, m, 0.0f), mx);
        __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
        for (size_t j = 0; j < len; j++) {
            __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(mload(xc + j * inner, m, 0.0f), mx));
            if (!logsm) _mm256_maskstore_ps(yc + j * inner, m, e);
            s0 = _mm256_add_pd(s0, LO_PD(e));
            s1 = _mm256_add_pd(s1, HI_PD(e));
        }
        if (logsm) {
            __m256d l0 = _mm256_add_pd(LO_PD(mx), Sleef_logd4_u10avx2(s0));
            __m256d l1 = _mm256_add_pd(HI_PD(mx), Sleef_logd4_u10avx2(s1));
            for (size_t j = 0; j < len; j++) {
                __m256 v = mload(xc + j * inner, m, 0.0f);
                _mm256_maskstore_ps(
                    yc + j * inner, m,
                    join_pd(_mm256_sub_pd(LO_PD(v), l0), _mm256_sub_pd(HI_PD(v), l1)));
            }
        } else {
            for (size_t j = 0; j < len; j++) {
                __m256 e = mload(yc + j * inner, m, 0.0f);
                _mm256_maskstore_ps(
                    yc + j * inner, m,
                    join_pd(_mm256_div_pd(LO_PD(e), s0), _mm256_div_pd(HI_PD(e), s1)));
            }
        }
    }
}
#endif

const mk_isa math_isa_avx2 = {
    .unary = k_unary,
    .binary = k_binary,
    .compare = k_compare,
    .logic = k_logic,
    .where = k_where,
#ifdef ANVIL_HAVE_SLEEF
    .softmax_cols = k_softmax_cols,
#endif
};
