/* The bookkeeping every pass shares: use counts, constants a pass computes, and node edits.
 * Passes mark nodes dead instead of deleting them, so node indices stay valid while a pass walks
 * the graph; pass_compact drops them at the end, together with the constants nothing reads any
 * more, so that a session never materializes them. */
#include "rewrite.h"

#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PINNED (INT32_MAX / 2)

static void pin_bodies_of(const pass_ctx *c, const ir_graph *g);

static void pin_outer_reads(const pass_ctx *c, const ir_graph *sub) {
    for (int32_t v = 0; v < sub->n_values; v++) {
        if (!(sub->values[v].flags & IR_VALUE_OUTER)) continue;
        ir_vid o = ir_graph_find_value(c->g, sub->values[v].name);
        if (o != IR_NONE) c->uses[o] = PINNED;
    }
    pin_bodies_of(c, sub);
}

/* Pins what the bodies of g's nodes (and theirs, at any depth) read by name. Found through the
 * nodes' graph attributes rather than g's children list: a subgraph compiled as a session of its
 * own is a copy whose nested bodies are reached only that way. */
static void pin_bodies_of(const pass_ctx *c, const ir_graph *g) {
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *n = &g->nodes[k];
        for (int a = 0; a < n->n_attrs; a++)
            for (size_t j = 0; j < ir_attr_graph_count(&n->attrs[a]); j++) {
                const ir_graph *body = ir_attr_graph_at(&n->attrs[a], j);
                if (body) pin_outer_reads(c, body);
            }
    }
}

void pass_index(pass_ctx *c) {
    const ir_graph *g = c->g;
    for (int32_t v = 0; v < g->n_values; v++) {
        c->uses[v] = 0;
        c->reader[v] = -1;
    }
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (c->dead[k]) continue;
        const ir_node *n = &g->nodes[k];
        for (int i = 0; i < n->n_inputs; i++) {
            ir_vid v = n->inputs[i];
            if (v == IR_NONE) continue;
            c->uses[v]++;
            c->reader[v] = k;
        }
    }
    for (int32_t i = 0; i < g->n_outputs; i++) c->uses[g->outputs[i]] = PINNED;
    for (int32_t i = 0; i < c->src->n_children; i++) pin_outer_reads(c, c->src->children[i]);
    pin_bodies_of(c, g);
}

