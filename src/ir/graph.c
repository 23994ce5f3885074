/* Graph construction and lookup. Values are found by name through an open-addressing hash so
 * that importing a graph with many thousands of values stays linear. Subgraphs are recorded in
 * their parent's `children` so that freeing the main graph frees every nested one. */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

static const char *const op_names[IR_OP_COUNT] = {
#define OP(id, name, impl, file) [IR_OP_##id] = name,
#include "ir/ops.def"
#undef OP
};

const char *ir_op_name(ir_op op) {
    return (unsigned)op < IR_OP_COUNT ? op_names[op] : "?";
}

bool ir_op_internal(ir_op op) {
    return !strncmp(ir_op_name(op), "anvil.", 6);
}

bool ir_op_lookup(const char *onnx_name, ir_op *out) {
    /* rows are sorted by name: binary search */
    int lo = 0, hi = IR_OP_COUNT - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(onnx_name, op_names[mid]);
        if (c == 0) {
            *out = (ir_op)mid;
            return true;
        }
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return false;
}

static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

anvil_status ir_graph_create(ir_graph *parent, ir_graph **out) {
    *out = NULL;
    ir_graph *g = core_calloc(1, sizeof *g);
    if (!g) return ANVIL_ERR_OUT_OF_MEMORY;
    g->arena = core_arena_create();
    if (!g->arena) {
        free(g);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    g->name = "";
    g->parent = parent;
    if (parent) {
        g->depth = parent->depth + 1;
        g->opset = parent->opset;
        if (g->depth > IR_MAX_GRAPH_DEPTH) {
            ir_graph_free(g);
            return core_err(ANVIL_ERR_LIMIT,
                            "subgraphs are nested more than %d deep; flatten the model's "
                            "control flow",
                            IR_MAX_GRAPH_DEPTH);
        }
        if (parent->n_children == parent->cap_children) {
            int32_t cap = parent->cap_children ? parent->cap_children * 2 : 4;
            ir_graph **c = realloc(parent->children, (size_t)cap * sizeof *c);
            if (!c) {
                ir_graph_free(g);
                return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory adding a subgraph");
            }
            parent->children = c;
            parent->cap_children = cap;
        }
        parent->children[parent->n_children++] = g;
    }
    *out = g;
    return ANVIL_OK;
}

void ir_graph_free(ir_graph *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_children; i++) ir_graph_free(g->children[i]);
    free(g->children);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->syms);
    free(g->name_index);
    core_arena_free(g->arena);
    free(g);
}

/* Grows a malloc'd array of `elem`-sized items to hold one more; updates *cap. */
static anvil_status grow(void **arr, int32_t n, int32_t *cap, size_t elem) {
    if (n < *cap) return ANVIL_OK;
    if (*cap >= INT32_MAX / 2)
        return core_err(ANVIL_ERR_LIMIT, "graph has more than %d entries", INT32_MAX / 2);
    int32_t nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory growing the graph");
    *arr = p;
    *cap = nc;
    return ANVIL_OK;
}

static anvil_status index_rebuild(ir_graph *g, uint32_t cap) {
    int32_t *idx = malloc((size_t)cap * sizeof *idx);
    if (!idx) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory indexing value names");
    for (uint32_t i = 0; i < cap; i++) idx[i] = -1;
    for (int32_t v = 0; v < g->n_values; v++) {
        uint32_t h = hash_str(g->values[v].name) & (cap - 1);
        while (idx[h] >= 0) h = (h + 1) & (cap - 1);
        idx[h] = v;
    }
    free(g->name_index);
    g->name_index = idx;
    g->name_index_cap = cap;
    return ANVIL_OK;
}

ir_vid ir_graph_find_value(const ir_graph *g, const char *name) {
    if (!g->name_index_cap) return IR_NONE;
    uint32_t mask = g->name_index_cap - 1;
    for (uint32_t h = hash_str(name) & mask;; h = (h + 1) & mask) {
        int32_t v = g->name_index[h];
        if (v < 0) return IR_NONE;
        if (!strcmp(g->values[v].name, name)) return v;
    }
}

