/* The gradients of the losses over class scores: the training graph's own cross-entropy and NLL
 * losses (build.c's add_loss) and the SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss
 * nodes of a model that computes its loss itself. One class axis (dim 1), class indices as
 * targets; the gradient is written with ordinary ops (OneHot, Softmax, Sub, Mul). */
#include "ad_impl.h"

#include <string.h>

anvil_status ad_class_grad(ad_ctx *c, ir_vid x, ir_vid target, bool softmax, float scale, ir_vid g,
                           ir_vid *dx) {
    const int64_t classes = c->g->values[x].shape.d[1];
    const ir_attr axis = {.name = "axis", .type = IR_ATTR_INT, .i = 1};
    ir_vid depth, values, hot, diff = IR_NONE;
    CORE_TRY(ad_const_i64(c, 1, &classes, &depth));
    CORE_TRY(ad_const_f32(c, 1, (int64_t[]){2}, (float[]){0.0f, 1.0f}, &values));
    CORE_TRY(ad_node(c, IR_OP_ONEHOT, (ir_vid[]){target, depth, values}, 3, &axis, 1, &hot));
    if (softmax) {
        ir_vid p;
        CORE_TRY(ad_node(c, IR_OP_SOFTMAX, &x, 1, &axis, 1, &p));
        CORE_TRY(ad_node(c, IR_OP_SUB, (ir_vid[]){p, hot}, 2, NULL, 0, &diff));
    } else {
        /* d(-x[target]) / dx = -onehot(target): the sign goes with the scale */
        diff = hot;
        scale = -scale;
    }
    /* the scale folded into g (smaller than the scores: no class dim) */
    ir_vid gs = g;
    if (scale != 1.0f) {
        ir_vid s;
        CORE_TRY(ad_const_f32(c, 0, NULL, &scale, &s));
        if (g != IR_NONE)
            CORE_TRY(ad_node(c, IR_OP_MUL, (ir_vid[]){g, s}, 2, NULL, 0, &gs));
        else
            gs = s;
    }
    if (gs == IR_NONE) {
        *dx = diff;
        return ANVIL_OK;
    }
    return ad_node(c, IR_OP_MUL, (ir_vid[]){diff, gs}, 2, NULL, 0, dx);
}

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss (X [N, C, d...], target [N, d...]) with
 * no weight input and no ignore_index. reduction none: each element's gradient is dY's at its
 * position (dY unsqueezed at the class axis); sum: dY for all; mean: dY / (N * prod(d)). */
anvil_status ad_rule_loss(ad_ctx *c, const ir_node *n, ir_vid dy) {
    const ir_vid x = n->inputs[0], target = n->inputs[1];
    if (n->n_inputs > 2 && n->inputs[2] != IR_NONE) return ad_unsupported(n, "a weight input");
    if (ir_node_attr(n, "ignore_index")) return ad_unsupported(n, "ignore_index");
    if (c->g->values[x].dtype != ANVIL_DTYPE_FLOAT32)
        return ad_unsupported(n, "scores that are not float32");
    const ir_shape xs = c->g->values[x].shape;
    size_t numel = 0;
    if (xs.rank < 2 || !ir_shape_numel(&xs, &numel) || !numel)
        return ad_unsupported(n, "scores without a static [N, C, ...] shape");
    const char *red;
    CORE_TRY(ir_attr_string(n, "reduction", "mean", &red));
    float scale = 1.0f;
    ir_vid g = dy;
    if (!strcmp(red, "none")) {
        ir_vid ax;
        CORE_TRY(ad_const_i64(c, 1, (int64_t[]){1}, &ax));
        CORE_TRY(ad_node(c, IR_OP_UNSQUEEZE, (ir_vid[]){dy, ax}, 2, NULL, 0, &g));
    } else if (!strcmp(red, "mean")) {
        scale = 1.0f / (float)(numel / (size_t)xs.d[1]);
    }
    ir_vid dx;
    CORE_TRY(ad_class_grad(c, x, target, n->op == IR_OP_SOFTMAXCROSSENTROPYLOSS, scale, g, &dx));
    return ad_accumulate(c, x, dx);
}
