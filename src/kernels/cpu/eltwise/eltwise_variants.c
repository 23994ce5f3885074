/* The eltwise family: vectorized fp32 activations, Add/Sub/Mul/Div, Softmax/LogSoftmax,
 * LayerNormalization, BatchNormalization, Max/Average/GlobalAveragePool and Transpose, each as
 * "<op>_avx512" and "<op>_avx2" variants.
 *
 * This file is baseline code: it reads attributes, decides in prepare what the node reduces to
 * (a folded broadcast, rows of a given length, a pooling geometry, a canonical permutation) as
 * an elt_state, and runs it through elt_run (eltwise_run.c, which splits the work across threads
 * and which `anvil compile`'s libraries share); the arithmetic lives in the per-ISA tables of
 * eltwise.h. A
 * variant's supports() says whether it computes the node exactly as the reference does; every
 * other case (other dtypes, broadcasts, axes, permutations, MaxPool's Indices, ...) stays with
 * the reference. Ops that need a vector exp/tanh/erf/log1p exist only with SLEEF.
 *
 * Pooling geometry comes from ops/nn_common.h, the helper the reference pooling kernels use, so
 * that auto_pad, ceil_mode and pads resolve identically. */
#include "eltwise.h"
#include "kernels/cpu/family.h"
#include "kernels/fusion.h"
#include "kernels/kernels.h"
#include "ops/nn_common.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(IR_MAX_RANK <= ELT_MAX_RANK, "elt_state's folded dims hold any rank");

/* The ops as this file groups them: each kind has one supports, prepare and run path. */
static elt_kind kind_of(ir_op op) {
    switch (op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
        return ELT_K_BINARY;
    case IR_OP_SOFTMAX:
    case IR_OP_LOGSOFTMAX:
        return ELT_K_SOFTMAX;
    case IR_OP_LAYERNORMALIZATION:
        return ELT_K_LAYERNORM;
    case IR_OP_BATCHNORMALIZATION:
        return ELT_K_BATCHNORM;
    case IR_OP_MAXPOOL:
    case IR_OP_AVERAGEPOOL:
        return ELT_K_POOL;
    case IR_OP_GLOBALAVERAGEPOOL:
        return ELT_K_GAP;
    case IR_OP_TRANSPOSE:
        return ELT_K_TRANSPOSE;
    default:
        return ELT_K_UNARY;
    }
}

/* ---- unary -------------------------------------------------------------------------------- */

static bool unary_kind(const ir_node *n, elt_unary_kind *k) {
    switch (n->op) {
    case IR_OP_RELU:
        *k = ELT_RELU;
        return true;
    case IR_OP_LEAKYRELU:
        *k = ELT_LEAKYRELU;
        return true;
    case IR_OP_CLIP:
        *k = ELT_CLIP;
        return true;
    case IR_OP_HARDSIGMOID:
        *k = ELT_HARDSIGMOID;
        return true;
    case IR_OP_HARDSWISH:
        *k = ELT_HARDSWISH;
        return true;
    case IR_OP_SIGMOID:
        *k = ELT_SIGMOID;
        return true;
    case IR_OP_TANH:
        *k = ELT_TANH;
        return true;
    case IR_OP_ERF:
        *k = ELT_ERF;
        return true;
    case IR_OP_EXP:
        *k = ELT_EXP;
        return true;
    case IR_OP_SOFTPLUS:
        *k = ELT_SOFTPLUS;
        return true;
    case IR_OP_GELU: {
        const char *approx = "none";
        if (ir_attr_string(n, "approximate", "none", &approx) != ANVIL_OK) return false;
        *k = strcmp(approx, "tanh") == 0 ? ELT_GELU_TANH : ELT_GELU;
        return true;
    }
    default:
        return false;
    }
}

static bool unary_supports(const kern_node *kn) {
    elt_unary_kind k;
    if (!unary_kind(kn->node, &k) || !kfam_f32_static(&kn->in[0]) || !kfam_f32_static(&kn->out[0]))
        return false;
    /* Clip's bounds (opset >= 11) are scalar inputs of X's dtype */
    for (int i = 1; i < kn->n_in; i++)
        if (kern_has_input(kn, i) && kn->in[i].dtype != ANVIL_DTYPE_FLOAT32) return false;
    return true;
}

