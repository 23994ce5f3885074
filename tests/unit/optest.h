/* Test harness for one op in isolation: builds a one-node graph, runs the op's check, shape
 * inference and reference kernel the way the runtime does, and hands back the outputs.
 *
 *   optest t;
 *   optest_begin(&t, IR_OP_CONV, 3, 1, 2);          // 3 inputs, 1 output, 2 attributes
 *   optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
 *   optest_attr_int(&t, 1, "group", 1);
 *   optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 5, 5}, xdata, false);
 *   ...
 *   anvil_status s = optest_run(&t);                // check + infer + run
 *   float *y = t.out[0].data;                       // owned by t
 *   optest_end(&t);
 *
 * Inputs marked `known` are visible to shape inference as values (like constants). Header-only
 * so each test executable stays one file. */
#ifndef ANVIL_OPTEST_H
#define ANVIL_OPTEST_H

#include "api/env.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPTEST_MAX_IO 16

typedef struct optest {
    ir_graph *g;
    int32_t node;
    int n_in, n_out;
    bool in_set[OPTEST_MAX_IO];
    bool in_known[OPTEST_MAX_IO];
    op_tensor in[OPTEST_MAX_IO];
    op_tensor out[OPTEST_MAX_IO]; /* outputs: data malloc'd by optest_run, freed by optest_end */
    op_tinfo out_info[OPTEST_MAX_IO];
    /* The session settings the variants see (borrowed; NULL: none, i.e. fp32 only). */
    const kern_knobs *knobs;
} optest;

/* cmocka group setup of the kernel tests: the environment read as the API reads it
 * (api_env_init), so that ctest's ANVIL_ISA caps the ISA they see. */
static inline int optest_env(void **state) {
    (void)state;
    api_env_init();
    return 0;
}

static inline ir_node *optest_node(optest *t) {
    return &t->g->nodes[t->node];
}

/* opset: the default-domain opset the node is interpreted under (e.g. 17). */
static inline void optest_begin_opset(optest *t, ir_op op, int n_in, int n_out, int n_attrs,
                                      int opset) {
    memset(t, 0, sizeof *t);
    if (ir_graph_create(NULL, &t->g) != ANVIL_OK) abort();
    t->g->opset = opset;
    t->n_in = n_in;
    t->n_out = n_out;
    if (ir_graph_add_node(t->g, op, "test_node", n_in, n_out, n_attrs, &t->node) != ANVIL_OK)
        abort();
    ir_node *n = optest_node(t);
    for (int i = 0; i < n_out; i++) {
        char name[32];
        snprintf(name, sizeof name, "out%d", i);
        ir_vid v;
        if (ir_graph_add_value(t->g, name, &v) != ANVIL_OK) abort();
        n = optest_node(t);
        n->outputs[i] = v;
        t->g->values[v].producer = t->node;
    }
}

static inline void optest_begin(optest *t, ir_op op, int n_in, int n_out, int n_attrs) {
    optest_begin_opset(t, op, n_in, n_out, n_attrs, 17);
}

static inline ir_attr *optest_attr(optest *t, int k, const char *name, ir_attr_type type) {
    ir_attr *a = &optest_node(t)->attrs[k];
    a->name = core_arena_strdup(t->g->arena, name);
    a->type = type;
    return a;
}

static inline void optest_attr_int(optest *t, int k, const char *name, int64_t v) {
    optest_attr(t, k, name, IR_ATTR_INT)->i = v;
}

static inline void optest_attr_float(optest *t, int k, const char *name, float v) {
    optest_attr(t, k, name, IR_ATTR_FLOAT)->f = v;
}

static inline void optest_attr_string(optest *t, int k, const char *name, const char *s) {
    ir_attr *a = optest_attr(t, k, name, IR_ATTR_STRING);
    a->s = core_arena_strdup(t->g->arena, s);
    a->s_len = strlen(s);
}

