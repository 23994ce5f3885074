/* Compiled subgraphs: the bodies of If, Loop and Scan run as sessions of their own.
 *
 * A body is turned into an ordinary graph (flatten): the values it reads from enclosing graphs
 * become inputs of its own, except constants, which stay constants so that its kernels can pack
 * their weights once. That graph then gets what the main graph gets (the passes, a variant per
 * node from the database or the cascade, a planned arena) from a nested session that shares the
 * outer session's thread pool and tuning database. A body is compiled once per signature of its
 * inputs (dtype and dims of the body's inputs and of the outer values it reads); the nested
 * session's own plan cache covers inputs whose contents decide shapes.
 *
 * The interpreter (interp.c) stays the reference: sessions at opt level 0 use it, and a body
 * falls back to it when it cannot be compiled or when its shapes keep changing (a Loop whose
 * carried value grows every iteration would otherwise plan on every call). */
#include "runtime/session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Signatures one body may be compiled for before it is interpreted instead. */
#define SUB_MAX_SIGS 8
/* Plans one compiled body may make before it is interpreted instead. */
#define SUB_MAX_PLANS 32

/* One signature of a body, compiled. */
typedef struct sub_entry {
    int64_t *sig; /* dtype, rank and dims of the body's inputs, then of its outer values */
    size_t sig_len;
    ir_graph *flat;   /* owned: the body as a graph of its own */
    rt_session *sess; /* owned */
} sub_entry;

struct rt_sub {
    const ir_graph *body; /* the model's body (borrowed): the key */
    /* Every name body (at any depth) reads from above it: first the n_outer that are not
     * constants, in the order of flat's extra inputs, then the constants. Names borrowed from
     * the model's graphs. */
    const char **outer;
    int n_outer, n_reads;
    sub_entry *entries;
    int n_entries;
    int last;       /* the entry that ran last, -1 before the first */
    char path[256]; /* "<node>.<attribute>", after the running session's own scope */
    char why[200];  /* non-empty: interpreted, and why */
};

/* ---- what a body reads from above ------------------------------------------------------------ */

/* The value `name` resolves to above `g` (in g's ancestors), or NULL. */
static const ir_value *resolve_above(const ir_graph *g, const char *name) {
    for (const ir_graph *q = g->parent; q; q = q->parent) {
        ir_vid v = ir_graph_find_value(q, name);
        if (v != IR_NONE && !(q->values[v].flags & IR_VALUE_OUTER)) return &q->values[v];
    }
    return NULL;
}

typedef struct name_list {
    const char **names;
    int n, cap;
} name_list;

static anvil_status name_add(name_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name)) return ANVIL_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        const char **t = realloc(l->names, sizeof *t * (size_t)cap);
        if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
        l->names = t;
        l->cap = cap;
    }
    l->names[l->n++] = name;
    return ANVIL_OK;
}

/* Names that h (body itself, or a graph nested in it at any depth) reads from above body: its
 * outer values that no graph between h and body defines and body does not define either. */
static anvil_status reads_above(const ir_graph *body, const ir_graph *h, name_list *l, int level) {
    if (level > IR_MAX_GRAPH_DEPTH)
        return core_err(ANVIL_ERR_LIMIT, "subgraphs are nested more than %d deep",
                        IR_MAX_GRAPH_DEPTH);
    for (ir_vid v = 0; v < h->n_values; v++) {
        if (!(h->values[v].flags & IR_VALUE_OUTER)) continue;
        const char *name = h->values[v].name;
        bool inside = false;
        for (const ir_graph *q = h; q != body && !inside; q = q->parent) {
            const ir_graph *up = q->parent;
            ir_vid p = up ? ir_graph_find_value(up, name) : IR_NONE;
            inside = p != IR_NONE && !(up->values[p].flags & IR_VALUE_OUTER);
        }
        if (!inside) CORE_TRY(name_add(l, name));
    }
    for (int32_t c = 0; c < h->n_children; c++)
        CORE_TRY(reads_above(body, h->children[c], l, level + 1));
    return ANVIL_OK;
}

