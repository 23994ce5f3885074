/* The math family: vectorized variants of the elementwise ops the eltwise family lacks, each
 * "<op>_avx512" and, after it in the cascade, "<op>_avx2" (every op but Cast):
 *   - Pow: a constant exponent (scalar or all-equal) becomes a unary kernel (0, 1, +-0.5, small
 *     integers by multiplication, other values through SLEEF's pow); a tensor exponent of the
 *     base's dtype runs SLEEF's pow with broadcast;
 *   - Where (any element size), PRelu, Max/Min/Sum/Mean (variadic), Equal/Less/LessOrEqual/
 *     Greater/GreaterOrEqual (fp32 -> BOOL), And/Or/Xor/Not, all with multidirectional broadcast
 *     folded like the reference's iterator;
 *   - unary fp32 math: Sqrt, Neg, Abs, Reciprocal, Floor, Ceil, Round, Sign, Softsign,
 *     ThresholdedRelu, and with SLEEF Log, the trigonometric and hyperbolic functions, Elu, Selu,
 *     Celu, Mish, Swish;
 *   - Cast between FLOAT, FLOAT16, BFLOAT16, INT32, INT64, INT8, UINT8 and BOOL;
 *   - Softmax / LogSoftmax (opset >= 13) over a non-last axis (with SLEEF).
 *
 * This file is baseline code: it decides in prepare what a node reduces to and splits the work
 * across threads; the arithmetic lives in math_avx512.c and math_avx2.c (mathk.h). supports()
 * accepts only nodes computed as the reference computes them (fp32 unless said otherwise, static
 * shapes); the rest stays with the reference. */
#include "../eltwise/eltwise.h"
#include "kernels/kernels.h"
#include "kernels/cpu/family.h"
#include "mathk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many elements a node runs on the calling thread: waking the pool costs more. */
#define MK_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel block of the flat and broadcast kernels. */
#define MK_BLOCK ((size_t)4096)
/* Most operands of a folded broadcast (Where's 3, variadic ops' inputs). */
#define MK_MAX_OPS 8
/* Lines per task of the strided softmax (adjacent lines share cache lines). */
#define MK_SMX_COLS ((size_t)64)

/* The output walked as `rank` dims (after folding), each operand with its element strides (0:
 * repeated along that dim). The innermost strides are 0 or 1. */
typedef struct mk_fold {
    int rank, nops;
    int64_t dims[IR_MAX_RANK];
    int64_t st[MK_MAX_OPS][IR_MAX_RANK];
} mk_fold;

typedef enum mk_kind {
    K_UNARY,    /* also Pow with a constant exponent */
    K_BINARY,   /* Pow with a tensor exponent, PRelu */
    K_COMPARE,  /* fp32 -> BOOL */
    K_LOGIC,    /* And, Or, Xor (broadcast), Not (flat) */
    K_VARIADIC, /* Max, Min, Sum, Mean */
    K_WHERE,
    K_CAST,
    K_SOFTMAX,
} mk_kind;

typedef struct mk_state {
    const mk_isa *isa;  /* the variant's kernels */
    const elt_isa *elt; /* its ISA's eltwise kernels (softmax rows) */
    mk_kind kind;
    mk_unary uk;
    mk_uparam up;
    mk_binary bk;
    mk_fold fold;
    size_t es;       /* Where: element bytes */
    mk_cast_fn cast; /* Cast */
    size_t es_in, es_out;
    size_t outer, len, inner; /* softmax lines */
    bool logsm;
} mk_state;

typedef struct mk_job {
    const mk_state *s;
    const void *in[MK_MAX_OPS];
    void *out;
    size_t n; /* output elements */
    int n_in;
} mk_job;

#ifdef ANVIL_HAVE_SLEEF
static const bool have_sleef = true;
#else
static const bool have_sleef = false;
#endif

