/* fuse_norm: LayerNorm and RMSNorm written out in primitive ops become LayerNormalization and
 * RMSNormalization nodes (one pass over each row instead of eight to ten nodes, each a pass over
 * the tensor). The spellings, over the last axis, with every intermediate read only inside the
 * pattern and no graph output:
 *   LayerNorm (DistilBERT's export, BERT's older ones):
 *     m = ReduceMean(x); d = Sub(x, m); v = ReduceMean(Pow(d, 2) or Mul(d, d));
 *     y = Div(d, Sqrt(Add(v, eps))) -> Mul(., gamma) -> [Add(., beta)]
 *   RMSNorm (T5):
 *     v = ReduceMean(Pow(x, 2) or Mul(x, x)); s = Sqrt(Add(v, eps));
 *     y = Div(x, s) or Mul(x, Div(1, s)) or Mul(x, Reciprocal(s)) -> Mul(., gamma)
 * with eps a scalar constant and gamma, beta float32 constants over the last axis. Anything else
 * (another axis, keepdims 0, a normalization without its scale) is left as it is. The new node
 * computes in float with the epsilon inside the root, as the spelled-out graph did; the node
 * records the opset that defines its op (17 and 23), whatever the model imports. */
#include "rewrite.h"

#include "ops/ops.h"

#include <string.h>

#define NORM_MAX_NODES 12

typedef struct norm_match {
    int32_t nodes[NORM_MAX_NODES];
    int n;
    ir_vid x, gamma, beta, out;
    float eps;
} norm_match;

static const ir_node *live(const pass_ctx *c, int32_t k) {
    return k >= 0 && !c->dead[k] ? &c->g->nodes[k] : NULL;
}

/* The node that alone reads v, if it is `op` (and v is no graph output). */
static const ir_node *sole(const pass_ctx *c, ir_vid v, ir_op op) {
    const ir_node *n = live(c, pass_sole_reader(c, v));
    return n && n->op == op && !n->fusion ? n : NULL;
}

static int32_t id_of(const pass_ctx *c, const ir_node *n) {
    return (int32_t)(n - c->g->nodes);
}

/* The operand of binary node n that is not v (-1 when both or neither are v). */
static int other(const ir_node *n, ir_vid v) {
    if (n->n_inputs != 2) return -1;
    if (n->inputs[0] == v && n->inputs[1] != v) return 1;
    if (n->inputs[1] == v && n->inputs[0] != v) return 0;
    return -1;
}

/* ReduceMean over the last axis of its input, keeping the axis. */
static bool mean_last(const pass_ctx *c, const ir_node *n) {
    if (!n || n->op != IR_OP_REDUCEMEAN || n->n_inputs < 1 || n->n_outputs != 1) return false;
    const ir_value *x = &c->g->values[n->inputs[0]];
    if (x->dtype != ANVIL_DTYPE_FLOAT32 || x->shape.rank < 1) return false;
    int64_t keep;
    if (ir_attr_int(n, "keepdims", 1, &keep) != ANVIL_OK || keep != 1) return false;
    const int64_t *axes = NULL;
    size_t count = 0;
    int64_t from_input;
    if (n->n_inputs >= 2 && n->inputs[1] != IR_NONE) {
        if (!pass_const_int64s(c, n->inputs[1], &from_input, 1)) return false;
        axes = &from_input;
        count = 1;
    } else if (ir_attr_ints(n, "axes", &axes, &count) != ANVIL_OK) {
        return false;
    }
    return axes && count == 1 && (axes[0] == -1 || axes[0] == x->shape.rank - 1);
}

/* v squared: Pow(v, 2) or Mul(v, v), read only by a ReduceMean over the last axis; returns that
 * ReduceMean and records both nodes. */
static const ir_node *mean_of_square(const pass_ctx *c, norm_match *mt, const ir_node *sq,
                                     ir_vid v) {
    float e;
    if (!sq || sq->fusion || sq->n_inputs != 2 || sq->inputs[0] != v) return NULL;
    if (!(sq->op == IR_OP_POW && pass_const_scalar(c, sq->inputs[1], &e) && e == 2.0f) &&
        !(sq->op == IR_OP_MUL && sq->inputs[1] == v))
        return NULL;
    const ir_node *m = sole(c, sq->outputs[0], IR_OP_REDUCEMEAN);
    if (!mean_last(c, m)) return NULL;
    mt->nodes[mt->n++] = id_of(c, sq);
    mt->nodes[mt->n++] = id_of(c, m);
    return m;
}

