/* Private to src/kernels/cpu/eltwise: the per-ISA kernel table the eltwise variants call into.
 *
 * eltwise_variants.c (baseline code) decides what a node means (attributes, broadcasting,
 * geometry), splits the work across threads and calls one of these tables, each compiled in its
 * own ISA file (eltwise_avx512.c, eltwise_avx2.c, both instantiating eltwise_simd.h). Nothing in
 * a table may be called unless the CPU has that ISA (the variant's `needs` matched).
 *
 * All pointers are borrowed for the call. Output rows may be the same memory as the input rows
 * (in-place): every kernel loads a vector before it stores the same positions. */
#ifndef ANVIL_KERNELS_ELTWISE_H
#define ANVIL_KERNELS_ELTWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Unary activations. The ones marked (S) need SLEEF and exist only with ANVIL_HAVE_SLEEF. */
typedef enum elt_unary_kind {
    ELT_RELU,
    ELT_LEAKYRELU,   /* a = alpha */
    ELT_CLIP,        /* a = lower bound (-inf: none), b = upper bound (+inf: none) */
    ELT_HARDSIGMOID, /* a = alpha, b = beta */
    ELT_HARDSWISH,
    ELT_SIGMOID,   /* (S) */
    ELT_TANH,      /* (S) */
    ELT_ERF,       /* (S) */
    ELT_EXP,       /* (S) */
    ELT_GELU,      /* (S) exact, with erf */
    ELT_GELU_TANH, /* (S) the tanh approximation */
    ELT_SOFTPLUS,  /* (S) */
    ELT_SILU,      /* (S) x * sigmoid(x): a fused SiLU epilogue (no op of its own) */
} elt_unary_kind;

typedef enum elt_binary_kind { ELT_ADD, ELT_SUB, ELT_MUL, ELT_DIV } elt_binary_kind;

typedef struct elt_pool2d {
    int64_t ih, iw, oh, ow;
    int64_t kh, kw, sh, sw;
    int64_t pt, pl; /* padding before the first row / column */
    /* Horizontal window at output column ox covers padded-row positions
     * [ox * sw, ox * sw + kw) of a row buffer holding pl neutral values, the iw inputs, then
     * neutral values up to row_len. */
    int64_t row_len;
} elt_pool2d;

typedef struct elt_isa {
    /* out[i] = f(in[i]), i < n. */
    void (*unary)(elt_unary_kind k, float a, float b, float *out, const float *in, size_t n);
    /* out[i] = a[i * sa] op b[i * sb], sa and sb 0 or 1. */
    void (*binary)(elt_binary_kind k, float *out, const float *a, const float *b, int sa, int sb,
                   size_t n);
    /* Softmax (logsm = false) or LogSoftmax of one contiguous row of len >= 1. */
    void (*softmax_row)(float *y, const float *x, size_t len, bool logsm);
    /* LayerNormalization of one row: y = (x - mean) / sqrt(var + eps) * scale + bias. scale and
     * bias have len elements; bias may be NULL. */
    void (*layernorm_row)(float *y, const float *x, size_t len, const float *scale,
                          const float *bias, float eps);
    /* y[i] = x[i] * a + b, i < n (BatchNormalization's folded per-channel affine). */
    void (*affine)(float *y, const float *x, size_t n, float a, float b);
    /* Sum of x[0..n). */
    float (*sum)(const float *x, size_t n);
    /* One 2-D pooling plane. rowbuf: row_len (+ one vector) floats of scratch. avg: AveragePool
     * dividing by the count of taps in cnt_h[oy] * cnt_w[ox]; else MaxPool. */
    void (*pool2d)(const elt_pool2d *g, bool avg, const float *cnt_h, const float *cnt_w, float *y,
                   const float *x, float *rowbuf);
    /* Transposes a rows x cols block of 4-byte elements: dst[c * lds + r] = src[r * ldx + c]. */
    void (*transpose4)(uint32_t *dst, const uint32_t *src, size_t rows, size_t cols, size_t ldx,
                       size_t lds);
} elt_isa;

extern const elt_isa elt_isa_avx512;
extern const elt_isa elt_isa_avx2;

/* This CPU's best table (it needs AVX2 at least), or NULL: for other kernel families that call
 * into the tables (fused activations in the GEMM epilogue). Static data. */
const elt_isa *elt_isa_for_cpu(void);

/* transpose4 on elt_isa_for_cpu's table, or a scalar loop where there is none: for other kernel
 * families that move a matrix between layouts (the conv family's NCHW <-> NHWC). */
void elt_transpose_f32(float *dst, const float *src, size_t rows, size_t cols, size_t ldx,
                       size_t lds);

#endif
