/* Recurrent ops: RNN, GRU and LSTM (attribute checking, shape inference, reference kernels).
 *
 * The three share everything but the cell: the same inputs (X, W, R, B, sequence_lens, initial_h,
 * and for LSTM initial_c and the peepholes P), the same directions, activation lists, clip, layout
 * and outputs (Y, Y_h, and for LSTM Y_c). One parameter block describes them and one driver walks
 * the sequence; the cell differs by the number of gates and how they combine.
 *
 * The reference kernel computes in double from operands widened once per run, so FLOAT, DOUBLE,
 * FLOAT16 and BFLOAT16 share one code path and the float results are as exact as the inputs allow.
 * Every (direction, batch entry) pair is an independent recurrence; they are the units of work
 * split across threads. Steps beyond an entry's sequence length write zeros to Y and leave its
 * state alone, so Y_h / Y_c hold the state after its last real step (for the reverse direction, the
 * state after step 0). */
#include "ops/nn_common.h"

typedef enum { RNN_VANILLA, RNN_GRU, RNN_LSTM } rnn_kind;

typedef enum {
    ACT_RELU,
    ACT_TANH,
    ACT_SIGMOID,
    ACT_AFFINE,
    ACT_LEAKYRELU,
    ACT_THRESHOLDEDRELU,
    ACT_SCALEDTANH,
    ACT_HARDSIGMOID,
    ACT_ELU,
    ACT_SOFTSIGN,
    ACT_SOFTPLUS
} rnn_act_kind;

typedef struct rnn_act {
    rnn_act_kind kind;
    double alpha, beta;
} rnn_act;

/* Activation names as the ONNX spec writes them, whether they take alpha / beta, and the defaults
 * used when the model gives fewer activation_alpha / activation_beta values. */
static const struct {
    const char *name;
    rnn_act_kind kind;
    bool has_alpha, has_beta;
    double alpha, beta;
} rnn_act_table[] = {
    {"Relu", ACT_RELU, false, false, 0, 0},
    {"Tanh", ACT_TANH, false, false, 0, 0},
    {"Sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"Affine", ACT_AFFINE, true, true, 1.0, 0.0},
    {"LeakyRelu", ACT_LEAKYRELU, true, false, 0.01, 0},
    {"ThresholdedRelu", ACT_THRESHOLDEDRELU, true, false, 1.0, 0},
    {"ScaledTanh", ACT_SCALEDTANH, true, true, 1.0, 1.0},
    {"HardSigmoid", ACT_HARDSIGMOID, true, true, 0.2, 0.5},
    {"Elu", ACT_ELU, true, false, 1.0, 0},
    {"Softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"Softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

#define RNN_MAX_ACTS 6 /* 3 per direction (LSTM), 2 directions */

typedef struct rnn_params {
    rnn_kind kind;
    int gates; /* 1, 3, 4 */
    int nact;  /* activations per direction: 1, 2, 3 */
    int dirs;
    bool reverse;   /* direction = reverse (one direction, walked backwards) */
    int64_t hidden; /* hidden_size, or -1 when absent (taken from R) */
    bool layout_batch_first;
    bool has_clip;
    double clip;
    bool linear_before_reset; /* GRU */
    bool input_forget;        /* LSTM */
    rnn_act act[RNN_MAX_ACTS];
} rnn_params;

/* ---- check ------------------------------------------------------------------------------- */

static anvil_status rnn_parse_acts(const ir_node *n, rnn_params *p) {
    static const char *const defaults[3][3] = {
        {"Tanh", NULL, NULL}, {"Sigmoid", "Tanh", NULL}, {"Sigmoid", "Tanh", "Tanh"}};
    const ir_attr *a = ir_node_attr(n, "activations");
    if (a && a->type != IR_ATTR_STRINGS)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'activations' has type %s; expected STRINGS",
                        ir_node_label(n), ir_attr_type_name(a->type));
    size_t want = (size_t)(p->nact * p->dirs);
    if (a && a->n != want && a->n != (size_t)p->nact)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'activations' lists %zu functions; %s with %d direction(s) "
                        "needs %zu (%d per direction)",
                        ir_node_label(n), a->n, ir_op_name(n->op), p->dirs, want, p->nact);
    const float *alphas = NULL, *betas = NULL;
    size_t n_alpha = 0, n_beta = 0, ia = 0, ib = 0;
    CORE_TRY(ir_attr_floats(n, "activation_alpha", &alphas, &n_alpha));
    CORE_TRY(ir_attr_floats(n, "activation_beta", &betas, &n_beta));
    for (size_t k = 0; k < want; k++) {
        const char *name = a ? a->strings[k % a->n] : defaults[p->kind][k % (size_t)p->nact];
        size_t t = 0, nt = sizeof rnn_act_table / sizeof rnn_act_table[0];
        while (t < nt && strcmp(rnn_act_table[t].name, name) != 0) t++;
        if (t == nt)
            return core_err(
                ANVIL_ERR_UNSUPPORTED,
                "%s: activation '%s' is not one anvil knows; use Relu, Tanh, Sigmoid, Affine, "
                "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign or Softplus",
                ir_node_label(n), name);
        rnn_act *act = &p->act[k];
        act->kind = rnn_act_table[t].kind;
        act->alpha = rnn_act_table[t].alpha;
        act->beta = rnn_act_table[t].beta;
        /* alpha / beta values are consumed in order by the functions that take them */
        if (rnn_act_table[t].has_alpha && ia < n_alpha) act->alpha = alphas[ia++];
        if (rnn_act_table[t].has_beta && ib < n_beta) act->beta = betas[ib++];
    }
    return ANVIL_OK;
}

/* Reads flag attribute `name`, which only the op `owner` has (owned: n is that op); on the other
 * ops the attribute is an error. */
static anvil_status rnn_own_flag(const ir_node *n, const char *name, const char *owner, bool owned,
                                 bool *out) {
    if (owned) return ir_attr_flag(n, name, false, out);
    if (!ir_node_attr(n, name)) return ANVIL_OK;
    return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute '%s' belongs to %s only; drop it",
                    ir_node_label(n), name, owner);
}

