/* Upsample (opsets 7-9; deprecated at 10 in favour of Resize) and Col2Im. Upsample is small
 * enough that it has its own kernel here rather than going through Resize's machinery: per axis
 * the source coordinate is y / scale ("asymmetric"), nearest takes its floor, linear blends the
 * two neighbours (clamped at the far edge). */
#include "ops/tensor_common.h"

#include <math.h>
#include <stdlib.h>

/* ---- Upsample ------------------------------------------------------------------------------ */

typedef struct upsample_params {
    bool linear;
    const float *scales; /* opset 7: the `scales` attribute; NULL from opset 9 (input 1) */
    size_t n_scales;
} upsample_params;

static anvil_status upsample_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 7, 10));
    OP_PARAMS_NEW(g, upsample_params, p);
    memset(p, 0, sizeof *p);
    const char *mode;
    CORE_TRY(ir_attr_string(n, "mode", "nearest", &mode));
    if (strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0)
        p->linear = true;
    else if (strcmp(mode, "nearest") != 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'mode' is '%s'; expected 'nearest' or 'linear'",
                        ir_node_label(n), mode);
    if (n->opset < 9) {
        CORE_TRY(ir_attr_floats(n, "scales", &p->scales, &p->n_scales));
        if (!p->scales)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'scales' is required at opset %d", ir_node_label(n),
                            n->opset);
        if (n->n_inputs != 1)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: at opset %d Upsample has one input (scales is an attribute)",
                            ir_node_label(n), n->opset);
    } else {
        if (ir_node_attr(n, "scales"))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: from opset 9 the scales are input 1, not an attribute",
                            ir_node_label(n));
        if (n->n_inputs != 2)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: at opset %d Upsample takes 2 inputs (X, scales) but has %d",
                            ir_node_label(n), n->opset, n->n_inputs);
    }
    n->params = p;
    return ANVIL_OK;
}

/* The scales, one per dim of X, from the attribute or input 1; *known false if not yet. */
static anvil_status upsample_scales(const ir_node *n, const op_tinfo *in, int rank, double *sc,
                                    bool *known) {
    const upsample_params *p = n->params;
    *known = false;
    size_t cnt = 0;
    if (p->scales) {
        cnt = p->n_scales;
        for (size_t i = 0; i < cnt && i < IR_MAX_RANK; i++) sc[i] = p->scales[i];
    } else {
        if (in[1].dtype != ANVIL_DTYPE_FLOAT32)
            return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (scales) must be FLOAT32 but is %s",
                            ir_node_label(n), anvil_dtype_name(in[1].dtype));
        if (!in[1].value) return ANVIL_OK;
        if (!ir_shape_numel(&in[1].shape, &cnt)) return ANVIL_OK;
        for (size_t i = 0; i < cnt && i < IR_MAX_RANK; i++) sc[i] = ((const float *)in[1].value)[i];
    }
    if (cnt != (size_t)rank)
        return core_err(ANVIL_ERR_SHAPE, "%s: %zu scales for an input of rank %d; give one per dim",
                        ir_node_label(n), cnt, rank);
    for (int i = 0; i < rank; i++)
        if (!(sc[i] > 0) || isinf(sc[i]))
            return core_err(ANVIL_ERR_SHAPE, "%s: scale %d is %g; scales must be positive",
                            ir_node_label(n), i, sc[i]);
    *known = true;
    return ANVIL_OK;
}

static anvil_status upsample_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const upsample_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    if (p->linear && in[0].dtype == ANVIL_DTYPE_BOOL)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: linear mode needs a numeric dtype, not BOOL",
                        ir_node_label(n));
    const ir_shape *x = &in[0].shape;
    out[0].dtype = in[0].dtype;
    if (x->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    double sc[IR_MAX_RANK] = {0};
    bool known;
    CORE_TRY(upsample_scales(n, in, x->rank, sc, &known));
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, x->rank);
    if (!known) return ANVIL_OK;
    for (int i = 0; i < x->rank; i++) {
        if (x->d[i] < 0) continue;
        double d = floor((double)x->d[i] * sc[i]);
        if (d > 9.0e15)
            return core_err(ANVIL_ERR_LIMIT, "%s: output dim %d is too large", ir_node_label(n), i);
        y->d[i] = (int64_t)d;
    }
    return ANVIL_OK;
}

