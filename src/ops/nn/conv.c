/* Conv and ConvTranspose: attribute checking, shape inference and the reference kernels.
 *
 * Both kernels are written as "shift and accumulate": for every (input channel, kernel tap) pair
 * the weight is multiplied into a whole box of positions at once. For a convolution the box is
 * the set of output positions whose tap lands inside the input; for a transposed convolution it
 * is the set of input positions whose tap lands inside the output. Computing those boxes up
 * front (nn_valid_range) means the inner loop has no bounds tests and padding never has to be
 * materialised, and the same loop serves 1-D to 6-D and both ops. Work is split by output plane
 * (batch x output channel): each plane is written by exactly one task, so the scatter of the
 * transposed convolution needs no synchronisation. */
#include "ops/nn_common.h"

/* ---- check ------------------------------------------------------------------------------- */

static anvil_status conv_check(ir_graph *g, ir_node *n) {
    bool transpose = n->op == IR_OP_CONVTRANSPOSE;
    OP_PARAMS_NEW(g, conv_params, p);
    CORE_TRY(nn_window_parse(n, false, true, false, &p->win));
    CORE_TRY(ir_attr_int(n, "group", 1, &p->group));
    if (p->group < 1 || p->group > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'group' is %lld; it must be >= 1 (1: ordinary "
                        "convolution, C: depthwise)",
                        ir_node_label(n), (long long)p->group);
    if (transpose) {
        CORE_TRY(nn_parse_positive_list(n, "output_padding", 0, &p->output_padding,
                                        &p->n_output_padding));
        CORE_TRY(
            nn_parse_positive_list(n, "output_shape", 0, &p->output_shape, &p->n_output_shape));
        int nsp = nn_window_nsp(&p->win);
        if (nsp && p->n_output_padding && p->n_output_padding != (size_t)nsp)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'output_padding' has %zu values but the window "
                            "attributes describe %d spatial dims",
                            ir_node_label(n), p->n_output_padding, nsp);
        for (size_t d = 0; d < p->n_output_padding; d++) {
            int64_t s = p->win.n_strides == p->n_output_padding ? p->win.strides[d] : 1;
            int64_t dl = p->win.n_dilations == p->n_output_padding ? p->win.dilations[d] : 1;
            int64_t lim = s > dl ? s : dl;
            if (p->output_padding[d] >= lim)
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s: output_padding[%zu] is %lld; it must be smaller than the "
                                "stride (%lld) or the dilation (%lld) of that dim",
                                ir_node_label(n), d, (long long)p->output_padding[d], (long long)s,
                                (long long)dl);
        }
    }
    n->params = p;
    return ANVIL_OK;
}

/* ---- geometry ----------------------------------------------------------------------------- */

/* ---- inference ------------------------------------------------------------------------------ */

static bool conv_dtype_ok(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT64 || dt == ANVIL_DTYPE_FLOAT16 ||
           dt == ANVIL_DTYPE_BFLOAT16;
}

