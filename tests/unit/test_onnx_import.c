/* onnx importer: a valid model with every initializer storage form (values, dtypes, symbolic
 * dims, attributes, zero-copy raw_data), subgraphs and outer-scope values, external data, memory
 * loads, the bad-model corpus at the importer level, every truncation and many corruptions of a
 * valid file, nesting far beyond the depth limit, and lists longer than nanopb's 16-bit counts.
 *
 * Expected values come from the generator (tests/bad_models/gen_bad_models.py) or from protobuf
 * bytes written here by hand, never from the importer itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "onnx/onnx_internal.h"
#include "api/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------------------------- */

static const char *src_dir(void) {
    const char *d = getenv("ANVIL_SOURCE_DIR");
    return d ? d : ".";
}

static char *data_path(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/%s", src_dir(), rel);
    return buf;
}

static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return p;
}

static const ir_value *value(const ir_graph *g, const char *name) {
    ir_vid v = ir_graph_find_value(g, name);
    if (v == IR_NONE) fail_msg("value '%s' missing", name);
    return &g->values[v];
}

static bool inside(const void *p, size_t n, const void *base, size_t size) {
    const uint8_t *a = p, *b = base;
    return a >= b && n <= size && (size_t)(a - b) <= size - n;
}

static float f32_at(const void *p, size_t i) {
    float f;
    memcpy(&f, (const uint8_t *)p + i * 4, 4);
    return f;
}

static int64_t i64_at(const void *p, size_t i) {
    int64_t v;
    memcpy(&v, (const uint8_t *)p + i * 8, 8);
    return v;
}

static const ir_attr *attr(const ir_node *n, const char *name) {
    const ir_attr *a = ir_node_attr(n, name);
    if (!a) fail_msg("%s has no attribute '%s'", n->name, name);
    return a;
}

/* A tiny protobuf writer for hand-made test inputs (wire format only; no schema). */
typedef struct pbw {
    uint8_t *p;
    size_t n, cap;
} pbw;

static void w_raw(pbw *w, const void *d, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 64;
        w->p = realloc(w->p, w->cap);
        assert_non_null(w->p);
    }
    if (n) memcpy(w->p + w->n, d, n);
    w->n += n;
}

static void w_varint(pbw *w, uint64_t v) {
    uint8_t b[10];
    int k = 0;
    do {
        b[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) b[k] |= 0x80;
        k++;
    } while (v);
    w_raw(w, b, (size_t)k);
}

static void w_int(pbw *w, int field, uint64_t v) {
    w_varint(w, (uint64_t)field << 3);
    w_varint(w, v);
}

static void w_bytes(pbw *w, int field, const void *d, size_t n) {
    w_varint(w, (uint64_t)field << 3 | 2);
    w_varint(w, n);
    w_raw(w, d, n);
}

static void w_str(pbw *w, int field, const char *s) {
    w_bytes(w, field, s, strlen(s));
}

static void w_msg(pbw *w, int field, pbw *m) {
    w_bytes(w, field, m->p, m->n);
    free(m->p);
    memset(m, 0, sizeof *m);
}

/* ModelProto { ir_version ir, opset_import { "" opset }, graph }; consumes graph. */
static void w_model_version(pbw *out, pbw *graph, int ir, int opset) {
    pbw op = {0};
    w_str(&op, 1, "");
    w_int(&op, 2, (uint64_t)opset);
    w_int(out, 1, (uint64_t)ir);
    w_msg(out, 8, &op);
    w_msg(out, 7, graph);
}

/* ModelProto { ir_version 8, opset_import { "" 17 }, graph }; consumes graph. */
static void w_model(pbw *out, pbw *graph) {
    w_model_version(out, graph, 8, 17);
}

/* ValueInfoProto name with tensor type FLOAT [d0]. */
static void w_input(pbw *graph, int field, const char *name, int64_t d0) {
    pbw dim = {0}, shape = {0}, tt = {0}, tp = {0}, vi = {0};
    w_int(&dim, 1, (uint64_t)d0);
    w_msg(&shape, 1, &dim);
    w_int(&tt, 1, 1);
    w_msg(&tt, 2, &shape);
    w_msg(&tp, 1, &tt);
    w_str(&vi, 1, name);
    w_msg(&vi, 2, &tp);
    w_msg(graph, field, &vi);
}

static anvil_status load_bytes(const pbw *w, onnx_model **m) {
    return onnx_load_buffer(w->p, w->n, m);
}

/* ---- the valid model --------------------------------------------------------------------------
 */

