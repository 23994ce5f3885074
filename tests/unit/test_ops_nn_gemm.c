/* Gemm and MatMul reference kernels: randomised shapes against a naive triple loop written here
 * (Gemm: transA/transB, alpha/beta, every unidirectional broadcast of C; MatMul: 1-D promotion,
 * batch broadcasting in both directions), FLOAT / DOUBLE / FLOAT16 / BFLOAT16 and the integer
 * types with two's complement wrap-around, zero-size K/M/N, beta = 0 ignoring NaN in C, opset 6
 * `broadcast` and opset < 11 required C, multi-threaded runs, symbolic shapes and the errors bad
 * models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static uint64_t rng_state = 0xda942042e4dd58b5ull;

static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static size_t numel(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* Random values representable exactly in dt (small integers for integer types). */
static void *random_tensor(anvil_dtype dt, size_t n, double *as_double) {
    void *p = malloc((n ? n : 1) * anvil_dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        double v = core_dtype_is_int(dt) ? (double)rnd(11) - 5 : (double)rnd(2001) / 1000.0 - 1;
        if (dt == ANVIL_DTYPE_UINT32 || dt == ANVIL_DTYPE_UINT64) v = rnd(11);
        core_store_f64(dt, p, i, v);
        as_double[i] = core_load_f64(dt, p, i);
    }
    return p;
}

static double tol_for(anvil_dtype dt) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT16:
    case ANVIL_DTYPE_BFLOAT16:
        return 2e-2;
    case ANVIL_DTYPE_FLOAT32:
        return 1e-5;
    case ANVIL_DTYPE_FLOAT64:
        return 1e-12;
    default:
        return 0;
    }
}

/* ---- Gemm ------------------------------------------------------------------------------------ */

static void check_gemm(anvil_dtype dt, int64_t M, int64_t K, int64_t N, bool ta, bool tb,
                       float alpha, float beta, int c_rank, const int64_t *cdims, core_pool *pool) {
    int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N};
    double *a = malloc((size_t)(M * K + 1) * sizeof *a),
           *b = malloc((size_t)(K * N + 1) * sizeof *b);
    double *c = malloc((numel(cdims, c_rank) + 1) * sizeof *c);
    void *at = random_tensor(dt, (size_t)(M * K), a), *bt = random_tensor(dt, (size_t)(K * N), b);
    void *ct = c_rank >= 0 ? random_tensor(dt, numel(cdims, c_rank), c) : NULL;
    optest t;
    optest_begin(&t, IR_OP_GEMM, c_rank >= 0 ? 3 : 2, 1, 4);
    optest_attr_int(&t, 0, "transA", ta);
    optest_attr_int(&t, 1, "transB", tb);
    optest_attr_float(&t, 2, "alpha", alpha);
    optest_attr_float(&t, 3, "beta", beta);
    optest_input(&t, 0, dt, 2, ad, at, false);
    optest_input(&t, 1, dt, 2, bd, bt, true);
    if (c_rank >= 0) optest_input(&t, 2, dt, c_rank, cdims, ct, true);
    anvil_status s = optest_run(&t);
    if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
    assert_int_equal(s, ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], M);
    assert_int_equal(t.out[0].dims[1], N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += a[ta ? k * M + i : i * K + k] * b[tb ? j * K + k : k * N + j];
            double want = alpha * acc;
            if (c_rank >= 0) {
                /* C right-aligned against (M, N); a dim of 1 repeats */
                int64_t ci = 0, ri[2] = {i, j};
                for (int d = 0; d < c_rank; d++) {
                    int64_t od = ri[2 - c_rank + d];
                    ci = ci * cdims[d] + (cdims[d] == 1 ? 0 : od);
                }
                want += beta * c[ci];
            }
            double got = core_load_f64(dt, t.out[0].data, (size_t)(i * N + j));
            if (!(fabs(got - want) <= tol_for(dt) * (1 + fabs(want))))
                fprintf(stderr, "%s (%lld,%lld): got %g want %g\n", anvil_dtype_name(dt),
                        (long long)i, (long long)j, got, want);
            assert_true(fabs(got - want) <= tol_for(dt) * (1 + fabs(want)));
        }
    if (pool && M * N > 0) {
        size_t bytes = (size_t)(M * N) * anvil_dtype_size(dt);
        void *serial = malloc(bytes);
        memcpy(serial, t.out[0].data, bytes);
        memset(t.out[0].data, 0, bytes);
        op_ctx ctx = {.pool = pool};
        const op_tensor *ins[3] = {&t.in[0], &t.in[1], c_rank >= 0 ? &t.in[2] : NULL};
        op_tensor *outs[1] = {&t.out[0]};
        assert_int_equal(op_get(IR_OP_GEMM)->run(optest_node(&t), ins, 3, outs, 1, &ctx), ANVIL_OK);
        assert_memory_equal(serial, t.out[0].data, bytes);
        free(serial);
    }
    optest_end(&t);
    free(a);
    free(b);
    free(c);
    free(at);
    free(bt);
    free(ct);
}