static bool static_of(const op_tinfo *t, anvil_dtype dt) {
    return t->dtype == dt && ir_shape_is_static(&t->shape);
}

static size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

/* Runs fn over the MK_BLOCK-element blocks of n elements (in parallel when n is large). */
static void parallel_blocks(op_ctx *ctx, size_t n, op_range_fn fn, void *job) {
    if (n == 0) return;
    op_parallel_for(n >= MK_PAR_MIN ? ctx : NULL, ceil_div(n, MK_BLOCK), fn, job);
}

static inline void block_span(size_t begin, size_t end, size_t n, size_t *lo, size_t *hi) {
    *lo = begin * MK_BLOCK;
    *hi = end * MK_BLOCK < n ? end * MK_BLOCK : n;
}

/* ---- broadcast folding ---------------------------------------------------------------------- */

/* Folds the broadcast of ops[0..nops) onto out like the reference's iterator: size-1 output dims
 * dropped, neighbours merged while every operand keeps its stride pattern. False when an operand
 * does not broadcast to out (inference guarantees it does). */
static bool fold_init(mk_fold *f, const op_tinfo *const *ops, int nops, const op_tinfo *o) {
    if (nops < 1 || nops > MK_MAX_OPS) return false;
    const int r = o->shape.rank;
    int64_t st[MK_MAX_OPS][IR_MAX_RANK];
    for (int w = 0; w < nops; w++)
        if (!kfam_bcast_strides(ops[w], o, st[w])) return false;
    int k = 0;
    for (int d = 0; d < r; d++) {
        const int64_t dim = o->shape.d[d];
        if (dim == 1) continue;
        bool merge = k > 0;
        for (int w = 0; w < nops && merge; w++) merge = f->st[w][k - 1] == st[w][d] * dim;
        if (merge) {
            f->dims[k - 1] *= dim;
            for (int w = 0; w < nops; w++) f->st[w][k - 1] = st[w][d];
            continue;
        }
        f->dims[k] = dim;
        for (int w = 0; w < nops; w++) f->st[w][k] = st[w][d];
        k++;
    }
    if (k == 0) {
        f->dims[0] = 1;
        for (int w = 0; w < nops; w++) f->st[w][0] = 0;
        k = 1;
    }
    f->rank = k;
    f->nops = nops;
    return true;
}

/* One (partial) innermost row: output elements [pos, pos + cnt), operand w starting at element
 * off[w] with stride s->fold.st[w][rank - 1]. */
typedef void (*mk_row_fn)(const mk_job *j, size_t pos, const int64_t *off, size_t cnt);

