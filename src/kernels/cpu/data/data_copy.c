/* Concat, Split, Slice, Gather, Expand and Tile for any dtype (elements of anvil_dtype_size
 * bytes are copied, never interpreted).
 *
 * Two engines serve them:
 *  - segments (Concat, Split): the dense side is a sequence of rows, each the concatenation of
 *    one segment per input (output). Work is split over fixed-size byte blocks of the dense
 *    side, so one large segment (a Concat on the outermost axis) spreads over every thread as
 *    well as many small ones do.
 *  - strided views (Slice, Expand, Tile): the output is dense and reads its source through
 *    per-dim element strides (0 for a broadcast or repeated dim). prepare coalesces the view:
 *    dims of size 1 vanish and a dim merges with its inner neighbour when their strides are
 *    contiguous, so a channel slice of NCHW becomes one long memcpy and a Tile a short list of
 *    row copies. Rows are walked with an odometer, and long rows are cut into pieces so that
 *    even a single row spreads over the threads.
 * Gather copies one slice per (outer index, index), after checking every index as the
 * reference does (same error, same message), so a bad index leaves the output untouched.
 * Small problems run on the calling thread.
 *
 * This file plans; the engines themselves are in data_move.c (IR-free), which the variants' run
 * and the code `anvil compile` emits for them (the emitters below) both call. */
#include "data.h"
#include "ops/tensor_common.h"

_Static_assert(DM_MAX_RANK == IR_MAX_RANK, "data_move.h's rank bound must be anvil's");

static size_t dc_ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

/* Normalises axis (attribute `name`, default dflt) of n against rank; false when out of range. */
static bool dc_axis(const ir_node *n, const char *name, int64_t dflt, int rank, int *axis) {
    int64_t a;
    if (ir_attr_int(n, name, dflt, &a) != ANVIL_OK) return false;
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return false;
    *axis = (int)a;
    return true;
}

/* ---- segments: Concat and Split ---------------------------------------------------------- */

static void dc_seg_release(void *state) {
    dc_seg_state *s = state;
    if (!s) return;
    free(s->seg_bytes);
    free(s);
}

/* dense: the concatenated tensor (Concat's output, Split's input); parts: the others. */
static anvil_status dc_seg_prepare(const op_tinfo *dense, const op_tinfo *parts, int n_parts,
                                   int axis, void **state) {
    dc_seg_state *s = calloc(1, sizeof *s);
    if (s) s->seg_bytes = malloc(2 * (size_t)n_parts * sizeof(size_t));
    if (!s || !s->seg_bytes) {
        dc_seg_release(s);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    s->seg_start = s->seg_bytes + n_parts;
    s->axis = axis;
    s->parts = n_parts;
    s->es = anvil_dtype_size(dense->dtype);
    const ir_shape *d = &dense->shape;
    s->outer = data_prod(d->d, 0, axis);
    size_t inner = data_prod(d->d, axis + 1, d->rank) * s->es, at = 0;
    for (int i = 0; i < n_parts; i++) {
        s->seg_start[i] = at;
        s->seg_bytes[i] = (size_t)parts[i].shape.d[axis] * inner;
        at += s->seg_bytes[i];
    }
    s->row_bytes = at;
    *state = s;
    return ANVIL_OK;
}

static bool dc_concat_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const op_tinfo *y = &kn->out[0];
    if (kn->n_out < 1 || !data_static(y) || y->shape.rank < 1 || kn->n_in > 256) return false;
    int axis, r = y->shape.rank;
    if (!dc_axis(kn->node, "axis", 1, r, &axis)) return false;
    int64_t sum = 0;
    for (int i = 0; i < kn->n_in; i++) {
        const op_tinfo *x = &kn->in[i];
        if (!kern_has_input(kn, i) || !data_static(x) || x->dtype != y->dtype || x->shape.rank != r)
            return false;
        for (int d = 0; d < r; d++)
            if (d != axis && x->shape.d[d] != y->shape.d[d]) return false;
        sum += x->shape.d[axis];
    }
    return sum == y->shape.d[axis];
}

static anvil_status dc_concat_prepare(const kern_node *kn, void **state) {
    int axis = 0;
    if (!dc_axis(kn->node, "axis", 1, kn->out[0].shape.rank, &axis)) return ANVIL_ERR_INTERNAL;
    return dc_seg_prepare(&kn->out[0], kn->in, kn->n_in, axis, state);
}

