/* anvil.EltwiseChain (ops/chain_common.h): a chain of elementwise ops fused into one node by
 * passes/fuse_chain.c. The reference kernel interprets the steps element by element with the
 * arithmetic of the single ops' reference kernels (float32, one rounding per step, libm's
 * expf/tanhf/erff/powf), so a fused graph computes what the unfused one did; it is the oracle of
 * the chain kernels (kernels/cpu/chain). */
#include "ops/chain_common.h"
#include "ops/eltwise_common.h"

#include <math.h>
#include <string.h>

const char *const chain_op_names[CHAIN_OP_COUNT] = {
    [CHAIN_ADD] = "Add",
    [CHAIN_SUB] = "Sub",
    [CHAIN_MUL] = "Mul",
    [CHAIN_DIV] = "Div",
    [CHAIN_MAX] = "Max",
    [CHAIN_MIN] = "Min",
    [CHAIN_CLIP] = "Clip",
    [CHAIN_RELU] = "Relu",
    [CHAIN_LEAKYRELU] = "LeakyRelu",
    [CHAIN_SIGMOID] = "Sigmoid",
    [CHAIN_TANH] = "Tanh",
    [CHAIN_ERF] = "Erf",
    [CHAIN_EXP] = "Exp",
    [CHAIN_HARDSIGMOID] = "HardSigmoid",
    [CHAIN_HARDSWISH] = "HardSwish",
    [CHAIN_POW2] = "Pow2",
    [CHAIN_POW3] = "Pow3",
    [CHAIN_POWHALF] = "PowHalf",
    [CHAIN_SQRT] = "Sqrt",
    [CHAIN_NEG] = "Neg",
    [CHAIN_ABS] = "Abs",
};

static anvil_status chain_attr(const ir_node *n, const char *name, ir_attr_type type, size_t want,
                               const ir_attr **out) {
    const ir_attr *a = ir_node_attr(n, name);
    if (!a || a->type != type || a->n != want)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' must be a list of %zu %s (one per step of 'ops')",
                        ir_node_label(n), name, want, ir_attr_type_name(type));
    *out = a;
    return ANVIL_OK;
}

static anvil_status chain_check(ir_graph *g, ir_node *n) {
    const ir_attr *ops = ir_node_attr(n, "ops");
    if (!ops || ops->type != IR_ATTR_STRINGS || !ops->strings || ops->n < 1 ||
        ops->n > CHAIN_MAX_STEPS)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'ops' must list 1 to %d op names",
                        ir_node_label(n), CHAIN_MAX_STEPS);
    const ir_attr *args = NULL, *swap = NULL, *params = NULL;
    CORE_TRY(chain_attr(n, "args", IR_ATTR_INTS, ops->n, &args));
    CORE_TRY(chain_attr(n, "swap", IR_ATTR_INTS, ops->n, &swap));
    CORE_TRY(chain_attr(n, "params", IR_ATTR_FLOATS, 2 * ops->n, &params));
    OP_PARAMS_NEW(g, chain_params, p);
    p->n_steps = (int)ops->n;
    for (int s = 0; s < p->n_steps; s++) {
        chain_step *st = &p->steps[s];
        int op = 0;
        while (op < CHAIN_OP_COUNT && strcmp(chain_op_names[op], ops->strings[s])) op++;
        if (op == CHAIN_OP_COUNT)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: step %d names op '%s', which a chain "
                            "cannot hold",
                            ir_node_label(n), s, ops->strings[s]);
        st->op = (chain_op)op;
        const int64_t arg = args->ints[s];
        const bool binary = chain_op_binary(st->op);
        if (binary ? (arg < 0 || arg >= n->n_inputs || n->inputs[arg] == IR_NONE) : arg != -1)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: step %d (%s) has operand %lld; a binary step names one of the "
                            "node's %d inputs, any other step -1",
                            ir_node_label(n), s, chain_op_names[op], (long long)arg, n->n_inputs);
        st->arg = (int)arg;
        st->swap = swap->ints[s] != 0;
        st->a = params->floats[2 * s];
        st->b = params->floats[2 * s + 1];
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status chain_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    for (int i = 0; i < n_in; i++)
        if (in[i].dtype != ANVIL_DTYPE_FLOAT32)
            return core_err(ANVIL_ERR_UNSUPPORTED, "%s: input %d is %s; a chain is float32 only",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype));
    for (int i = 1; i < n_in; i++) {
        ir_shape b;
        CORE_TRY(op_broadcast_shape(n, &in[0].shape, &in[i].shape, &b));
        if (in[0].shape.rank >= 0 && b.rank >= 0 &&
            (b.rank != in[0].shape.rank || !op_dims_may_equal(&b, &in[0].shape, b.rank))) {
            char sx[128], so[128];
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: side input %d %s does not broadcast onto the chain's input %s",
                            ir_node_label(n), i, ir_shape_str(NULL, &in[i].shape, so, sizeof so),
                            ir_shape_str(NULL, &in[0].shape, sx, sizeof sx));
        }
    }
    out[0].dtype = ANVIL_DTYPE_FLOAT32;
    out[0].shape = in[0].shape;
    out[0].value = NULL;
    return ANVIL_OK;
}