/* Sqrt(Add(mean, eps)) from the ReduceMean m; returns the Sqrt. */
static const ir_node *root_of(const pass_ctx *c, norm_match *mt, const ir_node *m) {
    const ir_node *a = sole(c, m->outputs[0], IR_OP_ADD);
    const int e = a ? other(a, m->outputs[0]) : -1;
    if (e < 0 || !pass_const_scalar(c, a->inputs[e], &mt->eps)) return NULL;
    const ir_node *s = sole(c, a->outputs[0], IR_OP_SQRT);
    if (!s) return NULL;
    mt->nodes[mt->n++] = id_of(c, a);
    mt->nodes[mt->n++] = id_of(c, s);
    return s;
}

/* A float32 constant of one dim, the size of x's last dim (when known). */
static bool row_const(const pass_ctx *c, ir_vid p, ir_vid x) {
    size_t numel;
    const ir_value *pv = &c->g->values[p], *xv = &c->g->values[x];
    const int64_t last = xv->shape.d[xv->shape.rank - 1];
    return pass_const_f32(c, p, &numel) && pv->shape.rank == 1 &&
           (last < 0 || (int64_t)numel == last);
}

/* The affine end from the normalized value y: Mul(y, gamma) -> [Add(., beta)]. */
static bool affine(const pass_ctx *c, norm_match *mt, ir_vid y, bool with_beta) {
    const ir_node *mul = sole(c, y, IR_OP_MUL);
    const int g = mul ? other(mul, y) : -1;
    if (g < 0 || !row_const(c, mul->inputs[g], mt->x)) return false;
    mt->gamma = mul->inputs[g];
    mt->nodes[mt->n++] = id_of(c, mul);
    mt->out = mul->outputs[0];
    mt->beta = IR_NONE;
    const ir_node *add = with_beta ? sole(c, mt->out, IR_OP_ADD) : NULL;
    const int b = add ? other(add, mt->out) : -1;
    if (b >= 0 && row_const(c, add->inputs[b], mt->x)) {
        mt->beta = add->inputs[b];
        mt->nodes[mt->n++] = id_of(c, add);
        mt->out = add->outputs[0];
    }
    return true;
}

/* All live readers of v, up to cap; returns how many (more than cap: cap + 1). */
static int readers(const pass_ctx *c, ir_vid v, const ir_node **out, int cap) {
    int n = 0;
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        const ir_node *r = live(c, k);
        if (!r) continue;
        for (int i = 0; i < r->n_inputs; i++)
            if (r->inputs[i] == v) {
                if (n < cap) out[n] = r;
                n++;
                break;
            }
    }
    return n;
}

/* LayerNorm from its first ReduceMean. */
static bool match_layernorm(const pass_ctx *c, int32_t k, norm_match *mt) {
    const ir_node *m1 = live(c, k);
    if (!mean_last(c, m1)) return false;
    mt->n = 0;
    mt->x = m1->inputs[0];
    mt->nodes[mt->n++] = k;
    const ir_node *sub = sole(c, m1->outputs[0], IR_OP_SUB);
    if (!sub || sub->n_inputs != 2 || sub->inputs[0] != mt->x) return false;
    mt->nodes[mt->n++] = id_of(c, sub);
    const ir_vid d = sub->outputs[0];
    const ir_node *rd[2];
    if (pass_pinned(c, d) || readers(c, d, rd, 2) != 2) return false;
    const ir_node *sq = rd[0]->op == IR_OP_DIV ? rd[1] : rd[0];
    const ir_node *div = rd[0]->op == IR_OP_DIV ? rd[0] : rd[1];
    if (div->op != IR_OP_DIV || div->fusion || div->inputs[0] != d) return false;
    const ir_node *m2 = mean_of_square(c, mt, sq, d);
    const ir_node *s = m2 ? root_of(c, mt, m2) : NULL;
    if (!s || div->inputs[1] != s->outputs[0] ||
        pass_sole_reader(c, s->outputs[0]) != id_of(c, div))
        return false;
    mt->nodes[mt->n++] = id_of(c, div);
    return affine(c, mt, div->outputs[0], true);
}

