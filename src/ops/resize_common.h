/* Resize geometry shared by the reference kernel (src/ops/nn/resize.c) and the Resize / Upsample
 * kernels (kernels/cpu/data/data_resize.c), so that both pick the same source index at every
 * rounding tie and the same taps and weights: the node's parsed attributes (resize_params, set on
 * the node by the reference's check), which of scales / sizes a node uses, the axes list, the
 * per-axis output size and scale, the input coordinate of an output index, nearest rounding and
 * the linear / cubic taps of one output index.
 *
 * Coordinates are computed in double exactly as the ONNX reference writes them (scale from sizes
 * is out / in; "output width" for align_corners, half_pixel_symmetric and tf_crop_and_resize is
 * scale * in). Opset 10 has no coordinate or nearest-mode attributes: it behaves as asymmetric
 * coordinates with ONNX Runtime's legacy nearest rule (RS_LEGACY: floor when upsampling an axis,
 * ceil when downsampling it).
 *
 * Everything is static inline; pointers passed in are borrowed for the call. */
#ifndef ANVIL_OPS_RESIZE_COMMON_H
#define ANVIL_OPS_RESIZE_COMMON_H

#include "ops/nn_common.h"

typedef enum { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;

typedef enum {
    RS_HALF_PIXEL,
    RS_HALF_PIXEL_SYMMETRIC,
    RS_PYTORCH_HALF_PIXEL,
    RS_ALIGN_CORNERS,
    RS_ASYMMETRIC,
    RS_TF_HALF_PIXEL_FOR_NN,
    RS_TF_CROP_AND_RESIZE
} rs_coord_mode;

typedef enum {
    RS_ROUND_PREFER_FLOOR,
    RS_ROUND_PREFER_CEIL,
    RS_FLOOR,
    RS_CEIL,
    RS_LEGACY /* opset 10 */
} rs_nearest_mode;

typedef enum { RS_STRETCH, RS_NOT_LARGER, RS_NOT_SMALLER } rs_policy;

/* A Resize node's attributes, parsed by the reference's check into n->params (arena-owned). */
typedef struct resize_params {
    rs_mode mode;
    rs_coord_mode coord;
    rs_nearest_mode nearest;
    rs_policy policy;
    float cubic_a, extrapolation;
    bool exclude_outside, antialias;
    const int64_t *axes; /* arena-owned, NULL: all axes */
    size_t n_axes;
    int roi_in, scales_in, sizes_in; /* input index of each, -1 when the opset has none */
} resize_params;

/* ---- geometry ----------------------------------------------------------------------------- */

/* One axis's geometry (rs_geometry); roi_start / roi_end are 0 / 1 unless tf_crop_and_resize. */
typedef struct rs_axis {
    int64_t in, out;
    double scale;
    double width; /* real-valued output length used by some coordinate modes */
    double roi_start, roi_end;
    bool resized;
} rs_axis;

/* Which of scales / sizes the node uses, from the inputs' presence and element counts. */
static inline anvil_status rs_pick(const ir_node *n, const resize_params *p, const op_tinfo *in,
                                   int n_in, int *which) {
    size_t num;
    bool sc = p->scales_in > 0 && p->scales_in < n_in && op_has_input(n, p->scales_in);
    bool sz = p->sizes_in > 0 && p->sizes_in < n_in && op_has_input(n, p->sizes_in);
    /* an empty tensor stands for "not given" (opset 11 requires the scales input to exist) */
    if (sc && ir_shape_numel(&in[p->scales_in].shape, &num) && num == 0) sc = false;
    if (sz && ir_shape_numel(&in[p->sizes_in].shape, &num) && num == 0) sz = false;
    if (sc && sz) {
        if (ir_shape_numel(&in[p->scales_in].shape, &num))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: both scales and sizes are given; use exactly one (pass an empty "
                            "name for the other)",
                            ir_node_label(n));
        sc = false; /* a scales input of unknown length next to sizes: the usual empty one */
    }
    if (!sc && !sz)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: neither scales nor sizes is given; Resize needs exactly one",
                        ir_node_label(n));
    *which = sc ? p->scales_in : p->sizes_in;
    return ANVIL_OK;
}