static inline float clamp01(float v) {
    return v < 0 ? 0.0f : (v > 1 ? 1.0f : v);
}

/* One step on one element; b is the other operand of a binary step. */
static float chain_apply(const chain_step *st, float v, float b) {
    float l = st->swap ? b : v, r = st->swap ? v : b;
    switch (st->op) {
    case CHAIN_ADD:
        return l + r;
    case CHAIN_SUB:
        return l - r;
    case CHAIN_MUL:
        return l * r;
    case CHAIN_DIV:
        return l / r;
    case CHAIN_MAX: /* np.maximum: NaN in either operand gives NaN */
        return (l != l || l > r) ? l : r;
    case CHAIN_MIN:
        return (l != l || l < r) ? l : r;
    case CHAIN_CLIP:
        if (v < st->a) v = st->a;
        if (v > st->b) v = st->b;
        return v;
    case CHAIN_RELU:
        return v < 0 ? 0.0f : v;
    case CHAIN_LEAKYRELU:
        return v < 0 ? st->a * v : v;
    case CHAIN_SIGMOID:
        return OP_ELT_SIGMOID(v);
    case CHAIN_TANH:
        return tanhf(v);
    case CHAIN_ERF:
        return erff(v);
    case CHAIN_EXP:
        return expf(v);
    case CHAIN_HARDSIGMOID:
        return clamp01(st->a * v + st->b);
    case CHAIN_HARDSWISH:
        return v * clamp01((float)(1.0 / 6.0) * v + 0.5f);
    case CHAIN_POW2:
        return powf(v, 2.0f);
    case CHAIN_POW3:
        return powf(v, 3.0f);
    case CHAIN_POWHALF:
        return powf(v, 0.5f);
    case CHAIN_SQRT:
        return sqrtf(v);
    case CHAIN_NEG:
        return -v;
    case CHAIN_ABS:
        return fabsf(v);
    default:
        return v;
    }
}

/* Walks the output with an odometer, keeping each input's element offset (stride 0 along the
 * dims it broadcasts over). */
static anvil_status chain_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const chain_params *p = n->params;
    const op_tensor *y = out[0];
    const int r = y->rank;
    const size_t total = op_tensor_numel(y);
    if (total == 0) return ANVIL_OK;
    int64_t stride[CHAIN_MAX_INPUTS][IR_MAX_RANK], off[CHAIN_MAX_INPUTS] = {0}, idx[IR_MAX_RANK];
    if (n_in > CHAIN_MAX_INPUTS)
        return core_err(ANVIL_ERR_LIMIT, "%s: %d inputs; a chain takes at most %d",
                        ir_node_label(n), n_in, CHAIN_MAX_INPUTS);
    for (int i = 0; i < n_in; i++) {
        const int pad = r - in[i]->rank;
        int64_t s = 1;
        for (int d = r - 1; d >= 0; d--) {
            int64_t dim = d >= pad ? in[i]->dims[d - pad] : 1;
            stride[i][d] = dim == 1 ? 0 : s;
            s *= dim;
        }
    }
    for (int d = 0; d < r; d++) idx[d] = 0;
    const float *x = in[0]->data;
    float *o = y->data;
    for (size_t e = 0; e < total; e++) {
        float v = x[off[0]];
        for (int s = 0; s < p->n_steps; s++) {
            const chain_step *st = &p->steps[s];
            float b = st->arg >= 0 ? ((const float *)in[st->arg]->data)[off[st->arg]] : 0.0f;
            v = chain_apply(st, v, b);
        }
        o[e] = v;
        for (int d = r - 1; d >= 0; d--) {
            for (int i = 0; i < n_in; i++) off[i] += stride[i][d];
            if (++idx[d] < y->dims[d]) break;
            for (int i = 0; i < n_in; i++) off[i] -= stride[i][d] * y->dims[d];
            idx[d] = 0;
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_eltwise_chain = {.min_inputs = 1,
                                       .max_inputs = CHAIN_MAX_INPUTS,
                                       .min_outputs = 1,
                                       .max_outputs = 1,
                                       .flags = OP_INPLACE_0,
                                       .check = chain_check,
                                       .infer = chain_infer,
                                       .run = chain_run};
