/* The eltwise family: vectorized fp32 activations, Add/Sub/Mul/Div, Softmax/LogSoftmax,
 * LayerNormalization, BatchNormalization, Max/Average/GlobalAveragePool and Transpose, each as
 * "<op>_avx512" and "<op>_avx2" variants.
 *
 * This file is baseline code: it reads attributes, decides in prepare what the node reduces to
 * (a folded broadcast, rows of a given length, a pooling geometry, a canonical permutation), and
 * splits the work across threads; the arithmetic lives in the per-ISA tables of eltwise.h. A
 * variant's supports() says whether it computes the node exactly as the reference does; every
 * other case (other dtypes, broadcasts, axes, permutations, MaxPool's Indices, ...) stays with
 * the reference. Ops that need a vector exp/tanh/erf/log1p exist only with SLEEF.
 *
 * Pooling geometry comes from ops/nn_common.h, the helper the reference pooling kernels use, so
 * that auto_pad, ceil_mode and pads resolve identically. */
#include "eltwise.h"
#include "kernels/kernels.h"
#include "ops/nn_common.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many elements a node runs on the calling thread: waking the pool costs more. */
#define ELT_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel block of the flat (unary, binary) kernels. */
#define ELT_BLOCK ((size_t)4096)

typedef struct elt_state {
    const elt_isa *isa;
    int threads;
    /* unary */
    elt_unary_kind uk;
    float a, b;
    /* binary: the output folded to `rank` dims, each operand's element strides (0: broadcast) */
    elt_binary_kind bk;
    int rank;
    int64_t dims[IR_MAX_RANK], sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    /* softmax / layernorm: contiguous rows */
    bool logsm;
    size_t rows, len;
    float eps;
    /* batchnorm: folded per-channel multiplier then offset (2 * C), NULL: fold at run time */
    float *ab;
    float bn_eps;
    int64_t channels, plane;
    /* pooling */
    elt_pool2d pool;
    float *cnt_h, *cnt_w; /* per output row / column tap counts (AveragePool) */
    size_t row_stride;    /* floats of workspace per thread */
    /* transpose: canonical form */
    int tform;
    int64_t tb, t0, t1, tin; /* batch, the two swapped dims, contiguous inner block */
} elt_state;

static bool f32_static(const op_tinfo *t) {
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape);
}

static size_t numel_of(const op_tinfo *t) {
    size_t n = 1;
    for (int i = 0; i < t->shape.rank; i++) n *= (size_t)t->shape.d[i];
    return n;
}

static bool has_input(const kern_node *kn, int i) {
    return i < kn->n_in && i < kn->node->n_inputs && kn->node->inputs[i] != IR_NONE;
}

static bool has_output(const kern_node *kn, int i) {
    return i < kn->node->n_outputs && kn->node->outputs[i] != IR_NONE;
}