static anvil_status upsample_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const upsample_params *p = n->params;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    int r = x->rank;
    /* the scale actually applied per axis is out / in, as the planner sized the output */
    double sc[IR_MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (x->dims[i] == 0 && y->dims[i] != 0)
            return core_err(ANVIL_ERR_INTERNAL, "%s: output has data for an empty input",
                            ir_node_label(n));
        sc[i] = x->dims[i] ? (double)y->dims[i] / (double)x->dims[i] : 1.0;
    }
    if (p->scales || (n->n_inputs > 1 && in[1]))
        for (int i = 0; i < r; i++) {
            double s = p->scales ? p->scales[i] : (double)((const float *)in[1]->data)[i];
            if (s > 0) sc[i] = s;
        }
    int64_t xs[IR_MAX_RANK];
    tensor_strides(x->dims, r, xs);
    size_t cnt = op_tensor_numel(y), es = anvil_dtype_size(x->dtype);
    for (size_t e = 0; e < cnt; e++) {
        int64_t lo[IR_MAX_RANK], hi[IR_MAX_RANK];
        double w[IR_MAX_RANK];
        size_t rem = e;
        for (int i = r - 1; i >= 0; i--) {
            int64_t yi = (int64_t)(rem % (size_t)y->dims[i]);
            rem /= (size_t)y->dims[i];
            double xc = (double)yi / sc[i];
            int64_t f = (int64_t)floor(xc);
            if (f > x->dims[i] - 1) f = x->dims[i] - 1;
            if (f < 0) f = 0;
            lo[i] = f;
            hi[i] = f + 1 < x->dims[i] ? f + 1 : f;
            w[i] = hi[i] == f ? 0 : xc - (double)f;
        }
        if (!p->linear) {
            int64_t off = 0;
            for (int i = 0; i < r; i++) off += lo[i] * xs[i];
            core_elem_copy((char *)y->data + e * es, (const char *)x->data + off * (int64_t)es, es);
            continue;
        }
        /* every corner of the cell around the point, weighted; axes with weight 0 on the far
         * side contribute nothing and are skipped */
        double acc = 0;
        for (unsigned c = 0; c < (1u << r); c++) {
            double wt = 1;
            int64_t off = 0;
            for (int i = 0; i < r && wt != 0; i++) {
                bool far = (c >> i) & 1u;
                wt *= far ? w[i] : 1 - w[i];
                off += (far ? hi[i] : lo[i]) * xs[i];
            }
            if (wt != 0) acc += wt * core_load_f64(x->dtype, x->data, (size_t)off);
        }
        if (core_dtype_is_float(y->dtype))
            core_store_f64(y->dtype, y->data, e, acc);
        else
            core_store_i64(y->dtype, y->data, e, (int64_t)floor(acc + 0.5));
    }
    return ANVIL_OK;
}

const op_impl op_impl_upsample = {
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = upsample_check,
    .infer = upsample_infer,
    .run = upsample_run,
};

/* ---- Col2Im -------------------------------------------------------------------------------- */

typedef struct col2im_params {
    const int64_t *dilations, *pads, *strides; /* NULL: defaults (1, 0, 1) */
    size_t n_dil, n_pads, n_strides;
} col2im_params;

static anvil_status col2im_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 18, 0));
    OP_PARAMS_NEW(g, col2im_params, p);
    CORE_TRY(ir_attr_ints(n, "dilations", &p->dilations, &p->n_dil));
    CORE_TRY(ir_attr_ints(n, "pads", &p->pads, &p->n_pads));
    CORE_TRY(ir_attr_ints(n, "strides", &p->strides, &p->n_strides));
    for (size_t i = 0; i < p->n_dil; i++)
        if (p->dilations[i] < 1)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: dilations[%zu] is %lld; must be >= 1",
                            ir_node_label(n), i, (long long)p->dilations[i]);
    for (size_t i = 0; i < p->n_strides; i++)
        if (p->strides[i] < 1)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: strides[%zu] is %lld; must be >= 1",
                            ir_node_label(n), i, (long long)p->strides[i]);
    for (size_t i = 0; i < p->n_pads; i++)
        if (p->pads[i] < 0)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: pads[%zu] is %lld; must be >= 0",
                            ir_node_label(n), i, (long long)p->pads[i]);
    n->params = p;
    return ANVIL_OK;
}

