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

/* Unary activations. The ones marked (S) need SLEEF and exist only with ANVIL_HAVE_SLEEF; the
 * others (sigmoid, erf and gelu through f_exp_clamped included) always. */
typedef enum elt_unary_kind {
    ELT_RELU,
    ELT_LEAKYRELU,   /* a = alpha */
    ELT_CLIP,        /* a = lower bound (-inf: none), b = upper bound (+inf: none) */
    ELT_HARDSIGMOID, /* a = alpha, b = beta */
    ELT_HARDSWISH,
    ELT_SIGMOID,
    ELT_TANH, /* (S) */
    ELT_ERF,
    ELT_EXP,       /* (S) */
    ELT_GELU,      /* exact, with erf */
    ELT_GELU_TANH, /* (S) the tanh approximation */
    ELT_SOFTPLUS,  /* (S) */
    ELT_SILU,      /* x * sigmoid(x): a fused SiLU epilogue (no op of its own) */
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
    /* The same, each result rounded to bf16 as the bf16 GEMM tiles round (vcvtneps2bf16: to
     * nearest even, NaN quieted, denormals flushed to zero); NULL where the table has none. */
    void (*binary16)(elt_binary_kind k, uint16_t *out, const float *a, const float *b, int sa,
                     int sb, size_t n);
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

/* ---- a planned node and its run (eltwise_run.c) ----------------------------------------------
 * What eltwise_variants.c's prepare decides for a node, as plain data, and the run over it: the
 * runtime's variants and the libraries `anvil compile` emits (which copy eltwise_run.c and the
 * ISA files, and fill an elt_state with the same values) both compute through elt_run, so the two
 * cannot differ. Uses only what src/emit/shim offers (op_ctx, op_parallel_for). */

typedef struct op_ctx op_ctx;

/* The ops as the family groups them: each kind has one supports, prepare and run path. */
typedef enum elt_kind {
    ELT_K_UNARY,
    ELT_K_BINARY,
    ELT_K_SOFTMAX,
    ELT_K_LAYERNORM,
    ELT_K_BATCHNORM,
    ELT_K_POOL,
    ELT_K_GAP,
    ELT_K_TRANSPOSE
} elt_kind;

/* Transpose's canonical forms: identity, [b][t0][t1] -> [b][t1][t0], the same above a
 * contiguous inner block of tin elements. */
enum { ELT_TR_COPY, ELT_TR_SWAP, ELT_TR_BLOCKS };

/* Dims of a folded binary broadcast (anvil's ANVIL_MAX_RANK; the fold keeps at most 3). */
#define ELT_MAX_RANK 8

typedef struct elt_state {
    const elt_isa *isa;
    elt_kind kind;
    int threads;
    /* unary */
    elt_unary_kind uk;
    float a, b;
    /* binary: the output folded to `rank` dims, each operand's element strides (0: broadcast) */
    elt_binary_kind bk;
    int rank;
    int64_t dims[ELT_MAX_RANK], sa[ELT_MAX_RANK], sb[ELT_MAX_RANK];
    /* softmax / layernorm: contiguous rows */
    bool logsm;
    size_t rows, len;
    float eps;
    /* batchnorm: folded per-channel multiplier then offset (2 * C), NULL: fold at run time */
    float *ab;
    float bn_eps;
    int64_t channels, plane;
    /* pooling */
    bool avg; /* AveragePool (else MaxPool) */
    elt_pool2d pool;
    float *cnt_h, *cnt_w; /* per output row / column tap counts (AveragePool) */
    size_t row_stride;    /* floats of workspace per thread */
    /* transpose: canonical form */
    int tform;
    int64_t tb, t0, t1, tin; /* batch, the two swapped dims, contiguous inner block */
} elt_state;

/* One run's tensors and run-time values. */
typedef struct elt_io {
    const float *x; /* input 0 */
    float *y;       /* output 0 */
    /* the other inputs: binary B; layernorm scale, bias (NULL: none); batchnorm scale, B, mean,
     * var (read only when s->ab is NULL) */
    const float *in[4];
    float a, b;              /* unary: the op's parameters (Clip's bounds may be inputs) */
    size_t numel, out_numel; /* elements of x and y */
    /* binary only: y stored in bf16 in place of y (NULL: y), through the table's binary16
     * (the runtime's placement of activations; emitted libraries leave it NULL) */
    uint16_t *y16;
    int64_t d0, d1; /* x's first two dims (batch, channels) where its rank >= 2 */
    void *ws;       /* the workspace (workspace_size bytes, 64-byte aligned) */
} elt_io;

/* Computes the node s describes. */
void elt_run(const elt_state *s, const elt_io *io, op_ctx *ctx);

/* BatchNormalization's folding: a = scale / sqrt(var + eps), b = B - mean * a, in double as the
 * reference folds, into ab[0..c) and ab[c..2c). */
void elt_batchnorm_fold(float *ab, int64_t c, const float *scale, const float *bias,
                        const float *mean, const float *var, float eps);

/* This CPU's best table (it needs AVX2 at least), or NULL: for other kernel families that call
 * into the tables (fused activations in the GEMM epilogue). Static data. */
const elt_isa *elt_isa_for_cpu(void);

/* transpose4 on elt_isa_for_cpu's table, or a scalar loop where there is none: for other kernel
 * families that move a matrix between layouts (the conv family's NCHW <-> NHWC). */
void elt_transpose_f32(float *dst, const float *src, size_t rows, size_t cols, size_t ldx,
                       size_t lds);

#endif