static anvil_status conv_infer_common(const ir_node *n, const op_tinfo *in, int n_in, op_tinfo *out,
                                      bool transpose) {
    const conv_params *p = n->params;
    const op_tinfo *x = &in[0], *w = &in[1];
    bool has_b = n_in > 2 && op_has_input(n, 2);
    if (!conv_dtype_ok(x->dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: input X has dtype %s; %s takes FLOAT, DOUBLE, FLOAT16 or BFLOAT16",
                        ir_node_label(n), anvil_dtype_name(x->dtype), ir_op_name(n->op));
    if (w->dtype != x->dtype || (has_b && in[2].dtype != x->dtype))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: X is %s but W is %s%s%s; all inputs must share one dtype",
                        ir_node_label(n), anvil_dtype_name(x->dtype), anvil_dtype_name(w->dtype),
                        has_b ? " and B is " : "", has_b ? anvil_dtype_name(in[2].dtype) : "");
    out[0].dtype = x->dtype;
    int rank = x->shape.rank >= 0 ? x->shape.rank : w->shape.rank;
    if (x->shape.rank >= 0 && w->shape.rank >= 0 && x->shape.rank != w->shape.rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: X has rank %d but W has rank %d; W must be %s x k1 x ... x kn with "
                        "one kernel dim per spatial dim of X",
                        ir_node_label(n), x->shape.rank, w->shape.rank,
                        transpose ? "C x M/group" : "M x C/group");
    if (rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    if (rank < 3 || rank - 2 > NN_MAX_SPATIAL)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: inputs have rank %d; expected 3 to %d (N x C x D1 x ... x Dn)",
                        ir_node_label(n), rank, NN_MAX_SPATIAL + 2);
    int nsp = rank - 2;
    ir_shape xs = x->shape, ws = w->shape;
    if (xs.rank < 0) nn_shape_unknown_dims(&xs, rank);
    if (ws.rank < 0) nn_shape_unknown_dims(&ws, rank);

    /* kernel: the attribute when given, else W's spatial dims; both must agree */
    int64_t kernel[NN_MAX_SPATIAL];
    bool kernel_known = true;
    for (int d = 0; d < nsp; d++) {
        int64_t wd = ws.d[d + 2];
        if (p->win.n_kernel == (size_t)nsp) {
            kernel[d] = p->win.kernel[d];
            if (wd >= 0 && wd != kernel[d])
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: kernel_shape[%d] is %lld but W's dim %d is %lld; they must "
                                "match",
                                ir_node_label(n), d, (long long)kernel[d], d + 2, (long long)wd);
        } else {
            kernel[d] = wd;
            if (wd < 0) kernel_known = false;
        }
    }

    int64_t group = p->group, C = xs.d[1], Cw = ws.d[transpose ? 0 : 1], M = IR_DIM_UNKNOWN;
    int32_t msym = -1;
    if (!transpose) {
        int64_t cw_total;
        if (C >= 0 && Cw >= 0 && (!core_mul_i64(Cw, group, &cw_total) || cw_total != C))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: X has %lld channels but W expects %lld per group x %lld groups; "
                            "C must equal W.shape[1] * group",
                            ir_node_label(n), (long long)C, (long long)Cw, (long long)group);
        M = ws.d[0];
        msym = ws.sym[0];
        if (M >= 0 && M % group != 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: W has %lld output channels, not a multiple of group %lld",
                            ir_node_label(n), (long long)M, (long long)group);
    } else {
        if (C >= 0 && Cw >= 0 && C != Cw)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: X has %lld channels but W.shape[0] is %lld; they must match "
                            "(W is C x M/group x k1 x ... x kn)",
                            ir_node_label(n), (long long)C, (long long)Cw);
        int64_t c = C >= 0 ? C : Cw;
        if (c >= 0 && c % group != 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: %lld input channels are not a multiple of group %lld",
                            ir_node_label(n), (long long)c, (long long)group);
        if (ws.d[1] >= 0 && !core_mul_i64(ws.d[1], group, &M))
            return core_err(ANVIL_ERR_SHAPE, "%s: W.shape[1] * group overflows", ir_node_label(n));
        if (group == 1) msym = ws.sym[1];
    }
    if (has_b) {
        const ir_shape *bs = &in[2].shape;
        if (bs->rank >= 0 && (bs->rank != 1 || (bs->d[0] >= 0 && M >= 0 && bs->d[0] != M)))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: B must be 1-D with %lld values (one per output channel) but "
                            "has rank %d%s",
                            ir_node_label(n), (long long)M, bs->rank,
                            bs->rank == 1 ? " and a different length" : "");
    }

    ir_shape *o = &out[0].shape;
    nn_shape_unknown_dims(o, rank);
    o->d[0] = xs.d[0];
    o->sym[0] = xs.sym[0];
    o->d[1] = M;
    o->sym[1] = M >= 0 ? -1 : msym;
    if (!kernel_known) {
        /* still refuse an inconsistent spatial rank now rather than at run time */
        int wn = nn_window_nsp(&p->win);
        if (wn != 0 && wn != nsp)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the window attributes describe %d spatial dims but the input has "
                            "%d",
                            ir_node_label(n), wn, nsp);
        return ANVIL_OK;
    }
    nn_geom geo;
    if (transpose)
        CORE_TRY(convt_resolve(n, p, nsp, &xs.d[2], kernel, &geo));
    else
        CORE_TRY(nn_window_resolve(n, &p->win, nsp, &xs.d[2], kernel, false, &geo));
    for (int d = 0; d < nsp; d++) o->d[d + 2] = geo.out[d];
    return ANVIL_OK;
}

