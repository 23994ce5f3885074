/* api: internals shared by the public API implementation, the CLI and tests. Not installed. */
#ifndef ANVIL_API_INTERNAL_H
#define ANVIL_API_INTERNAL_H

#include "anvil.h"
#include "ir/ir.h"

#include <stdio.h>

struct onnx_model;

/* A loaded model: the imported ONNX file (its mapping, graph and metadata), owned. */
struct anvil_model {
    struct onnx_model *onnx;
};

/* Refuses an API call's bad argument: returns INVALID_ARGUMENT with the message from the
 * calling function. */
#define API_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) return core_err(ANVIL_ERR_INVALID_ARGUMENT, __VA_ARGS__);                     \
    } while (0)

/* The model's main graph after import, op checks, verification and load-time shape inference
 * (shapes may hold symbolic dims). Owned by the model. */
const ir_graph *api_model_graph(const anvil_model *m);

/* Where the model came from. Strings owned by the model ("" when absent). */
typedef struct api_model_meta {
    int64_t ir_version;
    const char *producer_name, *producer_version;
} api_model_meta;
void api_model_meta_get(const anvil_model *m, api_model_meta *out);

/* bound[k] (g->n_inputs entries, NULL on entry) = the tensor given for graph input k: every input
 * given once, by a name g has; INVALID_ARGUMENT naming the input otherwise. Tensors borrowed. */
anvil_status api_bind_inputs(const ir_graph *g, size_t n_inputs, const char *const *input_names,
                             const anvil_tensor *const *inputs, const anvil_tensor **bound);

/* What anvil_bench_model and anvil_tune_model read of session options (NULL: the defaults): the
 * threads asked for (0: every core), the optimization level and passes, whether online tuning is
 * on, and the tuning database named (db_set; db_path borrowed from o, NULL: the default file). */
typedef struct api_options_summary {
    int threads, opt_level;
    uint32_t passes_off;
    bool online;
    bool db_set;
    const char *db_path;
} api_options_summary;
void api_options_summarize(const anvil_options *o, api_options_summary *out);
/* A copy of o (NULL: new default options) that the caller may change; *out owned by the caller
 * (anvil_options_free). */
anvil_status api_options_copy(const anvil_options *o, anvil_options **out);

/* Options for the fp32 reference that a reduced-precision session is compared with (anvil bench
 * --check): a copy of o (NULL: the defaults) at precision fp32, without forced variants (one
 * forced for bf16 cannot run in fp32), online tuning or profiling. *out owned by the caller
 * (anvil_options_free). */
anvil_status api_options_reference(const anvil_options *o, anvil_options **out);

struct rt_session_config;
/* The configuration a session made with opts (NULL: the defaults) runs under: the defaults, then
 * the environment (env.h), then the options; threads resolved (0: every core). Pointers in *out
 * (forces) borrowed from opts. */
anvil_status api_session_config(const anvil_options *opts, struct rt_session_config *out);

/* Warns (core_log) when cfg asks for bf16 or auto on a CPU, or under an ANVIL_ISA cap, with
 * neither AVX512_BF16 nor AMX-BF16: the bf16 variants cannot run, so the session plans fp32
 * kernels. Not an error: the model still runs, only slower than asked. */
void api_precision_warn(const struct rt_session_config *cfg);

struct tune_db;
/* The tuning database a session reads (and online tuning writes): path "" none, a path that
 * file (it must open), NULL the default file, read when it exists, created when `online`; a
 * default file that will not open is skipped with a warning. *db owned by the caller
 * (tune_db_close; NULL: none); fingerprint (cap bytes) set when *db is. */
anvil_status api_tuning_db_open(const char *path, bool online, struct tune_db **db,
                                char *fingerprint, size_t cap);

/* An open tuning database (anvil_tuning_db_open): the tune layer's, owned. */
struct anvil_tuning_db {
    struct tune_db *db;
};

/* ---- for the CLI's `anvil dump` and `anvil info` (src/api/inspect.c) ---- */

/* A --passes SPEC (anvil_options_set_passes's form) as the mask of passes it turns off (bit i:
 * the i-th pass in running order). INVALID_ARGUMENT naming the unknown pass and listing them. */
