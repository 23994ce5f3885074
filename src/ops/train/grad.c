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
 *                      MaxPool's attributes, 1-D or 2-D.
 *   anvil.BatchNormTrain and anvil.BatchNormGrad: BatchNormalization with batch statistics, and
 *                      its gradient (below). */
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

/* ---- anvil.BatchNormTrain / anvil.BatchNormGrad -------------------------------------------
 * BatchNormalization as it trains (PyTorch's train mode): statistics of the batch per channel
 * over N and the spatial dims, the running statistics moved toward them by the node's momentum
 * (ONNX's: running = running * momentum + batch * (1 - momentum), default 0.9, PyTorch's 0.1;
 * the running variance takes the unbiased batch variance, as PyTorch's does).
 *   BatchNormTrain (X, scale, B, running_mean, running_var) ->
 *                  (Y, new_running_mean, new_running_var, saved_mean, saved_inv_std)
 *   BatchNormGrad  (dY, X, scale, saved_mean, saved_inv_std) -> (dX, dscale, dB) */

typedef struct bn_params {
    float epsilon, momentum;
} bn_params;

static anvil_status bn_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, bn_params, p);
    CORE_TRY(ir_attr_float(n, "epsilon", 1e-5f, &p->epsilon));
    CORE_TRY(ir_attr_float(n, "momentum", 0.9f, &p->momentum));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status bn_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                             op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    const ir_shape *x = &in[n->op == IR_OP_BATCHNORM_GRAD ? 1 : 0].shape;
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32 || x->rank < 2)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s takes float32 [N, C, ...]", ir_node_label(n),
                        ir_op_name(n->op));
    ir_shape c;
    c.rank = 1;
    c.d[0] = x->d[1];
    c.sym[0] = x->sym[1];
    for (int i = 0; i < n_out; i++) {
        out[i].dtype = ANVIL_DTYPE_FLOAT32;
        out[i].shape = i == 0 ? *x : c;
    }
    return ANVIL_OK;
}

typedef struct bn_job {
    const bn_params *p;
    const float *x, *dy, *scale, *bias, *rm, *rv, *mean, *inv;
    float *y, *nrm, *nrv, *smean, *sinv, *dx, *dscale, *dbias;
    int64_t n, c, area;
} bn_job;

static void bn_train_range(void *arg, size_t begin, size_t end) {
    const bn_job *j = arg;
    const double count = (double)(j->n * j->area);
    for (size_t ch = begin; ch < end; ch++) {
        double s = 0, s2 = 0;
        for (int64_t b = 0; b < j->n; b++) {
            const float *xp = j->x + (b * j->c + (int64_t)ch) * j->area;
            for (int64_t i = 0; i < j->area; i++) s += xp[i];
        }
        const double mean = s / count;
        for (int64_t b = 0; b < j->n; b++) {
            const float *xp = j->x + (b * j->c + (int64_t)ch) * j->area;
            for (int64_t i = 0; i < j->area; i++) s2 += (xp[i] - mean) * (xp[i] - mean);
        }
        const double var = s2 / count, inv = 1.0 / sqrt(var + j->p->epsilon);
        const float a = (float)(j->scale[ch] * inv), c = (float)(j->bias[ch] - mean * a);
        for (int64_t b = 0; b < j->n; b++) {
            const float *xp = j->x + (b * j->c + (int64_t)ch) * j->area;
            float *yp = j->y + (b * j->c + (int64_t)ch) * j->area;
            for (int64_t i = 0; i < j->area; i++) yp[i] = xp[i] * a + c;
        }
        const float m = j->p->momentum;
        const double unbiased = count > 1 ? s2 / (count - 1) : var;
        if (j->nrm) j->nrm[ch] = j->rm[ch] * m + (float)mean * (1.0f - m);
        if (j->nrv) j->nrv[ch] = j->rv[ch] * m + (float)unbiased * (1.0f - m);
        if (j->smean) j->smean[ch] = (float)mean;
        if (j->sinv) j->sinv[ch] = (float)inv;
    }
}

static float *opt_out(op_tensor *const *out, int n_out, int i) {
    return i < n_out && out[i] ? out[i]->data : NULL;
}

static anvil_status bn_train_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    const op_tensor *x = in[0];
    bn_job j = {.p = n->params,
                .x = x->data,
                .scale = in[1]->data,
                .bias = in[2]->data,
                .rm = in[3]->data,
                .rv = in[4]->data,
                .y = out[0]->data,
                .nrm = opt_out(out, n_out, 1),
                .nrv = opt_out(out, n_out, 2),
                .smean = opt_out(out, n_out, 3),
                .sinv = opt_out(out, n_out, 4),
                .n = x->dims[0],
                .c = x->dims[1],
                .area = 1};
    for (int d = 2; d < x->rank; d++) j.area *= x->dims[d];
    op_parallel_for(ctx, (size_t)j.c, bn_train_range, &j);
    return ANVIL_OK;
}

