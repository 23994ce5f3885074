/* The gradient rules: for a forward node and the gradients of its outputs, the nodes that compute
 * the gradients of its inputs (only of the inputs that depend on a parameter: c->need). Every
 * rule reads shapes from the graph, which are static (ad_build). */
#include "ad_impl.h"

#include "ops/nn_common.h"

#include <string.h>

typedef struct rule_io {
    ir_node n; /* a copy: adding nodes moves the graph's node array */
    ir_vid x[8], y, dy;
    ir_vid dys[16]; /* every output's gradient (IR_NONE where none reached it); dy is dys[0] */
    int n_x;
} rule_io;

static bool needs(const ad_ctx *c, const rule_io *r, int i) {
    return i < r->n_x && r->x[i] != IR_NONE && c->need[r->x[i]];
}

/* A copy: every node a rule adds may move the graph's value array. */
static ir_shape shape_of(const ad_ctx *c, ir_vid v) {
    return c->g->values[v].shape;
}

static int norm_axis(int64_t axis, int rank) {
    return (int)(axis < 0 ? axis + rank : axis);
}

anvil_status ad_unsupported(const ir_node *n, const char *why) {
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: no gradient rule%s%s; anvil cannot train through this node (make the "
                    "weights before it constants, or change the op)",
                    ir_node_label(n), why ? " for " : "", why ? why : "");
}

static anvil_status unsupported(const ir_node *n, const char *why) {
    return ad_unsupported(n, why);
}

static anvil_status node1(ad_ctx *c, ir_op op, ir_vid a, ir_vid b, ir_vid *out) {
    const ir_vid ins[2] = {a, b};
    return ad_node(c, op, ins, b == IR_NONE ? 1 : 2, NULL, 0, out);
}

/* a with its last two dims swapped */
static anvil_status swap_last2(ad_ctx *c, ir_vid a, ir_vid *out) {
    const int r = shape_of(c, a).rank;
    int64_t perm[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 1] = r - 2;
    perm[r - 2] = r - 1;
    const ir_attr at = ad_ints(c, "perm", perm, r);
    return ad_node(c, IR_OP_TRANSPOSE, &a, 1, &at, 1, out);
}

static anvil_status reshape_to(ad_ctx *c, ir_vid a, int rank, const int64_t *dims, ir_vid *out) {
    ir_vid s;
    CORE_TRY(ad_const_i64(c, rank, dims, &s));
    return node1(c, IR_OP_RESHAPE, a, s, out);
}

/* a broadcast to `rank` dims `dims` (Expand) */
static anvil_status expand_to(ad_ctx *c, ir_vid a, int rank, const int64_t *dims, ir_vid *out) {
    ir_vid s;
    CORE_TRY(ad_const_i64(c, rank, dims, &s));
    return node1(c, IR_OP_EXPAND, a, s, out);
}

/* zeros of `rank` dims `dims` */
static anvil_status zeros_of(ad_ctx *c, int rank, const int64_t *dims, ir_vid *out) {
    ir_vid zero;
    CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){0.0f}, &zero));
    return expand_to(c, zero, rank, dims, out);
}

static anvil_status gemm_node(ad_ctx *c, ir_vid a, ir_vid b, bool ta, bool tb, float alpha,
                              ir_vid *out) {
    const ir_attr at[3] = {{.name = "transA", .type = IR_ATTR_INT, .i = ta},
                           {.name = "transB", .type = IR_ATTR_INT, .i = tb},
                           {.name = "alpha", .type = IR_ATTR_FLOAT, .f = alpha}};
    return ad_node(c, IR_OP_GEMM, (ir_vid[]){a, b}, 2, at, 3, out);
}

/* ---- linear algebra ------------------------------------------------------------------------- */

static anvil_status rule_matmul(ad_ctx *c, const rule_io *r) {
    const ir_vid a = r->x[0], b = r->x[1];
    const ir_shape as = shape_of(c, a), bs = shape_of(c, b);
    if (as.rank < 2 || bs.rank < 2) return unsupported(&r->n, "a rank-1 operand");
    if (needs(c, r, 0)) {
        ir_vid bt, da;
        bool known = true;
        for (int i = 0; i < as.rank; i++) known = known && as.d[i] >= 0;
        if (bs.rank == 2 && known) {
            /* a Linear layer: dY against B transposed as one GEMM, B read through its transB
             * (no transposed copy; the transposes pass also looks through a Transpose that made
             * B) */
            const int64_t n = bs.d[1];
            ir_vid dy2, da2;
            CORE_TRY(reshape_to(c, r->dy, 2, (int64_t[]){-1, n}, &dy2));
            CORE_TRY(gemm_node(c, dy2, b, false, true, 1.0f, &da2));
            CORE_TRY(reshape_to(c, da2, as.rank, as.d, &da));
        } else {
            CORE_TRY(swap_last2(c, b, &bt));
            CORE_TRY(node1(c, IR_OP_MATMUL, r->dy, bt, &da));
            CORE_TRY(ad_reduce_to(c, da, a, &da));
        }
        CORE_TRY(ad_accumulate(c, a, da));
    }
    if (needs(c, r, 1)) {
        ir_vid db;
        if (bs.rank == 2) {
            /* a Linear layer: every row of A against every row of dY, one GEMM */
            const int64_t k = as.d[as.rank - 1], n = bs.d[1];
            ir_vid a2, dy2;
            CORE_TRY(reshape_to(c, a, 2, (int64_t[]){-1, k}, &a2));
            CORE_TRY(reshape_to(c, r->dy, 2, (int64_t[]){-1, n}, &dy2));
            CORE_TRY(gemm_node(c, a2, dy2, true, false, 1.0f, &db));
        } else {
            ir_vid at;
            CORE_TRY(swap_last2(c, a, &at));
            CORE_TRY(node1(c, IR_OP_MATMUL, at, r->dy, &db));
            CORE_TRY(ad_reduce_to(c, db, b, &db));
        }
        CORE_TRY(ad_accumulate(c, b, db));
    }
    return ANVIL_OK;
}

