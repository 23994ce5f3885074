/* Runtime: thread pool coverage, memory planning (in-place, aliasing, reuse), plan caching per
 * shape signature, plan-time folding of shape arithmetic, input validation and the trace. Graphs
 * are built directly with the IR API so these tests do not depend on the ONNX importer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/runtime.h"
#include "test_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pool ---------------------------------------------------------------------------------- */

typedef struct {
    int *hits;
} pool_arg;

static void mark(void *arg, size_t b, size_t e) {
    pool_arg *a = arg;
    for (size_t i = b; i < e; i++) __atomic_fetch_add(&a->hits[i], 1, __ATOMIC_RELAXED);
}

static void test_pool_covers_range_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        core_pool *p;
        assert_int_equal(core_pool_create(threads, &p), ANVIL_OK);
        op_ctx ctx = {.pool = p};
        size_t sizes[] = {0, 1, 2, 3, 7, 64, 1001};
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            for (int rep = 0; rep < 20; rep++) {
                int *hits = calloc(sizes[k] + 1, sizeof *hits);
                pool_arg a = {hits};
                op_parallel_for(&ctx, sizes[k], mark, &a);
                for (size_t i = 0; i < sizes[k]; i++) assert_int_equal(hits[i], 1);
                free(hits);
            }
        }
        core_pool_free(p);
    }
}

/* ---- graph building ------------------------------------------------------------------------ */

/* adds node op(ins) -> out (a new value named out_name); returns the output vid */
static ir_vid add_node(ir_graph *g, ir_op op, const char *out_name, int n_in, const ir_vid *ins) {
    return test_add_node(g, op, out_name, n_in, ins, 0);
}

static ir_vid add_input(ir_graph *g, const char *name, int rank, const int64_t *dims,
                        const char *sym0) {
    ir_vid x = test_add_value(g, name);
    g->values[x].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&g->values[x].shape, rank, dims);
    if (sym0) {
        int32_t s;
        assert_int_equal(ir_graph_add_sym(g, sym0, &s), ANVIL_OK);
        g->values[x].shape.d[0] = IR_DIM_UNKNOWN;
        g->values[x].shape.sym[0] = s;
    }
    assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
    return x;
}

static ir_vid add_const_i64(ir_graph *g, const char *name, const int64_t *data, int64_t n) {
    ir_vid c = test_add_value(g, name);
    g->values[c].dtype = ANVIL_DTYPE_INT64;
    ir_shape_set(&g->values[c].shape, 1, &n);
    g->values[c].flags |= IR_VALUE_CONST;
    g->values[c].data = data;
    g->values[c].data_bytes = (size_t)n * sizeof(int64_t);
    return c;
}

static void finish(ir_graph *g) {
    assert_int_equal(op_check_graph(g), ANVIL_OK);
    assert_int_equal(rt_infer_graph_static(g), ANVIL_OK);
}

static anvil_tensor *make_input(int rank, const int64_t *dims, float start) {
    anvil_tensor *t;
    assert_int_equal(rt_tensor_new(ANVIL_DTYPE_FLOAT32, rank, dims, &t), ANVIL_OK);
    float *d = t->data;
    for (size_t i = 0; i < t->bytes / 4; i++) d[i] = start + (float)i;
    return t;
}

static void free_tensor(anvil_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t);
}

/* ---- planning ------------------------------------------------------------------------------ */

/* x -> Neg -> Relu -> Neg -> Abs -> y: every step can overwrite its input, so a chain of any
 * length needs one buffer, while the activations add up to four. At opt level 0, since the
 * passes would fuse the four into one node (fuse_chain). */
