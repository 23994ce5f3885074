/* transposes: a Transpose of a Transpose (the inner one read by nothing else) becomes one
 * Transpose with the composed permutation, or an Identity (an alias at run time) when the two
 * cancel. Exporters write such pairs around layout changes (torch's multi-head attention turns
 * [seq, batch, ...] around and back); the layout pass's own transposes meet the model's the same
 * way.
 *
 * Gemm takes its operands transposed for free (transA/transB: the GEMM reads them through
 * strides), so a 2-D Transpose next to one goes into its flags: a Gemm reading a Transpose's
 * output reads the Transpose's input with the flag flipped, and a Transpose that alone reads a
 * Gemm's output (without C, whose broadcast would turn too) becomes the Gemm of the swapped
 * operands, (op(A) op(B))^T = op(B)^T op(A)^T. Training graphs are full of both: a Linear layer
 * exported as MatMul(X, Transpose(W)) has its weight gradient come out as Transpose(Gemm(X^T dY))
 * (BERT L4's step ran 72 such transposes of weights, 5% of its time). */
#include "rewrite.h"

#include "ops/ops.h"

#include <string.h>

static bool perm_of(const ir_node *n, int64_t *perm, size_t *rank) {
    const int64_t *p;
    if (n->op != IR_OP_TRANSPOSE || n->n_inputs != 1 || n->fusion ||
        ir_attr_ints(n, "perm", &p, rank) != ANVIL_OK || !p || *rank > IR_MAX_RANK)
        return false;
    for (size_t a = 0; a < *rank; a++) perm[a] = p[a];
    return true;
}

/* Node n's int attribute `name` set to v: in place, or in a copy of its attributes one longer
 * (the graph's arena owns it). */
static anvil_status set_int_attr(ir_graph *g, ir_node *n, const char *name, int64_t v) {
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name) && n->attrs[i].type == IR_ATTR_INT) {
            n->attrs[i].i = v;
            return ANVIL_OK;
        }
    ir_attr *a = core_arena_array(g->arena, (size_t)n->n_attrs + 1, sizeof *a);
    if (!a) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n->n_attrs; i++) a[i] = n->attrs[i];
    a[n->n_attrs] = (ir_attr){.name = name, .type = IR_ATTR_INT, .i = v};
    n->attrs = a;
    n->n_attrs++;
    return ANVIL_OK;
}

/* A Transpose swapping the two dims of a matrix */
static bool swaps_2d(const ir_node *n) {
    int64_t perm[IR_MAX_RANK];
    size_t r;
    return perm_of(n, perm, &r) && r == 2 && perm[0] == 1 && perm[1] == 0;
}

static bool gemm_flags(const ir_node *n, int64_t *ta, int64_t *tb) {
    return n->op == IR_OP_GEMM && n->n_inputs >= 2 && n->n_outputs == 1 &&
           ir_attr_int(n, "transA", 0, ta) == ANVIL_OK &&
           ir_attr_int(n, "transB", 0, tb) == ANVIL_OK;
}

/* Gemm k reading a 2-D Transpose's output as A or B reads its input instead, the flag flipped. */
static anvil_status gemm_reads_through(pass_ctx *c, int32_t k, bool *changed) {
    ir_graph *g = c->g;
    int64_t t[2];
    if (!gemm_flags(&g->nodes[k], &t[0], &t[1])) return ANVIL_OK;
    for (int i = 0; i < 2; i++) {
        const ir_vid v = g->nodes[k].inputs[i];
        const int32_t p = v == IR_NONE ? -1 : g->values[v].producer;
        if (p < 0 || c->dead[p] || !swaps_2d(&g->nodes[p])) continue;
        const ir_vid x = g->nodes[p].inputs[0];
        CORE_TRY(set_int_attr(g, &g->nodes[k], i ? "transB" : "transA", !t[i]));
        CORE_TRY(pass_node_set_input(c, k, i, x));
        t[i] = !t[i];
        *changed = true;
    }
    if (*changed) {
        g->nodes[k].params = NULL;
        CORE_TRY(op_get(IR_OP_GEMM)->check(g, &g->nodes[k]));
    }
    return ANVIL_OK;
}