static anvil_status rule_gemm(ad_ctx *c, const rule_io *r) {
    int64_t ta = 0, tb = 0;
    float alpha = 1.0f, beta = 1.0f;
    CORE_TRY(ir_attr_int(&r->n, "transA", 0, &ta));
    CORE_TRY(ir_attr_int(&r->n, "transB", 0, &tb));
    CORE_TRY(ir_attr_float(&r->n, "alpha", 1.0f, &alpha));
    CORE_TRY(ir_attr_float(&r->n, "beta", 1.0f, &beta));
    const ir_vid a = r->x[0], b = r->x[1], dy = r->dy;
    if (needs(c, r, 0)) {
        ir_vid da;
        if (!ta)
            CORE_TRY(gemm_node(c, dy, b, false, !tb, alpha, &da));
        else
            CORE_TRY(gemm_node(c, b, dy, tb, true, alpha, &da));
        CORE_TRY(ad_accumulate(c, a, da));
    }
    if (needs(c, r, 1)) {
        ir_vid db;
        if (!tb)
            CORE_TRY(gemm_node(c, a, dy, !ta, false, alpha, &db));
        else
            CORE_TRY(gemm_node(c, dy, a, true, ta, alpha, &db));
        CORE_TRY(ad_accumulate(c, b, db));
    }
    if (needs(c, r, 2)) {
        ir_vid dc = dy;
        if (beta != 1.0f) {
            ir_vid s;
            CORE_TRY(ad_const_f32(c, 0, NULL, &beta, &s));
            CORE_TRY(node1(c, IR_OP_MUL, dy, s, &dc));
        }
        CORE_TRY(ad_reduce_to(c, dc, r->x[2], &dc));
        CORE_TRY(ad_accumulate(c, r->x[2], dc));
    }
    return ANVIL_OK;
}

/* ---- elementwise ------------------------------------------------------------------------------
 */

/* dx = reduce_to(g, x) added to x's gradient */
static anvil_status give(ad_ctx *c, ir_vid x, ir_vid g) {
    ir_vid r;
    CORE_TRY(ad_reduce_to(c, g, x, &r));
    return ad_accumulate(c, x, r);
}

static anvil_status rule_binary(ad_ctx *c, const rule_io *r) {
    const ir_vid a = r->x[0], b = r->x[1], dy = r->dy;
    ir_vid t, u;
    switch (r->n.op) {
    case IR_OP_ADD:
        if (needs(c, r, 0)) CORE_TRY(give(c, a, dy));
        if (needs(c, r, 1)) CORE_TRY(give(c, b, dy));
        return ANVIL_OK;
    case IR_OP_SUB:
        if (needs(c, r, 0)) CORE_TRY(give(c, a, dy));
        if (needs(c, r, 1)) {
            CORE_TRY(node1(c, IR_OP_NEG, dy, IR_NONE, &t));
            CORE_TRY(give(c, b, t));
        }
        return ANVIL_OK;
    case IR_OP_MUL:
        if (needs(c, r, 0)) {
            CORE_TRY(node1(c, IR_OP_MUL, dy, b, &t));
            CORE_TRY(give(c, a, t));
        }
        if (needs(c, r, 1)) {
            CORE_TRY(node1(c, IR_OP_MUL, dy, a, &t));
            CORE_TRY(give(c, b, t));
        }
        return ANVIL_OK;
    case IR_OP_DIV:
        if (needs(c, r, 0)) {
            CORE_TRY(node1(c, IR_OP_DIV, dy, b, &t));
            CORE_TRY(give(c, a, t));
        }
        if (needs(c, r, 1)) {
            /* d(a/b)/db = -a/b^2 = -y/b */
            CORE_TRY(node1(c, IR_OP_DIV, r->y, b, &t));
            CORE_TRY(node1(c, IR_OP_MUL, dy, t, &u));
            CORE_TRY(node1(c, IR_OP_NEG, u, IR_NONE, &t));
            CORE_TRY(give(c, b, t));
        }
        return ANVIL_OK;
    default:
        return unsupported(&r->n, NULL);
    }
}

static anvil_status rule_unary(ad_ctx *c, const rule_io *r) {
    const ir_vid x = r->x[0], y = r->y, dy = r->dy;
    ir_vid t, u;
    switch (r->n.op) {
    case IR_OP_NEG:
        CORE_TRY(node1(c, IR_OP_NEG, dy, IR_NONE, &t));
        break;
    case IR_OP_EXP:
        CORE_TRY(node1(c, IR_OP_MUL, dy, y, &t));
        break;
    case IR_OP_LOG:
        CORE_TRY(node1(c, IR_OP_DIV, dy, x, &t));
        break;
    case IR_OP_SQRT: {
        ir_vid half;
        CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){0.5f}, &half));
        CORE_TRY(node1(c, IR_OP_DIV, dy, y, &u));
        CORE_TRY(node1(c, IR_OP_MUL, u, half, &t));
        break;
    }
    case IR_OP_IDENTITY:
    case IR_OP_DROPOUT:
    case IR_OP_CAST:
        t = dy;
        break;
    default:
        return unsupported(&r->n, NULL);
    }
    return ad_accumulate(c, x, t);
}

