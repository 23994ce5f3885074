/* fuse_attention: scaled dot-product attention written out as nodes becomes one anvil.Sdpa node
 * (ops/sdpa_common.h), which the attention kernels run block by block without the S x S score
 * matrix, and without the transposes that only reshuffle its operands.
 *
 * The pattern, from each Softmax over the last axis of a rank-4 float32 tensor:
 *   MatMul(q', kt') -> [Mul or Div by a scalar constant] -> [Add(mask)]... -> [Where(keep, ., c)
 *   or Where(drop, c, .)]
 *     -> Softmax -> [Identity]... -> MatMul(., v') -> [Transpose]
 * in the spellings torch.onnx.export writes for BERT, GPT-2, ViT, Whisper and T5. Every value
 * inside it must be read once (by the next node) and be no graph output; anything else leaves the
 * pattern alone. q', kt' and v' are then followed back through Transposes (kept where something
 * else reads them): the node reads the tensors the Transposes read, with the permutation that
 * makes them the logical operands, as long as k's and v's head size stays their innermost dim.
 * A Transpose that alone reads the result is absorbed the same way: the node writes its layout.
 *
 * The Where's fill must be a scalar constant, the mask float32 and the keep mask bool, both of
 * rank <= 4; the scale a float32 scalar constant (a Div by c is a scale of 1/c, whose rounding
 * differs from the division's by an ulp). `--passes -fuse_attention` turns the pass off. */
#include "ops/sdpa_common.h"
#include "rewrite.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The pattern's nodes: what the rewrite removes. */
#define ATT_MAX_NODES 16

typedef struct att_match {
    int32_t nodes[ATT_MAX_NODES];
    int n_nodes;
    int32_t mm1, softmax, mm2, out_transpose;
    ir_vid q, k, v, keep, out;
    ir_vid q_read, k_read; /* what the MatMul read of q and k^T, past a scale absorbed */
    ir_vid mask[2];        /* [0] the outer Add's, [1] an inner one's (added first) */
    int64_t perm[4][4];
    float scale, fill;
    bool invert; /* the bool mask marks the scores to drop */
    bool causal; /* the bool mask was a causal triangle: the node's causal flag instead */
} att_match;

static bool f32_rank(const ir_graph *g, ir_vid v, int max_rank, int min_rank) {
    if (v == IR_NONE) return false;
    const ir_value *x = &g->values[v];
    return x->dtype == ANVIL_DTYPE_FLOAT32 && x->shape.rank >= min_rank &&
           x->shape.rank <= max_rank;
}

static int32_t producer_id(const pass_ctx *c, ir_vid v) {
    const ir_node *n = pass_producer(c, v);
    return n ? (int32_t)(n - c->g->nodes) : -1;
}

/* Whether the node that produces v is read only by `reader` (and v is no graph output). */
static bool only_for(const pass_ctx *c, ir_vid v, int32_t reader) {
    return pass_sole_reader(c, v) == reader;
}

/* The perm of a rank-4 Transpose (false for anything else). */
static bool transpose_perm(const ir_node *n, int64_t *perm) {
    if (n->op != IR_OP_TRANSPOSE || n->n_inputs != 1) return false;
    const int64_t *p;
    size_t count;
    if (ir_attr_ints(n, "perm", &p, &count) != ANVIL_OK || !p || count != 4) return false;
    unsigned seen = 0;
    for (int a = 0; a < 4; a++) {
        if (p[a] < 0 || p[a] > 3) return false;
        seen |= 1u << p[a];
        perm[a] = p[a];
    }
    return seen == 0xf;
}

/* Follows v back through rank-4 Transposes: *src is the tensor they start from and m[a] the dim
 * of src that is dim a of v. */
static void through_transposes(const pass_ctx *c, ir_vid v, ir_vid *src, int64_t *m) {
    for (int a = 0; a < 4; a++) m[a] = a;
    for (;;) {
        const ir_node *n = pass_producer(c, v);
        int64_t p[4];
        if (!n || !transpose_perm(n, p) || !f32_rank(c->g, n->inputs[0], 4, 4)) break;
        int64_t t[4];
        for (int a = 0; a < 4; a++) t[a] = p[m[a]];
        memcpy(m, t, sizeof t);
        v = n->inputs[0];
    }
    *src = v;
}

