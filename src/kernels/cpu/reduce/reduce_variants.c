/* The reduce family: vectorized fp32 ReduceL1 ... ReduceSumSquare, ArgMax / ArgMin and
 * GlobalMaxPool here, Instance/Group/RMS/LpNormalization in norm_variants.c, TopK in topk.c; each
 * as "<op>_avx512" and "<op>_avx2" variants (TopK: one baseline variant).
 *
 * A reduction is resolved in prepare to a canonical form: size-1 dims dropped, neighbouring dims
 * that are both reduced or both kept merged, which leaves alternating kept and reduced groups.
 * Each reduced group is one pass over an (outer, len, inner) view, the innermost group first:
 * inner == 1 reduces contiguous rows, otherwise whole rows of `inner` columns accumulate into
 * vector registers (reduce_simd.h). Later passes combine the partial results of earlier ones
 * (sums add, maxima take the maximum, LogSumExp of LogSumExps is the LogSumExp of the union), so
 * any set of axes works; the partial results live in the workspace. A reduction over no element
 * of size > 1 (size-1 axes, or noop_with_empty_axes) still applies the op to each element (|x|
 * for ReduceL1, log for ReduceLogSum), as the reference does: it is one pass with len 1.
 *
 * Only float32 with static shapes and known axes is taken; other dtypes and axes computed at run
 * time stay with the reference. ReduceLogSumExp needs SLEEF's vector exp. */
#include "reduce.h"
#include "kernels/cpu/family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many input elements a node runs on the calling thread: waking the pool costs
 * more (reduce_run.c has the same). */
#define RED_PAR_MIN ((size_t)1 << 15)

_Static_assert(RED_MAX_RANK == IR_MAX_RANK, "reduce_run.h's rank bound must be anvil's");

typedef enum red_family_kind { K_REDUCE, K_ARG, K_GMP } red_family_kind;

static red_family_kind kind_of(ir_op op) {
    switch (op) {
    case IR_OP_ARGMAX:
    case IR_OP_ARGMIN:
        return K_ARG;
    case IR_OP_GLOBALMAXPOOL:
        return K_GMP;
    default:
        return K_REDUCE;
    }
}

/* ---- Reduce* -------------------------------------------------------------------------------- */

/* The reduced dims of kn as the reference's red_axes reads them (attribute up to opset 17,
 * ReduceSum 12; the second input from then on, which must be known here); false for anything the
 * reference would reject or that is not known before running. */
static bool reduce_axes(const kern_node *kn, bool *red) {
    const ir_node *n = kn->node;
    const int rank = kn->in[0].shape.rank;
    const int since = n->op == IR_OP_REDUCESUM ? 13 : 18;
    bool noop = false;
    if (ir_attr_flag(n, "noop_with_empty_axes", false, &noop) != ANVIL_OK) return false;
    int64_t buf[IR_MAX_RANK];
    const int64_t *axes = NULL;
    size_t count = 0;
    if (n->opset >= since) {
        if (kern_has_input(kn, 1)) {
            const op_tinfo *a = &kn->in[1];
            if (!a->value || a->dtype != ANVIL_DTYPE_INT64 || a->shape.rank != 1 ||
                a->shape.d[0] > IR_MAX_RANK)
                return false;
            if (op_value_ints(n, 1, a, buf, IR_MAX_RANK, &count) != ANVIL_OK) return false;
            axes = buf;
        }
    } else {
        if (kern_has_input(kn, 1)) return false;
        if (ir_attr_ints(n, "axes", &axes, &count) != ANVIL_OK) return false;
    }
    for (int d = 0; d < rank; d++) red[d] = count == 0 && !noop;
    for (size_t k = 0; k < count; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
        if (a < 0 || a >= rank || red[a]) return false;
        red[a] = true;
    }
    return true;
}

