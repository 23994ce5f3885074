/* oneDNN as variants: "dnnl_matmul" (MatMul, Gemm) and "dnnl_conv" / "dnnl_conv_nchw" /
 * "dnnl_conv_split" (Conv),
 * through oneDNN's C API (version 2.x, dnnl.h).
 *
 * Everything that can be decided before running is decided in prepare: the primitive is created
 * there, and constant weights are reordered once into the layout the primitive asked for
 * (weights described with format "any"), so a run executes the primitive and nothing else
 * (plus, for blocked activations, the two reorders that the layout needs).
 *
 * Threads: Debian's libdnnl runs on OpenMP (libgomp), whose thread count is a per-calling-thread
 * setting. prepare and run set it to the session's count around their oneDNN calls and restore
 * the caller's value after, so oneDNN uses exactly the session's threads (primitives size their
 * scratch by the count seen at creation, which is why prepare sets it too).
 *
 * Gemm: Y = alpha * op(A) op(B) + beta * C. transA/transB are strides of the operand
 * descriptors, alpha an output scale. C becomes the matmul bias (beta * C, computed once) when it
 * is a constant row vector and alpha is 1; otherwise it is copied into Y, broadcast, before the
 * primitive runs, and a sum post-op adds beta * Y to the product.
 *
 * Conv: two variants per node. "dnnl_conv" lets oneDNN choose the activation layout (NHWC or
 * blocked such as nChw16c, for its fastest kernels) and reorders src and dst on every call;
 * "dnnl_conv_nchw" keeps the plain NCHW layout anvil uses, which avoids the reorders but restricts
 * oneDNN to its NCHW kernels. Both are forcible; the one that chooses comes first: on ResNet-50's
 * 3x3 convolutions (AMD Zen 4, oneDNN 2.6 picks brgconv with NHWC activations) it is 1.25x-1.4x
 * faster on 1 thread and 1.3x-1.7x on 2 than NCHW (gemm:jit), reorders included. */
#ifdef ANVIL_HAVE_DNNL

#include "dnnl_impl.h"
#include "kernels/cpu/data/layout_blocked.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static bool matmul_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const ir_node *n = kn->node;
    if (kn->n_in < 2 || kn->n_out < 1 || !vk_all_static_f32(kn, 2)) return false;
    if (n->op == IR_OP_GEMM) {
        vk_mm g;
        if (kn->in[0].shape.rank != 2 || kn->in[1].shape.rank != 2) return false;
        if (vk_gemm_geometry(kn, &g) != ANVIL_OK) return false;
        return !g.has_c || kn->in[2].shape.rank <= 2;
    }
    int ra = kn->in[0].shape.rank, rb = kn->in[1].shape.rank;
    /* oneDNN's matmul takes up to DNNL_MAX_NDIMS dims; batch dims are not merged here. */
    return ra >= 1 && rb >= 1 && kn->out[0].shape.rank + 2 <= DNNL_MAX_NDIMS;
}

/* MatMul with batch dims that do not fold: an N-D matmul where every operand has the output's
 * rank (leading 1s added, 1-D operands promoted), broadcast dims of size 1. */
static void matmul_nd_dims(const kern_node *kn, int *rank, int64_t *ad, int64_t *bd, int64_t *yd) {
    const ir_shape *a = &kn->in[0].shape, *b = &kn->in[1].shape, *y = &kn->out[0].shape;
    int batch_rank = y->rank - (a->rank >= 2) - (b->rank >= 2);
    int r = batch_rank + 2;
    for (int i = 0; i < batch_rank; i++) {
        int ia = i - (batch_rank - (a->rank - 2)), ib = i - (batch_rank - (b->rank - 2));
        ad[i] = ia >= 0 ? a->d[ia] : 1;
        bd[i] = ib >= 0 ? b->d[ib] : 1;
        yd[i] = y->d[i];
    }
    int64_t m = a->rank >= 2 ? a->d[a->rank - 2] : 1, k = a->d[a->rank - 1];
    int64_t n = b->rank >= 2 ? b->d[b->rank - 1] : 1;
    ad[r - 2] = m;
    ad[r - 1] = k;
    bd[r - 2] = k;
    bd[r - 1] = n;
    yd[r - 2] = m;
    yd[r - 1] = n;
    *rank = r;
}

