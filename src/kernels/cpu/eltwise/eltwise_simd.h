/* The eltwise kernels written once over a small vector vocabulary, instantiated by
 * eltwise_avx512.c (16 lanes, mask registers) and eltwise_avx2.c (8 lanes, vector masks). Include
 * only from those files, after defining (V, the arithmetic V_SET1 .. V_GE and the SLEEF functions
 * come from eltwise_vec_<isa>.h, which the GEMM ISA files share):
 *
 *   V, VW, M                 vector type, lanes, tail-mask type
 *   V_LOADU(p) V_STOREU(p,v) unaligned full loads/stores
 *   V_TAILMASK(n)            mask of the first n (< VW) lanes
 *   V_MLOAD(p,m,fill)        masked load, `fill` in the other lanes (never touches them)
 *   V_MSTORE(p,m,v)          masked store
 *   V_GATHER(base,idx,m,fill) masked gather of base[idx[lane]] (idx: lane * stride)
 *   V_IDX(s)                 index vector {0, s, 2s, ...}
 *   V_SET1 V_ADD V_SUB V_MUL V_DIV V_FMA(a,b,c)=a*b+c V_MAX V_MIN (SSE semantics: NaN in either
 *   operand gives the second operand)
 *   V_LT(a,b,x,y) V_GE(a,b,x,y)  lanewise a < b (a >= b) ? x : y
 *   V_HSUM(v) V_HMAX(v)      horizontal reductions
 *   V_EXP V_TANH V_LOG1P     SLEEF u10 functions (only with ANVIL_HAVE_SLEEF)
 *   ELT_ISA_NAME             name of the elt_isa table to define
 *   V_STORE_BF16(p,v) V_MSTORE_BF16(p,m,v)  optional: v rounded to bf16 as the bf16 tiles round
 *                            in a function marked ELT_BF16_TARGET (elt_isa.binary16 exists only
 *                            where they are defined)
 *
 * Tails use masked loads and stores, so no kernel reads or writes past its row. */
#include "eltwise.h"

#include <immintrin.h>
#include <math.h>

#include "eltwise_act.h"

#define UNARY_LOOP(EXPR)                                                                           \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + VW <= n; i += VW) {                                                             \
            V x = V_LOADU(in + i);                                                                 \
            V_STOREU(out + i, EXPR);                                                               \
        }                                                                                          \
        if (i < n) {                                                                               \
            M m = V_TAILMASK(n - i);                                                               \
            V x = V_MLOAD(in + i, m, V_ZERO());                                                    \
            V_MSTORE(out + i, m, EXPR);                                                            \
        }                                                                                          \
    } while (0)

static void k_unary(elt_unary_kind k, float a, float b, float *out, const float *in, size_t n) {
    const V va = V_SET1(a), vb = V_SET1(b);
    switch (k) {
    case ELT_RELU:
        UNARY_LOOP(f_relu(x));
        break;
    case ELT_LEAKYRELU:
        UNARY_LOOP(f_leaky(x, va));
        break;
    case ELT_CLIP:
        UNARY_LOOP(f_clip(x, va, vb));
        break;
    case ELT_HARDSIGMOID:
        UNARY_LOOP(f_hardsigmoid(x, va, vb));
        break;
    case ELT_HARDSWISH:
        UNARY_LOOP(f_hardswish(x));
        break;
    /* f_exp_clamped's: these compute without SLEEF too (emitted libraries do not link it) */
    case ELT_SIGMOID:
        UNARY_LOOP(f_sigmoid(x));
        break;
    case ELT_ERF:
        UNARY_LOOP(f_erf(x));
        break;
    case ELT_GELU:
        UNARY_LOOP(f_gelu(x));
        break;
    case ELT_SILU:
        UNARY_LOOP(f_silu(x));
        break;
#ifdef ANVIL_HAVE_SLEEF
    case ELT_TANH:
        UNARY_LOOP(V_TANH(x));
        break;
    case ELT_EXP:
        UNARY_LOOP(V_EXP(x));
        break;
    case ELT_GELU_TANH:
        UNARY_LOOP(f_gelu_tanh(x));
        break;
    case ELT_SOFTPLUS:
        UNARY_LOOP(f_softplus(x));
        break;
#endif
    default:
        break;
    }
}

/* ---- binary arithmetic ---------------------------------------------------------------------- */

/* One loop per (op, which operand is broadcast): the broadcast operand is loaded once. ST and
 * MST store a full and a masked vector of results. */
#define BINARY_LOOP(OPV, LA, LB, MLA, MLB, ST, MST)                                                \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + VW <= n; i += VW) ST(out + i, OPV(LA, LB));                                     \
        if (i < n) {                                                                               \
            M m = V_TAILMASK(n - i);                                                               \
            MST(out + i, m, OPV(MLA, MLB));                                                        \
        }                                                                                          \
    } while (0)

