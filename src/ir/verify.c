/* Structural verification and topological sorting of ir graphs.
 *
 * Verification walks each graph once in node order, remembering for every value who defined it
 * (graph input, initializer, outer scope, or a node). Walking in order is what lets one pass check
 * both "defined exactly once" and "defined before use": a value read before its definition has
 * been seen is either defined later (order problem), never (missing value), or by the reader
 * itself (a cycle), and each case gets its own message because each has a different remedy.
 * Subgraphs are verified at the point of the node that owns them, so that outer-scope references
 * can be checked against what the enclosing graph has defined *at that node*.
 *
 * Node outputs must be typed: verification runs after load-time shape inference (see api.c), so
 * an untyped output means inference missed it. That, a value id out of range, or a producer field
 * that disagrees with the node list can only be a bug in anvil: ANVIL_ERR_INTERNAL. Problems a
 * model file can cause are ANVIL_ERR_INVALID_MODEL (UNSUPPORTED for dtypes anvil cannot hold). */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Who defined a value; node indices are >= 0. */
enum { DEF_NONE = -1, DEF_INPUT = -2, DEF_CONST = -3, DEF_OUTER = -4 };

/* One graph being verified, linked to the enclosing graph's state so outer references can be
 * checked against what was defined before the owning node. */
typedef struct verify_scope {
    const ir_graph *g;
    const int32_t *def; /* per value of g: DEF_* or the defining node index */
    const struct verify_scope *up;
} verify_scope;

/* "graph 'name'" or a description when the graph has no name; for messages. */
static const char *graph_desc(const ir_graph *g, char *buf, size_t cap) {
    if (g->name && g->name[0])
        snprintf(buf, cap, "graph '%.120s'", g->name);
    else if (g->depth == 0)
        snprintf(buf, cap, "the main graph");
    else
        snprintf(buf, cap, "a subgraph at depth %d", g->depth);
    return buf;
}

static const char *vname(const ir_graph *g, ir_vid v) {
    const char *n = g->values[v].name;
    return n ? n : "?";
}

/* Describes the definer of a value for "defined twice" messages. */
static const char *def_desc(const ir_graph *g, int32_t def, char *buf, size_t cap) {
    switch (def) {
    case DEF_INPUT:
        snprintf(buf, cap, "a graph input");
        break;
    case DEF_CONST:
        snprintf(buf, cap, "an initializer");
        break;
    case DEF_OUTER:
        snprintf(buf, cap, "an outer-scope reference");
        break;
    default:
        if (def >= 0 && def < g->n_nodes)
            snprintf(buf, cap, "%s", ir_node_label(&g->nodes[def]));
        else
            snprintf(buf, cap, "nothing");
        break;
    }
    return buf;
}

static anvil_status check_vid(const ir_graph *g, ir_vid v, const char *what) {
    if (v < 0 || v >= g->n_values) {
        char gb[160];
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s of %s refers to value id %d but the graph has %d values; this is a "
                        "bug in anvil, please report it",
                        what, graph_desc(g, gb, sizeof gb), (int)v, (int)g->n_values);
    }
    return ANVIL_OK;
}

/* Declared dtypes (graph inputs, initializers) must be known and holdable. */
static anvil_status check_declared_dtype(const ir_graph *g, ir_vid v, const char *role) {
    anvil_dtype dt = g->values[v].dtype;
    if (dt == ANVIL_DTYPE_UNDEFINED)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s '%s' has no element type (dtype UNDEFINED); declare its type in the "
                        "model (e.g. re-export it, or set the tensor's elem_type)",
                        role, vname(g, v));
    if (!core_dtype_supported(dt))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s '%s' has dtype %s (%d), which anvil cannot hold; convert it to a "
                        "numeric type before loading",
                        role, vname(g, v), anvil_dtype_name(dt), (int)dt);
    return ANVIL_OK;
}