static anvil_status matmul_prepare(const kern_node *kn, void **state) {
    const ir_node *n = kn->node;
    dk_state *s;
    CORE_TRY(vendor_dnnl_state_new(kn, &s));
    anvil_status st = ANVIL_OK;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    int saved = vendor_dnnl_threads_set(s->threads);
    s->is_gemm = n->op == IR_OP_GEMM;
    if (s->is_gemm) {
        if ((st = vk_gemm_geometry(kn, &s->g)) != ANVIL_OK) goto done;
    } else {
        vk_matmul_geometry(kn, &s->g);
    }
    const vk_mm *g = &s->g;
    if (g->m == 0 || g->n == 0 || g->k == 0) {
        s->trivial = true;
        goto done;
    }
    dnnl_memory_desc_t a_md, b_user_md, b_md, y_md;
    memset(&b_user_md, 0, sizeof b_user_md);
    const op_tinfo *bt = &kn->in[1];
    dnnl_status_t ds = dnnl_success;
    if (!s->is_gemm && !g->fold) {
        int r;
        int64_t ad[DNNL_MAX_NDIMS], bd[DNNL_MAX_NDIMS], yd[DNNL_MAX_NDIMS];
        matmul_nd_dims(kn, &r, ad, bd, yd);
        ds = vendor_dnnl_md_plain(&a_md, r, ad);
        if (ds == dnnl_success) ds = vendor_dnnl_md_plain(&b_user_md, r, bd);
        if (ds == dnnl_success) ds = vendor_dnnl_md_plain(&y_md, r, yd);
        b_md = b_user_md;
        if (ds != dnnl_success) {
            st = vendor_dnnl_fail(n, "describing the operands", ds);
            goto done;
        }
    } else {
        bool ta = s->is_gemm && g->trans_a, tb = s->is_gemm && g->trans_b;
        ds = vendor_dnnl_md_matrix(&a_md, g->m, g->k, ta);
        if (ds == dnnl_success) ds = vendor_dnnl_md_matrix(&b_user_md, g->k, g->n, tb);
        if (ds == dnnl_success) ds = vendor_dnnl_md_matrix(&y_md, g->m, g->n, false);
        /* Constant weights: let oneDNN pick their layout; they are reordered below, once. */
        b_md = b_user_md;
        if (ds == dnnl_success && bt->value)
            ds = vendor_dnnl_md_any(&b_md, 2, (int64_t[]){g->k, g->n});
        if (ds != dnnl_success) {
            st = vendor_dnnl_fail(n, "describing the operands", ds);
            goto done;
        }
    }
    if ((ds = vendor_dnnl_lib.dnnl_primitive_attr_create(&attr)) != dnnl_success) {
        st = vendor_dnnl_fail(n, "creating attributes", ds);
        goto done;
    }
    dnnl_memory_desc_t bias_md;
    if (s->is_gemm) {
        if (g->alpha != 1.0f)
            ds = vendor_dnnl_lib.dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g->alpha);
        bool use_c = g->has_c && g->beta != 0.0f;
        const op_tinfo *ct = use_c ? &kn->in[2] : NULL;
        if (ds == dnnl_success && use_c && ct->value && g->c_rows == 1 && g->alpha == 1.0f) {
            /* A constant row: the bias, beta * C over the N columns. */
            float *bias = core_aligned_alloc(64, (size_t)g->n * sizeof(float));
            if (!bias) {
                st = ANVIL_ERR_OUT_OF_MEMORY;
                goto done;
            }
            vk_broadcast_c(bias, 1, g->n, ct->value, 1, g->c_cols, g->beta);
            s->bias_packed = bias;
            s->has_bias = true;
            ds = vendor_dnnl_md_matrix(&bias_md, 1, g->n, false);
        } else if (ds == dnnl_success && use_c) {
            s->c_in_dst = true;
            if ((ds = vendor_dnnl_lib.dnnl_post_ops_create(&ops)) == dnnl_success)
                ds = vendor_dnnl_lib.dnnl_post_ops_append_sum(ops, g->beta);
            if (ds == dnnl_success)
                ds = vendor_dnnl_lib.dnnl_primitive_attr_set_post_ops(attr, ops);
        }
        if (ds != dnnl_success) {
            st = vendor_dnnl_fail(n, "setting alpha/beta/C", ds);
            goto done;
        }
    }
    dnnl_matmul_desc_t desc;
    ds = vendor_dnnl_lib.dnnl_matmul_desc_init(&desc, &a_md, &b_md, s->has_bias ? &bias_md : NULL,
                                               &y_md);
    if (ds != dnnl_success) {
        st = vendor_dnnl_fail(n, "describing the matmul", ds);
        goto done;
    }
    st = vendor_dnnl_finish_prepare(n, s, &desc, attr, NULL, &b_user_md,
                                    (s->is_gemm || g->fold) && bt->value ? bt->value : NULL);
