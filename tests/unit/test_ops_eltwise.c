/* Add, Sub, Mul, Div, Pow, Max, Min, Sqrt, Exp, Log, Neg, Abs reference kernels: randomised
 * broadcasting against an index-by-index reference written here (unravel the output index, map
 * it into each input), hand-computed integer wrap-around / truncation / NaN cases (the Pow and
 * Max/Min edge values were checked against onnxruntime 1.31), every dtype family, zero-size and
 * scalar shapes, opset < 7 broadcasting, symbolic shapes, in-place and multi-threaded runs, and
 * the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static float rnd_float(float lo, float hi) {
    return lo + (hi - lo) * (float)rnd(1u << 20) / (float)(1u << 20);
}

static size_t numel(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

/* Flat index into an input of dims `id` (rank ri) for output element `lin` of dims `od`. */
static size_t bcast_index(size_t lin, const int64_t *od, int r, const int64_t *id, int ri) {
    int64_t oi[IR_MAX_RANK];
    for (int d = r - 1; d >= 0; d--) {
        oi[d] = (int64_t)(lin % (size_t)od[d]);
        lin /= (size_t)od[d];
    }
    size_t idx = 0;
    for (int d = 0; d < ri; d++) {
        int64_t o = oi[d + (r - ri)];
        idx = idx * (size_t)id[d] + (size_t)(id[d] == 1 ? 0 : o);
    }
    return idx;
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static void set_shape(op_tinfo *ti, anvil_dtype dt, int rank, const int64_t *d,
                      const int32_t *sym) {
    memset(ti, 0, sizeof *ti);
    ti->dtype = dt;
    ti->shape.rank = rank;
    for (int i = 0; i < rank; i++) {
        ti->shape.d[i] = d[i];
        ti->shape.sym[i] = sym ? sym[i] : -1;
    }
}

/* check + infer with hand-made input infos (unknown and symbolic dims). Inputs are attached to
 * the node first so the arity check sees them. */
static anvil_status infer_with(optest *t, const op_tinfo *in, op_tinfo *out) {
    static const float dummy[1];
    for (int i = 0; i < t->n_in; i++)
        if (!t->in_set[i]) optest_input(t, i, in[i].dtype, 0, NULL, dummy, false);
    anvil_status s = op_check_graph(t->g);
    if (s != ANVIL_OK) return s;
    for (int i = 0; i < t->n_out; i++) {
        memset(&out[i], 0, sizeof out[i]);
        ir_shape_unknown(&out[i].shape);
    }
    return op_get(optest_node(t)->op)->infer(t->g, optest_node(t), in, t->n_in, out, t->n_out);
}

static void assert_dims(const op_tinfo *o, int rank, const int64_t *d) {
    assert_int_equal(o->shape.rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(o->shape.d[i], d[i]);
}

/* Runs a two-input op on the given inputs (data borrowed) and returns t (caller ends it). */
static anvil_status run2(optest *t, ir_op op, anvil_dtype da, int ra, const int64_t *a_dims,
                         const void *a, anvil_dtype db, int rb, const int64_t *b_dims,
                         const void *b) {
    optest_begin(t, op, 2, 1, 0);
    optest_input(t, 0, da, ra, a_dims, a, false);
    optest_input(t, 1, db, rb, b_dims, b, false);
    return optest_run(t);
}

static double ref_binary(ir_op op, double a, double b) {
    switch (op) {
    case IR_OP_ADD:
        return a + b;
    case IR_OP_SUB:
        return a - b;
    case IR_OP_MUL:
        return a * b;
    case IR_OP_DIV:
        return a / b;
    case IR_OP_MAX:
        return a > b ? a : b;
    case IR_OP_MIN:
        return a < b ? a : b;
    default:
        return NAN;
    }
}

/* ---- broadcasting, randomised -------------------------------------------------------------- */

static void random_operand_dims(const int64_t *full, int r, int *ri, int64_t *d) {
    *ri = (int)rnd((uint32_t)r + 1);
    for (int i = 0; i < *ri; i++) {
        int64_t f = full[i + (r - *ri)];
        d[i] = rnd(3) == 0 ? 1 : f;
    }
}

static void test_binary_random_broadcast(void **state) {
    (void)state;
    static const ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV, IR_OP_MAX, IR_OP_MIN};
    for (int iter = 0; iter < 250; iter++) {
        int r = (int)rnd(6);
        int64_t full[IR_MAX_RANK], ad[IR_MAX_RANK], bd[IR_MAX_RANK], od[IR_MAX_RANK];
        for (int i = 0; i < r; i++) full[i] = 1 + rnd(5);
        int ra, rb;
        random_operand_dims(full, r, &ra, ad);
        random_operand_dims(full, r, &rb, bd);
        int ro = ra > rb ? ra : rb;
        for (int i = 0; i < ro; i++) {
            int ia = i - (ro - ra), ib = i - (ro - rb);
            int64_t x = ia >= 0 ? ad[ia] : 1, y = ib >= 0 ? bd[ib] : 1;
            od[i] = x > y ? x : y;
        }
        size_t na = numel(ad, ra), nb = numel(bd, rb), no = numel(od, ro);
        float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
        for (size_t i = 0; i < na; i++) a[i] = rnd_float(-4, 4);
        for (size_t i = 0; i < nb; i++)
            b[i] = rnd_float(0.5f, 3) * (rnd(2) ? 1.0f : -1.0f); /* safe divisors */
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
            optest t;
            assert_int_equal(
                run2(&t, ops[k], ANVIL_DTYPE_FLOAT32, ra, ad, a, ANVIL_DTYPE_FLOAT32, rb, bd, b),
                ANVIL_OK);
            assert_dims(&t.out_info[0], ro, od);
            const float *y = t.out[0].data;
            for (size_t i = 0; i < no; i++) {
                double want = ref_binary(ops[k], a[bcast_index(i, od, ro, ad, ra)],
                                         b[bcast_index(i, od, ro, bd, rb)]);
                if (fabs(y[i] - want) > 1e-6 * fabs(want) + 1e-7) {
                    fprintf(stderr, "%s iter %d at %zu: got %g want %g\n", ir_op_name(ops[k]), iter,
                            i, (double)y[i], want);
                    fail();
                }
            }
            optest_end(&t);
        }
        free(a);
        free(b);
    }
}

