/* passes: graph rewrites that run before planning, on a session's own copy of the model graph.
 *
 * Level 0 runs none. Level 1 (the default) runs, in order:
 *   const_nodes     a Constant node's output becomes a constant value (exporters write scalars
 *                   as Constant nodes; to the passes below only constants are operands);
 *   fold_consts     a node of constant inputs (or a Shape of a static shape) with a small result
 *                   is computed once and becomes a constant (passes/fold_consts.c);
 *   drop_noops      a Cast to its input's own dtype becomes an Identity (an alias at run time);
 *   cse             a node equal to an earlier one (op, inputs, attributes) goes, its readers
 *                   reading the earlier one's outputs (passes/cse.c);
 *   fold_conv_bn    Conv followed by an inference BatchNormalization with constant statistics
 *                   becomes one Conv with rescaled weights and a bias;
 *   crop_taps       a Conv's kernel taps that only ever read padding (large dilations on small
 *                   maps) are dropped, with its pads shrunk to match;
 *   fuse_norm       LayerNorm and RMSNorm written out in primitive ops become
 *                   LayerNormalization and RMSNormalization (passes/fuse_norm.c);
 *   fuse_attention  MatMul, scale, mask, Softmax, MatMul (with the Transposes around them)
 *                   become one anvil.Sdpa node, run without the S x S scores
 *                   (passes/fuse_attention.c);
 *   fuse_epilogue   a MatMul/Gemm/Conv absorbs what follows it into its epilogue (ir_fusion):
 *                   a per-column bias Add (MatMul), a residual Add of the output's own shape, and
 *                   an activation (Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish,
 *                   Gelu, Gelu written out as Div/Erf/Add/Mul/Mul, and SiLU as Sigmoid/Mul);
 *   fuse_parallel   MatMuls reading one input with constant weights become one wide MatMul and a
 *                   Split, where measured faster (passes/fuse_parallel.c; a measured rewrite);
 *   fuse_pair       a Conv and the 1x1 Conv that alone reads it (anvil.ConvPair), or a MatMul and
 *                   the MatMul that alone reads it (anvil.GemmPair), with constant weights, run
 *                   as one kernel that keeps the intermediate in cache, where measured faster
 *                   (passes/fuse_pair.c; a measured rewrite);
 *   pool_act        a Relu or Clip that only a MaxPool reads becomes the pool's fused activation,
 *                   applied to the pooled output (passes/pool_act.c);
 *   attention_views an anvil.Sdpa operand that a Reshape of a Split's output made reads the Split's
 *                   input as a column range (passes/attention_views.c);
 *   fuse_chain      a chain of two or more elementwise nodes (each the only reader of the one
 *                   before, side operands x or constants) becomes one anvil.EltwiseChain node
 *                   that makes one pass over memory (passes/fuse_chain.c; off like any
 *                   pass, which ANVIL_FUSE_CHAIN=off does);
 *   layout          chains of Conv nodes become anvil.ConvNhwc on channels-last tensors, with a
 *                   Transpose where a chain meets the rest of the graph (pass_layout_mode).
 *   transposes      a Transpose of a Transpose becomes one, or an Identity when they cancel;
 *   dce             nodes whose outputs nothing reads go (passes/dce.c).
 * A rewrite only fires where it cannot change what the graph computes beyond float rounding
 * (single consumer of every value it removes, none of them a graph output or read by a subgraph).
 * A residual Add is fused when its operands have the same shape as far as load-time inference
 * knows (equal known dims; unknown dims allowed); the runtime checks the concrete shapes of each
 * plan and, where a residual turns out to broadcast, rebuilds without that fusion.
 * Any pass can be turned off by name (pass_options.off, pass_spec_parse). The model's own graph
 * is never modified. */
#ifndef ANVIL_PASSES_H
#define ANVIL_PASSES_H

#include "ir/ir.h"

/* A constant a pass computed (e.g. folded weights). Its data may be dropped once every reader
 * has its own copy (packed weights) and computed again from the source's constants when a new
 * plan needs it, so the process never holds folded weights next to their packed form. */