/* Output elements [pos, stop): an odometer over the folded dims, one call per row. */
static void fold_walk(const mk_fold *f, size_t pos, size_t stop, mk_row_fn fn, const mk_job *j) {
    const int r = f->rank, no = f->nops;
    int64_t idx[IR_MAX_RANK], off[MK_MAX_OPS] = {0};
    size_t rem = pos;
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)f->dims[d]);
        rem /= (size_t)f->dims[d];
        for (int w = 0; w < no; w++) off[w] += idx[d] * f->st[w][d];
    }
    const int64_t inner = f->dims[r - 1];
    while (pos < stop) {
        size_t cnt = (size_t)(inner - idx[r - 1]);
        if (cnt > stop - pos) cnt = stop - pos;
        fn(j, pos, off, cnt);
        pos += cnt;
        idx[r - 1] += (int64_t)cnt;
        for (int w = 0; w < no; w++) off[w] += (int64_t)cnt * f->st[w][r - 1];
        for (int d = r - 1; d > 0 && idx[d] == f->dims[d]; d--) {
            for (int w = 0; w < no; w++) off[w] += f->st[w][d - 1] - f->dims[d] * f->st[w][d];
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

static int inner_stride(const mk_state *s, int w) {
    return (int)s->fold.st[w][s->fold.rank - 1];
}

static void row_binary(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    s->isa->binary(s->bk, (float *)j->out + pos, (const float *)j->in[0] + off[0],
                   (const float *)j->in[1] + off[1], inner_stride(s, 0), inner_stride(s, 1), cnt);
}

static void row_compare(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    s->isa->compare(s->bk, (uint8_t *)j->out + pos, (const float *)j->in[0] + off[0],
                    (const float *)j->in[1] + off[1], inner_stride(s, 0), inner_stride(s, 1), cnt);
}

static void row_logic(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    s->isa->logic(s->bk, (uint8_t *)j->out + pos, (const uint8_t *)j->in[0] + off[0],
                  (const uint8_t *)j->in[1] + off[1], inner_stride(s, 0), inner_stride(s, 1), cnt);
}

static void row_where(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    const size_t es = s->es;
    s->isa->where(es, (char *)j->out + pos * es, (const uint8_t *)j->in[0] + off[0],
                  (const char *)j->in[1] + (size_t)off[1] * es,
                  (const char *)j->in[2] + (size_t)off[2] * es, inner_stride(s, 0),
                  inner_stride(s, 1), inner_stride(s, 2), cnt);
}

/* The inputs folded into the output row in the reference's order: f(x0, x1), then f(out, xk);
 * Mean divides at the end. One input: a copy (broadcast when the output is larger). */
static void row_variadic(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    float *o = (float *)j->out + pos;
    const float *x0 = (const float *)j->in[0] + off[0];
    if (j->n_in == 1) {
        if (inner_stride(s, 0))
            s->isa->unary(MK_COPY, NULL, o, x0, cnt);
        else
            s->isa->unary(MK_FILL, &(mk_uparam){.a = x0[0]}, o, o, cnt);
        return;
    }
    s->isa->binary(s->bk, o, x0, (const float *)j->in[1] + off[1], inner_stride(s, 0),
                   inner_stride(s, 1), cnt);
    for (int w = 2; w < j->n_in; w++)
        s->isa->binary(s->bk, o, o, (const float *)j->in[w] + off[w], 1, inner_stride(s, w), cnt);
    if (s->kind == K_VARIADIC && s->uk == MK_DIVC) s->isa->unary(MK_DIVC, &s->up, o, o, cnt);
}

typedef struct walk_arg {
    const mk_job *j;
    mk_row_fn fn;
} walk_arg;

static void walk_chunk(void *arg, size_t begin, size_t end) {
    const walk_arg *a = arg;
    size_t lo, hi;
    block_span(begin, end, a->j->n, &lo, &hi);
    fold_walk(&a->j->s->fold, lo, hi, a->fn, a->j);
}

/* ---- what each op means ------------------------------------------------------------------- */

static bool unary_kind(const ir_node *n, mk_unary *k, mk_uparam *p) {
    float a = 0.0f, b = 0.0f;
    bool ok = true;
    switch (n->op) {
    case IR_OP_SQRT:
        *k = MK_SQRT;
        break;
    case IR_OP_NEG:
        *k = MK_NEG;
        break;
    case IR_OP_ABS:
        *k = MK_ABS;
        break;
    case IR_OP_RECIPROCAL:
        *k = MK_RECIP;
        break;
    case IR_OP_FLOOR:
        *k = MK_FLOOR;
        break;
    case IR_OP_CEIL:
        *k = MK_CEIL;
        break;
    case IR_OP_ROUND:
        *k = MK_ROUND;
        break;
    case IR_OP_SIGN:
        *k = MK_SIGN;
        break;
    case IR_OP_SOFTSIGN:
        *k = MK_SOFTSIGN;
        break;
    case IR_OP_THRESHOLDEDRELU:
        *k = MK_THRELU;
        ok = ir_attr_float(n, "alpha", 1.0f, &a) == ANVIL_OK;
        break;
    case IR_OP_LOG:
        *k = MK_LOG;
        break;
    case IR_OP_SIN:
        *k = MK_SIN;
        break;
    case IR_OP_COS:
        *k = MK_COS;
        break;
    case IR_OP_TAN:
        *k = MK_TAN;
        break;
    case IR_OP_ASIN:
        *k = MK_ASIN;
        break;
    case IR_OP_ACOS:
        *k = MK_ACOS;
        break;
    case IR_OP_ATAN:
        *k = MK_ATAN;
        break;
    case IR_OP_SINH:
        *k = MK_SINH;
        break;
    case IR_OP_COSH:
        *k = MK_COSH;
        break;
    case IR_OP_ASINH:
        *k = MK_ASINH;
        break;
    case IR_OP_ACOSH:
        *k = MK_ACOSH;
        break;
    case IR_OP_ATANH:
        *k = MK_ATANH;
        break;
    case IR_OP_ELU:
        *k = MK_ELU;
        ok = ir_attr_float(n, "alpha", 1.0f, &a) == ANVIL_OK;
        break;
    case IR_OP_SELU:
        *k = MK_SELU;
        ok = ir_attr_float(n, "alpha", 1.67326319217681884765625f, &a) == ANVIL_OK &&
             ir_attr_float(n, "gamma", 1.05070102214813232421875f, &b) == ANVIL_OK;
        break;
    case IR_OP_CELU:
        *k = MK_CELU;
        ok = ir_attr_float(n, "alpha", 1.0f, &a) == ANVIL_OK && a != 0.0f;
        break;
    case IR_OP_MISH:
        *k = MK_MISH;
        break;
    case IR_OP_SWISH:
        *k = MK_SWISH;
        ok = ir_attr_float(n, "alpha", 1.0f, &a) == ANVIL_OK;
        break;
    default:
        return false;
    }
    p->a = a;
    p->b = b;
    p->n = 0;
    return ok && (have_sleef || *k < MK_POWC);
}

/* Pow with a constant exponent: the unary kernel computing pow(x, e) as the reference does
 * (powf for an fp32 exponent, pow in double rounded to float for other exponent dtypes, which
 * agree on every case below). False: no such kernel (a non-finite exponent, or one fp32 cannot
 * hold, or SLEEF missing for the general case). */
static bool pow_const_kind(const kern_node *kn, mk_unary *k, mk_uparam *p) {
    const op_tinfo *e = &kn->in[1];
    size_t cnt = kfam_numel(&e->shape);
    if (!e->value || cnt == 0 || !core_dtype_supported(e->dtype) ||
        kfam_numel(&kn->out[0].shape) != kfam_numel(&kn->in[0].shape))
        return false;
    const double v = core_load_f64(e->dtype, e->value, 0);
    for (size_t i = 1; i < cnt; i++)
        if (core_load_f64(e->dtype, e->value, i) != v) return false;
    if (!isfinite(v)) return false;
    p->a = 0.0f;
    p->b = 0.0f;
    p->n = 0;
    if (v == 0.0) {
        *k = MK_FILL; /* pow(x, 0) is 1 for every x, NaN included */
        p->a = 1.0f;
    } else if (v == 1.0) {
        *k = MK_COPY;
    } else if (v == 0.5) {
        *k = MK_POW_HALF;
    } else if (v == -0.5) {
        *k = MK_POW_MHALF;
    } else if (v == floor(v) && fabs(v) <= MK_POWI_MAX) {
        *k = MK_POWI;
        p->n = (int)v;
    } else if (have_sleef && (double)(float)v == v) {
        *k = MK_POWC;
        p->a = (float)v;
    } else {
        return false;
    }
    return true;
}

static bool compare_kind(ir_op op, mk_binary *k) {
    switch (op) {
    case IR_OP_EQUAL:
        *k = MK_EQ;
        return true;
    case IR_OP_LESS:
        *k = MK_LT;
        return true;
    case IR_OP_LESSOREQUAL:
        *k = MK_LE;
        return true;
    case IR_OP_GREATER:
        *k = MK_GT;
        return true;
    case IR_OP_GREATEROREQUAL:
        *k = MK_GE;
        return true;
    default:
        return false;
    }
}

/* Softmax lines from opset 13 on: the dim `axis`, here a dim other than the last (the eltwise
 * family runs the last one, and every axis before opset 13). */
static bool softmax_lines(const kern_node *kn, size_t *outer, size_t *len, size_t *inner) {
    const ir_shape *x = &kn->in[0].shape;
    int64_t axis;
    if (!have_sleef || kn->node->opset < 13 || !kfam_f32_static(&kn->in[0]) ||
        !kfam_f32_static(&kn->out[0]) || ir_attr_int(kn->node, "axis", -1, &axis) != ANVIL_OK)
        return false;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank - 1) return false;
    *outer = *len = *inner = 1;
    for (int d = 0; d < x->rank; d++)
        *(d < axis ? outer : d == axis ? len : inner) *= (size_t)x->d[d];
    return true;
}

/* Fills s with what node kn reduces to on the kernels of isa / elt; false when the family does
 * not run it. */
static bool plan(const kern_node *kn, mk_state *s, const mk_isa *isa, const elt_isa *elt) {
    const ir_node *n = kn->node;
    const op_tinfo *ops[MK_MAX_OPS];
    memset(s, 0, sizeof *s);
    s->isa = isa;
    s->elt = elt;
    if (kn->n_out < 1 || !ir_shape_is_static(&kn->out[0].shape)) return false;
    for (int i = 0; i < kn->n_in && i < MK_MAX_OPS; i++) ops[i] = &kn->in[i];
    switch (n->op) {
    case IR_OP_POW:
        if (kn->n_in != 2 || !kfam_f32_static(&kn->in[0]) || !kfam_f32_static(&kn->out[0]) ||
            !ir_shape_is_static(&kn->in[1].shape))
            return false;
        s->kind = K_UNARY;
        if (pow_const_kind(kn, &s->uk, &s->up)) return true;
        s->kind = K_BINARY;
        s->bk = MK_POW;
        return have_sleef && kn->in[1].dtype == ANVIL_DTYPE_FLOAT32 &&
               fold_init(&s->fold, ops, 2, &kn->out[0]);
    case IR_OP_PRELU:
        s->kind = K_BINARY;
        s->bk = MK_PRELU;
        return kn->n_in == 2 && kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->in[1]) &&
               kfam_f32_static(&kn->out[0]) && fold_init(&s->fold, ops, 2, &kn->out[0]);
    case IR_OP_EQUAL:
    case IR_OP_LESS:
    case IR_OP_LESSOREQUAL:
    case IR_OP_GREATER:
    case IR_OP_GREATEROREQUAL:
        s->kind = K_COMPARE;
        compare_kind(n->op, &s->bk);
        return kn->n_in == 2 && kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->in[1]) &&
               static_of(&kn->out[0], ANVIL_DTYPE_BOOL) && fold_init(&s->fold, ops, 2, &kn->out[0]);
    case IR_OP_AND:
    case IR_OP_OR:
    case IR_OP_XOR:
        s->kind = K_LOGIC;
        s->bk = n->op == IR_OP_AND ? MK_AND : n->op == IR_OP_OR ? MK_OR : MK_XOR;
        return kn->n_in == 2 && static_of(&kn->in[0], ANVIL_DTYPE_BOOL) &&
               static_of(&kn->in[1], ANVIL_DTYPE_BOOL) &&
               static_of(&kn->out[0], ANVIL_DTYPE_BOOL) && fold_init(&s->fold, ops, 2, &kn->out[0]);
    case IR_OP_NOT:
        s->kind = K_LOGIC;
        s->bk = MK_NOT;
        return static_of(&kn->in[0], ANVIL_DTYPE_BOOL) && static_of(&kn->out[0], ANVIL_DTYPE_BOOL);
    case IR_OP_MAX:
    case IR_OP_MIN:
    case IR_OP_SUM:
    case IR_OP_MEAN:
        s->kind = K_VARIADIC;
        s->bk = n->op == IR_OP_MAX ? MK_MAX : n->op == IR_OP_MIN ? MK_MIN : MK_ADD;
        if (n->op == IR_OP_MEAN && kn->n_in > 1) {
            s->uk = MK_DIVC;
            s->up.a = (float)kn->n_in;
        } else {
            s->uk = MK_COPY;
        }
        if (!kfam_f32_static(&kn->out[0]) || kn->n_in > MK_MAX_OPS) return false;
        for (int i = 0; i < kn->n_in; i++)
            if (!kfam_has_input(kn, i) || !kfam_f32_static(&kn->in[i])) return false;
        return fold_init(&s->fold, ops, kn->n_in, &kn->out[0]);
    case IR_OP_WHERE:
        s->kind = K_WHERE;
        if (kn->n_in != 3 || !static_of(&kn->in[0], ANVIL_DTYPE_BOOL)) return false;
        s->es = anvil_dtype_size(kn->out[0].dtype);
        for (int i = 1; i < 3; i++)
            if (!static_of(&kn->in[i], kn->out[0].dtype)) return false;
        return (s->es == 1 || s->es == 2 || s->es == 4 || s->es == 8) &&
               fold_init(&s->fold, ops, 3, &kn->out[0]);
    case IR_OP_CAST:
        s->kind = K_CAST;
        if (kn->in[0].dtype == kn->out[0].dtype || !ir_shape_is_static(&kn->in[0].shape))
            return false;
        s->cast = s->isa->cast ? s->isa->cast(kn->in[0].dtype, kn->out[0].dtype) : NULL;
        s->es_in = anvil_dtype_size(kn->in[0].dtype);
        s->es_out = anvil_dtype_size(kn->out[0].dtype);
        return s->cast != NULL;
    case IR_OP_SOFTMAX:
    case IR_OP_LOGSOFTMAX:
        s->kind = K_SOFTMAX;
        s->logsm = n->op == IR_OP_LOGSOFTMAX;
        return softmax_lines(kn, &s->outer, &s->len, &s->inner);
    default:
        s->kind = K_UNARY;
        return kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->out[0]) &&
               unary_kind(n, &s->uk, &s->up);
    }
}

