/* ir: the graph anvil compiles. Values (tensors with dtype, shape, layout and optional constant
 * data), nodes (op, attributes, inputs, outputs, subgraphs), the op table, verification, and text
 * and Graphviz dumps.
 *
 * Ownership: an ir_graph owns all its metadata (names, attribute arrays, shapes) in its arena.
 * Constant data (ir_value.data, ir_tensor.data) is NOT owned by the graph: it points into the
 * memory-mapped model file or into storage owned by the model (anvil_model), which outlives the
 * graph's users. Values and nodes are addressed by index (ir_vid / node index), so arrays may grow
 * while passes mutate the graph. */
#ifndef ANVIL_IR_H
#define ANVIL_IR_H

#include "core/core.h"

#define IR_MAX_RANK ANVIL_MAX_RANK
#define IR_DIM_UNKNOWN (-1)
/* Subgraphs (If/Loop/Scan bodies) nested deeper than this are refused. */
#define IR_MAX_GRAPH_DEPTH 32

typedef enum ir_op {
#define OP(id, name, impl, file) IR_OP_##id,
#include "ir/ops.def"
#undef OP
    IR_OP_COUNT
} ir_op;

/* ONNX name of an op ("Conv"). Static storage. */
const char *ir_op_name(ir_op op);
/* Looks an ONNX op type up in the default domain; false if anvil does not know it. */
bool ir_op_lookup(const char *onnx_name, ir_op *out);
/* Whether op is one of anvil's internal ops ("anvil.*"), which only passes create. */
bool ir_op_internal(ir_op op);

struct ir_graph;
typedef int32_t ir_vid; /* index into ir_graph.values; IR_NONE for an omitted optional input */
#define IR_NONE (-1)

/* A shape. rank < 0: unknown rank. d[i] >= 0: a known dim; d[i] == IR_DIM_UNKNOWN: unknown, in
 * which case sym[i] >= 0 names it (index into ir_graph.syms) or sym[i] == -1 (anonymous). */
typedef struct ir_shape {
    int rank;
    int64_t d[IR_MAX_RANK];
    int32_t sym[IR_MAX_RANK];
} ir_shape;

/* Shape helpers. */
void ir_shape_unknown(ir_shape *s);                            /* unknown rank */
void ir_shape_set(ir_shape *s, int rank, const int64_t *dims); /* all dims known */
bool ir_shape_is_static(const ir_shape *s);                    /* rank and dims known */
bool ir_shape_equal(const ir_shape *a, const ir_shape *b);     /* same known dims/syms */
/* numel of a static shape; false if not static or on overflow. */
bool ir_shape_numel(const ir_shape *s, size_t *out);
/* Formats "[1,3,224,224]" or "[N,3,?,?]" into buf (always NUL-terminated). */
const char *ir_shape_str(const struct ir_graph *g, const ir_shape *s, char *buf, size_t cap);

typedef enum ir_layout {
    IR_LAYOUT_PLAIN = 0, /* ONNX's own row-major order (NCHW for images) */
    IR_LAYOUT_NHWC = 1,
    IR_LAYOUT_BLOCKED = 2 /* channel-blocked (e.g. nChw16c); block size in ir_value.layout_block */
} ir_layout;

enum {
    IR_VALUE_GRAPH_INPUT = 1u << 0,
    IR_VALUE_GRAPH_OUTPUT = 1u << 1,
    IR_VALUE_CONST = 1u << 2, /* an initializer or Constant output: data is set */
    IR_VALUE_OUTER = 1u << 3  /* a subgraph's reference to a value of an enclosing graph */
};

typedef struct ir_value {
    const char *name; /* arena-owned; unique within its graph */
    anvil_dtype dtype;
    ir_shape shape;
    ir_layout layout;
    int layout_block;
    uint32_t flags;
    /* constant data: borrowed (mmap'd model file or model-owned storage); may be unaligned for
     * the dtype. NULL unless IR_VALUE_CONST. Bytes is numel * dtype size. */
    const void *data;
    size_t data_bytes;
    int32_t producer; /* index of the node that writes it, or -1 */
} ir_value;

typedef enum ir_attr_type {
    IR_ATTR_UNDEFINED = 0,
    IR_ATTR_FLOAT = 1,
    IR_ATTR_INT = 2,
    IR_ATTR_STRING = 3,
    IR_ATTR_TENSOR = 4,
    IR_ATTR_GRAPH = 5,
    IR_ATTR_FLOATS = 6,
    IR_ATTR_INTS = 7,
    IR_ATTR_STRINGS = 8,
    IR_ATTR_TENSORS = 9,
    IR_ATTR_GRAPHS = 10
} ir_attr_type; /* numbers as ONNX AttributeProto.AttributeType */

/* A constant tensor held by an attribute (e.g. Constant's value). data is borrowed as above. */
typedef struct ir_tensor {
    anvil_dtype dtype;
    int rank;
    int64_t dims[IR_MAX_RANK];
    const void *data;
    size_t bytes;
} ir_tensor;