done:
    vendor_dnnl_threads_restore(saved, s->threads);
    if (ops) vendor_dnnl_lib.dnnl_post_ops_destroy(ops);
    if (attr) vendor_dnnl_lib.dnnl_primitive_attr_destroy(attr);
    if (st != ANVIL_OK) {
        vendor_dnnl_state_release(s);
        return st;
    }
    *state = s;
    return ANVIL_OK;
}

static anvil_status matmul_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n_out;
    (void)workspace;
    (void)ctx;
    dk_state *s = state;
    const vk_mm *g = &s->g;
    op_tensor *y = out[0];
    const op_tensor *c = s->is_gemm && g->has_c && n_in > 2 ? in[2] : NULL;
    if (s->trivial) {
        if (g->m == 0 || g->n == 0) return ANVIL_OK;
        if (s->is_gemm) {
            vk_gemm_k0(g, c, y);
        } else {
            size_t items = g->fold ? 1 : (size_t)g->batch;
            memset(y->data, 0, items * (size_t)(g->m * g->n) * sizeof(float));
        }
        return ANVIL_OK;
    }
    if (s->c_in_dst) vk_broadcast_c(y->data, g->m, g->n, c->data, g->c_rows, g->c_cols, 1.0f);
    dk_exec_arg a[4] = {{DNNL_ARG_SRC, &s->src_md, in[0]->data},
                        {DNNL_ARG_WEIGHTS, &s->wei_md, s->wei_packed ? s->wei_packed : in[1]->data},
                        {DNNL_ARG_DST, &s->dst_md, y->data},
                        {DNNL_ARG_BIAS, &s->bias_md, s->bias_packed}};
    int saved = vendor_dnnl_threads_set(s->threads);
    anvil_status st = vendor_dnnl_execute(n, s->stream, s->prim, a, s->has_bias ? 4 : 3);
    vendor_dnnl_threads_restore(saved, s->threads);
    return st;
}

/* ---- dnnl_conv: Conv ------------------------------------------------------------------------ */

/* The geometry of a Conv node, oneDNN's way (dilation 0 = none). */
typedef struct conv_geom {
    int nsp;
    int64_t group;
    dnnl_dims_t strides, dilates, pad_l, pad_r;
} conv_geom;

static bool conv_geometry(const kern_node *kn, conv_geom *cg) {
    const ir_node *n = kn->node;
    const ir_shape *x = &kn->in[0].shape, *w = &kn->in[1].shape, *y = &kn->out[0].shape;
    memset(cg, 0, sizeof *cg);
    cg->nsp = x->rank - 2;
    if (cg->nsp < 1 || cg->nsp > 3 || w->rank != x->rank || y->rank != x->rank) return false;
    const int64_t *strides = NULL, *dil = NULL, *pads = NULL;
    size_t ns = 0, nd = 0, np = 0;
    const char *auto_pad = "NOTSET";
    if (ir_attr_int(n, "group", 1, &cg->group) != ANVIL_OK ||
        ir_attr_ints(n, "strides", &strides, &ns) != ANVIL_OK ||
        ir_attr_ints(n, "dilations", &dil, &nd) != ANVIL_OK ||
        ir_attr_ints(n, "pads", &pads, &np) != ANVIL_OK ||
        ir_attr_string(n, "auto_pad", "NOTSET", &auto_pad) != ANVIL_OK)
        return false;
    if ((ns && ns != (size_t)cg->nsp) || (nd && nd != (size_t)cg->nsp) ||
        (np && np != 2 * (size_t)cg->nsp))
        return false;
    bool same_upper = !strcmp(auto_pad, "SAME_UPPER"), same_lower = !strcmp(auto_pad, "SAME_LOWER");
    bool notset = !strcmp(auto_pad, "NOTSET") || !*auto_pad;
    for (int d = 0; d < cg->nsp; d++) {
        int64_t in = x->d[2 + d], k = w->d[2 + d], out = y->d[2 + d];
        int64_t s = ns ? strides[d] : 1, dl = nd ? dil[d] : 1;
        int64_t span = (k - 1) * dl + 1;
        cg->strides[d] = s;
        cg->dilates[d] = dl - 1;
        if (same_upper || same_lower) {
            int64_t total = (out - 1) * s + span - in;
            if (total < 0) total = 0;
            cg->pad_l[d] = same_upper ? total / 2 : total - total / 2;
        } else if (notset && np) {
            cg->pad_l[d] = pads[d];
        }
        /* The right pad that makes oneDNN's output size formula give `out` exactly: the ONNX
         * end pad less what ONNX's floor division drops. */
        cg->pad_r[d] = (out - 1) * s + span - in - cg->pad_l[d];
        /* Negative: the input's tail is never read; no pad gives the same output size. */
        if (cg->pad_r[d] < 0) cg->pad_r[d] = 0;
    }
    return true;
}

