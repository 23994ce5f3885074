/* Integer products on quantized operands: MatMulInteger, QLinearMatMul, ConvInteger and
 * QLinearConv (attribute checking, shape inference, reference kernels). Operands are INT8 or UINT8.
 *
 * These ops subtract the zero points while widening the operands to int32 once per run, then
 * accumulate in uint32 so that the two's complement wrap-around of an overflowing int32 sum is
 * defined behaviour. The QLinear ops requantize the int32 sums: each is multiplied in float by the
 * combined scale (input scales over the output scale) and rounded half to even like
 * QuantizeLinear. */
#include "ops/quant/quant_common.h"

/* ---- integer products: shared pieces --------------------------------------------------------- */

static bool q_mm_type(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_INT8 || dt == ANVIL_DTYPE_UINT8;
}

/* Copies t into a malloc'd int32 buffer, subtracting the zero point. zp_index maps an element
 * index to the zero point's index (NULL or zp absent: zero point 0). */
typedef size_t (*q_zp_map)(const void *arg, size_t i);

static int32_t *q_widen(const ir_node *n, const op_tensor *t, const op_tensor *zp, q_zp_map map,
                        const void *arg) {
    size_t num = op_tensor_numel(t);
    int32_t *buf = malloc((num ? num : 1) * sizeof *buf);
    if (!buf) {
        core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory to widen %zu elements to int32",
                 ir_node_label(n), num);
        return NULL;
    }
    for (size_t i = 0; i < num; i++) {
        int64_t z = zp ? core_load_i64(zp->dtype, zp->data, map ? map(arg, i) : 0) : 0;
        buf[i] = (int32_t)(core_load_i64(t->dtype, t->data, i) - z);
    }
    return buf;
}

/* A zero point / scale that is a single value (any rank, one element). */
static bool q_is_single(const op_tensor *t) {
    return op_tensor_numel(t) == 1;
}

/* ---- MatMulInteger / QLinearMatMul ----------------------------------------------------------- */

/* Input positions of the two operands and their zero points / scales. */
typedef struct qmm_io {
    int a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp;
} qmm_io;

static const qmm_io qmm_io_integer = {0, -1, 2, 1, -1, 3, -1, -1};
static const qmm_io qmm_io_qlinear = {0, 1, 2, 3, 4, 5, 6, 7};

static anvil_status qmm_check(ir_graph *g, ir_node *n) {
    (void)g;
    CORE_TRY(q_since(n, 10));
    n->params = NULL;
    return ANVIL_OK;
}

/* Same-shape view of the numpy-matmul output shape (batch dims broadcast). */
static anvil_status qmm_shape(const ir_node *n, const ir_shape *a, const ir_shape *b, ir_shape *o) {
    if (a->rank == 0 || b->rank == 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: A has rank %d and B rank %d; both must have rank >= 1",
                        ir_node_label(n), a->rank, b->rank);
    if (a->rank < 0 || b->rank < 0) {
        ir_shape_unknown(o);
        return ANVIL_OK;
    }
    int64_t ka = a->d[a->rank - 1], kb = b->d[b->rank >= 2 ? b->rank - 2 : 0];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: A's last dim is %lld but B's second-to-last is %lld; they must be "
                        "equal",
                        ir_node_label(n), (long long)ka, (long long)kb);
    return nn_matmul_shape(n, a, b, o);
}

/* Per-row parameters of A are a 1-D [M] list or an [..., M, 1] tensor (one per row of every
 * batch); per-column parameters of B are a 1-D [N] list or an [..., 1, N] tensor. */
