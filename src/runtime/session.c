/* Sessions and the executor. A session owns the rewritten graph, its constants, its thread pool
 * and a small cache of plans (plan.c), one per input-shape signature; a run binds the caller's
 * input pointers and calls the plan's variants in order. Dynamic steps infer their shapes from
 * the actual values and keep their outputs on the heap until their last reader (subgraph readers
 * included) has run, so a plan without dynamic steps allocates nothing per run. */
#include "runtime/session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                           .off = s->cfg.passes_off,
                           .released = s->cfg.released,
                           .released_ctx = s->cfg.released_ctx,
                           .unfused = (const char *const *)s->unfused,
                           .n_unfused = s->n_unfused,
                           .parallel_gemm = s->cfg.parallel_gemm,
                           .b2b = s->cfg.b2b,
                           .decide = rt_decide,
                           .decide_arg = s};
        rt_groups_clear(s);
        CORE_TRY(layout_options(s, &po));
        anvil_status st = pass_pipeline_run(s->src, &po, &s->pg);
        free((void *)po.keep_conv);
        CORE_TRY(st);
        s->g = s->pg->g;
    }
    const ir_graph *g = s->g;
    CORE_TRY(rt_mark_shape_inputs(s));
    s->const_ptr = core_calloc((size_t)g->n_values + 1, sizeof *s->const_ptr);
    s->const_owned = core_calloc((size_t)g->n_values + 1, sizeof *s->const_owned);
    if (!s->const_ptr || !s->const_owned) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int32_t v = 0; v < g->n_values; v++)
        if (g->values[v].flags & IR_VALUE_CONST) CORE_TRY(rt_const_materialize(s, v));
    if (s->cfg.opt_level >= 1) CORE_TRY(rt_train_groups(s));
    return ANVIL_OK;
}