static anvil_status check_shape(const ir_graph *g, ir_vid v) {
    const ir_shape *s = &g->values[v].shape;
    if (s->rank < -1 || s->rank > IR_MAX_RANK)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "value '%s' has rank %d; anvil handles ranks 0 to %d; reshape the model "
                        "so no tensor exceeds rank %d",
                        vname(g, v), s->rank, IR_MAX_RANK, IR_MAX_RANK);
    for (int i = 0; i < s->rank; i++) {
        if (s->d[i] < IR_DIM_UNKNOWN)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "value '%s' has dimension %d = %lld; dimensions must be >= 0 or "
                            "unknown",
                            vname(g, v), i, (long long)s->d[i]);
        if (s->d[i] == IR_DIM_UNKNOWN && (s->sym[i] < -1 || s->sym[i] >= g->n_syms))
            return core_err(ANVIL_ERR_INTERNAL,
                            "value '%s' dimension %d names symbol %d but the graph has %d; this "
                            "is a bug in anvil, please report it",
                            vname(g, v), i, (int)s->sym[i], (int)g->n_syms);
    }
    return ANVIL_OK;
}

/* Constant data must be present and exactly as large as the declared shape says. */
static anvil_status check_const_data(const ir_graph *g, ir_vid v) {
    const ir_value *val = &g->values[v];
    if (val->data_bytes > 0 && !val->data)
        return core_err(ANVIL_ERR_INTERNAL,
                        "constant '%s' claims %zu bytes but has no data; this is a bug in anvil, "
                        "please report it",
                        vname(g, v), val->data_bytes);
    size_t want;
    if (ir_shape_is_static(&val->shape) &&
        core_tensor_bytes(val->dtype, val->shape.d, val->shape.rank, &want) &&
        want != val->data_bytes) {
        char sb[128];
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "constant '%s' of shape %s and dtype %s needs %zu bytes but holds %zu; "
                        "the model's tensor data is inconsistent, re-export it",
                        vname(g, v), ir_shape_str(g, &val->shape, sb, sizeof sb),
                        anvil_dtype_name(val->dtype), want, val->data_bytes);
    }
    return ANVIL_OK;
}

/* Resolves an outer-scope reference by name through the enclosing graphs. With scope state (the
 * normal case) the value must also have been defined before the node owning this subgraph. */
static anvil_status resolve_outer(const ir_graph *g, ir_vid v, const verify_scope *up) {
    const char *name = vname(g, v);
    char gb[160], pb[160];
    if (up) {
        for (const verify_scope *s = up; s; s = s->up) {
            ir_vid p = ir_graph_find_value(s->g, name);
            if (p == IR_NONE) continue;
            if (s->def[p] == DEF_NONE)
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s uses '%s' from %s before it is defined there; the node that "
                                "owns the subgraph must come after the value's producer "
                                "(call ir_graph_toposort first, or fix the exporter)",
                                graph_desc(g, gb, sizeof gb), name,
                                graph_desc(s->g, pb, sizeof pb));
            return ANVIL_OK;
        }
    } else {
        for (const ir_graph *p = g->parent; p; p = p->parent)
            if (ir_graph_find_value(p, name) != IR_NONE) return ANVIL_OK;
    }
    return core_err(ANVIL_ERR_INVALID_MODEL,
                    "%s refers to outer-scope value '%s' but no enclosing graph defines it; "
                    "add it to an enclosing graph or fix the exporter",
                    graph_desc(g, gb, sizeof gb), name);
}

static anvil_status verify_graph(const ir_graph *g, const verify_scope *up, int level);

/* Checks one node's inputs against what is defined so far; verifies its subgraphs (which see the
 * enclosing state as it is before the node's own outputs); then defines its outputs. */
