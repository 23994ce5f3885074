/* Discrete Fourier transforms: DFT (opset 17, 20) and STFT (17).
 *
 * Complex tensors follow ONNX's convention: a trailing dim of 2 holds (real,
 * imaginary); a trailing dim of 1 is a real signal. Every transform here is the
 * plain O(N*K) sum with a precomputed table of N twiddles and double
 * accumulation: the reference kernel favours exact, obviously correct results
 * over speed. Index products k*n are reduced modulo N before looking up the
 * table, so the angle never loses precision for long transforms.
 *
 * Inputs and outputs are read and written through core_load_f64 /
 * core_store_f64, so every float dtype shares one kernel. */
#include "ops/signal/signal_common.h"

/* ---- shared helpers -------------------------------------------------------------------------- */

/* cos/sin of 2*pi*j/len for j < len; NULL on failure (error set). Caller frees.
 */
static double *sig_twiddles(const ir_node *n, size_t len) {
    size_t bytes;
    if (!core_mul_size(len, 2 * sizeof(double), &bytes)) {
        core_err(ANVIL_ERR_LIMIT, "%s: twiddle table of %zu entries overflows", ir_node_label(n),
                 len);
        return NULL;
    }
    double *tw = core_alloc(bytes ? bytes : 1);
    if (!tw) return NULL;
    for (size_t j = 0; j < len; j++) {
        double a = 2.0 * SIG_PI * (double)j / (double)len;
        tw[2 * j] = cos(a);
        tw[2 * j + 1] = sin(a);
    }
    return tw;
}

/* One 1-D transform of length len (the DFT length) over a sequence seq of n_seq
 * complex values (re, im interleaved; shorter sequences are zero-padded, longer
 * ones truncated by the caller). Writes n_bins complex results to res. sign is
 * -1 for the forward and +1 for the inverse transform; the inverse is not
 * scaled here. */
static void sig_dft_line(const double *tw, size_t len, const double *seq, size_t n_seq,
                         size_t n_bins, double sign, double *res) {
    for (size_t k = 0; k < n_bins; k++) {
        double re = 0.0, im = 0.0;
        /* j tracks k*t mod len; k % len < len keeps the sum below 2*len (no overflow). */
        size_t j = 0, step = k % len;
        for (size_t t = 0; t < n_seq; t++) {
            double c = tw[2 * j], s = sign * tw[2 * j + 1];
            re += seq[2 * t] * c - seq[2 * t + 1] * s;
            im += seq[2 * t] * s + seq[2 * t + 1] * c;
            j += step;
            if (j >= len) j -= len;
        }
        res[2 * k] = re;
        res[2 * k + 1] = im;
    }
}

/* Scratch for transforming one line at a time: the twiddle table of the DFT length, the input
 * sequence (seq) and the result (res), both complex. */
typedef struct sig_line {
    double *tw, *seq, *res;
} sig_line;

/* Allocates the scratch for a length-len DFT reading n_seq values and writing n_bins; on failure
 * nothing stays allocated (error set). */
