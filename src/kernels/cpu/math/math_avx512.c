/* The math family's AVX-512 kernels (16 float lanes; tails through mask registers, so no kernel
 * reads or writes past its row). Each function reproduces the reference kernel's arithmetic
 * (src/ops/math, src/ops/tensor/cast.c) lane by lane; where libm is replaced by SLEEF's u10
 * functions the result is within about 1 ulp of it. */
#include "mathk.h"

#include "../eltwise/eltwise.h"
#include "../eltwise/eltwise_vec_avx512.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "../eltwise/eltwise_act.h"

#define VW 16
typedef __mmask16 M;

static inline M tailmask(size_t n) {
    return (M)((1u << n) - 1u);
}
static inline __m512 mload(const float *p, M m, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), m, p);
}

/* Runs EXPR (a function of the vector x) over in[0..n) into out. */
#define UNARY_LOOP(EXPR)                                                                           \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + VW <= n; i += VW) {                                                             \
            __m512 x = _mm512_loadu_ps(in + i);                                                    \
            _mm512_storeu_ps(out + i, (EXPR));                                                     \
        }                                                                                          \
        if (i < n) {                                                                               \
            M m_ = tailmask(n - i);                                                                \
            __m512 x = mload(in + i, m_, 1.0f);                                                    \
            _mm512_mask_storeu_ps(out + i, m_, (EXPR));                                            \
        }                                                                                          \
    } while (0)

/* ---- unary ---------------------------------------------------------------------------------- */

static inline __m512 blend_if(__mmask16 m, __m512 no, __m512 yes) {
    return _mm512_mask_blend_ps(m, no, yes);
}
static inline __m512 v_abs(__m512 x) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

/* x^e for e >= 1 by binary exponentiation. */
static inline __m512 v_powu(__m512 x, unsigned e) {
    __m512 r = _mm512_set1_ps(1.0f);
    bool first = true;
    while (e) {
        if (e & 1) {
            r = first ? x : _mm512_mul_ps(r, x);
            first = false;
        }
        e >>= 1;
        if (e) x = _mm512_mul_ps(x, x);
    }
    return r;
}

/* sqrt(x) as pow(x, 0.5) has it: +0 for -0 (adding +0 turns -0 into +0), +inf for -inf. */
static inline __m512 v_pow_half(__m512 x) {
    __m512 r = _mm512_add_ps(_mm512_sqrt_ps(x), _mm512_setzero_ps());
    return blend_if(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), r,
                    _mm512_set1_ps(INFINITY));
}

static inline __m512 v_sign(__m512 x) {
    __m512 r =
        blend_if(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), x, _mm512_set1_ps(1.0f));
    return blend_if(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), r,
                    _mm512_set1_ps(-1.0f));
}

#ifdef ANVIL_HAVE_SLEEF
static inline __m512 v_elu(__m512 x, __m512 a) {
    __m512 neg = _mm512_mul_ps(a, Sleef_expm1f16_u10avx512f(x));
    return blend_if(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), x, neg);
}
/* SLEEF's asinh and acosh overflow to inf for |x| beyond about 1e18; there ln(2|x|) is the
 * value in float (the next term, 1 / (4 x^2), is below 2^-26 once |x| > 2^12). */
