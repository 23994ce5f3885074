/* Signal generators: the HannWindow, HammingWindow and BlackmanWindow functions and
 * MelWeightMatrix (all opset 17).
 *
 * Outputs are written through core_store_f64, so every numeric output_datatype shares one
 * kernel. */
#include "ops/signal/signal_common.h"

/* ---- output_datatype (windows, MelWeightMatrix) ---------------------------------------------- */

/* Parses output_datatype (default FLOAT) and checks it is one of the numeric
 * types the schema allows. */
static anvil_status sig_out_dtype(const ir_node *n, anvil_dtype *out) {
    int64_t v = 0;
    CORE_TRY(ir_attr_int(n, "output_datatype", ANVIL_DTYPE_FLOAT32, &v));
    anvil_dtype dt = (anvil_dtype)v;
    bool ok = v >= 0 && v < 64 && (core_dtype_is_float(dt) || core_dtype_is_int(dt)) &&
              core_dtype_supported(dt);
    if (!ok)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: attribute 'output_datatype' is %lld, which is not a supported "
                        "integer or float type; use e.g. 1 (FLOAT) or 11 (DOUBLE)",
                        ir_node_label(n), (long long)v);
    *out = dt;
    return ANVIL_OK;
}

/* ---- HannWindow, HammingWindow, BlackmanWindow ----------------------------------------------- */

typedef struct window_params {
    anvil_dtype out_dt;
    bool periodic;
} window_params;

static anvil_status window_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, window_params, p);
    CORE_TRY(sig_need_opset(n, "the window functions exist", 17));
    CORE_TRY(sig_out_dtype(n, &p->out_dt));
    CORE_TRY(ir_attr_flag(n, "periodic", true, &p->periodic));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status window_size_check(const ir_node *n, int64_t size) {
    if (size < 0)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: the window size is %lld; it must be >= 0",
                        ir_node_label(n), (long long)size);
    return ANVIL_OK;
}

static anvil_status window_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const window_params *p = n->params;
    out[0].dtype = p->out_dt;
    int64_t size = 0;
    bool known = false;
    CORE_TRY(sig_scalar_int(n, 0, "size", &in[0], &size, &known));
    ir_shape_set(&out[0].shape, 1, (int64_t[]){0});
    if (!known) {
        out[0].shape.d[0] = IR_DIM_UNKNOWN;
        out[0].shape.sym[0] = -1;
        return ANVIL_OK;
    }
    CORE_TRY(window_size_check(n, size));
    out[0].shape.d[0] = size;
    return ANVIL_OK;
}

/* One kernel for the three windows; the op says which cosine sum to evaluate. */
static anvil_status window_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const window_params *p = n->params;
    int64_t size = 0;
    CORE_TRY(sig_tensor_int(n, 0, "size", in[0], &size));
    CORE_TRY(window_size_check(n, size));
    if (out[0]->dims[0] != size)
        return core_err(ANVIL_ERR_RUNTIME, "%s: output has %lld elements, the size input says %lld",
                        ir_node_label(n), (long long)out[0]->dims[0], (long long)size);
    /* The symmetric window divides by size-1 so that its last sample mirrors the
     * first; the periodic one by size, as if one more sample followed. A
     * one-sample symmetric window has a zero denominator: the formula's limit
     * there is the value at n = 0, i.e. angle 0. */
    double denom = p->periodic ? (double)size : (double)(size - 1);
    for (int64_t i = 0; i < size; i++) {
        double a = denom > 0 ? 2.0 * SIG_PI * (double)i / denom : 0.0;
        double v;
        switch (n->op) {
        case IR_OP_HANNWINDOW:
            v = 0.5 - 0.5 * cos(a);
            break;
        case IR_OP_HAMMINGWINDOW:
            v = 25.0 / 46.0 - 21.0 / 46.0 * cos(a);
            break;
        default:
            v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2.0 * a);
            break;
        }
        core_store_f64(out[0]->dtype, out[0]->data, (size_t)i, v);
    }
    return ANVIL_OK;
}

#define SIG_WINDOW_IMPL(name)                                                                      \
    const op_impl op_impl_##name = {.min_inputs = 1,                                               \
                                    .max_inputs = 1,                                               \
                                    .min_outputs = 1,                                              \
                                    .max_outputs = 1,                                              \
                                    .value_inputs = 1u << 0,                                       \
                                    .check = window_check,                                         \
                                    .infer = window_infer,                                         \
                                    .run = window_run};
SIG_WINDOW_IMPL(hannwindow)
SIG_WINDOW_IMPL(hammingwindow)
SIG_WINDOW_IMPL(blackmanwindow)

/* ---- MelWeightMatrix ------------------------------------------------------------------------- */

typedef struct mel_params {
    anvil_dtype out_dt;
} mel_params;

static anvil_status mel_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, mel_params, p);
    CORE_TRY(sig_need_opset(n, "MelWeightMatrix exists", 17));
    CORE_TRY(sig_out_dtype(n, &p->out_dt));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status mel_counts(const ir_node *n, int64_t bins, int64_t dft_len) {
    if (bins < 1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: num_mel_bins is %lld; it must be >= 1",
                        ir_node_label(n), (long long)bins);
    if (dft_len < 1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: dft_length is %lld; it must be >= 1",
                        ir_node_label(n), (long long)dft_len);
    return ANVIL_OK;
}

