/* runtime/infer.h: shape inference and constant folding over a whole graph (infer.c). It needs
 * only the ops layer, so model loading (api/model.c) uses it without the rest of the runtime. */
#ifndef ANVIL_RUNTIME_INFER_H
#define ANVIL_RUNTIME_INFER_H

#include "ops/ops.h"

/* ---- whole-graph shape inference and folding ------------------------------------------------- */

/* Per-value knowledge while walking a graph. info[v].value is set for values whose contents are
 * known (constants, and outputs of folded nodes). */
typedef struct rt_shapes {
    int32_t n_values, n_nodes;
    op_tinfo *info; /* [n_values] */
    void **owned;   /* [n_values]: storage this struct owns (aligned; free()) or NULL */
    bool *folded;   /* [n_nodes]: node evaluated during inference */
    bool *dynamic;  /* [n_nodes]: node whose outputs must be inferred while running */
    size_t folded_count;
} rt_shapes;

typedef struct rt_infer_opts {
    /* Fold a node (run its reference kernel now) when all its inputs are known and its outputs
     * total at most this many bytes. Shape nodes fold whenever their input shape is static. */
    size_t fold_limit_bytes;
    /* ...and its work (rt_fold_work: multiply-adds) is at most this; 0: no limit. Loading bounds
     * it: a conv of a small output may still take minutes in the reference kernel. */
    uint64_t fold_limit_work;
    /* Require every output to be fully static and allocatable (plan time)... */
    bool require_static;
    /* ...except outputs of nodes that can only be known by running (data-dependent ops, control
     * flow, and what they feed): left with unknown dims and reported in s->dynamic. */
    bool allow_dynamic;
    op_ctx *ctx; /* for folding kernels; may be NULL */
    /* Applies a fused node's epilogue after its reference kernel (the session passes
     * kern_fusion_apply). NULL: fused nodes are not folded. */
    anvil_status (*apply_fusion)(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *out, op_ctx *ctx);
} rt_infer_opts;

/* The multiply-adds of folding n on the shapes in s: output elements times the terms each sums
 * for the convolutions and matrix products (every input's elements for any other op). Saturates
 * at UINT64_MAX. */
uint64_t rt_fold_work(const ir_node *n, const rt_shapes *s);

/* Allocates s for g with every value unknown. */
anvil_status rt_shapes_init(rt_shapes *s, const ir_graph *g);
void rt_shapes_free(rt_shapes *s);
/* Walks g's nodes in order (g must be topologically sorted). The caller has filled info[] for
 * graph inputs and constants. Checks every inferred dtype/shape against what the model declares
 * for that value (ir_value.dtype/shape when set), failing with a message naming the node. */
anvil_status rt_shapes_infer(const ir_graph *g, rt_shapes *s, const rt_infer_opts *opts);

/* Load-time inference: infers what can be known with symbolic input dims and writes the result
 * into g's values (dtype and shape of every node output). */
anvil_status rt_infer_graph_static(ir_graph *g);

/* What is known of g before running it, with its inputs as declared (static) and its constants:
 * every shape, and the contents of small folded values (shape arithmetic, comparisons). g is
 * not changed. On success s is the caller's to free (rt_shapes_free). */
anvil_status rt_shapes_known(const ir_graph *g, rt_shapes *s);

/* Whether n holds subgraphs (If, Loop, Scan). */
bool rt_node_has_subgraph(const ir_node *n);

#endif