static anvil_status qmm_param_shape(const ir_node *n, const char *what, const ir_shape *p,
                                    const ir_shape *x, bool rows) {
    if (p->rank < 0 || x->rank < 0) return ANVIL_OK;
    size_t num;
    if (ir_shape_numel(p, &num) && num == 1) return ANVIL_OK;
    /* a 1-D operand has one row (A) or one column (B): only a single value fits */
    int64_t len = x->rank < 2 ? 1 : rows ? x->d[x->rank - 2] : x->d[x->rank - 1];
    bool ok = p->rank == 1 && (p->d[0] < 0 || len < 0 || p->d[0] == len);
    if (!ok && p->rank == x->rank && x->rank >= 2) {
        ok = true;
        for (int d = 0; d < x->rank; d++) {
            int64_t want = (rows && d == x->rank - 1) || (!rows && d == x->rank - 2) ? 1 : x->d[d];
            ok &= p->d[d] < 0 || want < 0 || p->d[d] == want;
        }
    }
    if (ok) return ANVIL_OK;
    char ps[128], xs[128];
    return core_err(ANVIL_ERR_SHAPE,
                    "%s: %s has shape %s for an operand of shape %s; expected a scalar, a 1-D "
                    "list with one value per %s, or the operand's shape with the %s dim set to 1",
                    ir_node_label(n), what, ir_shape_str(NULL, p, ps, sizeof ps),
                    ir_shape_str(NULL, x, xs, sizeof xs), rows ? "row" : "column",
                    rows ? "last" : "second-to-last");
}

static anvil_status qmm_infer_common(const ir_node *n, const op_tinfo *in, int n_in,
                                     const qmm_io *io, op_tinfo *out) {
    const op_tinfo *a = &in[io->a], *b = &in[io->b];
    CORE_TRY(q_require(n, "input A", a->dtype, q_mm_type(a->dtype), "INT8 or UINT8"));
    CORE_TRY(q_require(n, "input B", b->dtype, q_mm_type(b->dtype), "INT8 or UINT8"));
    struct {
        int idx;
        const char *what;
        const op_tinfo *x;
        bool rows;
        bool is_zp;
    } ps[] = {{io->a_zp, "A's zero point", a, true, true},
              {io->b_zp, "B's zero point", b, false, true},
              {io->a_scale, "A's scale", a, true, false},
              {io->b_scale, "B's scale", b, false, false}};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        if (ps[k].idx < 0 || ps[k].idx >= n_in || !op_has_input(n, ps[k].idx)) continue;
        const op_tinfo *t = &in[ps[k].idx];
        if (ps[k].is_zp && t->dtype != ps[k].x->dtype)
            return core_err(ANVIL_ERR_SHAPE, "%s: %s is %s but its operand is %s; they must match",
                            ir_node_label(n), ps[k].what, anvil_dtype_name(t->dtype),
                            anvil_dtype_name(ps[k].x->dtype));
        CORE_TRY(qmm_param_shape(n, ps[k].what, &t->shape, &ps[k].x->shape, ps[k].rows));
    }
    return qmm_shape(n, &a->shape, &b->shape, &out[0].shape);
}

static anvil_status matmulinteger_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                        int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    CORE_TRY(qmm_infer_common(n, in, n_in, &qmm_io_integer, out));
    out[0].dtype = ANVIL_DTYPE_INT32;
    return ANVIL_OK;
}

static anvil_status q_scalar_param(const ir_node *n, const char *what, const op_tinfo *t) {
    size_t num;
    if (t->shape.rank >= 0 && ir_shape_numel(&t->shape, &num) && num != 1) {
        char s[128];
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s has shape %s; anvil supports only a single (per-tensor) value "
                        "here",
                        ir_node_label(n), what, ir_shape_str(NULL, &t->shape, s, sizeof s));
    }
    return ANVIL_OK;
}