uint64_t pass_hash(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

bool pass_pinned(const pass_ctx *c, ir_vid v) {
    return v != IR_NONE && c->uses[v] == PINNED;
}

const ir_node *pass_producer(const pass_ctx *c, ir_vid v) {
    const int32_t p = v == IR_NONE ? -1 : c->g->values[v].producer;
    return p >= 0 && !c->dead[p] ? &c->g->nodes[p] : NULL;
}

int32_t pass_sole_reader(const pass_ctx *c, ir_vid v) {
    if (v == IR_NONE || c->uses[v] != 1) return -1;
    int32_t k = c->reader[v];
    /* a node reading v through two of its inputs counts twice, so uses == 1 means one read */
    return k >= 0 && !c->dead[k] ? k : -1;
}

const void *pass_graph_const_f32(const ir_graph *g, ir_vid v, size_t *numel) {
    if (v == IR_NONE) return NULL;
    const ir_value *val = &g->values[v];
    const void *data = val->data;
    size_t bytes = val->data_bytes;
    ir_tensor t;
    /* a Constant node's output, or an Identity of a constant: constants in the copy
     * (const_nodes), not in the source, which recipes read */
    for (int hops = 0; !(val->flags & IR_VALUE_CONST) && hops < 16; hops++) {
        const ir_node *p = val->producer >= 0 ? &g->nodes[val->producer] : NULL;
        if (p && p->op == IR_OP_IDENTITY && p->n_inputs == 1 && p->inputs[0] != IR_NONE) {
            val = &g->values[p->inputs[0]];
            data = val->data;
            bytes = val->data_bytes;
            continue;
        }
        if (!p || !op_constant_value(p, &t)) return NULL;
        data = t.data;
        bytes = t.bytes;
        break;
    }
    size_t n;
    if (val->dtype != ANVIL_DTYPE_FLOAT32 || !data || !ir_shape_numel(&val->shape, &n) ||
        n * sizeof(float) != bytes)
        return NULL;
    *numel = n;
    return data;
}

const void *pass_const_f32(const pass_ctx *c, ir_vid v, size_t *numel) {
    return pass_graph_const_f32(c->g, v, numel);
}

float pass_const_f32_at(const void *data, size_t i) {
    float x;
    memcpy(&x, (const char *)data + i * sizeof x, sizeof x);
    return x;
}

bool pass_const_int64s(const pass_ctx *c, ir_vid v, int64_t *out, size_t n) {
    const ir_value *val = v == IR_NONE ? NULL : &c->g->values[v];
    if (!val || !(val->flags & IR_VALUE_CONST) || !val->data || val->dtype != ANVIL_DTYPE_INT64 ||
        val->data_bytes != n * sizeof *out)
        return false;
    memcpy(out, val->data, n * sizeof *out);
    return true;
}

bool pass_const_scalar(const pass_ctx *c, ir_vid v, float *out) {
    size_t n;
    const void *d = pass_const_f32(c, v, &n);
    if (!d || n != 1) return false;
    *out = pass_const_f32_at(d, 0);
    return true;
}

static anvil_status grow_index(pass_ctx *c) {
    size_t n = (size_t)c->g->n_values + 1;
    int32_t *u = realloc(c->uses, n * sizeof *u);
    if (!u) return ANVIL_ERR_OUT_OF_MEMORY;
    c->uses = u;
    int32_t *r = realloc(c->reader, n * sizeof *r);
    if (!r) return ANVIL_ERR_OUT_OF_MEMORY;
    c->reader = r;
    c->uses[n - 2] = 0;
    c->reader[n - 2] = -1;
    return ANVIL_OK;
}

anvil_status pass_add_value(pass_ctx *c, const char *base, anvil_dtype dtype, const ir_shape *shape,
                            ir_vid *out) {
    char name[512];
    snprintf(name, sizeof name, "%s", base);
    for (int i = 1; ir_graph_find_value(c->g, name) != IR_NONE; i++)
        snprintf(name, sizeof name, "%s_%d", base, i);
    CORE_TRY(ir_graph_add_value(c->g, name, out));
    CORE_TRY(grow_index(c));
    c->g->values[*out].dtype = dtype;
    c->g->values[*out].shape = *shape;
    return ANVIL_OK;
}

anvil_status pass_add_int64_const(pass_ctx *c, const char *base, const int64_t *v, int n,
                                  ir_vid *out) {
    ir_shape s;
    const int64_t dims[1] = {n};
    ir_shape_set(&s, 1, dims);
    CORE_TRY(pass_add_value(c, base, ANVIL_DTYPE_INT64, &s, out));
    int64_t *data = core_arena_array(c->g->arena, (size_t)n, sizeof *data);
    if (!data) return ANVIL_ERR_OUT_OF_MEMORY;
    memcpy(data, v, (size_t)n * sizeof *data);
    ir_value *val = &c->g->values[*out];
    val->flags |= IR_VALUE_CONST;
    val->data = data;
    val->data_bytes = (size_t)n * sizeof *data;
    return ANVIL_OK;
}

anvil_status pass_add_node(pass_ctx *c, ir_op op, const char *name, int n_inputs, int n_outputs,
                           int n_attrs, int32_t *out) {
    bool *dead = realloc(c->dead, ((size_t)c->g->n_nodes + 2) * sizeof *dead);
    if (!dead) return ANVIL_ERR_OUT_OF_MEMORY;
    c->dead = dead;
    CORE_TRY(ir_graph_add_node(c->g, op, name, n_inputs, n_outputs, n_attrs, out));
    c->dead[*out] = false;
    return ANVIL_OK;
}

anvil_status pass_add_const(pass_ctx *c, const char *base, int rank, const int64_t *dims,
                            const pass_const *recipe, ir_vid *out) {
    pass_graph *pg = c->pg;
    if (pg->n_consts == pg->cap_consts) {
        size_t cap = pg->cap_consts ? pg->cap_consts * 2 : 16;
        pass_const *o = realloc(pg->consts, cap * sizeof *o);
        if (!o) return ANVIL_ERR_OUT_OF_MEMORY;
        pg->consts = o;
        pg->cap_consts = cap;
    }
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    pass_const pc = *recipe;
    pc.numel = n;
    pc.data = malloc((n ? n : 1) * sizeof(float));
    if (!pc.data) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = pc.fill(c->src, &pc, pc.data);
    if (st != ANVIL_OK) {
        free(pc.data);
        return st;
    }
    char name[512];
    snprintf(name, sizeof name, "%s", base);
    for (int i = 1; ir_graph_find_value(c->g, name) != IR_NONE; i++)
        snprintf(name, sizeof name, "%s_%d", base, i);
    if ((st = ir_graph_add_value(c->g, name, &pc.v)) != ANVIL_OK ||
        (st = grow_index(c)) != ANVIL_OK) {
        free(pc.data);
        return st;
    }
    pg->consts[pg->n_consts++] = pc;
    ir_value *val = &c->g->values[pc.v];
    val->dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&val->shape, rank, dims);
    val->flags = IR_VALUE_CONST;
    val->data = pc.data;
    val->data_bytes = n * sizeof(float);
    *out = pc.v;
    return ANVIL_OK;
}