anvil_status ir_graph_add_value(ir_graph *g, const char *name, ir_vid *out) {
    if (ir_graph_find_value(g, name) != IR_NONE)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "value '%s' is defined more than once in graph '%s'; every value must "
                        "have exactly one producer",
                        name, g->name);
    CORE_TRY(grow((void **)&g->values, g->n_values, &g->cap_values, sizeof(ir_value)));
    char *nm = core_arena_strdup(g->arena, name);
    if (!nm) return ANVIL_ERR_OUT_OF_MEMORY;
    ir_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = nm;
    v->producer = -1;
    ir_shape_unknown(&v->shape);
    *out = g->n_values++;
    /* keep the load factor under 1/2 */
    if ((uint32_t)g->n_values * 2 > g->name_index_cap) {
        uint32_t cap = g->name_index_cap ? g->name_index_cap * 2 : 64;
        while ((uint32_t)g->n_values * 2 > cap) cap *= 2;
        return index_rebuild(g, cap);
    }
    uint32_t mask = g->name_index_cap - 1;
    uint32_t h = hash_str(nm) & mask;
    while (g->name_index[h] >= 0) h = (h + 1) & mask;
    g->name_index[h] = *out;
    return ANVIL_OK;
}

anvil_status ir_graph_add_node(ir_graph *g, ir_op op, const char *name, int n_inputs, int n_outputs,
                               int n_attrs, int32_t *out_index) {
    if (n_inputs < 0 || n_outputs < 0 || n_attrs < 0)
        return core_err(ANVIL_ERR_INTERNAL, "negative node arity");
    CORE_TRY(grow((void **)&g->nodes, g->n_nodes, &g->cap_nodes, sizeof(ir_node)));
    ir_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->opset = g->opset;
    n->name = core_arena_strdup(g->arena, name ? name : "");
    n->inputs = core_arena_array(g->arena, (size_t)n_inputs + 1, sizeof(ir_vid));
    n->outputs = core_arena_array(g->arena, (size_t)n_outputs + 1, sizeof(ir_vid));
    n->attrs = core_arena_array(g->arena, (size_t)n_attrs + 1, sizeof(ir_attr));
    if (!n->name || !n->inputs || !n->outputs || !n->attrs) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n_inputs; i++) n->inputs[i] = IR_NONE;
    for (int i = 0; i < n_outputs; i++) n->outputs[i] = IR_NONE;
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->n_attrs = n_attrs;
    *out_index = g->n_nodes++;
    return ANVIL_OK;
}

anvil_status ir_graph_copy_node(ir_graph *dst, const ir_node *sn, const ir_vid *in_map,
                                const ir_vid *out_map, int32_t *index) {
    int32_t idx;
    CORE_TRY(ir_graph_add_node(dst, sn->op, sn->name, sn->n_inputs, sn->n_outputs, 0, &idx));
    ir_node *n = &dst->nodes[idx];
    n->opset = sn->opset;
    for (int i = 0; i < sn->n_inputs; i++)
        n->inputs[i] = in_map && sn->inputs[i] != IR_NONE ? in_map[sn->inputs[i]] : sn->inputs[i];
    for (int i = 0; i < sn->n_outputs; i++)
        n->outputs[i] =
            out_map && sn->outputs[i] != IR_NONE ? out_map[sn->outputs[i]] : sn->outputs[i];
    /* shared, read-only: attributes (and the subgraphs they hold) and parsed params */
    n->attrs = sn->attrs;
    n->n_attrs = sn->n_attrs;
    n->params = sn->params;
    n->fusion = sn->fusion;
    if (index) *index = idx;
    return ANVIL_OK;
}

anvil_status ir_graph_clone(const ir_graph *src, ir_graph **out) {
    *out = NULL;
    ir_graph *g;
    CORE_TRY(ir_graph_create(NULL, &g));
    anvil_status st = ANVIL_OK;
    g->name = core_arena_strdup(g->arena, src->name);
    g->opset = src->opset;
    g->depth = src->depth;
    if (!g->name) goto oom;
    for (int32_t v = 0; v < src->n_values; v++) {
        ir_vid nv;
        if ((st = ir_graph_add_value(g, src->values[v].name, &nv)) != ANVIL_OK) goto fail;
        const char *name = g->values[nv].name;
        g->values[nv] = src->values[v];
        g->values[nv].name = name;
    }
    for (int32_t k = 0; k < src->n_nodes; k++)
        if ((st = ir_graph_copy_node(g, &src->nodes[k], NULL, NULL, NULL)) != ANVIL_OK) goto fail;
    for (int32_t i = 0; i < src->n_inputs; i++)
        if ((st = ir_graph_add_input(g, src->inputs[i])) != ANVIL_OK) goto fail;
    for (int32_t i = 0; i < src->n_outputs; i++)
        if ((st = ir_graph_add_output(g, src->outputs[i])) != ANVIL_OK) goto fail;
    for (int32_t i = 0; i < src->n_syms; i++) {
        int32_t sym;
        if ((st = ir_graph_add_sym(g, src->syms[i], &sym)) != ANVIL_OK) goto fail;
    }
    *out = g;
    return ANVIL_OK;
oom:
    st = ANVIL_ERR_OUT_OF_MEMORY;
fail:
    ir_graph_free(g);
    return st;
}

