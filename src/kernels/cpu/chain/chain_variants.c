/* The chain family: anvil.EltwiseChain (a chain of elementwise ops the fuse_chain pass made one
 * node) as "chain_avx512" and "chain_avx2", one pass over memory for the whole chain.
 *
 * This file is baseline code: prepare turns the node's steps into the kernel's program and
 * classifies each side operand by how it varies over the output (ops/chain_common.h:
 * element (i / inner) % C); run cuts the output into spans over which each operand is one value
 * or one contiguous row, and splits the work across threads. The arithmetic lives in the per-ISA
 * tables of chain.h, generated from chain_simd.h.
 *
 * supports() takes float32 nodes of static shapes whose side operands vary over one contiguous
 * block of the output's dims (scalars, per-channel [C,1,1], trailing vectors, full shapes); the
 * steps that need a vector exp/tanh/erf exist only with SLEEF. Everything else stays with the
 * reference. */
#include "chain.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

/* Below this many elements a node runs on the calling thread: waking the pool costs more. */
#define CHAIN_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel block. */
#define CHAIN_BLOCK ((size_t)4096)
/* An operand whose value or row changes more often than every this many elements is expanded
 * into a buffer of up to CHAIN_EXPAND elements per span instead of cutting tiny spans. */
#define CHAIN_SPAN_MIN 64
#define CHAIN_EXPAND 512

/* How a side operand varies over the output. */
typedef enum chain_mode {
    MODE_UNUSED,
    MODE_SCALAR, /* one value */
    MODE_BLOCK,  /* one value per run of `inner` >= CHAIN_SPAN_MIN elements */
    MODE_ROW,    /* inner == 1: a row of c >= CHAIN_SPAN_MIN elements, repeated */
    MODE_EXPAND, /* anything else: (i / inner) % c, expanded per span */
} chain_mode;

typedef struct chain_state {
    const chain_isa *isa;
    chain_kprog prog;
    int n_in;
    chain_mode mode[CHAIN_MAX_INPUTS];
    size_t c[CHAIN_MAX_INPUTS], inner[CHAIN_MAX_INPUTS];
    bool expand; /* some operand is MODE_EXPAND */
} chain_state;

typedef struct chain_job {
    const chain_state *s;
    const float *x;
    float *y;
    const float *data[CHAIN_MAX_INPUTS];
    size_t n;
} chain_job;

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
        *mode = MODE_SCALAR;
    else if (*inner >= CHAIN_SPAN_MIN)
        *mode = MODE_BLOCK;
    else if (*inner == 1 && *c >= CHAIN_SPAN_MIN)
        *mode = MODE_ROW;
    else
        *mode = MODE_EXPAND;
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
        k->src =
            s->mode[a] == MODE_SCALAR || s->mode[a] == MODE_BLOCK ? CHAIN_SRC_BCAST : CHAIN_SRC_ROW;
        s->expand |= s->mode[a] == MODE_EXPAND;
    }
    *state = s;
    return ANVIL_OK;
}

static void chain_release(void *state) {
    free(state);
}

/* Elements [lo, hi) of the output: spans over which every used operand is one value or one
 * contiguous row (an expanded operand is copied into buf for its span). */
static void chain_range(const chain_job *j, size_t lo, size_t hi) {
    const chain_state *s = j->s;
    float buf[CHAIN_MAX_INPUTS][CHAIN_EXPAND];
    const float *opnd[CHAIN_MAX_INPUTS] = {0};
    size_t pos = lo;
    while (pos < hi) {
        size_t len = hi - pos;
        if (s->expand && len > CHAIN_EXPAND) len = CHAIN_EXPAND;
        for (int k = 1; k < s->n_in; k++) {
            const size_t c = s->c[k], inner = s->inner[k];
            switch (s->mode[k]) {
            case MODE_SCALAR:
                opnd[k] = j->data[k];
                break;
            case MODE_BLOCK: {
                const size_t q = pos / inner, left = (q + 1) * inner - pos;
                opnd[k] = j->data[k] + q % c;
                if (len > left) len = left;
                break;
            }
            case MODE_ROW: {
                const size_t at = pos % c;
                opnd[k] = j->data[k] + at;
                if (len > c - at) len = c - at;
                break;
            }
            default:
                break;
            }
        }
        for (int k = 1; k < s->n_in; k++) {
            if (s->mode[k] != MODE_EXPAND) continue;
            const size_t c = s->c[k], inner = s->inner[k];
            size_t at = (pos / inner) % c, run = pos % inner;
            for (size_t e = 0; e < len; e++) {
                buf[k][e] = j->data[k][at];
                if (++run == inner) {
                    run = 0;
                    if (++at == c) at = 0;
                }
            }
            opnd[k] = buf[k];
        }
        s->isa->span(&s->prog, j->y + pos, j->x + pos, len, opnd);
        pos += len;
    }
}

static void chain_chunk(void *arg, size_t begin, size_t end) {
    const chain_job *j = arg;
    const size_t lo = begin * CHAIN_BLOCK, hi = end * CHAIN_BLOCK < j->n ? end * CHAIN_BLOCK : j->n;
    chain_range(j, lo, hi);
}

static anvil_status chain_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    (void)workspace;
    const chain_state *s = state;
    chain_job j = {.s = s, .x = in[0]->data, .y = out[0]->data, .n = op_tensor_numel(out[0])};
    if (j.n == 0) return ANVIL_OK;
    for (int k = 1; k < n_in && k < s->n_in; k++)
        if (s->mode[k] != MODE_UNUSED) j.data[k] = in[k]->data;
    const size_t blocks = (j.n + CHAIN_BLOCK - 1) / CHAIN_BLOCK;
    op_parallel_for(j.n >= CHAIN_PAR_MIN ? ctx : NULL, blocks, chain_chunk, &j);
    return ANVIL_OK;
}

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
                                            .run = chain_run};

static const kern_variant v_chain_avx2 = {.name = "chain_avx2",
                                          .op = IR_OP_ELTWISE_CHAIN,
                                          .needs = KERN_NEEDS_AVX2,
                                          .supports = chain_supports,
                                          .prepare = chain_prepare_avx2,
                                          .release = chain_release,
                                          .run = chain_run};

/* The AVX-512 variant first: the first applicable variant is the default. */
const kern_variant *const kern_family_chain[] = {&v_chain_avx512, &v_chain_avx2, NULL};