/* Resolves the axes list against the rank: marks[d] = position of d in the list, or -1. */
static inline anvil_status rs_axes(const ir_node *n, const resize_params *p, int rank, int *count,
                                   int *marks) {
    for (int d = 0; d < rank; d++) marks[d] = p->axes ? -1 : d;
    *count = rank;
    if (!p->axes) return ANVIL_OK;
    if (p->n_axes > (size_t)rank)
        return core_err(ANVIL_ERR_SHAPE, "%s: attribute 'axes' lists %zu axes for rank %d",
                        ir_node_label(n), p->n_axes, rank);
    for (size_t i = 0; i < p->n_axes; i++) {
        int ax;
        CORE_TRY(op_norm_axis(n, "axes value", p->axes[i], rank, &ax));
        if (marks[ax] >= 0)
            return core_err(ANVIL_ERR_SHAPE, "%s: axis %d appears twice in 'axes'",
                            ir_node_label(n), ax);
        marks[ax] = (int)i;
    }
    *count = (int)p->n_axes;
    return ANVIL_OK;
}

/* Fills ax[0..rank) from the input dims (IR_DIM_UNKNOWN allowed) and the scales (floats) or
 * sizes (int64) values, count of them, one per listed axis. out is IR_DIM_UNKNOWN where it cannot
 * be known yet. */
static inline anvil_status rs_geometry(const ir_node *n, const resize_params *p, int rank,
                                       const int64_t *in_dims, const int *marks,
                                       const double *scales, const int64_t *sizes, rs_axis *ax) {
    double policy_scale = 0;
    bool policy_known = true;
    for (int d = 0; d < rank; d++) {
        rs_axis *a = &ax[d];
        memset(a, 0, sizeof *a);
        a->in = in_dims[d];
        a->out = a->in;
        a->scale = 1;
        a->roi_end = 1;
        int i = marks[d];
        if (i < 0) continue;
        if (scales) {
            double s = scales[i];
            if (!(s > 0) || !isfinite(s))
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: scales[%d] is %g; every scale must be a finite value > 0",
                                ir_node_label(n), i, s);
            a->scale = s;
            if (a->in >= 0) {
                double o = floor(s * (double)a->in);
                if (o > (double)NN_MAX_EXTENT)
                    return core_err(ANVIL_ERR_LIMIT, "%s: scale %g makes axis %d too large",
                                    ir_node_label(n), s, d);
                a->out = (int64_t)o;
            }
        } else {
            int64_t sz = sizes[i];
            if (sz < 0 || sz > NN_MAX_EXTENT)
                return core_err(ANVIL_ERR_SHAPE, "%s: sizes[%d] is %lld; sizes must be >= 0",
                                ir_node_label(n), i, (long long)sz);
            if (a->in == 0 && sz != 0)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: axis %d is empty, so it cannot be resized to %lld",
                                ir_node_label(n), d, (long long)sz);
            a->out = sz;
            if (a->in > 0) {
                double r = (double)sz / (double)a->in;
                if (policy_scale == 0 || (p->policy == RS_NOT_LARGER && r < policy_scale) ||
                    (p->policy == RS_NOT_SMALLER && r > policy_scale))
                    policy_scale = r;
                a->scale = r;
            } else if (a->in < 0) {
                policy_known = false;
            }
        }
    }
    if (!scales && p->policy != RS_STRETCH) {
        /* keep the aspect ratio: one scale for every listed axis, sizes rounded half up */
        for (int d = 0; d < rank; d++) {
            rs_axis *a = &ax[d];
            if (marks[d] < 0 || a->in == 0) continue;
            if (!policy_known) {
                a->out = IR_DIM_UNKNOWN;
                continue;
            }
            a->scale = policy_scale;
            a->out = (int64_t)(policy_scale * (double)a->in + 0.5);
        }
    }
    for (int d = 0; d < rank; d++) {
        rs_axis *a = &ax[d];
        a->width = (!scales && p->policy == RS_STRETCH) ? (double)a->out : a->scale * (double)a->in;
        if (a->in > 0 && a->out >= 0) a->resized = a->out != a->in || a->scale != 1;
        if (a->in == 0) a->scale = 1;
    }
    return ANVIL_OK;
}