static bool conv_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    if (kn->n_in < 2 || kn->n_out < 1 || !vk_all_static_f32(kn, 2)) return false;
    conv_geom cg;
    if (!conv_geometry(kn, &cg)) return false;
    const ir_shape *x = &kn->in[0].shape, *w = &kn->in[1].shape;
    if (cg.group < 1 || x->d[1] < 1 || w->d[0] < 1 || w->d[0] % cg.group) return false;
    for (int d = 0; d < cg.nsp; d++)
        if (x->d[2 + d] < 1 || w->d[2 + d] < 1) return false;
    return true;
}

/* Whether md lays out [N, C, spatial...] plainly with the spatial dims dense (pixel stride 1):
 * its pixels per channel, batch and channel strides. */
static bool md_plain_planes(const dnnl_memory_desc_t *md, int64_t *hw, size_t *sn, size_t *sc) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (md->format_kind != dnnl_blocked || b->inner_nblks != 0 || md->offset0 != 0 ||
        md->ndims < 3 || b->strides[md->ndims - 1] != 1)
        return false;
    int64_t plane = 1;
    for (int i = md->ndims - 1; i >= 2; i--) {
        if (b->strides[i] != plane) return false;
        plane *= md->dims[i];
    }
    *hw = plane;
    *sn = (size_t)b->strides[0];
    *sc = (size_t)b->strides[1];
    return true;
}

/* The channel block (8 or 16) of md when it is [N][C/blk][spatial...][blk] with the spatial dims
 * dense and unpadded, with its batch and channel-block strides; else 0. */
static int md_channel_blocked(const dnnl_memory_desc_t *md, size_t *sn, size_t *scb) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (md->format_kind != dnnl_blocked || b->inner_nblks != 1 || b->inner_idxs[0] != 1 ||
        (b->inner_blks[0] != 8 && b->inner_blks[0] != 16) || md->offset0 != 0 || md->ndims < 3)
        return 0;
    int64_t step = b->inner_blks[0];
    for (int i = md->ndims - 1; i >= 2; i--) {
        if (b->strides[i] != step || md->padded_dims[i] != md->dims[i]) return 0;
        step *= md->dims[i];
    }
    *sn = (size_t)b->strides[0];
    *scb = (size_t)b->strides[1];
    return (int)b->inner_blks[0];
}

/* Whether anvil can run the reorder between plain and blocked (md_plain_planes and
 * md_channel_blocked of the same tensor): *o filled, else o->blk stays 0. */
static bool own_reorder_of(const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *blocked,
                           dk_own_reorder *o) {
    dk_own_reorder r = {.n = blocked->dims[0], .c = blocked->dims[1]};
    if (plain->data_type != dnnl_f32 || !md_plain_planes(plain, &r.hw, &r.plain_n, &r.plain_c) ||
        !(r.blk = md_channel_blocked(blocked, &r.blk_n, &r.blk_cb)))
        return false;
    *o = r;
    return true;
}

/* A bf16 part's activation reorders: anvil's (data_nchw_to_bf16_blocked and back) where
 * the primitive's layouts are channel blockings of the plain ones; oneDNN's otherwise. */
static void conv_own_reorders(dk_state *s) {
    if (s->src_reorder && s->src_md.data_type == dnnl_bf16 &&
        own_reorder_of(&s->src_user_md, &s->src_md, &s->src_own))
        /* the channels past C in the last block: zero once, never written again */
        memset(s->src_tmp, 0, vendor_dnnl_lib.dnnl_memory_desc_get_size(&s->src_md));
    if (s->dst_reorder && s->dst_md.data_type == dnnl_f32)
        (void)own_reorder_of(&s->dst_user_md, &s->dst_md, &s->dst_own);
}

/* Prepares the part of kn's convolution that computes units [u0, u0 + un) as one primitive on
 * `threads` OpenMP threads. A unit is a group when the node has groups (its input and output
 * channels), else one output channel (all the input). The whole node is units [0, units(kn)).
 * Activations, weights and bias are slices of the node's, at the offsets the state records.
 * own_scratch: the primitive gets a scratchpad of its own, for parts that run at the same time
 * (oneDNN's shared one is not made for that: concurrent parts crashed in it). bf16: oneDNN reads
 * the activations (blocked) and the weights as bf16, rounded to nearest even as anvil's bf16
 * variants round them, and accumulates and writes fp32. */