const char *ir_act_name(ir_act act) {
    switch (act) {
    case IR_ACT_NONE:
        return "none";
    case IR_ACT_RELU:
        return "Relu";
    case IR_ACT_CLIP:
        return "Clip";
    case IR_ACT_LEAKY_RELU:
        return "LeakyRelu";
    case IR_ACT_SIGMOID:
        return "Sigmoid";
    case IR_ACT_TANH:
        return "Tanh";
    case IR_ACT_GELU_ERF:
        return "Gelu";
    case IR_ACT_GELU_TANH:
        return "Gelu(tanh)";
    case IR_ACT_HARD_SIGMOID:
        return "HardSigmoid";
    case IR_ACT_HARD_SWISH:
        return "HardSwish";
    case IR_ACT_SILU:
        return "Silu";
    }
    return "?";
}

bool ir_act_from_name(const char *name, ir_act *out) {
    for (int a = IR_ACT_NONE; a <= IR_ACT_SILU; a++) {
        if (!strcmp(name, ir_act_name((ir_act)a))) {
            *out = (ir_act)a;
            return true;
        }
    }
    return false;
}

float ir_act_eval(const ir_fusion *f, float x) {
    switch (f->act) {
    case IR_ACT_NONE:
        return x;
    case IR_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case IR_ACT_CLIP:
        return fminf(fmaxf(x, f->lo), f->hi);
    case IR_ACT_LEAKY_RELU:
        return x < 0.0f ? f->alpha * x : x;
    case IR_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case IR_ACT_TANH:
        return tanhf(x);
    case IR_ACT_GELU_ERF:
        return 0.5f * x * (1.0f + erff(x / sqrtf(2.0f)));
    case IR_ACT_GELU_TANH:
        return 0.5f * x *
               (1.0f + tanhf(sqrtf(2.0f / 3.14159265358979f) * (x + 0.044715f * x * x * x)));
    case IR_ACT_HARD_SIGMOID:
        return fminf(fmaxf(f->alpha * x + f->beta, 0.0f), 1.0f);
    case IR_ACT_HARD_SWISH:
        return x * fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case IR_ACT_SILU:
        return x / (1.0f + expf(-x));
    }
    return x;
}

anvil_status ir_graph_add_input(ir_graph *g, ir_vid v) {
    CORE_TRY(grow((void **)&g->inputs, g->n_inputs, &g->cap_inputs, sizeof(ir_vid)));
    g->inputs[g->n_inputs++] = v;
    g->values[v].flags |= IR_VALUE_GRAPH_INPUT;
    return ANVIL_OK;
}

anvil_status ir_graph_add_output(ir_graph *g, ir_vid v) {
    CORE_TRY(grow((void **)&g->outputs, g->n_outputs, &g->cap_outputs, sizeof(ir_vid)));
    g->outputs[g->n_outputs++] = v;
    g->values[v].flags |= IR_VALUE_GRAPH_OUTPUT;
    return ANVIL_OK;
}

anvil_status ir_graph_add_sym(ir_graph *g, const char *name, int32_t *out) {
    for (int32_t i = 0; i < g->n_syms; i++) {
        if (!strcmp(g->syms[i], name)) {
            *out = i;
            return ANVIL_OK;
        }
    }
    CORE_TRY(grow((void **)&g->syms, g->n_syms, &g->cap_syms, sizeof(char *)));
    const char *s = core_arena_strdup(g->arena, name);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    g->syms[g->n_syms] = s;
    *out = g->n_syms++;
    return ANVIL_OK;
}

/* ---- attributes ---------------------------------------------------------------------------- */

const char *ir_attr_type_name(ir_attr_type t) {
    static const char *names[] = {"UNDEFINED", "FLOAT", "INT",     "STRING",  "TENSOR", "GRAPH",
                                  "FLOATS",    "INTS",  "STRINGS", "TENSORS", "GRAPHS"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : "UNKNOWN";
}

const ir_attr *ir_node_attr(const ir_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].name && !strcmp(n->attrs[i].name, name)) return &n->attrs[i];
    return NULL;
}

