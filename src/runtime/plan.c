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
        tune_online_free(st->online);
        rt_step_alts_free(st);
        free(st->in);
        free(st->out);
    }
    free(p->steps);
    free(p->loc);
    free(p->bf16);
    free(p->arena);
    free(p->workspace);
    free(p->sig);
    free(p->heap_vals);
    free(p->heap_last);
    rt_ogroups_free(p);
    rt_shapes_free(&p->shapes);
    free(p);
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
 * does; emit_library then lists the node). */
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

/* ---- making a plan: shapes, steps, memory ---------------------------------------------------- */

/* Shapes with every input concrete; what is known is folded (evaluated once, here). */
static anvil_status plan_shapes(rt_session *s, rt_plan *p, const anvil_tensor *const *inputs) {
    const ir_graph *g = s->g;
    CORE_TRY(rt_shapes_init(&p->shapes, g));
    rt_shapes *sh = &p->shapes;
    for (int32_t v = 0; v < g->n_values; v++) {
        if (g->values[v].flags & IR_VALUE_CONST) {
            if (!s->const_ptr[v]) CORE_TRY(rt_const_materialize(s, v));
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
            if (!sh->owned[v]) return ANVIL_ERR_OUT_OF_MEMORY;
            if (inputs[i]->bytes) memcpy(sh->owned[v], inputs[i]->data, inputs[i]->bytes);
            t->value = sh->owned[v];
        }
    }
    rt_infer_opts io = {.fold_limit_bytes = SIZE_MAX,
                        .require_static = true,
                        .allow_dynamic = true,
                        .ctx = &s->ctx,
                        .apply_fusion = kern_fusion_apply};
    return rt_shapes_infer(g, sh, &io);
}

/* The step's variant: a training layer whose grouped choice is tried online prepares every
 * choice's; otherwise the selection (forces, group, database, cascade), then either the online
 * tuner's candidates or the chosen variant prepared (weights packed) with its workspace. */
static anvil_status choose_variant(rt_session *s, rt_plan *p, kern_node *kn, rt_step *stp) {
    const int og = rt_train_group_online(s, kn->node);
    if (og >= 0) return prepare_alts(s, p, kn, stp, og);
    tune_choice ch;
    CORE_TRY(select_emittable(s, kn, &ch));
    stp->variant = ch.v;
    stp->config = ch.cfg;
    stp->threads = ch.threads;
    stp->why = ch.why;
    if (s->cfg.online_rounds > 0 && ch.why != TUNE_WHY_FORCED && ch.why != TUNE_WHY_DB)
        CORE_TRY(rt_online_setup(s, p, kn, stp));
    kn->config = &stp->config;
    if (stp->threads > 0) kn->threads = stp->threads;
    if (stp->online) return ANVIL_OK;
    stp->fusion_after = kern_fusion_pending(stp->variant, kn);
    if (stp->variant->prepare) CORE_TRY(stp->variant->prepare(kn, &stp->state));
    stp->workspace = stp->variant->workspace_size ? stp->variant->workspace_size(kn) : 0;
    return ANVIL_OK;
}

/* The step's tensor templates, whose data pointers each run binds. */
static anvil_status step_templates(rt_step *stp, const ir_node *n, const op_tinfo *in,
                                   const op_tinfo *out) {
    stp->in = core_calloc((size_t)n->n_inputs + 1, sizeof *stp->in);
    stp->out = core_calloc((size_t)n->n_outputs + 1, sizeof *stp->out);
    if (!stp->in || !stp->out) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n->n_inputs; i++) {
        stp->in[i].dtype = in[i].dtype;
        stp->in[i].rank = in[i].shape.rank;
        memcpy(stp->in[i].dims, in[i].shape.d, sizeof stp->in[i].dims);
    }
    for (int i = 0; i < n->n_outputs; i++) {
        stp->out[i].dtype = out[i].dtype;
        stp->out[i].rank = out[i].shape.rank;
        memcpy(stp->out[i].dims, out[i].shape.d, sizeof stp->out[i].dims);
    }
    return ANVIL_OK;
}

void rt_node_infos(const rt_shapes *sh, const ir_vid *vals, int n, op_tinfo *out) {
    for (int i = 0; i < n; i++) {
        if (vals[i] == IR_NONE) {
            memset(&out[i], 0, sizeof out[i]);
            ir_shape_unknown(&out[i].shape);
        } else {
            out[i] = sh->info[vals[i]];
        }
    }
}

/* A step for every node not folded: dynamic ones run by the interpreter, the others through
 * their chosen variant. The model's constants each step copied are released as the last step
 * reading them is made. *unfuse as rt_plan_make. */
static anvil_status plan_steps(rt_session *s, rt_plan *p, int32_t *unfuse) {
    const ir_graph *g = s->g;
    const rt_shapes *sh = &p->shapes;
    int32_t *readers = release_readers(s, sh);
    p->loc = core_calloc((size_t)g->n_values + 1, sizeof *p->loc);
    p->steps = core_calloc((size_t)g->n_nodes + 1, sizeof *p->steps);
    if (!p->loc || !p->steps) {
        free(readers);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
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
    anvil_status st = ANVIL_OK;
    for (int32_t k = 0; k < g->n_nodes && st == ANVIL_OK; k++) {
        if (sh->folded[k]) continue;
        const ir_node *n = &g->nodes[k];
        rt_step *stp = &p->steps[p->n_steps++];
        stp->node = k;
        if (sh->dynamic[k]) {
            stp->dynamic = true;
            continue;
        }
        op_tinfo in[128], outi[128];
        rt_node_infos(sh, n->inputs, n->n_inputs, in);
        rt_node_infos(sh, n->outputs, n->n_outputs, outi);
        uint32_t copied = 0;
        kern_node kn = {n,       in,   n->n_inputs,  outi, n->n_outputs, s->cfg.threads,
                        &copied, NULL, &s->cfg.knobs};
        if ((st = kern_fusion_check(&kn)) != ANVIL_OK) {
            *unfuse = k;
            break;
        }
        if (s->cfg.on_node && (st = s->cfg.on_node(s->cfg.on_node_arg, &kn)) != ANVIL_OK) break;
        if ((st = choose_variant(s, p, &kn, stp)) != ANVIL_OK) break;
        release_step(s, readers, n, copied);
        if (stp->workspace > p->workspace_bytes) p->workspace_bytes = stp->workspace;
        st = step_templates(stp, n, in, outi);
    }
    free(readers);
    return st;
}

anvil_status rt_plan_make(rt_session *s, const anvil_tensor *const *inputs, rt_plan **out,
                          int32_t *unfuse) {
    *out = NULL;
    *unfuse = -1;
    rt_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = rt_plan_signature(s, inputs, &p->sig, &p->sig_len);
    if (st == ANVIL_OK) st = plan_shapes(s, p, inputs);
    if (st == ANVIL_OK) st = plan_steps(s, p, unfuse);
    if (st == ANVIL_OK) st = rt_plan_store(s, p);
    if (st == ANVIL_OK) st = rt_plan_memory(s->g, p);
    if (st != ANVIL_OK) {
        rt_plan_free(p);
        return st;
    }
    p->tuning = rt_online_pending(p) + rt_ogroups_pending(p) > 0;
    *out = p;
    return ANVIL_OK;
}
