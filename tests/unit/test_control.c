/* Control flow: Loop with a trip count fed by the caller (different counts in one session, zero
 * included), loop-carried values and scan outputs, a body reading a main-graph value; If whose
 * branches give different shapes; a Loop inside an If inside a Loop reading values two levels
 * up; a loop-carried value that changes shape, which must fail naming the node; Loop and Scan
 * bodies whose inputs carry no type, which load time types from the node; and an If whose
 * branch multiplies by the main graph's constant weights. Graphs are built with the IR API;
 * expected values are computed here. Every test runs twice: at opt level 0, where the
 * interpreter runs the bodies, and at level 2, where they run compiled (src/runtime/subgraph.c);
 * the session's counters must say which ran. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The opt level a test runs at: its cmocka state (NULL: 0). */
static int level(void **state) {
    return *state ? *(const int *)*state : 0;
}

/* After s ran bodies `runs` times in all: they ran compiled at level >= 1 (unless `interpreted`
 * says a body must fall back), through the interpreter at level 0. */
static void check_runs(const rt_session *s, void **state, bool interpreted) {
    anvil_session_stats st;
    assert_int_equal(rt_session_stats(s, &st), ANVIL_OK);
    if (level(state) == 0 || interpreted) {
        assert_true(st.subgraph_runs_interpreted > 0);
        if (level(state) == 0) assert_int_equal(st.subgraph_runs_compiled, 0);
    } else {
        assert_true(st.subgraph_runs_compiled > 0);
        assert_int_equal(st.subgraph_runs_interpreted, 0);
    }
}

static ir_vid add_value(ir_graph *g, const char *name, anvil_dtype dt, int rank,
                        const int64_t *dims) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    g->values[v].dtype = dt;
    if (rank >= 0) ir_shape_set(&g->values[v].shape, rank, dims);
    return v;
}

static ir_vid add_input(ir_graph *g, const char *name, anvil_dtype dt, int rank,
                        const int64_t *dims) {
    ir_vid v = add_value(g, name, dt, rank, dims);
    assert_int_equal(ir_graph_add_input(g, v), ANVIL_OK);
    return v;
}

/* a reference from subgraph g to the enclosing graph's value `name` */
static ir_vid add_outer(ir_graph *g, const char *name) {
    ir_vid v = add_value(g, name, ANVIL_DTYPE_UNDEFINED, -1, NULL);
    g->values[v].flags = IR_VALUE_OUTER;
    return v;
}

/* node op(ins) -> outs (new values named by out_names); returns the node index */
static int32_t add_node(ir_graph *g, ir_op op, const char *name, int n_in, const ir_vid *ins,
                        int n_out, const char *const *out_names, ir_vid *outs, int n_attrs) {
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, op, name, n_in, n_out, n_attrs, &k), ANVIL_OK);
    for (int i = 0; i < n_out; i++) {
        ir_vid v = IR_NONE;
        if (out_names[i]) {
            v = add_value(g, out_names[i], ANVIL_DTYPE_UNDEFINED, -1, NULL);
            g->values[v].producer = k;
        }
        g->nodes[k].outputs[i] = v;
        if (outs) outs[i] = v;
    }
    for (int i = 0; i < n_in; i++) g->nodes[k].inputs[i] = ins[i];
    return k;
}

static ir_vid add1(ir_graph *g, ir_op op, const char *out, int n_in, const ir_vid *ins) {
    ir_vid y;
    add_node(g, op, out, n_in, ins, 1, (const char *const[]){out}, &y, 0);
    return y;
}

static void attr_graph(ir_graph *g, int32_t k, int slot, const char *name, ir_graph *sub) {
    ir_attr *a = &g->nodes[k].attrs[slot];
    a->name = core_arena_strdup(g->arena, name);
    a->type = IR_ATTR_GRAPH;
    a->g = sub;
}

static anvil_status finish(ir_graph *g) {
    anvil_status st = op_check_graph(g);
    if (st == ANVIL_OK) st = rt_infer_graph_static(g);
    if (st == ANVIL_OK) st = ir_graph_verify(g);
    return st;
}

static anvil_tensor *tensor(anvil_dtype dt, int rank, const int64_t *dims, const void *vals) {
    anvil_tensor *t;
    assert_int_equal(rt_tensor_new(dt, rank, dims, &t), ANVIL_OK);
    if (t->bytes && vals) memcpy(t->data, vals, t->bytes);
    return t;
}