static void test_inplace_chain_uses_one_buffer(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t dims[2] = {4, 1000};
    ir_vid x = add_input(g, "x", 2, dims, NULL);
    ir_vid a = add_node(g, IR_OP_NEG, "a", 1, &x);
    ir_vid b = add_node(g, IR_OP_RELU, "b", 1, &a);
    ir_vid c = add_node(g, IR_OP_NEG, "c", 1, &b);
    ir_vid y = add_node(g, IR_OP_ABS, "y", 1, &c);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    finish(g);

    rt_session_config cfg = {.threads = 2, .opt_level = 0, .profiling = true};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    anvil_tensor *in = make_input(2, dims, -2000.0f);
    const anvil_tensor *ins[1] = {in};
    anvil_tensor *out[1];
    assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
    const float *xi = in->data, *yo = out[0]->data;
    for (int i = 0; i < 4000; i++) {
        float want = xi[i] < 0 ? -xi[i] : 0.0f; /* abs(-relu(-x)) */
        assert_true(yo[i] == want);
    }
    anvil_session_stats st;
    assert_int_equal(rt_session_stats(s, &st), ANVIL_OK);
    assert_int_equal(st.activation_bytes, 4 * 4000 * sizeof(float));
    assert_int_equal(st.arena_bytes, 4000 * sizeof(float));
    assert_int_equal(st.nodes_run, 4);

    /* the trace has one event per node plus one per run */
    char path[] = "/tmp/anvil_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(rt_session_write_trace(s, path), ANVIL_OK);
    FILE *f = fopen(path, "r");
    char buf[8192] = {0};
    size_t nread = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    remove(path);
    assert_true(nread > 0);
    assert_non_null(strstr(buf, "\"traceEvents\""));
    assert_non_null(strstr(buf, "\"op\":\"Relu\""));
    assert_non_null(strstr(buf, "\"variant\":\""));
    assert_non_null(strstr(buf, "\"name\":\"run 0\""));

    free_tensor(in);
    free_tensor(out[0]);
    rt_session_free(s);
    ir_graph_free(g);
}

/* Two branches alive at once cannot share; once both die their space is reused. Graph:
 * a = Neg(x); b = Relu(x); c = Add(a, b); d = Neg(c); y = Abs(d) */
static void test_reuse_respects_liveness(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t dims[1] = {1024};
    ir_vid x = add_input(g, "x", 1, dims, NULL);
    ir_vid a = add_node(g, IR_OP_NEG, "a", 1, &x);
    ir_vid b = add_node(g, IR_OP_RELU, "b", 1, &x);
    ir_vid ab[2] = {a, b};
    ir_vid c = add_node(g, IR_OP_ADD, "c", 2, ab);
    ir_vid d = add_node(g, IR_OP_NEG, "d", 1, &c);
    ir_vid y = add_node(g, IR_OP_ABS, "y", 1, &d);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    finish(g);
    rt_session_config cfg = {.threads = 1};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    anvil_tensor *in = make_input(1, dims, -512.0f);
    const anvil_tensor *ins[1] = {in};
    anvil_tensor *out[1];
    assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
    const float *xi = in->data, *yo = out[0]->data;
    for (int i = 0; i < 1024; i++) {
        float relu = xi[i] > 0 ? xi[i] : 0.0f;
        float want = -xi[i] + relu;
        want = want < 0 ? -want : want;
        assert_true(yo[i] == want);
    }
    anvil_session_stats st;
    assert_int_equal(rt_session_stats(s, &st), ANVIL_OK);
    assert_int_equal(st.activation_bytes, 5 * 4096);
    assert_int_equal(st.arena_bytes, 2 * 4096); /* a and b live together, nothing more */
    free_tensor(in);
    free_tensor(out[0]);
    rt_session_free(s);
    ir_graph_free(g);
}

/* Offsets: a buffer takes the slot of the latest same-size buffer that died before it (so the
 * threads mostly rewrite bytes they wrote before), falls back to the lowest free offset where
 * that slot is taken, and no two buffers live at the same step ever overlap. */
