/* Private to src/kernels/cpu/math: the kernel table the math variants call into.
 *
 * math_variants.c (baseline code) decides what a node means (a constant exponent, a folded
 * broadcast, a pair of dtypes, strided lines), splits the work across threads and calls the table
 * of its variant's ISA: math_isa_avx512 (math_avx512.c) or math_isa_avx2 (math_avx2.c). Nothing in
 * a table may be called unless the CPU has that ISA (the variants' `needs` matched).
 *
 * All pointers are borrowed for the call. Strides named sa, sb, ... are 0 (the operand is one
 * element repeated along the row) or 1 (contiguous). An output row may be the same memory as a
 * contiguous input row: every kernel loads a vector before it stores the same positions. */
#ifndef ANVIL_KERNELS_MATHK_H
#define ANVIL_KERNELS_MATHK_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* fp32 -> fp32 elementwise functions. (S): needs SLEEF, exists only with ANVIL_HAVE_SLEEF. */
typedef enum mk_unary {
    MK_COPY,
    MK_FILL, /* out = p->a */
    MK_SQRT,
    MK_POW_HALF,  /* pow(x, 0.5): sqrt, with pow's +0 for -0 and +inf for -inf */
    MK_POW_MHALF, /* pow(x, -0.5) */
    MK_POWI,      /* pow(x, p->n), 2 <= |n| <= MK_POWI_MAX or n == -1, by multiplications */
    MK_NEG,
    MK_ABS,
    MK_RECIP,
    MK_FLOOR,
    MK_CEIL,
    MK_ROUND, /* half to even */
    MK_SIGN,
    MK_SOFTSIGN,
    MK_THRELU, /* p->a = alpha */
    MK_DIVC,   /* out = x / p->a (Mean's last step) */
    MK_POWC,   /* (S) pow(x, p->a) */
    MK_LOG,    /* (S) */
    MK_SIN,    /* (S) */
    MK_COS,    /* (S) */
    MK_TAN,    /* (S) */
    MK_ASIN,   /* (S) */
    MK_ACOS,   /* (S) */
    MK_ATAN,   /* (S) */
    MK_SINH,   /* (S) */
    MK_COSH,   /* (S) */
    MK_ASINH,  /* (S) */
    MK_ACOSH,  /* (S) */
    MK_ATANH,  /* (S) */
    MK_ELU,    /* (S) p->a = alpha */
    MK_SELU,   /* (S) p->a = alpha, p->b = gamma */
    MK_CELU,   /* (S) p->a = alpha (nonzero) */
    MK_MISH,   /* (S) */
    MK_SWISH,  /* (S) p->a = alpha */
} mk_unary;

/* Largest |exponent| that MK_POWI computes by repeated multiplication (error grows with it). */
#define MK_POWI_MAX 16

typedef struct mk_uparam {
    float a, b;
    int n;
} mk_uparam;

/* Two-operand functions: fp32 x fp32 -> fp32 (ADD .. POW), -> BOOL (EQ .. GE), and BOOL x BOOL ->
 * BOOL (AND .. XOR; NOT reads only a). */
typedef enum mk_binary {
    MK_ADD,
    MK_MAX, /* NaN in either operand gives NaN */
    MK_MIN,
    MK_PRELU, /* a < 0 ? b * a : a */
    MK_POW,   /* (S) */
    MK_EQ,
    MK_LT,
    MK_LE,
    MK_GT,
    MK_GE,
    MK_AND,
    MK_OR,
    MK_XOR,
    MK_NOT,
} mk_binary;

/* Converts n contiguous elements between two dtypes (see mk_isa.cast). */
typedef void (*mk_cast_fn)(void *out, const void *in, size_t n);

/* The dtypes Cast converts between, as the cast tables index them (math_variants.c maps
 * anvil_dtype to them, so that the kernels need no anvil header). */
typedef enum mk_ctype {
    MK_CF32,
    MK_CF16,
    MK_CBF16,
    MK_CI32,
    MK_CI64,
    MK_CI8,
    MK_CU8,
    MK_CBOOL,
    MK_C_COUNT
} mk_ctype;

