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

/* The arithmetic the session accepts (the string is read during the call only):
 *  "fp32" (the default): every kernel computes in float32.
 *  "bf16": matrix products (MatMul, Gemm) may round their operands to bfloat16 and accumulate in
 *          float32 (inputs and outputs stay float32 in memory), which is faster on CPUs with
 *          AVX512_BF16 or AMX-BF16; results differ from fp32 by bf16's 8-bit mantissa (about
 *          1e-2 relative). On a CPU without either, the session runs fp32 kernels and logs a
 *          warning.
 *  "auto": bf16 and fp16 kernels are candidates too, and tuning (anvil_tune_model, online tuning)
 * keeps one only where it measures faster and its error stays within the tolerance
 *          (anvil_options_set_tolerance).
 *  "fp16": matrix products may round their operands to IEEE half instead, on CPUs with
 *          AVX512-FP16 (fp16 sums over runs of up to 256 k, widened to fp32 between them):
 *          faster where that CPU's fp16 FMA measures faster than its fp32 one (a Sapphire Rapids
 *          core without AMX: 2.1x, while its bf16 dot product runs at 0.5x); about 2e-3
 *          relative error, and values beyond fp16's range (65504) overflow. Never a bf16 kernel.
 *          On a CPU without AVX512-FP16 the session runs fp32 kernels and logs a warning.
 *          Inference only: training refuses it (ANVIL_ERR_UNSUPPORTED; use "bf16").
 *   "int8" MatMuls with a constant B in int8 (AVX512-VNNI), quantized dynamically: B per
 *          column once, A per row on every run (symmetric, scale max|x| / 127), the products
 *          summed exactly in int32 and scaled back to fp32 before the fused epilogue; about
 *          0.5-1% error relative to an output's scale (`anvil bench --check` reports it). Where
 *          the CPU has no AVX512-VNNI (or its rate does not beat fp32's) the session runs fp32.
 *          Inference only. Models already quantized (QDQ, QLinear ops) run int8 at any precision.
 * NULL or another name: ANVIL_ERR_INVALID_ARGUMENT listing the names. Overrides
 * $ANVIL_PRECISION. A tuning database keeps reduced-precision winners apart from fp32 ones. */
anvil_status anvil_options_set_precision(anvil_options *opts, const char *precision);
/* The error bound precision "auto" accepts: the largest difference from fp32 relative to an
 * output's scale (max|y - y_fp32| / max|y_fp32|). Positive and finite, else
 * ANVIL_ERR_INVALID_ARGUMENT; default 1e-2. */
anvil_status anvil_options_set_tolerance(anvil_options *opts, double tolerance);

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
    /* The arithmetic it computes in: "bf16" where its implementation rounds operands to
     * bfloat16 (a session of precision bf16 or auto), else "fp32". Static storage. */
    const char *compute;
    /* How the activations it reads and writes are stored: "fp32"; "bf16 in", "bf16 out" or
     * "bf16 in+out" where some of them are passed between bf16 nodes in bf16 (the inside of a
     * bf16 region; the results are those of fp32 storage). Static storage. */
    const char *storage;
    /* The bf16 region the node is in, numbered 1.. in execution order, or 0: a connected part of
     * the plan computing in bf16, converted at its borders (`anvil dump --precision` lists them).
     * 0 for every node of an fp32 session and of an If/Loop/Scan body. */
    int32_t region;
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
    /* The arithmetic of the training graph's kernels, forward and backward, as
     * anvil_options_set_precision ("fp32", "bf16", "auto"; "fp16" refused: no loss scaling),
     * borrowed for the
     * create call; NULL: $ANVIL_PRECISION, else fp32. The parameters, gradients and optimizer
     * state stay float32. tolerance: precision auto's bound, as anvil_options_set_tolerance
     * (<= 0: the default 1e-2). */
    const char *precision;
    double tolerance;
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

/* ---- tuning (anvil tune) ------------------------------------------------------------------ */

typedef struct anvil_tune_report anvil_tune_report;

