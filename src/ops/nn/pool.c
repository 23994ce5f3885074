/* MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, LpPool and MaxUnpool: attribute checking,
 * shape inference and the reference kernels.
 *
 * Windows are never padded in memory. For each output position the taps that fall inside the
 * input form a box (per dim a contiguous run of kernel indices, found with nn_valid_range), so the
 * kernels visit exactly the real elements; padding only matters for AveragePool's divisor with
 * count_include_pad, which counts the taps that land inside input + declared pads (taps that
 * ceil_mode pushes beyond the declared end padding never count, as in ONNX Runtime and the ONNX
 * reference). NaN inputs are skipped by MaxPool's comparison (as ONNX Runtime does); a window with
 * no real element (possible only with dilation and large pads) yields -inf and the index of its
 * first tap. Work is split by (batch, channel) plane. */
#include "ops/nn_common.h"
#include "ops/reduce_common.h"

#include <stdlib.h>
#include <string.h>

typedef struct pool_params {
    nn_window win;
    bool count_include_pad;
    bool column_major; /* MaxPool storage_order = 1: Indices use column-major spatial order */
} pool_params;

/* ---- check ------------------------------------------------------------------------------- */

static anvil_status pool_alloc(ir_graph *g, ir_node *n, pool_params **out) {
    OP_PARAMS_NEW(g, pool_params, p);
    n->params = p;
    *out = p;
    return ANVIL_OK;
}

static anvil_status maxpool_check(ir_graph *g, ir_node *n) {
    pool_params *p;
    CORE_TRY(pool_alloc(g, n, &p));
    CORE_TRY(nn_window_parse(n, true, n->opset >= 10, n->opset >= 10, &p->win));
    int64_t so;
    CORE_TRY(ir_attr_int(n, "storage_order", 0, &so));
    if (so != 0 && so != 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'storage_order' is %lld; expected 0 (row major) or 1 "
                        "(column major)",
                        ir_node_label(n), (long long)so);
    p->column_major = so == 1;
    if (n->opset < 8 && nn_has_output(n, 1))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: the Indices output exists from opset 8; the model imports opset %d",
                        ir_node_label(n), n->opset);
    return ANVIL_OK;
}

static anvil_status averagepool_check(ir_graph *g, ir_node *n) {
    pool_params *p;
    CORE_TRY(pool_alloc(g, n, &p));
    CORE_TRY(nn_window_parse(n, true, n->opset >= 19, n->opset >= 10, &p->win));
    CORE_TRY(ir_attr_flag(n, "count_include_pad", false, &p->count_include_pad));
    return ANVIL_OK;
}

static anvil_status globalaveragepool_check(ir_graph *g, ir_node *n) {
    (void)g;
    n->params = NULL;
    return ANVIL_OK;
}

/* ---- inference ------------------------------------------------------------------------------ */

static bool pool_float_dtype(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT64 || dt == ANVIL_DTYPE_FLOAT16 ||
           dt == ANVIL_DTYPE_BFLOAT16;
}

/* Shared by MaxPool and AveragePool: output 0 is N x C x out-dims. */
static anvil_status pool_infer_common(const ir_node *n, const op_tinfo *in, op_tinfo *out) {
    const pool_params *p = n->params;
    const ir_shape *xs = &in[0].shape;
    int nsp = nn_window_nsp(&p->win);
    out[0].dtype = in[0].dtype;
    if (xs->rank < 0) {
        nn_shape_unknown_dims(&out[0].shape, nsp + 2);
        return ANVIL_OK;
    }
    if (xs->rank != nsp + 2)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: kernel_shape has %d dims, so X must have rank %d (N x C x D1 x ... x "
                        "Dn), but X has rank %d",
                        ir_node_label(n), nsp, nsp + 2, xs->rank);
    nn_geom geo;
    CORE_TRY(nn_window_resolve(n, &p->win, nsp, &xs->d[2], p->win.kernel, true, &geo));
    ir_shape *o = &out[0].shape;
    nn_shape_unknown_dims(o, xs->rank);
    for (int d = 0; d < 2; d++) {
        o->d[d] = xs->d[d];
        o->sym[d] = xs->sym[d];
    }
    for (int d = 0; d < nsp; d++) o->d[d + 2] = geo.out[d];
    return ANVIL_OK;
}

