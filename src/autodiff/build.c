/* The training graph's driver: the forward graph with its trainable initializers turned into
 * inputs and its input shapes made concrete, the loss, then the gradient rules applied to the
 * forward nodes in reverse order, each adding the nodes that turn its outputs' gradients into its
 * inputs'. Gradients of a value read more than once are summed. */
#include "ad_impl.h"

#include "runtime/infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static anvil_status ensure_cap(ad_ctx *c) {
    if (c->g->n_values + 8 <= c->cap) return ANVIL_OK;
    int32_t cap = (c->g->n_values + 8) * 2;
    ir_vid *grad = realloc(c->grad, (size_t)cap * sizeof *grad);
    if (!grad) return ANVIL_ERR_OUT_OF_MEMORY;
    c->grad = grad;
    bool *need = realloc(c->need, (size_t)cap * sizeof *need);
    if (!need) return ANVIL_ERR_OUT_OF_MEMORY;
    c->need = need;
    for (int32_t v = c->cap; v < cap; v++) {
        c->grad[v] = IR_NONE;
        c->need[v] = false;
    }
    c->cap = cap;
    return ANVIL_OK;
}

static anvil_status new_value(ad_ctx *c, const char *what, ir_vid *out) {
    char name[96];
    snprintf(name, sizeof name, "ad/%s/%d", what, c->serial++);
    CORE_TRY(ir_graph_add_value(c->g, name, out));
    return ensure_cap(c);
}

/* Infers node k's outputs from its inputs' values and writes them into the graph. */
static anvil_status infer_node(ir_graph *g, int32_t k) {
    const ir_node *n = &g->nodes[k];
    op_tinfo in[16], out[8];
    if (n->n_inputs > 16 || n->n_outputs > 8)
        return core_err(ANVIL_ERR_INTERNAL, "%s: too many inputs", ir_node_label(n));
    for (int i = 0; i < n->n_inputs; i++) {
        memset(&in[i], 0, sizeof in[i]);
        if (n->inputs[i] == IR_NONE) {
            ir_shape_unknown(&in[i].shape);
            continue;
        }
        const ir_value *v = &g->values[n->inputs[i]];
        in[i].dtype = v->dtype;
        in[i].shape = v->shape;
        in[i].value = v->flags & IR_VALUE_CONST ? v->data : NULL;
    }
    memset(out, 0, sizeof out);
    for (int i = 0; i < n->n_outputs; i++) ir_shape_unknown(&out[i].shape);
    CORE_TRY(op_get(n->op)->infer(g, n, in, n->n_inputs, out, n->n_outputs));
    for (int i = 0; i < n->n_outputs; i++) {
        if (n->outputs[i] == IR_NONE) continue;
        g->values[n->outputs[i]].dtype = out[i].dtype;
        g->values[n->outputs[i]].shape = out[i].shape;
    }
    return ANVIL_OK;
}

anvil_status ad_node_n(ad_ctx *c, ir_op op, const ir_vid *ins, int n_in, const ir_attr *attrs,
                       int n_attrs, int n_out, ir_vid *outs) {
    ir_graph *g = c->g;
    char name[96];
    snprintf(name, sizeof name, "ad/%s/%d", ir_op_name(op), c->serial++);
    int32_t k;
    CORE_TRY(ir_graph_add_node(g, op, name, n_in, n_out, n_attrs, &k));
    for (int i = 0; i < n_out; i++) {
        ir_vid v;
        CORE_TRY(new_value(c, ir_op_name(op), &v));
        g->nodes[k].outputs[i] = v;
        g->values[v].producer = k;
        outs[i] = v;
    }
    ir_node *n = &g->nodes[k];
    n->opset = AD_OPSET;
    for (int i = 0; i < n_in; i++) n->inputs[i] = ins[i];
    for (int i = 0; i < n_attrs; i++) n->attrs[i] = attrs[i];
    CORE_TRY(op_get(op)->check(g, n));
    return infer_node(g, k);
}

anvil_status ad_node(ad_ctx *c, ir_op op, const ir_vid *ins, int n_in, const ir_attr *attrs,
                     int n_attrs, ir_vid *out) {
    return ad_node_n(c, op, ins, n_in, attrs, n_attrs, 1, out);
}