static void free_tensor(anvil_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t);
}

/* Loop body: (iter, cond, acc) -> (cond, acc + w, acc + w); w is read from the main graph.
 * With double_acc the carried value is Concat(acc, acc) instead: its shape changes. */
static ir_graph *loop_body(ir_graph *parent, const char *w_name, bool double_acc) {
    ir_graph *b;
    assert_int_equal(ir_graph_create(parent, &b), ANVIL_OK);
    int64_t two = 2;
    ir_vid it = add_input(b, "iter", ANVIL_DTYPE_INT64, 0, NULL);
    ir_vid c = add_input(b, "cond_in", ANVIL_DTYPE_BOOL, 0, NULL);
    ir_vid acc = add_input(b, "acc", ANVIL_DTYPE_FLOAT32, 1, &two);
    (void)it;
    ir_vid w = add_outer(b, w_name);
    ir_vid co = add1(b, IR_OP_IDENTITY, "cond_out", 1, &c);
    ir_vid nxt;
    if (double_acc) {
        int32_t k = add_node(b, IR_OP_CONCAT, "cat", 2, (ir_vid[]){acc, acc}, 1,
                             (const char *const[]){"acc_out"}, &nxt, 1);
        ir_attr *a = &b->nodes[k].attrs[0];
        a->name = core_arena_strdup(b->arena, "axis");
        a->type = IR_ATTR_INT;
        a->i = 0;
    } else {
        nxt = add1(b, IR_OP_ADD, "acc_out", 2, (ir_vid[]){acc, w});
    }
    ir_vid sc = add1(b, IR_OP_IDENTITY, "scan", 1, &nxt);
    assert_int_equal(ir_graph_add_output(b, co), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(b, nxt), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(b, sc), ANVIL_OK);
    return b;
}

/* main: M (int64 scalar), init [2], w [2] -> Loop(M, , init) -> final [2], scans [M, 2] */
static ir_graph *loop_graph(bool double_acc) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t two = 2;
    ir_vid m = add_input(g, "M", ANVIL_DTYPE_INT64, 0, NULL);
    ir_vid init = add_input(g, "init", ANVIL_DTYPE_FLOAT32, 1, &two);
    add_input(g, "w", ANVIL_DTYPE_FLOAT32, 1, &two);
    ir_vid outs[2];
    int32_t k = add_node(g, IR_OP_LOOP, "the_loop", 3, (ir_vid[]){m, IR_NONE, init}, 2,
                         (const char *const[]){"final", "scans"}, outs, 1);
    attr_graph(g, k, 0, "body", loop_body(g, "w", double_acc));
    assert_int_equal(ir_graph_add_output(g, outs[0]), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, outs[1]), ANVIL_OK);
    return g;
}

static void test_loop_trip_count_from_input(void **state) {
    ir_graph *g = loop_graph(false);
    assert_int_equal(finish(g), ANVIL_OK);
    /* load time typed the body's values and the Loop's outputs */
    assert_int_equal(g->values[g->outputs[1]].dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(g->values[g->outputs[1]].shape.rank, 2);
    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    int64_t two = 2;
    const float init[2] = {1.0f, -2.0f}, w[2] = {0.5f, 3.0f};
    anvil_tensor *ti = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, init);
    anvil_tensor *tw = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, w);
    const int64_t counts[3] = {3, 5, 0};
    for (int c = 0; c < 3; c++) {
        anvil_tensor *tm = tensor(ANVIL_DTYPE_INT64, 0, NULL, &counts[c]);
        const anvil_tensor *ins[3] = {tm, ti, tw};
        anvil_tensor *out[2];
        assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
        int64_t m = counts[c];
        assert_int_equal(out[0]->rank, 1);
        for (int j = 0; j < 2; j++)
            assert_true(fabsf(((float *)out[0]->data)[j] - (init[j] + (float)m * w[j])) < 1e-5f);
        assert_int_equal(out[1]->rank, 2);
        assert_int_equal(out[1]->dims[0], m);
        assert_int_equal(out[1]->dims[1], 2);
        for (int64_t r = 0; r < m; r++)
            for (int j = 0; j < 2; j++)
                assert_true(fabsf(((float *)out[1]->data)[r * 2 + j] -
                                  (init[j] + (float)(r + 1) * w[j])) < 1e-5f);
        free_tensor(out[0]);
        free_tensor(out[1]);
        free_tensor(tm);
    }
    free_tensor(ti);
    free_tensor(tw);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);
}

