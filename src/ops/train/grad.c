/* Backward ops that training graphs use (src/autodiff) where no ONNX op computes the gradient
 * directly. Each reference kernel is written from the definition, in plain loops, so that it is
 * the oracle for faster variants and for the gradient checks against finite differences.
 *
 *   anvil.ActGrad      (dY, X) -> dX = dY * act'(X), act from the attributes "act" (ir_act_name),
 *                      "alpha", "beta", "lo", "hi" as in an ir_fusion (Relu's derivative at 0
 *                      is 0, as in PyTorch).
 *   anvil.ConvGradW    (X, dY) -> dW [M, C/group, k...], the weight gradient of a Conv with the
 *                      same attributes (kernel_shape required), 1-D or 2-D.
 *   anvil.MaxPoolGrad  (dY, X) -> dX: each output's gradient goes to the first largest input of
 *                      its window (padding never wins), as PyTorch's max_pool2d backward does;
 *                      MaxPool's attributes, 1-D or 2-D. */
#include "ops/nn_common.h"

/* ---- anvil.ActGrad ------------------------------------------------------------------------ */

static anvil_status act_grad_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, ir_fusion, f);
    const char *act;
    CORE_TRY(ir_attr_string(n, "act", "none", &act));
    f->bias = f->residual = -1;
    if (!ir_act_from_name(act, &f->act))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'act' is \"%s\", no activation",
                        ir_node_label(n), act);
    CORE_TRY(ir_attr_float(n, "alpha", 0.01f, &f->alpha));
    CORE_TRY(ir_attr_float(n, "beta", 0.5f, &f->beta));
    CORE_TRY(ir_attr_float(n, "lo", -INFINITY, &f->lo));
    CORE_TRY(ir_attr_float(n, "hi", INFINITY, &f->hi));
    n->params = f;
    return ANVIL_OK;
}

static anvil_status same_f32_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32 || in[1].dtype != ANVIL_DTYPE_FLOAT32)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s takes float32 tensors", ir_node_label(n),
                        ir_op_name(n->op));
    out[0].dtype = ANVIL_DTYPE_FLOAT32;
    out[0].shape = in[n->op == IR_OP_MAXPOOL_GRAD ? 1 : 0].shape;
    return ANVIL_OK;
}

static float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

/* d act(x) / dx */
static float act_derivative(const ir_fusion *f, float x) {
    switch (f->act) {
    case IR_ACT_NONE:
        return 1.0f;
    case IR_ACT_RELU:
        return x > 0.0f ? 1.0f : 0.0f;
    case IR_ACT_CLIP:
        return x > f->lo && x < f->hi ? 1.0f : 0.0f;
    case IR_ACT_LEAKY_RELU:
        return x < 0.0f ? f->alpha : 1.0f;
    case IR_ACT_SIGMOID: {
        const float s = sigmoid(x);
        return s * (1.0f - s);
    }
    case IR_ACT_TANH: {
        const float t = tanhf(x);
        return 1.0f - t * t;
    }
    case IR_ACT_GELU_ERF: {
        const float pdf = expf(-0.5f * x * x) / sqrtf(2.0f * 3.14159265358979f);
        return 0.5f * (1.0f + erff(x / sqrtf(2.0f))) + x * pdf;
    }
    case IR_ACT_GELU_TANH: {
        const float c = sqrtf(2.0f / 3.14159265358979f);
        const float u = c * (x + 0.044715f * x * x * x), t = tanhf(u);
        return 0.5f * (1.0f + t) +
               0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case IR_ACT_HARD_SIGMOID: {
        const float y = f->alpha * x + f->beta;
        return y > 0.0f && y < 1.0f ? f->alpha : 0.0f;
    }
    case IR_ACT_HARD_SWISH:
        return x < -3.0f ? 0.0f : x > 3.0f ? 1.0f : x / 3.0f + 0.5f;
    case IR_ACT_SILU: {
        const float s = sigmoid(x);
        return s + x * s * (1.0f - s);
    }
    }
    return 1.0f;
}

static anvil_status act_grad_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const ir_fusion *f = n->params;
    const float *dy = in[0]->data, *x = in[1]->data;
    float *dx = out[0]->data;
    const size_t count = op_tensor_numel(out[0]);
    if (op_tensor_numel(in[0]) != count)
        return core_err(ANVIL_ERR_SHAPE, "%s: dY and X must have the same shape", ir_node_label(n));
    for (size_t i = 0; i < count; i++) dx[i] = dy[i] * act_derivative(f, x[i]);
    return ANVIL_OK;
}

const op_impl op_impl_act_grad = {.min_inputs = 2,
                                  .max_inputs = 2,
                                  .min_outputs = 1,
                                  .max_outputs = 1,
                                  .check = act_grad_check,
                                  .infer = same_f32_infer,
                                  .run = act_grad_run};