/* Where a tune stands, for a progress line: handed to anvil_tune_options.progress after each
 * problem is settled and during each problem's rounds. Strings borrowed for the call. */
typedef struct anvil_tune_progress {
    int item, n_items;       /* the problem (0-based) of how many */
    const char *op, *node;   /* its op type (or a measured rewrite's name) and first node */
    int alive;               /* candidates still timed in its rounds; 0 once it is settled */
    double best_ms;          /* the fastest so far; 0 if none yet */
    double elapsed_s, eta_s; /* since the tune started; estimate of what is left */
} anvil_tune_progress;

typedef struct anvil_tune_options {
    /* The options of the sessions that will use the winners (borrowed for the call; NULL: the
     * defaults): their threads, optimization level and passes make the problems, and their
     * tuning database (anvil_options_set_tuning_db) receives the winners: the file named, created
     * if missing, or the default file when none is named; "" (no database) is refused. Forced
     * variants and online tuning are not used. */
    const anvil_options *session;
    double budget_seconds;   /* stop measuring after this long; <= 0: no limit */
    int retune;              /* nonzero: measure problems the database already has, too */
    int runs;                /* timed runs each of the cascade and the tuned model afterwards,
                              * alternating; 0 skips that comparison */
    const char *model_label; /* what the report calls the model (e.g. its path); NULL: "" */
    /* Optional, called on the tuning thread; arg is progress_arg. */
    void (*progress)(void *arg, const anvil_tune_progress *p);
    void *progress_arg;
    /* Optional: set nonzero (e.g. from a SIGINT handler) to stop after the current problem. */
    volatile int *stop;
} anvil_tune_options;

/* Defaults: the default session options, no budget, 20 runs, no progress callback. */
void anvil_tune_options_default(anvil_tune_options *o);

/* Measures, on this machine, which implementation of each distinct problem of the model (op,
 * attributes, shapes, threads, after the graph rewrites) is fastest for these inputs' shapes:
 * every applicable variant at every parameter setting the hardware rules keep, each checked
 * against the reference kernel, and the graph rewrites decided by measurement on the whole model.
 * Winners are written to the database as they are found (a stopped or failed tune keeps them; a
 * rerun resumes), then checked inside the model (a winner slower in place goes back to the
 * cascade's choice). Every model input must be given (names as anvil_session_run's; the contents
 * only matter where they decide shapes). model, o and the inputs are borrowed for the call;
 * *out (set also when the tune fails part-way, else NULL) is owned by the caller
 * (anvil_tune_report_free). `anvil tune` is this call. */
anvil_status anvil_tune_model(const anvil_model *model, const anvil_tune_options *o,
                              size_t n_inputs, const char *const *input_names,
                              const anvil_tensor *const *inputs, anvil_tune_report **out);
void anvil_tune_report_free(anvil_tune_report *r);

/* The whole tune. Strings borrowed from the report. */
typedef struct anvil_tune_summary {
    int problems, tuned, cached, skipped, failed;
    int changed;  /* problems whose winner differs from the built-in rules' choice */
    int reverted; /* winners that ran slower inside the model and went back to the rules' */
    double seconds;
    double cascade_ms, tuned_ms; /* the model's median latency without and with the database (0:
                                  * not measured) */
    int stopped;                 /* stopped by o->stop: rerun to resume */
    const char *database, *fingerprint;
} anvil_tune_summary;
anvil_status anvil_tune_report_summary(const anvil_tune_report *r, anvil_tune_summary *out);

