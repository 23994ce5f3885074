/* cse: common-subexpression elimination. Two nodes with the same op, the same inputs and equal
 * attributes compute the same values, so the later one's readers read the earlier one's outputs
 * and the later one goes. Exporters repeat such work per layer (the same Shape -> Gather -> Concat
 * of the sequence length, the same mask arithmetic), and after const_nodes and fold_consts more of
 * it reads the very same values. Nodes with a subgraph or a tensor attribute, fused nodes, and
 * nodes whose outputs are graph outputs or read by a subgraph by name are left alone. Nodes are in
 * topological order, so a repeated chain collapses in one walk. */
#include "rewrite.h"

#include <stdlib.h>
#include <string.h>

static bool attr_equal(const ir_attr *a, const ir_attr *b) {
    if (strcmp(a->name, b->name) || a->type != b->type) return false;
    switch (a->type) {
    case IR_ATTR_FLOAT:
        return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case IR_ATTR_INT:
        return a->i == b->i;
    case IR_ATTR_STRING:
        return a->s_len == b->s_len && !memcmp(a->s, b->s, a->s_len);
    case IR_ATTR_FLOATS:
        return a->n == b->n && (!a->n || !memcmp(a->floats, b->floats, a->n * sizeof *a->floats));
    case IR_ATTR_INTS:
        return a->n == b->n && (!a->n || !memcmp(a->ints, b->ints, a->n * sizeof *a->ints));
    case IR_ATTR_STRINGS:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++)
            if (strcmp(a->strings[i], b->strings[i])) return false;
        return true;
    default:
        return false; /* tensors, graphs: not compared */
    }
}

/* Whether n may be merged at all. */
static bool mergeable(const pass_ctx *c, const ir_node *n) {
    if (n->fusion || n->n_outputs < 1 || n->op == IR_OP_CONSTANT) return false;
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] == IR_NONE || pass_pinned(c, n->outputs[i])) return false;
    for (int a = 0; a < n->n_attrs; a++) {
        const ir_attr_type t = n->attrs[a].type;
        if (t == IR_ATTR_TENSOR || t == IR_ATTR_TENSORS || t == IR_ATTR_GRAPH ||
            t == IR_ATTR_GRAPHS)
            return false;
    }
    return true;
}

static bool same_node(const ir_node *a, const ir_node *b) {
    if (a->op != b->op || a->opset != b->opset || a->n_inputs != b->n_inputs ||
        a->n_outputs != b->n_outputs || a->n_attrs != b->n_attrs)
        return false;
    for (int i = 0; i < a->n_inputs; i++)
        if (a->inputs[i] != b->inputs[i]) return false;
    for (int i = 0; i < a->n_attrs; i++) {
        int j = 0;
        while (j < b->n_attrs && strcmp(a->attrs[i].name, b->attrs[j].name)) j++;
        if (j == b->n_attrs || !attr_equal(&a->attrs[i], &b->attrs[j])) return false;
    }
    return true;
}

static uint64_t node_hash(const ir_node *n) {
    uint64_t h = pass_hash(PASS_HASH_SEED, &n->op, sizeof n->op);
    for (int i = 0; i < n->n_inputs; i++) h = pass_hash(h, &n->inputs[i], sizeof n->inputs[i]);
    return h;
}

anvil_status pass_cse(pass_ctx *c) {
    ir_graph *g = c->g;
    const size_t cap = 2 * (size_t)g->n_nodes + 1;
    int32_t *table = malloc(cap * sizeof *table);
    ir_vid *map = malloc(((size_t)g->n_values + 1) * sizeof *map);
    if (!table || !map) {
        free(table);
        free(map);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < cap; i++) table[i] = -1;
    for (int32_t v = 0; v < g->n_values; v++) map[v] = v;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (c->dead[k]) continue;
        ir_node *n = &g->nodes[k];
        /* first read what earlier merges left in place of this node's inputs */
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] != IR_NONE && map[n->inputs[i]] != n->inputs[i]) {
                anvil_status st = pass_node_set_input(c, k, i, map[n->inputs[i]]);
                if (st != ANVIL_OK) {
                    free(table);
                    free(map);
                    return st;
                }
                n = &g->nodes[k];
            }
        if (!mergeable(c, n)) continue;
        size_t slot = node_hash(n) % cap;
        while (table[slot] >= 0 && !same_node(&g->nodes[table[slot]], n)) slot = (slot + 1) % cap;
        if (table[slot] < 0) {
            table[slot] = k;
            continue;
        }
        const ir_node *first = &g->nodes[table[slot]];
        for (int i = 0; i < n->n_outputs; i++) map[n->outputs[i]] = first->outputs[i];
        pass_node_kill(c, k);
        c->pg->cse_merged++;
    }
    free(table);
    free(map);
    return ANVIL_OK;
}
