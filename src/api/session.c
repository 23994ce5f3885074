/* The public API of options, sessions and tensors: argument checking and name binding. Everything
 * of substance happens in the layers below; this file's job is to refuse misuse with a message
 * before it reaches them. Models (loading) are in model.c. */
#include "api.h"
#include "env.h"
#include "onnx/onnx.h"
#include "passes/passes.h"
#include "emit/emit.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct anvil_options {
    int threads;
    int opt_level;
    uint32_t passes_off;
    bool profiling;
    rt_force *forces; /* keys and variants strdup'd, owned */
    int n_forces;
    bool db_set; /* db_path was given (NULL: the default file) */
    char *db_path;
    int online_rounds, online_prune_after;
    double online_prune_factor;
    bool emittable_only;
    /* anvil_options_set_knob's settings: names and values strdup'd, owned */
    char **knob_names, **knob_values;
    int n_knobs;
    /* anvil_options_set_precision's (kern_precision), over ANVIL_PRECISION when precision_set */
    int precision;
    bool precision_set;
    double tolerance; /* anvil_options_set_tolerance's; RT_DEFAULT_TOLERANCE until set */
};

struct anvil_session {
    const anvil_model *model;
    rt_session *rt;
    tune_db *db; /* owned; NULL: none */
    char fingerprint[TUNE_FINGERPRINT_MAX];
    /* anvil_session_explain's answer: choices[i].params points into params[i] */
    anvil_node_choice *choices;
    char (*params)[TUNE_PARAMS_MAX];
    size_t n_choices, cap_choices;
    bool explain_oom;
};

/* ---- options ------------------------------------------------------------------------------- */

anvil_status anvil_options_create(anvil_options **out) {
    API_CHECK(out, "anvil_options_create: out is NULL");
    api_env_init();
    anvil_options *o = core_calloc(1, sizeof *o);
    if (!o) return ANVIL_ERR_OUT_OF_MEMORY;
    o->threads = 0;
    o->opt_level = 1;
    o->tolerance = RT_DEFAULT_TOLERANCE;
    *out = o;
    return ANVIL_OK;
}

void anvil_options_free(anvil_options *o) {
    if (!o) return;
    for (int i = 0; i < o->n_forces; i++) {
        free((char *)o->forces[i].key);
        free((char *)o->forces[i].variant);
    }
    free(o->forces);
    free(o->db_path);
    for (int i = 0; i < o->n_knobs; i++) {
        free(o->knob_names[i]);
        free(o->knob_values[i]);
    }
    free(o->knob_names);
    free(o->knob_values);
    free(o);
}

#define API_MAX_KNOBS 64

