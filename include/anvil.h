/* anvil public C API.
 *
 * Conventions:
 *  - Every function that can fail returns an anvil_status. On failure a human-readable message
 *    (what went wrong, which node or input, and what to do) is available from anvil_last_error()
 *    on the same thread until the next failing call on that thread.
 *  - Handles are opaque. A handle returned through an `out` parameter is owned by the caller and
 *    released with the matching *_free function. Functions marked "borrowed" keep a pointer the
 *    caller gave them; the caller keeps ownership and must keep it alive as stated.
 *  - The library never exits the process and never writes to stdout.
 */
#ifndef ANVIL_H
#define ANVIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ANVIL_VERSION_MAJOR 0
#define ANVIL_VERSION_MINOR 1
#define ANVIL_VERSION_PATCH 0

/* Largest tensor rank anvil handles. */
#define ANVIL_MAX_RANK 8

typedef enum anvil_status {
    ANVIL_OK = 0,
    ANVIL_ERR_INVALID_ARGUMENT = 1, /* the caller passed something wrong to the API */
    ANVIL_ERR_INVALID_MODEL = 2,    /* the model file or graph is malformed */
    ANVIL_ERR_UNSUPPORTED = 3,      /* valid ONNX that anvil does not support (yet) */
    ANVIL_ERR_SHAPE = 4,            /* shapes or dtypes are inconsistent or impossible */
    ANVIL_ERR_OUT_OF_MEMORY = 5,
    ANVIL_ERR_IO = 6,      /* a file could not be opened, mapped or written */
    ANVIL_ERR_LIMIT = 7,   /* a stated limit (size, depth, count) was exceeded */
    ANVIL_ERR_RUNTIME = 8, /* a failure while running, e.g. an index out of range */
    ANVIL_ERR_INTERNAL = 9 /* a bug in anvil; please report it */
} anvil_status;

/* Element types. The numbers are those of ONNX TensorProto.DataType. */
typedef enum anvil_dtype {
    ANVIL_DTYPE_UNDEFINED = 0,
    ANVIL_DTYPE_FLOAT32 = 1,
    ANVIL_DTYPE_UINT8 = 2,
    ANVIL_DTYPE_INT8 = 3,
    ANVIL_DTYPE_UINT16 = 4,
    ANVIL_DTYPE_INT16 = 5,
    ANVIL_DTYPE_INT32 = 6,
    ANVIL_DTYPE_INT64 = 7,
    ANVIL_DTYPE_STRING = 8,
    ANVIL_DTYPE_BOOL = 9,
    ANVIL_DTYPE_FLOAT16 = 10,
    ANVIL_DTYPE_FLOAT64 = 11,
    ANVIL_DTYPE_UINT32 = 12,
    ANVIL_DTYPE_UINT64 = 13,
    ANVIL_DTYPE_COMPLEX64 = 14,
    ANVIL_DTYPE_COMPLEX128 = 15,
    ANVIL_DTYPE_BFLOAT16 = 16,
    ANVIL_DTYPE_FLOAT8E4M3FN = 17,
    ANVIL_DTYPE_FLOAT8E4M3FNUZ = 18,
    ANVIL_DTYPE_FLOAT8E5M2 = 19,
    ANVIL_DTYPE_FLOAT8E5M2FNUZ = 20,
    ANVIL_DTYPE_UINT4 = 21,
    ANVIL_DTYPE_INT4 = 22,
    ANVIL_DTYPE_FLOAT4E2M1 = 23,
    ANVIL_DTYPE_FLOAT8E8M0 = 24
} anvil_dtype;

typedef struct anvil_model anvil_model;
typedef struct anvil_session anvil_session;
typedef struct anvil_options anvil_options;
typedef struct anvil_tensor anvil_tensor;

/* ---- version and errors ---------------------------------------------------------------- */

/* "MAJOR.MINOR.PATCH". Static storage; do not free. */
const char *anvil_version(void);

/* Message of the last failure on this thread ("" if none). Thread-local storage owned by anvil,
 * valid until the next anvil call on this thread. */
const char *anvil_last_error(void);

/* Short constant name of a status, e.g. "ANVIL_ERR_SHAPE". Static storage. */
const char *anvil_status_name(anvil_status s);

/* ONNX name of a dtype, e.g. "FLOAT", "INT64"; "UNKNOWN" for other values. Static storage. */
const char *anvil_dtype_name(anvil_dtype dt);

