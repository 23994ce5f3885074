/* Epilogue fusion: a MatMul, Gemm or Conv absorbs the elementwise nodes that follow it, in the
 * order the epilogue applies them (ir_fusion): a per-column bias Add (MatMul only: Gemm and Conv
 * carry their own bias), then a residual Add of exactly the output's shape, then one activation.
 * The output then makes one trip through memory instead of one per absorbed node, and the
 * absorbed work happens on a tile that is still in L1.
 *
 * Gelu arrives in two spellings: the Gelu op (opset 20) and the expression exporters emit,
 * 0.5*x*(1 + erf(x/sqrt(2))) as Div/Erf/Add/Mul/Mul (or with 0.5 applied to x first, or x times
 * 1/sqrt(2)); both become IR_ACT_GELU_ERF. The tanh form becomes IR_ACT_GELU_TANH. SiLU, which
 * torch exports as Sigmoid and Mul, becomes IR_ACT_SILU. */
#include "rewrite.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static bool near(float a, double b) {
    return fabs((double)a - b) <= 1e-4 * fabs(b) + 1e-6;
}

/* The input of node n that is not v (n has two inputs, exactly one of them v). */
static ir_vid other_input(const ir_node *n, ir_vid v) {
    if (n->n_inputs != 2) return IR_NONE;
    if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
    if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
    return IR_NONE;
}

/* The sole reader of v if it is a two-input `op` whose other input is the scalar constant
 * `want`; -1 otherwise. */
static int32_t next_with_const(const pass_ctx *c, ir_vid v, ir_op op, double want) {
    int32_t r = pass_sole_reader(c, v);
    if (r < 0 || c->g->nodes[r].op != op) return -1;
    float k;
    if (!pass_const_scalar(c, other_input(&c->g->nodes[r], v), &k) || !near(k, want)) return -1;
    return r;
}

static int32_t next_of(const pass_ctx *c, ir_vid v, ir_op op) {
    int32_t r = pass_sole_reader(c, v);
    return r >= 0 && c->g->nodes[r].op == op && c->g->nodes[r].n_outputs == 1 ? r : -1;
}

static ir_vid out0(const pass_ctx *c, int32_t k) {
    return c->g->nodes[k].outputs[0];
}

/* The live nodes reading v, up to cap; returns how many there are. */
static int readers_of(const pass_ctx *c, ir_vid v, int32_t *r, int cap) {
    int n = 0;
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        if (c->dead[k]) continue;
        const ir_node *nd = &c->g->nodes[k];
        for (int i = 0; i < nd->n_inputs; i++)
            if (nd->inputs[i] == v) {
                if (n < cap) r[n] = k;
                n++;
                break;
            }
    }
    return n;
}

/* Matches Gelu written out over x (two readers: the Div/Mul into Erf, and a Mul). On success
 * fills kill[] with the nodes to remove and *last with the node whose output is the Gelu. */