anvil_status anvil_options_set_knob(anvil_options *o, const char *name, const char *value) {
    API_CHECK(o, "anvil_options_set_knob: options is NULL");
    API_CHECK(name && value, "anvil_options_set_knob: name or value is NULL");
    rt_session_config probe = {0};
    CORE_TRY(api_knob_set(&probe, name, value));
    int at = 0;
    while (at < o->n_knobs && strcmp(o->knob_names[at], name)) at++;
    API_CHECK(at < API_MAX_KNOBS, "anvil_options_set_knob: more than %d settings", API_MAX_KNOBS);
    char *v = strdup(value);
    if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
    if (at < o->n_knobs) {
        free(o->knob_values[at]);
        o->knob_values[at] = v;
        return ANVIL_OK;
    }
    char *n = strdup(name);
    char **names = realloc(o->knob_names, (size_t)(at + 1) * sizeof *names);
    if (names) o->knob_names = names;
    char **values = realloc(o->knob_values, (size_t)(at + 1) * sizeof *values);
    if (values) o->knob_values = values;
    if (!n || !names || !values) {
        free(n);
        free(v);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    o->knob_names[at] = n;
    o->knob_values[at] = v;
    o->n_knobs++;
    return ANVIL_OK;
}

anvil_status anvil_options_set_tuning_db(anvil_options *o, const char *path) {
    API_CHECK(o, "anvil_options_set_tuning_db: options is NULL");
    char *copy = NULL;
    if (path && !(copy = strdup(path))) return ANVIL_ERR_OUT_OF_MEMORY;
    free(o->db_path);
    o->db_path = copy;
    o->db_set = path != NULL;
    return ANVIL_OK;
}

anvil_status anvil_options_set_online_tuning(anvil_options *o, int rounds, double prune_factor,
                                             int prune_after) {
    API_CHECK(o, "anvil_options_set_online_tuning: options is NULL");
    API_CHECK(rounds >= 0 && rounds <= 1000, "online tuning rounds must be 0..1000, got %d",
              rounds);
    API_CHECK(prune_factor == 0 || (prune_factor > 1 && prune_factor <= 100),
              "online tuning prune factor must be above 1 (or 0 for the default), got %g",
              prune_factor);
    API_CHECK(prune_after >= 0 && prune_after <= 1000,
              "online tuning prune-after round must be 0..1000, got %d", prune_after);
    o->online_rounds = rounds;
    o->online_prune_factor = prune_factor;
    o->online_prune_after = prune_after;
    return ANVIL_OK;
}

/* Opens the session's tuning database (see anvil_options_set_tuning_db). A named file must open;
 * the default one is optional, so a session on a machine that never tuned, or whose cache file
 * is damaged, still runs (on the default rules, with a warning for the damaged file). */
anvil_status api_tuning_db_open(const char *path, bool online, tune_db **db, char *fingerprint,
                                size_t cap) {
    char def[4096];
    *db = NULL;
    if (path) {
        if (!path[0]) return ANVIL_OK;
        CORE_TRY(tune_fingerprint(fingerprint, cap));
        return tune_db_open(path, db);
    }
    /* Online tuning writes its winners, so it creates the default file; otherwise a session
     * only reads one that exists. */
    const tune_path_env env = api_env_tune_paths();
    if (tune_db_default_path(&env, def, sizeof def, online) != ANVIL_OK || !def[0] ||
        (!online && access(def, F_OK) != 0)) {
        core_err_clear();
        return ANVIL_OK;
    }
    CORE_TRY(tune_fingerprint(fingerprint, cap));
    if (tune_db_open(def, db) != ANVIL_OK) {
        core_log(CORE_LOG_WARN, "ignoring the tuning database: %s", core_err_message());
        core_err_clear();
        *db = NULL;
    }
    return ANVIL_OK;
}

#define API_MAX_FORCES 4096

anvil_status anvil_options_set_variant(anvil_options *o, const char *node_or_op,
                                       const char *variant) {
    API_CHECK(o, "anvil_options_set_variant: options is NULL");
    API_CHECK(node_or_op && *node_or_op, "anvil_options_set_variant: node_or_op is empty");
    API_CHECK(!variant || *variant, "anvil_options_set_variant: variant is empty (NULL removes)");
    int at = -1;
    for (int i = 0; i < o->n_forces; i++)
        if (!strcmp(o->forces[i].key, node_or_op)) at = i;
    if (at >= 0) {
        free((char *)o->forces[at].variant);
        if (!variant) {
            free((char *)o->forces[at].key);
            o->forces[at] = o->forces[--o->n_forces];
            return ANVIL_OK;
        }
        char *v = strdup(variant);
        if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
        o->forces[at].variant = v;
        return ANVIL_OK;
    }
    if (!variant) return ANVIL_OK;
    API_CHECK(o->n_forces < API_MAX_FORCES, "more than %d forced variants", API_MAX_FORCES);
    rt_force *grown = realloc(o->forces, sizeof *grown * (size_t)(o->n_forces + 1));
    if (!grown) return ANVIL_ERR_OUT_OF_MEMORY;
    o->forces = grown;
    char *k = strdup(node_or_op), *v = strdup(variant);
    if (!k || !v) {
        free(k);
        free(v);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    o->forces[o->n_forces].key = k;
    o->forces[o->n_forces].variant = v;
    o->n_forces++;
    return ANVIL_OK;
}

anvil_status anvil_options_set_threads(anvil_options *o, int threads) {
    API_CHECK(o, "anvil_options_set_threads: options is NULL");
    API_CHECK(threads >= 0 && threads <= 1024,
              "thread count %d is out of range; use 1..1024, or 0 for every core", threads);
    o->threads = threads;
    return ANVIL_OK;
}

anvil_status anvil_options_set_opt_level(anvil_options *o, int level) {
    API_CHECK(o, "anvil_options_set_opt_level: options is NULL");
    API_CHECK(level >= 0 && level <= 3, "optimization level %d is out of range 0..3", level);
    o->opt_level = level;
    return ANVIL_OK;
}

anvil_status anvil_options_set_passes(anvil_options *o, const char *spec) {
    API_CHECK(o, "anvil_options_set_passes: options is NULL");
    uint32_t off;
    CORE_TRY(pass_spec_parse(spec, &off));
    o->passes_off = off;
    return ANVIL_OK;
}

anvil_status anvil_options_set_emittable_only(anvil_options *o, int on) {
    API_CHECK(o, "anvil_options_set_emittable_only: options is NULL");
    o->emittable_only = on != 0;
    return ANVIL_OK;
}

anvil_status anvil_options_set_profiling(anvil_options *o, int on) {
    API_CHECK(o, "anvil_options_set_profiling: options is NULL");
    o->profiling = on != 0;
    return ANVIL_OK;
}

anvil_status anvil_options_set_precision(anvil_options *o, const char *precision) {
    API_CHECK(o, "anvil_options_set_precision: options is NULL");
    int p;
    CORE_TRY(api_precision_parse("anvil_options_set_precision", precision, &p));
    o->precision = p;
    o->precision_set = true;
    return ANVIL_OK;
}

anvil_status anvil_options_set_tolerance(anvil_options *o, double tolerance) {
    API_CHECK(o, "anvil_options_set_tolerance: options is NULL");
    API_CHECK(isfinite(tolerance) && tolerance > 0,
              "anvil_options_set_tolerance: the tolerance must be a positive finite number "
              "(a relative error such as 0.01), got %g",
              tolerance);
    o->tolerance = tolerance;
    return ANVIL_OK;
}

void api_precision_warn(const rt_session_config *cfg) {
    const int p = cfg->knobs.precision;
    const core_hw *hw = core_hw_get();
    const bool bf16 = hw->avx512_bf16 || (hw->amx_bf16 && hw->amx_tile && hw->os_amx);
    const bool fp16 = hw->avx512_fp16;
    if (p == KERN_PREC_INT8 && !hw->avx512_vnni)
        core_log(CORE_LOG_WARN,
                 "precision int8 asked for, but this CPU (or the ANVIL_ISA cap) has no "
                 "AVX512-VNNI: the session runs fp32 kernels instead");
    else if (p == KERN_PREC_FP16 && !fp16)
        core_log(CORE_LOG_WARN,
                 "precision fp16 asked for, but this CPU (or the ANVIL_ISA cap) has no "
                 "AVX512-FP16: the session runs fp32 kernels instead (bf16 may be available: "
                 "anvil sysinfo)");
    else if ((p == KERN_PREC_BF16 && !bf16) || (p == KERN_PREC_AUTO && !bf16 && !fp16))
        core_log(CORE_LOG_WARN,
                 "precision %s asked for, but this CPU (or the ANVIL_ISA cap) has %s: the "
                 "session runs fp32 kernels instead",
                 api_precision_name(p),
                 p == KERN_PREC_BF16 ? "neither AVX512_BF16 nor AMX-BF16"
                                     : "no AVX512_BF16, AMX-BF16 or AVX512-FP16");
}

void api_options_summarize(const anvil_options *o, api_options_summary *out) {
    *out = (api_options_summary){.threads = o ? o->threads : 0,
                                 .opt_level = o ? o->opt_level : 1,
                                 .passes_off = o ? o->passes_off : 0,
                                 .online = o && o->online_rounds > 0,
                                 .db_set = o && o->db_set,
                                 .db_path = o && o->db_set ? o->db_path : NULL};
}

anvil_status api_options_copy(const anvil_options *o, anvil_options **out) {
    anvil_options *c;
    CORE_TRY(anvil_options_create(&c));
    if (o) {
        anvil_status s = ANVIL_OK;
        *c = *o;
        c->forces = NULL;
        c->n_forces = 0;
        c->db_path = NULL;
        c->knob_names = c->knob_values = NULL;
        c->n_knobs = 0;
        if (o->db_set) s = anvil_options_set_tuning_db(c, o->db_path);
        for (int i = 0; s == ANVIL_OK && i < o->n_forces; i++)
            s = anvil_options_set_variant(c, o->forces[i].key, o->forces[i].variant);
        for (int i = 0; s == ANVIL_OK && i < o->n_knobs; i++)
            s = anvil_options_set_knob(c, o->knob_names[i], o->knob_values[i]);
        if (s != ANVIL_OK) {
            anvil_options_free(c);
            return s;
        }
    }
    *out = c;
    return ANVIL_OK;
}

anvil_status api_options_reference(const anvil_options *o, anvil_options **out) {
    anvil_options *c;
    CORE_TRY(api_options_copy(o, &c));
    for (int i = 0; i < c->n_forces; i++) {
        free((char *)c->forces[i].key);
        free((char *)c->forces[i].variant);
    }
    c->n_forces = 0;
    c->online_rounds = 0;
    c->profiling = false;
    c->precision = KERN_PREC_F32;
    c->precision_set = true;
    *out = c;
    return ANVIL_OK;
}

/* ---- sessions ------------------------------------------------------------------------------ */

/* Weights a session realigned are not read from the mapping again: let the pages go, so a model's
 * memory is its file size once, not twice. */
static void release_model_pages(void *ctx, const void *p, size_t n) {
    onnx_model_release_pages(ctx, p, n);
}

anvil_status api_session_config(const anvil_options *opts, rt_session_config *out) {
    /* the defaults, then the environment, then the options (env.h) */
    rt_session_config cfg = {
        .threads = 0, .opt_level = 1, .profiling = false, .tolerance = RT_DEFAULT_TOLERANCE};
    CORE_TRY(api_env_session(&cfg));
    if (opts) {
        cfg.threads = opts->threads;
        cfg.opt_level = opts->opt_level;
        cfg.passes_off |= opts->passes_off;
        cfg.profiling = opts->profiling;
        cfg.forces = opts->forces;
        cfg.n_forces = opts->n_forces;
        cfg.online_rounds = opts->online_rounds;
        cfg.online_prune_factor = opts->online_prune_factor;
        cfg.online_prune_after = opts->online_prune_after;
        cfg.emittable_only = opts->emittable_only;
        cfg.tolerance = opts->tolerance;
        for (int i = 0; i < opts->n_knobs; i++)
            CORE_TRY(api_knob_set(&cfg, opts->knob_names[i], opts->knob_values[i]));
        /* after the knobs: the named setter wins over an ANVIL_PRECISION knob */
        if (opts->precision_set) cfg.knobs.precision = opts->precision;
    }
    if (cfg.threads == 0) cfg.threads = core_hw_get()->logical_cores;
    *out = cfg;
    return ANVIL_OK;
}

anvil_status anvil_session_create(const anvil_model *m, const anvil_options *opts,
                                  anvil_session **out) {
    API_CHECK(out, "anvil_session_create: out is NULL");
    *out = NULL;
    API_CHECK(m, "anvil_session_create: model is NULL");
    rt_session_config cfg;
    CORE_TRY(api_session_config(opts, &cfg));
    api_precision_warn(&cfg);
    cfg.released = release_model_pages;
    cfg.released_ctx = m->onnx;
    anvil_session *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    s->model = m;
    anvil_status st = api_tuning_db_open(opts && opts->db_set ? opts->db_path : NULL,
                                         opts && opts->online_rounds > 0, &s->db, s->fingerprint,
                                         sizeof s->fingerprint);
    if (st == ANVIL_OK && s->db) {
        cfg.db = s->db;
        cfg.fingerprint = s->fingerprint;
    }
    if (st == ANVIL_OK) st = rt_session_create(m->onnx->graph, &cfg, &s->rt);
    if (st != ANVIL_OK) {
        tune_db_close(s->db);
        free(s);
        return st;
    }
    *out = s;
    return ANVIL_OK;
}

void anvil_session_free(anvil_session *s) {
    if (!s) return;
    rt_session_free(s->rt);
    tune_db_close(s->db);
    free(s->choices);
    free(s->params);
    free(s);
}

static void explain_one(void *arg, const rt_step_info *info) {
    anvil_session *s = arg;
    if (s->n_choices == s->cap_choices) {
        size_t cap = s->cap_choices ? s->cap_choices * 2 : 64;
        anvil_node_choice *c = realloc(s->choices, cap * sizeof *c);
        if (c) s->choices = c;
        char(*p)[TUNE_PARAMS_MAX] = realloc(s->params, cap * sizeof *p);
        if (p) s->params = p;
        if (!c || !p) {
            s->explain_oom = true;
            return;
        }
        s->cap_choices = cap;
    }
    size_t i = s->n_choices++;
    snprintf(s->params[i], sizeof s->params[i], "%s", info->params);
    s->choices[i] = (anvil_node_choice){
        .node = info->node,
        .op = info->op,
        .variant = info->variant,
        .params = s->params[i],
        .runs = info->runs,
        .source = info->dynamic ? "dynamic" : tune_why_name(info->why),
        .scope = info->scope,
        .note = info->note,
        .bytes = info->bytes,
        .flops = info->flops,
        .compute = info->rounds_bf16   ? "bf16"
                   : info->rounds_fp16 ? "fp16"
                   : info->int8        ? "int8"
                                       : "fp32",
        .storage = info->bf16_in && info->bf16_out ? "bf16 in+out"
                   : info->bf16_in                 ? "bf16 in"
                   : info->bf16_out                ? "bf16 out"
                                                   : "fp32",
        .region = info->region,
    };
}

anvil_status anvil_session_explain(anvil_session *s, size_t *count,
                                   const anvil_node_choice **choices) {
    API_CHECK(s && count && choices, "anvil_session_explain: an argument is NULL");
    s->n_choices = 0;
    CORE_TRY(rt_session_explain(s->rt, explain_one, s));
    /* The measured rewrites' group decisions, as entries of their own: the op is the rewrite
     * ("layout"), the node its group's first, the variant the choice. */
    const rt_group *groups;
    int n_groups;
    rt_session_groups(s->rt, &groups, &n_groups);
    for (int i = 0; i < n_groups; i++) {
        rt_step_info info = {.node = groups[i].first,
                             .op = groups[i].rewrite,
                             .variant = groups[i].choice_names[groups[i].chosen],
                             .why = groups[i].why};
        snprintf(info.params, sizeof info.params, "nodes=%d;group=%.400s", groups[i].n_nodes,
                 groups[i].key);
        explain_one(s, &info);
    }
    if (s->explain_oom) {
        s->explain_oom = false;
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "anvil_session_explain: out of memory");
    }
    /* params may have moved while it grew: point every choice at its slot again */
    for (size_t i = 0; i < s->n_choices; i++) s->choices[i].params = s->params[i];
    *count = s->n_choices;
    *choices = s->choices;
    return ANVIL_OK;
}

static int32_t find_io(const ir_graph *g, const ir_vid *list, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (!strcmp(g->values[list[i]].name, name)) return i;
    return -1;
}

/* "'a', 'b', 'c'" for error messages */
static const char *io_names(const ir_graph *g, const ir_vid *list, int32_t n) {
    static _Thread_local char buf[512];
    size_t len = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n && len + 8 < sizeof buf; i++) {
        int w =
            snprintf(buf + len, sizeof buf - len, "%s'%s'", i ? ", " : "", g->values[list[i]].name);
        if (w < 0) break;
        len += (size_t)w;
    }
    if (len >= sizeof buf) strcpy(buf + sizeof buf - 5, "...");
    return buf;
}