static void graph_teardown(rt_session *s) {
    for (int i = 0; i < s->n_plans; i++) rt_plan_free(s->plans[i]);
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
    rt_train_groups_free(s);
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
    if (cfg->pool) {
        s->pool = cfg->pool;
    } else {
        if ((st = core_pool_create(cfg->threads, &s->pool)) != ANVIL_OK) goto fail;
        s->own_pool = true;
    }
    s->ctx.pool = s->pool;
    /* Subgraphs run compiled where passes run at all; at level 0 the interpreter, the
     * reference, runs them (subgraph.c decides, and counts). */
    s->ctx.subgraph = rt_subgraph_compiled;
    s->ctx.subgraph_arg = s;
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
    rt_groups_clear(s);
    rt_subgraphs_free(s);
    free(s->scope);
    if (s->own_pool) core_pool_free(s->pool);
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

static void trace_add(rt_session *s, int32_t node, const char *variant, const char *runs,
                      tune_why why, uint64_t t0, uint64_t t1) {
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
    s->events[s->n_events++] = (rt_event){node, s->runs, t0, t1, variant, runs, why};
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
    rt_plan *p;    /* steps bind their tensors to this run's storage */
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

/* The plan cache: the least recently used plan goes when it is full. */
static void plan_cache_add(rt_session *s, rt_plan *p) {
    if (s->n_plans == RT_MAX_PLANS) {
        int oldest = 0;
        for (int i = 1; i < s->n_plans; i++)
            if (s->plans[i]->last_used < s->plans[oldest]->last_used) oldest = i;
        rt_plan_free(s->plans[oldest]);
        s->plans[oldest] = s->plans[--s->n_plans];
    }
    s->plans[s->n_plans++] = p;
}

/* The plan for these inputs: cached for their signature, or made. A fused epilogue that the
 * concrete shapes do not fit (a residual matched on symbolic shapes) is taken out of the graph
 * and the plan made again. *out borrowed from the session's cache. */
static anvil_status plan_for(rt_session *s, const anvil_tensor *const *inputs, rt_plan **out) {
    int64_t *sig;
    size_t sig_len;
    CORE_TRY(rt_plan_signature(s, inputs, &sig, &sig_len));
    rt_plan *p = plan_lookup(s, sig, sig_len);
    free(sig);
    while (!p) {
        int32_t unfuse;
        anvil_status st = rt_plan_make(s, inputs, &p, &unfuse);
        if (st != ANVIL_OK && unfuse >= 0 && s->pg) {
            CORE_TRY(unfuse_node(s, unfuse));
            continue;
        }
        if (st != ANVIL_OK) return st;
        s->plans_made++;
        plan_cache_add(s, p);
    }
    p->last_used = ++s->tick;
    s->last = p;
    *out = p;
    return ANVIL_OK;
}

/* A dynamic step, timed when profiling; then the heap values whose last reader it was go. */
static anvil_status run_dynamic_timed(rt_session *s, run_frame *rf, int32_t i) {
    const rt_plan *p = rf->p;
    const rt_step *stp = &p->steps[i];
    uint64_t t0 = s->cfg.profiling ? core_now_ns() : 0;
    anvil_status st = run_dynamic_step(s, rf, stp);
    if (st == ANVIL_OK && s->cfg.profiling) {
        uint64_t t1 = core_now_ns();
        trace_add(s, stp->node, "dynamic", NULL, TUNE_WHY_CASCADE, t0, t1);
        /* a dynamic step runs its reference kernel; one that runs bodies is timed there instead
         * (compiled: by the nested session, else as interpreted) */
        if (!rt_node_has_subgraph(&s->g->nodes[stp->node])) s->prof_ref_ns += t1 - t0;
    }
    for (int32_t h = 0; h < p->n_heap; h++)
        if (p->heap_last[h] <= i) op_tensor_release(&rf->heap[p->heap_vals[h]]);
    return st;
}

/* A step through its variant: the tensors bound to this run's storage, the variant the step runs
 * this time (its choice, or the online tuner's current candidate or grouped choice), its fused
 * epilogue, the sample for the online tuner and the trace event. */
static anvil_status run_variant_step(rt_session *s, run_frame *rf, int32_t i) {
    rt_plan *p = rf->p;
    rt_step *stp = &p->steps[i];
    const ir_node *n = &s->g->nodes[stp->node];
    const op_tensor *in[128];
    op_tensor *out[128];
    for (int k = 0; k < n->n_inputs; k++) {
        if (n->inputs[k] == IR_NONE) {
            in[k] = NULL;
            continue;
        }
        stp->in[k].data = p->loc[n->inputs[k]].kind == LOC_HEAP
                              ? rf->heap[n->inputs[k]].data
                              : loc_ptr(p, &p->loc[n->inputs[k]], rf->inputs);
        in[k] = &stp->in[k];
    }
    for (int k = 0; k < n->n_outputs; k++) {
        if (n->outputs[k] == IR_NONE) {
            out[k] = NULL;
            continue;
        }
        stp->out[k].data = loc_ptr(p, &p->loc[n->outputs[k]], rf->inputs);
        out[k] = &stp->out[k];
    }
    const kern_variant *v = stp->variant;
    void *state = stp->state;
    bool fusion_after = stp->fusion_after;
    int threads = stp->threads;
    if (stp->online) tune_online_current(stp->online, &v, &state, &fusion_after, &threads);
    if (stp->ogroup) {
        const rt_alt *a = rt_ogroup_current(stp);
        v = a->v;
        state = a->state;
        fusion_after = a->fusion_after;
        threads = a->threads;
    }
    const bool timed = s->cfg.profiling || stp->online || stp->ogroup;
    uint64_t t0 = timed ? core_now_ns() : 0;
    s->ctx.threads = threads;
    anvil_status st = v->run(n, state, in, n->n_inputs, out, n->n_outputs, p->workspace, &s->ctx);
    if (st == ANVIL_OK && fusion_after) st = kern_fusion_apply(n, in, n->n_inputs, out[0], &s->ctx);
    s->ctx.threads = 0;
    if (st != ANVIL_OK) return st;
    uint64_t t1 = timed ? core_now_ns() : 0;
    if (stp->online) tune_online_sample(stp->online, t1 - t0);
    if (stp->ogroup) rt_ogroup_sample(stp, t1 - t0);
    if (s->cfg.profiling) {
        const kern_variant *d = kern_delegate(v, state);
        trace_add(s, stp->node, v->name, d ? d->name : NULL, stp->why, t0, t1);
        if (v == kern_reference(n->op)) s->prof_ref_ns += t1 - t0;
    }
    for (int32_t h = 0; h < p->n_heap; h++)
        if (p->heap_last[h] == i) op_tensor_release(&rf->heap[p->heap_vals[h]]);
    return ANVIL_OK;
}

/* The executor: every step of the plan in order (aliases have nothing to run). */
static anvil_status run_steps(rt_session *s, run_frame *rf) {
    const rt_plan *p = rf->p;
    uint64_t run_t0 = core_now_ns();
    for (int32_t i = 0; i < p->n_steps; i++) {
        const rt_step *stp = &p->steps[i];
        if (stp->alias) continue;
        CORE_TRY(stp->dynamic ? run_dynamic_timed(s, rf, i) : run_variant_step(s, rf, i));
    }
    uint64_t run_t1 = core_now_ns();
    if (s->cfg.profiling) {
        trace_add(s, -1, "", NULL, TUNE_WHY_CASCADE, run_t0, run_t1);
        s->prof_run_ns += run_t1 - run_t0;
    }
    s->runs++;
    return ANVIL_OK;
}

/* After a successful run of a plan still tuning online: samples in, next candidates, winners
 * locked. A winner the database could not take is still locked in for this session, so a failure
 * here is a warning, not the run's failure. */
static void online_after_run(rt_session *s, rt_plan *p) {
    if (!p->tuning) return;
    const anvil_status nodes = rt_online_after_run(s, p);
    if (nodes != ANVIL_OK || rt_ogroups_after_run(s, p) != ANVIL_OK) {
        core_log(CORE_LOG_WARN, "online tuning: %s", core_err_message());
        core_err_clear();
        if (nodes != ANVIL_OK) (void)rt_ogroups_after_run(s, p);
    }
    p->tuning = rt_online_pending(p) + rt_ogroups_pending(p) > 0;
}

/* The wanted outputs: each handed to visit (borrowed), or copied into a new tensor of outputs
 * (on failure none is left). */
static anvil_status deliver_outputs(const rt_session *s, run_frame *rf, const bool *want,
                                    anvil_tensor **outputs, rt_output_fn visit, void *visit_arg) {
    const ir_graph *g = s->g;
    anvil_status st = ANVIL_OK;
    for (int32_t j = 0; j < g->n_outputs; j++) {
        if (want && !want[j]) continue;
        ir_vid v = g->outputs[j];
        op_tensor t;
        st = run_lookup(&rf->base, v, &t);
        if (visit) {
            if (st == ANVIL_OK) st = visit(visit_arg, j, &t);
            if (st != ANVIL_OK) break;
            continue;
        }
        if (st == ANVIL_OK) st = rt_tensor_new_uninit(t.dtype, t.rank, t.dims, &outputs[j]);
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
    return st;
}

static anvil_status run_impl(rt_session *s, const anvil_tensor *const *inputs, const bool *want,
                             anvil_tensor **outputs, rt_output_fn visit, void *visit_arg) {
    for (int32_t j = 0; outputs && j < s->g->n_outputs; j++) outputs[j] = NULL;
    CORE_TRY(rt_check_inputs(s, inputs));
    rt_plan *p;
    CORE_TRY(plan_for(s, inputs, &p));
    const ir_graph *g = s->g; /* after plan_for, which may have rebuilt it */
    run_frame rf = {{g, NULL, run_lookup}, p, inputs, NULL};
    if (p->n_heap) {
        rf.heap = core_calloc((size_t)g->n_values + 1, sizeof *rf.heap);
        if (!rf.heap) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    anvil_status st = run_steps(s, &rf);
    if (st == ANVIL_OK) {
        online_after_run(s, p);
        st = deliver_outputs(s, &rf, want, outputs, visit, visit_arg);
    }
    if (rf.heap) heap_release(&rf);
    free(rf.heap);
    return st;
}

anvil_status rt_session_run(rt_session *s, const anvil_tensor *const *inputs, const bool *want,
                            anvil_tensor **outputs) {
    return run_impl(s, inputs, want, outputs, NULL, NULL);
}

anvil_status rt_session_run_visit(rt_session *s, const anvil_tensor *const *inputs,
                                  const bool *want, rt_output_fn visit, void *arg) {
    return run_impl(s, inputs, want, NULL, visit, arg);
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
    out->nodes_tuning = (size_t)rt_online_pending(s->last);
    out->subgraph_runs_compiled = s->sub_runs_compiled;
    out->subgraph_runs_interpreted = s->sub_runs_interpreted;
    out->profiled_ns = s->prof_run_ns;
    out->reference_ns = s->prof_ref_ns;
    out->interpreted_ns = s->prof_interp_ns;
    rt_subgraphs_add_stats(s, out);
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
        if (e->runs) {
            fputs(",\"runs\":", f);
            json_string(f, e->runs);
        }
        fprintf(f, ",\"source\":\"%s\",\"run\":%u", tune_why_name(e->why), e->run);
        if (n->n_outputs > 0 && n->outputs[0] != IR_NONE)
            fprintf(f, ",\"shape\":\"%s\"",
                    ir_shape_str(s->g, &s->g->values[n->outputs[0]].shape, shape, sizeof shape));
        fputs("}}", f);
    }
    fputs("\n]}\n", f);
    if (fclose(f) != 0) return core_err(ANVIL_ERR_IO, "writing '%s' failed", path);
    return ANVIL_OK;
}

anvil_status rt_session_explain(const rt_session *s, void (*fn)(void *arg, const rt_step_info *),
                                void *arg) {
    const rt_plan *p = s->last;
    if (!p)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "the session has not run yet: there is no plan to explain");
    /* regions only for the main graph: a body's steps are not connected to its parent's */
    rt_regions regions = {0};
    if (!s->scope) CORE_TRY(rt_session_regions(s, &regions));
    for (int32_t i = 0; i < p->n_steps; i++) {
        const rt_step *stp = &p->steps[i];
        const ir_node *n = &s->g->nodes[stp->node];
        rt_step_info info = {.node = n->name,
                             .region = regions.step_region ? regions.step_region[i] : 0,
                             .scope = s->scope,
                             .op = ir_op_name(n->op),
                             .variant = stp->dynamic ? "dynamic" : stp->variant->name,
                             .why = stp->why,
                             .dynamic = stp->dynamic,
                             .tuning = stp->online != NULL};
        if (!stp->dynamic && !stp->alias)
            tune_params_format(stp->variant, &stp->config, stp->threads, info.params,
                               sizeof info.params);
        if (stp->alias) info.variant = "alias";
        const kern_variant *d =
            stp->dynamic || stp->alias ? NULL : kern_delegate(stp->variant, stp->state);
        info.runs = d ? d->name : NULL;
        info.rounds_bf16 = (rt_step_rounds(stp) & KERN_ROUNDS_BF16) != 0;
        info.rounds_fp16 = (rt_step_rounds(stp) & KERN_ROUNDS_FP16) != 0;
        info.int8 = !stp->dynamic && !stp->alias && stp->variant &&
                    (stp->variant->needs & KERN_NEEDS_AVX512_VNNI) != 0;
        for (int k = 0; !stp->dynamic && k < n->n_inputs + n->n_outputs; k++) {
            const op_tensor *t = k < n->n_inputs ? &stp->in[k] : &stp->out[k - n->n_inputs];
            ir_vid v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
            size_t b;
            if (v != IR_NONE && core_tensor_bytes(t->dtype, t->dims, t->rank, &b)) info.bytes += b;
        }
        for (int k = 0; !stp->dynamic && k < n->n_inputs && k < 32; k++)
            if (n->inputs[k] != IR_NONE && stp->in[k].dtype == ANVIL_DTYPE_BFLOAT16 &&
                s->g->values[n->inputs[k]].dtype != ANVIL_DTYPE_BFLOAT16)
                info.bf16_in |= 1u << k;
        for (int k = 0; !stp->dynamic && k < n->n_outputs && k < 32; k++)
            if (n->outputs[k] != IR_NONE && stp->out[k].dtype == ANVIL_DTYPE_BFLOAT16 &&
                s->g->values[n->outputs[k]].dtype != ANVIL_DTYPE_BFLOAT16)
                info.bf16_out |= 1u << k;
        info.flops = ir_node_flops(s->g, n);
        fn(arg, &info);
    }
    rt_regions_free(&regions);
    rt_subgraphs_explain(s, fn, arg);
    return ANVIL_OK;
}

/* ---- read access for the layers above (plan.h) ----------------------------------------------- */

const ir_graph *rt_session_graph(const rt_session *s) {
    return s->g;
}

const rt_plan *rt_session_last_plan(const rt_session *s) {
    return s->last;
}

const rt_session_config *rt_session_config_of(const rt_session *s) {
    return &s->cfg;
}

bool rt_session_input_decides_shapes(const rt_session *s, int32_t i) {
    return s->shape_input && i >= 0 && i < s->g->n_inputs && s->shape_input[i];
}

bool rt_session_has_compiled_bodies(const rt_session *s) {
    return s->n_subs > 0;
}

void rt_session_trace(const rt_session *s, const rt_event **events, size_t *n) {
    *events = s->events;
    *n = s->n_events;
}

void rt_session_trace_clear(rt_session *s) {
    s->n_events = 0;
}