static anvil_status conv_prepare_part(const kern_node *kn, bool blocked, int threads, int64_t u0,
                                      int64_t un, bool own_scratch, bool bf16, dk_state **out) {
    const ir_node *n = kn->node;
    dk_state *s;
    CORE_TRY(vendor_dnnl_state_new(kn, &s));
    s->threads = threads;
    anvil_status st = ANVIL_OK;
    int saved = vendor_dnnl_threads_set(s->threads);
    conv_geom cg;
    (void)conv_geometry(kn, &cg);
    const ir_shape *xs = &kn->in[0].shape, *ws = &kn->in[1].shape, *ys = &kn->out[0].shape;
    int rank = xs->rank;
    if (xs->d[0] == 0 || un == 0) {
        s->trivial = true;
        goto done;
    }
    bool grouped = cg.group > 1;
    /* input and output channels per unit; a unit of a group-1 node reads all input channels */
    int64_t cpu = grouped ? xs->d[1] / cg.group : 0, mpu = grouped ? ws->d[0] / cg.group : 1;
    int64_t xd[DNNL_MAX_NDIMS], yd[DNNL_MAX_NDIMS], wd[DNNL_MAX_NDIMS];
    int64_t xplane = 1, yplane = 1, wunit = mpu;
    for (int i = 0; i < rank; i++) {
        xd[i] = xs->d[i];
        yd[i] = ys->d[i];
        if (i >= 2) xplane *= xs->d[i], yplane *= ys->d[i];
        if (i >= 1) wunit *= ws->d[i];
    }
    if (grouped) xd[1] = un * cpu;
    yd[1] = un * mpu;
    s->x_off = (size_t)(u0 * cpu * xplane);
    s->y_off = (size_t)(u0 * mpu * yplane);
    s->w_off = (size_t)(u0 * wunit);
    s->b_off = (size_t)(u0 * mpu);
    /* Weights: M x C/G x k... , or G x M/G x C/G x k... with groups. */
    int wrank = rank;
    if (grouped) {
        wd[0] = un;
        wd[1] = mpu;
        for (int i = 1; i < rank; i++) wd[i + 1] = ws->d[i];
        wrank = rank + 1;
    } else {
        for (int i = 0; i < rank; i++) wd[i] = ws->d[i];
        wd[0] = un;
    }
    dnnl_memory_desc_t x_md, w_user_md, w_md, y_md, b_md;
    memset(&w_user_md, 0, sizeof w_user_md);
    dnnl_status_t ds = vendor_dnnl_md_slice(&s->src_user_md, rank, xd, xs->d);
    if (ds == dnnl_success) ds = vendor_dnnl_md_slice(&s->dst_user_md, rank, yd, ys->d);
    if (ds == dnnl_success) ds = vendor_dnnl_md_plain(&w_user_md, wrank, wd);
    x_md = s->src_user_md;
    y_md = s->dst_user_md;
    w_md = w_user_md;
    const dnnl_data_type_t op_dt = bf16 ? dnnl_bf16 : dnnl_f32;
    if (ds == dnnl_success && blocked) ds = vendor_dnnl_md_any_as(&x_md, rank, xd, op_dt);
    if (ds == dnnl_success && blocked) ds = vendor_dnnl_md_any(&y_md, rank, yd);
    if (ds == dnnl_success && kn->in[1].value) ds = vendor_dnnl_md_any_as(&w_md, wrank, wd, op_dt);
    s->has_bias = kn->n_in > 2 && n->n_inputs > 2 && n->inputs[2] != IR_NONE;
    int64_t bn = un * mpu;
    if (ds == dnnl_success && s->has_bias) ds = vendor_dnnl_md_plain(&b_md, 1, &bn);
    if (ds != dnnl_success) {
        st = vendor_dnnl_fail(n, "describing the operands", ds);
        goto done;
    }
    dnnl_convolution_desc_t desc;
    ds = vendor_dnnl_lib.dnnl_dilated_convolution_forward_desc_init(
        &desc, dnnl_forward_inference, dnnl_convolution_direct, &x_md, &w_md,
        s->has_bias ? &b_md : NULL, &y_md, cg.strides, cg.dilates, cg.pad_l, cg.pad_r);
    if (ds != dnnl_success) {
        st = vendor_dnnl_fail(n, "describing the convolution", ds);
        goto done;
    }
    const float *wv = kn->in[1].value ? (const float *)kn->in[1].value + s->w_off : NULL;
    dnnl_primitive_attr_t attr = NULL;
    if (own_scratch || bf16) {
        ds = vendor_dnnl_lib.dnnl_primitive_attr_create(&attr);
        if (ds == dnnl_success && own_scratch)
            ds = vendor_dnnl_lib.dnnl_primitive_attr_set_scratchpad_mode(attr,
                                                                         dnnl_scratchpad_mode_user);
        if (ds == dnnl_success && bf16)
            ds = vendor_dnnl_lib.dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_bf16);
        if (ds != dnnl_success) {
            if (attr) vendor_dnnl_lib.dnnl_primitive_attr_destroy(attr);
            st = vendor_dnnl_fail(n, "creating attributes", ds);
            goto done;
        }
    }
    st = vendor_dnnl_finish_prepare(n, s, &desc, attr, NULL, &w_user_md, wv);
    if (attr) vendor_dnnl_lib.dnnl_primitive_attr_destroy(attr);
    if (st != ANVIL_OK) goto done;
    /* The primitive may still take plain activations even when allowed to choose. */
    dnnl_primitive_desc_t pd = NULL;
    if (!vendor_dnnl_lib.dnnl_memory_desc_equal(&s->src_md, &s->src_user_md)) {
        ds = vendor_dnnl_lib.dnnl_reorder_primitive_desc_create(
            &pd, &s->src_user_md, vendor_dnnl_engine, &s->src_md, vendor_dnnl_engine, NULL);
        if (ds == dnnl_success) ds = vendor_dnnl_lib.dnnl_primitive_create(&s->src_reorder, pd);
        if (pd) vendor_dnnl_lib.dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        if (ds == dnnl_success && !(s->src_tmp = vendor_dnnl_alloc_md(&s->src_md))) {
            st = ANVIL_ERR_OUT_OF_MEMORY;
            goto done;
        }
    }
    if (ds == dnnl_success &&
        !vendor_dnnl_lib.dnnl_memory_desc_equal(&s->dst_md, &s->dst_user_md)) {
        ds = vendor_dnnl_lib.dnnl_reorder_primitive_desc_create(
            &pd, &s->dst_md, vendor_dnnl_engine, &s->dst_user_md, vendor_dnnl_engine, NULL);
        if (ds == dnnl_success) ds = vendor_dnnl_lib.dnnl_primitive_create(&s->dst_reorder, pd);
        if (pd) vendor_dnnl_lib.dnnl_primitive_desc_destroy(pd);
        if (ds == dnnl_success && !(s->dst_tmp = vendor_dnnl_alloc_md(&s->dst_md))) {
            st = ANVIL_ERR_OUT_OF_MEMORY;
            goto done;
        }
    }
    if (ds != dnnl_success) st = vendor_dnnl_fail(n, "creating the activation reorders", ds);
    if (st == ANVIL_OK && bf16) conv_own_reorders(s);
