/* The dynamic interpreter: runs nodes whose shapes are known only while running, and whole
 * subgraphs (If branches, Loop and Scan bodies).
 *
 * Every node is handled the same way: shape inference with every input's contents visible (which
 * makes it exact), fresh heap storage for the outputs, then the reference kernel. That is slow
 * compared with a plan, but it is obviously correct and needs no per-shape planning; control flow
 * bodies are small, and the static plan still covers everything whose shapes are known early.
 * Values are freed as soon as their last reader (including readers inside nested subgraphs) has
 * run, so a long Loop holds only what one iteration needs. */
#include "runtime.h"

#include <stdlib.h>
#include <string.h>

static void tinfo_from(op_tinfo *ti, const op_tensor *t) {
    memset(ti, 0, sizeof *ti);
    if (!t) {
        ir_shape_unknown(&ti->shape);
        return;
    }
    ti->dtype = t->dtype;
    ir_shape_set(&ti->shape, t->rank, t->dims);
    ti->value = t->data;
}

static _Thread_local const rt_frame *cur_frame;

const rt_frame *rt_frame_enter(const rt_frame *f) {
    const rt_frame *prev = cur_frame;
    cur_frame = f;
    return prev;
}

const rt_frame *rt_frame_current(void) {
    return cur_frame;
}

anvil_status rt_node_run_dynamic(const ir_graph *g, const ir_node *n, const op_tensor *const *in,
                                 op_tensor *const *out, op_ctx *ctx, const rt_frame *frame) {
    const op_impl *impl = op_get(n->op);
    /* The kernels of If, Loop and Scan run their bodies through ctx->subgraph: a session's
     * compiled path when the caller set one, the interpreter otherwise. */
    op_ctx with_subgraphs = ctx ? *ctx : (op_ctx){0};
    if (!with_subgraphs.subgraph) with_subgraphs.subgraph = rt_subgraph_interpret;
    ctx = &with_subgraphs;
    if (n->n_inputs > 128 || n->n_outputs > 128)
        return core_err(ANVIL_ERR_LIMIT, "%s has more than 128 inputs or outputs",
                        ir_node_label(n));
    for (int i = 0; i < n->n_outputs; i++)
        if (out[i]) out[i]->data = NULL;
    if (impl->run_alloc) {
        const rt_frame *prev = rt_frame_enter(frame);
        anvil_status st = impl->run_alloc(n, in, n->n_inputs, out, n->n_outputs, ctx);
        rt_frame_enter(prev);
        for (int i = 0; i < n->n_outputs && st == ANVIL_OK; i++)
            if (out[i] && !out[i]->data)
                st = core_err(ANVIL_ERR_INTERNAL, "%s did not produce output %d", ir_node_label(n),
                              i);
        if (st != ANVIL_OK)
            for (int i = 0; i < n->n_outputs; i++) op_tensor_release(out[i]);
        return st;
    }
    op_tinfo ti[128], to[128];
    for (int i = 0; i < n->n_inputs; i++) tinfo_from(&ti[i], in[i]);
    for (int i = 0; i < n->n_outputs; i++) {
        memset(&to[i], 0, sizeof to[i]);
        ir_shape_unknown(&to[i].shape);
    }
    CORE_TRY(impl->infer(g, n, ti, n->n_inputs, to, n->n_outputs));
    anvil_status st = ANVIL_OK;
    for (int i = 0; i < n->n_outputs && st == ANVIL_OK; i++) {
        if (!out[i]) continue;
        if (!ir_shape_is_static(&to[i].shape)) {
            char b[160];
            st = core_err(ANVIL_ERR_INTERNAL,
                          "%s: output %d has shape %s even with every input value known",
                          ir_node_label(n), i, ir_shape_str(g, &to[i].shape, b, sizeof b));
            break;
        }
        st = op_output_alloc(ctx, out[i], to[i].dtype, to[i].shape.rank, to[i].shape.d);
    }
    if (st == ANVIL_OK) st = impl->run(n, in, n->n_inputs, out, n->n_outputs, ctx);
    if (st == ANVIL_OK && n->fusion) st = kern_fusion_apply(n, in, n->n_inputs, out[0], ctx);
    if (st != ANVIL_OK)
        for (int i = 0; i < n->n_outputs; i++) op_tensor_release(out[i]);
    return st;
}

/* ---- outer-scope reads ---------------------------------------------------------------------- */

/* Values of g that subgraph h (nested `level` deep below g) reads by name. A graph in between
 * that defines the name itself shadows g's value. */