static void test_loop_carried_shape_change_fails(void **state) {
    ir_graph *g = loop_graph(true);
    assert_int_equal(finish(g), ANVIL_OK);
    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    int64_t two = 2, m = 2;
    const float v[2] = {1, 2};
    anvil_tensor *tm = tensor(ANVIL_DTYPE_INT64, 0, NULL, &m);
    anvil_tensor *ti = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, v);
    anvil_tensor *tw = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, v);
    const anvil_tensor *ins[3] = {tm, ti, tw};
    anvil_tensor *out[2] = {NULL, NULL};
    assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_ERR_RUNTIME);
    assert_non_null(strstr(core_err_message(), "the_loop"));
    assert_non_null(strstr(core_err_message(), "loop-carried"));
    assert_null(out[0]);
    assert_null(out[1]);
    free_tensor(tm);
    free_tensor(ti);
    free_tensor(tw);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);
}

/* If(c): then gives a [3], else b [2,2] (both main-graph inputs read from the branches). */
static void test_if_branches_differ_in_shape(void **state) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t three = 3, d22[2] = {2, 2};
    ir_vid c = add_input(g, "c", ANVIL_DTYPE_BOOL, 0, NULL);
    add_input(g, "a", ANVIL_DTYPE_FLOAT32, 1, &three);
    add_input(g, "b", ANVIL_DTYPE_FLOAT32, 2, d22);
    ir_vid y;
    int32_t k = add_node(g, IR_OP_IF, "the_if", 1, &c, 1, (const char *const[]){"y"}, &y, 2);
    ir_graph *br[2];
    const char *src[2] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ir_graph_create(g, &br[i]), ANVIL_OK);
        ir_vid o = add_outer(br[i], src[i]);
        ir_vid r = add1(br[i], IR_OP_NEG, i ? "else_out" : "then_out", 1, &o);
        assert_int_equal(ir_graph_add_output(br[i], r), ANVIL_OK);
    }
    attr_graph(g, k, 0, "then_branch", br[0]);
    attr_graph(g, k, 1, "else_branch", br[1]);
    ir_vid z = add1(g, IR_OP_ABS, "z", 1, &y);
    assert_int_equal(ir_graph_add_output(g, z), ANVIL_OK);
    assert_int_equal(finish(g), ANVIL_OK);
    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    const float av[3] = {1, -2, 3}, bv[4] = {-4, 5, -6, 7};
    anvil_tensor *ta = tensor(ANVIL_DTYPE_FLOAT32, 1, &three, av);
    anvil_tensor *tb = tensor(ANVIL_DTYPE_FLOAT32, 2, d22, bv);
    for (int pass = 0; pass < 2; pass++) {
        bool cv = pass == 0;
        anvil_tensor *tc = tensor(ANVIL_DTYPE_BOOL, 0, NULL, &cv);
        const anvil_tensor *ins[3] = {tc, ta, tb};
        anvil_tensor *out[1];
        assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
        const float *want = cv ? av : bv;
        int n = cv ? 3 : 4;
        assert_int_equal(out[0]->rank, cv ? 1 : 2);
        for (int i = 0; i < n; i++) assert_true(((float *)out[0]->data)[i] == fabsf(want[i]));
        free_tensor(out[0]);
        free_tensor(tc);
    }
    free_tensor(ta);
    free_tensor(tb);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);

    /* a float condition is refused at load */
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    c = add_input(g, "c", ANVIL_DTYPE_FLOAT32, 0, NULL);
    add_input(g, "a", ANVIL_DTYPE_FLOAT32, 1, &three);
    k = add_node(g, IR_OP_IF, "bad_if", 1, &c, 1, (const char *const[]){"y"}, &y, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ir_graph_create(g, &br[i]), ANVIL_OK);
        ir_vid o = add_outer(br[i], "a");
        ir_vid r = add1(br[i], IR_OP_NEG, "out", 1, &o);
        assert_int_equal(ir_graph_add_output(br[i], r), ANVIL_OK);
    }
    attr_graph(g, k, 0, "then_branch", br[0]);
    attr_graph(g, k, 1, "else_branch", br[1]);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(finish(g), ANVIL_ERR_SHAPE);
    assert_non_null(strstr(core_err_message(), "bad_if"));
    ir_graph_free(g);
}

