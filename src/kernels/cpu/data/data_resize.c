/* Resize and Upsample on the last one or two axes: nearest for any dtype (a copy), linear for
 * fp32.
 *
 * The geometry is decided once in prepare, where shapes and the scales / sizes values are known:
 * per output row the source row(s) and weights, per output column the source column(s) and
 * weights. A run is then a loop over the output rows of every plane (all leading dims), which is
 * also the unit of parallel work.
 *
 * The geometry (output sizes, coordinates, nearest rounding, linear taps) comes from
 * ops/resize_common.h, the reference's own helpers, in double: a nearest variant must pick the
 * same source index as the reference at every rounding tie, and the test compares both on every
 * coordinate and nearest mode. Linear blends vertically first, then horizontally, as the
 * reference's axis passes do, but in float instead of double.
 *
 * Declined (the reference runs them): cubic, antialias, tf_crop_and_resize (roi and
 * extrapolation), a resized axis other than the last two, scales / sizes unknown at plan time,
 * linear on anything but fp32. Upsample (opsets 7-9) is asymmetric coordinates with floor for
 * nearest, which the same machinery computes. */
#include "data.h"
#include "data_resize.h"
#include "ops/resize_common.h"

#include <math.h>

/* The node's attributes: a Resize node's are the reference's own (its params), an Upsample
 * node's are written in the same terms, plus its scales attribute before opset 9. */
typedef struct rz_attrs {
    resize_params p;
    const float *attr_scales; /* Upsample before opset 9 */
    size_t n_attr_scales;
} rz_attrs;

/* False for what the kernels decline: cubic, antialias, tf_crop_and_resize, an unknown mode. */
static bool rz_parse(const ir_node *n, rz_attrs *a) {
    memset(a, 0, sizeof *a);
    resize_params *p = &a->p;
    if (n->op == IR_OP_UPSAMPLE) {
        const char *s;
        if (ir_attr_string(n, "mode", "nearest", &s) != ANVIL_OK) return false;
        if (strcmp(s, "nearest") == 0)
            p->mode = RS_NEAREST;
        else if (strcmp(s, "linear") == 0 || strcmp(s, "bilinear") == 0)
            p->mode = RS_LINEAR;
        else
            return false;
        p->coord = RS_ASYMMETRIC;
        p->nearest = RS_FLOOR;
        p->policy = RS_STRETCH;
        p->roi_in = p->scales_in = p->sizes_in = -1;
        if (n->opset < 9)
            return ir_attr_floats(n, "scales", &a->attr_scales, &a->n_attr_scales) == ANVIL_OK &&
                   a->attr_scales;
        p->scales_in = 1;
        return true;
    }
    if (!n->params) return false;
    *p = *(const resize_params *)n->params;
    return p->mode != RS_CUBIC && !p->antialias && p->coord != RS_TF_CROP_AND_RESIZE;
}

/* The per-axis geometry of kn through the reference's rs_pick / rs_axes / rs_geometry (Upsample:
 * one scale per dim); false where anything is unknown or invalid. */
static bool rz_geometry(const kern_node *kn, const rz_attrs *a, rs_axis *ax) {
    const ir_node *n = kn->node;
    const op_tinfo *x = &kn->in[0];
    int rank = x->shape.rank;
    double scales[IR_MAX_RANK];
    int64_t sizes[IR_MAX_RANK];
    int marks[IR_MAX_RANK], count = rank;
    bool use_scales = true;
    if (a->attr_scales) {
        if (a->n_attr_scales != (size_t)rank) return false;
        for (int d = 0; d < rank; d++) {
            marks[d] = d;
            scales[d] = a->attr_scales[d];
        }
    } else {
        int which = -1;
        if (rs_pick(n, &a->p, kn->in, kn->n_in, &which) != ANVIL_OK ||
            rs_axes(n, &a->p, rank, &count, marks) != ANVIL_OK)
            return false;
        use_scales = which == a->p.scales_in;
        const op_tinfo *v = &kn->in[which];
        size_t num;
        if (!v->value || v->dtype != (use_scales ? ANVIL_DTYPE_FLOAT32 : ANVIL_DTYPE_INT64) ||
            !ir_shape_numel(&v->shape, &num) || num != (size_t)count)
            return false;
        for (int i = 0; i < count; i++) {
            if (use_scales)
                scales[i] = ((const float *)v->value)[i];
            else
                sizes[i] = ((const int64_t *)v->value)[i];
        }
    }
    return rs_geometry(n, &a->p, rank, x->shape.d, marks, use_scales ? scales : NULL,
                       use_scales ? NULL : sizes, ax) == ANVIL_OK;
}