static void test_gemm_random(void **state) {
    (void)state;
    static const anvil_dtype dts[] = {
        ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_BFLOAT16,
        ANVIL_DTYPE_INT32,   ANVIL_DTYPE_INT64,   ANVIL_DTYPE_UINT32,  ANVIL_DTYPE_UINT64};
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 160; it++) {
        anvil_dtype dt = it < 60 ? ANVIL_DTYPE_FLOAT32 : dts[it % 8];
        int64_t M = 1 + rnd(7), K = 1 + rnd(9), N = 1 + rnd(7);
        int64_t cd[2];
        int cr = (int)rnd(4) - 1; /* -1: no C */
        if (cr == 1) cd[0] = rnd(2) ? N : 1;
        if (cr == 2) {
            cd[0] = rnd(2) ? M : 1;
            cd[1] = rnd(2) ? N : 1;
        }
        float alpha = 1, beta = 1;
        if (!core_dtype_is_int(dt)) {
            alpha = (float)rnd(5) / 2 - 1;
            beta = (float)rnd(5) / 2 - 1;
        } else if (dt == ANVIL_DTYPE_INT32 || dt == ANVIL_DTYPE_INT64) {
            alpha = (float)rnd(5) - 2;
            beta = (float)rnd(5) - 2;
        }
        check_gemm(dt, M, K, N, rnd(2), rnd(2), alpha, beta, cr, cd, it % 10 == 0 ? pool : NULL);
    }
    core_pool_free(pool);
}

/* Zero-size K gives beta * C; beta = 0 ignores C entirely (NaN included, as ONNX Runtime). */
static void test_gemm_edges(void **state) {
    (void)state;
    float c[6] = {1, 2, 3, 4, 5, 6}, a[1] = {0}, nanc[6];
    for (int i = 0; i < 6; i++) nanc[i] = NAN;
    optest t;
    optest_begin(&t, IR_OP_GEMM, 3, 1, 1);
    optest_attr_float(&t, 0, "beta", 2.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 0}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 3}, a, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, c, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){2, 4, 6, 8, 10, 12}, 6, 0, 0), -1);
    optest_end(&t);

    float x[4] = {1, 2, 3, 4}, y[6] = {1, 0, 1, 0, 1, 1};
    optest_begin(&t, IR_OP_GEMM, 3, 1, 1);
    optest_attr_float(&t, 0, "beta", 0.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, y, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, nanc, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){1, 2, 3, 3, 4, 7}, 6, 0, 0), -1);
    optest_end(&t);

    /* M = 0: empty output */
    optest_begin(&t, IR_OP_GEMM, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, y, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    assert_int_equal(t.out[0].dims[1], 3);
    optest_end(&t);

    /* INT32 wraps around like two's complement hardware */
    int32_t ia[2] = {INT32_MAX, 2}, ib[2] = {2, 1};
    optest_begin(&t, IR_OP_GEMM, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){1, 2}, ia, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 1}, ib, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(((int32_t *)t.out[0].data)[0], (int32_t)((uint32_t)INT32_MAX * 2u + 2u));
    optest_end(&t);

    /* opset 6 with broadcast = 1 accepts a row C; opset 9 without C is refused */
    float row[3] = {10, 20, 30};
    optest_begin_opset(&t, IR_OP_GEMM, 3, 1, 1, 6);
    optest_attr_int(&t, 0, "broadcast", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, y, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, row, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){11, 22, 33, 13, 24, 37}, 6, 0, 0),
                     -1);
    optest_end(&t);
}