/* Fills s's passes from x's shape and the reduced dims. */
static void reduce_form(const ir_shape *x, const bool *red, red_state *s) {
    size_t gsz[IR_MAX_RANK];
    bool gred[IR_MAX_RANK];
    int ng = 0;
    for (int d = 0; d < x->rank; d++) {
        if (x->d[d] == 1) continue;
        if (ng > 0 && gred[ng - 1] == red[d]) {
            gsz[ng - 1] *= (size_t)x->d[d];
            continue;
        }
        gsz[ng] = (size_t)x->d[d];
        gred[ng++] = red[d];
    }
    s->npass = 0;
    s->count = 1;
    for (int g = ng - 1; g >= 0; g--) {
        if (!gred[g]) continue;
        red_pass *p = &s->pass[s->npass++];
        p->outer = 1;
        p->inner = 1;
        p->len = gsz[g];
        for (int h = 0; h < g; h++) p->outer *= gsz[h];
        for (int h = g + 1; h < ng; h++)
            if (!gred[h]) p->inner *= gsz[h];
        s->count *= gsz[g];
    }
    if (s->npass == 0) {
        s->pass[0] = (red_pass){kfam_numel(x), 1, 1};
        s->npass = 1;
    }
    s->buf[0] = s->npass > 1 ? s->pass[0].outer * s->pass[0].inner : 0;
    s->buf[1] = s->npass > 2 ? s->pass[1].outer * s->pass[1].inner : 0;
}

static void reduce_ops(ir_op op, red_state *s) {
    s->rest = RED_OP_SUM;
    s->fin = FIN_NONE;
    switch (op) {
    case IR_OP_REDUCEL1:
        s->first = RED_OP_ASUM;
        break;
    case IR_OP_REDUCEL2:
        s->first = RED_OP_SQSUM;
        s->fin = FIN_SQRT;
        break;
    case IR_OP_REDUCESUMSQUARE:
        s->first = RED_OP_SQSUM;
        break;
    case IR_OP_REDUCELOGSUM:
        s->first = RED_OP_SUM;
        s->fin = FIN_LOG;
        break;
    case IR_OP_REDUCEMEAN:
        s->first = RED_OP_SUM;
        s->fin = FIN_MEAN;
        break;
    case IR_OP_REDUCEMAX:
        s->first = s->rest = RED_OP_MAX;
        break;
    case IR_OP_REDUCEMIN:
        s->first = s->rest = RED_OP_MIN;
        break;
    case IR_OP_REDUCEPROD:
        s->first = s->rest = RED_OP_PROD;
        break;
    case IR_OP_REDUCELOGSUMEXP:
        s->first = s->rest = RED_OP_LSE;
        break;
    default:
        s->first = RED_OP_SUM;
        break;
    }
}

static bool reduce_supports(const kern_node *kn) {
    bool red[IR_MAX_RANK];
#ifndef ANVIL_HAVE_SLEEF
    if (kn->node->op == IR_OP_REDUCELOGSUMEXP) return false;
#endif
    return kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->out[0]) && reduce_axes(kn, red);
}

/* ---- ArgMax / ArgMin --------------------------------------------------------------------------
 */

/* The (outer, len, inner) view of the reduced axis; false where the reference fails (an empty
 * axis) or the column kernel's float indices would not be exact. */
static bool arg_form(const kern_node *kn, red_state *s) {
    const ir_node *n = kn->node;
    const ir_shape *x = &kn->in[0].shape;
    int64_t axis;
    if (!kfam_f32_static(&kn->in[0]) || kn->out[0].dtype != ANVIL_DTYPE_INT64 ||
        !ir_shape_is_static(&kn->out[0].shape) || x->rank < 1)
        return false;
    if (ir_attr_int(n, "axis", 0, &axis) != ANVIL_OK ||
        ir_attr_flag(n, "select_last_index", false, &s->last) != ANVIL_OK)
        return false;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return false;
    red_pass *p = &s->pass[0];
    p->outer = p->inner = 1;
    for (int d = 0; d < x->rank; d++)
        if (d < axis)
            p->outer *= (size_t)x->d[d];
        else if (d > axis)
            p->inner *= (size_t)x->d[d];
    p->len = (size_t)x->d[axis];
    s->npass = 1;
    s->is_max = n->op == IR_OP_ARGMAX;
    return p->len >= 1 && (p->inner == 1 || p->len <= ((size_t)1 << 24));
}

