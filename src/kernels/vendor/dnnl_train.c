/* oneDNN's convolution training passes as variants, the vendor alternatives to anvil's own
 * backward kernels:
 *
 *   dnnl_deconv       ConvTranspose as oneDNN's deconvolution. A Conv's input gradient in a
 *                     training graph is a ConvTranspose of dY with the Conv's weights
 *                     (src/autodiff), and a deconvolution is that same backward-data pass.
 *   dnnl_conv_grad_w  anvil.ConvGradW (X, dY) -> dW as oneDNN's convolution backward-weights,
 *                     created with a forward-training primitive descriptor as its hint (oneDNN
 *                     picks the backward implementation that matches the forward one).
 *
 * Both let oneDNN choose every operand's layout (format "any": on AVX-512 its blocked nChw16c
 * kernels) and reorder anvil's plain NCHW operands into those layouts and the result back on each
 * call, as PyTorch's CPU training does with the same library. Constant weights (a ConvTranspose
 * in an inference model) are reordered once in prepare. Where a node's geometry is one oneDNN
 * cannot express (a negative end pad from output_padding), supports() declines and anvil's own
 * variants run it.
 *
 * Threads: as the other dnnl_* variants (dnnl_variants.c), oneDNN runs on OpenMP with the
 * session's thread count set around each call. */
#ifdef ANVIL_HAVE_DNNL

#include "dnnl_impl.h"
#include "kernels/cpu/deconv/deconv.h"
#include "ops/nn_common.h"

#include <stdlib.h>

/* One operand of a primitive: where anvil keeps it and where the primitive wants it. */
typedef struct tr_operand {
    int arg;                       /* DNNL_ARG_* */
    int index;                     /* the node's input index, or -1 for the output */
    dnnl_memory_desc_t user, prim; /* anvil's plain layout; the primitive's */
    dnnl_primitive_t reorder;      /* user -> prim for an input, prim -> user for the output;
                                    * NULL when the layouts are equal (owned) */
    void *tmp;                     /* the operand in the primitive's layout (owned), or NULL */
    void *packed;                  /* a constant input reordered once (owned), or NULL */
} tr_operand;

#define TR_MAX_OPERANDS 4

typedef struct tr_state {
    dk_state *base; /* stream, primitive, thread count, scratchpad (owned) */
    tr_operand op[TR_MAX_OPERANDS];
    int n_op;
    bool trivial; /* an empty output: nothing to run */
    /* dnnl_deconv with output_padding past the end pad: the primitive writes the first nat[d]
     * positions of each spatial dim (all that any input reaches), the rest of the output's
     * full[d] get the bias (input 2, or 0). Spatial dims as 3 (leading ones 1). */
    bool tail, bias;
    int64_t planes, full[3], nat[3];
} tr_state;

static void tr_release(void *p) {
    tr_state *t = p;
    if (!t) return;
    for (int i = 0; i < t->n_op; i++) {
        if (t->op[i].reorder) vendor_dnnl_lib.dnnl_primitive_destroy(t->op[i].reorder);
        free(t->op[i].tmp);
        free(t->op[i].packed);
    }
    vendor_dnnl_state_release(t->base);
    free(t);
}

static const char *pass_name(const ir_node *n) {
    return n->op == IR_OP_CONVTRANSPOSE ? "the deconvolution" : "the backward-weights pass";
}

/* Creates the primitive from pd (consumed: destroyed here) and, per operand, its layout in the
 * primitive (query[i]; dnnl_query_undef: the user's, as described to the primitive), the reorder
 * between that and the user's, and a buffer for it. Constant inputs (values[i] non-NULL) are
 * reordered once into `packed`. */