#define BINARY_CASES(OPV, ST, MST)                                                                 \
    if (sa && sb)                                                                                  \
        BINARY_LOOP(OPV, V_LOADU(a + i), V_LOADU(b + i), V_MLOAD(a + i, m, V_SET1(1.0f)),          \
                    V_MLOAD(b + i, m, V_SET1(1.0f)), ST, MST);                                     \
    else if (sa)                                                                                   \
        BINARY_LOOP(OPV, V_LOADU(a + i), vb, V_MLOAD(a + i, m, V_SET1(1.0f)), vb, ST, MST);        \
    else if (sb)                                                                                   \
        BINARY_LOOP(OPV, va, V_LOADU(b + i), va, V_MLOAD(b + i, m, V_SET1(1.0f)), ST, MST);        \
    else                                                                                           \
        BINARY_LOOP(OPV, va, vb, va, vb, ST, MST);

#define BINARY_SWITCH(ST, MST)                                                                     \
    do {                                                                                           \
        const V va = V_SET1(a[0]), vb = V_SET1(b[0]);                                              \
        switch (k) {                                                                               \
        case ELT_ADD:                                                                              \
            BINARY_CASES(V_ADD, ST, MST)                                                           \
            break;                                                                                 \
        case ELT_SUB:                                                                              \
            BINARY_CASES(V_SUB, ST, MST)                                                           \
            break;                                                                                 \
        case ELT_MUL:                                                                              \
            BINARY_CASES(V_MUL, ST, MST)                                                           \
            break;                                                                                 \
        case ELT_DIV:                                                                              \
            BINARY_CASES(V_DIV, ST, MST)                                                           \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

static void k_binary(elt_binary_kind k, float *out, const float *a, const float *b, int sa, int sb,
                     size_t n) {
    BINARY_SWITCH(V_STOREU, V_MSTORE);
}

#ifdef V_STORE_BF16
/* k_binary with each result rounded to bf16 as it is stored (elt_isa.binary16). */
ELT_BF16_TARGET static void k_binary16(elt_binary_kind k, uint16_t *out, const float *a,
                                       const float *b, int sa, int sb, size_t n) {
    BINARY_SWITCH(V_STORE_BF16, V_MSTORE_BF16);
}
#define ELT_BINARY16 k_binary16
#else
#define ELT_BINARY16 NULL
#endif

/* ---- reductions and rows -------------------------------------------------------------------- */

static float k_sum(const float *x, size_t n) {
    V acc0 = V_ZERO(), acc1 = V_ZERO();
    size_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        acc0 = V_ADD(acc0, V_LOADU(x + i));
        acc1 = V_ADD(acc1, V_LOADU(x + i + VW));
    }
    for (; i + VW <= n; i += VW) acc0 = V_ADD(acc0, V_LOADU(x + i));
    if (i < n) acc1 = V_ADD(acc1, V_MLOAD(x + i, V_TAILMASK(n - i), V_ZERO()));
    return V_HSUM(V_ADD(acc0, acc1));
}

/* out[i] = in[i] * a + b */
static void k_affine(float *out, const float *in, size_t n, float a, float b) {
    const V va = V_SET1(a), vb = V_SET1(b);
    UNARY_LOOP(V_FMA(x, va, vb));
}

/* Softmax needs only f_exp_clamped (no SLEEF). */
static float k_max(const float *x, size_t n) {
    V acc = V_SET1(-INFINITY);
    size_t i = 0;
    for (; i + VW <= n; i += VW) acc = V_MAX(V_LOADU(x + i), acc);
    if (i < n) acc = V_MAX(V_MLOAD(x + i, V_TAILMASK(n - i), V_SET1(-INFINITY)), acc);
    return V_HMAX(acc);
}

/* Subtracting the row maximum keeps exp from overflowing (softmax is invariant to it). */
static void k_softmax_row(float *y, const float *x, size_t len, bool logsm) {
    const V vm = V_SET1(k_max(x, len));
    V acc = V_ZERO();
    size_t i = 0;
    for (; i + VW <= len; i += VW) {
        V e = f_exp_clamped(V_SUB(V_LOADU(x + i), vm));
        if (!logsm) V_STOREU(y + i, e);
        acc = V_ADD(acc, e);
    }
    if (i < len) {
        M m = V_TAILMASK(len - i);
        /* -inf in the lanes past the row: their exp is 0 */
        V e = f_exp_clamped(V_SUB(V_MLOAD(x + i, m, V_SET1(-INFINITY)), vm));
        if (!logsm) V_MSTORE(y + i, m, e);
        acc = V_ADD(acc, e);
    }
    float sum = V_HSUM(acc);
    if (logsm)
        k_affine(y, x, len, 1.0f, -(float)((double)V_HMAX(vm) + log((double)sum)));
    else
        k_affine(y, y, len, 1.0f / sum, 0.0f);
}

/* Two passes (mean, then the mean square deviation): E[x^2] - E[x]^2 cancels badly. */
static void k_layernorm_row(float *y, const float *x, size_t len, const float *scale,
                            const float *bias, float eps) {
    float mean = k_sum(x, len) / (float)len;
    const V vmean = V_SET1(mean);
    V acc = V_ZERO();
    size_t i = 0;
    for (; i + VW <= len; i += VW) {
        V d = V_SUB(V_LOADU(x + i), vmean);
        acc = V_FMA(d, d, acc);
    }
    if (i < len) {
        V d = V_SUB(V_MLOAD(x + i, V_TAILMASK(len - i), vmean), vmean);
        acc = V_FMA(d, d, acc);
    }
    double var = (double)V_HSUM(acc) / (double)len;
    const V inv = V_SET1((float)(1.0 / sqrt(var + (double)eps)));
    for (i = 0; i + VW <= len; i += VW) {
        V v = V_MUL(V_MUL(V_SUB(V_LOADU(x + i), vmean), inv), V_LOADU(scale + i));
        if (bias) v = V_ADD(v, V_LOADU(bias + i));
        V_STOREU(y + i, v);
    }
    if (i < len) {
        M m = V_TAILMASK(len - i);
        V v = V_MUL(V_MUL(V_SUB(V_MLOAD(x + i, m, vmean), vmean), inv),
                    V_MLOAD(scale + i, m, V_ZERO()));
        if (bias) v = V_ADD(v, V_MLOAD(bias + i, m, V_ZERO()));
        V_MSTORE(y + i, m, v);
    }
}

/* ---- 2-D pooling ---------------------------------------------------------------------------
 * Separable: per output row, the kh input rows of its window are reduced vertically into a
 * padded row buffer (neutral values around the iw real ones), then each output column reduces
 * kw consecutive (sw == 1) or strided (gathered) buffer elements. */
static void k_pool2d(const elt_pool2d *g, bool avg, const float *cnt_h, const float *cnt_w,
                     float *y, const float *x, float *rowbuf) {
    const float neutral = avg ? 0.0f : -INFINITY;
    const V vn = V_SET1(neutral);
    for (int64_t p = 0; p < g->pl; p++) rowbuf[p] = neutral;
    for (int64_t p = g->pl + g->iw; p < g->row_len; p++) rowbuf[p] = neutral;
    float *row = rowbuf + g->pl;
    const size_t iw = (size_t)g->iw;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        int64_t y0 = oy * g->sh - g->pt, y1 = y0 + g->kh;
        if (y0 < 0) y0 = 0;
        if (y1 > g->ih) y1 = g->ih;
        size_t i = 0;
        for (; i < iw; i += VW) {
            size_t left = iw - i;
            M m = V_TAILMASK(left < VW ? left : 0);
            bool full = left >= VW;
            V acc = vn;
            for (int64_t iy = y0; iy < y1; iy++) {
                const float *src = x + iy * g->iw + (int64_t)i;
                V v = full ? V_LOADU(src) : V_MLOAD(src, m, vn);
                acc = avg ? V_ADD(acc, v) : V_MAX(v, acc);
            }
            if (full)
                V_STOREU(row + i, acc);
            else
                V_MSTORE(row + i, m, acc);
        }
        float *out = y + oy * g->ow;
        const size_t ow = (size_t)g->ow;
        const V idx = V_IDX((int)g->sw);
        const V vh = V_SET1(avg ? cnt_h[oy] : 1.0f);
        for (size_t ox = 0; ox < ow; ox += VW) {
            size_t left = ow - ox;
            bool full = left >= VW;
            M m = V_TAILMASK(full ? 0 : left);
            const float *base = rowbuf + (int64_t)ox * g->sw;
            /* stride 2: a window column's taps are the even lanes of two plain loads, where a
             * gather per tap made MaxPool 3x3/2 (SqueezeNet, ResNet's stem) 2.5-6x slower than
             * ONNX Runtime's */
            const bool pairs =
                g->sw == 2 && full && (int64_t)ox * 2 + g->kw - 1 + 2 * VW <= g->row_len;
            V acc = vn;
            for (int64_t kx = 0; kx < g->kw; kx++) {
                V v;
                if (g->sw == 1)
                    v = full ? V_LOADU(base + kx) : V_MLOAD(base + kx, m, vn);
                else if (pairs)
                    v = V_EVEN2(V_LOADU(base + kx), V_LOADU(base + kx + VW));
                else
                    v = V_GATHER(base + kx, idx, m, full, vn);
                acc = avg ? V_ADD(acc, v) : V_MAX(v, acc);
            }
            if (avg) {
                V c = full ? V_LOADU(cnt_w + ox) : V_MLOAD(cnt_w + ox, m, V_SET1(1.0f));
                acc = V_DIV(acc, V_MUL(vh, c));
            }
            if (full)
                V_STOREU(out + ox, acc);
            else
                V_MSTORE(out + ox, m, acc);
        }
    }
}