static anvil_status maxpool_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    anvil_dtype dt = in[0].dtype;
    if (!pool_float_dtype(dt) && dt != ANVIL_DTYPE_INT8 && dt != ANVIL_DTYPE_UINT8)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: X has dtype %s; MaxPool takes FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8 "
                        "or UINT8",
                        ir_node_label(n), anvil_dtype_name(dt));
    CORE_TRY(pool_infer_common(n, in, out));
    if (n_out > 1) {
        out[1].dtype = ANVIL_DTYPE_INT64;
        out[1].shape = out[0].shape;
    }
    return ANVIL_OK;
}

static anvil_status averagepool_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                      int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    if (!pool_float_dtype(in[0].dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: X has dtype %s; AveragePool takes FLOAT, DOUBLE, FLOAT16 or BFLOAT16",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    return pool_infer_common(n, in, out);
}

static anvil_status globalaveragepool_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                            int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const ir_shape *xs = &in[0].shape;
    if (!pool_float_dtype(in[0].dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: X has dtype %s; GlobalAveragePool takes FLOAT, DOUBLE, FLOAT16 or "
                        "BFLOAT16",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    out[0].dtype = in[0].dtype;
    if (xs->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    if (xs->rank < 3)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: X has rank %d; expected rank >= 3 (N x C x D1 x ... x Dn)",
                        ir_node_label(n), xs->rank);
    out[0].shape = *xs;
    for (int d = 2; d < xs->rank; d++) {
        out[0].shape.d[d] = 1;
        out[0].shape.sym[d] = -1;
    }
    return ANVIL_OK;
}

/* ---- kernels ------------------------------------------------------------------------------- */

typedef struct pool_job {
    nn_geom g;
    bool count_include_pad, column_major;
    int64_t C, in_size, out_size;
    int64_t xstr[NN_MAX_SPATIAL], istr[NN_MAX_SPATIAL]; /* data strides, Indices strides */
    const void *x;
    void *y;
    int64_t *idx; /* MaxPool Indices or NULL */
} pool_job;

/* For output position o (spatial multi-index) fills the run of real taps per dim. Returns the
 * window's first tap per dim in *st. */
static void pool_window(const nn_geom *g, const int64_t *o, int64_t *st, int64_t *klo,
                        int64_t *khi) {
    for (int d = 0; d < g->nsp; d++) {
        st[d] = o[d] * g->stride[d] - g->pad_begin[d];
        nn_valid_range(g->kernel[d], g->dil[d], st[d], g->in[d], &klo[d], &khi[d]);
    }
}

/* Advances the multi-index v over [lo, hi) in row-major order; false when it wraps around. */
static bool pool_next(int nsp, int64_t *v, const int64_t *lo, const int64_t *hi) {
    for (int d = nsp - 1; d >= 0; d--) {
        if (++v[d] < hi[d]) return true;
        v[d] = lo[d];
    }
    return false;
}

#define POOL_DEFINE(T, SUF)                                                                        \
    static void maxpool_plane_##SUF(const pool_job *j, int64_t plane) {                            \
        const nn_geom *g = &j->g;                                                                  \
        const int nsp = g->nsp;                                                                    \
        const T *x = (const T *)j->x + plane * j->in_size;                                         \
        T *y = (T *)j->y + plane * j->out_size;                                                    \
        int64_t *idx = j->idx ? j->idx + plane * j->out_size : NULL;                               \
        int64_t o[NN_MAX_SPATIAL] = {0}, zero[NN_MAX_SPATIAL] = {0};                               \
        for (int64_t oi = 0; oi < j->out_size; oi++) {                                             \
            int64_t st[NN_MAX_SPATIAL], klo[NN_MAX_SPATIAL], khi[NN_MAX_SPATIAL];                  \
            pool_window(g, o, st, klo, khi);                                                       \
            T best = (T)-INFINITY;                                                                 \
            int64_t bi = -1, first = -1;                                                           \
            bool any = true;                                                                       \
            for (int d = 0; d < nsp; d++) any = any && klo[d] < khi[d];                            \
            int64_t k[NN_MAX_SPATIAL];                                                             \
            memcpy(k, klo, sizeof k);                                                              \
            while (any) {                                                                          \
                int64_t off = 0, ioff = 0;                                                         \
                for (int d = 0; d < nsp; d++) {                                                    \
                    int64_t pos = st[d] + k[d] * g->dil[d];                                        \
                    off += pos * j->xstr[d];                                                       \
                    ioff += pos * j->istr[d];                                                      \
                }                                                                                  \
                T v = x[off];                                                                      \
                if (first < 0) first = ioff;                                                       \
                if (v > best) {                                                                    \
                    best = v;                                                                      \
                    bi = ioff;                                                                     \
                }                                                                                  \
                any = pool_next(nsp, k, klo, khi);                                                 \
            }                                                                                      \
            y[oi] = best;                                                                          \
            if (idx) idx[oi] = (bi >= 0 ? bi : first) + (first >= 0 ? plane * j->in_size : 0);     \
            pool_next(nsp, o, zero, g->out);                                                       \
        }                                                                                          \
    }                                                                                              \
    static void maxpool_range_##SUF(void *arg, size_t begin, size_t end) {                         \
        for (size_t p = begin; p < end; p++) maxpool_plane_##SUF(arg, (int64_t)p);                 \
    }                                                                                              \
    static void avgpool_plane_##SUF(const pool_job *j, int64_t plane) {                            \
        const nn_geom *g = &j->g;                                                                  \
        const int nsp = g->nsp;                                                                    \
        const T *x = (const T *)j->x + plane * j->in_size;                                         \
        T *y = (T *)j->y + plane * j->out_size;                                                    \
        int64_t o[NN_MAX_SPATIAL] = {0}, zero[NN_MAX_SPATIAL] = {0};                               \
        for (int64_t oi = 0; oi < j->out_size; oi++) {                                             \
            int64_t st[NN_MAX_SPATIAL], klo[NN_MAX_SPATIAL], khi[NN_MAX_SPATIAL];                  \
            pool_window(g, o, st, klo, khi);                                                       \
            double sum = 0;                                                                        \
            int64_t count = 1;                                                                     \
            bool any = true;                                                                       \
            for (int d = 0; d < nsp; d++) {                                                        \
                any = any && klo[d] < khi[d];                                                      \
                int64_t lo = klo[d], hi = khi[d];                                                  \
                if (j->count_include_pad)                                                          \
                    nn_valid_range(g->kernel[d], g->dil[d], st[d] + g->pad_begin[d],               \
                                   g->in[d] + g->pad_begin[d] + g->pad_end[d], &lo, &hi);          \
                count *= hi - lo;                                                                  \
            }                                                                                      \
            int64_t k[NN_MAX_SPATIAL];                                                             \
            memcpy(k, klo, sizeof k);                                                              \
            while (any) {                                                                          \
                int64_t off = 0;                                                                   \
                for (int d = 0; d < nsp; d++) off += (st[d] + k[d] * g->dil[d]) * j->xstr[d];      \
                sum += (double)x[off];                                                             \
                any = pool_next(nsp, k, klo, khi);                                                 \
            }                                                                                      \
            y[oi] = (T)(sum / (double)count);                                                      \
            pool_next(nsp, o, zero, g->out);                                                       \
        }                                                                                          \
    }                                                                                              \
    static void avgpool_range_##SUF(void *arg, size_t begin, size_t end) {                         \
        for (size_t p = begin; p < end; p++) avgpool_plane_##SUF(arg, (int64_t)p);                 \
    }                                                                                              \
    static void gap_range_##SUF(void *arg, size_t begin, size_t end) {                             \
        const pool_job *j = arg;                                                                   \
        for (size_t p = begin; p < end; p++) {                                                     \
            const T *x = (const T *)j->x + (int64_t)p * j->in_size;                                \
            double sum = 0;                                                                        \
            for (int64_t i = 0; i < j->in_size; i++) sum += (double)x[i];                          \
            ((T *)j->y)[p] = (T)(sum / (double)j->in_size);                                        \
        }                                                                                          \
    }