static anvil_status conv_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    return conv_infer_common(n, in, n_in, out, false);
}

static anvil_status convtranspose_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                        int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    return conv_infer_common(n, in, n_in, out, true);
}

/* ---- kernels ------------------------------------------------------------------------------- */

typedef struct conv_job {
    nn_geom g;
    bool transpose;
    int64_t C, M, group, in_size, out_size, k_size;
    int64_t xstr[NN_MAX_SPATIAL], ystr[NN_MAX_SPATIAL];
    const void *x, *w, *b;
    void *y;
} conv_job;

/* dst[dbase + sum_d p_d * dstr_d] += wv * src[sbase + sum_d p_d * sstr_d] over the box
 * lo <= p < hi (nsp dims). The innermost dim runs as a plain strided loop. */
#define CONV_DEFINE_BOX_AXPY(T, SUF)                                                               \
    static void conv_box_axpy_##SUF(int nsp, const int64_t *lo, const int64_t *hi, T wv,           \
                                    const T *restrict src, int64_t sbase, const int64_t *sstr,     \
                                    T *restrict dst, int64_t dbase, const int64_t *dstr) {         \
        int64_t pos[NN_MAX_SPATIAL];                                                               \
        for (int d = 0; d < nsp; d++) {                                                            \
            if (lo[d] >= hi[d]) return;                                                            \
            pos[d] = lo[d];                                                                        \
        }                                                                                          \
        const int last = nsp - 1;                                                                  \
        const int64_t ss = sstr[last], ds = dstr[last];                                            \
        for (;;) {                                                                                 \
            int64_t so = sbase, dof = dbase;                                                       \
            for (int d = 0; d < last; d++) {                                                       \
                so += pos[d] * sstr[d];                                                            \
                dof += pos[d] * dstr[d];                                                           \
            }                                                                                      \
            for (int64_t q = lo[last]; q < hi[last]; q++)                                          \
                dst[dof + q * ds] += wv * src[so + q * ss];                                        \
            int d = last - 1;                                                                      \
            while (d >= 0 && ++pos[d] == hi[d]) {                                                  \
                pos[d] = lo[d];                                                                    \
                d--;                                                                               \
            }                                                                                      \
            if (d < 0) return;                                                                     \
        }                                                                                          \
    }

/* One output plane (batch nb, output channel m): start from the bias, then add every input
 * channel of m's group through every kernel tap. */
