/* The reduce family's kernel tables and the run-time half of its Reduce* / ArgMax / ArgMin /
 * GlobalMaxPool variants (reduce.h describes the family): IR-free, so that `anvil compile` can copy
 * this header, reduce_run.c and the ISA files into the libraries it emits (against
 * src/emit/shim) and bake the same red_state into their code. Pointers are borrowed for
 * the call. */
#ifndef ANVIL_KERNELS_REDUCE_RUN_H
#define ANVIL_KERNELS_REDUCE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What one reduction pass computes per output element over its `len` inputs. */
typedef enum red_op {
    RED_OP_SUM,   /* sum x */
    RED_OP_ASUM,  /* sum |x| */
    RED_OP_SQSUM, /* sum x*x */
    RED_OP_MAX,   /* max, NaN if any input is NaN; -inf for none */
    RED_OP_MIN,   /* min, NaN if any input is NaN; +inf for none */
    RED_OP_PROD,  /* product; 1 for none */
    RED_OP_LSE,   /* log(sum(exp(x))), -inf for none; only with ANVIL_HAVE_SLEEF */
} red_op;

typedef struct red_isa {
    /* y[r] = op over the contiguous row x[r * len, r * len + len), r < rows. */
    void (*rows)(red_op op, const float *x, size_t len, size_t rows, float *y);
    /* y[c] = op over x[l * inner + c] for l < len, c < ncols (a block of columns of one
     * [len, inner] slice; ncols <= inner). */
    void (*cols)(red_op op, const float *x, size_t len, size_t inner, size_t ncols, float *y);
    /* ArgMax (is_max) / ArgMin of each row (as cols: of each column) with the reference's
     * ordering: NaN ranks above every number, ties go to the first index, or to the last with
     * last. len >= 1; cols needs len <= 2^24 (indices travel in float lanes). */
    void (*arg_rows)(bool is_max, bool last, const float *x, size_t len, size_t rows, int64_t *y);
    void (*arg_cols)(bool is_max, bool last, const float *x, size_t len, size_t inner, size_t ncols,
                     int64_t *y);
    /* sum (x[i] - mean)^2, i < n. */
    float (*sqdev)(const float *x, size_t n, float mean);
    /* y[i] = (x[i] - mean) * a + b, i < n (y may be x). */
    void (*norm_apply)(float *y, const float *x, size_t n, float mean, float a, float b);
    /* y[i] = x[i] * a * s[i] (s NULL: x[i] * a), i < n (y may be x). */
    void (*scale)(float *y, const float *x, size_t n, float a, const float *s);
} red_isa;

extern const red_isa reduce_isa_avx512;
extern const red_isa reduce_isa_avx2;

/* anvil's ANVIL_MAX_RANK (reduce_variants.c checks that they agree). */
#define RED_MAX_RANK 8

/* One pass over an (outer, len, inner) view (reduce_variants.c's header). */
typedef struct red_pass {
    size_t outer, len, inner;
} red_pass;

typedef enum red_fin { FIN_NONE, FIN_MEAN, FIN_SQRT, FIN_LOG } red_fin;

typedef struct red_state {
    const red_isa *isa;
    int npass;
    red_pass pass[RED_MAX_RANK];
    red_op first, rest; /* the op of pass 0 and of the passes combining partial results */
    red_fin fin;
    size_t count;      /* input elements per output element */
    size_t buf[2];     /* floats of the two workspace buffers the passes alternate between */
    int threads;       /* the session's: rows split into this many parts (see run_pass) */
    size_t parts;      /* floats of the workspace for those parts' partial results */
    bool is_max, last; /* ArgMax / ArgMin */
    bool arg;          /* ArgMax / ArgMin: y is int64 indices */
} red_state;

typedef struct op_ctx op_ctx;

/* Computes the node: y (ny elements: floats, or int64 for s->arg) from x. ws: the workspace
 * (buf[0] + buf[1] + parts floats), NULL where that is 0. */
void reduce_exec(const red_state *s, const float *x, void *y, size_t ny, float *ws, op_ctx *ctx);

#endif
