/* The tuning problem key (src/tune/key.c): equal nodes under other names or with their
 * attributes in another order share a key; every difference a variant's speed can depend on
 * (attributes, fused activation, constness, dtype, dims, threads) changes it; untunable nodes
 * (unknown dims, graph attributes) are refused naming the node; an overlong family is refused
 * without overflowing; and a problem round-trips through a tuning database, exactly and by
 * nearest shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "tune/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph.h"
#include "test_tmpdir.h"

/* One Conv as a session would see it, and what decides its key. */
typedef struct conv_spec {
    const char *name;
    int64_t cin, h, cout, stride, pad, group;
    bool reversed; /* attributes written in the reverse order */
    bool w_const;
    anvil_dtype dt;
    ir_act act;
    int threads;
} conv_spec;

static conv_spec resnet_3x3(void) {
    return (conv_spec){.name = "layer1.0.conv2",
                       .cin = 64,
                       .h = 56,
                       .cout = 64,
                       .stride = 1,
                       .pad = 1,
                       .group = 1,
                       .w_const = true,
                       .dt = ANVIL_DTYPE_FLOAT32,
                       .act = IR_ACT_RELU,
                       .threads = 4};
}

typedef struct conv_case {
    ir_graph *g;
    int32_t node;
    op_tinfo in[3], out[1];
    kern_node kn;
} conv_case;

static const float dummy_values[1];

/* Gives every input and output of node k a value of its own, as a loaded graph would. */
static void wire_node(ir_graph *g, int32_t k) {
    for (int i = 0; i < g->nodes[k].n_inputs + g->nodes[k].n_outputs; i++) {
        char name[32];
        snprintf(name, sizeof name, "v%d_%d", k, i);
        ir_vid v;
        assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
        if (i < g->nodes[k].n_inputs)
            g->nodes[k].inputs[i] = v;
        else
            g->nodes[k].outputs[i - g->nodes[k].n_inputs] = v;
    }
}

static void conv_build(conv_case *c, const conv_spec *s) {
    memset(c, 0, sizeof *c);
    assert_int_equal(ir_graph_create(NULL, &c->g), ANVIL_OK);
    c->g->opset = 17;
    assert_int_equal(ir_graph_add_node(c->g, IR_OP_CONV, s->name, 3, 1, 5, &c->node), ANVIL_OK);
    ir_node *n = &c->g->nodes[c->node];
    const char *names[] = {"x", "w", "b", "y"};
    for (int i = 0; i < 4; i++) {
        ir_vid v;
        assert_int_equal(ir_graph_add_value(c->g, names[i], &v), ANVIL_OK);
        c->g->values[v].dtype = s->dt;
        if (i < 3)
            n->inputs[i] = v;
        else
            n->outputs[0] = v;
    }
    ir_attr *a = n->attrs;
    int k[5] = {0, 1, 2, 3, 4};
    if (s->reversed)
        for (int i = 0; i < 5; i++) k[i] = 4 - i;
    test_attr_ints(c->g, &a[k[0]], "kernel_shape", (int64_t[]){3, 3}, 2);
    test_attr_ints(c->g, &a[k[1]], "strides", (int64_t[]){s->stride, s->stride}, 2);
    test_attr_ints(c->g, &a[k[2]], "pads", (int64_t[]){s->pad, s->pad, s->pad, s->pad}, 4);
    test_attr_ints(c->g, &a[k[3]], "dilations", (int64_t[]){1, 1}, 2);
    a[k[4]].name = core_arena_strdup(c->g->arena, "group");
    a[k[4]].type = IR_ATTR_INT;
    a[k[4]].i = s->group;
    if (s->act != IR_ACT_NONE) {
        ir_fusion *f = core_arena_alloc(c->g->arena, sizeof *f);
        assert_non_null(f);
        *f = (ir_fusion){.bias = -1, .residual = -1, .act = s->act};
        n->fusion = f;
    }
    assert_int_equal(op_check_graph(c->g), ANVIL_OK);

    int64_t ho = (s->h + 2 * s->pad - 3) / s->stride + 1;
    int64_t dims[3][4] = {{1, s->cin, s->h, s->h}, {s->cout, s->cin / s->group, 3, 3}, {s->cout}};
    int ranks[3] = {4, 4, 1};
    for (int i = 0; i < 3; i++) {
        c->in[i].dtype = s->dt;
        ir_shape_set(&c->in[i].shape, ranks[i], dims[i]);
        c->in[i].value = i > 0 && s->w_const ? dummy_values : NULL;
    }
    c->out[0].dtype = s->dt;
    ir_shape_set(&c->out[0].shape, 4, (int64_t[]){1, s->cout, ho, ho});
    c->kn = (kern_node){&c->g->nodes[c->node], c->in, 3, c->out, 1, s->threads, NULL, NULL, NULL};
}

