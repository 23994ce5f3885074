/* The chain family: anvil.EltwiseChain (a chain of elementwise ops the fuse_chain pass made one
 * node) as "chain_avx512" and "chain_avx2", one pass over memory for the whole chain.
 *
 * This file is baseline code: prepare turns the node's steps into the kernel's program and
 * classifies each side operand by how it varies over the output (ops/chain_common.h:
 * element (i / inner) % C) into a chain_state; run hands it to chain_exec (chain_run.c, shared
 * with `anvil compile`'s libraries), which cuts the output into spans over which each operand is
 * one value or one contiguous row and splits the work across threads. The arithmetic lives in the
 * per-ISA tables of chain.h, generated from chain_simd.h.
 *
 * supports() takes float32 nodes of static shapes whose side operands vary over one contiguous
 * block of the output's dims (scalars, per-channel [C,1,1], trailing vectors, full shapes); the
 * steps that need a vector exp/tanh/erf exist only with SLEEF. Everything else stays with the
 * reference. */
#include "chain.h"
#include "kernels/cpu/family.h"
#include "kernels/fusion.h"
#include "kernels/kernels.h"
#include "ops/chain_common.h"

#include <stdlib.h>
#include <string.h>

static bool f32_static(const op_tinfo *t) {
    return t->dtype == ANVIL_DTYPE_FLOAT32 && ir_shape_is_static(&t->shape);
}

static size_t dims_product(const ir_shape *s, int from, int to) {
    size_t p = 1;
    for (int d = from; d < to; d++) p *= (size_t)s->d[d];
    return p;
}

/* Classifies input k of kn (k >= 1); false if its pattern is not one chain_operand_block takes. */
static bool classify(const kern_node *kn, int k, chain_mode *mode, size_t *c, size_t *inner) {
    const ir_shape *o = &kn->in[k].shape, *y = &kn->out[0].shape;
    int first, last;
    if (!f32_static(&kn->in[k]) || !chain_operand_block(o, y, &first, &last)) return false;
    *c = dims_product(y, first, last);
    *inner = dims_product(y, last, y->rank);
    if (*c == 1)
        *mode = CHAIN_MODE_SCALAR;
    else if (*inner >= CHAIN_SPAN_MIN)
        *mode = CHAIN_MODE_BLOCK;
    else if (*inner == 1 && *c >= CHAIN_SPAN_MIN)
        *mode = CHAIN_MODE_ROW;
    else
        *mode = CHAIN_MODE_EXPAND;
    return true;
}

static bool chain_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const ir_node *n = kn->node;
    const chain_params *p = n->params;
    if (!p || kn->n_in < 1 || kn->n_in > CHAIN_MAX_INPUTS || kn->n_out != 1) return false;
    if (!f32_static(&kn->in[0]) || !f32_static(&kn->out[0])) return false;
    const ir_shape *x = &kn->in[0].shape, *y = &kn->out[0].shape;
    if (x->rank != y->rank || dims_product(x, 0, x->rank) != dims_product(y, 0, y->rank))
        return false;
    for (int s = 0; s < p->n_steps; s++) {
        const chain_step *st = &p->steps[s];
#ifndef ANVIL_HAVE_SLEEF
        if (chain_op_transcendental(st->op)) return false;
#endif
        if (st->arg < 0) continue;
        chain_mode mode;
        size_t c, inner;
        if (st->arg >= kn->n_in || st->arg >= n->n_inputs || n->inputs[st->arg] == IR_NONE)
            return false;
        if (st->arg > 0 && !classify(kn, st->arg, &mode, &c, &inner)) return false;
    }
    return true;
}

static anvil_status chain_prepare_isa(const kern_node *kn, const chain_isa *isa, void **state) {
    const chain_params *p = kn->node->params;
    chain_state *s = calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    s->isa = isa;
    s->n_in = kn->n_in;
    s->prog.n = p->n_steps;
    for (int i = 0; i < p->n_steps; i++) {
        const chain_step *st = &p->steps[i];
        chain_kstep *k = &s->prog.st[i];
        k->op = (uint8_t)st->op;
        if (st->swap && st->op == CHAIN_SUB) k->op = CHAIN_K_RSUB;
        if (st->swap && st->op == CHAIN_DIV) k->op = CHAIN_K_RDIV;
        k->a = st->a;
        k->b = st->b;
        k->src = CHAIN_SRC_NONE;
        if (st->arg < 0) continue;
        k->k = (uint8_t)st->arg;
        if (st->arg == 0) {
            k->src = CHAIN_SRC_X;
            continue;
        }
        const int a = st->arg;
        if (!classify(kn, a, &s->mode[a], &s->c[a], &s->inner[a])) {
            free(s);
            return core_err(ANVIL_ERR_INTERNAL, "%s: operand %d has no chain pattern",
                            ir_node_label(kn->node), a);
        }
        k->src = s->mode[a] == CHAIN_MODE_SCALAR || s->mode[a] == CHAIN_MODE_BLOCK ? CHAIN_SRC_BCAST
                                                                                   : CHAIN_SRC_ROW;
        s->expand |= s->mode[a] == CHAIN_MODE_EXPAND;
    }
    *state = s;
    return ANVIL_OK;
}

