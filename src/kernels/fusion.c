/* Fused epilogues: the mapping to the GEMM epilogue, and the fallback the runtime applies after a
 * variant that does not fuse. The fallback reuses the GEMM's scalar epilogue over output 0 viewed
 * as rows of its last dim, so there is one definition of every activation's arithmetic. */
#include "fusion.h"

#include "kernels/cpu/eltwise/eltwise.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef ANVIL_HAVE_SLEEF
static bool elt_kind_of(ir_act a, elt_unary_kind *k) {
    switch (a) {
    case IR_ACT_SIGMOID:
        *k = ELT_SIGMOID;
        return true;
    case IR_ACT_TANH:
        *k = ELT_TANH;
        return true;
    case IR_ACT_GELU_ERF:
        *k = ELT_GELU;
        return true;
    case IR_ACT_GELU_TANH:
        *k = ELT_GELU_TANH;
        return true;
    case IR_ACT_SILU:
        *k = ELT_SILU;
        return true;
    default:
        return false;
    }
}

/* Same arithmetic as the unfused Gelu/Sigmoid/Tanh nodes run (their eltwise variants), so fusing
 * does not change the numbers, and 10-20x faster than libm per element (BERT-base: 12 Gelus over
 * 128x3072). */
static void act_row_eltwise(const gemm_epilogue *ep, float *row, int64_t n) {
    elt_unary_kind k;
    if (elt_kind_of(ep->act, &k)) elt_isa_for_cpu()->unary(k, 0.0f, 0.0f, row, row, (size_t)n);
}

#endif

gemm_epilogue kern_fusion_epilogue(const ir_fusion *f) {
    gemm_epilogue ep = gemm_epilogue_none();
    if (!f) return ep;
    ep.act = f->act;
    ep.alpha = f->alpha;
    ep.beta_act = f->beta;
    ep.lo = f->lo;
    ep.hi = f->hi;
#ifdef ANVIL_HAVE_SLEEF
    elt_unary_kind k;
    if (elt_kind_of(ep.act, &k) && elt_isa_for_cpu()) ep.act_row = act_row_eltwise;
#endif
    return ep;
}

bool kern_fusion_gemm_ok(const ir_fusion *f) {
    return !f || f->act <= IR_ACT_SILU;
}

gemm_tile_epilogue_fn kern_fusion_rows_fn(void) {
    /* Any shape gets this machine's widest tile, whose epilogue is compiled for its ISA. */
    const gemm_kernel *k = gemm_kernel_default(1024, 1024, 1024, core_hw_get());
    return k->epilogue ? k->epilogue : gemm_epilogue_apply;
}

bool kern_fusion_pending(const kern_variant *v, const kern_node *kn) {
    return kn->node->fusion && !(v->fuses && v->fuses(kn));
}

anvil_status kern_fusion_check(const kern_node *kn) {
    const ir_fusion *f = kn->node->fusion;
    if (!f) return ANVIL_OK;
    char a[160], b[160];
    const ir_shape *y = &kn->out[0].shape;
    size_t numel;
    if (kn->n_out < 1 || kn->out[0].dtype != ANVIL_DTYPE_FLOAT32 || !ir_shape_numel(y, &numel))
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: fused epilogue on an output that is not a "
                        "static float32 tensor",
                        ir_node_label(kn->node));
    if (f->bias >= 0) {
        size_t bn;
        if (f->bias >= kn->n_in || !ir_shape_numel(&kn->in[f->bias].shape, &bn) || y->rank < 1 ||
            (int64_t)bn != y->d[y->rank - 1])
            return core_err(
                ANVIL_ERR_SHAPE,
                "%s: the bias Add fused into it has shape %s, which does not match "
                "the last dim of its output %s; run with optimization level 0 to "
                "see the unfused graph's error",
                ir_node_label(kn->node),
                f->bias < kn->n_in ? ir_shape_str(NULL, &kn->in[f->bias].shape, a, sizeof a) : "?",
                ir_shape_str(NULL, y, b, sizeof b));
    }
    if (f->residual >= 0 &&
        (f->residual >= kn->n_in || kn->in[f->residual].dtype != ANVIL_DTYPE_FLOAT32 ||
         !ir_shape_equal(&kn->in[f->residual].shape, y)))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the residual Add fused into it reads a tensor of shape %s, but its "
                        "output has shape %s (the model's inputs disagree on a shared dim); "
                        "check the input shapes",
                        ir_node_label(kn->node),
                        f->residual < kn->n_in
                            ? ir_shape_str(NULL, &kn->in[f->residual].shape, a, sizeof a)
                            : "?",
                        ir_shape_str(NULL, y, b, sizeof b));
    return ANVIL_OK;
}

typedef struct fusion_job {
    gemm_epilogue ep;
    gemm_tile_epilogue_fn apply;
    float *y;
    int64_t cols;
} fusion_job;

