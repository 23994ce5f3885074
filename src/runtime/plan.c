/* Sessions, plans and the executor.
 *
 * A plan is made per input-shape signature: shapes are inferred with every dim concrete, nodes
 * whose inputs are all known are folded (evaluated once), a variant is chosen for every other node,
 * and each activation gets an offset in one arena from liveness analysis. Reshape-like nodes alias
 * their input and never run; elementwise nodes may write over an input that dies with them. The
 * executor then only binds the caller's input pointers and calls variants in order.
 *
 * Nodes whose output shapes can only be known by running (NonZero, If, Loop, ... and whatever
 * they feed) become dynamic steps: at run time their shapes are inferred from the actual values
 * and their outputs live on the heap until their last reader (subgraph readers included) has
 * run. A plan without dynamic steps allocates nothing per run. */
#include "runtime.h"
#include "kernels/kernels.h"
#include "passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_MAX_PLANS 8
#define RT_ARENA_ALIGN 64
#define RT_TRACE_MAX_EVENTS (1u << 20)

/* LOC_HEAP: produced by a dynamic step; storage allocated per run, freed after its last reader */
typedef enum { LOC_NONE = 0, LOC_ARENA, LOC_INPUT, LOC_CONST, LOC_HEAP } loc_kind;

typedef struct rt_loc {
    loc_kind kind;
    int32_t input;   /* LOC_INPUT: graph input index */
    size_t offset;   /* LOC_ARENA */
    const void *ptr; /* LOC_CONST */
} rt_loc;

typedef struct rt_step {
    int32_t node;
    const kern_variant *variant;
    void *state;         /* variant's prepared state */
    size_t workspace;    /* bytes at plan->workspace */
    bool alias;          /* output 0 is input 0's bytes: nothing to run */
    bool dynamic;        /* shapes inferred and outputs allocated while running */
    bool fusion_after;   /* the node's fused epilogue is applied after the variant ran */
    op_tensor *in, *out; /* [n_inputs], [n_outputs] templates; data bound per run */
} rt_step;

typedef struct rt_plan {
    int64_t *sig;
    size_t sig_len;
    rt_shapes shapes; /* owns folded values */
    rt_loc *loc;      /* per value */
    rt_step *steps;
    int32_t n_steps;
    unsigned char *arena;
    size_t arena_bytes, activation_bytes;
    void *workspace;
    size_t workspace_bytes;
    uint64_t last_used;
    /* dynamic steps: the values they produce and the step after which each can go */
    ir_vid *heap_vals;
    int32_t *heap_last;
    int32_t n_heap;
} rt_plan;

typedef struct rt_event {
    int32_t node; /* -1: a whole run */
    uint32_t run;
    uint64_t t0, t1;
    const char *variant;
} rt_event;

struct rt_session {
    const ir_graph *g;   /* what runs: the passes' rewrite of src, or src at level 0 */
    const ir_graph *src; /* the model's graph (borrowed) */
    pass_graph *pg;      /* owns g when passes ran */
    /* Nodes the passes must leave unfused: a fused residual matched on symbolic shapes that a
     * plan found to differ (names owned). */
    char **unfused;
    int n_unfused;
    rt_session_config cfg; /* cfg.forces points at `forces` below */
    rt_force *forces;      /* owned copies; strings in force_text */
    char *force_text;
    core_pool *pool;
    op_ctx ctx;
    bool *shape_input;      /* per graph input: its contents decide shapes (plan key) */
    const void **const_ptr; /* per value: aligned constant data */
    void **const_owned;     /* per value: realigned copies owned here */
    rt_plan *plans[RT_MAX_PLANS];
    int n_plans;
    rt_plan *last;
    uint64_t tick;
    size_t plans_made;
    rt_event *events;
    size_t n_events, cap_events, dropped_events;
    uint32_t runs;
    uint64_t t_origin;
};

/* ---- tensors ------------------------------------------------------------------------------- */

anvil_status rt_tensor_new(anvil_dtype dt, int rank, const int64_t *dims, anvil_tensor **out) {
    *out = NULL;
    if (!core_dtype_supported(dt))
        return core_err(ANVIL_ERR_UNSUPPORTED, "tensors of dtype %s are not supported",
                        anvil_dtype_name(dt));
    if (rank < 0 || rank > ANVIL_MAX_RANK)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "rank %d is outside 0..%d", rank,
                        ANVIL_MAX_RANK);
    size_t bytes;
    if (!core_tensor_bytes(dt, dims, rank, &bytes))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tensor dims are negative or their byte size overflows");
    if (bytes > core_max_tensor_bytes())
        return core_err(ANVIL_ERR_LIMIT, "a tensor of %zu bytes exceeds the limit of %zu bytes",
                        bytes, core_max_tensor_bytes());
    anvil_tensor *t = core_calloc(1, sizeof *t);
    if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
    t->data = core_aligned_alloc(64, bytes ? bytes : 64);
    if (!t->data) {
        free(t);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    memset(t->data, 0, bytes);
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->bytes = bytes;
    t->owns_data = true;
    *out = t;
    return ANVIL_OK;
}

/* ---- plans --------------------------------------------------------------------------------- */

static void plan_free(rt_plan *p) {
    if (!p) return;
    for (int32_t i = 0; i < p->n_steps; i++) {
        rt_step *st = &p->steps[i];
        if (st->state && st->variant->release) st->variant->release(st->state);
        free(st->in);
        free(st->out);
    }
    free(p->steps);
    free(p->loc);
    free(p->arena);
    free(p->workspace);
    free(p->sig);
    free(p->heap_vals);
    free(p->heap_last);
    rt_shapes_free(&p->shapes);
    free(p);
}

/* Union-find over values: a value that aliases or overwrites another shares its storage. */
static int32_t uf_find(int32_t *parent, int32_t v) {
    while (parent[v] != v) {
        parent[v] = parent[parent[v]];
        v = parent[v];
    }
    return v;
}

typedef rt_arena_buf group;

static int cmp_group_size(const void *a, const void *b) {
    const group *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->first - y->first;
}

static size_t arena_round(size_t bytes) {
    return (bytes + RT_ARENA_ALIGN - 1) & ~(size_t)(RT_ARENA_ALIGN - 1);
}

/* Whether [off, off + size) overlaps no placed buffer gr[0..i) live at the same time as gr[i]. */
static bool slot_free(const group *gr, int32_t i, size_t off, size_t size) {
    for (int32_t j = 0; j < i; j++) {
        if (gr[j].last < gr[i].first || gr[i].last < gr[j].first) continue;
        if (off < gr[j].offset + arena_round(gr[j].bytes) && gr[j].offset < off + size)
            return false;
    }
    return true;
}