/* Activations: anvil.ActGrad(dY, X) with the activation as an ir_fusion spells it. */
static anvil_status rule_act(ad_ctx *c, const rule_io *r) {
    ir_fusion f = {.bias = -1, .residual = -1, .lo = -INFINITY, .hi = INFINITY};
    switch (r->n.op) {
    case IR_OP_RELU:
        f.act = IR_ACT_RELU;
        break;
    case IR_OP_SIGMOID:
        f.act = IR_ACT_SIGMOID;
        break;
    case IR_OP_TANH:
        f.act = IR_ACT_TANH;
        break;
    case IR_OP_LEAKYRELU:
        f.act = IR_ACT_LEAKY_RELU;
        CORE_TRY(ir_attr_float(&r->n, "alpha", 0.01f, &f.alpha));
        break;
    case IR_OP_HARDSIGMOID:
        f.act = IR_ACT_HARD_SIGMOID;
        CORE_TRY(ir_attr_float(&r->n, "alpha", 0.2f, &f.alpha));
        CORE_TRY(ir_attr_float(&r->n, "beta", 0.5f, &f.beta));
        break;
    case IR_OP_HARDSWISH:
        f.act = IR_ACT_HARD_SWISH;
        break;
    case IR_OP_GELU: {
        const char *approx;
        CORE_TRY(ir_attr_string(&r->n, "approximate", "none", &approx));
        f.act = strcmp(approx, "tanh") ? IR_ACT_GELU_ERF : IR_ACT_GELU_TANH;
        break;
    }
    default:
        return unsupported(&r->n, NULL);
    }
    const char *name = ir_act_name(f.act);
    const ir_attr at[5] = {
        {.name = "act", .type = IR_ATTR_STRING, .s = name, .s_len = strlen(name)},
        {.name = "alpha", .type = IR_ATTR_FLOAT, .f = f.alpha},
        {.name = "beta", .type = IR_ATTR_FLOAT, .f = f.beta},
        {.name = "lo", .type = IR_ATTR_FLOAT, .f = f.lo},
        {.name = "hi", .type = IR_ATTR_FLOAT, .f = f.hi}};
    ir_vid t;
    CORE_TRY(ad_node(c, IR_OP_ACT_GRAD, (ir_vid[]){r->dy, r->x[0]}, 2, at, 5, &t));
    return ad_accumulate(c, r->x[0], t);
}

/* Softmax / LogSoftmax: over one axis (opset >= 13), or before opset 13 over the input coerced
 * to 2-D [prod(d[:axis]), prod(d[axis:])] (default axis 1), where dY and Y take that 2-D view,
 * the same math runs over its second dim, and dX is reshaped back. */
static anvil_status rule_softmax(ad_ctx *c, const rule_io *r) {
    const bool flat = r->n.opset < 13;
    int64_t axis = -1;
    CORE_TRY(ir_attr_int(&r->n, "axis", flat ? 1 : -1, &axis));
    const ir_shape xs = shape_of(c, r->x[0]);
    ir_vid y = r->y, dy = r->dy, ax, s, t, u;
    if (flat) {
        const int a = norm_axis(axis, xs.rank);
        if (a < 0 || a > xs.rank) return unsupported(&r->n, "an axis outside the input's rank");
        int64_t d2[2] = {1, 1};
        for (int i = 0; i < xs.rank; i++) d2[i >= a] *= xs.d[i];
        CORE_TRY(reshape_to(c, y, 2, d2, &y));
        CORE_TRY(reshape_to(c, dy, 2, d2, &dy));
        axis = 1;
    }
    CORE_TRY(ad_const_i64(c, 1, &axis, &ax));
    const ir_attr keep = {.name = "keepdims", .type = IR_ATTR_INT, .i = 1};
    if (r->n.op == IR_OP_SOFTMAX) {
        /* dx = y * (dy - sum(dy * y)) */
        CORE_TRY(node1(c, IR_OP_MUL, dy, y, &t));
        CORE_TRY(ad_node(c, IR_OP_REDUCESUM, (ir_vid[]){t, ax}, 2, &keep, 1, &s));
        CORE_TRY(node1(c, IR_OP_SUB, dy, s, &u));
        CORE_TRY(node1(c, IR_OP_MUL, u, y, &t));
    } else {
        /* dx = dy - exp(y) * sum(dy) */
        CORE_TRY(ad_node(c, IR_OP_REDUCESUM, (ir_vid[]){dy, ax}, 2, &keep, 1, &s));
        CORE_TRY(node1(c, IR_OP_EXP, y, IR_NONE, &u));
        CORE_TRY(node1(c, IR_OP_MUL, u, s, &t));
        CORE_TRY(node1(c, IR_OP_SUB, dy, t, &u));
        t = u;
    }
    if (flat) CORE_TRY(reshape_to(c, t, xs.rank, xs.d, &t));
    return ad_accumulate(c, r->x[0], t);
}

/* ---- shape ops ------------------------------------------------------------------------------ */

static anvil_status rule_reshape(ad_ctx *c, const rule_io *r) {
    const ir_shape xs = shape_of(c, r->x[0]);
    ir_vid t;
    CORE_TRY(reshape_to(c, r->dy, xs.rank, xs.d, &t));
    return ad_accumulate(c, r->x[0], t);
}

static anvil_status rule_transpose(ad_ctx *c, const rule_io *r) {
    const int rank = shape_of(c, r->x[0]).rank;
    const int64_t *perm;
    size_t count;
    CORE_TRY(ir_attr_ints(&r->n, "perm", &perm, &count));
    int64_t inv[IR_MAX_RANK];
    for (int i = 0; i < rank; i++) inv[perm ? perm[i] : rank - 1 - i] = i;
    const ir_attr at = ad_ints(c, "perm", inv, rank);
    ir_vid t;
    CORE_TRY(ad_node(c, IR_OP_TRANSPOSE, &r->dy, 1, &at, 1, &t));
    return ad_accumulate(c, r->x[0], t);
}

static anvil_status rule_global_avgpool(ad_ctx *c, const rule_io *r) {
    const ir_shape xs = shape_of(c, r->x[0]);
    int64_t area = 1;
    for (int i = 2; i < xs.rank; i++) area *= xs.d[i];
    ir_vid s, t, u;
    CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){1.0f / (float)area}, &s));
    CORE_TRY(node1(c, IR_OP_MUL, r->dy, s, &t));
    CORE_TRY(expand_to(c, t, xs.rank, xs.d, &u));
    return ad_accumulate(c, r->x[0], u);
}

/* ---- convolution and pooling ---------------------------------------------------------------- */

/* The window attributes of n with the padding resolved for input spatial dims xs: kernel_shape,
 * strides, dilations and explicit pads (auto_pad applied). at holds 4 attributes. */
