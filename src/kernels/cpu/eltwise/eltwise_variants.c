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
#include "kernels/cpu/family.h"
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

/* A run's work as its chunk functions see it: every op reads x (input 0) and writes y, the other
 * fields are per op. */
typedef struct elt_job {
    const elt_state *s;
    const float *x;
    float *y;
    const float *in1, *in2; /* binary: B; layernorm: scale, bias; batchnorm: the folded a, b */
    size_t n;               /* elements; GlobalAveragePool: elements per plane; pooling: planes */
    float a, b;             /* unary: the op's parameters (Clip's bounds may be inputs) */
    size_t br, bc;          /* transpose swap: rows and columns per task */
    bool avg;               /* pooling: AveragePool */
    char *ws;               /* pooling: the threads' rows */
    int nthreads;           /* pooling */
} elt_job;

static bool has_output(const kern_node *kn, int i) {
    return i < kn->node->n_outputs && kn->node->outputs[i] != IR_NONE;
}

static op_ctx *par_ctx(op_ctx *ctx, size_t work) {
    return work >= ELT_PAR_MIN ? ctx : NULL;
}

static size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

/* Runs fn over the ELT_BLOCK-element blocks of n elements (in parallel when n is large). */
static void parallel_blocks(op_ctx *ctx, size_t n, op_range_fn fn, void *job) {
    op_parallel_for(par_ctx(ctx, n), ceil_div(n, ELT_BLOCK), fn, job);
}

/* The elements [*lo, *hi) of blocks [begin, end) of parallel_blocks over n elements. */
static inline void block_span(size_t begin, size_t end, size_t n, size_t *lo, size_t *hi) {
    *lo = begin * ELT_BLOCK;
    *hi = end * ELT_BLOCK < n ? end * ELT_BLOCK : n;
}

/* The ops as this file groups them: each kind has one supports, prepare and run path. */
typedef enum elt_kind {
    K_UNARY,
    K_BINARY,
    K_SOFTMAX,
    K_LAYERNORM,
    K_BATCHNORM,
    K_POOL,
    K_GAP,
    K_TRANSPOSE
} elt_kind;