/* RMSNorm from its square. */
static bool match_rmsnorm(const pass_ctx *c, int32_t k, norm_match *mt) {
    const ir_node *sq = live(c, k);
    if (!sq || (sq->op != IR_OP_POW && sq->op != IR_OP_MUL) || sq->n_inputs != 2) return false;
    mt->n = 0;
    mt->x = sq->inputs[0];
    const ir_value *xv = &c->g->values[mt->x];
    if (xv->dtype != ANVIL_DTYPE_FLOAT32 || xv->shape.rank < 1) return false;
    const ir_node *m = mean_of_square(c, mt, sq, mt->x);
    const ir_node *s = m ? root_of(c, mt, m) : NULL;
    if (!s) return false;
    const ir_vid r = s->outputs[0];
    const ir_node *n = live(c, pass_sole_reader(c, r));
    if (!n || n->fusion) return false;
    ir_vid y;
    float one;
    if (n->op == IR_OP_DIV && n->inputs[0] == mt->x && n->inputs[1] == r) {
        mt->nodes[mt->n++] = id_of(c, n);
        y = n->outputs[0];
    } else if ((n->op == IR_OP_DIV && n->inputs[1] == r &&
                pass_const_scalar(c, n->inputs[0], &one) && one == 1.0f) ||
               (n->op == IR_OP_RECIPROCAL && n->n_inputs == 1)) {
        const ir_node *mul = sole(c, n->outputs[0], IR_OP_MUL);
        const int xi = mul ? other(mul, n->outputs[0]) : -1;
        if (xi < 0 || mul->inputs[xi] != mt->x) return false;
        mt->nodes[mt->n++] = id_of(c, n);
        mt->nodes[mt->n++] = id_of(c, mul);
        y = mul->outputs[0];
    } else {
        return false;
    }
    return affine(c, mt, y, false);
}

static anvil_status rewrite(pass_ctx *c, const norm_match *mt, ir_op op) {
    ir_graph *g = c->g;
    const int32_t slot = mt->nodes[0];
    const ir_vid old = g->nodes[slot].outputs[0];
    for (int i = 0; i < mt->n; i++) pass_node_kill(c, mt->nodes[i]);
    c->dead[slot] = false;
    ir_attr *attrs = core_arena_array(g->arena, 2, sizeof *attrs);
    ir_vid *inputs = core_arena_array(g->arena, 3, sizeof *inputs);
    if (!attrs || !inputs) return ANVIL_ERR_OUT_OF_MEMORY;
    attrs[0] = (ir_attr){.name = "axis", .type = IR_ATTR_INT, .i = -1};
    attrs[1] = (ir_attr){.name = "epsilon", .type = IR_ATTR_FLOAT, .f = mt->eps};
    ir_node *h = &g->nodes[slot];
    h->op = op;
    h->opset = op == IR_OP_RMSNORMALIZATION ? 23 : (h->opset > 17 ? h->opset : 17);
    h->attrs = attrs;
    h->n_attrs = 2;
    h->params = NULL;
    h->fusion = NULL;
    h->inputs = inputs;
    h->n_inputs = mt->beta != IR_NONE ? 3 : 2;
    for (int i = 0; i < 3; i++) inputs[i] = IR_NONE;
    const ir_vid ops[3] = {mt->x, mt->gamma, mt->beta};
    for (int i = 0; i < h->n_inputs; i++) CORE_TRY(pass_node_set_input(c, slot, i, ops[i]));
    h = &g->nodes[slot];
    h->outputs[0] = mt->out;
    g->values[old].producer = -1;
    g->values[mt->out].producer = slot;
    CORE_TRY(op_get(op)->check(g, h));
    c->pg->fused_norms++;
    return ANVIL_OK;
}

anvil_status pass_fuse_norm(pass_ctx *c) {
    norm_match mt;
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        if (c->dead[k]) continue;
        if (match_layernorm(c, k, &mt))
            CORE_TRY(rewrite(c, &mt, IR_OP_LAYERNORMALIZATION));
        else if (match_rmsnorm(c, k, &mt))
            CORE_TRY(rewrite(c, &mt, IR_OP_RMSNORMALIZATION));
    }
    return ANVIL_OK;
}