struct ir_graph;

typedef struct ir_attr {
    const char *name;
    ir_attr_type type;
    float f;
    int64_t i;
    const char *s; /* NUL-terminated copy, arena-owned; s_len excludes the NUL */
    size_t s_len;
    size_t n; /* element count of the list types */
    const float *floats;
    const int64_t *ints;
    const char *const *strings;
    ir_tensor *t;       /* TENSOR */
    ir_tensor *tensors; /* TENSORS, n of them */
    struct ir_graph *g; /* GRAPH, owned by the enclosing graph */
    struct ir_graph **graphs;
} ir_attr;

#include "ir/ir_act.h"

/* An epilogue fused into a node by src/passes: output 0 becomes
 *   act(op(x) + bias[col] + residual)
 * where bias (if any) is input `bias` of the node, a vector over output 0's last dim (MatMul,
 * Gemm; a Conv carries its bias in its own input 2), and residual (if any) is input `residual`,
 * a tensor of output 0's exact shape. Both are appended after the op's own inputs, so liveness
 * and memory planning see them as ordinary inputs; the op's own kernels ignore trailing inputs,
 * and the runtime applies whatever a variant does not (kern_fusion_apply). */
typedef struct ir_fusion {
    int bias;     /* input index, or -1 */
    int residual; /* input index, or -1 */
    ir_act act;
    float alpha, beta; /* LeakyRelu alpha; HardSigmoid alpha and beta */
    float lo, hi;      /* Clip bounds */
} ir_fusion;

/* "Relu", "Clip", ...: for dumps and traces. Static storage. */
const char *ir_act_name(ir_act act);
/* The activation ir_act_name calls `name` ("none" included); false for any other text. */
bool ir_act_from_name(const char *name, ir_act *out);
/* f's activation of x, in plain scalar C: the reference for kernels that apply an ir_fusion
 * (the optimized epilogues have their own vector code, checked against this). */
float ir_act_eval(const ir_fusion *f, float x);

typedef struct ir_node {
    const char *name; /* never NULL: the importer names unnamed nodes "<OpType>_<index>" */
    ir_op op;
    int opset; /* the default-domain opset the model imports; selects the op's semantics */
    int n_inputs, n_outputs, n_attrs;
    ir_vid *inputs;  /* IR_NONE for an omitted optional input */
    ir_vid *outputs; /* IR_NONE for an omitted optional output */
    ir_attr *attrs;
    void *params; /* op-specific parsed attributes, set by the op's check(); arena-owned */
    const ir_fusion *fusion; /* NULL, or the epilogue a pass fused in; arena-owned */
} ir_node;

typedef struct ir_graph {
    core_arena *arena; /* owns every piece of metadata below */
    const char *name;
    int opset; /* default-domain opset */
    int depth; /* 0 for the main graph */
    struct ir_graph *parent;
    ir_value *values;
    int32_t n_values, cap_values;
    ir_node *nodes;
    int32_t n_nodes, cap_nodes;
    ir_vid *inputs; /* graph inputs (not initializers) in declaration order */
    int32_t n_inputs, cap_inputs;
    ir_vid *outputs;
    int32_t n_outputs, cap_outputs;
    const char **syms; /* names of symbolic dims */
    int32_t n_syms, cap_syms;
    int32_t *name_index; /* open-addressing hash: value name -> vid (malloc-owned) */
    uint32_t name_index_cap;
    struct ir_graph **children; /* subgraphs attached to nodes of this graph (malloc-owned) */
    int32_t n_children, cap_children;
} ir_graph;

/* ---- building and mutation ---------------------------------------------------------------- */

/* A new empty graph; parent may be NULL. *out is owned by the caller (ir_graph_free), unless
 * it is attached to a parent's attribute, in which case ir_graph_free(parent) frees it. */
anvil_status ir_graph_create(ir_graph *parent, ir_graph **out);
void ir_graph_free(ir_graph *g);

/* Adds a value named `name` (copied). Fails with INVALID_MODEL if the name already exists in
 * this graph. */
anvil_status ir_graph_add_value(ir_graph *g, const char *name, ir_vid *out);
/* Finds a value by name in this graph only; IR_NONE if absent. O(1) average. */
ir_vid ir_graph_find_value(const ir_graph *g, const char *name);
/* Adds a node with room for n_inputs/n_outputs/n_attrs (all zeroed, inputs/outputs IR_NONE).
 * name is copied. Returns the node index. Pointers into g->nodes are invalidated. */
anvil_status ir_graph_add_node(ir_graph *g, ir_op op, const char *name, int n_inputs, int n_outputs,
                               int n_attrs, int32_t *out_index);