/* ---- run ------------------------------------------------------------------------------------ */

static void unary_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->isa->unary(j->s->uk, &j->s->up, (float *)j->out + lo, (const float *)j->in[0] + lo,
                     hi - lo);
}

static void not_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->isa->logic(MK_NOT, (uint8_t *)j->out + lo, (const uint8_t *)j->in[0] + lo, NULL, 1, 0,
                     hi - lo);
}

static void cast_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->cast((char *)j->out + lo * j->s->es_out, (const char *)j->in[0] + lo * j->s->es_in,
               hi - lo);
}

/* Task t: outer slice t / tasks-per-slice, lines [c0, c0 + MK_SMX_COLS) of it; with one line
 * per slice (inner == 1) a task is a contiguous row. */
static void softmax_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    const mk_state *s = j->s;
    const float *x = j->in[0];
    float *y = j->out;
    if (s->inner == 1) {
        const elt_isa *e = s->elt;
        for (size_t t = begin; t < end; t++)
            e->softmax_row(y + t * s->len, x + t * s->len, s->len, s->logsm);
        return;
    }
    const size_t per = ceil_div(s->inner, MK_SMX_COLS);
    for (size_t t = begin; t < end; t++) {
        size_t o = t / per, c0 = t % per * MK_SMX_COLS;
        size_t cols = s->inner - c0 < MK_SMX_COLS ? s->inner - c0 : MK_SMX_COLS;
        size_t base = o * s->len * s->inner + c0;
        s->isa->softmax_cols(y + base, x + base, s->len, s->inner, cols, s->logsm);
    }
}

