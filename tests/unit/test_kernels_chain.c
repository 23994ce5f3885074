/* The chain family's variants (src/kernels/cpu/chain) against anvil.EltwiseChain's reference
 * kernel (src/ops/math/chain.c): the chains real models spell out (HardSwish, GELU, SiLU,
 * scale-and-shift), every step kind alone and swapped, side operands as scalars, per-channel
 * blocks (long and short), trailing rows (long and short) and full shapes, lengths around the
 * vector widths and past the parallel threshold, NaN inputs, zero-size tensors, and patterns the
 * variants must leave to the reference. Each check asserts how many variants ran, so a variant
 * that silently stops applying fails the test. The reference itself is checked against the
 * single ops' reference kernels run one after another. */
#include "kernels/kernels.h"
#include "ops/chain_common.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

typedef struct step {
    const char *op;
    int arg; /* -1: unary */
    int swap;
    float a, b;
} step;

typedef struct operand {
    int rank;
    int64_t dims[IR_MAX_RANK];
} operand;

/* How many of chain_avx512 and chain_avx2 should run here. */
static int expected(bool transcendental) {
    assert_non_null(kern_find(IR_OP_ELTWISE_CHAIN, "chain_avx512"));
    assert_non_null(kern_find(IR_OP_ELTWISE_CHAIN, "chain_avx2"));
    /* the steps that need a vector exp/tanh/erf exist where the eltwise family's erf does (a
     * build with SLEEF); ANVIL_HAVE_SLEEF is defined for the kernel sources only */
    if (transcendental && !kern_find(IR_OP_ERF, "erf_avx2")) return 0;
    return (optest_have_avx512() ? 1 : 0) + (optest_have_avx2() ? 1 : 0);
}

/* Starts a chain node over x (rank, dims) with side operands ops[0..n_ops) as inputs 1.. */
static void chain_begin(optest *t, const step *steps, int n, int rank, const int64_t *dims,
                        const float *x, const operand *ops, const float *const *data, int n_ops) {
    optest_begin(t, IR_OP_ELTWISE_CHAIN, 1 + n_ops, 1, 4);
    ir_attr *a = optest_attr(t, 0, "ops", IR_ATTR_STRINGS);
    const char **names = core_arena_array(t->g->arena, (size_t)n, sizeof *names);
    int64_t args[CHAIN_MAX_STEPS], swap[CHAIN_MAX_STEPS];
    float params[2 * CHAIN_MAX_STEPS];
    for (int s = 0; s < n; s++) {
        names[s] = steps[s].op;
        args[s] = steps[s].arg;
        swap[s] = steps[s].swap;
        params[2 * s] = steps[s].a;
        params[2 * s + 1] = steps[s].b;
    }
    a->strings = names;
    a->n = (size_t)n;
    optest_attr_ints(t, 1, "args", args, (size_t)n);
    optest_attr_ints(t, 2, "swap", swap, (size_t)n);
    optest_attr_floats(t, 3, "params", params, 2 * (size_t)n);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    for (int i = 0; i < n_ops; i++)
        optest_input(t, 1 + i, ANVIL_DTYPE_FLOAT32, ops[i].rank, ops[i].dims, data[i], true);
}

static bool close_enough(float got, float want, float rtol, float atol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabsf(got - want) <= atol + rtol * fabsf(want);
}

/* optest_check_variants with NaN == NaN: every applicable variant on 1, 2 and 3 threads against
 * the reference; returns how many variants ran, or fails. */
static int check_variants(optest *t, float rtol, float atol) {
    assert_int_equal(optest_run(t), ANVIL_OK);
    size_t count;
    const kern_variant *const *list = kern_variants(IR_OP_ELTWISE_CHAIN, &count);
    const size_t n = op_tensor_numel(&t->out[0]);
    int checked = 0;
    for (size_t vi = 1; vi < count; vi++) {
        for (int threads = 1; threads <= 3; threads++) {
            op_tensor got = t->out[0];
            got.data = malloc(n ? n * sizeof(float) : 1);
            memset(got.data, 0xff, n * sizeof(float));
            anvil_status s = optest_run_variant(t, list[vi], threads, &got);
            if (s == ANVIL_ERR_UNSUPPORTED) {
                free(got.data);
                break;
            }
            if (s != ANVIL_OK) fprintf(stderr, "%s: %s\n", list[vi]->name, anvil_last_error());
            assert_int_equal(s, ANVIL_OK);
            const float *g = got.data, *w = t->out[0].data;
            for (size_t i = 0; i < n; i++) {
                if (close_enough(g[i], w[i], rtol, atol)) continue;
                fprintf(stderr, "%s (%d threads): element %zu of %zu: got %.9g want %.9g\n",
                        list[vi]->name, threads, i, n, (double)g[i], (double)w[i]);
                fail();
            }
            free(got.data);
            if (threads == 1) checked++;
        }
    }
    return checked;
}