/* Size of one element in bytes; 0 for types anvil cannot hold (string, sub-byte, unknown). */
size_t anvil_dtype_size(anvil_dtype dt);

/* ---- models ------------------------------------------------------------------------------- */

/* Loads an ONNX model. The file is memory-mapped and weights are not copied. External data files
 * must lie inside the model's folder. On success *out is owned by the caller (anvil_model_free).
 * path: borrowed for the call only. */
anvil_status anvil_model_load(const char *path, anvil_model **out);

/* Loads an ONNX model from memory. data is borrowed for the life of the model: it must stay valid
 * and unchanged until anvil_model_free (weights point into it). A model loaded this way has no
 * folder, so tensors with external data are refused. */
anvil_status anvil_model_load_buffer(const void *data, size_t size, anvil_model **out);

/* Frees a model. Sessions created from it must be freed first. NULL is accepted. */
void anvil_model_free(anvil_model *model);

/* Description of one model input or output. All pointers are owned by the model and stay valid
 * until anvil_model_free. dims[i] is -1 where the dimension is symbolic or unknown; dim_names[i]
 * is then its symbol name or "" if unnamed. rank is -1 if the rank itself is unknown. */
typedef struct anvil_value_info {
    const char *name;
    anvil_dtype dtype;
    int rank;
    int64_t dims[ANVIL_MAX_RANK];
    const char *dim_names[ANVIL_MAX_RANK];
} anvil_value_info;

size_t anvil_model_input_count(const anvil_model *model);
size_t anvil_model_output_count(const anvil_model *model);
/* out: caller-provided struct, filled on success. */
anvil_status anvil_model_input_info(const anvil_model *model, size_t index, anvil_value_info *out);
anvil_status anvil_model_output_info(const anvil_model *model, size_t index, anvil_value_info *out);

/* ---- session options ---------------------------------------------------------------------- */

/* Creates options with defaults: threads = all cores, optimization level 1, profiling off.
 * *out is owned by the caller (anvil_options_free). */
anvil_status anvil_options_create(anvil_options **out);
void anvil_options_free(anvil_options *opts);
/* threads: 1..1024, or 0 for the number of cores. */
anvil_status anvil_options_set_threads(anvil_options *opts, int threads);
/* Graph rewrites before planning, on the session's own copy of the graph (the model is not
 * changed): 0 none; 1 (the default) folds inference BatchNormalization into the Conv before it
 * and fuses bias Adds, residual Adds and activations into the MatMul/Gemm/Conv they follow;
 * 2 and 3 are accepted and currently the same as 1. Outputs match level 0 within float
 * rounding. */
anvil_status anvil_options_set_opt_level(anvil_options *opts, int level);
/* Which graph rewrites run at level >= 1, by name (copied): a comma-separated list read left to
 * right from every pass on, "-name" turning one off, "name" or "+name" on, "all" and "none" all
 * of them (e.g. "-fuse_attention", "none,+fold_conv_bn"). The names, in the order they run:
 * const_nodes, fold_consts, drop_noops, cse, fold_conv_bn, crop_taps, fuse_norm, fuse_attention,
 * fuse_epilogue, fuse_parallel, attention_views, fuse_chain, layout, transposes, dce.
 * INVALID_ARGUMENT (naming the pass) for an unknown name; NULL or "": every pass. */
anvil_status anvil_options_set_passes(anvil_options *opts, const char *spec);
/* on: nonzero records per-node timings of every run (see anvil_session_write_profile). */
anvil_status anvil_options_set_profiling(anvil_options *opts, int on);
/* Forces an implementation ("variant", e.g. "gemm_f32_14x32_avx512", "conv_winograd_f4x4_3x3";
 * `anvil bench --list-variants MODEL` lists them per node). node_or_op is a node name or an ONNX op
 * type ("Conv"): a node name forces that node and session planning fails, naming the node and the
 * variants that would apply, if the variant cannot run it; an op type forces every node of that
 * type that the variant can run and leaves the others at their default. Setting the same
 * node_or_op again replaces its variant; variant NULL removes it. Unknown names fail at
 * anvil_session_create. Both strings are copied. */
anvil_status anvil_options_set_variant(anvil_options *opts, const char *node_or_op,
                                       const char *variant);