static void test_arena_slots(void **state) {
    (void)state;
    /* big dies at 1 and p at 2, so at step 3 offset 0 (big's) and p's slot are both free */
    rt_arena_buf b[4] = {{.root = 0, .bytes = 8192, .first = 0, .last = 1},
                         {.root = 1, .bytes = 4096, .first = 0, .last = 2},
                         {.root = 2, .bytes = 4096, .first = 3, .last = 4},
                         {.root = 3, .bytes = 4096, .first = 3, .last = 4}};
    size_t top;
    assert_int_equal(rt_arena_assign(b, 4, &top), ANVIL_OK);
    size_t off[4];
    for (int i = 0; i < 4; i++) off[b[i].root] = b[i].offset;
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 8192);
    assert_int_equal(off[2], 8192); /* p's slot, not the lowest free offset */
    assert_int_equal(off[3], 0);    /* p's slot is taken: the lowest free offset */
    assert_int_equal(top, 12288);

    /* random buffers: live at the same step means disjoint, and every offset 64-aligned */
    enum { N = 300 };
    rt_arena_buf r[N];
    uint32_t seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        int32_t first = (int32_t)(seed >> 8) % 200;
        seed = seed * 1103515245u + 12345u;
        r[i] = (rt_arena_buf){.root = i,
                              .bytes = (size_t)((seed >> 8) % 5 + 1) * 1000,
                              .first = first,
                              .last = first + (int32_t)((seed >> 20) % 12)};
    }
    assert_int_equal(rt_arena_assign(r, N, &top), ANVIL_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].offset % 64, 0);
        assert_true(r[i].offset + r[i].bytes <= top);
        for (int j = 0; j < i; j++) {
            if (r[i].last < r[j].first || r[j].last < r[i].first) continue;
            assert_true(r[i].offset + r[i].bytes <= r[j].offset ||
                        r[j].offset + r[j].bytes <= r[i].offset);
        }
    }
}

/* A symbolic batch: y = Reshape(Relu(x), Concat(Gather(Shape(x), 0), [-1])). The shape chain is
 * folded at plan time, Reshape aliases its input, and each new batch size makes a new plan. */
static void test_shape_chain_folds_and_plans_per_shape(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t dims[3] = {-1, 3, 5};
    ir_vid x = add_input(g, "x", 3, dims, "N");
    static const int64_t zero = 0, minus1 = -1;
    ir_vid idx = test_add_value(g, "idx");
    g->values[idx].dtype = ANVIL_DTYPE_INT64;
    ir_shape_set(&g->values[idx].shape, 0, NULL);
    g->values[idx].flags |= IR_VALUE_CONST;
    g->values[idx].data = &zero;
    g->values[idx].data_bytes = 8;
    ir_vid m1 = add_const_i64(g, "m1", &minus1, 1);
    ir_vid r = add_node(g, IR_OP_RELU, "r", 1, &x);
    ir_vid shp = add_node(g, IR_OP_SHAPE, "shp", 1, &x);
    ir_vid gi[2] = {shp, idx};
    ir_vid n0 = add_node(g, IR_OP_GATHER, "n0", 2, gi);
    ir_vid n0u_in[2] = {n0, add_const_i64(g, "ax0", &zero, 1)};
    ir_vid n0u = add_node(g, IR_OP_UNSQUEEZE, "n0u", 2, n0u_in);
    ir_vid cc[2] = {n0u, m1};
    int32_t concat_node;
    ir_vid newshape = add_node(g, IR_OP_CONCAT, "newshape", 2, cc);
    concat_node = g->values[newshape].producer;
    ir_attr *attr = core_arena_alloc(g->arena, sizeof *attr);
    attr->name = "axis";
    attr->type = IR_ATTR_INT;
    attr->i = 0;
    g->nodes[concat_node].attrs = attr;
    g->nodes[concat_node].n_attrs = 1;
    ir_vid rs[2] = {r, newshape};
    ir_vid y = add_node(g, IR_OP_RESHAPE, "y", 2, rs);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    finish(g);
    /* at load time only the rank is known: the new shape's values need the batch */
    assert_int_equal(g->values[y].shape.rank, 2);

    rt_session_config cfg = {.threads = 1};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    int64_t batches[3] = {2, 7, 2};
    for (int k = 0; k < 3; k++) {
        int64_t d[3] = {batches[k], 3, 5};
        anvil_tensor *in = make_input(3, d, -10.0f);
        const anvil_tensor *ins[1] = {in};
        anvil_tensor *out[1];
        assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
        assert_int_equal(out[0]->rank, 2);
        assert_int_equal(out[0]->dims[0], batches[k]);
        assert_int_equal(out[0]->dims[1], 15);
        const float *yo = out[0]->data, *xi = in->data;
        for (int64_t i = 0; i < batches[k] * 15; i++)
            assert_true(yo[i] == (xi[i] > 0 ? xi[i] : 0.0f));
        anvil_session_stats st;
        assert_int_equal(rt_session_stats(s, &st), ANVIL_OK);
        assert_int_equal(st.plans_made, k == 0 ? 1 : 2);
        assert_int_equal(st.nodes_folded, 4); /* Shape, Gather, Unsqueeze, Concat */
        assert_int_equal(st.nodes_run, 1);    /* Relu; Reshape is an alias */
        free_tensor(in);
        free_tensor(out[0]);
    }
    rt_session_free(s);
    ir_graph_free(g);
}