/* Builds and checks one chain; want: variants that must have run. */
static void run_chain(const step *steps, int n, int rank, const int64_t *dims, float lo, float hi,
                      const operand *ops, int n_ops, float rtol, int want) {
    const size_t numel = optest_prod(dims, rank);
    float *x = optest_random_f32(numel, (unsigned)(numel + (size_t)n), lo, hi);
    float *data[8] = {0};
    for (int i = 0; i < n_ops; i++)
        data[i] =
            optest_random_f32(optest_prod(ops[i].dims, ops[i].rank), (unsigned)(31 + i), 0.5f, 2);
    optest t;
    chain_begin(&t, steps, n, rank, dims, x, ops, (const float *const *)data, n_ops);
    int got = check_variants(&t, rtol, 1e-6f);
    if (got != want) fprintf(stderr, "checked %d variants, want %d\n", got, want);
    assert_int_equal(got, want);
    optest_end(&t);
    for (int i = 0; i < n_ops; i++) free(data[i]);
    free(x);
}

static const operand scalar = {0, {0}};
static const int64_t lengths[] = {1, 15, 16, 17, 63, 64, 65, 100, 1000, 4113, 40000};
#define N_LENGTHS (sizeof lengths / sizeof *lengths)

/* ---- the spellings models use ------------------------------------------------------------- */

/* x -> Add(3) -> Clip(0, 6) -> Div(6) -> Mul(x): inputs 1 and 2 are 3 and 6 */
static const step hardswish[] = {
    {"Add", 1, 0, 0, 0}, {"Clip", -1, 0, 0, 6}, {"Div", 2, 0, 0, 0}, {"Mul", 0, 0, 0, 0}};
/* x -> Div(sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5): inputs 1, 2, 3 */
static const step gelu[] = {{"Div", 1, 0, 0, 0},
                            {"Erf", -1, 0, 0, 0},
                            {"Add", 2, 0, 0, 0},
                            {"Mul", 0, 0, 0, 0},
                            {"Mul", 3, 0, 0, 0}};

static void test_model_chains(void **state) {
    (void)state;
    const operand s3[3] = {scalar, scalar, scalar};
    for (size_t li = 0; li < N_LENGTHS; li++) {
        run_chain(hardswish, 4, 1, &lengths[li], -8, 8, s3, 2, 1e-6f, expected(false));
        run_chain(gelu, 5, 1, &lengths[li], -5, 5, s3, 3, 1e-5f, expected(true));
    }
    /* SiLU: Sigmoid -> Mul(x) */
    const step silu[] = {{"Sigmoid", -1, 0, 0, 0}, {"Mul", 0, 0, 0, 0}};
    run_chain(silu, 2, 2, (int64_t[]){7, 333}, -20, 20, NULL, 0, 1e-5f, expected(true));
    /* GELU's tanh form from its first Pow on: x^3 * 0.044715 + x, * sqrt(2/pi), tanh, + 1 */
    const step gelu_tanh[] = {{"Pow3", -1, 0, 0, 0}, {"Mul", 1, 0, 0, 0},   {"Add", 0, 0, 0, 0},
                              {"Mul", 2, 0, 0, 0},   {"Tanh", -1, 0, 0, 0}, {"Add", 3, 0, 0, 0}};
    run_chain(gelu_tanh, 6, 3, (int64_t[]){2, 5, 771}, -6, 6, s3, 3, 1e-5f, expected(true));
    /* scale and shift per channel, then Relu */
    const step affine[] = {{"Mul", 1, 0, 0, 0}, {"Add", 2, 0, 0, 0}, {"Relu", -1, 0, 0, 0}};
    const operand pc[2] = {{3, {16, 1, 1}}, {3, {16, 1, 1}}};
    run_chain(affine, 3, 4, (int64_t[]){2, 16, 20, 20}, -3, 3, pc, 2, 1e-6f, expected(false));
}