static anvil_status qlinearmatmul_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                        int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const qmm_io *io = &qmm_io_qlinear;
    static const int scales[] = {1, 4, 6};
    static const char *const names[] = {"a_scale", "b_scale", "y_scale"};
    for (int k = 0; k < 3; k++) {
        int i = scales[k];
        bool ok = n->opset < 21 ? in[i].dtype == ANVIL_DTYPE_FLOAT32 : q_float_type(in[i].dtype);
        CORE_TRY(q_require(n, names[k], in[i].dtype, ok,
                           n->opset < 21 ? "FLOAT" : "FLOAT, FLOAT16, BFLOAT16 or DOUBLE"));
        CORE_TRY(q_check_scale(n, names[k], &in[i]));
    }
    CORE_TRY(q_require(n, "y_zero_point", in[7].dtype, q_mm_type(in[7].dtype), "INT8 or UINT8"));
    CORE_TRY(q_scalar_param(n, "y_scale", &in[6]));
    CORE_TRY(q_scalar_param(n, "y_zero_point", &in[7]));
    CORE_TRY(qmm_infer_common(n, in, n_in, io, out));
    /* scales with the operand's full rank are looked up by the output's batch index, so that
     * operand's batch dims must not broadcast */
    for (int k = 0; k < 2; k++) {
        const op_tinfo *sc = &in[k ? io->b_scale : io->a_scale], *x = &in[k ? io->b : io->a];
        size_t num;
        if (sc->shape.rank < 2 || (ir_shape_numel(&sc->shape, &num) && num == 1)) continue;
        const ir_shape *o = &out[0].shape;
        if (o->rank < 0 || x->shape.rank < 0) continue;
        bool same = o->rank == x->shape.rank;
        for (int d = 0; same && d < o->rank - 2; d++)
            same = o->d[d] < 0 || x->shape.d[d] < 0 || o->d[d] == x->shape.d[d];
        if (!same) {
            char xs[128], os[128];
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: %s has a per-%s scale of full rank but its shape %s broadcasts "
                            "to the output %s; anvil needs equal batch dims there (or a 1-D "
                            "scale)",
                            ir_node_label(n), k ? "B" : "A", k ? "column" : "row",
                            ir_shape_str(NULL, &x->shape, xs, sizeof xs),
                            ir_shape_str(NULL, o, os, sizeof os));
        }
    }
    out[0].dtype = in[7].dtype;
    return ANVIL_OK;
}

typedef struct qmm_map {
    int64_t rows, cols; /* of the operand's matrices */
    bool per_row;       /* A: one value per row; B: one per column */
    bool full;          /* the parameter has the operand's rank (one per batch too) */
} qmm_map;

static size_t qmm_map_index(const void *arg, size_t i) {
    const qmm_map *m = arg;
    size_t cols = (size_t)m->cols, rows = (size_t)m->rows;
    size_t mat = i / (rows * cols), r = (i / cols) % rows, c = i % cols;
    if (m->per_row) return m->full ? mat * rows + r : r;
    return m->full ? mat * cols + c : c;
}

/* How parameter t (zero point or scale) of operand x is indexed by x's element index. */
static qmm_map qmm_map_for(const op_tensor *t, const op_tensor *x, bool rows) {
    qmm_map m;
    m.cols = x->dims[x->rank - 1];
    m.rows = x->rank >= 2 ? x->dims[x->rank - 2] : 1;
    m.per_row = rows;
    m.full = t && t->rank == x->rank && x->rank >= 2;
    if (t && q_is_single(t)) {
        /* a single value: every element maps to index 0 */
        m.per_row = true;
        m.full = false;
        m.rows = 1;
    }
    return m;
}

static size_t qmm_single_index(const void *arg, size_t i) {
    (void)arg;
    (void)i;
    return 0;
}

