/* The nanopb side of the importer: the field callback named in onnx.options and the decode
 * context it fills.
 *
 * Why callbacks at all: nanopb's FT_POINTER fields would copy raw_data out of the mapping, would
 * recurse without limit through GraphProto -> NodeProto -> AttributeProto -> GraphProto, and the
 * Debian runtime counts repeated fields in 16 bits, so a graph of more than 65535 nodes or a
 * float_data of more than 65535 values could not be read. The callback instead records spans of
 * the input (raw_data, serialized subgraphs) and appends long repeated fields to arrays that
 * grow by doubling.
 *
 * Why a thread-local: nanopb hands a callback only the stream and the field, and the stream's
 * state is the read position (a buffer stream), so the context that owns the arrays cannot
 * travel with them. onnx_pb_decode publishes it for the duration of one pb_decode call on this
 * thread and restores the previous value afterwards, so separate threads and nested decodes
 * never see each other's context.
 *
 * Bounds: every element appended corresponds to at least one byte of input, but a decoded
 * struct can be far larger than its encoding (an empty AttributeProto is 2 bytes of input and a
 * 400-byte struct). The arrays here therefore draw from a budget of ONNX_PB_BUDGET_FACTOR bytes
 * per input byte (real models need well under a quarter of it), and a file that asks for more is
 * refused before memory runs out. What nanopb still allocates itself (strings, dims, a few small
 * lists) stays within a small constant factor of the input. The callback never decodes a
 * subgraph, only records where it is, so nanopb's recursion depth is fixed by the schema. */
#include "onnx_internal.h"

#include <pb_decode.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local onnx_pb_ctx *tl_ctx;

/* What each callback field of the generated messages holds. */
typedef struct field_spec {
    const pb_msgdesc_t *msg;
    pb_size_t tag;
    bool bytes; /* an onnx_pb_bytes span rather than an onnx_pb_list */
    onnx_pb_kind kind;
    const pb_msgdesc_t *elem_msg;
    size_t elem_size;
} field_spec;