static pass_const *find_const(const pass_graph *pg, ir_vid v) {
    for (size_t i = 0; i < pg->n_consts; i++)
        if (pg->consts[i].v == v) return &pg->consts[i];
    return NULL;
}

bool pass_graph_owns(const pass_graph *pg, ir_vid v) {
    return pg && find_const(pg, v) != NULL;
}

void pass_graph_drop(pass_graph *pg, ir_vid v) {
    pass_const *pc = find_const(pg, v);
    if (!pc) return;
    free(pc->data);
    pc->data = NULL;
    pg->g->values[v].data = NULL;
}

anvil_status pass_graph_refill(pass_graph *pg, ir_vid v) {
    pass_const *pc = find_const(pg, v);
    if (!pc || pc->data) return ANVIL_OK;
    float *d = malloc((pc->numel ? pc->numel : 1) * sizeof *d);
    if (!d) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = pc->fill(pg->src, pc, d);
    if (st != ANVIL_OK) {
        free(d);
        return st;
    }
    pc->data = d;
    pg->g->values[v].data = d;
    return ANVIL_OK;
}

anvil_status pass_node_set_input(pass_ctx *c, int32_t k, int i, ir_vid v) {
    ir_node *n = &c->g->nodes[k];
    if (i >= n->n_inputs) {
        ir_vid *in = core_arena_array(c->g->arena, (size_t)i + 2, sizeof *in);
        if (!in) return ANVIL_ERR_OUT_OF_MEMORY;
        memcpy(in, n->inputs, (size_t)n->n_inputs * sizeof *in);
        for (int j = n->n_inputs; j <= i; j++) in[j] = IR_NONE;
        n->inputs = in;
        n->n_inputs = i + 1;
    }
    ir_vid old = n->inputs[i];
    if (old != IR_NONE && c->uses[old] != PINNED) c->uses[old]--;
    n->inputs[i] = v;
    if (v != IR_NONE && c->uses[v] != PINNED) {
        c->uses[v]++;
        c->reader[v] = k;
    }
    return ANVIL_OK;
}

anvil_status pass_node_add_input(pass_ctx *c, int32_t k, ir_vid v, int *index) {
    const ir_node *n = &c->g->nodes[k];
    int i = n->n_inputs > op_get(n->op)->max_inputs ? n->n_inputs : op_get(n->op)->max_inputs;
    *index = i;
    return pass_node_set_input(c, k, i, v);
}

void pass_node_kill(pass_ctx *c, int32_t k) {
    const ir_node *n = &c->g->nodes[k];
    c->dead[k] = true;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] != IR_NONE && c->uses[n->inputs[i]] != PINNED) c->uses[n->inputs[i]]--;
}

void pass_node_absorb(pass_ctx *c, int32_t k, int32_t dead_k) {
    ir_graph *g = c->g;
    ir_vid old = g->nodes[k].outputs[0], y = g->nodes[dead_k].outputs[0];
    g->nodes[k].outputs[0] = y;
    g->values[y].producer = k;
    g->values[old].producer = -1;
    pass_node_kill(c, dead_k);
}

void pass_compact(pass_ctx *c, const pass_options *opts) {
    ir_graph *g = c->g;
    int32_t w = 0;
    for (int32_t k = 0; k < g->n_nodes; k++)
        if (!c->dead[k]) g->nodes[w++] = g->nodes[k];
    g->n_nodes = w;
    for (int32_t k = 0; k < g->n_nodes; k++) c->dead[k] = false;
    for (int32_t v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int32_t k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_outputs; i++)
            if (g->nodes[k].outputs[i] != IR_NONE) g->values[g->nodes[k].outputs[i]].producer = k;
    pass_index(c);
    for (int32_t v = 0; v < g->n_values; v++) {
        ir_value *val = &g->values[v];
        if (!(val->flags & IR_VALUE_CONST) || c->uses[v] != 0) continue;
        bool ours = pass_graph_owns(c->pg, v);
        if (ours) pass_graph_drop(c->pg, v);
        if (!ours && opts->released && val->data && val->data_bytes && v < c->src->n_values)
            opts->released(opts->released_ctx, val->data, val->data_bytes);
        val->flags &= ~(uint32_t)IR_VALUE_CONST;
        val->data = NULL;
        val->data_bytes = 0;
    }
}