anvil_status ir_graph_add_input(ir_graph *g, ir_vid v);
anvil_status ir_graph_add_output(ir_graph *g, ir_vid v);
/* Interns a symbolic dim name; returns its index. */
anvil_status ir_graph_add_sym(ir_graph *g, const char *name, int32_t *out);

/* A copy of src for rewriting: values, nodes, inputs and outputs are new (the copy owns them and
 * may be mutated freely); attributes, parsed params, subgraphs and constant data are shared with
 * src, which must outlive the copy and is not changed. *out owned by the caller (ir_graph_free). */
anvil_status ir_graph_clone(const ir_graph *src, ir_graph **out);
/* Appends to dst a copy of node n of another graph: its inputs and outputs mapped through
 * in_map / out_map (indexed by n's graph's value ids; NULL: the same ids in dst), its
 * attributes, parsed params and fusion shared as in ir_graph_clone. *index may be NULL. */
anvil_status ir_graph_copy_node(ir_graph *dst, const ir_node *n, const ir_vid *in_map,
                                const ir_vid *out_map, int32_t *index);

/* ---- attributes (used by ops' check functions) --------------------------------------------- */

const ir_attr *ir_node_attr(const ir_node *n, const char *name);
/* Each getter: absent -> *out = dflt and OK; present with the wrong type -> INVALID_MODEL with a
 * message naming the node, the attribute, the expected and the actual type. */
anvil_status ir_attr_int(const ir_node *n, const char *name, int64_t dflt, int64_t *out);
anvil_status ir_attr_float(const ir_node *n, const char *name, float dflt, float *out);
/* An INT attribute that must be 0 or 1 (transA, keepdims, ...); other values are refused. */
anvil_status ir_attr_flag(const ir_node *n, const char *name, bool dflt, bool *out);
/* *out points at arena-owned storage or at dflt. */
anvil_status ir_attr_string(const ir_node *n, const char *name, const char *dflt, const char **out);
/* out and count: an arena-owned list, or NULL and 0 if absent. */
anvil_status ir_attr_ints(const ir_node *n, const char *name, const int64_t **out, size_t *count);
anvil_status ir_attr_floats(const ir_node *n, const char *name, const float **out, size_t *count);
anvil_status ir_attr_tensor(const ir_node *n, const char *name, const ir_tensor **out);
const char *ir_attr_type_name(ir_attr_type t);
/* How many subgraphs attribute a holds: 1 for GRAPH, its n for GRAPHS, 0 for any other type. */
static inline size_t ir_attr_graph_count(const ir_attr *a) {
    return a->type == IR_ATTR_GRAPH ? 1 : a->type == IR_ATTR_GRAPHS ? a->n : 0;
}
/* Subgraph j (< ir_attr_graph_count(a)) of attribute a; NULL where it is missing. */
static inline struct ir_graph *ir_attr_graph_at(const ir_attr *a, size_t j) {
    if (a->type == IR_ATTR_GRAPH) return a->g;
    return a->graphs ? a->graphs[j] : NULL;
}

/* "node 'conv1' (Conv)": for messages. Static thread-local buffer, valid until the next call. */
const char *ir_node_label(const ir_node *n);

/* ---- checks and dumps ---------------------------------------------------------------------- */

/* Structural verification: every value defined exactly once (by a graph input, initializer or one
 * node output), every node input defined before use (graph is acyclic and topologically ordered),
 * graph outputs defined, dtypes of defined values known and supported, subgraphs verified
 * recursively. The first problem found is returned with a message naming the node and value. */
anvil_status ir_graph_verify(const ir_graph *g);

/* Sorts nodes topologically in place (stable for already-sorted graphs). Fails with
 * INVALID_MODEL naming a node on a cycle, or a value that is never defined. */
anvil_status ir_graph_toposort(ir_graph *g);

/* Human-readable text dump: inputs, outputs, one line per node with attributes and shapes.
 * Writes to f (borrowed). */
void ir_graph_dump_text(const ir_graph *g, void *file);
/* Graphviz dot dump to f. */
void ir_graph_dump_dot(const ir_graph *g, void *file);

/* ---- cost estimates (src/ir/flops.c) ------------------------------------------------------ */

/* Floating-point operations one run of node n (of graph g) performs, estimated from the static
 * shapes recorded in g: 2 * multiply-accumulates for Conv, ConvTranspose, Gemm and MatMul, about
 * one per output element for elementwise ops and activations, the window size per output element
 * for pooling, and 0 for pure data movement (Reshape, Transpose, Concat, Gather, ...). Symbolic or
 * unknown dims count as 1; a node whose needed rank is unknown counts as 0. Saturates at
 * UINT64_MAX. Subgraphs are not included. */
uint64_t ir_node_flops(const ir_graph *g, const ir_node *n);
/* Same estimate; *approx (may be NULL) is set to true when a symbolic or unknown dim or rank
 * entered it, false otherwise. */
uint64_t ir_node_flops_ex(const ir_graph *g, const ir_node *n, bool *approx);

#endif