/* Per spatial axis: image size, block size, dilation, stride, pad begin, and how many block
 * positions fit (the column count along that axis). */
typedef struct col2im_geom {
    int k;
    int64_t img[IR_MAX_RANK], blk[IR_MAX_RANK], dil[IR_MAX_RANK], str[IR_MAX_RANK];
    int64_t pb[IR_MAX_RANK], cols[IR_MAX_RANK];
    int64_t blocks, positions; /* products of blk and cols */
} col2im_geom;

static anvil_status col2im_geometry(const ir_node *n, const int64_t *img, const int64_t *blk, int k,
                                    col2im_geom *gm) {
    const col2im_params *p = n->params;
    if (k < 1 || k > IR_MAX_RANK - 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: image_shape has %d dims; expected 1..%d",
                        ir_node_label(n), k, IR_MAX_RANK - 2);
    if ((p->dilations && p->n_dil != (size_t)k) || (p->strides && p->n_strides != (size_t)k) ||
        (p->pads && p->n_pads != 2 * (size_t)k))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: dilations/strides need %d entries and pads %d for %d spatial dims",
                        ir_node_label(n), k, 2 * k, k);
    gm->k = k;
    gm->blocks = 1;
    gm->positions = 1;
    for (int i = 0; i < k; i++) {
        gm->img[i] = img[i];
        gm->blk[i] = blk[i];
        gm->dil[i] = p->dilations ? p->dilations[i] : 1;
        gm->str[i] = p->strides ? p->strides[i] : 1;
        gm->pb[i] = p->pads ? p->pads[i] : 0;
        int64_t pe = p->pads ? p->pads[i + k] : 0;
        if (img[i] < 0 || blk[i] < 1 || img[i] > (1LL << 40) || blk[i] > (1LL << 40))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: image_shape[%d] = %lld and block_shape[%d] = %lld; need image "
                            ">= 0 and block >= 1",
                            ir_node_label(n), i, (long long)img[i], i, (long long)blk[i]);
        int64_t span = gm->dil[i] * (blk[i] - 1) + 1;
        int64_t room = img[i] + gm->pb[i] + pe - span;
        if (room < 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the dilated block (%lld) is larger than the padded image (%lld) "
                            "along spatial axis %d",
                            ir_node_label(n), (long long)span, (long long)(span + room), i);
        gm->cols[i] = room / gm->str[i] + 1;
        if (!core_mul_i64(gm->blocks, blk[i], &gm->blocks) ||
            !core_mul_i64(gm->positions, gm->cols[i], &gm->positions))
            return core_err(ANVIL_ERR_LIMIT, "%s: block or column count overflows",
                            ir_node_label(n));
    }
    return ANVIL_OK;
}