static op_ctx *par_ctx(op_ctx *ctx, size_t work) {
    return work >= ELT_PAR_MIN ? ctx : NULL;
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
    if (!unary_kind(kn->node, &k) || !f32_static(&kn->in[0]) || !f32_static(&kn->out[0]))
        return false;
    /* Clip's bounds (opset >= 11) are scalar inputs of X's dtype */
    for (int i = 1; i < kn->n_in; i++)
        if (has_input(kn, i) && kn->in[i].dtype != ANVIL_DTYPE_FLOAT32) return false;
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

typedef struct unary_job {
    const elt_state *s;
    float a, b;
    const float *x;
    float *y;
    size_t n;
} unary_job;

static void unary_chunk(void *arg, size_t begin, size_t end) {
    const unary_job *j = arg;
    size_t lo = begin * ELT_BLOCK, hi = end * ELT_BLOCK;
    if (hi > j->n) hi = j->n;
    j->s->isa->unary(j->s->uk, j->a, j->b, j->y + lo, j->x + lo, hi - lo);
}

static anvil_status unary_run(const ir_node *n, const elt_state *s, const op_tensor *const *in,
                              int n_in, op_tensor *const *out, op_ctx *ctx) {
    unary_job j = {s, s->a, s->b, in[0]->data, out[0]->data, op_tensor_numel(in[0])};
    if (n->op == IR_OP_CLIP && n->opset >= 11) {
        for (int i = 1; i < n_in && i < 3; i++) {
            if (!in[i]) continue;
            if (op_tensor_numel(in[i]) != 1)
                return core_err(
                    ANVIL_ERR_RUNTIME, "%s: input %d (%s) must be one element but has %zu",
                    ir_node_label(n), i, i == 1 ? "min" : "max", op_tensor_numel(in[i]));
            *(i == 1 ? &j.a : &j.b) = *(const float *)in[i]->data;
        }
    }
    if (j.n == 0) return ANVIL_OK;
    op_parallel_for(par_ctx(ctx, j.n), (j.n + ELT_BLOCK - 1) / ELT_BLOCK, unary_chunk, &j);
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
    const op_tinfo *ops[2] = {a, b};
    for (int w = 0; w < 2; w++) {
        int pad = r - ops[w]->shape.rank;
        if (pad < 0) return false;
        int64_t stride = 1;
        for (int d = r - 1; d >= 0; d--) {
            int64_t td = d >= pad ? ops[w]->shape.d[d - pad] : 1;
            if (td != 1 && td != o->shape.d[d]) return false;
            st[w][d] = td == 1 ? 0 : stride;
            stride *= td;
        }
    }
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
    return kn->n_in >= 2 && f32_static(&kn->in[0]) && f32_static(&kn->in[1]) &&
           f32_static(&kn->out[0]) && binary_fold(&kn->in[0], &kn->in[1], &kn->out[0], &s);
}

typedef struct binary_job {
    const elt_state *s;
    const float *a, *b;
    float *y;
    size_t n;
} binary_job;

/* Output elements of blocks [begin, end): an odometer over the folded dims, one kernel call per
 * (partial) innermost row. */
static void binary_chunk(void *arg, size_t begin, size_t end) {
    const binary_job *j = arg;
    const elt_state *s = j->s;
    const int r = s->rank;
    size_t pos = begin * ELT_BLOCK, stop = end * ELT_BLOCK;
    if (stop > j->n) stop = j->n;
    int64_t idx[IR_MAX_RANK], oa = 0, ob = 0;
    size_t rem = pos;
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)s->dims[d]);
        rem /= (size_t)s->dims[d];
        oa += idx[d] * s->sa[d];
        ob += idx[d] * s->sb[d];
    }
    const int64_t inner = s->dims[r - 1];
    while (pos < stop) {
        size_t cnt = (size_t)(inner - idx[r - 1]);
        if (cnt > stop - pos) cnt = stop - pos;
        s->isa->binary(s->bk, j->y + pos, j->a + oa, j->b + ob, (int)s->sa[r - 1],
                       (int)s->sb[r - 1], cnt);
        pos += cnt;
        idx[r - 1] += (int64_t)cnt;
        oa += (int64_t)cnt * s->sa[r - 1];
        ob += (int64_t)cnt * s->sb[r - 1];
        for (int d = r - 1; d > 0 && idx[d] == s->dims[d]; d--) {
            oa -= s->dims[d] * s->sa[d];
            ob -= s->dims[d] * s->sb[d];
            idx[d] = 0;
            idx[d - 1]++;
            oa += s->sa[d - 1];
            ob += s->sb[d - 1];
        }
    }
}

static anvil_status binary_run(const elt_state *s, const op_tensor *const *in,
                               op_tensor *const *out, op_ctx *ctx) {
    binary_job j = {s, in[0]->data, in[1]->data, out[0]->data, op_tensor_numel(out[0])};
    if (j.n == 0) return ANVIL_OK;
    op_parallel_for(par_ctx(ctx, j.n), (j.n + ELT_BLOCK - 1) / ELT_BLOCK, binary_chunk, &j);
    return ANVIL_OK;
}

/* ---- softmax / logsoftmax ------------------------------------------------------------------ */

/* Rows of the op: before opset 13 the input is [prod(dims[:axis]), prod(dims[axis:])]; from 13
 * only axis == last makes the lines contiguous. */
static bool softmax_rows(const kern_node *kn, size_t *rows, size_t *len) {
    const ir_node *n = kn->node;
    if (!f32_static(&kn->in[0]) || !f32_static(&kn->out[0])) return false;
    int r = kn->in[0].shape.rank;
    int64_t axis;
    if (ir_attr_int(n, "axis", n->opset < 13 ? 1 : -1, &axis) != ANVIL_OK) return false;
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return false;
    if (n->opset >= 13 && axis != r - 1) return false;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < r; d++) {
        if (d < axis)
            outer *= (size_t)kn->in[0].shape.d[d];
        else
            inner *= (size_t)kn->in[0].shape.d[d];
    }
    *rows = outer;
    *len = inner;
    return true;
}