/* ---- state ------------------------------------------------------------------------------- */

static void rz_release(void *state) {
    rz_state *s = state;
    if (!s) return;
    free(s->block);
    free(s->hblock);
    free(s);
}

static bool rz_supports_common(const kern_node *kn, rs_mode mode) {
    if (kn->n_out < 1 || !data_static(&kn->in[0]) || !data_static(&kn->out[0])) return false;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    int rank = x->shape.rank;
    if (rank < 1 || y->shape.rank != rank || y->dtype != x->dtype) return false;
    rz_attrs a;
    if (!rz_parse(kn->node, &a) || a.p.mode != mode) return false;
    if (mode == RS_LINEAR && x->dtype != ANVIL_DTYPE_FLOAT32) return false;
    rs_axis ax[IR_MAX_RANK];
    if (!rz_geometry(kn, &a, ax)) return false;
    for (int d = 0; d < rank; d++) {
        if (ax[d].out != y->shape.d[d]) return false;
        if (d < rank - 2 && ax[d].resized) return false;
        /* every index and table length stays far inside int64 and size_t */
        if (ax[d].in > ((int64_t)1 << 40) || ax[d].out > ((int64_t)1 << 40)) return false;
    }
    return true;
}

static bool rz_supports_nearest(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return rz_supports_common(kn, RS_NEAREST);
}

static bool rz_supports_linear(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return rz_supports_common(kn, RS_LINEAR);
}

/* The AVX-512 rows index the input row with int32 offsets. */
static bool rz_supports_linear_avx512(const kern_node *kn, const core_hw *hw) {
    const ir_shape *x = &kn->in[0].shape;
    return rz_supports_linear(kn, hw) && x->d[x->rank - 1] < ((int64_t)1 << 30);
}

/* The blocks of the AVX-512 row kernel (data_resize.h) from the column taps. */
static anvil_status rz_hplan_build(rz_state *s) {
    size_t ow = (size_t)s->ow, nb = (ow + 15) / 16;
    s->hblock_bytes = nb * (sizeof(int32_t) + 1) + 2 * ow * sizeof(int32_t) + 8;
    char *m = malloc(s->hblock_bytes);
    if (!m) return ANVIL_ERR_OUT_OF_MEMORY;
    s->hblock = m;
    int32_t *base = (int32_t *)m, *off0 = base + nb, *off1 = off0 + ow;
    uint8_t *fits = (uint8_t *)(off1 + ow);
    for (size_t k = 0; k < nb; k++) {
        size_t lo = 16 * k, hi = lo + 16 < ow ? lo + 16 : ow;
        int64_t b = s->x0[lo], top = 0;
        for (size_t o = lo; o < hi; o++) b = s->x0[o] < b ? s->x0[o] : b;
        for (size_t o = lo; o < hi; o++) {
            off0[o] = (int32_t)(s->x0[o] - b);
            off1[o] = (int32_t)(s->x1[o] - b);
            top = off1[o] > top ? off1[o] : top;
            top = off0[o] > top ? off0[o] : top;
        }
        base[k] = (int32_t)b;
        fits[k] = top < 32;
    }
    s->hplan = (rz_hplan){.iw = (size_t)s->iw,
                          .ow = ow,
                          .base = base,
                          .fits = fits,
                          .off0 = off0,
                          .off1 = off1,
                          .w0 = s->wx0,
                          .w1 = s->wx1};
    return ANVIL_OK;
}

/* The two linear taps of every output index of one axis through the reference's rs_taps_at (linear
 * without antialias has taps at offsets 0 and 1 from floor(x)); false for any other layout. */