/* The offset of the latest placed buffer of gr[i]'s size that died before gr[i] is born, if
 * that slot is free for gr[i] (SIZE_MAX if none; the latest few candidates are tried). */
static size_t same_size_slot(const group *gr, int32_t i, size_t size) {
    int32_t below = gr[i].first;
    for (int tries = 0; tries < 4; tries++) {
        int32_t best = -1;
        for (int32_t j = 0; j < i; j++)
            if (gr[j].bytes == gr[i].bytes && gr[j].last < below &&
                (best < 0 || gr[j].last > gr[best].last))
                best = j;
        if (best < 0) return SIZE_MAX;
        if (slot_free(gr, i, gr[best].offset, size)) return gr[best].offset;
        below = gr[best].last;
    }
    return SIZE_MAX;
}

/* Offset assignment: biggest buffers first. A buffer takes the slot of the latest buffer of its
 * size that died before it, where that slot is free: the threads of the node that writes it
 * then mostly write the bytes they wrote last time (nodes split their outputs the same way),
 * so a cache line is rarely still modified in another core's L2, which costs a write far more
 * than a line in L3. MobileNetV2 at 2 threads: its 384-channel 14x14 depthwise convs took 22 us
 * or 38-39 us depending on where the lowest free offset put their outputs, and take 21 us in
 * such slots (576-channel: 55 -> 31-38 us; the 1x1 convs that follow lose a few us, as both
 * threads read all of their input); end to end 4.30 -> 4.24 ms, medians of 5 alternating pairs.
 * ResNet-50's arena grows from 6.89 to 7.66 MiB, MobileNetV2's stays 5.74. Otherwise the lowest
 * offset that overlaps no placed buffer live at the same time. */
anvil_status rt_arena_assign(rt_arena_buf *gr, int32_t n, size_t *arena_bytes) {
    qsort(gr, (size_t)n, sizeof *gr, cmp_group_size);
    size_t top = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t size;
        if (!core_add_size(gr[i].bytes, RT_ARENA_ALIGN - 1, &size))
            return core_err(ANVIL_ERR_LIMIT, "activation of %zu bytes is too large", gr[i].bytes);
        size &= ~(size_t)(RT_ARENA_ALIGN - 1);
        size_t off = same_size_slot(gr, i, size);
        if (off == SIZE_MAX) {
            off = 0;
            for (bool moved = true; moved;) {
                moved = false;
                for (int32_t j = 0; j < i; j++) {
                    if (gr[j].last < gr[i].first || gr[i].last < gr[j].first) continue;
                    size_t jend = gr[j].offset + arena_round(gr[j].bytes);
                    if (off < jend && gr[j].offset < off + size) {
                        off = jend;
                        moved = true;
                    }
                }
            }
        }
        gr[i].offset = off;
        size_t end;
        if (!core_add_size(off, size, &end))
            return core_err(ANVIL_ERR_LIMIT, "the activation arena would overflow");
        if (end > top) top = end;
    }
    *arena_bytes = top;
    return ANVIL_OK;
}

static anvil_status check_inputs(const rt_session *s, const anvil_tensor *const *inputs) {
    const ir_graph *g = s->g;
    /* sym_val[k]: the value bound to symbolic dim k by an earlier input, or -1 */
    int64_t sym_local[64];
    int64_t *sym_val = sym_local;
    if (g->n_syms > 64) {
        sym_val = core_calloc((size_t)g->n_syms, sizeof *sym_val);
        if (!sym_val) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (int32_t k = 0; k < g->n_syms; k++) sym_val[k] = -1;
    anvil_status st = ANVIL_OK;
    for (int32_t i = 0; i < g->n_inputs && st == ANVIL_OK; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        const anvil_tensor *t = inputs[i];
        if (!t) {
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT, "input '%s' was not given", v->name);
            break;
        }
        if (t->dtype != v->dtype) {
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                          "input '%s' must be %s but a %s tensor was given", v->name,
                          anvil_dtype_name(v->dtype), anvil_dtype_name(t->dtype));
            break;
        }
        if (v->shape.rank >= 0 && t->rank != v->shape.rank) {
            char b[160];
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                          "input '%s' must have rank %d (shape %s) but has rank %d", v->name,
                          v->shape.rank, ir_shape_str(g, &v->shape, b, sizeof b), t->rank);
            break;
        }
        for (int d = 0; d < v->shape.rank; d++) {
            char b[160];
            if (v->shape.d[d] >= 0 && v->shape.d[d] != t->dims[d]) {
                st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                              "input '%s' dim %d must be %lld (shape %s) but is %lld", v->name, d,
                              (long long)v->shape.d[d], ir_shape_str(g, &v->shape, b, sizeof b),
                              (long long)t->dims[d]);
                break;
            }
            int32_t sym = v->shape.sym[d];
            if (v->shape.d[d] < 0 && sym >= 0 && sym < g->n_syms) {
                if (sym_val[sym] >= 0 && sym_val[sym] != t->dims[d]) {
                    st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                                  "input '%s' dim %d is %lld but symbolic dim '%s' was already "
                                  "bound to %lld by an earlier input",
                                  v->name, d, (long long)t->dims[d], g->syms[sym],
                                  (long long)sym_val[sym]);
                    break;
                }
                sym_val[sym] = t->dims[d];
            }
        }
    }
    if (sym_val != sym_local) free(sym_val);
    return st;
}

/* The plan cache key: rank and dims of every input, then the contents of the inputs that decide
 * shapes (e.g. a Reshape target fed by the caller). */
static anvil_status signature(const rt_session *s, const anvil_tensor *const *inputs, int64_t **out,
                              size_t *len) {
    const ir_graph *g = s->g;
    size_t n = 0;
    for (int32_t i = 0; i < g->n_inputs; i++) {
        n += 1 + (size_t)inputs[i]->rank;
        if (s->shape_input[i]) n += (inputs[i]->bytes + 7) / 8;
    }
    int64_t *sig = core_calloc(n + 1, sizeof *sig);
    if (!sig) return ANVIL_ERR_OUT_OF_MEMORY;
    size_t k = 0;
    for (int32_t i = 0; i < g->n_inputs; i++) {
        sig[k++] = inputs[i]->rank;
        for (int d = 0; d < inputs[i]->rank; d++) sig[k++] = inputs[i]->dims[d];
        if (!s->shape_input[i]) continue;
        /* raw bytes, so float contents (Resize scales) key exactly too */
        if (inputs[i]->bytes) memcpy(&sig[k], inputs[i]->data, inputs[i]->bytes);
        k += (inputs[i]->bytes + 7) / 8;
    }
    *out = sig;
    *len = k;
    return ANVIL_OK;
}

