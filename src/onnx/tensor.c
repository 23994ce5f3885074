/* TensorProto -> ir_tensor: element type, dims, and where the bytes are.
 *
 * Most exporters store weights in raw_data; those bytes stay in the input buffer and the tensor
 * points at them. Tensors in the typed fields (float_data, int32_data, ...) were collected by the
 * decode callbacks into arrays; when the array already has the tensor's layout (FLOAT in
 * float_data, INT64 in int64_data, ...) the model takes the array over, otherwise (INT8, FLOAT16,
 * BOOL, ... widened to int32_data; UINT32 in uint64_data) it is narrowed into a new buffer, with
 * every value checked to fit. Sizes are checked before anything is touched: dims against the
 * rank limit and sign, the element count and byte size against overflow and against
 * core_max_tensor_bytes(), and the payload against the byte size exactly. */
#include "onnx_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[] = {
    "UNDEFINED",      "FLOAT",    "UINT8",        "INT8",           "UINT16",
    "INT16",          "INT32",    "INT64",        "STRING",         "BOOL",
    "FLOAT16",        "DOUBLE",   "UINT32",       "UINT64",         "COMPLEX64",
    "COMPLEX128",     "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ", "UINT4",    "INT4",         "FLOAT4E2M1",     "FLOAT8E8M0",
    "UINT2",          "INT2"};

const char *onnx_dtype_name(int32_t v) {
    if (v < 0 || (size_t)v >= sizeof dtype_names / sizeof *dtype_names) return NULL;
    return dtype_names[v];
}

anvil_status onnx_dtype_check(int32_t v, const char *what, anvil_dtype *out) {
    const char *name = onnx_dtype_name(v);
    if (v == 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has no element type (UNDEFINED); set its data_type / elem_type", what);
    if (!name)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has unknown element type %" PRId32
                        "; ONNX defines 1 (FLOAT) to 26 (INT2). The file is corrupt or from a "
                        "newer ONNX than anvil knows",
                        what, v);
    if (!core_dtype_supported((anvil_dtype)v))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s has element type %s, which anvil cannot hold; anvil supports FLOAT, "
                        "FLOAT16, BFLOAT16, DOUBLE, INT8/16/32/64, UINT8/16/32/64 and BOOL. Cast "
                        "it in the exporter",
                        what, name);
    *out = (anvil_dtype)v;
    return ANVIL_OK;
}

/* "[2,3,4]" for messages; long lists are cut short. */
static const char *dims_str(const int64_t *d, size_t n, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < n && len < cap; i++) {
        if (i == IR_MAX_RANK + 2) {
            len += (size_t)snprintf(buf + len, cap - len, ",...");
            break;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? "," : "", d[i]);
    }
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

/* The typed field that holds values of dtype dt, and its name. */
static void typed_field(const onnx_TensorProto *tp, anvil_dtype dt, onnx_pb_list *field,
                        onnx_pb_kind *kind, const char **name) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT32:
        *field = tp->float_data, *kind = ONNX_PB_F32, *name = "float_data";
        return;
    case ANVIL_DTYPE_FLOAT64:
        *field = tp->double_data, *kind = ONNX_PB_F64, *name = "double_data";
        return;
    case ANVIL_DTYPE_INT64:
        *field = tp->int64_data, *kind = ONNX_PB_I64, *name = "int64_data";
        return;
    case ANVIL_DTYPE_UINT32:
    case ANVIL_DTYPE_UINT64:
        *field = tp->uint64_data, *kind = ONNX_PB_U64, *name = "uint64_data";
        return;
    default: /* INT32 and everything narrower, FLOAT16 and BFLOAT16 as their bit patterns */
        *field = tp->int32_data, *kind = ONNX_PB_I32, *name = "int32_data";
        return;
    }
}

