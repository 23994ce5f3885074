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
#include "kernels/fusion.h"
#include "mathk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(MK_MAX_RANK == IR_MAX_RANK, "mathk.h's rank bound must be anvil's");

#ifdef ANVIL_HAVE_SLEEF
static const bool have_sleef = true;
#else
static const bool have_sleef = false;
#endif

static bool static_of(const op_tinfo *t, anvil_dtype dt) {
    return t->dtype == dt && ir_shape_is_static(&t->shape);
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

/* dt's index in the cast tables (mk_ctype), or -1 where Cast has no kernel for it. */
static int cast_code(anvil_dtype dt) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT32:
        return MK_CF32;
    case ANVIL_DTYPE_FLOAT16:
        return MK_CF16;
    case ANVIL_DTYPE_BFLOAT16:
        return MK_CBF16;
    case ANVIL_DTYPE_INT32:
        return MK_CI32;
    case ANVIL_DTYPE_INT64:
        return MK_CI64;
    case ANVIL_DTYPE_INT8:
        return MK_CI8;
    case ANVIL_DTYPE_UINT8:
        return MK_CU8;
    case ANVIL_DTYPE_BOOL:
        return MK_CBOOL;
    default:
        return -1;
    }
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
            if (!kern_has_input(kn, i) || !kfam_f32_static(&kn->in[i])) return false;
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
        s->cast_from = cast_code(kn->in[0].dtype);
        s->cast_to = cast_code(kn->out[0].dtype);
        s->cast = s->isa->cast && s->cast_from >= 0 && s->cast_to >= 0
                      ? s->isa->cast[s->cast_from][s->cast_to]
                      : NULL;
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

static anvil_status run_common(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)ws;
    const void *data[MK_MAX_OPS] = {0};
    for (int i = 0; i < n_in && i < MK_MAX_OPS; i++) data[i] = in[i] ? in[i]->data : NULL;
    math_exec(state, out[0]->data, data, n_in, op_tensor_numel(out[0]), ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The node becomes one math_exec call on an mk_state holding what this prepare made, so the library
 * computes exactly what the variant does. Emitted libraries do not link SLEEF: the kinds whose
 * kernels need it (mathk.h's (S): Log, the trigonometric functions, Elu, ..., a general Pow, the
 * strided Softmax) are refused, by `can` so that plans made to be emitted leave them to another
 * variant. */

static const char *const mk_emit_files[] = {"kernels/cpu/math/mathk.h",
                                            "kernels/cpu/math/math_run.c",
                                            "kernels/cpu/math/math_avx512.c",
                                            "kernels/cpu/math/math_avx2.c",
                                            "kernels/cpu/eltwise/eltwise.h",
                                            "kernels/cpu/eltwise/eltwise_act.h",
                                            "kernels/cpu/eltwise/eltwise_exp.h",
                                            "kernels/cpu/eltwise/eltwise_vec_avx512.h",
                                            "kernels/cpu/eltwise/eltwise_vec_avx2.h",
                                            NULL};

/* Whether s computes without SLEEF (mathk.h marks the kernels that need it (S)). */
static bool mk_emit_ok(const mk_state *s) {
    switch (s->kind) {
    case K_SOFTMAX:
        return false;
    case K_UNARY:
        return s->uk < MK_POWC;
    case K_BINARY:
        return s->bk != MK_POW;
    default:
        return true;
    }
}

static bool mk_emit_can(const kern_node *kn) {
    mk_state s;
    /* the ISA does not change what a node reduces to (only Cast's kernels differ, and those are
     * AVX-512 only) */
    return plan(kn, &s, &math_isa_avx512, &elt_isa_avx512) && mk_emit_ok(&s);
}

static anvil_status mk_emit_write(const kern_node *kn, const void *state, kern_emit *e) {
    const mk_state *s = state;
    if (!mk_emit_ok(s))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s needs SLEEF's vector functions, which emitted libraries lack",
                        ir_node_label(kn->node), ir_op_name(kn->node->op));
    if (!mk_emit_can(kn))
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: emitted libraries do not take this %s yet",
                        ir_node_label(kn->node), ir_op_name(kn->node->op));
    for (int i = 0; mk_emit_files[i]; i++) CORE_TRY(e->need(e, mk_emit_files[i]));
    CORE_TRY(e->include(e, "kernels/cpu/math/mathk.h"));
    const bool avx512 = s->isa == &math_isa_avx512;
    char fa[64], fb[64];
    e->code(e, "mk_state ms = {0};\n");
    e->code(e, "ms.isa = &%s;\n", avx512 ? "math_isa_avx512" : "math_isa_avx2");
    e->code(e, "ms.kind = (mk_kind)%d;\nms.uk = (mk_unary)%d;\nms.bk = (mk_binary)%d;\n",
            (int)s->kind, (int)s->uk, (int)s->bk);
    e->code(e, "ms.up = (mk_uparam){%s, %s, %d};\n", kern_emit_float(s->up.a, fa, sizeof fa),
            kern_emit_float(s->up.b, fb, sizeof fb), s->up.n);
    e->code(e, "ms.fold.rank = %d;\nms.fold.nops = %d;\n", s->fold.rank, s->fold.nops);
    for (int d = 0; d < s->fold.rank; d++) {
        e->code(e, "ms.fold.dims[%d] = %lld;\n", d, (long long)s->fold.dims[d]);
        for (int w = 0; w < s->fold.nops; w++)
            if (s->fold.st[w][d])
                e->code(e, "ms.fold.st[%d][%d] = %lld;\n", w, d, (long long)s->fold.st[w][d]);
    }
    e->code(e, "ms.es = %zu;\nms.es_in = %zu;\nms.es_out = %zu;\n", s->es, s->es_in, s->es_out);
    if (s->kind == K_CAST)
        e->code(e, "ms.cast_from = %d;\nms.cast_to = %d;\nms.cast = ms.isa->cast[%d][%d];\n",
                s->cast_from, s->cast_to, s->cast_from, s->cast_to);
    const int n_in = e->n_in < MK_MAX_OPS ? e->n_in : MK_MAX_OPS;
    e->code(e, "const void *const min[%d] = {", n_in > 0 ? n_in : 1);
    for (int i = 0; i < n_in; i++)
        e->code(e, "%s%s", i ? ", " : "", kern_has_input(kn, i) ? e->in(e, i) : "NULL");
    e->code(e, "%s};\n", n_in > 0 ? "" : "NULL");
    e->code(e, "math_exec(&ms, %s, min, %d, %zu, %s);\n", e->out(e, 0), e->n_in,
            op_tensor_numel(&e->out_t[0]), e->ctx);
    return ANVIL_OK;
}

static const kern_emitter mk_emitter = {mk_emit_write, mk_emit_can};

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
        return plan(kn, &s, &math_isa_##SFX, &elt_isa_##SFX);                                      \
    }                                                                                              \
    static anvil_status prepare_##SFX(const kern_node *kn, void **state) {                         \
        return prepare_isa(kn, state, &math_isa_##SFX, &elt_isa_##SFX);                            \
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
                                                .run = run_common,                                 \
                                                .emit = &mk_emitter};
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