static anvil_status rnn_check(ir_graph *g, ir_node *n) {
    rnn_kind kind = n->op == IR_OP_GRU ? RNN_GRU : n->op == IR_OP_LSTM ? RNN_LSTM : RNN_VANILLA;
    if (n->opset < 7)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s before opset 7 (with 'output_sequence') is not supported; "
                        "re-export with opset >= 7",
                        ir_node_label(n), ir_op_name(n->op));
    OP_PARAMS_NEW(g, rnn_params, p);
    p->kind = kind;
    p->gates = kind == RNN_VANILLA ? 1 : kind == RNN_GRU ? 3 : 4;
    p->nact = kind == RNN_VANILLA ? 1 : kind == RNN_GRU ? 2 : 3;
    const char *dir;
    CORE_TRY(ir_attr_string(n, "direction", "forward", &dir));
    if (strcmp(dir, "forward") == 0) {
        p->dirs = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        p->dirs = 1;
        p->reverse = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        p->dirs = 2;
    } else {
        return core_err(
            ANVIL_ERR_INVALID_MODEL,
            "%s: attribute 'direction' is '%s'; expected forward, reverse or bidirectional",
            ir_node_label(n), dir);
    }
    CORE_TRY(ir_attr_int(n, "hidden_size", -1, &p->hidden));
    if (ir_node_attr(n, "hidden_size") && (p->hidden < 1 || p->hidden > NN_MAX_ATTR))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'hidden_size' is %lld; it must be >= 1", ir_node_label(n),
                        (long long)p->hidden);
    if (n->opset < 14 && ir_node_attr(n, "layout"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'layout' does not exist at opset %d (it arrived in opset "
                        "14); import opset >= 14 or drop it",
                        ir_node_label(n), n->opset);
    CORE_TRY(ir_attr_flag(n, "layout", false, &p->layout_batch_first));
    if (ir_node_attr(n, "clip")) {
        float c;
        CORE_TRY(ir_attr_float(n, "clip", 0.0f, &c));
        if (!(c > 0))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'clip' is %g; it must be a positive threshold",
                            ir_node_label(n), (double)c);
        p->has_clip = true;
        p->clip = c;
    }
    CORE_TRY(
        rnn_own_flag(n, "linear_before_reset", "GRU", kind == RNN_GRU, &p->linear_before_reset));
    CORE_TRY(rnn_own_flag(n, "input_forget", "LSTM", kind == RNN_LSTM, &p->input_forget));
    if (ir_node_attr(n, "output_sequence"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'output_sequence' was removed in opset 7; drop it",
                        ir_node_label(n));
    CORE_TRY(rnn_parse_acts(n, p));
    n->params = p;
    return ANVIL_OK;
}

/* ---- inference ------------------------------------------------------------------------------ */

static bool rnn_dtype_ok(const ir_node *n, anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT64 || dt == ANVIL_DTYPE_FLOAT16 ||
           (n->opset >= 22 && dt == ANVIL_DTYPE_BFLOAT16);
}

/* Checks that dim `d` of input `what` (shape s) is `want` when both are known. */
static anvil_status rnn_dim(const ir_node *n, const char *what, const ir_shape *s, int d,
                            int64_t want, const char *meaning) {
    if (s->rank < 0 || want < 0 || s->d[d] < 0 || s->d[d] == want) return ANVIL_OK;
    char b[128];
    return core_err(ANVIL_ERR_SHAPE, "%s: %s has shape %s; dim %d must be %lld (%s)",
                    ir_node_label(n), what, ir_shape_str(NULL, s, b, sizeof b), d, (long long)want,
                    meaning);
}

static anvil_status rnn_rank(const ir_node *n, const char *what, const ir_shape *s, int rank) {
    if (s->rank < 0 || s->rank == rank) return ANVIL_OK;
    return core_err(ANVIL_ERR_SHAPE, "%s: %s has rank %d; expected rank %d", ir_node_label(n), what,
                    s->rank, rank);
}

static void rnn_set_dims(ir_shape *s, int rank, const int64_t *d) {
    nn_shape_unknown_dims(s, rank);
    for (int i = 0; i < rank; i++) s->d[i] = d[i] < 0 ? IR_DIM_UNKNOWN : d[i];
}

static anvil_status rnn_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    const rnn_params *p = n->params;
    anvil_dtype dt = in[0].dtype;
    if (!rnn_dtype_ok(n, dt))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: X has dtype %s; %s takes FLOAT, DOUBLE, FLOAT16%s", ir_node_label(n),
                        anvil_dtype_name(dt), ir_op_name(n->op),
                        n->opset >= 22 ? " or BFLOAT16" : " (BFLOAT16 from opset 22)");
    static const char *const names[] = {"X",         "W",         "R", "B", "sequence_lens",
                                        "initial_h", "initial_c", "P"};
    for (int i = 1; i < n_in; i++) {
        if (!op_has_input(n, i) || i == 4) continue;
        if (in[i].dtype != dt)
            return core_err(ANVIL_ERR_SHAPE, "%s: input %s is %s but X is %s; they must match",
                            ir_node_label(n), names[i], anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(dt));
    }
    const ir_shape *x = &in[0].shape, *w = &in[1].shape, *r = &in[2].shape;
    CORE_TRY(rnn_rank(n, "X", x, 3));
    CORE_TRY(rnn_rank(n, "W", w, 3));
    CORE_TRY(rnn_rank(n, "R", r, 3));
    int64_t seq = x->rank == 3 ? x->d[p->layout_batch_first ? 1 : 0] : -1;
    int64_t batch = x->rank == 3 ? x->d[p->layout_batch_first ? 0 : 1] : -1;
    int64_t input = x->rank == 3 ? x->d[2] : -1;
    int64_t H = p->hidden;
    if (H < 0 && r->rank == 3) H = r->d[2];
    if (H < 0 && r->rank == 3 && r->d[1] >= 0) H = r->d[1] / p->gates;
    if (H < 0 && w->rank == 3 && w->d[1] >= 0) H = w->d[1] / p->gates;
    int64_t GH = -1, D = p->dirs;
    /* gates x hidden_size, and twice that for B, must not overflow */
    if (H >= 0 && (!core_mul_i64(H, p->gates, &GH) || GH > INT64_MAX / 2))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: hidden_size %lld is too large (gates x hidden_size overflows)",
                        ir_node_label(n), (long long)H);
    CORE_TRY(rnn_dim(n, "W", w, 0, D, "the number of directions"));
    CORE_TRY(rnn_dim(n, "W", w, 1, GH, "gates x hidden_size"));
    CORE_TRY(rnn_dim(n, "W", w, 2, input, "X's input size"));
    CORE_TRY(rnn_dim(n, "R", r, 0, D, "the number of directions"));
    CORE_TRY(rnn_dim(n, "R", r, 1, GH, "gates x hidden_size"));
    CORE_TRY(rnn_dim(n, "R", r, 2, H, "hidden_size"));
    if (n_in > 3 && op_has_input(n, 3)) {
        CORE_TRY(rnn_rank(n, "B", &in[3].shape, 2));
        CORE_TRY(rnn_dim(n, "B", &in[3].shape, 0, D, "the number of directions"));
        CORE_TRY(rnn_dim(n, "B", &in[3].shape, 1, GH < 0 ? -1 : 2 * GH, "2 x gates x hidden_size"));
    }
    if (n_in > 4 && op_has_input(n, 4)) {
        anvil_dtype sdt = in[4].dtype;
        if (sdt != ANVIL_DTYPE_INT32 && sdt != ANVIL_DTYPE_INT64)
            return core_err(ANVIL_ERR_UNSUPPORTED, "%s: sequence_lens has dtype %s; expected INT32",
                            ir_node_label(n), anvil_dtype_name(sdt));
        CORE_TRY(rnn_rank(n, "sequence_lens", &in[4].shape, 1));
        CORE_TRY(rnn_dim(n, "sequence_lens", &in[4].shape, 0, batch, "the batch size"));
    }
    for (int i = 5; i <= 6 && i < n_in; i++) {
        if (!op_has_input(n, i)) continue;
        CORE_TRY(rnn_rank(n, names[i], &in[i].shape, 3));
        CORE_TRY(rnn_dim(n, names[i], &in[i].shape, p->layout_batch_first ? 1 : 0, D,
                         "the number of directions"));
        CORE_TRY(rnn_dim(n, names[i], &in[i].shape, p->layout_batch_first ? 0 : 1, batch,
                         "the batch size"));
        CORE_TRY(rnn_dim(n, names[i], &in[i].shape, 2, H, "hidden_size"));
    }
    if (n_in > 7 && op_has_input(n, 7)) {
        CORE_TRY(rnn_rank(n, "P", &in[7].shape, 2));
        CORE_TRY(rnn_dim(n, "P", &in[7].shape, 0, D, "the number of directions"));
        CORE_TRY(rnn_dim(n, "P", &in[7].shape, 1, H < 0 ? -1 : 3 * H, "3 x hidden_size"));
    }
    int64_t y[4], yh[3];
    if (p->layout_batch_first) {
        int64_t a[4] = {batch, seq, D, H}, b[3] = {batch, D, H};
        memcpy(y, a, sizeof y);
        memcpy(yh, b, sizeof yh);
    } else {
        int64_t a[4] = {seq, D, batch, H}, b[3] = {D, batch, H};
        memcpy(y, a, sizeof y);
        memcpy(yh, b, sizeof yh);
    }
    for (int o = 0; o < n_out; o++) {
        out[o].dtype = dt;
        if (o == 0)
            rnn_set_dims(&out[o].shape, 4, y);
        else
            rnn_set_dims(&out[o].shape, 3, yh);
    }
    if (x->rank == 3) {
        int bd = p->layout_batch_first ? 0 : 1, sd = p->layout_batch_first ? 1 : 0;
        if (n_out > 0) {
            out[0].shape.sym[p->layout_batch_first ? 0 : 2] = x->sym[bd];
            out[0].shape.sym[p->layout_batch_first ? 1 : 0] = x->sym[sd];
        }
        for (int o = 1; o < n_out; o++)
            out[o].shape.sym[p->layout_batch_first ? 0 : 1] = x->sym[bd];
    }
    return ANVIL_OK;
}