static anvil_status window_attrs(ad_ctx *c, const ir_node *n, const nn_window *w, int nsp,
                                 const int64_t *xs, const int64_t *kernel, bool pool, ir_attr *at,
                                 nn_geom *geo) {
    CORE_TRY(nn_window_resolve(n, w, nsp, xs, kernel, pool, geo));
    int64_t pads[2 * NN_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) {
        pads[i] = geo->pad_begin[i];
        pads[nsp + i] = geo->pad_end[i];
    }
    at[0] = ad_ints(c, "kernel_shape", geo->kernel, nsp);
    at[1] = ad_ints(c, "strides", geo->stride, nsp);
    at[2] = ad_ints(c, "dilations", geo->dil, nsp);
    at[3] = ad_ints(c, "pads", pads, 2 * nsp);
    return ANVIL_OK;
}

/* The output_padding attribute that makes the transposed conv of dY (whose spatial dims are
 * ys's) give back xs's: the transposed conv gives (out - 1) * s - pads + dil * (k - 1) + 1,
 * which falls short of the input by what the forward window's floor division dropped. */
static ir_attr transpose_padding(ad_ctx *c, const ir_shape *xs, const ir_shape *ys,
                                 const nn_geom *geo, int nsp) {
    int64_t extra[NN_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++)
        extra[i] = xs->d[2 + i] - ((ys->d[2 + i] - 1) * geo->stride[i] - geo->pad_begin[i] -
                                   geo->pad_end[i] + geo->dil[i] * (geo->kernel[i] - 1) + 1);
    return ad_ints(c, "output_padding", extra, nsp);
}

/* A conv's bias gradient: dY summed over the images and the nsp spatial dims, added to b's. */
static anvil_status give_bias(ad_ctx *c, ir_vid dy, int nsp, ir_vid b) {
    int64_t axes[IR_MAX_RANK] = {0};
    for (int i = 0; i < nsp; i++) axes[1 + i] = 2 + i;
    ir_vid ax, db;
    CORE_TRY(ad_const_i64(c, nsp + 1, axes, &ax));
    const ir_attr keep = {.name = "keepdims", .type = IR_ATTR_INT, .i = 0};
    CORE_TRY(ad_node(c, IR_OP_REDUCESUM, (ir_vid[]){dy, ax}, 2, &keep, 1, &db));
    return ad_accumulate(c, b, db);
}

static anvil_status rule_conv(ad_ctx *c, const rule_io *r) {
    const conv_params *p = r->n.params;
    const ir_vid x = r->x[0], w = r->x[1];
    const ir_shape xs = shape_of(c, x), ws = shape_of(c, w), ys = shape_of(c, r->y);
    const int nsp = xs.rank - 2;
    if (nsp < 1 || nsp > 2) return unsupported(&r->n, "a 3-D or higher convolution");
    ir_attr at[6];
    nn_geom geo;
    CORE_TRY(window_attrs(c, &r->n, &p->win, nsp, xs.d + 2, ws.d + 2, false, at, &geo));
    at[4] = (ir_attr){.name = "group", .type = IR_ATTR_INT, .i = p->group};
    if (needs(c, r, 0)) {
        at[5] = transpose_padding(c, &xs, &ys, &geo, nsp);
        ir_vid dx;
        CORE_TRY(ad_node(c, IR_OP_CONVTRANSPOSE, (ir_vid[]){r->dy, w}, 2, at, 6, &dx));
        CORE_TRY(ad_accumulate(c, x, dx));
    }
    if (needs(c, r, 1)) {
        ir_vid dw;
        CORE_TRY(ad_node(c, IR_OP_CONV_GRAD_W, (ir_vid[]){x, r->dy}, 2, at, 5, &dw));
        CORE_TRY(ad_accumulate(c, w, dw));
    }
    if (needs(c, r, 2)) CORE_TRY(give_bias(c, r->dy, nsp, r->x[2]));
    return ANVIL_OK;
}

/* ConvTranspose (explicit pads, 1-D or 2-D), Y = conv^T(X, W): the adjoint of a transposed
 * conv is the conv, so dX = Conv(dY, W) with the same window and group (W [C_in, M/group, k...]
 * is that conv's weight: C_in outputs, M/group inputs per group); W's gradient is ConvGradW with
 * the roles of input and output gradient swapped, which gives W's own layout [C_in, M/group,
 * k...]; the bias's, dY summed over images and positions. */
static anvil_status rule_convtranspose(ad_ctx *c, const rule_io *r) {
    const ir_shape xs = shape_of(c, r->x[0]), ws = shape_of(c, r->x[1]), ys = shape_of(c, r->y);
    const int nsp = xs.rank - 2;
    int64_t group = 1;
    CORE_TRY(ir_attr_int(&r->n, "group", 1, &group));
    if (nsp < 1 || nsp > 2) return unsupported(&r->n, "a 3-D or higher transposed conv");
    if (ir_node_attr(&r->n, "auto_pad") || ir_node_attr(&r->n, "output_shape"))
        return unsupported(&r->n, "auto_pad or output_shape (give explicit pads)");
    nn_window w;
    CORE_TRY(nn_window_parse(&r->n, false, true, false, &w));
    /* the forward conv that this transposes: input dY's spatial dims, output X's */
    int64_t kernel[NN_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) kernel[i] = ws.d[2 + i];
    ir_attr at[5];
    nn_geom geo;
    CORE_TRY(window_attrs(c, &r->n, &w, nsp, ys.d + 2, kernel, false, at, &geo));
    for (int i = 0; i < nsp; i++)
        if (geo.out[i] != xs.d[2 + i])
            return unsupported(&r->n, "an output size its pads and strides do not give back");
    at[4] = (ir_attr){.name = "group", .type = IR_ATTR_INT, .i = group};
    if (needs(c, r, 0)) {
        ir_vid dx;
        CORE_TRY(ad_node(c, IR_OP_CONV, (ir_vid[]){r->dy, r->x[1]}, 2, at, 5, &dx));
        CORE_TRY(ad_accumulate(c, r->x[0], dx));
    }
    if (needs(c, r, 1)) {
        ir_vid dw;
        CORE_TRY(ad_node(c, IR_OP_CONV_GRAD_W, (ir_vid[]){r->dy, r->x[0]}, 2, at, 5, &dw));
        CORE_TRY(ad_accumulate(c, r->x[1], dw));
    }
    if (needs(c, r, 2)) CORE_TRY(give_bias(c, r->dy, nsp, r->x[2]));
    return ANVIL_OK;
}