static anvil_status new_const(ad_ctx *c, anvil_dtype dt, int rank, const int64_t *dims,
                              const void *src, size_t bytes, ir_vid *out) {
    CORE_TRY(new_value(c, "const", out));
    void *data = core_arena_alloc(c->g->arena, bytes ? bytes : 1);
    if (!data) return ANVIL_ERR_OUT_OF_MEMORY;
    memcpy(data, src, bytes);
    ir_value *v = &c->g->values[*out];
    v->dtype = dt;
    ir_shape_set(&v->shape, rank, dims);
    v->flags |= IR_VALUE_CONST;
    v->data = data;
    v->data_bytes = bytes;
    return ANVIL_OK;
}

anvil_status ad_const_f32(ad_ctx *c, int rank, const int64_t *dims, const float *v, ir_vid *out) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return new_const(c, ANVIL_DTYPE_FLOAT32, rank, dims, v, n * sizeof(float), out);
}

anvil_status ad_const_i64(ad_ctx *c, int n, const int64_t *v, ir_vid *out) {
    const int64_t d = n;
    return new_const(c, ANVIL_DTYPE_INT64, n < 0 ? 0 : 1, &d, v,
                     (size_t)(n < 0 ? 1 : n) * sizeof(int64_t), out);
}

ir_attr ad_ints(ad_ctx *c, const char *name, const int64_t *v, int n) {
    int64_t *copy = core_arena_array(c->g->arena, (size_t)(n > 0 ? n : 1), sizeof *copy);
    if (!copy) return (ir_attr){0};
    if (n > 0) memcpy(copy, v, (size_t)n * sizeof *copy);
    return (ir_attr){.name = name, .type = IR_ATTR_INTS, .ints = copy, .n = (size_t)n};
}

anvil_status ad_accumulate(ad_ctx *c, ir_vid v, ir_vid gv) {
    if (c->grad[v] == IR_NONE) {
        c->grad[v] = gv;
        return ANVIL_OK;
    }
    ir_vid sum;
    CORE_TRY(ad_node(c, IR_OP_ADD, (ir_vid[]){c->grad[v], gv}, 2, NULL, 0, &sum));
    c->grad[v] = sum;
    return ANVIL_OK;
}

anvil_status ad_reduce_to(ad_ctx *c, ir_vid gv, ir_vid v, ir_vid *out) {
    const ir_shape from = c->g->values[gv].shape, to = c->g->values[v].shape;
    if (ir_shape_equal(&from, &to)) {
        *out = gv;
        return ANVIL_OK;
    }
    int64_t axes[IR_MAX_RANK];
    int n = 0;
    const int lead = from.rank - to.rank;
    for (int i = 0; i < from.rank; i++)
        if (i < lead || (to.d[i - lead] == 1 && from.d[i] != 1)) axes[n++] = i;
    ir_vid r = gv;
    if (n > 0) {
        ir_vid ax;
        CORE_TRY(ad_const_i64(c, n, axes, &ax));
        const ir_attr keep = {.name = "keepdims", .type = IR_ATTR_INT, .i = 1};
        CORE_TRY(ad_node(c, IR_OP_REDUCESUM, (ir_vid[]){gv, ax}, 2, &keep, 1, &r));
    }
    ir_vid shape;
    CORE_TRY(ad_const_i64(c, to.rank, to.d, &shape));
    return ad_node(c, IR_OP_RESHAPE, (ir_vid[]){r, shape}, 2, NULL, 0, out);
}

/* ---- the driver ---------------------------------------------------------------------------- */

static bool is_initializer(const ir_value *v) {
    return (v->flags & IR_VALUE_CONST) && v->producer < 0 && v->dtype == ANVIL_DTYPE_FLOAT32 &&
           v->data;
}

/* BatchNormalization's running mean and variance (inputs 3 and 4) are statistics, not weights. */
static bool is_statistic(const ir_graph *g, ir_vid v) {
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->op != IR_OP_BATCHNORMALIZATION) continue;
        for (int i = 3; i < n->n_inputs && i < 5; i++)
            if (n->inputs[i] == v) return true;
    }
    return false;
}