/* ---- transpose -------------------------------------------------------------------------------
 * 8x8 blocks transposed in registers (unpack, shuffle, cross-lane permute), scalar edges. */
static inline void tr8x8(uint32_t *dst, const uint32_t *src, size_t ldx, size_t lds) {
    __m256 r[8], t[8], u[8];
    for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps((const float *)(src + k * ldx));
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps((float *)(dst + k * lds), _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps((float *)(dst + (k + 4) * lds),
                         _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
}

#if VW == 16
/* Three rows (an RGB image turned channels-last): 16 columns at a time become 48 interleaved
 * values, each output vector taking rows 0 and 1 in one two-source permute and row 2 in a masked
 * one; every store is a whole vector. Scalar, this was 1.6 ns a value (SSDLite's 3x320x320
 * input: 0.19 ms). */
static size_t tr_rows3(uint32_t *dst, const uint32_t *src, size_t cols, size_t ldx) {
    __m512i ab[3], cx[3];
    __mmask16 third[3];
    for (int v = 0; v < 3; v++) {
        int32_t i_ab[16], i_c[16];
        unsigned m = 0;
        for (int i = 0; i < 16; i++) {
            const int g = 16 * v + i, col = g / 3, row = g % 3;
            i_ab[i] = row == 1 ? 16 + col : col;
            i_c[i] = col;
            if (row == 2) m |= 1u << i;
        }
        ab[v] = _mm512_loadu_si512(i_ab);
        cx[v] = _mm512_loadu_si512(i_c);
        third[v] = (__mmask16)m;
    }
    size_t c = 0;
    for (; c + 16 <= cols; c += 16) {
        const __m512 a = _mm512_loadu_ps((const float *)(src + c));
        const __m512 b = _mm512_loadu_ps((const float *)(src + ldx + c));
        const __m512 x = _mm512_loadu_ps((const float *)(src + 2 * ldx + c));
        for (int v = 0; v < 3; v++) {
            const __m512 t = _mm512_permutex2var_ps(a, ab[v], b);
            _mm512_storeu_ps((float *)(dst + 3 * c + 16 * v),
                             _mm512_mask_permutexvar_ps(t, third[v], cx[v], x));
        }
    }
    return c;
}
#endif

static void k_transpose4(uint32_t *dst, const uint32_t *src, size_t rows, size_t cols, size_t ldx,
                         size_t lds) {
    size_t r = 0;
#if VW == 16
    if (rows == 3 && lds == 3) {
        const size_t c0 = tr_rows3(dst, src, cols, ldx);
        for (size_t c = c0; c < cols; c++)
            for (size_t k = 0; k < 3; k++) dst[c * lds + k] = src[k * ldx + c];
        return;
    }
#endif
    /* 16 rows at a time: each column's 16 outputs are a whole 64-byte line, written at once.
     * With 8, a line is written in halves, one pass over all columns apart, and on a large
     * matrix (NCHW -> NHWC of 96 x 112 x 112) it left the cache in between: read twice for
     * ownership, written back twice. */
    for (; r + 16 <= rows; r += 16) {
        size_t c = 0;
        for (; c + 8 <= cols; c += 8) {
            tr8x8(dst + c * lds + r, src + r * ldx + c, ldx, lds);
            tr8x8(dst + c * lds + r + 8, src + (r + 8) * ldx + c, ldx, lds);
        }
        for (; c < cols; c++)
            for (size_t k = 0; k < 16; k++) dst[c * lds + r + k] = src[(r + k) * ldx + c];
    }
    for (; r + 8 <= rows; r += 8) {
        size_t c = 0;
        for (; c + 8 <= cols; c += 8) tr8x8(dst + c * lds + r, src + r * ldx + c, ldx, lds);
        for (; c < cols; c++)
            for (size_t k = 0; k < 8; k++) dst[c * lds + r + k] = src[(r + k) * ldx + c];
    }
    for (; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[c * lds + r] = src[r * ldx + c];
}

const elt_isa ELT_ISA_NAME = {
    .unary = k_unary,
    .binary = k_binary,
    .binary16 = ELT_BINARY16,
    .softmax_row = k_softmax_row,
    .layernorm_row = k_layernorm_row,
    .affine = k_affine,
    .sum = k_sum,
    .pool2d = k_pool2d,
    .transpose4 = k_transpose4,
};