static anvil_status col2im_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    if (!core_dtype_supported(in[0].dtype) || in[0].dtype == ANVIL_DTYPE_BOOL)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: Col2Im needs a numeric dtype, got %s",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "image_shape", in[1].dtype, false));
    CORE_TRY(tensor_check_index_dtype(n, 2, "block_shape", in[2].dtype, false));
    const ir_shape *x = &in[0].shape;
    if (x->rank >= 0 && x->rank != 3)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 has rank %d; expected 3 (N, C*blocks, L)",
                        ir_node_label(n), x->rank);
    out[0].dtype = in[0].dtype;
    int64_t l1, l2;
    CORE_TRY(tensor_list_length(n, 1, "image_shape", &in[1], &l1));
    CORE_TRY(tensor_list_length(n, 2, "block_shape", &in[2], &l2));
    if (l1 >= 0 && l2 >= 0 && l1 != l2)
        return core_err(ANVIL_ERR_SHAPE, "%s: image_shape has %lld dims, block_shape %lld",
                        ir_node_label(n), (long long)l1, (long long)l2);
    if (l1 < 0 || !in[1].value || !in[2].value) {
        if (l1 < 0 || l1 > IR_MAX_RANK - 2)
            ir_shape_unknown(&out[0].shape);
        else
            tensor_shape_unknown_dims(&out[0].shape, (int)l1 + 2);
        return ANVIL_OK;
    }
    int64_t img[IR_MAX_RANK] = {0}, blk[IR_MAX_RANK] = {0};
    size_t c1 = 0, c2 = 0;
    CORE_TRY(op_value_ints(n, 1, &in[1], img, IR_MAX_RANK, &c1));
    CORE_TRY(op_value_ints(n, 2, &in[2], blk, IR_MAX_RANK, &c2));
    col2im_geom gm;
    CORE_TRY(col2im_geometry(n, img, blk, (int)c1, &gm));
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, gm.k + 2);
    if (x->rank == 3) {
        tensor_dim_copy(y, 0, x, 0);
        if (x->d[1] >= 0) {
            if (x->d[1] % gm.blocks)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: input dim 1 (%lld) is not a multiple of the block size "
                                "product (%lld)",
                                ir_node_label(n), (long long)x->d[1], (long long)gm.blocks);
            y->d[1] = x->d[1] / gm.blocks;
        }
        if (x->d[2] >= 0 && x->d[2] != gm.positions)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input dim 2 is %lld but the image and block shapes give %lld "
                            "block positions",
                            ir_node_label(n), (long long)x->d[2], (long long)gm.positions);
    }
    for (int i = 0; i < gm.k; i++) y->d[i + 2] = img[i];
    return ANVIL_OK;
}

static anvil_status col2im_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    int64_t img[IR_MAX_RANK] = {0}, blk[IR_MAX_RANK] = {0};
    size_t c1 = 0, c2 = 0;
    CORE_TRY(tensor_read_ints(n, 1, in[1], img, IR_MAX_RANK, &c1));
    CORE_TRY(tensor_read_ints(n, 2, in[2], blk, IR_MAX_RANK, &c2));
    col2im_geom gm;
    CORE_TRY(col2im_geometry(n, img, blk, (int)c1, &gm));
    if (c2 != c1 || y->rank != gm.k + 2 || x->dims[2] != gm.positions)
        return core_err(ANVIL_ERR_INTERNAL, "%s: buffers do not match the geometry",
                        ir_node_label(n));
    size_t ycnt = op_tensor_numel(y);
    /* sums are formed in double and rounded once into the output type */
    double *acc = core_calloc(ycnt ? ycnt : 1, sizeof *acc);
    if (!acc) return ANVIL_ERR_OUT_OF_MEMORY;
    size_t image = tensor_dims_prod(y->dims, 2, y->rank);
    size_t planes = (size_t)y->dims[0] * (size_t)y->dims[1];
    for (size_t pl = 0; pl < planes; pl++)
        for (int64_t b = 0; b < gm.blocks; b++)
            for (int64_t l = 0; l < gm.positions; l++) {
                int64_t rb = b, rl = l, off = 0, mul = 1;
                bool inside = true;
                for (int i = gm.k - 1; i >= 0; i--) {
                    int64_t bi = rb % gm.blk[i], li = rl % gm.cols[i];
                    rb /= gm.blk[i];
                    rl /= gm.cols[i];
                    int64_t pos = li * gm.str[i] - gm.pb[i] + bi * gm.dil[i];
                    if (pos < 0 || pos >= gm.img[i]) inside = false;
                    off += pos * mul;
                    mul *= gm.img[i];
                }
                if (!inside) continue;
                size_t src =
                    (pl * (size_t)gm.blocks + (size_t)b) * (size_t)gm.positions + (size_t)l;
                acc[pl * image + (size_t)off] += core_load_f64(x->dtype, x->data, src);
            }
    for (size_t i = 0; i < ycnt; i++) {
        if (core_dtype_is_float(y->dtype))
            core_store_f64(y->dtype, y->data, i, acc[i]);
        else
            core_store_i64(y->dtype, y->data, i, (int64_t)acc[i]);
    }
    free(acc);
    return ANVIL_OK;
}

const op_impl op_impl_col2im = {
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 2),
    .check = col2im_check,
    .infer = col2im_infer,
    .run = col2im_run,
};