#define CONV_DEFINE_PLANE(T, SUF)                                                                  \
    static void conv_plane_##SUF(const conv_job *j, int64_t plane) {                               \
        const nn_geom *g = &j->g;                                                                  \
        const int nsp = g->nsp;                                                                    \
        const int64_t nb = plane / j->M, m = plane % j->M;                                         \
        const int64_t Cg = j->C / j->group, Mg = j->M / j->group, grp = m / Mg;                    \
        T *y = (T *)j->y + plane * j->out_size;                                                    \
        const T bias = j->b ? ((const T *)j->b)[m] : (T)0;                                         \
        for (int64_t i = 0; i < j->out_size; i++) y[i] = bias;                                     \
        for (int64_t c = 0; c < Cg; c++) {                                                         \
            const T *x = (const T *)j->x + (nb * j->C + grp * Cg + c) * j->in_size;                \
            const T *wk = (const T *)j->w +                                                        \
                          (j->transpose ? ((grp * Cg + c) * Mg + (m - grp * Mg)) * j->k_size       \
                                        : (m * Cg + c) * j->k_size);                               \
            int64_t kidx[NN_MAX_SPATIAL] = {0};                                                    \
            for (int64_t t = 0; t < j->k_size; t++) {                                              \
                int64_t lo[NN_MAX_SPATIAL], hi[NN_MAX_SPATIAL];                                    \
                int64_t sstr[NN_MAX_SPATIAL], dstr[NN_MAX_SPATIAL], sbase = 0, dbase = 0;          \
                for (int d = 0; d < nsp; d++) {                                                    \
                    int64_t off = kidx[d] * g->dil[d] - g->pad_begin[d];                           \
                    if (!j->transpose) {                                                           \
                        nn_valid_range(g->out[d], g->stride[d], off, g->in[d], &lo[d], &hi[d]);    \
                        sstr[d] = g->stride[d] * j->xstr[d];                                       \
                        sbase += off * j->xstr[d];                                                 \
                        dstr[d] = j->ystr[d];                                                      \
                    } else {                                                                       \
                        nn_valid_range(g->in[d], g->stride[d], off, g->out[d], &lo[d], &hi[d]);    \
                        sstr[d] = j->xstr[d];                                                      \
                        dstr[d] = g->stride[d] * j->ystr[d];                                       \
                        dbase += off * j->ystr[d];                                                 \
                    }                                                                              \
                }                                                                                  \
                conv_box_axpy_##SUF(nsp, lo, hi, wk[t], x, sbase, sstr, y, dbase, dstr);           \
                for (int d = nsp - 1; d >= 0 && ++kidx[d] == g->kernel[d]; d--) kidx[d] = 0;       \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void conv_range_##SUF(void *arg, size_t begin, size_t end) {                            \
        for (size_t p = begin; p < end; p++) conv_plane_##SUF(arg, (int64_t)p);                    \
    }

CONV_DEFINE_BOX_AXPY(float, f32)
CONV_DEFINE_BOX_AXPY(double, f64)
CONV_DEFINE_PLANE(float, f32)
CONV_DEFINE_PLANE(double, f64)

static anvil_status conv_run_common(const ir_node *n, const op_tensor *const *in, int n_in,
                                    op_tensor *const *out, op_ctx *ctx, bool transpose) {
    const conv_params *p = n->params;
    const op_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    op_tensor *y = out[0];
    int nsp = x->rank - 2;
    conv_job j;
    memset(&j, 0, sizeof j);
    int64_t kernel[NN_MAX_SPATIAL];
    for (int d = 0; d < nsp; d++) kernel[d] = w->dims[d + 2];
    if (transpose)
        CORE_TRY(convt_resolve(n, p, nsp, &x->dims[2], kernel, &j.g));
    else
        CORE_TRY(nn_window_resolve(n, &p->win, nsp, &x->dims[2], kernel, false, &j.g));
    for (int d = 0; d < nsp; d++)
        if (j.g.out[d] != y->dims[d + 2])
            return core_err(
                ANVIL_ERR_INTERNAL, "%s: output buffer dim %d is %lld but the geometry gives %lld",
                ir_node_label(n), d + 2, (long long)y->dims[d + 2], (long long)j.g.out[d]);
    j.transpose = transpose;
    j.C = x->dims[1];
    j.M = y->dims[1];
    j.group = p->group;
    j.in_size = nn_prod(nsp, &x->dims[2]);
    j.out_size = nn_prod(nsp, &y->dims[2]);
    j.k_size = nn_prod(nsp, kernel);
    nn_strides(nsp, &x->dims[2], j.xstr);
    nn_strides(nsp, &y->dims[2], j.ystr);
    size_t planes = (size_t)(y->dims[0] * j.M);
    if (planes == 0 || j.out_size == 0) return ANVIL_OK;

    if (x->dtype == ANVIL_DTYPE_FLOAT64) {
        j.x = x->data;
        j.w = w->data;
        j.b = b ? b->data : NULL;
        j.y = y->data;
        op_parallel_for(ctx, planes, conv_range_f64, &j);
        return ANVIL_OK;
    }
    /* FLOAT runs in place; FLOAT16 / BFLOAT16 are widened to float and narrowed back */
    float *ox = NULL, *ow = NULL, *ob = NULL, *oy = NULL;
    anvil_status s = ANVIL_ERR_OUT_OF_MEMORY;
    j.x = nn_stage_in_f32(n, x, &ox);
    j.w = j.x ? nn_stage_in_f32(n, w, &ow) : NULL;
    j.b = (j.w && b) ? nn_stage_in_f32(n, b, &ob) : NULL;
    j.y = (j.w && (!b || j.b)) ? nn_stage_out_f32(n, y, &oy) : NULL;
    if (j.y) {
        op_parallel_for(ctx, planes, conv_range_f32, &j);
        nn_stage_out_f32_finish(y, oy);
        s = ANVIL_OK;
    }
    free(ox);
    free(ow);
    free(ob);
    return s;
}

static anvil_status conv_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    return conv_run_common(n, in, n_in, out, ctx, false);
}