static anvil_status sig_line_alloc(const ir_node *n, size_t len, size_t n_seq, size_t n_bins,
                                   sig_line *l) {
    size_t bytes;
    if (!core_add_size(n_seq, n_bins, &bytes) || !core_mul_size(bytes, 2 * sizeof(double), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: %s scratch size overflows", ir_node_label(n),
                        ir_op_name(n->op));
    l->tw = sig_twiddles(n, len);
    if (!l->tw) return ANVIL_ERR_OUT_OF_MEMORY;
    l->seq = core_alloc(bytes);
    if (!l->seq) {
        free(l->tw);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    l->res = l->seq + 2 * n_seq;
    return ANVIL_OK;
}

static void sig_line_free(sig_line *l) {
    free(l->seq);
    free(l->tw);
}

/* Reads count values of x into seq: value t from element src + t * stride (real and imaginary
 * part when in_c is 2, else a real value), multiplied by win[t] when a window is given. */
static void sig_line_load(const sig_line *l, const op_tensor *x, size_t src, size_t stride,
                          size_t in_c, size_t count, const op_tensor *win) {
    for (size_t t = 0; t < count; t++, src += stride) {
        double w = win ? core_load_f64(win->dtype, win->data, t) : 1.0;
        l->seq[2 * t] = w * core_load_f64(x->dtype, x->data, src);
        l->seq[2 * t + 1] = in_c == 2 ? w * core_load_f64(x->dtype, x->data, src + 1) : 0.0;
    }
}

/* Writes the n_bins results in res times scale to y: bin k at element dst + k * stride, its
 * imaginary part only when out_c is 2. */
static void sig_line_store(const sig_line *l, const op_tensor *y, size_t dst, size_t stride,
                           size_t out_c, size_t n_bins, double scale) {
    for (size_t k = 0; k < n_bins; k++, dst += stride) {
        core_store_f64(y->dtype, y->data, dst, l->res[2 * k] * scale);
        if (out_c == 2) core_store_f64(y->dtype, y->data, dst + 1, l->res[2 * k + 1] * scale);
    }
}

/* ---- DFT ------------------------------------------------------------------------------------- */

typedef struct dft_params {
    int64_t axis_attr; /* opset 17 */
    bool inverse, onesided;
} dft_params;

static anvil_status dft_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, dft_params, p);
    CORE_TRY(sig_need_opset(n, "DFT exists", 17));
    CORE_TRY(ir_attr_flag(n, "inverse", false, &p->inverse));
    CORE_TRY(ir_attr_flag(n, "onesided", false, &p->onesided));
    if (n->opset < 20) {
        CORE_TRY(ir_attr_int(n, "axis", 1, &p->axis_attr));
        if (op_has_input(n, 2))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: before opset 20 DFT's axis is an attribute, but the node has a "
                            "third input; use the attribute 'axis'",
                            ir_node_label(n));
    } else if (ir_node_attr(n, "axis")) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: from opset 20 DFT's axis is input 2, not an attribute; move it to "
                        "the input",
                        ir_node_label(n));
    }
    n->params = p;
    return ANVIL_OK;
}

/* The resolved geometry of one DFT node. */
typedef struct dft_geom {
    int axis;       /* normalised, in [0, rank-2] */
    int64_t len;    /* DFT length N */
    int64_t n_bins; /* output length along axis */
    int64_t out_c;  /* 1 (real output) or 2 */
} dft_geom;

static anvil_status dft_geometry(const ir_node *n, int rank, int64_t axis_v, int64_t in_axis_len,
                                 int64_t in_c, bool len_known, int64_t len_v, dft_geom *o) {
    const dft_params *p = n->params;
    if (in_c != 1 && in_c != 2 && in_c >= 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the last dim of input 0 must be 1 (real) or 2 (complex), got %lld",
                        ir_node_label(n), (long long)in_c);
    int axis;
    CORE_TRY(op_norm_axis(n, "axis", axis_v, rank, &axis));
    if (axis == rank - 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: axis %lld is the last (real/imaginary) dim; the "
                        "transform axis must "
                        "be in [-rank, -2] or [0, rank-2]",
                        ir_node_label(n), (long long)axis_v);
    o->axis = axis;
    bool irfft = p->inverse && p->onesided;
    if (irfft && in_c == 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: an inverse one-sided DFT needs complex input (last dim 2), got a "
                        "real one; pass the half spectrum as (re, im) pairs",
                        ir_node_label(n));
    if (!p->inverse && p->onesided && in_c == 2)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: onesided=1 needs real input (last dim 1) for a forward DFT, got a "
                        "complex one; set onesided=0",
                        ir_node_label(n));
    if (len_known) {
        if (len_v <= 0)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: dft_length is %lld; it must be >= 1",
                            ir_node_label(n), (long long)len_v);
        o->len = len_v;
    } else if (in_axis_len < 0) {
        o->len = -1;
    } else if (irfft) {
        if (in_axis_len < 2)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: an inverse one-sided DFT without dft_length needs at least 2 "
                            "bins along axis %d, got %lld; pass dft_length",
                            ir_node_label(n), axis, (long long)in_axis_len);
        o->len = 2 * (in_axis_len - 1);
    } else {
        if (in_axis_len == 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input 0 has 0 elements along axis %d; a DFT needs at least one",
                            ir_node_label(n), axis);
        o->len = in_axis_len;
    }
    o->n_bins = o->len < 0 ? -1 : (!p->inverse && p->onesided ? o->len / 2 + 1 : o->len);
    o->out_c = irfft ? 1 : 2;
    return ANVIL_OK;
}