static anvil_status run_common(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)ws;
    const mk_state *s = state;
    mk_job j = {.s = s, .out = out[0]->data, .n = op_tensor_numel(out[0]), .n_in = n_in};
    for (int i = 0; i < n_in && i < MK_MAX_OPS; i++) j.in[i] = in[i] ? in[i]->data : NULL;
    if (j.n == 0) return ANVIL_OK;
    walk_arg w = {&j, NULL};
    switch (s->kind) {
    case K_UNARY:
        parallel_blocks(ctx, j.n, unary_chunk, &j);
        return ANVIL_OK;
    case K_CAST:
        parallel_blocks(ctx, j.n, cast_chunk, &j);
        return ANVIL_OK;
    case K_LOGIC:
        if (s->bk == MK_NOT) {
            parallel_blocks(ctx, j.n, not_chunk, &j);
            return ANVIL_OK;
        }
        w.fn = row_logic;
        break;
    case K_BINARY:
        w.fn = row_binary;
        break;
    case K_COMPARE:
        w.fn = row_compare;
        break;
    case K_VARIADIC:
        w.fn = row_variadic;
        break;
    case K_WHERE:
        w.fn = row_where;
        break;
    case K_SOFTMAX: {
        size_t tasks = s->inner == 1 ? s->outer : s->outer * ceil_div(s->inner, MK_SMX_COLS);
        op_parallel_for(j.n >= MK_PAR_MIN / 2 ? ctx : NULL, tasks, softmax_chunk, &j);
        return ANVIL_OK;
    }
    }
    parallel_blocks(ctx, j.n, walk_chunk, &w);
    return ANVIL_OK;
}