typedef struct pass_const {
    ir_vid v;    /* the value in pass_graph.g */
    float *data; /* owned; NULL while dropped */
    size_t numel;
    /* the recipe: fill(src, pc, out) writes numel floats computed from the source graph's
     * constants src[] (value ids are the same in the source and the copy) */
    anvil_status (*fill)(const ir_graph *src, const struct pass_const *pc, float *out);
    ir_vid src[6];
    float param;
    int which;
} pass_const;

/* What a pipeline run produced: the rewritten graph and the constant data it created. */
typedef struct pass_graph {
    ir_graph *g; /* owned; shares attributes, subgraphs and original constants with the source */
    const ir_graph *src; /* the source graph (borrowed) */
    pass_const *consts;  /* constants created by passes, freed with the graph */
    size_t n_consts, cap_consts;
    /* What each pass did, for dumps and tests. */
    int folded_bn;
    int folded_qdq; /* fold_qdq: DQ -> Conv/MatMul -> Q made QLinearConv/QLinearMatMul */
    int fused_bias, fused_residual, fused_act;
    int nhwc_convs, layout_transposes; /* the layout pass: convs made channels-last, transposes */
    int nhwc_carried;                  /* ... and other nodes carried along (layout.c, carry) */
    int fused_chains, chain_nodes; /* fuse_chain: chain nodes made, and the nodes they replace */
    int const_nodes;               /* const_nodes: Constant nodes made constant values */
    int noops;                     /* drop_noops: Casts to their input's dtype made Identity */
    int cropped_convs;             /* crop_taps: Convs whose never-used kernel taps were dropped */
    int fused_attention;           /* fuse_attention: anvil.Sdpa nodes made */
    int folded_consts;             /* fold_consts: nodes computed at load */
    int fused_parallel;            /* fuse_parallel: groups of MatMuls made one */
    int fused_pairs;               /* fuse_pair: back-to-back pairs made one node */
    int pool_acts;                 /* pool_act: activations moved into a max pool */
    int fused_norms;               /* fuse_norm: Layer/RMS normalizations made one node */
    int cse_merged;                /* cse: nodes merged into an equal earlier one */
    int attention_views;           /* attention_views: anvil.Sdpa nodes reading a Split's input */
    int transposes_merged;         /* transposes: Transpose pairs made one (or an Identity) */
    int gemm_transposes;           /* transposes: Gemms that took a 2-D Transpose into a flag */
    int dce_removed;               /* dce: nodes nothing read */
} pass_graph;

/* ---- rewrites that may or may not pay ---------------------------------------------------------
 * A rewrite whose benefit depends on the machine (the layout pass's channels-last chains today;
 * fusions later) does not decide by rule alone: for every group of nodes it would change
 * together it asks pass_options.decide, which may answer from measurements (the tuning database)
 * or force a choice (the tuner, timing each). The group key names what the rewrite would change
 * without node names, so the same structure in another model shares the decision. */
typedef struct pass_decision {
    const char *rewrite;             /* "layout"; static */
    const char *group;               /* the group's key (text, stable across runs and models) */
    const char *first;               /* the group's first node, for reports */
    int n_nodes;                     /* nodes the choice changes */
    int n_choices;                   /* 2..4 */
    const char *const *choice_names; /* [n_choices], e.g. {"nchw", "nhwc"}; static */
    int rule;                        /* what the rewrite's own rule would choose */
} pass_decision;
/* Returns the choice (0..n_choices-1); anything else means the rule's. q, group and first are
 * valid only during the call; rewrite and choice_names are static. */
typedef int (*pass_decide_fn)(void *arg, const pass_decision *q);

/* The passes by name, in pipeline order. A set of passes is a bit mask over this order. */
typedef enum pass_id {
    PASS_CONST_NODES,
    PASS_FOLD_QDQ,
    PASS_FOLD_CONSTS,
    PASS_DROP_NOOPS,
    PASS_CSE,
    PASS_FOLD_CONV_BN,
    PASS_CROP_TAPS,
    PASS_FUSE_NORM,
    PASS_FUSE_ATTENTION,
    PASS_FUSE_EPILOGUE,
    PASS_FUSE_PARALLEL,
    PASS_FUSE_PAIR,
    PASS_POOL_ACT,
    PASS_ATTENTION_VIEWS,
    PASS_FUSE_CHAIN,
    PASS_LAYOUT,
    PASS_TRANSPOSES,
    PASS_DCE,
    PASS_COUNT
} pass_id;
extern const char *const pass_names[PASS_COUNT];

