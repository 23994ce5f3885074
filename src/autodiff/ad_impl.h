/* What the driver (build.c) and the gradient rules (rules.c, rules_loss.c) share: the graph
 * being built, the gradients found so far, and helpers that append nodes and constants with their
 * shapes inferred at once (every value the rules read has a static shape). Only src/autodiff
 * includes it. */
#ifndef ANVIL_AD_IMPL_H
#define ANVIL_AD_IMPL_H

#include "autodiff.h"

#include "ops/ops.h"

typedef struct ad_ctx {
    ir_graph *g;
    ir_vid *grad; /* [cap]: the gradient of each value so far, or IR_NONE */
    bool *need;   /* [cap]: the value depends on a trainable parameter */
    int32_t cap;  /* length of grad / need (grown with the graph's values) */
    int serial;   /* for unique names */
} ad_ctx;

/* The opset of the nodes the rules add: their semantics (axes as inputs, Split's sizes) are
 * those of opset 18 whatever the model imports. */
#define AD_OPSET 18

/* Appends a node of op with inputs ins[0..n_in) (IR_NONE for omitted ones) and attrs (copied
 * into the graph's arena; names and lists must be static or arena-owned), one output whose dtype
 * and shape are inferred now; returns it in *out. */
anvil_status ad_node(ad_ctx *c, ir_op op, const ir_vid *ins, int n_in, const ir_attr *attrs,
                     int n_attrs, ir_vid *out);
/* The same with n_out outputs (Split). */
anvil_status ad_node_n(ad_ctx *c, ir_op op, const ir_vid *ins, int n_in, const ir_attr *attrs,
                       int n_attrs, int n_out, ir_vid *outs);
/* Constants: float32 of `dims` (numel values copied), int64 [n] (or a scalar when n < 0). */
anvil_status ad_const_f32(ad_ctx *c, int rank, const int64_t *dims, const float *v, ir_vid *out);
anvil_status ad_const_i64(ad_ctx *c, int n, const int64_t *v, ir_vid *out);
/* An INTS attribute over a copy of v[0..n) in the graph's arena (NULL name on failure). */
ir_attr ad_ints(ad_ctx *c, const char *name, const int64_t *v, int n);

/* Adds gv to the gradient of v (an Add when v already has one). */
anvil_status ad_accumulate(ad_ctx *c, ir_vid v, ir_vid gv);
/* gv (of shape `from`, a broadcast result) summed down to the shape of v (numpy broadcasting:
 * the leading dims and the dims where v has 1), reshaped to v's shape. */
anvil_status ad_reduce_to(ad_ctx *c, ir_vid gv, ir_vid v, ir_vid *out);

/* Writes the gradients of node k's inputs that need one, from its outputs' gradients
 * (c->grad). INVALID_MODEL / UNSUPPORTED naming the node when it has no rule. */
anvil_status ad_rule(ad_ctx *c, int32_t k);
/* UNSUPPORTED naming n: no gradient rule (for `why`, when given). */
anvil_status ad_unsupported(const ir_node *n, const char *why);

/* The losses over class scores (rules_loss.c). x [N, C, d...] holds scores (softmax: logits
 * whose log-softmax over dim 1 is taken; else log-probabilities), target [N, d...] class indices;
 * the gradient of sum(element losses * scale * g) with respect to x, where g (IR_NONE: 1)
 * broadcasts against [N, C, d...]: (softmax(x) - onehot(target)) * scale * g, or without the
 * softmax -onehot(target) * scale * g. */
anvil_status ad_class_grad(ad_ctx *c, ir_vid x, ir_vid target, bool softmax, float scale, ir_vid g,
                           ir_vid *dx);
/* The rule of a SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss node of the model (n a copy
 * of it, dy its loss output's gradient). */
anvil_status ad_rule_loss(ad_ctx *c, const ir_node *n, ir_vid dy);

#endif