static void test_small_model(void **state) {
    (void)state;
    onnx_model *m;
    anvil_status s = onnx_load_file(data_path("unit/data/onnx_small.onnx"), &m);
    assert_int_equal(s, ANVIL_OK);
    assert_int_equal(m->ir_version, 8);
    assert_int_equal(m->opset, 17);
    assert_string_equal(m->producer_name, "anvil-gen");
    assert_string_equal(m->producer_version, "1");
    assert_non_null(strstr(m->path, "onnx_small.onnx"));
    assert_true(m->dir[0] == '/');
    const ir_graph *g = m->graph;
    assert_string_equal(g->name, "small");
    assert_int_equal(g->opset, 17);

    /* W is listed as an input too (IR < 4 style) but is a constant */
    assert_int_equal(g->n_inputs, 1);
    const ir_value *x = &g->values[g->inputs[0]];
    assert_string_equal(x->name, "X");
    assert_int_equal(x->dtype, ANVIL_DTYPE_FLOAT32);
    assert_true(x->flags & IR_VALUE_GRAPH_INPUT);
    assert_int_equal(x->shape.rank, 4);
    assert_int_equal(x->shape.d[0], IR_DIM_UNKNOWN);
    assert_true(x->shape.sym[0] >= 0);
    assert_string_equal(g->syms[x->shape.sym[0]], "N");
    assert_int_equal(x->shape.d[1], 3);
    assert_int_equal(x->shape.d[3], 4);

    /* raw_data: zero copy, points into the file mapping */
    const ir_value *w = value(g, "W");
    assert_int_equal(w->flags, IR_VALUE_CONST);
    assert_int_equal(w->dtype, ANVIL_DTYPE_FLOAT32);
    int64_t wd[] = {2, 3, 3, 3};
    assert_int_equal(w->shape.rank, 4);
    assert_memory_equal(w->shape.d, wd, sizeof wd);
    assert_int_equal(w->data_bytes, 54 * 4);
    assert_true(inside(w->data, w->data_bytes, m->data, m->size));
    for (int i = 0; i < 54; i++) assert_true(f32_at(w->data, (size_t)i) == (float)i / 8);
    assert_int_equal(w->producer, -1);

    /* typed fields: copied into model-owned storage */
    const ir_value *b = value(g, "B");
    assert_false(inside(b->data, b->data_bytes, m->data, m->size));
    assert_int_equal(b->data_bytes, 8);
    assert_true(f32_at(b->data, 0) == 0.5f && f32_at(b->data, 1) == -1.5f);
    const ir_value *sv = value(g, "S");
    assert_int_equal(sv->dtype, ANVIL_DTYPE_INT64);
    assert_true(i64_at(sv->data, 0) == 0 && i64_at(sv->data, 1) == -1);
    const ir_value *h = value(g, "H");
    assert_int_equal(h->dtype, ANVIL_DTYPE_FLOAT16);
    assert_int_equal(h->data_bytes, 6);
    const uint16_t hbits[] = {0x3C00, 0xC000, 0x3800}; /* 1.0, -2.0, 0.5 */
    assert_memory_equal(h->data, hbits, sizeof hbits);
    const ir_value *fl = value(g, "F");
    assert_int_equal(fl->dtype, ANVIL_DTYPE_BOOL);
    const uint8_t fbits[] = {1, 0};
    assert_memory_equal(fl->data, fbits, 2);
    const ir_value *pads = value(g, "pads");
    assert_true(inside(pads->data, pads->data_bytes, m->data, m->size));
    assert_true(i64_at(pads->data, 2) == 1 && i64_at(pads->data, 3) == 1);

    /* nodes */
    assert_int_equal(g->n_nodes, 6);
    const ir_node *conv = &g->nodes[0];
    assert_string_equal(conv->name, "conv");
    assert_int_equal(conv->op, IR_OP_CONV);
    assert_int_equal(conv->opset, 17);
    assert_int_equal(conv->n_inputs, 3);
    assert_int_equal(conv->inputs[0], ir_graph_find_value(g, "X"));
    assert_int_equal(conv->inputs[1], ir_graph_find_value(g, "W"));
    assert_int_equal(conv->inputs[2], ir_graph_find_value(g, "B"));
    assert_int_equal(value(g, "c")->producer, 0);
    const ir_attr *ks = attr(conv, "kernel_shape");
    assert_int_equal(ks->type, IR_ATTR_INTS);
    assert_int_equal(ks->n, 2);
    assert_true(ks->ints[0] == 3 && ks->ints[1] == 3);
    assert_int_equal(attr(conv, "pads")->n, 4);
    assert_int_equal(attr(conv, "group")->type, IR_ATTR_INT);
    assert_int_equal(attr(conv, "group")->i, 1);

    const ir_node *lrelu = &g->nodes[1];
    assert_string_equal(lrelu->name, "LeakyRelu_1"); /* unnamed: "<OpType>_<index>" */
    assert_int_equal(lrelu->op, IR_OP_LEAKYRELU);
    assert_int_equal(attr(lrelu, "alpha")->type, IR_ATTR_FLOAT);
    assert_true(attr(lrelu, "alpha")->f == 0.25f);

    const ir_node *pad = &g->nodes[2];
    assert_int_equal(pad->op, IR_OP_PAD);
    assert_int_equal(pad->n_inputs, 3);
    assert_int_equal(pad->inputs[2], IR_NONE); /* "" = omitted optional input */
    const ir_attr *mode = attr(pad, "mode");
    assert_int_equal(mode->type, IR_ATTR_STRING);
    assert_string_equal(mode->s, "reflect");
    assert_int_equal(mode->s_len, 7);

    const ir_node *cst = &g->nodes[4];
    assert_int_equal(cst->op, IR_OP_CONSTANT);
    assert_int_equal(cst->n_inputs, 0);
    const ir_attr *val = attr(cst, "value");
    assert_int_equal(val->type, IR_ATTR_TENSOR);
    assert_int_equal(val->t->dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(val->t->rank, 1);
    assert_int_equal(val->t->dims[0], 2);
    assert_true(inside(val->t->data, val->t->bytes, m->data, m->size));
    assert_true(f32_at(val->t->data, 0) == 3.0f && f32_at(val->t->data, 1) == 4.0f);
    assert_int_equal(value(g, "K")->producer, 4);

    /* outputs carry their declared types, symbolic dims shared with the input's */
    assert_int_equal(g->n_outputs, 3);
    const ir_value *y = &g->values[g->outputs[0]];
    assert_string_equal(y->name, "Y");
    assert_true(y->flags & IR_VALUE_GRAPH_OUTPUT);
    assert_int_equal(y->dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(y->shape.rank, 2);
    assert_int_equal(y->shape.sym[0], x->shape.sym[0]);
    assert_int_equal(y->shape.d[1], IR_DIM_UNKNOWN);
    assert_int_equal(y->shape.sym[1], -1);
    assert_int_equal(y->producer, 3);
    assert_int_equal(g->values[g->outputs[2]].dtype, ANVIL_DTYPE_FLOAT16);
    onnx_model_free(m);
}

static void test_subgraphs(void **state) {
    (void)state;
    onnx_model *m;
    assert_int_equal(onnx_load_file(data_path("unit/data/onnx_subgraph.onnx"), &m), ANVIL_OK);
    const ir_graph *g = m->graph;
    assert_int_equal(g->n_nodes, 1);
    const ir_node *holder = &g->nodes[0];
    const ir_attr *body = attr(holder, "body");
    assert_int_equal(body->type, IR_ATTR_GRAPH);
    const ir_graph *mid = body->g;
    assert_non_null(mid);
    assert_ptr_equal(mid->parent, g);
    assert_int_equal(mid->depth, 1);
    assert_string_equal(mid->name, "middle");
    const ir_value *mx = value(mid, "X");
    assert_int_equal(mx->flags, IR_VALUE_OUTER);
    assert_int_equal(mx->dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(mx->shape.rank, 2);
    assert_string_equal(mid->syms[mx->shape.sym[0]], "N"); /* re-interned in the subgraph */
    assert_int_equal(mid->n_nodes, 2);
    assert_int_equal(mid->nodes[0].inputs[0], ir_graph_find_value(mid, "X"));
    assert_int_equal(mid->n_outputs, 1);

    const ir_graph *inner = attr(&mid->nodes[1], "body")->g;
    assert_int_equal(inner->depth, 2);
    assert_ptr_equal(inner->parent, mid);
    assert_int_equal(value(inner, "X")->flags, IR_VALUE_OUTER);
    assert_int_equal(value(inner, "t")->flags, IR_VALUE_OUTER);
    assert_int_equal(inner->nodes[0].op, IR_OP_ADD);

    const ir_attr *br = attr(holder, "branches");
    assert_int_equal(br->type, IR_ATTR_GRAPHS);
    assert_int_equal(br->n, 2);
    assert_true(br->graphs[0] != br->graphs[1]);
    assert_int_equal(br->graphs[1]->nodes[0].op, IR_OP_NEG);
    assert_int_equal(g->n_children, 3);
    onnx_model_free(m);
}

static void test_external_data(void **state) {
    (void)state;
    onnx_model *m;
    assert_int_equal(onnx_load_file(data_path("unit/data/onnx_external/model.onnx"), &m), ANVIL_OK);
    const onnx_store *st = m->store;
    assert_int_equal(st->n_ext, 1); /* two tensors, one file, one mapping */
    const ir_value *a = value(m->graph, "A"), *b = value(m->graph, "B");
    assert_true(inside(a->data, 16, st->ext[0].addr, st->ext[0].size));
    assert_true(inside(b->data, 8, st->ext[0].addr, st->ext[0].size));
    for (int i = 0; i < 4; i++) assert_true(f32_at(a->data, (size_t)i) == (float)(i + 1));
    assert_true(f32_at(b->data, 0) == 5.0f && f32_at(b->data, 1) == 6.0f);
    onnx_model_free(m);

    /* the same model from memory has no folder: refused */
    size_t n;
    uint8_t *buf = read_file(data_path("unit/data/onnx_external/model.onnx"), &n);
    assert_int_equal(onnx_load_buffer(buf, n, &m), ANVIL_ERR_INVALID_ARGUMENT);
    assert_null(m);
    assert_non_null(strstr(core_err_message(), "initializer 'A'"));
    free(buf);
}

static void test_buffer_load(void **state) {
    (void)state;
    size_t n;
    uint8_t *buf = read_file(data_path("unit/data/onnx_small.onnx"), &n);
    onnx_model *m;
    assert_int_equal(onnx_load_buffer(buf, n, &m), ANVIL_OK);
    assert_ptr_equal(m->data, buf);
    assert_string_equal(m->path, "");
    const ir_value *w = value(m->graph, "W");
    assert_true(inside(w->data, w->data_bytes, buf, n));
    onnx_model_free(m);
    assert_int_equal(onnx_load_buffer(buf, 0, &m), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(core_err_message(), "empty"));
    assert_int_equal(onnx_load_buffer(NULL, 5, &m), ANVIL_ERR_INVALID_ARGUMENT);
    /* protobuf's 2 GiB limit is checked before a byte is read */
    assert_int_equal(onnx_load_buffer(buf, (size_t)INT32_MAX + 1, &m), ANVIL_ERR_LIMIT);
    assert_non_null(strstr(core_err_message(), "limited to 2 GiB"));
    char big[] = "/tmp/anvil_onnx_big_XXXXXX";
    int fd = mkstemp(big);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)INT32_MAX + 1), 0); /* sparse: no disk used */
    close(fd);
    assert_int_equal(onnx_load_file(big, &m), ANVIL_ERR_LIMIT);
    unlink(big);
    char empty[] = "/tmp/anvil_onnx_empty_XXXXXX";
    fd = mkstemp(empty);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(onnx_load_file(empty, &m), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(core_err_message(), "not an ONNX model"));
    unlink(empty);
    assert_int_equal(onnx_load_file(data_path("unit/data/no_such_model.onnx"), &m), ANVIL_ERR_IO);
    assert_non_null(strstr(core_err_message(), "no_such_model.onnx"));
    free(buf);
}