static anvil_status dc_concat_run(const ir_node *n, void *state, const op_tensor *const *in,
                                  int n_in, op_tensor *const *out, int n_out, void *ws,
                                  op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)ws;
    char *parts[256];
    for (int i = 0; i < n_in; i++) parts[i] = in[i]->data;
    data_seg_run(state, out[0]->data, parts, false, ctx);
    return ANVIL_OK;
}

static bool dc_split_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const op_tinfo *x = &kn->in[0];
    if (!data_static(x) || x->shape.rank < 1 || kn->n_out > 256) return false;
    int axis, r = x->shape.rank;
    if (!dc_axis(kn->node, "axis", 0, r, &axis)) return false;
    int64_t sum = 0;
    for (int i = 0; i < kn->n_out; i++) {
        const op_tinfo *y = &kn->out[i];
        if (!data_static(y) || y->dtype != x->dtype || y->shape.rank != r) return false;
        for (int d = 0; d < r; d++)
            if (d != axis && x->shape.d[d] != y->shape.d[d]) return false;
        sum += y->shape.d[axis];
    }
    return sum == x->shape.d[axis];
}

static anvil_status dc_split_prepare(const kern_node *kn, void **state) {
    int axis = 0;
    if (!dc_axis(kn->node, "axis", 0, kn->in[0].shape.rank, &axis)) return ANVIL_ERR_INTERNAL;
    return dc_seg_prepare(&kn->in[0], kn->out, kn->n_out, axis, state);
}

static anvil_status dc_split_run(const ir_node *n, void *state, const op_tensor *const *in,
                                 int n_in, op_tensor *const *out, int n_out, void *ws,
                                 op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)ws;
    char *parts[256];
    for (int i = 0; i < n_out; i++) parts[i] = out[i] ? out[i]->data : NULL;
    data_seg_run(state, in[0]->data, parts, true, ctx);
    return ANVIL_OK;
}

/* ---- strided views: Slice, Expand, Tile -------------------------------------------------- */

/* Drops dims of size 1, merges contiguous neighbours and decides the pieces. */
static void dc_view_coalesce(dc_view *v) {
    int r = 0;
    v->numel = 1;
    for (int d = 0; d < v->rank; d++) {
        v->numel *= (size_t)v->dims[d];
        if (v->dims[d] == 1) continue;
        if (r > 0 && v->stride[r - 1] == v->dims[d] * v->stride[d]) {
            v->dims[r - 1] *= v->dims[d];
            v->stride[r - 1] = v->stride[d];
            continue;
        }
        v->dims[r] = v->dims[d];
        v->stride[r] = v->stride[d];
        r++;
    }
    if (r == 0) {
        v->dims[0] = 1;
        v->stride[0] = 1;
        r = 1;
    }
    v->rank = r;
    size_t inner = (size_t)v->dims[r - 1];
    v->rows = inner ? v->numel / inner : 0;
    /* rows shorter than a block stay whole; longer ones are cut into block-sized pieces */
    size_t per = DC_BLOCK / v->es ? DC_BLOCK / v->es : 1;
    v->pieces = inner > per ? dc_ceil_div(inner, per) : 1;
    v->piece = dc_ceil_div(inner ? inner : 1, v->pieces);
}

static void dc_view_release(void *state) {
    free(state);
}

static anvil_status dc_view_node_run(const ir_node *n, void *state, const op_tensor *const *in,
                                     int n_in, op_tensor *const *out, int n_out, void *ws,
                                     op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    (void)ws;
    data_view_run(state, in[0]->data, out[0]->data, ctx);
    return ANVIL_OK;
}

/* Allocates a view for kn's input 0 with output dims, its coalesced form of (dims, stride). */
static anvil_status dc_view_make(const kern_node *kn, int rank, const int64_t *dims,
                                 const int64_t *stride, int64_t offset, void **state) {
    dc_view *v = calloc(1, sizeof *v);
    if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
    v->rank = rank;
    v->es = anvil_dtype_size(kn->in[0].dtype);
    v->offset = offset;
    for (int d = 0; d < rank; d++) {
        v->dims[d] = dims[d];
        v->stride[d] = stride[d];
    }
    dc_view_coalesce(v);
    *state = v;
    return ANVIL_OK;
}