/* Loop(M) { If(flag) { Loop(M) {acc += w} } else { Identity(acc) } }: the inner body reads w
 * from the main graph three levels up. With flag, final = init + M*M*w. */
static void test_nested_loop_if_loop(void **state) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t two = 2;
    ir_vid m = add_input(g, "M", ANVIL_DTYPE_INT64, 0, NULL);
    ir_vid init = add_input(g, "init", ANVIL_DTYPE_FLOAT32, 1, &two);
    add_input(g, "w", ANVIL_DTYPE_FLOAT32, 1, &two);
    add_input(g, "flag", ANVIL_DTYPE_BOOL, 0, NULL);
    ir_vid outs[2];
    int32_t k = add_node(g, IR_OP_LOOP, "outer", 3, (ir_vid[]){m, IR_NONE, init}, 1,
                         (const char *const[]){"final"}, outs, 1);
    /* outer body: (i, cond, acc) -> (cond, If(flag)) */
    ir_graph *ob;
    assert_int_equal(ir_graph_create(g, &ob), ANVIL_OK);
    add_input(ob, "i", ANVIL_DTYPE_INT64, 0, NULL);
    ir_vid oc = add_input(ob, "oc", ANVIL_DTYPE_BOOL, 0, NULL);
    add_input(ob, "oacc", ANVIL_DTYPE_FLOAT32, 1, &two);
    ir_vid flag = add_outer(ob, "flag");
    ir_vid om = add_outer(ob, "M");
    add_outer(ob, "w");
    ir_vid oco = add1(ob, IR_OP_IDENTITY, "oc_out", 1, &oc);
    ir_vid iy;
    int32_t ki = add_node(ob, IR_OP_IF, "mid_if", 1, &flag, 1, (const char *const[]){"iy"}, &iy, 2);
    /* then: inner Loop(M, , oacc) with body acc + w */
    ir_graph *th, *el;
    assert_int_equal(ir_graph_create(ob, &th), ANVIL_OK);
    ir_vid tm = add_outer(th, "M");
    ir_vid tacc = add_outer(th, "oacc");
    add_outer(th, "w");
    ir_vid tout[2];
    int32_t kl = add_node(th, IR_OP_LOOP, "inner", 3, (ir_vid[]){tm, IR_NONE, tacc}, 2,
                          (const char *const[]){"inner_final", "inner_scan"}, tout, 1);
    attr_graph(th, kl, 0, "body", loop_body(th, "w", false));
    assert_int_equal(ir_graph_add_output(th, tout[0]), ANVIL_OK);
    assert_int_equal(ir_graph_create(ob, &el), ANVIL_OK);
    ir_vid eacc = add_outer(el, "oacc");
    ir_vid eo = add1(el, IR_OP_IDENTITY, "else_out", 1, &eacc);
    assert_int_equal(ir_graph_add_output(el, eo), ANVIL_OK);
    attr_graph(ob, ki, 0, "then_branch", th);
    attr_graph(ob, ki, 1, "else_branch", el);
    (void)om;
    assert_int_equal(ir_graph_add_output(ob, oco), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(ob, iy), ANVIL_OK);
    attr_graph(g, k, 0, "body", ob);
    assert_int_equal(ir_graph_add_output(g, outs[0]), ANVIL_OK);
    assert_int_equal(finish(g), ANVIL_OK);

    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    const float iv[2] = {1, 2}, wv[2] = {0.25f, -1};
    anvil_tensor *ti = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, iv);
    anvil_tensor *tw = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, wv);
    for (int pass = 0; pass < 2; pass++) {
        int64_t mv = 3;
        bool fv = pass == 0;
        anvil_tensor *tmm = tensor(ANVIL_DTYPE_INT64, 0, NULL, &mv);
        anvil_tensor *tf = tensor(ANVIL_DTYPE_BOOL, 0, NULL, &fv);
        const anvil_tensor *ins[4] = {tmm, ti, tw, tf};
        anvil_tensor *out[1];
        assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
        for (int j = 0; j < 2; j++) {
            float want = iv[j] + (fv ? (float)(mv * mv) * wv[j] : 0.0f);
            assert_true(fabsf(((float *)out[0]->data)[j] - want) < 1e-5f);
        }
        free_tensor(out[0]);
        free_tensor(tmm);
        free_tensor(tf);
    }
    free_tensor(ti);
    free_tensor(tw);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);
}

