/* BatchNormalization in inference mode: Y = (X - mean) / sqrt(var + epsilon) * scale + B.
 *
 * The four parameter vectors are folded once per run into one multiplier and one offset per
 * channel (in double, so the fold itself adds no rounding beyond the final cast), and the kernel
 * is then a single multiply-add per element, split by (batch, channel) plane. Training mode
 * (running statistics, the optional extra outputs) is refused at load so that a model that relies
 * on it fails loudly instead of silently computing inference statistics.
 *
 * Versions: opset 1/6 carry is_test and consumed_inputs (ignored: they only matter for training),
 * opset <= 7 has `spatial` (0: one parameter per channel *and* spatial position), opset 9 drops
 * it, 14 adds training_mode and lets mean/var have their own float type, 15 lets scale/B have
 * theirs. */
#include "ops/nn_common.h"

typedef struct bn_params {
    float epsilon;
    bool spatial; /* false: parameters are C x D1 x ... x Dn instead of C */
} bn_params;

static anvil_status bn_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, bn_params, p);
    CORE_TRY(ir_attr_float(n, "epsilon", 1e-5f, &p->epsilon));
    if (!(p->epsilon >= 0) || isinf(p->epsilon))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'epsilon' is %g; it must be a finite value >= 0",
                        ir_node_label(n), (double)p->epsilon);
    p->spatial = true;
    if (n->opset < 9)
        CORE_TRY(ir_attr_flag(n, "spatial", true, &p->spatial));
    else if (ir_node_attr(n, "spatial"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'spatial' was removed in opset 9 (the model imports opset "
                        "%d); drop it, or flatten the input for per-position statistics",
                        ir_node_label(n), n->opset);
    if (n->opset >= 14) {
        bool training;
        CORE_TRY(ir_attr_flag(n, "training_mode", false, &training));
        if (training)
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: training_mode=1 (batch statistics and running-mean updates) is "
                            "not supported; anvil runs BatchNormalization in inference mode. "
                            "Export the model in eval mode (training_mode=0)",
                            ir_node_label(n));
    }
    int max_out = n->opset >= 14 ? 3 : 5;
    if (n->n_outputs > max_out)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has %d outputs; BatchNormalization at opset %d has at most %d",
                        ir_node_label(n), n->n_outputs, n->opset, max_out);
    for (int k = 1; k < n->n_outputs; k++)
        if (nn_has_output(n, k))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: output %d ('%s') exists only in training mode (running or saved "
                            "statistics); anvil runs inference only. Remove the output from the "
                            "node",
                            ir_node_label(n), k, g->values[n->outputs[k]].name);
    n->params = p;
    return ANVIL_OK;
}

static bool bn_float(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT64 || dt == ANVIL_DTYPE_FLOAT16 ||
           dt == ANVIL_DTYPE_BFLOAT16;
}

/* The input whose dtype input i must equal: all match X before opset 14; from 14 mean/var share a
 * float type of their own, and from 15 scale/B do too. */
static int bn_dtype_ref(int opset, int i) {
    if (i >= 3 && opset >= 14) return 3;
    if (i <= 2 && opset >= 15) return 1;
    return 0;
}

static anvil_status bn_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                             op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const bn_params *p = n->params;
    static const char *const names[5] = {"X", "scale", "B", "mean", "var"};
    const op_tinfo *x = &in[0];
    if (!bn_float(x->dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: X has dtype %s; BatchNormalization takes FLOAT, DOUBLE, FLOAT16 or "
                        "BFLOAT16",
                        ir_node_label(n), anvil_dtype_name(x->dtype));
    for (int i = 1; i < 5; i++) {
        int ref = bn_dtype_ref(n->opset, i);
        if (!bn_float(in[i].dtype) || in[i].dtype != in[ref].dtype)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input '%s' has dtype %s but must be a float type equal to '%s' "
                            "(%s) at opset %d",
                            ir_node_label(n), names[i], anvil_dtype_name(in[i].dtype), names[ref],
                            anvil_dtype_name(in[ref].dtype), n->opset);
    }
    out[0].dtype = x->dtype;
    out[0].shape = x->shape;
    const ir_shape *xs = &x->shape;
    if (xs->rank >= 0 && xs->rank < 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: X has rank %d; expected N x C x D1 x ... x Dn",
                        ir_node_label(n), xs->rank);
    for (int i = 1; i < 5; i++) {
        const ir_shape *ps = &in[i].shape;
        if (ps->rank < 0) continue;
        int want_rank = p->spatial ? 1 : xs->rank - 1;
        bool bad = xs->rank >= 0 ? ps->rank != want_rank : (p->spatial && ps->rank != 1);
        for (int d = 0; !bad && xs->rank >= 0 && d < ps->rank; d++)
            bad = ps->d[d] >= 0 && xs->d[d + 1] >= 0 && ps->d[d] != xs->d[d + 1];
        if (bad) {
            char a[128], b[128];
            return core_err(
                ANVIL_ERR_SHAPE, "%s: input '%s' has shape %s; with X of shape %s it must be %s",
                ir_node_label(n), names[i], ir_shape_str(NULL, ps, a, sizeof a),
                ir_shape_str(NULL, xs, b, sizeof b),
                p->spatial ? "[C] (one value per channel)" : "[C, D1, ..., Dn] (spatial=0)");
        }
    }
    return ANVIL_OK;
}