/* ---- flattening ----------------------------------------------------------------------------- */

/* e->flat: a copy of body whose inputs are body's, then sb's outer values in order, typed and
 * shaped as vals (n_in + sb->n_outer of them). What body (at any depth) reads from above it is
 * a value of flat: a constant when it is one above, an input otherwise. Then the Ifs whose
 * conditions those shapes decide are replaced by their branches. */
static anvil_status flatten(const rt_sub *sb, const op_tensor *vals, int n_in, sub_entry *e) {
    const ir_graph *body = sb->body;
    ir_graph *flat;
    CORE_TRY(ir_graph_clone(body, &flat));
    e->flat = flat;
    for (int i = 0; i < n_in; i++) {
        ir_value *v = &flat->values[flat->inputs[i]];
        v->dtype = vals[i].dtype;
        ir_shape_set(&v->shape, vals[i].rank, vals[i].dims);
    }
    anvil_status st = ANVIL_OK;
    for (int i = 0; i < sb->n_reads && st == ANVIL_OK; i++) {
        const ir_value *src = resolve_above(body, sb->outer[i]);
        ir_vid v = ir_graph_find_value(flat, sb->outer[i]);
        if (v == IR_NONE && (st = ir_graph_add_value(flat, sb->outer[i], &v)) != ANVIL_OK) break;
        ir_value *val = &flat->values[v];
        val->flags &= ~(uint32_t)IR_VALUE_OUTER;
        if (!src) {
            st = core_err(ANVIL_ERR_INVALID_MODEL,
                          "subgraph '%s' reads '%s', which no enclosing graph defines",
                          body->name ? body->name : "?", sb->outer[i]);
            break;
        }
        val->dtype = src->dtype;
        if (src->flags & IR_VALUE_CONST) {
            val->flags |= IR_VALUE_CONST;
            val->shape = src->shape;
            val->data = src->data;
            val->data_bytes = src->data_bytes;
        }
    }
    for (int i = 0; i < sb->n_outer && st == ANVIL_OK; i++) {
        ir_vid v = ir_graph_find_value(flat, sb->outer[i]);
        flat->values[v].dtype = vals[n_in + i].dtype;
        ir_shape_set(&flat->values[v].shape, vals[n_in + i].rank, vals[n_in + i].dims);
        st = ir_graph_add_input(flat, v);
    }
    int inlined;
    if (st == ANVIL_OK) st = rt_inline_known_ifs(&e->flat, &inlined);
    return st;
}

/* ---- the table of compiled bodies ----------------------------------------------------------- */

/* dtype, rank and dims of every tensor: what a compiled body is specialized to. */
static int64_t *signature(const op_tensor *t, int n, size_t *len) {
    size_t cap = 0;
    for (int i = 0; i < n; i++) cap += 2 + (size_t)t[i].rank;
    int64_t *s = malloc(sizeof *s * (cap ? cap : 1));
    if (!s) return NULL;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        s[k++] = (int64_t)t[i].dtype;
        s[k++] = t[i].rank;
        for (int d = 0; d < t[i].rank; d++) s[k++] = t[i].dims[d];
    }
    *len = k;
    return s;
}

static void entries_clear(rt_sub *sb) {
    for (int i = 0; i < sb->n_entries; i++) {
        rt_session_free(sb->entries[i].sess);
        ir_graph_free(sb->entries[i].flat);
        free(sb->entries[i].sig);
    }
    free(sb->entries);
    sb->entries = NULL;
    sb->n_entries = 0;
    sb->last = -1;
}

void rt_subgraphs_free(rt_session *s) {
    for (int i = 0; i < s->n_subs; i++) {
        entries_clear(s->subs[i]);
        free(s->subs[i]->outer);
        free(s->subs[i]);
    }
    free(s->subs);
    s->subs = NULL;
    s->n_subs = 0;
}