/* The axis value (opset 20: input 2, default -2; opset 17: attribute). */
static anvil_status dft_axis_info(const ir_node *n, const op_tinfo *in, int n_in, int64_t *axis,
                                  bool *known) {
    const dft_params *p = n->params;
    *known = true;
    if (n->opset < 20) {
        *axis = p->axis_attr;
        return ANVIL_OK;
    }
    *axis = -2;
    if (n_in > 2 && op_has_input(n, 2)) return sig_scalar_int(n, 2, "axis", &in[2], axis, known);
    return ANVIL_OK;
}

static anvil_status dft_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    CORE_TRY(sig_require_float(n, 0, in[0].dtype, true));
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    int64_t axis_v = 0, len_v = 0;
    bool axis_known = true, len_known = false;
    CORE_TRY(dft_axis_info(n, in, n_in, &axis_v, &axis_known));
    if (n_in > 1 && op_has_input(n, 1))
        CORE_TRY(sig_scalar_int(n, 1, "dft_length", &in[1], &len_v, &len_known));
    const ir_shape *x = &in[0].shape;
    if (x->rank < 0 || !axis_known) return ANVIL_OK;
    if (x->rank < 2)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 must have rank >= 2 ([..., n, 1 or 2]), got rank %d",
                        ir_node_label(n), x->rank);
    bool len_input = n_in > 1 && op_has_input(n, 1);
    if (len_input && !len_known) len_v = -1;
    dft_geom geo;
    int axis;
    CORE_TRY(op_norm_axis(n, "axis", axis_v, x->rank, &axis));
    CORE_TRY(
        dft_geometry(n, x->rank, axis_v, x->d[axis], x->d[x->rank - 1], len_known, len_v, &geo));
    if (len_input && !len_known) geo.n_bins = -1;
    out[0].shape = *x;
    out[0].shape.d[geo.axis] = geo.n_bins < 0 ? IR_DIM_UNKNOWN : geo.n_bins;
    out[0].shape.sym[geo.axis] = -1;
    out[0].shape.d[x->rank - 1] = geo.out_c;
    out[0].shape.sym[x->rank - 1] = -1;
    return ANVIL_OK;
}

static anvil_status dft_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const dft_params *p = n->params;
    const op_tensor *x = in[0];
    int64_t axis_v = n->opset < 20 ? p->axis_attr : -2, len_v = 0;
    bool len_known = false;
    if (n->opset >= 20 && n_in > 2 && in[2]) CORE_TRY(sig_tensor_int(n, 2, "axis", in[2], &axis_v));
    if (n_in > 1 && in[1]) {
        CORE_TRY(sig_tensor_int(n, 1, "dft_length", in[1], &len_v));
        len_known = true;
    }
    int axis;
    CORE_TRY(op_norm_axis(n, "axis", axis_v, x->rank, &axis));
    dft_geom geo;
    CORE_TRY(dft_geometry(n, x->rank, axis_v, x->dims[axis], x->dims[x->rank - 1], len_known, len_v,
                          &geo));
    const op_tensor *y = out[0];
    if (y->dims[axis] != geo.n_bins || y->dims[y->rank - 1] != geo.out_c)
        return core_err(ANVIL_ERR_RUNTIME, "%s: output shape does not match the DFT geometry",
                        ir_node_label(n));
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= (size_t)x->dims[d];
    for (int d = axis + 1; d < x->rank - 1; d++) inner *= (size_t)x->dims[d];
    if (outer == 0 || inner == 0) return ANVIL_OK;
    size_t len = (size_t)geo.len, in_len = (size_t)x->dims[axis],
           in_c = (size_t)x->dims[x->rank - 1];
    size_t n_bins = (size_t)geo.n_bins, out_c = (size_t)geo.out_c;
    bool irfft = p->inverse && p->onesided;
    /* Only the first len samples (or, for the inverse one-sided case, the first
     * len/2+1 bins) take part; the rest of a longer input is ignored, as numpy's
     * n= argument does. */
    size_t n_seq =
        irfft ? (len / 2 + 1 < in_len ? len / 2 + 1 : in_len) : (len < in_len ? len : in_len);
    size_t full = irfft ? len : n_seq;
    sig_line l;
    CORE_TRY(sig_line_alloc(n, len, full, n_bins, &l));
    double *seq = l.seq;
    double scale = p->inverse ? 1.0 / (double)len : 1.0;
    for (size_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < inner; i++) {
            sig_line_load(&l, x, (o * in_len * inner + i) * in_c, inner * in_c, in_c, n_seq, NULL);
            size_t used = n_seq;
            if (irfft) {
                /* Rebuild the full Hermitian spectrum: X[len-k] = conj(X[k]). The
                 * imaginary parts of the DC bin (and the Nyquist bin for even len)
                 * cannot appear in a real signal's spectrum and are dropped, like
                 * numpy's irfft does. */
                for (size_t t = n_seq; t < len; t++) seq[2 * t] = seq[2 * t + 1] = 0.0;
                seq[1] = 0.0;
                if (len % 2 == 0 && n_seq > len / 2) seq[len + 1] = 0.0;
                for (size_t k = 1; k < n_seq; k++) {
                    if (len - k < n_seq) continue;
                    seq[2 * (len - k)] = seq[2 * k];
                    seq[2 * (len - k) + 1] = -seq[2 * k + 1];
                }
                used = len;
            }
            sig_dft_line(l.tw, len, seq, used, n_bins, p->inverse ? 1.0 : -1.0, l.res);
            sig_line_store(&l, y, (o * n_bins * inner + i) * out_c, inner * out_c, out_c, n_bins,
                           scale);
        }
    }
    sig_line_free(&l);
    return ANVIL_OK;
}

