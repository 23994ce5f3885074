/* Writes an ir graph as an ONNX model (onnx.h, onnx_graph_write), through nanopb's encoding
 * primitives: for `anvil dump --onnx`, so that Netron shows the graph a session runs.
 *
 * Every message is written by a function over a pb_ostream_t; a nested message is written twice,
 * once into a sizing stream for its length and once for real (nanopb's way: the length prefix
 * comes first). Sizing streams count bytes without copying, so a model's weights are copied once,
 * into the file.
 *
 * What is written: the graph's inputs, outputs and every other value with a known dtype as
 * ValueInfo (shapes with their symbolic dims); constants with data as initializers (raw_data,
 * little-endian as in memory; string tensors are written without data); nodes with their
 * attributes (tensor attributes, a Constant's value, as raw data too), subgraphs recursively.
 * anvil's own ops ("anvil.X") and nodes that carry a fused epilogue (their extra inputs are no ONNX
 * signature) go in the domain "ai.anvil", the latter with a string attribute "fused" that spells
 * the epilogue. */
#include "onnx.h"

#include <errno.h>
#include <pb_encode.h>
#include <stdio.h>
#include <string.h>

#define ANVIL_DOMAIN "ai.anvil"

typedef bool (*put_fn)(pb_ostream_t *s, const void *arg);

static bool put_tag(pb_ostream_t *s, pb_wire_type_t wt, uint32_t field) {
    return pb_encode_tag(s, wt, field);
}

static bool put_int(pb_ostream_t *s, uint32_t field, int64_t v) {
    return put_tag(s, PB_WT_VARINT, field) && pb_encode_varint(s, (uint64_t)v);
}

static bool put_float(pb_ostream_t *s, uint32_t field, float v) {
    return put_tag(s, PB_WT_32BIT, field) && pb_encode_fixed32(s, &v);
}

static bool put_bytes(pb_ostream_t *s, uint32_t field, const void *p, size_t n) {
    return put_tag(s, PB_WT_STRING, field) && pb_encode_string(s, (const pb_byte_t *)p, n);
}

static bool put_str(pb_ostream_t *s, uint32_t field, const char *str) {
    return put_bytes(s, field, str, strlen(str));
}

/* A nested message: its size first (from a sizing pass), then its fields. */
static bool put_msg(pb_ostream_t *s, uint32_t field, put_fn fn, const void *arg) {
    pb_ostream_t sizing = PB_OSTREAM_SIZING;
    if (!fn(&sizing, arg)) return false;
    return put_tag(s, PB_WT_STRING, field) && pb_encode_varint(s, sizing.bytes_written) &&
           fn(s, arg);
}

typedef struct shaped {
    const ir_graph *g;
    const ir_value *v;
} shaped;

typedef struct dim_arg {
    const ir_graph *g;
    const ir_shape *s;
    int d;
} dim_arg;

static bool put_dim(pb_ostream_t *s, const void *arg) {
    const dim_arg *a = arg;
    if (a->s->d[a->d] >= 0) return put_int(s, 1, a->s->d[a->d]);
    const int32_t sym = a->s->sym[a->d];
    if (sym >= 0 && sym < a->g->n_syms) return put_str(s, 2, a->g->syms[sym]);
    return true; /* an anonymous unknown dim: neither field */
}

static bool put_shape(pb_ostream_t *s, const void *arg) {
    const shaped *a = arg;
    for (int d = 0; d < a->v->shape.rank; d++) {
        const dim_arg da = {a->g, &a->v->shape, d};
        if (!put_msg(s, 1, put_dim, &da)) return false;
    }
    return true;
}

static bool put_tensor_type(pb_ostream_t *s, const void *arg) {
    const shaped *a = arg;
    return put_int(s, 1, a->v->dtype) && (a->v->shape.rank < 0 || put_msg(s, 2, put_shape, a));
}

static bool put_type(pb_ostream_t *s, const void *arg) {
    return put_msg(s, 1, put_tensor_type, arg);
}

static bool put_value_info(pb_ostream_t *s, const void *arg) {
    const shaped *a = arg;
    return put_str(s, 1, a->v->name) && put_msg(s, 2, put_type, a);
}