void rt_subgraphs_add_stats(const rt_session *s, anvil_session_stats *out) {
    for (int i = 0; i < s->n_subs; i++)
        for (int k = 0; k < s->subs[i]->n_entries; k++) {
            const rt_session *n = s->subs[i]->entries[k].sess;
            if (!n) continue;
            out->subgraph_runs_compiled += n->sub_runs_compiled;
            out->subgraph_runs_interpreted += n->sub_runs_interpreted;
            out->reference_ns += n->prof_ref_ns;
            out->interpreted_ns += n->prof_interp_ns;
            rt_subgraphs_add_stats(n, out);
        }
}

/* The body's record, made on its first call: the outer values it reads, in a fixed order. */
static anvil_status body_record(rt_session *s, const ir_graph *body, rt_sub **out) {
    for (int i = 0; i < s->n_subs; i++)
        if (s->subs[i]->body == body) {
            *out = s->subs[i];
            return ANVIL_OK;
        }
    rt_sub **t = realloc(s->subs, sizeof *t * (size_t)(s->n_subs + 1));
    if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
    s->subs = t;
    rt_sub *sb = core_calloc(1, sizeof *sb);
    if (!sb) return ANVIL_ERR_OUT_OF_MEMORY;
    s->subs[s->n_subs++] = sb;
    sb->body = body;
    sb->last = -1;
    /* its place, for --explain: the node holding it and the attribute */
    const char *node = "?", *attr = body->name ? body->name : "?";
    for (int32_t k = 0; body->parent && k < body->parent->n_nodes; k++) {
        const ir_node *n = &body->parent->nodes[k];
        for (int a = 0; a < n->n_attrs; a++)
            for (size_t j = 0; j < ir_attr_graph_count(&n->attrs[a]); j++)
                if (ir_attr_graph_at(&n->attrs[a], j) == body) {
                    node = n->name;
                    attr = n->attrs[a].name;
                }
    }
    snprintf(sb->path, sizeof sb->path, "%s%s%s.%s", s->scope ? s->scope : "", s->scope ? "/" : "",
             node, attr);
    name_list all = {0};
    anvil_status st = reads_above(body, body, &all, 1);
    /* non-constants first (a stable partition: their order is flat's inputs') */
    for (int pass = 0; pass < 2 && st == ANVIL_OK; pass++)
        for (int i = 0; i < all.n; i++) {
            const ir_value *src = resolve_above(body, all.names[i]);
            bool constant = src && (src->flags & IR_VALUE_CONST);
            if (constant != (pass == 1)) continue;
            if (!sb->outer && !(sb->outer = malloc(sizeof *sb->outer * (size_t)all.n))) {
                st = ANVIL_ERR_OUT_OF_MEMORY;
                break;
            }
            sb->outer[sb->n_reads++] = all.names[i];
            sb->n_outer += !constant;
        }
    free(all.names);
    if (st != ANVIL_OK) snprintf(sb->why, sizeof sb->why, "%s", core_err_message());
    *out = sb;
    return ANVIL_OK;
}

/* From now on body is interpreted (its compiled entries go), for the reason given. */
static void interpret_from_now(rt_sub *sb, const char *why) {
    entries_clear(sb);
    snprintf(sb->why, sizeof sb->why, "%s", why);
}