static void gemm_error(int opset, int n_in, const int64_t *ad, const int64_t *bd, int cr,
                       const int64_t *cd, anvil_dtype dt, int n_attrs, void (*attrs)(optest *),
                       anvil_status want, const char *msg) {
    static double buf[256];
    optest t;
    optest_begin_opset(&t, IR_OP_GEMM, n_in, 1, n_attrs, opset);
    if (attrs) attrs(&t);
    optest_input(&t, 0, dt, ad[2] ? 3 : 2, ad, buf, false);
    optest_input(&t, 1, dt, 2, bd, buf, false);
    if (cr >= 0) optest_input(&t, 2, dt, cr, cd, buf, false);
    expect_status(&t, want, msg);
    optest_end(&t);
}

static void g_trans_b(optest *t) {
    optest_attr_int(t, 0, "transB", 1);
}
static void g_trans2(optest *t) {
    optest_attr_int(t, 0, "transA", 2);
}
static void g_half(optest *t) {
    optest_attr_float(t, 0, "alpha", 0.5f);
}
static void g_broadcast(optest *t) {
    optest_attr_int(t, 0, "broadcast", 1);
}
static void g_no_broadcast(optest *t) {
    optest_attr_int(t, 0, "broadcast", 0);
}

static void test_gemm_errors(void **state) {
    (void)state;
    const int64_t a23[3] = {2, 3, 0}, b34[2] = {3, 4}, b43[2] = {4, 3};
    gemm_error(13, 2, a23, b43, -1, NULL, ANVIL_DTYPE_FLOAT32, 0, NULL, ANVIL_ERR_SHAPE,
               "inner dimensions differ");
    gemm_error(13, 2, a23, b34, -1, NULL, ANVIL_DTYPE_FLOAT32, 1, g_trans_b, ANVIL_ERR_SHAPE,
               "inner dimensions differ");
    gemm_error(13, 2, (int64_t[]){1, 2, 3}, b34, -1, NULL, ANVIL_DTYPE_FLOAT32, 0, NULL,
               ANVIL_ERR_SHAPE, "needs both 2-D");
    gemm_error(13, 3, a23, b34, 2, (int64_t[]){3, 4}, ANVIL_DTYPE_FLOAT32, 0, NULL, ANVIL_ERR_SHAPE,
               "does not broadcast to");
    gemm_error(13, 3, a23, b34, 1, (int64_t[]){2}, ANVIL_DTYPE_FLOAT32, 0, NULL, ANVIL_ERR_SHAPE,
               "does not broadcast to");
    gemm_error(13, 2, a23, b34, -1, NULL, ANVIL_DTYPE_FLOAT32, 1, g_trans2, ANVIL_ERR_INVALID_MODEL,
               "'transA' is 2");
    gemm_error(13, 2, a23, b34, -1, NULL, ANVIL_DTYPE_INT32, 1, g_half, ANVIL_ERR_UNSUPPORTED,
               "must be whole numbers");
    gemm_error(13, 2, a23, b34, -1, NULL, ANVIL_DTYPE_BOOL, 0, NULL, ANVIL_ERR_UNSUPPORTED, "BOOL");
    gemm_error(13, 2, a23, b34, -1, NULL, ANVIL_DTYPE_FLOAT32, 1, g_broadcast,
               ANVIL_ERR_INVALID_MODEL, "'broadcast' was removed in opset 7");
    gemm_error(9, 2, a23, b34, -1, NULL, ANVIL_DTYPE_FLOAT32, 0, NULL, ANVIL_ERR_INVALID_MODEL,
               "input C is required before opset 11");
    gemm_error(6, 3, a23, b34, 1, (int64_t[]){4}, ANVIL_DTYPE_FLOAT32, 1, g_no_broadcast,
               ANVIL_ERR_SHAPE, "does not equal (broadcast=0)");

    static float buf[64];
    optest t;
    optest_begin(&t, IR_OP_GEMM, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, a23, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 2, b34, buf, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "input 1 is DOUBLE but A is FLOAT");
    optest_end(&t);
}