/* Marks the graph inputs whose contents reach an input that shape inference reads the value of
 * (value_inputs), following producers backwards; Shape only reads its input's shape. Such inputs
 * must be small: their contents key the plan. */
#define RT_SHAPE_INPUT_MAX_ELEMS 4096

static anvil_status mark_shape_inputs(rt_session *s) {
    const ir_graph *g = s->g;
    s->shape_input = core_calloc((size_t)g->n_inputs + 1, sizeof *s->shape_input);
    bool *need = core_calloc((size_t)g->n_values + 1, sizeof *need);
    if (!s->shape_input || !need) {
        free(need);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (int32_t k = g->n_nodes - 1; k >= 0; k--) {
        const ir_node *n = &g->nodes[k];
        uint32_t mask = op_get(n->op)->value_inputs;
        bool out_needed = false;
        for (int i = 0; i < n->n_outputs; i++)
            out_needed |= n->outputs[i] != IR_NONE && need[n->outputs[i]];
        for (int i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] == IR_NONE) continue;
            if ((i < 32 && (mask >> i) & 1u) || (out_needed && n->op != IR_OP_SHAPE))
                need[n->inputs[i]] = true;
        }
    }
    anvil_status st = ANVIL_OK;
    for (int32_t i = 0; i < g->n_inputs && st == ANVIL_OK; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if (!need[g->inputs[i]]) continue;
        size_t numel;
        if (ir_shape_numel(&v->shape, &numel) && numel > RT_SHAPE_INPUT_MAX_ELEMS)
            st = core_err(ANVIL_ERR_UNSUPPORTED,
                          "input '%s' decides output shapes and has %zu elements; anvil plans per "
                          "value of such inputs and allows at most %d elements",
                          v->name, numel, RT_SHAPE_INPUT_MAX_ELEMS);
        s->shape_input[i] = true;
    }
    free(need);
    return st;
}

typedef struct last_ctx {
    int32_t *last;
    int32_t step;
} last_ctx;

static void last_mark(void *arg, ir_vid v) {
    last_ctx *c = arg;
    if (c->last[v] < c->step) c->last[v] = c->step;
}

/* The variant for a node: a force by node name is strict, one by op type applies where it can. */
static anvil_status select_variant(const rt_session *s, const kern_node *kn,
                                   const kern_variant **out) {
    const ir_node *n = kn->node;
    const char *by_op = NULL;
    for (int i = 0; i < s->cfg.n_forces; i++) {
        const rt_force *f = &s->cfg.forces[i];
        if (!strcmp(f->key, n->name)) return kern_select(kn, f->variant, out);
        if (!strcmp(f->key, ir_op_name(n->op))) by_op = f->variant;
    }
    if (by_op) {
        const kern_variant *v = kern_find(n->op, by_op);
        if (v && kern_applies(v, kn, core_hw_get())) {
            *out = v;
            return ANVIL_OK;
        }
    }
    return kern_select(kn, NULL, out);
}

static void mark_kept(void *arg, ir_vid v) {
    ((int32_t *)arg)[v] = -1;
}

/* Constants that every step reading them has copied into its own state (packed weights) are no
 * longer read by this plan, so the process need not hold them twice. readers[v] counts the
 * steps of the plan being made that read constant v, or is -1 when something reads it without
 * copying (a dynamic step, a subgraph reading outer values, a graph output); release_step
 * counts each preparing step down and lets v go when the last reader has copied it, so at most
 * one weight is held twice at any time while a plan is made. Returns NULL on OOM (no release). */
static int32_t *release_readers(const rt_session *s, const rt_shapes *sh) {
    const ir_graph *g = s->g;
    int32_t *readers = core_calloc((size_t)g->n_values + 1, sizeof *readers);
    if (!readers) return NULL;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (sh->folded[k]) continue;
        const ir_node *n = &g->nodes[k];
        for (int i = 0; i < n->n_inputs; i++) {
            ir_vid v = n->inputs[i];
            if (v == IR_NONE || readers[v] < 0) continue;
            readers[v] = sh->dynamic[k] ? -1 : readers[v] + 1;
        }
        if (rt_node_outer_reads(g, n, mark_kept, readers) != ANVIL_OK) {
            free(readers);
            return NULL;
        }
    }
    for (int32_t i = 0; i < g->n_outputs; i++) readers[g->outputs[i]] = -1;
    return readers;
}

/* After node n's variant prepared (copied: its kern_node_mark_copied bits). A realigned copy
 * of the session's is freed (const_ptr cleared; const_materialize makes it again if a later
 * plan needs it); bytes in the model's mapping are released to the OS (the mapping is private
 * and read-only, so pages read again fault back in from the file with the same bytes). An
 * earlier plan may still point at a freed copy, but only from steps that copied it and never
 * read it. */
static void release_step(rt_session *s, int32_t *readers, const ir_node *n, uint32_t copied) {
    if (!readers) return;
    for (int i = 0; i < n->n_inputs; i++) {
        ir_vid v = n->inputs[i];
        if (v == IR_NONE || readers[v] < 0) continue;
        if (i >= 32 || !(copied >> i & 1)) {
            readers[v] = -1;
            continue;
        }
        if (--readers[v] > 0) continue;
        const ir_value *val = &s->g->values[v];
        if (!(val->flags & IR_VALUE_CONST) || !val->data || !val->data_bytes) continue;
        if (s->const_owned[v]) {
            free(s->const_owned[v]);
            s->const_owned[v] = NULL;
            s->const_ptr[v] = NULL;
        } else if (pass_graph_owns(s->pg, v)) {
            /* folded weights: computed again by const_materialize if a later plan needs them */
            pass_graph_drop(s->pg, v);
            s->const_ptr[v] = NULL;
        } else if (s->cfg.released) {
            s->cfg.released(s->cfg.released_ctx, val->data, val->data_bytes);
        }
    }
}

/* Points const_ptr[v] at constant v's bytes, aligned for its dtype: the model's own bytes when
 * their address suits, else a copy (protobuf gives no alignment guarantee), after which the
 * mapped original is released. */
