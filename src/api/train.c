/* Training sessions (anvil.h): the training graph (autodiff) for each batch shape met, planned
 * as a session of its own, the parameters and the optimizer's state, and the update after each
 * step.
 *
 * The parameters are the graph's inputs, bound to the session's own buffers, so a step reads the
 * current weights without a copy and a plan never folds them. The gradients come back as the
 * graph's outputs; the update runs here, one fused loop per parameter (PyTorch's formulas, so
 * that the same model on the same batches ends with the same weights). */
#include "train_impl.h"

#include "env.h"
#include "onnx/onnx.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void anvil_train_config_default(anvil_train_config *c) {
    memset(c, 0, sizeof *c);
    c->loss = ANVIL_LOSS_CROSS_ENTROPY;
    c->optimizer = ANVIL_OPTIMIZER_SGD;
    c->lr = 0.01f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->accumulate = 1;
    c->opt_level = 1;
}

static float *buffer(size_t n) {
    float *b = core_aligned_alloc(64, (n ? n : 1) * sizeof(float));
    if (b) memset(b, 0, (n ? n : 1) * sizeof(float));
    return b;
}

static void free_graph(train_graph *tg, int n_bound) {
    rt_session_free(tg->rt);
    anvil_tensor_free(tg->seed);
    for (int i = 0; tg->params && i < n_bound; i++) anvil_tensor_free(tg->params[i]);
    free(tg->params);
    ad_graph_free(tg->ag);
    free(tg->shapes);
    memset(tg, 0, sizeof *tg);
}

void anvil_train_session_free(anvil_train_session *ts) {
    if (!ts) return;
    for (int k = 0; k < ts->n_graphs; k++) free_graph(&ts->graphs[k], ts->n_params + ts->n_state);
    for (int i = 0; i < ts->n_state; i++) {
        free(ts->state_names[i]);
        free(ts->state[i]);
    }
    free(ts->state_names);
    free(ts->state_numel);
    free(ts->state);
    for (int i = 0; i < ts->n_params; i++) {
        free(ts->names[i]);
        free(ts->p[i]);
        if (ts->m) free(ts->m[i]);
        if (ts->v) free(ts->v[i]);
        if (ts->acc) free(ts->acc[i]);
        if (ts->stash) free(ts->stash[i]);
        if (ts->grads) free(ts->grads[i]);
    }
    free(ts->names);
    free(ts->numel);
    free(ts->p);
    free(ts->m);
    free(ts->v);
    free(ts->acc);
    free(ts->stash);
    free(ts->grads);
    for (size_t i = 0; ts->trainable && i < ts->cfg.n_trainable; i++) free(ts->trainable[i]);
    free(ts->trainable);
    train_ckpt_free(ts->pending);
    tune_db_close(ts->db);
    free((char *)ts->cfg.output);
    free(ts);
}

/* How the sessions of the training graphs run: the configured threads and rewrites, and the
 * tuning database (online tuning only with one). */
static rt_session_config session_config(const anvil_train_session *ts) {
    rt_session_config cfg = {.threads = ts->cfg.threads,
                             .opt_level = ts->cfg.opt_level,
                             .profiling = ts->cfg.profiling != 0,
                             .db = ts->db,
                             .fingerprint = ts->db ? ts->fingerprint : NULL,
                             .online_rounds = ts->db ? ts->cfg.online_rounds : 0};
    if (cfg.threads == 0) cfg.threads = core_hw_get()->logical_cores;
    /* the environment's settings (env.h): anvil_train_session_create checked them */
    (void)api_env_session(&cfg);
    return cfg;
}