static bool match_gelu_erf(const pass_ctx *c, ir_vid x, int32_t *kill, int *n_kill, int32_t *last) {
    int32_t r[2];
    if (c->uses[x] != 2 || readers_of(c, x, r, 2) != 2) return false;
    for (int t = 0; t < 2; t++) {
        int32_t d = r[t], m = r[1 - t];
        const ir_node *dn = &c->g->nodes[d];
        float k;
        if (!pass_const_scalar(c, other_input(dn, x), &k) || dn->inputs[0] != x) continue;
        if (!((dn->op == IR_OP_DIV && near(k, sqrt(2.0))) ||
              (dn->op == IR_OP_MUL && near(k, 1.0 / sqrt(2.0)))))
            continue;
        int32_t e = next_of(c, out0(c, d), IR_OP_ERF);
        if (e < 0) continue;
        int32_t a = next_with_const(c, out0(c, e), IR_OP_ADD, 1.0);
        if (a < 0 || c->g->nodes[m].op != IR_OP_MUL) continue;
        int32_t after_a = pass_sole_reader(c, out0(c, a));
        if (after_a == m && other_input(&c->g->nodes[m], x) == out0(c, a)) {
            /* (x * (1 + erf)) * 0.5 */
            int32_t h = next_with_const(c, out0(c, m), IR_OP_MUL, 0.5);
            if (h < 0) continue;
            kill[0] = d, kill[1] = e, kill[2] = a, kill[3] = m;
            *n_kill = 4;
            *last = h;
            return true;
        }
        /* (x * 0.5) * (1 + erf) */
        float half;
        if (!pass_const_scalar(c, other_input(&c->g->nodes[m], x), &half) || !near(half, 0.5))
            continue;
        int32_t h = pass_sole_reader(c, out0(c, m));
        if (h < 0 || h != after_a || c->g->nodes[h].op != IR_OP_MUL ||
            other_input(&c->g->nodes[h], out0(c, m)) != out0(c, a))
            continue;
        kill[0] = d, kill[1] = e, kill[2] = a, kill[3] = m;
        *n_kill = 4;
        *last = h;
        return true;
    }
    return false;
}

/* Matches SiLU written out, x * Sigmoid(x) (torch exports nn.SiLU so): x read by a Sigmoid whose
 * only reader is a Mul of x and it. */
static bool match_silu(const pass_ctx *c, ir_vid x, int32_t *kill, int *n_kill, int32_t *last) {
    int32_t r[2];
    if (c->uses[x] != 2 || readers_of(c, x, r, 2) != 2) return false;
    for (int t = 0; t < 2; t++) {
        const ir_node *s = &c->g->nodes[r[t]], *m = &c->g->nodes[r[1 - t]];
        if (s->op != IR_OP_SIGMOID || s->n_inputs != 1 || s->n_outputs != 1 || m->op != IR_OP_MUL ||
            m->n_inputs != 2 || m->n_outputs != 1 ||
            pass_sole_reader(c, out0(c, r[t])) != r[1 - t] || other_input(m, x) != out0(c, r[t]))
            continue;
        kill[0] = r[t];
        *n_kill = 1;
        *last = r[1 - t];
        return true;
    }
    return false;
}

/* Matches 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))): x read by Pow, Add and Mul(x, 0.5). */
static bool match_gelu_tanh(const pass_ctx *c, ir_vid x, int32_t *kill, int *n_kill,
                            int32_t *last) {
    int32_t r[3], pw = -1, ad = -1, hf = -1;
    if (c->uses[x] != 3 || readers_of(c, x, r, 3) != 3) return false;
    for (int i = 0; i < 3; i++) {
        const ir_node *n = &c->g->nodes[r[i]];
        float k;
        if (n->op == IR_OP_POW && n->inputs[0] == x && pass_const_scalar(c, n->inputs[1], &k) &&
            near(k, 3.0))
            pw = r[i];
        else if (n->op == IR_OP_MUL && pass_const_scalar(c, other_input(n, x), &k) && near(k, 0.5))
            hf = r[i];
        else if (n->op == IR_OP_ADD)
            ad = r[i];
    }
    if (pw < 0 || ad < 0 || hf < 0) return false;
    int32_t q = next_with_const(c, out0(c, pw), IR_OP_MUL, 0.044715);
    if (q < 0 || pass_sole_reader(c, out0(c, q)) != ad ||
        other_input(&c->g->nodes[ad], x) != out0(c, q))
        return false;
    int32_t s = next_with_const(c, out0(c, ad), IR_OP_MUL, 0.79788456080286536);
    int32_t th = s >= 0 ? next_of(c, out0(c, s), IR_OP_TANH) : -1;
    int32_t a = th >= 0 ? next_with_const(c, out0(c, th), IR_OP_ADD, 1.0) : -1;
    if (a < 0) return false;
    int32_t h = pass_sole_reader(c, out0(c, a));
    if (h < 0 || h != pass_sole_reader(c, out0(c, hf)) || c->g->nodes[h].op != IR_OP_MUL ||
        other_input(&c->g->nodes[h], out0(c, a)) != out0(c, hf))
        return false;
    int32_t ks[] = {pw, q, ad, s, th, a, hf};
    memcpy(kill, ks, sizeof ks);
    *n_kill = 7;
    *last = h;
    return true;
}