static anvil_status const_materialize(rt_session *s, ir_vid v) {
    if (pass_graph_owns(s->pg, v)) CORE_TRY(pass_graph_refill(s->pg, v));
    const ir_value *val = &s->g->values[v];
    size_t es = anvil_dtype_size(val->dtype);
    if (val->data && es && (uintptr_t)val->data % es == 0) {
        s->const_ptr[v] = val->data;
        return ANVIL_OK;
    }
    void *copy = core_aligned_alloc(64, val->data_bytes ? val->data_bytes : 64);
    if (!copy) return ANVIL_ERR_OUT_OF_MEMORY;
    if (val->data_bytes) memcpy(copy, val->data, val->data_bytes);
    s->const_owned[v] = copy;
    s->const_ptr[v] = copy;
    if (s->cfg.released && val->data_bytes)
        s->cfg.released(s->cfg.released_ctx, val->data, val->data_bytes);
    return ANVIL_OK;
}

/* *unfuse: set to the node whose fused epilogue does not fit the concrete shapes (the caller
 * rebuilds the graph without that fusion and tries again), else -1. */
static anvil_status plan_make(rt_session *s, const anvil_tensor *const *inputs, rt_plan **out,
                              int32_t *unfuse) {
    const ir_graph *g = s->g;
    *out = NULL;
    *unfuse = -1;
    rt_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = ANVIL_OK;
    int32_t *uf = NULL, *def = NULL, *last = NULL, *gidx = NULL, *readers = NULL;
    group *groups = NULL;

    if ((st = signature(s, inputs, &p->sig, &p->sig_len)) != ANVIL_OK) goto fail;

    /* 1. shapes with every input concrete; fold what is known */
    if ((st = rt_shapes_init(&p->shapes, g)) != ANVIL_OK) goto fail;
    rt_shapes *sh = &p->shapes;
    for (int32_t v = 0; v < g->n_values; v++) {
        if (g->values[v].flags & IR_VALUE_CONST) {
            if (!s->const_ptr[v] && (st = const_materialize(s, v)) != ANVIL_OK) goto fail;
            sh->info[v].dtype = g->values[v].dtype;
            sh->info[v].shape = g->values[v].shape;
            sh->info[v].value = s->const_ptr[v];
        }
    }
    for (int32_t i = 0; i < g->n_inputs; i++) {
        ir_vid v = g->inputs[i];
        op_tinfo *t = &sh->info[v];
        t->dtype = inputs[i]->dtype;
        ir_shape_set(&t->shape, inputs[i]->rank, inputs[i]->dims);
        if (s->shape_input[i]) {
            /* the plan is keyed by these contents, so it may keep its own copy of them */
            sh->owned[v] = core_aligned_alloc(64, inputs[i]->bytes ? inputs[i]->bytes : 64);
            if (!sh->owned[v]) goto oom;
            if (inputs[i]->bytes) memcpy(sh->owned[v], inputs[i]->data, inputs[i]->bytes);
            t->value = sh->owned[v];
        }
    }
    rt_infer_opts io = {.fold_limit_bytes = SIZE_MAX,
                        .require_static = true,
                        .allow_dynamic = true,
                        .ctx = &s->ctx,
                        .apply_fusion = kern_fusion_apply};
    if ((st = rt_shapes_infer(g, sh, &io)) != ANVIL_OK) goto fail;

    /* 2. steps: every node not folded; pick its variant */
    readers = release_readers(s, sh);
    p->loc = core_calloc((size_t)g->n_values + 1, sizeof *p->loc);
    p->steps = core_calloc((size_t)g->n_nodes + 1, sizeof *p->steps);
    if (!p->loc || !p->steps) goto oom;
    for (int32_t v = 0; v < g->n_values; v++) {
        if (sh->info[v].value) {
            p->loc[v].kind = LOC_CONST;
            p->loc[v].ptr = sh->info[v].value;
        }
    }
    for (int32_t i = 0; i < g->n_inputs; i++) {
        p->loc[g->inputs[i]].kind = LOC_INPUT;
        p->loc[g->inputs[i]].input = i;
    }
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (sh->folded[k]) continue;
        const ir_node *n = &g->nodes[k];
        rt_step *stp = &p->steps[p->n_steps++];
        stp->node = k;
        if (sh->dynamic[k]) {
            stp->dynamic = true;
            continue;
        }
        op_tinfo in[128], outi[128];
        for (int i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] == IR_NONE) {
                memset(&in[i], 0, sizeof in[i]);
                ir_shape_unknown(&in[i].shape);
            } else {
                in[i] = sh->info[n->inputs[i]];
            }
        }
        for (int i = 0; i < n->n_outputs; i++) {
            if (n->outputs[i] == IR_NONE) {
                memset(&outi[i], 0, sizeof outi[i]);
                ir_shape_unknown(&outi[i].shape);
            } else {
                outi[i] = sh->info[n->outputs[i]];
            }
        }
        uint32_t copied = 0;
        kern_node kn = {n, in, n->n_inputs, outi, n->n_outputs, s->cfg.threads, &copied};
        if ((st = kern_fusion_check(&kn)) != ANVIL_OK) {
            *unfuse = k;
            goto fail;
        }
        if ((st = select_variant(s, &kn, &stp->variant)) != ANVIL_OK) goto fail;
        stp->fusion_after = kern_fusion_pending(stp->variant, &kn);
        if (stp->variant->prepare && (st = stp->variant->prepare(&kn, &stp->state)) != ANVIL_OK)
            goto fail;
        release_step(s, readers, n, copied);
        stp->workspace = stp->variant->workspace_size ? stp->variant->workspace_size(&kn) : 0;
        if (stp->workspace > p->workspace_bytes) p->workspace_bytes = stp->workspace;
        stp->in = core_calloc((size_t)n->n_inputs + 1, sizeof *stp->in);
        stp->out = core_calloc((size_t)n->n_outputs + 1, sizeof *stp->out);
        if (!stp->in || !stp->out) goto oom;
        for (int i = 0; i < n->n_inputs; i++) {
            stp->in[i].dtype = in[i].dtype;
            stp->in[i].rank = in[i].shape.rank;
            memcpy(stp->in[i].dims, in[i].shape.d, sizeof stp->in[i].dims);
        }
        for (int i = 0; i < n->n_outputs; i++) {
            stp->out[i].dtype = outi[i].dtype;
            stp->out[i].rank = outi[i].shape.rank;
            memcpy(stp->out[i].dims, outi[i].shape.d, sizeof stp->out[i].dims);
        }
    }

    /* 3. liveness: def = producing step, last = last reading step (graph outputs: the end) */
    uf = core_calloc((size_t)g->n_values + 1, sizeof *uf);
    def = core_calloc((size_t)g->n_values + 1, sizeof *def);
    last = core_calloc((size_t)g->n_values + 1, sizeof *last);
    if (!uf || !def || !last) goto oom;
    for (int32_t v = 0; v < g->n_values; v++) {
        uf[v] = v;
        def[v] = -1;
        last[v] = -1;
    }
    for (int32_t i = 0; i < p->n_steps; i++) {
        const ir_node *n = &g->nodes[p->steps[i].node];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] != IR_NONE) last[n->inputs[k]] = i;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] != IR_NONE) def[n->outputs[k]] = i;
    }
    for (int32_t i = 0; i < p->n_steps; i++) {
        /* subgraphs read outer values by name, not through the node's inputs */
        last_ctx lc = {last, i};
        if ((st = rt_node_outer_reads(g, &g->nodes[p->steps[i].node], last_mark, &lc)) != ANVIL_OK)
            goto fail;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) last[g->outputs[i]] = p->n_steps;

    /* 4. aliasing and in-place reuse; everything else produced by a step lives in the arena */
    for (int32_t i = 0; i < p->n_steps; i++) {
        rt_step *stp = &p->steps[i];
        const ir_node *n = &g->nodes[stp->node];
        const op_impl *impl = op_get(n->op);
        if (stp->dynamic) {
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] != IR_NONE) p->loc[n->outputs[k]].kind = LOC_HEAP;
            continue;
        }
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] != IR_NONE) p->loc[n->outputs[k]].kind = LOC_ARENA;
        if (n->n_outputs < 1 || n->outputs[0] == IR_NONE || n->n_inputs < 1 ||
            n->inputs[0] == IR_NONE)
            continue;
        ir_vid x = n->inputs[0], y = n->outputs[0];
        size_t xb = 0, yb = 0;
        core_tensor_bytes(sh->info[x].dtype, sh->info[x].shape.d, sh->info[x].shape.rank, &xb);
        core_tensor_bytes(sh->info[y].dtype, sh->info[y].shape.d, sh->info[y].shape.rank, &yb);
        /* an alias never runs, so every other input must have been checked at plan time
         * (e.g. Dropout's training_mode fed by the caller must reach the kernel) */
        bool other_io = false;
        for (int k = 1; k < n->n_outputs; k++) other_io |= n->outputs[k] != IR_NONE;
        for (int k = 1; k < n->n_inputs; k++)
            other_io |= n->inputs[k] != IR_NONE && !sh->info[n->inputs[k]].value;
        if ((impl->flags & OP_ALIAS_0) && !other_io && xb == yb) {
            stp->alias = true;
            p->loc[y] = p->loc[x];
            if (p->loc[x].kind == LOC_ARENA) uf[y] = uf_find(uf, x);
            continue;
        }
        if ((impl->flags & OP_INPLACE_0) && p->loc[x].kind == LOC_ARENA && xb == yb &&
            sh->info[x].dtype == sh->info[y].dtype && last[x] == i) {
            /* the group must die here and must not be read through another input */
            int32_t root = uf_find(uf, x);
            bool ok = true;
            for (int32_t v = 0; v < g->n_values && ok; v++)
                if (p->loc[v].kind == LOC_ARENA && uf_find(uf, v) == root && last[v] > i)
                    ok = false;
            for (int k = 1; k < n->n_inputs && ok; k++)
                if (n->inputs[k] != IR_NONE && p->loc[n->inputs[k]].kind == LOC_ARENA &&
                    uf_find(uf, n->inputs[k]) == root)
                    ok = false;
            if (ok) uf[y] = root;
        }
    }

    /* 5. one group per storage root: size and live range; then offsets */
    gidx = core_calloc((size_t)g->n_values + 1, sizeof *gidx);
    groups = core_calloc((size_t)g->n_values + 1, sizeof *groups);
    if (!gidx || !groups) goto oom;
    int32_t n_groups = 0;
    for (int32_t v = 0; v < g->n_values; v++) gidx[v] = -1;
    for (int32_t v = 0; v < g->n_values; v++) {
        if (p->loc[v].kind != LOC_ARENA) continue;
        int32_t r = uf_find(uf, v);
        if (gidx[r] < 0) {
            gidx[r] = n_groups;
            groups[n_groups].root = r;
            groups[n_groups].first = INT32_MAX;
            groups[n_groups].last = -1;
            n_groups++;
        }
        group *gr = &groups[gidx[r]];
        size_t b = 0;
        core_tensor_bytes(sh->info[v].dtype, sh->info[v].shape.d, sh->info[v].shape.rank, &b);
        if (b > gr->bytes) gr->bytes = b;
        int32_t first = def[v] >= 0 ? def[v] : 0;
        int32_t end = last[v] > first ? last[v] : first;
        if (first < gr->first) gr->first = first;
        if (end > gr->last) gr->last = end;
    }
    /* what a plan without any reuse would hold: every output of every node that runs */
    for (int32_t i = 0; i < p->n_steps; i++) {
        if (p->steps[i].alias || p->steps[i].dynamic) continue;
        const ir_node *n = &g->nodes[p->steps[i].node];
        for (int k = 0; k < n->n_outputs; k++) {
            ir_vid v = n->outputs[k];
            size_t b = 0;
            if (v == IR_NONE) continue;
            core_tensor_bytes(sh->info[v].dtype, sh->info[v].shape.d, sh->info[v].shape.rank, &b);
            if (!core_add_size(p->activation_bytes, b, &p->activation_bytes))
                p->activation_bytes = SIZE_MAX;
        }
    }
    if ((st = rt_arena_assign(groups, n_groups, &p->arena_bytes)) != ANVIL_OK) goto fail;
    for (int32_t i = 0; i < n_groups; i++) gidx[groups[i].root] = i;
    for (int32_t v = 0; v < g->n_values; v++)
        if (p->loc[v].kind == LOC_ARENA) p->loc[v].offset = groups[gidx[uf_find(uf, v)]].offset;
    p->arena = core_aligned_alloc(RT_ARENA_ALIGN, p->arena_bytes ? p->arena_bytes : 64);
    if (!p->arena) goto oom;
    if (p->workspace_bytes) {
        p->workspace = core_aligned_alloc(64, p->workspace_bytes);
        if (!p->workspace) goto oom;
    }
    for (int32_t v = 0; v < g->n_values; v++) p->n_heap += p->loc[v].kind == LOC_HEAP;
    if (p->n_heap) {
        p->heap_vals = core_calloc((size_t)p->n_heap, sizeof *p->heap_vals);
        p->heap_last = core_calloc((size_t)p->n_heap, sizeof *p->heap_last);
        if (!p->heap_vals || !p->heap_last) goto oom;
        int32_t h = 0;
        for (int32_t v = 0; v < g->n_values; v++) {
            if (p->loc[v].kind != LOC_HEAP) continue;
            p->heap_vals[h] = v;
            /* never read: it goes right after the step that made it */
            p->heap_last[h++] = last[v] >= def[v] ? last[v] : def[v];
        }
    }
    goto done;