static anvil_status outer_reads(const ir_graph *g, const ir_graph *h, int level,
                                void (*mark)(void *arg, ir_vid v), void *arg) {
    if (level > IR_MAX_GRAPH_DEPTH)
        return core_err(ANVIL_ERR_LIMIT, "subgraphs are nested more than %d deep",
                        IR_MAX_GRAPH_DEPTH);
    for (ir_vid v = 0; v < h->n_values; v++) {
        if (!(h->values[v].flags & IR_VALUE_OUTER)) continue;
        for (const ir_graph *q = h->parent; q; q = q->parent) {
            /* The ancestor at g's depth is g, or the graph g was copied from: a session's
             * rewritten graph (src/passes) shares the model's subgraphs, whose parent is the
             * model's graph. Either way names resolve in g. */
            if (q->depth == g->depth) {
                ir_vid p = ir_graph_find_value(g, h->values[v].name);
                if (p != IR_NONE) mark(arg, p);
                break;
            }
            ir_vid p = ir_graph_find_value(q, h->values[v].name);
            if (p != IR_NONE && !(q->values[p].flags & IR_VALUE_OUTER)) {
                /* Defined in between, normally. But g may hold that graph's nodes spliced in
                 * (inline_if.c), names and all: then the read is g's, and keeping g's value
                 * alive a little longer is harmless where it is not. */
                ir_vid gv = ir_graph_find_value(g, h->values[v].name);
                if (gv != IR_NONE) mark(arg, gv);
                break;
            }
        }
    }
    for (int32_t c = 0; c < h->n_children; c++)
        CORE_TRY(outer_reads(g, h->children[c], level + 1, mark, arg));
    return ANVIL_OK;
}

anvil_status rt_node_outer_reads(const ir_graph *g, const ir_node *n,
                                 void (*mark)(void *arg, ir_vid v), void *arg) {
    for (int k = 0; k < n->n_attrs; k++) {
        const ir_attr *a = &n->attrs[k];
        for (size_t j = 0; j < ir_attr_graph_count(a); j++) {
            const ir_graph *sub = ir_attr_graph_at(a, j);
            if (sub) CORE_TRY(outer_reads(g, sub, 1, mark, arg));
        }
    }
    return ANVIL_OK;
}

/* ---- subgraph frames ------------------------------------------------------------------------ */

typedef struct sub_frame {
    rt_frame base; /* first: lookup casts back */
    op_tensor *val;
    bool *have;  /* val[v] holds contents */
    bool *owned; /* val[v].data is ours to free */
    int32_t *last;
} sub_frame;

static anvil_status sub_lookup(const rt_frame *f, ir_vid v, op_tensor *out) {
    const sub_frame *sf = (const sub_frame *)f;
    if (v < 0 || v >= f->g->n_values || !sf->have[v])
        return core_err(ANVIL_ERR_RUNTIME, "subgraph value %d has no contents yet", (int)v);
    *out = sf->val[v];
    return ANVIL_OK;
}

typedef struct last_ctx {
    int32_t *last;
    int32_t node;
} last_ctx;

static void last_mark(void *arg, ir_vid v) {
    last_ctx *c = arg;
    if (c->last[v] < c->node) c->last[v] = c->node;
}

static void frame_free(sub_frame *f, int32_t n_values) {
    if (f->owned)
        for (int32_t v = 0; v < n_values; v++)
            if (f->owned[v]) free(f->val[v].data);
    free(f->val);
    free(f->have);
    free(f->owned);
    free(f->last);
}

static anvil_status bind_value(sub_frame *f, const ir_graph *g, ir_vid v) {
    const ir_value *val = &g->values[v];
    op_tensor *t = &f->val[v];
    if (val->flags & IR_VALUE_CONST) {
        t->dtype = val->dtype;
        t->rank = val->shape.rank;
        for (int d = 0; d < val->shape.rank; d++) t->dims[d] = val->shape.d[d];
        size_t es = anvil_dtype_size(val->dtype);
        if (val->data && es && (uintptr_t)val->data % es == 0) {
            t->data = (void *)val->data;
        } else {
            t->data = core_aligned_alloc(64, val->data_bytes ? val->data_bytes : 64);
            if (!t->data) return ANVIL_ERR_OUT_OF_MEMORY;
            if (val->data_bytes) memcpy(t->data, val->data, val->data_bytes);
            f->owned[v] = true;
        }
        f->have[v] = true;
        return ANVIL_OK;
    }
    if (val->flags & IR_VALUE_OUTER) {
        const rt_frame *up = f->base.up;
        ir_vid pv = up ? ir_graph_find_value(up->g, val->name) : IR_NONE;
        if (pv == IR_NONE)
            return core_err(ANVIL_ERR_RUNTIME,
                            "subgraph '%s' reads '%s' from an enclosing graph, which does not "
                            "define it",
                            g->name ? g->name : "?", val->name);
        CORE_TRY(up->lookup(up, pv, t));
        f->have[v] = true;
    }
    return ANVIL_OK;
}