/* ---- the bad-model corpus, at the importer level ----------------------------------------------
 */

/* Rows the importer lets through on purpose: a later layer (verifier, op checks, runtime)
 * rejects them, and tests/unit/test_bad_models.c checks that through the public API. */
static bool later_layer(const char *file, const char *stage) {
    return !strcmp(stage, "run") || !strcmp(file, "cycle.onnx") ||
           !strcmp(file, "attr_wrong_type.onnx") || !strcmp(file, "dequantize_zero_scale.onnx") ||
           !strcmp(file, "qlinearconv_nan_scale.onnx");
}

static void test_bad_corpus(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/bad_models/manifest.tsv", src_dir());
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[2048];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        char *cols[5] = {0};
        char *p = line;
        for (int i = 0; i < 5 && p; i++) {
            cols[i] = p;
            p = strchr(p, '\t');
            if (p) *p++ = '\0';
        }
        assert_non_null(cols[3]);
        snprintf(path, sizeof path, "%s/tests/bad_models/%s", src_dir(), cols[0]);
        onnx_model *m;
        anvil_status s = onnx_load_file(path, &m);
        if (later_layer(cols[0], cols[3])) {
            if (s != ANVIL_OK) fail_msg("%s: importer refused it: %s", cols[0], core_err_message());
            onnx_model_free(m);
        } else {
            if (strcmp(anvil_status_name(s), cols[1]))
                fail_msg("%s: got %s (%s), want %s", cols[0], anvil_status_name(s),
                         core_err_message(), cols[1]);
            if (!strstr(core_err_message(), cols[2]))
                fail_msg("%s: message '%s' lacks '%s'", cols[0], core_err_message(), cols[2]);
            assert_null(m);
        }
        rows++;
    }
    fclose(f);
    assert_true(rows >= 26);
}