static elt_kind kind_of(ir_op op) {
    switch (op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
        return K_BINARY;
    case IR_OP_SOFTMAX:
    case IR_OP_LOGSOFTMAX:
        return K_SOFTMAX;
    case IR_OP_LAYERNORMALIZATION:
        return K_LAYERNORM;
    case IR_OP_BATCHNORMALIZATION:
        return K_BATCHNORM;
    case IR_OP_MAXPOOL:
    case IR_OP_AVERAGEPOOL:
        return K_POOL;
    case IR_OP_GLOBALAVERAGEPOOL:
        return K_GAP;
    case IR_OP_TRANSPOSE:
        return K_TRANSPOSE;
    default:
        return K_UNARY;
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
        if (kfam_has_input(kn, i) && kn->in[i].dtype != ANVIL_DTYPE_FLOAT32) return false;
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

static void unary_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->isa->unary(j->s->uk, j->a, j->b, j->y + lo, j->x + lo, hi - lo);
}

/* j: the job with s, x, y and n set. */
static anvil_status unary_run(const ir_node *n, elt_job j, const op_tensor *const *in, int n_in,
                              op_ctx *ctx) {
    j.a = j.s->a;
    j.b = j.s->b;
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
    parallel_blocks(ctx, j.n, unary_chunk, &j);
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

/* Output elements of blocks [begin, end): an odometer over the folded dims, one kernel call per
 * (partial) innermost row. */
static void binary_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const elt_state *s = j->s;
    const int r = s->rank;
    size_t pos, stop;
    block_span(begin, end, j->n, &pos, &stop);
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
        s->isa->binary(s->bk, j->y + pos, j->x + oa, j->in1 + ob, (int)s->sa[r - 1],
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

static void softmax_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const size_t len = j->s->len;
    for (size_t r = begin; r < end; r++)
        j->s->isa->softmax_row(j->y + r * len, j->x + r * len, len, j->s->logsm);
}

/* ---- layernorm ---------------------------------------------------------------------------- */

/* Rows over axis..rank-1, with scale and bias holding exactly one element per row element (what
 * inference allows is a broadcast onto X[axis:]; the common case is the full shape). */
static bool layernorm_rows(const kern_node *kn, size_t *rows, size_t *len) {
    if (!kfam_f32_static(&kn->in[0]) || !kfam_f32_static(&kn->out[0]) || kn->n_in < 2 ||
        !kfam_f32_static(&kn->in[1]))
        return false;
    for (int i = 1; i < 3; i++)
        if (has_output(kn, i)) return false; /* Mean / InvStdDev outputs: reference */
    int64_t axis;
    if (!rows_at_axis(kn, -1, &axis, rows, len)) return false;
    return kfam_numel(&kn->in[1].shape) == *len &&
           (!kfam_has_input(kn, 2) ||
            (kfam_f32_static(&kn->in[2]) && kfam_numel(&kn->in[2].shape) == *len));
}

static void layernorm_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const size_t len = j->s->len;
    for (size_t r = begin; r < end; r++)
        j->s->isa->layernorm_row(j->y + r * len, j->x + r * len, len, j->in1, j->in2, j->s->eps);
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

/* a = scale / sqrt(var + eps), b = B - mean * a, in double as the reference folds. */
static void batchnorm_fold(float *ab, int64_t c, const float *scale, const float *bias,
                           const float *mean, const float *var, float eps) {
    for (int64_t i = 0; i < c; i++) {
        double a = (double)scale[i] / sqrt((double)var[i] + (double)eps);
        ab[i] = (float)a;
        ab[c + i] = (float)((double)bias[i] - (double)mean[i] * a);
    }
}

static void batchnorm_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const int64_t C = j->s->channels, P = j->s->plane;
    for (size_t q = begin; q < end; q++) {
        int64_t c = (int64_t)q % C;
        const float *x = j->x + (int64_t)q * P;
        float *y = j->y + (int64_t)q * P;
        j->s->isa->affine(y, x, (size_t)P, j->in1[c], j->in1[C + c]);
    }
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

/* Exactly one index per thread: index t owns workspace row t. */
static void pool_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const elt_state *s = j->s;
    const int64_t in_sz = s->pool.ih * s->pool.iw, out_sz = s->pool.oh * s->pool.ow;
    for (size_t t = begin; t < end; t++) {
        float *row = (float *)(void *)(j->ws + t * s->row_stride * sizeof(float));
        size_t p0 = j->n * t / (size_t)j->nthreads;
        size_t p1 = j->n * (t + 1) / (size_t)j->nthreads;
        for (size_t p = p0; p < p1; p++)
            s->isa->pool2d(&s->pool, j->avg, s->cnt_h, s->cnt_w, j->y + (int64_t)p * out_sz,
                           j->x + (int64_t)p * in_sz, row);
    }
}

static void gap_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    for (size_t p = begin; p < end; p++)
        j->y[p] = j->s->isa->sum(j->x + p * j->n, j->n) / (float)j->n;
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
    /* neighbours in the output are never neighbours in the input (they would have merged), so
     * the forms above are: a batch group kept first (optional), two groups that swap, and a
     * block kept last (optional) */
    const int lo = cp[0] == 0, hi = cp[ng - 1] == ng - 1 ? ng - 1 : ng;
    if (hi - lo != 2 || cp[lo] != lo + 1 || cp[lo + 1] != lo) return false;
    s->tform = hi < ng ? TR_BLOCKS : TR_SWAP;
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

/* The swap's tasks are (batch item, block of rows, block of columns), each block a set of 8x8
 * tiles: TR_ROWS rows by TR_BLOCK / TR_ROWS columns (64 KiB read, 64 KiB written), or, for a
 * matrix of fewer than TR_ROWS rows (an image's 3 channels turned channels-last), blocks of
 * TR_COLS columns of all its rows. Whole rows per task left NCHW -> NHWC of 96 channels two
 * tasks of 64 and 32 rows: at 2 threads one thread did two thirds of the work. */
#define TR_ROWS 64
#define TR_COLS 4096
#define TR_BLOCK 262144

static void tr_copy_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    memcpy(j->y + lo, j->x + lo, (hi - lo) * sizeof(float));
}