/* ---- dtypes: integer wrap-around and truncation, f16/bf16/f64 -------------------------------- */

static void test_binary_integer_semantics(void **state) {
    (void)state;
    optest t;
    int64_t d3[1] = {3}, d2[1] = {2}, d5[1] = {5};

    int32_t a32[3] = {INT32_MAX, -5, 7}, b32[3] = {1, 3, -9};
    assert_int_equal(
        run2(&t, IR_OP_ADD, ANVIL_DTYPE_INT32, 1, d3, a32, ANVIL_DTYPE_INT32, 1, d3, b32),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){INT32_MIN, -2, -2}), 3 * sizeof(int32_t));
    optest_end(&t);

    uint8_t au8[2] = {200, 5}, bu8[2] = {100, 6};
    assert_int_equal(
        run2(&t, IR_OP_ADD, ANVIL_DTYPE_UINT8, 1, d2, au8, ANVIL_DTYPE_UINT8, 1, d2, bu8),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){44, 11}), 2);
    optest_end(&t);

    /* 65535 * 65535 would overflow int after integer promotion in naive C */
    uint16_t au16[2] = {65535, 300};
    assert_int_equal(
        run2(&t, IR_OP_MUL, ANVIL_DTYPE_UINT16, 1, d2, au16, ANVIL_DTYPE_UINT16, 1, d2, au16),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint16_t[]){1, (uint16_t)(90000 % 65536)}),
                        2 * sizeof(uint16_t));
    optest_end(&t);

    int64_t a64[2] = {INT64_MAX, -4}, b64[2] = {2, 3};
    assert_int_equal(
        run2(&t, IR_OP_MUL, ANVIL_DTYPE_INT64, 1, d2, a64, ANVIL_DTYPE_INT64, 1, d2, b64),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){-2, -12}), 2 * sizeof(int64_t));
    optest_end(&t);

    int8_t ai8[2] = {-128, 5}, bi8[2] = {1, -3};
    assert_int_equal(
        run2(&t, IR_OP_SUB, ANVIL_DTYPE_INT8, 1, d2, ai8, ANVIL_DTYPE_INT8, 1, d2, bi8), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int8_t[]){127, 8}), 2);
    optest_end(&t);

    /* truncation toward zero (ONNX Runtime gives 3, -3, -3, 3) and MIN / -1 without a trap */
    int32_t n32[5] = {7, -7, 7, -7, INT32_MIN}, q32[5] = {2, 2, -2, -2, -1};
    assert_int_equal(
        run2(&t, IR_OP_DIV, ANVIL_DTYPE_INT32, 1, d5, n32, ANVIL_DTYPE_INT32, 1, d5, q32),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){3, -3, -3, 3, INT32_MIN}), 5 * sizeof(int32_t));
    optest_end(&t);

    int8_t n8[2] = {-128, -100}, q8[2] = {-1, 7};
    assert_int_equal(run2(&t, IR_OP_DIV, ANVIL_DTYPE_INT8, 1, d2, n8, ANVIL_DTYPE_INT8, 1, d2, q8),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int8_t[]){-128, -14}), 2);
    optest_end(&t);

    /* the all-ones divisor of an unsigned type is not -1 */
    uint32_t nu[2] = {UINT32_MAX, 10}, qu[2] = {UINT32_MAX, 3};
    assert_int_equal(
        run2(&t, IR_OP_DIV, ANVIL_DTYPE_UINT32, 1, d2, nu, ANVIL_DTYPE_UINT32, 1, d2, qu),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint32_t[]){1, 3}), 2 * sizeof(uint32_t));
    optest_end(&t);

    uint64_t mu[2] = {UINT64_MAX, 1}, mv[2] = {0, 2};
    assert_int_equal(
        run2(&t, IR_OP_MAX, ANVIL_DTYPE_UINT64, 1, d2, mu, ANVIL_DTYPE_UINT64, 1, d2, mv),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint64_t[]){UINT64_MAX, 2}), 2 * sizeof(uint64_t));
    optest_end(&t);
    assert_int_equal(
        run2(&t, IR_OP_MIN, ANVIL_DTYPE_UINT64, 1, d2, mu, ANVIL_DTYPE_UINT64, 1, d2, mv),
        ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint64_t[]){0, 1}), 2 * sizeof(uint64_t));
    optest_end(&t);

    /* int64 matrix minus a scalar */
    int64_t m[6] = {1, 2, 3, 4, 5, 6}, s = 10;
    assert_int_equal(run2(&t, IR_OP_SUB, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 3}, m,
                          ANVIL_DTYPE_INT64, 0, d2, &s),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){-9, -8, -7, -6, -5, -4}), 6 * sizeof(int64_t));
    optest_end(&t);
}