typedef struct rows_job {
    const elt_state *s;
    const float *x, *scale, *bias;
    float *y;
} rows_job;

static void softmax_chunk(void *arg, size_t begin, size_t end) {
    const rows_job *j = arg;
    const size_t len = j->s->len;
    for (size_t r = begin; r < end; r++)
        j->s->isa->softmax_row(j->y + r * len, j->x + r * len, len, j->s->logsm);
}

/* ---- layernorm ---------------------------------------------------------------------------- */

/* Rows over axis..rank-1, with scale and bias holding exactly one element per row element (what
 * inference allows is a broadcast onto X[axis:]; the common case is the full shape). */
static bool layernorm_rows(const kern_node *kn, size_t *rows, size_t *len) {
    const ir_node *n = kn->node;
    if (!f32_static(&kn->in[0]) || !f32_static(&kn->out[0]) || kn->n_in < 2 ||
        !f32_static(&kn->in[1]))
        return false;
    for (int i = 1; i < 3; i++)
        if (has_output(kn, i)) return false; /* Mean / InvStdDev outputs: reference */
    int r = kn->in[0].shape.rank;
    int64_t axis;
    if (ir_attr_int(n, "axis", -1, &axis) != ANVIL_OK) return false;
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return false;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < r; d++) {
        if (d < axis)
            outer *= (size_t)kn->in[0].shape.d[d];
        else
            inner *= (size_t)kn->in[0].shape.d[d];
    }
    if (numel_of(&kn->in[1]) != inner) return false;
    if (has_input(kn, 2) && (!f32_static(&kn->in[2]) || numel_of(&kn->in[2]) != inner))
        return false;
    *rows = outer;
    *len = inner;
    return true;
}

static void layernorm_chunk(void *arg, size_t begin, size_t end) {
    const rows_job *j = arg;
    const size_t len = j->s->len;
    for (size_t r = begin; r < end; r++)
        j->s->isa->layernorm_row(j->y + r * len, j->x + r * len, len, j->scale, j->bias, j->s->eps);
}

/* ---- batchnorm ---------------------------------------------------------------------------- */

static bool batchnorm_supports(const kern_node *kn) {
    const ir_node *n = kn->node;
    if (kn->n_in < 5 || !f32_static(&kn->out[0])) return false;
    for (int i = 0; i < 5; i++)
        if (!f32_static(&kn->in[i])) return false;
    if (kn->in[0].shape.rank < 2) return false;
    if (n->opset < 9) {
        int64_t spatial = 1;
        if (ir_attr_int(n, "spatial", 1, &spatial) != ANVIL_OK || spatial != 1) return false;
    }
    for (int i = 1; i < 5; i++)
        if (numel_of(&kn->in[i]) != (size_t)kn->in[0].shape.d[1]) return false;
    return true;
}

/* a = scale / sqrt(var + eps), b = B - mean * a, in double as the reference folds. */
static void batchnorm_fold(float *ab, int64_t c, const float *scale, const float *bias,
                           const float *mean, const float *var, float eps) {
    for (int64_t i = 0; i < c; i++) {
        double a = (double)scale[i] / sqrt((double)var[i] + (double)eps);
        ab[i] = (float)a;
        ab[c + i] = (float)((double)bias[i] - (double)mean[i] * a);
    }
}

typedef struct bn_job {
    const elt_state *s;
    const float *x, *ab;
    float *y;
} bn_job;

static void batchnorm_chunk(void *arg, size_t begin, size_t end) {
    const bn_job *j = arg;
    const int64_t C = j->s->channels, P = j->s->plane;
    for (size_t q = begin; q < end; q++) {
        int64_t c = (int64_t)q % C;
        const float *x = j->x + (int64_t)q * P;
        float *y = j->y + (int64_t)q * P;
        j->s->isa->affine(y, x, (size_t)P, j->ab[c], j->ab[C + c]);
    }
}

/* ---- pooling ------------------------------------------------------------------------------ */

/* The 2-D geometry of a MaxPool / AveragePool node, or false when this family does not handle it:
 * dilation other than 1 (then windows are not boxes of neighbours), a pad as large as the kernel
 * (a window could hold no real element), or MaxPool's Indices output. */