/* Slice: per input dim the first index, step and count, through the reference's slice_resolve;
 * false where a list is unknown or invalid. */
static bool dc_slice_plan(const kern_node *kn, int64_t *start, int64_t *step, int64_t *count) {
    const ir_node *n = kn->node;
    const ir_shape *x = &kn->in[0].shape;
    slice_lists l;
    memset(&l, 0, sizeof l);
    if (!n->params) return false;
    if (n->opset < 10) {
        slice_lists_from_attrs(n->params, &l);
    } else {
        for (int i = 1; i <= 4; i++)
            if (kern_has_input(kn, i) && !kn->in[i].value) return false;
        if (!kern_has_input(kn, 1) || !kern_has_input(kn, 2) ||
            slice_lists_from_values(n, kn->in, &l) != ANVIL_OK)
            return false;
    }
    slice_plan pl;
    if (slice_resolve(n, x->d, x->rank, &l, &pl) != ANVIL_OK) return false;
    for (int d = 0; d < x->rank; d++) {
        start[d] = pl.start[d];
        step[d] = pl.step[d];
        count[d] = pl.count[d];
    }
    return true;
}

static bool dc_slice_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    if (kn->n_out < 1 || !data_static(x) || !data_static(y) || y->dtype != x->dtype ||
        y->shape.rank != x->shape.rank)
        return false;
    int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], count[IR_MAX_RANK];
    if (!dc_slice_plan(kn, start, step, count)) return false;
    for (int d = 0; d < x->shape.rank; d++)
        if (count[d] != y->shape.d[d]) return false;
    return true;
}

static anvil_status dc_slice_prepare(const kern_node *kn, void **state) {
    const ir_shape *x = &kn->in[0].shape;
    int64_t start[IR_MAX_RANK], step[IR_MAX_RANK], count[IR_MAX_RANK], xs[IR_MAX_RANK];
    int64_t stride[IR_MAX_RANK], offset = 0;
    dc_slice_plan(kn, start, step, count);
    tensor_strides(x->d, x->rank, xs);
    for (int d = 0; d < x->rank; d++) {
        /* a dim read once never advances, so step * stride (which may overflow) is not needed */
        stride[d] = count[d] > 1 ? step[d] * xs[d] : 0;
        offset += start[d] * xs[d];
    }
    return dc_view_make(kn, x->rank, count, stride, offset, state);
}

static bool dc_expand_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    if (kn->n_out < 1 || !data_static(x) || !data_static(y) || y->dtype != x->dtype ||
        y->shape.rank < x->shape.rank)
        return false;
    int lead = y->shape.rank - x->shape.rank;
    for (int d = 0; d < x->shape.rank; d++)
        if (x->shape.d[d] != 1 && x->shape.d[d] != y->shape.d[lead + d]) return false;
    return true;
}

static anvil_status dc_expand_prepare(const kern_node *kn, void **state) {
    const ir_shape *x = &kn->in[0].shape, *y = &kn->out[0].shape;
    int64_t xs[IR_MAX_RANK], stride[IR_MAX_RANK];
    tensor_strides(x->d, x->rank, xs);
    int lead = y->rank - x->rank;
    for (int d = 0; d < y->rank; d++) {
        int j = d - lead;
        stride[d] = j < 0 || x->d[j] == 1 ? 0 : xs[j];
    }
    return dc_view_make(kn, y->rank, y->d, stride, 0, state);
}

static bool dc_tile_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    if (kn->n_out < 1 || !data_static(x) || !data_static(y) || y->dtype != x->dtype ||
        y->shape.rank != x->shape.rank)
        return false;
    for (int d = 0; d < x->shape.rank; d++) {
        int64_t xd = x->shape.d[d], yd = y->shape.d[d];
        if (xd == 0 ? yd != 0 : yd % xd != 0) return false;
    }
    return true;
}