/* The tuning database the session's plans read (`anvil tune` fills it): for every node whose
 * problem was measured on this machine the measured winner runs, for a problem never measured the
 * winner of the nearest tuned shape of the same op, and otherwise the built-in default rules.
 * path NULL (the default): $ANVIL_TUNING_DB, else $XDG_CACHE_HOME/anvil/tuning.db (else
 * ~/.cache/anvil/tuning.db), used only if that file exists; an unreadable default file is
 * skipped with a warning. path "": no database. A named path must open: anvil_session_create
 * fails otherwise (a corrupt or foreign file is never overwritten). The string is copied. */
anvil_status anvil_options_set_tuning_db(anvil_options *opts, const char *path);
/* Online tuning (BestOf): rounds > 0 makes the session, for every node whose problem the tuning
 * database lacks, cycle through the node's candidate implementations over its real runs (each
 * checked against the default first, so outputs stay correct), dropping after round
 * prune_after those slower than the best by more than prune_factor, and lock the fastest after
 * `rounds` rounds, writing it to the database (the default one is created if missing). 0 (the
 * default) turns it off. prune_factor > 1 (0: 1.3), prune_after >= 1 (0: 1). */
anvil_status anvil_options_set_online_tuning(anvil_options *opts, int rounds, double prune_factor,
                                             int prune_after);

/* Sets one of the session settings that the environment variables of the README's table also
 * set (name as the variable is spelled, e.g. "ANVIL_LAYOUT", "ANVIL_GEMM_KC"; value as the
 * variable takes it). An option set here overrides the environment, which overrides the default.
 * INVALID_ARGUMENT for a name that is not a session setting (the process-wide ANVIL_ISA, ANVIL_LOG
 * and ANVIL_MAX_TENSOR_BYTES are not) or a value it refuses. Both strings are copied; setting a
 * name again replaces its value. */
anvil_status anvil_options_set_knob(anvil_options *opts, const char *name, const char *value);

/* Plans choose only variants that anvil_session_compile can emit as C: the forced or database
 * choice where it can be emitted, else the first emittable variant that applies (default 0). */
anvil_status anvil_options_set_emittable_only(anvil_options *opts, int on);

/* ---- sessions ----------------------------------------------------------------------------- */

/* Creates a session that runs `model`. model is borrowed: it must outlive the session.
 * opts is borrowed for the call only; NULL means defaults. *out is owned by the caller. */
anvil_status anvil_session_create(const anvil_model *model, const anvil_options *opts,
                                  anvil_session **out);
void anvil_session_free(anvil_session *session);

/* ---- compiling to C (anvil compile) --------------------------------------------------------- */

typedef struct anvil_compile_options {
    const char *name;  /* C identifier that starts the library's symbols and files; NULL: "net" */
    int embed_weights; /* nonzero: the weights are also compiled into the library (NET_weights.S) */
} anvil_compile_options;

/* Writes the session's plan for these inputs' shapes (and dtypes) as a standalone C library into
 * dir (created if missing): NET.h / NET.c (the plan as straight-line calls, arena offsets fixed),
 * the kernel sources it calls, NET.weights, a Makefile, a CMakeLists.txt, a runner program
 * NET_run.c and a README. The session runs once on the inputs first (names as anvil_session_run's;
 * the contents do not matter). Nodes that cannot be emitted are all named in one
 * ANVIL_ERR_UNSUPPORTED error; sessions made with anvil_options_set_emittable_only avoid most. opts
 * may be NULL. */
anvil_status anvil_session_compile(anvil_session *session, size_t n_inputs,
                                   const char *const *input_names,
                                   const anvil_tensor *const *inputs,
                                   const anvil_compile_options *opts, const char *dir);