static bool pool_geometry(const kern_node *kn, elt_pool2d *g, bool *cip) {
    const ir_node *n = kn->node;
    if (!f32_static(&kn->in[0]) || !f32_static(&kn->out[0]) || kn->in[0].shape.rank != 4)
        return false;
    bool maxpool = n->op == IR_OP_MAXPOOL;
    if (maxpool && has_output(kn, 1)) return false;
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

typedef struct pool_job {
    const elt_state *s;
    bool avg;
    const float *x;
    float *y;
    char *ws;
    size_t planes;
    int nthreads;
} pool_job;

/* Exactly one index per thread: index t owns workspace row t. */
static void pool_chunk(void *arg, size_t begin, size_t end) {
    const pool_job *j = arg;
    const elt_state *s = j->s;
    const int64_t in_sz = s->pool.ih * s->pool.iw, out_sz = s->pool.oh * s->pool.ow;
    for (size_t t = begin; t < end; t++) {
        float *row = (float *)(void *)(j->ws + t * s->row_stride * sizeof(float));
        size_t p0 = j->planes * t / (size_t)j->nthreads;
        size_t p1 = j->planes * (t + 1) / (size_t)j->nthreads;
        for (size_t p = p0; p < p1; p++)
            s->isa->pool2d(&s->pool, j->avg, s->cnt_h, s->cnt_w, j->y + (int64_t)p * out_sz,
                           j->x + (int64_t)p * in_sz, row);
    }
}

typedef struct gap_job {
    const elt_state *s;
    const float *x;
    float *y;
    size_t plane;
} gap_job;

static void gap_chunk(void *arg, size_t begin, size_t end) {
    const gap_job *j = arg;
    for (size_t p = begin; p < end; p++)
        j->y[p] = j->s->isa->sum(j->x + p * j->plane, j->plane) / (float)j->plane;
}

/* ---- transpose ---------------------------------------------------------------------------- */

enum { TR_COPY, TR_SWAP, TR_BLOCKS }; /* identity, [b][t0][t1] -> [b][t1][t0], with inner blocks */

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
        s->tform = TR_COPY;
        return true;
    }
    if (ng == 2 && cp[0] == 1 && cp[1] == 0) {
        s->tform = TR_SWAP;
        s->t0 = cd[0];
        s->t1 = cd[1];
        return true;
    }
    if (ng == 3 && cp[0] == 0 && cp[1] == 2 && cp[2] == 1) {
        s->tform = TR_SWAP;
        s->tb = cd[0];
        s->t0 = cd[1];
        s->t1 = cd[2];
        return true;
    }
    if (ng == 3 && cp[0] == 1 && cp[1] == 0 && cp[2] == 2) {
        s->tform = TR_BLOCKS;
        s->t0 = cd[0];
        s->t1 = cd[1];
        s->tin = cd[2];
        return true;
    }
    if (ng == 4 && cp[0] == 0 && cp[1] == 2 && cp[2] == 1 && cp[3] == 3) {
        s->tform = TR_BLOCKS;
        s->tb = cd[0];
        s->t0 = cd[1];
        s->t1 = cd[2];
        s->tin = cd[3];
        return true;
    }
    return false;
}