/* Whether keep is the lower triangle of a square of ones (GPT-2's causal mask, built as
 * Trilu(ConstantOfShape([n, n], true)) for the run's sequence length n): the node's causal flag
 * computes the same and skips the blocks above the diagonal. */
static bool causal_keep(const pass_ctx *c, ir_vid keep) {
    const ir_node *t = pass_producer(c, keep);
    if (!t || t->op != IR_OP_TRILU || (t->n_inputs > 1 && t->inputs[1] != IR_NONE)) return false;
    int64_t upper;
    if (ir_attr_int(t, "upper", 1, &upper) != ANVIL_OK || upper != 0) return false;
    const ir_node *ones = pass_producer(c, t->inputs[0]);
    const ir_tensor *value = NULL;
    if (!ones || ones->op != IR_OP_CONSTANTOFSHAPE ||
        ir_attr_tensor(ones, "value", &value) != ANVIL_OK || !value ||
        value->dtype != ANVIL_DTYPE_BOOL || value->bytes != 1 || !value->data ||
        !*(const uint8_t *)value->data)
        return false;
    /* square: the shape is Concat(n, n) of one value, or a constant [n, n] */
    const ir_node *shape = pass_producer(c, ones->inputs[0]);
    if (shape && shape->op == IR_OP_CONCAT && shape->n_inputs == 2 &&
        shape->inputs[0] == shape->inputs[1])
        return true;
    int64_t d[2];
    return pass_const_int64s(c, ones->inputs[0], d, 2) && d[0] == d[1];
}

/* The scores' producers, walking back from the Softmax's input: Where, Add, Mul/Div, MatMul. */
static bool match_scores(const pass_ctx *c, att_match *mt, ir_vid x, int32_t reader) {
    const ir_graph *g = c->g;
    const ir_node *n = pass_producer(c, x);
    if (!n || !only_for(c, x, reader)) return false;
    if (n->op == IR_OP_WHERE && n->n_inputs == 3) {
        const ir_value *cond = &g->values[n->inputs[0]];
        /* Where(keep, scores, fill) (GPT-2) or Where(masked, fill, scores) (DistilBERT) */
        const int fill_at = pass_const_scalar(c, n->inputs[2], &mt->fill)   ? 2
                            : pass_const_scalar(c, n->inputs[1], &mt->fill) ? 1
                                                                            : 0;
        if (cond->dtype != ANVIL_DTYPE_BOOL || cond->shape.rank < 0 || cond->shape.rank > 4 ||
            !fill_at)
            return false;
        mt->keep = n->inputs[0];
        mt->invert = fill_at == 1;
        if (!mt->invert && causal_keep(c, mt->keep)) {
            mt->keep = IR_NONE;
            mt->causal = true;
        }
        mt->nodes[mt->n_nodes++] = (int32_t)(n - g->nodes);
        reader = (int32_t)(n - g->nodes);
        x = n->inputs[3 - fill_at];
        if (!(n = pass_producer(c, x)) || !only_for(c, x, reader)) return false;
    }
    /* up to two additive masks (T5 adds its position bias, then the padding mask) */
    for (int m = 0; m < 2 && n && n->op == IR_OP_ADD && n->n_inputs == 2 && !n->fusion; m++) {
        /* the scores are the operand that a scale, the MatMul or the first mask's Add made */
        int s = -1;
        for (int i = 0; i < 2 && s < 0; i++) {
            const ir_node *p = pass_producer(c, n->inputs[i]);
            if (p &&
                (p->op == IR_OP_MATMUL || p->op == IR_OP_MUL || p->op == IR_OP_DIV ||
                 (p->op == IR_OP_ADD && m == 0)) &&
                only_for(c, n->inputs[i], (int32_t)(n - g->nodes)))
                s = i;
        }
        if (s < 0 || !f32_rank(g, n->inputs[1 - s], 4, 0)) return false;
        mt->mask[m] = n->inputs[1 - s];
        mt->nodes[mt->n_nodes++] = (int32_t)(n - g->nodes);
        reader = (int32_t)(n - g->nodes);
        x = n->inputs[s];
        n = pass_producer(c, x);
    }
    if (n && (n->op == IR_OP_MUL || n->op == IR_OP_DIV) && n->n_inputs == 2 && !n->fusion) {
        float k;
        int s = -1;
        if (pass_const_scalar(c, n->inputs[1], &k))
            s = 0;
        else if (n->op == IR_OP_MUL && pass_const_scalar(c, n->inputs[0], &k))
            s = 1;
        if (s < 0 || (n->op == IR_OP_DIV && k == 0.0f)) return false;
        mt->scale = n->op == IR_OP_DIV ? 1.0f / k : k;
        mt->nodes[mt->n_nodes++] = (int32_t)(n - g->nodes);
        reader = (int32_t)(n - g->nodes);
        x = n->inputs[s];
        if (!(n = pass_producer(c, x)) || !only_for(c, x, reader)) return false;
    }
    if (!n || n->op != IR_OP_MATMUL || n->n_inputs != 2 || n->fusion ||
        !f32_rank(g, n->outputs[0], 4, 4))
        return false;
    mt->mm1 = (int32_t)(n - g->nodes);
    mt->nodes[mt->n_nodes++] = mt->mm1;
    return true;
}