/* 1 / the count of input elements (pads left out) that each output position's window covers:
 * [out spatial dims], the product of each dim's count. */
static anvil_status inverse_counts(ad_ctx *c, const ir_shape *xs, const nn_geom *geo, int nsp,
                                   ir_vid *out) {
    int64_t dims[NN_MAX_SPATIAL], total = 1;
    int64_t *per[NN_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) {
        dims[i] = geo->out[i];
        total *= dims[i];
        if (!(per[i] = core_arena_array(c->g->arena, (size_t)dims[i] + 1, sizeof *per[i])))
            return ANVIL_ERR_OUT_OF_MEMORY;
        for (int64_t o = 0; o < dims[i]; o++) {
            per[i][o] = 0;
            for (int64_t k = 0; k < geo->kernel[i]; k++) {
                const int64_t at = o * geo->stride[i] - geo->pad_begin[i] + k * geo->dil[i];
                per[i][o] += at >= 0 && at < xs->d[2 + i];
            }
        }
    }
    float *v = core_arena_array(c->g->arena, (size_t)total + 1, sizeof *v);
    if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int64_t e = 0; e < total; e++) {
        int64_t count = 1, rest = e;
        for (int i = nsp - 1; i >= 0; i--) {
            count *= per[i][rest % dims[i]];
            rest /= dims[i];
        }
        /* a window wholly in the padding averages nothing: it gets no gradient */
        v[e] = count > 0 ? 1.0f / (float)count : 0.0f;
    }
    return ad_const_f32(c, nsp, dims, v, out);
}

/* AveragePool as a depthwise conv with weights 1/k (every window divides by the whole kernel:
 * no padding, or padding counted), so its gradient is that conv's transpose applied to dY. With
 * padding left out of the average (count_include_pad 0), each window divides by its own count
 * of input elements: dY scaled by 1/count (a constant of the output's spatial shape, computed
 * now), then spread by the transposed conv with weights 1. */
static anvil_status rule_avgpool(ad_ctx *c, const rule_io *r) {
    nn_window w;
    CORE_TRY(nn_window_parse(&r->n, true, true, true, &w));
    int64_t count_pad = 0;
    CORE_TRY(ir_attr_int(&r->n, "count_include_pad", 0, &count_pad));
    const ir_shape xs = shape_of(c, r->x[0]), ys = shape_of(c, r->y);
    const int nsp = xs.rank - 2;
    if (nsp < 1 || nsp > 2) return unsupported(&r->n, "a 3-D pool");
    if (w.ceil_mode) return unsupported(&r->n, "ceil_mode");
    ir_attr at[6];
    nn_geom geo;
    CORE_TRY(window_attrs(c, &r->n, &w, nsp, xs.d + 2, w.kernel, true, at, &geo));
    bool padded = false;
    for (int i = 0; i < nsp; i++) padded |= geo.pad_begin[i] || geo.pad_end[i];
    const bool own_counts = padded && !count_pad;
    int64_t taps = 1, wd[2 + NN_MAX_SPATIAL] = {xs.d[1], 1};
    for (int i = 0; i < nsp; i++) {
        taps *= geo.kernel[i];
        wd[2 + i] = geo.kernel[i];
    }
    const size_t nw = (size_t)(xs.d[1] * taps);
    float *wts = core_arena_array(c->g->arena, nw, sizeof *wts);
    if (!wts) return ANVIL_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < nw; i++) wts[i] = own_counts ? 1.0f : 1.0f / (float)taps;
    ir_vid wv, dx, dy = r->dy;
    if (own_counts) {
        ir_vid inv;
        CORE_TRY(inverse_counts(c, &xs, &geo, nsp, &inv));
        CORE_TRY(node1(c, IR_OP_MUL, dy, inv, &dy));
    }
    CORE_TRY(ad_const_f32(c, 2 + nsp, wd, wts, &wv));
    at[4] = (ir_attr){.name = "group", .type = IR_ATTR_INT, .i = xs.d[1]};
    at[5] = transpose_padding(c, &xs, &ys, &geo, nsp);
    CORE_TRY(ad_node(c, IR_OP_CONVTRANSPOSE, (ir_vid[]){dy, wv}, 2, at, 6, &dx));
    return ad_accumulate(c, r->x[0], dx);
}

static anvil_status rule_maxpool(ad_ctx *c, const rule_io *r) {
    if (r->n.n_outputs > 1 && r->n.outputs[1] != IR_NONE)
        return unsupported(&r->n, "a MaxPool with an Indices output");
    nn_window w;
    CORE_TRY(nn_window_parse(&r->n, true, true, true, &w));
    const ir_shape xs = shape_of(c, r->x[0]);
    const int nsp = xs.rank - 2;
    if (nsp < 1 || nsp > 2) return unsupported(&r->n, "a 3-D pool");
    ir_attr at[5];
    nn_geom geo;
    CORE_TRY(window_attrs(c, &r->n, &w, nsp, xs.d + 2, w.kernel, true, at, &geo));
    at[4] = (ir_attr){.name = "ceil_mode", .type = IR_ATTR_INT, .i = w.ceil_mode};
    ir_vid dx;
    CORE_TRY(ad_node(c, IR_OP_MAXPOOL_GRAD, (ir_vid[]){r->dy, r->x[0]}, 2, at, 5, &dx));
    return ad_accumulate(c, r->x[0], dx);
}

/* BatchNormalization as it trains (build.c made it anvil.BatchNormTrain): anvil.BatchNormGrad
 * from the batch statistics the forward node saved (outputs 3 and 4). */