static bool transpose_supports(const kern_node *kn) {
    elt_state s;
    return f32_static(&kn->in[0]) && f32_static(&kn->out[0]) && transpose_form(kn, &s);
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

/* Rows of 64 input rows per task for the swap (each task a set of 8x8 tiles). */
#define TR_ROWS 64

typedef struct tr_job {
    const elt_state *s;
    const float *x;
    float *y;
    size_t n;
} tr_job;

static void tr_copy_chunk(void *arg, size_t begin, size_t end) {
    const tr_job *j = arg;
    size_t lo = begin * ELT_BLOCK, hi = end * ELT_BLOCK;
    if (hi > j->n) hi = j->n;
    memcpy(j->y + lo, j->x + lo, (hi - lo) * sizeof(float));
}

static void tr_swap_chunk(void *arg, size_t begin, size_t end) {
    const tr_job *j = arg;
    const elt_state *s = j->s;
    const size_t rows = (size_t)s->t0, cols = (size_t)s->t1;
    const size_t per_b = (rows + TR_ROWS - 1) / TR_ROWS;
    for (size_t t = begin; t < end; t++) {
        size_t b = t / per_b, r0 = (t % per_b) * TR_ROWS;
        size_t nr = rows - r0 < TR_ROWS ? rows - r0 : TR_ROWS;
        const float *src = j->x + b * rows * cols + r0 * cols;
        float *dst = j->y + b * rows * cols + r0;
        s->isa->transpose4((uint32_t *)(void *)dst, (const uint32_t *)(const void *)src, nr, cols,
                           cols, rows);
    }
}

/* A matrix of fewer than TR_ROWS rows (an image's 3 channels turned channels-last) would be one
 * task per batch item, so its columns are split instead: task t = (b, TR_COLS columns). */
#define TR_COLS 4096

static void tr_cols_chunk(void *arg, size_t begin, size_t end) {
    const tr_job *j = arg;
    const elt_state *s = j->s;
    const size_t rows = (size_t)s->t0, cols = (size_t)s->t1;
    const size_t per_b = (cols + TR_COLS - 1) / TR_COLS;
    for (size_t t = begin; t < end; t++) {
        size_t b = t / per_b, c0 = (t % per_b) * TR_COLS;
        size_t nc = cols - c0 < TR_COLS ? cols - c0 : TR_COLS;
        const float *src = j->x + b * rows * cols + c0;
        float *dst = j->y + b * rows * cols + c0 * rows;
        s->isa->transpose4((uint32_t *)(void *)dst, (const uint32_t *)(const void *)src, rows, nc,
                           cols, rows);
    }
}

/* Output block (b, i1, i0) of tin elements is input block (b, i0, i1); task t = (b, i1). */
static void tr_blocks_chunk(void *arg, size_t begin, size_t end) {
    const tr_job *j = arg;
    const elt_state *s = j->s;
    const size_t d0 = (size_t)s->t0, d1 = (size_t)s->t1, in = (size_t)s->tin;
    for (size_t t = begin; t < end; t++) {
        size_t b = t / d1, i1 = t % d1;
        float *dst = j->y + (b * d1 + i1) * d0 * in;
        const float *src = j->x + (b * d0 * d1 + i1) * in;
        for (size_t i0 = 0; i0 < d0; i0++) memcpy(dst + i0 * in, src + i0 * d1 * in, in * 4);
    }
}

/* ---- the common variant entry points ------------------------------------------------------ */

static bool supports_common(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    size_t rows, len;
    elt_pool2d g;
    bool cip;
    switch (kn->node->op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
        return binary_supports(kn);
    case IR_OP_SOFTMAX:
    case IR_OP_LOGSOFTMAX:
        return softmax_rows(kn, &rows, &len);
    case IR_OP_LAYERNORMALIZATION:
        return layernorm_rows(kn, &rows, &len);
    case IR_OP_BATCHNORMALIZATION:
        return batchnorm_supports(kn);
    case IR_OP_MAXPOOL:
    case IR_OP_AVERAGEPOOL:
        return pool_geometry(kn, &g, &cip);
    case IR_OP_GLOBALAVERAGEPOOL:
        return f32_static(&kn->in[0]) && f32_static(&kn->out[0]) && kn->in[0].shape.rank >= 3;
    case IR_OP_TRANSPOSE:
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
    const ir_op op = kn->node->op;
    int threads = kn->threads > 0 ? kn->threads : 1;
    if (op == IR_OP_MAXPOOL || op == IR_OP_AVERAGEPOOL) {
        elt_pool2d g;
        bool cip;
        if (!pool_geometry(kn, &g, &cip)) return 0;
        return (size_t)threads * pool_row_stride(&g) * sizeof(float);
    }
    if (op == IR_OP_BATCHNORMALIZATION) return 2 * (size_t)kn->in[0].shape.d[1] * sizeof(float);
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
    s->threads = kn->threads > 0 ? kn->threads : 1;
    const ir_node *n = kn->node;
    anvil_status st = ANVIL_OK;
    bool cip = false;
    switch (n->op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
        s->bk = n->op == IR_OP_ADD   ? ELT_ADD
                : n->op == IR_OP_SUB ? ELT_SUB
                : n->op == IR_OP_MUL ? ELT_MUL
                                     : ELT_DIV;
        binary_fold(&kn->in[0], &kn->in[1], &kn->out[0], s);
        break;
    case IR_OP_SOFTMAX:
    case IR_OP_LOGSOFTMAX:
        s->logsm = n->op == IR_OP_LOGSOFTMAX;
        softmax_rows(kn, &s->rows, &s->len);
        break;
    case IR_OP_LAYERNORMALIZATION:
        layernorm_rows(kn, &s->rows, &s->len);
        st = ir_attr_float(n, "epsilon", 1e-5f, &s->eps);
        break;
    case IR_OP_BATCHNORMALIZATION:
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
            batchnorm_fold(s->ab, s->channels, kn->in[1].value, kn->in[2].value, kn->in[3].value,
                           kn->in[4].value, s->bn_eps);
        }
        break;
    case IR_OP_MAXPOOL:
    case IR_OP_AVERAGEPOOL:
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
    case IR_OP_GLOBALAVERAGEPOOL:
        break;
    case IR_OP_TRANSPOSE:
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

static anvil_status run_common(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_out;
    const elt_state *s = state;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    size_t numel = op_tensor_numel(x);
    switch (n->op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
        return binary_run(s, in, out, ctx);
    case IR_OP_SOFTMAX:
    case IR_OP_LOGSOFTMAX: {
        if (s->rows == 0 || s->len == 0) return ANVIL_OK;
        rows_job j = {s, x->data, NULL, NULL, y->data};
        op_parallel_for(par_ctx(ctx, numel / 2), s->rows, softmax_chunk, &j);
        return ANVIL_OK;
    }
    case IR_OP_LAYERNORMALIZATION: {
        if (s->rows == 0 || s->len == 0) return ANVIL_OK;
        rows_job j = {s, x->data, in[1]->data, n_in > 2 && in[2] ? in[2]->data : NULL, y->data};
        op_parallel_for(par_ctx(ctx, numel), s->rows, layernorm_chunk, &j);
        return ANVIL_OK;
    }
    case IR_OP_BATCHNORMALIZATION: {
        size_t planes = (size_t)(x->dims[0] * s->channels);
        if (planes == 0 || s->plane == 0) return ANVIL_OK;
        const float *ab = s->ab;
        if (!ab) {
            batchnorm_fold(ws, s->channels, in[1]->data, in[2]->data, in[3]->data, in[4]->data,
                           s->bn_eps);
            ab = ws;
        }
        bn_job j = {s, x->data, ab, y->data};
        op_parallel_for(par_ctx(ctx, numel), planes, batchnorm_chunk, &j);
        return ANVIL_OK;
    }
    case IR_OP_MAXPOOL:
    case IR_OP_AVERAGEPOOL: {
        size_t planes = (size_t)(x->dims[0] * x->dims[1]);
        if (planes == 0 || op_tensor_numel(y) == 0) return ANVIL_OK;
        int T = op_ctx_threads(ctx);
        if (T > s->threads) T = s->threads;
        if ((size_t)T > planes) T = (int)planes;
        if (numel < ELT_PAR_MIN || T < 1) T = 1;
        pool_job j = {s, n->op == IR_OP_AVERAGEPOOL, x->data, y->data, ws, planes, T};
        op_parallel_for(T > 1 ? ctx : NULL, (size_t)T, pool_chunk, &j);
        return ANVIL_OK;
    }
    case IR_OP_GLOBALAVERAGEPOOL: {
        size_t planes = (size_t)(x->dims[0] * x->dims[1]);
        if (planes == 0) return ANVIL_OK;
        gap_job j = {s, x->data, y->data, numel / planes};
        if (j.plane == 0) return ANVIL_OK;
        op_parallel_for(par_ctx(ctx, numel), planes, gap_chunk, &j);
        return ANVIL_OK;
    }
    case IR_OP_TRANSPOSE: {
        if (numel == 0) return ANVIL_OK;
        tr_job j = {s, x->data, y->data, numel};
        op_ctx *c = par_ctx(ctx, numel);
        if (s->tform == TR_COPY)
            op_parallel_for(c, (numel + ELT_BLOCK - 1) / ELT_BLOCK, tr_copy_chunk, &j);
        else if (s->tform == TR_SWAP && s->t0 < TR_ROWS)
            op_parallel_for(c, (size_t)s->tb * (((size_t)s->t1 + TR_COLS - 1) / TR_COLS),
                            tr_cols_chunk, &j);
        else if (s->tform == TR_SWAP)
            op_parallel_for(c, (size_t)s->tb * (((size_t)s->t0 + TR_ROWS - 1) / TR_ROWS),
                            tr_swap_chunk, &j);
        else
            op_parallel_for(c, (size_t)(s->tb * s->t1), tr_blocks_chunk, &j);
        return ANVIL_OK;
    }
    default:
        return unary_run(n, s, in, n_in, out, ctx);
    }
}

/* ---- the variant table ---------------------------------------------------------------------
 * Per (op, ISA) one variant; only prepare differs (it records the ISA table in the state). */

#define ELT_VARIANT(ID, OP, NAME)                                                                  \
    static anvil_status prep_##ID##_avx512(const kern_node *kn, void **state) {                    \
        return prepare_common(kn, &elt_isa_avx512, state);                                         \
    }                                                                                              \
    static anvil_status prep_##ID##_avx2(const kern_node *kn, void **state) {                      \
        return prepare_common(kn, &elt_isa_avx2, state);                                           \
    }                                                                                              \
    static const kern_variant v_##ID##_avx512 = {NAME "_avx512",                                   \
                                                 OP,                                               \
                                                 KERN_NEEDS_AVX512,                                \
                                                 supports_common,                                  \
                                                 workspace_common,                                 \
                                                 prep_##ID##_avx512,                               \
                                                 release_common,                                   \
                                                 run_common,                                       \
                                                 NULL};                                            \
    static const kern_variant v_##ID##_avx2 = {NAME "_avx2",                                       \
                                               OP,                                                 \
                                               KERN_NEEDS_AVX2,                                    \
                                               supports_common,                                    \
                                               workspace_common,                                   \
                                               prep_##ID##_avx2,                                   \
                                               release_common,                                     \
                                               run_common,                                         \
                                               NULL};

