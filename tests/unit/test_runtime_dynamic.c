/* Runtime: data-dependent shapes. NonZero, Compress, Unique and
 * NonMaxSuppression feed static ops (Reshape, Shape -> Gather -> Concat ->
 * Reshape on a computed tensor) and run as dynamic steps next to the static
 * plan; the same session handles inputs with different numbers of nonzeros.
 * Expected values are computed here independently. Memory of dynamic steps is
 * checked by ASan. */
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

static ir_node *producer(ir_graph *g, ir_vid v) {
    return &g->nodes[g->values[v].producer];
}

static void set_attr_int(ir_graph *g, ir_vid out, int k, const char *name, int64_t v) {
    ir_attr *a = &producer(g, out)->attrs[k];
    a->name = core_arena_strdup(g->arena, name);
    a->type = IR_ATTR_INT;
    a->i = v;
}

static ir_vid add_input(ir_graph *g, const char *name, anvil_dtype dt, int rank,
                        const int64_t *dims) {
    ir_vid x = test_add_value(g, name);
    g->values[x].dtype = dt;
    ir_shape_set(&g->values[x].shape, rank, dims);
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

static anvil_status finish(ir_graph *g) {
    anvil_status st = op_check_graph(g);
    if (st == ANVIL_OK) st = rt_infer_graph_static(g);
    if (st == ANVIL_OK) st = ir_graph_verify(g);
    return st;
}

static anvil_tensor *tensor_f32(int rank, const int64_t *dims, const float *vals) {
    anvil_tensor *t;
    assert_int_equal(rt_tensor_new(ANVIL_DTYPE_FLOAT32, rank, dims, &t), ANVIL_OK);
    if (t->bytes && vals) memcpy(t->data, vals, t->bytes);
    return t;
}

static void free_tensor(anvil_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t);
}

/* x[6] -> NonZero -> nz[1,n]; r = Reshape(nz, [-1]); s = Shape(nz); n =
 * Gather(s, [1]); y2 = Reshape(nz, Concat([1], n)) = [1,n]; z = Neg(x) stays a
 * static step. */
static void test_nonzero_reshape_chains(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t six = 6;
    static const int64_t minus1[1] = {-1}, idx1[1] = {1}, one[1] = {1};
    ir_vid x = add_input(g, "x", ANVIL_DTYPE_FLOAT32, 1, &six);
    ir_vid nz = test_add_node(g, IR_OP_NONZERO, "nz", 1, &x, 0);
    ir_vid flat[2] = {nz, add_const_i64(g, "minus1", minus1, 1)};
    ir_vid r = test_add_node(g, IR_OP_RESHAPE, "r", 2, flat, 0);
    ir_vid s = test_add_node(g, IR_OP_SHAPE, "s", 1, &nz, 0);
    ir_vid gi[2] = {s, add_const_i64(g, "idx1", idx1, 1)};
    ir_vid cnt = test_add_node(g, IR_OP_GATHER, "cnt", 2, gi, 0);
    ir_vid cc[2] = {add_const_i64(g, "one", one, 1), cnt};
    ir_vid shp = test_add_node(g, IR_OP_CONCAT, "shp", 2, cc, 1);
    set_attr_int(g, shp, 0, "axis", 0);
    ir_vid rs[2] = {nz, shp};
    ir_vid y2 = test_add_node(g, IR_OP_RESHAPE, "y2", 2, rs, 0);
    ir_vid z = test_add_node(g, IR_OP_NEG, "z", 1, &x, 0);
    assert_int_equal(ir_graph_add_output(g, r), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, y2), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, z), ANVIL_OK);
    assert_int_equal(finish(g), ANVIL_OK);
    /* load time: rank known, count unknown */
    assert_int_equal(g->values[nz].shape.rank, 2);
    assert_int_equal(g->values[nz].shape.d[0], 1);
    assert_true(g->values[nz].shape.d[1] < 0);

    rt_session_config cfg = {.threads = 2};
    rt_session *sess;
    assert_int_equal(rt_session_create(g, &cfg, &sess), ANVIL_OK);
    const float cases[3][6] = {{0, 1, 0, 2, 0, 3}, {1, 2, 3, 0, 5, 6}, {0, 0, 0, 0, 0, 0}};
    for (int c = 0; c < 3; c++) {
        anvil_tensor *in = tensor_f32(1, &six, cases[c]);
        const anvil_tensor *ins[1] = {in};
        anvil_tensor *out[3];
        assert_int_equal(rt_session_run(sess, ins, NULL, out), ANVIL_OK);
        int64_t want[6], n = 0;
        for (int i = 0; i < 6; i++)
            if (cases[c][i] != 0) want[n++] = i;
        assert_int_equal(out[0]->rank, 1);
        assert_int_equal(out[0]->dims[0], n);
        assert_int_equal(out[1]->rank, 2);
        assert_int_equal(out[1]->dims[0], 1);
        assert_int_equal(out[1]->dims[1], n);
        for (int64_t i = 0; i < n; i++) {
            assert_int_equal(((int64_t *)out[0]->data)[i], want[i]);
            assert_int_equal(((int64_t *)out[1]->data)[i], want[i]);
        }
        for (int i = 0; i < 6; i++) assert_true(((float *)out[2]->data)[i] == -cases[c][i]);
        for (int j = 0; j < 3; j++) free_tensor(out[j]);
        free_tensor(in);
    }
    rt_session_free(sess);
    ir_graph_free(g);
}