oom:
    st = ANVIL_ERR_OUT_OF_MEMORY;
fail:
    plan_free(p);
    p = NULL;
done:
    free(readers);
    free(uf);
    free(def);
    free(last);
    free(gidx);
    free(groups);
    *out = p;
    return st;
}

/* ---- sessions -------------------------------------------------------------------------------- */

/* Copies cfg's forces into s and checks each names a node or an op type of g, and a variant
 * that exists for it, so a typo fails at session creation rather than silently not forcing. */
static anvil_status copy_forces(rt_session *s, const rt_session_config *cfg) {
    s->cfg.forces = NULL;
    s->cfg.n_forces = 0;
    if (cfg->n_forces <= 0) return ANVIL_OK;
    size_t text = 0;
    for (int i = 0; i < cfg->n_forces; i++)
        text += strlen(cfg->forces[i].key) + strlen(cfg->forces[i].variant) + 2;
    s->forces = core_calloc((size_t)cfg->n_forces, sizeof *s->forces);
    s->force_text = core_calloc(text, 1);
    if (!s->forces || !s->force_text) return ANVIL_ERR_OUT_OF_MEMORY;
    char *w = s->force_text;
    for (int i = 0; i < cfg->n_forces; i++) {
        const rt_force *f = &cfg->forces[i];
        ir_op op;
        bool found = false, is_op = ir_op_lookup(f->key, &op);
        /* names of the model's nodes, including those a pass fused into another */
        for (int32_t k = 0; k < s->src->n_nodes && !found; k++)
            if (!strcmp(s->src->nodes[k].name, f->key)) {
                found = true;
                op = s->src->nodes[k].op;
                is_op = false;
            }
        if (!found && !is_op)
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "forced variant '%s': '%s' is neither a node of the model nor an op "
                            "type anvil knows; give a node name (anvil dump lists them) or an op "
                            "type such as Conv",
                            f->variant, f->key);
        /* a Conv node may be forced onto a channels-last variant: the layout pass then turns it */
        if (!kern_find(op, f->variant) &&
            !(op == IR_OP_CONV && !is_op && kern_find(IR_OP_CONV_NHWC, f->variant))) {
            char names[512];
            kern_variant_names(op, NULL, names, sizeof names);
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "forced variant for '%s': %s has no variant named '%s'; it has: %s",
                            f->key, ir_op_name(op), f->variant, names);
        }
        s->forces[i].key = strcpy(w, f->key);
        w += strlen(f->key) + 1;
        s->forces[i].variant = strcpy(w, f->variant);
        w += strlen(f->variant) + 1;
    }
    s->cfg.forces = s->forces;
    s->cfg.n_forces = cfg->n_forces;
    return ANVIL_OK;
}