const op_impl op_impl_dft = {.min_inputs = 1,
                             .max_inputs = 3,
                             .min_outputs = 1,
                             .max_outputs = 1,
                             .value_inputs = (1u << 1) | (1u << 2),
                             .check = dft_check,
                             .infer = dft_infer,
                             .run = dft_run};

/* ---- STFT ------------------------------------------------------------------------------------ */

typedef struct stft_params {
    bool onesided;
} stft_params;

static anvil_status stft_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, stft_params, p);
    CORE_TRY(sig_need_opset(n, "STFT exists", 17));
    CORE_TRY(ir_attr_flag(n, "onesided", true, &p->onesided));
    n->params = p;
    return ANVIL_OK;
}

/* Resolved STFT geometry; negative values are unknown. */
typedef struct stft_geom {
    int64_t step, frame_len, frames, bins;
} stft_geom;

/* Validates the STFT inputs' known parts and computes the geometry. sig_len,
 * sig_c, win_len are -1 when unknown (win_len also when there is no window);
 * step/fl likewise when not known. */
static anvil_status stft_geometry(const ir_node *n, int64_t sig_len, int64_t sig_c, int64_t step,
                                  int64_t win_len, int64_t fl, stft_geom *o) {
    const stft_params *p = n->params;
    if (sig_c >= 0 && sig_c != 1 && sig_c != 2)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the last dim of the signal must be 1 (real) or 2 "
                        "(complex), got %lld",
                        ir_node_label(n), (long long)sig_c);
    if (sig_c == 2 && p->onesided)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: onesided=1 needs a real signal (last dim 1), got a "
                        "complex one; set "
                        "onesided=0",
                        ir_node_label(n));
    if (step == 0 || step < -1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: frame_step is %lld; it must be >= 1",
                        ir_node_label(n), (long long)step);
    if (fl == 0 || fl < -1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: frame_length is %lld; it must be >= 1",
                        ir_node_label(n), (long long)fl);
    if (fl > 0 && win_len >= 0 && fl != win_len)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: frame_length is %lld but the window has %lld elements; they must "
                        "be equal",
                        ir_node_label(n), (long long)fl, (long long)win_len);
    if (fl < 0) fl = win_len >= 0 ? win_len : -1;
    if (win_len == 0)
        return core_err(ANVIL_ERR_SHAPE, "%s: the window is empty; it needs at least one element",
                        ir_node_label(n));
    o->step = step;
    o->frame_len = fl;
    o->frames = -1;
    if (fl > 0 && sig_len >= 0 && step > 0) {
        if (sig_len < fl)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the signal has %lld samples, fewer than one frame of %lld; "
                            "shorten frame_length or pad the signal",
                            ir_node_label(n), (long long)sig_len, (long long)fl);
        o->frames = 1 + (sig_len - fl) / step;
    }
    o->bins = fl < 0 ? -1 : (p->onesided ? fl / 2 + 1 : fl);
    return ANVIL_OK;
}