static void test_binary_float_dtypes(void **state) {
    (void)state;
    optest t;
    int64_t d4[1] = {4};
    double a64[4] = {1.0 / 3, 1e300, -2.5, 7}, b64[4] = {3, 1e10, 0.1, -7};
    static const ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV};
    for (size_t k = 0; k < 4; k++) {
        assert_int_equal(
            run2(&t, ops[k], ANVIL_DTYPE_FLOAT64, 1, d4, a64, ANVIL_DTYPE_FLOAT64, 1, d4, b64),
            ANVIL_OK);
        const double *y = t.out[0].data;
        for (int i = 0; i < 4; i++) assert_true(y[i] == ref_binary(ops[k], a64[i], b64[i]));
        optest_end(&t);
    }

    /* f16 and bf16 compute in float and round once */
    const float fa[4] = {1.5f, 2.25f, -3.0f, 65000.0f}, fb[4] = {0.25f, 1.0f, 0.125f, 1000.0f};
    for (int kind = 0; kind < 2; kind++) {
        anvil_dtype dt = kind ? ANVIL_DTYPE_BFLOAT16 : ANVIL_DTYPE_FLOAT16;
        uint16_t ha[4], hb[4];
        for (int i = 0; i < 4; i++) {
            ha[i] = kind ? core_f32_to_bf16(fa[i]) : core_f32_to_f16(fa[i]);
            hb[i] = kind ? core_f32_to_bf16(fb[i]) : core_f32_to_f16(fb[i]);
        }
        for (size_t k = 0; k < 4; k++) {
            assert_int_equal(run2(&t, ops[k], dt, 1, d4, ha, dt, 1, d4, hb), ANVIL_OK);
            assert_int_equal(t.out_info[0].dtype, dt);
            const uint16_t *y = t.out[0].data;
            for (int i = 0; i < 4; i++) {
                float x = kind ? core_bf16_to_f32(ha[i]) : core_f16_to_f32(ha[i]);
                float z = kind ? core_bf16_to_f32(hb[i]) : core_f16_to_f32(hb[i]);
                float r = (float)ref_binary(ops[k], x, z);
                uint16_t want = kind ? core_f32_to_bf16(r) : core_f32_to_f16(r);
                assert_int_equal(y[i], want);
            }
            optest_end(&t);
        }
    }
    /* 65000 + 1000 overflows f16 to +inf */
    uint16_t big = core_f32_to_f16(65000.0f), thousand = core_f32_to_f16(1000.0f);
    assert_int_equal(run2(&t, IR_OP_ADD, ANVIL_DTYPE_FLOAT16, 0, d4, &big, ANVIL_DTYPE_FLOAT16, 0,
                          d4, &thousand),
                     ANVIL_OK);
    assert_true(isinf(core_f16_to_f32(((uint16_t *)t.out[0].data)[0])));
    optest_end(&t);

    /* float division by zero is IEEE, not an error */
    float num[3] = {1, -1, 0}, zero[1] = {0};
    assert_int_equal(run2(&t, IR_OP_DIV, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, num,
                          ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, zero),
                     ANVIL_OK);
    const float *q = t.out[0].data;
    assert_true(isinf(q[0]) && q[0] > 0);
    assert_true(isinf(q[1]) && q[1] < 0);
    assert_true(isnan(q[2]));
    optest_end(&t);
}

static void test_div_by_zero(void **state) {
    (void)state;
    optest t;
    int32_t a[4] = {1, 2, 3, 4}, b[2] = {5, 0};
    assert_int_equal(run2(&t, IR_OP_DIV, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 2}, a,
                          ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, b),
                     ANVIL_ERR_RUNTIME);
    assert_non_null(strstr(anvil_last_error(), "division by zero"));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
    assert_non_null(strstr(anvil_last_error(), "index 1"));
    optest_end(&t);

    uint64_t ua[1] = {9}, ub[1] = {0};
    assert_int_equal(run2(&t, IR_OP_DIV, ANVIL_DTYPE_UINT64, 1, (int64_t[]){1}, ua,
                          ANVIL_DTYPE_UINT64, 1, (int64_t[]){1}, ub),
                     ANVIL_ERR_RUNTIME);
    optest_end(&t);

    /* an empty output never divides */
    int64_t ea[1], eb[1] = {0};
    assert_int_equal(run2(&t, IR_OP_DIV, ANVIL_DTYPE_INT64, 2, (int64_t[]){0, 1}, ea,
                          ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, eb),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){0, 1});
    optest_end(&t);
}

