/* What the passes share (rewrite.c): the graph being rewritten, its use counts, and the edits a
 * pass makes through them. Only src/passes includes this header; the pipeline (pipeline.c) calls
 * the passes, the passes call these helpers, and these call no pass. */
#ifndef ANVIL_PASS_REWRITE_H
#define ANVIL_PASS_REWRITE_H

#include "passes.h"

typedef struct pass_ctx {
    pass_graph *pg;
    ir_graph *g;
    const ir_graph *src;
    int32_t *uses;   /* [n_values]: reads by live nodes; INT32_MAX/2 for graph outputs and values
                      * subgraphs read by name (never removable) */
    int32_t *reader; /* [n_values]: a live node reading the value (the only one when uses == 1) */
    bool *dead;      /* [n_nodes]: removed by a rewrite; compacted away at the end */
    const pass_options *opts;
} pass_ctx;

/* FNV-1a over n bytes at p, continuing from h (PASS_HASH_SEED to start): the structural keys of
 * measured rewrites' groups (pass_decision.group). */
#define PASS_HASH_SEED 0xcbf29ce484222325ull
uint64_t pass_hash(uint64_t h, const void *p, size_t n);

/* Recomputes uses/reader from the live nodes. */
void pass_index(pass_ctx *c);
/* Whether v is a graph output or read by a subgraph by name (never removable). */
bool pass_pinned(const pass_ctx *c, ir_vid v);
/* The live node that writes v, or NULL (v is an input, a constant, or its producer was removed). */
const ir_node *pass_producer(const pass_ctx *c, ir_vid v);
/* The node that alone reads v, or -1 (v read more than once, by nothing, or pinned). */
int32_t pass_sole_reader(const pass_ctx *c, ir_vid v);
/* Like pass_const_f32, for value v of graph g (e.g. the source graph, which a recipe reads);
 * the output of a checked Constant node counts as a constant. */
const void *pass_graph_const_f32(const ir_graph *g, ir_vid v, size_t *numel);
/* v's data as float32 if v is a float32 constant, else NULL. May be unaligned: read with memcpy
 * (pass_const_f32_at). */
const void *pass_const_f32(const pass_ctx *c, ir_vid v, size_t *numel);
float pass_const_f32_at(const void *data, size_t i);
/* v's data copied to out[0..n) if v is an int64 constant of exactly n elements; else false. */
bool pass_const_int64s(const pass_ctx *c, ir_vid v, int64_t *out, size_t n);
/* A scalar float32 constant (numel 1): true and *out set. */
bool pass_const_scalar(const pass_ctx *c, ir_vid v, float *out);
/* Adds a float32 constant of `dims` computed by recipe->fill (its fill, src, param and which are
 * copied; v, data and numel are set here); pg owns it. */
anvil_status pass_add_const(pass_ctx *c, const char *base, int rank, const int64_t *dims,
                            const pass_const *recipe, ir_vid *out);
/* Adds an int64 constant [n] holding v[0..n) (copied into the graph's arena), named after base. */
anvil_status pass_add_int64_const(pass_ctx *c, const char *base, const int64_t *v, int n,
                                  ir_vid *out);
/* Adds a value named after base (made unique) with dtype and shape, no producer and no reads. */
anvil_status pass_add_value(pass_ctx *c, const char *base, anvil_dtype dtype, const ir_shape *shape,
                            ir_vid *out);
/* Adds a node (ir_graph_add_node, with the graph's opset): pointers into g->nodes are
 * invalidated. Its inputs are not counted as reads until set through pass_node_set_input. */
anvil_status pass_add_node(pass_ctx *c, ir_op op, const char *name, int n_inputs, int n_outputs,
                           int n_attrs, int32_t *out);
/* Sets input i of node k to v (growing the inputs with IR_NONE if needed; uses updated). */
anvil_status pass_node_set_input(pass_ctx *c, int32_t k, int i, ir_vid v);
/* Appends input v to node k after every input the op itself declares (so the op's kernels,
 * which ignore trailing inputs, never mistake it for one of theirs); *index set. */
anvil_status pass_node_add_input(pass_ctx *c, int32_t k, ir_vid v, int *index);
/* Removes node k (its reads are dropped from the use counts). */
void pass_node_kill(pass_ctx *c, int32_t k);
/* Node k takes over output 0 of node dead_k, which is removed (its reads are dropped). */
void pass_node_absorb(pass_ctx *c, int32_t k, int32_t dead_k);
/* Drops dead nodes, fixes producers, and clears constants nothing reads (a source constant is
 * reported through opts->released). */
void pass_compact(pass_ctx *c, const pass_options *opts);

/* The passes, which only pipeline.c calls (re-indexing before each). */
anvil_status pass_const_nodes(pass_ctx *c);
anvil_status pass_fold_qdq(pass_ctx *c);
anvil_status pass_fold_consts(pass_ctx *c);
anvil_status pass_drop_noops(pass_ctx *c);
anvil_status pass_cse(pass_ctx *c);
anvil_status pass_fold_conv_bn(pass_ctx *c);
anvil_status pass_crop_taps(pass_ctx *c);
anvil_status pass_fuse_norm(pass_ctx *c);
anvil_status pass_fuse_attention(pass_ctx *c);
anvil_status pass_fuse_epilogue(pass_ctx *c);
anvil_status pass_fuse_parallel(pass_ctx *c);
anvil_status pass_fuse_pair(pass_ctx *c);
anvil_status pass_pool_act(pass_ctx *c);
anvil_status pass_attention_views(pass_ctx *c);
anvil_status pass_fuse_chain(pass_ctx *c);
anvil_status pass_layout(pass_ctx *c);
anvil_status pass_transposes(pass_ctx *c);
anvil_status pass_dce(pass_ctx *c);

#endif