static anvil_status pick_params(const ad_spec *spec, ad_graph *ag) {
    ir_graph *g = ag->g;
    ag->params = calloc((size_t)g->n_values + 1, sizeof *ag->params);
    ag->param_names = calloc((size_t)g->n_values + 1, sizeof *ag->param_names);
    ag->param_init = calloc((size_t)g->n_values + 1, sizeof *ag->param_init);
    ag->param_numel = calloc((size_t)g->n_values + 1, sizeof *ag->param_numel);
    if (!ag->params || !ag->param_names || !ag->param_init || !ag->param_numel)
        return ANVIL_ERR_OUT_OF_MEMORY;
    for (int t = 0; t < spec->n_trainable; t++) {
        const ir_vid v = ir_graph_find_value(g, spec->trainable[t]);
        if (v == IR_NONE || !is_initializer(&g->values[v]))
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "trainable '%s' is not a float32 initializer of the model; name one "
                            "of its weights",
                            spec->trainable[t]);
    }
    for (ir_vid v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        size_t numel = 0;
        if (!is_initializer(val) || !ir_shape_numel(&val->shape, &numel)) continue;
        bool take = false;
        if (spec->n_trainable > 0) {
            for (int t = 0; t < spec->n_trainable && !take; t++)
                take = !strcmp(val->name, spec->trainable[t]);
        } else {
            take = numel >= 2 && !is_statistic(g, v);
        }
        if (!take) continue;
        const int i = ag->n_params++;
        ag->params[i] = v;
        ag->param_names[i] = val->name;
        ag->param_init[i] = val->data;
        ag->param_numel[i] = numel;
    }
    return ANVIL_OK;
}

static anvil_status add_input(ir_graph *g, const char *name, anvil_dtype dt, const ir_shape *s,
                              ir_vid *out) {
    CORE_TRY(ir_graph_add_value(g, name, out));
    g->values[*out].dtype = dt;
    g->values[*out].shape = *s;
    return ir_graph_add_input(g, *out);
}

/* The loss of y against the labels, and the seed of the backward pass: y's gradient. */
static anvil_status add_loss(ad_ctx *c, const ad_spec *spec, ad_graph *ag, ir_vid y) {
    ir_graph *g = c->g;
    const ir_shape ys = g->values[y].shape;
    size_t numel = 0;
    if (g->values[y].dtype != ANVIL_DTYPE_FLOAT32 || !ir_shape_numel(&ys, &numel) || !numel)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "the loss reads output '%s', which is not a non-empty float32 tensor of "
                        "known shape",
                        g->values[y].name);
    if (spec->loss == AD_LOSS_CROSS_ENTROPY || spec->loss == AD_LOSS_NLL) {
        const bool ce = spec->loss == AD_LOSS_CROSS_ENTROPY;
        if (ys.rank != 2)
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s needs %s [N, C]; output '%s' has rank %d (use --output to name "
                            "another output, or --loss mse)",
                            ce ? "cross-entropy" : "the NLL loss",
                            ce ? "logits" : "log-probabilities", g->values[y].name, ys.rank);
        ir_shape ls;
        ir_shape_set(&ls, 1, ys.d);
        CORE_TRY(add_input(g, "labels", ANVIL_DTYPE_INT64, &ls, &ag->labels));
        CORE_TRY(ensure_cap(c));
        CORE_TRY(ad_node(c, ce ? IR_OP_SOFTMAXCROSSENTROPYLOSS : IR_OP_NEGATIVELOGLIKELIHOODLOSS,
                         (ir_vid[]){y, ag->labels}, 2, NULL, 0, &ag->loss));
        /* d loss / d y = (softmax(logits) - onehot(labels)) / N, or -onehot(labels) / N */
        ir_vid dy;
        CORE_TRY(ad_class_grad(c, y, ag->labels, ce, 1.0f / (float)ys.d[0], IR_NONE, &dy));
        return ad_accumulate(c, y, dy);
    }
    CORE_TRY(add_input(g, "labels", ANVIL_DTYPE_FLOAT32, &ys, &ag->labels));
    CORE_TRY(ensure_cap(c));
    if (spec->loss == AD_LOSS_DOT) {
        /* sum(y * labels): its gradient with respect to y is the labels themselves, so the
         * parameters' gradients are the vector-Jacobian product of the labels (an upstream
         * gradient that a framework outside computed) */
        ir_vid prod;
        const ir_attr keep0 = {.name = "keepdims", .type = IR_ATTR_INT, .i = 0};
        CORE_TRY(ad_node(c, IR_OP_MUL, (ir_vid[]){y, ag->labels}, 2, NULL, 0, &prod));
        CORE_TRY(ad_node(c, IR_OP_REDUCESUM, &prod, 1, &keep0, 1, &ag->loss));
        return ad_accumulate(c, y, ag->labels);
    }
    ir_vid d, sq, two, dy;
    CORE_TRY(ad_node(c, IR_OP_SUB, (ir_vid[]){y, ag->labels}, 2, NULL, 0, &d));
    CORE_TRY(ad_node(c, IR_OP_MUL, (ir_vid[]){d, d}, 2, NULL, 0, &sq));
    const ir_attr keep = {.name = "keepdims", .type = IR_ATTR_INT, .i = 0};
    CORE_TRY(ad_node(c, IR_OP_REDUCEMEAN, &sq, 1, &keep, 1, &ag->loss));
    CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){2.0f / (float)numel}, &two));
    CORE_TRY(ad_node(c, IR_OP_MUL, (ir_vid[]){d, two}, 2, NULL, 0, &dy));
    return ad_accumulate(c, y, dy);
}