/* ---- kernel ---------------------------------------------------------------------------------- */

static double rnn_apply(const rnn_act *a, double v) {
    switch (a->kind) {
    case ACT_RELU:
        return v > 0 ? v : 0;
    case ACT_TANH:
        return tanh(v);
    case ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-v));
    case ACT_AFFINE:
        return a->alpha * v + a->beta;
    case ACT_LEAKYRELU:
        return v >= 0 ? v : a->alpha * v;
    case ACT_THRESHOLDEDRELU:
        return v > a->alpha ? v : 0;
    case ACT_SCALEDTANH:
        return a->alpha * tanh(a->beta * v);
    case ACT_HARDSIGMOID: {
        double h = a->alpha * v + a->beta;
        return h < 0 ? 0 : h > 1 ? 1 : h;
    }
    case ACT_ELU:
        return v >= 0 ? v : a->alpha * (exp(v) - 1.0);
    case ACT_SOFTSIGN:
        return v / (1.0 + fabs(v));
    case ACT_SOFTPLUS:
        return log1p(exp(-fabs(v))) + (v > 0 ? v : 0);
    }
    return v;
}

typedef struct rnn_job {
    const rnn_params *p;
    int64_t S, Bt, I, H, D;
    const double *x, *w, *r, *b, *h0, *c0, *pp; /* b, h0, c0, pp may be NULL */
    const int64_t *lens;                        /* per batch entry */
    double *y, *yh, *yc;                        /* widened outputs, NULL when not wanted */
    double *scratch;                            /* per work unit: 6 * gates * H doubles */
} rnn_job;