#define MK_BIG_ARC 65536.0f
static inline __m512 v_ln2x(__m512 ax) {
    return _mm512_add_ps(Sleef_logf16_u10avx512f(ax), _mm512_set1_ps(0.6931471805599453f));
}
static inline __m512 v_asinh(__m512 x) {
    const __m512 ax = v_abs(x);
    const __m512 big = _mm512_or_ps(v_ln2x(ax), _mm512_and_ps(x, _mm512_set1_ps(-0.0f)));
    return blend_if(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(MK_BIG_ARC), _CMP_GT_OQ),
                    Sleef_asinhf16_u10avx512f(x), big);
}
static inline __m512 v_acosh(__m512 x) {
    return blend_if(_mm512_cmp_ps_mask(x, _mm512_set1_ps(MK_BIG_ARC), _CMP_GT_OQ),
                    Sleef_acoshf16_u10avx512f(x), v_ln2x(x));
}
/* gamma * x for x > 0, gamma * (alpha * expm1(x)) otherwise (NaN too, as the reference). */
static inline __m512 v_selu(__m512 x, __m512 a, __m512 g) {
    __m512 neg = _mm512_mul_ps(g, _mm512_mul_ps(a, Sleef_expm1f16_u10avx512f(x)));
    return blend_if(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), neg,
                    _mm512_mul_ps(g, x));
}
/* (x > 0 ? x : 0) + (neg >= 0 ? 0 : neg), neg = a * expm1(x / a): NaN stays NaN. */
static inline __m512 v_celu(__m512 x, __m512 a) {
    const __m512 z = _mm512_setzero_ps();
    __m512 neg = _mm512_mul_ps(a, Sleef_expm1f16_u10avx512f(_mm512_div_ps(x, a)));
    __m512 pos = blend_if(_mm512_cmp_ps_mask(x, z, _CMP_GT_OQ), z, x);
    return _mm512_add_ps(pos, blend_if(_mm512_cmp_ps_mask(neg, z, _CMP_GE_OQ), neg, z));
}
#endif

