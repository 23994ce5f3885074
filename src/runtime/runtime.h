/* runtime: shape inference and plan-time folding over a whole graph, the plan
 * (a variant per node, buffers from liveness analysis, one arena), the executor and the profiler
 * trace. */
#ifndef ANVIL_RUNTIME_H
#define ANVIL_RUNTIME_H

#include "kernels/kernels.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "runtime/infer.h"
#include "tune/tune.h"

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
/* The frame rt_frame_enter set last on this thread (NULL outside a running node). */
const rt_frame *rt_frame_current(void);

/* Replaces every If of *g whose condition is known from g's static input shapes and constants
 * by the nodes of the branch it takes (repeatedly: a spliced branch may hold more such Ifs);
 * *g is freed and replaced when anything was inlined. *g's inputs must be static. A branch
 * whose value names collide with g's stays an If. */
anvil_status rt_inline_known_ifs(ir_graph **g, int *inlined);

/* op_subgraph_fn implementations. The interpreter runs body node by node through the reference
 * kernels; the compiled path (subgraph.c; ctx->subgraph_arg is the rt_session running the
 * node) runs it as a nested session, compiled once per signature of its inputs, and falls back
 * to the interpreter where it cannot. */
anvil_status rt_subgraph_interpret(op_ctx *ctx, const ir_graph *body, const op_tensor *const *in,
                                   int n_in, op_tensor *out, int n_out);
anvil_status rt_subgraph_compiled(op_ctx *ctx, const ir_graph *body, const op_tensor *const *in,
                                  int n_in, op_tensor *out, int n_out);

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

/* rt_session_config.tolerance's default (anvil_options_set_tolerance's). */
#define RT_DEFAULT_TOLERANCE 1e-2

