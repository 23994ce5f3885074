/* Pad (constant, reflect, edge, wrap; any rank and dtype) with the pads known at plan time.
 *
 * prepare resolves the pads exactly as the reference does (negative pads crop first, the
 * positive ones then extend the kept window) into one table per axis: output index -> input
 * index, or -1 for the constant. A run fills rows (all dims but the last): a row whose leading
 * indices fall in a constant pad is a copy of a prepared row of the constant; any other row is
 * its mapped ends element by element around one memcpy of the kept run. Rows are walked with an
 * odometer rather than dividing the row number per row, and split across threads in contiguous
 * ranges. Pads only known at run time stay with the reference. */
#include "data.h"

typedef enum { DP_CONSTANT, DP_REFLECT, DP_EDGE, DP_WRAP } dp_mode;

typedef struct dp_state {
    int rank;
    size_t es;
    int64_t in_dims[IR_MAX_RANK], out_dims[IR_MAX_RANK], istr[IR_MAX_RANK];
    int64_t *map[IR_MAX_RANK]; /* per axis: output index -> input index or -1 */
    int64_t lead, kept, crop;  /* the last axis's copied run */
    unsigned char attr_fill[16];
    bool fill_from_input; /* input 2 holds the constant (opset >= 11) */
    int64_t *block;
} dp_state;

static bool dp_mode_of(const ir_node *n, dp_mode *m) {
    const char *s;
    if (ir_attr_string(n, "mode", "constant", &s) != ANVIL_OK) return false;
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *m = (dp_mode)i;
            return i != DP_WRAP || n->opset >= 19;
        }
    return false;
}

/* Per-axis begin / end pads (the reference's pad_expand); false where they are unknown at plan
 * time or invalid. */
static bool dp_pads(const kern_node *kn, int rank, int64_t *b, int64_t *e) {
    const ir_node *n = kn->node;
    int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
    size_t n_pads = 0, n_axes = 0;
    bool has_axes = n->opset >= 18 && data_has_input(kn, 3);
    if (n->opset < 11) {
        const int64_t *p;
        if (ir_attr_ints(n, n->opset < 2 ? "paddings" : "pads", &p, &n_pads) != ANVIL_OK ||
            n_pads > 2 * IR_MAX_RANK || !p)
            return false;
        memcpy(pads, p, n_pads * sizeof *pads);
    } else {
        if (!data_has_input(kn, 1) || !kn->in[1].value ||
            op_value_ints(n, 1, &kn->in[1], pads, 2 * IR_MAX_RANK, &n_pads) != ANVIL_OK)
            return false;
    }
    if (has_axes && (!kn->in[3].value ||
                     op_value_ints(n, 3, &kn->in[3], axes, IR_MAX_RANK, &n_axes) != ANVIL_OK))
        return false;
    size_t naxes = has_axes ? n_axes : (size_t)rank;
    if (n_pads != 2 * naxes) return false;
    for (int d = 0; d < rank; d++) b[d] = e[d] = 0;
    bool seen[IR_MAX_RANK] = {false};
    for (size_t i = 0; i < naxes; i++) {
        int64_t ax = (int64_t)i;
        if (has_axes) {
            ax = axes[i] < 0 ? axes[i] + rank : axes[i];
            if (ax < 0 || ax >= rank || seen[ax]) return false;
            seen[ax] = true;
        }
        const int64_t lim = (int64_t)1 << 40;
        if (pads[i] < -lim || pads[i] > lim || pads[naxes + i] < -lim || pads[naxes + i] > lim)
            return false;
        b[ax] = pads[i];
        e[ax] = pads[naxes + i];
    }
    return true;
}

