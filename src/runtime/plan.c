/* Plans: one per input-shape signature. Shapes are inferred with every dim concrete, nodes whose
 * inputs are all known are folded (evaluated once), a variant is chosen for every other node, and
 * each activation gets an offset in one arena from liveness analysis. Reshape-like nodes alias
 * their input and never run; elementwise nodes may write over an input that dies with them.
 *
 * Nodes whose output shapes can only be known by running (NonZero, If, Loop, ... and whatever
 * they feed) become dynamic steps, which session.c runs through the interpreter. */
#include "runtime/session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- plans --------------------------------------------------------------------------------- */

void rt_plan_free(rt_plan *p) {
    if (!p) return;
    for (int32_t i = 0; i < p->n_steps; i++) {
        rt_step *st = &p->steps[i];
        if (st->state && st->variant->release) st->variant->release(st->state);
        rt_online_free(st->online);
        rt_step_alts_free(st);
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
    rt_ogroups_free(p);
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

anvil_status rt_check_inputs(const rt_session *s, const anvil_tensor *const *inputs) {
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
anvil_status rt_plan_signature(const rt_session *s, const anvil_tensor *const *inputs,
                               int64_t **out, size_t *len) {
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

anvil_status rt_mark_shape_inputs(rt_session *s) {
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

/* The variant for a node: a force by node name is strict, one by op type applies where it can;
 * then a training layer's grouped choice (group_choice, -1: the group's decision); then the
 * tuning database (exact key, then nearest
 * shape); then the cascade. */
static anvil_status select_variant(const rt_session *s, const kern_node *kn, int group_choice,
                                   tune_choice *out) {
    const ir_node *n = kn->node;
    const char *by_op = NULL;
    memset(out, 0, sizeof *out);
    out->why = TUNE_WHY_FORCED;
    for (int i = 0; i < s->cfg.n_forces; i++) {
        const rt_force *f = &s->cfg.forces[i];
        if (!strcmp(f->key, n->name)) return kern_select(kn, f->variant, &out->v);
        if (!strcmp(f->key, ir_op_name(n->op))) by_op = f->variant;
    }
    if (by_op) {
        const kern_variant *v = kern_find(n->op, by_op);
        if (v && kern_applies(v, kn, core_hw_get())) {
            out->v = v;
            return ANVIL_OK;
        }
    }
    /* a training layer's grouped choice (train_groups.c) */
    bool anvil_only = false;
    if (rt_train_group_select(s, kn, group_choice, &anvil_only, out)) return ANVIL_OK;
    if (s->cfg.db) {
        bool found = false;
        anvil_status st = tune_lookup(s->cfg.db, s->cfg.fingerprint, kn, out, &found);
        if (st != ANVIL_OK) return st;
        if (found && !(anvil_only && rt_variant_is_vendor(out->v))) return ANVIL_OK;
        memset(out, 0, sizeof *out);
    }
    out->why = TUNE_WHY_CASCADE;
    return kern_select(kn, NULL, &out->v);
}

/* select_variant for a plan that anvil compile will emit: the choice where it has an emitter,
 * else the first variant of the cascade that has one and applies (the choice stands when none
 * does; rt_session_emit then lists the node). */
static anvil_status select_emittable(const rt_session *s, const kern_node *kn, tune_choice *out) {
    CORE_TRY(select_variant(s, kn, -1, out));
    if (!s->cfg.emittable_only || kern_emittable(out->v, kn)) return ANVIL_OK;
    size_t count;
    const kern_variant *const *vs = kern_variants(kn->node->op, &count);
    for (size_t i = 0; i < count; i++)
        if (kern_emittable(vs[i], kn) && kern_applies(vs[i], kn, core_hw_get())) {
            memset(out, 0, sizeof *out);
            out->v = vs[i];
            out->why = TUNE_WHY_CASCADE;
            return ANVIL_OK;
        }
    return ANVIL_OK;
}

/* A member of a training layer's grouped choice tried online (online_group.c): the node's
 * variant under every choice, prepared; the step runs the choice of the run. Copies of
 * constants are not reported (a group's members read trainable weights, not constants). */
static anvil_status prepare_alts(rt_session *s, rt_plan *p, const kern_node *kn0, rt_step *stp,
                                 int gi) {
    const rt_group *gr = &s->groups[gi];
    stp->alts = core_calloc(RT_OGROUP_MAX_CHOICES, sizeof *stp->alts);
    if (!stp->alts) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int c = 0; c < gr->n_choices && c < RT_OGROUP_MAX_CHOICES; c++) {
        rt_alt *a = &stp->alts[c];
        tune_choice ch;
        CORE_TRY(select_variant(s, kn0, c, &ch));
        a->v = ch.v;
        a->config = ch.cfg;
        a->threads = ch.threads;
        uint32_t copied = 0;
        kern_node kn = *kn0;
        kn.copied = &copied;
        kn.config = &a->config;
        if (a->threads > 0) kn.threads = a->threads;
        a->fusion_after = kern_fusion_pending(a->v, &kn);
        if (a->v->prepare) CORE_TRY(a->v->prepare(&kn, &a->state));
        const size_t ws = a->v->workspace_size ? a->v->workspace_size(&kn) : 0;
        if (ws > stp->workspace) stp->workspace = ws;
    }
    rt_ogroup *og = rt_ogroup_find(p, gr->key);
    if (!og)
        CORE_TRY(
            rt_ogroup_new(p, gr->key, gr->choice_names, gr->n_choices, s->cfg.online_rounds, &og));
    rt_ogroup_join(og, stp);
    /* what --explain shows while the group is tried: the rule's choice */
    stp->variant = stp->alts[0].v;
    stp->config = stp->alts[0].config;
    stp->threads = stp->alts[0].threads;
    stp->fusion_after = stp->alts[0].fusion_after;
    stp->why = TUNE_WHY_ONLINE;
    return ANVIL_OK;
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
 * of the session's is freed (const_ptr cleared; rt_const_materialize makes it again if a later
 * plan needs it); bytes in the model's mapping are released to the OS (the mapping is private
 * and read-only, so pages read again fault back in from the file with the same bytes). An
 * earlier plan may still point at a freed copy, but only from steps that copied it and never
 * read it. */
static void release_step(rt_session *s, int32_t *readers, const ir_node *n, uint32_t copied) {
    /* a plan that anvil compile writes out reads the constants again while it emits */
    if (!readers || s->cfg.emittable_only) return;
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
            /* folded weights: computed again by rt_const_materialize if a later plan needs them */
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
anvil_status rt_const_materialize(rt_session *s, ir_vid v) {
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
anvil_status rt_plan_make(rt_session *s, const anvil_tensor *const *inputs, rt_plan **out,
                          int32_t *unfuse) {
    const ir_graph *g = s->g;
    *out = NULL;
    *unfuse = -1;
    rt_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = ANVIL_OK;
    int32_t *uf = NULL, *def = NULL, *last = NULL, *gidx = NULL, *readers = NULL;
    group *groups = NULL;

    if ((st = rt_plan_signature(s, inputs, &p->sig, &p->sig_len)) != ANVIL_OK) goto fail;

    /* 1. shapes with every input concrete; fold what is known */
    if ((st = rt_shapes_init(&p->shapes, g)) != ANVIL_OK) goto fail;
    rt_shapes *sh = &p->shapes;
    for (int32_t v = 0; v < g->n_values; v++) {
        if (g->values[v].flags & IR_VALUE_CONST) {
            if (!s->const_ptr[v] && (st = rt_const_materialize(s, v)) != ANVIL_OK) goto fail;
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
        kern_node kn = {n, in, n->n_inputs, outi, n->n_outputs, s->cfg.threads, &copied, NULL};
        if ((st = kern_fusion_check(&kn)) != ANVIL_OK) {
            *unfuse = k;
            goto fail;
        }
        if (s->cfg.on_node && (st = s->cfg.on_node(s->cfg.on_node_arg, &kn)) != ANVIL_OK) goto fail;
        /* a training layer whose grouped choice is tried online runs every choice in turn */
        const int og = rt_train_group_online(s, n);
        if (og >= 0 && (st = prepare_alts(s, p, &kn, stp, og)) != ANVIL_OK) goto fail;
        if (og < 0) {
            tune_choice ch;
            if ((st = select_emittable(s, &kn, &ch)) != ANVIL_OK) goto fail;
            stp->variant = ch.v;
            stp->config = ch.cfg;
            stp->threads = ch.threads;
            stp->why = ch.why;
            if (s->cfg.online_rounds > 0 && ch.why != TUNE_WHY_FORCED && ch.why != TUNE_WHY_DB &&
                (st = rt_online_setup(s, p, &kn, stp)) != ANVIL_OK)
                goto fail;
            kn.config = &stp->config;
            if (stp->threads > 0) kn.threads = stp->threads;
            if (!stp->online) {
                stp->fusion_after = kern_fusion_pending(stp->variant, &kn);
                if (stp->variant->prepare &&
                    (st = stp->variant->prepare(&kn, &stp->state)) != ANVIL_OK)
                    goto fail;
                stp->workspace =
                    stp->variant->workspace_size ? stp->variant->workspace_size(&kn) : 0;
            }
        }
        release_step(s, readers, n, copied);
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
    p->tuning = rt_online_pending(p) + rt_ogroups_pending(p) > 0;
    goto done;
oom:
    st = ANVIL_ERR_OUT_OF_MEMORY;
fail:
    rt_plan_free(p);
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