typedef struct mk_isa {
    /* out[i] = f(in[i]), i < n. */
    void (*unary)(mk_unary k, const mk_uparam *p, float *out, const float *in, size_t n);
    /* out[i] = a[i * sa] op b[i * sb], k in MK_ADD .. MK_POW. */
    void (*binary)(mk_binary k, float *out, const float *a, const float *b, int sa, int sb,
                   size_t n);
    /* out[i] = a[i * sa] op b[i * sb] as BOOL (0 or 1), k in MK_EQ .. MK_GE. */
    void (*compare)(mk_binary k, uint8_t *out, const float *a, const float *b, int sa, int sb,
                    size_t n);
    /* BOOL logic, k in MK_AND .. MK_NOT; any nonzero byte is true; b unused for NOT. */
    void (*logic)(mk_binary k, uint8_t *out, const uint8_t *a, const uint8_t *b, int sa, int sb,
                  size_t n);
    /* out[i] = c[i * sc] ? x[i * sx] : y[i * sy] for elements of es bytes (1, 2, 4 or 8). */
    void (*where)(size_t es, void *out, const uint8_t *c, const void *x, const void *y, int sc,
                  int sx, int sy, size_t n);
    /* cast[from][to]: the kernel converting `from` to `to` exactly as the reference Cast does
     * (mk_ctype: FLOAT, FLOAT16, BFLOAT16, INT32, INT64, INT8, UINT8 and BOOL). NULL in
     * math_isa_avx2 (no Cast kernels there). */
    const mk_cast_fn (*cast)[MK_C_COUNT];
    /* Softmax (logsm false) or LogSoftmax along lines of len >= 1 elements `inner` apart, for the
     * cols adjacent lines that start at x[0 .. cols) (and y[0 .. cols)). NULL without SLEEF. */
    void (*softmax_cols)(float *y, const float *x, size_t len, size_t inner, size_t cols,
                         bool logsm);
} mk_isa;

extern const mk_isa math_isa_avx512;
extern const mk_isa math_isa_avx2;

/* ---- a planned node (math_variants.c plans, math_run.c runs) --------------------------------
 * IR-free: `anvil compile` copies mathk.h, math_run.c and the ISA files into the libraries it
 * emits and bakes the same mk_state into their code, so they compute what anvil computes. */

/* anvil's ANVIL_MAX_RANK (math_variants.c checks that they agree). */
#define MK_MAX_RANK 8
/* Most operands of a folded broadcast (Where's 3, variadic ops' inputs). */
#define MK_MAX_OPS 8

/* The output walked as `rank` dims (after folding), each operand with its element strides (0:
 * repeated along that dim). The innermost strides are 0 or 1. */
typedef struct mk_fold {
    int rank, nops;
    int64_t dims[MK_MAX_RANK];
    int64_t st[MK_MAX_OPS][MK_MAX_RANK];
} mk_fold;

typedef enum mk_kind {
    K_UNARY,    /* also Pow with a constant exponent */
    K_BINARY,   /* Pow with a tensor exponent, PRelu */
    K_COMPARE,  /* fp32 -> BOOL */
    K_LOGIC,    /* And, Or, Xor (broadcast), Not (flat) */
    K_VARIADIC, /* Max, Min, Sum, Mean */
    K_WHERE,
    K_CAST,
    K_SOFTMAX,
} mk_kind;

typedef struct elt_isa elt_isa;

typedef struct mk_state {
    const mk_isa *isa;  /* the variant's kernels */
    const elt_isa *elt; /* its ISA's eltwise kernels (softmax rows) */
    mk_kind kind;
    mk_unary uk;
    mk_uparam up;
    mk_binary bk;
    mk_fold fold;
    size_t es;       /* Where: element bytes */
    mk_cast_fn cast; /* Cast: isa->cast[cast_from][cast_to] */
    int cast_from, cast_to;
    size_t es_in, es_out;
    size_t outer, len, inner; /* softmax lines */
    bool logsm;
} mk_state;

typedef struct op_ctx op_ctx;

/* Computes the node: out (n elements) from in[0 .. n_in) (NULL for an omitted input). */
void math_exec(const mk_state *s, void *out, const void *const *in, int n_in, size_t n,
               op_ctx *ctx);

#endif
