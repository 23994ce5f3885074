/* api: internals shared by the public API implementation, the CLI and tests. Not installed. */
#ifndef ANVIL_API_INTERNAL_H
#define ANVIL_API_INTERNAL_H

#include "anvil.h"
#include "ir/ir.h"

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

struct tune_db;
/* The tuning database a session reads (and online tuning writes): path "" none, a path that
 * file (it must open), NULL the default file, read when it exists, created when `online`; a
 * default file that will not open is skipped with a warning. *db owned by the caller
 * (tune_db_close; NULL: none); fingerprint (cap bytes) set when *db is. */
anvil_status api_tuning_db_open(const char *path, bool online, struct tune_db **db,
                                char *fingerprint, size_t cap);

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

#endif
