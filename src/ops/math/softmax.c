/* Softmax, LogSoftmax and Hardmax.
 *
 * The op's meaning changed in opset 13. Before it, the input is viewed as a 2-D matrix
 * [prod(dims[:axis]), prod(dims[axis:])] (axis defaults to 1) and softmax runs over each row,
 * i.e. over the whole trailing block. From opset 13 it runs over the single dim `axis` (default
 * -1). Both are "lines" of `len` elements `stride` apart: the old form is the new one with
 * stride 1 and len = the trailing block, so one kernel serves both.
 *
 * Numerically: the line's maximum is subtracted before exp (softmax is invariant to it, and it
 * keeps exp from overflowing), and the sum is accumulated in double. */
#include "ops/eltwise_common.h"
#include "ops/reduce_common.h"

#include <math.h>

typedef struct softmax_params {
    int64_t axis;
} softmax_params;

static anvil_status softmax_check(ir_graph *g, ir_node *n) {
    softmax_params *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    CORE_TRY(ir_attr_int(n, "axis", n->opset < 13 ? 1 : -1, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status softmax_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g;
    const softmax_params *p = n->params;
    CORE_TRY(op_elt_unary_infer(n, in, n_in, out, n_out, ELT_MASK_FLOAT));
    if (in[0].shape.rank >= 0) {
        int axis;
        CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, in[0].shape.rank, &axis));
    }
    return ANVIL_OK;
}

static void softmax_line_f32(const float *x, float *y, size_t len, size_t s) {
    float m = x[0];
    for (size_t j = 1; j < len; j++)
        if (x[j * s] > m) m = x[j * s];
    double sum = 0;
    for (size_t j = 0; j < len; j++) {
        float e = expf(x[j * s] - m);
        y[j * s] = e;
        sum += e;
    }
    for (size_t j = 0; j < len; j++) y[j * s] = (float)(y[j * s] / sum);
}

static void softmax_line_f64(const double *x, double *y, size_t len, size_t s) {
    double m = x[0];
    for (size_t j = 1; j < len; j++)
        if (x[j * s] > m) m = x[j * s];
    double sum = 0;
    for (size_t j = 0; j < len; j++) {
        double e = exp(x[j * s] - m);
        y[j * s] = e;
        sum += e;
    }
    for (size_t j = 0; j < len; j++) y[j * s] /= sum;
}

/* f16/bf16: storing the exponentials in the output would round them twice, so they are
 * recomputed in float for the final division instead. */
static void softmax_line_half(const uint16_t *x, uint16_t *y, size_t len, size_t s,
                              float (*ld)(uint16_t), uint16_t (*st)(float)) {
    float m = ld(x[0]);
    for (size_t j = 1; j < len; j++) {
        float v = ld(x[j * s]);
        if (v > m) m = v;
    }
    double sum = 0;
    for (size_t j = 0; j < len; j++) sum += expf(ld(x[j * s]) - m);
    for (size_t j = 0; j < len; j++) y[j * s] = st((float)(expf(ld(x[j * s]) - m) / sum));
}

typedef struct softmax_job {
    anvil_dtype dt;
    const void *x;
    void *y;
    size_t len, inner;
} softmax_job;

/* Lines [begin, end): line k is (outer index k / inner, inner index k % inner). */
static void softmax_chunk(void *arg, size_t begin, size_t end) {
    const softmax_job *j = arg;
    for (size_t k = begin; k < end; k++) {
        size_t base = (k / j->inner) * j->len * j->inner + k % j->inner;
        switch (j->dt) {
        case ANVIL_DTYPE_FLOAT32:
            softmax_line_f32((const float *)j->x + base, (float *)j->y + base, j->len, j->inner);
            break;
        case ANVIL_DTYPE_FLOAT64:
            softmax_line_f64((const double *)j->x + base, (double *)j->y + base, j->len, j->inner);
            break;
        case ANVIL_DTYPE_FLOAT16:
            softmax_line_half((const uint16_t *)j->x + base, (uint16_t *)j->y + base, j->len,
                              j->inner, core_f16_to_f32, core_f32_to_f16);
            break;
        default:
            softmax_line_half((const uint16_t *)j->x + base, (uint16_t *)j->y + base, j->len,
                              j->inner, core_bf16_to_f32, core_f32_to_bf16);
            break;
        }
    }
}

static anvil_status softmax_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const softmax_params *p = n->params;
    const op_tensor *x = in[0];
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    if ((unsigned)x->dtype >= 32 || !((ELT_MASK_FLOAT >> x->dtype) & 1u) ||
        out[0]->dtype != x->dtype)
        return core_err(ANVIL_ERR_INTERNAL, "%s: no kernel for dtype %s", ir_node_label(n),
                        anvil_dtype_name(x->dtype));
    size_t outer = 1, len = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= (size_t)x->dims[d];
    if (n->opset < 13) {
        for (int d = axis; d < x->rank; d++) len *= (size_t)x->dims[d];
    } else {
        len = (size_t)x->dims[axis];
        for (int d = axis + 1; d < x->rank; d++) inner *= (size_t)x->dims[d];
    }
    size_t lines = outer * inner;
    if (lines == 0 || len == 0) return ANVIL_OK;
    softmax_job job = {x->dtype, x->data, out[0]->data, len, inner};
    /* a line is a few hundred operations at least; split when there is real work */
    op_parallel_for(lines * len >= ((size_t)1 << 14) ? ctx : NULL, lines, softmax_chunk, &job);
    return ANVIL_OK;
}

const op_impl op_impl_softmax = {.min_inputs = 1,
                                 .max_inputs = 1,
                                 .min_outputs = 1,
                                 .max_outputs = 1,
                                 .check = softmax_check,
                                 .infer = softmax_infer,
                                 .run = softmax_run};

/* ==== LogSoftmax and Hardmax ==================================================================
 * Their axis semantics follow Softmax (above): before opset 13 the input is coerced to
 * a 2-D matrix [prod(dims[:axis]), prod(dims[axis:])] (axis defaults to 1) and the op runs over
 * each row; from opset 13 it runs over the single dim `axis` (default -1). Both are lines of `len`
 * elements `inner` apart (the old form has inner = 1 and len = the trailing block).
 *
 * LogSoftmax subtracts the line's maximum before exp so that nothing overflows, and sums in double.
 * Hardmax marks the first maximum of each line with 1 (ties go to the lower index). */

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
