/* The batch-graph cache: a training session's graphs, one per batch shape met (and one more per
 * shape for evaluation), each the autodiff training graph planned as a runtime session of its
 * own. The first graph built also makes the parameters and the optimizer's state.
 *
 * The parameters are the graphs' inputs, bound to the session's own buffers, so a step reads the
 * current weights without a copy, every graph reads the same ones, and a plan never folds them.
 * Up to TRAIN_MAX_GRAPHS are kept; the oldest goes first. */
#include "train_impl.h"

#include <stdlib.h>
#include <string.h>

float *train_buffer(size_t n) {
    float *b = core_aligned_alloc(64, (n ? n : 1) * sizeof(float));
    if (b) memset(b, 0, (n ? n : 1) * sizeof(float));
    return b;
}

void train_tensor_free(anvil_tensor *t) {
    if (!t) return;
    if (t->owns_data) free(t->data);
    free(t);
}

/* A tensor of shape s over the session's buffer data (float32, not owned). */
static anvil_status wrap(const ir_shape *s, float *data, anvil_tensor **out) {
    anvil_tensor *t = core_calloc(1, sizeof *t);
    if (!t) return ANVIL_ERR_OUT_OF_MEMORY;
    t->dtype = ANVIL_DTYPE_FLOAT32;
    t->rank = s->rank;
    for (int i = 0; i < s->rank; i++) t->dims[i] = s->d[i];
    if (!core_tensor_bytes(ANVIL_DTYPE_FLOAT32, t->dims, t->rank, &t->bytes)) {
        free(t);
        return core_err(ANVIL_ERR_INTERNAL, "a parameter's size overflows");
    }
    t->data = data;
    *out = t;
    return ANVIL_OK;
}

void train_graph_free(train_graph *tg, int n_bound) {
    rt_session_free(tg->rt);
    train_tensor_free(tg->seed);
    for (int i = 0; tg->params && i < n_bound; i++) train_tensor_free(tg->params[i]);
    free(tg->params);
    ad_graph_free(tg->ag);
    free(tg->shapes);
    memset(tg, 0, sizeof *tg);
}

rt_session_config train_rt_config(const train_session *ts) {
    rt_session_config cfg = ts->env; /* the environment's settings under the session's own */
    cfg.threads = ts->cfg.threads;
    cfg.opt_level = ts->cfg.opt_level;
    cfg.profiling = ts->cfg.profiling != 0;
    cfg.db = ts->db;
    cfg.fingerprint = ts->db ? ts->fingerprint : NULL;
    cfg.online_rounds = ts->db ? ts->cfg.online_rounds : 0;
    if (cfg.threads == 0) cfg.threads = core_hw_get()->logical_cores;
    return cfg;
}

/* The parameters and the optimizer's state, from the first graph built. */
static anvil_status init_params(train_session *ts, const ad_graph *ag) {
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
        ts->p[i] = train_buffer(ts->numel[i]);
        if (ts->m) ts->m[i] = train_buffer(ts->numel[i]);
        if (ts->v) ts->v[i] = train_buffer(ts->numel[i]);
        if (ts->acc) ts->acc[i] = train_buffer(ts->numel[i]);
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
        ts->state[i] = train_buffer(ts->state_numel[i]);
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

static ad_loss ad_loss_of(anvil_loss l) {
    return l == ANVIL_LOSS_MSE   ? AD_LOSS_MSE
           : l == ANVIL_LOSS_NLL ? AD_LOSS_NLL
           : l == ANVIL_LOSS_DOT ? AD_LOSS_DOT
                                 : AD_LOSS_CROSS_ENTROPY;
}

anvil_status train_graph_for(train_session *ts, const ir_shape *shapes, bool eval,
                             train_graph **out) {
    const ir_graph *f = ts->fwd;
    /* the parameters come from a training graph: evaluation before any step builds one first */
    if (eval && ts->n_params == 0) CORE_TRY(train_graph_for(ts, shapes, false, out));
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
        train_graph_free(&ts->graphs[0], n_bound0);
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
        st = wrap(&pv->shape, param ? ts->p[i] : ts->state[i - ts->n_params], &tg->params[i]);
    }
    if (st == ANVIL_OK && tg->ag->seed != IR_NONE)
        st = rt_tensor_new(ANVIL_DTYPE_INT64, 0, NULL, &tg->seed);
    if (st == ANVIL_OK) {
        const rt_session_config cfg = train_rt_config(ts);
        st = rt_session_create(tg->ag->g, &cfg, &tg->rt);
    }
    if (st != ANVIL_OK) {
        train_graph_free(tg, n_bound);
        return st;
    }
    ts->n_graphs++;
    *out = tg;
    return ANVIL_OK;
}