/* ---- robustness -------------------------------------------------------------------------------
 */

static void test_truncations_and_corruptions(void **state) {
    (void)state;
    size_t n;
    uint8_t *good = read_file(data_path("unit/data/onnx_small.onnx"), &n);
    /* every proper prefix fails cleanly (the last field, opset_import, is needed) */
    for (size_t len = 0; len < n; len++) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, good, len);
        onnx_model *m;
        anvil_status s = onnx_load_buffer(cut, len, &m);
        if (s == ANVIL_OK) fail_msg("prefix of %zu bytes loaded", len);
        assert_null(m);
        free(cut);
    }
    /* corruptions: any status, no crash, no leak (ASan) */
    uint8_t *bad = malloc(n);
    uint32_t rng = 12345;
    int loaded = 0;
    for (int round = 0; round < 4000; round++) {
        memcpy(bad, good, n);
        int flips = 1 + round % 4;
        for (int k = 0; k < flips; k++) {
            rng = rng * 1664525u + 1013904223u;
            size_t at = (rng >> 8) % n;
            rng = rng * 1664525u + 1013904223u;
            bad[at] = round % 3 ? (uint8_t)(bad[at] ^ (1u << (rng >> 29))) : (uint8_t)(rng >> 24);
        }
        onnx_model *m;
        if (onnx_load_buffer(bad, n, &m) == ANVIL_OK) {
            loaded++;
            onnx_model_free(m);
        }
    }
    assert_true(loaded < 4000);
    free(bad);
    free(good);
}