static void k_unary(mk_unary k, const mk_uparam *p, float *out, const float *in, size_t n) {
    const __m512 va = _mm512_set1_ps(p ? p->a : 0.0f);
    const __m512 one = _mm512_set1_ps(1.0f);
    switch (k) {
    case MK_COPY:
        if (out != in) memmove(out, in, n * sizeof(float));
        break;
    case MK_FILL:
        UNARY_LOOP(((void)x, va));
        break;
    case MK_SQRT:
        UNARY_LOOP(_mm512_sqrt_ps(x));
        break;
    case MK_POW_HALF:
        UNARY_LOOP(v_pow_half(x));
        break;
    case MK_POW_MHALF:
        UNARY_LOOP(_mm512_div_ps(one, v_pow_half(x)));
        break;
    case MK_POWI: {
        const int e = p->n;
        const unsigned u = (unsigned)(e < 0 ? -e : e);
        if (e == 2)
            UNARY_LOOP(_mm512_mul_ps(x, x));
        else if (e == 3)
            UNARY_LOOP(_mm512_mul_ps(_mm512_mul_ps(x, x), x));
        else if (e == -1)
            UNARY_LOOP(_mm512_div_ps(one, x));
        else if (e > 0)
            UNARY_LOOP(v_powu(x, u));
        else
            UNARY_LOOP(_mm512_div_ps(one, v_powu(x, u)));
        break;
    }
    case MK_NEG:
        UNARY_LOOP(_mm512_castsi512_ps(
            _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
        break;
    case MK_ABS:
        UNARY_LOOP(v_abs(x));
        break;
    case MK_RECIP:
        UNARY_LOOP(_mm512_div_ps(one, x));
        break;
    case MK_FLOOR:
        UNARY_LOOP(_mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
        break;
    case MK_CEIL:
        UNARY_LOOP(_mm512_roundscale_ps(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
        break;
    case MK_ROUND:
        UNARY_LOOP(_mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        break;
    case MK_SIGN:
        UNARY_LOOP(v_sign(x));
        break;
    case MK_SOFTSIGN:
        UNARY_LOOP(_mm512_div_ps(x, _mm512_add_ps(one, v_abs(x))));
        break;
    case MK_THRELU:
        /* x <= alpha gives 0; x > alpha and NaN keep x */
        UNARY_LOOP(_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, va, _CMP_NLE_UQ), x));
        break;
    case MK_DIVC:
        UNARY_LOOP(_mm512_div_ps(x, va));
        break;
#ifdef ANVIL_HAVE_SLEEF
    case MK_POWC:
        UNARY_LOOP(Sleef_powf16_u10avx512f(x, va));
        break;
    case MK_LOG:
        UNARY_LOOP(Sleef_logf16_u10avx512f(x));
        break;
    case MK_SIN:
        UNARY_LOOP(Sleef_sinf16_u10avx512f(x));
        break;
    case MK_COS:
        UNARY_LOOP(Sleef_cosf16_u10avx512f(x));
        break;
    case MK_TAN:
        UNARY_LOOP(Sleef_tanf16_u10avx512f(x));
        break;
    case MK_ASIN:
        UNARY_LOOP(Sleef_asinf16_u10avx512f(x));
        break;
    case MK_ACOS:
        UNARY_LOOP(Sleef_acosf16_u10avx512f(x));
        break;
    case MK_ATAN:
        UNARY_LOOP(Sleef_atanf16_u10avx512f(x));
        break;
    case MK_SINH:
        UNARY_LOOP(Sleef_sinhf16_u10avx512f(x));
        break;
    case MK_COSH:
        UNARY_LOOP(Sleef_coshf16_u10avx512f(x));
        break;
    case MK_ASINH:
        UNARY_LOOP(v_asinh(x));
        break;
    case MK_ACOSH:
        UNARY_LOOP(v_acosh(x));
        break;
    case MK_ATANH:
        UNARY_LOOP(Sleef_atanhf16_u10avx512f(x));
        break;
    case MK_ELU:
        UNARY_LOOP(v_elu(x, va));
        break;
    case MK_SELU: {
        const __m512 vg = _mm512_set1_ps(p->b);
        UNARY_LOOP(v_selu(x, va, vg));
        break;
    }
    case MK_CELU:
        UNARY_LOOP(v_celu(x, va));
        break;
    case MK_MISH:
        UNARY_LOOP(_mm512_mul_ps(x, Sleef_tanhf16_u10avx512f(f_softplus(x))));
        break;
    case MK_SWISH:
        UNARY_LOOP(f_times_sigmoid(x, _mm512_mul_ps(va, x)));
        break;
#endif
    default:
        break;
    }
}

/* ---- binary --------------------------------------------------------------------------------- */

/* np.maximum: a when a > b or a is NaN, else b (so a NaN b wins too). */
static inline __m512 v_max(__m512 a, __m512 b) {
    M m = _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(m, b, a);
}
static inline __m512 v_min(__m512 a, __m512 b) {
    M m = _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(m, b, a);
}
static inline __m512 v_prelu(__m512 a, __m512 b) {
    return _mm512_mask_mul_ps(a, _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);
}

/* Loads lane i.. of an operand: a full or masked vector when contiguous, its broadcast else. */
#define OPND(p, s, bc, i, m, full)                                                                 \
    ((s) ? ((full) ? _mm512_loadu_ps((p) + (i)) : mload((p) + (i), (m), 1.0f)) : (bc))

#define BINARY_LOOP(OPV)                                                                           \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + VW <= n; i += VW)                                                               \
            _mm512_storeu_ps(out + i,                                                              \
                             OPV(OPND(a, sa, va, i, 0, true), OPND(b, sb, vb, i, 0, true)));       \
        if (i < n) {                                                                               \
            M m = tailmask(n - i);                                                                 \
            _mm512_mask_storeu_ps(                                                                 \
                out + i, m, OPV(OPND(a, sa, va, i, m, false), OPND(b, sb, vb, i, m, false)));      \
        }                                                                                          \
    } while (0)

#define V_ADDF(a, b) _mm512_add_ps((a), (b))
#ifdef ANVIL_HAVE_SLEEF
#define V_POWF(a, b) Sleef_powf16_u10avx512f((a), (b))
#endif

static void k_binary(mk_binary k, float *out, const float *a, const float *b, int sa, int sb,
                     size_t n) {
    const __m512 va = _mm512_set1_ps(a[0]), vb = _mm512_set1_ps(b[0]);
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

/* 16 mask bits as 16 BOOL bytes. */
static inline void store_bool(uint8_t *out, M m, M valid) {
    _mm_mask_storeu_epi8(out, valid, _mm_maskz_set1_epi8(m, 1));
}

static void k_compare(mk_binary k, uint8_t *out, const float *a, const float *b, int sa, int sb,
                      size_t n) {
    const __m512 va = _mm512_set1_ps(a[0]), vb = _mm512_set1_ps(b[0]);
    const int pred = k == MK_EQ   ? _CMP_EQ_OQ
                     : k == MK_LT ? _CMP_LT_OQ
                     : k == MK_LE ? _CMP_LE_OQ
                     : k == MK_GT ? _CMP_GT_OQ
                                  : _CMP_GE_OQ;
    for (size_t i = 0; i < n; i += VW) {
        bool full = i + VW <= n;
        M m = full ? (M)0xffff : tailmask(n - i);
        __m512 u = OPND(a, sa, va, i, m, full), v = OPND(b, sb, vb, i, m, full);
        M r;
        /* the predicate must be an immediate */
        switch (pred) {
        case _CMP_EQ_OQ:
            r = _mm512_cmp_ps_mask(u, v, _CMP_EQ_OQ);
            break;
        case _CMP_LT_OQ:
            r = _mm512_cmp_ps_mask(u, v, _CMP_LT_OQ);
            break;
        case _CMP_LE_OQ:
            r = _mm512_cmp_ps_mask(u, v, _CMP_LE_OQ);
            break;
        case _CMP_GT_OQ:
            r = _mm512_cmp_ps_mask(u, v, _CMP_GT_OQ);
            break;
        default:
            r = _mm512_cmp_ps_mask(u, v, _CMP_GE_OQ);
            break;
        }
        store_bool(out + i, r, m);
    }
}

/* Plain loops over bytes: the compiler vectorizes them with AVX-512. */
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
 * 16 elements per step: the condition bytes become a mask that blends X over Y (lanes of the
 * element size; 8-byte elements as two halves of 8). A broadcast condition picks a whole row. */

static void where_row_const(size_t es, void *out, const void *src, int s, size_t n) {
    char *o = out;
    if (s) {
        memmove(o, src, n * es);
        return;
    }
    for (size_t i = 0; i < n; i++) memcpy(o + i * es, src, es);
}

#define WHERE_LOOP(T, LOAD, BCAST, BLEND, STORE)                                                   \
    do {                                                                                           \
        const T *xp = x, *yp = y;                                                                  \
        T *op = out;                                                                               \
        for (size_t i = 0; i < n; i += VW) {                                                       \
            bool full = i + VW <= n;                                                               \
            M m = full ? (M)0xffff : tailmask(n - i);                                              \
            __m128i cv = _mm_maskz_loadu_epi8(m, c + i);                                           \
            M sel = _mm_test_epi8_mask(cv, cv);                                                    \
            BLEND(op + i, m, sel, sx ? LOAD(xp + i, m) : BCAST(xp[0]),                             \
                  sy ? LOAD(yp + i, m) : BCAST(yp[0]));                                            \
        }                                                                                          \
    } while (0)

#define LD32(p, m) _mm512_maskz_loadu_epi32((m), (p))
#define BC32(v) _mm512_set1_epi32((int)(v))
#define BL32(o, m, sel, a, b)                                                                      \
    _mm512_mask_storeu_epi32((o), (m), _mm512_mask_blend_epi32((sel), (b), (a)))
#define LD16(p, m) _mm256_maskz_loadu_epi16((m), (p))
#define BC16(v) _mm256_set1_epi16((short)(v))
#define BL16(o, m, sel, a, b)                                                                      \
    _mm256_mask_storeu_epi16((o), (m), _mm256_mask_blend_epi16((sel), (b), (a)))
#define LD8(p, m) _mm_maskz_loadu_epi8((m), (p))
#define BC8(v) _mm_set1_epi8((char)(v))
#define BL8(o, m, sel, a, b) _mm_mask_storeu_epi8((o), (m), _mm_mask_blend_epi8((sel), (b), (a)))

static void k_where(size_t es, void *out, const uint8_t *c, const void *x, const void *y, int sc,
                    int sx, int sy, size_t n) {
    if (!sc) {
        where_row_const(es, out, c[0] ? x : y, c[0] ? sx : sy, n);
        return;
    }
    switch (es) {
    case 4:
        WHERE_LOOP(uint32_t, LD32, BC32, BL32, _);
        break;
    case 2:
        WHERE_LOOP(uint16_t, LD16, BC16, BL16, _);
        break;
    case 1:
        WHERE_LOOP(uint8_t, LD8, BC8, BL8, _);
        break;
    default: {
        /* 8 bytes: two halves of 8 lanes */
        const uint64_t *xp = x, *yp = y;
        uint64_t *op = out;
        for (size_t i = 0; i < n; i += 8) {
            __mmask8 m = i + 8 <= n ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1u);
            __m128i cv = _mm_maskz_loadu_epi8(m, c + i);
            __mmask8 sel = (__mmask8)_mm_test_epi8_mask(cv, cv);
            __m512i a =
                sx ? _mm512_maskz_loadu_epi64(m, xp + i) : _mm512_set1_epi64((long long)xp[0]);
            __m512i b =
                sy ? _mm512_maskz_loadu_epi64(m, yp + i) : _mm512_set1_epi64((long long)yp[0]);
            _mm512_mask_storeu_epi64(op + i, m, _mm512_mask_blend_epi64(sel, b, a));
        }
        break;
    }
    }
}

/* ---- Cast -------------------------------------------------------------------------------------
 * 16 elements at a time through one of two register forms: 16 floats (the float dtypes) or 16
 * int64 in two vectors (the integer dtypes and BOOL, widened exactly). Converting between the
 * forms and storing are the reference's rules:
 *   int -> float: int64 -> float rounding to nearest even (as C's conversion of any integer);
 *   float -> INT64: truncation, NaN / out of range INT64_MIN (cvttps2qq's "indefinite");
 *   float -> INT32/INT8/UINT8: truncation to int32 (NaN / out of range INT32_MIN), low bits kept;
 *   int -> narrower int: low bits kept; anything -> BOOL: != 0 (NaN is true);
 *   float -> FLOAT16: round to nearest even, NaN as sign | 0x7e00 (the reference's quiet NaN);
 *   float -> BFLOAT16: round to nearest even on the bits, NaN as (bits >> 16) | 0x40.
 * The last partial block goes through a stack buffer, so nothing touches memory past a row. */

/* mk_ctype's codes, short */
enum { CF32 = MK_CF32, CF16, CBF16, CI32, CI64, CI8, CU8, CBOOL, C_COUNT };

static const size_t cast_size[C_COUNT] = {4, 2, 2, 4, 8, 1, 1, 1};

static inline bool c_isfloat(int c) {
    return c == CF32 || c == CF16 || c == CBF16;
}

typedef struct cblk {
    __m512 f;
    __m512i q0, q1; /* lanes 0..7 and 8..15 as int64 */
} cblk;

static inline __attribute__((always_inline)) cblk c_load(int from, const void *p) {
    cblk b = {_mm512_setzero_ps(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    switch (from) {
    case CF32:
        b.f = _mm512_loadu_ps(p);
        break;
    case CF16:
        b.f = _mm512_cvtph_ps(_mm256_loadu_si256(p));
        break;
    case CBF16:
        b.f = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p)), 16));
        break;
    case CI32: {
        __m512i v = _mm512_loadu_si512(p);
        b.q0 = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
        b.q1 = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1));
        break;
    }
    case CI64:
        b.q0 = _mm512_loadu_si512(p);
        b.q1 = _mm512_loadu_si512((const int64_t *)p + 8);
        break;
    case CI8:
        b.q0 = _mm512_cvtepi8_epi64(_mm_loadl_epi64(p));
        b.q1 = _mm512_cvtepi8_epi64(_mm_loadl_epi64((const __m128i *)((const uint8_t *)p + 8)));
        break;
    case CU8:
        b.q0 = _mm512_cvtepu8_epi64(_mm_loadl_epi64(p));
        b.q1 = _mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)((const uint8_t *)p + 8)));
        break;
    default: { /* BOOL: nonzero is 1 */
        __m128i v = _mm_loadu_si128(p);
        M nz = _mm_test_epi8_mask(v, v);
        b.q0 = _mm512_maskz_set1_epi64((__mmask8)nz, 1);
        b.q1 = _mm512_maskz_set1_epi64((__mmask8)(nz >> 8), 1);
        break;
    }
    }
    return b;
}

