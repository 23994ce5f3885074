/* ops: per-op attribute checking, shape inference and the reference kernel ("variant 0").
 *
 * Every op in ir/ops.def has one `const op_impl op_impl_<impl>` defined in a family file
 * (src/ops/<family>.c). The runtime reaches it through op_get(). The reference kernel is plain,
 * obviously correct C: it is the test oracle for every faster variant and the fallback when no
 * other variant supports a node. */
#ifndef ANVIL_OPS_H
#define ANVIL_OPS_H

#include "core/core_copy.h"
#include "ir/ir.h"

#include <string.h>

/* A concrete tensor as kernels see it: dense row-major, dims all known. data is aligned to the
 * element size. For inputs it is read-only (cast away only by in-place kernels that declared
 * OP_INPLACE_0). A zero-size tensor may have data == NULL. */
typedef struct op_tensor {
    anvil_dtype dtype;
    int rank;
    int64_t dims[IR_MAX_RANK];
    void *data;
} op_tensor;

size_t op_tensor_numel(const op_tensor *t); /* product of dims (fits: checked at plan time) */

/* What shape inference sees of one input or output. For inputs, value is non-NULL when the
 * input's contents are known before running (a constant, or something the planner evaluated at
 * plan time, e.g. Shape of a concrete input); it is then dense, aligned and matches dtype/shape. */
typedef struct op_tinfo {
    anvil_dtype dtype;
    ir_shape shape;
    const void *value;
} op_tinfo;

/* Execution context handed to kernels by whoever runs them (the runtime, a test, a benchmark).
 * The ops layer only reads it (ctx.c); nothing in it calls up into the runtime directly. */
typedef struct op_ctx op_ctx;
/* Runs a subgraph for op_subgraph_run (below), same contract. */
typedef anvil_status (*op_subgraph_fn)(op_ctx *ctx, const ir_graph *body,
                                       const op_tensor *const *in, int n_in, op_tensor *out,
                                       int n_out);
struct op_ctx {
    core_pool *pool;         /* borrowed; NULL: serial */
    op_subgraph_fn subgraph; /* set by the runtime; NULL: no subgraph can run */
    void *subgraph_arg;      /* the runtime's, for subgraph */
    int threads; /* at most this many of pool's threads (a tuned node's choice); 0: all */
};
/* Runs fn(arg, begin, end) over [0, n) split into contiguous chunks across the context's threads
 * (core_pool_run); returns when all chunks are done. fn must not call op_parallel_for itself.
 * ctx may be NULL (serial). */
typedef core_range_fn op_range_fn;
void op_parallel_for(op_ctx *ctx, size_t n, op_range_fn fn, void *arg);
/* The context's thread count (its pool's, capped by ctx->threads); 1 for NULL. */
int op_ctx_threads(const op_ctx *ctx);

enum {
    /* The kernel can write output 0 over input 0 (same dtype and shape, elementwise). */
    OP_INPLACE_0 = 1u << 0,
    /* Output 0 is input 0 reinterpreted with another shape (Reshape, Flatten, Squeeze, ...):
     * the runtime aliases the buffers and never calls run for the data. */
    OP_ALIAS_0 = 1u << 1,
    /* Some output dims depend on input contents (NonZero, Unique, If, Loop, ...): infer may leave
     * them unknown (rank known where possible) even with every input shape known. Such an op sets
     * run_alloc; the runtime runs it as a dynamic step and never preallocates its outputs. */
    OP_DATA_DEPENDENT = 1u << 2,
};

typedef struct op_impl {
    /* Input/output arity (ONNX-declared, including optional ones). Checked before check(). */
    int8_t min_inputs, max_inputs, min_outputs, max_outputs;
    uint32_t flags;
    /* Bit i set: shape inference needs the value of input i (e.g. Reshape's shape). */
    uint32_t value_inputs;

    /* Validates attributes and the node's opset, parses them into n->params (allocated from
     * g->arena). Called once per node at load. Errors name the node (ir_node_label) and the
     * attribute, say what was expected and what was found. Required. */
    anvil_status (*check)(ir_graph *g, ir_node *n);

    /* Computes output dtypes and shapes from inputs. Inputs may have unknown dims (at load time)
     * or be fully static (at plan time); outputs get whatever can be known. With all inputs static
     * and every value_inputs value present, outputs must be fully static. Rejects impossible
     * combinations with ANVIL_ERR_SHAPE naming the node, the input and both shapes. Required. */
    anvil_status (*infer)(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                          op_tinfo *out, int n_out);

    /* The reference kernel. in[i] is NULL for an omitted optional input, out[i] NULL for an
     * omitted optional output. Output buffers are preallocated with the inferred shape. Runtime
     * failures (e.g. an index out of range) return ANVIL_ERR_RUNTIME naming the node. Required
     * (ops with run_alloc use op_run_via_alloc). */
    anvil_status (*run)(const ir_node *n, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, op_ctx *ctx);

    /* Optional kernel for OP_DATA_DEPENDENT ops, whose output sizes are known only after
     * computing. in[] as for run. The runtime hands out[i] (NULL for an omitted output) with
     * data == NULL; the kernel fills every non-NULL out[i] through op_output_alloc. On failure the
     * runtime releases whatever the kernel allocated. */
    anvil_status (*run_alloc)(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx);
} op_impl;