static anvil_status convtranspose_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                      op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    return conv_run_common(n, in, n_in, out, ctx, true);
}

const op_impl op_impl_conv = {.min_inputs = 2,
                              .max_inputs = 3,
                              .min_outputs = 1,
                              .max_outputs = 1,
                              .check = conv_check,
                              .infer = conv_infer,
                              .run = conv_run};

const op_impl op_impl_convtranspose = {.min_inputs = 2,
                                       .max_inputs = 3,
                                       .min_outputs = 1,
                                       .max_outputs = 1,
                                       .check = conv_check,
                                       .infer = convtranspose_infer,
                                       .run = convtranspose_run};

/* ---- anvil.ConvNhwc ------------------------------------------------------------------------
 * Conv on channels-last tensors: X is [N, H, W, C] and Y [N, OH, OW, M]; W, B and every attribute
 * are Conv's (W stays [M, C/group, kh, kw]). Only the layout pass creates it (passes/layout.c),
 * for float32 2-D convolutions whose neighbours run channels-last too, so the transposes between
 * them cancel. Its reference kernel is Conv's, between two transposes. */

/* dims of a rank-4 shape permuted: out.d[i] = in.d[perm[i]] */
static void permute4(const ir_shape *in, const int perm[4], ir_shape *out) {
    *out = *in;
    if (in->rank != 4) return;
    for (int i = 0; i < 4; i++) {
        out->d[i] = in->d[perm[i]];
        out->sym[i] = in->sym[perm[i]];
    }
}

static const int to_nchw[4] = {0, 3, 1, 2}, to_nhwc[4] = {0, 2, 3, 1};

static anvil_status conv_nhwc_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                    int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32 || (in[0].shape.rank >= 0 && in[0].shape.rank != 4))
        return core_err(
            ANVIL_ERR_UNSUPPORTED, "%s: %s takes a float32 [N, H, W, C] input; got %s of rank %d",
            ir_node_label(n), ir_op_name(n->op), anvil_dtype_name(in[0].dtype), in[0].shape.rank);
    op_tinfo nchw[3];
    for (int i = 0; i < n_in && i < 3; i++) nchw[i] = in[i];
    permute4(&in[0].shape, to_nchw, &nchw[0].shape);
    CORE_TRY(conv_infer_common(n, nchw, n_in, out, false));
    ir_shape y = out[0].shape;
    permute4(&y, to_nhwc, &out[0].shape);
    return ANVIL_OK;
}

/* dst = src with its 4 dims permuted: dst's dim i is src's dim perm[i] (sd: src's dims) */
static void transpose4(const float *src, const int64_t sd[4], const int perm[4], float *dst) {
    int64_t ss[4] = {sd[1] * sd[2] * sd[3], sd[2] * sd[3], sd[3], 1}, dd[4], st[4];
    for (int i = 0; i < 4; i++) {
        dd[i] = sd[perm[i]];
        st[i] = ss[perm[i]];
    }
    for (int64_t a = 0; a < dd[0]; a++)
        for (int64_t b = 0; b < dd[1]; b++)
            for (int64_t c = 0; c < dd[2]; c++)
                for (int64_t d = 0; d < dd[3]; d++)
                    *dst++ = src[a * st[0] + b * st[1] + c * st[2] + d * st[3]];
}

static anvil_status conv_nhwc_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                  op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    op_tensor x = *in[0], y = *out[0];
    for (int i = 0; i < 4; i++) {
        x.dims[i] = in[0]->dims[to_nchw[i]];
        y.dims[i] = out[0]->dims[to_nchw[i]];
    }
    size_t nx = op_tensor_numel(&x), ny = op_tensor_numel(&y);
    x.data = malloc((nx ? nx : 1) * sizeof(float));
    y.data = malloc((ny ? ny : 1) * sizeof(float));
    anvil_status st = ANVIL_ERR_OUT_OF_MEMORY;
    if (x.data && y.data) {
        transpose4(in[0]->data, in[0]->dims, to_nchw, x.data);
        const op_tensor *ins[3] = {&x, in[1], n_in > 2 ? in[2] : NULL};
        op_tensor *outs[1] = {&y};
        st = conv_run_common(n, ins, n_in < 3 ? n_in : 3, outs, ctx, false);
        if (st == ANVIL_OK) transpose4(y.data, y.dims, to_nhwc, out[0]->data);
    }
    free(x.data);
    free(y.data);
    return st;
}

