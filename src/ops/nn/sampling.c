/* Spatial sampling ops: GridSample, AffineGrid and RoiAlign. GridSample and RoiAlign read an
 * input image at fractional coordinates; AffineGrid builds the normalised coordinate grid that
 * GridSample reads. The kernels compute in double through core_load_f64/core_store_f64, which
 * keeps one code path for every float dtype; these are reference kernels where clarity wins over
 * speed. (DeformConv, which also reads at fractional positions, is in deform_conv.c.) */
#include "ops/nn_common.h"
#include "ops/tensor_common.h"

#include <math.h>
#include <stdlib.h>

/* Index of `s` in the NULL-terminated list `names`, or -1. */
static int ss_pick(const char *s, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

/* ---- GridSample ------------------------------------------------------------------------------ */

enum { SS_LINEAR, SS_NEAREST, SS_CUBIC };
enum { SS_PAD_ZEROS, SS_PAD_BORDER, SS_PAD_REFLECTION };

typedef struct grid_params {
    int mode, padding;
    bool align_corners;
} grid_params;

static anvil_status grid_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 16, 0));
    OP_PARAMS_NEW(g, grid_params, p);
    const char *mode, *pad;
    /* opset 16 spells the modes bilinear/bicubic; opset 20 renamed them
     * linear/cubic */
    bool v16 = n->opset < 20;
    CORE_TRY(ir_attr_string(n, "mode", v16 ? "bilinear" : "linear", &mode));
    static const char *const modes16[] = {"bilinear", "nearest", "bicubic", NULL};
    static const char *const modes20[] = {"linear", "nearest", "cubic", NULL};
    p->mode = ss_pick(mode, v16 ? modes16 : modes20);
    if (p->mode < 0)
        return core_err(
            ANVIL_ERR_INVALID_MODEL, "%s: attribute 'mode' is '%s'; at opset %d expected %s",
            ir_node_label(n), mode, n->opset,
            v16 ? "'bilinear', 'nearest' or 'bicubic'" : "'linear', 'nearest' or 'cubic'");
    CORE_TRY(ir_attr_string(n, "padding_mode", "zeros", &pad));
    static const char *const pads[] = {"zeros", "border", "reflection", NULL};
    p->padding = ss_pick(pad, pads);
    if (p->padding < 0)
        return core_err(
            ANVIL_ERR_INVALID_MODEL,
            "%s: attribute 'padding_mode' is '%s'; expected 'zeros', 'border' or 'reflection'",
            ir_node_label(n), pad);
    CORE_TRY(ir_attr_flag(n, "align_corners", false, &p->align_corners));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status grid_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const grid_params *p = n->params;
    CORE_TRY(nn_check_float(n, 0, "X", in[0].dtype));
    CORE_TRY(nn_check_float(n, 1, "grid", in[1].dtype));
    const ir_shape *x = &in[0].shape, *gr = &in[1].shape;
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    int rank = x->rank >= 0 ? x->rank : gr->rank;
    if (rank < 0) return ANVIL_OK;
    if (rank < 3 || (n->opset < 20 && rank != 4))
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 (X) has rank %d; GridSample-%d needs %s",
                        ir_node_label(n), rank, n->opset < 20 ? 16 : 20,
                        n->opset < 20 ? "rank 4 (N, C, H, W)" : "rank >= 3 (N, C, spatial...)");
    if (x->rank >= 0 && gr->rank >= 0 && x->rank != gr->rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 (X) has rank %d but input 1 (grid) has rank %d; grid must be "
                        "(N, out spatial..., %d)",
                        ir_node_label(n), x->rank, gr->rank, rank - 2);
    int nsp = rank - 2;
    if (p->mode == SS_CUBIC && nsp != 2)
        return core_err(
            ANVIL_ERR_UNSUPPORTED,
            "%s: cubic mode works on 4-D input (2 spatial dims) only; X has %d spatial dims",
            ir_node_label(n), nsp);
    if (gr->rank >= 0 && gr->d[rank - 1] >= 0 && gr->d[rank - 1] != nsp)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the last dim of input 1 (grid) is %lld; expected %d (one coordinate "
                        "per spatial dim of X)",
                        ir_node_label(n), (long long)gr->d[rank - 1], nsp);
    if (x->rank >= 0 && gr->rank >= 0 && x->d[0] >= 0 && gr->d[0] >= 0 && x->d[0] != gr->d[0])
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: batch of X is %lld but batch of grid is %lld; they must match",
                        ir_node_label(n), (long long)x->d[0], (long long)gr->d[0]);
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, rank);
    if (x->rank >= 0) {
        tensor_dim_copy(y, 0, x, 0);
        tensor_dim_copy(y, 1, x, 1);
    } else {
        tensor_dim_copy(y, 0, gr, 0);
    }
    if (gr->rank >= 0)
        for (int i = 0; i < nsp; i++) tensor_dim_copy(y, 2 + i, gr, 1 + i);
    return ANVIL_OK;
}

