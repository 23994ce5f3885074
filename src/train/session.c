/* Training sessions: their state, and the step loop. A run binds the batch to the graph for its
 * shapes (graphs.c), runs it, and visits its outputs as they are made: the loss, the prediction,
 * the gradients and BatchNormalization's running statistics. The gradients come back as the
 * graph's outputs; where nothing needs them whole, each is applied straight from the graph's
 * arena (optim.c), so a step copies no gradient. Clipping, accumulation and the gradient hook
 * need them whole: they are kept (stash, acc) and go through one update at the end of the step,
 * through `update` below: the seam where data parallelism plugs its allreduce in. */
#include "train_impl.h"

#include "onnx/onnx.h"
#include "autotune/autotune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void train_session_free(train_session *ts) {
    if (!ts) return;
    for (int k = 0; k < ts->n_graphs; k++)
        train_graph_free(&ts->graphs[k], ts->n_params + ts->n_state);
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

anvil_status train_session_create(const ir_graph *fwd, const train_config *c, train_session **out) {
    *out = NULL;
    train_session *ts = core_calloc(1, sizeof *ts);
    if (!ts) {
        tune_db_close(c->db);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    ts->fwd = fwd;
    ts->cfg = c->opt;
    ts->cfg.output = NULL;
    ts->cfg.trainable = NULL;
    ts->cfg.tuning_db = NULL;
    ts->cfg.precision = NULL; /* borrowed for the create call: env.knobs holds it */
    ts->db = c->db;
    ts->env = c->env;
    ts->grad_hook = c->grad_hook;
    ts->grad_hook_arg = c->grad_hook_arg;
    if (c->db && c->fingerprint)
        snprintf(ts->fingerprint, sizeof ts->fingerprint, "%s", c->fingerprint);
    if (c->opt.n_trainable) {
        ts->trainable = core_calloc(c->opt.n_trainable, sizeof *ts->trainable);
        if (!ts->trainable) {
            train_session_free(ts);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        for (size_t i = 0; i < c->opt.n_trainable; i++)
            if (!(ts->trainable[i] = core_strdup(c->opt.trainable[i]))) {
                train_session_free(ts);
                return ANVIL_ERR_OUT_OF_MEMORY;
            }
    }
    if (c->opt.output && !(ts->cfg.output = core_strdup(c->opt.output))) {
        train_session_free(ts);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    *out = ts;
    return ANVIL_OK;
}

static const char *loss_name(anvil_loss l) {
    return l == ANVIL_LOSS_MSE   ? "mse"
           : l == ANVIL_LOSS_NLL ? "nll"
           : l == ANVIL_LOSS_DOT ? "dot (vector-Jacobian)"
                                 : "cross-entropy";
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* What the visits of one run's outputs (rt_session_run_visit) do: the loss first (a bad one
 * stops the run before any update), the prediction copied out when wanted, then each gradient
 * applied straight from the session's arena, or kept where the update needs them all at once
 * (clipping: stash; accumulation: summed into acc). */
typedef struct step_visit {
    train_session *ts;
    bool train;
    bool grads; /* TRAIN_GRADIENTS: gradients kept in ts->grads, nothing updated */
    float loss;
    anvil_tensor *prediction; /* NULL: not wanted */
    bool want_prediction;
} step_visit;

static anvil_status visit_output(void *arg, int32_t j, const op_tensor *t) {
    step_visit *sv = arg;
    train_session *ts = sv->ts;
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
        CORE_TRY(rt_tensor_new_uninit(t->dtype, t->rank, t->dims, &sv->prediction));
        memcpy(sv->prediction->data, t->data, sv->prediction->bytes);
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
        train_optim_param(ts, i, g, 1.0f);
    }
    return ANVIL_OK;
}

/* Offline tuning of the training graph instead of a step (train_tune). */
typedef struct tune_request {
    double budget_seconds;
    int tuned; /* out: problems measured */
} tune_request;

static anvil_status tune_graph(train_session *ts, train_graph *tg, const anvil_tensor *const *ins,
                               tune_request *tt) {
    if (!ts->db)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tuning a training graph needs a tuning database (tuning_db or the "
                        "default file)");
    /* measured as anvil tune measures: no profiling, no online tuning */
    rt_session_config cfg = ts->env;
    cfg.threads = train_rt_config(ts).threads;
    cfg.opt_level = ts->cfg.opt_level;
    autotune_run tr = {0};
    tr.db = ts->db;
    tr.fingerprint = ts->fingerprint;
    tr.budget_seconds = tt->budget_seconds;
    anvil_status st = autotune_graph(tg->ag->g, &cfg, ins, &tr);
    for (int i = 0; st == ANVIL_OK && i < tr.n_items; i++) tt->tuned += !tr.items[i].cached;
    autotune_run_free(&tr);
    if (st != ANVIL_OK) return st;
    /* the graph's session is made again, so that its plan reads the winners */
    const rt_session_config sc = train_rt_config(ts);
    rt_session *fresh;
    CORE_TRY(rt_session_create(tg->ag->g, &sc, &fresh));
    rt_session_free(tg->rt);
    tg->rt = fresh;
    return ANVIL_OK;
}

/* ---- the seam between a step's gradients and its update ------------------------------------
 * Every update from whole gradients comes here, once, with g[n_params] complete: the step's own,
 * or the sum over the micro-steps of an accumulation. The grad hook (train.h) sees them first and
 * may rewrite them (an allreduce across data-parallel ranks goes here, so that clipping and the
 * optimizer act on the global gradients); then clipping and the optimizer (optim.c). A hook's
 * error returns before anything is updated. With no hook, clipping nor accumulation, the update
 * runs from the graph's outputs as they come instead (visit_output) and never comes here. */
static anvil_status update(train_session *ts, float *const *g) {
    if (ts->grad_hook) CORE_TRY(ts->grad_hook(ts->grad_hook_arg, ts->n_params, g, ts->numel));
    train_optim_update(ts, g);
    return ANVIL_OK;
}

static anvil_status run(train_session *ts, size_t n_inputs, const char *const *names,
                        const anvil_tensor *const *inputs, const anvil_tensor *labels, bool train,
                        bool grads, float *loss, anvil_tensor **prediction, tune_request *tune) {
    const ir_graph *f = ts->fwd;
    if (n_inputs != (size_t)f->n_inputs)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "the model has %d inputs; %zu given",
                        f->n_inputs, n_inputs);
    const anvil_tensor *bound[64];
    ir_shape shapes[64];
    if (f->n_inputs >= 64) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "too many model inputs");
    for (int i = 0; i < f->n_inputs; i++) {
        const char *want = f->values[f->inputs[i]].name;
        bound[i] = NULL;
        for (size_t j = 0; j < n_inputs && !bound[i]; j++)
            if (names[j] && !strcmp(names[j], want)) bound[i] = inputs[j];
        if (!bound[i])
            return core_err(ANVIL_ERR_INVALID_ARGUMENT, "no tensor given for model input '%s'",
                            want);
        ir_shape_set(&shapes[i], bound[i]->rank, bound[i]->dims);
    }
    train_graph *tg;
    CORE_TRY(train_graph_for(ts, shapes, !train, &tg));
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
            if (!(ts->grads[i] = train_buffer(ts->numel[i]))) return ANVIL_ERR_OUT_OF_MEMORY;
        if (!ts->grads) return ANVIL_ERR_OUT_OF_MEMORY;
    }
    if (train && !grads && !ts->acc && (ts->cfg.clip_norm > 0.0f || ts->grad_hook) && !ts->stash) {
        ts->stash = core_calloc((size_t)ts->n_params, sizeof *ts->stash);
        for (int i = 0; ts->stash && i < ts->n_params; i++)
            if (!(ts->stash[i] = train_buffer(ts->numel[i]))) return ANVIL_ERR_OUT_OF_MEMORY;
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
            *(int64_t *)tg->seed->data =
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
                st = update(ts, ts->acc);
                /* summed gradients go with their update, applied or not */
                for (int i = 0; i < ts->n_params; i++)
                    memset(ts->acc[i], 0, ts->numel[i] * sizeof(float));
                ts->micro = 0;
            }
        } else if (ts->stash) {
            st = update(ts, ts->stash);
        } else {
            ts->momentum_started = true;
        }
    }
    if (st == ANVIL_OK) {
        *loss = sv.loss;
        if (prediction) *prediction = sv.prediction;
    } else {
        train_tensor_free(sv.prediction);
    }
    free(ins);
    free(want);
    return st;
}