/* Writes a message nested `levels` deep back to front (each level wraps the previous), so the
 * cost stays linear. make_level prepends one level around [*pos, end). */
typedef void (*level_fn)(uint8_t *buf, size_t *pos, size_t end);

static void prepend(uint8_t *buf, size_t *pos, const void *d, size_t n) {
    assert_true(*pos >= n);
    *pos -= n;
    memcpy(buf + *pos, d, n);
}

static void prepend_varint(uint8_t *buf, size_t *pos, uint64_t v) {
    pbw w = {0};
    w_varint(&w, v);
    prepend(buf, pos, w.p, w.n);
    free(w.p);
}

/* Makes [*pos, end) field `field` (length-delimited) of a new message. */
static void prepend_wrap(uint8_t *buf, size_t *pos, size_t end, int field) {
    prepend_varint(buf, pos, end - *pos);
    prepend_varint(buf, pos, (uint64_t)field << 3 | 2);
}

static const char *deep_op = "Identity";

/* GraphProto{ node { op_type, attribute { name "g", type GRAPH, g = <previous> } } } */
static void graph_level(uint8_t *buf, size_t *pos, size_t end) {
    prepend_wrap(buf, pos, end, 6);                                   /* AttributeProto.g */
    const uint8_t type_graph[] = {0xA0, 0x01, 5, 1 << 3 | 2, 1, 'g'}; /* type 20, name */
    prepend(buf, pos, type_graph, sizeof type_graph);
    prepend_wrap(buf, pos, end, 5); /* NodeProto.attribute */
    size_t len = strlen(deep_op);
    prepend(buf, pos, deep_op, len);
    prepend_varint(buf, pos, len);
    prepend_varint(buf, pos, 4 << 3 | 2); /* NodeProto.op_type */
    prepend_wrap(buf, pos, end, 1);       /* GraphProto.node */
}

/* TypeProto{ sequence_type { elem_type = <previous> } } */
static void type_level(uint8_t *buf, size_t *pos, size_t end) {
    prepend_wrap(buf, pos, end, 1); /* Sequence.elem_type */
    prepend_wrap(buf, pos, end, 4); /* TypeProto.sequence_type */
}

