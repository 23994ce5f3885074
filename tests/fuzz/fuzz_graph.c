/* libFuzzer target: op checks and whole-graph shape inference over small random graphs.
 *
 * The fuzzer's bytes are not a file here but the choices that draw a graph through the ir API:
 * an opset, typed graph inputs (static, zero-size, huge or symbolic dims; a quarter of them
 * constants filled from the bytes), a few small integer and float constants, then up to 8 nodes of
 * ops from ir/ops.def (anvil's internal ops excluded, as the importer excludes them), each with an
 * arity within its op's bounds, inputs taken mostly from the values made just before (so nodes
 * chain), and attributes drawn from the names the ops read with values of any type (small numbers
 * mostly, the extremes sometimes). The graph then goes through what loading does after import:
 * toposort, op_check_graph, rt_infer_graph_static (which folds constants through the reference
 * kernels) and ir_graph_verify.
 *
 * The invariant: no crash, sanitizer report, leak, hang or allocation past the RSS limit, and a
 * failure other than out-of-memory leaves a message (core_err_message) saying why. The constants'
 * data and the attributes' tensors live in one buffer owned by this function, freed with the
 * graph. Built with -DANVIL_FUZZ=ON; tests/fuzz.cmake registers `fuzz.graph`. */
#include "ir/ir.h"
#include "onnx/onnx.h"
#include "ops/ops.h"
#include "runtime/infer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The fuzzer's bytes, read front to back; zeros once they run out. */
typedef struct draw {
    const uint8_t *p;
    size_t n;
} draw;

static unsigned byte(draw *d) {
    if (!d->n) return 0;
    d->n--;
    return *d->p++;
}

/* A number in [0, n) for n <= 65536. */
static unsigned pick(draw *d, unsigned n) {
    unsigned v = byte(d);
    if (n > 256) v |= byte(d) << 8;
    return v % n;
}

/* Names of the attributes the ops' check functions read. */
static const char *const attr_names[] = {
    "axis",
    "axes",
    "keepdims",
    "perm",
    "kernel_shape",
    "strides",
    "pads",
    "dilations",
    "group",
    "auto_pad",
    "ceil_mode",
    "transA",
    "transB",
    "alpha",
    "beta",
    "epsilon",
    "mode",
    "to",
    "value",
    "shape",
    "k",
    "largest",
    "sorted",
    "split",
    "num_outputs",
    "starts",
    "ends",
    "blocksize",
    "direction",
    "hidden_size",
    "layout",
    "scale",
    "scales",
    "size",
    "output_padding",
    "output_shape",
    "count_include_pad",
    "storage_order",
    "batch_dims",
    "exclusive",
    "reverse",
    "reduction",
    "noop_with_empty_axes",
    "select_last_index",
    "coordinate_transformation_mode",
    "cubic_coeff_a",
    "exclude_outside",
    "extrapolation_value",
    "antialias",
    "allowzero",
    "dtype",
    "seed",
    "saturate",
    "stash_type",
    "num_groups",
    "equation",
    "broadcast",
    "clip",
    "min",
    "max",
    "fmod",
    "upper",
    "lo",
    "hi",
    "start",
    "end",
    "p",
    "ratio",
    "training_mode",
    "momentum",
    "spatial",
    "num_heads",
    "q_num_heads",
    "kv_num_heads",
    "is_causal",
    "softcap",
    "onesided",
    "periodic",
    "output_datatype",
    "block_size",
    "approximate",
    "inverse",
    "center_point_box",
    "padding_mode",
    "align_corners",
    "activations",
    "activation_alpha",
    "activation_beta",
    "time_axis",
    "batch_axis",
    "num_scan_inputs",
    "ignore_index",
    "weights",
    "bias",
    "round_mode",
    "ngram_counts",
};

static const char *const attr_strings[] = {
    "NOTSET",
    "SAME_UPPER",
    "SAME_LOWER",
    "VALID",
    "constant",
    "reflect",
    "edge",
    "wrap",
    "nearest",
    "linear",
    "cubic",
    "bilinear",
    "half_pixel",
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "tf_crop_and_resize",
    "round_prefer_floor",
    "floor",
    "ceil",
    "DCR",
    "CRD",
    "forward",
    "reverse",
    "bidirectional",
    "mean",
    "sum",
    "none",
    "add",
    "mul",
    "max",
    "min",
    "tanh",
    "Relu",
    "Sigmoid",
    "Tanh",
    "ij,jk->ik",
    "i,i",
    "...ii->...i",
    "",
    "zeros",
    "border",
    "reflection",
    "round",
    "SAME",
    "True",
};