/* Ops whose kernels need only arithmetic. */
#define ELT_PLAIN(X)                                                                               \
    X(relu, IR_OP_RELU, "relu")                                                                    \
    X(leakyrelu, IR_OP_LEAKYRELU, "leakyrelu")                                                     \
    X(clip, IR_OP_CLIP, "clip")                                                                    \
    X(hardsigmoid, IR_OP_HARDSIGMOID, "hardsigmoid")                                               \
    X(hardswish, IR_OP_HARDSWISH, "hardswish")                                                     \
    X(add, IR_OP_ADD, "add")                                                                       \
    X(sub, IR_OP_SUB, "sub")                                                                       \
    X(mul, IR_OP_MUL, "mul")                                                                       \
    X(div, IR_OP_DIV, "div")                                                                       \
    X(layernorm, IR_OP_LAYERNORMALIZATION, "layernorm")                                            \
    X(batchnorm, IR_OP_BATCHNORMALIZATION, "batchnorm")                                            \
    X(maxpool, IR_OP_MAXPOOL, "maxpool")                                                           \
    X(averagepool, IR_OP_AVERAGEPOOL, "averagepool")                                               \
    X(globalaveragepool, IR_OP_GLOBALAVERAGEPOOL, "globalaveragepool")                             \
    X(transpose, IR_OP_TRANSPOSE, "transpose")