static anvil_status load_nested(int levels, level_fn level, bool as_type, char *msg, size_t cap) {
    size_t cap_bytes = (size_t)levels * 48 + 256;
    uint8_t *buf = malloc(cap_bytes);
    size_t end = cap_bytes, pos = end;
    if (as_type) {
        const uint8_t tensor_float[] = {1 << 3 | 2, 2, 1 << 3, 1}; /* tensor_type{elem_type 1} */
        prepend(buf, &pos, tensor_float, sizeof tensor_float);
    }
    for (int i = 0; i < levels; i++) level(buf, &pos, end);
    pbw g = {0}, model = {0};
    if (as_type) { /* GraphProto{ input { name "x", type = <nest> } } */
        pbw vi = {0};
        w_str(&vi, 1, "x");
        w_bytes(&vi, 2, buf + pos, end - pos);
        w_msg(&g, 11, &vi);
    } else {
        w_raw(&g, buf + pos, end - pos);
    }
    free(buf);
    w_model(&model, &g);
    onnx_model *m;
    anvil_status s = load_bytes(&model, &m);
    snprintf(msg, cap, "%s", core_err_message());
    onnx_model_free(m);
    free(model.p);
    return s;
}

static void test_deep_nesting(void **state) {
    (void)state;
    char msg[2048];
    /* far past the limit: built graph by graph (a known op) and scanned (an unknown one) */
    deep_op = "Identity";
    anvil_status s = load_nested(100000, graph_level, false, msg, sizeof msg);
    if (s != ANVIL_ERR_LIMIT) fail_msg("%s: %s", anvil_status_name(s), msg);
    assert_non_null(strstr(msg, "nested more than 32 deep"));
    deep_op = "If";
    assert_int_equal(load_nested(100000, graph_level, false, msg, sizeof msg), ANVIL_ERR_LIMIT);
    assert_non_null(strstr(msg, "nested more than 32 deep"));
    /* exactly at the limit is fine (the main graph is depth 0) */
    deep_op = "Identity";
    assert_int_equal(load_nested(IR_MAX_GRAPH_DEPTH, graph_level, false, msg, sizeof msg),
                     ANVIL_OK);
    assert_int_equal(load_nested(IR_MAX_GRAPH_DEPTH + 1, graph_level, false, msg, sizeof msg),
                     ANVIL_ERR_LIMIT);
    /* sequence types nest without bound in protobuf; the decoder skips them flat */
    assert_int_equal(load_nested(200000, type_level, true, msg, sizeof msg), ANVIL_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "graph input 'x' has a sequence type"));
}

/* The default-domain opset range ONNX_OPSET_MIN..MAX (7..27, onnx 1.22's newest) is enforced at
 * both ends, and every version inside it is accepted and recorded on graph and nodes. */
static void test_opset_range(void **state) {
    (void)state;
    static const int opsets[] = {ONNX_OPSET_MIN - 1, ONNX_OPSET_MIN,    21, 22, 25,
                                 ONNX_OPSET_MAX,     ONNX_OPSET_MAX + 1};
    assert_int_equal(ONNX_OPSET_MAX, 27);
    for (size_t i = 0; i < sizeof opsets / sizeof opsets[0]; i++) {
        int v = opsets[i];
        pbw g = {0}, node = {0}, model = {0};
        w_input(&g, 11, "x", 2);
        w_str(&node, 1, "x");
        w_str(&node, 2, "y");
        w_str(&node, 4, "Relu");
        w_msg(&g, 1, &node);
        w_input(&g, 12, "y", 2);
        w_model_version(&model, &g, 10, v);
        onnx_model *m = NULL;
        anvil_status s = load_bytes(&model, &m);
        free(model.p);
        if (v < ONNX_OPSET_MIN || v > ONNX_OPSET_MAX) {
            assert_int_equal(s, ANVIL_ERR_UNSUPPORTED);
            assert_non_null(strstr(anvil_last_error(),
                                   v < ONNX_OPSET_MIN ? "is older than anvil supports (7..27)"
                                                      : "is newer than anvil supports (7..27)"));
            continue;
        }
        if (s != ANVIL_OK)
            fail_msg("opset %d: %s: %s", v, anvil_status_name(s), anvil_last_error());
        assert_int_equal(m->opset, v);
        assert_int_equal(m->graph->opset, v);
        assert_int_equal(m->graph->nodes[0].opset, v);
        onnx_model_free(m);
    }
}

