/* runtime: shape inference and plan-time folding over a whole graph, the plan
 * (a variant per node, buffers from liveness analysis, one arena), the executor and the profiler
 * trace. */
#ifndef ANVIL_RUNTIME_H
#define ANVIL_RUNTIME_H

#include "kernels/kernels.h"
#include "ops/ops.h"
#include "runtime/infer.h"

/* A scope of running values: the graph being executed and how to read one of its values.
 * Subgraphs resolve their IR_VALUE_OUTER values by name through `up`. */
typedef struct rt_frame rt_frame;
struct rt_frame {
    const ir_graph *g;
    const rt_frame *up; /* the frame of the enclosing graph, NULL for the main graph */
    /* Fills *out with value v of g (data borrowed, valid while the frame runs); RUNTIME error
     * if v has no contents yet. */
    anvil_status (*lookup)(const rt_frame *f, ir_vid v, op_tensor *out);
};

/* ---- one node through one variant, outside a session (variant_run.c) -------------------------
 * For tests and kernel benchmarks: prepares v for kn (kn->threads threads; kn and the constant
 * values it points to are borrowed and must outlive the exec), then runs it as often as wanted.
 * pool: borrowed, with kn->threads threads, shared by execs that take turns (a pool's idle workers
 * spin for a while after each job, and other pools' workers spinning beside a run take its CPUs);
 * NULL: the exec makes its own. *out owned by the caller (rt_variant_exec_free). */
typedef struct rt_variant_exec rt_variant_exec;
anvil_status rt_variant_exec_create(const kern_variant *v, const kern_node *kn, core_pool *pool,
                                    rt_variant_exec **out);
anvil_status rt_variant_exec_run(rt_variant_exec *e, const ir_node *n, const op_tensor *const *in,
                                 int n_in, op_tensor *const *out, int n_out);
void rt_variant_exec_free(rt_variant_exec *e);

/* ---- the dynamic interpreter (interp.c) -------------------------------------------------------
 */

/* Runs one node with every input concrete: infers its outputs from the actual values, gives them
 * storage (out[i].data owned by the caller, op_tensor_release) and runs the reference kernel (or
 * run_alloc). out[i] NULL for omitted outputs. frame (borrowed) holds the values of n's graph,
 * for the subgraphs n runs. */
anvil_status rt_node_run_dynamic(const ir_graph *g, const ir_node *n, const op_tensor *const *in,
                                 op_tensor *const *out, op_ctx *ctx, const rt_frame *frame);
/* The frame subgraphs started now on this thread resolve outer values in; returns the previous
 * one so the caller can restore it. Kernels run on the thread that called them, so a
 * thread-local scope is enough and keeps op_ctx unchanged. */
const rt_frame *rt_frame_enter(const rt_frame *f);

/* Main-graph values that subgraphs of node n (at any depth) read from g, by name: calls
 * mark(arg, v) for each (possibly more than once). */
anvil_status rt_node_outer_reads(const ir_graph *g, const ir_node *n,
                                 void (*mark)(void *arg, ir_vid v), void *arg);

/* ---- sessions and plans ------------------------------------------------------------------------
 */

typedef struct rt_session rt_session;

/* A forced variant: key is a node name or an ONNX op type ("Conv"); both strings borrowed. */
typedef struct rt_force {
    const char *key;
    const char *variant;
} rt_force;

typedef struct rt_session_config {
    int threads; /* >= 1 */
    /* Forced variants (borrowed for rt_session_create only; the session keeps copies). A node
     * named by a key must run that variant (planning fails if it cannot); a node whose op type is
     * a key runs it where it applies and keeps the default elsewhere. */
    const rt_force *forces;
    int n_forces;
    int opt_level; /* 0..3 */
    /* The layout pass's mode (pass_layout_mode, passes.h); 0 is AUTO. */
    int layout;
    bool profiling;
    /* Optional: called after the session copied a constant's bytes [p, p + n) into aligned
     * storage of its own, so the owner of the original (the model's file mapping) can drop it. */
    void (*released)(void *ctx, const void *p, size_t n);
    void *released_ctx;
} rt_session_config;

/* One activation storage of a plan: its bytes, the step range where it is live, and the arena
 * offset rt_arena_assign gives it. */
typedef struct rt_arena_buf {
    int32_t root; /* the value it belongs to (the caller's; not read) */
    size_t bytes;
    int32_t first, last; /* steps where the storage is live, inclusive */
    size_t offset;       /* out */
} rt_arena_buf;
/* Assigns every buffer an offset such that buffers live at the same step never overlap (each
 * at a multiple of 64 bytes); *arena_bytes receives the arena's size. Sorts bufs (biggest first).
 * Exposed for the planner's tests. */
anvil_status rt_arena_assign(rt_arena_buf *bufs, int32_t n, size_t *arena_bytes);

/* g is borrowed and must outlive the session. *out owned by the caller (rt_session_free). */
anvil_status rt_session_create(const ir_graph *g, const rt_session_config *cfg, rt_session **out);
void rt_session_free(rt_session *s);

/* inputs[i] binds graph input i (g->inputs order); each is borrowed for the call and must match
 * the declared dtype, rank and static dims. outputs[j] (g->outputs order) are new tensors owned by
 * the caller; want[j] false skips output j (outputs[j] left NULL). */
anvil_status rt_session_run(rt_session *s, const anvil_tensor *const *inputs, const bool *want,
                            anvil_tensor **outputs);
anvil_status rt_session_stats(const rt_session *s, anvil_session_stats *out);
anvil_status rt_session_write_trace(const rt_session *s, const char *path);

/* ---- tensors (the public anvil_tensor, shared with the API layer) ------------------------------
 */

struct anvil_tensor {
    anvil_dtype dtype;
    int rank;
    int64_t dims[ANVIL_MAX_RANK];
    void *data;
    size_t bytes;
    bool owns_data;
};

/* New tensor owning `bytes` of zeroed, 64-byte aligned storage. dims borrowed. */
anvil_status rt_tensor_new(anvil_dtype dt, int rank, const int64_t *dims, anvil_tensor **out);

#endif