/* q or k^T scaled before the MatMul (ViT's export scales both by the root of the scale): a Mul
 * by a scalar constant that only the MatMul reads joins the node's scale. */
static bool operand_scale(const pass_ctx *c, att_match *mt, ir_vid *x) {
    const ir_node *n = pass_producer(c, *x);
    if (!n || n->op != IR_OP_MUL || n->n_inputs != 2 || n->fusion || !only_for(c, *x, mt->mm1))
        return true;
    float k;
    for (int i = 0; i < 2; i++)
        if (pass_const_scalar(c, n->inputs[1 - i], &k) && f32_rank(c->g, n->inputs[i], 4, 4)) {
            if (mt->n_nodes >= ATT_MAX_NODES - 4) return false;
            mt->scale *= k;
            mt->nodes[mt->n_nodes++] = (int32_t)(n - c->g->nodes);
            *x = n->inputs[i];
            return true;
        }
    return true;
}

static bool softmax_last_axis(const ir_node *n) {
    int64_t axis;
    if (ir_attr_int(n, "axis", n->opset >= 13 ? -1 : 1, &axis) != ANVIL_OK) return false;
    return axis == -1 || axis == 3;
}

static bool match(const pass_ctx *c, int32_t k, att_match *mt) {
    const ir_graph *g = c->g;
    const ir_node *sm = &g->nodes[k];
    memset(mt, 0, sizeof *mt);
    mt->mask[0] = mt->mask[1] = mt->keep = IR_NONE;
    mt->out_transpose = -1;
    mt->scale = 1.0f;
    mt->fill = -FLT_MAX;
    if (sm->op != IR_OP_SOFTMAX || sm->n_inputs != 1 || !f32_rank(g, sm->inputs[0], 4, 4) ||
        !softmax_last_axis(sm))
        return false;
    mt->softmax = k;
    mt->nodes[mt->n_nodes++] = k;
    if (!match_scores(c, mt, sm->inputs[0], k)) return false;
    /* forward: through Identity nodes to the second MatMul */
    ir_vid p = sm->outputs[0];
    int32_t r = pass_sole_reader(c, p);
    while (r >= 0 && g->nodes[r].op == IR_OP_IDENTITY && mt->n_nodes < ATT_MAX_NODES - 2) {
        mt->nodes[mt->n_nodes++] = r;
        p = g->nodes[r].outputs[0];
        r = pass_sole_reader(c, p);
    }
    if (r < 0) return false;
    const ir_node *mm2 = &g->nodes[r];
    if (mm2->op != IR_OP_MATMUL || mm2->n_inputs != 2 || mm2->inputs[0] != p || mm2->fusion ||
        !f32_rank(g, mm2->inputs[1], 4, 4) || !f32_rank(g, mm2->outputs[0], 4, 4))
        return false;
    mt->mm2 = r;
    mt->nodes[mt->n_nodes++] = r;
    const ir_node *mm1 = &g->nodes[mt->mm1];
    if (!f32_rank(g, mm1->inputs[0], 4, 4) || !f32_rank(g, mm1->inputs[1], 4, 4)) return false;
    int64_t m[4];
    ir_vid qs = mm1->inputs[0], ks = mm1->inputs[1];
    if (!operand_scale(c, mt, &qs) || !operand_scale(c, mt, &ks)) return false;
    mt->q_read = qs;
    mt->k_read = ks;
    through_transposes(c, qs, &mt->q, mt->perm[SDPA_Q]);
    through_transposes(c, ks, &mt->k, m);
    /* the MatMul's second operand is k transposed: its dims 2 and 3 are k's 3 and 2 */
    const int64_t pk[4] = {m[0], m[1], m[3], m[2]};
    memcpy(mt->perm[SDPA_K], pk, sizeof pk);
    through_transposes(c, mm2->inputs[1], &mt->v, mt->perm[SDPA_V]);
    if (mt->perm[SDPA_K][3] != 3 || mt->perm[SDPA_V][3] != 3) return false;
    /* the output, through a Transpose that alone reads it */
    mt->out = mm2->outputs[0];
    for (int a = 0; a < 4; a++) mt->perm[SDPA_O][a] = a;
    const int32_t t = pass_sole_reader(c, mt->out);
    int64_t tp[4];
    if (t >= 0 && transpose_perm(&g->nodes[t], tp)) {
        /* output dim a of the Transpose is logical dim tp[a] */
        for (int a = 0; a < 4; a++) mt->perm[SDPA_O][tp[a]] = a;
        mt->out_transpose = t;
        mt->out = g->nodes[t].outputs[0];
        mt->nodes[mt->n_nodes++] = t;
    }
    return true;
}