/* BatchNormalization's running statistics become state (inputs of g, recorded in ag); in the
 * training graph each node becomes anvil.BatchNormTrain, whose outputs 1 and 2 are the state's
 * new values (state_out, in the state's order) and 3 and 4 the batch statistics its gradient
 * reads. */
static anvil_status take_state(ad_ctx *c, const ad_spec *spec, ad_graph *ag, ir_vid **state_out) {
    ir_graph *g = c->g;
    int n_bn = 0;
    for (int32_t k = 0; k < g->n_nodes; k++) n_bn += g->nodes[k].op == IR_OP_BATCHNORMALIZATION;
    ag->state = core_calloc((size_t)(2 * n_bn) + 1, sizeof *ag->state);
    ag->state_names = core_calloc((size_t)(2 * n_bn) + 1, sizeof *ag->state_names);
    ag->state_init = core_calloc((size_t)(2 * n_bn) + 1, sizeof *ag->state_init);
    ag->state_numel = core_calloc((size_t)(2 * n_bn) + 1, sizeof *ag->state_numel);
    *state_out = core_calloc((size_t)(2 * n_bn) + 1, sizeof **state_out);
    if (!ag->state || !ag->state_names || !ag->state_init || !ag->state_numel || !*state_out)
        return ANVIL_ERR_OUT_OF_MEMORY;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (g->nodes[k].op != IR_OP_BATCHNORMALIZATION) continue;
        const ir_node n = g->nodes[k];
        if (n.n_inputs < 5 || n.n_outputs > 1 || g->values[n.inputs[0]].shape.rank < 2)
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: only an inference-mode BatchNormalization (one output) of rank "
                            ">= 2 can be trained",
                            ir_node_label(&g->nodes[k]));
        const void *init[2] = {NULL, NULL};
        for (int i = 3; i < 5; i++) {
            const ir_vid v = n.inputs[i];
            init[i - 3] = g->values[v].data;
            /* torch.onnx.export shares equal initializers through Identity nodes: a fresh
             * model's running variance is Identity(the BatchNorm's weight, all ones). The
             * statistic gets its own state, and the Identity a dummy output. */
            const int32_t pk = g->values[v].producer;
            if (pk >= 0 && g->nodes[pk].op == IR_OP_IDENTITY &&
                is_initializer(&g->values[g->nodes[pk].inputs[0]])) {
                init[i - 3] = g->values[g->nodes[pk].inputs[0]].data;
                ir_vid dummy;
                CORE_TRY(new_value(c, "shared", &dummy));
                g->nodes[pk].outputs[0] = dummy;
                g->values[dummy].producer = pk;
                g->values[v].producer = -1;
                g->values[v].flags |= IR_VALUE_CONST;
                g->values[v].data = init[i - 3];
            }
            if (!is_initializer(&g->values[v]))
                return core_err(ANVIL_ERR_UNSUPPORTED,
                                "%s: its running statistics must be float32 initializers",
                                ir_node_label(&g->nodes[k]));
            bool seen = false;
            for (int s = 0; s < ag->n_state && !seen; s++) seen = ag->state[s] == v;
            if (seen)
                return core_err(ANVIL_ERR_UNSUPPORTED,
                                "%s: shares its running statistics with another node",
                                ir_node_label(&g->nodes[k]));
        }
        ir_vid outs[5] = {n.outputs[0], IR_NONE, IR_NONE, IR_NONE, IR_NONE};
        if (!spec->eval) {
            for (int i = 1; i < 5; i++) CORE_TRY(new_value(c, "bn", &outs[i]));
            ir_vid *o = core_arena_array(g->arena, 5, sizeof *o);
            if (!o) return ANVIL_ERR_OUT_OF_MEMORY;
            memcpy(o, outs, sizeof outs);
            ir_node *m = &g->nodes[k];
            m->op = IR_OP_BATCHNORM_TRAIN;
            m->outputs = o;
            m->n_outputs = 5;
            m->params = NULL;
            for (int i = 1; i < 5; i++) g->values[o[i]].producer = k;
            CORE_TRY(op_get(IR_OP_BATCHNORM_TRAIN)->check(g, m));
        }
        for (int i = 3; i < 5; i++) {
            const ir_vid v = n.inputs[i];
            const int s = ag->n_state++;
            ag->state[s] = v;
            ag->state_names[s] = g->values[v].name;
            ag->state_init[s] = init[i - 3];
            ir_shape_numel(&g->values[v].shape, &ag->state_numel[s]);
            (*state_out)[s] = outs[i - 2];
        }
    }
    return ANVIL_OK;
}