const op_impl op_impl_batchnorm_train = {.min_inputs = 5,
                                         .max_inputs = 5,
                                         .min_outputs = 1,
                                         .max_outputs = 5,
                                         .check = bn_check,
                                         .infer = bn_infer,
                                         .run = bn_train_run};

/* dX = scale * inv / M * (M dY - sum dY - xhat sum(dY xhat)), dscale = sum(dY xhat),
 * dB = sum dY, over the M = N * area values of each channel. */
static void bn_grad_range(void *arg, size_t begin, size_t end) {
    const bn_job *j = arg;
    const double count = (double)(j->n * j->area);
    for (size_t ch = begin; ch < end; ch++) {
        const double mean = j->mean[ch], inv = j->inv[ch];
        double sdy = 0, sdyx = 0;
        for (int64_t b = 0; b < j->n; b++) {
            const int64_t off = (b * j->c + (int64_t)ch) * j->area;
            for (int64_t i = 0; i < j->area; i++) {
                sdy += j->dy[off + i];
                sdyx += j->dy[off + i] * (j->x[off + i] - mean) * inv;
            }
        }
        if (j->dscale) j->dscale[ch] = (float)sdyx;
        if (j->dbias) j->dbias[ch] = (float)sdy;
        if (!j->dx) continue;
        const double k = j->scale[ch] * inv / count;
        for (int64_t b = 0; b < j->n; b++) {
            const int64_t off = (b * j->c + (int64_t)ch) * j->area;
            for (int64_t i = 0; i < j->area; i++) {
                const double xhat = (j->x[off + i] - mean) * inv;
                j->dx[off + i] = (float)(k * (count * j->dy[off + i] - sdy - xhat * sdyx));
            }
        }
    }
}

static anvil_status bn_grad_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    const op_tensor *x = in[1];
    bn_job j = {.p = n->params,
                .dy = in[0]->data,
                .x = x->data,
                .scale = in[2]->data,
                .mean = in[3]->data,
                .inv = in[4]->data,
                .dx = opt_out(out, n_out, 0),
                .dscale = opt_out(out, n_out, 1),
                .dbias = opt_out(out, n_out, 2),
                .n = x->dims[0],
                .c = x->dims[1],
                .area = 1};
    for (int d = 2; d < x->rank; d++) j.area *= x->dims[d];
    op_parallel_for(ctx, (size_t)j.c, bn_grad_range, &j);
    return ANVIL_OK;
}

const op_impl op_impl_batchnorm_grad = {.min_inputs = 5,
                                        .max_inputs = 5,
                                        .min_outputs = 1,
                                        .max_outputs = 3,
                                        .check = bn_check,
                                        .infer = bn_infer,
                                        .run = bn_grad_run};

/* ---- anvil.LayerNormGrad ------------------------------------------------------------------
 * (dY, X, scale) -> (dX, dscale, dbias) of LayerNormalization over the dims from `axis` on
 * (attributes axis, epsilon as the forward node's; scale and bias of those dims' shape). The
 * statistics are recomputed from X: the forward node need not keep them. Per row of D values:
 *   xhat = (x - mean) * inv, g = dY * scale,
 *   dX = inv * (g - mean(g) - xhat * mean(g * xhat)), dscale += dY * xhat, dbias += dY. */

typedef struct ln_params {
    int64_t axis;
    float epsilon;
} ln_params;

static anvil_status ln_grad_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, ln_params, p);
    CORE_TRY(ir_attr_int(n, "axis", -1, &p->axis));
    CORE_TRY(ir_attr_float(n, "epsilon", 1e-5f, &p->epsilon));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status ln_grad_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32 || in[1].dtype != ANVIL_DTYPE_FLOAT32)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s takes float32", ir_node_label(n),
                        ir_op_name(n->op));
    for (int i = 0; i < n_out; i++) {
        out[i].dtype = ANVIL_DTYPE_FLOAT32;
        out[i].shape = i == 0 ? in[1].shape : in[2].shape;
    }
    return ANVIL_OK;
}