/* The layout pass's mode and the Conv nodes forces pin: a node forced onto a Conv variant stays
 * Conv, one forced onto an anvil.ConvNhwc variant is turned, and a force on the op type Conv
 * keeps every Conv. po->keep_conv (which also holds nhwc_conv) is the caller's to free. */
static anvil_status layout_options(const rt_session *s, pass_options *po) {
    po->layout = s->cfg.layout;
    const int nf = s->cfg.n_forces;
    const char **names = calloc((size_t)nf + 1, 2 * sizeof *names);
    if (!names) return ANVIL_ERR_OUT_OF_MEMORY;
    po->keep_conv = names;
    po->nhwc_conv = names + nf + 1;
    const char **keep = names, **turn = names + nf + 1;
    for (int i = 0; i < nf; i++) {
        const rt_force *f = &s->cfg.forces[i];
        if (!strcmp(f->key, ir_op_name(IR_OP_CONV))) po->keep_all_conv = true;
        if (kern_find(IR_OP_CONV, f->variant))
            keep[po->n_keep_conv++] = f->key;
        else if (kern_find(IR_OP_CONV_NHWC, f->variant))
            turn[po->n_nhwc_conv++] = f->key;
    }
    return ANVIL_OK;
}

/* What the session derives from the graph it runs: the rewritten graph, which inputs key
 * plans, and the constants' aligned bytes. */
static anvil_status graph_setup(rt_session *s) {
    s->g = s->src;
    if (s->cfg.opt_level >= 1) {
        pass_options po = {.opt_level = s->cfg.opt_level,
                           .released = s->cfg.released,
                           .released_ctx = s->cfg.released_ctx,
                           .unfused = (const char *const *)s->unfused,
                           .n_unfused = s->n_unfused};
        CORE_TRY(layout_options(s, &po));
        anvil_status st = pass_pipeline_run(s->src, &po, &s->pg);
        free((void *)po.keep_conv);
        CORE_TRY(st);
        s->g = s->pg->g;
    }
    const ir_graph *g = s->g;
    CORE_TRY(mark_shape_inputs(s));
    s->const_ptr = core_calloc((size_t)g->n_values + 1, sizeof *s->const_ptr);
    s->const_owned = core_calloc((size_t)g->n_values + 1, sizeof *s->const_owned);
    if (!s->const_ptr || !s->const_owned) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int32_t v = 0; v < g->n_values; v++)
        if (g->values[v].flags & IR_VALUE_CONST) CORE_TRY(const_materialize(s, v));
    return ANVIL_OK;
}

static void graph_teardown(rt_session *s) {
    for (int i = 0; i < s->n_plans; i++) plan_free(s->plans[i]);
    s->n_plans = 0;
    s->last = NULL;
    if (s->const_owned)
        for (int32_t v = 0; v < s->g->n_values; v++) free(s->const_owned[v]);
    free(s->const_owned);
    free(s->const_ptr);
    free(s->shape_input);
    s->const_owned = NULL;
    s->const_ptr = NULL;
    s->shape_input = NULL;
    pass_graph_free(s->pg);
    s->pg = NULL;
    s->g = s->src;
}

anvil_status rt_session_create(const ir_graph *g, const rt_session_config *cfg, rt_session **out) {
    *out = NULL;
    rt_session *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    s->g = s->src = g;
    s->cfg = *cfg;
    anvil_status st = copy_forces(s, cfg);
    if (st != ANVIL_OK) goto fail;
    if ((st = core_pool_create(cfg->threads, &s->pool)) != ANVIL_OK) goto fail;
    s->ctx.pool = s->pool;
    if ((st = graph_setup(s)) != ANVIL_OK) goto fail;
    s->t_origin = core_now_ns();
    *out = s;
    return ANVIL_OK;
fail:
    rt_session_free(s);
    return st;
}