static inline void optest_attr_ints(optest *t, int k, const char *name, const int64_t *v,
                                    size_t n) {
    ir_attr *a = optest_attr(t, k, name, IR_ATTR_INTS);
    int64_t *copy = core_arena_array(t->g->arena, n + 1, sizeof(int64_t));
    memcpy(copy, v, n * sizeof *v);
    a->ints = copy;
    a->n = n;
}

static inline void optest_attr_floats(optest *t, int k, const char *name, const float *v,
                                      size_t n) {
    ir_attr *a = optest_attr(t, k, name, IR_ATTR_FLOATS);
    float *copy = core_arena_array(t->g->arena, n + 1, sizeof(float));
    memcpy(copy, v, n * sizeof *v);
    a->floats = copy;
    a->n = n;
}

/* Attribute holding a tensor (e.g. Constant's value). data is borrowed: keep it alive. */
static inline void optest_attr_tensor(optest *t, int k, const char *name, anvil_dtype dt, int rank,
                                      const int64_t *dims, const void *data) {
    ir_attr *a = optest_attr(t, k, name, IR_ATTR_TENSOR);
    ir_tensor *x = core_arena_alloc(t->g->arena, sizeof *x);
    x->dtype = dt;
    x->rank = rank;
    for (int i = 0; i < rank; i++) x->dims[i] = dims[i];
    x->data = data;
    if (!core_tensor_bytes(dt, dims, rank, &x->bytes)) abort();
    a->t = x;
}

/* Input i: data is borrowed (keep alive until optest_end). known: inference sees the value. */
static inline void optest_input(optest *t, int i, anvil_dtype dt, int rank, const int64_t *dims,
                                const void *data, bool known) {
    char name[32];
    snprintf(name, sizeof name, "in%d", i);
    ir_vid v;
    if (ir_graph_add_value(t->g, name, &v) != ANVIL_OK) abort();
    optest_node(t)->inputs[i] = v;
    t->in_set[i] = true;
    t->in_known[i] = known;
    t->in[i].dtype = dt;
    t->in[i].rank = rank;
    for (int d = 0; d < rank; d++) t->in[i].dims[d] = dims[d];
    t->in[i].data = (void *)data;
}

/* What shape inference and variants see of the inputs: dtype, shape, and the value of those
 * marked known. in[] has room for OPTEST_MAX_IO entries. */
static inline void optest_input_info(const optest *t, op_tinfo *in) {
    memset(in, 0, sizeof *in * OPTEST_MAX_IO);
    for (int i = 0; i < t->n_in; i++) {
        if (!t->in_set[i]) {
            ir_shape_unknown(&in[i].shape);
            continue;
        }
        in[i].dtype = t->in[i].dtype;
        ir_shape_set(&in[i].shape, t->in[i].rank, t->in[i].dims);
        in[i].value = t->in_known[i] ? t->in[i].data : NULL;
    }
}

/* n floats in [lo, hi) from a fixed-seed LCG (malloc'd, caller frees; never NULL for n == 0). */
static inline float *optest_random_f32(size_t n, unsigned seed, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) abort();
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = lo + (hi - lo) * (float)((s >> 8) & 0xffffff) / 16777216.0f;
    }
    return p;
}

/* check + infer only; outputs' inferred dtype/shape land in t->out_info. */
static inline anvil_status optest_infer(optest *t) {
    const op_impl *impl = op_get(optest_node(t)->op);
    anvil_status s = op_check_graph(t->g);
    if (s != ANVIL_OK) return s;
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(t, in);
    memset(t->out_info, 0, sizeof t->out_info);
    for (int i = 0; i < t->n_out; i++) ir_shape_unknown(&t->out_info[i].shape);
    return impl->infer(t->g, optest_node(t), in, t->n_in, t->out_info, t->n_out);
}

