/* Resize (opsets 10, 11, 13, 18, 19): attribute/input checking, shape inference and the
 * reference kernel.
 *
 * Every mode is separable, so the kernel works one axis at a time:
 *  - nearest: each axis gets a table output index -> input index (or -1 where tf_crop_and_resize
 *    extrapolates), and the output is a dtype-agnostic gather through those tables;
 *  - linear / cubic (with or without antialias): each resized axis gets, per output index, a few
 *    (input index, weight) taps, and the data (widened to double) is filtered along that axis into
 *    a new buffer. Extrapolated positions are overwritten with extrapolation_value after each
 *    pass, which gives the same result as testing every axis at once because later passes mix
 *    such values with weights that sum to one.
 * A tap at real coordinate x uses base = floor(x), fraction r = x - base, and offsets k around
 * base with weight kernel((k - r) * s), where s = min(scale, 1) with antialias (the filter is
 * stretched when downsampling) and 1 otherwise. Indices outside the input are clamped to the edge
 * unless exclude_outside drops them and renormalises.
 *
 * The parsed attributes and the geometry (axes, output sizes, coordinates, nearest rounding, taps)
 * live in ops/resize_common.h, shared with the Resize kernels so both agree at every tie. */
#include "ops/resize_common.h"

/* ---- check ------------------------------------------------------------------------------- */

typedef struct rs_name {
    const char *name;
    int value;
    int min_opset;
    int max_opset; /* 0: no upper bound */
} rs_name;

static anvil_status rs_lookup(const ir_node *n, const char *attr, const char *dflt,
                              const rs_name *names, size_t count, int *out) {
    const char *s;
    CORE_TRY(ir_attr_string(n, attr, dflt, &s));
    for (size_t i = 0; i < count; i++)
        if (strcmp(s, names[i].name) == 0) {
            if (n->opset < names[i].min_opset ||
                (names[i].max_opset && n->opset > names[i].max_opset))
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s: %s '%s' is not valid at opset %d (it exists in opsets %d..%d)",
                                ir_node_label(n), attr, s, n->opset, names[i].min_opset,
                                names[i].max_opset ? names[i].max_opset : 99);
            *out = names[i].value;
            return ANVIL_OK;
        }
    char list[256] = "";
    for (size_t i = 0; i < count; i++)
        if (n->opset >= names[i].min_opset &&
            (!names[i].max_opset || n->opset <= names[i].max_opset)) {
            strncat(list, list[0] ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, names[i].name, sizeof list - strlen(list) - 1);
        }
    return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute '%s' is '%s'; expected one of: %s",
                    ir_node_label(n), attr, s, list);
}

