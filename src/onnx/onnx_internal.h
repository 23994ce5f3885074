/* Internals shared by the files of src/onnx: the decode context that owns what the nanopb
 * callbacks collect, the model's storage (mappings and owned buffers), and tensor conversion.
 * Not used outside src/onnx. */
#ifndef ANVIL_ONNX_INTERNAL_H
#define ANVIL_ONNX_INTERNAL_H

#include "onnx/onnx.h"

#include "onnx.pb.h"

#include <pb_decode.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "anvil reads ONNX raw_data (little-endian) in place and needs a little-endian host"
#endif

/* ---- decoding (decode.c) -------------------------------------------------------------------- */

/* Kinds of element an onnx_pb_list holds. */
typedef enum onnx_pb_kind {
    ONNX_PB_F32,  /* float (float_data, AttributeProto.floats) */
    ONNX_PB_F64,  /* double (double_data) */
    ONNX_PB_I32,  /* int32_t (int32_data) */
    ONNX_PB_I64,  /* int64_t (int64_data, AttributeProto.ints) */
    ONNX_PB_U64,  /* uint64_t (uint64_data) */
    ONNX_PB_SPAN, /* onnx_pb_bytes (AttributeProto.graphs: serialized subgraphs) */
    ONNX_PB_MSG   /* a generated message struct (GraphProto.node, initializer, input, output) */
} onnx_pb_kind;

/* One growable array behind an onnx_pb_list. data is malloc'd; for ONNX_PB_MSG every element
 * was fully decoded and must be pb_release'd (onnx_pb_ctx_free does). */
typedef struct onnx_pb_array {
    void *data;
    size_t n, cap, elem;
    onnx_pb_kind kind;
    const pb_msgdesc_t *msg; /* ONNX_PB_MSG only */
} onnx_pb_array;

/* The arrays of one decode context may hold at most this many bytes per input byte, plus
 * ONNX_PB_BUDGET_MIN (decode.c explains why). */
#define ONNX_PB_BUDGET_FACTOR 64
#define ONNX_PB_BUDGET_MIN ((size_t)1 << 20)

/* Owns everything the field callbacks produce while decoding messages out of one input buffer
 * (the whole serialized model or tensor). base/size are borrowed: spans recorded by callbacks
 * must lie inside them, which is how a callback knows it is looking at the input itself. */
typedef struct onnx_pb_ctx {
    const uint8_t *base;
    size_t size;
    onnx_pb_array *arrays;
    uint32_t n_arrays, cap_arrays;
    size_t budget, used; /* bytes the arrays may hold, and hold (capacity) */
    bool oom;            /* a callback failed to allocate */
    bool over_budget;    /* a callback would have exceeded the budget */
} onnx_pb_ctx;

void onnx_pb_ctx_init(onnx_pb_ctx *c, const uint8_t *base, size_t size);
/* Releases every decoded element and frees every array (not base). */
void onnx_pb_ctx_free(onnx_pb_ctx *c);

/* Decodes the message `fields` from [data, data + size), which lies inside c's buffer, into
 * *dest (caller-provided and zeroed). On success the caller pb_release's dest when done (lists
 * stay in c). On failure dest is already released and the error is INVALID_MODEL with nanopb's
 * reason (for the caller to prefix with context), LIMIT when the budget ran out, or
 * OUT_OF_MEMORY. */
anvil_status onnx_pb_decode(onnx_pb_ctx *c, const pb_msgdesc_t *fields, const uint8_t *data,
                            size_t size, void *dest);

/* The elements of a list (owned by c) and their count; NULL and 0 for an absent list or one
 * whose storage was taken. */
const void *onnx_pb_list_items(const onnx_pb_ctx *c, onnx_pb_list l, onnx_pb_kind kind, size_t *n);
/* Detaches a scalar list's storage: the caller owns the returned malloc'd array (n elements)
 * and frees it. NULL and 0 as above. */
void *onnx_pb_list_take(onnx_pb_ctx *c, onnx_pb_list l, onnx_pb_kind kind, size_t *n);

/* ---- the model's storage (store.c) --------------------------------------------------------- */

typedef struct onnx_mapping {
    char *path; /* canonical path (malloc'd) */
    void *addr; /* NULL for an empty file */
    size_t size;
} onnx_mapping;

typedef struct onnx_store {
    void *map; /* the model file mapping, NULL for buffer loads */
    size_t map_size;
    char *path, *dir;  /* onnx_model.path / dir (malloc'd), NULL for buffer loads */
    onnx_mapping *ext; /* external data files, one mapping per distinct file */
    size_t n_ext, cap_ext;
    void **owned; /* malloc'd tensor storage (typed-field tensors) */
    size_t n_owned, cap_owned;
} onnx_store;

/* Hands p (malloc'd) to the store, which frees it in onnx_store_free. On failure p is freed. */
anvil_status onnx_store_keep(onnx_store *s, void *p);
/* Maps the external data file at canonical path `real` (once per distinct file) and returns it
 * through *out (owned by the store). what names the tensor for messages. */
anvil_status onnx_store_map(onnx_store *s, const char *real, const char *what,
                            const onnx_mapping **out);
void onnx_store_free(onnx_store *s);

/* Maps a whole file read-only (what: "model", "tensor file" for messages). On success *addr /
 * *size describe the mapping (*addr NULL for an empty file; munmap it when done) and *dir is the
 * canonical folder named by the path (malloc'd; the caller frees it). */
anvil_status onnx_map_file(const char *path, const char *what, void **addr, size_t *size,
                           char **dir);
/* ---- conversion (import.c, tensor.c, external.c) ------------------------------------------- */

/* State of one import: the decode context, where tensors' storage goes, and where external
 * data may come from. */
typedef struct onnx_import {
    onnx_pb_ctx pb;
    onnx_store *store;
    const char *dir; /* canonical model folder; NULL: external data refused (memory loads) */
} onnx_import;

/* ONNX name of a TensorProto.DataType value ("FLOAT", "INT2"), or NULL if ONNX defines none. */
const char *onnx_dtype_name(int32_t v);
/* Checks an ONNX element type: unknown numbers (INVALID_MODEL) and types anvil cannot hold
 * (UNSUPPORTED) are refused naming `what`. 0 (UNDEFINED) is refused too. */
anvil_status onnx_dtype_check(int32_t v, const char *what, anvil_dtype *out);

/* Converts a TensorProto into t: dtype, dims and a pointer to its bytes (inline raw_data,
 * external file, or a model-owned buffer for the typed fields). Validates everything; what
 * names the tensor in messages ("initializer 'w'"). */
anvil_status onnx_tensor_convert(onnx_import *im, const onnx_TensorProto *tp, const char *what,
                                 ir_tensor *t);

/* Resolves a tensor's external data (data_location = EXTERNAL) to bytes inside a mapping held
 * by im->store; bytes is the tensor's size, which the stored length must equal. */
anvil_status onnx_external_data(onnx_import *im, const onnx_TensorProto *tp, const char *what,
                                size_t bytes, const void **data);

/* Imports a decoded-from-scratch model out of [data, data + size) into m (whose store, path and
 * dir are already set). On failure m->graph may be partly built; the caller frees m. */
anvil_status onnx_import_model(onnx_model *m, const uint8_t *data, size_t size);

#endif