/* y[batch, i, j] = sum_k a[.., i, k] * b[.., k, j] in wrapping int32, batch dims broadcast. */
static void qmm_product(const int32_t *a, const int32_t *b, const op_tensor *ta,
                        const op_tensor *tb, const op_tensor *ty, int32_t *y) {
    int ra = ta->rank, rb = tb->rank;
    int64_t M = ra >= 2 ? ta->dims[ra - 2] : 1, K = ta->dims[ra - 1];
    int64_t N = rb >= 2 ? tb->dims[rb - 1] : 1;
    int nb = ty->rank - (ra >= 2) - (rb >= 2);
    int nba = ra >= 2 ? ra - 2 : 0, nbb = rb >= 2 ? rb - 2 : 0;
    int64_t astr[IR_MAX_RANK], bstr[IR_MAX_RANK], sa = M * K, sb = K * N;
    for (int d = nb - 1; d >= 0; d--) {
        int da = d - (nb - nba), db = d - (nb - nbb);
        astr[d] = (da >= 0 && ta->dims[da] != 1) ? sa : 0;
        bstr[d] = (db >= 0 && tb->dims[db] != 1) ? sb : 0;
        if (da >= 0) sa *= ta->dims[da];
        if (db >= 0) sb *= tb->dims[db];
    }
    int64_t batches = nn_prod(nb, ty->dims);
    for (int64_t bt = 0; bt < batches; bt++) {
        int64_t rem = bt, ao = 0, bo = 0;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t q = rem % ty->dims[d];
            rem /= ty->dims[d];
            ao += q * astr[d];
            bo += q * bstr[d];
        }
        for (int64_t i = 0; i < M; i++) {
            uint32_t *row = (uint32_t *)y + (bt * M + i) * N;
            for (int64_t j = 0; j < N; j++) row[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                uint32_t av = (uint32_t)a[ao + i * K + k];
                const int32_t *brow = b + bo + k * N;
                for (int64_t j = 0; j < N; j++) row[j] += av * (uint32_t)brow[j];
            }
        }
    }
}

/* Widens A and B with their zero points and multiplies them into acc (numel of y int32s). */
static anvil_status qmm_accumulate(const ir_node *n, const op_tensor *const *in, int n_in,
                                   const qmm_io *io, const op_tensor *y, int32_t *acc) {
    const op_tensor *a = in[io->a], *b = in[io->b];
    const op_tensor *az = q_has(in, n_in, io->a_zp) ? in[io->a_zp] : NULL;
    const op_tensor *bz = q_has(in, n_in, io->b_zp) ? in[io->b_zp] : NULL;
    qmm_map ma = qmm_map_for(az, a, true), mb = qmm_map_for(bz, b, false);
    int32_t *wa = q_widen(n, a, az, az && q_is_single(az) ? qmm_single_index : qmm_map_index, &ma);
    int32_t *wb =
        wa ? q_widen(n, b, bz, bz && q_is_single(bz) ? qmm_single_index : qmm_map_index, &mb)
           : NULL;
    if (!wb) {
        free(wa);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    qmm_product(wa, wb, a, b, y, acc);
    free(wa);
    free(wb);
    return ANVIL_OK;
}

static anvil_status matmulinteger_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                      op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    if (op_tensor_numel(out[0]) == 0) return ANVIL_OK;
    return qmm_accumulate(n, in, n_in, &qmm_io_integer, out[0], out[0]->data);
}

/* Requantizes QLinearMatMul's int32 sums: y = saturate(round(acc * sa * sb / sy) + zy). The
 * per-row scale of A and the per-column scale of B are looked up by the output's row and column. */
static void qmm_requantize(const op_tensor *const *in, op_tensor *y, const int32_t *acc) {
    size_t num = op_tensor_numel(y);
    const op_tensor *as = in[1], *bs = in[4], *ys = in[6], *yz = in[7];
    const op_tensor *ta = in[0], *tb = in[3];
    int64_t N = tb->rank >= 2 ? tb->dims[tb->rank - 1] : 1;
    int64_t M = ta->rank >= 2 ? ta->dims[ta->rank - 2] : 1;
    double sy = core_load_f64(ys->dtype, ys->data, 0);
    double zy = (double)core_load_i64(yz->dtype, yz->data, 0);
    bool a_full = as->rank >= 2 && !q_is_single(as), b_full = bs->rank >= 2 && !q_is_single(bs);
    for (size_t i = 0; i < num; i++) {
        size_t col = i % (size_t)N, row = (i / (size_t)N) % (size_t)M, mat = i / (size_t)(N * M);
        size_t ai = q_is_single(as) ? 0 : a_full ? mat * (size_t)M + row : row;
        size_t bi = q_is_single(bs) ? 0 : b_full ? mat * (size_t)N + col : col;
        double m = core_load_f64(as->dtype, as->data, ai) * core_load_f64(bs->dtype, bs->data, bi);
        double v = (double)(float)((float)acc[i] * (float)(m / sy));
        core_store_i64(y->dtype, y->data, i, q_saturate(nearbyint(v) + zy, y->dtype));
    }
}