static anvil_status resize_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, resize_params, p);
    static const rs_name modes[] = {
        {"nearest", RS_NEAREST, 0, 0}, {"linear", RS_LINEAR, 0, 0}, {"cubic", RS_CUBIC, 11, 0}};
    static const rs_name coords[] = {{"half_pixel", RS_HALF_PIXEL, 11, 0},
                                     {"half_pixel_symmetric", RS_HALF_PIXEL_SYMMETRIC, 19, 0},
                                     {"pytorch_half_pixel", RS_PYTORCH_HALF_PIXEL, 11, 0},
                                     {"align_corners", RS_ALIGN_CORNERS, 11, 0},
                                     {"asymmetric", RS_ASYMMETRIC, 11, 0},
                                     {"tf_half_pixel_for_nn", RS_TF_HALF_PIXEL_FOR_NN, 11, 12},
                                     {"tf_crop_and_resize", RS_TF_CROP_AND_RESIZE, 11, 0}};
    static const rs_name nearests[] = {{"round_prefer_floor", RS_ROUND_PREFER_FLOOR, 11, 0},
                                       {"round_prefer_ceil", RS_ROUND_PREFER_CEIL, 11, 0},
                                       {"floor", RS_FLOOR, 11, 0},
                                       {"ceil", RS_CEIL, 11, 0}};
    static const rs_name policies[] = {{"stretch", RS_STRETCH, 18, 0},
                                       {"not_larger", RS_NOT_LARGER, 18, 0},
                                       {"not_smaller", RS_NOT_SMALLER, 18, 0}};
    int v;
    CORE_TRY(rs_lookup(n, "mode", "nearest", modes, 3, &v));
    p->mode = (rs_mode)v;
    p->roi_in = p->scales_in = p->sizes_in = -1;
    if (n->opset < 11) {
        p->coord = RS_ASYMMETRIC;
        p->nearest = RS_LEGACY;
        p->scales_in = 1;
        if (n->n_inputs != 2 || !op_has_input(n, 1))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s has %d inputs; at opset %d Resize takes exactly X and scales",
                            ir_node_label(n), n->n_inputs, n->opset);
    } else {
        CORE_TRY(rs_lookup(n, "coordinate_transformation_mode", "half_pixel", coords, 7, &v));
        p->coord = (rs_coord_mode)v;
        CORE_TRY(rs_lookup(n, "nearest_mode", "round_prefer_floor", nearests, 4, &v));
        p->nearest = (rs_nearest_mode)v;
        CORE_TRY(ir_attr_float(n, "cubic_coeff_a", -0.75f, &p->cubic_a));
        CORE_TRY(ir_attr_float(n, "extrapolation_value", 0.0f, &p->extrapolation));
        CORE_TRY(ir_attr_flag(n, "exclude_outside", false, &p->exclude_outside));
        p->roi_in = 1;
        p->scales_in = 2;
        p->sizes_in = 3;
    }
    if (n->opset >= 18) {
        CORE_TRY(ir_attr_flag(n, "antialias", false, &p->antialias));
        CORE_TRY(rs_lookup(n, "keep_aspect_ratio_policy", "stretch", policies, 3, &v));
        p->policy = (rs_policy)v;
        CORE_TRY(ir_attr_ints(n, "axes", &p->axes, &p->n_axes));
        if (p->axes && p->n_axes == 0) p->axes = NULL;
    }
    if (!isfinite(p->cubic_a) || !isfinite(p->extrapolation))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: cubic_coeff_a (%g) and extrapolation_value (%g) must be finite",
                        ir_node_label(n), (double)p->cubic_a, (double)p->extrapolation);
    n->params = p;
    return ANVIL_OK;
}

/* ---- inference ------------------------------------------------------------------------------ */