void rt_session_free(rt_session *s) {
    if (!s) return;
    graph_teardown(s);
    for (int i = 0; i < s->n_unfused; i++) free(s->unfused[i]);
    free(s->unfused);
    free(s->events);
    free(s->forces);
    free(s->force_text);
    core_pool_free(s->pool);
    free(s);
}

/* A fusion matched on symbolic shapes did not hold for these inputs: rebuild the session's
 * graph without fusing that node (plans and trace events of the old graph are dropped). */
static anvil_status unfuse_node(rt_session *s, int32_t node) {
    for (int i = 0; i < s->n_unfused; i++)
        if (!strcmp(s->unfused[i], s->g->nodes[node].name))
            return core_err(ANVIL_ERR_INTERNAL, "%s: still fused after it was unfused",
                            ir_node_label(&s->g->nodes[node]));
    char *name = core_calloc(strlen(s->g->nodes[node].name) + 1, 1);
    char **list = realloc(s->unfused, ((size_t)s->n_unfused + 1) * sizeof *list);
    if (!name || !list) {
        free(name);
        if (list) s->unfused = list;
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    strcpy(name, s->g->nodes[node].name);
    s->unfused = list;
    s->unfused[s->n_unfused++] = name;
    graph_teardown(s);
    s->n_events = 0;
    return graph_setup(s);
}

static rt_plan *plan_lookup(rt_session *s, const int64_t *sig, size_t sig_len) {
    for (int i = 0; i < s->n_plans; i++) {
        rt_plan *p = s->plans[i];
        if (p->sig_len == sig_len && !memcmp(p->sig, sig, sig_len * sizeof *sig)) return p;
    }
    return NULL;
}

static void trace_add(rt_session *s, int32_t node, const char *variant, uint64_t t0, uint64_t t1) {
    if (s->n_events == s->cap_events) {
        if (s->cap_events >= RT_TRACE_MAX_EVENTS) {
            s->dropped_events++;
            return;
        }
        size_t cap = s->cap_events ? s->cap_events * 2 : 1024;
        rt_event *e = realloc(s->events, cap * sizeof *e);
        if (!e) {
            s->dropped_events++;
            return;
        }
        s->events = e;
        s->cap_events = cap;
    }
    s->events[s->n_events++] = (rt_event){node, s->runs, t0, t1, variant};
}

static void *loc_ptr(const rt_plan *p, const rt_loc *l, const anvil_tensor *const *inputs) {
    switch (l->kind) {
    case LOC_ARENA:
        return p->arena + l->offset;
    case LOC_INPUT:
        return inputs[l->input]->data;
    case LOC_CONST:
        return (void *)l->ptr;
    default:
        return NULL;
    }
}

/* The main graph's values while a run is in progress, for dynamic steps and for subgraphs that
 * read outer values. */
typedef struct run_frame {
    rt_frame base; /* first: lookup casts back */
    const rt_plan *p;
    const anvil_tensor *const *inputs;
    op_tensor *heap; /* per value; data set for LOC_HEAP values that are alive */
} run_frame;

static anvil_status run_lookup(const rt_frame *f, ir_vid v, op_tensor *out) {
    const run_frame *rf = (const run_frame *)f;
    const rt_plan *p = rf->p;
    if (v < 0 || v >= f->g->n_values)
        return core_err(ANVIL_ERR_INTERNAL, "value %d is outside the graph", (int)v);
    if (p->loc[v].kind == LOC_HEAP) {
        if (!rf->heap[v].data)
            return core_err(ANVIL_ERR_INTERNAL, "value '%s' is read after it was freed",
                            f->g->values[v].name);
        *out = rf->heap[v];
        return ANVIL_OK;
    }
    const op_tinfo *t = &p->shapes.info[v];
    out->dtype = t->dtype;
    out->rank = t->shape.rank;
    memcpy(out->dims, t->shape.d, sizeof out->dims);
    out->data = loc_ptr(p, &p->loc[v], rf->inputs);
    if (!out->data || !ir_shape_is_static(&t->shape))
        return core_err(ANVIL_ERR_INTERNAL, "value '%s' has no storage in this plan",
                        f->g->values[v].name);
    return ANVIL_OK;
}

static void heap_release(run_frame *rf) {
    for (int32_t h = 0; h < rf->p->n_heap; h++) op_tensor_release(&rf->heap[rf->p->heap_vals[h]]);
}

static anvil_status run_dynamic_step(rt_session *s, run_frame *rf, const rt_step *stp) {
    const ir_graph *g = s->g;
    const ir_node *n = &g->nodes[stp->node];
    const op_tensor *in[128];
    op_tensor in_t[128];
    op_tensor *out[128];
    for (int k = 0; k < n->n_inputs; k++) {
        in[k] = NULL;
        if (n->inputs[k] == IR_NONE) continue;
        CORE_TRY(run_lookup(&rf->base, n->inputs[k], &in_t[k]));
        in[k] = &in_t[k];
    }
    for (int k = 0; k < n->n_outputs; k++)
        out[k] = n->outputs[k] == IR_NONE ? NULL : &rf->heap[n->outputs[k]];
    return rt_node_run_dynamic(g, n, in, out, &s->ctx, &rf->base);
}

anvil_status rt_session_run(rt_session *s, const anvil_tensor *const *inputs, const bool *want,
                            anvil_tensor **outputs) {
    const ir_graph *g = s->g;
    for (int32_t j = 0; j < g->n_outputs; j++) outputs[j] = NULL;
    CORE_TRY(check_inputs(s, inputs));
    int64_t *sig;
    size_t sig_len;
    CORE_TRY(signature(s, inputs, &sig, &sig_len));
    rt_plan *p = plan_lookup(s, sig, sig_len);
    free(sig);
    while (!p) {
        int32_t unfuse;
        anvil_status st = plan_make(s, inputs, &p, &unfuse);
        if (st != ANVIL_OK && unfuse >= 0 && s->pg) {
            CORE_TRY(unfuse_node(s, unfuse));
            continue;
        }
        if (st != ANVIL_OK) return st;
        s->plans_made++;
        if (s->n_plans == RT_MAX_PLANS) {
            int oldest = 0;
            for (int i = 1; i < s->n_plans; i++)
                if (s->plans[i]->last_used < s->plans[oldest]->last_used) oldest = i;
            plan_free(s->plans[oldest]);
            s->plans[oldest] = s->plans[--s->n_plans];
        }
        s->plans[s->n_plans++] = p;
    }
    p->last_used = ++s->tick;
    s->last = p;
    g = s->g; /* unfuse_node may have rebuilt it */

    run_frame rf = {{g, NULL, run_lookup}, p, inputs, NULL};
    if (p->n_heap) {
        rf.heap = core_calloc((size_t)g->n_values + 1, sizeof *rf.heap);
        if (!rf.heap) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    anvil_status st = ANVIL_OK;
    uint64_t run_t0 = core_now_ns();
    for (int32_t i = 0; i < p->n_steps && st == ANVIL_OK; i++) {
        rt_step *stp = &p->steps[i];
        if (stp->alias) continue;
        const ir_node *n = &g->nodes[stp->node];
        if (stp->dynamic) {
            uint64_t t0 = s->cfg.profiling ? core_now_ns() : 0;
            st = run_dynamic_step(s, &rf, stp);
            if (st == ANVIL_OK && s->cfg.profiling)
                trace_add(s, stp->node, "dynamic", t0, core_now_ns());
            for (int32_t h = 0; h < p->n_heap; h++)
                if (p->heap_last[h] <= i) op_tensor_release(&rf.heap[p->heap_vals[h]]);
            continue;
        }
        const op_tensor *in[128];
        op_tensor *out[128];
        for (int k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] == IR_NONE) {
                in[k] = NULL;
                continue;
            }
            stp->in[k].data = p->loc[n->inputs[k]].kind == LOC_HEAP
                                  ? rf.heap[n->inputs[k]].data
                                  : loc_ptr(p, &p->loc[n->inputs[k]], inputs);
            in[k] = &stp->in[k];
        }
        for (int k = 0; k < n->n_outputs; k++) {
            if (n->outputs[k] == IR_NONE) {
                out[k] = NULL;
                continue;
            }
            stp->out[k].data = loc_ptr(p, &p->loc[n->outputs[k]], inputs);
            out[k] = &stp->out[k];
        }
        uint64_t t0 = s->cfg.profiling ? core_now_ns() : 0;
        st = stp->variant->run(n, stp->state, in, n->n_inputs, out, n->n_outputs, p->workspace,
                               &s->ctx);
        if (st == ANVIL_OK && stp->fusion_after)
            st = kern_fusion_apply(n, in, n->n_inputs, out[0], &s->ctx);
        if (st != ANVIL_OK) break;
        if (s->cfg.profiling) trace_add(s, stp->node, stp->variant->name, t0, core_now_ns());
        if (p->n_heap)
            for (int32_t h = 0; h < p->n_heap; h++)
                if (p->heap_last[h] == i) op_tensor_release(&rf.heap[p->heap_vals[h]]);
    }
    if (st != ANVIL_OK) {
        if (rf.heap) heap_release(&rf);
        free(rf.heap);
        return st;
    }
    uint64_t run_t1 = core_now_ns();
    if (s->cfg.profiling) trace_add(s, -1, "", run_t0, run_t1);
    s->runs++;

    for (int32_t j = 0; j < g->n_outputs; j++) {
        if (want && !want[j]) continue;
        ir_vid v = g->outputs[j];
        op_tensor t;
        st = run_lookup(&rf.base, v, &t);
        if (st == ANVIL_OK) st = rt_tensor_new(t.dtype, t.rank, t.dims, &outputs[j]);
        if (st == ANVIL_OK && outputs[j]->bytes) {
            const void *src = t.data;
            if (!src)
                st = core_err(ANVIL_ERR_INTERNAL, "output '%s' has no storage", g->values[v].name);
            else
                memcpy(outputs[j]->data, src, outputs[j]->bytes);
        }
        if (st != ANVIL_OK) {
            for (int32_t k = 0; k <= j; k++) {
                if (outputs[k]) {
                    free(outputs[k]->data);
                    free(outputs[k]);
                    outputs[k] = NULL;
                }
            }
            break;
        }
    }
    if (rf.heap) heap_release(&rf);
    free(rf.heap);
    return st;
}