/* Every Dropout of the training graph drops: anvil.DropoutTrain, reading the step's seed (one
 * int64 scalar input for them all, ag->seed) and keeping its mask (output 1) for the gradient.
 * The ratio: the attribute before opset 12, else input 1 when a constant (default 0.5). */
static anvil_status take_dropout(ad_ctx *c, ad_graph *ag) {
    ir_graph *g = c->g;
    ag->seed = IR_NONE;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (g->nodes[k].op != IR_OP_DROPOUT) continue;
        const ir_node n = g->nodes[k];
        if (g->values[n.inputs[0]].dtype != ANVIL_DTYPE_FLOAT32) continue;
        if (n.n_outputs > 1 && n.outputs[1] != IR_NONE)
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: its mask output is read; anvil trains Dropouts whose mask "
                            "only the gradient uses",
                            ir_node_label(&g->nodes[k]));
        float ratio = 0.5f;
        if (n.opset < 12) {
            CORE_TRY(ir_attr_float(&g->nodes[k], "ratio", 0.5f, &ratio));
        } else if (n.n_inputs > 1 && n.inputs[1] != IR_NONE) {
            const ir_value *rv = &g->values[n.inputs[1]];
            size_t numel = 0;
            if (!(rv->flags & IR_VALUE_CONST) || !ir_shape_numel(&rv->shape, &numel) ||
                numel != 1 || (rv->dtype != ANVIL_DTYPE_FLOAT32))
                return core_err(ANVIL_ERR_UNSUPPORTED,
                                "%s: its ratio must be a constant float32 scalar to train",
                                ir_node_label(&g->nodes[k]));
            memcpy(&ratio, rv->data, sizeof ratio);
        }
        if (ag->seed == IR_NONE) {
            CORE_TRY(ir_graph_add_value(g, "dropout_seed", &ag->seed));
            g->values[ag->seed].dtype = ANVIL_DTYPE_INT64;
            ir_shape_set(&g->values[ag->seed].shape, 0, NULL);
            /* an input from now on for shape inference; listed last, after the state */
            g->values[ag->seed].flags |= IR_VALUE_GRAPH_INPUT;
            CORE_TRY(ensure_cap(c));
        }
        ir_vid *ins = core_arena_array(g->arena, 2, sizeof *ins);
        ir_vid *outs = core_arena_array(g->arena, 2, sizeof *outs);
        ir_attr *at = core_arena_array(g->arena, 2, sizeof *at);
        if (!ins || !outs || !at) return ANVIL_ERR_OUT_OF_MEMORY;
        ins[0] = n.inputs[0];
        ins[1] = ag->seed;
        outs[0] = n.outputs[0];
        CORE_TRY(new_value(c, "dropout_mask", &outs[1]));
        at[0] = (ir_attr){.name = "ratio", .type = IR_ATTR_FLOAT, .f = ratio};
        at[1] = (ir_attr){.name = "salt", .type = IR_ATTR_INT, .i = k};
        ir_node *m = &g->nodes[k];
        m->op = IR_OP_DROPOUT_TRAIN;
        m->inputs = ins;
        m->n_inputs = 2;
        m->outputs = outs;
        m->n_outputs = 2;
        m->attrs = at;
        m->n_attrs = 2;
        m->params = NULL;
        g->values[outs[1]].producer = k;
        CORE_TRY(op_get(IR_OP_DROPOUT_TRAIN)->check(g, m));
    }
    return ANVIL_OK;
}