static anvil_status unary_prepare(const kern_node *kn, elt_state *s) {
    const ir_node *n = kn->node;
    unary_kind(n, &s->uk);
    s->a = 0.0f;
    s->b = 0.0f;
    switch (n->op) {
    case IR_OP_LEAKYRELU:
        return ir_attr_float(n, "alpha", 0.01f, &s->a);
    case IR_OP_HARDSIGMOID:
        CORE_TRY(ir_attr_float(n, "alpha", 0.2f, &s->a));
        return ir_attr_float(n, "beta", 0.5f, &s->b);
    case IR_OP_CLIP:
        s->a = -INFINITY;
        s->b = INFINITY;
        if (n->opset < 11) {
            CORE_TRY(ir_attr_float(n, "min", -FLT_MAX, &s->a));
            CORE_TRY(ir_attr_float(n, "max", FLT_MAX, &s->b));
        }
        return ANVIL_OK;
    default:
        return ANVIL_OK;
    }
}

/* The run-time parameters: Clip's bounds from opset 11 are inputs. */
static anvil_status unary_params(const ir_node *n, const elt_state *s, const op_tensor *const *in,
                                 int n_in, elt_io *io) {
    io->a = s->a;
    io->b = s->b;
    if (n->op == IR_OP_CLIP && n->opset >= 11) {
        for (int i = 1; i < n_in && i < 3; i++) {
            if (!in[i]) continue;
            if (op_tensor_numel(in[i]) != 1)
                return core_err(
                    ANVIL_ERR_RUNTIME, "%s: input %d (%s) must be one element but has %zu",
                    ir_node_label(n), i, i == 1 ? "min" : "max", op_tensor_numel(in[i]));
            *(i == 1 ? &io->a : &io->b) = *(const float *)in[i]->data;
        }
    }
    return ANVIL_OK;
}

/* ---- binary ------------------------------------------------------------------------------- */

/* Folds the broadcast of a and b onto out like the reference's iterator: size-1 output dims
 * dropped, neighbours merged while both operands keep their stride pattern. False when an
 * operand does not broadcast (inference guarantees it does) or more than 3 dims remain (the
 * patterns that matter: same shape, scalar, trailing vector, per-channel [C,1,1] are <= 3). */
static bool binary_fold(const op_tinfo *a, const op_tinfo *b, const op_tinfo *o, elt_state *s) {
    int r = o->shape.rank;
    int64_t st[2][IR_MAX_RANK];
    if (!kfam_bcast_strides(a, o, st[0]) || !kfam_bcast_strides(b, o, st[1])) return false;
    int k = 0;
    for (int d = 0; d < r; d++) {
        int64_t dim = o->shape.d[d];
        if (dim == 1) continue;
        if (k > 0 && s->sa[k - 1] == st[0][d] * dim && s->sb[k - 1] == st[1][d] * dim) {
            s->dims[k - 1] *= dim;
            s->sa[k - 1] = st[0][d];
            s->sb[k - 1] = st[1][d];
            continue;
        }
        s->dims[k] = dim;
        s->sa[k] = st[0][d];
        s->sb[k] = st[1][d];
        k++;
    }
    if (k == 0) {
        s->dims[0] = 1;
        s->sa[0] = s->sb[0] = 0;
        k = 1;
    }
    s->rank = k;
    return k <= 3;
}

static bool binary_supports(const kern_node *kn) {
    elt_state s;
    return kn->n_in >= 2 && kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->in[1]) &&
           kfam_f32_static(&kn->out[0]) && binary_fold(&kn->in[0], &kn->in[1], &kn->out[0], &s);
}

/* ---- softmax / logsoftmax ------------------------------------------------------------------ */

/* X as rows of its dims from the "axis" attribute on (default dflt, negative counts from the
 * end): rows = prod(dims[:axis]), len = prod(dims[axis:]); false on a bad attribute or axis. */
static bool rows_at_axis(const kern_node *kn, int64_t dflt, int64_t *axis, size_t *rows,
                         size_t *len) {
    const ir_shape *x = &kn->in[0].shape;
    if (ir_attr_int(kn->node, "axis", dflt, axis) != ANVIL_OK) return false;
    if (*axis < 0) *axis += x->rank;
    if (*axis < 0 || *axis >= x->rank) return false;
    *rows = 1;
    *len = 1;
    for (int d = 0; d < x->rank; d++) *(d < *axis ? rows : len) *= (size_t)x->d[d];
    return true;
}

/* Rows of the op: before opset 13 the input is [prod(dims[:axis]), prod(dims[axis:])]; from 13
 * only axis == last makes the lines contiguous. */