static anvil_status tr_finish(const kern_node *kn, tr_state *t, dnnl_primitive_desc_t pd,
                              const dnnl_query_t *query, const void *const *values) {
    const ir_node *n = kn->node;
    anvil_status st = ANVIL_OK;
    dnnl_status_t ds = dnnl_success;
    for (int i = 0; i < t->n_op; i++)
        t->op[i].prim = query[i] == dnnl_query_undef
                            ? t->op[i].user
                            : *vendor_dnnl_lib.dnnl_primitive_desc_query_md(pd, query[i], 0);
    const dnnl_memory_desc_t *scratch =
        vendor_dnnl_lib.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (scratch && vendor_dnnl_lib.dnnl_memory_desc_get_size(scratch) > 0) {
        t->base->scratch_md = *scratch;
        if (!(t->base->scratch = vendor_dnnl_alloc_md(scratch))) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (st == ANVIL_OK) ds = vendor_dnnl_lib.dnnl_primitive_create(&t->base->prim, pd);
    vendor_dnnl_lib.dnnl_primitive_desc_destroy(pd);
    if (st != ANVIL_OK) return st;
    if (ds != dnnl_success) return vendor_dnnl_fail(n, "creating the primitive", ds);
    for (int i = 0; i < t->n_op; i++) {
        tr_operand *o = &t->op[i];
        if (vendor_dnnl_lib.dnnl_memory_desc_equal(&o->user, &o->prim)) continue;
        if (values[i]) {
            if (!(o->packed = vendor_dnnl_alloc_md(&o->prim))) return ANVIL_ERR_OUT_OF_MEMORY;
            CORE_TRY(vendor_dnnl_reorder_once(n, t->base->stream, &o->user, values[i], &o->prim,
                                              o->packed));
            continue;
        }
        const bool out = o->index < 0;
        dnnl_primitive_desc_t rpd = NULL;
        ds = vendor_dnnl_lib.dnnl_reorder_primitive_desc_create(
            &rpd, out ? &o->prim : &o->user, vendor_dnnl_engine, out ? &o->user : &o->prim,
            vendor_dnnl_engine, NULL);
        if (ds == dnnl_success) ds = vendor_dnnl_lib.dnnl_primitive_create(&o->reorder, rpd);
        if (rpd) vendor_dnnl_lib.dnnl_primitive_desc_destroy(rpd);
        if (ds != dnnl_success) return vendor_dnnl_fail(n, "creating a layout reorder", ds);
        if (!(o->tmp = vendor_dnnl_alloc_md(&o->prim))) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    return ANVIL_OK;
}

/* The output positions no input reaches (tr_state.tail): the bias of their channel. */
static void fill_tail(const tr_state *t, const op_tensor *const *in, op_tensor *const *out) {
    const float *bias = t->bias ? in[2]->data : NULL;
    const int64_t m = out[0]->dims[1], plane = t->full[0] * t->full[1] * t->full[2];
    for (int64_t p = 0; p < t->planes; p++) {
        const float v = bias ? bias[p % m] : 0.0f;
        float *y = (float *)out[0]->data + p * plane;
        for (int64_t a = 0; a < t->full[0]; a++)
            for (int64_t b = 0; b < t->full[1]; b++) {
                float *row = y + (a * t->full[1] + b) * t->full[2];
                const int64_t from = a < t->nat[0] && b < t->nat[1] ? t->nat[2] : 0;
                for (int64_t c = from; c < t->full[2]; c++) row[c] = v;
            }
    }
}

static anvil_status tr_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)workspace;
    (void)ctx;
    const tr_state *t = state;
    if (t->trivial) {
        if (t->tail) fill_tail(t, in, out);
        return ANVIL_OK;
    }
    const dk_state *b = t->base;
    const int saved = vendor_dnnl_threads_set(b->threads);
    anvil_status st = ANVIL_OK;
    dk_exec_arg a[TR_MAX_OPERANDS + 1];
    int na = 0;
    const tr_operand *res = NULL;
    for (int i = 0; i < t->n_op && st == ANVIL_OK; i++) {
        const tr_operand *o = &t->op[i];
        void *user = o->index < 0 ? out[0]->data : in[o->index]->data;
        const void *data = o->packed ? o->packed : o->tmp ? o->tmp : user;
        if (o->index >= 0 && o->reorder) {
            const dk_exec_arg r[2] = {{DNNL_ARG_FROM, &o->user, user},
                                      {DNNL_ARG_TO, &o->prim, o->tmp}};
            st = vendor_dnnl_execute(n, b->stream, o->reorder, r, 2);
        }
        if (o->index < 0) res = o;
        a[na++] = (dk_exec_arg){o->arg, &o->prim, data};
    }
    if (st == ANVIL_OK && b->scratch)
        a[na++] = (dk_exec_arg){DNNL_ARG_SCRATCHPAD, &b->scratch_md, b->scratch};
    if (st == ANVIL_OK) st = vendor_dnnl_execute(n, b->stream, b->prim, a, na);
    if (st == ANVIL_OK && res && res->reorder) {
        const dk_exec_arg r[2] = {{DNNL_ARG_FROM, &res->prim, res->tmp},
                                  {DNNL_ARG_TO, &res->user, out[0]->data}};
        st = vendor_dnnl_execute(n, b->stream, res->reorder, r, 2);
    }
    vendor_dnnl_threads_restore(saved, b->threads);
    if (st == ANVIL_OK && t->tail) fill_tail(t, in, out);
    return st;
}