anvil_status rt_session_stats(const rt_session *s, anvil_session_stats *out) {
    if (!s->last)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "the session has not run yet; statistics describe the last run's plan");
    memset(out, 0, sizeof *out);
    out->arena_bytes = s->last->arena_bytes;
    out->activation_bytes = s->last->activation_bytes;
    out->plans_made = s->plans_made;
    size_t run = 0;
    for (int32_t i = 0; i < s->last->n_steps; i++) run += !s->last->steps[i].alias;
    out->nodes_run = run;
    out->nodes_folded = s->last->shapes.folded_count;
    return ANVIL_OK;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

anvil_status rt_session_write_trace(const rt_session *s, const char *path) {
    if (!s->cfg.profiling)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "profiling is off for this session; enable it with "
                        "anvil_options_set_profiling before creating the session");
    FILE *f = fopen(path, "w");
    if (!f) return core_err(ANVIL_ERR_IO, "cannot open '%s' for writing", path);
    fprintf(f,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"runs\":%u,\"dropped_events\":%zu},"
            "\"traceEvents\":[\n",
            s->runs, s->dropped_events);
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"anvil\"}}");
    char shape[200];
    for (size_t i = 0; i < s->n_events; i++) {
        const rt_event *e = &s->events[i];
        double ts = (double)(e->t0 - s->t_origin) / 1e3, dur = (double)(e->t1 - e->t0) / 1e3;
        fputs(",\n{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":", f);
        if (e->node < 0) {
            fprintf(f, "\"run %u\",\"cat\":\"run\",\"ts\":%.3f,\"dur\":%.3f}", e->run, ts, dur);
            continue;
        }
        const ir_node *n = &s->g->nodes[e->node];
        json_string(f, n->name);
        fprintf(f,
                ",\"cat\":\"op\",\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"op\":\"%s\",\"variant\":", ts,
                dur, ir_op_name(n->op));
        json_string(f, e->variant);
        fprintf(f, ",\"run\":%u", e->run);
        if (n->n_outputs > 0 && n->outputs[0] != IR_NONE)
            fprintf(f, ",\"shape\":\"%s\"",
                    ir_shape_str(s->g, &s->g->values[n->outputs[0]].shape, shape, sizeof shape));
        fputs("}}", f);
    }
    fputs("\n]}\n", f);
    if (fclose(f) != 0) return core_err(ANVIL_ERR_IO, "writing '%s' failed", path);
    return ANVIL_OK;
}