static bool softmax_rows(const kern_node *kn, size_t *rows, size_t *len) {
    const ir_node *n = kn->node;
    int64_t axis;
    return kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->out[0]) &&
           rows_at_axis(kn, n->opset < 13 ? 1 : -1, &axis, rows, len) &&
           (n->opset < 13 || axis == kn->in[0].shape.rank - 1);
}

/* ---- layernorm ---------------------------------------------------------------------------- */

/* Rows over axis..rank-1, with scale and bias holding exactly one element per row element (what
 * inference allows is a broadcast onto X[axis:]; the common case is the full shape). */
static bool layernorm_rows(const kern_node *kn, size_t *rows, size_t *len) {
    if (!kfam_f32_static(&kn->in[0]) || !kfam_f32_static(&kn->out[0]) || kn->n_in < 2 ||
        !kfam_f32_static(&kn->in[1]))
        return false;
    for (int i = 1; i < 3; i++)
        if (kern_has_output(kn, i)) return false; /* Mean / InvStdDev outputs: reference */
    int64_t axis;
    if (!rows_at_axis(kn, -1, &axis, rows, len)) return false;
    return kfam_numel(&kn->in[1].shape) == *len &&
           (!kern_has_input(kn, 2) ||
            (kfam_f32_static(&kn->in[2]) && kfam_numel(&kn->in[2].shape) == *len));
}

/* ---- batchnorm ---------------------------------------------------------------------------- */

static bool batchnorm_supports(const kern_node *kn) {
    const ir_node *n = kn->node;
    if (kn->n_in < 5 || !kfam_f32_static(&kn->out[0])) return false;
    for (int i = 0; i < 5; i++)
        if (!kfam_f32_static(&kn->in[i])) return false;
    if (kn->in[0].shape.rank < 2) return false;
    if (n->opset < 9) {
        int64_t spatial = 1;
        if (ir_attr_int(n, "spatial", 1, &spatial) != ANVIL_OK || spatial != 1) return false;
    }
    for (int i = 1; i < 5; i++)
        if (kfam_numel(&kn->in[i].shape) != (size_t)kn->in[0].shape.d[1]) return false;
    return true;
}

/* ---- pooling ------------------------------------------------------------------------------ */

/* The 2-D geometry of a MaxPool / AveragePool node, or false when this family does not handle it:
 * dilation other than 1 (then windows are not boxes of neighbours), a pad as large as the kernel
 * (a window could hold no real element), or MaxPool's Indices output. */
static bool pool_geometry(const kern_node *kn, elt_pool2d *g, bool *cip) {
    const ir_node *n = kn->node;
    if (!kfam_f32_static(&kn->in[0]) || !kfam_f32_static(&kn->out[0]) || kn->in[0].shape.rank != 4)
        return false;
    bool maxpool = n->op == IR_OP_MAXPOOL;
    if (maxpool && kern_has_output(kn, 1)) return false;
    nn_window w;
    if (nn_window_parse(n, true, n->opset >= (maxpool ? 10 : 19), n->opset >= 10, &w) != ANVIL_OK)
        return false;
    if (w.n_kernel != 2) return false;
    nn_geom geo;
    if (nn_window_resolve(n, &w, 2, &kn->in[0].shape.d[2], w.kernel, true, &geo) != ANVIL_OK)
        return false;
    for (int d = 0; d < 2; d++)
        if (geo.dil[d] != 1 || geo.pad_begin[d] >= geo.kernel[d] ||
            geo.pad_end[d] >= geo.kernel[d] || geo.out[d] != kn->out[0].shape.d[d + 2])
            return false;
    int64_t c = 0;
    if (!maxpool && ir_attr_int(n, "count_include_pad", 0, &c) != ANVIL_OK) return false;
    *cip = c == 1;
    g->ih = geo.in[0];
    g->iw = geo.in[1];
    g->oh = geo.out[0];
    g->ow = geo.out[1];
    g->kh = geo.kernel[0];
    g->kw = geo.kernel[1];
    g->sh = geo.stride[0];
    g->sw = geo.stride[1];
    g->pt = geo.pad_begin[0];
    g->pl = geo.pad_begin[1];
    int64_t span = (g->ow - 1) * g->sw + g->kw;
    g->row_len = span > g->pl + g->iw ? span : g->pl + g->iw;
    return true;
}

/* Taps of each output position's window along one dim that AveragePool divides by: those inside
 * the input, or with count_include_pad inside input + declared pads (never the ceil_mode
 * overhang beyond the end pad, as in the reference). Caller frees. */