/* The parameters and the optimizer's state, from the first graph built. */
static anvil_status init_params(anvil_train_session *ts, const ad_graph *ag) {
    const int n = ag->n_params;
    ts->names = core_calloc((size_t)n, sizeof *ts->names);
    ts->numel = core_calloc((size_t)n, sizeof *ts->numel);
    ts->p = core_calloc((size_t)n, sizeof *ts->p);
    const bool adam = ts->cfg.optimizer != ANVIL_OPTIMIZER_SGD;
    if (adam || ts->cfg.momentum != 0.0f) ts->m = core_calloc((size_t)n, sizeof *ts->m);
    if (adam) ts->v = core_calloc((size_t)n, sizeof *ts->v);
    if (ts->cfg.accumulate > 1) ts->acc = core_calloc((size_t)n, sizeof *ts->acc);
    if (!ts->names || !ts->numel || !ts->p || ((adam || ts->cfg.momentum != 0.0f) && !ts->m) ||
        (adam && !ts->v) || (ts->cfg.accumulate > 1 && !ts->acc))
        return ANVIL_ERR_OUT_OF_MEMORY;
    ts->n_params = n;
    for (int i = 0; i < n; i++) {
        ts->numel[i] = ag->param_numel[i];
        ts->names[i] = core_strdup(ag->param_names[i]);
        ts->p[i] = buffer(ts->numel[i]);
        if (ts->m) ts->m[i] = buffer(ts->numel[i]);
        if (ts->v) ts->v[i] = buffer(ts->numel[i]);
        if (ts->acc) ts->acc[i] = buffer(ts->numel[i]);
        if (!ts->names[i] || !ts->p[i] || (ts->m && !ts->m[i]) || (ts->v && !ts->v[i]) ||
            (ts->acc && !ts->acc[i]))
            return ANVIL_ERR_OUT_OF_MEMORY;
        memcpy(ts->p[i], ag->param_init[i], ts->numel[i] * sizeof(float));
    }
    ts->state_names = core_calloc((size_t)ag->n_state + 1, sizeof *ts->state_names);
    ts->state_numel = core_calloc((size_t)ag->n_state + 1, sizeof *ts->state_numel);
    ts->state = core_calloc((size_t)ag->n_state + 1, sizeof *ts->state);
    if (!ts->state_names || !ts->state_numel || !ts->state) return ANVIL_ERR_OUT_OF_MEMORY;
    ts->n_state = ag->n_state;
    for (int i = 0; i < ag->n_state; i++) {
        ts->state_numel[i] = ag->state_numel[i];
        ts->state_names[i] = core_strdup(ag->state_names[i]);
        ts->state[i] = buffer(ts->state_numel[i]);
        if (!ts->state_names[i] || !ts->state[i]) return ANVIL_ERR_OUT_OF_MEMORY;
        memcpy(ts->state[i], ag->state_init[i], ts->state_numel[i] * sizeof(float));
    }
    if (ts->pending) {
        /* a checkpoint loaded before the first step */
        const anvil_status st = train_ckpt_apply(ts, ts->pending);
        train_ckpt_free(ts->pending);
        ts->pending = NULL;
        return st;
    }
    return ANVIL_OK;
}