static inline __attribute__((always_inline)) void c_store(int from, int to, void *p, cblk b) {
    if (c_isfloat(to) && !c_isfloat(from))
        b.f = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtepi64_ps(b.q0)),
                                 _mm512_cvtepi64_ps(b.q1), 1);
    if (to == CBOOL) {
        M nz = c_isfloat(from) ? _mm512_cmp_ps_mask(b.f, _mm512_setzero_ps(), _CMP_NEQ_UQ)
                               : (M)(_mm512_test_epi64_mask(b.q0, b.q0) |
                                     ((M)_mm512_test_epi64_mask(b.q1, b.q1) << 8));
        _mm_storeu_si128(p, _mm_maskz_set1_epi8(nz, 1));
        return;
    }
    if (!c_isfloat(to) && c_isfloat(from)) {
        if (to == CI64) {
            _mm512_storeu_si512(p, _mm512_cvttps_epi64(_mm512_castps512_ps256(b.f)));
            _mm512_storeu_si512((int64_t *)p + 8,
                                _mm512_cvttps_epi64(_mm512_extractf32x8_ps(b.f, 1)));
            return;
        }
        __m512i d = _mm512_cvttps_epi32(b.f);
        if (to == CI32)
            _mm512_storeu_si512(p, d);
        else
            _mm_storeu_si128(p, _mm512_cvtepi32_epi8(d));
        return;
    }
    switch (to) {
    case CF32:
        _mm512_storeu_ps(p, b.f);
        break;
    case CF16: {
        __m256i h = _mm512_cvtps_ph(b.f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        M nan = _mm512_cmp_ps_mask(b.f, b.f, _CMP_UNORD_Q);
        if (nan) {
            __m512i bits = _mm512_castps_si512(b.f);
            __m256i q = _mm512_cvtepi32_epi16(_mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x8000)),
                _mm512_set1_epi32(0x7e00)));
            h = _mm256_mask_blend_epi16(nan, h, q);
        }
        _mm256_storeu_si256(p, h);
        break;
    }
    case CBF16: {
        __m512i x = _mm512_castps_si512(b.f);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
        M nan = _mm512_cmp_ps_mask(b.f, b.f, _CMP_UNORD_Q);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
        _mm256_storeu_si256(p, _mm512_cvtepi32_epi16(r));
        break;
    }
    case CI64:
        _mm512_storeu_si512(p, b.q0);
        _mm512_storeu_si512((int64_t *)p + 8, b.q1);
        break;
    case CI32:
        _mm256_storeu_si256(p, _mm512_cvtepi64_epi32(b.q0));
        _mm256_storeu_si256((__m256i *)((int32_t *)p + 8), _mm512_cvtepi64_epi32(b.q1));
        break;
    default: /* INT8 / UINT8: low bytes */
        _mm_storel_epi64(p, _mm512_cvtepi64_epi8(b.q0));
        _mm_storel_epi64((__m128i *)((uint8_t *)p + 8), _mm512_cvtepi64_epi8(b.q1));
        break;
    }
}