/* Input coordinate of output index y along axis a. */
static inline double rs_coordinate(const resize_params *p, const rs_axis *a, int64_t y) {
    double yy = (double)y, s = a->scale, len = (double)a->in;
    switch (p->coord) {
    case RS_HALF_PIXEL:
        return (yy + 0.5) / s - 0.5;
    case RS_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)a->out / a->width, center = len / 2;
        return center * (1 - adjustment) + (yy + 0.5) / s - 0.5;
    }
    case RS_PYTORCH_HALF_PIXEL:
        return a->out > 1 ? (yy + 0.5) / s - 0.5 : 0.0;
    case RS_ALIGN_CORNERS:
        return a->width == 1 ? 0.0 : yy * (len - 1) / (a->width - 1);
    case RS_ASYMMETRIC:
        return yy / s;
    case RS_TF_HALF_PIXEL_FOR_NN:
        return (yy + 0.5) / s;
    case RS_TF_CROP_AND_RESIZE:
        if (a->width == 1) return 0.5 * (a->roi_start + a->roi_end) * (len - 1);
        return a->roi_start * (len - 1) +
               yy * (a->roi_end - a->roi_start) * (len - 1) / (a->width - 1);
    }
    return 0;
}

static inline bool rs_extrapolated(const resize_params *p, const rs_axis *a, double x) {
    return p->coord == RS_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(a->in - 1));
}

/* Input index of the nearest neighbour of coordinate x, clamped to the axis. */
static inline int64_t rs_nearest_index(const resize_params *p, const rs_axis *a, double x) {
    double f = floor(x), r;
    switch (p->nearest) {
    case RS_ROUND_PREFER_FLOOR:
        r = (x - f == 0.5) ? f : floor(x + 0.5);
        break;
    case RS_ROUND_PREFER_CEIL:
        r = floor(x + 0.5);
        break;
    case RS_FLOOR:
        r = f;
        break;
    case RS_CEIL:
        r = ceil(x);
        break;
    default:
        r = a->scale < 1 ? ceil(x) : f;
        break;
    }
    if (r < 0) return 0;
    if (r > (double)(a->in - 1)) return a->in - 1;
    return (int64_t)r;
}

static inline double rs_cubic(double a, double t) {
    t = fabs(t);
    if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0;
}

/* The tap layout of axis a: the filter scale *s (min(scale, 1) with antialias, else 1), the
 * offset of the first tap from floor(x) (*start) and the number of taps (returned). */
static inline int64_t rs_tap_layout(const resize_params *p, const rs_axis *a, double *s,
                                    int64_t *start) {
    *s = (p->antialias && a->scale < 1) ? a->scale : 1.0;
    double support = p->mode == RS_CUBIC ? 2.0 : 1.0;
    *start = (int64_t)floor(-support / *s) + 1;
    return 2 - 2 * *start;
}

/* The linear / cubic taps of output index y along a, with the layout from rs_tap_layout: input
 * indices (clamped to the axis) into idx[0..taps) and weights into w[0..taps). Returns whether y
 * is extrapolated (tf_crop_and_resize outside the input). */
static inline bool rs_taps_at(const resize_params *p, const rs_axis *a, int64_t y, double s,
                              int64_t start, int64_t taps, int64_t *idx, double *w) {
    double x = rs_coordinate(p, a, y), base = floor(x), r = x - base, sum = 0;
    bool extrap = rs_extrapolated(p, a, x);
    if (!isfinite(x)) {
        base = 0;
        r = 0;
    }
    for (int64_t t = 0; t < taps; t++) {
        int64_t k = start + t, i = (int64_t)base + k;
        double arg = ((double)k - r) * s;
        double wt = p->mode == RS_CUBIC ? rs_cubic(p->cubic_a, arg) : fmax(0.0, 1 - fabs(arg));
        if (p->exclude_outside && (i < 0 || i >= a->in)) wt = 0;
        idx[t] = i < 0 ? 0 : i >= a->in ? a->in - 1 : i;
        w[t] = wt;
        sum += wt;
    }
    /* antialias filters and exclude_outside renormalise; plain kernels already sum to one */
    if ((p->antialias || p->exclude_outside) && sum != 0)
        for (int64_t t = 0; t < taps; t++) w[t] /= sum;
    return extrap;
}

#endif