static anvil_status tr_new(const kern_node *kn, tr_state **out) {
    tr_state *t = core_calloc(1, sizeof *t);
    if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = vendor_dnnl_state_new(kn, &t->base);
    if (st != ANVIL_OK) {
        free(t);
        return st;
    }
    *out = t;
    return ANVIL_OK;
}

/* The end pad that makes oneDNN's size formula, out = (in - 1) * s + span - pb - pe for a
 * deconvolution and its mirror for a convolution, give the node's size. */
static int64_t end_pad(int64_t small, int64_t big, int64_t s, int64_t k, int64_t d, int64_t pb) {
    return (small - 1) * s + (k - 1) * d + 1 - big - pb;
}

/* ---- dnnl_deconv ------------------------------------------------------------------------- */

/* oneDNN's strides, dilations and pads for g, and nat: the output size with no end pad where
 * the node's output_padding reaches past it (the part any input reaches; the rest gets the bias
 * alone, tr_state.tail). False where a begin pad is negative. */
static bool deconv_pads(const deconv_geom *g, dnnl_dims_t s, dnnl_dims_t d, dnnl_dims_t pb,
                        dnnl_dims_t pe, int64_t *nat) {
    for (int i = 0; i < g->nsp; i++) {
        s[i] = g->s[i];
        d[i] = g->d[i] - 1;
        pb[i] = g->pb[i];
        pe[i] = end_pad(g->in[i], g->out[i], g->s[i], g->k[i], g->d[i], g->pb[i]);
        nat[i] = g->out[i];
        if (pe[i] < 0) {
            nat[i] = g->out[i] + pe[i];
            pe[i] = 0;
        }
        if (pb[i] < 0 || nat[i] < 1) return false;
    }
    return true;
}

static bool deconv_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    deconv_geom g;
    dnnl_dims_t s, d, pb, pe;
    int64_t nat[DECONV_MAX_SP];
    return deconv_geom_of(kn, &g) && deconv_pads(&g, s, d, pb, pe, nat);
}