static anvil_status verify_node(const ir_graph *g, int32_t i, int32_t *def, const int32_t *writer,
                                const verify_scope *up, int level) {
    const ir_node *n = &g->nodes[i];
    char gb[160], db[360];
    if ((unsigned)n->op >= IR_OP_COUNT || n->n_inputs < 0 || n->n_outputs < 0 || n->n_attrs < 0 ||
        (n->n_inputs > 0 && !n->inputs) || (n->n_outputs > 0 && !n->outputs) ||
        (n->n_attrs > 0 && !n->attrs) || !n->name)
        return core_err(ANVIL_ERR_INTERNAL,
                        "node %d of %s is malformed (op %d, %d inputs, %d outputs, %d attributes); "
                        "this is a bug in anvil, please report it",
                        (int)i, graph_desc(g, gb, sizeof gb), (int)n->op, n->n_inputs, n->n_outputs,
                        n->n_attrs);

    for (int k = 0; k < n->n_inputs; k++) {
        ir_vid v = n->inputs[k];
        if (v == IR_NONE) continue;
        CORE_TRY(check_vid(g, v, ir_node_label(n)));
        if (def[v] != DEF_NONE) continue;
        int32_t p = writer[v];
        if (p == i)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s reads its own output '%s' (input %d): the graph has a cycle; "
                            "fix the model so no node depends on itself",
                            ir_node_label(n), vname(g, v), k);
        if (p > i && p < g->n_nodes) {
            char later[320];
            snprintf(later, sizeof later, "%s", ir_node_label(&g->nodes[p]));
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s reads '%s' (input %d) before %s produces it: the nodes are not "
                            "in topological order; call ir_graph_toposort first, or re-export "
                            "the model",
                            ir_node_label(n), vname(g, v), k, later);
        }
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s reads '%s' (input %d), which is never defined: it is not a graph "
                        "input, an initializer or the output of any node; add it to the model "
                        "or fix the exporter",
                        ir_node_label(n), vname(g, v), k);
    }

    for (int k = 0; k < n->n_attrs; k++) {
        const ir_attr *a = &n->attrs[k];
        for (size_t j = 0; j < ir_attr_graph_count(a); j++) {
            const ir_graph *sub = ir_attr_graph_at(a, j);
            if (!sub || sub->parent != g)
                return core_err(ANVIL_ERR_INTERNAL,
                                "%s: subgraph attribute '%s' is %s; this is a bug in anvil, "
                                "please report it",
                                ir_node_label(n), a->name ? a->name : "?",
                                sub ? "attached to another graph" : "missing");
            verify_scope scope = {g, def, up};
            anvil_status s = verify_graph(sub, &scope, level + 1);
            if (s != ANVIL_OK)
                return core_err_prefix(s, "in attribute '%s' of %s", a->name ? a->name : "?",
                                       ir_node_label(n));
        }
    }

    bool any_output = false;
    for (int k = 0; k < n->n_outputs; k++) {
        ir_vid v = n->outputs[k];
        if (v == IR_NONE) continue;
        any_output = true;
        CORE_TRY(check_vid(g, v, ir_node_label(n)));
        if (def[v] != DEF_NONE) {
            def_desc(g, def[v], db, sizeof db);
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "value '%s' is defined twice: by %s and by %s (output %d); every "
                            "value must have exactly one definition, rename one of them",
                            vname(g, v), db, ir_node_label(n), k);
        }
        if (g->values[v].producer != i)
            return core_err(ANVIL_ERR_INTERNAL,
                            "value '%s' is written by %s but records producer %d; this is a bug "
                            "in anvil, please report it",
                            vname(g, v), ir_node_label(n), (int)g->values[v].producer);
        anvil_dtype dt = g->values[v].dtype;
        if (dt == ANVIL_DTYPE_UNDEFINED)
            return core_err(ANVIL_ERR_INTERNAL,
                            "output '%s' of %s has no element type: verification expects shape "
                            "inference to have typed every node output; this is a bug in anvil, "
                            "please report it",
                            vname(g, v), ir_node_label(n));
        if (!core_dtype_supported(dt))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "output '%s' of %s has dtype %s (%d), which anvil cannot hold",
                            vname(g, v), ir_node_label(n), anvil_dtype_name(dt), (int)dt);
        if (g->values[v].flags & IR_VALUE_CONST) CORE_TRY(check_const_data(g, v));
        def[v] = i;
    }
    if (!any_output)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has no outputs; every node must produce at least one value, remove "
                        "the node or fix the exporter",
                        ir_node_label(n));
    return ANVIL_OK;
}

/* Defines graph inputs, initializers and outer references, in that order, so that a value
 * claimed by two of them is reported as defined twice. */