/* ---- Max / Min ----------------------------------------------------------------------------- */

static void test_variadic(void **state) {
    (void)state;
    optest t;
    int64_t d0[3] = {2, 1, 3}, d1[2] = {4, 1}, d2[1] = {3}, od[3] = {2, 4, 3};
    float x0[6], x1[4], x2[3];
    for (int i = 0; i < 6; i++) x0[i] = rnd_float(-5, 5);
    for (int i = 0; i < 4; i++) x1[i] = rnd_float(-5, 5);
    for (int i = 0; i < 3; i++) x2[i] = rnd_float(-5, 5);
    for (int k = 0; k < 2; k++) {
        ir_op op = k ? IR_OP_MIN : IR_OP_MAX;
        optest_begin(&t, op, 3, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, d0, x0, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, d1, x1, false);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, d2, x2, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_dims(&t.out_info[0], 3, od);
        const float *y = t.out[0].data;
        for (size_t i = 0; i < 24; i++) {
            double v = x0[bcast_index(i, od, 3, d0, 3)];
            v = ref_binary(op, v, x1[bcast_index(i, od, 3, d1, 2)]);
            v = ref_binary(op, v, x2[bcast_index(i, od, 3, d2, 1)]);
            assert_true(y[i] == (float)v);
        }
        optest_end(&t);
    }

    /* one input: a copy */
    int16_t s[3] = {-4, 9, 2};
    optest_begin(&t, IR_OP_MAX, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, d2, s, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, s, sizeof s);
    optest_end(&t);

    /* NaN in either operand gives NaN (np.maximum; onnxruntime agrees) */
    float a[4] = {1, NAN, 3, NAN}, b[4] = {NAN, 2, 1, NAN};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(run2(&t, k ? IR_OP_MIN : IR_OP_MAX, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4},
                              a, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, b),
                         ANVIL_OK);
        const float *y = t.out[0].data;
        assert_true(isnan(y[0]) && isnan(y[1]) && isnan(y[3]));
        assert_true(y[2] == (k ? 1.0f : 3.0f));
        optest_end(&t);
    }

    /* int8 with a broadcast scalar */
    int8_t i8[4] = {-128, 127, 0, -1}, zero = 0;
    assert_int_equal(run2(&t, IR_OP_MAX, ANVIL_DTYPE_INT8, 1, (int64_t[]){4}, i8, ANVIL_DTYPE_INT8,
                          0, d2, &zero),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int8_t[]){0, 127, 0, 0}), 4);
    optest_end(&t);

    /* errors */
    double dd[3] = {0};
    optest_begin(&t, IR_OP_MIN, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, d2, x2, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 1, d2, dd, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "dtype DOUBLE");
    optest_end(&t);

    optest_begin(&t, IR_OP_MAX, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, d2, x2, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, d2, x2, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "input 1");
    optest_end(&t);

    uint8_t bools[3] = {1, 0, 1};
    optest_begin(&t, IR_OP_MAX, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, d2, bools, false);
    optest_input(&t, 1, ANVIL_DTYPE_BOOL, 1, d2, bools, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "BOOL");
    optest_end(&t);

    float y4[4] = {0};
    optest_begin(&t, IR_OP_MAX, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, d2, x2, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, y4, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "cannot be broadcast");
    optest_end(&t);
}

/* ---- Pow ----------------------------------------------------------------------------------- */