static anvil_status stft_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    CORE_TRY(sig_require_float(n, 0, in[0].dtype, true));
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    const ir_shape *s = &in[0].shape;
    if (s->rank >= 0 && s->rank != 3)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the signal must have rank 3 ([batch, length, 1 or "
                        "2]), got rank %d",
                        ir_node_label(n), s->rank);
    int64_t step = -1, fl = -1, win_len = -1;
    bool known = false;
    CORE_TRY(sig_scalar_int(n, 1, "frame_step", &in[1], &step, &known));
    if (!known) step = -1;
    if (n_in > 2 && op_has_input(n, 2)) {
        if (in[2].dtype != in[0].dtype)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: the window (input 2) is %s but the signal is %s; "
                            "they must match",
                            ir_node_label(n), anvil_dtype_name(in[2].dtype),
                            anvil_dtype_name(in[0].dtype));
        if (in[2].shape.rank >= 0 && in[2].shape.rank != 1)
            return core_err(ANVIL_ERR_SHAPE, "%s: the window (input 2) must be 1-D, got rank %d",
                            ir_node_label(n), in[2].shape.rank);
        if (in[2].shape.rank == 1 && in[2].shape.d[0] >= 0) win_len = in[2].shape.d[0];
    }
    bool fl_input = n_in > 3 && op_has_input(n, 3);
    if (fl_input) {
        CORE_TRY(sig_scalar_int(n, 3, "frame_length", &in[3], &fl, &known));
        if (!known) fl = -1;
    }
    if (s->rank < 0) return ANVIL_OK;
    int64_t sig_len = s->d[1];
    /* Without frame_length or window, one frame spans the whole signal. */
    if (!fl_input && win_len < 0 && !(n_in > 2 && op_has_input(n, 2)))
        fl = sig_len < 0 ? -1 : sig_len;
    stft_geom geo;
    CORE_TRY(stft_geometry(n, sig_len, s->d[2], step, win_len, fl, &geo));
    int64_t dims[4] = {s->d[0], geo.frames, geo.bins, 2};
    ir_shape_set(&out[0].shape, 4, (int64_t[]){0, 0, 0, 2});
    for (int d = 0; d < 3; d++) {
        out[0].shape.d[d] = dims[d] < 0 ? IR_DIM_UNKNOWN : dims[d];
        out[0].shape.sym[d] = d == 0 ? s->sym[0] : -1;
    }
    return ANVIL_OK;
}

static anvil_status stft_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0];
    const op_tensor *win = n_in > 2 ? in[2] : NULL;
    int64_t step = 0, fl = -1;
    CORE_TRY(sig_tensor_int(n, 1, "frame_step", in[1], &step));
    if (n_in > 3 && in[3]) CORE_TRY(sig_tensor_int(n, 3, "frame_length", in[3], &fl));
    if (fl < 0 && !win) fl = x->dims[1];
    stft_geom geo;
    CORE_TRY(stft_geometry(n, x->dims[1], x->dims[2], step, win ? win->dims[0] : -1, fl, &geo));
    const op_tensor *y = out[0];
    if (y->dims[1] != geo.frames || y->dims[2] != geo.bins)
        return core_err(ANVIL_ERR_RUNTIME, "%s: output shape does not match the STFT geometry",
                        ir_node_label(n));
    size_t batch = (size_t)x->dims[0], len = (size_t)x->dims[1], in_c = (size_t)x->dims[2];
    size_t flen = (size_t)geo.frame_len, frames = (size_t)geo.frames, bins = (size_t)geo.bins;
    if (batch == 0 || frames == 0) return ANVIL_OK;
    sig_line l;
    CORE_TRY(sig_line_alloc(n, flen, flen, bins, &l));
    for (size_t b = 0; b < batch; b++) {
        for (size_t f = 0; f < frames; f++) {
            sig_line_load(&l, x, (b * len + f * (size_t)geo.step) * in_c, in_c, in_c, flen, win);
            sig_dft_line(l.tw, flen, l.seq, flen, bins, -1.0, l.res);
            sig_line_store(&l, y, (b * frames + f) * bins * 2, 2, 2, bins, 1.0);
        }
    }
    sig_line_free(&l);
    return ANVIL_OK;
}

const op_impl op_impl_stft = {.min_inputs = 2,
                              .max_inputs = 4,
                              .min_outputs = 1,
                              .max_outputs = 1,
                              .value_inputs = (1u << 1) | (1u << 3),
                              .check = stft_check,
                              .infer = stft_infer,
                              .run = stft_run};
