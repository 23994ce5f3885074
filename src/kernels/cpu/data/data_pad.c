/* Pad (constant, reflect, edge, wrap; any rank and dtype) with the pads known at plan time.
 *
 * prepare resolves the pads with the reference's own helpers (ops/pad_common.h: negative pads
 * crop first, the positive ones then extend the kept window) into one table per axis: output index
 * -> input index, or -1 for the constant. A run fills rows (all dims but the last): a row whose
 * leading indices fall in a constant pad is a copy of a prepared row of the constant; any other row
 * is its mapped ends element by element around one memcpy of the kept run. Rows are walked with an
 * odometer rather than dividing the row number per row, and split across threads in contiguous
 * ranges. Pads only known at run time stay with the reference. The rows are filled by
 * data_pad_run_rows (data_move.c, IR-free), which the run and the code `anvil compile` emits both
 * call.
 */
#include "data.h"
#include "ops/pad_common.h"

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
    if (kn->node->opset >= 11 && kern_has_input(kn, 2) && kn->in[2].dtype != x->dtype) return false;
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
        s->fill_from_input = kern_has_input(kn, 2);
    }
    *state = s;
    return ANVIL_OK;
}

/* One row of the constant, then the rows. */
static size_t dp_workspace(const kern_node *kn) {
    const op_tinfo *y = &kn->out[0];
    return (size_t)y->shape.d[y->shape.rank - 1] * anvil_dtype_size(y->dtype);
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
    const void *fill = n_in > 2 && in[2] ? in[2]->data : NULL;
    data_pad_run_rows(s, x->data, y->data, fill, fill ? op_tensor_numel(in[2]) : 0, ws, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * One data_pad_run_rows call on this prepare's state: the index tables in the weights, the rest as
 * constants; the constant input (opset >= 11) is read when the library runs. */
static anvil_status dp_emit(const kern_node *kn, const void *state, kern_emit *e) {
    const dp_state *s = state;
    CORE_TRY(data_emit_need(e));
    size_t len = 0;
    for (int d = 0; d < s->rank; d++) len += (size_t)s->out_dims[d];
    char tab[96];
    CORE_TRY(e->blob(e, s->block, (len + 1) * sizeof(int64_t), tab, sizeof tab));
    e->code(e, "dp_state ps = {0};\nps.rank = %d;\nps.es = %zu;\n", s->rank, s->es);
    for (int d = 0; d < s->rank; d++)
        e->code(e,
                "ps.in_dims[%d] = %lld;\nps.out_dims[%d] = %lld;\nps.istr[%d] = %lld;\n"
                "ps.map[%d] = (int64_t *)(%s) + %td;\n",
                d, (long long)s->in_dims[d], d, (long long)s->out_dims[d], d, (long long)s->istr[d],
                d, tab, s->map[d] - s->block);
    e->code(e, "ps.lead = %lld;\nps.kept = %lld;\nps.crop = %lld;\nps.fill_from_input = %d;\n",
            (long long)s->lead, (long long)s->kept, (long long)s->crop, (int)s->fill_from_input);
    for (size_t i = 0; i < sizeof s->attr_fill; i++)
        if (s->attr_fill[i]) e->code(e, "ps.attr_fill[%zu] = %u;\n", i, s->attr_fill[i]);
    const bool fill = s->fill_from_input && kern_has_input(kn, 2);
    e->code(
        e, "data_pad_run_rows(&ps, (const char *)(%s), (char *)(%s), %s, %zu, (char *)(%s), %s);\n",
        e->in(e, 0), e->out(e, 0), fill ? e->in(e, 2) : "NULL",
        fill ? op_tensor_numel(&e->in_t[2]) : 0, e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter dp_emitter = {dp_emit, NULL};

const kern_variant data_pad_rows = {.name = "pad_rows",
                                    .op = IR_OP_PAD,
                                    .supports = dp_supports,
                                    .workspace_size = dp_workspace,
                                    .prepare = dp_prepare,
                                    .release = dp_release,
                                    .run = dp_run,
                                    .emit = &dp_emitter};