static tune_problem problem_of(const conv_spec *s) {
    conv_case c;
    conv_build(&c, s);
    tune_problem p;
    anvil_status st = tune_problem_of(&c.kn, &p);
    if (st != ANVIL_OK) fprintf(stderr, "tune_problem_of: %s\n", anvil_last_error());
    assert_int_equal(st, ANVIL_OK);
    ir_graph_free(c.g);
    return p;
}

static void test_resnet_conv_text(void **state) {
    (void)state;
    conv_spec s = resnet_3x3();
    tune_problem p = problem_of(&s);
    printf("family: %s\nkey:    %s\n", p.family, p.key);
    assert_string_equal(p.family, "Conv|dilations=1,1;group=1;kernel_shape=3,3;pads=1,1,1,1;"
                                  "strides=1,1|fuse=Relu|const=0,1,1|in=f32/4,f32/4,f32/1|"
                                  "out=f32/4");
    assert_string_equal(p.key, "Conv|dilations=1,1;group=1;kernel_shape=3,3;pads=1,1,1,1;"
                               "strides=1,1|fuse=Relu|const=0,1,1|in=f32/4,f32/4,f32/1|"
                               "out=f32/4|shapes=[1,64,56,56],[64,64,3,3],[64]>[1,64,56,56]|t=4");
    int64_t want[] = {1, 64, 56, 56, 64, 64, 3, 3, 64};
    assert_int_equal(p.n_dims, 9);
    assert_memory_equal(p.dims, want, sizeof want);
}

static void test_names_and_attr_order_do_not_matter(void **state) {
    (void)state;
    conv_spec a = resnet_3x3(), b = a, c = a;
    b.name = "layer2.1.conv2";
    c.reversed = true;
    tune_problem pa = problem_of(&a), pb = problem_of(&b), pc = problem_of(&c);
    assert_string_equal(pa.key, pb.key);
    assert_string_equal(pa.family, pb.family);
    assert_string_equal(pa.key, pc.key);
    assert_string_equal(pa.family, pc.family);
    assert_null(strstr(pa.key, "layer"));
}

/* Each change of s against the ResNet conv: the key always differs; the family differs unless
 * only a dim or the thread count changed, and then the dims say which. */
static void expect_differs(const conv_spec *s, bool family_same) {
    conv_spec base = resnet_3x3();
    tune_problem p0 = problem_of(&base), p1 = problem_of(s);
    assert_string_not_equal(p0.key, p1.key);
    if (family_same)
        assert_string_equal(p0.family, p1.family);
    else
        assert_string_not_equal(p0.family, p1.family);
}

static void test_every_difference_changes_the_key(void **state) {
    (void)state;
    conv_spec s = resnet_3x3();
    s.stride = 2;
    expect_differs(&s, false);
    s = resnet_3x3();
    s.pad = 0;
    expect_differs(&s, false);
    s = resnet_3x3();
    s.group = 64;
    expect_differs(&s, false);
    s = resnet_3x3();
    s.act = IR_ACT_NONE;
    expect_differs(&s, false);
    s = resnet_3x3();
    s.act = IR_ACT_SIGMOID;
    expect_differs(&s, false);
    s = resnet_3x3();
    s.w_const = false;
    expect_differs(&s, false);
    s = resnet_3x3();
    s.dt = ANVIL_DTYPE_FLOAT16;
    expect_differs(&s, false);
    s = resnet_3x3();
    s.threads = 8;
    expect_differs(&s, true);

    s = resnet_3x3();
    s.h = 28;
    expect_differs(&s, true);
    conv_spec base = resnet_3x3();
    tune_problem p0 = problem_of(&base), p1 = problem_of(&s);
    assert_int_equal(p0.n_dims, p1.n_dims);
    assert_memory_not_equal(p0.dims, p1.dims, sizeof p0.dims);
}