/* Maps a normalised coordinate in [-1, 1] onto pixel units of an axis of `len`
 * pixels. */
static double ss_denorm(double c, int64_t len, bool align) {
    return align ? (c + 1) / 2 * (double)(len - 1) : ((c + 1) * (double)len - 1) / 2;
}

/* Folds x into [lo, hi] by mirroring at the ends (any number of times). */
static double ss_reflect(double x, double lo, double hi) {
    double span = hi - lo;
    if (span <= 0) return lo;
    if (x < lo) {
        double d = lo - x;
        double k = floor(d / span), r = d - k * span;
        return fmod(k, 2) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double d = x - hi;
        double k = floor(d / span), r = d - k * span;
        return fmod(k, 2) == 0 ? hi - r : lo + r;
    }
    return x;
}

typedef struct grid_axes {
    int nsp;
    const int64_t *len;  /* spatial lengths of X */
    const int64_t *xstr; /* strides of X's spatial dims within one channel */
    const grid_params *p;
} grid_axes;

/* Reads one pixel of a channel at integer coordinates, applying the padding
 * mode to each. */
static double grid_pixel(const grid_axes *a, anvil_dtype dt, const void *data, size_t base,
                         const int64_t *idx) {
    int64_t off = 0;
    for (int i = 0; i < a->nsp; i++) {
        int64_t v = idx[i], len = a->len[i];
        if (v < 0 || v >= len) {
            if (a->p->padding == SS_PAD_ZEROS) return 0;
            if (a->p->padding == SS_PAD_REFLECTION) {
                double lo = a->p->align_corners ? 0 : -0.5;
                double hi = a->p->align_corners ? (double)(len - 1) : (double)len - 0.5;
                v = (int64_t)ss_reflect((double)v, lo, hi);
            }
            v = v < 0 ? 0 : v >= len ? len - 1 : v;
        }
        off += v * a->xstr[i];
    }
    return core_load_f64(dt, data, base + (size_t)off);
}

/* The Keys cubic convolution weights (A = -0.75) of the 4 taps around a point
 * at fraction t. */