/* Why a node runs what it runs: what `anvil bench --explain` prints. */
typedef struct anvil_node_choice {
    const char *node;    /* node name (after the graph rewrites) */
    const char *op;      /* ONNX op type, or anvil's internal name of a fused op */
    const char *variant; /* the implementation; "dynamic" for nodes run by the interpreter */
    const char *params;  /* its tuned parameters ("kc=256;threads=1"), "" for its defaults */
    /* NULL, or where variant is a cascade that hands the node on ("conv_f32"), the
     * implementation that runs it ("conv_winograd_f4x4_3x3") */
    const char *runs;
    /* "database" (measured on this machine for this problem), "nearest" (measured for the
     * nearest shape), "cascade" (nothing measured: the built-in rules), "forced" (the
     * options named it), "dynamic" (shapes known only while running). */
    const char *source;
    /* NULL for a node of the main graph; for a node inside an If/Loop/Scan body, the body:
     * "<node>.<attribute>" (e.g. "If_0.then_branch"), nested bodies joined by '/'. */
    const char *scope;
    /* NULL, or for a body the interpreter runs (op "subgraph", variant "interpreted") why it
     * could not be compiled. */
    const char *note;
    /* The node's work: bytes of its inputs and outputs (0 when known only while running) and
     * FLOPs (2 per multiply-accumulate). */
    uint64_t bytes, flops;
} anvil_node_choice;
/* The nodes of the plan the last run used, in execution order (each compiled body's nodes after
 * the main graph's, with their scope), then the graph rewrites whose
 * groups were decided by measurement (op "layout": a chain of convolutions run channels-last,
 * variant "nhwc", or left "nchw"; node: the chain's first conv; params "nodes=N;group=KEY"):
 * *choices points at *count entries owned by the session, valid until the next explain, run or
 * free. INVALID_ARGUMENT if the session has not run yet. */
anvil_status anvil_session_explain(anvil_session *session, size_t *count,
                                   const anvil_node_choice **choices);

/* Runs the model.
 *  input_names[i] / inputs[i] (borrowed for the call): one tensor per model input, by name.
 *  output_names: the outputs wanted, by name (borrowed); NULL means all model outputs in order,
 *  and then n_outputs must equal anvil_model_output_count.
 *  outputs: caller-provided array of n_outputs pointers; on success each is set to a new tensor
 *  owned by the caller (anvil_tensor_free). On failure no tensor is returned.
 * The plan is made on the first run for a set of input shapes and cached; new shapes re-plan.
 * A session is not safe to run from two threads at once; use one session per thread. */
anvil_status anvil_session_run(anvil_session *session, size_t n_inputs,
                               const char *const *input_names, const anvil_tensor *const *inputs,
                               size_t n_outputs, const char *const *output_names,
                               anvil_tensor **outputs);

/* Statistics of the plan used by the last successful run. */
typedef struct anvil_session_stats {
    size_t arena_bytes;      /* peak bytes of the activation arena */
    size_t activation_bytes; /* sum of the sizes of all activations (what a plan without reuse
                                would need) */
    size_t plans_made;       /* plans made so far (one per distinct input-shape signature) */
    size_t nodes_run;        /* nodes executed per run (after plan-time folding) */
    size_t nodes_folded;     /* nodes evaluated once at plan time (shape arithmetic, constants) */
    size_t nodes_tuning;     /* nodes the online tuner is still trying candidates on */
    /* Runs of If/Loop/Scan bodies so far (each iteration of a Loop counts), nested ones
     * included: as compiled plans, and through the interpreter (opt level 0, or a body that
     * could not be compiled: anvil_session_explain says why). */
    size_t subgraph_runs_compiled;
    size_t subgraph_runs_interpreted;
    /* With profiling on (anvil_options_set_profiling), over every run so far: the time of the
     * runs, and how much of it the slow paths took: reference kernels (the plain C oracle that
     * runs a node no optimized variant supports; nested bodies included) and bodies run by the
     * interpreter. All 0 without profiling. */
    uint64_t profiled_ns;
    uint64_t reference_ns;
    uint64_t interpreted_ns;
} anvil_session_stats;
/* out: caller-provided. Fails if the session has not run yet. */
anvil_status anvil_session_stats_get(const anvil_session *session, anvil_session_stats *out);

/* Writes the per-node timings recorded so far (profiling must be on) as Chrome trace JSON, which
 * opens in Perfetto or chrome://tracing. path: borrowed for the call. */
anvil_status anvil_session_write_profile(const anvil_session *session, const char *path);

/* ---- training ------------------------------------------------------------------------------
 * A training session trains a model's float32 initializers: each step runs the forward pass, the
 * loss, the backward pass (a graph anvil derives from the model, planned and run like a model)
 * and the optimizer's update. The parameters live in the session; anvil_train_export writes the
 * model with them. */

typedef struct anvil_train_session anvil_train_session;