/* An omitted bias is written "-" and adds no dims; Clip's bounds enter the family. */
static void test_omitted_input_and_clip_bounds(void **state) {
    (void)state;
    conv_spec s = resnet_3x3();
    s.act = IR_ACT_NONE;
    conv_case c;
    conv_build(&c, &s);
    c.g->nodes[c.node].inputs[2] = IR_NONE;
    memset(&c.in[2], 0, sizeof c.in[2]);
    ir_shape_unknown(&c.in[2].shape);
    ir_fusion clip = {.bias = -1, .residual = -1, .act = IR_ACT_CLIP, .lo = 0, .hi = 6};
    c.g->nodes[c.node].fusion = &clip;
    tune_problem p;
    assert_int_equal(tune_problem_of(&c.kn, &p), ANVIL_OK);
    assert_non_null(strstr(p.family, "|fuse=Clip(0,6)|const=0,1,-|in=f32/4,f32/4,-|"));
    assert_non_null(strstr(p.key, "|shapes=[1,64,56,56],[64,64,3,3],->[1,64,56,56]|t=4"));
    assert_int_equal(p.n_dims, 8);
    clip.hi = 3;
    tune_problem q;
    assert_int_equal(tune_problem_of(&c.kn, &q), ANVIL_OK);
    assert_string_not_equal(p.family, q.family);
    ir_graph_free(c.g);
}

/* A string attribute cannot imitate a separator: its special bytes are escaped in quotes. */
static void test_string_attribute_is_escaped(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_RELU, "odd_string", 1, 1, 1, &k), ANVIL_OK);
    wire_node(g, k);
    ir_attr *a = &g->nodes[k].attrs[0];
    a->name = core_arena_strdup(g->arena, "mode");
    a->type = IR_ATTR_STRING;
    a->s = core_arena_strdup(g->arena, "a|b;c=\"d\"");
    a->s_len = strlen(a->s);
    op_tinfo in = {ANVIL_DTYPE_FLOAT32, {0}, NULL}, out = in;
    ir_shape_set(&in.shape, 1, (int64_t[]){8});
    out.shape = in.shape;
    kern_node kn = {&g->nodes[k], &in, 1, &out, 1, 1, NULL, NULL, NULL};
    tune_problem p;
    assert_int_equal(tune_problem_of(&kn, &p), ANVIL_OK);
    assert_string_equal(p.family,
                        "Relu|mode=\"a\\x7Cb\\x3Bc\\x3D\\x22d\\x22\"|const=0|in=f32/1|out=f32/1");
    ir_graph_free(g);
}

static void test_unknown_dim_is_unsupported(void **state) {
    (void)state;
    conv_spec s = resnet_3x3();
    conv_case c;
    conv_build(&c, &s);
    c.in[0].shape.d[2] = IR_DIM_UNKNOWN;
    c.in[0].shape.sym[2] = -1;
    tune_problem p;
    assert_int_equal(tune_problem_of(&c.kn, &p), ANVIL_ERR_UNSUPPORTED);
    assert_non_null(strstr(anvil_last_error(), "layer1.0.conv2"));
    assert_non_null(strstr(anvil_last_error(), "shapes are known"));
    assert_string_equal(p.key, "");
    ir_graph_free(c.g);
}

static void test_graph_attribute_is_unsupported(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_IF, "branch_on_flag", 1, 1, 2, &k), ANVIL_OK);
    wire_node(g, k);
    const char *names[] = {"then_branch", "else_branch"};
    for (int i = 0; i < 2; i++) {
        ir_graph *body;
        assert_int_equal(ir_graph_create(g, &body), ANVIL_OK);
        g->nodes[k].attrs[i].name = core_arena_strdup(g->arena, names[i]);
        g->nodes[k].attrs[i].type = IR_ATTR_GRAPH;
        g->nodes[k].attrs[i].g = body;
    }
    op_tinfo in = {ANVIL_DTYPE_BOOL, {0}, NULL}, out = {ANVIL_DTYPE_FLOAT32, {0}, NULL};
    ir_shape_set(&in.shape, 0, NULL);
    ir_shape_set(&out.shape, 1, (int64_t[]){4});
    kern_node kn = {&g->nodes[k], &in, 1, &out, 1, 1, NULL, NULL, NULL};
    tune_problem p;
    assert_int_equal(tune_problem_of(&kn, &p), ANVIL_ERR_UNSUPPORTED);
    assert_non_null(strstr(anvil_last_error(), "branch_on_flag"));
    assert_non_null(strstr(anvil_last_error(), "else_branch"));
    ir_graph_free(g);
}

