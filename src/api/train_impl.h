/* The training session's state, shared by train.c (graphs, steps, the update) and
 * train_ckpt.c (checkpoints). Only src/api includes it. */
#ifndef ANVIL_API_TRAIN_IMPL_H
#define ANVIL_API_TRAIN_IMPL_H

#include "api.h"

#include "autodiff/autodiff.h"
#include "runtime/runtime.h"

#define TRAIN_MAX_GRAPHS 4

typedef struct train_graph {
    ir_shape *shapes; /* [n model inputs]: the batch shapes this graph was built for */
    bool eval;        /* the evaluation graph (forward and loss) */
    ad_graph *ag;
    rt_session *rt;
    anvil_tensor **params; /* [n_params + n_state]: wrappers of the session's buffers */
    anvil_tensor *seed;    /* the Dropout seed input (an int64 scalar), or NULL */
} train_graph;

struct anvil_train_session {
    const anvil_model *model;
    const ir_graph *fwd;
    anvil_train_config cfg;
    char **trainable; /* copies of cfg.trainable */
    int n_params;
    char **names;   /* [n_params], owned */
    size_t *numel;  /* [n_params] */
    float **p;      /* the parameters */
    float **m, **v; /* Adam's moments, or m: SGD's momentum buffer */
    float **acc;    /* summed gradients while accumulating (accumulate > 1) */
    float **stash;  /* the step's gradients, where clipping needs them all before the update */
    float **grads;  /* anvil_train_gradients' gradients (allocated by its first call) */
    bool have_grads;
    int n_state; /* BatchNormalization's running statistics, updated by each step */
    char **state_names;
    size_t *state_numel;
    float **state;
    uint64_t updates, steps, micro;
    bool momentum_started;
    train_graph graphs[TRAIN_MAX_GRAPHS];
    int n_graphs;
    tune_db *db; /* owned; NULL: none */
    char fingerprint[TUNE_FINGERPRINT_MAX];
    /* a checkpoint loaded before the parameters were set up, applied by init_params (owned) */
    struct train_ckpt *pending;
};

/* A parsed checkpoint (train_ckpt.c). */
typedef struct train_ckpt train_ckpt;
/* Parses and checks the n bytes of a checkpoint file at p (borrowed; path names them in
 * messages) into *out, owned by the caller (train_ckpt_free). Nothing is allocated past what the
 * bytes hold; a damaged file is INVALID_ARGUMENT. */
anvil_status train_ckpt_parse(const char *path, const unsigned char *p, size_t n, train_ckpt **out);
/* Applies c to ts (names and sizes checked first: ts is unchanged on failure). */
anvil_status train_ckpt_apply(anvil_train_session *ts, const train_ckpt *c);
void train_ckpt_free(train_ckpt *c);
/* The steps c records. */
uint64_t train_ckpt_steps(const train_ckpt *c);

#endif
