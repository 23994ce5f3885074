/* Training sessions (anvil.h): the public calls check their arguments and call src/train/,
 * which holds the sessions, their graphs, the update and checkpoints. The one thing done here is
 * what belongs to the API: the configuration's defaults and opening the tuning database the
 * configuration names (as anvil_session_create does). */
#include "api.h"

#include "env.h"
#include "train/train.h"
#include "tune/tune.h"

#include <math.h>
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

anvil_status anvil_train_session_create(const anvil_model *model, const anvil_train_config *c,
                                        anvil_train_session **out) {
    API_CHECK(model && c && out, "anvil_train_session_create: model, config and out are required");
    *out = NULL;
    API_CHECK(c->lr >= 0.0f && isfinite(c->lr), "learning rate %g: it must be a finite number >= 0",
              (double)c->lr);
    API_CHECK(c->accumulate >= 1, "accumulate is %d; it must be >= 1", c->accumulate);
    API_CHECK(c->threads >= 0 && c->threads <= 1024, "thread count %d is out of range", c->threads);
    API_CHECK(c->loss == ANVIL_LOSS_CROSS_ENTROPY || c->loss == ANVIL_LOSS_MSE ||
                  c->loss == ANVIL_LOSS_NLL || c->loss == ANVIL_LOSS_DOT,
              "unknown loss %d", (int)c->loss);
    API_CHECK(c->optimizer >= ANVIL_OPTIMIZER_SGD && c->optimizer <= ANVIL_OPTIMIZER_ADAMW,
              "unknown optimizer %d", (int)c->optimizer);
    char fingerprint[TUNE_FINGERPRINT_MAX] = "";
    train_config tc = {.opt = *c, .fingerprint = fingerprint};
    CORE_TRY(api_env_session(&tc.env));
    API_CHECK(c->tolerance <= 0 || isfinite(c->tolerance),
              "tolerance %g: it must be a positive finite number (or <= 0 for the default)",
              c->tolerance);
    tc.env.tolerance = c->tolerance > 0 ? c->tolerance : RT_DEFAULT_TOLERANCE;
    if (c->precision)
        CORE_TRY(api_precision_parse("anvil_train_config.precision", c->precision,
                                     &tc.env.knobs.precision));
    /* fp16's range (6e-5 to 65504) does not hold gradients without loss scaling, which anvil's
     * training does not do; bf16 has fp32's range. The environment's fp16 too: refused, not
     * trained in fp32 without the caller knowing. */
    if (tc.env.knobs.precision == KERN_PREC_FP16)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "training in fp16 is not supported: its range does not hold gradients "
                        "without loss scaling, which anvil does not do; use bf16 (or auto) for "
                        "mixed-precision training");
    if (tc.env.knobs.precision == KERN_PREC_INT8)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "training in int8 is not supported: int8 is an inference precision "
                        "(dynamic quantization of MatMuls); use bf16 for mixed-precision training");
    api_precision_warn(&tc.env);
    CORE_TRY(api_tuning_db_open(c->tuning_db, c->online_rounds > 0, &tc.db, fingerprint,
                                sizeof fingerprint));
    return train_session_create(api_model_graph(model), &tc, out);
}

void anvil_train_session_free(anvil_train_session *ts) {
    train_session_free(ts);
}

static anvil_status check_run(const anvil_train_session *ts, size_t n_inputs,
                              const char *const *names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, const float *loss) {
    API_CHECK(ts && (n_inputs == 0 || (names && inputs)) && labels && loss,
              "anvil_train_step: session, inputs, labels and loss are required");
    return ANVIL_OK;
}

anvil_status anvil_train_step(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, float *loss, anvil_tensor **prediction) {
    CORE_TRY(check_run(ts, n_inputs, input_names, inputs, labels, loss));
    return train_run(ts, TRAIN_STEP, n_inputs, input_names, inputs, labels, loss, prediction);
}

anvil_status anvil_train_eval(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, float *loss, anvil_tensor **prediction) {
    CORE_TRY(check_run(ts, n_inputs, input_names, inputs, labels, loss));
    return train_run(ts, TRAIN_EVAL, n_inputs, input_names, inputs, labels, loss, prediction);
}

anvil_status anvil_train_gradients(anvil_train_session *ts, size_t n_inputs,
                                   const char *const *input_names,
                                   const anvil_tensor *const *inputs, const anvil_tensor *labels,
                                   float *loss, anvil_tensor **prediction) {
    CORE_TRY(check_run(ts, n_inputs, input_names, inputs, labels, loss));
    return train_run(ts, TRAIN_GRADIENTS, n_inputs, input_names, inputs, labels, loss, prediction);
}

anvil_status anvil_train_tune(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, double budget_seconds, int *tuned) {
    const float unused = 0.0f;
    anvil_status st = check_run(ts, n_inputs, input_names, inputs, labels, &unused);
    if (st != ANVIL_OK) {
        if (tuned) *tuned = 0;
        return st;
    }
    return train_tune(ts, n_inputs, input_names, inputs, labels, budget_seconds, tuned);
}

size_t anvil_train_param_count(const anvil_train_session *ts) {
    return ts ? train_param_count(ts) : 0;
}

const char *anvil_train_param_name(const anvil_train_session *ts, size_t i) {
    return ts ? train_param_name(ts, i) : NULL;
}

float *anvil_train_param_data(anvil_train_session *ts, size_t i, size_t *numel) {
    return ts ? train_param_data(ts, i, numel) : NULL;
}

const float *anvil_train_grad_data(const anvil_train_session *ts, size_t i) {
    return ts ? train_grad_data(ts, i) : NULL;
}

void anvil_train_set_lr(anvil_train_session *ts, float lr) {
    if (ts) train_set_lr(ts, lr);
}

uint64_t anvil_train_updates(const anvil_train_session *ts) {
    return ts ? train_updates(ts) : 0;
}

uint64_t anvil_train_steps(const anvil_train_session *ts) {
    return ts ? train_steps(ts) : 0;
}

anvil_status anvil_train_write_profile(const anvil_train_session *ts, const char *path) {
    API_CHECK(ts && path, "anvil_train_write_profile: session and path are required");
    return train_write_profile(ts, path);
}

anvil_status anvil_train_memory_get(const anvil_train_session *ts, anvil_train_memory *out) {
    API_CHECK(ts && out, "anvil_train_memory_get: session and out are required");
    train_memory_get(ts, out);
    return ANVIL_OK;
}

anvil_status anvil_train_export(const anvil_train_session *ts, const char *path) {
    API_CHECK(ts && path, "anvil_train_export: session and path are required");
    API_CHECK(train_param_count(ts) > 0,
              "anvil_train_export: nothing trained yet (run a step first)");
    return train_export(ts, path);
}

anvil_status anvil_train_save(const anvil_train_session *ts, const char *path) {
    API_CHECK(ts && path, "anvil_train_save: session and path are required");
    API_CHECK(train_param_count(ts) > 0,
              "anvil_train_save: nothing to save yet (run a step first)");
    return train_save(ts, path);
}

anvil_status anvil_train_load(anvil_train_session *ts, const char *path) {
    API_CHECK(ts && path, "anvil_train_load: session and path are required");
    return train_load(ts, path);
}