static const int64_t extreme_ints[] = {
    INT64_MAX,        INT64_MIN,        INT64_MIN + 1,       INT32_MAX, INT32_MIN, (int64_t)1 << 31,
    (int64_t)1 << 32, (int64_t)1 << 40, -((int64_t)1 << 33), 1000000,   -1000000,  65536,
};

static const anvil_dtype dtypes[] = {
    ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT32,  ANVIL_DTYPE_INT64,  ANVIL_DTYPE_INT32,
    ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_FLOAT64,  ANVIL_DTYPE_INT8,   ANVIL_DTYPE_UINT8,
    ANVIL_DTYPE_BOOL,    ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_UINT64, ANVIL_DTYPE_STRING,
};

static int64_t draw_int(draw *d) {
    unsigned r = byte(d);
    if (r < 200) return (int64_t)(r % 12) - 3;
    if (r < 240) return (int64_t)(r % 64);
    return extreme_ints[r % (sizeof extreme_ints / sizeof extreme_ints[0])];
}

/* A graph input's dim: small mostly, sometimes one whose products overflow. */
static int64_t draw_dim(draw *d) {
    static const int64_t huge[] = {(int64_t)1 << 20, (int64_t)1 << 31, (int64_t)1 << 40,
                                   (int64_t)1 << 62, INT64_MAX};
    unsigned r = byte(d);
    return r < 240 ? (int64_t)(r % 6) : huge[r % (sizeof huge / sizeof huge[0])];
}

static float draw_float(draw *d) {
    static const float special[] = {0.f, 1.f, -1.f, 0.5f, 1e-5f, 2.f, 1e30f, -1e30f, 0.f / 0.f};
    unsigned r = byte(d);
    if (r < 230) return (float)((int)(r % 17) - 8) * 0.25f;
    return special[r % (sizeof special / sizeof special[0])];
}

/* Storage for constant data, owned by the caller of the graph: every block is freed with it. */
typedef struct blocks {
    void *p[64];
    int n;
} blocks;

static void *block_alloc(blocks *b, size_t bytes) {
    if (b->n == (int)(sizeof b->p / sizeof b->p[0])) return NULL;
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) b->p[b->n++] = p;
    return p;
}

/* A small int64 or float tensor (rank 0 or 1, up to 6 elements) drawn from d. */
static bool draw_tensor(draw *d, blocks *b, ir_tensor *t) {
    memset(t, 0, sizeof *t);
    t->dtype = byte(d) & 1 ? ANVIL_DTYPE_INT64 : ANVIL_DTYPE_FLOAT32;
    t->rank = (int)pick(d, 2);
    int64_t n = t->rank ? (int64_t)pick(d, 7) : 1;
    if (t->rank) t->dims[0] = n;
    size_t es = t->dtype == ANVIL_DTYPE_INT64 ? 8 : 4;
    void *p = block_alloc(b, (size_t)n * es);
    if (!p) return false;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == ANVIL_DTYPE_INT64)
            ((int64_t *)p)[i] = draw_int(d);
        else
            ((float *)p)[i] = draw_float(d);
    }
    t->data = p;
    t->bytes = (size_t)n * es;
    return true;
}