/* ---- ConvInteger / QLinearConv --------------------------------------------------------------- */

/* Input positions: x, w, bias and the quantization parameters. */
typedef struct qconv_io {
    int x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias;
} qconv_io;

static const qconv_io qconv_io_integer = {0, -1, 2, 1, -1, 3, -1, -1, -1};
static const qconv_io qconv_io_qlinear = {0, 1, 2, 3, 4, 5, 6, 7, 8};

static anvil_status qconv_check(ir_graph *g, ir_node *n) {
    CORE_TRY(q_since(n, 10));
    OP_PARAMS_NEW(g, qconv_params, p);
    CORE_TRY(nn_window_parse(n, false, true, false, &p->win));
    CORE_TRY(ir_attr_int(n, "group", 1, &p->group));
    if (p->group < 1 || p->group > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'group' is %lld; it must be >= 1",
                        ir_node_label(n), (long long)p->group);
    n->params = p;
    return ANVIL_OK;
}

/* Output shape N x M x out-spatial from x (N x C x ...) and w (M x C/group x k...). */
static anvil_status qconv_shape(const ir_node *n, const qconv_params *p, const ir_shape *x,
                                const ir_shape *w, ir_shape *o) {
    if (x->rank < 0 || w->rank < 0) {
        int r = x->rank >= 0 ? x->rank : w->rank;
        nn_shape_unknown_dims(o, r);
        return ANVIL_OK;
    }
    char xs[128], ws[128];
    if (x->rank < 3 || w->rank != x->rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: x has shape %s and w %s; both need the same rank >= 3 (N x C x "
                        "spatial and M x C/group x kernel)",
                        ir_node_label(n), ir_shape_str(NULL, x, xs, sizeof xs),
                        ir_shape_str(NULL, w, ws, sizeof ws));
    int nsp = x->rank - 2;
    if (x->d[1] >= 0 && w->d[1] >= 0 && x->d[1] != w->d[1] * p->group)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: x has %lld channels but w expects %lld x group %lld; they must match",
                        ir_node_label(n), (long long)x->d[1], (long long)w->d[1],
                        (long long)p->group);
    if (w->d[0] >= 0 && w->d[0] % p->group != 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: w has %lld output channels, not a multiple of group %lld",
                        ir_node_label(n), (long long)w->d[0], (long long)p->group);
    int64_t kernel[NN_MAX_SPATIAL];
    for (int d = 0; d < nsp; d++) {
        kernel[d] = p->win.n_kernel ? p->win.kernel[d] : w->d[2 + d];
        if (p->win.n_kernel && w->d[2 + d] >= 0 && w->d[2 + d] != kernel[d])
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: kernel_shape[%d] is %lld but w has %lld there; they must agree",
                            ir_node_label(n), d, (long long)kernel[d], (long long)w->d[2 + d]);
        if (kernel[d] < 0) {
            nn_shape_unknown_dims(o, x->rank);
            o->d[0] = x->d[0];
            o->sym[0] = x->sym[0];
            o->d[1] = w->d[0];
            return ANVIL_OK;
        }
    }
    nn_geom g;
    CORE_TRY(nn_window_resolve(n, &p->win, nsp, x->d + 2, kernel, false, &g));
    nn_shape_unknown_dims(o, x->rank);
    o->d[0] = x->d[0];
    o->sym[0] = x->sym[0];
    o->d[1] = w->d[0];
    for (int d = 0; d < nsp; d++) o->d[2 + d] = g.out[d];
    return ANVIL_OK;
}

/* A per-output-channel parameter (w's zero point or scale): a single value or 1-D of length M. */
static anvil_status qconv_channel_param(const ir_node *n, const char *what, const ir_shape *t,
                                        const ir_shape *w) {
    size_t num;
    if (t->rank < 0 || (ir_shape_numel(t, &num) && num == 1)) return ANVIL_OK;
    if (t->rank == 1 && (t->d[0] < 0 || w->rank < 1 || w->d[0] < 0 || t->d[0] == w->d[0]))
        return ANVIL_OK;
    char ts[128], ws[128];
    return core_err(ANVIL_ERR_SHAPE,
                    "%s: %s has shape %s; expected a scalar or a 1-D list with one value per "
                    "output channel of w %s",
                    ir_node_label(n), what, ir_shape_str(NULL, t, ts, sizeof ts),
                    ir_shape_str(NULL, w, ws, sizeof ws));
}