static void ss_cubic_coeffs(double t, double *w) {
    const double A = -0.75;
    double x = t + 1;
    w[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    x = t;
    w[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    x = 1 - t;
    w[2] = ((A + 2) * x - (A + 3)) * x * x + 1;
    x = 2 - t;
    w[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

/* A coordinate this far from the input is outside it whatever its size, and converts to an
 * index without overflow. */
#define GRID_FAR 1e15

static anvil_status grid_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const grid_params *p = n->params;
    const op_tensor *x = in[0], *gr = in[1];
    op_tensor *y = out[0];
    int nsp = x->rank - 2;
    int64_t xstr[IR_MAX_RANK];
    tensor_strides(x->dims + 2, nsp, xstr);
    grid_axes a = {.nsp = nsp, .len = x->dims + 2, .xstr = xstr, .p = p};
    size_t N = (size_t)x->dims[0], C = (size_t)x->dims[1];
    size_t in_sp = tensor_dims_prod(x->dims, 2, x->rank);
    size_t out_sp = tensor_dims_prod(y->dims, 2, y->rank);
    for (size_t b = 0; b < N; b++)
        for (size_t o = 0; o < out_sp; o++) {
            /* the grid's last axis lists coordinates innermost-first: (x, y, z) = (W,
             * H, D) */
            double pos[IR_MAX_RANK];
            size_t gbase = (b * out_sp + o) * (size_t)nsp;
            for (int i = 0; i < nsp; i++) {
                double c = core_load_f64(gr->dtype, gr->data, gbase + (size_t)(nsp - 1 - i));
                double v = ss_denorm(c, a.len[i], p->align_corners);
                if (p->mode == SS_NEAREST) v = nearbyint(v);
                if (p->padding == SS_PAD_BORDER) {
                    double hi = (double)(a.len[i] - 1);
                    v = v < 0 ? 0 : v > hi ? hi : v;
                } else if (p->padding == SS_PAD_REFLECTION) {
                    double lo = p->align_corners ? 0 : -0.5;
                    double hi = p->align_corners ? (double)(a.len[i] - 1) : (double)a.len[i] - 0.5;
                    v = ss_reflect(v, lo, hi);
                }
                /* NaN, infinite or huge coordinates (from the grid's data) would overflow the
                 * conversion to an index: they become a point far outside the input */
                v = v >= -GRID_FAR && v <= GRID_FAR ? v : v > 0 ? GRID_FAR : -GRID_FAR;
                pos[i] = v;
            }
            for (size_t c = 0; c < C; c++) {
                size_t base = (b * C + c) * in_sp;
                double acc = 0;
                int64_t idx[IR_MAX_RANK];
                if (p->mode == SS_NEAREST) {
                    for (int i = 0; i < nsp; i++) idx[i] = (int64_t)pos[i];
                    acc = grid_pixel(&a, x->dtype, x->data, base, idx);
                } else {
                    int taps = p->mode == SS_CUBIC ? 4 : 2;
                    double w[IR_MAX_RANK][4];
                    int64_t first[IR_MAX_RANK];
                    for (int i = 0; i < nsp; i++) {
                        double f = floor(pos[i]), t = pos[i] - f;
                        if (p->mode == SS_CUBIC) {
                            first[i] = (int64_t)f - 1;
                            ss_cubic_coeffs(t, w[i]);
                        } else {
                            first[i] = (int64_t)f;
                            w[i][0] = 1 - t;
                            w[i][1] = t;
                        }
                    }
                    /* every tap combination of the separable kernel */
                    size_t combos = 1;
                    for (int i = 0; i < nsp; i++) combos *= (size_t)taps;
                    for (size_t k = 0; k < combos; k++) {
                        size_t rem = k;
                        double wt = 1;
                        for (int i = nsp - 1; i >= 0; i--) {
                            int t = (int)(rem % (size_t)taps);
                            rem /= (size_t)taps;
                            wt *= w[i][t];
                            idx[i] = first[i] + t;
                        }
                        if (wt != 0) acc += wt * grid_pixel(&a, x->dtype, x->data, base, idx);
                    }
                }
                core_store_f64(y->dtype, y->data, (b * C + c) * out_sp + o, acc);
            }
        }
    return ANVIL_OK;
}

const op_impl op_impl_gridsample = {
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = grid_check,
    .infer = grid_infer,
    .run = grid_run,
};

/* ---- AffineGrid ------------------------------------------------------------------------------ */

static anvil_status affine_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 20, 0));
    OP_PARAMS_NEW(g, bool, align);
    CORE_TRY(ir_attr_flag(n, "align_corners", false, align));
    n->params = align;
    return ANVIL_OK;
}