/* ---- every step kind ---------------------------------------------------------------------- */

static void test_each_step(void **state) {
    (void)state;
    static const step unary[] = {
        {"Clip", -1, 0, -0.5f, 0.75f}, {"Clip", -1, 0, 1.0f, -1.0f},
        {"Relu", -1, 0, 0, 0},         {"LeakyRelu", -1, 0, 0.1f, 0},
        {"Sigmoid", -1, 0, 0, 0},      {"Tanh", -1, 0, 0, 0},
        {"Erf", -1, 0, 0, 0},          {"Exp", -1, 0, 0, 0},
        {"HardSwish", -1, 0, 0, 0},    {"HardSigmoid", -1, 0, 0.3f, 0.4f},
        {"Pow2", -1, 0, 0, 0},         {"Pow3", -1, 0, 0, 0},
        {"Neg", -1, 0, 0, 0},          {"Abs", -1, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++) {
        bool tr = !strcmp(unary[i].op, "Sigmoid") || !strcmp(unary[i].op, "Tanh") ||
                  !strcmp(unary[i].op, "Erf") || !strcmp(unary[i].op, "Exp");
        /* each step after a Mul by an operand so that it is a chain of two */
        step st[2] = {{"Mul", 1, 0, 0, 0}, unary[i]};
        for (int li = 0; li < 4; li++)
            run_chain(st, 2, 1, &lengths[li * 3], -4, 4, &scalar, 1, 1e-5f, expected(tr));
    }
    /* Sqrt and Pow(0.5) on |x| */
    const step roots[] = {{"Abs", -1, 0, 0, 0},
                          {"Sqrt", -1, 0, 0, 0},
                          {"Abs", -1, 0, 0, 0},
                          {"PowHalf", -1, 0, 0, 0}};
    run_chain(roots, 4, 1, (int64_t[]){1001}, -9, 9, NULL, 0, 1e-6f, expected(false));
    /* binary steps, the operand right and left, as x and as a constant */
    static const char *const binary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
    for (int b = 0; b < 6; b++)
        for (int swap = 0; swap < 2; swap++)
            for (int arg = 0; arg < 2; arg++) {
                step st[2] = {{"Add", 1, 0, 0, 0}, {binary[b], arg, swap, 0, 0}};
                run_chain(st, 2, 2, (int64_t[]){3, 37}, -2, 2, &scalar, 1, 1e-6f, expected(false));
            }
}

/* NaN and infinities go through every step as through the single ops; Max and Min also with a
 * NaN operand. */
static void test_nan_inf(void **state) {
    (void)state;
    static const char *const ops[] = {"Max",       "Min",         "Clip", "Relu", "LeakyRelu",
                                      "HardSwish", "HardSigmoid", "Pow2", "Pow3", "PowHalf",
                                      "Sqrt",      "Neg",         "Abs"};
    float x[40];
    for (int i = 0; i < 40; i++) x[i] = (float)(i - 20) * 0.37f;
    x[3] = NAN;
    x[17] = INFINITY;
    x[33] = -INFINITY;
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
        const bool binary = !strcmp(ops[o], "Max") || !strcmp(ops[o], "Min");
        for (int nan_operand = 0; nan_operand < (binary ? 2 : 1); nan_operand++) {
            float c = nan_operand ? NAN : 0.5f;
            /* Neg first (a chain of two), then the step, its operand input 1 */
            step st[2] = {{"Neg", -1, 0, 0, 0}, {ops[o], binary ? 1 : -1, 0, -1.0f, 2.0f}};
            const float *data[1] = {&c};
            optest t;
            chain_begin(&t, st, 2, 1, (int64_t[]){40}, x, &scalar, data, 1);
            assert_int_equal(check_variants(&t, 1e-6f, 1e-6f), expected(false));
            optest_end(&t);
        }
    }
}

/* ---- side operand patterns ---------------------------------------------------------------- */