static anvil_status qconv_infer_common(const ir_node *n, const op_tinfo *in, int n_in,
                                       const qconv_io *io, op_tinfo *out) {
    const qconv_params *p = n->params;
    const op_tinfo *x = &in[io->x], *w = &in[io->w];
    CORE_TRY(q_require(n, "input x", x->dtype, q_mm_type(x->dtype), "INT8 or UINT8"));
    CORE_TRY(q_require(n, "input w", w->dtype, q_mm_type(w->dtype), "INT8 or UINT8"));
    if (io->x_zp < n_in && op_has_input(n, io->x_zp)) {
        const op_tinfo *z = &in[io->x_zp];
        if (z->dtype != x->dtype)
            return core_err(ANVIL_ERR_SHAPE, "%s: x's zero point is %s but x is %s",
                            ir_node_label(n), anvil_dtype_name(z->dtype),
                            anvil_dtype_name(x->dtype));
        CORE_TRY(q_scalar_param(n, "x's zero point", z));
    }
    if (io->w_zp < n_in && op_has_input(n, io->w_zp)) {
        const op_tinfo *z = &in[io->w_zp];
        if (z->dtype != w->dtype)
            return core_err(ANVIL_ERR_SHAPE, "%s: w's zero point is %s but w is %s",
                            ir_node_label(n), anvil_dtype_name(z->dtype),
                            anvil_dtype_name(w->dtype));
        CORE_TRY(qconv_channel_param(n, "w's zero point", &z->shape, &w->shape));
    }
    return qconv_shape(n, p, &x->shape, &w->shape, &out[0].shape);
}

static anvil_status convinteger_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                      int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    CORE_TRY(qconv_infer_common(n, in, n_in, &qconv_io_integer, out));
    out[0].dtype = ANVIL_DTYPE_INT32;
    return ANVIL_OK;
}

static anvil_status qlinearconv_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                      int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    static const int scales[] = {1, 4, 6};
    static const char *const names[] = {"x_scale", "w_scale", "y_scale"};
    for (int k = 0; k < 3; k++) {
        CORE_TRY(q_require(n, names[k], in[scales[k]].dtype,
                           in[scales[k]].dtype == ANVIL_DTYPE_FLOAT32, "FLOAT"));
        CORE_TRY(q_check_scale(n, names[k], &in[scales[k]]));
    }
    CORE_TRY(q_scalar_param(n, "x_scale", &in[1]));
    CORE_TRY(q_scalar_param(n, "y_scale", &in[6]));
    CORE_TRY(q_scalar_param(n, "y_zero_point", &in[7]));
    CORE_TRY(qconv_channel_param(n, "w_scale", &in[4].shape, &in[3].shape));
    CORE_TRY(q_require(n, "y_zero_point", in[7].dtype, q_mm_type(in[7].dtype), "INT8 or UINT8"));
    if (n_in > 8 && op_has_input(n, 8)) {
        CORE_TRY(q_require(n, "bias B", in[8].dtype, in[8].dtype == ANVIL_DTYPE_INT32, "INT32"));
        const ir_shape *b = &in[8].shape, *w = &in[3].shape;
        if (b->rank >= 0 && (b->rank != 1 || (b->d[0] >= 0 && w->rank >= 1 && w->d[0] >= 0 &&
                                              b->d[0] != w->d[0]))) {
            char bs[128];
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: bias B has shape %s; it must be 1-D with one value per output "
                            "channel (%lld)",
                            ir_node_label(n), ir_shape_str(NULL, b, bs, sizeof bs),
                            (long long)(w->rank >= 1 ? w->d[0] : -1));
        }
    }
    CORE_TRY(qconv_infer_common(n, in, n_in, &qconv_io_qlinear, out));
    out[0].dtype = in[7].dtype;
    return ANVIL_OK;
}