/* ---- MatMul -----------------------------------------------------------------------------------
 */

/* Naive numpy matmul: promote 1-D operands, broadcast the batch dims, sum over K. */
static void naive_matmul(const double *a, int ra, const int64_t *ad, const double *b, int rb,
                         const int64_t *bd, double *y, int *ry, int64_t *yd) {
    int64_t A[IR_MAX_RANK], B[IR_MAX_RANK];
    int na = ra, nb = rb;
    for (int i = 0; i < ra; i++) A[i] = ad[i];
    for (int i = 0; i < rb; i++) B[i] = bd[i];
    if (ra == 1) {
        A[1] = A[0];
        A[0] = 1;
        na = 2;
    }
    if (rb == 1) {
        B[1] = 1;
        nb = 2;
    }
    int nbat = (na > nb ? na : nb) - 2;
    int64_t bat[IR_MAX_RANK];
    for (int d = 0; d < nbat; d++) {
        int da = d - (nbat - (na - 2)), db = d - (nbat - (nb - 2));
        int64_t x = da >= 0 ? A[da] : 1, z = db >= 0 ? B[db] : 1;
        bat[d] = x == 1 ? z : x;
    }
    int64_t M = A[na - 2], K = A[na - 1], N = B[nb - 1];
    size_t nbatch = numel(bat, nbat);
    for (size_t q = 0; q < nbatch; q++) {
        int64_t bi[IR_MAX_RANK];
        size_t rest = q;
        for (int d = nbat - 1; d >= 0; d--) {
            bi[d] = (int64_t)(rest % (size_t)bat[d]);
            rest /= (size_t)bat[d];
        }
        size_t aoff = 0, boff = 0;
        for (int d = 0; d < na - 2; d++) {
            int64_t i = bi[d + nbat - (na - 2)];
            aoff = aoff * (size_t)A[d] + (size_t)(A[d] == 1 ? 0 : i);
        }
        for (int d = 0; d < nb - 2; d++) {
            int64_t i = bi[d + nbat - (nb - 2)];
            boff = boff * (size_t)B[d] + (size_t)(B[d] == 1 ? 0 : i);
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += a[aoff * (size_t)(M * K) + (size_t)(i * K + k)] *
                         b[boff * (size_t)(K * N) + (size_t)(k * N + j)];
                y[q * (size_t)(M * N) + (size_t)(i * N + j)] = s;
            }
    }
    *ry = 0;
    for (int d = 0; d < nbat; d++) yd[(*ry)++] = bat[d];
    if (ra != 1) yd[(*ry)++] = M;
    if (rb != 1) yd[(*ry)++] = N;
}