/* ---- window geometry shared by ConvGradW and MaxPoolGrad ----------------------------------- */

typedef struct grad_window {
    nn_window win;
    int64_t group; /* ConvGradW */
} grad_window;

/* The 2-D view of a 1-D or 2-D window over X's spatial dims xs (rank - 2 of them): geometry with
 * H = 1 for 1-D. */
static anvil_status window_geom(const ir_node *n, const grad_window *w, int rank, const int64_t *xs,
                                bool pool, nn_geom *g2) {
    const int nsp = rank - 2;
    if (nsp != 1 && nsp != 2)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s takes 1-D or 2-D windows; got rank %d",
                        ir_node_label(n), ir_op_name(n->op), rank);
    if (w->win.n_kernel != (size_t)nsp)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'kernel_shape' needs %d values (one per spatial dim)",
                        ir_node_label(n), nsp);
    nn_geom g;
    CORE_TRY(nn_window_resolve(n, &w->win, nsp, xs, w->win.kernel, pool, &g));
    if (nsp == 2) {
        *g2 = g;
        return ANVIL_OK;
    }
    memset(g2, 0, sizeof *g2);
    g2->nsp = 2;
    g2->in[0] = g2->out[0] = g2->kernel[0] = g2->stride[0] = g2->dil[0] = 1;
    g2->in[1] = g.in[0];
    g2->out[1] = g.out[0];
    g2->kernel[1] = g.kernel[0];
    g2->stride[1] = g.stride[0];
    g2->dil[1] = g.dil[0];
    g2->pad_begin[1] = g.pad_begin[0];
    g2->pad_end[1] = g.pad_end[0];
    return ANVIL_OK;
}

static anvil_status window_check(ir_graph *g, ir_node *n, bool conv) {
    OP_PARAMS_NEW(g, grad_window, w);
    CORE_TRY(nn_window_parse(n, true, true, !conv, &w->win));
    CORE_TRY(ir_attr_int(n, "group", 1, &w->group));
    if (w->group < 1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'group' must be >= 1",
                        ir_node_label(n));
    n->params = w;
    return ANVIL_OK;
}

/* ---- anvil.ConvGradW ----------------------------------------------------------------------- */

static anvil_status conv_grad_w_check(ir_graph *g, ir_node *n) {
    return window_check(g, n, true);
}

static anvil_status conv_grad_w_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                      int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const grad_window *w = n->params;
    const ir_shape *x = &in[0].shape, *dy = &in[1].shape;
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32 || in[1].dtype != ANVIL_DTYPE_FLOAT32 || x->rank < 3 ||
        dy->rank != x->rank || x->rank - 2 != (int)w->win.n_kernel)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: X and dY must be float32 of one rank, 2 + the kernel's dims",
                        ir_node_label(n));
    ir_shape o;
    o.rank = x->rank;
    o.d[0] = dy->d[1];
    o.sym[0] = dy->sym[1];
    o.d[1] = x->d[1] >= 0 ? x->d[1] / w->group : IR_DIM_UNKNOWN;
    o.sym[1] = -1;
    for (size_t i = 0; i < w->win.n_kernel; i++) {
        o.d[2 + i] = w->win.kernel[i];
        o.sym[2 + i] = -1;
    }
    out[0].dtype = ANVIL_DTYPE_FLOAT32;
    out[0].shape = o;
    return ANVIL_OK;
}

typedef struct conv_grad_job {
    const float *x, *dy;
    float *dw;
    nn_geom g;
    int64_t n, c, m, group;
} conv_grad_job;

/* dW rows [begin, end) of the flattened [M] output channels */
static void conv_grad_w_range(void *arg, size_t begin, size_t end) {
    const conv_grad_job *j = arg;
    const nn_geom *g = &j->g;
    const int64_t cg = j->c / j->group, mg = j->m / j->group;
    const int64_t ih = g->in[0], iw = g->in[1], oh = g->out[0], ow = g->out[1];
    const int64_t kh = g->kernel[0], kw = g->kernel[1];
    for (size_t mm = begin; mm < end; mm++) {
        const int64_t m = (int64_t)mm, grp = m / mg;
        for (int64_t c = 0; c < cg; c++)
            for (int64_t ky = 0; ky < kh; ky++)
                for (int64_t kx = 0; kx < kw; kx++) {
                    double acc = 0;
                    for (int64_t b = 0; b < j->n; b++) {
                        const float *dyp = j->dy + (b * j->m + m) * oh * ow;
                        const float *xp = j->x + (b * j->c + grp * cg + c) * ih * iw;
                        for (int64_t oy = 0; oy < oh; oy++) {
                            const int64_t y = oy * g->stride[0] - g->pad_begin[0] + ky * g->dil[0];
                            if (y < 0 || y >= ih) continue;
                            for (int64_t ox = 0; ox < ow; ox++) {
                                const int64_t x =
                                    ox * g->stride[1] - g->pad_begin[1] + kx * g->dil[1];
                                if (x >= 0 && x < iw)
                                    acc += (double)dyp[oy * ow + ox] * xp[y * iw + x];
                            }
                        }
                    }
                    j->dw[((m * cg + c) * kh + ky) * kw + kx] = (float)acc;
                }
    }
}