static float *pool_counts(int64_t out, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t in,
                          bool cip) {
    float *cnt = malloc((size_t)(out > 0 ? out : 1) * sizeof *cnt);
    if (!cnt) return NULL;
    int64_t lo_lim = cip ? -pb : 0, hi_lim = cip ? in + pe : in;
    for (int64_t o = 0; o < out; o++) {
        int64_t lo = o * s - pb, hi = lo + k;
        if (lo < lo_lim) lo = lo_lim;
        if (hi > hi_lim) hi = hi_lim;
        cnt[o] = (float)(hi > lo ? hi - lo : 0);
    }
    return cnt;
}

/* ---- transpose ---------------------------------------------------------------------------- */

/* Reduces a permutation to its canonical form: size-1 dims dropped, input dims that stay
 * neighbours in the output merged. What is left must be the identity, a (batched) 2-D transpose
 * ([1,0], [0,2,1]) or a (batched) swap of two dims above a contiguous block ([1,0,2], [0,2,1,3]:
 * attention's [B,S,H,D] <-> [B,H,S,D]). */
static bool transpose_form(const kern_node *kn, elt_state *s) {
    const ir_node *n = kn->node;
    const ir_shape *x = &kn->in[0].shape;
    int r = x->rank;
    const int64_t *perm_attr = NULL;
    size_t np = 0;
    if (ir_attr_ints(n, "perm", &perm_attr, &np) != ANVIL_OK) return false;
    bool has_perm = ir_node_attr(n, "perm") != NULL;
    if (has_perm && (int)np != r) return false;
    int perm[IR_MAX_RANK], keep[IR_MAX_RANK], q[IR_MAX_RANK];
    int64_t kd[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = has_perm ? (int)perm_attr[i] : r - 1 - i;
    /* new index of each kept input dim */
    int nk = 0;
    for (int i = 0; i < r; i++) {
        keep[i] = x->d[i] == 1 ? -1 : nk;
        if (x->d[i] != 1) kd[nk++] = x->d[i];
    }
    int nq = 0;
    for (int j = 0; j < r; j++)
        if (keep[perm[j]] >= 0) q[nq++] = keep[perm[j]];
    /* merge output-neighbour runs of consecutive input dims */
    int grp_first[IR_MAX_RANK], ng = 0;
    int64_t gsize[IR_MAX_RANK];
    for (int j = 0; j < nq; j++) {
        if (j > 0 && q[j] == q[j - 1] + 1) {
            gsize[ng - 1] *= kd[q[j]];
            continue;
        }
        grp_first[ng] = q[j];
        gsize[ng] = kd[q[j]];
        ng++;
    }
    /* canonical perm: each group's rank among the groups by input position */
    int cp[IR_MAX_RANK];
    int64_t cd[IR_MAX_RANK];
    for (int a = 0; a < ng; a++) {
        int rank = 0;
        for (int b = 0; b < ng; b++) rank += grp_first[b] < grp_first[a];
        cp[a] = rank;
        cd[rank] = gsize[a];
    }
    s->tb = 1;
    s->tin = 1;
    s->t0 = s->t1 = 1;
    if (ng <= 1) {
        s->tform = ELT_TR_COPY;
        return true;
    }
    /* neighbours in the output are never neighbours in the input (they would have merged), so
     * the forms above are: a batch group kept first (optional), two groups that swap, and a
     * block kept last (optional) */
    const int lo = cp[0] == 0, hi = cp[ng - 1] == ng - 1 ? ng - 1 : ng;
    if (hi - lo != 2 || cp[lo] != lo + 1 || cp[lo + 1] != lo) return false;
    s->tform = hi < ng ? ELT_TR_BLOCKS : ELT_TR_SWAP;
    if (lo) s->tb = cd[0];
    s->t0 = cd[lo];
    s->t1 = cd[lo + 1];
    if (hi < ng) s->tin = cd[ng - 1];
    return true;
}

static bool transpose_supports(const kern_node *kn) {
    elt_state s;
    return kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->out[0]) && transpose_form(kn, &s);
}

const elt_isa *elt_isa_for_cpu(void) {
    const core_hw *hw = core_hw_get();
    if (kern_isa_ok(KERN_NEEDS_AVX512, hw)) return &elt_isa_avx512;
    if (kern_isa_ok(KERN_NEEDS_AVX2, hw)) return &elt_isa_avx2;
    return NULL;
}