static double rnn_clip(const rnn_params *p, double v) {
    if (!p->has_clip) return v;
    return v < -p->clip ? -p->clip : v > p->clip ? p->clip : v;
}

/* out[j] = sum_k m[j, k] * v[k] for j < rows (m rows x cols, row-major). */
static void rnn_gemv(const double *m, const double *v, int64_t rows, int64_t cols, double *out) {
    for (int64_t j = 0; j < rows; j++) {
        double s = 0;
        const double *row = m + j * cols;
        for (int64_t k = 0; k < cols; k++) s += row[k] * v[k];
        out[j] = s;
    }
}

/* One (direction, batch entry) recurrence. */
static void rnn_unit(const rnn_job *j, int64_t unit) {
    const rnn_params *p = j->p;
    int64_t d = unit / j->Bt, bi = unit % j->Bt, H = j->H, I = j->I, G = p->gates;
    int64_t GH = G * H;
    bool bf = p->layout_batch_first;
    bool rev = p->reverse || d == 1;
    const rnn_act *f = &p->act[d * p->nact], *gact = &p->act[d * p->nact + (p->nact > 1 ? 1 : 0)],
                  *hact = &p->act[d * p->nact + (p->nact > 2 ? 2 : 0)];
    const double *W = j->w + d * GH * I, *R = j->r + d * GH * H;
    const double *Wb = j->b ? j->b + d * 2 * GH : NULL, *Rb = Wb ? Wb + GH : NULL;
    const double *P = j->pp ? j->pp + d * 3 * H : NULL;
    double *sc = j->scratch + unit * 6 * GH;
    double *h = sc, *c = sc + H, *xw = sc + 2 * H, *hr = xw + GH, *tmp = hr + GH;
    int64_t st_off = bf ? (bi * j->D + d) * H : (d * j->Bt + bi) * H;
    for (int64_t k = 0; k < H; k++) {
        h[k] = j->h0 ? j->h0[st_off + k] : 0.0;
        c[k] = j->c0 ? j->c0[st_off + k] : 0.0;
    }
    int64_t len = j->lens[bi];
    for (int64_t s = 0; s < len; s++) {
        int64_t t = rev ? len - 1 - s : s;
        const double *xt = j->x + (bf ? (bi * j->S + t) : (t * j->Bt + bi)) * I;
        rnn_gemv(W, xt, GH, I, xw);
        rnn_gemv(R, h, GH, H, hr);
        if (Wb)
            for (int64_t k = 0; k < GH; k++) {
                xw[k] += Wb[k];
                hr[k] += Rb[k];
            }
        switch (p->kind) {
        case RNN_VANILLA:
            for (int64_t k = 0; k < H; k++) h[k] = rnn_apply(f, rnn_clip(p, xw[k] + hr[k]));
            break;
        case RNN_GRU: {
            /* gate order z, r, h */
            double *z = tmp, *rg = tmp + H, *hh = tmp + 2 * H;
            for (int64_t k = 0; k < H; k++) {
                z[k] = rnn_apply(f, rnn_clip(p, xw[k] + hr[k]));
                rg[k] = rnn_apply(f, rnn_clip(p, xw[H + k] + hr[H + k]));
            }
            if (p->linear_before_reset) {
                for (int64_t k = 0; k < H; k++)
                    hh[k] = rnn_apply(gact, rnn_clip(p, xw[2 * H + k] + rg[k] * hr[2 * H + k]));
            } else {
                /* (r * h) R_h + Rb_h: the recurrent product is redone on the reset state */
                double *rh = tmp + 3 * H, *prod = tmp + 4 * H;
                for (int64_t k = 0; k < H; k++) rh[k] = rg[k] * h[k];
                rnn_gemv(R + 2 * H * H, rh, H, H, prod);
                for (int64_t k = 0; k < H; k++)
                    hh[k] = rnn_apply(
                        gact, rnn_clip(p, xw[2 * H + k] + prod[k] + (Rb ? Rb[2 * H + k] : 0.0)));
            }
            for (int64_t k = 0; k < H; k++) h[k] = (1.0 - z[k]) * hh[k] + z[k] * h[k];
            break;
        }
        case RNN_LSTM:
            /* gate order i, o, f, c; peepholes i, o, f */
            for (int64_t k = 0; k < H; k++) {
                double cp = c[k];
                double ig = rnn_apply(f, rnn_clip(p, xw[k] + hr[k] + (P ? P[k] * cp : 0.0)));
                double fg = p->input_forget
                                ? 1.0 - ig
                                : rnn_apply(f, rnn_clip(p, xw[2 * H + k] + hr[2 * H + k] +
                                                               (P ? P[2 * H + k] * cp : 0.0)));
                double cc = rnn_apply(gact, rnn_clip(p, xw[3 * H + k] + hr[3 * H + k]));
                double cn = fg * cp + ig * cc;
                double og =
                    rnn_apply(f, rnn_clip(p, xw[H + k] + hr[H + k] + (P ? P[H + k] * cn : 0.0)));
                c[k] = cn;
                h[k] = og * rnn_apply(hact, cn);
            }
            break;
        }
        if (j->y) {
            double *yt =
                j->y + (bf ? ((bi * j->S + t) * j->D + d) : ((t * j->D + d) * j->Bt + bi)) * H;
            memcpy(yt, h, (size_t)H * sizeof *h);
        }
    }
    if (j->y)
        for (int64_t t = len; t < j->S; t++) {
            double *yt =
                j->y + (bf ? ((bi * j->S + t) * j->D + d) : ((t * j->D + d) * j->Bt + bi)) * H;
            memset(yt, 0, (size_t)H * sizeof *yt);
        }
    if (j->yh) memcpy(j->yh + st_off, h, (size_t)H * sizeof *h);
    if (j->yc) memcpy(j->yc + st_off, c, (size_t)H * sizeof *c);
}

