/* The activations a graph pass can fold into the node that produces their input. A header of its
 * own, with no includes, because `anvil compile` ships it verbatim beside the kernels it emits
 * (src/runtime/emit.c): the emitted GEMM epilogues name these values. */
#ifndef ANVIL_IR_ACT_H
#define ANVIL_IR_ACT_H

/* The GEMM epilogue (kernels/cpu/gemm/gemm.h) applies them as they are. */
typedef enum ir_act {
    IR_ACT_NONE = 0,
    IR_ACT_RELU,
    IR_ACT_CLIP,       /* min(max(x, lo), hi) */
    IR_ACT_LEAKY_RELU, /* x < 0 ? alpha*x : x */
    IR_ACT_SIGMOID,
    IR_ACT_TANH,
    IR_ACT_GELU_ERF,
    IR_ACT_GELU_TANH,
    IR_ACT_HARD_SIGMOID, /* max(0, min(1, alpha*x + beta)) */
    IR_ACT_HARD_SWISH,
    IR_ACT_SILU, /* x * sigmoid(x): Sigmoid and Mul written out (EfficientNet, YOLOv8) */
} ir_act;

#endif