static anvil_status draw_attr(draw *d, ir_graph *g, blocks *b, ir_attr *a, const char *name) {
    memset(a, 0, sizeof *a);
    a->name = name;
    switch (pick(d, 8)) {
    case 0:
    case 1:
    case 2:
        a->type = IR_ATTR_INT;
        a->i = draw_int(d);
        break;
    case 3:
    case 4: {
        a->type = IR_ATTR_INTS;
        a->n = pick(d, 7);
        int64_t *v = core_arena_array(g->arena, a->n ? a->n : 1, sizeof *v);
        if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < a->n; i++) v[i] = draw_int(d);
        a->ints = v;
        break;
    }
    case 5:
        a->type = IR_ATTR_FLOAT;
        a->f = draw_float(d);
        break;
    case 6: {
        if (byte(d) & 1) {
            a->type = IR_ATTR_FLOATS;
            a->n = pick(d, 5);
            float *v = core_arena_array(g->arena, a->n ? a->n : 1, sizeof *v);
            if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
            for (size_t i = 0; i < a->n; i++) v[i] = draw_float(d);
            a->floats = v;
        } else {
            a->type = IR_ATTR_STRING;
            const char *s = attr_strings[pick(d, sizeof attr_strings / sizeof attr_strings[0])];
            a->s = core_arena_strdup(g->arena, s);
            if (!a->s) return ANVIL_ERR_OUT_OF_MEMORY;
            a->s_len = strlen(s);
        }
        break;
    }
    default: {
        a->type = IR_ATTR_TENSOR;
        a->t = core_arena_alloc(g->arena, sizeof *a->t);
        if (!a->t || !draw_tensor(d, b, a->t)) return ANVIL_ERR_OUT_OF_MEMORY;
        break;
    }
    }
    return ANVIL_OK;
}

/* Adds a fresh value named <prefix><index> to g. */
static anvil_status new_value(ir_graph *g, const char *prefix, int index, ir_vid *v) {
    char name[64];
    snprintf(name, sizeof name, "%s%d", prefix, index);
    return ir_graph_add_value(g, name, v);
}

/* At most this many outputs per node (no op needs more than a few). */
#define MAX_OUTPUTS 12

static anvil_status draw_node(draw *d, ir_graph *g, blocks *b, const ir_vid *pool, int n_pool,
                              ir_vid *made, int *n_made, int index) {
    ir_op op;
    do op = (ir_op)pick(d, IR_OP_COUNT);
    while (ir_op_internal(op));
    const op_impl *impl = op_get(op);
    int span = impl->max_inputs - impl->min_inputs;
    int n_in = impl->min_inputs + (int)pick(d, (unsigned)(span > 4 ? 5 : span + 1));
    span = impl->max_outputs - impl->min_outputs;
    int n_out = impl->min_outputs + (int)pick(d, (unsigned)(span > 3 ? 4 : span + 1));
    if (n_out > MAX_OUTPUTS) n_out = MAX_OUTPUTS;
    int n_attrs = (int)pick(d, 5);
    char name[32];
    snprintf(name, sizeof name, "n%d", index);
    int32_t idx;
    CORE_TRY(ir_graph_add_node(g, op, name, n_in, n_out, n_attrs, &idx));
    ir_node *n = &g->nodes[idx];
    for (int i = 0; i < n_in; i++) {
        unsigned r = byte(d);
        if (r >= 240 && i >= impl->min_inputs) continue; /* an omitted optional input */
        /* the most recent values most often, so that nodes chain */
        int back = r < 160 ? (int)(r % 3) : (int)(r % (unsigned)n_pool);
        n->inputs[i] = pool[n_pool - 1 - (back < n_pool ? back : n_pool - 1)];
    }
    for (int i = 0; i < n_out; i++) {
        if (i > 0 && byte(d) >= 240) continue; /* an omitted optional output */
        ir_vid v;
        char vname[40];
        snprintf(vname, sizeof vname, "%s_", name);
        CORE_TRY(new_value(g, vname, i, &v));
        n = &g->nodes[idx];
        n->outputs[i] = v;
        g->values[v].producer = idx;
        made[(*n_made)++] = v;
    }
    const size_t n_names = sizeof attr_names / sizeof attr_names[0];
    for (int k = 0; k < n_attrs; k++) {
        const char *aname = attr_names[pick(d, (unsigned)n_names)];
        bool dup = false;
        for (int j = 0; j < k; j++) dup |= !strcmp(g->nodes[idx].attrs[j].name, aname);
        if (dup) aname = core_arena_printf(g->arena, "unknown_%d", k);
        if (!aname) return ANVIL_ERR_OUT_OF_MEMORY;
        CORE_TRY(draw_attr(d, g, b, &g->nodes[idx].attrs[k], aname));
    }
    return ANVIL_OK;
}

#define MAX_POOL 64

