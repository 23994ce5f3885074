/* anvil.EltwiseChain, the fused chain of elementwise ops (src/ops/math/chain.c): its steps as the
 * op's reference kernel, the chain pass (passes/fuse_chain.c) and the chain kernels
 * (kernels/cpu/chain) all read them, and the broadcast pattern of its side inputs.
 *
 * The node: input 0 is x, the chain's input; inputs 1.. are side operands (constants in graphs
 * the pass writes), each broadcasting onto x's shape; output 0 has x's shape. Step s applies op
 * s to the running value v (x before the first step):
 *   binary ops (Add Sub Mul Div Max Min)  v = v op in[arg]  (swap: in[arg] op v); arg may be 0,
 *                                         the chain's own input x (HardSwish's final Mul);
 *   Clip (a = lo, b = hi)  LeakyRelu (a = alpha)  HardSigmoid (a = alpha, b = beta)
 *   Relu Sigmoid Tanh Erf Exp HardSwish Sqrt Neg Abs, Pow2 Pow3 PowHalf (Pow by 2, 3, 0.5)
 * with the arithmetic of the single ops' reference kernels (float32 throughout).
 *
 * Attributes (written by the pass, parsed by check into chain_params):
 *   ops    STRINGS, one op name per step (chain_op_names)
 *   args   INTS, per step: the input index of the other operand of a binary op, -1 otherwise
 *   swap   INTS, per step: 1 when that operand is the left one (Sub and Div only)
 *   params FLOATS, two per step: a, b as above (0 where unused) */
#ifndef ANVIL_OPS_CHAIN_COMMON_H
#define ANVIL_OPS_CHAIN_COMMON_H

#include "ops/chain_op.h"
#include "ops/ops.h"

#include <stdbool.h>
#include <stdint.h>

/* The names the "ops" attribute uses, indexed by chain_op (static). */
extern const char *const chain_op_names[CHAIN_OP_COUNT];

static inline bool chain_op_binary(chain_op op) {
    return op <= CHAIN_MIN;
}

/* Whether the op needs a vector exp/tanh/erf (SLEEF) in the kernels. */
static inline bool chain_op_transcendental(chain_op op) {
    return op == CHAIN_SIGMOID || op == CHAIN_TANH || op == CHAIN_ERF || op == CHAIN_EXP;
}

typedef struct chain_step {
    chain_op op;
    int arg;   /* binary ops: input index of the other operand (0: x); -1 otherwise */
    bool swap; /* binary ops: the other operand is the left one */
    float a, b;
} chain_step;

/* n->params of a chain node (check): arena-owned. */
typedef struct chain_params {
    int n_steps;
    chain_step steps[CHAIN_MAX_STEPS];
} chain_params;

/* Where side operand `o` (a shape that broadcasts onto out) varies over out: its dims that are
 * not 1 must be one contiguous block [*first, *last) of out's dims (right-aligned), each equal
 * to out's (known) dim there. A scalar-like operand has *first == *last. Then the operand's
 * element for out's flat index i is (i / inner) % C, with C = prod(out[first:last]) and
 * inner = prod(out[last:]). False for any other pattern (e.g. [C, 1, W] on [N, C, H, W]). */
static inline bool chain_operand_block(const ir_shape *o, const ir_shape *out, int *first,
                                       int *last) {
    if (o->rank < 0 || out->rank < 0 || o->rank > out->rank) return false;
    const int pad = out->rank - o->rank;
    int lo = -1, hi = -1;
    for (int d = 0; d < o->rank; d++) {
        if (o->d[d] == 1) continue;
        if (o->d[d] < 0 || o->d[d] != out->d[pad + d]) return false;
        if (lo < 0)
            lo = pad + d;
        else if (hi != pad + d)
            return false; /* a 1 between two varying dims */
        hi = pad + d + 1;
    }
    *first = lo < 0 ? out->rank : lo;
    *last = lo < 0 ? out->rank : hi;
    return true;
}

#endif