anvil_status api_bind_inputs(const ir_graph *g, size_t n_inputs, const char *const *input_names,
                             const anvil_tensor *const *inputs, const anvil_tensor **bound) {
    anvil_status st = ANVIL_OK;
    for (size_t i = 0; i < n_inputs && st == ANVIL_OK; i++) {
        if (!input_names[i] || !inputs[i]) {
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT, "input %zu has a NULL name or tensor", i);
            break;
        }
        int32_t k = find_io(g, g->inputs, g->n_inputs, input_names[i]);
        if (k < 0)
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                          "the model has no input named '%s'; its inputs are %s", input_names[i],
                          io_names(g, g->inputs, g->n_inputs));
        else if (bound[k])
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT, "input '%s' is given twice", input_names[i]);
        else
            bound[k] = inputs[i];
    }
    for (int32_t k = 0; k < g->n_inputs && st == ANVIL_OK; k++)
        if (!bound[k])
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT, "input '%s' is missing; the model needs %s",
                          g->values[g->inputs[k]].name, io_names(g, g->inputs, g->n_inputs));
    return st;
}

anvil_status anvil_session_run(anvil_session *s, size_t n_inputs, const char *const *input_names,
                               const anvil_tensor *const *inputs, size_t n_outputs,
                               const char *const *output_names, anvil_tensor **outputs) {
    API_CHECK(s, "anvil_session_run: session is NULL");
    API_CHECK(n_inputs == 0 || (input_names && inputs),
              "anvil_session_run: input_names or inputs is NULL");
    API_CHECK(n_outputs == 0 || outputs, "anvil_session_run: outputs is NULL");
    const ir_graph *g = s->model->onnx->graph;
    for (size_t j = 0; j < n_outputs; j++) outputs[j] = NULL;
    core_err_clear();

    const anvil_tensor **bound = core_calloc((size_t)g->n_inputs + 1, sizeof *bound);
    anvil_tensor **all_out = core_calloc((size_t)g->n_outputs + 1, sizeof *all_out);
    bool *want = core_calloc((size_t)g->n_outputs + 1, sizeof *want);
    int32_t *out_index = core_calloc(n_outputs + 1, sizeof *out_index);
    anvil_status st = ANVIL_OK;
    if (!bound || !all_out || !want || !out_index) {
        st = ANVIL_ERR_OUT_OF_MEMORY;
        goto done;
    }
    st = api_bind_inputs(g, n_inputs, input_names, inputs, bound);
    if (st != ANVIL_OK) goto done;
    if (!output_names) {
        if (n_outputs != (size_t)g->n_outputs) {
            st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                          "output_names is NULL, so n_outputs must be the model's output count "
                          "%d, not %zu",
                          g->n_outputs, n_outputs);
            goto done;
        }
        for (size_t j = 0; j < n_outputs; j++) out_index[j] = (int32_t)j;
    } else {
        for (size_t j = 0; j < n_outputs && st == ANVIL_OK; j++) {
            int32_t k =
                output_names[j] ? find_io(g, g->outputs, g->n_outputs, output_names[j]) : -1;
            if (k < 0)
                st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                              "the model has no output named '%s'; its outputs are %s",
                              output_names[j] ? output_names[j] : "(null)",
                              io_names(g, g->outputs, g->n_outputs));
            out_index[j] = k;
        }
        if (st != ANVIL_OK) goto done;
    }
    for (size_t j = 0; j < n_outputs; j++) want[out_index[j]] = true;
    st = rt_session_run(s->rt, bound, want, all_out);
    if (st != ANVIL_OK) goto done;
    /* hand out each requested output once; a name asked for twice gets a copy */
    for (size_t j = 0; j < n_outputs && st == ANVIL_OK; j++) {
        anvil_tensor *t = all_out[out_index[j]];
        if (t) {
            outputs[j] = t;
            all_out[out_index[j]] = NULL;
        } else {
            const anvil_tensor *src = outputs[0];
            for (size_t k = 0; k < j; k++)
                if (out_index[k] == out_index[j]) src = outputs[k];
            st = rt_tensor_new(src->dtype, src->rank, src->dims, &outputs[j]);
            if (st == ANVIL_OK && src->bytes) memcpy(outputs[j]->data, src->data, src->bytes);
        }
    }
    if (st != ANVIL_OK)
        for (size_t j = 0; j < n_outputs; j++) {
            anvil_tensor_free(outputs[j]);
            outputs[j] = NULL;
        }
