/* onnx: reads ONNX models (protobuf) into the ir graph, and serialized TensorProto files into
 * tensors.
 *
 * What the importer produces:
 *  - one ir_graph for the main graph; every GRAPH / GRAPHS attribute becomes a child ir_graph
 *    (ir_graph_create(parent, ...)) referenced from the attribute, nested at most
 *    IR_MAX_GRAPH_DEPTH deep;
 *  - values with name, dtype and shape; symbolic dims are interned per graph (ir_graph_add_sym);
 *    dims written as -1 by old exporters read as unknown;
 *  - initializers as IR_VALUE_CONST values whose data points into the model file (zero copy,
 *    possibly unaligned), into an external data file, or, for the rare tensors stored in the
 *    typed protobuf fields (float_data, int64_data, ...), into storage the model owns;
 *  - graph inputs that are also initializers (IR < 4 style) are constants, not inputs;
 *  - nodes with their op, opset, inputs / outputs (IR_NONE for an omitted optional one, i.e. an
 *    empty name), attributes of every type, and producer set on their outputs; unnamed nodes are
 *    named "<OpType>_<index in the graph>";
 *  - declared types of graph outputs on their values (the runtime checks inference against them);
 *  - in a subgraph, a name that the subgraph does not define refers to an enclosing graph: it is
 *    created as an IR_VALUE_OUTER value, with the dtype and shape of the outer value, in the
 *    subgraph and in every graph between it and the graph that defines it, so each OUTER value
 *    names a value of its direct parent. Names defined nowhere are refused, in every graph.
 * It does not run op checks, shape inference or verification (the API layer does, afterwards).
 *
 * What it refuses, each with a message naming the value / node / attribute and a remedy:
 * malformed protobuf and non-models ("not an ONNX model: ..."), empty inputs and inputs over
 * protobuf's 2 GiB limit, inputs that would decode to far more memory than their size,
 * IR versions outside ONNX_IR_VERSION_MIN..MAX, default-domain opsets outside
 * ONNX_OPSET_MIN..MAX (or none), operators outside the default domain or missing from
 * ir/ops.def (all listed in one message, subgraphs included), dtypes anvil cannot hold, non-tensor
 * types, bad or overflowing dims, initializer payloads whose size does not match their shape,
 * tensors larger than core_max_tensor_bytes() (ANVIL_ERR_LIMIT), attributes whose declared type
 * does not match their contents, and external data outside the model's folder or past the end of
 * its file. */
#ifndef ANVIL_ONNX_H
#define ANVIL_ONNX_H

#include "ir/ir.h"

/* Supported IR versions: 3 (ONNX 1.0, the first with opset imports) to 13 (the pinned onnx
 * 1.22.0); 12 and 13 only add element types, which anvil refuses by name if used. */
#define ONNX_IR_VERSION_MIN 3
#define ONNX_IR_VERSION_MAX 13
/* Supported default-domain ("" or "ai.onnx") opsets: 27 is the newest of the pinned onnx 1.22.0.
 * Each op's check() handles every schema version of its op in this range. */
#define ONNX_OPSET_MIN 7
#define ONNX_OPSET_MAX 27
/* Protobuf cannot represent messages of 2 GiB or more; larger models keep weights externally. */
#define ONNX_MAX_PROTO_BYTES ((size_t)INT32_MAX)

struct onnx_store; /* private: mappings and owned tensor storage (onnx_internal.h) */

/* An imported model. Owns everything it points to; free with onnx_model_free. */
typedef struct onnx_model {
    ir_graph *graph; /* the main graph; subgraphs hang off it (ir_graph.children) */
    int64_t ir_version;
    int opset; /* default-domain opset (also graph->opset and every node's opset) */
    int64_t model_version;
    /* "" when absent; owned by the model (graph arena) */
    const char *producer_name, *producer_version, *domain;
    /* The path as given to onnx_load_file, and the canonical folder external data must lie in;
     * both "" for models loaded from memory. Owned by the model. */
    const char *path, *dir;
    /* The serialized model: the read-only file mapping, or the caller's buffer (borrowed). Every
     * initializer stored inline (raw_data) points inside [data, data + size). */
    const uint8_t *data;
    size_t size;
    struct onnx_store *store;
} onnx_model;

/* Maps the file at path (borrowed for the call) read-only and imports it. External data files
 * are mapped once each. On success *out is owned by the caller (onnx_model_free); on failure
 * *out is NULL and the last error says why. */
anvil_status onnx_load_file(const char *path, onnx_model **out);

/* Imports a model from memory. data is borrowed for the life of the model (initializers point
 * into it) and must not change. Tensors with external data are refused (no folder). */
anvil_status onnx_load_buffer(const void *data, size_t size, onnx_model **out);

/* Frees the model, its graphs and its mappings. NULL is accepted. */
void onnx_model_free(onnx_model *m);

/* Tells the model that [p, p + n) will not be read again by this process soon (a session copied
 * it into aligned storage): the whole pages it covers inside the model's own file mappings are
 * dropped from memory (they are re-read from the file if touched again). Ranges outside those
 * mappings (a caller's buffer, owned copies) are left alone. */
void onnx_model_release_pages(const onnx_model *m, const void *p, size_t n);

/* Reads a file holding one serialized TensorProto (the .pb files of the ONNX test suites) into
 * *out: dtype, dims, and out->bytes of dense data in a new buffer *owned, which the caller frees
 * with free() (out->data points to it). path is borrowed. The tensor passes the same checks as
 * a model's initializers (external data is read from the file's folder under the same rules);
 * dtypes anvil cannot hold are refused. api_tensor_read_pb (api/api.h) makes an anvil_tensor of
 * it. */
anvil_status onnx_tensor_read_pb(const char *path, ir_tensor *out, void **owned);

/* Writes g (and its subgraphs) to path as an ONNX model: the graph as it is, e.g. after the passes,
 * with anvil's own ops and nodes with fused epilogues in the domain "ai.anvil" (export.c). For
 * viewing (Netron) and inspection; anvil itself does not load the "ai.anvil" domain. IO error
 * naming the file; LIMIT when the model would pass protobuf's 2 GiB. */
anvil_status onnx_graph_write(const ir_graph *g, const char *path);

#endif