static bool dp_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    if (kn->n_out < 1 || !data_static(&kn->in[0]) || !data_static(&kn->out[0])) return false;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    int rank = x->shape.rank;
    dp_mode m;
    if (rank < 1 || y->shape.rank != rank || y->dtype != x->dtype || !dp_mode_of(kn->node, &m))
        return false;
    if (anvil_dtype_size(x->dtype) > 16) return false;
    if (kn->node->opset >= 11 && data_has_input(kn, 2) && kn->in[2].dtype != x->dtype) return false;
    int64_t b[IR_MAX_RANK], e[IR_MAX_RANK];
    if (!dp_pads(kn, rank, b, e)) return false;
    for (int d = 0; d < rank; d++) {
        int64_t in = x->shape.d[d];
        int64_t kept = in - (b[d] < 0 ? -b[d] : 0) - (e[d] < 0 ? -e[d] : 0);
        if (kept < 0 || (kept == 0 && m != DP_CONSTANT && (b[d] > 0 || e[d] > 0))) return false;
        if (in + b[d] + e[d] != y->shape.d[d]) return false;
    }
    return true;
}

/* Source index along an axis for output index o, or -1 (the reference's pad_source). */
static int64_t dp_source(dp_mode mode, int64_t o, int64_t lead, int64_t crop, int64_t kept) {
    int64_t j = o - lead;
    if (j < 0 || j >= kept) {
        switch (mode) {
        case DP_CONSTANT:
            return -1;
        case DP_EDGE:
            j = j < 0 ? 0 : kept - 1;
            break;
        case DP_WRAP:
            j = ((j % kept) + kept) % kept;
            break;
        case DP_REFLECT:
            if (kept == 1) {
                j = 0;
            } else {
                int64_t period = 2 * (kept - 1);
                j = ((j % period) + period) % period;
                if (j >= kept) j = period - j;
            }
            break;
        }
    }
    return crop + j;
}

static void dp_release(void *state) {
    dp_state *s = state;
    if (!s) return;
    free(s->block);
    free(s);
}

static anvil_status dp_prepare(const kern_node *kn, void **state) {
    const ir_node *n = kn->node;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    int rank = x->shape.rank;
    int64_t b[IR_MAX_RANK], e[IR_MAX_RANK];
    dp_mode mode;
    if (!dp_mode_of(n, &mode) || !dp_pads(kn, rank, b, e))
        return core_err(ANVIL_ERR_INTERNAL, "%s: pads unavailable in prepare", ir_node_label(n));
    dp_state *s = calloc(1, sizeof *s);
    size_t len = 0;
    for (int d = 0; d < rank; d++) len += (size_t)y->shape.d[d];
    if (s) s->block = malloc((len + 1) * sizeof(int64_t));
    if (!s || !s->block) {
        dp_release(s);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    s->rank = rank;
    s->es = anvil_dtype_size(x->dtype);
    int64_t stride = 1, *m = s->block;
    for (int d = rank - 1; d >= 0; d--) {
        s->istr[d] = stride;
        stride *= x->shape.d[d];
    }
    for (int d = 0; d < rank; d++) {
        s->in_dims[d] = x->shape.d[d];
        s->out_dims[d] = y->shape.d[d];
        int64_t crop = b[d] < 0 ? -b[d] : 0, lead = b[d] > 0 ? b[d] : 0;
        int64_t kept = x->shape.d[d] - crop - (e[d] < 0 ? -e[d] : 0);
        s->map[d] = m;
        for (int64_t o = 0; o < y->shape.d[d]; o++) m[o] = dp_source(mode, o, lead, crop, kept);
        m += y->shape.d[d];
        if (d == rank - 1) {
            s->lead = lead;
            s->kept = kept;
            s->crop = crop;
        }
    }
    if (n->opset < 11) {
        float v = 0;
        if (ir_attr_float(n, "value", 0.0f, &v) != ANVIL_OK) {
            dp_release(s);
            return core_err(ANVIL_ERR_INTERNAL, "%s: bad value attribute", ir_node_label(n));
        }
        core_store_f64(x->dtype, s->attr_fill, 0, v);
    } else {
        s->fill_from_input = data_has_input(kn, 2);
    }
    *state = s;
    return ANVIL_OK;
}

/* One row of the constant, then the rows. */
static size_t dp_workspace(const kern_node *kn) {
    const op_tinfo *y = &kn->out[0];
    return (size_t)y->shape.d[y->shape.rank - 1] * anvil_dtype_size(y->dtype);
}

typedef struct dp_job {
    const dp_state *s;
    const char *x;
    char *y;
    const char *fill_row; /* ow elements of the constant */
} dp_job;

static void dp_rows(void *arg, size_t begin, size_t end) {
    const dp_job *j = arg;
    const dp_state *s = j->s;
    const int last = s->rank - 1;
    const size_t es = s->es, ow = (size_t)s->out_dims[last], row_bytes = ow * es;
    const int64_t *mw = s->map[last];
    /* the leading output indices of row `begin` */
    int64_t idx[IR_MAX_RANK];
    size_t rest = begin;
    for (int d = last - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rest % (size_t)s->out_dims[d]);
        rest /= (size_t)s->out_dims[d];
    }
    for (size_t r = begin; r < end; r++) {
        char *y = j->y + r * row_bytes;
        int64_t src = 0;
        bool constant_row = false;
        for (int d = 0; d < last; d++) {
            int64_t si = s->map[d][idx[d]];
            if (si < 0) constant_row = true;
            src += si * s->istr[d];
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < s->out_dims[d]) break;
            idx[d] = 0;
        }
        if (constant_row) {
            memcpy(y, j->fill_row, row_bytes);
            continue;
        }
        const char *xrow = j->x + (size_t)src * es;
        size_t lead = (size_t)s->lead, kept = (size_t)s->kept;
        for (size_t o = 0; o < ow; o++) {
            if (o == lead && kept > 0) {
                memcpy(y + o * es, xrow + (size_t)s->crop * es, kept * es);
                o += kept - 1;
                continue;
            }
            int64_t si = mw[o];
            op_elem_copy(y + o * es, si < 0 ? j->fill_row : xrow + (size_t)si * es, es);
        }
    }
}