done:
    if (all_out)
        for (int32_t k = 0; k < g->n_outputs; k++) anvil_tensor_free(all_out[k]);
    free(bound);
    free(all_out);
    free(want);
    free(out_index);
    return st;
}

anvil_status anvil_session_stats_get(const anvil_session *s, anvil_session_stats *out) {
    API_CHECK(s && out, "anvil_session_stats_get: session or out is NULL");
    return rt_session_stats(s->rt, out);
}

anvil_status anvil_session_write_profile(const anvil_session *s, const char *path) {
    API_CHECK(s && path, "anvil_session_write_profile: session or path is NULL");
    return rt_session_write_trace(s->rt, path);
}

anvil_status anvil_session_compile(anvil_session *s, size_t n_inputs,
                                   const char *const *input_names,
                                   const anvil_tensor *const *inputs,
                                   const anvil_compile_options *opts, const char *dir) {
    API_CHECK(s, "anvil_session_compile: session is NULL");
    API_CHECK(dir && *dir, "anvil_session_compile: dir is NULL or empty");
    API_CHECK(n_inputs == 0 || (input_names && inputs),
              "anvil_session_compile: input_names or inputs is NULL");
    core_err_clear();
    const ir_graph *g = s->model->onnx->graph;
    const anvil_tensor **bound = core_calloc((size_t)g->n_inputs + 1, sizeof *bound);
    if (!bound) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status st = api_bind_inputs(g, n_inputs, input_names, inputs, bound);
    if (st == ANVIL_OK) {
        emit_options eo = {0};
        eo.name = opts && opts->name ? opts->name : "net";
        eo.embed_weights = opts && opts->embed_weights;
        st = emit_library(s->rt, bound, &eo, dir);
    }
    free(bound);
    return st;
}