anvil_status anvil_train_session_create(const anvil_model *model, const anvil_train_config *c,
                                        anvil_train_session **out) {
    API_CHECK(model && c && out, "anvil_train_session_create: model, config and out are required");
    *out = NULL;
    API_CHECK(c->lr >= 0.0f && isfinite(c->lr), "learning rate %g: it must be a finite number >= 0",
              (double)c->lr);
    API_CHECK(c->accumulate >= 1, "accumulate is %d; it must be >= 1", c->accumulate);
    API_CHECK(c->threads >= 0 && c->threads <= 1024, "thread count %d is out of range", c->threads);
    rt_session_config env = {0};
    CORE_TRY(api_env_session(&env));
    API_CHECK(c->loss == ANVIL_LOSS_CROSS_ENTROPY || c->loss == ANVIL_LOSS_MSE ||
                  c->loss == ANVIL_LOSS_NLL || c->loss == ANVIL_LOSS_DOT,
              "unknown loss %d", (int)c->loss);
    API_CHECK(c->optimizer >= ANVIL_OPTIMIZER_SGD && c->optimizer <= ANVIL_OPTIMIZER_ADAMW,
              "unknown optimizer %d", (int)c->optimizer);
    anvil_train_session *ts = core_calloc(1, sizeof *ts);
    if (!ts) return ANVIL_ERR_OUT_OF_MEMORY;
    ts->model = model;
    ts->fwd = api_model_graph(model);
    ts->cfg = *c;
    ts->cfg.output = NULL;
    ts->cfg.trainable = NULL;
    if (c->n_trainable) {
        ts->trainable = core_calloc(c->n_trainable, sizeof *ts->trainable);
        if (!ts->trainable) {
            free(ts);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        for (size_t i = 0; i < c->n_trainable; i++)
            if (!(ts->trainable[i] = core_strdup(c->trainable[i]))) {
                anvil_train_session_free(ts);
                return ANVIL_ERR_OUT_OF_MEMORY;
            }
    }
    if (c->output && !(ts->cfg.output = core_strdup(c->output))) {
        anvil_train_session_free(ts);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    ts->cfg.tuning_db = NULL;
    anvil_status st = api_tuning_db_open(c->tuning_db, c->online_rounds > 0, &ts->db,
                                         ts->fingerprint, sizeof ts->fingerprint);
    if (st != ANVIL_OK) {
        anvil_train_session_free(ts);
        return st;
    }
    *out = ts;
    return ANVIL_OK;
}

static ad_loss ad_loss_of(anvil_loss l) {
    return l == ANVIL_LOSS_MSE   ? AD_LOSS_MSE
           : l == ANVIL_LOSS_NLL ? AD_LOSS_NLL
           : l == ANVIL_LOSS_DOT ? AD_LOSS_DOT
                                 : AD_LOSS_CROSS_ENTROPY;
}

static const char *loss_name(anvil_loss l) {
    return l == ANVIL_LOSS_MSE   ? "mse"
           : l == ANVIL_LOSS_NLL ? "nll"
           : l == ANVIL_LOSS_DOT ? "dot (vector-Jacobian)"
                                 : "cross-entropy";
}

/* The graph for these input shapes: found, or built (and the parameters set up on the first). */
static anvil_status graph_for(anvil_train_session *ts, const ir_shape *shapes, bool eval,
                              train_graph **out) {
    const ir_graph *f = ts->fwd;
    /* the parameters come from a training graph: evaluation before any step builds one first */
    if (eval && ts->n_params == 0) CORE_TRY(graph_for(ts, shapes, false, out));
    for (int k = 0; k < ts->n_graphs; k++) {
        bool same = ts->graphs[k].eval == eval;
        for (int i = 0; i < f->n_inputs && same; i++)
            same = ir_shape_equal(&ts->graphs[k].shapes[i], &shapes[i]);
        if (same) {
            *out = &ts->graphs[k];
            return ANVIL_OK;
        }
    }
    const int n_bound0 = ts->n_params + ts->n_state;
    if (ts->n_graphs == TRAIN_MAX_GRAPHS) {
        free_graph(&ts->graphs[0], n_bound0);
        memmove(&ts->graphs[0], &ts->graphs[1], sizeof ts->graphs[0] * (TRAIN_MAX_GRAPHS - 1));
        ts->n_graphs--;
        memset(&ts->graphs[ts->n_graphs], 0, sizeof ts->graphs[0]);
    }
    train_graph *tg = &ts->graphs[ts->n_graphs];
    tg->eval = eval;
    tg->shapes = core_calloc((size_t)f->n_inputs + 1, sizeof *tg->shapes);
    if (!tg->shapes) return ANVIL_ERR_OUT_OF_MEMORY;
    memcpy(tg->shapes, shapes, (size_t)f->n_inputs * sizeof *shapes);
    /* evaluation names the training graph's parameters, so that both bind the same buffers */
    const bool named = eval || ts->cfg.n_trainable > 0;
    const ad_spec spec = {.loss = ad_loss_of(ts->cfg.loss),
                          .output = ts->cfg.output,
                          .n_inputs = f->n_inputs,
                          .input_shapes = shapes,
                          .trainable = (const char *const *)(eval ? ts->names : ts->trainable),
                          .n_trainable =
                              named ? (eval ? ts->n_params : (int)ts->cfg.n_trainable) : 0,
                          .eval = eval};
    anvil_status st = ad_build(f, &spec, &tg->ag);
    if (st == ANVIL_OK && ts->n_params == 0) st = init_params(ts, tg->ag);
    if (st == ANVIL_OK && (tg->ag->n_params != ts->n_params || tg->ag->n_state != ts->n_state))
        st = core_err(ANVIL_ERR_INTERNAL, "batch shapes changed the trainable set");
    const int n_bound = ts->n_params + ts->n_state;
    if (st == ANVIL_OK) {
        tg->params = core_calloc((size_t)n_bound + 1, sizeof *tg->params);
        if (!tg->params) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; st == ANVIL_OK && i < n_bound; i++) {
        const bool param = i < ts->n_params;
        const ir_vid v = param ? tg->ag->params[i] : tg->ag->state[i - ts->n_params];
        const ir_value *pv = &tg->ag->g->values[v];
        st = anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, pv->shape.rank, pv->shape.d,
                               param ? ts->p[i] : ts->state[i - ts->n_params], &tg->params[i]);
    }
    if (st == ANVIL_OK && tg->ag->seed != IR_NONE)
        st = anvil_tensor_create(ANVIL_DTYPE_INT64, 0, NULL, &tg->seed);
    if (st == ANVIL_OK) {
        const rt_session_config cfg = session_config(ts);
        st = rt_session_create(tg->ag->g, &cfg, &tg->rt);
    }
    if (st != ANVIL_OK) {
        free_graph(tg, n_bound);
        return st;
    }
    ts->n_graphs++;
    *out = tg;
    return ANVIL_OK;
}

/* ---- the update ------------------------------------------------------------------------------ */

static double grad_norm(const anvil_train_session *ts, float *const *g) {
    double s = 0;
    for (int i = 0; i < ts->n_params; i++)
        for (size_t j = 0; j < ts->numel[i]; j++) s += (double)g[i][j] * g[i][j];
    return sqrt(s);
}

/* The update of parameter i from its gradient g scaled by `scale` (clipping), update number
 * ts->updates (PyTorch's formulas: L2 weight decay into the gradient for SGD and Adam, decoupled
 * for AdamW; SGD's momentum buffer starts as the first gradient). */
static void update_param(anvil_train_session *ts, int i, const float *restrict g, float scale) {
    const anvil_train_config *c = &ts->cfg;
    const float lr = c->lr, wd = c->weight_decay, mu = c->momentum;
    float *restrict p = ts->p[i];
    const size_t n = ts->numel[i];
    if (c->optimizer == ANVIL_OPTIMIZER_SGD) {
        float *restrict buf = ts->m ? ts->m[i] : NULL;
        if (!buf) {
            for (size_t j = 0; j < n; j++) p[j] -= lr * (g[j] * scale + wd * p[j]);
            return;
        }
        const bool started = ts->momentum_started, nesterov = c->nesterov;
        for (size_t j = 0; j < n; j++) {
            const float d = g[j] * scale + wd * p[j];
            const float b = started ? mu * buf[j] + d : d;
            buf[j] = b;
            p[j] -= lr * (nesterov ? d + mu * b : b);
        }
        return;
    }
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    const float bc1 = 1.0f - powf(b1, (float)ts->updates),
                bc2 = 1.0f - powf(b2, (float)ts->updates);
    float *restrict m = ts->m[i], *restrict v = ts->v[i];
    const float keep = c->optimizer == ANVIL_OPTIMIZER_ADAMW ? 1.0f - lr * wd : 1.0f;
    const float l2 = c->optimizer == ANVIL_OPTIMIZER_ADAMW ? 0.0f : wd;
    /* PyTorch's form: step lr / bc1, denominator sqrt(v) / sqrt(bc2) + eps; one square root and
     * one division per element (dividing m and v by the corrections first cost two more; an
     * AdamW step of the 4096-wide MLP, 50M parameters, spent most of its time here) */
    const float step = lr / bc1, inv_rbc2 = 1.0f / sqrtf(bc2), a1 = 1.0f - b1, a2 = 1.0f - b2;
    for (size_t j = 0; j < n; j++) {
        const float d = g[j] * scale + l2 * p[j];
        const float mj = b1 * m[j] + a1 * d, vj = b2 * v[j] + a2 * d * d;
        m[j] = mj;
        v[j] = vj;
        p[j] = p[j] * keep - step * mj / (sqrtf(vj) * inv_rbc2 + eps);
    }
}

/* One update from whole gradients g (clipped to the configured norm first). */
static void update_all(anvil_train_session *ts, float *const *g) {
    float scale = 1.0f;
    if (ts->cfg.clip_norm > 0.0f) {
        const double norm = grad_norm(ts, g);
        if (norm > ts->cfg.clip_norm) scale = (float)(ts->cfg.clip_norm / (norm + 1e-6));
    }
    ts->updates++;
    for (int i = 0; i < ts->n_params; i++) update_param(ts, i, g[i], scale);
    ts->momentum_started = true;
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* What the visits of one run's outputs (rt_session_run_visit) do: the loss first (a bad one
 * stops the run before any update), the prediction copied out when wanted, then each gradient
 * applied straight from the session's arena, or kept where the update needs them all at once
 * (clipping: stash; accumulation: summed into acc). */
typedef struct step_visit {
    anvil_train_session *ts;
    bool train;
    bool grads; /* anvil_train_gradients: gradients kept in ts->grads, nothing updated */
    float loss;
    anvil_tensor *prediction; /* NULL: not wanted */
    bool want_prediction;
} step_visit;

static anvil_status visit_output(void *arg, int32_t j, const op_tensor *t) {
    step_visit *sv = arg;
    anvil_train_session *ts = sv->ts;
    if (j == 0) {
        sv->loss = *(const float *)t->data;
        if (!isfinite(sv->loss))
            return core_err(ANVIL_ERR_RUNTIME,
                            "step %llu: the loss is %s; the parameters were left as they were "
                            "after the step before (lower the learning rate, or clip the "
                            "gradients)",
                            (unsigned long long)ts->steps + sv->train,
                            isnan(sv->loss) ? "NaN" : "infinite");
        if (sv->train && !sv->grads) ts->steps++;
        return ANVIL_OK;
    }
    if (j == 1) {
        if (!sv->want_prediction) return ANVIL_OK;
        CORE_TRY(anvil_tensor_create(t->dtype, t->rank, t->dims, &sv->prediction));
        memcpy(anvil_tensor_data(sv->prediction), t->data, anvil_tensor_bytes(sv->prediction));
        return ANVIL_OK;
    }
    if (j >= 2 + ts->n_params) {
        if (sv->grads) return ANVIL_OK; /* statistics move with steps only */
        /* BatchNormalization's running statistics after this step */
        const int k = j - 2 - ts->n_params;
        memcpy(ts->state[k], t->data, ts->state_numel[k] * sizeof(float));
        return ANVIL_OK;
    }
    const int i = j - 2;
    const float *g = t->data;
    if (sv->grads) {
        memcpy(ts->grads[i], g, ts->numel[i] * sizeof(float));
    } else if (ts->acc) {
        for (size_t k = 0; k < ts->numel[i]; k++) ts->acc[i][k] += g[k];
    } else if (ts->stash) {
        memcpy(ts->stash[i], g, ts->numel[i] * sizeof(float));
    } else {
        if (i == 0) ts->updates++;
        update_param(ts, i, g, 1.0f);
    }
    return ANVIL_OK;
}

/* Offline tuning of the training graph instead of a step (anvil_train_tune). */
typedef struct train_tune {
    double budget_seconds;
    int tuned; /* out: problems measured */
} train_tune;

static anvil_status tune_graph(anvil_train_session *ts, train_graph *tg,
                               const anvil_tensor *const *ins, train_tune *tt) {
    if (!ts->db)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tuning a training graph needs a tuning database (tuning_db or the "
                        "default file)");
    /* measured as anvil tune measures: no profiling, no online tuning */
    rt_session_config cfg = {.threads = session_config(ts).threads, .opt_level = ts->cfg.opt_level};
    (void)api_env_session(&cfg);
    rt_tune_run tr = {0};
    tr.db = ts->db;
    tr.fingerprint = ts->fingerprint;
    tr.budget_seconds = tt->budget_seconds;
    anvil_status st = rt_tune_graph(tg->ag->g, &cfg, ins, &tr);
    for (int i = 0; st == ANVIL_OK && i < tr.n_items; i++) tt->tuned += !tr.items[i].cached;
    rt_tune_run_free(&tr);
    if (st != ANVIL_OK) return st;
    /* the graph's session is made again, so that its plan reads the winners */
    const rt_session_config sc = session_config(ts);
    rt_session *fresh;
    CORE_TRY(rt_session_create(tg->ag->g, &sc, &fresh));
    rt_session_free(tg->rt);
    tg->rt = fresh;
    return ANVIL_OK;
}

static anvil_status run(anvil_train_session *ts, size_t n_inputs, const char *const *names,
                        const anvil_tensor *const *inputs, const anvil_tensor *labels, bool train,
                        bool grads, float *loss, anvil_tensor **prediction, train_tune *tune) {
    API_CHECK(ts && (n_inputs == 0 || (names && inputs)) && labels && loss,
              "anvil_train_step: session, inputs, labels and loss are required");
    const ir_graph *f = ts->fwd;
    API_CHECK(n_inputs == (size_t)f->n_inputs, "the model has %d inputs; %zu given", f->n_inputs,
              n_inputs);
    const anvil_tensor *bound[64];
    ir_shape shapes[64];
    API_CHECK(f->n_inputs < 64, "too many model inputs");
    for (int i = 0; i < f->n_inputs; i++) {
        const char *want = f->values[f->inputs[i]].name;
        bound[i] = NULL;
        for (size_t j = 0; j < n_inputs && !bound[i]; j++)
            if (names[j] && !strcmp(names[j], want)) bound[i] = inputs[j];
        API_CHECK(bound[i], "no tensor given for model input '%s'", want);
        ir_shape_set(&shapes[i], bound[i]->rank, bound[i]->dims);
    }
    train_graph *tg;
    CORE_TRY(graph_for(ts, shapes, !train, &tg));
    const ad_graph *ag = tg->ag;
    const ir_value *lv = &ag->g->values[ag->labels];
    ir_shape ls;
    ir_shape_set(&ls, labels->rank, labels->dims);
    if (labels->dtype != lv->dtype || !ir_shape_equal(&ls, &lv->shape)) {
        char want[96], got[96];
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "labels are %s %s; the %s loss wants %s %s for this batch",
                        anvil_dtype_name(labels->dtype), ir_shape_str(NULL, &ls, got, sizeof got),
                        loss_name(ts->cfg.loss), anvil_dtype_name(lv->dtype),
                        ir_shape_str(NULL, &lv->shape, want, sizeof want));
    }
    if (grads && !ts->grads) {
        ts->grads = core_calloc((size_t)ts->n_params + 1, sizeof *ts->grads);
        for (int i = 0; ts->grads && i < ts->n_params; i++)
            if (!(ts->grads[i] = buffer(ts->numel[i]))) return ANVIL_ERR_OUT_OF_MEMORY;
        if (!ts->grads) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (train && !grads && !ts->acc && ts->cfg.clip_norm > 0.0f && !ts->stash) {
        ts->stash = core_calloc((size_t)ts->n_params, sizeof *ts->stash);
        for (int i = 0; ts->stash && i < ts->n_params; i++)
            if (!(ts->stash[i] = buffer(ts->numel[i]))) return ANVIL_ERR_OUT_OF_MEMORY;
        if (!ts->stash) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    const int n_in = ag->g->n_inputs, n_out = ag->g->n_outputs;
    const anvil_tensor **ins = core_calloc((size_t)n_in, sizeof *ins);
    bool *want = core_calloc((size_t)n_out, sizeof *want);
    anvil_status st = ins && want ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    step_visit sv = {ts, train, grads, 0.0f, NULL, prediction != NULL};
    if (st == ANVIL_OK) {
        for (int i = 0; i < f->n_inputs; i++) ins[i] = bound[i];
        ins[f->n_inputs] = labels;
        for (int i = 0; i < ts->n_params + ts->n_state; i++)
            ins[f->n_inputs + 1 + i] = tg->params[i];
        if (tg->seed) {
            /* each step its own masks, reproducible from the configured seed */
            *(int64_t *)anvil_tensor_data(tg->seed) =
                (int64_t)(ts->cfg.seed * 0x9e3779b97f4a7c15ull + ts->steps);
            ins[f->n_inputs + 1 + ts->n_params + ts->n_state] = tg->seed;
        }
        for (int j = 0; j < n_out; j++) want[j] = true;
        if (tune) {
            st = tune_graph(ts, tg, ins, tune);
            free(ins);
            free(want);
            return st;
        }
        st = rt_session_run_visit(tg->rt, ins, want, visit_output, &sv);
    }
    if (st == ANVIL_OK && grads) ts->have_grads = true;
    if (st == ANVIL_OK && train && !grads) {
        if (ts->acc) {
            if (++ts->micro == (uint64_t)ts->cfg.accumulate) {
                update_all(ts, ts->acc);
                for (int i = 0; i < ts->n_params; i++)
                    memset(ts->acc[i], 0, ts->numel[i] * sizeof(float));
                ts->micro = 0;
            }
        } else if (ts->stash) {
            update_all(ts, ts->stash);
        } else {
            ts->momentum_started = true;
        }
    }
    if (st == ANVIL_OK) {
        *loss = sv.loss;
        if (prediction) *prediction = sv.prediction;
    } else {
        anvil_tensor_free(sv.prediction);
    }
    free(ins);
    free(want);
    return st;
}

anvil_status anvil_train_step(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, float *loss, anvil_tensor **prediction) {
    return run(ts, n_inputs, input_names, inputs, labels, true, false, loss, prediction, NULL);
}

anvil_status anvil_train_eval(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, float *loss, anvil_tensor **prediction) {
    return run(ts, n_inputs, input_names, inputs, labels, false, false, loss, prediction, NULL);
}

anvil_status anvil_train_gradients(anvil_train_session *ts, size_t n_inputs,
                                   const char *const *input_names,
                                   const anvil_tensor *const *inputs, const anvil_tensor *labels,
                                   float *loss, anvil_tensor **prediction) {
    return run(ts, n_inputs, input_names, inputs, labels, true, true, loss, prediction, NULL);
}

size_t anvil_train_param_count(const anvil_train_session *ts) {
    return ts ? (size_t)ts->n_params : 0;
}

const char *anvil_train_param_name(const anvil_train_session *ts, size_t i) {
    return ts && i < (size_t)ts->n_params ? ts->names[i] : NULL;
}

float *anvil_train_param_data(anvil_train_session *ts, size_t i, size_t *numel) {
    if (!ts || i >= (size_t)ts->n_params) return NULL;
    if (numel) *numel = ts->numel[i];
    return ts->p[i];
}

const float *anvil_train_grad_data(const anvil_train_session *ts, size_t i) {
    return ts && ts->have_grads && i < (size_t)ts->n_params ? ts->grads[i] : NULL;
}

anvil_status anvil_train_tune(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, double budget_seconds, int *tuned) {
    train_tune tt = {budget_seconds, 0};
    float unused;
    anvil_status st =
        run(ts, n_inputs, input_names, inputs, labels, true, false, &unused, NULL, &tt);
    if (tuned) *tuned = tt.tuned;
    return st;
}

void anvil_train_set_lr(anvil_train_session *ts, float lr) {
    if (ts && lr >= 0.0f && isfinite(lr)) ts->cfg.lr = lr;
}

uint64_t anvil_train_updates(const anvil_train_session *ts) {
    return ts ? ts->updates : 0;
}

anvil_status anvil_train_write_profile(const anvil_train_session *ts, const char *path) {
    API_CHECK(ts && path, "anvil_train_write_profile: session and path are required");
    API_CHECK(ts->n_graphs > 0, "anvil_train_write_profile: no step has run");
    return rt_session_write_trace(ts->graphs[ts->n_graphs - 1].rt, path);
}

anvil_status anvil_train_memory_get(const anvil_train_session *ts, anvil_train_memory *out) {
    API_CHECK(ts && out, "anvil_train_memory_get: session and out are required");
    memset(out, 0, sizeof *out);
    for (int k = 0; k < ts->n_graphs; k++) {
        anvil_session_stats st;
        if (rt_session_stats(ts->graphs[k].rt, &st) != ANVIL_OK) {
            core_err_clear(); /* a graph that has not run yet holds no arena */
            continue;
        }
        if (st.arena_bytes > out->arena_bytes) out->arena_bytes = st.arena_bytes;
    }
    size_t per = 0;
    for (int i = 0; i < ts->n_params; i++) per += ts->numel[i] * sizeof(float);
    out->param_bytes = per;
    for (int i = 0; i < ts->n_state; i++) out->param_bytes += ts->state_numel[i] * sizeof(float);
    out->optimizer_bytes =
        per * (size_t)((ts->m != NULL) + (ts->v != NULL) + (ts->acc != NULL) + (ts->stash != NULL));
    return ANVIL_OK;
}

uint64_t anvil_train_steps(const anvil_train_session *ts) {
    if (!ts) return 0;
    return ts->pending ? train_ckpt_steps(ts->pending) : ts->steps;
}

anvil_status anvil_train_export(const anvil_train_session *ts, const char *path) {
    API_CHECK(ts && path, "anvil_train_export: session and path are required");
    API_CHECK(ts->n_params > 0, "anvil_train_export: nothing trained yet (run a step first)");
    ir_graph *g;
    CORE_TRY(ir_graph_clone(ts->fwd, &g));
    anvil_status st = ANVIL_OK;
    for (int i = 0; i < ts->n_params && st == ANVIL_OK; i++) {
        const ir_vid v = ir_graph_find_value(g, ts->names[i]);
        if (v == IR_NONE) {
            st = core_err(ANVIL_ERR_INTERNAL, "parameter '%s' is not in the model", ts->names[i]);
            break;
        }
        g->values[v].data = ts->p[i];
        g->values[v].data_bytes = ts->numel[i] * sizeof(float);
    }
    for (int i = 0; i < ts->n_state && st == ANVIL_OK; i++) {
        const ir_vid v = ir_graph_find_value(g, ts->state_names[i]);
        if (v == IR_NONE) {
            st = core_err(ANVIL_ERR_INTERNAL, "statistic '%s' is not in the model",
                          ts->state_names[i]);
            break;
        }
        /* a statistic torch.onnx.export shared with another initializer through an Identity
         * (autodiff/build.c, take_state) is written as an initializer of its own */
        const int32_t pk = g->values[v].producer;
        if (pk >= 0 && g->nodes[pk].op == IR_OP_IDENTITY) {
            char name[512];
            snprintf(name, sizeof name, "%s/shared", ts->state_names[i]);
            ir_vid dummy;
            st = ir_graph_add_value(g, name, &dummy);
            if (st != ANVIL_OK) break;
            g->nodes[pk].outputs[0] = dummy;
            g->values[dummy].producer = pk;
            g->values[dummy].dtype = ANVIL_DTYPE_FLOAT32;
            g->values[dummy].shape = g->values[v].shape;
            g->values[v].producer = -1;
            g->values[v].flags |= IR_VALUE_CONST;
        }
        g->values[v].data = ts->state[i];
        g->values[v].data_bytes = ts->state_numel[i] * sizeof(float);
    }
    if (st == ANVIL_OK) st = onnx_graph_write(g, path);
    ir_graph_free(g);
    return st;
}