static anvil_status draw_graph(draw *d, ir_graph *g, blocks *b) {
    g->opset = ONNX_OPSET_MAX - (int)pick(d, ONNX_OPSET_MAX - ONNX_OPSET_MIN + 1);
    ir_vid pool[MAX_POOL];
    int n_pool = 0;
    int n_inputs = 1 + (int)pick(d, 3);
    for (int i = 0; i < n_inputs; i++) {
        ir_vid v;
        CORE_TRY(new_value(g, "x", i, &v));
        ir_value *val = &g->values[v];
        val->dtype = dtypes[pick(d, sizeof dtypes / sizeof dtypes[0])];
        int rank = (int)pick(d, 5);
        int64_t dims[IR_MAX_RANK];
        for (int k = 0; k < rank; k++) dims[k] = draw_dim(d);
        ir_shape_set(&val->shape, rank, dims);
        /* a quarter of them become constants filled from the bytes, so that nodes fold */
        size_t numel, es = anvil_dtype_size(val->dtype);
        if (byte(d) >= 192 && val->dtype != ANVIL_DTYPE_STRING && es &&
            ir_shape_numel(&val->shape, &numel) && numel <= 256) {
            unsigned char *p = block_alloc(b, numel * es);
            if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
            for (size_t k = 0; k < numel * es; k++)
                p[k] = (unsigned char)(val->dtype == ANVIL_DTYPE_BOOL ? byte(d) & 1 : byte(d));
            val->flags = IR_VALUE_CONST;
            val->data = p;
            val->data_bytes = numel * es;
            pool[n_pool++] = v;
            continue;
        }
        for (int k = 0; k < rank; k++) {
            if (byte(d) < 230) continue;
            int32_t sym;
            CORE_TRY(ir_graph_add_sym(g, k & 1 ? "N" : "T", &sym));
            val = &g->values[v];
            val->shape.d[k] = IR_DIM_UNKNOWN;
            val->shape.sym[k] = sym;
        }
        CORE_TRY(ir_graph_add_input(g, v));
        pool[n_pool++] = v;
    }
    int n_consts = (int)pick(d, 4);
    for (int i = 0; i < n_consts; i++) {
        ir_tensor t;
        if (!draw_tensor(d, b, &t)) return ANVIL_ERR_OUT_OF_MEMORY;
        ir_vid v;
        CORE_TRY(new_value(g, "c", i, &v));
        ir_value *val = &g->values[v];
        val->dtype = t.dtype;
        ir_shape_set(&val->shape, t.rank, t.dims);
        val->flags = IR_VALUE_CONST;
        val->data = t.data;
        val->data_bytes = t.bytes;
        pool[n_pool++] = v;
    }
    int n_nodes = 1 + (int)pick(d, 8);
    for (int i = 0; i < n_nodes; i++) {
        ir_vid made[MAX_OUTPUTS];
        int n_made = 0;
        CORE_TRY(draw_node(d, g, b, pool, n_pool, made, &n_made, i));
        for (int k = 0; k < n_made && n_pool < MAX_POOL; k++) pool[n_pool++] = made[k];
    }
    /* the graph's outputs: the last value made, and any other that nothing reads */
    for (int k = 0; k < n_pool; k++) {
        ir_vid v = pool[k];
        if (g->values[v].producer < 0) continue;
        bool read = false;
        for (int32_t i = 0; i < g->n_nodes && !read; i++)
            for (int j = 0; j < g->nodes[i].n_inputs; j++) read |= g->nodes[i].inputs[j] == v;
        if (!read || k == n_pool - 1) CORE_TRY(ir_graph_add_output(g, v));
    }
    return ANVIL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    draw d = {data, size};
    blocks b = {.n = 0};
    ir_graph *g = NULL;
    core_err_clear();
    anvil_status st = ir_graph_create(NULL, &g);
    if (st == ANVIL_OK) st = draw_graph(&d, g, &b);
    if (st == ANVIL_OK) {
        core_err_clear();
        st = ir_graph_toposort(g);
        if (st == ANVIL_OK) st = op_check_graph(g);
        if (st == ANVIL_OK) st = rt_infer_graph_static(g);
        if (st == ANVIL_OK) st = ir_graph_verify(g);
        if (st != ANVIL_OK && st != ANVIL_ERR_OUT_OF_MEMORY && !core_err_message()[0]) {
            fprintf(stderr, "fuzz_graph: status %s without a message\n", core_status_name(st));
            abort();
        }
    }
    ir_graph_free(g);
    for (int i = 0; i < b.n; i++) free(b.p[i]);
    return 0;
}