static size_t qconv_wzp_index(const void *arg, size_t i) {
    const int64_t *per_oc = arg; /* elements per output channel */
    return i / (size_t)*per_oc;
}

/* One convolution problem on widened operands; planes (batch x output channel) are the units of
 * work split across threads, each written by exactly one of them. */
typedef struct qconv_job {
    const qconv_params *p;
    const nn_geom *g;
    int64_t C, M, cg;
    const int32_t *xv, *wv;
    int32_t *y;
} qconv_job;

/* Direct convolution into wrapping int32 sums for planes [begin, end): for each output element,
 * iterates the taps of its window that land inside the input. */
static void qconv_range(void *arg, size_t begin, size_t end) {
    const qconv_job *j = arg;
    const nn_geom *g = j->g;
    int nsp = g->nsp;
    int64_t mg = j->M / j->p->group, cg = j->cg;
    int64_t in_sz = nn_prod(nsp, g->in), out_sz = nn_prod(nsp, g->out);
    int64_t k_sz = nn_prod(nsp, g->kernel);
    int64_t in_str[NN_MAX_SPATIAL];
    nn_strides(nsp, g->in, in_str);
    for (size_t plane = begin; plane < end; plane++) {
        int64_t b = (int64_t)plane / j->M, m = (int64_t)plane % j->M, grp = m / mg;
        uint32_t *yo = (uint32_t *)j->y + (int64_t)plane * out_sz;
        for (int64_t o = 0; o < out_sz; o++) {
            int64_t oi[NN_MAX_SPATIAL], rem = o;
            for (int d = nsp - 1; d >= 0; d--) {
                oi[d] = rem % g->out[d];
                rem /= g->out[d];
            }
            uint32_t sum = 0;
            for (int64_t kk = 0; kk < k_sz; kk++) {
                int64_t off = 0, kr = kk;
                bool inside = true;
                for (int d = nsp - 1; d >= 0; d--) {
                    int64_t kd = kr % g->kernel[d];
                    kr /= g->kernel[d];
                    int64_t pos = oi[d] * g->stride[d] - g->pad_begin[d] + kd * g->dil[d];
                    if (pos < 0 || pos >= g->in[d]) {
                        inside = false;
                        break;
                    }
                    off += pos * in_str[d];
                }
                if (!inside) continue;
                for (int64_t c = 0; c < cg; c++) {
                    int64_t xc = grp * cg + c;
                    uint32_t xe = (uint32_t)j->xv[(b * j->C + xc) * in_sz + off];
                    uint32_t we = (uint32_t)j->wv[(m * cg + c) * k_sz + kk];
                    sum += xe * we;
                }
            }
            yo[o] = sum;
        }
    }
}

static anvil_status qconv_accumulate(const ir_node *n, const op_tensor *const *in, int n_in,
                                     const qconv_io *io, int32_t *acc, op_ctx *ctx) {
    const qconv_params *p = n->params;
    const op_tensor *x = in[io->x], *w = in[io->w];
    const op_tensor *xz = q_has(in, n_in, io->x_zp) ? in[io->x_zp] : NULL;
    const op_tensor *wz = q_has(in, n_in, io->w_zp) ? in[io->w_zp] : NULL;
    int nsp = x->rank - 2;
    nn_geom g;
    CORE_TRY(nn_window_resolve(n, &p->win, nsp, x->dims + 2, w->dims + 2, false, &g));
    int64_t per_oc = nn_prod(w->rank - 1, w->dims + 1);
    int32_t *xv = q_widen(n, x, xz, qmm_single_index, NULL);
    int32_t *wv =
        xv ? q_widen(n, w, wz, wz && !q_is_single(wz) ? qconv_wzp_index : qmm_single_index, &per_oc)
           : NULL;
    if (!wv) {
        free(xv);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    qconv_job job = {.p = p,
                     .g = &g,
                     .C = x->dims[1],
                     .M = w->dims[0],
                     .cg = w->dims[1],
                     .xv = xv,
                     .wv = wv,
                     .y = acc};
    op_parallel_for(ctx, (size_t)(x->dims[0] * w->dims[0]), qconv_range, &job);
    free(xv);
    free(wv);
    return ANVIL_OK;
}

static anvil_status convinteger_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                    op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    if (op_tensor_numel(out[0]) == 0) return ANVIL_OK;
    return qconv_accumulate(n, in, n_in, &qconv_io_integer, out[0]->data, ctx);
}