/* Kills the Transposes between an operand's source and the node that read them once nothing
 * reads them any more. */
static void drop_unread_transposes(pass_ctx *c, ir_vid v, ir_vid src) {
    while (v != src) {
        const int32_t p = producer_id(c, v);
        if (p < 0) return;
        const ir_vid in = c->g->nodes[p].inputs[0];
        if (c->uses[v] == 0 && !pass_pinned(c, v)) pass_node_kill(c, p);
        v = in;
    }
}

/* Two masks become one: an Add of the inner and the outer mask (a tensor of the scores' size at
 * most, computed once per run instead of two passes over the scores). */
static anvil_status sum_masks(pass_ctx *c, const att_match *mt, ir_vid *out) {
    ir_graph *g = c->g;
    const ir_node *sm = &g->nodes[mt->softmax];
    ir_shape s;
    CORE_TRY(
        op_broadcast_shape(sm, &g->values[mt->mask[1]].shape, &g->values[mt->mask[0]].shape, &s));
    char name[512];
    snprintf(name, sizeof name, "%s/mask", sm->name);
    CORE_TRY(pass_add_value(c, name, ANVIL_DTYPE_FLOAT32, &s, out));
    int32_t k;
    CORE_TRY(pass_add_node(c, IR_OP_ADD, name, 2, 1, 0, &k));
    g->nodes[k].outputs[0] = *out;
    g->values[*out].producer = k;
    CORE_TRY(op_get(IR_OP_ADD)->check(g, &g->nodes[k]));
    CORE_TRY(pass_node_set_input(c, k, 0, mt->mask[1]));
    return pass_node_set_input(c, k, 1, mt->mask[0]);
}