/* ---- the bf16 regions (anvil dump --precision) ----------------------------------------------- */

typedef struct region_lines {
    FILE *f;
    uint64_t flops, bf16_flops;
    size_t nodes, bf16_nodes, body_bf16_nodes;
    size_t fp16_nodes; /* of bf16_nodes (those in reduced precision), the fp16 ones */
} region_lines;

static void region_line(void *arg, const rt_step_info *info) {
    region_lines *r = arg;
    char node[512], rb[16] = "-";
    snprintf(node, sizeof node, "%s%s%s", info->scope ? info->scope : "", info->scope ? "/" : "",
             info->node);
    size_t len = strlen(node);
    if (info->region) snprintf(rb, sizeof rb, "%d", (int)info->region);
    const char *storage = info->bf16_in && info->bf16_out ? "bf16 in+out"
                          : info->bf16_in                 ? "bf16 in"
                          : info->bf16_out                ? "bf16 out"
                                                          : "fp32";
    /* a cascade shows what runs the node: "conv_f32 > conv_1x1_gemm" */
    char variant[256];
    snprintf(variant, sizeof variant, "%s%s%s", info->variant, info->runs ? " > " : "",
             info->runs ? info->runs : "");
    fprintf(r->f, "%-40.40s %-20.20s %-48.48s %-7s %-11s %s\n", len > 40 ? node + len - 40 : node,
            info->op, variant,
            info->rounds_bf16   ? "bf16"
            : info->rounds_fp16 ? "fp16"
            : info->int8        ? "int8"
                                : "fp32",
            storage, rb);
    r->nodes++;
    r->flops += info->flops;
    if (info->rounds_bf16 || info->rounds_fp16) {
        r->bf16_nodes++;
        r->bf16_flops += info->flops;
        if (info->scope) r->body_bf16_nodes++;
        if (info->rounds_fp16) r->fp16_nodes++;
    }
}