static anvil_status affine_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(nn_check_float(n, 0, "theta", in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "size", in[1].dtype, false));
    const ir_shape *th = &in[0].shape;
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    if (th->rank >= 0 && th->rank != 3)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 (theta) has rank %d; expected 3: (N, 2, 3) or (N, 3, 4)",
                        ir_node_label(n), th->rank);
    int64_t len;
    CORE_TRY(tensor_list_length(n, 1, "size", &in[1], &len));
    if (len >= 0 && len != 4 && len != 5)
        return core_err(
            ANVIL_ERR_SHAPE,
            "%s: input 1 (size) has %lld entries; expected 4 (N, C, H, W) or 5 (N, C, D, H, W)",
            ir_node_label(n), (long long)len);
    if (len >= 0 && th->rank == 3) {
        int64_t k = len - 2;
        if ((th->d[1] >= 0 && th->d[1] != k) || (th->d[2] >= 0 && th->d[2] != k + 1))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input 0 (theta) is (%lld, %lld, %lld) but size has %lld entries; "
                            "expected theta (N, %lld, %lld)",
                            ir_node_label(n), (long long)th->d[0], (long long)th->d[1],
                            (long long)th->d[2], (long long)len, (long long)k, (long long)(k + 1));
    }
    if (len < 0) return ANVIL_OK;
    int nsp = (int)len - 2;
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, nsp + 2);
    y->d[nsp + 1] = nsp;
    if (th->rank == 3) tensor_dim_copy(y, 0, th, 0);
    if (!in[1].value) return ANVIL_OK;
    int64_t sz[5];
    size_t cnt;
    CORE_TRY(op_value_ints(n, 1, &in[1], sz, 5, &cnt));
    for (int i = 0; i < (int)len; i++)
        if (sz[i] < 0)
            return core_err(ANVIL_ERR_SHAPE, "%s: size[%d] is %lld; sizes must be >= 0",
                            ir_node_label(n), i, (long long)sz[i]);
    if (th->rank == 3 && th->d[0] >= 0 && th->d[0] != sz[0])
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: theta has batch %lld but size[0] is %lld; they must match",
                        ir_node_label(n), (long long)th->d[0], (long long)sz[0]);
    y->d[0] = sz[0];
    y->sym[0] = -1;
    for (int i = 0; i < nsp; i++) {
        y->d[1 + i] = sz[2 + i];
        y->sym[1 + i] = -1;
    }
    return ANVIL_OK;
}

/* The normalised coordinate of pixel i on an axis of `len` pixels. */
static double ss_base_coord(int64_t i, int64_t len, bool align) {
    if (align) return len > 1 ? -1 + 2 * (double)i / (double)(len - 1) : -1;
    return (2 * (double)i + 1) / (double)len - 1;
}

static anvil_status affine_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    bool align = *(const bool *)n->params;
    const op_tensor *th = in[0];
    op_tensor *y = out[0];
    int nsp = y->rank - 2;
    size_t N = (size_t)y->dims[0], sp = tensor_dims_prod(y->dims, 1, 1 + nsp);
    size_t tsz = (size_t)nsp * (size_t)(nsp + 1);
    for (size_t b = 0; b < N; b++)
        for (size_t o = 0; o < sp; o++) {
            /* homogeneous base point (x, y[, z], 1); x runs along the last spatial
             * dim */
            double pt[4];
            size_t rem = o;
            for (int i = nsp - 1; i >= 0; i--) {
                int64_t len = y->dims[1 + i];
                int64_t idx = (int64_t)(rem % (size_t)len);
                rem /= (size_t)len;
                pt[nsp - 1 - i] = ss_base_coord(idx, len, align);
            }
            pt[nsp] = 1;
            for (int r = 0; r < nsp; r++) {
                double acc = 0;
                for (int k = 0; k <= nsp; k++)
                    acc += core_load_f64(th->dtype, th->data,
                                         b * tsz + (size_t)r * (size_t)(nsp + 1) + (size_t)k) *
                           pt[k];
                core_store_f64(y->dtype, y->data, (b * sp + o) * (size_t)nsp + (size_t)r, acc);
            }
        }
    return ANVIL_OK;
}

const op_impl op_impl_affinegrid = {
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = affine_check,
    .infer = affine_infer,
    .run = affine_run,
};

/* ---- RoiAlign -------------------------------------------------------------------------------- */

typedef struct roi_params {
    bool max_mode, half_pixel;
    int64_t out_h, out_w, sampling_ratio;
    float spatial_scale;
} roi_params;

