/* Activations stored in bf16 between bf16 nodes (runtime/plan_store.c).
 *
 * x -> MatMul W1 -> a -> MatMul W2 -> b -> Reshape -> MatMul W3 -> y, and Neg(a) -> t: in a bf16
 * session b (and the Reshape that aliases it) is stored in bf16, since both its writer and its
 * only reader are bf16 GEMMs; a stays fp32 (Neg reads floats), and so do the graph's outputs.
 * The results must be those of the same session with every activation in fp32, bit for bit,
 * and the arena smaller. An fp32 session stores nothing in bf16. Skipped where the CPU lacks
 * AVX512-BF16. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops.h"
#include "runtime/runtime.h"
#include "test_graph.h"

#include <stdlib.h>
#include <string.h>

static ir_vid add_const(ir_graph *g, const char *name, anvil_dtype dt, int rank,
                        const int64_t *dims, const void *data, size_t bytes) {
    ir_vid c = test_add_value(g, name);
    g->values[c].dtype = dt;
    ir_shape_set(&g->values[c].shape, rank, dims);
    g->values[c].flags |= IR_VALUE_CONST;
    g->values[c].data = data;
    g->values[c].data_bytes = bytes;
    return c;
}

static float *randoms(size_t n, unsigned seed) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return x;
}

typedef struct step_seen {
    uint32_t in[8], out[8]; /* bf16 masks of the MatMuls, in plan order */
    int region[8];          /* and their regions */
    int n;
    int other;        /* bf16 ports on any other step */
    int other_region; /* the region of the Reshape, or of Neg if it had one */
    int neg_region;
} step_seen;

static void seen(void *arg, const rt_step_info *info) {
    step_seen *s = arg;
    if (!strcmp(info->op, "MatMul") && s->n < 8) {
        s->in[s->n] = info->bf16_in;
        s->region[s->n] = info->region;
        s->out[s->n++] = info->bf16_out;
    } else if (strcmp(info->op, "Reshape")) {
        s->other += (info->bf16_in | info->bf16_out) != 0;
        s->neg_region = info->region;
    } else {
        s->other_region = info->region;
    }
}

static bool have_bf16(void) {
    return kern_isa_ok(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16, core_hw_get());
}

static void run(const ir_graph *g, int precision, bool fp32_storage, const anvil_tensor *x,
                anvil_tensor **out, step_seen *steps, anvil_session_stats *stats,
                rt_regions *regions) {
    rt_session_config cfg = {.threads = 2, .opt_level = 1, .fp32_storage = fp32_storage};
    cfg.knobs.precision = precision;
    /* bf16 wherever the CPU has it, not only where its cascade would pick it (a CPU whose bf16
     * dot product is slower than its fp32 FMA runs fp32 under the cascade) */
    static const rt_force bf16_gemm = {"MatMul", "gemm_bf16"};
    if (precision == KERN_PREC_BF16) {
        cfg.forces = &bf16_gemm;
        cfg.n_forces = 1;
    }
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    const anvil_tensor *ins[1] = {x};
    assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
    memset(steps, 0, sizeof *steps);
    assert_int_equal(rt_session_explain(s, seen, steps), ANVIL_OK);
    assert_int_equal(rt_session_stats(s, stats), ANVIL_OK);
    assert_int_equal(rt_session_regions(s, regions), ANVIL_OK);
    rt_session_free(s);
}

