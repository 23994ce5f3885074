/* Private to src/kernels/cpu/chain: a chain node's steps as the ISA kernels run them, and the
 * per-ISA tables that run them.
 *
 * chain_variants.c (baseline code) turns a node's chain_params into a chain_kprog once per plan,
 * cuts the output into spans over which every side operand is either one value or a contiguous
 * row, splits the spans across threads and calls a table's span kernel. The tables are compiled
 * in chain_avx512.c and chain_avx2.c from the one generator chain_simd.h; nothing in a table may
 * be called unless the CPU has that ISA (the variant's `needs` matched).
 *
 * All pointers are borrowed for the call. y may be the same memory as x (in place): every
 * kernel loads a vector of x before it stores the same positions. */
#ifndef ANVIL_KERNELS_CHAIN_H
#define ANVIL_KERNELS_CHAIN_H

#include "ops/chain_op.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel's ops: chain_op, and the swapped Sub and Div (Max and Min are symmetric). */
enum { CHAIN_K_RSUB = CHAIN_OP_COUNT, CHAIN_K_RDIV };

/* Where a step's other operand comes from during a span. */
typedef enum chain_src {
    CHAIN_SRC_NONE,  /* unary step */
    CHAIN_SRC_X,     /* the chain's input at the same position */
    CHAIN_SRC_BCAST, /* one value for the whole span: *opnd[k] */
    CHAIN_SRC_ROW,   /* a contiguous row: opnd[k][i] for the span's i-th element */
} chain_src;

typedef struct chain_kstep {
    uint8_t op;  /* chain_op or CHAIN_K_* */
    uint8_t src; /* chain_src */
    uint8_t k;   /* the node input of the operand (BCAST, ROW) */
    float a, b;  /* the step's parameters (chain_step) */
} chain_kstep;

typedef struct chain_kprog {
    int n;
    chain_kstep st[CHAIN_MAX_STEPS];
} chain_kprog;

typedef struct chain_isa {
    /* y[i] = the chain applied to x[i], i < n; opnd[k] is the span's operand for node input k
     * (see chain_src; entries no step reads are not touched). */
    void (*span)(const chain_kprog *p, float *y, const float *x, size_t n,
                 const float *const *opnd);
} chain_isa;

extern const chain_isa chain_isa_avx512;
extern const chain_isa chain_isa_avx2;

/* ---- a planned node and its run (chain_run.c) -------------------------------------------------
 * What chain_variants.c's prepare decides for a node, as plain data, and the run over it: the
 * runtime's variants and the libraries `anvil compile` emits (which copy chain_run.c and the ISA
 * files and fill a chain_state with the same values) both compute through chain_exec. Uses only
 * what src/emit/shim offers. */

typedef struct op_ctx op_ctx;

/* How a side operand varies over the output. */
typedef enum chain_mode {
    CHAIN_MODE_UNUSED,
    CHAIN_MODE_SCALAR, /* one value */
    CHAIN_MODE_BLOCK,  /* one value per run of `inner` >= CHAIN_SPAN_MIN elements */
    CHAIN_MODE_ROW,    /* inner == 1: a row of c >= CHAIN_SPAN_MIN elements, repeated */
    CHAIN_MODE_EXPAND, /* anything else: (i / inner) % c, expanded per span */
} chain_mode;

/* An operand whose value or row changes more often than every this many elements is expanded
 * into a buffer of up to CHAIN_EXPAND elements per span instead of cutting tiny spans. */
#define CHAIN_SPAN_MIN 64
#define CHAIN_EXPAND 512

typedef struct chain_state {
    const chain_isa *isa;
    chain_kprog prog;
    int n_in;
    chain_mode mode[CHAIN_MAX_INPUTS];
    size_t c[CHAIN_MAX_INPUTS], inner[CHAIN_MAX_INPUTS];
    bool expand; /* some operand is CHAIN_MODE_EXPAND */
} chain_state;

/* Computes the n output elements y from x and the side operands data[k] (k in [1, s->n_in);
 * entries whose mode is CHAIN_MODE_UNUSED are not read). */
void chain_exec(const chain_state *s, float *y, const float *x, size_t n, const float *const *data,
                op_ctx *ctx);

#endif