static anvil_status roi_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 10, 0));
    OP_PARAMS_NEW(g, roi_params, p);
    const char *mode, *ctm;
    CORE_TRY(ir_attr_string(n, "mode", "avg", &mode));
    if (strcmp(mode, "max") == 0)
        p->max_mode = true;
    else if (strcmp(mode, "avg") != 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'mode' is '%s'; expected 'avg' or 'max'", ir_node_label(n),
                        mode);
    /* opset 10 had no such attribute and behaved like output_half_pixel; 16 made
     * half_pixel the default */
    if (n->opset < 16) {
        if (ir_node_attr(n, "coordinate_transformation_mode"))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'coordinate_transformation_mode' exists from opset 16 "
                            "(model opset %d)",
                            ir_node_label(n), n->opset);
        ctm = "output_half_pixel";
    } else {
        CORE_TRY(ir_attr_string(n, "coordinate_transformation_mode", "half_pixel", &ctm));
    }
    if (strcmp(ctm, "half_pixel") == 0)
        p->half_pixel = true;
    else if (strcmp(ctm, "output_half_pixel") != 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'coordinate_transformation_mode' is '%s'; expected "
                        "'half_pixel' or 'output_half_pixel'",
                        ir_node_label(n), ctm);
    CORE_TRY(ir_attr_int(n, "output_height", 1, &p->out_h));
    CORE_TRY(ir_attr_int(n, "output_width", 1, &p->out_w));
    CORE_TRY(ir_attr_int(n, "sampling_ratio", 0, &p->sampling_ratio));
    CORE_TRY(ir_attr_float(n, "spatial_scale", 1.0f, &p->spatial_scale));
    if (p->out_h < 1 || p->out_w < 1 || p->out_h > INT32_MAX || p->out_w > INT32_MAX)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: output_height/output_width are %lld/%lld; both must be in [1, 2^31)",
                        ir_node_label(n), (long long)p->out_h, (long long)p->out_w);
    if (p->sampling_ratio < 0 || p->sampling_ratio > INT32_MAX)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'sampling_ratio' is %lld; expected >= 0 (0: adaptive)",
                        ir_node_label(n), (long long)p->sampling_ratio);
    if (!isfinite(p->spatial_scale))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'spatial_scale' is %g; expected a finite number",
                        ir_node_label(n), (double)p->spatial_scale);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status roi_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const roi_params *p = n->params;
    CORE_TRY(nn_check_float(n, 0, "X", in[0].dtype));
    CORE_TRY(nn_check_float(n, 1, "rois", in[1].dtype));
    if (in[2].dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 2 (batch_indices) is %s; expected INT64",
                        ir_node_label(n), anvil_dtype_name(in[2].dtype));
    const ir_shape *x = &in[0].shape, *r = &in[1].shape, *bi = &in[2].shape;
    if (x->rank >= 0 && x->rank != 4)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 (X) has rank %d; expected 4 (N, C, H, W)",
                        ir_node_label(n), x->rank);
    if (r->rank >= 0 && (r->rank != 2 || (r->d[1] >= 0 && r->d[1] != 4)))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (rois) must be (num_rois, 4) with rank 2; got rank %d",
                        ir_node_label(n), r->rank);
    if (bi->rank >= 0 && bi->rank != 1)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 2 (batch_indices) has rank %d; expected 1 (num_rois)",
                        ir_node_label(n), bi->rank);
    if (r->rank == 2 && bi->rank == 1 && r->d[0] >= 0 && bi->d[0] >= 0 && r->d[0] != bi->d[0])
        return core_err(
            ANVIL_ERR_SHAPE,
            "%s: rois has %lld rows but batch_indices has %lld entries; they must match",
            ir_node_label(n), (long long)r->d[0], (long long)bi->d[0]);
    out[0].dtype = in[0].dtype;
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, 4);
    if (r->rank == 2)
        tensor_dim_copy(y, 0, r, 0);
    else if (bi->rank == 1)
        tensor_dim_copy(y, 0, bi, 0);
    if (x->rank == 4) tensor_dim_copy(y, 1, x, 1);
    y->d[2] = p->out_h;
    y->d[3] = p->out_w;
    return ANVIL_OK;
}

/* Bilinear read of one H x W plane at (yy, xx) following the RoiAlign
 * convention: points more than one pixel outside read 0, others clamp to the
 * edge. The 4 weighted taps go to v[4]. */