static void test_pow(void **state) {
    (void)state;
    optest t;
    /* float ^ float against libm, with a broadcast exponent row */
    float base[6], ex[3] = {0.5f, 2.0f, -1.5f};
    for (int i = 0; i < 6; i++) base[i] = rnd_float(0.1f, 4);
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, base,
                          ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, ex),
                     ANVIL_OK);
    for (int i = 0; i < 6; i++) {
        double want = pow(base[i], ex[i % 3]);
        assert_true(fabs(((float *)t.out[0].data)[i] - want) <= 1e-6 * want);
    }
    optest_end(&t);

    /* float base, int64 exponent: x^2 and x^-1; the output keeps the base's dtype */
    float xb[3] = {-3, 0.5f, 10};
    int64_t e2[2] = {2, -1};
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 1}, xb,
                          ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, e2),
                     ANVIL_OK);
    assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_FLOAT32);
    assert_memory_equal(t.out[0].data, ((float[]){9, -1.0f / 3, 0.25f, 2, 100, 0.1f}),
                        6 * sizeof(float));
    optest_end(&t);

    /* int32 ^ int32: exact, with onnxruntime's results for negative powers and overflow */
    int32_t bi[7] = {2, 0, 1, -1, -2, 3, 2}, ei[7] = {-1, -1, -3, -3, -3, 40, 31};
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_INT32, 1, (int64_t[]){7}, bi,
                          ANVIL_DTYPE_INT32, 1, (int64_t[]){7}, ei),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){0, INT32_MIN, 1, -1, 0, INT32_MIN, INT32_MIN}),
                        7 * sizeof(int32_t));
    optest_end(&t);

    int32_t bj[4] = {-2, 3, 7, -3}, ej[4] = {31, 19, 0, 3};
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_INT32, 1, (int64_t[]){4}, bj,
                          ANVIL_DTYPE_INT32, 1, (int64_t[]){4}, ej),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){INT32_MIN, 1162261467, 1, -27}),
                        4 * sizeof(int32_t));
    optest_end(&t);

    /* int64 stays exact where double would not: 3^39 > 2^53 */
    int64_t b64[2] = {3, -7}, e64[2] = {39, 22};
    int64_t want39 = 1, want22 = 1;
    for (int i = 0; i < 39; i++) want39 *= 3;
    for (int i = 0; i < 22; i++) want22 *= -7;
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, b64,
                          ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, e64),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){want39, want22}), 2 * sizeof(int64_t));
    optest_end(&t);

    /* int32 base, float exponent: pow in double, truncated (onnxruntime: 1, 15, INT32_MIN) */
    int32_t bf[3] = {2, 3, -8};
    float ef[3] = {0.5f, 2.5f, 1.0f / 3};
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, bf,
                          ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, ef),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){1, 15, INT32_MIN}), 3 * sizeof(int32_t));
    optest_end(&t);

    /* int64 base with a uint64 exponent beyond INT64_MAX keeps (-1)'s parity */
    int64_t bu[3] = {-1, 1, 0};
    uint64_t eu = UINT64_MAX;
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, bu,
                          ANVIL_DTYPE_UINT64, 0, bu, &eu),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){-1, 1, 0}), 3 * sizeof(int64_t));
    optest_end(&t);

    /* f16 base with f32 exponent, and f64 ^ uint8 */
    uint16_t hb[2] = {core_f32_to_f16(3.0f), core_f32_to_f16(0.5f)};
    float he[1] = {3};
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){2}, hb,
                          ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, he),
                     ANVIL_OK);
    assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_FLOAT16);
    assert_true(core_f16_to_f32(((uint16_t *)t.out[0].data)[0]) == 27.0f);
    assert_true(core_f16_to_f32(((uint16_t *)t.out[0].data)[1]) == 0.125f);
    optest_end(&t);

    double db[2] = {1.5, -2};
    uint8_t du[2] = {3, 10};
    assert_int_equal(run2(&t, IR_OP_POW, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){2}, db,
                          ANVIL_DTYPE_UINT8, 1, (int64_t[]){2}, du),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((double[]){3.375, 1024}), 2 * sizeof(double));
    optest_end(&t);

    /* errors: int8 base is not an ONNX Pow base type; bool exponent neither */
    int8_t i8[2] = {2, 3};
    optest_begin(&t, IR_OP_POW, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 1, (int64_t[]){2}, i8, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT8, 1, (int64_t[]){2}, i8, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT8");
    optest_end(&t);
    uint8_t bo[2] = {1, 0};
    optest_begin(&t, IR_OP_POW, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, xb, false);
    optest_input(&t, 1, ANVIL_DTYPE_BOOL, 1, (int64_t[]){2}, bo, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "input 1 has dtype BOOL");
    optest_end(&t);
}

/* ---- unary --------------------------------------------------------------------------------- */

static void run_unary(optest *t, ir_op op, anvil_dtype dt, size_t n, const void *x) {
    optest_begin(t, op, 1, 1, 0);
    optest_input(t, 0, dt, 1, (int64_t[]){(int64_t)n}, x, false);
    assert_int_equal(optest_run(t), ANVIL_OK);
    assert_int_equal(t->out_info[0].dtype, dt);
}