typedef struct bn_job {
    int64_t C, plane;  /* channels, elements per (batch, channel) plane */
    int64_t per_plane; /* parameters per channel: 1 (spatial) or plane */
    const void *x;
    void *y;
    const void *a, *b; /* folded multiplier and offset, in the compute type */
} bn_job;

#define BN_DEFINE(T, SUF)                                                                          \
    static void bn_range_##SUF(void *arg, size_t begin, size_t end) {                              \
        const bn_job *j = arg;                                                                     \
        for (size_t q = begin; q < end; q++) {                                                     \
            int64_t c = (int64_t)q % j->C;                                                         \
            const T *x = (const T *)j->x + (int64_t)q * j->plane;                                  \
            T *y = (T *)j->y + (int64_t)q * j->plane;                                              \
            const T *a = (const T *)j->a + c * j->per_plane;                                       \
            const T *b = (const T *)j->b + c * j->per_plane;                                       \
            if (j->per_plane == 1)                                                                 \
                for (int64_t i = 0; i < j->plane; i++) y[i] = x[i] * a[0] + b[0];                  \
            else                                                                                   \
                for (int64_t i = 0; i < j->plane; i++) y[i] = x[i] * a[i] + b[i];                  \
        }                                                                                          \
    }

BN_DEFINE(float, f32)
BN_DEFINE(double, f64)

static anvil_status bn_run(const ir_node *n, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const bn_params *p = n->params;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    bn_job j;
    memset(&j, 0, sizeof j);
    j.C = x->dims[1];
    j.plane = nn_prod(x->rank - 2, &x->dims[2]);
    j.per_plane = p->spatial ? 1 : j.plane;
    size_t planes = (size_t)(x->dims[0] * j.C), nparam = (size_t)(j.C * j.per_plane);
    if (planes == 0 || j.plane == 0) return ANVIL_OK;
    for (int i = 1; i < 5; i++)
        if (op_tensor_numel(in[i]) != nparam)
            return core_err(ANVIL_ERR_RUNTIME, "%s: input %d has %zu values but %zu are needed",
                            ir_node_label(n), i, op_tensor_numel(in[i]), nparam);
    bool dbl = x->dtype == ANVIL_DTYPE_FLOAT64;
    size_t es = dbl ? sizeof(double) : sizeof(float);
    void *ab = malloc(2 * nparam * es);
    if (!ab)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu folded parameters",
                        ir_node_label(n), 2 * nparam);
    for (size_t i = 0; i < nparam; i++) {
        double scale = core_load_f64(in[1]->dtype, in[1]->data, i);
        double bias = core_load_f64(in[2]->dtype, in[2]->data, i);
        double mean = core_load_f64(in[3]->dtype, in[3]->data, i);
        double var = core_load_f64(in[4]->dtype, in[4]->data, i);
        double a = scale / sqrt(var + (double)p->epsilon), b = bias - mean * a;
        if (dbl) {
            ((double *)ab)[i] = a;
            ((double *)ab)[nparam + i] = b;
        } else {
            ((float *)ab)[i] = (float)a;
            ((float *)ab)[nparam + i] = (float)b;
        }
    }
    j.a = ab;
    j.b = (const char *)ab + nparam * es;
    anvil_status s = ANVIL_OK;
    if (dbl) {
        j.x = x->data;
        j.y = y->data;
        op_parallel_for(ctx, planes, bn_range_f64, &j);
    } else {
        float *ox = NULL, *oy = NULL;
        j.x = nn_stage_in_f32(n, x, &ox);
        j.y = j.x ? nn_stage_out_f32(n, y, &oy) : NULL;
        if (j.y) {
            op_parallel_for(ctx, planes, bn_range_f32, &j);
            nn_stage_out_f32_finish(y, oy);
        } else {
            s = ANVIL_ERR_OUT_OF_MEMORY;
        }
        free(ox);
    }
    free(ab);
    return s;
}

/* One multiply-add per element, each reading its input before writing: safe in place. */
const op_impl op_impl_batchnormalization = {.min_inputs = 5,
                                            .max_inputs = 5,
                                            .min_outputs = 1,
                                            .max_outputs = 5,
                                            .flags = OP_INPLACE_0,
                                            .check = bn_check,
                                            .infer = bn_infer,
                                            .run = bn_run};