static void roi_taps(anvil_dtype dt, const void *data, size_t base, int64_t H, int64_t W, double yy,
                     double xx, double *v) {
    v[0] = v[1] = v[2] = v[3] = 0;
    if (yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W) return;
    if (yy <= 0) yy = 0;
    if (xx <= 0) xx = 0;
    int64_t y0 = (int64_t)yy, x0 = (int64_t)xx, y1, x1;
    if (y0 >= H - 1) {
        y0 = y1 = H - 1;
        yy = (double)y0;
    } else {
        y1 = y0 + 1;
    }
    if (x0 >= W - 1) {
        x0 = x1 = W - 1;
        xx = (double)x0;
    } else {
        x1 = x0 + 1;
    }
    double ly = yy - (double)y0, lx = xx - (double)x0, hy = 1 - ly, hx = 1 - lx;
    v[0] = hy * hx * core_load_f64(dt, data, base + (size_t)(y0 * W + x0));
    v[1] = hy * lx * core_load_f64(dt, data, base + (size_t)(y0 * W + x1));
    v[2] = ly * hx * core_load_f64(dt, data, base + (size_t)(y1 * W + x0));
    v[3] = ly * lx * core_load_f64(dt, data, base + (size_t)(y1 * W + x1));
}

static anvil_status roi_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const roi_params *p = n->params;
    const op_tensor *x = in[0], *rois = in[1], *bi = in[2];
    op_tensor *y = out[0];
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t R = rois->dims[0], PH = p->out_h, PW = p->out_w;
    if (bi->dims[0] != R)
        return core_err(ANVIL_ERR_RUNTIME, "%s: %lld rois but %lld batch indices", ir_node_label(n),
                        (long long)R, (long long)bi->dims[0]);
    const int64_t *batch = bi->data;
    double off = p->half_pixel ? 0.5 : 0.0, sc = p->spatial_scale;
    for (int64_t r = 0; r < R; r++) {
        if (batch[r] < 0 || batch[r] >= N)
            return tensor_index_error(n, "batch_indices", batch[r], bi->dims, 1, (size_t)r, 0,
                                      N - 1);
        double bx[4];
        for (int k = 0; k < 4; k++)
            bx[k] = core_load_f64(rois->dtype, rois->data, (size_t)(r * 4 + k)) * sc - off;
        double rw = bx[2] - bx[0], rh = bx[3] - bx[1];
        /* the legacy mode forces every roi to be at least one pixel */
        if (!p->half_pixel) {
            if (rw < 1) rw = 1;
            if (rh < 1) rh = 1;
        }
        double bin_h = rh / (double)PH, bin_w = rw / (double)PW;
        int64_t gh = p->sampling_ratio > 0 ? p->sampling_ratio : (int64_t)ceil(rh / (double)PH);
        int64_t gw = p->sampling_ratio > 0 ? p->sampling_ratio : (int64_t)ceil(rw / (double)PW);
        if (gh < 0) gh = 0;
        if (gw < 0) gw = 0;
        double count = gh * gw > 0 ? (double)(gh * gw) : 1.0;
        for (int64_t c = 0; c < C; c++) {
            size_t base = (size_t)((batch[r] * C + c) * H * W);
            for (int64_t ph = 0; ph < PH; ph++)
                for (int64_t pw = 0; pw < PW; pw++) {
                    double acc = 0, best = -INFINITY;
                    bool any = false;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double yy =
                            bx[1] + (double)ph * bin_h + ((double)iy + 0.5) * bin_h / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double xx = bx[0] + (double)pw * bin_w +
                                        ((double)ix + 0.5) * bin_w / (double)gw;
                            double v[4];
                            roi_taps(x->dtype, x->data, base, H, W, yy, xx, v);
                            if (p->max_mode) {
                                /* max mode takes the largest weighted tap, as the ONNX
                                 * reference and onnxruntime do, not the interpolated value */
                                for (int k = 0; k < 4; k++)
                                    if (v[k] > best) best = v[k];
                                any = true;
                            } else {
                                acc += v[0] + v[1] + v[2] + v[3];
                            }
                        }
                    }
                    double res = p->max_mode ? (any ? best : 0) : acc / count;
                    core_store_f64(y->dtype, y->data, (size_t)(((r * C + c) * PH + ph) * PW + pw),
                                   res);
                }
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_roialign = {
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = roi_check,
    .infer = roi_infer,
    .run = roi_run,
};