static void chain_release(void *state) {
    free(state);
}

static anvil_status chain_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)workspace;
    const chain_state *s = state;
    const float *data[CHAIN_MAX_INPUTS] = {0};
    for (int k = 1; k < n_in && k < s->n_in; k++)
        if (s->mode[k] != CHAIN_MODE_UNUSED) data[k] = in[k]->data;
    chain_exec(s, out[0]->data, in[0]->data, op_tensor_numel(out[0]), data, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The node becomes one chain_exec call on a chain_state holding what this prepare made, so the
 * library computes exactly what the variant does. Emitted libraries do not link SLEEF: chains
 * with a Tanh or Exp step are refused. */

static const char *const chain_emit_files[] = {"ops/chain_op.h",
                                               "kernels/cpu/chain/chain.h",
                                               "kernels/cpu/chain/chain_run.c",
                                               "kernels/cpu/chain/chain_simd.h",
                                               "kernels/cpu/chain/chain_avx512.c",
                                               "kernels/cpu/chain/chain_avx2.c",
                                               "kernels/cpu/eltwise/eltwise_act.h",
                                               "kernels/cpu/eltwise/eltwise_exp.h",
                                               "kernels/cpu/eltwise/eltwise_vec_avx512.h",
                                               "kernels/cpu/eltwise/eltwise_vec_avx2.h",
                                               NULL};

static anvil_status chain_emit_write(const kern_node *kn, const void *state, kern_emit *e) {
    const chain_state *s = state;
    for (int i = 0; i < s->prog.n; i++)
        if (s->prog.st[i].op == CHAIN_TANH || s->prog.st[i].op == CHAIN_EXP)
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: a %s step needs SLEEF's vector functions, which emitted "
                            "libraries lack",
                            ir_node_label(kn->node), chain_op_names[s->prog.st[i].op]);
    for (int i = 0; chain_emit_files[i]; i++) CORE_TRY(e->need(e, chain_emit_files[i]));
    CORE_TRY(e->include(e, "kernels/cpu/chain/chain.h"));
    char fa[64], fb[64];
    e->code(e, "chain_state cs = {0};\n");
    e->code(e, "cs.isa = &%s;\n",
            s->isa == &chain_isa_avx512 ? "chain_isa_avx512" : "chain_isa_avx2");
    e->code(e, "cs.n_in = %d;\ncs.expand = %d;\ncs.prog.n = %d;\n", s->n_in, (int)s->expand,
            s->prog.n);
    for (int i = 0; i < s->prog.n; i++) {
        const chain_kstep *k = &s->prog.st[i];
        e->code(e, "cs.prog.st[%d] = (chain_kstep){%d, %d, %d, %s, %s};\n", i, k->op, k->src, k->k,
                kern_emit_float(k->a, fa, sizeof fa), kern_emit_float(k->b, fb, sizeof fb));
    }
    e->code(e, "const float *cd[%d] = {0};\n", CHAIN_MAX_INPUTS);
    for (int k = 1; k < s->n_in && k < e->n_in; k++) {
        if (s->mode[k] == CHAIN_MODE_UNUSED) continue;
        e->code(e, "cs.mode[%d] = (chain_mode)%d;\ncs.c[%d] = %zu;\ncs.inner[%d] = %zu;\n", k,
                (int)s->mode[k], k, s->c[k], k, s->inner[k]);
        e->code(e, "cd[%d] = (const float *)(%s);\n", k, e->in(e, k));
    }
    e->code(e, "chain_exec(&cs, (float *)(%s), (const float *)(%s), %zu, cd, %s);\n", e->out(e, 0),
            e->in(e, 0), op_tensor_numel(&e->out_t[0]), e->ctx);
    return ANVIL_OK;
}

static const kern_emitter chain_emitter = {chain_emit_write, NULL};

static anvil_status chain_prepare_avx512(const kern_node *kn, void **state) {
    return chain_prepare_isa(kn, &chain_isa_avx512, state);
}

static anvil_status chain_prepare_avx2(const kern_node *kn, void **state) {
    return chain_prepare_isa(kn, &chain_isa_avx2, state);
}

static const kern_variant v_chain_avx512 = {.name = "chain_avx512",
                                            .op = IR_OP_ELTWISE_CHAIN,
                                            .needs = KERN_NEEDS_AVX512,
                                            .supports = chain_supports,
                                            .prepare = chain_prepare_avx512,
                                            .release = chain_release,
                                            .run = chain_run,
                                            .emit = &chain_emitter};

static const kern_variant v_chain_avx2 = {.name = "chain_avx2",
                                          .op = IR_OP_ELTWISE_CHAIN,
                                          .needs = KERN_NEEDS_AVX2,
                                          .supports = chain_supports,
                                          .prepare = chain_prepare_avx2,
                                          .release = chain_release,
                                          .run = chain_run,
                                          .emit = &chain_emitter};

/* The AVX-512 variant first: the first applicable variant is the default. */
const kern_variant *const kern_family_chain[] = {&v_chain_avx512, &v_chain_avx2, NULL};