/* Narrows an int32_data / uint64_data array into dt's layout, checking every value fits. */
static anvil_status narrow(const void *src, onnx_pb_kind kind, size_t n, anvil_dtype dt,
                           const char *what, void *dst) {
    for (size_t i = 0; i < n; i++) {
        int64_t lo, hi, v;
        if (kind == ONNX_PB_U64) {
            uint64_t u = ((const uint64_t *)src)[i];
            if (u > UINT32_MAX)
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s: uint64_data[%zu] = %" PRIu64 " does not fit UINT32", what, i,
                                u);
            ((uint32_t *)dst)[i] = (uint32_t)u;
            continue;
        }
        v = ((const int32_t *)src)[i];
        if (!core_dtype_int_range(dt, &lo, &hi))
            lo = 0, hi = UINT16_MAX; /* FLOAT16, BFLOAT16 bits */
        if (v < lo || v > hi)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: int32_data[%zu] = %" PRId64 " does not fit %s (%" PRId64
                            "..%" PRId64 ")",
                            what, i, v, anvil_dtype_name(dt), lo, hi);
        switch (anvil_dtype_size(dt)) {
        case 1:
            ((uint8_t *)dst)[i] = (uint8_t)v;
            break;
        default:
            ((uint16_t *)dst)[i] = (uint16_t)v;
            break;
        }
    }
    return ANVIL_OK;
}

/* Valid, never dereferenced address for empty tensors, so constant data is never NULL. */
static const uint64_t empty_payload;

static anvil_status typed_payload(onnx_import *im, const onnx_TensorProto *tp, ir_tensor *t,
                                  size_t numel, const char *what) {
    onnx_pb_list field;
    onnx_pb_kind kind;
    const char *fname;
    typed_field(tp, t->dtype, &field, &kind, &fname);
    size_t n;
    void *src = onnx_pb_list_take(&im->pb, field, kind, &n);
    if (n != numel) {
        free(src);
        char dbuf[96];
        if (!n)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s (%s %s) has no data: %s tensors keep their values in raw_data or "
                            "%s, and both are empty",
                            what, anvil_dtype_name(t->dtype),
                            dims_str(t->dims, (size_t)t->rank, dbuf, sizeof dbuf),
                            anvil_dtype_name(t->dtype), fname);
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: %s holds %zu values but its shape %s needs %zu; the tensor is "
                        "corrupt",
                        what, fname, n, dims_str(t->dims, (size_t)t->rank, dbuf, sizeof dbuf),
                        numel);
    }
    bool same_layout = (kind == ONNX_PB_F32 && t->dtype == ANVIL_DTYPE_FLOAT32) ||
                       (kind == ONNX_PB_F64 && t->dtype == ANVIL_DTYPE_FLOAT64) ||
                       (kind == ONNX_PB_I64 && t->dtype == ANVIL_DTYPE_INT64) ||
                       (kind == ONNX_PB_U64 && t->dtype == ANVIL_DTYPE_UINT64) ||
                       (kind == ONNX_PB_I32 && t->dtype == ANVIL_DTYPE_INT32);
    if (same_layout) {
        CORE_TRY(onnx_store_keep(im->store, src));
        t->data = src;
        return ANVIL_OK;
    }
    void *dst = core_alloc(t->bytes);
    if (!dst) {
        free(src);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    anvil_status s = narrow(src, kind, n, t->dtype, what, dst);
    free(src);
    if (s != ANVIL_OK) {
        free(dst);
        return s;
    }
    CORE_TRY(onnx_store_keep(im->store, dst));
    t->data = dst;
    return ANVIL_OK;
}

/* Names of the payload fields present, for "has both X and Y". */
static int payload_fields(const onnx_import *im, const onnx_TensorProto *tp, const char **names) {
    int k = 0;
    size_t n;
    if (tp->raw_data.count) names[k++] = "raw_data";
    if (onnx_pb_list_items(&im->pb, tp->float_data, ONNX_PB_F32, &n)) names[k++] = "float_data";
    if (onnx_pb_list_items(&im->pb, tp->int32_data, ONNX_PB_I32, &n)) names[k++] = "int32_data";
    if (onnx_pb_list_items(&im->pb, tp->int64_data, ONNX_PB_I64, &n)) names[k++] = "int64_data";
    if (onnx_pb_list_items(&im->pb, tp->double_data, ONNX_PB_F64, &n)) names[k++] = "double_data";
    if (onnx_pb_list_items(&im->pb, tp->uint64_data, ONNX_PB_U64, &n)) names[k++] = "uint64_data";
    if (tp->string_data.count) names[k++] = "string_data";
    return k;
}