/* A one-node graph op(inputs) with all outputs returned; inputs given as
 * tensors. */
typedef struct one_node {
    ir_graph *g;
    int32_t k;
} one_node;

static void one_begin(one_node *t, ir_op op, int n_in, int n_out, int n_attrs) {
    assert_int_equal(ir_graph_create(NULL, &t->g), ANVIL_OK);
    t->g->opset = 17;
    assert_int_equal(ir_graph_add_node(t->g, op, "dyn_node", n_in, n_out, n_attrs, &t->k),
                     ANVIL_OK);
    for (int i = 0; i < n_out; i++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", i);
        ir_vid v = test_add_value(t->g, name);
        t->g->nodes[t->k].outputs[i] = v;
        t->g->values[v].producer = t->k;
        assert_int_equal(ir_graph_add_output(t->g, v), ANVIL_OK);
    }
}

static void one_input(one_node *t, int i, anvil_dtype dt, int rank, const int64_t *dims) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    ir_vid v = add_input(t->g, name, dt, rank, dims);
    t->g->nodes[t->k].inputs[i] = v;
}

static void one_attr_int(one_node *t, int k, const char *name, int64_t v) {
    ir_attr *a = &t->g->nodes[t->k].attrs[k];
    a->name = core_arena_strdup(t->g->arena, name);
    a->type = IR_ATTR_INT;
    a->i = v;
}

static anvil_status one_run(one_node *t, const anvil_tensor *const *ins, anvil_tensor **outs) {
    anvil_status st = finish(t->g);
    if (st != ANVIL_OK) return st;
    rt_session_config cfg = {.threads = 1};
    rt_session *s;
    st = rt_session_create(t->g, &cfg, &s);
    if (st != ANVIL_OK) return st;
    st = rt_session_run(s, ins, NULL, outs);
    rt_session_free(s);
    return st;
}

static anvil_tensor *tensor_bool(int64_t n, const bool *vals) {
    anvil_tensor *t;
    assert_int_equal(rt_tensor_new(ANVIL_DTYPE_BOOL, 1, &n, &t), ANVIL_OK);
    memcpy(t->data, vals, (size_t)n);
    return t;
}