/* One problem, in the order the plan meets them. Strings borrowed from the report. */
typedef struct anvil_tune_problem {
    const char *op, *node, *key;
    const char *status;  /* "tuned", "cached", "skipped", "failed" or "unused" */
    const char *winner;  /* the variant (or a rewrite's choice) now in the database; "" */
    const char *params;  /* its parameters; "" */
    const char *error;   /* why it failed; "" */
    int nodes;           /* nodes that pose it */
    int candidates, raw; /* timed candidates, configurations before the hardware rules */
    double median_ms;    /* the winner's; 0 if none */
    double speedup;      /* the rules' choice's time over the winner's; 0: not known */
    int group;           /* a measured rewrite's group, timed on the whole model */
    int kept_cascade;    /* its winner lost inside the model and the rules' choice stays */
} anvil_tune_problem;
size_t anvil_tune_report_count(const anvil_tune_report *r);
anvil_status anvil_tune_report_problem(const anvil_tune_report *r, size_t i,
                                       anvil_tune_problem *out);
/* The report as `anvil tune` prints it (verbose: every candidate of every problem) and as
 * `anvil tune --json` prints it. Owned by r, valid until the next call on r or its free; NULL
 * when out of memory. */
const char *anvil_tune_report_text(anvil_tune_report *r, int verbose);
const char *anvil_tune_report_json(anvil_tune_report *r);

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

/* ---- benchmarking (anvil bench) ------------------------------------------------------------ */

/* A measurement of one model: what `anvil bench` reports. Opaque; anvil_bench_report_free. */
typedef struct anvil_bench_report anvil_bench_report;

typedef struct anvil_bench_options {
    /* The session's options (threads, optimization level, passes, forced variants, tuning
     * database, online tuning), borrowed for the call; NULL: the defaults. Profiling is turned on
     * in the measured session's own copy whatever these say: the report's slow-path shares come
     * from it. */
    const anvil_options *session;
    int warmup;  /* untimed runs after the first one; < 0: 5 */
    int iters;   /* timed runs; < 1: 50 */
    int explain; /* nonzero: the report lists per node what ran and why (anvil_session_explain) */
    /* What the report calls the model (e.g. its path), borrowed for the call; NULL: "". */
    const char *model_label;
    /* The time it took the caller to load the model, reported as "load" (milliseconds). The API
     * takes a loaded model, so one loaded from memory or already loaded for other work can be
     * measured too; only the caller knows what loading it cost. */
    double load_ms;
    /* NULL, or per input (in the order of the names) where its data came from, e.g. "file" or
     * "random", borrowed for the call; NULL: "given" for every input. */
    const char *const *input_sources;
    /* NULL, or a file to write the per-node timings of every run to as a Chrome trace (as
     * anvil_session_write_profile), borrowed for the call. */
    const char *profile_path;
    /* Nonzero: after the timed runs, one more run's outputs are compared with those of an fp32
     * session on the same inputs (the same options at precision "fp32", without forced variants
     * or online tuning): anvil_bench_report_check, and the report's "check". Meant for precision
     * "bf16" or "auto"; with "fp32" the errors are 0. */
    int check;
} anvil_bench_options;

/* Measures the model on these inputs: a session created and run once (reported as the first
 * run, planning included), `warmup` untimed runs, then `iters` timed runs. Every model input
 * must be given, once, by name (names and inputs: n_inputs each, borrowed for the call). model
 * and o (NULL: the defaults) are borrowed for the call. *out is owned by the caller
 * (anvil_bench_report_free). A bad argument fails with INVALID_ARGUMENT before anything runs; a
 * failing run fails with its status. */
anvil_status anvil_bench_model(const anvil_model *model, const anvil_bench_options *o,
                               size_t n_inputs, const char *const *names,
                               const anvil_tensor *const *inputs, anvil_bench_report **out);

/* The report's numbers. Latencies in milliseconds, over the timed runs; percentiles interpolate
 * linearly between the sorted samples. */
typedef struct anvil_bench_stats {
    double load_ms;      /* as given in anvil_bench_options */
    double first_run_ms; /* session creation and the first run */
    double min_ms, median_ms, mean_ms, p90_ms, p99_ms, max_ms, stddev_ms;
    double per_second; /* throughput: 1000 / mean_ms (0 when the mean is 0) */
    int iters, warmup, threads;
    size_t arena_bytes, activation_bytes; /* as anvil_session_stats */
    /* Online tuning: the run (1-based, the first run counts as 1) after which no node was
     * tuning any more, 0 when some still were after the last run, -1 without online tuning;
     * when > 0, the median of the timed runs from then on. */
    int64_t online_locked_after;
    double online_locked_median_ms;
} anvil_bench_stats;
/* out: caller-provided, filled on success. */
anvil_status anvil_bench_report_stats(const anvil_bench_report *r, anvil_bench_stats *out);
/* With anvil_bench_options.check, how far the measured session's outputs are from fp32's, per
 * numeric output (in the model's order; outputs of other dtypes are left out). */