static anvil_status define_sources(const ir_graph *g, int32_t *def, const int32_t *writer,
                                   const verify_scope *up) {
    char db[360];
    for (int32_t k = 0; k < g->n_inputs; k++) {
        ir_vid v = g->inputs[k];
        CORE_TRY(check_vid(g, v, "a graph input"));
        if (def[v] != DEF_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "graph input '%s' is listed more than once; list each input once",
                            vname(g, v));
        CORE_TRY(check_declared_dtype(g, v, "graph input"));
        def[v] = DEF_INPUT;
    }
    for (ir_vid v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        CORE_TRY(check_shape(g, v));
        if (val->producer < -1 || val->producer >= g->n_nodes)
            return core_err(ANVIL_ERR_INTERNAL,
                            "value '%s' records producer %d but the graph has %d nodes; this is "
                            "a bug in anvil, please report it",
                            vname(g, v), (int)val->producer, (int)g->n_nodes);
        if (val->producer >= 0 && writer[v] != val->producer)
            return core_err(ANVIL_ERR_INTERNAL,
                            "value '%s' records producer %d but that node does not write it; "
                            "this is a bug in anvil, please report it",
                            vname(g, v), (int)val->producer);
        if ((val->flags & IR_VALUE_GRAPH_INPUT) && def[v] != DEF_INPUT)
            return core_err(ANVIL_ERR_INTERNAL,
                            "value '%s' is flagged as a graph input but is not in the input "
                            "list; this is a bug in anvil, please report it",
                            vname(g, v));
        bool initializer = (val->flags & IR_VALUE_CONST) && val->producer < 0;
        bool outer = (val->flags & IR_VALUE_OUTER) != 0;
        if (initializer && outer)
            return core_err(ANVIL_ERR_INTERNAL,
                            "value '%s' is flagged both as an initializer and as an outer-scope "
                            "reference; this is a bug in anvil, please report it",
                            vname(g, v));
        if (!initializer && !outer) continue;
        if (def[v] != DEF_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "value '%s' is defined twice: by %s and by %s; every value must have "
                            "exactly one definition",
                            vname(g, v), def_desc(g, def[v], db, sizeof db),
                            initializer ? "an initializer" : "an outer-scope reference");
        if (initializer) {
            CORE_TRY(check_declared_dtype(g, v, "initializer"));
            CORE_TRY(check_const_data(g, v));
            def[v] = DEF_CONST;
        } else {
            CORE_TRY(resolve_outer(g, v, up));
            def[v] = DEF_OUTER;
        }
    }
    return ANVIL_OK;
}

/* Records which node writes each value. Done before the ordered walk so that a value written by
 * two nodes is reported as such (naming both) rather than as an order or bookkeeping problem. */
static anvil_status find_writers(const ir_graph *g, int32_t *writer) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->n_outputs < 0 || (n->n_outputs > 0 && !n->outputs)) continue;
        for (int k = 0; k < n->n_outputs; k++) {
            ir_vid v = n->outputs[k];
            if (v == IR_NONE || v < 0 || v >= g->n_values) continue;
            if (writer[v] >= 0 && writer[v] != i) {
                char first[320];
                snprintf(first, sizeof first, "%s", ir_node_label(&g->nodes[writer[v]]));
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "value '%s' is defined twice: by %s and by %s (output %d); every "
                                "value must have exactly one definition, rename one of them",
                                vname(g, v), first, ir_node_label(n), k);
            }
            writer[v] = i;
        }
    }
    return ANVIL_OK;
}