static void rnn_range(void *arg, size_t begin, size_t end) {
    for (size_t u = begin; u < end; u++) rnn_unit(arg, (int64_t)u);
}

/* A tensor's elements as a malloc'd double array (NULL tensor: NULL, no error). */
static anvil_status rnn_widen(const ir_node *n, const op_tensor *t, double **out) {
    *out = NULL;
    if (!t) return ANVIL_OK;
    size_t num = op_tensor_numel(t);
    double *buf = malloc((num ? num : 1) * sizeof *buf);
    if (!buf)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory to widen %zu elements",
                        ir_node_label(n), num);
    for (size_t i = 0; i < num; i++) buf[i] = core_load_f64(t->dtype, t->data, i);
    *out = buf;
    return ANVIL_OK;
}

static anvil_status rnn_alloc_out(const ir_node *n, const op_tensor *t, double **out) {
    *out = NULL;
    if (!t) return ANVIL_OK;
    size_t num = op_tensor_numel(t);
    *out = calloc(num ? num : 1, sizeof **out);
    if (!*out)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu output elements",
                        ir_node_label(n), num);
    return ANVIL_OK;
}

static anvil_status rnn_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    const rnn_params *p = n->params;
    const op_tensor *x = in[0];
    const op_tensor *opt[8] = {NULL};
    for (int i = 0; i < n_in && i < 8; i++) opt[i] = in[i];
    op_tensor *outs[3] = {NULL};
    for (int i = 0; i < n_out && i < 3; i++) outs[i] = out[i];
    rnn_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.S = x->dims[p->layout_batch_first ? 1 : 0];
    j.Bt = x->dims[p->layout_batch_first ? 0 : 1];
    j.I = x->dims[2];
    j.H = in[2]->dims[2];
    j.D = p->dirs;
    size_t units = (size_t)(j.D * j.Bt);
    int64_t *lens = malloc(((size_t)j.Bt + 1) * sizeof *lens);
    if (!lens)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for sequence lengths",
                        ir_node_label(n));
    for (int64_t b = 0; b < j.Bt; b++) {
        lens[b] = opt[4] ? core_load_i64(opt[4]->dtype, opt[4]->data, (size_t)b) : j.S;
        if (lens[b] < 0 || lens[b] > j.S) {
            int64_t bad = lens[b];
            free(lens);
            return core_err(
                ANVIL_ERR_RUNTIME,
                "%s: sequence_lens[%lld] is %lld; it must be in 0..%lld (the sequence length of X)",
                ir_node_label(n), (long long)b, (long long)bad, (long long)j.S);
        }
    }
    j.lens = lens;
    double *bufs[11] = {NULL};
    anvil_status s = ANVIL_OK;
    const op_tensor *srcs[7] = {x, in[1], in[2], opt[3], opt[5], opt[6], opt[7]};
    for (int i = 0; i < 7 && s == ANVIL_OK; i++) s = rnn_widen(n, srcs[i], &bufs[i]);
    for (int i = 0; i < 3 && s == ANVIL_OK; i++) s = rnn_alloc_out(n, outs[i], &bufs[7 + i]);
    size_t sc_n = 0;
    if (s == ANVIL_OK &&
        !(core_mul_size(units, (size_t)(6 * p->gates * j.H), &sc_n) && sc_n < SIZE_MAX / 8))
        s = core_err(ANVIL_ERR_LIMIT, "%s: scratch size overflows", ir_node_label(n));
    if (s == ANVIL_OK) {
        bufs[10] = malloc((sc_n ? sc_n : 1) * sizeof(double));
        if (!bufs[10])
            s = core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for %zu scratch values",
                         ir_node_label(n), sc_n);
    }
    if (s == ANVIL_OK) {
        j.x = bufs[0];
        j.w = bufs[1];
        j.r = bufs[2];
        j.b = bufs[3];
        j.h0 = bufs[4];
        j.c0 = p->kind == RNN_LSTM ? bufs[5] : NULL;
        j.pp = p->kind == RNN_LSTM ? bufs[6] : NULL;
        j.y = bufs[7];
        j.yh = bufs[8];
        j.yc = p->kind == RNN_LSTM ? bufs[9] : NULL;
        j.scratch = bufs[10];
        op_parallel_for(ctx, units, rnn_range, &j);
        for (int i = 0; i < 3; i++) {
            if (!outs[i] || !bufs[7 + i]) continue;
            size_t num = op_tensor_numel(outs[i]);
            for (size_t e = 0; e < num; e++)
                core_store_f64(outs[i]->dtype, outs[i]->data, e, bufs[7 + i][e]);
        }
    }
    for (int i = 0; i < 11; i++) free(bufs[i]);
    free(lens);
    return s;
}

/* `const op_impl op_impl_<lname>` for RNN, GRU and LSTM, which rnn_check tells apart by the op;
 * LSTM has more inputs (initial cell, peepholes) and outputs (final cell). */
#define RNN_DEFINE(lname, max_in, max_out)                                                         \
    const op_impl op_impl_##lname = {.min_inputs = 3,                                              \
                                     .max_inputs = max_in,                                         \
                                     .min_outputs = 0,                                             \
                                     .max_outputs = max_out,                                       \
                                     .check = rnn_check,                                           \
                                     .infer = rnn_infer,                                           \
                                     .run = rnn_run};

RNN_DEFINE(rnn, 6, 2)
RNN_DEFINE(gru, 6, 2)
RNN_DEFINE(lstm, 8, 3)
