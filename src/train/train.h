/* train: training sessions. For each batch shape met, the training graph (autodiff) planned as a
 * runtime session of its own; the parameters and the optimizer's state; the step loop, whose
 * update runs here (SGD with momentum, Adam, AdamW; clipping; gradient accumulation); and
 * checkpoints. The public API (api/train.c) checks its arguments and calls these.
 *
 * A training session is the public anvil_train_session (anvil.h); its state is private to this
 * folder (train_impl.h). Unless stated otherwise, pointers passed in are borrowed for the call
 * only, strings returned are owned by the session, and errors set core_err's message. */
#ifndef ANVIL_TRAIN_H
#define ANVIL_TRAIN_H

#include "anvil.h"
#include "ir/ir.h"
#include "runtime/runtime.h"

#include <stddef.h>
#include <stdint.h>

struct tune_db;

typedef struct anvil_train_session train_session;

/* The seam between a step's gradients and its update: called once per update, after the step's
 * gradients are complete (summed over the micro-steps when accumulating) and before clipping and
 * the optimizer read them. grads[i] holds numel[i] floats of parameter i (n parameters, in
 * train_param_name's order); the hook may rewrite them in place (data parallelism's allreduce).
 * A status other than ANVIL_OK fails the step with that status, and nothing is updated: the
 * parameters, the optimizer's state and train_updates stay as they were, and accumulated
 * gradients are dropped (the run itself happened: train_steps counts it, and BatchNormalization's
 * running statistics moved). Evaluation and train_run's TRAIN_GRADIENTS never call it. grads and
 * numel belong to the session and are valid during the call only. */
typedef anvil_status (*train_grad_hook)(void *arg, int n, float *const *grads, const size_t *numel);

typedef struct train_config {
    /* the public configuration; its strings (trainable, output) are copied, tuning_db is unused
     * (the database comes as db below) */
    anvil_train_config opt;
    /* the tuning database the graphs' sessions read (and online tuning writes), or NULL: owned by
     * the session from train_session_create on, also when it fails */
    struct tune_db *db;
    const char *fingerprint; /* db's hardware fingerprint (copied); unused without db */
    /* the environment's session settings (api_env_session: layout, passes, kernel knobs), under
     * which the training graphs' sessions are configured */
    rt_session_config env;
    train_grad_hook grad_hook; /* called before each update (above); NULL: none */
    void *grad_hook_arg;       /* grad_hook's first argument, borrowed for the session's life */
} train_config;

/* A new training session on forward graph fwd, which the session borrows (it must outlive it: it
 * is the model's, api_model_graph). c's values are checked by the caller (anvil.h's ranges). The
 * graphs, parameters and optimizer state are made by the first step. *out owned by the caller
 * (train_session_free). */
anvil_status train_session_create(const ir_graph *fwd, const train_config *c, train_session **out);
void train_session_free(train_session *ts);

typedef enum train_mode {
    TRAIN_STEP,      /* forward, backward and the update (anvil_train_step) */
    TRAIN_EVAL,      /* forward and loss only (anvil_train_eval) */
    TRAIN_GRADIENTS, /* forward and backward; the gradients kept for train_grad_data, nothing
                        updated (anvil_train_gradients) */
} train_mode;

/* One run of the training graph for these inputs' shapes (built on first use): inputs[i] is the
 * model input named names[i] (every model input given once); labels as the loss wants them.
 * *loss set; *prediction (when prediction is not NULL) a new tensor owned by the caller holding
 * the configured output. A non-finite loss fails the run before anything is updated. */
anvil_status train_run(train_session *ts, train_mode mode, size_t n_inputs,
                       const char *const *names, const anvil_tensor *const *inputs,
                       const anvil_tensor *labels, float *loss, anvil_tensor **prediction);
/* Offline tuning of the training graph for these inputs instead of a step (anvil_train_tune);
 * *tuned (when not NULL) the problems measured, set also on failure. */
anvil_status train_tune(train_session *ts, size_t n_inputs, const char *const *names,
                        const anvil_tensor *const *inputs, const anvil_tensor *labels,
                        double budget_seconds, int *tuned);

/* The parameters (0 before the first run builds a graph), by index: name, and data (numel
 * floats, written by the caller at will: the next run reads them). NULL past the end. */
size_t train_param_count(const train_session *ts);
const char *train_param_name(const train_session *ts, size_t i);
float *train_param_data(train_session *ts, size_t i, size_t *numel);
/* The last TRAIN_GRADIENTS run's gradient of parameter i, or NULL (none yet, or past the end). */
const float *train_grad_data(const train_session *ts, size_t i);
/* The learning rate from the next update on (ignored unless finite and >= 0). */
void train_set_lr(train_session *ts, float lr);
uint64_t train_updates(const train_session *ts);
/* The steps taken (those of a checkpoint loaded before the first step, until it applies). */
uint64_t train_steps(const train_session *ts);

/* The last built graph's profiling trace (Chrome trace JSON) to path. */
anvil_status train_write_profile(const train_session *ts, const char *path);
/* The memory the session holds (anvil_train_memory_get). */
void train_memory_get(const train_session *ts, anvil_train_memory *out);
/* The model with the trained parameters and running statistics, as ONNX to path. */
anvil_status train_export(const train_session *ts, const char *path);

/* Checkpoints (ckpt.c): the parameters, the optimizer's state and the counters, written whole to
 * path (atomically: through path.tmp), and read back. A checkpoint loaded before the first step
 * is kept and applied when the parameters are made; a damaged or mismatched one leaves the
 * session unchanged. */
anvil_status train_save(const train_session *ts, const char *path);
anvil_status train_load(train_session *ts, const char *path);

#endif