static anvil_status verify_graph(const ir_graph *g, const verify_scope *up, int level) {
    char gb[160];
    if (level > IR_MAX_GRAPH_DEPTH)
        return core_err(ANVIL_ERR_LIMIT,
                        "subgraphs are nested more than %d deep; flatten the model's control "
                        "flow",
                        IR_MAX_GRAPH_DEPTH);
    if (g->n_values < 0 || g->n_nodes < 0 || g->n_inputs < 0 || g->n_outputs < 0 ||
        (g->n_values > 0 && !g->values) || (g->n_nodes > 0 && !g->nodes) ||
        (g->n_inputs > 0 && !g->inputs) || (g->n_outputs > 0 && !g->outputs))
        return core_err(ANVIL_ERR_INTERNAL, "%s has inconsistent counts; this is a bug in anvil",
                        graph_desc(g, gb, sizeof gb));
    for (int32_t c = 0; c < g->n_children; c++)
        if (!g->children[c] || g->children[c]->parent != g)
            return core_err(ANVIL_ERR_INTERNAL,
                            "%s lists a subgraph that does not name it as parent; this is a bug "
                            "in anvil",
                            graph_desc(g, gb, sizeof gb));
    if (g->n_outputs == 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has no outputs, so there is nothing to compute; declare at least one "
                        "graph output",
                        graph_desc(g, gb, sizeof gb));

    int32_t *def = malloc(((size_t)g->n_values + 1) * sizeof *def);
    int32_t *writer = malloc(((size_t)g->n_values + 1) * sizeof *writer);
    if (!def || !writer) {
        free(def);
        free(writer);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory verifying the graph");
    }
    for (int32_t v = 0; v < g->n_values; v++) def[v] = writer[v] = DEF_NONE;

    anvil_status s = find_writers(g, writer);
    if (s == ANVIL_OK) s = define_sources(g, def, writer, up);
    for (int32_t i = 0; s == ANVIL_OK && i < g->n_nodes; i++)
        s = verify_node(g, i, def, writer, up, level);
    for (int32_t k = 0; s == ANVIL_OK && k < g->n_outputs; k++) {
        ir_vid v = g->outputs[k];
        s = check_vid(g, v, "a graph output");
        if (s == ANVIL_OK && def[v] == DEF_NONE)
            s = core_err(ANVIL_ERR_INVALID_MODEL,
                         "graph output '%s' of %s is never defined: no node produces it and it "
                         "is not an input or initializer; fix the output list or the exporter",
                         vname(g, v), graph_desc(g, gb, sizeof gb));
    }
    free(def);
    free(writer);
    return s;
}

anvil_status ir_graph_verify(const ir_graph *g) {
    if (!g) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "ir_graph_verify: graph is NULL");
    return verify_graph(g, NULL, g->depth);
}

/* ---- topological sort ------------------------------------------------------------------------ */

typedef struct topo_edge {
    int32_t from, to;
} topo_edge;

typedef struct topo_ctx {
    ir_graph *g;
    int32_t *prod; /* per value: the node writing it, or -1 */
    core_vec edges;
} topo_ctx;

static anvil_status topo_add_edge(topo_ctx *t, int32_t from, int32_t to) {
    topo_edge *e = core_vec_push(&t->edges);
    if (!e) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory sorting the graph");
    e->from = from;
    e->to = to;
    return ANVIL_OK;
}

/* A node that owns a subgraph depends on the producers of every value its subgraph (at any depth)
 * takes from this graph. The name is resolved from the innermost scope outwards; a graph that
 * defines the name itself (not as an outer reference) shadows the ones further out. */
static anvil_status topo_outer_deps(topo_ctx *t, const ir_graph *h, int32_t node, int level) {
    if (level > IR_MAX_GRAPH_DEPTH)
        return core_err(ANVIL_ERR_LIMIT,
                        "subgraphs are nested more than %d deep; flatten the model's control "
                        "flow",
                        IR_MAX_GRAPH_DEPTH);
    for (ir_vid v = 0; v < h->n_values; v++) {
        if (!(h->values[v].flags & IR_VALUE_OUTER)) continue;
        const char *name = vname(h, v);
        for (const ir_graph *q = h->parent; q; q = q->parent) {
            ir_vid p = ir_graph_find_value(q, name);
            if (q == t->g) {
                if (p != IR_NONE && t->prod[p] >= 0) CORE_TRY(topo_add_edge(t, t->prod[p], node));
                break;
            }
            if (p != IR_NONE && !(q->values[p].flags & IR_VALUE_OUTER)) break;
        }
    }
    for (int32_t c = 0; c < h->n_children; c++)
        CORE_TRY(topo_outer_deps(t, h->children[c], node, level + 1));
    return ANVIL_OK;
}