static void test_long_lists(void **state) {
    (void)state;
    /* more than 65535 nodes, initializer values and attribute ints: past nanopb's 16-bit
     * repeated-field counts */
    enum { NODES = 70000, VALUES = 100000, INTS = 70000 };
    pbw g = {0}, model = {0};
    w_input(&g, 11, "v0", 1);
    char a[32], b[32];
    for (int i = 0; i < NODES; i++) {
        pbw node = {0};
        snprintf(a, sizeof a, "v%d", i);
        snprintf(b, sizeof b, "v%d", i + 1);
        w_str(&node, 1, a);
        w_str(&node, 2, b);
        w_str(&node, 4, "Relu");
        if (i == 5) { /* ints attribute, packed */
            pbw at = {0}, packed = {0};
            w_str(&at, 1, "many");
            w_int(&at, 20, 7);
            for (int k = 0; k < INTS; k++) w_varint(&packed, (uint64_t)(int64_t)(k - 10));
            w_bytes(&at, 8, packed.p, packed.n);
            free(packed.p);
            w_msg(&node, 5, &at);
        }
        w_msg(&g, 1, &node);
    }
    pbw t = {0}, packed = {0};
    w_int(&t, 1, VALUES);
    w_int(&t, 2, 1); /* FLOAT */
    for (int k = 0; k < VALUES; k++) {
        float v = (float)k * 0.5f;
        w_raw(&packed, &v, 4);
    }
    w_bytes(&t, 4, packed.p, packed.n);
    free(packed.p);
    w_str(&t, 8, "big");
    w_msg(&g, 5, &t);
    snprintf(b, sizeof b, "v%d", NODES);
    w_input(&g, 12, b, 1);
    w_model(&model, &g);

    onnx_model *m;
    assert_int_equal(load_bytes(&model, &m), ANVIL_OK);
    const ir_graph *gr = m->graph;
    assert_int_equal(gr->n_nodes, NODES);
    assert_int_equal(gr->nodes[NODES - 1].inputs[0], ir_graph_find_value(gr, "v69999"));
    assert_int_equal(value(gr, "v70000")->producer, NODES - 1);
    const ir_value *big = value(gr, "big");
    assert_int_equal(big->data_bytes, (size_t)VALUES * 4);
    for (int k = 0; k < VALUES; k += 997) assert_true(f32_at(big->data, (size_t)k) == k * 0.5f);
    const ir_attr *many = attr(&gr->nodes[5], "many");
    assert_int_equal(many->n, INTS);
    for (int k = 0; k < INTS; k += 1009) assert_true(many->ints[k] == k - 10);
    onnx_model_free(m);
    free(model.p);
}

static void test_memory_budget(void **state) {
    (void)state;
    /* 2-byte empty attributes decode to 400-byte structs: refused before memory runs out */
    pbw g = {0}, node = {0}, model = {0};
    w_str(&node, 4, "Relu");
    for (int k = 0; k < 600000; k++) w_bytes(&node, 5, "", 0);
    w_msg(&g, 1, &node);
    w_model(&model, &g);
    onnx_model *m;
    assert_int_equal(load_bytes(&model, &m), ANVIL_ERR_LIMIT);
    assert_non_null(strstr(core_err_message(), "decode to more than 64 times their size"));
    free(model.p);
}

/* One initializer built by `fill` inside a minimal model; returns the load status. */
static anvil_status load_with_tensor(void (*fill)(pbw *t), onnx_model **m, pbw *model) {
    pbw g = {0}, t = {0};
    fill(&t);
    w_str(&t, 8, "t");
    w_msg(&g, 5, &t);
    w_input(&g, 11, "x", 1);
    w_input(&g, 12, "x", 1);
    memset(model, 0, sizeof *model);
    w_model(model, &g);
    return load_bytes(model, m);
}

static void tensor_unpacked_floats(pbw *t) {
    w_int(t, 1, 3);
    w_int(t, 2, 1);
    for (int k = 0; k < 3; k++) { /* float_data written unpacked: one fixed32 field each */
        float v = (float)k + 0.25f;
        w_varint(t, 4 << 3 | 5);
        w_raw(t, &v, 4);
    }
}

static void tensor_int8_negative(pbw *t) {
    w_int(t, 1, 3);
    w_int(t, 2, 3); /* INT8 in int32_data: negative values are 10-byte varints */
    pbw packed = {0};
    w_varint(&packed, (uint64_t)(int64_t)-5);
    w_varint(&packed, 127);
    w_varint(&packed, (uint64_t)(int64_t)-128);
    w_bytes(t, 5, packed.p, packed.n);
    free(packed.p);
}