static anvil_status conv_grad_w_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                    op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const grad_window *w = n->params;
    const op_tensor *x = in[0], *dy = in[1];
    conv_grad_job j = {x->data,    dy->data,   out[0]->data, {0},
                       x->dims[0], x->dims[1], dy->dims[1],  w->group};
    CORE_TRY(window_geom(n, w, x->rank, x->dims + 2, false, &j.g));
    if (j.c % w->group || j.m % w->group)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: channels %lld and %lld are not multiples of group %lld",
                        ir_node_label(n), (long long)j.c, (long long)j.m, (long long)w->group);
    if (dy->dims[0] != j.n || op_tensor_numel(dy) != (size_t)(j.n * j.m * j.g.out[0] * j.g.out[1]))
        return core_err(ANVIL_ERR_SHAPE, "%s: dY's shape is not the conv's output shape",
                        ir_node_label(n));
    op_parallel_for(ctx, (size_t)j.m, conv_grad_w_range, &j);
    return ANVIL_OK;
}

const op_impl op_impl_conv_grad_w = {.min_inputs = 2,
                                     .max_inputs = 2,
                                     .min_outputs = 1,
                                     .max_outputs = 1,
                                     .check = conv_grad_w_check,
                                     .infer = conv_grad_w_infer,
                                     .run = conv_grad_w_run};

/* ---- anvil.MaxPoolGrad --------------------------------------------------------------------- */

static anvil_status max_pool_grad_check(ir_graph *g, ir_node *n) {
    return window_check(g, n, false);
}

typedef struct pool_grad_job {
    const float *dy, *x;
    float *dx;
    nn_geom g;
} pool_grad_job;

/* planes [begin, end) of N x C */
static void max_pool_grad_range(void *arg, size_t begin, size_t end) {
    const pool_grad_job *j = arg;
    const nn_geom *g = &j->g;
    const int64_t ih = g->in[0], iw = g->in[1], oh = g->out[0], ow = g->out[1];
    for (size_t p = begin; p < end; p++) {
        const float *xp = j->x + (int64_t)p * ih * iw, *dyp = j->dy + (int64_t)p * oh * ow;
        float *dxp = j->dx + (int64_t)p * ih * iw;
        memset(dxp, 0, sizeof(float) * (size_t)(ih * iw));
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t best = -1;
                float bv = -INFINITY;
                for (int64_t ky = 0; ky < g->kernel[0]; ky++) {
                    const int64_t y = oy * g->stride[0] - g->pad_begin[0] + ky * g->dil[0];
                    if (y < 0 || y >= ih) continue;
                    for (int64_t kx = 0; kx < g->kernel[1]; kx++) {
                        const int64_t x = ox * g->stride[1] - g->pad_begin[1] + kx * g->dil[1];
                        if (x < 0 || x >= iw) continue;
                        if (best < 0 || xp[y * iw + x] > bv) {
                            bv = xp[y * iw + x];
                            best = y * iw + x;
                        }
                    }
                }
                if (best >= 0) dxp[best] += dyp[oy * ow + ox];
            }
    }
}

static anvil_status max_pool_grad_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                      op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const grad_window *w = n->params;
    const op_tensor *dy = in[0], *x = in[1];
    pool_grad_job j = {dy->data, x->data, out[0]->data, {0}};
    CORE_TRY(window_geom(n, w, x->rank, x->dims + 2, true, &j.g));
    const size_t planes = (size_t)(x->dims[0] * x->dims[1]);
    if (op_tensor_numel(dy) != planes * (size_t)(j.g.out[0] * j.g.out[1]))
        return core_err(ANVIL_ERR_SHAPE, "%s: dY's shape is not the pool's output shape",
                        ir_node_label(n));
    op_parallel_for(ctx, planes, max_pool_grad_range, &j);
    return ANVIL_OK;
}

const op_impl op_impl_max_pool_grad = {.min_inputs = 2,
                                       .max_inputs = 2,
                                       .min_outputs = 1,
                                       .max_outputs = 1,
                                       .check = max_pool_grad_check,
                                       .infer = same_f32_infer,
                                       .run = max_pool_grad_run};