typedef enum anvil_loss {
    ANVIL_LOSS_CROSS_ENTROPY = 0, /* mean softmax cross-entropy: logits [N, C], int64 labels [N] */
    ANVIL_LOSS_MSE = 1,           /* mean squared error: float labels of the output's shape */
    ANVIL_LOSS_NLL = 2, /* mean negative log-likelihood (PyTorch's nll_loss): an output that holds
                           log-probabilities [N, C] (a LogSoftmax's), int64 labels [N] */
    /* sum(output * labels), float labels of the output's shape: with the output's gradient from
     * outside as the labels, the parameters' gradients (anvil_train_gradients) are its
     * vector-Jacobian product (a framework's autograd calling anvil for one module) */
    ANVIL_LOSS_DOT = 3,
} anvil_loss;

typedef enum anvil_optimizer {
    ANVIL_OPTIMIZER_SGD = 0,   /* momentum and Nesterov as PyTorch's SGD; weight decay as L2 */
    ANVIL_OPTIMIZER_ADAM = 1,  /* PyTorch's Adam (weight decay as L2) */
    ANVIL_OPTIMIZER_ADAMW = 2, /* PyTorch's AdamW (decoupled weight decay) */
} anvil_optimizer;

typedef struct anvil_train_config {
    anvil_loss loss;
    const char *output; /* the model output the loss reads; NULL: the first */
    anvil_optimizer optimizer;
    float lr, momentum, weight_decay;
    int nesterov;            /* 1: Nesterov momentum (SGD) */
    float beta1, beta2, eps; /* Adam / AdamW */
    float clip_norm;         /* > 0: gradients scaled down to this global L2 norm */
    int accumulate;          /* steps whose gradients are summed before one update (>= 1) */
    /* trainable initializers by name (borrowed for anvil_train_session_create); n 0: every
     * float32 initializer of 2 elements or more that the loss depends on */
    const char *const *trainable;
    size_t n_trainable;
    int threads;   /* 0: all cores */
    int opt_level; /* graph rewrites of the training graph, as anvil_options_set_opt_level (1) */
    int profiling; /* 1: record per-node timings (anvil_train_write_profile) */
    uint64_t seed; /* Dropout's masks: step s of a session draws from (seed, s) */
    /* The tuning database, as anvil_options_set_tuning_db: NULL the default file (read when it
     * exists; created for online tuning), "" none, else a path (borrowed for the create call). */
    const char *tuning_db;
    /* > 0: BestOf online tuning over the first steps: each node of the training graph (forward
     * and backward) whose problem the database lacks tries its candidates for this many rounds
     * of real steps, checked against its default, and keeps the fastest (written to the
     * database). 0: off. */
    int online_rounds;
} anvil_train_config;

/* SGD, lr 0.01, no momentum or decay; Adam's betas 0.9 and 0.999, eps 1e-8; no clipping;
 * accumulate 1; cross-entropy on the first output; every trainable; all cores. */
void anvil_train_config_default(anvil_train_config *c);

/* model borrowed (must outlive the session); c borrowed for the call. Fails naming the node when
 * an op on the way from a trainable to the loss has no gradient rule. *out owned by the caller. */
anvil_status anvil_train_session_create(const anvil_model *model, const anvil_train_config *c,
                                        anvil_train_session **out);
void anvil_train_session_free(anvil_train_session *ts);

/* One step on a batch: inputs by name as for anvil_session_run (every model input), labels as
 * the loss wants them. *loss receives the batch's loss; prediction (NULL: not wanted) a new
 * tensor of the output the loss reads, owned by the caller. A NaN or infinite loss fails with
 * ANVIL_ERR_RUNTIME naming the step, and leaves the parameters as they were. With
 * accumulate > 1, the update happens on every accumulate-th step. */
anvil_status anvil_train_step(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, float *loss, anvil_tensor **prediction);
/* The same without the update (validation). */
anvil_status anvil_train_eval(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, float *loss, anvil_tensor **prediction);
/* Offline tuning of the training graph for this batch's shapes (anvil_tune's measurement on
 * every forward and backward node: each applicable variant at each setting the hardware rules
 * keep, checked against the reference, winners written to the session's tuning database), then
 * the graph planned again with the winners. No step is taken. budget_seconds <= 0: no limit;
 * *tuned (may be NULL): problems measured (those the database had are not). Needs a database. */
anvil_status anvil_train_tune(anvil_train_session *ts, size_t n_inputs,
                              const char *const *input_names, const anvil_tensor *const *inputs,
                              const anvil_tensor *labels, double budget_seconds, int *tuned);
/* Forward and backward on a batch without an update (and without moving BatchNormalization's
 * running statistics): the gradients stay in the session, anvil_train_grad_data(ts, i) each. */