/* The activation node k applies, as an epilogue; false if it is not one the epilogue has. */
static bool act_of_node(const pass_ctx *c, const ir_node *n, ir_fusion *f) {
    if (n->n_outputs != 1) return false;
    switch (n->op) {
    case IR_OP_RELU:
        f->act = IR_ACT_RELU;
        return true;
    case IR_OP_SIGMOID:
        f->act = IR_ACT_SIGMOID;
        return true;
    case IR_OP_TANH:
        f->act = IR_ACT_TANH;
        return true;
    case IR_OP_HARDSWISH:
        f->act = IR_ACT_HARD_SWISH;
        return true;
    case IR_OP_LEAKYRELU:
        f->act = IR_ACT_LEAKY_RELU;
        return ir_attr_float(n, "alpha", 0.01f, &f->alpha) == ANVIL_OK;
    case IR_OP_HARDSIGMOID:
        f->act = IR_ACT_HARD_SIGMOID;
        return ir_attr_float(n, "alpha", 0.2f, &f->alpha) == ANVIL_OK &&
               ir_attr_float(n, "beta", 0.5f, &f->beta) == ANVIL_OK;
    case IR_OP_GELU: {
        const char *approx = "none";
        if (ir_attr_string(n, "approximate", "none", &approx) != ANVIL_OK) return false;
        f->act = !strcmp(approx, "tanh") ? IR_ACT_GELU_TANH : IR_ACT_GELU_ERF;
        return !strcmp(approx, "tanh") || !strcmp(approx, "none");
    }
    case IR_OP_CLIP: {
        f->act = IR_ACT_CLIP;
        f->lo = -FLT_MAX;
        f->hi = FLT_MAX;
        if (n->opset < 11) {
            if (ir_attr_float(n, "min", -FLT_MAX, &f->lo) != ANVIL_OK ||
                ir_attr_float(n, "max", FLT_MAX, &f->hi) != ANVIL_OK)
                return false;
        } else {
            if (n->n_inputs > 1 && n->inputs[1] != IR_NONE &&
                !pass_const_scalar(c, n->inputs[1], &f->lo))
                return false;
            if (n->n_inputs > 2 && n->inputs[2] != IR_NONE &&
                !pass_const_scalar(c, n->inputs[2], &f->hi))
                return false;
        }
        /* the epilogue's clip assumes lo <= hi (the op applies lo first, then hi) */
        return f->lo <= f->hi;
    }
    default:
        return false;
    }
}

/* Same rank, and no dim known to differ: known dims equal, named symbols equal. Anonymous unknown
 * dims pass; the runtime checks them per plan (see passes.h). */
static bool same_shape(const ir_shape *a, const ir_shape *b) {
    if (a->rank < 0 || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->d[i] >= 0 && b->d[i] >= 0) {
            if (a->d[i] != b->d[i]) return false;
        } else if (a->d[i] >= 0 || b->d[i] >= 0) {
            /* a known dim against an unknown one: equal only if the unknown is that value */
            if ((a->d[i] >= 0 ? a->d[i] : b->d[i]) == 1) return false;
        } else if (a->sym[i] >= 0 && b->sym[i] >= 0 && a->sym[i] != b->sym[i]) {
            return false;
        }
    }
    return true;
}

static bool unfused(const pass_ctx *c, const char *name) {
    for (int i = 0; i < c->opts->n_unfused; i++)
        if (!strcmp(c->opts->unfused[i], name)) return true;
    return false;
}