static anvil_status topo_collect(topo_ctx *t) {
    ir_graph *g = t->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++) {
            ir_vid v = n->outputs[k];
            if (v == IR_NONE) continue;
            CORE_TRY(check_vid(g, v, ir_node_label(n)));
            if (t->prod[v] >= 0) {
                char first[320];
                snprintf(first, sizeof first, "%s", ir_node_label(&g->nodes[t->prod[v]]));
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "value '%s' is defined twice: by %s and by %s; every value must "
                                "have exactly one producer",
                                vname(g, v), first, ir_node_label(n));
            }
            t->prod[v] = i;
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            ir_vid v = n->inputs[k];
            if (v == IR_NONE) continue;
            CORE_TRY(check_vid(g, v, ir_node_label(n)));
            if (t->prod[v] >= 0) {
                CORE_TRY(topo_add_edge(t, t->prod[v], i));
                continue;
            }
            uint32_t f = g->values[v].flags;
            if ((f & (IR_VALUE_GRAPH_INPUT | IR_VALUE_CONST | IR_VALUE_OUTER)) != 0) continue;
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s reads '%s' (input %d), which is never defined: it is not a graph "
                            "input, an initializer or the output of any node; add it to the "
                            "model or fix the exporter",
                            ir_node_label(n), vname(g, v), k);
        }
        for (int k = 0; k < n->n_attrs; k++) {
            const ir_attr *a = &n->attrs[k];
            for (size_t j = 0; j < ir_attr_graph_count(a); j++) {
                const ir_graph *sub = ir_attr_graph_at(a, j);
                if (sub) CORE_TRY(topo_outer_deps(t, sub, i, g->depth + 1));
            }
        }
    }
    return ANVIL_OK;
}

/* Min-heap of node indices: among the nodes that are ready, the one earliest in the original
 * order goes first, which keeps an already sorted graph exactly as it is. */
static void heap_push(int32_t *h, int32_t *len, int32_t x) {
    int32_t i = (*len)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static int32_t heap_pop(int32_t *h, int32_t *len) {
    int32_t top = h[0], x = h[--(*len)], i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *len) break;
        if (c + 1 < *len && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    if (*len > 0) h[i] = x;
    return top;
}

/* Every node left after Kahn's algorithm still has an unfinished predecessor. Following such
 * predecessors n times from any of them must end on a cycle; from there the cycle is traced once
 * and reported in data-flow order. */
static anvil_status topo_report_cycle(const ir_graph *g, const int32_t *indeg,
                                      const int32_t *pred_start, const int32_t *preds) {
    int32_t n = g->n_nodes, cur = -1;
    for (int32_t i = 0; i < n && cur < 0; i++)
        if (indeg[i] > 0) cur = i;
    if (cur < 0) return core_err(ANVIL_ERR_INTERNAL, "toposort: lost track of the cycle");
    for (int32_t step = 0; step < n; step++) {
        int32_t next = -1;
        for (int32_t e = pred_start[cur]; e < pred_start[cur + 1] && next < 0; e++)
            if (indeg[preds[e]] > 0) next = preds[e];
        if (next < 0) break;
        cur = next;
    }
    int32_t path[9];
    int len = 0;
    int32_t p = cur;
    bool closed = false;
    do {
        path[len++] = p;
        int32_t next = -1;
        for (int32_t e = pred_start[p]; e < pred_start[p + 1] && next < 0; e++)
            if (indeg[preds[e]] > 0) next = preds[e];
        p = next;
        closed = p == cur;
    } while (p >= 0 && !closed && len < 9);

    /* path[k+1] feeds path[k]; print it backwards so the message follows the data. */
    char msg[2048];
    size_t used = 0;
    for (int k = len - 1; k >= 0 && used < sizeof msg; k--)
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s -> ",
                                 ir_node_label(&g->nodes[path[k]]));
    if (used < sizeof msg)
        snprintf(msg + used, sizeof msg - used, "%s",
                 closed ? ir_node_label(&g->nodes[path[len - 1]]) : "...");
    char gb[160];
    return core_err(ANVIL_ERR_INVALID_MODEL,
                    "%s has a cycle, so its nodes cannot be ordered: %s; remove the cycle "
                    "(repetition must be expressed with the Loop operator)",
                    graph_desc(g, gb, sizeof gb), msg);
}

static anvil_status topo_sort_graph(ir_graph *g, int level);