/* Requantizes QLinearConv's int32 sums (plus the bias, in wrapping int32) with the per-tensor
 * scale of x and the per-tensor or per-output-channel scale of w. */
static void qconv_requantize(const op_tensor *const *in, int n_in, op_tensor *y,
                             const int32_t *acc) {
    size_t num = op_tensor_numel(y);
    const op_tensor *xs = in[1], *ws = in[4], *ys = in[6], *yz = in[7];
    const op_tensor *bias = q_has(in, n_in, 8) ? in[8] : NULL;
    int64_t M = y->dims[1];
    size_t plane = num / (size_t)(y->dims[0] * M);
    float sx = (float)core_load_f64(xs->dtype, xs->data, 0);
    float sy = (float)core_load_f64(ys->dtype, ys->data, 0);
    double zy = (double)core_load_i64(yz->dtype, yz->data, 0);
    for (size_t i = 0; i < num; i++) {
        size_t m = (i / plane) % (size_t)M;
        float sw = (float)core_load_f64(ws->dtype, ws->data, q_is_single(ws) ? 0 : m);
        int32_t a = acc[i];
        if (bias) a = (int32_t)((uint32_t)a + (uint32_t)((const int32_t *)bias->data)[m]);
        float v = (float)a * (sx * sw / sy);
        core_store_i64(y->dtype, y->data, i, q_saturate(nearbyintf(v) + zy, y->dtype));
    }
}

/* ---- QLinearMatMul / QLinearConv: the shared kernel ------------------------------------------ */

/* The integer product's int32 sums go to a scratch buffer and are requantized from there into y. */
static anvil_status qlinear_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    op_tensor *y = out[0];
    size_t num = op_tensor_numel(y);
    if (num == 0) return ANVIL_OK;
    int32_t *acc = malloc(num * sizeof *acc);
    if (!acc)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu int32 sums",
                        ir_node_label(n), num);
    bool mm = n->op == IR_OP_QLINEARMATMUL;
    anvil_status s = mm ? qmm_accumulate(n, in, n_in, &qmm_io_qlinear, y, acc)
                        : qconv_accumulate(n, in, n_in, &qconv_io_qlinear, acc, ctx);
    if (s == ANVIL_OK && mm) qmm_requantize(in, y, acc);
    if (s == ANVIL_OK && !mm) qconv_requantize(in, n_in, y, acc);
    free(acc);
    return s;
}

/* ---- op table entries ------------------------------------------------------------------------ */

const op_impl op_impl_matmulinteger = {.min_inputs = 2,
                                       .max_inputs = 4,
                                       .min_outputs = 1,
                                       .max_outputs = 1,
                                       .check = qmm_check,
                                       .infer = matmulinteger_infer,
                                       .run = matmulinteger_run};

const op_impl op_impl_qlinearmatmul = {.min_inputs = 8,
                                       .max_inputs = 8,
                                       .min_outputs = 1,
                                       .max_outputs = 1,
                                       .check = qmm_check,
                                       .infer = qlinearmatmul_infer,
                                       .run = qlinear_run};

const op_impl op_impl_convinteger = {.min_inputs = 2,
                                     .max_inputs = 4,
                                     .min_outputs = 1,
                                     .max_outputs = 1,
                                     .check = qconv_check,
                                     .infer = convinteger_infer,
                                     .run = convinteger_run};

const op_impl op_impl_qlinearconv = {.min_inputs = 8,
                                     .max_inputs = 9,
                                     .min_outputs = 1,
                                     .max_outputs = 1,
                                     .check = qconv_check,
                                     .infer = qlinearconv_infer,
                                     .run = qlinear_run};