static void test_bf16_between_gemms(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    const int64_t dx[] = {3, 37, 64}, d1[] = {64, 96}, d2[] = {96, 80}, d3[] = {40, 48},
                  shape[] = {3, 74, 40};
    float *w1 = randoms(64 * 96, 1), *w2 = randoms(96 * 80, 2), *w3 = randoms(40 * 48, 3);
    ir_vid x = test_add_value(g, "x");
    g->values[x].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&g->values[x].shape, 3, dx);
    assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
    ir_vid c1 = add_const(g, "w1", ANVIL_DTYPE_FLOAT32, 2, d1, w1, sizeof(float) * 64 * 96);
    ir_vid c2 = add_const(g, "w2", ANVIL_DTYPE_FLOAT32, 2, d2, w2, sizeof(float) * 96 * 80);
    ir_vid c3 = add_const(g, "w3", ANVIL_DTYPE_FLOAT32, 2, d3, w3, sizeof(float) * 40 * 48);
    const int64_t three = 3;
    ir_vid cs = add_const(g, "shape", ANVIL_DTYPE_INT64, 1, &three, shape, sizeof shape);
    ir_vid a = test_add_node(g, IR_OP_MATMUL, "a", 2, (ir_vid[]){x, c1}, 0);
    ir_vid b = test_add_node(g, IR_OP_MATMUL, "b", 2, (ir_vid[]){a, c2}, 0);
    ir_vid r = test_add_node(g, IR_OP_RESHAPE, "r", 2, (ir_vid[]){b, cs}, 0);
    ir_vid y = test_add_node(g, IR_OP_MATMUL, "y", 2, (ir_vid[]){r, c3}, 0);
    ir_vid t = test_add_node(g, IR_OP_NEG, "t", 1, &a, 0);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, t), ANVIL_OK);
    assert_int_equal(op_check_graph(g), ANVIL_OK);
    assert_int_equal(rt_infer_graph_static(g), ANVIL_OK);

    anvil_tensor *in;
    assert_int_equal(rt_tensor_new(ANVIL_DTYPE_FLOAT32, 3, dx, &in), ANVIL_OK);
    float *xr = randoms(3 * 37 * 64, 4);
    memcpy(in->data, xr, in->bytes);
    anvil_tensor *o16[2], *o32[2], *of[2];
    step_seen s16, s32, sf;
    anvil_session_stats st16, st32, stf;
    rt_regions r16, r32, rf;
    run(g, KERN_PREC_BF16, false, in, o16, &s16, &st16, &r16);
    run(g, KERN_PREC_BF16, true, in, o32, &s32, &st32, &r32);
    run(g, KERN_PREC_F32, false, in, of, &sf, &stf, &rf);

    /* one region: the three MatMuls and the Reshape between two of them; Neg outside. x enters
     * it; a (read by Neg) and y (an output) leave it; a, b and the Reshape's view of b pass
     * inside, the last two stored in bf16 (with fp32 storage forced: none) */
    assert_int_equal(r16.n_regions, 1);
    assert_int_equal(r16.regions[0].steps, 4);
    assert_int_equal(r16.regions[0].bf16_steps, 3);
    assert_int_equal(r16.regions[0].enter, 1);
    assert_int_equal(r16.regions[0].leave, 2);
    assert_int_equal(r16.regions[0].inner, 3);
    assert_int_equal(r16.regions[0].inner_bf16, 2);
    assert_int_equal(r16.regions[0].flops, 2 * 3 * (37 * 64 * 96 + 37 * 96 * 80 + 74 * 40 * 48));
    for (int i = 0; i < 3; i++) assert_int_equal(s16.region[i], 1);
    assert_int_equal(s16.other_region, 1);
    assert_int_equal(s16.neg_region, 0);
    assert_int_equal(r32.n_regions, 1);
    assert_int_equal(r32.regions[0].inner_bf16, 0);
    assert_int_equal(rf.n_regions, 0);
    for (int i = 0; i < 3; i++) assert_int_equal(sf.region[i], 0);
    rt_regions_free(&r16);
    rt_regions_free(&r32);
    rt_regions_free(&rf);

    /* b: written in bf16 by the second MatMul, read so by the third; a and the outputs: fp32 */
    assert_int_equal(s16.n, 3);
    assert_int_equal(s16.out[0], 0);
    assert_int_equal(s16.in[1], 0);
    assert_int_equal(s16.out[1], 1);
    assert_int_equal(s16.in[2], 1);
    assert_int_equal(s16.out[2], 0);
    assert_int_equal(s16.other, 0);
    for (int i = 0; i < 3; i++) assert_int_equal(s32.in[i] | s32.out[i] | sf.in[i] | sf.out[i], 0);
    assert_true(st16.activation_bytes < st32.activation_bytes);
    for (int j = 0; j < 2; j++) {
        assert_int_equal(o16[j]->bytes, o32[j]->bytes);
        assert_memory_equal(o16[j]->data, o32[j]->data, o16[j]->bytes);
        anvil_tensor_free(o16[j]);
        anvil_tensor_free(o32[j]);
        anvil_tensor_free(of[j]);
    }
    anvil_tensor_free(in);
    free(xr);
    free(w1);
    free(w2);
    free(w3);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_between_gemms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