static void test_overlong_family_is_limit(void **state) {
    (void)state;
    enum { N_ATTRS = 200 };
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_RELU, "many_attrs", 1, 1, N_ATTRS, &k), ANVIL_OK);
    wire_node(g, k);
    for (int i = 0; i < N_ATTRS; i++) {
        char name[32];
        snprintf(name, sizeof name, "attribute_%03d", i);
        test_attr_ints(g, &g->nodes[k].attrs[i], name, (int64_t[]){1, 2, 3, 4}, 4);
    }
    op_tinfo in = {ANVIL_DTYPE_FLOAT32, {0}, NULL}, out = in;
    ir_shape_set(&in.shape, 1, (int64_t[]){8});
    out.shape = in.shape;
    kern_node kn = {&g->nodes[k], &in, 1, &out, 1, 1, NULL, NULL, NULL};
    tune_problem p;
    assert_int_equal(tune_problem_of(&kn, &p), ANVIL_ERR_LIMIT);
    assert_non_null(strstr(anvil_last_error(), "many_attrs"));
    assert_string_equal(p.family, "");
    ir_graph_free(g);
}

/* Five rank-4 inputs give 20 dims: the first TUNE_MAX_DIMS are kept, in input order. */
static void test_dims_capped(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_SUM, "sum5", 5, 1, 0, &k), ANVIL_OK);
    wire_node(g, k);
    op_tinfo in[5], out;
    for (int i = 0; i < 5; i++) {
        in[i] = (op_tinfo){ANVIL_DTYPE_FLOAT32, {0}, NULL};
        ir_shape_set(&in[i].shape, 4, (int64_t[]){i + 1, 2, 3, 4});
    }
    out = in[4];
    kern_node kn = {&g->nodes[k], in, 5, &out, 1, 2, NULL, NULL, NULL};
    tune_problem p;
    assert_int_equal(tune_problem_of(&kn, &p), ANVIL_OK);
    assert_int_equal(p.n_dims, TUNE_MAX_DIMS);
    int64_t want[TUNE_MAX_DIMS] = {1, 2, 3, 4, 2, 2, 3, 4, 3, 2, 3, 4, 4, 2, 3, 4};
    assert_memory_equal(p.dims, want, sizeof want);
    assert_non_null(strstr(p.key, ",[5,2,3,4]>[5,2,3,4]|t=2"));
    ir_graph_free(g);
}

static void test_database_round_trip(void **state) {
    (void)state;
    const char *path = tmp_path("tuning.db");
    tune_db *db = NULL;
    assert_int_equal(tune_db_open(path, &db), ANVIL_OK);

    conv_spec s = resnet_3x3();
    tune_problem p = problem_of(&s);
    tune_record r;
    memset(&r, 0, sizeof r);
    memcpy(r.key, p.key, sizeof r.key);
    memcpy(r.family, p.family, sizeof r.family);
    r.n_dims = p.n_dims;
    memcpy(r.dims, p.dims, sizeof r.dims);
    snprintf(r.fingerprint, sizeof r.fingerprint, "test-machine");
    snprintf(r.variant, sizeof r.variant, "conv_winograd_f32");
    snprintf(r.source, sizeof r.source, "offline");
    r.median_ns = 1000;
    r.reps = 10;
    assert_int_equal(tune_db_put(db, &r), ANVIL_OK);

    tune_record got;
    bool found = false;
    assert_int_equal(tune_db_get(db, p.key, "test-machine", &got, &found), ANVIL_OK);
    assert_true(found);
    assert_false(got.nearest);
    assert_string_equal(got.variant, "conv_winograd_f32");
    assert_string_equal(got.family, p.family);

    s.h = 52;
    tune_problem q = problem_of(&s);
    assert_int_equal(tune_db_get(db, q.key, "test-machine", &got, &found), ANVIL_OK);
    assert_false(found);
    assert_int_equal(tune_db_nearest(db, q.family, "test-machine", q.n_dims, q.dims, &got, &found),
                     ANVIL_OK);
    assert_true(found);
    assert_true(got.nearest);
    assert_string_equal(got.key, p.key);

    tune_db_close(db);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet_conv_text),
        cmocka_unit_test(test_names_and_attr_order_do_not_matter),
        cmocka_unit_test(test_every_difference_changes_the_key),
        cmocka_unit_test(test_omitted_input_and_clip_bounds),
        cmocka_unit_test(test_string_attribute_is_escaped),
        cmocka_unit_test(test_unknown_dim_is_unsupported),
        cmocka_unit_test(test_graph_attribute_is_unsupported),
        cmocka_unit_test(test_overlong_family_is_limit),
        cmocka_unit_test(test_dims_capped),
        cmocka_unit_test(test_database_round_trip),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_remove);
}
