/* A file holding one serialized TensorProto (the input_N.pb / output_N.pb files of the ONNX test
 * suites) -> a dense tensor. The TensorProto goes through the same checks as a model's
 * initializers; the bytes are then copied once into storage the caller owns, because the file
 * mapping is released before returning. */
#include "onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

anvil_status onnx_tensor_read_pb(const char *path, ir_tensor *out, void **owned) {
    if (!out || !owned)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "onnx_tensor_read_pb: out or owned is NULL");
    memset(out, 0, sizeof *out);
    *owned = NULL;
    if (!path || !*path)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "no tensor file path given (NULL or empty)");
    onnx_store *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    anvil_status s = onnx_map_file(path, "tensor file", &st->map, &st->map_size, &st->dir);
    if (s != ANVIL_OK) {
        onnx_store_free(st);
        return s;
    }
    static const uint8_t nothing[1];
    const uint8_t *data = st->map ? st->map : nothing;
    onnx_import im = {.store = st, .dir = st->dir};
    onnx_pb_ctx_init(&im.pb, data, st->map_size);
    onnx_TensorProto tp;
    memset(&tp, 0, sizeof tp);
    s = onnx_pb_decode(&im.pb, onnx_TensorProto_fields, data, st->map_size, &tp);
    if (s == ANVIL_ERR_INVALID_MODEL)
        s = core_err_prefix(ANVIL_ERR_INVALID_ARGUMENT, "'%s' is not a serialized ONNX TensorProto",
                            path);
    if (s == ANVIL_OK) {
        char what[300];
        snprintf(what, sizeof what, "tensor '%.100s' in '%.180s'", tp.name ? tp.name : "", path);
        ir_tensor t;
        s = onnx_tensor_convert(&im, &tp, what, &t);
        void *copy = s == ANVIL_OK ? malloc(t.bytes ? t.bytes : 1) : NULL;
        if (s == ANVIL_OK && !copy) s = ANVIL_ERR_OUT_OF_MEMORY;
        if (s == ANVIL_OK) {
            if (t.bytes) memcpy(copy, t.data, t.bytes);
            t.data = copy;
            *out = t;
            *owned = copy;
        }
        pb_release(onnx_TensorProto_fields, &tp);
    }
    onnx_pb_ctx_free(&im.pb);
    onnx_store_free(st);
    return s;
}