static void run_pattern(int rank, const int64_t *dims, operand op) {
    const step st[3] = {{"Sub", 1, 1, 0, 0}, {"Div", 1, 0, 0, 0}, {"Max", 1, 0, 0, 0}};
    run_chain(st, 3, rank, dims, -2, 2, &op, 1, 1e-6f, expected(false));
}

static void test_broadcast_patterns(void **state) {
    (void)state;
    const int64_t big[4] = {2, 8, 19, 23}, small[4] = {2, 8, 3, 3};
    run_pattern(4, big, (operand){3, {8, 1, 1}});                 /* per channel, long runs */
    run_pattern(4, big, (operand){4, {1, 8, 1, 1}});              /* the same, rank 4 */
    run_pattern(4, small, (operand){3, {8, 1, 1}});               /* per channel, runs of 9 */
    run_pattern(4, big, (operand){1, {23}});                      /* trailing row of 23 */
    run_pattern(3, (int64_t[]){3, 5, 200}, (operand){1, {200}});  /* trailing row of 200 */
    run_pattern(4, big, (operand){2, {19, 23}});                  /* trailing plane */
    run_pattern(4, big, (operand){3, {8, 19, 1}});                /* channel x row */
    run_pattern(4, big, (operand){4, {2, 8, 19, 23}});            /* full shape */
    run_pattern(4, big, (operand){4, {2, 1, 1, 1}});              /* per image */
    run_pattern(2, (int64_t[]){300, 70}, (operand){2, {300, 1}}); /* per row */
    run_pattern(1, (int64_t[]){5000}, (operand){1, {1}});
    /* per channel past the parallel threshold */
    run_pattern(4, (int64_t[]){1, 64, 40, 40}, (operand){3, {64, 1, 1}});
    run_pattern(3, (int64_t[]){1, 128, 384}, (operand){1, {384}});
    /* zero-size */
    run_pattern(2, (int64_t[]){0, 5}, (operand){1, {5}});
    run_pattern(4, (int64_t[]){2, 8, 0, 3}, (operand){3, {8, 1, 1}});
}

/* An operand varying over two separate blocks of dims: the reference computes it, no variant
 * takes it. */
static void test_declined(void **state) {
    (void)state;
    const int64_t dims[4] = {2, 3, 4, 5};
    run_chain((step[]){{"Add", 1, 0, 0, 0}, {"Relu", -1, 0, 0, 0}}, 2, 4, dims, -2, 2,
              (operand[]){{3, {3, 1, 5}}}, 1, 1e-6f, 0);
}

/* ---- the reference against the single ops -------------------------------------------------- */

/* Runs one single-op node through its reference kernel: y = op(v [, b]). */
static void single(ir_op op, int opset, const float *v, int rank, const int64_t *dims,
                   const float *b, const operand *bs, bool b_first, const char *an, float av,
                   const char *bn, float bv, float *y) {
    optest t;
    int n_attrs = (an ? 1 : 0) + (bn ? 1 : 0);
    optest_begin_opset(&t, op, b ? 2 : 1, 1, n_attrs, opset);
    if (an) optest_attr_float(&t, 0, an, av);
    if (bn) optest_attr_float(&t, 1, bn, bv);
    if (b && b_first) {
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank, dims, v, false);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, bs->rank, bs->dims, b, true);
    } else {
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, v, false);
        if (b) optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, bs->rank, bs->dims, b, true);
    }
    assert_int_equal(optest_run(&t), ANVIL_OK);
    memcpy(y, t.out[0].data, optest_prod(dims, rank) * sizeof(float));
    optest_end(&t);
}

/* HardSwish spelled out with a per-channel scale, and GELU, step by step through the single ops'
 * references: the chain's reference gives the same floats. */