typedef struct anvil_bench_check {
    const char *output; /* its name, owned by the report */
    /* max|y - y32| / max|y32| and mean|y - y32| / mean|y32| (over 1 instead where y32 is all
     * zeros); infinite when a difference is not finite */
    double max_rel_err, mean_rel_err;
    /* A classifier's output (float, [N, C] or [N, C, 1, 1] with C >= 2): the share of its N rows
     * whose largest class is the same; -1 for other outputs. */
    double top1_agreement;
    int64_t rows; /* N; 0 for other outputs */
} anvil_bench_check;
/* The outputs compared: 0 without check. */
size_t anvil_bench_report_check_count(const anvil_bench_report *r);
/* Output i of them into *out (caller-provided); INVALID_ARGUMENT when i is out of range. */
anvil_status anvil_bench_report_check(const anvil_bench_report *r, size_t i,
                                      anvil_bench_check *out);
/* The report as `anvil bench` prints it, newline-terminated. Owned by r. */
const char *anvil_bench_report_text(const anvil_bench_report *r);
/* The report as one JSON object, as `anvil bench --json` prints it (newline-terminated): the
 * numbers above, each timed run's latency ("latency_ms"."samples", in run order), the inputs,
 * the plan's statistics and, with explain, "nodes". Owned by r. */
const char *anvil_bench_report_json(const anvil_bench_report *r);
/* NULL is accepted. */
void anvil_bench_report_free(anvil_bench_report *r);

/* ---- the tuning database -------------------------------------------------------------------- */

/* The tuning database (`anvil tune` fills it; anvil_options_set_tuning_db makes a session read
 * it): one SQLite file holding, per problem key and machine fingerprint, the implementation
 * measured fastest. Several processes may share it. anvil refuses files that are not its own
 * and never modifies them. */
typedef struct anvil_tuning_db anvil_tuning_db;

/* Room for a fingerprint, terminating NUL included. */
#define ANVIL_TUNING_FINGERPRINT_MAX 512

/* The version of the database schema this library reads and writes. */
int anvil_tuning_db_schema_version(void);
/* This machine's fingerprint (CPU model, ISA features, caches, logical cores, anvil's version
 * and a hash of its implementations' names: what a measurement holds for) into buf (caller-owned,
 * cap bytes, NUL-terminated). LIMIT if cap is too small. */
anvil_status anvil_tuning_fingerprint(char *buf, size_t cap);
/* The default file into buf (caller-owned, cap bytes): $ANVIL_TUNING_DB, else
 * $XDG_CACHE_HOME/anvil/tuning.db, else ~/.cache/anvil/tuning.db; "" when $ANVIL_TUNING_DB is
 * "off". create_dir nonzero makes the file's folder when it is missing. */
anvil_status anvil_tuning_db_default_path(char *buf, size_t cap, int create_dir);
/* Opens the database at path (borrowed for the call), creating it when absent. Fails naming the
 * path and the problem for a file that is not anvil's, is corrupt or has a newer schema. *out is
 * owned by the caller (anvil_tuning_db_close). */
anvil_status anvil_tuning_db_open(const char *path, anvil_tuning_db **out);
/* Closes db and frees it. NULL is a no-op. */
void anvil_tuning_db_close(anvil_tuning_db *db);
/* The path db was opened with. Owned by db. */
const char *anvil_tuning_db_path(const anvil_tuning_db *db);

/* One record: the implementation measured fastest for a problem on a machine. The strings are
 * owned by the library and valid only during the callback that receives the record. */