void elt_transpose_f32(float *dst, const float *src, size_t rows, size_t cols, size_t ldx,
                       size_t lds) {
    const elt_isa *isa = elt_isa_for_cpu();
    if (isa) {
        isa->transpose4((uint32_t *)(void *)dst, (const uint32_t *)(const void *)src, rows, cols,
                        ldx, lds);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[c * lds + r] = src[r * ldx + c];
}

/* ---- the common variant entry points ------------------------------------------------------ */

static bool supports_common(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    size_t rows, len;
    elt_pool2d g;
    bool cip;
    switch (kind_of(kn->node->op)) {
    case ELT_K_BINARY:
        return binary_supports(kn);
    case ELT_K_SOFTMAX:
        return softmax_rows(kn, &rows, &len);
    case ELT_K_LAYERNORM:
        return layernorm_rows(kn, &rows, &len);
    case ELT_K_BATCHNORM:
        return batchnorm_supports(kn);
    case ELT_K_POOL:
        return pool_geometry(kn, &g, &cip);
    case ELT_K_GAP:
        return kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->out[0]) &&
               kn->in[0].shape.rank >= 3;
    case ELT_K_TRANSPOSE:
        return transpose_supports(kn);
    default:
        return unary_supports(kn);
    }
}

static size_t pool_row_stride(const elt_pool2d *g) {
    /* whole cache lines per thread */
    return ((size_t)g->row_len + 15) / 16 * 16;
}

static size_t workspace_common(const kern_node *kn) {
    const elt_kind kind = kind_of(kn->node->op);
    int threads = kn->threads > 0 ? kn->threads : 1;
    if (kind == ELT_K_POOL) {
        elt_pool2d g;
        bool cip;
        if (!pool_geometry(kn, &g, &cip)) return 0;
        return (size_t)threads * pool_row_stride(&g) * sizeof(float);
    }
    if (kind == ELT_K_BATCHNORM) return 2 * (size_t)kn->in[0].shape.d[1] * sizeof(float);
    return 0;
}

static void release_common(void *state) {
    elt_state *s = state;
    if (!s) return;
    free(s->ab);
    free(s->cnt_h);
    free(s->cnt_w);
    free(s);
}

static anvil_status prepare_common(const kern_node *kn, const elt_isa *isa, void **state) {
    elt_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    s->isa = isa;
    s->kind = kind_of(kn->node->op);
    s->avg = kn->node->op == IR_OP_AVERAGEPOOL;
    s->threads = kn->threads > 0 ? kn->threads : 1;
    const ir_node *n = kn->node;
    anvil_status st = ANVIL_OK;
    bool cip = false;
    switch (kind_of(n->op)) {
    case ELT_K_BINARY:
        s->bk = n->op == IR_OP_ADD   ? ELT_ADD
                : n->op == IR_OP_SUB ? ELT_SUB
                : n->op == IR_OP_MUL ? ELT_MUL
                                     : ELT_DIV;
        binary_fold(&kn->in[0], &kn->in[1], &kn->out[0], s);
        break;
    case ELT_K_SOFTMAX:
        s->logsm = n->op == IR_OP_LOGSOFTMAX;
        softmax_rows(kn, &s->rows, &s->len);
        break;
    case ELT_K_LAYERNORM:
        layernorm_rows(kn, &s->rows, &s->len);
        st = ir_attr_float(n, "epsilon", 1e-5f, &s->eps);
        break;
    case ELT_K_BATCHNORM:
        s->channels = kn->in[0].shape.d[1];
        s->plane = 1;
        for (int d = 2; d < kn->in[0].shape.rank; d++) s->plane *= kn->in[0].shape.d[d];
        st = ir_attr_float(n, "epsilon", 1e-5f, &s->bn_eps);
        if (st == ANVIL_OK && kn->in[1].value && kn->in[2].value && kn->in[3].value &&
            kn->in[4].value) {
            s->ab = malloc(2 * (size_t)(s->channels > 0 ? s->channels : 1) * sizeof(float));
            if (!s->ab) {
                st = core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for folded parameters",
                              ir_node_label(n));
                break;
            }
            elt_batchnorm_fold(s->ab, s->channels, kn->in[1].value, kn->in[2].value,
                               kn->in[3].value, kn->in[4].value, s->bn_eps);
        }
        break;
    case ELT_K_POOL:
        pool_geometry(kn, &s->pool, &cip);
        s->row_stride = pool_row_stride(&s->pool);
        if (n->op == IR_OP_AVERAGEPOOL) {
            const elt_pool2d *g = &s->pool;
            /* the end pads (pool_geometry keeps only the begin ones) */
            nn_window w;
            nn_geom geo;
            st = nn_window_parse(n, true, n->opset >= 19, n->opset >= 10, &w);
            if (st == ANVIL_OK)
                st = nn_window_resolve(n, &w, 2, &kn->in[0].shape.d[2], w.kernel, true, &geo);
            if (st != ANVIL_OK) break;
            s->cnt_h = pool_counts(g->oh, g->kh, g->sh, g->pt, geo.pad_end[0], g->ih, cip);
            s->cnt_w = pool_counts(g->ow, g->kw, g->sw, g->pl, geo.pad_end[1], g->iw, cip);
            if (!s->cnt_h || !s->cnt_w)
                st = core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for pooling counts",
                              ir_node_label(n));
        }
        break;
    case ELT_K_GAP:
        break;
    case ELT_K_TRANSPOSE:
        transpose_form(kn, s);
        break;
    default:
        st = unary_prepare(kn, s);
        break;
    }
    if (st != ANVIL_OK) {
        release_common(s);
        return st;
    }
    *state = s;
    return ANVIL_OK;
}