static anvil_status rule_batchnorm(ad_ctx *c, const rule_io *r) {
    float eps;
    CORE_TRY(ir_attr_float(&r->n, "epsilon", 1e-5f, &eps));
    const ir_attr at[1] = {{.name = "epsilon", .type = IR_ATTR_FLOAT, .f = eps}};
    ir_vid g[3];
    CORE_TRY(ad_node_n(c, IR_OP_BATCHNORM_GRAD,
                       (ir_vid[]){r->dy, r->x[0], r->x[1], r->n.outputs[3], r->n.outputs[4]}, 5, at,
                       1, 3, g));
    for (int i = 0; i < 3; i++)
        if (needs(c, r, i)) CORE_TRY(ad_accumulate(c, r->x[i], g[i]));
    return ANVIL_OK;
}

/* ---- reductions, joins and pieces ----------------------------------------------------------- */

/* The axes a Reduce* node reduces (from its input or attribute, as its opset has them), as
 * non-negative dims in order; every axis when none are given (noop_with_empty_axes aside). */
static anvil_status reduce_axes(const ad_ctx *c, const rule_io *r, int rank, bool *axis) {
    const int64_t *v = NULL;
    size_t count = 0;
    int64_t from_input[IR_MAX_RANK];
    const bool input_form = r->n.op == IR_OP_REDUCESUM ? r->n.opset >= 13 : r->n.opset >= 18;
    if (input_form && r->n_x > 1 && r->x[1] != IR_NONE) {
        const ir_value *av = &c->g->values[r->x[1]];
        size_t n = 0;
        if (!(av->flags & IR_VALUE_CONST) || !ir_shape_numel(&av->shape, &n) || n > IR_MAX_RANK)
            return unsupported(&r->n, "axes computed at run time");
        memcpy(from_input, av->data, n * sizeof(int64_t));
        v = from_input;
        count = n;
    } else if (!input_form) {
        CORE_TRY(ir_attr_ints(&r->n, "axes", &v, &count));
    }
    int64_t noop = 0;
    CORE_TRY(ir_attr_int(&r->n, "noop_with_empty_axes", 0, &noop));
    if (count == 0 && noop) return unsupported(&r->n, "noop_with_empty_axes");
    for (int i = 0; i < rank; i++) axis[i] = count == 0;
    for (size_t i = 0; i < count; i++) axis[v[i] < 0 ? v[i] + rank : v[i]] = true;
    return ANVIL_OK;
}

static anvil_status rule_reduce(ad_ctx *c, const rule_io *r) {
    const ir_shape xs = shape_of(c, r->x[0]);
    bool axis[IR_MAX_RANK];
    CORE_TRY(reduce_axes(c, r, xs.rank, axis));
    int64_t kept[IR_MAX_RANK], count = 1;
    for (int i = 0; i < xs.rank; i++) {
        kept[i] = axis[i] ? 1 : xs.d[i];
        if (axis[i]) count *= xs.d[i];
    }
    ir_vid t, u;
    CORE_TRY(reshape_to(c, r->dy, xs.rank, kept, &t));
    if (r->n.op == IR_OP_REDUCEMEAN) {
        ir_vid s;
        CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){1.0f / (float)count}, &s));
        CORE_TRY(node1(c, IR_OP_MUL, t, s, &t));
    }
    CORE_TRY(expand_to(c, t, xs.rank, xs.d, &u));
    return ad_accumulate(c, r->x[0], u);
}

/* Concat: each input's slice of dY, by a Split along the axis. */
static anvil_status rule_concat(ad_ctx *c, const rule_io *r) {
    int64_t axis;
    CORE_TRY(ir_attr_int(&r->n, "axis", 0, &axis));
    const int rank = shape_of(c, r->y).rank, ax = norm_axis(axis, rank);
    int64_t sizes[16];
    if (r->n.n_inputs > 16) return unsupported(&r->n, "more than 16 inputs");
    for (int i = 0; i < r->n.n_inputs; i++) sizes[i] = shape_of(c, r->n.inputs[i]).d[ax];
    ir_vid split, parts[16];
    CORE_TRY(ad_const_i64(c, r->n.n_inputs, sizes, &split));
    const ir_attr at = {.name = "axis", .type = IR_ATTR_INT, .i = ax};
    CORE_TRY(ad_node_n(c, IR_OP_SPLIT, (ir_vid[]){r->dy, split}, 2, &at, 1, r->n.n_inputs, parts));
    for (int i = 0; i < r->n.n_inputs; i++)
        if (c->need[r->n.inputs[i]]) CORE_TRY(ad_accumulate(c, r->n.inputs[i], parts[i]));
    return ANVIL_OK;
}

/* Split: the outputs' gradients joined again (zeros for outputs nothing differentiated). */
static anvil_status rule_split(ad_ctx *c, const rule_io *r) {
    int64_t axis;
    CORE_TRY(ir_attr_int(&r->n, "axis", 0, &axis));
    if (r->n.n_outputs > 16) return unsupported(&r->n, "more than 16 outputs");
    ir_vid parts[16];
    for (int i = 0; i < r->n.n_outputs; i++) {
        parts[i] = r->dys[i];
        if (parts[i] == IR_NONE) {
            const ir_shape os = shape_of(c, r->n.outputs[i]);
            CORE_TRY(zeros_of(c, os.rank, os.d, &parts[i]));
        }
    }
    const ir_attr at = {.name = "axis", .type = IR_ATTR_INT, .i = axis};
    ir_vid t;
    CORE_TRY(ad_node(c, IR_OP_CONCAT, parts, r->n.n_outputs, &at, 1, &t));
    return ad_accumulate(c, r->x[0], t);
}