/* ---- the variant table -------------------------------------------------------------------- */

static anvil_status prepare_isa(const kern_node *kn, void **state, const mk_isa *isa,
                                const elt_isa *elt) {
    mk_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan(kn, s, isa, elt)) {
        free(s);
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: the math family does not run this node",
                        ir_node_label(kn->node));
    }
    *state = s;
    return ANVIL_OK;
}

static void release_common(void *state) {
    free(state);
}

/* supports / prepare of one ISA's variants. */
#define MK_ISA_FNS(SFX)                                                                            \
    static bool supports_##SFX(const kern_node *kn, const core_hw *hw) {                           \
        (void)hw;                                                                                  \
        mk_state s;                                                                                \
        return plan(kn, &s, &mk_isa_##SFX, &elt_isa_##SFX);                                        \
    }                                                                                              \
    static anvil_status prepare_##SFX(const kern_node *kn, void **state) {                         \
        return prepare_isa(kn, state, &mk_isa_##SFX, &elt_isa_##SFX);                              \
    }
MK_ISA_FNS(avx512)
MK_ISA_FNS(avx2)

#define MK_VARIANT_ISA(ID, OP, SFX, NEEDS)                                                         \
    static const kern_variant v_##ID##_##SFX = {.name = #ID "_" #SFX,                              \
                                                .op = OP,                                          \
                                                .needs = NEEDS,                                    \
                                                .supports = supports_##SFX,                        \
                                                .prepare = prepare_##SFX,                          \
                                                .release = release_common,                         \
                                                .run = run_common};
