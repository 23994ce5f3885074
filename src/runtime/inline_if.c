/* Inlining the branch an If is known to take.
 *
 * Exported models test shapes at run time: Silero VAD's decoder asks "is the state empty?" as
 * Shape -> Gather -> Equal -> If. Once a body is compiled for concrete input shapes those
 * conditions are constants, but an If is a dynamic step (its outputs' shapes are whatever the
 * branch gives), and everything it feeds becomes dynamic too: interpreted node by node on the
 * reference kernels. Splicing the taken branch into the graph in place of the If makes all of
 * it plannable.
 *
 * The branch's values keep their names (a subgraph nested in the branch finds them by name),
 * so a branch whose names collide with the graph's is left alone; exported models name values
 * uniquely across all their graphs. */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

/* Rounds of inlining at most: a spliced branch may hold Ifs that become known in turn. */
#define INLINE_MAX_ROUNDS 8

/* The branch If node k takes, or NULL when its condition is not known or the branch cannot be
 * spliced into g. */
static const ir_graph *taken_branch(const ir_graph *g, const rt_shapes *sh, int32_t k) {
    const ir_node *n = &g->nodes[k];
    if (n->op != IR_OP_IF || n->n_inputs < 1 || n->inputs[0] == IR_NONE) return NULL;
    const op_tinfo *c = &sh->info[n->inputs[0]];
    size_t numel;
    if (!c->value || c->dtype != ANVIL_DTYPE_BOOL || !ir_shape_numel(&c->shape, &numel) ||
        numel != 1)
        return NULL;
    const ir_attr *a = ir_node_attr(n, *(const bool *)c->value ? "then_branch" : "else_branch");
    const ir_graph *b = a && a->type == IR_ATTR_GRAPH ? a->g : NULL;
    if (!b || b->n_inputs != 0 || b->n_outputs != n->n_outputs) return NULL;
    for (ir_vid v = 0; v < b->n_values; v++) {
        const ir_value *bv = &b->values[v];
        ir_vid gv = ir_graph_find_value(g, bv->name);
        /* an outer read must resolve in g; a value of the branch's own must not collide */
        if ((bv->flags & IR_VALUE_OUTER) ? gv == IR_NONE : gv != IR_NONE) return NULL;
    }
    return b;
}

/* dst: g with each If k that has taken[k] replaced by that branch's nodes, then an Identity per
 * output from the branch's result to the If's output value. */
static anvil_status splice(const ir_graph *g, const ir_graph *const *taken, ir_graph **out) {
    ir_graph *dst;
    CORE_TRY(ir_graph_create(NULL, &dst));
    anvil_status st = ANVIL_OK;
    ir_vid *map = NULL;
    dst->name = core_arena_strdup(dst->arena, g->name ? g->name : "");
    dst->opset = g->opset;
    dst->depth = g->depth;
    if (!dst->name) st = ANVIL_ERR_OUT_OF_MEMORY;
    /* g's values keep their ids */
    for (ir_vid v = 0; v < g->n_values && st == ANVIL_OK; v++) {
        ir_vid nv;
        if ((st = ir_graph_add_value(dst, g->values[v].name, &nv)) != ANVIL_OK) break;
        const char *name = dst->values[nv].name;
        dst->values[nv] = g->values[v];
        dst->values[nv].name = name;
        dst->values[nv].producer = -1;
    }
    for (int32_t k = 0; k < g->n_nodes && st == ANVIL_OK; k++) {
        const ir_node *n = &g->nodes[k];
        const ir_graph *b = taken[k];
        if (!b) {
            st = ir_graph_copy_node(dst, n, NULL, NULL, NULL);
            continue;
        }
        free(map);
        if (!(map = malloc(sizeof *map * ((size_t)b->n_values + 1)))) {
            st = ANVIL_ERR_OUT_OF_MEMORY;
            break;
        }
        for (ir_vid v = 0; v < b->n_values && st == ANVIL_OK; v++) {
            const ir_value *bv = &b->values[v];
            if (bv->flags & IR_VALUE_OUTER) {
                map[v] = ir_graph_find_value(dst, bv->name);
                continue;
            }
            if ((st = ir_graph_add_value(dst, bv->name, &map[v])) != ANVIL_OK) break;
            ir_value *nv = &dst->values[map[v]];
            const char *name = nv->name;
            *nv = *bv;
            nv->name = name;
            nv->producer = -1;
            nv->flags &= ~(uint32_t)(IR_VALUE_GRAPH_INPUT | IR_VALUE_GRAPH_OUTPUT);
        }
        for (int32_t j = 0; j < b->n_nodes && st == ANVIL_OK; j++)
            st = ir_graph_copy_node(dst, &b->nodes[j], map, map, NULL);
        for (int i = 0; i < n->n_outputs && st == ANVIL_OK; i++) {
            if (n->outputs[i] == IR_NONE) continue;
            int32_t idx;
            st = ir_graph_add_node(dst, IR_OP_IDENTITY, n->name, 1, 1, 0, &idx);
            if (st != ANVIL_OK) break;
            dst->nodes[idx].opset = n->opset;
            dst->nodes[idx].inputs[0] = map[b->outputs[i]];
            dst->nodes[idx].outputs[0] = n->outputs[i];
        }
    }
    for (int32_t i = 0; i < g->n_inputs && st == ANVIL_OK; i++)
        st = ir_graph_add_input(dst, g->inputs[i]);
    for (int32_t i = 0; i < g->n_outputs && st == ANVIL_OK; i++)
        st = ir_graph_add_output(dst, g->outputs[i]);
    for (int32_t i = 0; i < g->n_syms && st == ANVIL_OK; i++) {
        int32_t sym;
        st = ir_graph_add_sym(dst, g->syms[i], &sym);
    }
    for (int32_t k = 0; k < dst->n_nodes && st == ANVIL_OK; k++)
        for (int i = 0; i < dst->nodes[k].n_outputs; i++)
            if (dst->nodes[k].outputs[i] != IR_NONE)
                dst->values[dst->nodes[k].outputs[i]].producer = k;
    free(map);
    if (st != ANVIL_OK) {
        ir_graph_free(dst);
        return st;
    }
    *out = dst;
    return ANVIL_OK;
}

anvil_status rt_inline_known_ifs(ir_graph **g, int *inlined) {
    *inlined = 0;
    for (int round = 0; round < INLINE_MAX_ROUNDS; round++) {
        rt_shapes sh;
        /* what cannot be known statically is simply not inlined */
        if (rt_shapes_known(*g, &sh) != ANVIL_OK) {
            core_err_clear();
            return ANVIL_OK;
        }
        const ir_graph **taken = calloc((size_t)(*g)->n_nodes + 1, sizeof *taken);
        if (!taken) {
            rt_shapes_free(&sh);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        int n = 0;
        for (int32_t k = 0; k < (*g)->n_nodes; k++)
            n += (taken[k] = taken_branch(*g, &sh, k)) != NULL;
        rt_shapes_free(&sh);
        ir_graph *next = NULL;
        anvil_status st = n ? splice(*g, taken, &next) : ANVIL_OK;
        free(taken);
        CORE_TRY(st);
        if (!next) return ANVIL_OK;
        ir_graph_free(*g);
        *g = next;
        *inlined += n;
    }
    return ANVIL_OK;
}