anvil_status api_session_print_regions(anvil_session *s, FILE *f) {
    API_CHECK(s && f, "api_session_print_regions: an argument is NULL");
    rt_regions rg;
    CORE_TRY(rt_session_regions(s->rt, &rg));
    region_lines r = {.f = f};
    fprintf(f, "%-40s %-20s %-48s %-7s %-11s %s\n", "node", "op", "variant", "compute", "storage",
            "region");
    anvil_status st = rt_session_explain(s->rt, region_line, &r);
    if (st != ANVIL_OK) {
        rt_regions_free(&rg);
        return st;
    }
    const char *format = !r.fp16_nodes                  ? "bf16"
                         : r.fp16_nodes == r.bf16_nodes ? "fp16"
                                                        : "bf16 or fp16";
    fprintf(f, "\n%zu of %zu nodes compute in %s, %.1f%% of the %.4g GFLOP, in %d region%s\n",
            r.bf16_nodes, r.nodes, format,
            r.flops ? 100.0 * (double)r.bf16_flops / (double)r.flops : 0.0, (double)r.flops / 1e9,
            (int)rg.n_regions, rg.n_regions == 1 ? "" : "s");
    if (r.body_bf16_nodes)
        fprintf(f,
                "(%zu of the bf16 nodes are inside If/Loop/Scan bodies, which their own sessions "
                "plan: regions are the main graph's)\n",
                r.body_bf16_nodes);
    if (rg.n_regions) {
        /* the column of the steps computing in reduced precision, and what the inner values are
         * stored in where not fp32 (only ever bf16: fp16 regions keep fp32 storage) */
        fprintf(f, "\nregion  nodes  %-5s GFLOP      enter  leave  inner  inner stored in bf16\n",
                strlen(format) <= 5 ? format : "16bit");
        for (int32_t k = 0; k < rg.n_regions; k++) {
            const rt_region *x = &rg.regions[k];
            fprintf(f, "%-7d %-6d %-5d %-10.4g %-6d %-6d %-6d %d\n", (int)k + 1, (int)x->steps,
                    (int)x->bf16_steps, (double)x->flops / 1e9, (int)x->enter, (int)x->leave,
                    (int)x->inner, (int)x->inner_bf16);
        }
        fprintf(f,
                "(enter: activations it reads from fp32 nodes or the inputs, each rounded once as "
                "read;\n leave: activations it hands to fp32 nodes or the caller, written in "
                "fp32;\n inner: activations passed between its own nodes)\n");
    }
    rt_regions_free(&rg);
    return ANVIL_OK;
}