/* ---- the common variant entry points ------------------------------------------------------ */

static bool supports_common(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    red_state s;
    switch (kind_of(kn->node->op)) {
    case K_ARG:
        return arg_form(kn, &s);
    case K_GMP:
        return kfam_f32_static(&kn->in[0]) && kfam_f32_static(&kn->out[0]) &&
               kn->in[0].shape.rank >= 2;
    default:
        return reduce_supports(kn);
    }
}

static void form_common(const kern_node *kn, red_state *s) {
    bool red[IR_MAX_RANK];
    const ir_shape *x = &kn->in[0].shape;
    switch (kind_of(kn->node->op)) {
    case K_ARG:
        arg_form(kn, s);
        s->arg = true;
        break;
    case K_GMP: {
        size_t planes = (size_t)x->d[0] * (size_t)x->d[1];
        s->pass[0] = (red_pass){planes, planes ? kfam_numel(x) / planes : 1, 1};
        s->npass = 1;
        s->first = s->rest = RED_OP_MAX;
        s->fin = FIN_NONE;
        s->count = s->pass[0].len;
        break;
    }
    default:
        reduce_axes(kn, red);
        reduce_form(x, red, s);
        reduce_ops(kn->node->op, s);
        break;
    }
}

/* Whether run_pass splits p's rows (reduce_run.c's split_rows, for the workspace). */
static bool split_rows(const red_state *s, const red_pass *p) {
    return s->threads > 1 && p->inner == 1 && p->outer < (size_t)s->threads &&
           p->len >= RED_PAR_MIN;
}

static void form_parts(const kern_node *kn, red_state *s) {
    s->threads = kn->threads > 0 ? kn->threads : 1;
    s->parts = 0;
    for (int i = 0; i < s->npass; i++)
        if (split_rows(s, &s->pass[i]) && s->pass[i].outer * (size_t)s->threads > s->parts)
            s->parts = s->pass[i].outer * (size_t)s->threads;
}

static size_t workspace_common(const kern_node *kn) {
    red_state s = {0};
    form_common(kn, &s);
    form_parts(kn, &s);
    return (s.buf[0] + s.buf[1] + s.parts) * sizeof(float);
}

static anvil_status prepare_common(const kern_node *kn, const red_isa *isa, void **state) {
    red_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    s->isa = isa;
    form_common(kn, s);
    form_parts(kn, s);
    *state = s;
    return ANVIL_OK;
}

static void release_common(void *state) {
    free(state);
}

