/* LogSoftmax and Hardmax: the softmax relatives.
 *
 * Their axis semantics follow Softmax (src/ops/softmax.c): before opset 13 the input is coerced to
 * a 2-D matrix [prod(dims[:axis]), prod(dims[axis:])] (axis defaults to 1) and the op runs over
 * each row; from opset 13 it runs over the single dim `axis` (default -1). Both are lines of `len`
 * elements `inner` apart (the old form has inner = 1 and len = the trailing block).
 *
 * LogSoftmax subtracts the line's maximum before exp so that nothing overflows, and sums in double.
 * Hardmax marks the first maximum of each line with 1 (ties go to the lower index). */
#include "reduce_common.h"

typedef struct smx_params {
    int64_t axis;
    bool hard;
} smx_params;

static anvil_status smx_check(ir_graph *g, ir_node *n, bool hard) {
    smx_params *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    p->hard = hard;
    CORE_TRY(ir_attr_int(n, "axis", n->opset < 13 ? 1 : -1, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status logsoftmax_check(ir_graph *g, ir_node *n) {
    return smx_check(g, n, false);
}
static anvil_status hardmax_check(ir_graph *g, ir_node *n) {
    return smx_check(g, n, true);
}

static anvil_status smx_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const smx_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    if (in[0].shape.rank >= 0) {
        int axis;
        CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, in[0].shape.rank, &axis));
    }
    return ANVIL_OK;
}

static anvil_status smx_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const smx_params *p = n->params;
    const op_tensor *x = in[0];
    void *y = out[0]->data;
    anvil_dtype dt = x->dtype;
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    size_t outer, len, inner;
    red_split(x, axis, &outer, &len, &inner);
    if (n->opset < 13) {
        len *= inner;
        inner = 1;
    }
    for (size_t a = 0; a < outer; a++) {
        for (size_t b = 0; b < inner; b++) {
            size_t base = a * len * inner + b;
            if (len == 0) continue;
            size_t best = 0;
            for (size_t j = 1; j < len; j++)
                if (red_cmp(dt, x->data, base + j * inner, base + best * inner) > 0) best = j;
            if (p->hard) {
                for (size_t j = 0; j < len; j++)
                    core_store_f64(dt, y, base + j * inner, j == best ? 1.0 : 0.0);
                continue;
            }
            double m = core_load_f64(dt, x->data, base + best * inner), sum = 0;
            for (size_t j = 0; j < len; j++)
                sum += exp(core_load_f64(dt, x->data, base + j * inner) - m);
            double lse = m + log(sum);
            for (size_t j = 0; j < len; j++)
                core_store_f64(dt, y, base + j * inner,
                               core_load_f64(dt, x->data, base + j * inner) - lse);
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_logsoftmax = {.min_inputs = 1,
                                    .max_inputs = 1,
                                    .min_outputs = 1,
                                    .max_outputs = 1,
                                    .check = logsoftmax_check,
                                    .infer = smx_infer,
                                    .run = smx_run};

const op_impl op_impl_hardmax = {.min_inputs = 1,
                                 .max_inputs = 1,
                                 .min_outputs = 1,
                                 .max_outputs = 1,
                                 .check = hardmax_check,
                                 .infer = smx_infer,
                                 .run = smx_run};