static void test_compress_axis_and_errors(void **state) {
    (void)state;
    one_node t;
    int64_t xd[2] = {3, 2}, cd = 3;
    one_begin(&t, IR_OP_COMPRESS, 2, 1, 1);
    one_attr_int(&t, 0, "axis", 0);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, xd);
    one_input(&t, 1, ANVIL_DTYPE_BOOL, 1, &cd);
    const float xv[6] = {1, 2, 3, 4, 5, 6};
    anvil_tensor *x = tensor_f32(2, xd, xv);
    anvil_tensor *c = tensor_bool(3, (const bool[]){true, false, true});
    const anvil_tensor *ins[2] = {x, c};
    anvil_tensor *out[1] = {NULL};
    assert_int_equal(one_run(&t, ins, out), ANVIL_OK);
    assert_int_equal(out[0]->dims[0], 2);
    assert_int_equal(out[0]->dims[1], 2);
    const float want[4] = {1, 2, 5, 6};
    for (int i = 0; i < 4; i++) assert_true(((float *)out[0]->data)[i] == want[i]);
    free_tensor(out[0]);
    free_tensor(c);
    free_tensor(x);
    ir_graph_free(t.g);

    /* a condition longer than the axis is refused at run time, naming the node */
    int64_t cd4 = 4;
    one_begin(&t, IR_OP_COMPRESS, 2, 1, 1);
    one_attr_int(&t, 0, "axis", 0);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, xd);
    one_input(&t, 1, ANVIL_DTYPE_BOOL, 1, &cd4);
    x = tensor_f32(2, xd, xv);
    c = tensor_bool(4, (const bool[]){true, false, true, true});
    const anvil_tensor *ins2[2] = {x, c};
    assert_int_equal(one_run(&t, ins2, out), ANVIL_ERR_RUNTIME);
    assert_non_null(strstr(core_err_message(), "dyn_node"));
    assert_null(out[0]);
    free_tensor(c);
    free_tensor(x);
    ir_graph_free(t.g);

    /* axis out of range: a shape error at load */
    one_begin(&t, IR_OP_COMPRESS, 2, 1, 1);
    one_attr_int(&t, 0, "axis", 2);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, xd);
    one_input(&t, 1, ANVIL_DTYPE_BOOL, 1, &cd);
    assert_int_equal(finish(t.g), ANVIL_ERR_SHAPE);
    assert_non_null(strstr(core_err_message(), "axis"));
    ir_graph_free(t.g);

    /* condition of the wrong dtype */
    one_begin(&t, IR_OP_COMPRESS, 2, 1, 0);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, xd);
    one_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, &cd);
    assert_int_equal(finish(t.g), ANVIL_ERR_SHAPE);
    assert_non_null(strstr(core_err_message(), "condition"));
    ir_graph_free(t.g);
}

/* Unique of [2,1,2,3,1,2] unsorted and sorted: all four outputs, checked
 * against a brute-force computation here. */
static void unique_case(bool sorted) {
    one_node t;
    int64_t n = 6;
    const float xv[6] = {2, 1, 2, 3, 1, 2};
    one_begin(&t, IR_OP_UNIQUE, 1, 4, 1);
    one_attr_int(&t, 0, "sorted", sorted);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, &n);
    anvil_tensor *x = tensor_f32(1, &n, xv);
    const anvil_tensor *ins[1] = {x};
    anvil_tensor *out[4];
    assert_int_equal(one_run(&t, ins, out), ANVIL_OK);
    /* independent: first occurrences in order, then optionally sorted by value */
    float u[6];
    int64_t first[6], nu = 0;
    for (int i = 0; i < 6; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= xv[j] == xv[i];
        if (!seen) {
            u[nu] = xv[i];
            first[nu++] = i;
        }
    }
    for (int a = 0; sorted && a < nu; a++)
        for (int b = a + 1; b < nu; b++)
            if (u[b] < u[a]) {
                float tf = u[a];
                u[a] = u[b];
                u[b] = tf;
                int64_t ti = first[a];
                first[a] = first[b];
                first[b] = ti;
            }
    assert_int_equal(out[0]->dims[0], nu);
    for (int64_t k = 0; k < nu; k++) {
        assert_true(((float *)out[0]->data)[k] == u[k]);
        assert_int_equal(((int64_t *)out[1]->data)[k], first[k]);
        int64_t cnt = 0;
        for (int i = 0; i < 6; i++) cnt += xv[i] == u[k];
        assert_int_equal(((int64_t *)out[3]->data)[k], cnt);
    }
    assert_int_equal(out[2]->dims[0], 6);
    for (int i = 0; i < 6; i++)
        assert_true(((float *)out[0]->data)[((int64_t *)out[2]->data)[i]] == xv[i]);
    for (int j = 0; j < 4; j++) free_tensor(out[j]);
    free_tensor(x);
    ir_graph_free(t.g);
}