POOL_DEFINE(float, f32)
POOL_DEFINE(double, f64)

typedef enum { POOL_MAX, POOL_AVG, POOL_GLOBAL_AVG } pool_kind;

static anvil_status pool_run_common(const ir_node *n, const op_tensor *const *in,
                                    op_tensor *const *out, int n_out, op_ctx *ctx, pool_kind kind) {
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    int nsp = x->rank - 2;
    pool_job j;
    memset(&j, 0, sizeof j);
    if (kind != POOL_GLOBAL_AVG) {
        const pool_params *p = n->params;
        CORE_TRY(nn_window_resolve(n, &p->win, nsp, &x->dims[2], p->win.kernel, true, &j.g));
        j.count_include_pad = p->count_include_pad;
        j.column_major = p->column_major;
        for (int d = 0; d < nsp; d++)
            if (j.g.out[d] != y->dims[d + 2])
                return core_err(ANVIL_ERR_INTERNAL,
                                "%s: output buffer dim %d is %lld but the geometry gives %lld",
                                ir_node_label(n), d + 2, (long long)y->dims[d + 2],
                                (long long)j.g.out[d]);
    }
    j.C = x->dims[1];
    j.in_size = nn_prod(nsp, &x->dims[2]);
    j.out_size = nn_prod(nsp, &y->dims[2]);
    nn_strides(nsp, &x->dims[2], j.xstr);
    if (j.column_major) {
        int64_t s = 1;
        for (int d = 0; d < nsp; d++) {
            j.istr[d] = s;
            s *= x->dims[d + 2];
        }
    } else {
        memcpy(j.istr, j.xstr, sizeof j.istr);
    }
    j.idx = (kind == POOL_MAX && n_out > 1 && out[1]) ? (int64_t *)out[1]->data : NULL;
    size_t planes = (size_t)(x->dims[0] * x->dims[1]);
    if (planes == 0 || j.out_size == 0) return ANVIL_OK;

    op_range_fn fn32 = kind == POOL_MAX   ? maxpool_range_f32
                       : kind == POOL_AVG ? avgpool_range_f32
                                          : gap_range_f32;
    op_range_fn fn64 = kind == POOL_MAX   ? maxpool_range_f64
                       : kind == POOL_AVG ? avgpool_range_f64
                                          : gap_range_f64;
    if (x->dtype == ANVIL_DTYPE_FLOAT64) {
        j.x = x->data;
        j.y = y->data;
        op_parallel_for(ctx, planes, fn64, &j);
        return ANVIL_OK;
    }
    float *ox = NULL, *oy = NULL;
    j.x = nn_stage_in_f32(n, x, &ox);
    if (!j.x) return ANVIL_ERR_OUT_OF_MEMORY;
    j.y = nn_stage_out_f32(n, y, &oy);
    if (!j.y) {
        free(ox);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    op_parallel_for(ctx, planes, fn32, &j);
    nn_stage_out_f32_finish(y, oy);
    free(ox);
    return ANVIL_OK;
}

static anvil_status maxpool_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    return pool_run_common(n, in, out, n_out, ctx, POOL_MAX);
}