static void test_unary_float(void **state) {
    (void)state;
    enum { N = 257 };
    float x[N];
    double xd[N];
    for (int i = 0; i < N; i++) {
        x[i] = rnd_float(0.01f, 20);
        xd[i] = x[i];
    }
    static const ir_op ops[] = {IR_OP_SQRT, IR_OP_EXP, IR_OP_LOG, IR_OP_NEG, IR_OP_ABS};
    for (size_t k = 0; k < 5; k++) {
        optest t;
        run_unary(&t, ops[k], ANVIL_DTYPE_FLOAT32, N, x);
        const float *y = t.out[0].data;
        for (int i = 0; i < N; i++) {
            double v = x[i], want = ops[k] == IR_OP_SQRT  ? sqrt(v)
                                    : ops[k] == IR_OP_EXP ? exp(v)
                                    : ops[k] == IR_OP_LOG ? log(v)
                                    : ops[k] == IR_OP_NEG ? -v
                                                          : v;
            assert_true(fabs(y[i] - want) <= 2e-7 * fabs(want));
        }
        optest_end(&t);
        run_unary(&t, ops[k], ANVIL_DTYPE_FLOAT64, N, xd);
        const double *yd = t.out[0].data;
        for (int i = 0; i < N; i++) {
            double v = xd[i], want = ops[k] == IR_OP_SQRT  ? sqrt(v)
                                     : ops[k] == IR_OP_EXP ? exp(v)
                                     : ops[k] == IR_OP_LOG ? log(v)
                                     : ops[k] == IR_OP_NEG ? -v
                                                           : v;
            assert_true(yd[i] == want);
        }
        optest_end(&t);
    }

    /* special values */
    float sp[4] = {-1, 0, -0.0f, INFINITY};
    optest t;
    run_unary(&t, IR_OP_SQRT, ANVIL_DTYPE_FLOAT32, 4, sp);
    const float *y = t.out[0].data;
    assert_true(isnan(y[0]) && y[1] == 0 && isinf(y[3]));
    optest_end(&t);
    run_unary(&t, IR_OP_LOG, ANVIL_DTYPE_FLOAT32, 4, sp);
    y = t.out[0].data;
    assert_true(isnan(y[0]) && isinf(y[1]) && y[1] < 0);
    optest_end(&t);
    run_unary(&t, IR_OP_ABS, ANVIL_DTYPE_FLOAT32, 4, sp);
    y = t.out[0].data;
    assert_true(y[0] == 1 && !signbit(y[2]));
    optest_end(&t);
    run_unary(&t, IR_OP_EXP, ANVIL_DTYPE_FLOAT32, 4, (float[]){-1000, 1000, 0, 1});
    y = t.out[0].data;
    assert_true(y[0] == 0 && isinf(y[1]) && y[2] == 1);
    optest_end(&t);

    /* f16 / bf16 through float */
    uint16_t h[3] = {core_f32_to_f16(4), core_f32_to_f16(2.25f), core_f32_to_f16(-1)};
    run_unary(&t, IR_OP_SQRT, ANVIL_DTYPE_FLOAT16, 3, h);
    const uint16_t *hy = t.out[0].data;
    assert_true(core_f16_to_f32(hy[0]) == 2 && core_f16_to_f32(hy[1]) == 1.5f);
    assert_true(isnan(core_f16_to_f32(hy[2])));
    optest_end(&t);
    uint16_t bh[2] = {core_f32_to_bf16(-3), core_f32_to_bf16(0.5f)};
    run_unary(&t, IR_OP_NEG, ANVIL_DTYPE_BFLOAT16, 2, bh);
    hy = t.out[0].data;
    assert_true(core_bf16_to_f32(hy[0]) == 3 && core_bf16_to_f32(hy[1]) == -0.5f);
    optest_end(&t);
}

static void test_unary_integer(void **state) {
    (void)state;
    optest t;
    int32_t i32[3] = {5, -7, INT32_MIN};
    run_unary(&t, IR_OP_NEG, ANVIL_DTYPE_INT32, 3, i32);
    assert_memory_equal(t.out[0].data, ((int32_t[]){-5, 7, INT32_MIN}), sizeof i32);
    optest_end(&t);
    int8_t i8[3] = {-128, 127, 0};
    run_unary(&t, IR_OP_NEG, ANVIL_DTYPE_INT8, 3, i8);
    assert_memory_equal(t.out[0].data, ((int8_t[]){-128, -127, 0}), 3);
    optest_end(&t);
    int64_t i64[3] = {INT64_MIN, -3, 4};
    run_unary(&t, IR_OP_ABS, ANVIL_DTYPE_INT64, 3, i64);
    assert_memory_equal(t.out[0].data, ((int64_t[]){INT64_MIN, 3, 4}), sizeof i64);
    optest_end(&t);
    uint8_t u8[2] = {200, 0};
    run_unary(&t, IR_OP_ABS, ANVIL_DTYPE_UINT8, 2, u8);
    assert_memory_equal(t.out[0].data, u8, 2);
    optest_end(&t);

    /* unsupported dtypes name the op, the dtype and what is supported */
    optest_begin(&t, IR_OP_SQRT, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, i32, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32, which Sqrt does not support");
    assert_non_null(strstr(anvil_last_error(), "FLOAT16"));
    optest_end(&t);
    optest_begin(&t, IR_OP_NEG, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 1, (int64_t[]){2}, u8, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "UINT8");
    optest_end(&t);
    optest_begin(&t, IR_OP_EXP, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_STRING, 1, (int64_t[]){2}, u8, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "STRING");
    optest_end(&t);
}

/* ---- shapes -------------------------------------------------------------------------------- */

static void test_edge_shapes(void **state) {
    (void)state;
    optest t;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, s = 0.5f;

    /* zero-size dims broadcast to zero-size outputs */
    assert_int_equal(run2(&t, IR_OP_ADD, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 3}, a,
                          ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){0, 3});
    optest_end(&t);
    assert_int_equal(run2(&t, IR_OP_MUL, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 0}, a,
                          ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, b),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){2, 0});
    optest_end(&t);
    run_unary(&t, IR_OP_EXP, ANVIL_DTYPE_FLOAT32, 0, a);
    optest_end(&t);

    /* scalars */
    assert_int_equal(
        run2(&t, IR_OP_SUB, ANVIL_DTYPE_FLOAT32, 0, NULL, &s, ANVIL_DTYPE_FLOAT32, 0, NULL, &s),
        ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_true(((float *)t.out[0].data)[0] == 0);
    optest_end(&t);
    assert_int_equal(run2(&t, IR_OP_SUB, ANVIL_DTYPE_FLOAT32, 0, NULL, &s, ANVIL_DTYPE_FLOAT32, 2,
                          (int64_t[]){2, 3}, a),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) assert_true(((float *)t.out[0].data)[i] == 0.5f - a[i]);
    optest_end(&t);

    /* all size-1 dims; rank extension */
    assert_int_equal(run2(&t, IR_OP_ADD, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, a,
                          ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, b),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){1, 1, 1});
    assert_true(((float *)t.out[0].data)[0] == 11);
    optest_end(&t);

    /* both sides broadcast: [2,1] x [1,3] is an outer product */
    assert_int_equal(run2(&t, IR_OP_MUL, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 1}, a,
                          ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, b),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){10, 20, 30, 20, 40, 60}), 6 * sizeof(float));
    optest_end(&t);

    /* incompatible shapes and dtypes */
    float c[4] = {0};
    optest_begin(&t, IR_OP_ADD, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, c, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "cannot be broadcast");
    optest_end(&t);
    double d[3] = {0};
    optest_begin(&t, IR_OP_DIV, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){3}, d, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "input 1 has dtype DOUBLE but input 0 has FLOAT");
    optest_end(&t);
    optest_begin(&t, IR_OP_ADD, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "inputs");
    optest_end(&t);
}