static anvil_status rewrite(pass_ctx *c, const att_match *mt) {
    ir_graph *g = c->g;
    const ir_vid qv = mt->q_read, kv = mt->k_read, vv = g->nodes[mt->mm2].inputs[1];
    const ir_vid old_out = g->nodes[mt->softmax].outputs[0];
    ir_vid mask = mt->mask[0];
    if (mt->mask[1] != IR_NONE) CORE_TRY(sum_masks(c, mt, &mask));
    for (int i = 0; i < mt->n_nodes; i++) pass_node_kill(c, mt->nodes[i]);
    const int32_t slot = mt->softmax;
    c->dead[slot] = false;
    ir_attr *attrs = core_arena_array(g->arena, 8, sizeof *attrs);
    ir_vid *inputs = core_arena_array(g->arena, 5, sizeof *inputs);
    int64_t *perms = core_arena_array(g->arena, 16, sizeof *perms);
    if (!attrs || !inputs || !perms) return ANVIL_ERR_OUT_OF_MEMORY;
    static const char *const names[4] = {"perm_q", "perm_k", "perm_v", "perm_o"};
    for (int x = 0; x < 4; x++) {
        memcpy(perms + 4 * x, mt->perm[x], 4 * sizeof *perms);
        attrs[x] = (ir_attr){.name = names[x], .type = IR_ATTR_INTS, .n = 4, .ints = perms + 4 * x};
    }
    attrs[4] = (ir_attr){.name = "scale", .type = IR_ATTR_FLOAT, .f = mt->scale};
    attrs[5] = (ir_attr){.name = "fill", .type = IR_ATTR_FLOAT, .f = mt->fill};
    attrs[6] = (ir_attr){.name = "invert", .type = IR_ATTR_INT, .i = mt->invert};
    attrs[7] = (ir_attr){.name = "causal", .type = IR_ATTR_INT, .i = mt->causal};
    const int n_in = mt->keep != IR_NONE ? 5 : mask != IR_NONE ? 4 : 3;
    for (int i = 0; i < 5; i++) inputs[i] = IR_NONE;
    ir_node *h = &g->nodes[slot];
    h->op = IR_OP_SDPA;
    h->attrs = attrs;
    h->n_attrs = 8;
    h->params = NULL;
    h->fusion = NULL;
    h->inputs = inputs;
    h->n_inputs = n_in;
    const ir_vid ops[5] = {mt->q, mt->k, mt->v, mask, mt->keep};
    for (int i = 0; i < n_in; i++)
        if (ops[i] != IR_NONE) CORE_TRY(pass_node_set_input(c, slot, i, ops[i]));
    h = &g->nodes[slot];
    h->outputs[0] = mt->out;
    g->values[old_out].producer = -1;
    g->values[mt->out].producer = slot;
    drop_unread_transposes(c, qv, mt->q);
    drop_unread_transposes(c, kv, mt->k);
    drop_unread_transposes(c, vv, mt->v);
    CORE_TRY(op_get(IR_OP_SDPA)->check(g, h));
    c->pg->fused_attention++;
    return ANVIL_OK;
}

/* ---- the ONNX Attention op (opset 23) ------------------------------------------------------
 * An Attention node (softcap included) without padded-KV lengths or a qk output in use (a past
 * cache becomes Concats into present_key / present_value, when not causal), on float32 q, k, v of
 * rank 4
 * ([batch, heads, sequence, size]) or rank 3 ([batch, sequence, heads x size], heads from
 * q_num_heads / kv_num_heads, sizes known), with k/v heads a divisor of q's, becomes an anvil.Sdpa:
 * the same computation on the fast kernel. Rank-3 operands are read as views; grouped k/v heads
 * stay grouped (sdpa_geom.group); a rank-3 Y is the Sdpa's [batch, sequence, heads, size] through a
 * Reshape (an alias). A mask whose key count is not provably k's (a padded key cache) leaves the
 * node alone. */

static int64_t int_attr(const ir_node *n, const char *name, int64_t dflt) {
    int64_t v = dflt;
    return ir_attr_int(n, name, dflt, &v) == ANVIL_OK ? v : dflt;
}

/* Head count and size of a rank-3 operand of `heads` heads (the hidden size must be known). */
static bool split_heads(const ir_value *x, int64_t heads, int64_t *size) {
    const int64_t hidden = x->shape.d[2];
    if (heads <= 0 || hidden <= 0 || hidden % heads) return false;
    *size = hidden / heads;
    return true;
}