/* v, an initializer, becomes an input of g (its data stays with the forward graph). */
static anvil_status to_input(ir_graph *g, ir_vid v) {
    g->values[v].flags &= ~(uint32_t)IR_VALUE_CONST;
    g->values[v].data = NULL;
    g->values[v].data_bytes = 0;
    return ir_graph_add_input(g, v);
}

static anvil_status finish(ad_ctx *c, const ad_spec *spec, ad_graph *ag, ir_vid y,
                           const ir_vid *state_out);

static anvil_status build(const ir_graph *fwd, const ad_spec *spec, ad_graph *ag, ad_ctx *c) {
    CORE_TRY(ir_graph_clone(fwd, &ag->g));
    ir_graph *g = ag->g;
    c->g = g;
    CORE_TRY(ensure_cap(c));
    if (spec->n_inputs != g->n_inputs)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "the model has %d inputs; %d shapes given",
                        g->n_inputs, spec->n_inputs);
    for (int i = 0; i < g->n_inputs; i++) {
        /* the batch must fit what the model declares: a dim exported as a constant stays one */
        const ir_shape *decl = &g->values[g->inputs[i]].shape, *got = &spec->input_shapes[i];
        bool fits = decl->rank < 0 || decl->rank == got->rank;
        for (int d = 0; fits && decl->rank >= 0 && d < decl->rank; d++)
            fits = decl->d[d] < 0 || decl->d[d] == got->d[d];
        if (!fits) {
            char want[96], have[96];
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "model input '%s' is declared %s; a batch of %s does not fit (export "
                            "the model with a symbolic batch dim, or train with the batch size it "
                            "declares)",
                            g->values[g->inputs[i]].name, ir_shape_str(g, decl, want, sizeof want),
                            ir_shape_str(g, got, have, sizeof have));
        }
        g->values[g->inputs[i]].shape = *got;
    }
    ir_vid y = g->n_outputs > 0 ? g->outputs[0] : IR_NONE;
    if (spec->output) {
        y = IR_NONE;
        for (int i = 0; i < g->n_outputs; i++)
            if (!strcmp(g->values[g->outputs[i]].name, spec->output)) y = g->outputs[i];
        if (y == IR_NONE)
            return core_err(ANVIL_ERR_INVALID_ARGUMENT, "the model has no output '%s'",
                            spec->output);
    }
    if (y == IR_NONE) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "the model has no output");
    CORE_TRY(pick_params(spec, ag));
    if (ag->n_params == 0)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "the model has no float32 initializer to train");
    ir_vid *state_out = NULL;
    anvil_status st = take_state(c, spec, ag, &state_out);
    if (st == ANVIL_OK && !spec->eval)
        st = take_dropout(c, ag);
    else
        ag->seed = IR_NONE;
    if (st == ANVIL_OK) st = finish(c, spec, ag, y, state_out);
    free(state_out);
    return st;
}