/* Each output dim d is (repeat, x dim) with strides (0, x's stride). */
static anvil_status dc_tile_prepare(const kern_node *kn, void **state) {
    const ir_shape *x = &kn->in[0].shape, *y = &kn->out[0].shape;
    int64_t xs[IR_MAX_RANK], dims[DC_MAX], stride[DC_MAX];
    tensor_strides(x->d, x->rank, xs);
    for (int d = 0; d < x->rank; d++) {
        dims[2 * d] = x->d[d] ? y->d[d] / x->d[d] : 0;
        stride[2 * d] = 0;
        dims[2 * d + 1] = x->d[d];
        stride[2 * d + 1] = xs[d];
    }
    return dc_view_make(kn, 2 * x->rank, dims, stride, 0, state);
}

/* ---- Gather ------------------------------------------------------------------------------ */

static bool dc_gather_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const op_tinfo *x = &kn->in[0], *ix = &kn->in[1], *y = &kn->out[0];
    if (kn->n_in < 2 || kn->n_out < 1 || !data_static(x) || !ir_shape_is_static(&ix->shape) ||
        !data_static(y) || y->dtype != x->dtype || x->shape.rank < 1 ||
        (ix->dtype != ANVIL_DTYPE_INT32 && ix->dtype != ANVIL_DTYPE_INT64))
        return false;
    int axis;
    return dc_axis(kn->node, "axis", 0, x->shape.rank, &axis) &&
           y->shape.rank == x->shape.rank + ix->shape.rank - 1;
}

static anvil_status dc_gather_prepare(const kern_node *kn, void **state) {
    dc_gather_state *s = calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    const ir_shape *x = &kn->in[0].shape, *ix = &kn->in[1].shape;
    dc_axis(kn->node, "axis", 0, x->rank, &s->axis);
    s->es = anvil_dtype_size(kn->in[0].dtype);
    s->outer = data_prod(x->d, 0, s->axis);
    s->q = data_prod(ix->d, 0, ix->rank);
    s->axis_dim = x->d[s->axis];
    s->inner_bytes = data_prod(x->d, s->axis + 1, x->rank) * s->es;
    s->idx32 = kn->in[1].dtype == ANVIL_DTYPE_INT32;
    *state = s;
    return ANVIL_OK;
}