/* Slice with constant starts/ends/axes and unit steps: dY padded back to X's shape. */
static anvil_status rule_slice(ad_ctx *c, const rule_io *r) {
    if (r->n.opset < 10) return unsupported(&r->n, "opset < 10");
    const ir_shape xs = shape_of(c, r->x[0]);
    const int rank = xs.rank;
    int64_t v[4][IR_MAX_RANK];
    size_t n[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
        const ir_vid in = r->n_x > k + 1 ? r->x[k + 1] : IR_NONE;
        if (in == IR_NONE) continue;
        const ir_value *iv = &c->g->values[in];
        if (!(iv->flags & IR_VALUE_CONST) || iv->dtype != ANVIL_DTYPE_INT64 ||
            !ir_shape_numel(&iv->shape, &n[k]) || n[k] > IR_MAX_RANK)
            return unsupported(&r->n, "bounds computed at run time");
        memcpy(v[k], iv->data, n[k] * sizeof(int64_t));
    }
    int64_t pads[2 * IR_MAX_RANK] = {0};
    const ir_shape ys = shape_of(c, r->y);
    for (size_t i = 0; i < n[0]; i++) {
        const int ax = n[2] ? norm_axis(v[2][i], rank) : (int)i;
        if (n[3] && v[3][i] != 1) return unsupported(&r->n, "a step other than 1");
        int64_t st = v[0][i];
        if (st < 0) st += xs.d[ax];
        st = st < 0 ? 0 : st > xs.d[ax] ? xs.d[ax] : st;
        pads[ax] = st;
        pads[rank + ax] = xs.d[ax] - st - ys.d[ax];
    }
    ir_vid pv, t;
    CORE_TRY(ad_const_i64(c, 2 * rank, pads, &pv));
    CORE_TRY(node1(c, IR_OP_PAD, r->dy, pv, &t));
    return ad_accumulate(c, r->x[0], t);
}

static anvil_status transpose_node(ad_ctx *c, ir_vid x, const int64_t *perm, int rank,
                                   ir_vid *out) {
    const ir_attr at = ad_ints(c, "perm", perm, rank);
    return ad_node(c, IR_OP_TRANSPOSE, &x, 1, &at, 1, out);
}

/* Gather: the looked-up slices' gradients summed by a ScatterND with reduction add into zeros
 * of the data's shape (an embedding table's rows: only those looked up are touched). Along an
 * axis other than 0 the axis is moved to the front first (dY's index dims likewise), and back. */
static anvil_status rule_gather(ad_ctx *c, const rule_io *r) {
    int64_t axis;
    CORE_TRY(ir_attr_int(&r->n, "axis", 0, &axis));
    const ir_shape ds = shape_of(c, r->x[0]);
    const int rank = ds.rank, ri = shape_of(c, r->x[1]).rank, ax = norm_axis(axis, rank);
    ir_vid dy = r->dy, zeros, unsq, idx, t;
    int64_t front[IR_MAX_RANK], back[IR_MAX_RANK], moved[IR_MAX_RANK];
    if (ax != 0) {
        /* data' = data with axis first; dY' = dY with its ri index dims (at ax..) first */
        int k = 0;
        front[k++] = ax;
        for (int i = 0; i < rank; i++)
            if (i != ax) front[k++] = i;
        for (int i = 0; i < rank; i++) back[front[i]] = i;
        const int ry = shape_of(c, dy).rank;
        k = 0;
        for (int i = 0; i < ri; i++) moved[k++] = ax + i;
        for (int i = 0; i < ry; i++)
            if (i < ax || i >= ax + ri) moved[k++] = i;
        CORE_TRY(transpose_node(c, dy, moved, ry, &dy));
    }
    int64_t dims[IR_MAX_RANK];
    for (int i = 0; i < rank; i++) dims[i] = ds.d[ax != 0 ? front[i] : i];
    CORE_TRY(zeros_of(c, rank, dims, &zeros));
    CORE_TRY(ad_const_i64(c, 1, (int64_t[]){-1}, &unsq));
    CORE_TRY(node1(c, IR_OP_UNSQUEEZE, r->x[1], unsq, &idx));
    const char *add = "add";
    const ir_attr at = {.name = "reduction", .type = IR_ATTR_STRING, .s = add, .s_len = 3};
    CORE_TRY(ad_node(c, IR_OP_SCATTERND, (ir_vid[]){zeros, idx, dy}, 3, &at, 1, &t));
    if (ax != 0) CORE_TRY(transpose_node(c, t, back, rank, &t));
    return ad_accumulate(c, r->x[0], t);
}

static anvil_status rule_layernorm(ad_ctx *c, const rule_io *r) {
    int64_t axis;
    float eps;
    CORE_TRY(ir_attr_int(&r->n, "axis", -1, &axis));
    CORE_TRY(ir_attr_float(&r->n, "epsilon", 1e-5f, &eps));
    const ir_attr at[2] = {{.name = "axis", .type = IR_ATTR_INT, .i = axis},
                           {.name = "epsilon", .type = IR_ATTR_FLOAT, .f = eps}};
    ir_vid g[3];
    CORE_TRY(
        ad_node_n(c, IR_OP_LAYERNORM_GRAD, (ir_vid[]){r->dy, r->x[0], r->x[1]}, 3, at, 2, 3, g));
    for (int i = 0; i < 3; i++)
        if (needs(c, r, i)) CORE_TRY(give(c, r->x[i], g[i]));
    return ANVIL_OK;
}

/* Pow with an exponent that is a constant scalar: e * x^(e-1). */
static anvil_status rule_pow(ad_ctx *c, const rule_io *r) {
    float e;
    if (needs(c, r, 1)) return unsupported(&r->n, "a trainable exponent");
    const ir_value *ev = &c->g->values[r->x[1]];
    size_t n = 0;
    if (!(ev->flags & IR_VALUE_CONST) || ev->dtype != ANVIL_DTYPE_FLOAT32 ||
        !ir_shape_numel(&ev->shape, &n) || n != 1)
        return unsupported(&r->n, "an exponent that is not a constant float scalar");
    memcpy(&e, ev->data, sizeof e);
    ir_vid em1, ec, p, t, u;
    CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){e - 1.0f}, &em1));
    CORE_TRY(ad_const_f32(c, 0, NULL, &e, &ec));
    CORE_TRY(node1(c, IR_OP_POW, r->x[0], em1, &p));
    CORE_TRY(node1(c, IR_OP_MUL, p, ec, &t));
    CORE_TRY(node1(c, IR_OP_MUL, r->dy, t, &u));
    return ad_accumulate(c, r->x[0], u);
}