static inline __attribute__((always_inline)) void cast_loop(int from, int to, void *out,
                                                            const void *in, size_t n) {
    const size_t si = cast_size[from], so = cast_size[to];
    const char *x = in;
    char *y = out;
    size_t i = 0;
    for (; i + VW <= n; i += VW) c_store(from, to, y + i * so, c_load(from, x + i * si));
    if (i < n) {
        _Alignas(64) char tin[VW * 8], tout[VW * 8];
        memset(tin, 0, sizeof tin);
        memcpy(tin, x + i * si, (n - i) * si);
        c_store(from, to, tout, c_load(from, tin));
        memcpy(y + i * so, tout, (n - i) * so);
    }
}

#define CAST_FN(F, T)                                                                              \
    static void cast_##F##_##T(void *out, const void *in, size_t n) {                              \
        cast_loop(F, T, out, in, n);                                                               \
    }
#define CAST_ROW(F)                                                                                \
    CAST_FN(F, CF32)                                                                               \
    CAST_FN(F, CF16)                                                                               \
    CAST_FN(F, CBF16)                                                                              \
    CAST_FN(F, CI32) CAST_FN(F, CI64) CAST_FN(F, CI8) CAST_FN(F, CU8) CAST_FN(F, CBOOL)
CAST_ROW(CF32)
CAST_ROW(CF16)
CAST_ROW(CBF16)
CAST_ROW(CI32)
CAST_ROW(CI64)
CAST_ROW(CI8)
CAST_ROW(CU8)
CAST_ROW(CBOOL)