const op_impl op_impl_conv_nhwc = {.min_inputs = 2,
                                   .max_inputs = 3,
                                   .min_outputs = 1,
                                   .max_outputs = 1,
                                   .check = conv_check,
                                   .infer = conv_nhwc_infer,
                                   .run = conv_nhwc_run};

/* ---- anvil.ConvPair (nn_common.h) ------------------------------------------------------------
 * A conv and the 1x1 conv that alone reads it. The reference runs them as Conv's reference does,
 * through a whole intermediate, with the first's activation between. */

static anvil_status conv_pair_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, pair_params, p);
    CORE_TRY(nn_window_parse(n, false, true, false, &p->conv.win));
    CORE_TRY(ir_attr_int(n, "group", 1, &p->conv.group));
    if (p->conv.group < 1 || p->conv.group > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'group' is %lld; it must be >= 1",
                        ir_node_label(n), (long long)p->conv.group);
    p->conv2.group = 1;
    CORE_TRY(pair_first_parse(n, &p->first));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status conv_pair_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                    int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    if (in[0].dtype != ANVIL_DTYPE_FLOAT32)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s takes float32; got %s", ir_node_label(n),
                        ir_op_name(n->op), anvil_dtype_name(in[0].dtype));
    CORE_TRY(conv_infer_common(n, in, n_in < 3 ? n_in : 3, out, false));
    const ir_shape *w2 = &in[3].shape;
    const int64_t m1 = out[0].shape.rank == 4 ? out[0].shape.d[1] : -1;
    if (out[0].shape.rank != 4 || w2->rank != 4 || w2->d[2] != 1 || w2->d[3] != 1 ||
        (m1 >= 0 && w2->d[1] >= 0 && w2->d[1] != m1))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: %s needs a 2-D first conv and W2 of [M2, %lld, 1, 1]; W2 has rank %d",
                        ir_node_label(n), ir_op_name(n->op), (long long)m1, w2->rank);
    out[0].shape.d[1] = w2->d[0];
    out[0].shape.sym[1] = w2->sym[0];
    if (n_in > 4 && op_has_input(n, 4) &&
        (in[4].shape.rank != 1 ||
         (in[4].shape.d[0] >= 0 && w2->d[0] >= 0 && in[4].shape.d[0] != w2->d[0])))
        return core_err(ANVIL_ERR_SHAPE, "%s: B2 must be [%lld] (W2's output channels)",
                        ir_node_label(n), (long long)w2->d[0]);
    return ANVIL_OK;
}

static anvil_status conv_pair_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                  op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const pair_params *p = n->params;
    op_tensor t = *out[0];
    t.dims[1] = in[1]->dims[0];
    const size_t nt = op_tensor_numel(&t);
    t.data = malloc((nt ? nt : 1) * sizeof(float));
    if (!t.data) return ANVIL_ERR_OUT_OF_MEMORY;
    const op_tensor *first[3] = {in[0], in[1], n_in > 2 ? in[2] : NULL};
    op_tensor *tp = &t;
    anvil_status st = conv_run_common(n, first, 3, &tp, ctx, false);
    if (st == ANVIL_OK) {
        pair_first_act(&p->first, t.data, nt);
        ir_node second = *n;
        second.params = (void *)&p->conv2;
        const op_tensor *ins[3] = {&t, in[3], n_in > 4 ? in[4] : NULL};
        st = conv_run_common(&second, ins, 3, out, ctx, false);
    }
    free(t.data);
    return st;
}

const op_impl op_impl_conv_pair = {.min_inputs = 4,
                                   .max_inputs = 5,
                                   .min_outputs = 1,
                                   .max_outputs = 1,
                                   .check = conv_pair_check,
                                   .infer = conv_pair_infer,
                                   .run = conv_pair_run};
