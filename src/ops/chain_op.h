/* anvil.EltwiseChain's step ops and size limits (chain_common.h describes the node): apart from
 * chain_common.h, which needs the IR, so that the chain kernels (kernels/cpu/chain), which
 * `anvil compile` copies into the libraries it emits, can name them without anvil's headers. */
#ifndef ANVIL_OPS_CHAIN_OP_H
#define ANVIL_OPS_CHAIN_OP_H

typedef enum chain_op {
    CHAIN_ADD,
    CHAIN_SUB,
    CHAIN_MUL,
    CHAIN_DIV,
    CHAIN_MAX,
    CHAIN_MIN,
    CHAIN_CLIP,
    CHAIN_RELU,
    CHAIN_LEAKYRELU,
    CHAIN_SIGMOID,
    CHAIN_TANH,
    CHAIN_ERF,
    CHAIN_EXP,
    CHAIN_HARDSIGMOID,
    CHAIN_HARDSWISH,
    CHAIN_POW2,
    CHAIN_POW3,
    CHAIN_POWHALF,
    CHAIN_SQRT,
    CHAIN_NEG,
    CHAIN_ABS,
    CHAIN_OP_COUNT
} chain_op;

/* Longest chain a node may hold (the pass splits longer ones). */
#define CHAIN_MAX_STEPS 32
/* Most inputs a chain node may have (x and its side operands). */
#define CHAIN_MAX_INPUTS 16

#endif