static anvil_status mel_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const mel_params *p = n->params;
    out[0].dtype = p->out_dt;
    int64_t bins = 0, dft_len = 0, rate = 0;
    bool kb = false, kd = false, kr = false;
    CORE_TRY(sig_scalar_int(n, 0, "num_mel_bins", &in[0], &bins, &kb));
    CORE_TRY(sig_scalar_int(n, 1, "dft_length", &in[1], &dft_len, &kd));
    CORE_TRY(sig_scalar_int(n, 2, "sample_rate", &in[2], &rate, &kr));
    for (int i = 3; i < 5; i++) {
        CORE_TRY(sig_require_float(n, i, in[i].dtype, true));
        if (in[i].shape.rank > 1 ||
            (in[i].shape.rank == 1 && in[i].shape.d[0] >= 0 && in[i].shape.d[0] != 1))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d (an edge frequency) must be one value, got shape of rank "
                            "%d",
                            ir_node_label(n), i, in[i].shape.rank);
    }
    if (in[1].dtype != in[0].dtype || in[2].dtype != in[0].dtype || in[4].dtype != in[3].dtype)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: num_mel_bins, dft_length and sample_rate must share one integer "
                        "type and the two edge frequencies one float type",
                        ir_node_label(n));
    ir_shape_set(&out[0].shape, 2, (int64_t[]){0, 0});
    for (int d = 0; d < 2; d++) {
        out[0].shape.d[d] = IR_DIM_UNKNOWN;
        out[0].shape.sym[d] = -1;
    }
    if (kb && kd) {
        CORE_TRY(mel_counts(n, bins, dft_len));
        out[0].shape.d[0] = dft_len / 2 + 1;
        out[0].shape.d[1] = bins;
    }
    return ANVIL_OK;
}

static double sig_hz_to_mel(double hz) {
    return 2595.0 * log10(1.0 + hz / 700.0);
}
static double sig_mel_to_hz(double mel) {
    return 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
}

static anvil_status mel_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    int64_t bins = 0, dft_len = 0, rate = 0;
    CORE_TRY(sig_tensor_int(n, 0, "num_mel_bins", in[0], &bins));
    CORE_TRY(sig_tensor_int(n, 1, "dft_length", in[1], &dft_len));
    CORE_TRY(sig_tensor_int(n, 2, "sample_rate", in[2], &rate));
    CORE_TRY(mel_counts(n, bins, dft_len));
    if (rate < 1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: sample_rate is %lld; it must be >= 1",
                        ir_node_label(n), (long long)rate);
    for (int i = 3; i < 5; i++)
        if (op_tensor_numel(in[i]) != 1)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d (an edge frequency) has %zu values; "
                            "it must have one",
                            ir_node_label(n), i, op_tensor_numel(in[i]));
    double lo = core_load_f64(in[3]->dtype, in[3]->data, 0);
    double hi = core_load_f64(in[4]->dtype, in[4]->data, 0);
    if (!(lo >= 0.0 && hi > lo))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: the edges are [%g, %g] Hz; they must satisfy 0 <= lower < upper",
                        ir_node_label(n), lo, hi);
    const op_tensor *y = out[0];
    int64_t spec = dft_len / 2 + 1;
    if (y->dims[0] != spec || y->dims[1] != bins)
        return core_err(ANVIL_ERR_RUNTIME, "%s: output shape does not match the inputs",
                        ir_node_label(n));
    size_t n_pts = (size_t)bins + 2, bytes;
    if (!core_mul_size(n_pts, sizeof(int64_t), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: num_mel_bins is too large", ir_node_label(n));
    int64_t *pt = core_alloc(bytes);
    if (!pt) return ANVIL_ERR_OUT_OF_MEMORY;
    /* bins+2 points evenly spaced on the mel scale give each triangle its left
     * edge, peak and right edge; each maps to the spectrogram bin
     * floor((dft_length+1) * hz / sample_rate). The step divides the mel range by
     * bins+2 (not bins+1), so the top point stays just below the upper edge: this
     * is the convention the ONNX reference and conformance data follow. */
    double mlo = sig_hz_to_mel(lo), mhi = sig_hz_to_mel(hi);
    double step = (mhi - mlo) / (double)n_pts;
    for (size_t i = 0; i < n_pts; i++) {
        double hz = sig_mel_to_hz((double)i * step + mlo);
        double b = floor((double)(dft_len + 1) * hz / (double)rate);
        if (b < 0) b = 0;
        if (b > (double)(spec - 1)) b = (double)(spec - 1);
        pt[i] = (int64_t)b;
    }
    size_t ncols = (size_t)bins;
    /* Output buffers are not guaranteed to be zeroed; most of the matrix lies outside every
     * triangle. */
    for (size_t i = 0; i < (size_t)spec * ncols; i++) core_store_f64(y->dtype, y->data, i, 0.0);
    for (size_t i = 0; i < ncols; i++) {
        int64_t left = pt[i], center = pt[i + 1], right = pt[i + 2];
        if (center == left) {
            core_store_f64(y->dtype, y->data, (size_t)center * ncols + i, 1.0);
        } else {
            for (int64_t j = left; j <= center; j++)
                core_store_f64(y->dtype, y->data, (size_t)j * ncols + i,
                               (double)(j - left) / (double)(center - left));
        }
        for (int64_t j = center; j < right; j++)
            core_store_f64(y->dtype, y->data, (size_t)j * ncols + i,
                           (double)(right - j) / (double)(right - center));
    }
    free(pt);
    return ANVIL_OK;
}

const op_impl op_impl_melweightmatrix = {.min_inputs = 5,
                                         .max_inputs = 5,
                                         .min_outputs = 1,
                                         .max_outputs = 1,
                                         .value_inputs = (1u << 0) | (1u << 1),
                                         .check = mel_check,
                                         .infer = mel_infer,
                                         .run = mel_run};