/* Erf: 2/sqrt(pi) * exp(-x^2). */
static anvil_status rule_erf(ad_ctx *c, const rule_io *r) {
    ir_vid sq, neg, e, k, t, u;
    CORE_TRY(node1(c, IR_OP_MUL, r->x[0], r->x[0], &sq));
    CORE_TRY(node1(c, IR_OP_NEG, sq, IR_NONE, &neg));
    CORE_TRY(node1(c, IR_OP_EXP, neg, IR_NONE, &e));
    CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){1.1283791670955126f}, &k));
    CORE_TRY(node1(c, IR_OP_MUL, e, k, &t));
    CORE_TRY(node1(c, IR_OP_MUL, r->dy, t, &u));
    return ad_accumulate(c, r->x[0], u);
}

/* Where(cond, a, b): dY where cond picks a, zeros elsewhere (and the other way for b). */
static anvil_status rule_where(ad_ctx *c, const rule_io *r) {
    ir_vid zero;
    CORE_TRY(ad_const_f32(c, 0, NULL, (float[]){0.0f}, &zero));
    for (int i = 1; i <= 2; i++) {
        if (!needs(c, r, i)) continue;
        ir_vid t;
        const ir_vid ins[3] = {r->x[0], i == 1 ? r->dy : zero, i == 1 ? zero : r->dy};
        CORE_TRY(ad_node(c, IR_OP_WHERE, ins, 3, NULL, 0, &t));
        CORE_TRY(give(c, r->x[i], t));
    }
    return ANVIL_OK;
}

/* Dropout as it trains: the gradient passes where the mask kept (and scaled) the value. */
static anvil_status rule_dropout_train(ad_ctx *c, const rule_io *r) {
    ir_vid t;
    CORE_TRY(node1(c, IR_OP_MUL, r->dy, r->n.outputs[1], &t));
    return ad_accumulate(c, r->x[0], t);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

anvil_status ad_rule(ad_ctx *c, int32_t k) {
    rule_io r;
    memset(&r, 0, sizeof r);
    r.n = c->g->nodes[k];
    if (r.n.fusion)
        return unsupported(&r.n, "a node with a fused epilogue (train the unoptimized graph)");
    r.n_x = r.n.n_inputs < 8 ? r.n.n_inputs : 8;
    for (int i = 0; i < r.n_x; i++) r.x[i] = r.n.inputs[i];
    r.y = r.n.outputs[0];
    bool any = false;
    for (int i = 0; i < r.n.n_outputs && i < 16; i++) {
        r.dys[i] = r.n.outputs[i] != IR_NONE ? c->grad[r.n.outputs[i]] : IR_NONE;
        any |= r.dys[i] != IR_NONE;
    }
    if (!any) return ANVIL_OK;
    r.dy = r.dys[0];
    if (r.n.op == IR_OP_SPLIT) return rule_split(c, &r);
    for (int i = 1; i < r.n.n_outputs && i < 16; i++)
        if (r.dys[i] != IR_NONE)
            return unsupported(&r.n, "a gradient reaching its output beyond the first");
    if (r.dy == IR_NONE) return ANVIL_OK;
    switch (r.n.op) {
    case IR_OP_MATMUL:
        return rule_matmul(c, &r);
    case IR_OP_GEMM:
        return rule_gemm(c, &r);
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
        return rule_binary(c, &r);
    case IR_OP_NEG:
    case IR_OP_EXP:
    case IR_OP_LOG:
    case IR_OP_SQRT:
    case IR_OP_IDENTITY:
    case IR_OP_DROPOUT:
    case IR_OP_CAST:
        return rule_unary(c, &r);
    case IR_OP_RELU:
    case IR_OP_SIGMOID:
    case IR_OP_TANH:
    case IR_OP_LEAKYRELU:
    case IR_OP_HARDSIGMOID:
    case IR_OP_HARDSWISH:
    case IR_OP_GELU:
        return rule_act(c, &r);
    case IR_OP_SOFTMAX:
    case IR_OP_LOGSOFTMAX:
        return rule_softmax(c, &r);
    case IR_OP_RESHAPE:
    case IR_OP_FLATTEN:
    case IR_OP_SQUEEZE:
    case IR_OP_UNSQUEEZE:
        return rule_reshape(c, &r);
    case IR_OP_TRANSPOSE:
        return rule_transpose(c, &r);
    case IR_OP_GLOBALAVERAGEPOOL:
        return rule_global_avgpool(c, &r);
    case IR_OP_CONV:
        return rule_conv(c, &r);
    case IR_OP_MAXPOOL:
        return rule_maxpool(c, &r);
    case IR_OP_AVERAGEPOOL:
        return rule_avgpool(c, &r);
    case IR_OP_CONVTRANSPOSE:
        return rule_convtranspose(c, &r);
    case IR_OP_BATCHNORM_TRAIN:
        return rule_batchnorm(c, &r);
    case IR_OP_DROPOUT_TRAIN:
        return rule_dropout_train(c, &r);
    case IR_OP_REDUCESUM:
    case IR_OP_REDUCEMEAN:
        return rule_reduce(c, &r);
    case IR_OP_CONCAT:
        return rule_concat(c, &r);
    case IR_OP_SLICE:
        return rule_slice(c, &r);
    case IR_OP_GATHER:
        return rule_gather(c, &r);
    case IR_OP_LAYERNORMALIZATION:
        return rule_layernorm(c, &r);
    case IR_OP_POW:
        return rule_pow(c, &r);
    case IR_OP_ERF:
        return rule_erf(c, &r);
    case IR_OP_WHERE:
        return rule_where(c, &r);
    case IR_OP_SOFTMAXCROSSENTROPYLOSS:
    case IR_OP_NEGATIVELOGLIKELIHOODLOSS:
        return ad_rule_loss(c, &r.n, r.dy);
    default:
        return unsupported(&r.n, NULL);
    }
}