anvil_status api_passes_parse(const char *spec, uint32_t *off);

typedef enum api_dump_format {
    API_DUMP_TEXT, /* ir_graph_dump_text's form, on out */
    API_DUMP_DOT,  /* Graphviz, into path ("-": out) */
    API_DUMP_ONNX, /* an ONNX model (anvil's own ops in the domain ai.anvil), into path */
} api_dump_format;
/* Writes the model's graph (borrowed) in format: as loaded for opt_level 0, else after the
 * rewrites a session at that level runs with the passes in passes_off turned off. Then a line on
 * out says what each pass did: before the text, after the ONNX file is written, not with dot.
 * path borrowed, unused for text; out borrowed (the CLI's stdout). */
anvil_status api_model_dump(const anvil_model *m, int opt_level, uint32_t passes_off,
                            api_dump_format format, const char *path, FILE *out);

/* What a model contains and costs, from its loaded graph (subgraphs included). */
typedef struct api_op_count {
    const char *op; /* the op's name; static */
    uint64_t count;
} api_op_count;
typedef struct api_model_stats {
    const char *graph_name;    /* owned by the model; "" when absent */
    int opset;                 /* the default domain's */
    uint64_t nodes, sub_nodes; /* in the main graph, in subgraphs */
    /* the initializers, and the floating-point and 8-bit tensors of Constant nodes */
    uint64_t params, param_bytes, initializers;
    /* FLOPs of one run: an If's costlier branch, a Loop's or Scan's body once (then
     * flops_loops is set); flops_approx when a symbolic or unknown dim was taken as 1 */
    uint64_t flops;
    bool flops_approx, flops_loops;
    const char *const *syms; /* the main graph's symbolic dims (n_syms), owned by the model */
    int32_t n_syms;
    api_op_count *ops; /* n_ops op types, most frequent first, then by name; owned (free) */
    size_t n_ops;
} api_model_stats;
/* Fills *out; out->ops is the caller's to free. */
anvil_status api_model_stats_get(const anvil_model *m, api_model_stats *out);

/* .npy files (NumPy format versions 1.0-3.0, little-endian, C order, the dtypes anvil holds).
 * npy_read: *out is a new tensor owned by the caller. path borrowed. Corrupt or unsupported files
 * fail with INVALID_ARGUMENT naming the file and the problem; sizes are checked against the file.
 */
anvil_status npy_read(const char *path, anvil_tensor **out);
/* The same from n bytes in memory (borrowed); what names them in messages. */
anvil_status npy_read_mem(const void *buf, size_t n, const char *what, anvil_tensor **out);
/* .npz archives (numpy.savez / savez_compressed: a zip of .npy files, stored or deflated, zip64
 * entries included): every array, named by its entry without ".npy". *names and *arrays are new
 * arrays of *count entries, each name and tensor owned by the caller (npz_free frees them all).
 * A corrupt archive fails with INVALID_ARGUMENT saying what is wrong. */
anvil_status npz_read(const char *path, char ***names, anvil_tensor ***arrays, size_t *count);
/* The same from size bytes in memory (borrowed); what names them in messages. */
anvil_status npz_read_mem(const void *buf, size_t size, const char *what, char ***names,
                          anvil_tensor ***arrays, size_t *count);
void npz_free(char **names, anvil_tensor **arrays, size_t count);
/* npy_write: writes t (borrowed) to path (created or truncated). */
anvil_status npy_write(const char *path, const anvil_tensor *t);

/* A serialized ONNX TensorProto file (the ONNX test suites' .pb files, onnx_tensor_read_pb) as a
 * new tensor owned by the caller. path borrowed. */
anvil_status api_tensor_read_pb(const char *path, anvil_tensor **out);

/* Prints, for the plan session s last ran, one line per node (the implementation, the arithmetic
 * it computes in, how its activations are stored, its bf16 region) and a table of the bf16
 * regions (rt_session_regions): what `anvil dump --precision` shows. INVALID_ARGUMENT before
 * the first run. */
anvil_status api_session_print_regions(anvil_session *s, FILE *f);

#endif