static anvil_status dc_gather_node_run(const ir_node *n, void *state, const op_tensor *const *in,
                                       int n_in, op_tensor *const *out, int n_out, void *ws,
                                       op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ws;
    const dc_gather_state *s = state;
    const op_tensor *ix = in[1];
    /* every index is checked before any byte moves, as the reference does */
    size_t t;
    if (!data_gather_check(s, ix->data, &t))
        return tensor_gather_index_error(n, ix, t, data_load_index(ix->dtype, ix->data, t), s->axis,
                                         s->axis_dim);
    data_gather_run(s, in[0]->data, ix->data, out[0]->data, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * Each node becomes one call into data_move.c on the state this prepare made, baked in as
 * constants, so the library moves exactly the bytes the variant moves. Any dtype: the engines
 * copy bytes. */

static anvil_status dc_seg_emit(const kern_node *kn, const void *state, kern_emit *e) {
    const dc_seg_state *s = state;
    const bool split = kn->node->op == IR_OP_SPLIT;
    CORE_TRY(data_emit_need(e));
    int64_t t[512];
    for (int i = 0; i < s->parts; i++) {
        t[i] = (int64_t)s->seg_bytes[i];
        t[s->parts + i] = (int64_t)s->seg_start[i];
    }
    data_emit_table(e, "size_t", "segt", t, 2 * (size_t)s->parts);
    e->code(e, "const dc_seg_state ss = {%d, %d, %zu, %zu, %zu, segt, segt + %d};\n", s->axis,
            s->parts, s->es, s->outer, s->row_bytes, s->parts);
    e->code(e, "char *const parts[%d] = {", s->parts);
    for (int i = 0; i < s->parts; i++)
        e->code(e, "%s(char *)(%s)", i ? ", " : "", split ? e->out(e, i) : e->in(e, i));
    e->code(e, "};\n");
    e->code(e, "data_seg_run(&ss, (char *)(%s), parts, %d, %s);\n",
            split ? e->in(e, 0) : e->out(e, 0), (int)split, e->ctx);
    return ANVIL_OK;
}

static anvil_status dc_view_emit(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    const dc_view *v = state;
    CORE_TRY(data_emit_need(e));
    e->code(e, "dc_view dv = {0};\n");
    e->code(e, "dv.rank = %d;\ndv.es = %zu;\ndv.offset = %lld;\n", v->rank, v->es,
            (long long)v->offset);
    for (int d = 0; d < v->rank; d++)
        e->code(e, "dv.dims[%d] = %lld;\ndv.stride[%d] = %lld;\n", d, (long long)v->dims[d], d,
                (long long)v->stride[d]);
    e->code(e, "dv.numel = %zu;\ndv.rows = %zu;\ndv.pieces = %zu;\ndv.piece = %zu;\n", v->numel,
            v->rows, v->pieces, v->piece);
    e->code(e, "data_view_run(&dv, (const char *)(%s), (char *)(%s), %s);\n", e->in(e, 0),
            e->out(e, 0), e->ctx);
    return ANVIL_OK;
}

static anvil_status dc_gather_emit(const kern_node *kn, const void *state, kern_emit *e) {
    const dc_gather_state *s = state;
    char label[160];
    CORE_TRY(data_emit_need(e));
    e->code(e, "const dc_gather_state gs = {%d, %zu, %zu, %zu, %zu, %lld, %d};\n", s->axis, s->es,
            s->outer, s->q, s->inner_bytes, (long long)s->axis_dim, (int)s->idx32);
    /* the indices are read when the library runs (a constant's are in the weights), so they are
     * checked then, as the variant's run checks them */
    e->code(e, "size_t bad;\n");
    e->code(e, "if (!data_gather_check(&gs, %s, &bad))\n", e->in(e, 1));
    e->code(e,
            "    return core_err(ANVIL_ERR_RUNTIME, \"node '%s' (Gather): index %%lld at position "
            "%%zu of the "
            "indices is out of range for axis %d of size %lld\", (long long)dc_gather_index(&gs, "
            "%s, bad), bad);\n",
            data_emit_label(kn->node, label, sizeof label), s->axis, (long long)s->axis_dim,
            e->in(e, 1));
    e->code(e, "data_gather_run(&gs, (const char *)(%s), %s, (char *)(%s), %s);\n", e->in(e, 0),
            e->in(e, 1), e->out(e, 0), e->ctx);
    return ANVIL_OK;
}

static const kern_emitter dc_seg_emitter = {dc_seg_emit, NULL};
static const kern_emitter dc_view_emitter = {dc_view_emit, NULL};
static const kern_emitter dc_gather_emitter = {dc_gather_emit, NULL};

/* ---- the variants ------------------------------------------------------------------------ */

const kern_variant data_concat_copy = {.name = "concat_copy",
                                       .op = IR_OP_CONCAT,
                                       .supports = dc_concat_supports,
                                       .prepare = dc_concat_prepare,
                                       .release = dc_seg_release,
                                       .run = dc_concat_run,
                                       .emit = &dc_seg_emitter};

const kern_variant data_split_copy = {.name = "split_copy",
                                      .op = IR_OP_SPLIT,
                                      .supports = dc_split_supports,
                                      .prepare = dc_split_prepare,
                                      .release = dc_seg_release,
                                      .run = dc_split_run,
                                      .emit = &dc_seg_emitter};

const kern_variant data_slice_copy = {.name = "slice_copy",
                                      .op = IR_OP_SLICE,
                                      .supports = dc_slice_supports,
                                      .prepare = dc_slice_prepare,
                                      .release = dc_view_release,
                                      .run = dc_view_node_run,
                                      .emit = &dc_view_emitter};

const kern_variant data_expand_copy = {.name = "expand_copy",
                                       .op = IR_OP_EXPAND,
                                       .supports = dc_expand_supports,
                                       .prepare = dc_expand_prepare,
                                       .release = dc_view_release,
                                       .run = dc_view_node_run,
                                       .emit = &dc_view_emitter};

const kern_variant data_tile_copy = {.name = "tile_copy",
                                     .op = IR_OP_TILE,
                                     .supports = dc_tile_supports,
                                     .prepare = dc_tile_prepare,
                                     .release = dc_view_release,
                                     .run = dc_view_node_run,
                                     .emit = &dc_view_emitter};

const kern_variant data_gather_copy = {.name = "gather_copy",
                                       .op = IR_OP_GATHER,
                                       .supports = dc_gather_supports,
                                       .prepare = dc_gather_prepare,
                                       .release = dc_view_release,
                                       .run = dc_gather_node_run,
                                       .emit = &dc_gather_emitter};