static anvil_status averagepool_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                    op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    return pool_run_common(n, in, out, n_out, ctx, POOL_AVG);
}

static anvil_status globalaveragepool_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                          op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    return pool_run_common(n, in, out, n_out, ctx, POOL_GLOBAL_AVG);
}

const op_impl op_impl_maxpool = {.min_inputs = 1,
                                 .max_inputs = 1,
                                 .min_outputs = 1,
                                 .max_outputs = 2,
                                 .check = maxpool_check,
                                 .infer = maxpool_infer,
                                 .run = maxpool_run};

const op_impl op_impl_averagepool = {.min_inputs = 1,
                                     .max_inputs = 1,
                                     .min_outputs = 1,
                                     .max_outputs = 1,
                                     .check = averagepool_check,
                                     .infer = averagepool_infer,
                                     .run = averagepool_run};

const op_impl op_impl_globalaveragepool = {.min_inputs = 1,
                                           .max_inputs = 1,
                                           .min_outputs = 1,
                                           .max_outputs = 1,
                                           .check = globalaveragepool_check,
                                           .infer = globalaveragepool_infer,
                                           .run = globalaveragepool_run};

/* ==== GlobalMaxPool, LpPool and MaxUnpool =====================================================
 * LpPool reuses the window geometry of nn_common.h (kernel, strides, pads, auto_pad, and
 * from opset 18 dilations and ceil_mode). Padding contributes zeros, which leave an Lp sum
 * unchanged, so only taps inside the input are visited. MaxUnpool scatters each input value to
 * the flat output position its index names (the indices MaxPool produced, which count over the
 * whole N x C x spatial tensor); everything else is zero. */