/* check + infer + allocate outputs + run the reference kernel serially. */
static inline anvil_status optest_run(optest *t) {
    anvil_status s = optest_infer(t);
    if (s != ANVIL_OK) return s;
    const op_tensor *ins[OPTEST_MAX_IO];
    op_tensor *outs[OPTEST_MAX_IO];
    for (int i = 0; i < t->n_in; i++) ins[i] = t->in_set[i] ? &t->in[i] : NULL;
    for (int i = 0; i < t->n_out; i++) {
        op_tinfo *oi = &t->out_info[i];
        if (!ir_shape_is_static(&oi->shape)) {
            fprintf(stderr, "optest: output %d shape not static after inference\n", i);
            return ANVIL_ERR_INTERNAL;
        }
        size_t bytes;
        if (!core_tensor_bytes(oi->dtype, oi->shape.d, oi->shape.rank, &bytes))
            return ANVIL_ERR_INTERNAL;
        t->out[i].dtype = oi->dtype;
        t->out[i].rank = oi->shape.rank;
        for (int d = 0; d < oi->shape.rank; d++) t->out[i].dims[d] = oi->shape.d[d];
        free(t->out[i].data);
        t->out[i].data = calloc(1, bytes ? bytes : 1);
        outs[i] = &t->out[i];
    }
    s = op_get(optest_node(t)->op)->run(optest_node(t), ins, t->n_in, outs, t->n_out, NULL);
    /* a fused epilogue (ir_fusion) on the reference is the runtime's own fallback */
    if (s == ANVIL_OK && optest_node(t)->fusion)
        s = kern_fusion_apply(optest_node(t), ins, t->n_in, outs[0], NULL);
    return s;
}

static inline void optest_end(optest *t) {
    for (int i = 0; i < t->n_out; i++) free(t->out[i].data);
    ir_graph_free(t->g);
    memset(t, 0, sizeof *t);
}

/* max |a-b| / (atol + rtol*|b|) style check; returns the index of the first mismatch or -1. */
static inline long optest_compare_f32(const float *got, const float *want, size_t n, float rtol,
                                      float atol) {
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= atol + rtol * fabsf(want[i]))) {
            fprintf(stderr, "mismatch at %zu: got %g want %g\n", i, (double)got[i],
                    (double)want[i]);
            return (long)i;
        }
    }
    return -1;
}

/* Runs the node through variant v on `threads` threads (after optest_run, which set up shapes
 * and the reference outputs); results go to got[i] (caller-allocated, same sizes as t->out). */
static inline anvil_status optest_run_variant(optest *t, const kern_variant *v, int threads,
                                              op_tensor *got) {
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(t, in);
    kern_node kn = {optest_node(t), in,   t->n_in, t->out_info, t->n_out,
                    threads,        NULL, NULL,    t->knobs};
    if (!kern_applies(v, &kn, core_hw_get())) return ANVIL_ERR_UNSUPPORTED;
    rt_variant_exec *e;
    anvil_status s = rt_variant_exec_create(v, &kn, NULL, &e);
    if (s != ANVIL_OK) return s;
    const op_tensor *ins[OPTEST_MAX_IO];
    op_tensor *outs[OPTEST_MAX_IO];
    for (int i = 0; i < t->n_in; i++) ins[i] = t->in_set[i] ? &t->in[i] : NULL;
    for (int i = 0; i < t->n_out; i++) outs[i] = &got[i];
    s = rt_variant_exec_run(e, optest_node(t), ins, t->n_in, outs, t->n_out);
    rt_variant_exec_free(e);
    return s;
}

/* Compares a variant's output `got` with the reference's `want` (same dtype and shape); returns
 * the index of the first mismatch (after printing it) or -1. */
typedef long (*optest_cmp_fn)(const op_tensor *want, const void *got, float rtol, float atol);

/* The comparison of optest_check_variants: float32 outputs within atol + rtol*|want|; other
 * dtypes are not compared. */
static inline long optest_cmp_f32(const op_tensor *want, const void *got, float rtol, float atol) {
    if (want->dtype != ANVIL_DTYPE_FLOAT32) return -1;
    return optest_compare_f32(got, want->data, op_tensor_numel(want), rtol, atol);
}