/* build's second half: shapes, loss, gradients, inputs and outputs. */
static anvil_status finish(ad_ctx *c, const ad_spec *spec, ad_graph *ag, ir_vid y,
                           const ir_vid *state_out) {
    ir_graph *g = c->g;
    /* every node output recomputed from the concrete input shapes */
    for (int32_t k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_outputs; i++)
            if (g->nodes[k].outputs[i] != IR_NONE &&
                !(g->values[g->nodes[k].outputs[i]].flags & IR_VALUE_GRAPH_OUTPUT))
                ir_shape_unknown(&g->values[g->nodes[k].outputs[i]].shape);
    CORE_TRY(rt_infer_graph_static(g));
    const int32_t n_fwd = g->n_nodes;
    for (int i = 0; i < ag->n_params; i++) c->need[ag->params[i]] = true;
    for (int32_t k = 0; k < n_fwd; k++) {
        const ir_node *n = &g->nodes[k];
        bool any = false;
        for (int i = 0; i < n->n_inputs; i++)
            any |= n->inputs[i] != IR_NONE && c->need[n->inputs[i]];
        for (int i = 0; i < n->n_outputs; i++)
            if (n->outputs[i] != IR_NONE) c->need[n->outputs[i]] = any;
    }
    ag->prediction = y;
    CORE_TRY(add_loss(c, spec, ag, y));
    for (int32_t k = spec->eval ? -1 : n_fwd - 1; k >= 0; k--) {
        const ir_node *n = &g->nodes[k];
        bool has_grad = false, wants = false;
        for (int i = 0; i < n->n_outputs; i++)
            has_grad |= n->outputs[i] != IR_NONE && c->grad[n->outputs[i]] != IR_NONE;
        for (int i = 0; i < n->n_inputs; i++)
            wants |= n->inputs[i] != IR_NONE && c->need[n->inputs[i]];
        if (has_grad && wants) CORE_TRY(ad_rule(c, k));
    }
    /* the parameters become inputs, after the labels */
    int kept = 0;
    for (int i = 0; i < ag->n_params; i++) {
        const ir_vid v = ag->params[i];
        if (!spec->eval && c->grad[v] == IR_NONE) {
            if (spec->n_trainable > 0)
                return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                                "trainable '%s' gets no gradient: no differentiable path leads "
                                "from it to the loss",
                                ag->param_names[i]);
            continue; /* a constant after all (a mask, a table the loss does not reach) */
        }
        ag->params[kept] = v;
        ag->param_names[kept] = ag->param_names[i];
        ag->param_init[kept] = ag->param_init[i];
        ag->param_numel[kept++] = ag->param_numel[i];
        CORE_TRY(to_input(g, v));
    }
    for (int s = 0; s < ag->n_state; s++) CORE_TRY(to_input(g, ag->state[s]));
    if (ag->seed != IR_NONE) CORE_TRY(ir_graph_add_input(g, ag->seed));
    ag->n_params = kept;
    if (kept == 0)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "no initializer of the model gets a gradient from the loss");
    for (int i = 0; i < g->n_outputs; i++)
        g->values[g->outputs[i]].flags &= ~(uint32_t)IR_VALUE_GRAPH_OUTPUT;
    g->n_outputs = 0;
    CORE_TRY(ir_graph_add_output(g, ag->loss));
    CORE_TRY(ir_graph_add_output(g, y));
    for (int i = 0; i < ag->n_params && !spec->eval; i++) {
        ir_vid gv = c->grad[ag->params[i]];
        /* an output must be a node's own value: a gradient that is another value (an input
         * passed through) gets an Identity */
        if (g->values[gv].producer < 0 || (g->values[gv].flags & IR_VALUE_GRAPH_OUTPUT))
            CORE_TRY(ad_node(c, IR_OP_IDENTITY, &gv, 1, NULL, 0, &gv));
        CORE_TRY(ir_graph_add_output(g, gv));
    }
    for (int s = 0; s < ag->n_state && !spec->eval; s++)
        CORE_TRY(ir_graph_add_output(g, state_out[s]));
    CORE_TRY(ir_graph_toposort(g));
    return ir_graph_verify(g);
}

anvil_status ad_build(const ir_graph *fwd, const ad_spec *spec, ad_graph **out) {
    *out = NULL;
    ad_graph *ag = core_calloc(1, sizeof *ag);
    if (!ag) return ANVIL_ERR_OUT_OF_MEMORY;
    ag->seed = IR_NONE;
    ad_ctx c = {0};
    anvil_status st = build(fwd, spec, ag, &c);
    free(c.grad);
    free(c.need);
    if (st != ANVIL_OK) {
        ad_graph_free(ag);
        return st;
    }
    *out = ag;
    return ANVIL_OK;
}

void ad_graph_free(ad_graph *ag) {
    if (!ag) return;
    ir_graph_free(ag->g);
    free(ag->params);
    free(ag->param_names);
    free(ag->param_init);
    free(ag->param_numel);
    free(ag->state);
    free(ag->state_names);
    free(ag->state_init);
    free(ag->state_numel);
    free(ag);
}