#define MK_VARIANT_AVX512(ID, OP) MK_VARIANT_ISA(ID, OP, avx512, KERN_NEEDS_AVX512)
#define MK_VARIANT_AVX2(ID, OP) MK_VARIANT_ISA(ID, OP, avx2, KERN_NEEDS_AVX2)

/* Ops whose kernels need only arithmetic (Pow's general cases ask for SLEEF in plan()). */
#define MK_PLAIN(X)                                                                                \
    X(pow, IR_OP_POW)                                                                              \
    X(where, IR_OP_WHERE)                                                                          \
    X(sqrt, IR_OP_SQRT)                                                                            \
    X(neg, IR_OP_NEG)                                                                              \
    X(abs, IR_OP_ABS)                                                                              \
    X(reciprocal, IR_OP_RECIPROCAL)                                                                \
    X(floor, IR_OP_FLOOR)                                                                          \
    X(ceil, IR_OP_CEIL)                                                                            \
    X(round, IR_OP_ROUND)                                                                          \
    X(sign, IR_OP_SIGN)                                                                            \
    X(softsign, IR_OP_SOFTSIGN)                                                                    \
    X(thresholdedrelu, IR_OP_THRESHOLDEDRELU)                                                      \
    X(max, IR_OP_MAX)                                                                              \
    X(min, IR_OP_MIN)                                                                              \
    X(sum, IR_OP_SUM)                                                                              \
    X(mean, IR_OP_MEAN)                                                                            \
    X(prelu, IR_OP_PRELU)                                                                          \
    X(equal, IR_OP_EQUAL)                                                                          \
    X(less, IR_OP_LESS)                                                                            \
    X(lessorequal, IR_OP_LESSOREQUAL)                                                              \
    X(greater, IR_OP_GREATER)                                                                      \
    X(greaterorequal, IR_OP_GREATEROREQUAL)                                                        \
    X(and, IR_OP_AND)                                                                              \
    X(or, IR_OP_OR)                                                                                \
    X(xor, IR_OP_XOR)                                                                              \
    X(not, IR_OP_NOT)