static anvil_status topo_order(topo_ctx *t, int32_t *order) {
    ir_graph *g = t->g;
    int32_t n = g->n_nodes;
    const topo_edge *edges = t->edges.data;
    size_t ne = t->edges.len;
    if (ne > INT32_MAX - 1)
        return core_err(ANVIL_ERR_LIMIT, "graph has more than %d edges", INT32_MAX - 1);
    size_t nn = (size_t)n + 1;
    int32_t *indeg = calloc(nn, sizeof *indeg);
    int32_t *succ_start = calloc(nn + 1, sizeof *succ_start);
    int32_t *pred_start = calloc(nn + 1, sizeof *pred_start);
    int32_t *succ = malloc((ne + 1) * sizeof *succ);
    int32_t *preds = malloc((ne + 1) * sizeof *preds);
    int32_t *fill = calloc(nn, sizeof *fill);
    int32_t *heap = malloc(nn * sizeof *heap);
    anvil_status s = ANVIL_OK;
    if (!indeg || !succ_start || !pred_start || !succ || !preds || !fill || !heap) {
        s = core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory sorting the graph");
        goto done;
    }
    for (size_t e = 0; e < ne; e++) {
        succ_start[edges[e].from + 1]++;
        pred_start[edges[e].to + 1]++;
        indeg[edges[e].to]++;
    }
    for (int32_t i = 0; i < n; i++) {
        succ_start[i + 1] += succ_start[i];
        pred_start[i + 1] += pred_start[i];
    }
    for (size_t e = 0; e < ne; e++)
        succ[succ_start[edges[e].from] + fill[edges[e].from]++] = edges[e].to;
    memset(fill, 0, nn * sizeof *fill);
    for (size_t e = 0; e < ne; e++)
        preds[pred_start[edges[e].to] + fill[edges[e].to]++] = edges[e].from;

    int32_t hlen = 0, done_count = 0;
    for (int32_t i = 0; i < n; i++)
        if (indeg[i] == 0) heap_push(heap, &hlen, i);
    while (hlen > 0) {
        int32_t i = heap_pop(heap, &hlen);
        order[done_count++] = i;
        for (int32_t e = succ_start[i]; e < succ_start[i + 1]; e++)
            if (--indeg[succ[e]] == 0) heap_push(heap, &hlen, succ[e]);
    }
    if (done_count < n) s = topo_report_cycle(g, indeg, pred_start, preds);
done:
    free(indeg);
    free(succ_start);
    free(pred_start);
    free(succ);
    free(preds);
    free(fill);
    free(heap);
    return s;
}

static anvil_status topo_sort_graph(ir_graph *g, int level) {
    if (level > IR_MAX_GRAPH_DEPTH)
        return core_err(ANVIL_ERR_LIMIT,
                        "subgraphs are nested more than %d deep; flatten the model's control "
                        "flow",
                        IR_MAX_GRAPH_DEPTH);
    int32_t n = g->n_nodes;
    topo_ctx t = {.g = g};
    core_vec_init(&t.edges, sizeof(topo_edge));
    t.prod = malloc(((size_t)g->n_values + 1) * sizeof *t.prod);
    int32_t *order = malloc(((size_t)n + 1) * sizeof *order);
    ir_node *sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    anvil_status s = ANVIL_OK;
    if (!t.prod || !order || !sorted) {
        s = core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory sorting the graph");
        goto done;
    }
    for (int32_t v = 0; v < g->n_values; v++) t.prod[v] = -1;
    s = topo_collect(&t);
    if (s == ANVIL_OK) s = topo_order(&t, order);
    if (s != ANVIL_OK) goto done;
    /* Node structs are moved whole; their arrays live in the arena, so only the producer
     * indices stored in values need rewriting. */
    for (int32_t k = 0; k < n; k++) sorted[k] = g->nodes[order[k]];
    if (n > 0) memcpy(g->nodes, sorted, (size_t)n * sizeof *sorted);
    for (int32_t k = 0; k < n; k++) {
        const ir_node *nd = &g->nodes[k];
        for (int j = 0; j < nd->n_outputs; j++)
            if (nd->outputs[j] != IR_NONE) g->values[nd->outputs[j]].producer = k;
    }
    for (int32_t c = 0; c < g->n_children && s == ANVIL_OK; c++)
        s = topo_sort_graph(g->children[c], level + 1);
done:
    core_vec_free(&t.edges);
    free(t.prod);
    free(order);
    free(sorted);
    return s;
}

anvil_status ir_graph_toposort(ir_graph *g) {
    if (!g) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "ir_graph_toposort: graph is NULL");
    return topo_sort_graph(g, g->depth);
}