static void test_matmul_random(void **state) {
    (void)state;
    static const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_FLOAT16,
                                      ANVIL_DTYPE_INT32,   ANVIL_DTYPE_INT64,   ANVIL_DTYPE_UINT64};
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 200; it++) {
        anvil_dtype dt = it < 80 ? ANVIL_DTYPE_FLOAT32 : dts[it % 6];
        int ra = 1 + (int)rnd(4), rb = 1 + (int)rnd(4);
        int64_t K = rnd(5), bat[2] = {1 + rnd(3), 1 + rnd(3)}, ad[4], bd[4];
        int nba = ra > 2 ? ra - 2 : 0, nbb = rb > 2 ? rb - 2 : 0;
        for (int d = 0; d < nba; d++) ad[d] = rnd(2) ? bat[2 - nba + d] : 1;
        for (int d = 0; d < nbb; d++) bd[d] = rnd(2) ? bat[2 - nbb + d] : 1;
        if (ra >= 2) ad[ra - 2] = 1 + rnd(5);
        ad[ra - 1] = K;
        if (rb >= 2) {
            bd[rb - 2] = K;
            bd[rb - 1] = 1 + rnd(5);
        } else {
            bd[0] = K;
        }
        size_t na = numel(ad, ra), nb = numel(bd, rb);
        double *a = malloc((na + 1) * sizeof *a), *b = malloc((nb + 1) * sizeof *b);
        double *want = malloc(4096 * sizeof *want);
        void *at = random_tensor(dt, na, a), *bt = random_tensor(dt, nb, b);
        int ry;
        int64_t yd[IR_MAX_RANK];
        naive_matmul(a, ra, ad, b, rb, bd, want, &ry, yd);
        optest t;
        optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
        optest_input(&t, 0, dt, ra, ad, at, false);
        optest_input(&t, 1, dt, rb, bd, bt, it % 2);
        anvil_status s = optest_run(&t);
        if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
        assert_int_equal(s, ANVIL_OK);
        assert_int_equal(t.out[0].rank, ry);
        for (int d = 0; d < ry; d++) assert_int_equal(t.out[0].dims[d], yd[d]);
        size_t ny = numel(yd, ry);
        for (size_t i = 0; i < ny; i++) {
            double got = core_load_f64(dt, t.out[0].data, i);
            assert_true(fabs(got - want[i]) <= tol_for(dt) * (1 + fabs(want[i])));
        }
        if (it % 10 == 0 && ny > 0) {
            size_t bytes = ny * anvil_dtype_size(dt);
            void *serial = malloc(bytes);
            memcpy(serial, t.out[0].data, bytes);
            memset(t.out[0].data, 0, bytes);
            op_ctx ctx = {.pool = pool};
            const op_tensor *ins[2] = {&t.in[0], &t.in[1]};
            op_tensor *outs[1] = {&t.out[0]};
            assert_int_equal(op_get(IR_OP_MATMUL)->run(optest_node(&t), ins, 2, outs, 1, &ctx),
                             ANVIL_OK);
            assert_memory_equal(serial, t.out[0].data, bytes);
            free(serial);
        }
        optest_end(&t);
        free(a);
        free(b);
        free(want);
        free(at);
        free(bt);
    }
    core_pool_free(pool);
}

static void test_matmul_shapes_and_errors(void **state) {
    (void)state;
    /* vector . vector is a scalar */
    float v[3] = {1, 2, 3};
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, v, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, v, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 0);
    assert_true(((float *)t.out[0].data)[0] == 14.0f);
    optest_end(&t);

    /* symbolic batch dims broadcast; known K must agree */
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, v, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, v, false);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    op_tinfo in[2], out[1];
    memset(in, 0, sizeof in);
    in[0].dtype = in[1].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&in[0].shape, 3, (int64_t[]){IR_DIM_UNKNOWN, 5, 4});
    in[0].shape.sym[0] = 2;
    ir_shape_set(&in[1].shape, 2, (int64_t[]){4, 6});
    assert_int_equal(op_get(IR_OP_MATMUL)->infer(t.g, optest_node(&t), in, 2, out, 1), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 3);
    assert_int_equal(out[0].shape.sym[0], 2);
    assert_int_equal(out[0].shape.d[1], 5);
    assert_int_equal(out[0].shape.d[2], 6);
    ir_shape_set(&in[1].shape, 2, (int64_t[]){3, 6});
    assert_int_equal(op_get(IR_OP_MATMUL)->infer(t.g, optest_node(&t), in, 2, out, 1),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "inner dimensions differ"));
    optest_end(&t);

    static float buf[256];
    struct {
        int ra, rb;
        int64_t ad[3], bd[3];
        anvil_dtype dt;
        anvil_status want;
        const char *msg;
    } bad[] = {
        {2, 2, {2, 3}, {4, 5}, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_SHAPE, "inner dimensions differ"},
        {0, 2, {0}, {4, 5}, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_SHAPE, "rank >= 1"},
        {3, 3, {2, 2, 3}, {3, 3, 4}, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_SHAPE, "cannot be broadcast"},
        {2, 2, {2, 3}, {3, 4}, ANVIL_DTYPE_INT8, ANVIL_ERR_UNSUPPORTED, "INT8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
        optest_input(&t, 0, bad[i].dt, bad[i].ra, bad[i].ad, buf, false);
        optest_input(&t, 1, bad[i].dt, bad[i].rb, bad[i].bd, buf, false);
        expect_status(&t, bad[i].want, bad[i].msg);
        optest_end(&t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_random),
        cmocka_unit_test(test_gemm_edges),
        cmocka_unit_test(test_gemm_errors),
        cmocka_unit_test(test_matmul_random),
        cmocka_unit_test(test_matmul_shapes_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