static anvil_status run_common(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    reduce_exec(state, in[0]->data, out[0]->data, op_tensor_numel(out[0]), ws, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The node becomes one reduce_exec call on a red_state holding what this prepare made, so the
 * library computes exactly what the variant does. ReduceLogSumExp's kernels need SLEEF's vector
 * exp, which emitted libraries lack: `can` refuses it, so plans made to be emitted leave it to
 * the reference. */

static const char *const red_emit_files[] = {"kernels/cpu/reduce/reduce_run.h",
                                             "kernels/cpu/reduce/reduce_run.c",
                                             "kernels/cpu/reduce/reduce_simd.h",
                                             "kernels/cpu/reduce/reduce_avx512.c",
                                             "kernels/cpu/reduce/reduce_avx2.c",
                                             "kernels/cpu/eltwise/eltwise_exp.h",
                                             "kernels/cpu/eltwise/eltwise_vec_avx512.h",
                                             "kernels/cpu/eltwise/eltwise_vec_avx2.h",
                                             NULL};

static bool red_emit_can(const kern_node *kn) {
    return kn->node->op != IR_OP_REDUCELOGSUMEXP;
}

static anvil_status red_emit_write(const kern_node *kn, const void *state, kern_emit *e) {
    const red_state *s = state;
    if (!red_emit_can(kn) || s->first == RED_OP_LSE || s->rest == RED_OP_LSE)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s needs SLEEF's vector exp, which emitted libraries lack",
                        ir_node_label(kn->node), ir_op_name(kn->node->op));
    for (int i = 0; red_emit_files[i]; i++) CORE_TRY(e->need(e, red_emit_files[i]));
    CORE_TRY(e->include(e, "kernels/cpu/reduce/reduce_run.h"));
    e->code(e, "red_state rs = {0};\n");
    e->code(e, "rs.isa = &%s;\n",
            s->isa == &reduce_isa_avx512 ? "reduce_isa_avx512" : "reduce_isa_avx2");
    e->code(e, "rs.npass = %d;\n", s->npass);
    for (int i = 0; i < s->npass; i++)
        e->code(e, "rs.pass[%d] = (red_pass){%zu, %zu, %zu};\n", i, s->pass[i].outer,
                s->pass[i].len, s->pass[i].inner);
    e->code(e, "rs.first = (red_op)%d;\nrs.rest = (red_op)%d;\nrs.fin = (red_fin)%d;\n",
            (int)s->first, (int)s->rest, (int)s->fin);
    e->code(e, "rs.count = %zu;\nrs.buf[0] = %zu;\nrs.buf[1] = %zu;\n", s->count, s->buf[0],
            s->buf[1]);
    e->code(e, "rs.threads = %d;\nrs.parts = %zu;\n", s->threads, s->parts);
    e->code(e, "rs.is_max = %d;\nrs.last = %d;\nrs.arg = %d;\n", (int)s->is_max, (int)s->last,
            (int)s->arg);
    const bool ws = s->buf[0] + s->buf[1] + s->parts > 0;
    e->code(e, "reduce_exec(&rs, (const float *)(%s), %s, %zu, %s%s%s, %s);\n", e->in(e, 0),
            e->out(e, 0), op_tensor_numel(&e->out_t[0]), ws ? "(float *)(" : "",
            ws ? e->ws : "NULL", ws ? ")" : "", e->ctx);
    return ANVIL_OK;
}

static const kern_emitter red_emitter = {red_emit_write, red_emit_can};

/* ---- the variant table ---------------------------------------------------------------------
 * Per (op, ISA) one variant; only prepare differs (it records the ISA table in the state). */

/* The variants of op OP, "<ID>_avx512" and "<ID>_avx2" (family.h). */
#define RED_VARIANT(ID, OP) KFAM_ISA_VARIANTS(ID, OP, reduce_isa_, &red_emitter, NULL)

#define RED_OPS(X)                                                                                 \
    X(reducel1, IR_OP_REDUCEL1)                                                                    \
    X(reducel2, IR_OP_REDUCEL2)                                                                    \
    X(reducelogsum, IR_OP_REDUCELOGSUM)                                                            \
    X(reducelogsumexp, IR_OP_REDUCELOGSUMEXP)                                                      \
    X(reducemax, IR_OP_REDUCEMAX)                                                                  \
    X(reducemean, IR_OP_REDUCEMEAN)                                                                \
    X(reducemin, IR_OP_REDUCEMIN)                                                                  \
    X(reduceprod, IR_OP_REDUCEPROD)                                                                \
    X(reducesum, IR_OP_REDUCESUM)                                                                  \
    X(reducesumsquare, IR_OP_REDUCESUMSQUARE)                                                      \
    X(argmax, IR_OP_ARGMAX)                                                                        \
    X(argmin, IR_OP_ARGMIN)                                                                        \
    X(globalmaxpool, IR_OP_GLOBALMAXPOOL)

RED_OPS(RED_VARIANT)

/* For each op the AVX-512 variant first: the first applicable variant is the default. */
#define RED_REF(ID, OP) &v_##ID##_avx512, &v_##ID##_avx2,
#define RED_NORM_REF(ID) &reduce_v_##ID##_avx512, &reduce_v_##ID##_avx2,
const kern_variant *const kern_family_reduce[] = {
    RED_OPS(RED_REF) RED_NORM_VARIANTS(RED_NORM_REF) & reduce_v_topk,
    NULL,
};
