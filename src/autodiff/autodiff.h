/* autodiff: from a forward graph, a loss and a set of trainable initializers, the training graph:
 * the forward nodes, the loss, and the backward nodes that compute the loss's gradient with
 * respect to every trainable initializer, as one ir_graph that a session plans and runs like any
 * model (so the activations the backward pass reads are buffers of its arena, planned by
 * liveness over forward and backward alike).
 *
 * The backward nodes are ordinary ONNX ops where one computes a gradient (MatMul, Gemm,
 * ConvTranspose, ReduceSum, ...) and anvil's own where none does (anvil.ActGrad, ConvGradW,
 * MaxPoolGrad: ops/train/grad.c). One rule per op family (rules.c; the losses over class scores
 * in rules_loss.c) writes them; an op without a rule on the path from a trainable initializer to
 * the loss is refused, naming the node.
 *
 * Shapes are static: the graph is built for the concrete shapes of one batch (the training
 * session builds one per batch shape it meets). */
#ifndef ANVIL_AUTODIFF_H
#define ANVIL_AUTODIFF_H

#include "ir/ir.h"

typedef enum ad_loss {
    AD_LOSS_CROSS_ENTROPY, /* mean softmax cross-entropy of logits [N, C] and int64 labels [N] */
    AD_LOSS_MSE,           /* mean squared error of the output and float labels of its shape */
    AD_LOSS_NLL, /* mean negative log-likelihood of log-probabilities [N, C] and int64 labels [N] */
    AD_LOSS_DOT, /* sum(output * labels), float labels of the output's shape: the labels are the
                    output's gradient, the parameters' gradients their vector-Jacobian product */
} ad_loss;

typedef struct ad_spec {
    ad_loss loss;
    const char *output; /* the model output the loss reads (NULL: the first) */
    /* concrete shapes of the model's inputs, in g->inputs order (borrowed) */
    int n_inputs;
    const ir_shape *input_shapes;
    /* trainable initializers by name (borrowed); n_trainable 0: every float32 initializer of two
     * elements or more that the loss depends on (BatchNormalization's running statistics
     * excepted) */
    const char *const *trainable;
    int n_trainable;
    /* true: the evaluation graph, forward and loss only (BatchNormalization with its running
     * statistics, no gradients) */
    bool eval;
} ad_spec;

/* The training graph. g's inputs: the model's inputs, then "labels", then the parameters, then
 * the state (BatchNormalization's running statistics); its outputs: the loss (a float32 scalar),
 * the model output the loss reads, then one gradient per parameter in the parameters' order, then
 * the state's new values in the state's order (the evaluation graph: loss and output only).
 * Every BatchNormalization trains with batch statistics (anvil.BatchNormTrain), and every
 * Dropout drops (anvil.DropoutTrain, its masks drawn from the `seed` input). */
typedef struct ad_graph {
    ir_graph *g; /* owned; shares attributes and constant data with the forward graph */
    int n_params;
    ir_vid *params;           /* [n_params]: the parameter inputs of g (owned array) */
    const char **param_names; /* [n_params]: names (g's arena) */
    const void **param_init;  /* [n_params]: the initializers' bytes in the forward graph */
    size_t *param_numel;      /* [n_params] */
    ir_vid labels, loss, prediction;
    int n_state;
    ir_vid *state;            /* [n_state]: the state inputs of g */
    const char **state_names; /* [n_state] */
    const void **state_init;  /* [n_state]: the initializers' bytes in the forward graph */
    size_t *state_numel;      /* [n_state] */
    /* the training graph's last input when it holds a Dropout (anvil.DropoutTrain): an int64
     * scalar the caller changes every step, from which the masks are drawn; else IR_NONE */
    ir_vid seed;
} ad_graph;

/* Builds the training graph of fwd (borrowed: it must outlive *out). Errors name the node or
 * initializer at fault: an op without a gradient rule on a path to the loss, a trainable name
 * that is no float32 initializer, a trainable the loss does not depend on, an output the loss
 * cannot read (cross-entropy and NLL need [N, C] scores). *out owned by the caller
 * (ad_graph_free). */
anvil_status ad_build(const ir_graph *fwd, const ad_spec *spec, ad_graph **out);
void ad_graph_free(ad_graph *ag);

#endif