static void test_reference_matches_single_ops(void **state) {
    (void)state;
    const int64_t dims[4] = {2, 3, 5, 7};
    const size_t n = optest_prod(dims, 4);
    float *x = optest_random_f32(n, 9, -7, 7), *a = malloc(n * 4), *b = malloc(n * 4);
    float three = 3, six = 6, zero = 0, sqrt2 = 1.41421356f, one = 1, half = 0.5f;
    float ch[3] = {0.5f, -1.25f, 2};
    const operand pc = {3, {3, 1, 1}};
    single(IR_OP_ADD, 17, x, 4, dims, &three, &scalar, false, NULL, 0, NULL, 0, a);
    single(IR_OP_CLIP, 6, a, 4, dims, NULL, NULL, false, "min", 0, "max", 6, b);
    single(IR_OP_DIV, 17, b, 4, dims, &six, &scalar, false, NULL, 0, NULL, 0, a);
    single(IR_OP_MUL, 17, a, 4, dims, x, &(operand){4, {2, 3, 5, 7}}, false, NULL, 0, NULL, 0, b);
    single(IR_OP_SUB, 17, b, 4, dims, ch, &pc, true, NULL, 0, NULL, 0, a);
    single(IR_OP_DIV, 17, a, 4, dims, &sqrt2, &scalar, false, NULL, 0, NULL, 0, b);
    single(IR_OP_ERF, 17, b, 4, dims, NULL, NULL, false, NULL, 0, NULL, 0, a);
    single(IR_OP_ADD, 17, a, 4, dims, &one, &scalar, false, NULL, 0, NULL, 0, b);
    single(IR_OP_MUL, 17, b, 4, dims, &half, &scalar, false, NULL, 0, NULL, 0, a);
    single(IR_OP_LEAKYRELU, 17, a, 4, dims, NULL, NULL, false, "alpha", 0.2f, NULL, 0, b);
    single(IR_OP_HARDSIGMOID, 17, b, 4, dims, NULL, NULL, false, "alpha", 0.3f, "beta", 0.1f, a);
    const step st[] = {{"Add", 1, 0, 0, 0},
                       {"Clip", -1, 0, 0, 6},
                       {"Div", 2, 0, 0, 0},
                       {"Mul", 0, 0, 0, 0},
                       {"Sub", 3, 1, 0, 0},
                       {"Div", 4, 0, 0, 0},
                       {"Erf", -1, 0, 0, 0},
                       {"Add", 5, 0, 0, 0},
                       {"Mul", 6, 0, 0, 0},
                       {"LeakyRelu", -1, 0, 0.2f, 0},
                       {"HardSigmoid", -1, 0, 0.3f, 0.1f}};
    const operand ops[6] = {scalar, scalar, pc, scalar, scalar, scalar};
    const float *data[6] = {&three, &six, ch, &sqrt2, &one, &half};
    optest t;
    chain_begin(&t, st, 11, 4, dims, x, ops, data, 6);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, a, n * sizeof(float));
    optest_end(&t);
    (void)zero;
    free(x);
    free(a);
    free(b);
}

/* check and infer refuse malformed chains. */
static void test_malformed(void **state) {
    (void)state;
    float x[4] = {0};
    optest t;
    chain_begin(&t, (step[]){{"Softmax", -1, 0, 0, 0}}, 1, 1, (int64_t[]){4}, x, NULL, NULL, 0);
    assert_int_equal(optest_infer(&t), ANVIL_ERR_INVALID_MODEL);
    optest_end(&t);
    chain_begin(&t, (step[]){{"Add", 3, 0, 0, 0}}, 1, 1, (int64_t[]){4}, x, NULL, NULL, 0);
    assert_int_equal(optest_infer(&t), ANVIL_ERR_INVALID_MODEL);
    optest_end(&t);
    chain_begin(&t, (step[]){{"Relu", 0, 0, 0, 0}}, 1, 1, (int64_t[]){4}, x, NULL, NULL, 0);
    assert_int_equal(optest_infer(&t), ANVIL_ERR_INVALID_MODEL);
    optest_end(&t);
    /* a side input larger than x would change the output's shape */
    const float *data[1] = {x};
    chain_begin(&t, (step[]){{"Add", 1, 0, 0, 0}}, 1, 1, (int64_t[]){1}, x,
                (operand[]){{2, {2, 2}}}, data, 1);
    assert_int_equal(optest_infer(&t), ANVIL_ERR_SHAPE);
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_chains), cmocka_unit_test(test_each_step),
        cmocka_unit_test(test_nan_inf),      cmocka_unit_test(test_broadcast_patterns),
        cmocka_unit_test(test_declined),     cmocka_unit_test(test_reference_matches_single_ops),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
