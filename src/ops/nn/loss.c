/* Losses: NegativeLogLikelihoodLoss (opsets 12, 13, 22) and SoftmaxCrossEntropyLoss (12, 13).
 *
 * Input is (N, C, d1..dk) and target (N, d1..dk) holds class indices. The element loss is
 * -input[n, target, d...] * weight[target] (weight 1 without the weight input); an element whose
 * target equals ignore_index (when the attribute is given) contributes nothing and weighs 0.
 * reduction "none" keeps the element losses, "sum" adds them, "mean" divides the sum by the sum
 * of the weights that took part (the element count when unweighted): a weighted mean, as the ONNX
 * function bodies define it. SoftmaxCrossEntropyLoss first takes log-softmax over the class axis
 * (subtracting each line's maximum first) and can return it as its second output. Sums are in
 * double. */
#include "ops/nn_common.h"
#include "ops/reduce_common.h"

#include <stdlib.h>
#include <string.h>

typedef enum loss_reduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN } loss_reduction;

typedef struct loss_params {
    loss_reduction red;
    bool has_ignore, softmax;
    int64_t ignore;
} loss_params;

static anvil_status loss_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, loss_params, p);
    CORE_TRY(nn_check_since(n, ir_op_name(n->op), 12));
    p->softmax = n->op == IR_OP_SOFTMAXCROSSENTROPYLOSS;
    const char *r;
    CORE_TRY(ir_attr_string(n, "reduction", "mean", &r));
    if (strcmp(r, "none") == 0)
        p->red = LOSS_NONE;
    else if (strcmp(r, "sum") == 0)
        p->red = LOSS_SUM;
    else if (strcmp(r, "mean") == 0)
        p->red = LOSS_MEAN;
    else
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'reduction' is '%s'; expected none, sum or mean",
                        ir_node_label(n), r);
    p->has_ignore = ir_node_attr(n, "ignore_index") != NULL;
    CORE_TRY(ir_attr_int(n, "ignore_index", 0, &p->ignore));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status loss_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    const loss_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    if (in[1].dtype != ANVIL_DTYPE_INT64 && in[1].dtype != ANVIL_DTYPE_INT32)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: input 1 (target) must be INT32 or INT64 but is %s", ir_node_label(n),
                        anvil_dtype_name(in[1].dtype));
    bool has_w = n_in > 2 && n->inputs[2] != IR_NONE;
    if (has_w && in[2].dtype != in[0].dtype)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: input 2 (weight) is %s but input 0 is %s",
                        ir_node_label(n), anvil_dtype_name(in[2].dtype),
                        anvil_dtype_name(in[0].dtype));
    const ir_shape *x = &in[0].shape, *t = &in[1].shape;
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    if (n_out > 1) out[1] = (op_tinfo){in[0].dtype, *x, NULL};
    if (x->rank >= 0 && x->rank < 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 must have rank >= 2 (N, C, ...), got %d",
                        ir_node_label(n), x->rank);
    if (x->rank >= 0 && t->rank >= 0) {
        bool ok = t->rank == x->rank - 1;
        for (int d = 0; ok && d < t->rank; d++) {
            int64_t xd = x->d[d == 0 ? 0 : d + 1], td = t->d[d];
            ok = xd < 0 || td < 0 || xd == td;
        }
        if (!ok)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input 1 (target) must have the shape of input 0 without its "
                            "class dim 1 (N, d1, ..., dk)",
                            ir_node_label(n));
    }
    if (has_w && in[2].shape.rank >= 0 &&
        (in[2].shape.rank != 1 ||
         (x->rank >= 2 && x->d[1] >= 0 && in[2].shape.d[0] >= 0 && in[2].shape.d[0] != x->d[1])))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 2 (weight) must be 1-D with one value per class",
                        ir_node_label(n));
    if (p->red != LOSS_NONE)
        ir_shape_set(&out[0].shape, 0, NULL);
    else if (t->rank >= 0)
        out[0].shape = *t;
    return ANVIL_OK;
}