done:
    vendor_dnnl_threads_restore(saved, s->threads);
    if (st != ANVIL_OK) {
        vendor_dnnl_state_release(s);
        return st;
    }
    *out = s;
    return ANVIL_OK;
}

/* The units conv_prepare_part counts: groups, or output channels without groups. */
static int64_t conv_units(const kern_node *kn, const conv_geom *cg) {
    return cg->group > 1 ? cg->group : kn->in[1].shape.d[0];
}

static anvil_status conv_prepare_whole(const kern_node *kn, void **state, bool blocked) {
    conv_geom cg;
    (void)conv_geometry(kn, &cg);
    return conv_prepare_part(kn, blocked, kn->threads > 0 ? kn->threads : 1, 0, conv_units(kn, &cg),
                             false, false, (dk_state **)state);
}

static anvil_status conv_prepare_blocked(const kern_node *kn, void **state) {
    return conv_prepare_whole(kn, state, true);
}

static anvil_status conv_prepare_nchw(const kern_node *kn, void **state) {
    return conv_prepare_whole(kn, state, false);
}

/* Runs one prepared part (conv_prepare_part) on the current thread's OpenMP setting. */
static anvil_status conv_run_part(const ir_node *n, const dk_state *s, const op_tensor *const *in,
                                  op_tensor *const *out) {
    if (s->trivial) return ANVIL_OK;
    const float *x = (const float *)in[0]->data + s->x_off;
    float *yuser = (float *)out[0]->data + s->y_off;
    void *y = s->dst_reorder ? s->dst_tmp : yuser;
    int saved = vendor_dnnl_threads_set(s->threads);
    anvil_status st = ANVIL_OK;
    const void *src = x;
    const dk_own_reorder *so = &s->src_own, *yo = &s->dst_own;
    if (so->blk) {
        data_nchw_to_bf16_blocked(x, so->n, so->c, so->hw, so->plain_n, so->plain_c, s->src_tmp,
                                  so->blk, so->blk_n, so->blk_cb);
        src = s->src_tmp;
    } else if (s->src_reorder) {
        dk_exec_arg r[2] = {{DNNL_ARG_FROM, &s->src_user_md, x},
                            {DNNL_ARG_TO, &s->src_md, s->src_tmp}};
        st = vendor_dnnl_execute(n, s->stream, s->src_reorder, r, 2);
        src = s->src_tmp;
    }
    if (st == ANVIL_OK) {
        const float *w = s->wei_packed ? s->wei_packed : (const float *)in[1]->data + s->w_off;
        dk_exec_arg a[5] = {{DNNL_ARG_SRC, &s->src_md, src},
                            {DNNL_ARG_WEIGHTS, &s->wei_md, w},
                            {DNNL_ARG_DST, &s->dst_md, y}};
        int na = 3;
        if (s->has_bias)
            a[na++] =
                (dk_exec_arg){DNNL_ARG_BIAS, &s->bias_md, (const float *)in[2]->data + s->b_off};
        if (s->scratch) a[na++] = (dk_exec_arg){DNNL_ARG_SCRATCHPAD, &s->scratch_md, s->scratch};
        st = vendor_dnnl_execute(n, s->stream, s->prim, a, na);
    }
    if (st == ANVIL_OK && yo->blk) {
        data_blocked_to_nchw_f32(y, yo->n, yo->c, yo->hw, yo->blk, yo->blk_n, yo->blk_cb, yuser,
                                 yo->plain_n, yo->plain_c);
    } else if (st == ANVIL_OK && s->dst_reorder) {
        dk_exec_arg r[2] = {{DNNL_ARG_FROM, &s->dst_md, y}, {DNNL_ARG_TO, &s->dst_user_md, yuser}};
        st = vendor_dnnl_execute(n, s->stream, s->dst_reorder, r, 2);
    }
    vendor_dnnl_threads_restore(saved, s->threads);
    return st;
}

