/* Private to src/kernels/cpu/math: the kernel table the math variants call into.
 *
 * math_variants.c (baseline code) decides what a node means (a constant exponent, a folded
 * broadcast, a pair of dtypes, strided lines), splits the work across threads and calls the table
 * of its variant's ISA: mk_isa_avx512 (math_avx512.c) or mk_isa_avx2 (math_avx2.c). Nothing in a
 * table may be called unless the CPU has that ISA (the variants' `needs` matched).
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
    /* The kernel converting `from` to `to` exactly as the reference Cast does, for the dtypes
     * FLOAT, FLOAT16, BFLOAT16, INT32, INT64, INT8, UINT8 and BOOL; NULL for other pairs.
     * NULL itself in mk_isa_avx2 (no Cast kernels there). */
    mk_cast_fn (*cast)(anvil_dtype from, anvil_dtype to);
    /* Softmax (logsm false) or LogSoftmax along lines of len >= 1 elements `inner` apart, for the
     * cols adjacent lines that start at x[0 .. cols) (and y[0 .. cols)). NULL without SLEEF. */
    void (*softmax_cols)(float *y, const float *x, size_t len, size_t inner, size_t cols,
                         bool logsm);
} mk_isa;

extern const mk_isa mk_isa_avx512;
extern const mk_isa mk_isa_avx2;

#endif