/* The tensors of this run as elt_run takes them (plus the run-time parameters of a unary). */
static anvil_status run_io(const ir_node *n, const elt_state *s, const op_tensor *const *in,
                           int n_in, op_tensor *const *out, void *ws, elt_io *io) {
    const op_tensor *x = in[0];
    *io = (elt_io){.x = x->data,
                   .y = out[0]->data,
                   .numel = op_tensor_numel(x),
                   .out_numel = op_tensor_numel(out[0]),
                   .ws = ws};
    if (x->rank >= 2) {
        io->d0 = x->dims[0];
        io->d1 = x->dims[1];
    }
    for (int i = 1; i < n_in && i < 5; i++) io->in[i - 1] = in[i] ? in[i]->data : NULL;
    if (s->kind == ELT_K_UNARY) return unary_params(n, s, in, n_in, io);
    return ANVIL_OK;
}

/* kern_variant.bf16_io: a binary op (an SE block's gate times its channels, a residual Add) may
 * write its output in bf16 where its table rounds as the bf16 tiles do (binary16), on a CPU
 * that has those tiles: the bf16 GEMM or conv that reads it gets the bits it would have made of
 * the fp32 output, in half the bytes, and may read them in place. Its inputs stay fp32. */
static void bf16_io_common(const kern_node *kn, const void *state, uint32_t *in, uint32_t *out) {
    const elt_state *s = state;
    *in = *out = 0;
    if (s && s->kind == ELT_K_BINARY && s->isa->binary16 && !kn->node->fusion &&
        core_hw_get()->avx512_bf16)
        *out = 1u;
}