/* Runs the reference (optest_run) and then every registered variant of the node's op that
 * applies on this machine, on 1, 2 and 3 threads, and compares every output with the reference
 * through cmp. Returns how many variants were checked (>= 0) or -1 after printing the first
 * mismatch or failure. */
static inline int optest_check_variants_cmp(optest *t, float rtol, float atol, optest_cmp_fn cmp) {
    if (optest_run(t) != ANVIL_OK) {
        fprintf(stderr, "optest_check_variants: the reference failed: %s\n", anvil_last_error());
        return -1;
    }
    size_t count;
    const kern_variant *const *list = kern_variants(optest_node(t)->op, &count);
    int checked = 0;
    for (size_t vi = 1; vi < count; vi++) {
        for (int threads = 1; threads <= 3; threads++) {
            op_tensor got[OPTEST_MAX_IO];
            for (int i = 0; i < t->n_out; i++) {
                got[i] = t->out[i];
                size_t bytes;
                if (!core_tensor_bytes(got[i].dtype, got[i].dims, got[i].rank, &bytes)) abort();
                /* NaN-filled so an output the variant forgets to write is caught. */
                got[i].data = malloc(bytes ? bytes : 1);
                memset(got[i].data, 0xff, bytes);
            }
            anvil_status s = optest_run_variant(t, list[vi], threads, got);
            int bad = 0;
            if (s == ANVIL_ERR_UNSUPPORTED) {
                bad = -2;
            } else if (s != ANVIL_OK) {
                fprintf(stderr, "variant %s (%d threads) failed: %s\n", list[vi]->name, threads,
                        anvil_last_error());
                bad = 1;
            }
            for (int i = 0; i < t->n_out && !bad; i++) {
                long at = cmp(&t->out[i], got[i].data, rtol, atol);
                if (at >= 0) {
                    fprintf(stderr, "variant %s (%d threads): output %d differs at %ld\n",
                            list[vi]->name, threads, i, at);
                    bad = 1;
                }
            }
            for (int i = 0; i < t->n_out; i++) free(got[i].data);
            if (bad == 1) return -1;
            if (bad == -2) break;
            if (threads == 1) checked++;
        }
    }
    return checked;
}

/* optest_check_variants_cmp with optest_cmp_f32: float32 outputs within
 * |got - want| <= atol + rtol*|want|. */
static inline int optest_check_variants(optest *t, float rtol, float atol) {
    return optest_check_variants_cmp(t, rtol, atol, optest_cmp_f32);
}

/* ---- helpers the kernel tests share ----------------------------------------------------- */

/* Whether the registered variant `name` of the node's op accepts the node on one thread (after
 * shape inference); false when no such variant is registered. */
static inline bool optest_variant_applies(optest *t, const char *name) {
    if (optest_infer(t) != ANVIL_OK) abort();
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(t, in);
    kern_node kn = {optest_node(t), in, t->n_in, t->out_info, t->n_out, 1, NULL, NULL, t->knobs};
    const kern_variant *v = kern_find(optest_node(t)->op, name);
    return v && kern_applies(v, &kn, core_hw_get());
}

/* Product of d[0..r). */
static inline size_t optest_prod(const int64_t *d, int r) {
    size_t n = 1;
    for (int i = 0; i < r; i++) n *= (size_t)d[i];
    return n;
}

/* Whether the AVX-512 variants can run here (the CPU, or ANVIL_ISA, allows F/BW/VL/DQ). */
static inline bool optest_have_avx512(void) {
    const core_hw *hw = core_hw_get();
    return hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq && hw->os_avx512;
}

/* Whether the AVX2 variants can run here (AVX2 and FMA). */
static inline bool optest_have_avx2(void) {
    const core_hw *hw = core_hw_get();
    return hw->avx2 && hw->fma;
}

#endif