typedef struct anvil_tuning_record {
    const char *key;         /* the problem: op, attributes, shapes and dtypes, threads */
    const char *fingerprint; /* the machine it was measured on */
    const char *variant;     /* the implementation that won */
    double median_ns;        /* its median time per run */
    const char *params;      /* the winner's parameters ("" for its defaults) */
    double max_err;          /* its largest difference from the reference kernel's output */
    int64_t unix_time;       /* when it was measured */
    const char *source;      /* "offline", "online", ... */
} anvil_tuning_record;
/* Calls fn for every record, ordered by key then fingerprint; arg is passed through. Stops at
 * the first status fn returns other than ANVIL_OK and returns it. */
anvil_status anvil_tuning_db_foreach(anvil_tuning_db *db,
                                     anvil_status (*fn)(const anvil_tuning_record *rec, void *arg),
                                     void *arg);
/* The number of records into *out. */
anvil_status anvil_tuning_db_count(anvil_tuning_db *db, size_t *out);
/* SQLite's integrity check and anvil's schema and fields: IO naming the first problem. */
anvil_status anvil_tuning_db_check(anvil_tuning_db *db);
/* Every record as JSON ({"schema_version": N, "records": [...]}, ended by a newline), handed
 * whole to write: text (len bytes, NUL-terminated, owned by the library and valid during the
 * call) and arg. Returns what write returns, or the failure before it. */
anvil_status anvil_tuning_db_export_json(
    anvil_tuning_db *db, anvil_status (*write)(const char *text, size_t len, void *arg), void *arg);
/* Puts the records of such a JSON file (path borrowed for the call) into db, all or none: the
 * whole file is checked first. On a clash (same key and fingerprint) the faster record stays.
 * *changed: records inserted or replaced; *kept: clashes where db's record was the faster (either
 * may be NULL). */
anvil_status anvil_tuning_db_import_json(anvil_tuning_db *db, const char *path, size_t *changed,
                                         size_t *kept);
/* Copies the records of the database file other_path (opened read only, checked like
 * anvil_tuning_db_open; borrowed for the call) into db, the faster staying on a clash.
 * *changed (may be NULL): records inserted or replaced. */
anvil_status anvil_tuning_db_merge(anvil_tuning_db *db, const char *other_path, size_t *changed);
/* Deletes every record whose fingerprint is not `fingerprint` (borrowed for the call).
 * *removed (may be NULL): records deleted. */
anvil_status anvil_tuning_db_prune(anvil_tuning_db *db, const char *fingerprint, size_t *removed);

/* ---- system --------------------------------------------------------------------------------- */

/* Writes a description of the CPU (model, cores, caches, every ISA feature anvil can use as
 * "NAME = 0|1", the multiply-accumulate peak of one core per number format as anvil measures it:
 * "peak.fp32.gflops", "peak.bf16.gflops", "peak.fp16.gflops", "peak.int8.gops", 0 where absent,
 * each with "peak.FORMAT.isa" naming the loop or "none") and of the libraries and backends built
 * in, one "key = value" per line, into buf (caller-owned, cap bytes, always NUL-terminated).
 * Returns the length it needed. The first call measures the peaks (about 10-20 ms per loop the
 * CPU has, on the calling thread); they are kept for the process. */
size_t anvil_sysinfo(char *buf, size_t cap);

/* Caps the ISA features this process's plans may use, as if the CPU were older: "avx512" (no
 * AMX), "avx2" (no AVX-512), "scalar" (no AVX either), or "none" / NULL (what the CPU has; the
 * default, unless $ANVIL_ISA sets a cap). Plans made later follow it; variants already chosen keep
 * their ISA. INVALID_ARGUMENT for another name. `anvil compile --isa` is this call. */
anvil_status anvil_set_isa_cap(const char *isa);
/* The cap in force: "none", "avx512", "avx2" or "scalar" (static). */
const char *anvil_isa_cap(void);

#ifdef __cplusplus
}
#endif
#endif