/* y = Reshape(x, shape) with `shape` fed by the caller: the plan is keyed by its contents. */
static void test_shape_input_contents_key_the_plan(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t dims[1] = {12}, two[1] = {2};
    ir_vid x = add_input(g, "x", 1, dims, NULL);
    ir_vid shp = test_add_value(g, "shape");
    g->values[shp].dtype = ANVIL_DTYPE_INT64;
    ir_shape_set(&g->values[shp].shape, 1, two);
    assert_int_equal(ir_graph_add_input(g, shp), ANVIL_OK);
    ir_vid xs[2] = {x, shp};
    ir_vid y = add_node(g, IR_OP_RESHAPE, "y", 2, xs);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    finish(g);
    rt_session_config cfg = {.threads = 1};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    anvil_tensor *in = make_input(1, dims, 0.0f);
    int64_t targets[3][2] = {{3, 4}, {6, 2}, {3, 4}};
    for (int k = 0; k < 3; k++) {
        anvil_tensor *st;
        assert_int_equal(rt_tensor_new(ANVIL_DTYPE_INT64, 1, two, &st), ANVIL_OK);
        memcpy(st->data, targets[k], sizeof targets[k]);
        const anvil_tensor *ins[2] = {in, st};
        anvil_tensor *out[1];
        assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
        assert_int_equal(out[0]->dims[0], targets[k][0]);
        assert_int_equal(out[0]->dims[1], targets[k][1]);
        assert_true(((float *)out[0]->data)[11] == 11.0f);
        anvil_session_stats stats;
        assert_int_equal(rt_session_stats(s, &stats), ANVIL_OK);
        assert_int_equal(stats.plans_made, k == 0 ? 1 : 2);
        free_tensor(st);
        free_tensor(out[0]);
    }
    free_tensor(in);
    rt_session_free(s);
    ir_graph_free(g);
}

static void test_input_validation(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t dims[2] = {-1, 4};
    ir_vid x = add_input(g, "x", 2, dims, "N");
    ir_vid z = add_input(g, "z", 2, dims, "N");
    ir_vid xz[2] = {x, z};
    ir_vid y = add_node(g, IR_OP_ADD, "y", 2, xz);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    finish(g);
    rt_session_config cfg = {.threads = 1};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    anvil_tensor *out[1];

    int64_t d3[2] = {3, 4}, d5[2] = {5, 4}, bad[2] = {3, 5};
    anvil_tensor *a = make_input(2, d3, 0), *b = make_input(2, d5, 0), *c = make_input(2, bad, 0);
    const anvil_tensor *mismatch[2] = {a, b};
    assert_int_equal(rt_session_run(s, mismatch, NULL, out), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(core_err_message(), "symbolic dim 'N'"));
    const anvil_tensor *wrongdim[2] = {a, c};
    assert_int_equal(rt_session_run(s, wrongdim, NULL, out), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(core_err_message(), "input 'z' dim 1 must be 4"));
    const anvil_tensor *ok[2] = {a, a};
    assert_int_equal(rt_session_run(s, ok, NULL, out), ANVIL_OK);
    assert_true(((float *)out[0]->data)[5] == 10.0f);
    free_tensor(out[0]);
    free_tensor(a);
    free_tensor(b);
    free_tensor(c);
    rt_session_free(s);
    ir_graph_free(g);
}

/* Every row of the op table has an implementation (the registry links them weakly). */
static void test_every_op_implemented(void **state) {
    (void)state;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        const op_impl *impl = op_get((ir_op)op);
        if (!impl->infer || !impl->run) fail_msg("op %s has no implementation", ir_op_name(op));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_covers_range_once),
        cmocka_unit_test(test_inplace_chain_uses_one_buffer),
        cmocka_unit_test(test_reuse_respects_liveness),
        cmocka_unit_test(test_arena_slots),
        cmocka_unit_test(test_shape_chain_folds_and_plans_per_shape),
        cmocka_unit_test(test_shape_input_contents_key_the_plan),
        cmocka_unit_test(test_input_validation),
        cmocka_unit_test(test_every_op_implemented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