anvil_status onnx_tensor_convert(onnx_import *im, const onnx_TensorProto *tp, const char *what,
                                 ir_tensor *t) {
    memset(t, 0, sizeof *t);
    char dbuf[96];
    CORE_TRY(onnx_dtype_check(tp->has_data_type ? tp->data_type : 0, what, &t->dtype));
    if (tp->dims_count > IR_MAX_RANK)
        return core_err(ANVIL_ERR_LIMIT, "%s has %u dims %s; anvil supports at most %d", what,
                        (unsigned)tp->dims_count,
                        dims_str(tp->dims, tp->dims_count, dbuf, sizeof dbuf), IR_MAX_RANK);
    t->rank = tp->dims_count;
    for (int i = 0; i < t->rank; i++) {
        if (tp->dims[i] < 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s has shape %s: dim %d is negative; a stored tensor's dims must "
                            "all be >= 0",
                            what, dims_str(tp->dims, tp->dims_count, dbuf, sizeof dbuf), i);
        t->dims[i] = tp->dims[i];
    }
    size_t numel;
    if (!core_numel(t->dims, t->rank, &numel))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has shape %s, whose element count overflows 64 bits; the file is "
                        "corrupt",
                        what, dims_str(t->dims, (size_t)t->rank, dbuf, sizeof dbuf));
    if (!core_tensor_bytes(t->dtype, t->dims, t->rank, &t->bytes))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has shape %s of %s, whose size in bytes overflows 64 bits; the file "
                        "is corrupt",
                        what, dims_str(t->dims, (size_t)t->rank, dbuf, sizeof dbuf),
                        anvil_dtype_name(t->dtype));
    if (t->bytes > core_max_tensor_bytes())
        return core_err(ANVIL_ERR_LIMIT,
                        "%s has shape %s of %s: %zu bytes, more than anvil's limit of %zu bytes "
                        "per tensor (raise it with ANVIL_MAX_TENSOR_BYTES)",
                        what, dims_str(t->dims, (size_t)t->rank, dbuf, sizeof dbuf),
                        anvil_dtype_name(t->dtype), t->bytes, core_max_tensor_bytes());
    if (tp->has_segment)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s is one segment of a larger tensor; anvil does not support segmented "
                        "tensors",
                        what);

    const char *fields[8];
    int nfields = payload_fields(im, tp, fields);
    bool external =
        tp->has_data_location && tp->data_location == onnx_TensorProto_DataLocation_EXTERNAL;
    if (tp->has_data_location && tp->data_location != onnx_TensorProto_DataLocation_DEFAULT &&
        !external)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s has data_location %d; ONNX defines 0 (DEFAULT) and 1 (EXTERNAL)", what,
                        (int)tp->data_location);
    if (external) {
        if (nfields)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s is marked EXTERNAL but also holds %s; keep one", what, fields[0]);
        return onnx_external_data(im, tp, what, t->bytes, &t->data);
    }
    if (nfields > 1)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s holds both %s and %s; keep one", what,
                        fields[0], fields[1]);
    if (tp->raw_data.count) {
        if (tp->raw_data.size != t->bytes)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: raw_data holds %zu bytes but shape %s of %s needs %zu; the "
                            "tensor is corrupt or its dims are wrong",
                            what, tp->raw_data.size,
                            dims_str(t->dims, (size_t)t->rank, dbuf, sizeof dbuf),
                            anvil_dtype_name(t->dtype), t->bytes);
        t->data = t->bytes ? (const void *)tp->raw_data.data : (const void *)&empty_payload;
        return ANVIL_OK;
    }
    if (nfields == 1 && !strcmp(fields[0], "string_data"))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s is %s but holds string_data", what,
                        anvil_dtype_name(t->dtype));
    if (numel == 0 && nfields == 0) {
        t->data = &empty_payload;
        return ANVIL_OK;
    }
    if (nfields == 1) {
        onnx_pb_list field;
        onnx_pb_kind kind;
        const char *fname;
        typed_field(tp, t->dtype, &field, &kind, &fname);
        if (strcmp(fname, fields[0]))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s is %s but holds its values in %s; %s tensors use raw_data or %s",
                            what, anvil_dtype_name(t->dtype), fields[0], anvil_dtype_name(t->dtype),
                            fname);
    }
    return typed_payload(im, tp, t, numel, what);
}