static void test_unique_outputs(void **state) {
    (void)state;
    unique_case(true);
    unique_case(false);
    one_node t;
    int64_t d[2] = {2, 2};
    one_begin(&t, IR_OP_UNIQUE, 1, 1, 1);
    one_attr_int(&t, 0, "axis", -3);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, d);
    assert_int_equal(finish(t.g), ANVIL_ERR_SHAPE);
    ir_graph_free(t.g);
}

/* Two classes, three boxes: box 1 overlaps box 0 heavily, box 2 is apart. */
static void test_nms_selects_and_validates(void **state) {
    (void)state;
    one_node t;
    int64_t bd[3] = {1, 3, 4}, sd[3] = {1, 2, 3}, one = 1;
    one_begin(&t, IR_OP_NONMAXSUPPRESSION, 4, 1, 0);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, bd);
    one_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, sd);
    one_input(&t, 2, ANVIL_DTYPE_INT64, 1, &one);
    one_input(&t, 3, ANVIL_DTYPE_FLOAT32, 1, &one);
    const float boxes[12] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6};
    const float scores[6] = {0.9f, 0.8f, 0.7f, 0.1f, 0.2f, 0.95f};
    anvil_tensor *b = tensor_f32(3, bd, boxes), *s = tensor_f32(3, sd, scores);
    anvil_tensor *m, *iou;
    assert_int_equal(rt_tensor_new(ANVIL_DTYPE_INT64, 1, &one, &m), ANVIL_OK);
    ((int64_t *)m->data)[0] = 2;
    iou = tensor_f32(1, &one, (const float[]){0.5f});
    const anvil_tensor *ins[4] = {b, s, m, iou};
    anvil_tensor *out[1];
    assert_int_equal(one_run(&t, ins, out), ANVIL_OK);
    /* class 0: 0 (0.9), 1 suppressed (IoU 0.82), 2 kept; class 1: 2 (0.95), then
     * 1 (0.2) */
    const int64_t want[4][3] = {{0, 0, 0}, {0, 0, 2}, {0, 1, 2}, {0, 1, 1}};
    assert_int_equal(out[0]->dims[0], 4);
    assert_int_equal(out[0]->dims[1], 3);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            assert_int_equal(((int64_t *)out[0]->data)[i * 3 + j], want[i][j]);
    free_tensor(out[0]);
    free_tensor(b);
    free_tensor(s);
    free_tensor(m);
    free_tensor(iou);
    ir_graph_free(t.g);

    /* boxes of rank 2 */
    int64_t bad[2] = {3, 4};
    one_begin(&t, IR_OP_NONMAXSUPPRESSION, 2, 1, 0);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, bad);
    one_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, sd);
    assert_int_equal(finish(t.g), ANVIL_ERR_SHAPE);
    assert_non_null(strstr(core_err_message(), "boxes"));
    ir_graph_free(t.g);
}

/* NonZero of a scalar-free bool tensor with zero-size dims gives [rank, 0]. */
static void test_nonzero_zero_size(void **state) {
    (void)state;
    one_node t;
    int64_t d[2] = {0, 3};
    one_begin(&t, IR_OP_NONZERO, 1, 1, 0);
    one_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, d);
    anvil_tensor *x = tensor_f32(2, d, NULL);
    const anvil_tensor *ins[1] = {x};
    anvil_tensor *out[1];
    assert_int_equal(one_run(&t, ins, out), ANVIL_OK);
    assert_int_equal(out[0]->dims[0], 2);
    assert_int_equal(out[0]->dims[1], 0);
    free_tensor(out[0]);
    free_tensor(x);
    ir_graph_free(t.g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonzero_reshape_chains),
        cmocka_unit_test(test_compress_axis_and_errors),
        cmocka_unit_test(test_unique_outputs),
        cmocka_unit_test(test_nms_selects_and_validates),
        cmocka_unit_test(test_nonzero_zero_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