/* A constant that broadcasts over y's last dim only: numel == last dim, all other dims 1. */
static bool is_col_bias(const pass_ctx *c, ir_vid b, const ir_shape *y) {
    size_t n;
    if (!pass_const_f32(c, b, &n) || y->rank < 1 || y->d[y->rank - 1] < 0) return false;
    const ir_shape *bs = &c->g->values[b].shape;
    if (bs->rank < 1 || bs->rank > y->rank || (int64_t)n != y->d[y->rank - 1]) return false;
    for (int i = 0; i + 1 < bs->rank; i++)
        if (bs->d[i] != 1) return false;
    return true;
}

/* Whether SiLU joins epilogues: a measured rewrite (passes.h, pass_decision), one decision for
 * the graph, "fuse" (the rule) or "chain" (left to fuse_chain). Fused, the sigmoid runs on each
 * tile in registers and the output makes one trip through memory less; but on YOLOv8n's dense
 * convs of small K the in-register sigmoid cost more than its own pass (1 thread +3%), while
 * EfficientNet-B0 gained 8% (AMD Zen 4). The key hashes the shapes of the producers and their
 * weights, so the same network shares the decision. */
static bool silu_fuses(const pass_ctx *c) {
    if (!c->opts->decide) return true;
    const ir_graph *g = c->g;
    uint64_t h = PASS_HASH_SEED;
    int n = 0;
    const char *first = NULL;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *nd = &g->nodes[k];
        if (c->dead[k] ||
            (nd->op != IR_OP_CONV && nd->op != IR_OP_MATMUL && nd->op != IR_OP_GEMM) ||
            nd->n_outputs != 1 || nd->n_inputs < 2)
            continue;
        int32_t kill[1], last;
        int n_kill;
        if (!match_silu(c, nd->outputs[0], kill, &n_kill, &last)) continue;
        if (!first) first = nd->name;
        n++;
        const ir_shape *x = &g->values[nd->inputs[0]].shape, *w = &g->values[nd->inputs[1]].shape;
        h = pass_hash(h, &nd->op, sizeof nd->op);
        if (x->rank > 0) h = pass_hash(h, x->d, sizeof(int64_t) * (size_t)x->rank);
        if (w->rank > 0) h = pass_hash(h, w->d, sizeof(int64_t) * (size_t)w->rank);
    }
    if (n == 0) return true;
    char key[64];
    snprintf(key, sizeof key, "producers=%d;h=%016llx", n, (unsigned long long)h);
    static const char *const names[] = {"fuse", "chain"};
    const pass_decision q = {.rewrite = "silu",
                             .group = key,
                             .first = first,
                             .n_nodes = 2 * n,
                             .n_choices = 2,
                             .choice_names = names,
                             .rule = 0};
    return c->opts->decide(c->opts->decide_arg, &q) != 1;
}

/* A spelled-out GELU (erf or tanh form) or, where silu, SiLU reading y: absorbed into node `into`
 * (its nodes killed, f->act set, counted); false where none matches. */
static bool fuse_spelled_act(pass_ctx *c, ir_vid y, bool silu, int32_t into, ir_fusion *f) {
    int32_t kill[8], last = -1;
    int n_kill = 0;
    if (!(match_gelu_erf(c, y, kill, &n_kill, &last) ||
          match_gelu_tanh(c, y, kill, &n_kill, &last) ||
          (silu && match_silu(c, y, kill, &n_kill, &last))))
        return false;
    const ir_op first = c->g->nodes[kill[0]].op;
    f->act = first == IR_OP_POW       ? IR_ACT_GELU_TANH
             : first == IR_OP_SIGMOID ? IR_ACT_SILU
                                      : IR_ACT_GELU_ERF;
    pass_node_absorb(c, into, last);
    for (int i = 0; i < n_kill; i++) pass_node_kill(c, kill[i]);
    c->pg->fused_act++;
    return true;
}