static anvil_status conv_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)workspace;
    (void)ctx;
    return conv_run_part(n, state, in, out);
}

/* ---- dnnl_conv_split: a Conv split across anvil's threads, one oneDNN primitive each
 *
 * oneDNN parallelizes a convolution with OpenMP, whose team costs a wake-up per call that small
 * convolutions do not earn back (see conv_variants.c, rule_grouped). Here each of anvil's pool
 * threads runs its own share of the node as a one-thread primitive: a share of the groups, or
 * without groups a share of the output channels (in blocks of 16, oneDNN's widest channel
 * block). Either is a contiguous slice of NCHW activations and of the weights, so the parts need
 * no copies; a group-1 node's parts each read (and reorder) the whole input. */

typedef struct split_state {
    int parts;
    dk_state *part[]; /* owned */
} split_state;

static void split_release(void *p) {
    split_state *g = p;
    if (!g) return;
    for (int i = 0; i < g->parts; i++) vendor_dnnl_state_release(g->part[i]);
    free(g);
}

static anvil_status split_prepare_as(const kern_node *kn, bool bf16, void **state) {
    conv_geom cg;
    (void)conv_geometry(kn, &cg);
    int64_t units = conv_units(kn, &cg), block = cg.group > 1 ? 1 : 16;
    int64_t blocks = (units + block - 1) / block;
    int64_t parts = kn->threads > 1 ? kn->threads : 1;
    if (parts > blocks) parts = blocks;
    if (parts < 1) parts = 1;
    split_state *g = core_calloc(1, sizeof *g + (size_t)parts * sizeof g->part[0]);
    if (!g) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int64_t p = 0; p < parts; p++) {
        int64_t u0 = blocks * p / parts * block, u1 = blocks * (p + 1) / parts * block;
        if (u1 > units) u1 = units;
        anvil_status st = conv_prepare_part(kn, true, 1, u0, u1 - u0, true, bf16, &g->part[p]);
        if (st != ANVIL_OK) {
            split_release(g);
            return st;
        }
        g->parts = (int)p + 1;
    }
    *state = g;
    return ANVIL_OK;
}