anvil_status train_run(train_session *ts, train_mode mode, size_t n_inputs,
                       const char *const *names, const anvil_tensor *const *inputs,
                       const anvil_tensor *labels, float *loss, anvil_tensor **prediction) {
    return run(ts, n_inputs, names, inputs, labels, mode != TRAIN_EVAL, mode == TRAIN_GRADIENTS,
               loss, prediction, NULL);
}

anvil_status train_tune(train_session *ts, size_t n_inputs, const char *const *names,
                        const anvil_tensor *const *inputs, const anvil_tensor *labels,
                        double budget_seconds, int *tuned) {
    tune_request tt = {budget_seconds, 0};
    float unused;
    anvil_status st = run(ts, n_inputs, names, inputs, labels, true, false, &unused, NULL, &tt);
    if (tuned) *tuned = tt.tuned;
    return st;
}

size_t train_param_count(const train_session *ts) {
    return (size_t)ts->n_params;
}

const char *train_param_name(const train_session *ts, size_t i) {
    return i < (size_t)ts->n_params ? ts->names[i] : NULL;
}

float *train_param_data(train_session *ts, size_t i, size_t *numel) {
    if (i >= (size_t)ts->n_params) return NULL;
    if (numel) *numel = ts->numel[i];
    return ts->p[i];
}

const float *train_grad_data(const train_session *ts, size_t i) {
    return ts->have_grads && i < (size_t)ts->n_params ? ts->grads[i] : NULL;
}

void train_set_lr(train_session *ts, float lr) {
    if (lr >= 0.0f && isfinite(lr)) ts->cfg.lr = lr;
}

uint64_t train_updates(const train_session *ts) {
    return ts->updates;
}

anvil_status train_write_profile(const train_session *ts, const char *path) {
    if (ts->n_graphs == 0)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "anvil_train_write_profile: no step has run");
    return rt_session_write_trace(ts->graphs[ts->n_graphs - 1].rt, path);
}

void train_memory_get(const train_session *ts, anvil_train_memory *out) {
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
}

uint64_t train_steps(const train_session *ts) {
    return ts->pending ? train_ckpt_steps(ts->pending) : ts->steps;
}

anvil_status train_export(const train_session *ts, const char *path) {
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