static anvil_status resize_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const resize_params *p = n->params;
    const op_tinfo *x = &in[0];
    if (!core_dtype_supported(x->dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: X has dtype %s, which anvil cannot hold",
                        ir_node_label(n), anvil_dtype_name(x->dtype));
    if (p->mode != RS_NEAREST && !core_dtype_is_float(x->dtype) && !core_dtype_is_int(x->dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: X has dtype %s; linear and cubic modes need a numeric type (use "
                        "mode 'nearest' for %s)",
                        ir_node_label(n), anvil_dtype_name(x->dtype), anvil_dtype_name(x->dtype));
    out[0].dtype = x->dtype;
    int which = -1;
    CORE_TRY(rs_pick(n, p, in, n_in, &which));
    const op_tinfo *v = &in[which];
    bool is_scales = which == p->scales_in;
    if (is_scales ? v->dtype != ANVIL_DTYPE_FLOAT32 : v->dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_SHAPE, "%s: %s has dtype %s; it must be %s", ir_node_label(n),
                        is_scales ? "scales" : "sizes", anvil_dtype_name(v->dtype),
                        is_scales ? "FLOAT" : "INT64");
    if (p->roi_in > 0 && p->roi_in < n_in && op_has_input(n, p->roi_in) &&
        !core_dtype_is_float(in[p->roi_in].dtype))
        return core_err(ANVIL_ERR_SHAPE, "%s: roi has dtype %s; it must be a float type",
                        ir_node_label(n), anvil_dtype_name(in[p->roi_in].dtype));
    int rank = x->shape.rank;
    if (rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    if (rank == 0)
        return core_err(ANVIL_ERR_SHAPE, "%s: X is a scalar; Resize needs rank >= 1",
                        ir_node_label(n));
    int marks[IR_MAX_RANK], count;
    CORE_TRY(rs_axes(n, p, rank, &count, marks));
    size_t num;
    if (ir_shape_numel(&v->shape, &num) && num != (size_t)count)
        return core_err(ANVIL_ERR_SHAPE, "%s: %s has %zu values; expected %d (one per %s)",
                        ir_node_label(n), is_scales ? "scales" : "sizes", num, count,
                        p->axes ? "listed axis" : "input dim");
    if (p->coord == RS_TF_CROP_AND_RESIZE) {
        bool has_roi = p->roi_in < n_in && op_has_input(n, p->roi_in);
        if (!has_roi || (ir_shape_numel(&in[p->roi_in].shape, &num) && num != 2 * (size_t)count))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: tf_crop_and_resize needs roi with %d values (starts then ends)",
                            ir_node_label(n), 2 * count);
    }
    ir_shape *o = &out[0].shape;
    nn_shape_unknown_dims(o, rank);
    for (int d = 0; d < rank; d++)
        if (marks[d] < 0) {
            o->d[d] = x->shape.d[d];
            o->sym[d] = x->shape.sym[d];
        }
    if (!v->value) return ANVIL_OK;
    double scales[IR_MAX_RANK];
    int64_t sizes[IR_MAX_RANK];
    for (int i = 0; i < count; i++) {
        if (is_scales)
            scales[i] = ((const float *)v->value)[i];
        else
            sizes[i] = ((const int64_t *)v->value)[i];
    }
    rs_axis ax[IR_MAX_RANK];
    CORE_TRY(rs_geometry(n, p, rank, x->shape.d, marks, is_scales ? scales : NULL,
                         is_scales ? NULL : sizes, ax));
    for (int d = 0; d < rank; d++) {
        o->d[d] = ax[d].out;
        if (ax[d].out < 0 || !ax[d].resized) o->sym[d] = x->shape.sym[d];
    }
    return ANVIL_OK;
}

/* ---- kernels ------------------------------------------------------------------------------- */

typedef struct rs_gather_job {
    int rank;
    size_t es;
    int64_t odims[IR_MAX_RANK], istr[IR_MAX_RANK];
    const int64_t *map[IR_MAX_RANK];
    const char *x;
    char *y;
    unsigned char fill[16];
} rs_gather_job;

static void rs_gather_range(void *arg, size_t begin, size_t end) {
    const rs_gather_job *j = arg;
    const int last = j->rank - 1;
    const int64_t w = j->odims[last];
    for (size_t r = begin; r < end; r++) {
        char *y = j->y + r * (size_t)w * j->es;
        int64_t rest = (int64_t)r, src = 0;
        bool fill_row = false;
        for (int d = last - 1; d >= 0; d--) {
            int64_t s = j->map[d][rest % j->odims[d]];
            rest /= j->odims[d];
            if (s < 0)
                fill_row = true;
            else
                src += s * j->istr[d];
        }
        for (int64_t o = 0; o < w; o++) {
            int64_t s = fill_row ? -1 : j->map[last][o];
            memcpy(y + (size_t)o * j->es,
                   s < 0 ? (const char *)j->fill : j->x + (size_t)(src + s) * j->es, j->es);
        }
    }
}

/* One filtering pass along an axis: dst[o, y, i] = sum_t w[y][t] * src[o, idx[y][t], i]. */
typedef struct rs_pass_job {
    int64_t in_len, out_len, inner, taps;
    const int64_t *idx;
    const double *w;
    const bool *extrap;
    double fill;
    const double *src;
    double *dst;
} rs_pass_job;

static void rs_pass_range(void *arg, size_t begin, size_t end) {
    const rs_pass_job *j = arg;
    for (size_t r = begin; r < end; r++) {
        int64_t o = (int64_t)r / j->out_len, y = (int64_t)r % j->out_len;
        double *dst = j->dst + (int64_t)r * j->inner;
        if (j->extrap[y]) {
            for (int64_t i = 0; i < j->inner; i++) dst[i] = j->fill;
            continue;
        }
        for (int64_t i = 0; i < j->inner; i++) dst[i] = 0;
        for (int64_t t = 0; t < j->taps; t++) {
            double wt = j->w[y * j->taps + t];
            if (wt == 0) continue;
            const double *src = j->src + (o * j->in_len + j->idx[y * j->taps + t]) * j->inner;
            for (int64_t i = 0; i < j->inner; i++) dst[i] += wt * src[i];
        }
    }
}

/* Taps of one axis for linear / cubic: idx and w get out * *taps entries (malloc'd into *idx_out,
 * *w_out; caller frees), extrap gets out flags. */
static anvil_status rs_axis_taps(const ir_node *n, const resize_params *p, const rs_axis *a,
                                 int64_t *taps_out, int64_t **idx_out, double **w_out,
                                 bool *extrap) {
    double s;
    int64_t start, taps = rs_tap_layout(p, a, &s, &start);
    size_t cells = (size_t)a->out * (size_t)taps;
    int64_t *idx = malloc((cells ? cells : 1) * sizeof *idx);
    double *w = malloc((cells ? cells : 1) * sizeof *w);
    if (!idx || !w) {
        free(idx);
        free(w);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu resize taps",
                        ir_node_label(n), cells);
    }
    for (int64_t y = 0; y < a->out; y++)
        extrap[y] = rs_taps_at(p, a, y, s, start, taps, idx + y * taps, w + y * taps);
    *taps_out = taps;
    *idx_out = idx;
    *w_out = w;
    return ANVIL_OK;
}

/* Converts the double result into y's dtype: floats by rounding to the type, integers by
 * rounding half to even and saturating (as the ONNX reference's saturate_cast does). */
static void rs_store(op_tensor *y, const double *v, size_t num) {
    double lo = 0, hi = 0;
    switch (y->dtype) {
    case ANVIL_DTYPE_INT8:
        lo = INT8_MIN, hi = INT8_MAX;
        break;
    case ANVIL_DTYPE_UINT8:
        lo = 0, hi = UINT8_MAX;
        break;
    case ANVIL_DTYPE_INT16:
        lo = INT16_MIN, hi = INT16_MAX;
        break;
    case ANVIL_DTYPE_UINT16:
        lo = 0, hi = UINT16_MAX;
        break;
    case ANVIL_DTYPE_INT32:
        lo = INT32_MIN, hi = INT32_MAX;
        break;
    case ANVIL_DTYPE_UINT32:
        lo = 0, hi = UINT32_MAX;
        break;
    case ANVIL_DTYPE_INT64:
        lo = -9.2233720368547758e18, hi = 9.2233720368547758e18;
        break;
    case ANVIL_DTYPE_UINT64:
        lo = 0, hi = 9.2233720368547758e18;
        break;
    default:
        break;
    }
    bool is_int = core_dtype_is_int(y->dtype);
    for (size_t i = 0; i < num; i++) {
        double x = v[i];
        if (is_int) {
            x = x != x ? 0 : fmin(fmax(nearbyint(x), lo), hi);
            core_store_i64(y->dtype, y->data, i,
                           x >= 9.2233720368547758e18 ? INT64_MAX : (int64_t)x);
        } else if (y->dtype == ANVIL_DTYPE_FLOAT32) {
            ((float *)y->data)[i] = (float)x;
        } else {
            core_store_f64(y->dtype, y->data, i, x);
        }
    }
}

static anvil_status rs_run_nearest(const ir_node *n, const resize_params *p, const rs_axis *ax,
                                   const op_tensor *x, op_tensor *y, op_ctx *ctx) {
    rs_gather_job j;
    memset(&j, 0, sizeof j);
    j.rank = x->rank;
    j.es = anvil_dtype_size(x->dtype);
    j.x = x->data;
    j.y = y->data;
    core_store_f64(x->dtype, j.fill, 0, p->extrapolation);
    nn_strides(x->rank, x->dims, j.istr);
    size_t total = op_tensor_numel(y), map_len = 0;
    if (total == 0) return ANVIL_OK;
    for (int d = 0; d < x->rank; d++) map_len += (size_t)ax[d].out;
    int64_t *maps = malloc(map_len * sizeof *maps), *m = maps;
    if (!maps)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for index maps", ir_node_label(n));
    for (int d = 0; d < x->rank; d++) {
        const rs_axis *a = &ax[d];
        j.odims[d] = a->out;
        j.map[d] = m;
        for (int64_t o = 0; o < a->out; o++) {
            if (!a->resized) {
                m[o] = o;
                continue;
            }
            double c = rs_coordinate(p, a, o);
            m[o] = rs_extrapolated(p, a, c) ? -1 : rs_nearest_index(p, a, c);
        }
        m += a->out;
    }
    op_parallel_for(ctx, total / (size_t)j.odims[x->rank - 1], rs_gather_range, &j);
    free(maps);
    return ANVIL_OK;
}

static anvil_status rs_run_filter(const ir_node *n, const resize_params *p, const rs_axis *ax,
                                  const op_tensor *x, op_tensor *y, op_ctx *ctx) {
    size_t num = op_tensor_numel(x), cap = num;
    int64_t dims[IR_MAX_RANK];
    /* the largest intermediate: the passes run in axis order, each replacing one dim */
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[d];
    for (int d = 0; d < x->rank; d++) {
        dims[d] = ax[d].out;
        size_t c;
        if (!core_numel(dims, x->rank, &c) || c > core_max_tensor_bytes() / sizeof(double))
            return core_err(ANVIL_ERR_LIMIT, "%s: an intermediate of the resize is too large",
                            ir_node_label(n));
        if (c > cap) cap = c;
    }
    if (op_tensor_numel(y) == 0) return ANVIL_OK;
    double *cur = malloc(cap * sizeof *cur), *next = malloc(cap * sizeof *next);
    bool *extrap = NULL;
    int64_t maxlen = 1;
    for (int d = 0; d < x->rank; d++)
        if (ax[d].out > maxlen) maxlen = ax[d].out;
    extrap = malloc((size_t)maxlen * sizeof *extrap);
    if (!cur || !next || !extrap) {
        free(cur);
        free(next);
        free(extrap);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for resize buffers",
                        ir_node_label(n));
    }
    if (x->dtype == ANVIL_DTYPE_FLOAT32)
        for (size_t i = 0; i < num; i++) cur[i] = ((const float *)x->data)[i];
    else
        for (size_t i = 0; i < num; i++) cur[i] = core_load_f64(x->dtype, x->data, i);
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[d];
    anvil_status s = ANVIL_OK;
    for (int d = 0; d < x->rank && s == ANVIL_OK; d++) {
        if (!ax[d].resized) continue;
        rs_pass_job j;
        memset(&j, 0, sizeof j);
        int64_t *idx = NULL;
        double *w = NULL;
        s = rs_axis_taps(n, p, &ax[d], &j.taps, &idx, &w, extrap);
        if (s != ANVIL_OK) break;
        int64_t outer = nn_prod(d, dims);
        j.in_len = dims[d];
        j.out_len = ax[d].out;
        j.inner = nn_prod(x->rank - d - 1, &dims[d + 1]);
        j.idx = idx;
        j.w = w;
        j.extrap = extrap;
        j.fill = p->extrapolation;
        j.src = cur;
        j.dst = next;
        op_parallel_for(ctx, (size_t)(outer * j.out_len), rs_pass_range, &j);
        free(idx);
        free(w);
        dims[d] = ax[d].out;
        double *t = cur;
        cur = next;
        next = t;
    }
    if (s == ANVIL_OK) rs_store(y, cur, op_tensor_numel(y));
    free(cur);
    free(next);
    free(extrap);
    return s;
}