static anvil_status fuse_from(pass_ctx *c, int32_t k, bool silu) {
    ir_graph *g = c->g;
    const ir_op op = g->nodes[k].op;
    ir_fusion f = {.bias = -1, .residual = -1, .act = IR_ACT_NONE};
    enum { BIAS, RESIDUAL, ACT, DONE } stage = op == IR_OP_MATMUL ? BIAS : RESIDUAL;
    bool changed = false;
    while (stage != DONE) {
        ir_vid y = out0(c, k);
        if (fuse_spelled_act(c, y, silu, k, &f)) {
            changed = true;
            break;
        }
        int32_t r = pass_sole_reader(c, y);
        if (r < 0) break;
        if (g->nodes[r].op == IR_OP_RESHAPE && g->nodes[r].inputs[0] == y) {
            /* An activation behind a Reshape (GPT-2's Conv1D: Gemm, Reshape back to
             * [batch, seq, 4 x width], written-out Gelu) applies as well before it, being
             * elementwise: the producer takes it and the Reshape makes the activation's output.
             * Unfused, the Gelu was its own pass over the FFN's widest activation (5% of GPT-2's
             * time in fp16). */
            if (fuse_spelled_act(c, out0(c, r), silu, r, &f)) {
                changed = true;
                break;
            }
            const int32_t an = pass_sole_reader(c, out0(c, r));
            ir_fusion a = f;
            if (an >= 0 && g->nodes[an].inputs[0] == out0(c, r) &&
                act_of_node(c, &g->nodes[an], &a)) {
                f = a;
                pass_node_absorb(c, r, an);
                changed = true;
                c->pg->fused_act++;
            }
            break;
        }
        const ir_node *rn = &g->nodes[r];
        if (rn->n_outputs != 1 || g->values[rn->outputs[0]].dtype != ANVIL_DTYPE_FLOAT32) break;
        if (rn->op == IR_OP_ADD && stage <= RESIDUAL) {
            ir_vid o = other_input(rn, y);
            if (o == IR_NONE) break;
            const ir_shape *ys = &g->values[y].shape, *as = &g->values[rn->outputs[0]].shape;
            int idx;
            /* [.., N] + bias[N] has y's shape whenever y's last dim is N */
            if (stage == BIAS && is_col_bias(c, o, ys)) {
                CORE_TRY(pass_node_add_input(c, k, o, &idx));
                f.bias = idx;
                stage = RESIDUAL;
                c->pg->fused_bias++;
            } else if (g->values[o].dtype == ANVIL_DTYPE_FLOAT32 &&
                       same_shape(&g->values[o].shape, ys) && same_shape(ys, as)) {
                CORE_TRY(pass_node_add_input(c, k, o, &idx));
                f.residual = idx;
                stage = ACT;
                c->pg->fused_residual++;
            } else {
                break;
            }
            pass_node_absorb(c, k, r);
            changed = true;
            continue;
        }
        ir_fusion a = f;
        if (!act_of_node(c, rn, &a)) break;
        f = a;
        pass_node_absorb(c, k, r);
        changed = true;
        c->pg->fused_act++;
        stage = DONE;
    }
    if (!changed) return ANVIL_OK;
    ir_fusion *keep = core_arena_alloc(g->arena, sizeof *keep);
    if (!keep) return ANVIL_ERR_OUT_OF_MEMORY;
    *keep = f;
    g->nodes[k].fusion = keep;
    return ANVIL_OK;
}

anvil_status pass_fuse_epilogue(pass_ctx *c) {
    ir_graph *g = c->g;
    const bool silu = silu_fuses(c);
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (c->dead[k] || n->fusion || n->n_outputs != 1 || n->outputs[0] == IR_NONE) continue;
        if (n->op != IR_OP_CONV && n->op != IR_OP_MATMUL && n->op != IR_OP_GEMM) continue;
        if (g->values[n->outputs[0]].dtype != ANVIL_DTYPE_FLOAT32 || unfused(c, n->name)) continue;
        CORE_TRY(fuse_from(c, k, silu));
    }
    return ANVIL_OK;
}