static anvil_status attr_typed(const ir_node *n, const char *name, ir_attr_type want,
                               const ir_attr **out) {
    const ir_attr *a = ir_node_attr(n, name);
    *out = a;
    if (a && a->type != want)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' must be of type %s but is %s; fix the exporter or "
                        "the model",
                        ir_node_label(n), name, ir_attr_type_name(want),
                        ir_attr_type_name(a->type));
    return ANVIL_OK;
}

anvil_status ir_attr_int(const ir_node *n, const char *name, int64_t dflt, int64_t *out) {
    const ir_attr *a;
    CORE_TRY(attr_typed(n, name, IR_ATTR_INT, &a));
    *out = a ? a->i : dflt;
    return ANVIL_OK;
}

anvil_status ir_attr_flag(const ir_node *n, const char *name, bool dflt, bool *out) {
    int64_t v;
    CORE_TRY(ir_attr_int(n, name, dflt ? 1 : 0, &v));
    if (v != 0 && v != 1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute '%s' is %lld; expected 0 or 1",
                        ir_node_label(n), name, (long long)v);
    *out = v == 1;
    return ANVIL_OK;
}

anvil_status ir_attr_float(const ir_node *n, const char *name, float dflt, float *out) {
    const ir_attr *a;
    CORE_TRY(attr_typed(n, name, IR_ATTR_FLOAT, &a));
    *out = a ? a->f : dflt;
    return ANVIL_OK;
}

anvil_status ir_attr_string(const ir_node *n, const char *name, const char *dflt,
                            const char **out) {
    const ir_attr *a;
    CORE_TRY(attr_typed(n, name, IR_ATTR_STRING, &a));
    *out = a ? a->s : dflt;
    return ANVIL_OK;
}

anvil_status ir_attr_ints(const ir_node *n, const char *name, const int64_t **out, size_t *count) {
    const ir_attr *a;
    CORE_TRY(attr_typed(n, name, IR_ATTR_INTS, &a));
    *out = a ? a->ints : NULL;
    *count = a ? a->n : 0;
    return ANVIL_OK;
}

anvil_status ir_attr_floats(const ir_node *n, const char *name, const float **out, size_t *count) {
    const ir_attr *a;
    CORE_TRY(attr_typed(n, name, IR_ATTR_FLOATS, &a));
    *out = a ? a->floats : NULL;
    *count = a ? a->n : 0;
    return ANVIL_OK;
}

anvil_status ir_attr_tensor(const ir_node *n, const char *name, const ir_tensor **out) {
    const ir_attr *a;
    CORE_TRY(attr_typed(n, name, IR_ATTR_TENSOR, &a));
    *out = a ? a->t : NULL;
    return ANVIL_OK;
}

const char *ir_node_label(const ir_node *n) {
    static _Thread_local char buf[320];
    snprintf(buf, sizeof buf, "node '%.200s' (%s)", n->name, ir_op_name(n->op));
    return buf;
}

/* ---- shapes -------------------------------------------------------------------------------- */

void ir_shape_unknown(ir_shape *s) {
    memset(s, 0, sizeof *s);
    s->rank = -1;
}

void ir_shape_set(ir_shape *s, int rank, const int64_t *dims) {
    memset(s, 0, sizeof *s);
    s->rank = rank;
    for (int i = 0; i < rank; i++) {
        s->d[i] = dims[i];
        s->sym[i] = -1;
    }
}

bool ir_shape_is_static(const ir_shape *s) {
    if (s->rank < 0) return false;
    for (int i = 0; i < s->rank; i++)
        if (s->d[i] < 0) return false;
    return true;
}

bool ir_shape_equal(const ir_shape *a, const ir_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->d[i] != b->d[i]) return false;
        if (a->d[i] < 0 && (a->sym[i] < 0 || a->sym[i] != b->sym[i])) return false;
    }
    return true;
}

bool ir_shape_numel(const ir_shape *s, size_t *out) {
    if (!ir_shape_is_static(s)) return false;
    return core_numel(s->d, s->rank, out);
}

const char *ir_shape_str(const ir_graph *g, const ir_shape *s, char *buf, size_t cap) {
    if (!cap) return buf;
    if (s->rank < 0) {
        snprintf(buf, cap, "[?...]");
        return buf;
    }
    size_t len = 0;
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < s->rank && len < cap; i++) {
        const char *sep = i ? "," : "";
        if (s->d[i] >= 0)
            len += (size_t)snprintf(buf + len, cap - len, "%s%lld", sep, (long long)s->d[i]);
        else if (g && s->sym[i] >= 0 && s->sym[i] < g->n_syms)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", sep, g->syms[s->sym[i]]);
        else
            len += (size_t)snprintf(buf + len, cap - len, "%s?", sep);
    }
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}
