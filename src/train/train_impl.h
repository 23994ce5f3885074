/* The training session's state, shared by the files of src/train/: session.c (the session and
 * its step loop), graphs.c (the graphs per batch shape), optim.c (the update) and ckpt.c
 * (checkpoints). Only src/train includes it; everyone else goes through train.h. */
#ifndef ANVIL_TRAIN_IMPL_H
#define ANVIL_TRAIN_IMPL_H

#include "train.h"

#include "autodiff/autodiff.h"
#include "runtime/runtime.h"
#include "tune/tune.h"

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
    const ir_graph *fwd; /* the model's graph, borrowed */
    anvil_train_config cfg;
    char **trainable; /* copies of cfg.trainable */
    int n_params;
    char **names;   /* [n_params], owned */
    size_t *numel;  /* [n_params] */
    float **p;      /* the parameters */
    float **m, **v; /* Adam's moments, or m: SGD's momentum buffer */
    float **acc;    /* summed gradients while accumulating (accumulate > 1) */
    float **stash;  /* the step's gradients, where clipping or the hook needs them all at once */
    float **grads;  /* TRAIN_GRADIENTS' gradients (allocated by its first run) */
    bool have_grads;
    int n_state; /* BatchNormalization's running statistics, updated by each step */
    char **state_names;
    size_t *state_numel;
    float **state;
    uint64_t updates, steps, micro;
    bool momentum_started;
    train_graph graphs[TRAIN_MAX_GRAPHS];
    int n_graphs;
    rt_session_config env;     /* the environment's session settings (train_config.env) */
    train_grad_hook grad_hook; /* train_config's: called before each update; NULL: none */
    void *grad_hook_arg;
    tune_db *db; /* owned; NULL: none */
    char fingerprint[TUNE_FINGERPRINT_MAX];
    /* a checkpoint loaded before the parameters were set up, applied by init_params (owned) */
    struct train_ckpt *pending;
};

/* ---- graphs.c ---- */

/* The graph for these input shapes (shapes[n model inputs], copied): found, or built (and the
 * parameters and the optimizer's state set up by the first). *out belongs to the session; a
 * build may evict the oldest graph. */
anvil_status train_graph_for(train_session *ts, const ir_shape *shapes, bool eval,
                             train_graph **out);
/* Frees what tg holds (n_bound: how many parameter wrappers it has) and zeroes it. */
void train_graph_free(train_graph *tg, int n_bound);
/* How the graphs' sessions run: the configured threads and rewrites, and the tuning database
 * (online tuning only with one). */
rt_session_config train_rt_config(const train_session *ts);
/* n zeroed floats, 64-byte aligned (at least one); free() frees them. NULL: out of memory. */
float *train_buffer(size_t n);
/* Frees a tensor made here (rt_tensor_new, or a wrapper of the session's buffers). */
void train_tensor_free(anvil_tensor *t);

/* ---- optim.c ---- */

/* The update of parameter i from its gradient g scaled by `scale` (clipping), update number
 * ts->updates (PyTorch's formulas: L2 weight decay into the gradient for SGD and Adam, decoupled
 * for AdamW; SGD's momentum buffer starts as the first gradient). */
void train_optim_param(train_session *ts, int i, const float *restrict g, float scale);
/* One update from whole gradients g[n_params] (clipped to the configured norm first). */
void train_optim_update(train_session *ts, float *const *g);

/* ---- ckpt.c ---- */

/* A parsed checkpoint. */
typedef struct train_ckpt train_ckpt;
/* Parses and checks the n bytes of a checkpoint file at p (borrowed; path names them in
 * messages) into *out, owned by the caller (train_ckpt_free). Nothing is allocated past what the
 * bytes hold; a damaged file is INVALID_ARGUMENT. */
anvil_status train_ckpt_parse(const char *path, const unsigned char *p, size_t n, train_ckpt **out);
/* Applies c to ts (names and sizes checked first: ts is unchanged on failure). */
anvil_status train_ckpt_apply(train_session *ts, const train_ckpt *c);
void train_ckpt_free(train_ckpt *c);
/* The steps c records. */
uint64_t train_ckpt_steps(const train_ckpt *c);

#endif
