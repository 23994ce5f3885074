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

/* All three ops: the axis attribute (its default changed with the semantics in opset 13). */
typedef struct smx_params {
    int64_t axis;
} smx_params;

static anvil_status smx_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, smx_params, p);
    CORE_TRY(ir_attr_int(n, "axis", n->opset < 13 ? 1 : -1, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status smx_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    const smx_params *p = n->params;
    CORE_TRY(op_elt_unary_infer(n, in, n_in, out, n_out, ELT_MASK_FLOAT));
    if (in[0].shape.rank >= 0) {
        int axis;
        CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, in[0].shape.rank, &axis));
    }
    return ANVIL_OK;
}

/* x as lines of `len` elements `inner` apart (see the top of the file): from opset 13 the dim
 * `axis` between the outer and inner blocks; before, the whole trailing block from `axis` on. */
static anvil_status smx_lines(const ir_node *n, const op_tensor *x, size_t *outer, size_t *len,
                              size_t *inner) {
    const smx_params *p = n->params;
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    red_split(x, axis, outer, len, inner);
    if (n->opset < 13) {
        *len *= *inner;
        *inner = 1;
    }
    return ANVIL_OK;
}

/* ---- Softmax -------------------------------------------------------------------------------- */

/* Defines softmax_line_<tag>: softmax over one line of `len` elements `s` apart, in T (float or
 * double) with the sum in double. */
#define SMX_DEF_LINE(tag, T)                                                                       \
    static void softmax_line_##tag(const T *x, T *y, size_t len, size_t s) {                       \
        T m = x[0];                                                                                \
        for (size_t j = 1; j < len; j++)                                                           \
            if (x[j * s] > m) m = x[j * s];                                                        \
        double sum = 0;                                                                            \
        for (size_t j = 0; j < len; j++) {                                                         \
            T e = ELT_MATH(exp, x[j * s] - m);                                                     \
            y[j * s] = e;                                                                          \
            sum += e;                                                                              \
        }                                                                                          \
        for (size_t j = 0; j < len; j++) y[j * s] = (T)(y[j * s] / sum);                           \
    }
SMX_DEF_LINE(f32, float)
SMX_DEF_LINE(f64, double)

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

/* One line of the job (j->what: the dtype). */
static void softmax_line(const red_line_job *j, size_t k, size_t base) {
    (void)k;
    switch ((anvil_dtype)j->what) {
    case ANVIL_DTYPE_FLOAT32:
        softmax_line_f32((const float *)j->x + base, (float *)j->y + base, j->len, j->inner);
        break;
    case ANVIL_DTYPE_FLOAT64:
        softmax_line_f64((const double *)j->x + base, (double *)j->y + base, j->len, j->inner);
        break;
    case ANVIL_DTYPE_FLOAT16:
        softmax_line_half((const uint16_t *)j->x + base, (uint16_t *)j->y + base, j->len, j->inner,
                          core_f16_to_f32, core_f32_to_f16);
        break;
    default:
        softmax_line_half((const uint16_t *)j->x + base, (uint16_t *)j->y + base, j->len, j->inner,
                          core_bf16_to_f32, core_f32_to_bf16);
        break;
    }
}

static anvil_status softmax_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *x = in[0];
    size_t outer, len, inner;
    CORE_TRY(smx_lines(n, x, &outer, &len, &inner));
    if (!red_dtype_in(x->dtype, RED_MASK_FLOAT) || out[0]->dtype != x->dtype)
        return core_err(ANVIL_ERR_INTERNAL, "%s: no kernel for dtype %s", ir_node_label(n),
                        anvil_dtype_name(x->dtype));
    size_t lines = outer * inner;
    if (lines == 0 || len == 0) return ANVIL_OK;
    red_line_job job = {softmax_line, x->data, out[0]->data, len, inner, (int)x->dtype};
    /* a line is a few hundred operations at least; split when there is real work */
    red_lines_run(lines * len >= ((size_t)1 << 14) ? ctx : NULL, lines, &job);
    return ANVIL_OK;
}

ELT_IMPL(softmax, 1, 1, 0, smx_check, smx_infer, softmax_run)

/* ---- LogSoftmax and Hardmax ------------------------------------------------------------------
 *
 * LogSoftmax subtracts the line's maximum before exp so that nothing overflows, and sums in double.
 * Hardmax marks the first maximum of each line with 1 (ties go to the lower index). */

static anvil_status smx_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0];
    void *y = out[0]->data;
    anvil_dtype dt = x->dtype;
    bool hard = n->op == IR_OP_HARDMAX;
    size_t outer, len, inner;
    CORE_TRY(smx_lines(n, x, &outer, &len, &inner));
    if (len == 0) return ANVIL_OK;
    for (size_t k = 0; k < outer * inner; k++) {
        size_t base = red_line_base(k, len, inner), best = 0;
        for (size_t j = 1; j < len; j++)
            if (red_cmp(dt, x->data, base + j * inner, base + best * inner) > 0) best = j;
        if (hard) {
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
    return ANVIL_OK;
}

ELT_IMPL(logsoftmax, 1, 1, 0, smx_check, smx_infer, smx_run)
ELT_IMPL(hardmax, 1, 1, 0, smx_check, smx_infer, smx_run)
