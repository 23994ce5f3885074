/* The layout pass as a measured group decision (passes.h, pass_decision): a chain of
 * convolutions is one group; the pass asks pass_options.decide about it with its rule's choice,
 * follows the answer both ways (nhwc turns every conv of the chain into anvil.ConvNhwc, nchw
 * none), keeps the rule when the answer is out of range, and keys the group by structure, not
 * names, so two models with the same chain share a decision. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "passes/passes.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_graph.h"

static float weights[2][16 * 8 * 9];

static ir_vid value(ir_graph *g, const char *name, int rank, const int64_t *dims) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    g->values[v].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&g->values[v].shape, rank, dims);
    return v;
}

/* x[1,ch,16,16] -> conv a (ch->ch 3x3 in group0 groups) -> conv b (1x1, ch->cout) -> y */
static ir_graph *chain_g(const char *prefix, int64_t ch, int64_t group0, int64_t cout) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    ir_vid x = value(g, "x", 4, (int64_t[]){1, ch, 16, 16});
    assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
    ir_vid in = x;
    for (int c = 0; c < 2; c++) {
        char name[64];
        snprintf(name, sizeof name, "%s_conv%d", prefix, c);
        int64_t k = c == 0 ? 3 : 1, co = c == 0 ? ch : cout, ci = c == 0 ? ch / group0 : ch;
        char wn[80];
        snprintf(wn, sizeof wn, "%s.w", name);
        ir_vid w = value(g, wn, 4, (int64_t[]){co, ci, k, k});
        g->values[w].flags |= IR_VALUE_CONST;
        g->values[w].data = weights[c];
        g->values[w].data_bytes = sizeof(float) * (size_t)(co * ci * k * k);
        int32_t n;
        assert_int_equal(ir_graph_add_node(g, IR_OP_CONV, name, 2, 1, 3, &n), ANVIL_OK);
        g->nodes[n].inputs[0] = in;
        g->nodes[n].inputs[1] = w;
        test_attr_ints(g, &g->nodes[n].attrs[0], "kernel_shape", (int64_t[]){k, k}, 2);
        int64_t p = k / 2;
        test_attr_ints(g, &g->nodes[n].attrs[1], "pads", (int64_t[]){p, p, p, p}, 4);
        g->nodes[n].attrs[2].name = core_arena_strdup(g->arena, "group");
        g->nodes[n].attrs[2].type = IR_ATTR_INT;
        g->nodes[n].attrs[2].i = c == 0 ? group0 : 1;
        char yn[80];
        snprintf(yn, sizeof yn, "%s.y", name);
        ir_vid y = value(g, yn, 4, (int64_t[]){1, co, 16, 16});
        g->nodes[n].outputs[0] = y;
        g->values[y].producer = n;
        in = y;
    }
    assert_int_equal(ir_graph_add_output(g, in), ANVIL_OK);
    assert_int_equal(op_check_graph(g), ANVIL_OK);
    return g;
}

/* x[1,8,16,16] -> conv a (depthwise 3x3 if dw, else 8->8 3x3) -> conv b (1x1, 8->cout) -> y */
static ir_graph *chain(const char *prefix, bool dw, int64_t cout) {
    return chain_g(prefix, 8, dw ? 8 : 1, cout);
}

typedef struct answer {
    int give; /* what decide returns */
    int asked;
    pass_decision last;
    char group[128], first[128]; /* copies: the decision's strings die with the call */
} answer;

static int decide(void *arg, const pass_decision *q) {
    answer *a = arg;
    if (strcmp(q->rewrite, "layout")) return -1; /* other measured rewrites keep their rules */
    a->asked++;
    a->last = *q;
    snprintf(a->group, sizeof a->group, "%s", q->group);
    snprintf(a->first, sizeof a->first, "%s", q->first);
    a->last.group = a->group;
    a->last.first = a->first;
    return a->give;
}

/* Runs the pipeline with decide answering `give`; returns how many ConvNhwc nodes result. */
static int nhwc_convs(const ir_graph *g, answer *a) {
    pass_options o = {.opt_level = 1, .decide = decide, .decide_arg = a};
    pass_graph *pg;
    assert_int_equal(pass_pipeline_run(g, &o, &pg), ANVIL_OK);
    int n = 0;
    for (int32_t k = 0; k < pg->g->n_nodes; k++) n += pg->g->nodes[k].op == IR_OP_CONV_NHWC;
    pass_graph_free(pg);
    return n;
}

static void test_decision_followed_both_ways(void **state) {
    (void)state;
    ir_graph *dw = chain("m", true, 16), *dense = chain("m", false, 16);
    answer a = {.give = -1};
    assert_int_equal(nhwc_convs(dw, &a), 2); /* the rule: a chain with a depthwise conv */
    assert_int_equal(a.asked, 1);
    assert_string_equal(a.last.rewrite, "layout");
    assert_int_equal(a.last.n_nodes, 2);
    assert_int_equal(a.last.n_choices, 2);
    assert_string_equal(a.last.choice_names[0], "nchw");
    assert_string_equal(a.last.choice_names[1], "nhwc");
    assert_int_equal(a.last.rule, 1);
    assert_string_equal(a.last.first, "m_conv0");
    a = (answer){.give = 0};
    assert_int_equal(nhwc_convs(dw, &a), 0); /* measured: NCHW after all */
    a = (answer){.give = -1};
    assert_int_equal(nhwc_convs(dense, &a), 0);
    assert_int_equal(a.last.rule, 0);
    a = (answer){.give = 1};
    assert_int_equal(nhwc_convs(dense, &a), 2); /* measured: channels-last pays here */
    a = (answer){.give = 7};
    assert_int_equal(nhwc_convs(dense, &a), 0); /* out of range: the rule */
    ir_graph_free(dw);
    ir_graph_free(dense);
    /* the rule's other half: groups of 8 channels (the channels-last grouped kernels' shapes)
     * go channels-last where those kernels run (AVX-512; not under an AVX2 cap), groups of 4 stay
     * NCHW */
    const core_hw *hw = core_hw_get();
    const bool avx512 =
        hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq && hw->os_avx512;
    ir_graph *g8 = chain_g("m", 16, 2, 16), *g4 = chain_g("m", 16, 4, 16);
    a = (answer){.give = -1};
    assert_int_equal(nhwc_convs(g8, &a), avx512 ? 2 : 0);
    assert_int_equal(a.last.rule, avx512 ? 1 : 0);
    if (avx512) {
        core_hw_set_cap(CORE_ISA_AVX2);
        a = (answer){.give = -1};
        assert_int_equal(nhwc_convs(g8, &a), 0);
        core_hw_set_cap(CORE_ISA_NATIVE);
    }
    a = (answer){.give = -1};
    assert_int_equal(nhwc_convs(g4, &a), 0);
    assert_int_equal(a.last.rule, 0);
    ir_graph_free(g8);
    ir_graph_free(g4);
}

static void test_group_key_is_structural(void **state) {
    (void)state;
    ir_graph *g1 = chain("first", true, 16), *g2 = chain("other", true, 16),
             *g3 = chain("first", true, 24);
    answer a1 = {.give = -1}, a2 = {.give = -1}, a3 = {.give = -1};
    nhwc_convs(g1, &a1);
    nhwc_convs(g2, &a2);
    nhwc_convs(g3, &a3);
    assert_string_equal(a1.group, a2.group);     /* other names, same structure */
    assert_string_not_equal(a1.group, a3.group); /* another width */
    ir_graph_free(g1);
    ir_graph_free(g2);
    ir_graph_free(g3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decision_followed_both_ways),
        cmocka_unit_test(test_group_key_is_structural),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