anvil_status anvil_train_gradients(anvil_train_session *ts, size_t n_inputs,
                                   const char *const *input_names,
                                   const anvil_tensor *const *inputs, const anvil_tensor *labels,
                                   float *loss, anvil_tensor **prediction);
/* The trained parameters, in the order of the gradients: 0 until the first step, eval or
 * gradients call has set them up from the model. Names and buffers are owned by the session;
 * param_data is writable (a framework that keeps its own copy writes it there before a step),
 * *numel (may be NULL) its element count. grad_data: the last anvil_train_gradients' gradient of
 * parameter i, NULL before one ran. */
size_t anvil_train_param_count(const anvil_train_session *ts);
const char *anvil_train_param_name(const anvil_train_session *ts, size_t i);
float *anvil_train_param_data(anvil_train_session *ts, size_t i, size_t *numel);
const float *anvil_train_grad_data(const anvil_train_session *ts, size_t i);
/* The learning rate of the next updates (schedules set it between steps). */
void anvil_train_set_lr(anvil_train_session *ts, float lr);
/* Updates so far. */
uint64_t anvil_train_updates(const anvil_train_session *ts);
/* Writes the model with the trained initializers as an ONNX file (path borrowed). */
anvil_status anvil_train_export(const anvil_train_session *ts, const char *path);
/* Checkpoints: the parameters, the optimizer's state and the step counts, in one file with a
 * checksum, written to PATH.tmp and renamed over path, so an interrupted save leaves the previous
 * checkpoint whole. Load checks the checksum and that every parameter matches the session's by
 * name and size (a corrupt or foreign file: INVALID_ARGUMENT saying what differs, the session
 * unchanged); before the first step it applies when the parameters are set up. */
anvil_status anvil_train_save(const anvil_train_session *ts, const char *path);
anvil_status anvil_train_load(anvil_train_session *ts, const char *path);
/* Writes the per-node timings of the training graph of the latest batch shape (profiling must
 * be on) as Chrome trace JSON, as anvil_session_write_profile. */
anvil_status anvil_train_write_profile(const anvil_train_session *ts, const char *path);
/* Memory a training session holds: the activation arena of its largest graph (forward values the
 * backward pass reads included: one liveness plan over both), the parameters and running
 * statistics, and the optimizer's state (momentum, Adam's moments, accumulated or stashed
 * gradients). Bytes. */
typedef struct anvil_train_memory {
    size_t arena_bytes, param_bytes, optimizer_bytes;
} anvil_train_memory;
anvil_status anvil_train_memory_get(const anvil_train_session *ts, anvil_train_memory *out);
/* Steps taken (updating ones; eval excluded). */
uint64_t anvil_train_steps(const anvil_train_session *ts);

/* ---- tensors ------------------------------------------------------------------------------ */

/* Creates a tensor that owns zeroed storage for rank dims (dims borrowed for the call; rank 0 is a
 * scalar). *out is owned by the caller. */
anvil_status anvil_tensor_create(anvil_dtype dtype, int rank, const int64_t *dims,
                                 anvil_tensor **out);
/* Creates a tensor over caller memory: data is borrowed and must stay valid while the tensor
 * lives; anvil_tensor_free does not free it. data must hold the full tensor, aligned to the
 * element size. *out is owned by the caller. */
anvil_status anvil_tensor_wrap(anvil_dtype dtype, int rank, const int64_t *dims, void *data,
                               anvil_tensor **out);
void anvil_tensor_free(anvil_tensor *t);

anvil_dtype anvil_tensor_dtype(const anvil_tensor *t);
int anvil_tensor_rank(const anvil_tensor *t);
/* Pointer to rank dims, owned by the tensor. */
const int64_t *anvil_tensor_dims(const anvil_tensor *t);
size_t anvil_tensor_element_count(const anvil_tensor *t);
size_t anvil_tensor_bytes(const anvil_tensor *t);
/* The tensor's storage, owned by the tensor (or by the caller for a wrapped tensor). */
void *anvil_tensor_data(anvil_tensor *t);

/* ---- system --------------------------------------------------------------------------------- */

/* Writes a description of the CPU (model, cores, caches, every ISA feature anvil can use as
 * "NAME = 0|1") and of the libraries and backends built in, one item per line, into buf
 * (caller-owned, cap bytes, always NUL-terminated). Returns the length it needed. */
size_t anvil_sysinfo(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