static bool put_initializer(pb_ostream_t *s, const void *arg) {
    const shaped *a = arg;
    for (int d = 0; d < a->v->shape.rank; d++)
        if (!put_int(s, 1, a->v->shape.d[d])) return false;
    if (!put_int(s, 2, a->v->dtype) || !put_str(s, 8, a->v->name)) return false;
    if (a->v->dtype == ANVIL_DTYPE_STRING) return true;
    return put_bytes(s, 9, a->v->data, a->v->data_bytes);
}

static bool put_graph(pb_ostream_t *s, const void *arg);

/* A tensor attribute's TensorProto (a Constant's value): dims, data type, raw data (a string
 * tensor without its data, as initializers). */
static bool put_tensor(pb_ostream_t *s, const void *arg) {
    const ir_tensor *t = arg;
    for (int d = 0; d < t->rank; d++)
        if (!put_int(s, 1, t->dims[d])) return false;
    if (!put_int(s, 2, t->dtype)) return false;
    if (t->dtype == ANVIL_DTYPE_STRING || !t->data) return true;
    return put_bytes(s, 9, t->data, t->bytes);
}

typedef struct attr_arg {
    const ir_attr *a;
} attr_arg;

static bool put_attr(pb_ostream_t *s, const void *arg) {
    const ir_attr *a = ((const attr_arg *)arg)->a;
    if (!put_str(s, 1, a->name) || !put_int(s, 20, a->type)) return false;
    switch (a->type) {
    case IR_ATTR_FLOAT:
        return put_float(s, 2, a->f);
    case IR_ATTR_INT:
        return put_int(s, 3, a->i);
    case IR_ATTR_STRING:
        return put_bytes(s, 4, a->s ? a->s : "", a->s ? a->s_len : 0);
    case IR_ATTR_FLOATS:
        for (size_t i = 0; i < a->n; i++)
            if (!put_float(s, 7, a->floats[i])) return false;
        return true;
    case IR_ATTR_INTS:
        for (size_t i = 0; i < a->n; i++)
            if (!put_int(s, 8, a->ints[i])) return false;
        return true;
    case IR_ATTR_STRINGS:
        for (size_t i = 0; i < a->n; i++)
            if (!put_str(s, 9, a->strings[i])) return false;
        return true;
    case IR_ATTR_GRAPH:
        return !a->g || put_msg(s, 6, put_graph, a->g);
    case IR_ATTR_GRAPHS:
        for (size_t i = 0; i < a->n; i++)
            if (a->graphs[i] && !put_msg(s, 11, put_graph, a->graphs[i])) return false;
        return true;
    case IR_ATTR_TENSOR:
        return !a->t || put_msg(s, 5, put_tensor, a->t);
    case IR_ATTR_TENSORS:
        for (size_t i = 0; i < a->n; i++)
            if (!put_msg(s, 10, put_tensor, &a->tensors[i])) return false;
        return true;
    default:
        return true;
    }
}

typedef struct node_arg {
    const ir_graph *g;
    const ir_node *n;
} node_arg;

/* The fused epilogue of n in words, e.g. "+bias(in2) +residual(in3) Relu". */
static void fused_words(const ir_node *n, char *buf, size_t cap) {
    const ir_fusion *f = n->fusion;
    int at = 0;
    buf[0] = '\0';
    if (f->bias >= 0) at += snprintf(buf + at, cap - (size_t)at, "+bias(in%d) ", f->bias);
    if (f->residual >= 0 && at < (int)cap)
        at += snprintf(buf + at, cap - (size_t)at, "+residual(in%d) ", f->residual);
    if (f->act != IR_ACT_NONE && at < (int)cap)
        at += snprintf(buf + at, cap - (size_t)at, "%s", ir_act_name(f->act));
    while (at > 0 && at <= (int)cap && buf[at - 1] == ' ') buf[--at] = '\0';
}