/* ---- GlobalMaxPool --------------------------------------------------------------------------- */

static anvil_status gmp_check(ir_graph *g, ir_node *n) {
    (void)g;
    (void)n;
    return ANVIL_OK;
}

static anvil_status gmp_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    const ir_shape *x = &in[0].shape;
    out[0].dtype = in[0].dtype;
    out[0].shape = *x;
    if (x->rank < 0) return ANVIL_OK;
    if (x->rank < 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 must have rank >= 2 (N, C, ...), got %d",
                        ir_node_label(n), x->rank);
    for (int d = 2; d < x->rank; d++) {
        if (x->d[d] == 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: spatial dim %d of input 0 is 0; the maximum of an empty window "
                            "does not exist",
                            ir_node_label(n), d);
        out[0].shape.d[d] = 1;
        out[0].shape.sym[d] = -1;
    }
    return ANVIL_OK;
}

static anvil_status gmp_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0];
    size_t planes = (size_t)x->dims[0] * (size_t)x->dims[1];
    size_t sp = planes ? op_tensor_numel(x) / planes : 0;
    for (size_t pl = 0; pl < planes; pl++) {
        size_t best = pl * sp;
        for (size_t e = 1; e < sp; e++)
            if (red_cmp(x->dtype, x->data, pl * sp + e, best) > 0) best = pl * sp + e;
        core_store_f64(x->dtype, out[0]->data, pl, core_load_f64(x->dtype, x->data, best));
    }
    return ANVIL_OK;
}

const op_impl op_impl_globalmaxpool = {.min_inputs = 1,
                                       .max_inputs = 1,
                                       .min_outputs = 1,
                                       .max_outputs = 1,
                                       .check = gmp_check,
                                       .infer = gmp_infer,
                                       .run = gmp_run};

/* ---- LpPool ---------------------------------------------------------------------------------- */

typedef struct lpp_params {
    nn_window win;
    int64_t p;
} lpp_params;

static anvil_status lpp_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, lpp_params, p);
    CORE_TRY(nn_window_parse(n, true, n->opset >= 18, n->opset >= 18, &p->win));
    CORE_TRY(ir_attr_int(n, "p", 2, &p->p));
    if (p->p < 1 || p->p > 64)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: attribute 'p' is %lld; anvil supports 1..64",
                        ir_node_label(n), (long long)p->p);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status lpp_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const lpp_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    const ir_shape *x = &in[0].shape;
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    if (x->rank < 0) return ANVIL_OK;
    nn_geom geo;
    CORE_TRY(nn_window_resolve(n, &p->win, x->rank - 2, &x->d[2], p->win.kernel, true, &geo));
    ir_shape *o = &out[0].shape;
    nn_shape_unknown_dims(o, x->rank);
    for (int d = 0; d < 2; d++) {
        o->d[d] = x->d[d];
        o->sym[d] = x->sym[d];
    }
    for (int d = 0; d < geo.nsp; d++) o->d[d + 2] = geo.out[d];
    return ANVIL_OK;
}