/* Transpose k, the sole reader of a Gemm's output (no C, no fused epilogue), becomes that Gemm
 * with its operands swapped. */
static anvil_status gemm_written_through(pass_ctx *c, int32_t k, bool *changed) {
    ir_graph *g = c->g;
    if (!swaps_2d(&g->nodes[k])) return ANVIL_OK;
    const int32_t p = g->values[g->nodes[k].inputs[0]].producer;
    int64_t ta, tb;
    if (p < 0 || c->dead[p] || !gemm_flags(&g->nodes[p], &ta, &tb) || g->nodes[p].fusion ||
        (g->nodes[p].n_inputs > 2 && g->nodes[p].inputs[2] != IR_NONE) ||
        pass_sole_reader(c, g->nodes[p].outputs[0]) != k)
        return ANVIL_OK;
    const ir_vid a = g->nodes[p].inputs[0], b = g->nodes[p].inputs[1];
    CORE_TRY(set_int_attr(g, &g->nodes[p], "transA", !tb));
    CORE_TRY(set_int_attr(g, &g->nodes[p], "transB", !ta));
    CORE_TRY(pass_node_set_input(c, p, 0, b));
    CORE_TRY(pass_node_set_input(c, p, 1, a));
    pass_node_absorb(c, p, k);
    g->nodes[p].params = NULL;
    CORE_TRY(op_get(IR_OP_GEMM)->check(g, &g->nodes[p]));
    *changed = true;
    return ANVIL_OK;
}

anvil_status pass_transposes(pass_ctx *c) {
    ir_graph *g = c->g;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (c->dead[k]) continue;
        bool changed = false;
        CORE_TRY(gemm_written_through(c, k, &changed));
        if (!changed) CORE_TRY(gemm_reads_through(c, k, &changed));
        if (changed) c->pg->gemm_transposes++;
    }
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (c->dead[k]) continue;
        int64_t outer[IR_MAX_RANK], inner[IR_MAX_RANK];
        size_t ro, ri;
        if (!perm_of(&g->nodes[k], outer, &ro)) continue;
        const int32_t p = g->values[g->nodes[k].inputs[0]].producer;
        if (p < 0 || c->dead[p] || !perm_of(&g->nodes[p], inner, &ri) || ri != ro ||
            pass_sole_reader(c, g->nodes[p].outputs[0]) != k)
            continue;
        /* output dim a of the pair is dim inner[outer[a]] of the inner one's input */
        int64_t *perm = core_arena_array(g->arena, ro, sizeof *perm);
        if (!perm) return ANVIL_ERR_OUT_OF_MEMORY;
        bool identity = true;
        for (size_t a = 0; a < ro; a++) {
            perm[a] = inner[outer[a]];
            identity = identity && perm[a] == (int64_t)a;
        }
        const ir_vid x = g->nodes[p].inputs[0];
        pass_node_kill(c, p);
        ir_node *n = &g->nodes[k];
        if (identity) {
            n->op = IR_OP_IDENTITY;
            n->n_attrs = 0;
            n->attrs = NULL;
        } else {
            ir_attr *a = core_arena_array(g->arena, 1, sizeof *a);
            if (!a) return ANVIL_ERR_OUT_OF_MEMORY;
            *a = (ir_attr){.name = "perm", .type = IR_ATTR_INTS, .n = ro, .ints = perm};
            n->attrs = a;
            n->n_attrs = 1;
        }
        n->params = NULL;
        CORE_TRY(op_get(n->op)->check(g, n));
        CORE_TRY(pass_node_set_input(c, k, 0, x));
        c->pg->transposes_merged++;
    }
    return ANVIL_OK;
}