/* The model may leave body inputs untyped (ONNX allows it): load time must type them from the
 * node, here iteration_num INT64 scalar, cond BOOL scalar and the carried value FLOAT32 [?], and
 * the loop must then run as with declared types. */
static void test_loop_untyped_body_inputs(void **state) {
    ir_graph *g = loop_graph(false);
    ir_graph *body = NULL;
    for (int32_t k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].op == IR_OP_LOOP) body = g->nodes[k].attrs[0].g;
    assert_non_null(body);
    for (int i = 0; i < body->n_inputs; i++) {
        ir_value *v = &body->values[body->inputs[i]];
        v->dtype = ANVIL_DTYPE_UNDEFINED;
        ir_shape_unknown(&v->shape);
    }
    assert_int_equal(finish(g), ANVIL_OK);
    const ir_value *it = &body->values[body->inputs[0]], *c = &body->values[body->inputs[1]],
                   *acc = &body->values[body->inputs[2]];
    assert_int_equal(it->dtype, ANVIL_DTYPE_INT64);
    assert_int_equal(it->shape.rank, 0);
    assert_int_equal(c->dtype, ANVIL_DTYPE_BOOL);
    assert_int_equal(c->shape.rank, 0);
    assert_int_equal(acc->dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(acc->shape.rank, 1);
    assert_int_equal(g->values[g->outputs[0]].dtype, ANVIL_DTYPE_FLOAT32);
    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    int64_t two = 2, m = 4;
    const float init[2] = {2.0f, 1.0f}, w[2] = {-1.5f, 0.25f};
    anvil_tensor *ti = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, init);
    anvil_tensor *tw = tensor(ANVIL_DTYPE_FLOAT32, 1, &two, w);
    anvil_tensor *tm = tensor(ANVIL_DTYPE_INT64, 0, NULL, &m);
    const anvil_tensor *ins[3] = {tm, ti, tw};
    anvil_tensor *out[2];
    assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
    for (int j = 0; j < 2; j++)
        assert_true(fabsf(((float *)out[0]->data)[j] - (init[j] + (float)m * w[j])) < 1e-5f);
    free_tensor(out[0]);
    free_tensor(out[1]);
    free_tensor(tm);
    free_tensor(ti);
    free_tensor(tw);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);
}

/* Scan whose body inputs are untyped: the state takes the state input's type (FLOAT32 [3]) and
 * the scan input's slice is X [3, 2] without its scan axis 1, so also [3]. The body adds each
 * column of X into the state; the final state is checked against sums computed here. */