static bool same_dim(const ir_shape *a, int da, const ir_shape *b, int db) {
    if (a->d[da] >= 0 || b->d[db] >= 0) return a->d[da] == b->d[db];
    return a->sym[da] >= 0 && a->sym[da] == b->sym[db];
}

/* present = Concat(past, x) along the sequence (dim 2), into Attention node k's output `out` when
 * it has one, else a new value; *y set. */
static anvil_status concat_past(pass_ctx *c, int32_t k, int past_in, ir_vid x, int out, ir_vid *y) {
    ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    const ir_vid pv = n->inputs[past_in];
    ir_vid o = out < n->n_outputs ? n->outputs[out] : IR_NONE;
    char name[512];
    snprintf(name, sizeof name, "%s/present_%s", n->name, past_in == 4 ? "key" : "value");
    if (o == IR_NONE) {
        ir_shape s = g->values[pv].shape;
        const ir_shape *xs = &g->values[x].shape;
        s.d[2] = s.d[2] >= 0 && xs->d[2] >= 0 ? s.d[2] + xs->d[2] : IR_DIM_UNKNOWN;
        s.sym[2] = -1;
        CORE_TRY(pass_add_value(c, name, ANVIL_DTYPE_FLOAT32, &s, &o));
    }
    int32_t cat;
    CORE_TRY(pass_add_node(c, IR_OP_CONCAT, name, 2, 1, 1, &cat));
    ir_node *cn = &g->nodes[cat];
    cn->attrs[0] = (ir_attr){.name = "axis", .type = IR_ATTR_INT, .i = 2};
    cn->outputs[0] = o;
    g->values[o].producer = cat;
    CORE_TRY(pass_node_set_input(c, cat, 0, pv));
    CORE_TRY(pass_node_set_input(c, cat, 1, x));
    CORE_TRY(op_get(IR_OP_CONCAT)->check(g, &g->nodes[cat]));
    *y = o;
    return ANVIL_OK;
}