static anvil_status dp_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_out;
    const dp_state *s = state;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    bool ok = x->rank == s->rank && y->rank == s->rank;
    for (int d = 0; ok && d < s->rank; d++)
        ok = x->dims[d] == s->in_dims[d] && y->dims[d] == s->out_dims[d];
    if (!ok)
        return core_err(ANVIL_ERR_RUNTIME,
                        "%s: the tensors' shapes differ from those the pad was prepared for",
                        ir_node_label(n));
    size_t total = op_tensor_numel(y);
    if (total == 0) return ANVIL_OK;
    const size_t es = s->es, ow = (size_t)s->out_dims[s->rank - 1];
    unsigned char fill[16];
    memcpy(fill, s->attr_fill, sizeof fill);
    if (s->fill_from_input) {
        memset(fill, 0, sizeof fill);
        if (n_in > 2 && in[2] && op_tensor_numel(in[2]) >= 1) memcpy(fill, in[2]->data, es);
    }
    char *fill_row = ws;
    bool zero = true;
    for (size_t i = 0; i < es; i++) zero = zero && fill[i] == 0;
    if (zero) {
        memset(fill_row, 0, ow * es);
    } else {
        memcpy(fill_row, fill, es);
        /* doubling copies: log2(ow) memcpy calls */
        for (size_t have = 1; have < ow; have *= 2)
            memcpy(fill_row + have * es, fill_row, (have * 2 <= ow ? have : ow - have) * es);
    }
    dp_job j = {.s = s, .x = x->data, .y = y->data, .fill_row = fill_row};
    op_parallel_for(data_par(ctx, total * es), total / ow, dp_rows, &j);
    return ANVIL_OK;
}

const kern_variant data_pad_rows = {.name = "pad_rows",
                                    .op = IR_OP_PAD,
                                    .supports = dp_supports,
                                    .workspace_size = dp_workspace,
                                    .prepare = dp_prepare,
                                    .release = dp_release,
                                    .run = dp_run};