static bool put_node(pb_ostream_t *s, const void *arg) {
    const node_arg *a = arg;
    const ir_node *n = a->n;
    for (int i = 0; i < n->n_inputs; i++)
        if (!put_str(s, 1, n->inputs[i] == IR_NONE ? "" : a->g->values[n->inputs[i]].name))
            return false;
    for (int i = 0; i < n->n_outputs; i++)
        if (!put_str(s, 2, n->outputs[i] == IR_NONE ? "" : a->g->values[n->outputs[i]].name))
            return false;
    const char *op = ir_op_name(n->op);
    const bool ours = !strncmp(op, "anvil.", 6);
    if (!put_str(s, 3, n->name) || !put_str(s, 4, ours ? op + 6 : op)) return false;
    for (int i = 0; i < n->n_attrs; i++) {
        const attr_arg aa = {&n->attrs[i]};
        if (!put_msg(s, 5, put_attr, &aa)) return false;
    }
    if (n->fusion) {
        char words[128];
        fused_words(n, words, sizeof words);
        const ir_attr fa = {
            .name = "fused", .type = IR_ATTR_STRING, .s = words, .s_len = strlen(words)};
        const attr_arg aa = {&fa};
        if (!put_msg(s, 5, put_attr, &aa)) return false;
    }
    return !(ours || n->fusion) || put_str(s, 7, ANVIL_DOMAIN);
}

static bool put_graph(pb_ostream_t *s, const void *arg) {
    const ir_graph *g = arg;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const node_arg na = {g, &g->nodes[k]};
        if (!put_msg(s, 1, put_node, &na)) return false;
    }
    if (!put_str(s, 2, g->name ? g->name : "graph")) return false;
    for (int32_t v = 0; v < g->n_values; v++) {
        const shaped sh = {g, &g->values[v]};
        if ((g->values[v].flags & IR_VALUE_CONST) && g->values[v].data &&
            g->values[v].shape.rank >= 0 && !put_msg(s, 5, put_initializer, &sh))
            return false;
    }
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const shaped sh = {g, &g->values[g->inputs[i]]};
        if (!put_msg(s, 11, put_value_info, &sh)) return false;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const shaped sh = {g, &g->values[g->outputs[i]]};
        if (!put_msg(s, 12, put_value_info, &sh)) return false;
    }
    for (int32_t v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        if (val->producer < 0 || (val->flags & (IR_VALUE_CONST | IR_VALUE_GRAPH_OUTPUT)) ||
            val->dtype == ANVIL_DTYPE_UNDEFINED)
            continue;
        const shaped sh = {g, val};
        if (!put_msg(s, 13, put_value_info, &sh)) return false;
    }
    return true;
}

typedef struct opset_arg {
    const char *domain;
    int64_t version;
} opset_arg;

static bool put_opset(pb_ostream_t *s, const void *arg) {
    const opset_arg *a = arg;
    return put_str(s, 1, a->domain) && put_int(s, 2, a->version);
}

static bool put_model(pb_ostream_t *s, const void *arg) {
    const ir_graph *g = arg;
    const opset_arg onnx = {"", g->opset}, ours = {ANVIL_DOMAIN, 1};
    return put_int(s, 1, 8) && put_str(s, 2, "anvil") && put_msg(s, 7, put_graph, g) &&
           put_msg(s, 8, put_opset, &onnx) && put_msg(s, 8, put_opset, &ours);
}

static bool file_write(pb_ostream_t *s, const pb_byte_t *buf, size_t count) {
    return fwrite(buf, 1, count, (FILE *)s->state) == count;
}

anvil_status onnx_graph_write(const ir_graph *g, const char *path) {
    pb_ostream_t sizing = PB_OSTREAM_SIZING;
    if (!put_model(&sizing, g))
        return core_err(ANVIL_ERR_INTERNAL, "writing '%s': the graph could not be encoded", path);
    if (sizing.bytes_written > ONNX_MAX_PROTO_BYTES)
        return core_err(ANVIL_ERR_LIMIT,
                        "writing '%s': the model would take %zu bytes, over protobuf's 2 GiB "
                        "limit",
                        path, sizing.bytes_written);
    FILE *f = fopen(path, "wb");
    if (!f)
        return core_err(ANVIL_ERR_IO, "cannot open '%s' for writing: %s", path, strerror(errno));
    pb_ostream_t s = {.callback = file_write, .state = f, .max_size = SIZE_MAX};
    const bool ok = put_model(&s, g);
    const bool closed = fclose(f) == 0;
    if (!ok || !closed)
        return core_err(ANVIL_ERR_IO, "could not write '%s' completely (%s)", path,
                        ok ? "closing failed" : PB_GET_ERROR(&s));
    return ANVIL_OK;
}