static anvil_status rewrite_onnx(pass_ctx *c, int32_t k) {
    ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (n->op != IR_OP_ATTENTION || n->n_inputs < 3 || n->fusion) return ANVIL_OK;
    /* a past cache (both halves) becomes Concats the node reads, whose outputs are
     * present_key/present_value; is_causal then drops key j > i + past, the Sdpa's lower-right
     * alignment when the new keys are as many as the queries (offset sk - sq = past); padded key
     * lengths and the qk output stay with the reference */
    const bool past = n->n_inputs > 5 && n->inputs[4] != IR_NONE && n->inputs[5] != IR_NONE;
    if (n->n_inputs > 6 && n->inputs[6] != IR_NONE) return ANVIL_OK;
    if (n->n_inputs > 4 && !past &&
        (n->inputs[4] != IR_NONE || (n->n_inputs > 5 && n->inputs[5] != IR_NONE)))
        return ANVIL_OK;
    for (int i = past ? 3 : 1; i < n->n_outputs; i++)
        if (n->outputs[i] != IR_NONE &&
            (c->uses[n->outputs[i]] > 0 || pass_pinned(c, n->outputs[i])))
            return ANVIL_OK;
    if (past && (g->values[n->inputs[0]].shape.rank != 4 ||
                 (int_attr(n, "is_causal", 0) &&
                  !same_dim(&g->values[n->inputs[0]].shape, 2, &g->values[n->inputs[1]].shape, 2))))
        return ANVIL_OK;
    float softcap = 0.0f;
    if (ir_attr_float(n, "softcap", 0.0f, &softcap) != ANVIL_OK || !(softcap >= 0.0f))
        return ANVIL_OK;
    const ir_value *q = &g->values[n->inputs[0]], *kv = &g->values[n->inputs[1]];
    const ir_value *v = &g->values[n->inputs[2]], *y = &g->values[n->outputs[0]];
    const int rank = q->shape.rank;
    if ((rank != 3 && rank != 4) || kv->shape.rank != rank || v->shape.rank != rank ||
        q->dtype != ANVIL_DTYPE_FLOAT32 || kv->dtype != ANVIL_DTYPE_FLOAT32 ||
        v->dtype != ANVIL_DTYPE_FLOAT32 || y->dtype != ANVIL_DTYPE_FLOAT32)
        return ANVIL_OK;
    int64_t hq, hk, dq, dk = 0, dv = 0;
    if (rank == 4) {
        hq = q->shape.d[1];
        hk = kv->shape.d[1];
        dq = q->shape.d[3];
        if (v->shape.d[1] != hk) return ANVIL_OK;
    } else {
        hq = int_attr(n, "q_num_heads", 0);
        hk = int_attr(n, "kv_num_heads", 0);
        if (!split_heads(q, hq, &dq) || !split_heads(kv, hk, &dk) || !split_heads(v, hk, &dv) ||
            dk != dq)
            return ANVIL_OK;
    }
    /* heads: as many, one shared, or groups (a divisor); the default scale needs the size */
    if (hq <= 0 || hk <= 0 || hq % hk || dq <= 0) return ANVIL_OK;
    ir_vid mask = n->n_inputs > 3 ? n->inputs[3] : IR_NONE;
    if (mask != IR_NONE) {
        const ir_value *m = &g->values[mask];
        /* the mask's key count must be k's: the sequence dim of k */
        const int kseq = rank == 4 ? 2 : 1;
        if (m->shape.rank < 1 || m->shape.rank > 4 ||
            (m->dtype != ANVIL_DTYPE_FLOAT32 && m->dtype != ANVIL_DTYPE_BOOL))
            return ANVIL_OK;
        if (past) {
            /* with a past cache: the keys are past + new, both known */
            const ir_value *pk = &g->values[n->inputs[4]];
            const int64_t last = m->shape.d[m->shape.rank - 1];
            if (pk->shape.rank != 4 || pk->shape.d[2] < 0 || kv->shape.d[2] < 0 ||
                last != pk->shape.d[2] + kv->shape.d[2])
                return ANVIL_OK;
        } else if (!same_dim(&m->shape, m->shape.rank - 1, &kv->shape, kseq)) {
            return ANVIL_OK;
        }
    }
    float scale;
    const bool has_scale = ir_node_attr(n, "scale") != NULL;
    if (ir_attr_float(n, "scale", 1.0f, &scale) != ANVIL_OK) return ANVIL_OK;
    if (!has_scale) scale = 1.0f / sqrtf((float)dq);
    const int causal = int_attr(n, "is_causal", 0) ? (past ? 2 : 1) : 0;

    /* the node becomes the Sdpa: attributes, inputs, and for rank 3 a Reshape to Y */
    const int n_attrs = 9 + (rank == 3 ? 3 : 0);
    ir_attr *attrs = core_arena_array(g->arena, (size_t)n_attrs, sizeof *attrs);
    int64_t *ints = core_arena_array(g->arena, 16 + 9, sizeof *ints);
    ir_vid *inputs = core_arena_array(g->arena, 5, sizeof *inputs);
    if (!attrs || !ints || !inputs) return ANVIL_ERR_OUT_OF_MEMORY;
    static const char *const perm_names[4] = {"perm_q", "perm_k", "perm_v", "perm_o"};
    static const char *const view_names[3] = {"view_q", "view_k", "view_v"};
    /* rank 4: as they are; rank 3: views [b, s, h, d], read with heads outside the sequence */
    const int64_t ident[4] = {0, 1, 2, 3}, bshd[4] = {0, 2, 1, 3};
    for (int x = 0; x < 4; x++) {
        memcpy(ints + 4 * x, rank == 4 ? ident : bshd, 4 * sizeof *ints);
        attrs[x] =
            (ir_attr){.name = perm_names[x], .type = IR_ATTR_INTS, .n = 4, .ints = ints + 4 * x};
    }
    attrs[4] = (ir_attr){.name = "scale", .type = IR_ATTR_FLOAT, .f = scale};
    attrs[5] = (ir_attr){.name = "fill", .type = IR_ATTR_FLOAT, .f = -INFINITY};
    attrs[6] = (ir_attr){.name = "invert", .type = IR_ATTR_INT, .i = 0};
    attrs[7] = (ir_attr){.name = "causal", .type = IR_ATTR_INT, .i = causal};
    attrs[8] = (ir_attr){.name = "softcap", .type = IR_ATTR_FLOAT, .f = softcap};
    if (rank == 3) {
        const int64_t heads[3] = {hq, hk, hk}, sizes[3] = {dq, dq, dv};
        for (int x = 0; x < 3; x++) {
            int64_t *w = ints + 16 + 3 * x;
            w[0] = 0;
            w[1] = heads[x];
            w[2] = sizes[x];
            attrs[9 + x] =
                (ir_attr){.name = view_names[x], .type = IR_ATTR_INTS, .n = 3, .ints = w};
        }
    }
    const bool bool_mask = mask != IR_NONE && g->values[mask].dtype == ANVIL_DTYPE_BOOL;
    const ir_vid q_in = n->inputs[0], k_in = n->inputs[1], v_in = n->inputs[2];
    const ir_vid y_out = n->outputs[0];
    ir_vid o = y_out;
    if (rank == 3) {
        /* the Sdpa writes [b, s, heads, dv]; a Reshape makes it Y's [b, s, heads x dv] */
        ir_shape os = y->shape;
        os.rank = 4;
        os.d[2] = hq;
        os.d[3] = y->shape.d[2] >= 0 ? y->shape.d[2] / hq : IR_DIM_UNKNOWN;
        os.sym[2] = os.sym[3] = -1;
        char name[512];
        snprintf(name, sizeof name, "%s/heads", n->name);
        CORE_TRY(pass_add_value(c, name, ANVIL_DTYPE_FLOAT32, &os, &o));
        ir_vid target;
        CORE_TRY(pass_add_int64_const(c, name, (const int64_t[]){0, 0, -1}, 3, &target));
        int32_t r;
        CORE_TRY(pass_add_node(c, IR_OP_RESHAPE, name, 2, 1, 0, &r));
        g->nodes[r].outputs[0] = y_out;
        g->values[y_out].producer = r;
        CORE_TRY(pass_node_set_input(c, r, 0, o));
        CORE_TRY(pass_node_set_input(c, r, 1, target));
        CORE_TRY(op_get(IR_OP_RESHAPE)->check(g, &g->nodes[r]));
    }
    ir_vid k_read = k_in, v_read = v_in;
    if (past) {
        CORE_TRY(concat_past(c, k, 4, k_in, 1, &k_read));
        CORE_TRY(concat_past(c, k, 5, v_in, 2, &v_read));
    }
    pass_node_kill(c, k);
    c->dead[k] = false;
    ir_node *h = &g->nodes[k];
    for (int i = 0; i < 5; i++) inputs[i] = IR_NONE;
    h->op = IR_OP_SDPA;
    h->attrs = attrs;
    h->n_attrs = n_attrs;
    h->params = NULL;
    h->inputs = inputs;
    h->n_inputs = mask == IR_NONE ? 3 : bool_mask ? 5 : 4;
    h->n_outputs = 1;
    h->outputs[0] = o;
    g->values[o].producer = k;
    CORE_TRY(op_get(IR_OP_SDPA)->check(g, h));
    const ir_vid ops[3] = {q_in, k_read, v_read};
    for (int i = 0; i < 3; i++) CORE_TRY(pass_node_set_input(c, k, i, ops[i]));
    if (mask != IR_NONE) CORE_TRY(pass_node_set_input(c, k, bool_mask ? 4 : 3, mask));
    c->pg->fused_attention++;
    return ANVIL_OK;
}

anvil_status pass_fuse_attention(pass_ctx *c) {
    att_match mt;
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        if (c->dead[k]) continue;
        if (c->g->nodes[k].op == IR_OP_ATTENTION) {
            CORE_TRY(rewrite_onnx(c, k));
            continue;
        }
        if (!match(c, k, &mt)) continue;
        CORE_TRY(rewrite(c, &mt));
    }
    return ANVIL_OK;
}