static void tr_swap_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const elt_state *s = j->s;
    const size_t rows = (size_t)s->t0, cols = (size_t)s->t1, br = j->br, bc = j->bc;
    const size_t nrb = ceil_div(rows, br), ncb = ceil_div(cols, bc);
    for (size_t t = begin; t < end; t++) {
        size_t b = t / (nrb * ncb), r0 = t / ncb % nrb * br, c0 = t % ncb * bc;
        size_t nr = rows - r0 < br ? rows - r0 : br, nc = cols - c0 < bc ? cols - c0 : bc;
        const float *src = j->x + b * rows * cols + r0 * cols + c0;
        float *dst = j->y + b * rows * cols + c0 * rows + r0;
        s->isa->transpose4((uint32_t *)(void *)dst, (const uint32_t *)(const void *)src, nr, nc,
                           cols, rows);
    }
}

/* Output block (b, i1, i0) of tin elements is input block (b, i0, i1); task t = (b, i1). */
static void tr_blocks_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
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
    switch (kind_of(kn->node->op)) {
    case K_BINARY:
        return binary_supports(kn);
    case K_SOFTMAX:
        return softmax_rows(kn, &rows, &len);
    case K_LAYERNORM:
        return layernorm_rows(kn, &rows, &len);
    case K_BATCHNORM:
        return batchnorm_supports(kn);
    case K_POOL:
        return pool_geometry(kn, &g, &cip);
    case K_GAP:
        return kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->out[0]) &&
               kn->in[0].shape.rank >= 3;
    case K_TRANSPOSE:
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
    if (kind == K_POOL) {
        elt_pool2d g;
        bool cip;
        if (!pool_geometry(kn, &g, &cip)) return 0;
        return (size_t)threads * pool_row_stride(&g) * sizeof(float);
    }
    if (kind == K_BATCHNORM) return 2 * (size_t)kn->in[0].shape.d[1] * sizeof(float);
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
    switch (kind_of(n->op)) {
    case K_BINARY:
        s->bk = n->op == IR_OP_ADD   ? ELT_ADD
                : n->op == IR_OP_SUB ? ELT_SUB
                : n->op == IR_OP_MUL ? ELT_MUL
                                     : ELT_DIV;
        binary_fold(&kn->in[0], &kn->in[1], &kn->out[0], s);
        break;
    case K_SOFTMAX:
        s->logsm = n->op == IR_OP_LOGSOFTMAX;
        softmax_rows(kn, &s->rows, &s->len);
        break;
    case K_LAYERNORM:
        layernorm_rows(kn, &s->rows, &s->len);
        st = ir_attr_float(n, "epsilon", 1e-5f, &s->eps);
        break;
    case K_BATCHNORM:
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
    case K_POOL:
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
    case K_GAP:
        break;
    case K_TRANSPOSE:
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
    elt_job j = {.s = s, .x = x->data, .y = y->data, .n = numel};
    switch (kind_of(n->op)) {
    case K_BINARY:
        j.in1 = in[1]->data;
        j.n = op_tensor_numel(y);
        if (j.n > 0) parallel_blocks(ctx, j.n, binary_chunk, &j);
        return ANVIL_OK;
    case K_SOFTMAX:
        if (s->rows > 0 && s->len > 0)
            op_parallel_for(par_ctx(ctx, numel / 2), s->rows, softmax_chunk, &j);
        return ANVIL_OK;
    case K_LAYERNORM:
        j.in1 = in[1]->data;
        j.in2 = n_in > 2 && in[2] ? in[2]->data : NULL;
        if (s->rows > 0 && s->len > 0)
            op_parallel_for(par_ctx(ctx, numel), s->rows, layernorm_chunk, &j);
        return ANVIL_OK;
    case K_BATCHNORM: {
        size_t planes = (size_t)(x->dims[0] * s->channels);
        if (planes == 0 || s->plane == 0) return ANVIL_OK;
        j.in1 = s->ab;
        if (!s->ab) {
            batchnorm_fold(ws, s->channels, in[1]->data, in[2]->data, in[3]->data, in[4]->data,
                           s->bn_eps);
            j.in1 = ws;
        }
        op_parallel_for(par_ctx(ctx, numel), planes, batchnorm_chunk, &j);
        return ANVIL_OK;
    }
    case K_POOL: {
        size_t planes = (size_t)(x->dims[0] * x->dims[1]);
        if (planes == 0 || op_tensor_numel(y) == 0) return ANVIL_OK;
        int T = op_ctx_threads(ctx);
        if (T > s->threads) T = s->threads;
        if ((size_t)T > planes) T = (int)planes;
        if (numel < ELT_PAR_MIN || T < 1) T = 1;
        j.n = planes;
        j.avg = n->op == IR_OP_AVERAGEPOOL;
        j.ws = ws;
        j.nthreads = T;
        op_parallel_for(T > 1 ? ctx : NULL, (size_t)T, pool_chunk, &j);
        return ANVIL_OK;
    }
    case K_GAP: {
        size_t planes = (size_t)(x->dims[0] * x->dims[1]);
        if (planes == 0 || numel / planes == 0) return ANVIL_OK;
        j.n = numel / planes;
        op_parallel_for(par_ctx(ctx, numel), planes, gap_chunk, &j);
        return ANVIL_OK;
    }
    case K_TRANSPOSE: {
        if (numel == 0) return ANVIL_OK;
        const size_t rows = (size_t)s->t0, cols = (size_t)s->t1;
        j.br = rows < TR_ROWS ? rows : TR_ROWS;
        j.bc = rows < TR_ROWS ? TR_COLS : TR_BLOCK / TR_ROWS;
        op_ctx *c = par_ctx(ctx, numel);
        if (s->tform == TR_COPY)
            parallel_blocks(ctx, numel, tr_copy_chunk, &j);
        else if (s->tform == TR_SWAP)
            op_parallel_for(c, (size_t)s->tb * ceil_div(rows, j.br) * ceil_div(cols, j.bc),
                            tr_swap_chunk, &j);
        else
            op_parallel_for(c, (size_t)s->tb * cols, tr_blocks_chunk, &j);
        return ANVIL_OK;
    }
    default:
        return unary_run(n, j, in, n_in, ctx);
    }
}

/* ---- the variant table ---------------------------------------------------------------------
 * Per (op, ISA) one variant; only prepare differs (it records the ISA table in the state). */

/* The variant of op OP on the ISA table elt_isa_<ISA>, named "<ID>_<ISA>". */
#define ELT_VARIANT_ISA(ID, OP, ISA, NEEDS)                                                        \
    static anvil_status prep_##ID##_##ISA(const kern_node *kn, void **state) {                     \
        return prepare_common(kn, &elt_isa_##ISA, state);                                          \
    }                                                                                              \
    static const kern_variant v_##ID##_##ISA = {.name = #ID "_" #ISA,                              \
                                                .op = OP,                                          \
                                                .needs = NEEDS,                                    \
                                                .supports = supports_common,                       \
                                                .workspace_size = workspace_common,                \
                                                .prepare = prep_##ID##_##ISA,                      \
                                                .release = release_common,                         \
                                                .run = run_common};

#define ELT_VARIANT(ID, OP)                                                                        \
    ELT_VARIANT_ISA(ID, OP, avx512, KERN_NEEDS_AVX512)                                             \
    ELT_VARIANT_ISA(ID, OP, avx2, KERN_NEEDS_AVX2)

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