static void fusion_rows(void *arg, size_t begin, size_t end) {
    const fusion_job *j = arg;
    j->apply(&j->ep, j->y + (int64_t)begin * j->cols, j->cols, (int64_t)begin, 0,
             (int64_t)(end - begin), j->cols);
}

anvil_status kern_fusion_apply(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *out, op_ctx *ctx) {
    const ir_fusion *f = n->fusion;
    if (!f) return ANVIL_OK;
    if (out->dtype != ANVIL_DTYPE_FLOAT32)
        return core_err(ANVIL_ERR_INTERNAL, "%s: fused epilogue on a non-float32 output",
                        ir_node_label(n));
    const int64_t cols = out->rank > 0 ? out->dims[out->rank - 1] : 1;
    const size_t numel = op_tensor_numel(out);
    if (numel == 0 || cols == 0) return ANVIL_OK;
    fusion_job j = {kern_fusion_epilogue(f), kern_fusion_rows_fn(), out->data, cols};
    if (f->bias >= 0) {
        if (f->bias >= n_in || !in[f->bias] || op_tensor_numel(in[f->bias]) != (size_t)cols)
            return core_err(ANVIL_ERR_INTERNAL, "%s: fused bias does not match the output",
                            ir_node_label(n));
        j.ep.col_bias = in[f->bias]->data;
    }
    if (f->residual >= 0) {
        if (f->residual >= n_in || !in[f->residual] || op_tensor_numel(in[f->residual]) != numel)
            return core_err(ANVIL_ERR_INTERNAL, "%s: fused residual does not match the output",
                            ir_node_label(n));
        j.ep.r = in[f->residual]->data;
        j.ep.rs_r = cols;
        j.ep.cs_r = 1;
        j.ep.beta = 1.0f;
    }
    op_parallel_for(ctx, numel / (size_t)cols, fusion_rows, &j);
    return ANVIL_OK;
}

const char *kern_emit_float(float f, char *buf, size_t cap) {
    /* the builtins, so that the emitted file needs no <math.h> for them */
    if (isnan(f))
        snprintf(buf, cap, "__builtin_nanf(\"\")");
    else if (isinf(f))
        snprintf(buf, cap, "%s__builtin_inff()", f < 0 ? "-" : "");
    else
        snprintf(buf, cap, "%.9gf", (double)f);
    /* "1f" is not a C constant: a float literal needs a point or an exponent */
    if (!strpbrk(buf, ".e_") && strlen(buf) + 2 < cap) {
        size_t n = strlen(buf);
        memmove(buf + n - 1, ".0f", 4);
    }
    return buf;
}

/* The enumerators' names, for emitted code (indexed by ir_act). */
static const char *const act_ids[] = {
    "IR_ACT_NONE",         "IR_ACT_RELU",       "IR_ACT_CLIP",     "IR_ACT_LEAKY_RELU",
    "IR_ACT_SIGMOID",      "IR_ACT_TANH",       "IR_ACT_GELU_ERF", "IR_ACT_GELU_TANH",
    "IR_ACT_HARD_SIGMOID", "IR_ACT_HARD_SWISH", "IR_ACT_SILU",
};
_Static_assert(sizeof act_ids / sizeof act_ids[0] == IR_ACT_SILU + 1,
               "act_ids must name every ir_act");

void kern_emit_epilogue(kern_emit *e, const char *var, const gemm_epilogue *ep,
                        const char *row_bias, const char *col_bias, const char *r) {
    char a[32], b[32], c[32], d[32], f[32];
    e->code(e, "gemm_epilogue %s = gemm_epilogue_none();\n", var);
    if (ep->scale != 1.0f) e->code(e, "%s.scale = %s;\n", var, kern_emit_float(ep->scale, a, 32));
    if (row_bias) e->code(e, "%s.row_bias = (const float *)(%s);\n", var, row_bias);
    if (col_bias) e->code(e, "%s.col_bias = (const float *)(%s);\n", var, col_bias);
    if (r)
        e->code(e, "%s.r = (const float *)(%s);\n%s.rs_r = %lld;\n%s.cs_r = %lld;\n%s.beta = %s;\n",
                var, r, var, (long long)ep->rs_r, var, (long long)ep->cs_r, var,
                kern_emit_float(ep->beta, f, 32));
    if (ep->act != IR_ACT_NONE && (unsigned)ep->act < sizeof act_ids / sizeof act_ids[0])
        e->code(e, "%s.act = %s;\n%s.alpha = %s;\n%s.beta_act = %s;\n%s.lo = %s;\n%s.hi = %s;\n",
                var, act_ids[ep->act], var, kern_emit_float(ep->alpha, a, 32), var,
                kern_emit_float(ep->beta_act, b, 32), var, kern_emit_float(ep->lo, c, 32), var,
                kern_emit_float(ep->hi, d, 32));
}