#define SPAN(m, t)                                                                                 \
    { &m##_msg, t, true, ONNX_PB_SPAN, NULL, 0 }
#define LIST(m, t, k, ty)                                                                          \
    { &m##_msg, t, false, k, NULL, sizeof(ty) }
#define MSGS(m, t, em)                                                                             \
    { &m##_msg, t, false, ONNX_PB_MSG, &em##_msg, sizeof(em) }

static const field_spec field_specs[] = {
    MSGS(onnx_GraphProto, onnx_GraphProto_node_tag, onnx_NodeProto),
    MSGS(onnx_NodeProto, onnx_NodeProto_attribute_tag, onnx_AttributeProto),
    MSGS(onnx_AttributeProto, onnx_AttributeProto_tensors_tag, onnx_TensorProto),
    MSGS(onnx_GraphProto, onnx_GraphProto_initializer_tag, onnx_TensorProto),
    MSGS(onnx_GraphProto, onnx_GraphProto_input_tag, onnx_ValueInfoProto),
    MSGS(onnx_GraphProto, onnx_GraphProto_output_tag, onnx_ValueInfoProto),
    SPAN(onnx_GraphProto, onnx_GraphProto_sparse_initializer_tag),
    SPAN(onnx_AttributeProto, onnx_AttributeProto_g_tag),
    LIST(onnx_AttributeProto, onnx_AttributeProto_graphs_tag, ONNX_PB_SPAN, onnx_pb_bytes),
    LIST(onnx_AttributeProto, onnx_AttributeProto_floats_tag, ONNX_PB_F32, float),
    LIST(onnx_AttributeProto, onnx_AttributeProto_ints_tag, ONNX_PB_I64, int64_t),
    SPAN(onnx_AttributeProto, onnx_AttributeProto_tp_tag),
    SPAN(onnx_AttributeProto, onnx_AttributeProto_type_protos_tag),
    SPAN(onnx_AttributeProto, onnx_AttributeProto_sparse_tensor_tag),
    SPAN(onnx_AttributeProto, onnx_AttributeProto_sparse_tensors_tag),
    SPAN(onnx_TensorProto, onnx_TensorProto_raw_data_tag),
    SPAN(onnx_TensorProto, onnx_TensorProto_string_data_tag),
    LIST(onnx_TensorProto, onnx_TensorProto_float_data_tag, ONNX_PB_F32, float),
    LIST(onnx_TensorProto, onnx_TensorProto_int32_data_tag, ONNX_PB_I32, int32_t),
    LIST(onnx_TensorProto, onnx_TensorProto_int64_data_tag, ONNX_PB_I64, int64_t),
    LIST(onnx_TensorProto, onnx_TensorProto_double_data_tag, ONNX_PB_F64, double),
    LIST(onnx_TensorProto, onnx_TensorProto_uint64_data_tag, ONNX_PB_U64, uint64_t),
};

static const field_spec *spec_find(const pb_msgdesc_t *msg, pb_size_t tag) {
    for (size_t i = 0; i < sizeof field_specs / sizeof *field_specs; i++)
        if (field_specs[i].msg == msg && field_specs[i].tag == tag) return &field_specs[i];
    return NULL;
}

void onnx_pb_ctx_init(onnx_pb_ctx *c, const uint8_t *base, size_t size) {
    memset(c, 0, sizeof *c);
    c->base = base;
    c->size = size;
    if (!core_mul_size(size, ONNX_PB_BUDGET_FACTOR, &c->budget) ||
        !core_add_size(c->budget, ONNX_PB_BUDGET_MIN, &c->budget))
        c->budget = SIZE_MAX;
}

/* Takes `bytes` from the budget; false (with c->over_budget set) if it is exhausted. */
static bool budget_take(onnx_pb_ctx *c, size_t bytes) {
    if (bytes > c->budget - c->used) {
        c->over_budget = true;
        return false;
    }
    c->used += bytes;
    return true;
}

void onnx_pb_ctx_free(onnx_pb_ctx *c) {
    for (uint32_t i = 0; i < c->n_arrays; i++) {
        onnx_pb_array *a = &c->arrays[i];
        if (a->kind == ONNX_PB_MSG && a->data)
            for (size_t k = 0; k < a->n; k++) pb_release(a->msg, (char *)a->data + k * a->elem);
        free(a->data);
    }
    free(c->arrays);
    memset(c, 0, sizeof *c);
}

/* The array behind *l, created on first use. NULL on allocation failure. The returned pointer
 * is valid until the next call (the table of arrays may move). */
static onnx_pb_array *list_array(onnx_pb_ctx *c, onnx_pb_list *l, const field_spec *sp) {
    if (l->slot) {
        if (l->slot > c->n_arrays) return NULL;
        return &c->arrays[l->slot - 1];
    }
    if (c->n_arrays == c->cap_arrays) {
        if (c->cap_arrays >= UINT32_MAX / 2) return NULL;
        uint32_t cap = c->cap_arrays ? c->cap_arrays * 2 : 64;
        if (!budget_take(c, (size_t)(cap - c->cap_arrays) * sizeof(onnx_pb_array))) return NULL;
        onnx_pb_array *p = realloc(c->arrays, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        c->arrays = p;
        c->cap_arrays = cap;
    }
    onnx_pb_array *a = &c->arrays[c->n_arrays++];
    memset(a, 0, sizeof *a);
    a->kind = sp->kind;
    a->elem = sp->elem_size;
    a->msg = sp->elem_msg;
    l->slot = c->n_arrays;
    return a;
}

/* Makes room for `more` elements; false on overflow, budget exhaustion or allocation failure.
 * Growth doubles from a single element, so a one-element list costs one element. */
static bool array_reserve(onnx_pb_ctx *c, onnx_pb_array *a, size_t more) {
    size_t need;
    if (!core_add_size(a->n, more, &need)) return false;
    if (need <= a->cap) return true;
    size_t cap = a->cap ? a->cap : 1;
    while (cap < need)
        if (!core_mul_size(cap, 2, &cap)) return false;
    size_t bytes;
    if (!core_mul_size(cap, a->elem, &bytes)) return false;
    if (!budget_take(c, bytes - a->cap * a->elem)) return false;
    void *p = realloc(a->data, bytes);
    if (!p) return false;
    a->data = p;
    a->cap = cap;
    return true;
}

/* Ends decoding after a failed allocation or reservation. */
static bool fail_oom(pb_istream_t *s) {
    if (tl_ctx->over_budget) PB_RETURN_ERROR(s, "memory budget exceeded");
    tl_ctx->oom = true;
    PB_RETURN_ERROR(s, "out of memory");
}

/* Reads every scalar in the stream (one for an unpacked element, all of them for a packed run)
 * and appends them. */
static bool decode_scalars(pb_istream_t *s, onnx_pb_array *a) {
    if (a->kind == ONNX_PB_F32 || a->kind == ONNX_PB_F64) {
        size_t w = a->kind == ONNX_PB_F32 ? 4 : 8;
        if (s->bytes_left % w) PB_RETURN_ERROR(s, "truncated fixed-size value");
        if (!array_reserve(tl_ctx, a, s->bytes_left / w)) return fail_oom(s);
    }
    while (s->bytes_left) {
        if (!array_reserve(tl_ctx, a, 1)) return fail_oom(s);
        char *dst = (char *)a->data + a->n * a->elem;
        uint64_t v;
        switch (a->kind) {
        case ONNX_PB_F32:
            if (!pb_decode_fixed32(s, dst)) return false;
            break;
        case ONNX_PB_F64:
            if (!pb_decode_fixed64(s, dst)) return false;
            break;
        case ONNX_PB_I32: {
            if (!pb_decode_varint(s, &v)) return false;
            /* protobuf writes a negative int32 as the sign-extended 64-bit varint */
            int32_t x = (int32_t)(uint32_t)v;
            memcpy(dst, &x, sizeof x);
            break;
        }
        case ONNX_PB_I64: {
            if (!pb_decode_varint(s, &v)) return false;
            int64_t x = (int64_t)v;
            memcpy(dst, &x, sizeof x);
            break;
        }
        case ONNX_PB_U64:
            if (!pb_decode_varint(s, &v)) return false;
            memcpy(dst, &v, sizeof v);
            break;
        default:
            PB_RETURN_ERROR(s, "internal: not a scalar list");
        }
        a->n++;
    }
    return true;
}

/* The stream is a length-delimited field of the input iff its read position lies in the input
 * buffer: nanopb copies a field sent with a scalar wire type to a small stack buffer first. */
static bool span_of(pb_istream_t *s, onnx_pb_bytes *out) {
    const uint8_t *p = s->state;
    const onnx_pb_ctx *c = tl_ctx;
    if (!p || p < c->base || (size_t)(p - c->base) > c->size ||
        s->bytes_left > c->size - (size_t)(p - c->base))
        PB_RETURN_ERROR(s, "wrong wire type for a bytes or message field");
    out->data = p;
    out->size = s->bytes_left;
    if (out->count < UINT32_MAX) out->count++;
    return pb_read(s, NULL, s->bytes_left);
}

bool onnx_pb_callback(pb_istream_t *istream, pb_ostream_t *ostream, const pb_field_t *field) {
    (void)ostream;
    if (!istream) return true; /* anvil never encodes these messages */
    if (!tl_ctx) PB_RETURN_ERROR(istream, "internal: decode without a context");
    const field_spec *sp = spec_find(field->descriptor, field->tag);
    if (!sp) PB_RETURN_ERROR(istream, "internal: unexpected callback field");
    if (sp->bytes) return span_of(istream, field->pData);

    onnx_pb_ctx *c = tl_ctx;
    onnx_pb_list *l = field->pData;
    onnx_pb_array *a = list_array(c, l, sp);
    if (!a) return fail_oom(istream);
    if (a->kind != sp->kind || a->msg != sp->elem_msg)
        PB_RETURN_ERROR(istream, "internal: list slot reused for another field");
    switch (sp->kind) {
    case ONNX_PB_SPAN: {
        onnx_pb_bytes span = {0};
        if (!span_of(istream, &span)) return false;
        a = &c->arrays[l->slot - 1];
        if (!array_reserve(c, a, 1)) return fail_oom(istream);
        ((onnx_pb_bytes *)a->data)[a->n++] = span;
        return true;
    }
    case ONNX_PB_MSG: {
        if (!array_reserve(c, a, 1)) return fail_oom(istream);
        void *elem = (char *)a->data + a->n * a->elem;
        memset(elem, 0, a->elem);
        /* Decoding the element may create further arrays (its own lists), which can move the
         * table of arrays but not this array's storage; re-find the array afterwards. */
        uint32_t slot = l->slot;
        if (!pb_decode(istream, sp->elem_msg, elem)) return false;
        c->arrays[slot - 1].n++;
        return true;
    }
    default:
        return decode_scalars(istream, a);
    }
}

anvil_status onnx_pb_decode(onnx_pb_ctx *c, const pb_msgdesc_t *fields, const uint8_t *data,
                            size_t size, void *dest) {
    pb_istream_t s = pb_istream_from_buffer(data, size);
    onnx_pb_ctx *prev = tl_ctx;
    tl_ctx = c;
    c->oom = false;
    bool ok = pb_decode(&s, fields, dest);
    tl_ctx = prev;
    if (ok) return ANVIL_OK;
    if (c->oom) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory decoding the protobuf");
    if (c->over_budget)
        return core_err(ANVIL_ERR_LIMIT,
                        "the protobuf's %zu bytes decode to more than %d times their size (e.g. "
                        "millions of empty entries); a real ONNX model never does, so it is "
                        "refused before memory runs out",
                        c->size, ONNX_PB_BUDGET_FACTOR);
    return core_err(ANVIL_ERR_INVALID_MODEL, "protobuf decoding failed (%s)", PB_GET_ERROR(&s));
}

static onnx_pb_array *array_of(const onnx_pb_ctx *c, onnx_pb_list l, onnx_pb_kind kind) {
    if (!l.slot || l.slot > c->n_arrays) return NULL;
    onnx_pb_array *a = &c->arrays[l.slot - 1];
    return a->kind == kind ? a : NULL;
}

const void *onnx_pb_list_items(const onnx_pb_ctx *c, onnx_pb_list l, onnx_pb_kind kind, size_t *n) {
    const onnx_pb_array *a = array_of(c, l, kind);
    *n = a && a->data ? a->n : 0;
    return *n ? a->data : NULL;
}

void *onnx_pb_list_take(onnx_pb_ctx *c, onnx_pb_list l, onnx_pb_kind kind, size_t *n) {
    onnx_pb_array *a = array_of(c, l, kind);
    *n = 0;
    if (!a || !a->data || kind == ONNX_PB_MSG) return NULL;
    void *p = a->data;
    *n = a->n;
    a->data = NULL;
    a->n = a->cap = 0;
    return p;
}