typedef struct rt_session_config {
    int threads; /* >= 1 */
    /* Optional (borrowed, with `threads` threads; must outlive the session): the pool to run
     * on. NULL: the session makes its own. Nested sessions (compiled subgraphs) share their
     * parent's, so that no second set of workers spins beside it. */
    core_pool *pool;
    /* Forced variants (borrowed for rt_session_create only; the session keeps copies). A node
     * named by a key must run that variant (planning fails if it cannot); a node whose op type is
     * a key runs it where it applies and keeps the default elsewhere. */
    const rt_force *forces;
    int n_forces;
    int opt_level;       /* 0..3 */
    uint32_t passes_off; /* passes turned off at opt_level >= 1 (pass_spec_parse) */
    /* The layout pass's mode (pass_layout_mode, passes.h); 0 is AUTO. */
    int layout;
    /* fuse_parallel's and fuse_pair's choice forced (pass_force, passes.h); 0: decided */
    int parallel_gemm, b2b;
    /* The kernels' knobs (kernels.h), for every node the session plans; all zero: none. */
    kern_knobs knobs;
    /* The error bound of precision auto (knobs.precision): the tuner keeps a reduced-precision
     * variant only where its result stays within it, relative to the output's scale. Carried for
     * the tuner; the runtime does not read it. > 0; 0 is taken as RT_DEFAULT_TOLERANCE. */
    double tolerance;
    bool profiling;
    /* Optional (borrowed; must outlive the session): the tuning database whose winners the plan
     * runs, looked up under `fingerprint` (tune_fingerprint, borrowed). NULL: the cascade. */
    tune_db *db;
    const char *fingerprint;
    /* Online tuning (online.c): > 0 makes every step whose problem db lacks try its
     * candidates over this many rounds of real runs, then lock the fastest (and write it to db
     * when set). prune_factor (> 1, default 1.3) and prune_after (default 1) are BestOf's. */
    int online_rounds;
    double online_prune_factor;
    int online_prune_after;
    /* Optional: answers the graph's measured rewrites (pass_decision) before the database and
     * the rules do; a return outside 0..n_choices-1 passes. The tuner forces each choice of a
     * group this way to time it. */
    pass_decide_fn decide;
    void *decide_arg;
    /* Optional: called while a plan is made, for each node the plan runs through a variant,
     * before its variant is chosen (kn borrowed for the call; its constant values are valid
     * then). The offline tuner measures here, so the choice that follows reads its record. */
    anvil_status (*on_node)(void *arg, const kern_node *kn);
    void *on_node_arg;
    /* Optional: called after the session copied a constant's bytes [p, p + n) into aligned
     * storage of its own, so the owner of the original (the model's file mapping) can drop it. */
    void (*released)(void *ctx, const void *p, size_t n);
    void *released_ctx;
    /* Plans choose only variants that anvil compile can emit (kern_variant.emit): the forced or
     * database choice where it has an emitter, else the first emittable variant of the cascade
     * (the node keeps its choice when none applies; emit_library then names it). */
    bool emittable_only;
    /* Keeps every activation in fp32 even where the chosen variants could pass it on in bf16
     * (rt_plan_store): for comparisons (ANVIL_BF16_STORAGE=0). */
    bool fp32_storage;
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
/* Called for each wanted output j after a run, with t's data borrowed from the session (valid
 * during the call only): a caller that only reads an output (a training session its gradients)
 * spares the copy into a new tensor. A status other than OK stops the visits and is returned. */
typedef anvil_status (*rt_output_fn)(void *arg, int32_t j, const op_tensor *t);
/* rt_session_run without the output tensors: visit (required) sees each wanted output instead. */
anvil_status rt_session_run_visit(rt_session *s, const anvil_tensor *const *inputs,
                                  const bool *want, rt_output_fn visit, void *arg);
anvil_status rt_session_stats(const rt_session *s, anvil_session_stats *out);
anvil_status rt_session_write_trace(const rt_session *s, const char *path);

/* One group decision of a measured rewrite (pass_decision) as the session's graph took it.
 * key and first owned by the session. */
typedef struct rt_group {
    const char *rewrite; /* static: the pass's own string */
    char key[TUNE_KEY_MAX];
    char first[128];
    int n_nodes;
    int n_choices;
    const char *const *choice_names; /* static */
    int rule, chosen;
    tune_why why; /* FORCED (the decide callback), DB or CASCADE (the rule) */
} rt_group;
/* The session's group decisions, in the order the passes asked. *groups borrowed from s. */
void rt_session_groups(const rt_session *s, const rt_group **groups, int *n);
/* The database key of a group decision made with `threads` threads:
 * "rewrite|<rewrite>|<group>|t=<threads>"; its family is "rewrite|<rewrite>". */
void rt_group_key(const char *rewrite, const char *group, int threads, char *key, size_t cap,
                  char *family, size_t family_cap);

/* The rewrite name of a training conv layer's grouped choice (its forward, input- and
 * weight-gradient passes decided together): "train_conv" (static). */
extern const char *const rt_train_conv_rewrite;

/* One step of the latest plan, for --explain. Strings borrowed from the session. */
typedef struct rt_step_info {
    const char *node, *op;
    const char *variant;          /* "dynamic" for steps run by the interpreter */
    const char *runs;             /* kern_delegate's name for variant, or NULL */
    char params[TUNE_PARAMS_MAX]; /* tune_params_format of its configuration and threads */
    tune_why why;
    bool dynamic;
    bool tuning; /* the online tuner is still trying candidates here (why is ONLINE) */
    /* Where the node is: NULL in the main graph, else the body that holds it, as
     * "<If/Loop/Scan node>.<attribute>", nested ones joined by '/'. */
    const char *scope;
    /* A body the interpreter runs (variant "interpreted", op "subgraph"): why; else NULL. */
    const char *note;
    /* The work the node carries: bytes of its inputs and outputs (0 where the plan does not know
     * them: dynamic steps) and FLOPs (ir_node_flops on the plan's graph). */
    uint64_t bytes, flops;
    /* The arithmetic of the implementation that runs it: true when the variant, or the one it
     * hands the node to, rounds its operands to bf16 (KERN_ROUNDS_BF16), or to fp16
     * (KERN_ROUNDS_FP16). */
    bool rounds_bf16, rounds_fp16;
    bool int8; /* the variant multiplies 8-bit integers (the int8 tiles' vpdpbusd) */
    /* Its inputs (bit i) and outputs (bit j) the plan stores in bf16 (rt_plan_store). */
    uint32_t bf16_in, bf16_out;
    /* The bf16 region it belongs to (rt_session_regions): 1.., or 0 outside every region (and
     * in a nested session's body). */
    int32_t region;
} rt_step_info;
/* Calls fn for every step of the plan the last run used, in order. INVALID_ARGUMENT if the
 * session has not run yet. */
anvil_status rt_session_explain(const rt_session *s, void (*fn)(void *arg, const rt_step_info *),
                                void *arg);

/* One bf16 region of a plan (plan_regions.c): steps that compute in bf16, connected through the
 * values they pass, with the reshapes between them. */
typedef struct rt_region {
    int32_t steps;      /* its steps, aliasing reshapes included */
    int32_t bf16_steps; /* those that compute in bf16 */
    uint64_t flops;
    int32_t enter;      /* activations it reads from outside: each rounded once, as read */
    int32_t leave;      /* activations it writes that fp32 steps or the caller read: fp32 */
    int32_t inner;      /* activations passed between its own steps */
    int32_t inner_bf16; /* of those, the ones stored in bf16 */
} rt_region;
typedef struct rt_regions {
    int32_t *step_region; /* [n_steps]: per step of the last plan, its region 1.., or 0 */
    int32_t n_steps;
    rt_region *regions; /* [n_regions] */
    int32_t n_regions;
} rt_regions;
/* The bf16 regions of the last plan's main graph, into *out (its arrays owned by the caller:
 * rt_regions_free). INVALID_ARGUMENT if the session has not run yet. */
anvil_status rt_session_regions(const rt_session *s, rt_regions *out);
void rt_regions_free(rt_regions *r);

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
/* The same without zeroing: for a tensor the caller fills completely at once (a run's outputs,
 * copied out of the arena; zeroing a 10 MB output first cost a quarter of a ConvTranspose run). */
anvil_status rt_tensor_new_uninit(anvil_dtype dt, int rank, const int64_t *dims,
                                  anvil_tensor **out);

#endif