static anvil_status ln_grad_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    const ln_params *p = n->params;
    const op_tensor *x = in[1];
    const int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
    if (axis < 0 || axis >= x->rank)
        return core_err(ANVIL_ERR_SHAPE, "%s: axis %lld is outside X's rank %d", ir_node_label(n),
                        (long long)p->axis, x->rank);
    int64_t rows = 1, d = 1;
    for (int i = 0; i < x->rank; i++) *(i < axis ? &rows : &d) *= x->dims[i];
    if (op_tensor_numel(in[2]) != (size_t)d)
        return core_err(ANVIL_ERR_SHAPE, "%s: scale must hold the normalized dims' %lld values",
                        ir_node_label(n), (long long)d);
    const float *dy = in[0]->data, *xs = x->data, *scale = in[2]->data;
    float *dx = opt_out(out, n_out, 0), *ds = opt_out(out, n_out, 1), *db = opt_out(out, n_out, 2);
    if (ds) memset(ds, 0, sizeof(float) * (size_t)d);
    if (db) memset(db, 0, sizeof(float) * (size_t)d);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = xs + r * d, *gr = dy + r * d;
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < d; i++) s += xr[i];
        const double mean = s / (double)d;
        for (int64_t i = 0; i < d; i++) s2 += (xr[i] - mean) * (xr[i] - mean);
        const double inv = 1.0 / sqrt(s2 / (double)d + p->epsilon);
        double mg = 0, mgx = 0;
        for (int64_t i = 0; i < d; i++) {
            const double xhat = (xr[i] - mean) * inv, g = (double)gr[i] * scale[i];
            mg += g;
            mgx += g * xhat;
            if (ds) ds[i] += (float)(gr[i] * xhat);
            if (db) db[i] += gr[i];
        }
        mg /= (double)d;
        mgx /= (double)d;
        if (!dx) continue;
        for (int64_t i = 0; i < d; i++) {
            const double xhat = (xr[i] - mean) * inv, g = (double)gr[i] * scale[i];
            dx[r * d + i] = (float)(inv * (g - mg - xhat * mgx));
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_layernorm_grad = {.min_inputs = 3,
                                        .max_inputs = 3,
                                        .min_outputs = 1,
                                        .max_outputs = 3,
                                        .check = ln_grad_check,
                                        .infer = ln_grad_infer,
                                        .run = ln_grad_run};

/* ---- anvil.DropoutTrain ---------------------------------------------------------------------
 * (X, seed) -> (Y, mask): Dropout as it trains. Element i is kept with probability 1 - ratio:
 * mask[i] = 1 / (1 - ratio) where kept, else 0, and Y = X * mask. The draw is a hash of (seed,
 * salt, i) (splitmix64), so a mask depends on neither the thread count nor the order of the
 * work, and a step's seed reproduces it. Attributes: ratio (in [0, 1)), salt (the node's own
 * stream: two dropouts of one step draw different masks). The gradient is dY * mask. */

typedef struct dropout_train_params {
    float ratio;
    int64_t salt;
} dropout_train_params;

static anvil_status dropout_train_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, dropout_train_params, p);
    CORE_TRY(ir_attr_float(n, "ratio", 0.5f, &p->ratio));
    CORE_TRY(ir_attr_int(n, "salt", 0, &p->salt));
    if (!(p->ratio >= 0.0f && p->ratio < 1.0f))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: ratio is %g; it must lie in [0, 1)",
                        ir_node_label(n), (double)p->ratio);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status dropout_train_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                        int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32 || in[1].dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s takes float32 X and an int64 seed",
                        ir_node_label(n), ir_op_name(n->op));
    for (int i = 0; i < n_out; i++) {
        out[i].dtype = ANVIL_DTYPE_FLOAT32;
        out[i].shape = in[0].shape;
    }
    return ANVIL_OK;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static anvil_status dropout_train_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                      op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    const dropout_train_params *p = n->params;
    const float *x = in[0]->data;
    const uint64_t base = mix64((uint64_t) * (const int64_t *)in[1]->data * 0x9e3779b97f4a7c15ull +
                                (uint64_t)p->salt);
    const float keep = 1.0f / (1.0f - p->ratio);
    const uint64_t cut = (uint64_t)((double)p->ratio * 18446744073709551616.0);
    float *y = out[0]->data, *mask = opt_out(out, n_out, 1);
    const size_t count = op_tensor_numel(out[0]);
    for (size_t i = 0; i < count; i++) {
        const float m = mix64(base + i) >= cut ? keep : 0.0f;
        y[i] = x[i] * m;
        if (mask) mask[i] = m;
    }
    return ANVIL_OK;
}

const op_impl op_impl_dropout_train = {.min_inputs = 2,
                                       .max_inputs = 2,
                                       .min_outputs = 1,
                                       .max_outputs = 2,
                                       .check = dropout_train_check,
                                       .infer = dropout_train_infer,
                                       .run = dropout_train_run};