static void test_scan_untyped_body_inputs(void **state) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t three = 3, xd[2] = {3, 2};
    ir_vid s0 = add_input(g, "s0", ANVIL_DTYPE_FLOAT32, 1, &three);
    ir_vid x = add_input(g, "x", ANVIL_DTYPE_FLOAT32, 2, xd);
    ir_vid outs[2];
    int32_t k = add_node(g, IR_OP_SCAN, "the_scan", 2, (ir_vid[]){s0, x}, 2,
                         (const char *const[]){"s_final", "s_all"}, outs, 3);
    ir_graph *b;
    assert_int_equal(ir_graph_create(g, &b), ANVIL_OK);
    ir_vid bs = add_input(b, "s", ANVIL_DTYPE_UNDEFINED, -1, NULL);
    ir_vid bx = add_input(b, "xs", ANVIL_DTYPE_UNDEFINED, -1, NULL);
    ir_vid sum = add1(b, IR_OP_ADD, "sum", 2, (ir_vid[]){bs, bx});
    ir_vid cp = add1(b, IR_OP_IDENTITY, "sum_copy", 1, &sum);
    assert_int_equal(ir_graph_add_output(b, sum), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(b, cp), ANVIL_OK);
    attr_graph(g, k, 0, "body", b);
    ir_attr *a = &g->nodes[k].attrs[1];
    a->name = core_arena_strdup(g->arena, "num_scan_inputs");
    a->type = IR_ATTR_INT;
    a->i = 1;
    static const int64_t axes[1] = {1};
    a = &g->nodes[k].attrs[2];
    a->name = core_arena_strdup(g->arena, "scan_input_axes");
    a->type = IR_ATTR_INTS;
    a->ints = axes;
    a->n = 1;
    assert_int_equal(ir_graph_add_output(g, outs[0]), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, outs[1]), ANVIL_OK);
    assert_int_equal(finish(g), ANVIL_OK);
    const ir_value *vs = &b->values[b->inputs[0]], *vx = &b->values[b->inputs[1]];
    assert_int_equal(vs->dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(vs->shape.rank, 1);
    assert_int_equal(vs->shape.d[0], 3);
    assert_int_equal(vx->dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(vx->shape.rank, 1);
    assert_int_equal(vx->shape.d[0], 3);
    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    const float sv[3] = {1.0f, 2.0f, 3.0f}, xv[6] = {0.5f, 1.0f, -1.0f, 2.0f, 4.0f, 0.25f};
    anvil_tensor *ts = tensor(ANVIL_DTYPE_FLOAT32, 1, &three, sv);
    anvil_tensor *tx = tensor(ANVIL_DTYPE_FLOAT32, 2, xd, xv);
    const anvil_tensor *ins[2] = {ts, tx};
    anvil_tensor *out[2];
    assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
    for (int i = 0; i < 3; i++)
        assert_true(fabsf(((float *)out[0]->data)[i] - (sv[i] + xv[i * 2] + xv[i * 2 + 1])) <
                    1e-5f);
    free_tensor(out[0]);
    free_tensor(out[1]);
    free_tensor(ts);
    free_tensor(tx);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);
}

enum { R = 5, K = 24, N = 24 };
static float wv[K * N];

/* If(c): then relu(x @ W) with W [K, N] a constant of the main graph, else x. x is [R, K], or
 * of any shape when `any_x`. */
static ir_graph *if_matmul_graph(bool any_x) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t xd[2] = {R, K}, wd[2] = {K, N};
    ir_vid c = add_input(g, "c", ANVIL_DTYPE_BOOL, 0, NULL);
    add_input(g, "x", ANVIL_DTYPE_FLOAT32, any_x ? -1 : 2, xd);
    for (int i = 0; i < K * N; i++) wv[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    ir_vid w = add_value(g, "W", ANVIL_DTYPE_FLOAT32, 2, wd);
    g->values[w].flags = IR_VALUE_CONST;
    g->values[w].data = wv;
    g->values[w].data_bytes = sizeof wv;
    ir_vid y;
    int32_t k = add_node(g, IR_OP_IF, "the_if", 1, &c, 1, (const char *const[]){"y"}, &y, 2);
    ir_graph *th, *el;
    assert_int_equal(ir_graph_create(g, &th), ANVIL_OK);
    ir_vid tx = add_outer(th, "x"), tw = add_outer(th, "W");
    ir_vid mm = add1(th, IR_OP_MATMUL, "mm", 2, (ir_vid[]){tx, tw});
    ir_vid r = add1(th, IR_OP_RELU, "then_out", 1, &mm);
    assert_int_equal(ir_graph_add_output(th, r), ANVIL_OK);
    assert_int_equal(ir_graph_create(g, &el), ANVIL_OK);
    ir_vid ex = add_outer(el, "x");
    ir_vid eo = add1(el, IR_OP_IDENTITY, "else_out", 1, &ex);
    assert_int_equal(ir_graph_add_output(el, eo), ANVIL_OK);
    attr_graph(g, k, 0, "then_branch", th);
    attr_graph(g, k, 1, "else_branch", el);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(finish(g), ANVIL_OK);
    return g;
}

/* The compiled branch must see W as a constant (so its MatMul can pack it once) and give the
 * interpreter's numbers. */