static anvil_status run_common(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_out;
    const elt_state *s = state;
    elt_io io;
    CORE_TRY(run_io(n, s, in, n_in, out, ws, &io));
    if (out[0]->dtype == ANVIL_DTYPE_BFLOAT16) {
        /* only the placement binds a bf16 output, and only where bf16_io_common said so */
        const kern_node kn = {.node = n};
        uint32_t bin, bout;
        bf16_io_common(&kn, s, &bin, &bout);
        if (!(bout & 1u))
            return core_err(ANVIL_ERR_INTERNAL, "node '%s': a bf16 output where %s writes fp32",
                            ir_node_label(n),
                            s->isa == &elt_isa_avx512 ? "the AVX-512 eltwise" : "the AVX2 eltwise");
        io.y = NULL;
        io.y16 = out[0]->data;
    }
    elt_run(s, &io, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The node becomes one elt_run call on an elt_state holding the values this prepare made (the
 * tables it names, counts and folded parameters stored as weights), so the library computes
 * exactly what the variant does. Emitted libraries do not link SLEEF: the unary kinds that need
 * it (V_EXP, V_TANH, V_LOG1P) are refused. */

static const char *const elt_emit_files[] = {
    "kernels/cpu/eltwise/eltwise.h",          "kernels/cpu/eltwise/eltwise_run.c",
    "kernels/cpu/eltwise/eltwise_avx512.c",   "kernels/cpu/eltwise/eltwise_avx2.c",
    "kernels/cpu/eltwise/eltwise_simd.h",     "kernels/cpu/eltwise/eltwise_act.h",
    "kernels/cpu/eltwise/eltwise_exp.h",      "kernels/cpu/eltwise/eltwise_vec_avx512.h",
    "kernels/cpu/eltwise/eltwise_vec_avx2.h", NULL};

/* Stores n floats of p as weights and assigns them to the state's field (nothing for NULL). */
static anvil_status emit_floats(kern_emit *e, const char *field, const float *p, size_t n) {
    if (!p) return ANVIL_OK;
    char expr[96];
    CORE_TRY(e->blob(e, p, (n > 0 ? n : 1) * sizeof(float), expr, sizeof expr));
    e->code(e, "es.%s = (float *)(%s);\n", field, expr);
    return ANVIL_OK;
}

/* Whether elt_isa's unary of kind k computes without SLEEF (eltwise_simd.h). */
static bool emit_unary_ok(elt_unary_kind k) {
    return k != ELT_TANH && k != ELT_EXP && k != ELT_GELU_TANH && k != ELT_SOFTPLUS;
}

static anvil_status emit_write(const kern_node *kn, const void *state, kern_emit *e) {
    const elt_state *s = state;
    const ir_node *n = kn->node;
    if (s->kind == ELT_K_UNARY && !emit_unary_ok(s->uk))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s needs SLEEF's vector functions, which emitted libraries lack",
                        ir_node_label(n), ir_op_name(n->op));
    for (int i = 0; elt_emit_files[i]; i++) CORE_TRY(e->need(e, elt_emit_files[i]));
    CORE_TRY(e->include(e, "kernels/cpu/eltwise/eltwise.h"));
    char f[64];
    e->code(e, "elt_state es = {0};\n");
    e->code(e, "es.isa = &%s;\n", s->isa == &elt_isa_avx512 ? "elt_isa_avx512" : "elt_isa_avx2");
    e->code(e, "es.kind = (elt_kind)%d;\nes.threads = %d;\n", (int)s->kind, s->threads);
    switch (s->kind) {
    case ELT_K_UNARY:
        e->code(e, "es.uk = (elt_unary_kind)%d;\n", (int)s->uk);
        e->code(e, "es.a = %s;\n", kern_emit_float(s->a, f, sizeof f));
        e->code(e, "es.b = %s;\n", kern_emit_float(s->b, f, sizeof f));
        break;
    case ELT_K_BINARY:
        e->code(e, "es.bk = (elt_binary_kind)%d;\nes.rank = %d;\n", (int)s->bk, s->rank);
        for (int d = 0; d < s->rank; d++)
            e->code(e, "es.dims[%d] = %lld;\nes.sa[%d] = %lld;\nes.sb[%d] = %lld;\n", d,
                    (long long)s->dims[d], d, (long long)s->sa[d], d, (long long)s->sb[d]);
        break;
    case ELT_K_SOFTMAX:
    case ELT_K_LAYERNORM:
        e->code(e, "es.logsm = %d;\nes.rows = %zu;\nes.len = %zu;\n", (int)s->logsm, s->rows,
                s->len);
        e->code(e, "es.eps = %s;\n", kern_emit_float(s->eps, f, sizeof f));
        break;
    case ELT_K_BATCHNORM:
        e->code(e, "es.channels = %lld;\nes.plane = %lld;\n", (long long)s->channels,
                (long long)s->plane);
        e->code(e, "es.bn_eps = %s;\n", kern_emit_float(s->bn_eps, f, sizeof f));
        CORE_TRY(emit_floats(e, "ab", s->ab, 2 * (size_t)(s->channels > 0 ? s->channels : 1)));
        break;
    case ELT_K_POOL: {
        const elt_pool2d *g = &s->pool;
        e->code(e, "es.avg = %d;\nes.row_stride = %zu;\n", (int)s->avg, s->row_stride);
        e->code(e,
                "es.pool = (elt_pool2d){%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
                "%lld, %lld};\n",
                (long long)g->ih, (long long)g->iw, (long long)g->oh, (long long)g->ow,
                (long long)g->kh, (long long)g->kw, (long long)g->sh, (long long)g->sw,
                (long long)g->pt, (long long)g->pl, (long long)g->row_len);
        CORE_TRY(emit_floats(e, "cnt_h", s->cnt_h, (size_t)g->oh));
        CORE_TRY(emit_floats(e, "cnt_w", s->cnt_w, (size_t)g->ow));
        break;
    }
    case ELT_K_GAP:
        break;
    case ELT_K_TRANSPOSE:
        e->code(e, "es.tform = %d;\nes.tb = %lld;\nes.t0 = %lld;\nes.t1 = %lld;\nes.tin = %lld;\n",
                s->tform, (long long)s->tb, (long long)s->t0, (long long)s->t1, (long long)s->tin);
        break;
    }
    /* the run's tensors, as run_io takes them from the op_tensors */
    const op_tensor *x = &e->in_t[0];
    e->code(e, "elt_io eio = {0};\n");
    e->code(e, "eio.x = (const float *)(%s);\neio.y = (float *)(%s);\n", e->in(e, 0), e->out(e, 0));
    for (int i = 1; i < e->n_in && i < 5; i++)
        if (kern_has_input(kn, i))
            e->code(e, "eio.in[%d] = (const float *)(%s);\n", i - 1, e->in(e, i));
    e->code(e, "eio.numel = %zu;\neio.out_numel = %zu;\n", op_tensor_numel(x),
            op_tensor_numel(&e->out_t[0]));
    if (x->rank >= 2)
        e->code(e, "eio.d0 = %lld;\neio.d1 = %lld;\n", (long long)x->dims[0],
                (long long)x->dims[1]);
    e->code(e, "eio.ws = %s;\n", e->ws);
    if (s->kind == ELT_K_UNARY) {
        e->code(e, "eio.a = es.a;\neio.b = es.b;\n");
        /* Clip's bounds from opset 11: scalar inputs, read when the library runs */
        if (n->op == IR_OP_CLIP && n->opset >= 11)
            for (int i = 1; i < e->n_in && i < 3; i++) {
                if (!kern_has_input(kn, i)) continue;
                if (op_tensor_numel(&e->in_t[i]) != 1)
                    return core_err(
                        ANVIL_ERR_UNSUPPORTED, "%s: input %d (%s) must be one element but has %zu",
                        ir_node_label(n), i, i == 1 ? "min" : "max", op_tensor_numel(&e->in_t[i]));
                e->code(e, "eio.%c = *(const float *)(%s);\n", i == 1 ? 'a' : 'b', e->in(e, i));
            }
    }
    e->code(e, "elt_run(&es, &eio, %s);\n", e->ctx);
    return ANVIL_OK;
}

static const kern_emitter elt_emitter = {emit_write, NULL};

/* ---- the variant table ---------------------------------------------------------------------
 * Per (op, ISA) one variant; only prepare differs (it records the ISA table in the state). */

/* The variants of op OP, "<ID>_avx512" and "<ID>_avx2" (family.h). */
#define ELT_VARIANT(ID, OP) KFAM_ISA_VARIANTS(ID, OP, elt_isa_, &elt_emitter, bf16_io_common)

/* Ops whose kernels need only arithmetic. */
#define ELT_PLAIN(X)                                                                               \
    X(relu, IR_OP_RELU)                                                                            \
    X(leakyrelu, IR_OP_LEAKYRELU)                                                                  \
    X(clip, IR_OP_CLIP)                                                                            \
    X(hardsigmoid, IR_OP_HARDSIGMOID)                                                              \
    X(hardswish, IR_OP_HARDSWISH)                                                                  \
    X(add, IR_OP_ADD)                                                                              \
    X(sub, IR_OP_SUB)                                                                              \
    X(mul, IR_OP_MUL)                                                                              \
    X(div, IR_OP_DIV)                                                                              \
    X(layernorm, IR_OP_LAYERNORMALIZATION)                                                         \
    X(batchnorm, IR_OP_BATCHNORMALIZATION)                                                         \
    X(maxpool, IR_OP_MAXPOOL)                                                                      \
    X(averagepool, IR_OP_AVERAGEPOOL)                                                              \
    X(globalaveragepool, IR_OP_GLOBALAVERAGEPOOL)                                                  \
    X(transpose, IR_OP_TRANSPOSE)

/* Ops that need SLEEF's vector exp / tanh / erf / log1p. */
#ifdef ANVIL_HAVE_SLEEF
#define ELT_SLEEF(X)                                                                               \
    X(sigmoid, IR_OP_SIGMOID)                                                                      \
    X(tanh, IR_OP_TANH)                                                                            \
    X(erf, IR_OP_ERF)                                                                              \
    X(exp, IR_OP_EXP)                                                                              \
    X(gelu, IR_OP_GELU)                                                                            \
    X(softplus, IR_OP_SOFTPLUS)                                                                    \
    X(softmax, IR_OP_SOFTMAX)                                                                      \
    X(logsoftmax, IR_OP_LOGSOFTMAX)
#else
#define ELT_SLEEF(X)
#endif

ELT_PLAIN(ELT_VARIANT)
ELT_SLEEF(ELT_VARIANT)

/* For each op the AVX-512 variant first: the first applicable variant is the default. */
#define ELT_REF(ID, OP) &v_##ID##_avx512, &v_##ID##_avx2,
const kern_variant *const kern_family_eltwise[] = {
    ELT_PLAIN(ELT_REF) ELT_SLEEF(ELT_REF) NULL,
};