static anvil_status resize_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const resize_params *p = n->params;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    int rank = x->rank, marks[IR_MAX_RANK], count;
    CORE_TRY(rs_axes(n, p, rank, &count, marks));
    const op_tensor *sc = p->scales_in < n_in ? in[p->scales_in] : NULL;
    const op_tensor *sz = p->sizes_in > 0 && p->sizes_in < n_in ? in[p->sizes_in] : NULL;
    if (sc && op_tensor_numel(sc) == 0) sc = NULL;
    if (sz && op_tensor_numel(sz) == 0) sz = NULL;
    const op_tensor *v = sz ? sz : sc;
    if (!v || op_tensor_numel(v) != (size_t)count)
        return core_err(ANVIL_ERR_RUNTIME, "%s: %s has %zu values; expected %d", ir_node_label(n),
                        sz ? "sizes" : "scales", v ? op_tensor_numel(v) : (size_t)0, count);
    double scales[IR_MAX_RANK];
    int64_t sizes[IR_MAX_RANK];
    for (int i = 0; i < count; i++) {
        if (sz)
            sizes[i] = core_load_i64(v->dtype, v->data, (size_t)i);
        else
            scales[i] = core_load_f64(v->dtype, v->data, (size_t)i);
    }
    rs_axis ax[IR_MAX_RANK];
    anvil_status s =
        rs_geometry(n, p, rank, x->dims, marks, sz ? NULL : scales, sz ? sizes : NULL, ax);
    if (s != ANVIL_OK) return core_err_prefix(ANVIL_ERR_RUNTIME, "at run time");
    for (int d = 0; d < rank; d++)
        if (ax[d].out != y->dims[d])
            return core_err(ANVIL_ERR_RUNTIME,
                            "%s: axis %d resizes to %lld but the output buffer has %lld; the "
                            "scales or sizes changed after planning",
                            ir_node_label(n), d, (long long)ax[d].out, (long long)y->dims[d]);
    if (p->coord == RS_TF_CROP_AND_RESIZE) {
        const op_tensor *roi = p->roi_in < n_in ? in[p->roi_in] : NULL;
        if (!roi || op_tensor_numel(roi) != 2 * (size_t)count)
            return core_err(ANVIL_ERR_RUNTIME,
                            "%s: tf_crop_and_resize needs roi with %d values but it has %zu",
                            ir_node_label(n), 2 * count, roi ? op_tensor_numel(roi) : (size_t)0);
        for (int d = 0; d < rank; d++) {
            if (marks[d] < 0) continue;
            ax[d].roi_start = core_load_f64(roi->dtype, roi->data, (size_t)marks[d]);
            ax[d].roi_end = core_load_f64(roi->dtype, roi->data, (size_t)(count + marks[d]));
            if (ax[d].out > 0 && (ax[d].roi_start != 0 || ax[d].roi_end != 1)) ax[d].resized = true;
        }
    }
    if (op_tensor_numel(y) == 0) return ANVIL_OK;
    if (p->mode == RS_NEAREST) return rs_run_nearest(n, p, ax, x, y, ctx);
    return rs_run_filter(n, p, ax, x, y, ctx);
}

const op_impl op_impl_resize = {.min_inputs = 1,
                                .max_inputs = 4,
                                .min_outputs = 1,
                                .max_outputs = 1,
                                .value_inputs = (1u << 1) | (1u << 2) | (1u << 3),
                                .check = resize_check,
                                .infer = resize_infer,
                                .run = resize_run};