static anvil_status loss_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)ctx;
    const loss_params *p = n->params;
    const op_tensor *x = in[0], *t = in[1];
    const op_tensor *w = n_in > 2 ? in[2] : NULL;
    anvil_dtype dt = x->dtype;
    size_t nb, c, inner;
    red_split(x, 1, &nb, &c, &inner);
    if (op_tensor_numel(t) != nb * inner)
        return core_err(ANVIL_ERR_RUNTIME, "%s: input 1 (target) has %zu elements, expected %zu",
                        ir_node_label(n), op_tensor_numel(t), nb * inner);
    if (w && op_tensor_numel(w) != c)
        return core_err(ANVIL_ERR_RUNTIME, "%s: input 2 (weight) has %zu elements, expected %zu",
                        ir_node_label(n), op_tensor_numel(w), c);
    /* log-probabilities: the input itself (NLL) or its log-softmax over dim 1 (SCE) */
    const op_tensor *lp = x;
    op_tensor scratch;
    double *own = NULL;
    op_tensor *lp_out = n_out > 1 ? out[1] : NULL;
    if (p->softmax) {
        size_t bytes;
        if (!core_mul_size(op_tensor_numel(x), sizeof(double), &bytes))
            return core_err(ANVIL_ERR_LIMIT, "%s: scratch size overflows", ir_node_label(n));
        own = core_alloc(bytes ? bytes : 1);
        if (!own) return ANVIL_ERR_OUT_OF_MEMORY;
        for (size_t a = 0; a < nb; a++)
            for (size_t b = 0; b < inner; b++) {
                size_t base = a * c * inner + b;
                double m = -INFINITY, s = 0;
                for (size_t k = 0; k < c; k++) {
                    double v = core_load_f64(dt, x->data, base + k * inner);
                    if (v > m) m = v;
                }
                for (size_t k = 0; k < c; k++)
                    s += exp(core_load_f64(dt, x->data, base + k * inner) - m);
                double lse = m + log(s);
                for (size_t k = 0; k < c; k++) {
                    size_t at = base + k * inner;
                    own[at] = core_load_f64(dt, x->data, at) - lse;
                    if (lp_out) core_store_f64(dt, lp_out->data, at, own[at]);
                }
            }
        scratch = *x;
        scratch.dtype = ANVIL_DTYPE_FLOAT64;
        scratch.data = own;
        lp = &scratch;
    }
    double sum = 0, wsum = 0;
    anvil_status st = ANVIL_OK;
    for (size_t a = 0; a < nb && st == ANVIL_OK; a++)
        for (size_t b = 0; b < inner; b++) {
            size_t ti = a * inner + b;
            int64_t cls = core_load_i64(t->dtype, t->data, ti);
            double l = 0, wt = 0;
            if (!(p->has_ignore && cls == p->ignore)) {
                if (cls < 0 || (uint64_t)cls >= c) {
                    st = core_err(ANVIL_ERR_RUNTIME,
                                  "%s: target %lld at position %zu is not a class index in "
                                  "[0, %zu) nor ignore_index",
                                  ir_node_label(n), (long long)cls, ti, c);
                    break;
                }
                wt = w ? core_load_f64(w->dtype, w->data, (size_t)cls) : 1.0;
                l = -core_load_f64(lp->dtype, lp->data, a * c * inner + (size_t)cls * inner + b) *
                    wt;
            }
            if (p->red == LOSS_NONE) core_store_f64(dt, out[0]->data, ti, l);
            sum += l;
            wsum += wt;
        }
    free(own);
    if (st != ANVIL_OK) return st;
    if (p->red == LOSS_SUM) core_store_f64(dt, out[0]->data, 0, sum);
    if (p->red == LOSS_MEAN) core_store_f64(dt, out[0]->data, 0, sum / wsum);
    return ANVIL_OK;
}

const op_impl op_impl_negativeloglikelihoodloss = {.min_inputs = 2,
                                                   .max_inputs = 3,
                                                   .min_outputs = 1,
                                                   .max_outputs = 1,
                                                   .check = loss_check,
                                                   .infer = loss_infer,
                                                   .run = loss_run};

const op_impl op_impl_softmaxcrossentropyloss = {.min_inputs = 2,
                                                 .max_inputs = 3,
                                                 .min_outputs = 1,
                                                 .max_outputs = 2,
                                                 .check = loss_check,
                                                 .infer = loss_infer,
                                                 .run = loss_run};