/* Sets t's dtype and dims and gives it fresh zeroed storage of that size (64-byte aligned; at
 * least one byte, so data is never NULL). The storage belongs to whoever handed t to the kernel
 * (the runtime); kernels release storage they allocated for their own temporaries with
 * op_tensor_release. Fails with LIMIT / OUT_OF_MEMORY; dims borrowed. ctx may be NULL. */
anvil_status op_output_alloc(op_ctx *ctx, op_tensor *t, anvil_dtype dt, int rank,
                             const int64_t *dims);
/* A `run` for OP_DATA_DEPENDENT ops whose caller already knows the output shapes: runs the op's
 * run_alloc into temporaries, checks that each result has out[i]'s dtype and dims (RUNTIME error
 * naming the node otherwise) and copies it into out[i]. */
anvil_status op_run_via_alloc(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx);
/* Frees storage from op_output_alloc or op_subgraph_run and sets t->data to NULL. */
void op_tensor_release(op_tensor *t);

/* Runs subgraph body (an attribute graph of the node now running in ctx) once with its graph
 * inputs bound to in[0..n_in) (borrowed; n_in == body->n_inputs) and its outer-scope values read
 * from the graphs that enclose it. out[j] (j < n_out == body->n_outputs) receives graph output j
 * in storage the caller owns and frees with op_tensor_release. Nodes run one by one with
 * shapes inferred from the actual values. Call it only from the kernel's own thread while the
 * runtime runs the node (it finds the enclosing values through a per-thread scope); ctx is the one
 * the runtime passed to the kernel. */
anvil_status op_subgraph_run(op_ctx *ctx, const ir_graph *body, const op_tensor *const *in,
                             int n_in, op_tensor *out, int n_out);

/* The implementation of an op (op < IR_OP_COUNT). Never NULL. */
const op_impl *op_get(ir_op op);

/* The tensor a checked Constant node produces: *t's data is borrowed from the node's attribute
 * (the model's bytes) or its params (the graph's arena). False if n is not a checked Constant. */
bool op_constant_value(const ir_node *n, ir_tensor *t);

/* Runs the arity check and op_get(n->op)->check for every node of g and its subgraphs. */
anvil_status op_check_graph(ir_graph *g);

/* ---- helpers shared by op families ---------------------------------------------------------- */

/* Numpy-style broadcast of a and b into out; SHAPE error naming the node if incompatible.
 * Handles unknown dims (a symbolic dim against 1 stays symbolic; two different unknowns give an
 * anonymous unknown). */
anvil_status op_broadcast_shape(const ir_node *n, const ir_shape *a, const ir_shape *b,
                                ir_shape *out);
/* Normalises an axis in [-rank, rank) to [0, rank); SHAPE error naming the node and attribute. */
anvil_status op_norm_axis(const ir_node *n, const char *what, int64_t axis, int rank, int *out);
/* Reads a known value_input as int64 list (INT32 or INT64 dtype); count is its numel. */
anvil_status op_value_ints(const ir_node *n, int input, const op_tinfo *t, int64_t *out, size_t cap,
                           size_t *count);
/* True when input i of n exists and was not omitted. */
static inline bool op_has_input(const ir_node *n, int i) {
    return i < n->n_inputs && n->inputs[i] != IR_NONE;
}

/* In a check function: declares `type *var`, zeroed storage for the node's params from g's
 * arena, and returns ANVIL_ERR_OUT_OF_MEMORY from the check when there is none. The check fills
 * it and sets n->params. */
#define OP_PARAMS_NEW(g, type, var)                                                                \
    type *var = core_arena_alloc((g)->arena, sizeof(type));                                        \
    if (!var) return ANVIL_ERR_OUT_OF_MEMORY
/* True when the first `count` dims of a and b agree wherever both are known (an unknown dim
 * matches anything); both ranks must be at least count. */
bool op_dims_may_equal(const ir_shape *a, const ir_shape *b, int count);

#endif