/* Parses a pass list (anvil run/bench/tune/dump --passes): names separated by commas, each
 * turning that pass on ("name" or "+name") or off ("-name"), read left to right from every pass
 * on; "all" and "none" turn every pass on or off (e.g. "none,+fuse_attention"). *off gets the
 * passes turned off (bit i: pass_names[i]). INVALID_ARGUMENT naming an unknown pass and listing
 * the names. spec NULL or empty: every pass on. */
anvil_status pass_spec_parse(const char *spec, uint32_t *off);

typedef struct pass_options {
    int opt_level; /* 0: nothing; >= 1: every pass but those in `off` */
    uint32_t off;  /* passes turned off (pass_spec_parse) */
    /* Optional: called once for each constant of the source graph that no node of the result
     * reads any more (e.g. weights replaced by folded ones), so the caller can release the pages
     * the passes may have read. */
    void (*released)(void *ctx, const void *p, size_t n);
    void *released_ctx;
    /* Names of nodes fuse_epilogue must leave alone (borrowed): the runtime found a fusion
     * matched on symbolic dims not to hold for concrete shapes. */
    const char *const *unfused;
    int n_unfused;
    /* The layout pass (pass_layout_mode); 0 is PASS_LAYOUT_AUTO. */
    int layout;
    /* fuse_parallel's and fuse_pair's choice, forced over decide and the rule (pass_force);
     * 0: not forced. */
    int parallel_gemm, b2b;
    /* Nodes the layout pass must leave Conv (borrowed): those a user forced a Conv variant on;
     * keep_all_conv: Conv itself was forced. */
    const char *const *keep_conv;
    int n_keep_conv;
    bool keep_all_conv;
    /* Nodes it must turn whenever it can, whatever the mode (borrowed): those a user forced an
     * anvil.ConvNhwc variant on. */
    const char *const *nhwc_conv;
    int n_nhwc_conv;
    /* Optional: the choice for each group of a measured rewrite (see pass_decision); NULL:
     * the rules. Only consulted in the AUTO layout mode. */
    pass_decide_fn decide;
    void *decide_arg;
} pass_options;

/* Which convolutions the layout pass turns channels-last (anvil.ConvNhwc, with transposes at
 * the chain's ends). AUTO: the float32 2-D convs of every chain of convs that holds a depthwise
 * conv, where NCHW costs the most (MobileNetV2, 1 thread: see passes/layout.c); NCHW: none;
 * NHWC: every float32 2-D conv with constant weights. */
typedef enum pass_layout_mode {
    PASS_LAYOUT_AUTO = 0,
    PASS_LAYOUT_NCHW,
    PASS_LAYOUT_NHWC,
} pass_layout_mode;

/* A measured rewrite's choice forced, for experiments and comparisons (ANVIL_PARALLEL_GEMM,
 * ANVIL_B2B). */
typedef enum pass_force {
    PASS_FORCE_NONE = 0,
    PASS_FORCE_SEPARATE, /* the rewrite is not made */
    PASS_FORCE_FUSED,    /* it is made wherever it can be */
} pass_force;

/* Rewrites a copy of src (borrowed; must outlive *out) at opts->opt_level. *out owned by the
 * caller (pass_graph_free). */
anvil_status pass_pipeline_run(const ir_graph *src, const pass_options *opts, pass_graph **out);
void pass_graph_free(pass_graph *pg);

/* Whether v's data belongs to pg (a pass computed it). pg may be NULL. */
bool pass_graph_owns(const pass_graph *pg, ir_vid v);
/* Frees the data of a constant pg owns (g->values[v].data becomes NULL). */
void pass_graph_drop(pass_graph *pg, ir_vid v);
/* Computes a dropped constant again (no-op if present). */
anvil_status pass_graph_refill(pass_graph *pg, ir_vid v);

#endif