static void test_if_reads_outer_constant(void **state) {
    ir_graph *g = if_matmul_graph(false);
    int64_t xd[2] = {R, K};
    rt_session_config cfg = {.threads = 2, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    float xv[R * K];
    for (int i = 0; i < R * K; i++) xv[i] = (float)((i * 5) % 11) / 11.0f - 0.4f;
    anvil_tensor *tx_in = tensor(ANVIL_DTYPE_FLOAT32, 2, xd, xv);
    for (int pass = 0; pass < 4; pass++) {
        bool cv = pass % 2 == 0;
        anvil_tensor *tc = tensor(ANVIL_DTYPE_BOOL, 0, NULL, &cv);
        const anvil_tensor *ins[2] = {tc, tx_in};
        anvil_tensor *out[1];
        assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
        assert_int_equal(out[0]->dims[1], cv ? N : K);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < (cv ? N : K); j++) {
                float want = xv[i * K + j];
                if (cv) {
                    double acc = 0;
                    for (int q = 0; q < K; q++) acc += (double)xv[i * K + q] * wv[q * N + j];
                    want = acc > 0 ? (float)acc : 0.0f;
                }
                assert_true(fabsf(((float *)out[0]->data)[i * (cv ? N : K) + j] - want) < 1e-4f);
            }
        free_tensor(out[0]);
        free_tensor(tc);
    }
    free_tensor(tx_in);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);
}

/* A branch whose inputs its plan rejects (x [R, K + 1] against W [K, N]) fails the run with
 * the MatMul's shape error, compiled or interpreted, and the session goes on serving good
 * inputs, compiled again at level >= 1. */
static void test_if_bad_input_fails_cleanly(void **state) {
    ir_graph *g = if_matmul_graph(true);
    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    bool cv = true;
    anvil_tensor *tc = tensor(ANVIL_DTYPE_BOOL, 0, NULL, &cv);
    for (int pass = 0; pass < 3; pass++) {
        bool bad = pass == 1;
        int64_t xd[2] = {R, bad ? K + 1 : K};
        anvil_tensor *tx = tensor(ANVIL_DTYPE_FLOAT32, 2, xd, NULL);
        const anvil_tensor *ins[2] = {tc, tx};
        anvil_tensor *out[1] = {NULL};
        anvil_status st = rt_session_run(s, ins, NULL, out);
        if (bad) {
            assert_int_equal(st, ANVIL_ERR_SHAPE);
            assert_non_null(strstr(core_err_message(), "mm"));
            assert_null(out[0]);
        } else {
            assert_int_equal(st, ANVIL_OK);
            assert_int_equal(out[0]->dims[1], N);
            free_tensor(out[0]);
        }
        free_tensor(tx);
    }
    free_tensor(tc);
    /* compiled: the two good runs; the bad one's plan failed, and the interpreter tried it */
    anvil_session_stats st;
    assert_int_equal(rt_session_stats(s, &st), ANVIL_OK);
    assert_int_equal(st.subgraph_runs_compiled, level(state) ? 2 : 0);
    assert_int_equal(st.subgraph_runs_interpreted, level(state) ? 1 : 3);
    rt_session_free(s);
    ir_graph_free(g);
}

/* If(c) whose then-branch holds If(Size(x) == 4) ? -x : |x|. Compiled for a given x, the inner
 * condition is a constant: the inner If must be gone from the body's plan (its branch spliced
 * in, inline_if.c), and each length of x must take its own branch. */
typedef struct scoped_ops {
    bool inner_if, neg, abs;
} scoped_ops;

static void note_scoped(void *arg, const rt_step_info *info) {
    scoped_ops *o = arg;
    if (!info->scope) return;
    o->inner_if |= !strcmp(info->op, "If");
    o->neg |= !strcmp(info->op, "Neg");
    o->abs |= !strcmp(info->op, "Abs");
}