/* Ops that need SLEEF's vector exp / tanh / erf / log1p. */
#ifdef ANVIL_HAVE_SLEEF
#define ELT_SLEEF(X)                                                                               \
    X(sigmoid, IR_OP_SIGMOID, "sigmoid")                                                           \
    X(tanh, IR_OP_TANH, "tanh")                                                                    \
    X(erf, IR_OP_ERF, "erf")                                                                       \
    X(exp, IR_OP_EXP, "exp")                                                                       \
    X(gelu, IR_OP_GELU, "gelu")                                                                    \
    X(softplus, IR_OP_SOFTPLUS, "softplus")                                                        \
    X(softmax, IR_OP_SOFTMAX, "softmax")                                                           \
    X(logsoftmax, IR_OP_LOGSOFTMAX, "logsoftmax")
#else
#define ELT_SLEEF(X)
#endif

ELT_PLAIN(ELT_VARIANT)
ELT_SLEEF(ELT_VARIANT)

/* For each op the AVX-512 variant first: the first applicable variant is the default. */
#define ELT_REF(ID, OP, NAME) &v_##ID##_avx512, &v_##ID##_avx2,
const kern_variant *const kern_family_eltwise[] = {
    ELT_PLAIN(ELT_REF) ELT_SLEEF(ELT_REF) NULL,
};
