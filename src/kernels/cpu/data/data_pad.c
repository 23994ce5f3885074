/* Pad (constant, reflect, edge, wrap; any rank and dtype) with the pads known at plan time.
 *
 * prepare resolves the pads with the reference's own helpers (ops/pad_common.h: negative pads
 * crop first, the positive ones then extend the kept window) into one table per axis: output index
 * -> input index, or -1 for the constant. A run fills rows (all dims but the last): a row whose
 * leading indices fall in a constant pad is a copy of a prepared row of the constant; any other row
 * is its mapped ends element by element around one memcpy of the kept run. Rows are walked with an
 * odometer rather than dividing the row number per row, and split across threads in contiguous
 * ranges. Pads only known at run time stay with the reference. */
#include "data.h"
#include "ops/pad_common.h"

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

/* Per-axis begin / end pads through the reference's pad_resolve; false where they are unknown at
 * plan time or invalid. */
static bool dp_pads(const kern_node *kn, int rank, int64_t *b, int64_t *e) {
    bool known;
    return kn->node->params &&
           pad_resolve(kn->node, kn->in, kn->n_in, rank, b, e, &known) == ANVIL_OK && known;
}

static bool dp_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    if (kn->n_out < 1 || !data_static(&kn->in[0]) || !data_static(&kn->out[0])) return false;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    int rank = x->shape.rank;
    if (rank < 1 || y->shape.rank != rank || y->dtype != x->dtype) return false;
    if (anvil_dtype_size(x->dtype) > 16) return false;
    if (kn->node->opset >= 11 && data_has_input(kn, 2) && kn->in[2].dtype != x->dtype) return false;
    int64_t b[IR_MAX_RANK], e[IR_MAX_RANK];
    if (!dp_pads(kn, rank, b, e)) return false;
    const pad_params *p = kn->node->params;
    for (int d = 0; d < rank; d++) {
        int64_t od = 0;
        if (pad_axis_size(kn->node, p->mode, d, x->shape.d[d], b[d], e[d], &od) != ANVIL_OK ||
            od != y->shape.d[d])
            return false;
    }
    return true;
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
    if (!dp_pads(kn, rank, b, e))
        return core_err(ANVIL_ERR_INTERNAL, "%s: pads unavailable in prepare", ir_node_label(n));
    const pad_params *p = n->params;
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
        pad_window w = pad_window_of(x->shape.d[d], b[d], e[d]);
        s->map[d] = m;
        for (int64_t o = 0; o < y->shape.d[d]; o++)
            m[o] = pad_source(p->mode, o, w.lead, w.crop, w.kept);
        m += y->shape.d[d];
        if (d == rank - 1) {
            s->lead = w.lead;
            s->kept = w.kept;
            s->crop = w.crop;
        }
    }
    if (n->opset < 11) {
        core_store_f64(x->dtype, s->attr_fill, 0, p->value);
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