static void test_infer_symbolic(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_ADD, 2, 1, 0);
    int32_t nsym;
    assert_int_equal(ir_graph_add_sym(t.g, "N", &nsym), ANVIL_OK);
    op_tinfo in[2], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){-1, 3}, (int32_t[]){nsym, -1});
    set_shape(&in[1], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, NULL);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 2);
    assert_int_equal(out[0].shape.d[0], -1);
    assert_int_equal(out[0].shape.sym[0], nsym);
    assert_int_equal(out[0].shape.d[1], 3);
    /* unknown rank stays unknown */
    in[1].shape.rank = -1;
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, -1);
    assert_int_equal(out[0].dtype, ANVIL_DTYPE_FLOAT32);
    optest_end(&t);

    optest_begin(&t, IR_OP_EXP, 1, 1, 0);
    assert_int_equal(ir_graph_add_sym(t.g, "B", &nsym), ANVIL_OK);
    set_shape(&in[0], ANVIL_DTYPE_FLOAT16, 3, (int64_t[]){-1, 4, -1}, (int32_t[]){nsym, -1, -1});
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_int_equal(out[0].dtype, ANVIL_DTYPE_FLOAT16);
    assert_int_equal(out[0].shape.rank, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(out[0].shape.d[i], in[0].shape.d[i]);
        assert_int_equal(out[0].shape.sym[i], in[0].shape.sym[i]);
    }
    optest_end(&t);

    optest_begin(&t, IR_OP_MAX, 3, 1, 0);
    set_shape(&in[0], ANVIL_DTYPE_INT32, 1, (int64_t[]){5}, NULL);
    op_tinfo in3[3];
    in3[0] = in[0];
    set_shape(&in3[1], ANVIL_DTYPE_INT32, 2, (int64_t[]){-1, 1}, NULL);
    set_shape(&in3[2], ANVIL_DTYPE_INT32, 0, NULL, NULL);
    assert_int_equal(infer_with(&t, in3, out), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 2);
    assert_int_equal(out[0].shape.d[0], -1);
    assert_int_equal(out[0].shape.d[1], 5);
    optest_end(&t);
}

/* ---- opset < 7 broadcasting ----------------------------------------------------------------- */

static void test_legacy_broadcast(void **state) {
    (void)state;
    optest t;
    int64_t ad[4] = {2, 3, 4, 5};
    float a[120], b[12], c[5];
    for (int i = 0; i < 120; i++) a[i] = (float)i;
    for (int i = 0; i < 12; i++) b[i] = (float)(1000 * i);
    for (int i = 0; i < 5; i++) c[i] = (float)(-i);

    /* B [3,4] aligned at axis 1 of A [2,3,4,5] */
    optest_begin_opset(&t, IR_OP_ADD, 2, 1, 2, 6);
    optest_attr_int(&t, 0, "broadcast", 1);
    optest_attr_int(&t, 1, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 4, ad);
    for (int i = 0; i < 120; i++) {
        int j = (i / 5) % 12; /* (c, h) of (n, c, h, w) */
        assert_true(((float *)t.out[0].data)[i] == a[i] + b[j]);
    }
    optest_end(&t);

    /* default axis: B's dims are A's trailing dims */
    optest_begin_opset(&t, IR_OP_MUL, 2, 1, 1, 6);
    optest_attr_int(&t, 0, "broadcast", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, c, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int i = 0; i < 120; i++) assert_true(((float *)t.out[0].data)[i] == a[i] * c[i % 5]);
    optest_end(&t);

    /* broadcast=0 demands equal shapes */
    optest_begin_opset(&t, IR_OP_SUB, 2, 1, 0, 6);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, c, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "broadcast=0");
    optest_end(&t);

    /* B does not fit at the axis */
    optest_begin_opset(&t, IR_OP_DIV, 2, 1, 2, 6);
    optest_attr_int(&t, 0, "broadcast", 1);
    optest_attr_int(&t, 1, "axis", 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, b, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_ADD, 2, 1, 1, 6);
    optest_attr_int(&t, 0, "broadcast", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, c, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "broadcast");
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_ADD, 2, 1, 1, 6);
    optest_attr_float(&t, 0, "axis", 1.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "axis");
    optest_end(&t);

    /* from opset 7 the attributes are gone and numpy broadcasting applies */
    optest_begin_opset(&t, IR_OP_ADD, 2, 1, 1, 7);
    optest_attr_int(&t, 0, "broadcast", 7);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, c, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    optest_end(&t);
}