static anvil_status lpp_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const lpp_params *p = n->params;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    anvil_dtype dt = x->dtype;
    int nsp = x->rank - 2;
    nn_geom g;
    CORE_TRY(nn_window_resolve(n, &p->win, nsp, &x->dims[2], p->win.kernel, true, &g));
    size_t planes = (size_t)x->dims[0] * (size_t)x->dims[1];
    size_t in_sp = (size_t)nn_prod(nsp, g.in), out_sp = (size_t)nn_prod(nsp, g.out);
    size_t taps = (size_t)nn_prod(nsp, g.kernel);
    int64_t istr[NN_MAX_SPATIAL];
    nn_strides(nsp, g.in, istr);
    double pw = (double)p->p;
    for (size_t pl = 0; pl < planes; pl++) {
        for (size_t o = 0; o < out_sp; o++) {
            int64_t oc[NN_MAX_SPATIAL];
            size_t rem = o;
            for (int d = nsp - 1; d >= 0; d--) {
                oc[d] = (int64_t)(rem % (size_t)g.out[d]);
                rem /= (size_t)g.out[d];
            }
            double s = 0;
            for (size_t t = 0; t < taps; t++) {
                size_t trem = t;
                int64_t off = 0;
                bool inside = true;
                for (int d = nsp - 1; d >= 0; d--) {
                    int64_t k = (int64_t)(trem % (size_t)g.kernel[d]);
                    trem /= (size_t)g.kernel[d];
                    int64_t q = oc[d] * g.stride[d] - g.pad_begin[d] + k * g.dil[d];
                    if (q < 0 || q >= g.in[d]) inside = false;
                    off += q * istr[d];
                }
                if (!inside) continue;
                double v = fabs(core_load_f64(dt, x->data, pl * in_sp + (size_t)off));
                s += p->p == 1 ? v : p->p == 2 ? v * v : pow(v, pw);
            }
            double r = p->p == 1 ? s : p->p == 2 ? sqrt(s) : pow(s, 1.0 / pw);
            core_store_f64(dt, y->data, pl * out_sp + o, r);
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_lppool = {.min_inputs = 1,
                                .max_inputs = 1,
                                .min_outputs = 1,
                                .max_outputs = 1,
                                .check = lpp_check,
                                .infer = lpp_infer,
                                .run = lpp_run};

/* ---- MaxUnpool ------------------------------------------------------------------------------- */

typedef struct unp_params {
    nn_window win;
} unp_params;

static anvil_status unp_check(ir_graph *g, ir_node *n) {
    CORE_TRY(nn_check_since(n, "MaxUnpool", 9));
    OP_PARAMS_NEW(g, unp_params, p);
    CORE_TRY(nn_window_parse(n, true, false, false, &p->win));
    if (p->win.auto_pad != NN_PAD_NOTSET)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: MaxUnpool has no 'auto_pad' attribute; give explicit 'pads'",
                        ir_node_label(n));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status unp_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const unp_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    if (in[1].dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: input 1 (I) must be INT64 but is %s",
                        ir_node_label(n), anvil_dtype_name(in[1].dtype));
    const ir_shape *x = &in[0].shape;
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    if (x->rank >= 0 && in[1].shape.rank >= 0 && !ir_shape_equal(x, &in[1].shape) &&
        ir_shape_is_static(x) && ir_shape_is_static(&in[1].shape))
        return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (I) must have the shape of input 0 (X)",
                        ir_node_label(n));
    bool has_shape = n_in > 2 && n->inputs[2] != IR_NONE;
    if (has_shape) {
        if (!in[2].value) return ANVIL_OK;
        int64_t dims[IR_MAX_RANK];
        size_t count = 0;
        CORE_TRY(op_value_ints(n, 2, &in[2], dims, IR_MAX_RANK, &count));
        if (x->rank >= 0 && (int)count != x->rank)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input 2 (output_shape) has %zu values but input 0 has rank %d",
                            ir_node_label(n), count, x->rank);
        for (size_t i = 0; i < count; i++)
            if (dims[i] < 0)
                return core_err(ANVIL_ERR_SHAPE, "%s: output_shape[%zu] is %lld; it must be >= 0",
                                ir_node_label(n), i, (long long)dims[i]);
        ir_shape_set(&out[0].shape, (int)count, dims);
        return ANVIL_OK;
    }
    if (x->rank < 0) return ANVIL_OK;
    int nsp = x->rank - 2, wn = nn_window_nsp(&p->win);
    if (nsp < 1 || wn != nsp)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 has %d spatial dims but kernel_shape describes %d",
                        ir_node_label(n), nsp, wn);
    ir_shape *o = &out[0].shape;
    *o = *x;
    for (int d = 0; d < nsp; d++) {
        int64_t xd = x->d[d + 2];
        o->sym[d + 2] = -1;
        if (xd < 0) {
            o->d[d + 2] = IR_DIM_UNKNOWN;
            continue;
        }
        int64_t s = p->win.n_strides ? p->win.strides[d] : 1;
        int64_t pb = p->win.n_pads ? p->win.pads[d] : 0,
                pe = p->win.n_pads ? p->win.pads[nsp + d] : 0;
        int64_t v;
        if (!core_mul_i64(xd - 1, s, &v) || !core_add_i64(v, p->win.kernel[d] - pb - pe, &v) ||
            v < 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: spatial dim %d: (in - 1) * stride + kernel - pads is out of range",
                            ir_node_label(n), d);
        o->d[d + 2] = v;
    }
    return ANVIL_OK;
}