static bool rz_taps(const resize_params *p, const rs_axis *a, int64_t *i0, int64_t *i1, float *w0,
                    float *w1) {
    double s;
    int64_t start;
    if (rs_tap_layout(p, a, &s, &start) != 2) return false;
    for (int64_t y = 0; y < a->out; y++) {
        if (!a->resized) {
            i0[y] = i1[y] = y;
            w0[y] = 1;
            w1[y] = 0;
            continue;
        }
        int64_t idx[2];
        double w[2];
        rs_taps_at(p, a, y, s, start, 2, idx, w);
        i0[y] = idx[0];
        i1[y] = idx[1];
        w0[y] = (float)w[0];
        w1[y] = (float)w[1];
    }
    return true;
}

static anvil_status rz_prepare_isa(const kern_node *kn, bool avx512, void **state) {
    rz_attrs a;
    rs_axis ax[IR_MAX_RANK];
    if (!rz_parse(kn->node, &a) || !rz_geometry(kn, &a, ax))
        return core_err(ANVIL_ERR_INTERNAL, "%s: resize geometry unavailable in prepare",
                        ir_node_label(kn->node));
    rz_state *s = calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    const op_tinfo *x = &kn->in[0];
    int rank = x->shape.rank;
    s->rank = rank;
    for (int d = 0; d < rank; d++) {
        s->in_dims[d] = ax[d].in;
        s->out_dims[d] = ax[d].out;
    }
    s->es = anvil_dtype_size(x->dtype);
    s->threads = kn->threads > 0 ? kn->threads : 1;
    s->planes = (int64_t)data_prod(s->in_dims, 0, rank >= 2 ? rank - 2 : 0);
    const rs_axis one = {.in = 1, .out = 1, .scale = 1, .width = 1};
    const rs_axis *ah = rank >= 2 ? &ax[rank - 2] : &one, *aw = &ax[rank - 1];
    s->ih = ah->in;
    s->oh = ah->out;
    s->iw = aw->in;
    s->ow = aw->out;
    s->w_resized = aw->resized;
    size_t oh = (size_t)s->oh, ow = (size_t)s->ow;
    if (a.p.mode == RS_NEAREST) {
        s->block_bytes = (oh + ow + 1) * sizeof(int64_t);
        s->block = malloc(s->block_bytes);
        if (!s->block) {
            rz_release(s);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        s->mh = s->block;
        s->mw = s->mh + oh;
        const rs_axis *axes2[2] = {ah, aw};
        int64_t *maps[2] = {s->mh, s->mw};
        for (int k = 0; k < 2; k++)
            for (int64_t o = 0; o < axes2[k]->out; o++)
                maps[k][o] = axes2[k]->resized ? rs_nearest_index(&a.p, axes2[k],
                                                                  rs_coordinate(&a.p, axes2[k], o))
                                               : o;
        s->w_identity = s->ow == s->iw;
        for (int64_t o = 0; o < s->ow && s->w_identity; o++) s->w_identity = s->mw[o] == o;
        if (!s->w_identity && s->iw > 0 && s->ow % s->iw == 0 && s->ow / s->iw <= 64) {
            int64_t f = s->ow / s->iw;
            bool ok = true;
            for (int64_t o = 0; o < s->ow && ok; o++) ok = s->mw[o] == o / f;
            if (ok) s->factor = (int)f;
        }
    } else {
        size_t ints = 2 * (oh + ow), floats = 2 * (oh + ow);
        s->block_bytes = ints * sizeof(int64_t) + floats * sizeof(float) + 8;
        s->block = malloc(s->block_bytes);
        if (!s->block) {
            rz_release(s);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        s->y0 = s->block;
        s->y1 = s->y0 + oh;
        s->x0 = s->y1 + oh;
        s->x1 = s->x0 + ow;
        s->wy0 = (float *)(s->x1 + ow);
        s->wy1 = s->wy0 + oh;
        s->wx0 = s->wy1 + oh;
        s->wx1 = s->wx0 + ow;
        if (!rz_taps(&a.p, ah, s->y0, s->y1, s->wy0, s->wy1) ||
            !rz_taps(&a.p, aw, s->x0, s->x1, s->wx0, s->wx1)) {
            rz_release(s);
            return core_err(ANVIL_ERR_INTERNAL, "%s: resize taps are not two per output",
                            ir_node_label(kn->node));
        }
        s->ws_stride = ((size_t)s->iw + 15) & ~(size_t)15;
        s->avx512 = avx512;
        if (avx512 && rz_hplan_build(s) != ANVIL_OK) {
            rz_release(s);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
    }
    *state = s;
    return ANVIL_OK;
}

static anvil_status rz_prepare(const kern_node *kn, void **state) {
    return rz_prepare_isa(kn, false, state);
}

static anvil_status rz_prepare_avx512(const kern_node *kn, void **state) {
    return rz_prepare_isa(kn, true, state);
}

static size_t rz_workspace(const kern_node *kn) {
    const op_tinfo *x = &kn->in[0];
    size_t iw = (size_t)x->shape.d[x->shape.rank - 1];
    size_t t = kn->threads > 0 ? (size_t)kn->threads : 1;
    return t * ((iw + 15) & ~(size_t)15) * sizeof(float);
}

/* ---- run --------------------------------------------------------------------------------- */

/* Whether the run's tensors have the shapes prepare saw (the plan is per shape signature, so
 * anything else is a runtime inconsistency). */
static anvil_status rz_check_shapes(const ir_node *n, const rz_state *s, const op_tensor *x,
                                    const op_tensor *y) {
    bool ok = x->rank == s->rank && y->rank == s->rank;
    for (int d = 0; ok && d < s->rank; d++)
        ok = x->dims[d] == s->in_dims[d] && y->dims[d] == s->out_dims[d];
    if (!ok)
        return core_err(ANVIL_ERR_RUNTIME,
                        "%s: the tensors' shapes differ from those the resize was prepared for",
                        ir_node_label(n));
    return ANVIL_OK;
}

static anvil_status rz_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const rz_state *s = state;
    CORE_TRY(rz_check_shapes(n, s, in[0], out[0]));
    data_resize_run_rows(s, in[0]->data, out[0]->data, ws, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * One data_resize_run_rows call on this prepare's state: its tables (and the AVX-512 column plan)
 * in the weights at the same offsets within their allocation, the rest as constants. */
static anvil_status rz_emit(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    const rz_state *s = state;
    CORE_TRY(data_emit_need(e));
    CORE_TRY(e->need(e, "kernels/cpu/data/data_resize.h"));
    CORE_TRY(e->need(e, "kernels/cpu/data/data_resize_run.c"));
    /* data_resize_run_rows names the AVX-512 row, which it calls only for an avx512 state */
    CORE_TRY(e->need(e, "kernels/cpu/data/data_resize_avx512.c"));
    CORE_TRY(e->include(e, "kernels/cpu/data/data_resize.h"));
    char blk[96], hblk[96];
    CORE_TRY(e->blob(e, s->block, s->block_bytes, blk, sizeof blk));
    e->code(e, "char *blk = (char *)(%s);\n", blk);
    e->code(e, "rz_state rs = {0};\n");
    e->code(e, "rs.es = %zu;\nrs.threads = %d;\nrs.rank = %d;\n", s->es, s->threads, s->rank);
    e->code(e, "rs.planes = %lld;\nrs.ih = %lld;\nrs.iw = %lld;\nrs.oh = %lld;\nrs.ow = %lld;\n",
            (long long)s->planes, (long long)s->ih, (long long)s->iw, (long long)s->oh,
            (long long)s->ow);
    e->code(e, "rs.factor = %d;\nrs.w_identity = %d;\nrs.w_resized = %d;\n", s->factor,
            (int)s->w_identity, (int)s->w_resized);
    e->code(e, "rs.ws_stride = %zu;\nrs.avx512 = %d;\n", s->ws_stride, (int)s->avx512);
    /* the tables' places within the block */
    const char *const names[] = {"mh", "mw", "y0", "y1", "x0", "x1"};
    const int64_t *const ptrs[] = {s->mh, s->mw, s->y0, s->y1, s->x0, s->x1};
    for (int i = 0; i < 6; i++)
        if (ptrs[i])
            e->code(e, "rs.%s = (int64_t *)(blk + %td);\n", names[i],
                    (const char *)ptrs[i] - (const char *)s->block);
    const char *const fnames[] = {"wy0", "wy1", "wx0", "wx1"};
    const float *const fptrs[] = {s->wy0, s->wy1, s->wx0, s->wx1};
    for (int i = 0; i < 4; i++)
        if (fptrs[i])
            e->code(e, "rs.%s = (float *)(blk + %td);\n", fnames[i],
                    (const char *)fptrs[i] - (const char *)s->block);
    if (s->avx512) {
        const rz_hplan *h = &s->hplan;
        CORE_TRY(e->blob(e, s->hblock, s->hblock_bytes, hblk, sizeof hblk));
        const char *hb = s->hblock;
        e->code(e, "const char *hblk = (const char *)(%s);\n", hblk);
        e->code(e,
                "rs.hplan = (rz_hplan){%zu, %zu, (const int32_t *)(hblk + %td), (const uint8_t "
                "*)(hblk + %td), (const int32_t *)(hblk + %td), (const int32_t *)(hblk + %td), "
                "rs.wx0, rs.wx1};\n",
                h->iw, h->ow, (const char *)h->base - hb, (const char *)h->fits - hb,
                (const char *)h->off0 - hb, (const char *)h->off1 - hb);
    }
    e->code(e, "data_resize_run_rows(&rs, (const char *)(%s), (char *)(%s), %s%s%s, %s);\n",
            e->in(e, 0), e->out(e, 0), s->mh ? "" : "(float *)(", s->mh ? "NULL" : e->ws,
            s->mh ? "" : ")", e->ctx);
    return ANVIL_OK;
}

static const kern_emitter rz_emitter = {rz_emit, NULL};

const kern_variant data_resize_nearest = {.name = "resize_nearest",
                                          .op = IR_OP_RESIZE,
                                          .supports = rz_supports_nearest,
                                          .prepare = rz_prepare,
                                          .release = rz_release,
                                          .run = rz_run,
                                          .emit = &rz_emitter};

const kern_variant data_resize_linear_f32_avx512 = {.name = "resize_linear_f32_avx512",
                                                    .op = IR_OP_RESIZE,
                                                    .needs = KERN_NEEDS_AVX512,
                                                    .supports = rz_supports_linear_avx512,
                                                    .workspace_size = rz_workspace,
                                                    .prepare = rz_prepare_avx512,
                                                    .release = rz_release,
                                                    .run = rz_run,
                                                    .emit = &rz_emitter};

const kern_variant data_upsample_linear_f32_avx512 = {.name = "upsample_linear_f32_avx512",
                                                      .op = IR_OP_UPSAMPLE,
                                                      .needs = KERN_NEEDS_AVX512,
                                                      .supports = rz_supports_linear_avx512,
                                                      .workspace_size = rz_workspace,
                                                      .prepare = rz_prepare_avx512,
                                                      .release = rz_release,
                                                      .run = rz_run,
                                                      .emit = &rz_emitter};

const kern_variant data_resize_linear_f32 = {.name = "resize_linear_f32",
                                             .op = IR_OP_RESIZE,
                                             .supports = rz_supports_linear,
                                             .workspace_size = rz_workspace,
                                             .prepare = rz_prepare,
                                             .release = rz_release,
                                             .run = rz_run,
                                             .emit = &rz_emitter};

const kern_variant data_upsample_nearest = {.name = "upsample_nearest",
                                            .op = IR_OP_UPSAMPLE,
                                            .supports = rz_supports_nearest,
                                            .prepare = rz_prepare,
                                            .release = rz_release,
                                            .run = rz_run,
                                            .emit = &rz_emitter};

const kern_variant data_upsample_linear_f32 = {.name = "upsample_linear_f32",
                                               .op = IR_OP_UPSAMPLE,
                                               .supports = rz_supports_linear,
                                               .workspace_size = rz_workspace,
                                               .prepare = rz_prepare,
                                               .release = rz_release,
                                               .run = rz_run,
                                               .emit = &rz_emitter};