/* Cast: AVX-512 only (its kernels lean on AVX-512's int64 conversions). */
#define MK_CAST(X) X(cast, IR_OP_CAST)

/* Ops that need SLEEF's vector functions. */
#ifdef ANVIL_HAVE_SLEEF
#define MK_SLEEF(X)                                                                                \
    X(log, IR_OP_LOG)                                                                              \
    X(sin, IR_OP_SIN)                                                                              \
    X(cos, IR_OP_COS)                                                                              \
    X(tan, IR_OP_TAN)                                                                              \
    X(asin, IR_OP_ASIN)                                                                            \
    X(acos, IR_OP_ACOS)                                                                            \
    X(atan, IR_OP_ATAN)                                                                            \
    X(sinh, IR_OP_SINH)                                                                            \
    X(cosh, IR_OP_COSH)                                                                            \
    X(asinh, IR_OP_ASINH)                                                                          \
    X(acosh, IR_OP_ACOSH)                                                                          \
    X(atanh, IR_OP_ATANH)                                                                          \
    X(elu, IR_OP_ELU)                                                                              \
    X(selu, IR_OP_SELU)                                                                            \
    X(celu, IR_OP_CELU)                                                                            \
    X(mish, IR_OP_MISH)                                                                            \
    X(swish, IR_OP_SWISH)                                                                          \
    X(softmax_axis, IR_OP_SOFTMAX)                                                                 \
    X(logsoftmax_axis, IR_OP_LOGSOFTMAX)
#else
#define MK_SLEEF(X)
#endif

MK_PLAIN(MK_VARIANT_AVX512)
MK_CAST(MK_VARIANT_AVX512)
MK_SLEEF(MK_VARIANT_AVX512)
MK_PLAIN(MK_VARIANT_AVX2)
MK_SLEEF(MK_VARIANT_AVX2)

/* Per op, the AVX-512 variant before the AVX2 one (the registry keeps this order). */
#define MK_REF_AVX512(ID, OP) &v_##ID##_avx512,
#define MK_REF_AVX2(ID, OP) &v_##ID##_avx2,
const kern_variant *const kern_family_math[] = {MK_PLAIN(MK_REF_AVX512) MK_CAST(
    MK_REF_AVX512) MK_SLEEF(MK_REF_AVX512) MK_PLAIN(MK_REF_AVX2) MK_SLEEF(MK_REF_AVX2) NULL};