static anvil_status split_prepare(const kern_node *kn, void **state) {
    return split_prepare_as(kn, false, state);
}

/* bf16 operands need the weights converted when the primitive is made: constant weights only
 * (a training graph's weights are inputs, and oneDNN has no conv of bf16 activations with fp32
 * weights; such a node keeps dnnl_conv_split). */
static bool split_supports_bf16(const kern_node *kn, const core_hw *hw) {
    return conv_supports(kn, hw) && kn->in[1].value;
}

static anvil_status split_prepare_bf16(const kern_node *kn, void **state) {
    return split_prepare_as(kn, true, state);
}

typedef struct split_job {
    const ir_node *n;
    const split_state *g;
    const op_tensor *const *in;
    op_tensor *const *out;
    _Atomic int failed; /* an anvil_status, the first non-OK one */
    /* its message: errors are per thread, and a part may fail on a pool worker */
    char msg[512];
} split_job;

static void split_chunk(void *arg, size_t begin, size_t end) {
    split_job *j = arg;
    for (size_t p = begin; p < end; p++) {
        anvil_status st = conv_run_part(j->n, j->g->part[p], j->in, j->out);
        int ok = ANVIL_OK;
        if (st != ANVIL_OK && atomic_compare_exchange_strong(&j->failed, &ok, (int)st))
            snprintf(j->msg, sizeof j->msg, "%s", core_err_message());
    }
}

static anvil_status split_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)workspace;
    const split_state *g = state;
    split_job j = {n, g, in, out, ANVIL_OK, ""};
    op_parallel_for(ctx, (size_t)g->parts, split_chunk, &j);
    const anvil_status st = (anvil_status)atomic_load(&j.failed);
    return st == ANVIL_OK ? ANVIL_OK : core_err(st, "%s", j.msg);
}

/* ---- the variants ---------------------------------------------------------------------------- */

const kern_variant vendor_dnnl_matmul = {"dnnl_matmul",
                                         IR_OP_MATMUL,
                                         KERN_OWN_THREADS,
                                         matmul_supports,
                                         NULL,
                                         matmul_prepare,
                                         vendor_dnnl_state_release,
                                         matmul_run,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL};
const kern_variant vendor_dnnl_gemm = {"dnnl_matmul",
                                       IR_OP_GEMM,
                                       KERN_OWN_THREADS,
                                       matmul_supports,
                                       NULL,
                                       matmul_prepare,
                                       vendor_dnnl_state_release,
                                       matmul_run,
                                       NULL,
                                       NULL,
                                       NULL,
                                       NULL};
const kern_variant vendor_dnnl_conv = {"dnnl_conv",
                                       IR_OP_CONV,
                                       KERN_OWN_THREADS,
                                       conv_supports,
                                       NULL,
                                       conv_prepare_blocked,
                                       vendor_dnnl_state_release,
                                       conv_run,
                                       NULL,
                                       NULL,
                                       NULL,
                                       NULL};
const kern_variant vendor_dnnl_conv_split = {
    "dnnl_conv_split", IR_OP_CONV, 0,    conv_supports, NULL, split_prepare,
    split_release,     split_run,  NULL, NULL,          NULL, NULL};
/* The same on bf16 operands, for sessions that accept bf16: oneDNN reads the activations (one
 * reorder per run, fp32 to bf16, with its blocking) and the weights (converted once) as bf16 and
 * writes fp32. Its fpmath mode alone changed nothing (Debian's oneDNN 2.6, Zen 4: it keeps its fp32
 * kernel for an fp32 primitive); given bf16 memory it takes its bf16 kernel. The cascade's choice
 * for narrow groups under bf16 (conv_variants.c's rule_grouped). */
const kern_variant vendor_dnnl_conv_split_bf16 = {"dnnl_conv_split_bf16",
                                                  IR_OP_CONV,
                                                  KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 |
                                                      KERN_ROUNDS_BF16 | KERN_BF16_BEST_ISA,
                                                  split_supports_bf16,
                                                  NULL,
                                                  split_prepare_bf16,
                                                  split_release,
                                                  split_run,
                                                  NULL,
                                                  NULL,
                                                  NULL,
                                                  NULL};
const kern_variant vendor_dnnl_conv_nchw = {"dnnl_conv_nchw",
                                            IR_OP_CONV,
                                            KERN_OWN_THREADS,
                                            conv_supports,
                                            NULL,
                                            conv_prepare_nchw,
                                            vendor_dnnl_state_release,
                                            conv_run,
                                            NULL,
                                            NULL,
                                            NULL,
                                            NULL};

#endif