anvil_status rt_subgraph_interpret(op_ctx *ctx, const ir_graph *body, const op_tensor *const *in,
                                   int n_in, op_tensor *out, int n_out) {
    if (!cur_frame)
        return core_err(ANVIL_ERR_INTERNAL, "a subgraph can only run inside a running node");
    if (n_in != body->n_inputs || n_out != body->n_outputs)
        return core_err(ANVIL_ERR_INTERNAL,
                        "subgraph called with %d inputs and %d outputs, "
                        "it has %d and %d",
                        n_in, n_out, (int)body->n_inputs, (int)body->n_outputs);
    const ir_graph *g = body;
    sub_frame f;
    memset(&f, 0, sizeof f);
    f.base.g = g;
    f.base.up = cur_frame;
    f.base.lookup = sub_lookup;
    size_t nv = (size_t)g->n_values + 1;
    f.val = core_calloc(nv, sizeof *f.val);
    f.have = core_calloc(nv, sizeof *f.have);
    f.owned = core_calloc(nv, sizeof *f.owned);
    f.last = core_calloc(nv, sizeof *f.last);
    anvil_status st = ANVIL_OK;
    if (!f.val || !f.have || !f.owned || !f.last) {
        frame_free(&f, g->n_values);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    /* last reader of every value, so storage goes as soon as possible; graph outputs live on */
    for (int32_t v = 0; v < g->n_values; v++) f.last[v] = -1;
    for (int32_t k = 0; k < g->n_nodes && st == ANVIL_OK; k++) {
        const ir_node *n = &g->nodes[k];
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] != IR_NONE) f.last[n->inputs[i]] = k;
        last_ctx lc = {f.last, k};
        st = rt_node_outer_reads(g, n, last_mark, &lc);
    }
    for (int32_t j = 0; j < g->n_outputs; j++) f.last[g->outputs[j]] = g->n_nodes;
    for (int i = 0; i < n_in && st == ANVIL_OK; i++) {
        ir_vid v = g->inputs[i];
        if (!in[i]) {
            st = core_err(ANVIL_ERR_INTERNAL, "subgraph input %d not given", i);
            break;
        }
        const ir_value *val = &g->values[v];
        if (val->dtype != ANVIL_DTYPE_UNDEFINED && val->dtype != in[i]->dtype) {
            st = core_err(ANVIL_ERR_RUNTIME,
                          "subgraph input '%s' is declared %s but receives a %s tensor", val->name,
                          anvil_dtype_name(val->dtype), anvil_dtype_name(in[i]->dtype));
            break;
        }
        f.val[v] = *in[i];
        f.have[v] = true;
    }
    for (int32_t v = 0; v < g->n_values && st == ANVIL_OK; v++)
        if (!f.have[v]) st = bind_value(&f, g, v);

    for (int32_t k = 0; k < g->n_nodes && st == ANVIL_OK; k++) {
        const ir_node *n = &g->nodes[k];
        const op_tensor *ins[128];
        op_tensor *outs[128];
        if (n->n_inputs > 128 || n->n_outputs > 128) {
            st = core_err(ANVIL_ERR_LIMIT, "%s has more than 128 inputs or outputs",
                          ir_node_label(n));
            break;
        }
        for (int i = 0; i < n->n_inputs && st == ANVIL_OK; i++) {
            ir_vid v = n->inputs[i];
            ins[i] = NULL;
            if (v == IR_NONE) continue;
            if (!f.have[v])
                st = core_err(ANVIL_ERR_RUNTIME, "%s reads '%s', which has no contents",
                              ir_node_label(n), g->values[v].name);
            ins[i] = &f.val[v];
        }
        for (int i = 0; i < n->n_outputs; i++)
            outs[i] = n->outputs[i] == IR_NONE ? NULL : &f.val[n->outputs[i]];
        if (st == ANVIL_OK) st = rt_node_run_dynamic(g, n, ins, outs, ctx, &f.base);
        if (st != ANVIL_OK) break;
        for (int i = 0; i < n->n_outputs; i++) {
            ir_vid v = n->outputs[i];
            if (v == IR_NONE) continue;
            f.have[v] = true;
            f.owned[v] = true;
        }
        /* drop what no later node (nor the graph's outputs) reads */
        for (int i = 0; i < n->n_inputs; i++) {
            ir_vid v = n->inputs[i];
            if (v != IR_NONE && f.owned[v] && f.last[v] <= k) {
                free(f.val[v].data);
                f.val[v].data = NULL;
                f.owned[v] = false;
                f.have[v] = false;
            }
        }
        for (int i = 0; i < n->n_outputs; i++) {
            ir_vid v = n->outputs[i];
            if (v != IR_NONE && f.last[v] < 0) {
                free(f.val[v].data);
                f.val[v].data = NULL;
                f.owned[v] = false;
            }
        }
    }
    /* outputs: hand over owned storage (each value once), copy everything borrowed */
    for (int j = 0; j < n_out && st == ANVIL_OK; j++) {
        ir_vid v = g->outputs[j];
        if (!f.have[v]) {
            st = core_err(ANVIL_ERR_RUNTIME, "subgraph output '%s' was never computed",
                          g->values[v].name);
            break;
        }
        if (f.owned[v]) {
            out[j] = f.val[v];
            f.owned[v] = false;
            continue;
        }
        const op_tensor *src = &f.val[v];
        st = op_output_alloc(ctx, &out[j], src->dtype, src->rank, src->dims);
        size_t bytes = 0;
        if (st == ANVIL_OK && core_tensor_bytes(src->dtype, src->dims, src->rank, &bytes) && bytes)
            memcpy(out[j].data, src->data, bytes);
    }
    if (st != ANVIL_OK)
        for (int j = 0; j < n_out; j++) op_tensor_release(&out[j]);
    frame_free(&f, g->n_values);
    return st;
}