/* ---- in place and threads ------------------------------------------------------------------- */

static void test_inplace(void **state) {
    (void)state;
    optest t;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    float buf[6];
    memcpy(buf, a, sizeof a);
    optest_begin(&t, IR_OP_SUB, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    assert_true(op_get(IR_OP_SUB)->flags & OP_INPLACE_0);
    op_tensor o = t.in[0]; /* output over input 0's buffer */
    const op_tensor *ins[2] = {&t.in[0], &t.in[1]};
    op_tensor *outs[1] = {&o};
    assert_int_equal(op_get(IR_OP_SUB)->run(optest_node(&t), ins, 2, outs, 1, NULL), ANVIL_OK);
    for (int i = 0; i < 6; i++) assert_true(buf[i] == a[i] - b[i % 3]);
    optest_end(&t);

    memcpy(buf, a, sizeof a);
    optest_begin(&t, IR_OP_LOG, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, buf, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    o = t.in[0];
    assert_int_equal(op_get(IR_OP_LOG)->run(optest_node(&t), ins, 1, outs, 1, NULL), ANVIL_OK);
    for (int i = 0; i < 6; i++) assert_true(buf[i] == logf(a[i]));
    optest_end(&t);
}

static void test_threaded(void **state) {
    (void)state;
    core_pool *pool;
    assert_int_equal(core_pool_create(4, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};
    int64_t ad[3] = {64, 33, 17}, bd[2] = {33, 1};
    size_t na = numel(ad, 3), nb = 33;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    for (size_t i = 0; i < na; i++) a[i] = rnd_float(-3, 3);
    for (size_t i = 0; i < nb; i++) b[i] = rnd_float(-3, 3);

    static const ir_op ops[] = {IR_OP_ADD, IR_OP_MAX, IR_OP_POW, IR_OP_EXP, IR_OP_ABS};
    float *serial = malloc(na * sizeof *serial);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        bool unary = ops[k] == IR_OP_EXP || ops[k] == IR_OP_ABS;
        optest t;
        optest_begin(&t, ops[k], unary ? 1 : 2, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, ad, a, false);
        if (!unary) optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, bd, b, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        memcpy(serial, t.out[0].data, na * sizeof *serial);
        memset(t.out[0].data, 0, na * sizeof(float));
        const op_tensor *ins[2] = {&t.in[0], &t.in[1]};
        op_tensor *outs[1] = {&t.out[0]};
        assert_int_equal(op_get(ops[k])->run(optest_node(&t), ins, unary ? 1 : 2, outs, 1, &ctx),
                         ANVIL_OK);
        assert_memory_equal(t.out[0].data, serial, na * sizeof(float));
        /* and the serial result is right: spot-check against the reference */
        for (size_t i = 0; i < na; i += 97) {
            double x = a[i], y = b[bcast_index(i, ad, 3, bd, 2)];
            double want = ops[k] == IR_OP_ADD   ? x + y
                          : ops[k] == IR_OP_MAX ? (x > y ? x : y)
                          : ops[k] == IR_OP_POW ? pow(x, y)
                          : ops[k] == IR_OP_EXP ? exp(x)
                                                : fabs(x);
            if (isnan(want)) {
                assert_true(isnan(serial[i]));
            } else {
                assert_true(fabs(serial[i] - want) <= 1e-6 * fabs(want) + 1e-30);
            }
        }
        optest_end(&t);
    }
    free(serial);
    free(a);
    free(b);
    core_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_random_broadcast),
        cmocka_unit_test(test_binary_integer_semantics),
        cmocka_unit_test(test_binary_float_dtypes),
        cmocka_unit_test(test_div_by_zero),
        cmocka_unit_test(test_variadic),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_unary_float),
        cmocka_unit_test(test_unary_integer),
        cmocka_unit_test(test_edge_shapes),
        cmocka_unit_test(test_infer_symbolic),
        cmocka_unit_test(test_legacy_broadcast),
        cmocka_unit_test(test_inplace),
        cmocka_unit_test(test_threaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