static anvil_status deconv_prepare(const kern_node *kn, void **state) {
    const ir_node *n = kn->node;
    deconv_geom g;
    dnnl_dims_t s, d, pb, pe;
    int64_t nat[DECONV_MAX_SP];
    if (!deconv_geom_of(kn, &g) || !deconv_pads(&g, s, d, pb, pe, nat))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: dnnl_deconv does not take this ConvTranspose (dtype, shapes or a "
                        "negative pad); use another variant",
                        ir_node_label(n));
    tr_state *t;
    CORE_TRY(tr_new(kn, &t));
    t->planes = g.n * g.m;
    t->bias = g.has_bias;
    for (int i = 0; i < 3; i++) t->full[i] = t->nat[i] = 1;
    for (int i = 0; i < g.nsp; i++) {
        t->tail |= nat[i] < g.out[i];
        t->full[3 - g.nsp + i] = g.out[i];
        t->nat[3 - g.nsp + i] = nat[i];
    }
    if (g.n == 0 || g.m == 0 || g.c == 0) {
        /* without input channels every output is its bias */
        t->trivial = true;
        t->tail = g.c == 0 && t->planes > 0;
        t->nat[0] = 0;
        *state = t;
        return ANVIL_OK;
    }
    const int rank = g.nsp + 2;
    int64_t xd[DNNL_MAX_NDIMS] = {g.n, g.c}, yd[DNNL_MAX_NDIMS] = {g.n, g.m},
            fd[DNNL_MAX_NDIMS] = {g.n, g.m};
    for (int i = 0; i < g.nsp; i++) {
        xd[2 + i] = g.in[i];
        yd[2 + i] = nat[i];
        fd[2 + i] = g.out[i];
    }
    /* ONNX's W is [c][mg][k...] = [G][cg][mg][k...]; oneDNN's (grouped) deconvolution weights
     * are [G][mg][cg][k...]: the same buffer with the two channel strides swapped. */
    const bool grouped = g.group > 1;
    const int wr = rank + grouped;
    dnnl_dims_t wd, ws;
    const int kd = wr - g.nsp; /* where the kernel dims start */
    int64_t tap = 1;
    for (int i = g.nsp - 1; i >= 0; i--) {
        wd[kd + i] = g.k[i];
        ws[kd + i] = tap;
        tap *= g.k[i];
    }
    wd[kd - 2] = g.mg; /* output channels per group */
    ws[kd - 2] = g.k_size;
    wd[kd - 1] = g.cg; /* input channels per group */
    ws[kd - 1] = g.k_size * g.mg;
    if (grouped) {
        wd[0] = g.group;
        ws[0] = g.k_size * g.mg * g.cg;
    }
    dnnl_memory_desc_t x_any, w_any, y_any, b_md;
    tr_operand *src = &t->op[0], *wei = &t->op[1], *dst = &t->op[2];
    t->n_op = 3;
    *src = (tr_operand){.arg = DNNL_ARG_SRC, .index = 0};
    *wei = (tr_operand){.arg = DNNL_ARG_WEIGHTS, .index = 1};
    *dst = (tr_operand){.arg = DNNL_ARG_DST, .index = -1};
    dnnl_status_t ds = vendor_dnnl_md_plain(&src->user, rank, xd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_slice(&dst->user, rank, yd, fd);
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_memory_desc_init_by_strides(&wei->user, wr, wd, dnnl_f32, ws);
    if (ds == dnnl_success) ds = vendor_dnnl_md_any(&x_any, rank, xd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_any(&y_any, rank, yd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_any(&w_any, wr, wd);
    if (ds == dnnl_success && g.has_bias) {
        ds = vendor_dnnl_md_plain(&b_md, 1, &g.m);
        t->op[3] = (tr_operand){.arg = DNNL_ARG_BIAS, .index = 2, .user = b_md};
        t->n_op = 4;
    }
    dnnl_deconvolution_desc_t desc;
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_dilated_deconvolution_forward_desc_init(
            &desc, dnnl_forward_inference, dnnl_deconvolution_direct, &x_any, &w_any,
            g.has_bias ? &b_md : NULL, &y_any, s, d, pb, pe);
    dnnl_primitive_desc_t pd = NULL;
    const int saved = vendor_dnnl_threads_set(t->base->threads);
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_primitive_desc_create(&pd, &desc, NULL, vendor_dnnl_engine, NULL);
    anvil_status st = ds == dnnl_success ? ANVIL_OK : vendor_dnnl_fail(n, pass_name(n), ds);
    if (st == ANVIL_OK) {
        /* the bias was described plain, and stays so */
        const dnnl_query_t q[4] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md,
                                   dnnl_query_undef};
        const void *v[4] = {NULL, kn->in[1].value, NULL, NULL};
        st = tr_finish(kn, t, pd, q, v);
    }
    vendor_dnnl_threads_restore(saved, t->base->threads);
    if (st != ANVIL_OK) {
        tr_release(t);
        return st;
    }
    if (t->op[1].packed) kern_node_mark_copied(kn, 1);
    *state = t;
    return ANVIL_OK;
}

/* ---- dnnl_conv_grad_w -------------------------------------------------------------------- */

typedef struct cgw_geom {
    int rank;
    int64_t group, xd[DNNL_MAX_NDIMS], yd[DNNL_MAX_NDIMS], wd[DNNL_MAX_NDIMS];
    int wrank;
    dnnl_dims_t s, d, pb, pe;
} cgw_geom;

static bool cgw_geom_of(const kern_node *kn, cgw_geom *c) {
    const ir_node *n = kn->node;
    if (n->op != IR_OP_CONV_GRAD_W || kn->n_in < 2 || kn->n_out < 1 || !vk_all_static_f32(kn, 2))
        return false;
    const ir_shape *x = &kn->in[0].shape, *dy = &kn->in[1].shape, *dw = &kn->out[0].shape;
    const int rank = x->rank, nsp = rank - 2;
    if (nsp < 1 || nsp > 3 || dy->rank != rank || dw->rank != rank) return false;
    nn_window w;
    nn_geom g;
    if (nn_window_parse(n, true, true, false, &w) != ANVIL_OK ||
        ir_attr_int(n, "group", 1, &c->group) != ANVIL_OK || c->group < 1 ||
        w.n_kernel != (size_t)nsp ||
        nn_window_resolve(n, &w, nsp, x->d + 2, w.kernel, false, &g) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    if (x->d[1] % c->group || dy->d[1] % c->group) return false;
    c->rank = rank;
    const bool grouped = c->group > 1;
    c->wrank = rank + grouped;
    for (int i = 0; i < rank; i++) c->xd[i] = x->d[i], c->yd[i] = dy->d[i];
    if (grouped) c->wd[0] = c->group;
    c->wd[grouped] = dw->d[0] / c->group;
    c->wd[grouped + 1] = dw->d[1];
    for (int i = 0; i < nsp; i++) {
        if (g.out[i] != dy->d[2 + i] || g.pad_begin[i] < 0) return false;
        c->wd[grouped + 2 + i] = g.kernel[i];
        c->s[i] = g.stride[i];
        c->d[i] = g.dil[i] - 1;
        c->pb[i] = g.pad_begin[i];
        /* A negative end pad leaves X's tail unread; none gives the same output size. */
        c->pe[i] = end_pad(g.out[i], g.in[i], g.stride[i], g.kernel[i], g.dil[i], g.pad_begin[i]);
        if (c->pe[i] < 0) c->pe[i] = 0;
    }
    return true;
}

static bool cgw_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    cgw_geom c;
    return cgw_geom_of(kn, &c);
}

static anvil_status cgw_prepare(const kern_node *kn, void **state) {
    const ir_node *n = kn->node;
    cgw_geom c;
    if (!cgw_geom_of(kn, &c))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: dnnl_conv_grad_w does not take this node; use another variant",
                        ir_node_label(n));
    tr_state *t;
    CORE_TRY(tr_new(kn, &t));
    if (c.xd[0] == 0 || c.xd[1] == 0 || c.yd[1] == 0) {
        t->trivial = true;
        *state = t;
        return ANVIL_OK;
    }
    tr_operand *src = &t->op[0], *ddst = &t->op[1], *dwei = &t->op[2];
    t->n_op = 3;
    *src = (tr_operand){.arg = DNNL_ARG_SRC, .index = 0};
    *ddst = (tr_operand){.arg = DNNL_ARG_DIFF_DST, .index = 1};
    *dwei = (tr_operand){.arg = DNNL_ARG_DIFF_WEIGHTS, .index = -1};
    dnnl_memory_desc_t x_any, y_any, w_any;
    dnnl_status_t ds = vendor_dnnl_md_plain(&src->user, c.rank, c.xd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_plain(&ddst->user, c.rank, c.yd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_plain(&dwei->user, c.wrank, c.wd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_any(&x_any, c.rank, c.xd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_any(&y_any, c.rank, c.yd);
    if (ds == dnnl_success) ds = vendor_dnnl_md_any(&w_any, c.wrank, c.wd);
    dnnl_convolution_desc_t fwd, bwd;
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_dilated_convolution_forward_desc_init(
            &fwd, dnnl_forward_training, dnnl_convolution_direct, &x_any, &w_any, NULL, &y_any, c.s,
            c.d, c.pb, c.pe);
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_dilated_convolution_backward_weights_desc_init(
            &bwd, dnnl_convolution_direct, &x_any, &w_any, NULL, &y_any, c.s, c.d, c.pb, c.pe);
    const int saved = vendor_dnnl_threads_set(t->base->threads);
    dnnl_primitive_desc_t hint = NULL, pd = NULL;
    if (ds == dnnl_success)
        ds =
            vendor_dnnl_lib.dnnl_primitive_desc_create(&hint, &fwd, NULL, vendor_dnnl_engine, NULL);
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_primitive_desc_create(&pd, &bwd, NULL, vendor_dnnl_engine, hint);
    if (hint) vendor_dnnl_lib.dnnl_primitive_desc_destroy(hint);
    anvil_status st = ds == dnnl_success ? ANVIL_OK : vendor_dnnl_fail(n, pass_name(n), ds);
    if (st == ANVIL_OK) {
        const dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_diff_dst_md,
                                   dnnl_query_diff_weights_md};
        const void *v[3] = {kn->in[0].value, kn->in[1].value, NULL};
        st = tr_finish(kn, t, pd, q, v);
    }
    vendor_dnnl_threads_restore(saved, t->base->threads);
    if (st != ANVIL_OK) {
        tr_release(t);
        return st;
    }
    *state = t;
    return ANVIL_OK;
}

const kern_variant vendor_dnnl_deconv = {"dnnl_deconv",
                                         IR_OP_CONVTRANSPOSE,
                                         KERN_OWN_THREADS,
                                         deconv_supports,
                                         NULL,
                                         deconv_prepare,
                                         tr_release,
                                         tr_run,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL};
const kern_variant vendor_dnnl_conv_grad_w = {"dnnl_conv_grad_w",
                                              IR_OP_CONV_GRAD_W,
                                              KERN_OWN_THREADS,
                                              cgw_supports,
                                              NULL,
                                              cgw_prepare,
                                              tr_release,
                                              tr_run,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL};

#endif