#define CAST_ENTRY(F)                                                                              \
    {cast_##F##_CF32, cast_##F##_CF16, cast_##F##_CBF16, cast_##F##_CI32,                          \
     cast_##F##_CI64, cast_##F##_CI8,  cast_##F##_CU8,   cast_##F##_CBOOL},
_Static_assert((int)C_COUNT == (int)MK_C_COUNT, "the cast codes must be mk_ctype's");
static const mk_cast_fn cast_table[C_COUNT][C_COUNT] = {
    CAST_ENTRY(CF32) CAST_ENTRY(CF16) CAST_ENTRY(CBF16) CAST_ENTRY(CI32) CAST_ENTRY(CI64)
        CAST_ENTRY(CI8) CAST_ENTRY(CU8) CAST_ENTRY(CBOOL)};

/* ---- Softmax / LogSoftmax along a strided axis --------------------------------------------------
 * 16 adjacent lines at a time, one per lane: the maximum, then e^(x - max) summed in double (as
 * the reference does), then the division (Softmax) or x - (max + log(sum)) in double
 * (LogSoftmax). Softmax keeps the exponentials in y between the passes. */
#ifdef ANVIL_HAVE_SLEEF
static void k_softmax_cols(float *y, const float *x, size_t len, size_t inner, size_t cols,
                           bool logsm) {
    for (size_t c = 0; c < cols; c += VW) {
        const M m = c + VW <= cols ? (M)0xffff : tailmask(cols - c);
        const float *xc = x + c;
        float *yc = y + c;
        __m512 mx = mload(xc, m, 0.0f);
        for (size_t j = 1; j < len; j++) mx = _mm512_max_ps(mload(xc + j * inner, m, 0.0f), mx);
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        for (size_t j = 0; j < len; j++) {
            __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(mload(xc + j * inner, m, 0.0f), mx));
            if (!logsm) _mm512_mask_storeu_ps(yc + j * inner, m, e);
            s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
        }
        if (logsm) {
            __m512d l0 = _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(mx)),
                                       Sleef_logd8_u10avx512f(s0));
            __m512d l1 = _mm512_add_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(mx, 1)),
                                       Sleef_logd8_u10avx512f(s1));
            for (size_t j = 0; j < len; j++) {
                __m512 v = mload(xc + j * inner, m, 0.0f);
                __m256 r0 =
                    _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), l0));
                __m256 r1 = _mm512_cvtpd_ps(
                    _mm512_sub_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)), l1));
                _mm512_mask_storeu_ps(yc + j * inner, m,
                                      _mm512_insertf32x8(_mm512_castps256_ps512(r0), r1, 1));
            }
        } else {
            for (size_t j = 0; j < len; j++) {
                __m512 e = mload(yc + j * inner, m, 0.0f);
                __m256 r0 =
                    _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(e)), s0));
                __m256 r1 = _mm512_cvtpd_ps(
                    _mm512_div_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)), s1));
                _mm512_mask_storeu_ps(yc + j * inner, m,
                                      _mm512_insertf32x8(_mm512_castps256_ps512(r0), r1, 1));
            }
        }
    }
}
#endif

const mk_isa math_isa_avx512 = {
    .unary = k_unary,
    .binary = k_binary,
    .compare = k_compare,
    .logic = k_logic,
    .where = k_where,
    .cast = cast_table,
#ifdef ANVIL_HAVE_SLEEF
    .softmax_cols = k_softmax_cols,
#endif
};
