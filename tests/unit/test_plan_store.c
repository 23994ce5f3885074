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

#include <math.h>
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

/* A session of g at that precision, with the forced variants under bf16 (the bf16 ones wherever
 * the CPU has them, not only where its cascade would pick them: a CPU whose bf16 dot product is
 * slower than its fp32 FMA runs fp32 under the cascade), run once on x. The caller frees it. */
static rt_session *run_session(const ir_graph *g, int precision, bool fp32_storage,
                               const rt_force *forces, int n_forces, const anvil_tensor *x,
                               anvil_tensor **out) {
    rt_session_config cfg = {.threads = 2, .opt_level = 1, .fp32_storage = fp32_storage};
    cfg.knobs.precision = precision;
    if (precision == KERN_PREC_BF16) {
        cfg.forces = forces;
        cfg.n_forces = n_forces;
    }
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    const anvil_tensor *ins[1] = {x};
    assert_int_equal(rt_session_run(s, ins, NULL, out), ANVIL_OK);
    return s;
}

static void run(const ir_graph *g, int precision, bool fp32_storage, const anvil_tensor *x,
                anvil_tensor **out, step_seen *steps, anvil_session_stats *stats,
                rt_regions *regions) {
    static const rt_force bf16_gemm = {"MatMul", "gemm_bf16"};
    rt_session *s = run_session(g, precision, fp32_storage, &bf16_gemm, 1, x, out);
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

/* ---- a channels-last chain: expansion, depthwise, projection, 1x1 ------------------------- */

/* The bf16 ports of each ConvNhwc step, by node name. */
typedef struct nhwc_seen {
    uint32_t in[4], out[4];
} nhwc_seen;

static const char *const nhwc_names[4] = {"e", "d", "p", "y"};

static void nhwc_step(void *arg, const rt_step_info *info) {
    nhwc_seen *s = arg;
    for (int i = 0; i < 4; i++)
        if (info->node && !strcmp(info->node, nhwc_names[i])) {
            s->in[i] = info->bf16_in;
            s->out[i] = info->bf16_out;
        }
}

/* One node's bf16 ports, looked up by name. */
typedef struct step_ports {
    const char *name;
    uint32_t in, out;
    bool found;
} step_ports;

static void port_step(void *arg, const rt_step_info *info) {
    step_ports *p = arg;
    if (info->node && !strcmp(info->node, p->name)) {
        p->in = info->bf16_in;
        p->out = info->bf16_out;
        p->found = true;
    }
}

static void run_nhwc(const ir_graph *g, int precision, bool fp32_storage, const anvil_tensor *x,
                     anvil_tensor **out, nhwc_seen *seen_steps) {
    /* the bf16 tile, and the depthwise kernel that reads bf16 */
    static const rt_force forces[] = {{"e", "convnhwc_bf16_gemm"},
                                      {"d", "convnhwc_depthwise_avx512"},
                                      {"p", "convnhwc_bf16_gemm"},
                                      {"y", "convnhwc_bf16_gemm"}};
    rt_session *s = run_session(g, precision, fp32_storage, forces, 4, x, out);
    memset(seen_steps, 0, sizeof *seen_steps);
    assert_int_equal(rt_session_explain(s, nhwc_step, seen_steps), ANVIL_OK);
    rt_session_free(s);
}

/* x -> e (1x1, 16 -> 48) -> d (3x3 depthwise, padded) -> p (1x1, 48 -> 24) -> y (1x1, 24 -> 32),
 * all anvil.ConvNhwc (MobileNet's and EfficientNet's blocks after the layout pass). In a bf16
 * session e is stored in bf16 (the expansion's bf16 tile writes it rounded, the depthwise kernel
 * widens it as it loads: "bf16 in memory, fp32 arithmetic"), and so is p (written by one bf16
 * tile, read by another, which rounds it anyway); d stays fp32, as do the input and the output.
 * On operands that keep every intermediate an integer bf16 holds (e in [-16, 16]), the results
 * are those of the same session storing everything in fp32, bit for bit; on random ones, within
 * bf16's rounding of them. */
static void test_bf16_nhwc_chain(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const int64_t dx[] = {1, 10, 12, 16}, de[] = {48, 16, 1, 1}, dd[] = {48, 1, 3, 3},
                  dp[] = {24, 48, 1, 1}, dy[] = {32, 24, 1, 1};
    for (int exact = 1; exact >= 0; exact--) {
        ir_graph *g;
        assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
        g->opset = 17;
        float *w[4] = {randoms(48 * 16, 11), randoms(48 * 9, 12), randoms(24 * 48, 13),
                       randoms(32 * 24, 14)};
        const size_t wn[4] = {48 * 16, 48 * 9, 24 * 48, 32 * 24};
        for (int i = 0; exact && i < 4; i++)
            for (size_t q = 0; q < wn[i]; q++)
                w[i][q] = (float)((int)((w[i][q] + 1.0f) * 1.5f) - 1);
        ir_vid x = test_add_value(g, "x");
        g->values[x].dtype = ANVIL_DTYPE_FLOAT32;
        ir_shape_set(&g->values[x].shape, 4, dx);
        assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
        const int64_t *wd[4] = {de, dd, dp, dy};
        ir_vid c[4];
        for (int i = 0; i < 4; i++)
            c[i] = add_const(g, (const char *[]){"we", "wd", "wp", "wy"}[i], ANVIL_DTYPE_FLOAT32, 4,
                             wd[i], w[i], sizeof(float) * wn[i]);
        ir_vid e = test_add_node(g, IR_OP_CONV_NHWC, "e", 2, (ir_vid[]){x, c[0]}, 0);
        ir_vid d = test_add_node(g, IR_OP_CONV_NHWC, "d", 2, (ir_vid[]){e, c[1]}, 2);
        ir_node *dn = &g->nodes[g->values[d].producer];
        test_attr_ints(g, &dn->attrs[0], "pads", (int64_t[]){1, 1, 1, 1}, 4);
        dn->attrs[1].name = core_arena_strdup(g->arena, "group");
        dn->attrs[1].type = IR_ATTR_INT;
        dn->attrs[1].i = 48;
        ir_vid p = test_add_node(g, IR_OP_CONV_NHWC, "p", 2, (ir_vid[]){d, c[2]}, 0);
        ir_vid y = test_add_node(g, IR_OP_CONV_NHWC, "y", 2, (ir_vid[]){p, c[3]}, 0);
        assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
        assert_int_equal(op_check_graph(g), ANVIL_OK);
        assert_int_equal(rt_infer_graph_static(g), ANVIL_OK);

        anvil_tensor *in;
        assert_int_equal(rt_tensor_new(ANVIL_DTYPE_FLOAT32, 4, dx, &in), ANVIL_OK);
        float *xr = randoms(10 * 12 * 16, 15);
        for (size_t q = 0; exact && q < 10 * 12 * 16; q++)
            xr[q] = (float)((int)((xr[q] + 1.0f) * 1.5f) - 1);
        memcpy(in->data, xr, in->bytes);
        anvil_tensor *o16, *o32, *of;
        nhwc_seen s16, s32, sf;
        run_nhwc(g, KERN_PREC_BF16, false, in, &o16, &s16);
        run_nhwc(g, KERN_PREC_BF16, true, in, &o32, &s32);
        run_nhwc(g, KERN_PREC_F32, false, in, &of, &sf);

        /* e: out of the expansion, into the depthwise; p: out of the projection, into y */
        const uint32_t want_in[4] = {0, 1, 0, 1}, want_out[4] = {1, 0, 1, 0};
        for (int i = 0; i < 4; i++) {
            if (s16.in[i] != want_in[i] || s16.out[i] != want_out[i])
                fail_msg("%s: bf16 in %u out %u, want %u %u", nhwc_names[i], s16.in[i], s16.out[i],
                         want_in[i], want_out[i]);
            assert_int_equal(s32.in[i] | s32.out[i] | sf.in[i] | sf.out[i], 0);
        }
        const float *a = o16->data, *b = o32->data;
        const size_t n = o16->bytes / sizeof(float);
        if (exact) {
            assert_memory_equal(o16->data, o32->data, o16->bytes);
        } else {
            float scale = 0, err = 0;
            for (size_t q = 0; q < n; q++) {
                scale = fabsf(b[q]) > scale ? fabsf(b[q]) : scale;
                err = fabsf(a[q] - b[q]) > err ? fabsf(a[q] - b[q]) : err;
            }
            assert_true(scale > 0 && err <= 1e-2f * scale);
        }
        anvil_tensor_free(o16);
        anvil_tensor_free(o32);
        anvil_tensor_free(of);
        anvil_tensor_free(in);
        free(xr);
        for (int i = 0; i < 4; i++) free(w[i]);
        ir_graph_free(g);
    }
}

/* ---- a binary op writing bf16 for a bf16 reader ------------------------------------------ */

/* Values of randoms() made small integers (-1, 0, 1), which every product and sum below keeps
 * exact in fp32 and bf16 alike. */
static void integers(float *x, size_t n) {
    for (size_t q = 0; q < n; q++) x[q] = (float)((int)((x[q] + 1.0f) * 1.5f) - 1);
}

/* x -> m = x * g (g per channel: an SE block's gate) -> p (1x1 ConvNhwc, 40 -> 24), and
 * a = x + x (same shape: rows longer than the binary op's rounding slice) -> q (1x1, 40 -> 24).
 * In a bf16 session the Mul and the Add write m and a in bf16 through the tiles' rounding and
 * the convs read them so (in place: the tile broadcasts the stored pairs). The convs then round
 * nothing: on integer operands the results are those of the session storing m and a in fp32,
 * bit for bit; on random ones they differ only by the order of the fp32 sums (the tile reading
 * A in place sums an edge of few columns as a whole tile, the packed one by columns), far below
 * bf16's rounding. */
static void test_bf16_after_binary(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const int64_t dx[] = {1, 9, 11, 40}, dg[] = {40}, dw[] = {24, 40, 1, 1};
    static const rt_force forces[] = {{"m", "mul_avx512"},
                                      {"a", "add_avx512"},
                                      {"p", "convnhwc_bf16_gemm"},
                                      {"q", "convnhwc_bf16_gemm"}};
    static const char *const names[4] = {"m", "a", "p", "q"};
    static const uint32_t want_in[4] = {0, 0, 1, 1}, want_out[4] = {1, 1, 0, 0};
    for (int exact = 1; exact >= 0; exact--) {
        ir_graph *g;
        assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
        g->opset = 17;
        float *gate = randoms(40, 21), *wp = randoms(24 * 40, 22), *wq = randoms(24 * 40, 23);
        float *xr = randoms(9 * 11 * 40, 24);
        if (exact) {
            integers(gate, 40);
            integers(wp, 24 * 40);
            integers(wq, 24 * 40);
            integers(xr, 9 * 11 * 40);
        }
        ir_vid x = test_add_value(g, "x");
        g->values[x].dtype = ANVIL_DTYPE_FLOAT32;
        ir_shape_set(&g->values[x].shape, 4, dx);
        assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
        ir_vid cg = add_const(g, "g", ANVIL_DTYPE_FLOAT32, 1, dg, gate, sizeof(float) * 40);
        ir_vid cp = add_const(g, "wp", ANVIL_DTYPE_FLOAT32, 4, dw, wp, sizeof(float) * 24 * 40);
        ir_vid cq = add_const(g, "wq", ANVIL_DTYPE_FLOAT32, 4, dw, wq, sizeof(float) * 24 * 40);
        ir_vid m = test_add_node(g, IR_OP_MUL, "m", 2, (ir_vid[]){x, cg}, 0);
        ir_vid a = test_add_node(g, IR_OP_ADD, "a", 2, (ir_vid[]){x, x}, 0);
        ir_vid p = test_add_node(g, IR_OP_CONV_NHWC, "p", 2, (ir_vid[]){m, cp}, 0);
        ir_vid q = test_add_node(g, IR_OP_CONV_NHWC, "q", 2, (ir_vid[]){a, cq}, 0);
        assert_int_equal(ir_graph_add_output(g, p), ANVIL_OK);
        assert_int_equal(ir_graph_add_output(g, q), ANVIL_OK);
        assert_int_equal(op_check_graph(g), ANVIL_OK);
        assert_int_equal(rt_infer_graph_static(g), ANVIL_OK);

        anvil_tensor *in;
        assert_int_equal(rt_tensor_new(ANVIL_DTYPE_FLOAT32, 4, dx, &in), ANVIL_OK);
        memcpy(in->data, xr, in->bytes);
        anvil_tensor *o16[2], *o32[2];
        for (int fp32 = 0; fp32 < 2; fp32++) {
            rt_session *s = run_session(g, KERN_PREC_BF16, fp32, forces, 4, in, fp32 ? o32 : o16);
            for (int i = 0; i < 4; i++) {
                step_ports got = {names[i], 0, 0, false};
                assert_int_equal(rt_session_explain(s, port_step, &got), ANVIL_OK);
                assert_true(got.found);
                if (got.in != (fp32 ? 0 : want_in[i]) || got.out != (fp32 ? 0 : want_out[i]))
                    fail_msg("%s (fp32 storage %d): bf16 in %u out %u", names[i], fp32, got.in,
                             got.out);
            }
            rt_session_free(s);
        }
        for (int j = 0; j < 2; j++) {
            assert_int_equal(o16[j]->bytes, o32[j]->bytes);
            if (exact) {
                assert_memory_equal(o16[j]->data, o32[j]->data, o16[j]->bytes);
            } else {
                const float *u = o16[j]->data, *v = o32[j]->data;
                float scale = 0, err = 0;
                for (size_t e = 0; e < o16[j]->bytes / sizeof(float); e++) {
                    scale = fabsf(v[e]) > scale ? fabsf(v[e]) : scale;
                    err = fabsf(u[e] - v[e]) > err ? fabsf(u[e] - v[e]) : err;
                }
                if (!(scale > 0 && err <= 1e-5f * scale))
                    fail_msg("output %d: error %g at scale %g", j, (double)err, (double)scale);
            }
            anvil_tensor_free(o16[j]);
            anvil_tensor_free(o32[j]);
        }
        anvil_tensor_free(in);
        free(xr);
        free(gate);
        free(wp);
        free(wq);
        ir_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_between_gemms),
        cmocka_unit_test(test_bf16_nhwc_chain),
        cmocka_unit_test(test_bf16_after_binary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