static void tensor_int8_overflow(pbw *t) {
    w_int(t, 1, 2);
    w_int(t, 2, 3);
    pbw packed = {0};
    w_varint(&packed, 1);
    w_varint(&packed, 300);
    w_bytes(t, 5, packed.p, packed.n);
    free(packed.p);
}

static void tensor_raw_wrong_wire(pbw *t) {
    w_int(t, 1, 1);
    w_int(t, 2, 1);
    w_int(t, 9, 77); /* raw_data sent as a varint */
}

static void tensor_two_payloads(pbw *t) {
    w_int(t, 1, 1);
    w_int(t, 2, 1);
    float v = 1;
    w_bytes(t, 9, &v, 4);
    w_bytes(t, 4, &v, 4);
}

static void tensor_wrong_field(pbw *t) {
    w_int(t, 1, 1);
    w_int(t, 2, 1);           /* FLOAT ... */
    w_bytes(t, 7, "\x05", 1); /* ... in int64_data */
}

static void test_tensor_forms(void **state) {
    (void)state;
    onnx_model *m;
    pbw model;
    assert_int_equal(load_with_tensor(tensor_unpacked_floats, &m, &model), ANVIL_OK);
    const ir_value *t = value(m->graph, "t");
    for (int k = 0; k < 3; k++) assert_true(f32_at(t->data, (size_t)k) == k + 0.25f);
    onnx_model_free(m);
    free(model.p);

    assert_int_equal(load_with_tensor(tensor_int8_negative, &m, &model), ANVIL_OK);
    t = value(m->graph, "t");
    const int8_t want[] = {-5, 127, -128};
    assert_int_equal(t->data_bytes, 3);
    assert_memory_equal(t->data, want, 3);
    onnx_model_free(m);
    free(model.p);

    assert_int_equal(load_with_tensor(tensor_int8_overflow, &m, &model), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(core_err_message(), "int32_data[1] = 300 does not fit INT8"));
    free(model.p);
    assert_int_equal(load_with_tensor(tensor_raw_wrong_wire, &m, &model), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(core_err_message(), "not an ONNX model"));
    free(model.p);
    assert_int_equal(load_with_tensor(tensor_two_payloads, &m, &model), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(core_err_message(), "holds both raw_data and float_data"));
    free(model.p);
    assert_int_equal(load_with_tensor(tensor_wrong_field, &m, &model), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(core_err_message(), "holds its values in int64_data"));
    free(model.p);
}

static void test_tensor_files(void **state) {
    (void)state;
    anvil_tensor *t;
    assert_int_equal(api_tensor_read_pb(data_path("unit/data/onnx_tensor_f32.pb"), &t), ANVIL_OK);
    assert_int_equal(anvil_tensor_dtype(t), ANVIL_DTYPE_FLOAT32);
    assert_int_equal(anvil_tensor_rank(t), 2);
    assert_int_equal(anvil_tensor_dims(t)[0], 2);
    assert_int_equal(anvil_tensor_dims(t)[1], 3);
    const float *f = anvil_tensor_data(t);
    for (int i = 0; i < 6; i++) assert_true(f[i] == (float)i * 1.5f);
    anvil_tensor_free(t);

    assert_int_equal(api_tensor_read_pb(data_path("unit/data/onnx_tensor_i8.pb"), &t), ANVIL_OK);
    assert_int_equal(anvil_tensor_dtype(t), ANVIL_DTYPE_INT8);
    const int8_t want[] = {-1, 5, 7};
    assert_memory_equal(anvil_tensor_data(t), want, 3);
    anvil_tensor_free(t);

    /* a model is no tensor (its fields clash with TensorProto's wire types) */
    assert_int_not_equal(api_tensor_read_pb(data_path("unit/data/onnx_small.onnx"), &t), ANVIL_OK);
    assert_null(t);
    assert_int_equal(api_tensor_read_pb(data_path("unit/data/missing.pb"), &t), ANVIL_ERR_IO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_model),   cmocka_unit_test(test_subgraphs),
        cmocka_unit_test(test_external_data), cmocka_unit_test(test_buffer_load),
        cmocka_unit_test(test_bad_corpus),    cmocka_unit_test(test_truncations_and_corruptions),
        cmocka_unit_test(test_deep_nesting),  cmocka_unit_test(test_long_lists),
        cmocka_unit_test(test_memory_budget), cmocka_unit_test(test_tensor_forms),
        cmocka_unit_test(test_tensor_files),  cmocka_unit_test(test_opset_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