static anvil_status compile(rt_session *s, rt_sub *sb, const op_tensor *vals, int n_in,
                            int64_t *sig, size_t sig_len, sub_entry **out) {
    sub_entry *t = realloc(sb->entries, sizeof *t * (size_t)(sb->n_entries + 1));
    if (!t) {
        free(sig);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    sb->entries = t;
    sub_entry *e = &sb->entries[sb->n_entries++];
    memset(e, 0, sizeof *e);
    e->sig = sig;
    e->sig_len = sig_len;
    *out = e;
    CORE_TRY(flatten(sb, vals, n_in, e));
    rt_session_config cfg = s->cfg;
    /* Forces on an op type hold inside bodies too; those naming a node name the main graph's.
     * The offline tuner's on_node hook holds too (anvil tune runs the model once to list its
     * problems, which compiles the bodies, so their nodes are tuned like the main graph's); the
     * measured rewrites' answers and the constants' release belong to the main graph. */
    rt_force *forces = calloc((size_t)s->cfg.n_forces + 1, sizeof *forces);
    if (!forces) return ANVIL_ERR_OUT_OF_MEMORY;
    cfg.forces = forces;
    cfg.n_forces = 0;
    for (int i = 0; i < s->cfg.n_forces; i++) {
        ir_op op;
        if (ir_op_lookup(s->cfg.forces[i].key, &op)) forces[cfg.n_forces++] = s->cfg.forces[i];
    }
    cfg.decide = NULL;
    cfg.decide_arg = NULL;
    cfg.released = NULL;
    cfg.pool = s->pool;
    anvil_status st = rt_session_create(e->flat, &cfg, &e->sess);
    free(forces); /* the session keeps copies */
    CORE_TRY(st);
    e->sess->scope = core_calloc(strlen(sb->path) + 1, 1);
    if (!e->sess->scope) return ANVIL_ERR_OUT_OF_MEMORY;
    strcpy(e->sess->scope, sb->path);
    return ANVIL_OK;
}

/* The interpreter, counted and (with profiling) timed as the slow path it is. */
static anvil_status interpret(rt_session *s, op_ctx *ctx, const ir_graph *body,
                              const op_tensor *const *in, int n_in, op_tensor *out, int n_out) {
    if (!s) return rt_subgraph_interpret(ctx, body, in, n_in, out, n_out);
    s->sub_runs_interpreted++;
    uint64_t t0 = s->cfg.profiling ? core_now_ns() : 0;
    anvil_status st = rt_subgraph_interpret(ctx, body, in, n_in, out, n_out);
    if (s->cfg.profiling) s->prof_interp_ns += core_now_ns() - t0;
    return st;
}

void rt_subgraphs_explain(const rt_session *s, void (*fn)(void *arg, const rt_step_info *),
                          void *arg) {
    for (int i = 0; i < s->n_subs; i++) {
        const rt_sub *sb = s->subs[i];
        if (sb->why[0]) {
            rt_step_info info = {.node = sb->path,
                                 .op = "subgraph",
                                 .variant = "interpreted",
                                 .why = TUNE_WHY_CASCADE,
                                 .dynamic = true,
                                 .scope = s->scope,
                                 .note = sb->why};
            fn(arg, &info);
        } else if (sb->last >= 0 && sb->entries[sb->last].sess->last) {
            rt_session_explain(sb->entries[sb->last].sess, fn, arg);
        }
    }
}

anvil_status rt_subgraph_compiled(op_ctx *ctx, const ir_graph *body, const op_tensor *const *in,
                                  int n_in, op_tensor *out, int n_out) {
    rt_session *s = ctx->subgraph_arg;
    const rt_frame *frame = rt_frame_current();
    bool usable =
        s && s->cfg.opt_level >= 1 && frame && n_in == body->n_inputs && n_out == body->n_outputs;
    for (int i = 0; i < n_in && usable; i++) usable = in[i] != NULL;
    rt_sub *sb = NULL;
    if (usable) CORE_TRY(body_record(s, body, &sb));
    if (!usable || sb->why[0]) return interpret(s, ctx, body, in, n_in, out, n_out);

    int n_all = n_in + sb->n_outer;
    op_tensor *vals = calloc((size_t)n_all + 1, sizeof *vals);
    anvil_tensor *t = calloc((size_t)n_all + 1, sizeof *t);
    const anvil_tensor **tp = calloc((size_t)n_all + 1, sizeof *tp);
    anvil_tensor **res = calloc((size_t)n_out + 1, sizeof *res);
    anvil_status st = vals && t && tp && res ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n_all && st == ANVIL_OK; i++) {
        if (i < n_in) {
            vals[i] = *in[i];
        } else {
            const char *name = sb->outer[i - n_in];
            ir_vid v = ir_graph_find_value(frame->g, name);
            if (v == IR_NONE) {
                st = core_err(ANVIL_ERR_RUNTIME,
                              "subgraph '%s' reads '%s', which the graph running it does not "
                              "define",
                              body->name ? body->name : "?", name);
                break;
            }
            st = frame->lookup(frame, v, &vals[i]);
        }
        size_t bytes = 0;
        if (st == ANVIL_OK && !core_tensor_bytes(vals[i].dtype, vals[i].dims, vals[i].rank, &bytes))
            st = core_err(ANVIL_ERR_LIMIT, "a subgraph input is too large");
        t[i] = (anvil_tensor){
            .dtype = vals[i].dtype, .rank = vals[i].rank, .data = vals[i].data, .bytes = bytes};
        memcpy(t[i].dims, vals[i].dims, sizeof vals[i].dims[0] * (size_t)vals[i].rank);
        tp[i] = &t[i];
    }
    size_t sig_len = 0;
    int64_t *sig = st == ANVIL_OK ? signature(vals, n_all, &sig_len) : NULL;
    if (st == ANVIL_OK && !sig) st = ANVIL_ERR_OUT_OF_MEMORY;

    sub_entry *e = NULL;
    for (int i = 0; i < sb->n_entries && st == ANVIL_OK && !e; i++)
        if (sb->entries[i].sig_len == sig_len &&
            !memcmp(sb->entries[i].sig, sig, sig_len * sizeof *sig))
            e = &sb->entries[i];
    char why[sizeof sb->why];
    if (st == ANVIL_OK && !e) {
        if (sb->n_entries >= SUB_MAX_SIGS) {
            snprintf(why, sizeof why, "its input shapes changed more than %d times", SUB_MAX_SIGS);
            interpret_from_now(sb, why);
            free(sig);
        } else if (compile(s, sb, vals, n_in, sig, sig_len, &e) != ANVIL_OK) {
            snprintf(why, sizeof why, "it could not be compiled: %s", core_err_message());
            interpret_from_now(sb, why);
            e = NULL;
        }
        sig = NULL; /* owned by the entry, or freed */
    }
    free(sig);
    bool ran = false, plan_failed = false;
    if (st == ANVIL_OK && e) {
        sb->last = (int)(e - sb->entries);
        ran = true;
        st = rt_session_run(e->sess, tp, NULL, res);
        if (st != ANVIL_OK && e->sess->plans_made == 0) {
            /* its first plan failed: what the compiled path cannot do, the interpreter may */
            snprintf(why, sizeof why, "it could not be planned: %s", core_err_message());
            interpret_from_now(sb, why);
            ran = false;
            plan_failed = true;
            st = ANVIL_OK;
        }
        for (int j = 0; j < n_out && st == ANVIL_OK && ran; j++) {
            out[j].dtype = res[j]->dtype;
            out[j].rank = res[j]->rank;
            memcpy(out[j].dims, res[j]->dims, sizeof res[j]->dims[0] * (size_t)res[j]->rank);
            out[j].data = res[j]->data; /* 64-byte aligned malloc storage, as op_output_alloc's */
            res[j]->owns_data = false;
        }
        for (int j = 0; j < n_out; j++) {
            if (res[j] && res[j]->owns_data) free(res[j]->data);
            free(res[j]);
        }
        if (st == ANVIL_OK && ran && e->sess->plans_made > SUB_MAX_PLANS) {
            snprintf(why, sizeof why, "it needed more than %d plans", SUB_MAX_PLANS);
            interpret_from_now(sb, why);
        }
    }
    bool interpret_it = st == ANVIL_OK && !ran;
    free(vals);
    free(t);
    free(tp);
    free(res);
    if (interpret_it) {
        st = interpret(s, ctx, body, in, n_in, out, n_out);
        /* the interpreter failed too: the inputs were at fault, not the compiled path, which
         * the next call tries again */
        if (st != ANVIL_OK && plan_failed) sb->why[0] = 0;
        return st;
    }
    if (st == ANVIL_OK) s->sub_runs_compiled++;
    return st;
}