static anvil_status unp_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0], *idx = in[1];
    op_tensor *y = out[0];
    size_t nx = op_tensor_numel(x), ny = op_tensor_numel(y);
    if (op_tensor_numel(idx) != nx)
        return core_err(ANVIL_ERR_RUNTIME, "%s: input 1 (I) has %zu elements, input 0 has %zu",
                        ir_node_label(n), op_tensor_numel(idx), nx);
    /* The indices count over the shape MaxPool saw: the default output shape. An explicit
     * output_shape places that block at the start of every dim (the rest stays zero). */
    const unp_params *p = n->params;
    int nsp = x->rank - 2;
    if (nsp < 1 || nn_window_nsp(&p->win) != nsp)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 has %d spatial dims but kernel_shape describes %d",
                        ir_node_label(n), nsp, nn_window_nsp(&p->win));
    int64_t inf[IR_MAX_RANK];
    inf[0] = x->dims[0];
    inf[1] = x->dims[1];
    for (int d = 0; d < nsp; d++) {
        int64_t s = p->win.n_strides ? p->win.strides[d] : 1;
        int64_t pb = p->win.n_pads ? p->win.pads[d] : 0;
        int64_t pe = p->win.n_pads ? p->win.pads[nsp + d] : 0;
        inf[d + 2] = (x->dims[d + 2] - 1) * s + p->win.kernel[d] - pb - pe;
    }
    if (y->rank != x->rank)
        return core_err(ANVIL_ERR_RUNTIME, "%s: output rank %d differs from input rank %d",
                        ir_node_label(n), y->rank, x->rank);
    for (int d = 0; d < y->rank; d++)
        if (inf[d] > y->dims[d])
            return core_err(ANVIL_ERR_RUNTIME,
                            "%s: output_shape dim %d is %lld, smaller than the unpooled size "
                            "%lld; give an output_shape at least (in - 1) * stride + kernel - pads",
                            ir_node_label(n), d, (long long)y->dims[d], (long long)inf[d]);
    size_t ninf;
    if (!core_numel(inf, x->rank, &ninf))
        return core_err(ANVIL_ERR_RUNTIME, "%s: unpooled size overflows", ir_node_label(n));
    size_t es = anvil_dtype_size(y->dtype);
    if (ny) memset(y->data, 0, ny * es);
    const int64_t *ip = idx->data;
    for (size_t i = 0; i < nx; i++) {
        if (ip[i] < 0 || (uint64_t)ip[i] >= ninf)
            return core_err(ANVIL_ERR_RUNTIME,
                            "%s: index %lld at position %zu of input 1 is outside the unpooled "
                            "tensor (%zu elements)",
                            ir_node_label(n), (long long)ip[i], i, ninf);
        size_t rem = (size_t)ip[i], off = 0, st = 1;
        for (int d = x->rank - 1; d >= 0; d--) {
            off += (rem % (size_t)inf[d]) * st;
            rem /= (size_t)inf[d];
            st *= (size_t)y->dims[d];
        }
        memcpy((char *)y->data + off * es, (const char *)x->data + i * es, es);
    }
    return ANVIL_OK;
}

const op_impl op_impl_maxunpool = {.min_inputs = 2,
                                   .max_inputs = 3,
                                   .min_outputs = 1,
                                   .max_outputs = 1,
                                   .value_inputs = 1u << 2,
                                   .check = unp_check,
                                   .infer = unp_infer,
                                   .run = unp_run};