static void test_if_known_condition_inlined(void **state) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    static const int64_t four = 4;
    ir_vid c = add_input(g, "c", ANVIL_DTYPE_BOOL, 0, NULL);
    add_input(g, "x", ANVIL_DTYPE_FLOAT32, -1, NULL);
    ir_vid f = add_value(g, "four", ANVIL_DTYPE_INT64, 0, NULL);
    g->values[f].flags = IR_VALUE_CONST;
    g->values[f].data = &four;
    g->values[f].data_bytes = sizeof four;
    ir_vid y;
    int32_t k = add_node(g, IR_OP_IF, "the_if", 1, &c, 1, (const char *const[]){"y"}, &y, 2);
    ir_graph *th, *el, *t2, *e2;
    assert_int_equal(ir_graph_create(g, &th), ANVIL_OK);
    ir_vid tx = add_outer(th, "x"), tf = add_outer(th, "four");
    ir_vid sz = add1(th, IR_OP_SIZE, "size", 1, &tx);
    ir_vid eq = add1(th, IR_OP_EQUAL, "is_four", 2, (ir_vid[]){sz, tf});
    ir_vid iy;
    int32_t ki = add_node(th, IR_OP_IF, "inner_if", 1, &eq, 1, (const char *const[]){"iy"}, &iy, 2);
    assert_int_equal(ir_graph_create(th, &t2), ANVIL_OK);
    ir_vid t2x = add_outer(t2, "x");
    assert_int_equal(ir_graph_add_output(t2, add1(t2, IR_OP_NEG, "neg", 1, &t2x)), ANVIL_OK);
    assert_int_equal(ir_graph_create(th, &e2), ANVIL_OK);
    ir_vid e2x = add_outer(e2, "x");
    assert_int_equal(ir_graph_add_output(e2, add1(e2, IR_OP_ABS, "abs", 1, &e2x)), ANVIL_OK);
    attr_graph(th, ki, 0, "then_branch", t2);
    attr_graph(th, ki, 1, "else_branch", e2);
    assert_int_equal(ir_graph_add_output(th, iy), ANVIL_OK);
    assert_int_equal(ir_graph_create(g, &el), ANVIL_OK);
    ir_vid ex = add_outer(el, "x");
    assert_int_equal(ir_graph_add_output(el, add1(el, IR_OP_IDENTITY, "same", 1, &ex)), ANVIL_OK);
    attr_graph(g, k, 0, "then_branch", th);
    attr_graph(g, k, 1, "else_branch", el);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(finish(g), ANVIL_OK);

    rt_session_config cfg = {.threads = 1, .opt_level = level(state)};
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    bool cv = true;
    anvil_tensor *tc = tensor(ANVIL_DTYPE_BOOL, 0, NULL, &cv);
    const float xv[4] = {-1.5f, 2, -3, 4};
    for (int64_t len = 4; len >= 3; len--) {
        anvil_tensor *tx_in = tensor(ANVIL_DTYPE_FLOAT32, 1, &len, xv);
        const anvil_tensor *ins[2] = {tc, tx_in};
        anvil_tensor *out[1];
        assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
        for (int64_t i = 0; i < len; i++)
            assert_true(((float *)out[0]->data)[i] == (len == 4 ? -xv[i] : fabsf(xv[i])));
        if (level(state)) {
            scoped_ops o = {0};
            assert_int_equal(rt_session_explain(s, note_scoped, &o), ANVIL_OK);
            assert_false(o.inner_if);
            assert_true(len == 4 ? o.neg && !o.abs : o.abs && !o.neg);
        }
        free_tensor(out[0]);
        free_tensor(tx_in);
    }
    free_tensor(tc);
    check_runs(s, state, false);
    rt_session_free(s);
    ir_graph_free(g);
}

int main(void) {
    static int interpreted = 0, compiled = 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_loop_trip_count_from_input, &interpreted),
        cmocka_unit_test_prestate(test_loop_trip_count_from_input, &compiled),
        cmocka_unit_test_prestate(test_loop_carried_shape_change_fails, &interpreted),
        cmocka_unit_test_prestate(test_loop_carried_shape_change_fails, &compiled),
        cmocka_unit_test_prestate(test_if_branches_differ_in_shape, &interpreted),
        cmocka_unit_test_prestate(test_if_branches_differ_in_shape, &compiled),
        cmocka_unit_test_prestate(test_nested_loop_if_loop, &interpreted),
        cmocka_unit_test_prestate(test_nested_loop_if_loop, &compiled),
        cmocka_unit_test_prestate(test_loop_untyped_body_inputs, &interpreted),
        cmocka_unit_test_prestate(test_loop_untyped_body_inputs, &compiled),
        cmocka_unit_test_prestate(test_scan_untyped_body_inputs, &interpreted),
        cmocka_unit_test_prestate(test_scan_untyped_body_inputs, &compiled),
        cmocka_unit_test_prestate(test_if_reads_outer_constant, &interpreted),
        cmocka_unit_test_prestate(test_if_reads_outer_constant, &compiled),
        cmocka_unit_test_prestate(test_if_bad_input_fails_cleanly, &interpreted),
        cmocka_unit_test_prestate(test_if_bad_input_fails_cleanly, &compiled),
        cmocka_unit_test_prestate(test_if_known_condition_inlined, &interpreted),
        cmocka_unit_test_prestate(test_if_known_condition_inlined, &compiled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
