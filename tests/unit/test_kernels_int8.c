/* The int8 GEMM tiles (src/kernels/cpu/gemm/gemm_avx512vnni.c through the driver, gemm.c) and
 * the variants on them (qgemm_i8, qconv_i8: src/kernels/cpu/quant/qlinear.c), the 8-bit
 * MaxPool and anvil.QLinearAdd (maxpool_i8, qadd_avx512: qpool.c), and the dynamic int8 MatMul
 * of precision int8 (gemm_i8_dynamic: src/kernels/cpu/gemm/gemm_dynamic.c).
 *
 * Their sums are integers, so they are checked exactly: C[i,j] must be the float of the int32 sum
 * of (A[i,p] - za) * (B[p,j] - zb[j]), plus the compensation, times the column scale, with the
 * fused bias and activation after it, bit for bit what the scalar epilogue makes of the same sum.
 * The shapes are the ones where the tiling and the slots of four go wrong: K not a multiple of 4
 * (A then packed, its last slot padded), K cut into blocks, edge rows and columns, an A read in
 * place and one packed, a row-scaled (dynamic) A. Skipped where the CPU lacks AVX512-VNNI. */
#include "kernels/cpu/gemm/gemm.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

static bool have_vnni(void) {
    return kern_isa_ok(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_VNNI, core_hw_get());
}

static uint32_t next(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

typedef struct shape {
    int64_t m, n, k, lda, kc;
    bool b_unsigned, row_scaled, relu;
} shape;

/* Runs one shape on tile t; returns the number of mismatching elements. */
static int64_t run_shape(const gemm_kernel *t, const shape *s, uint32_t seed) {
    const int64_t m = s->m, n = s->n, k = s->k, lda = s->lda;
    uint8_t *a = malloc((size_t)(m * lda + 4));
    uint8_t *b = malloc((size_t)(k * n + 1));
    int32_t *zb = malloc(sizeof(int32_t) * (size_t)n),
            *colsum = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *comp = malloc(sizeof(int32_t) * (size_t)n);
    float *scale = malloc(sizeof(float) * (size_t)n), *bias = malloc(sizeof(float) * (size_t)n);
    float *rs = malloc(sizeof(float) * (size_t)m), *c = malloc(sizeof(float) * (size_t)(m * n));
    const int32_t za = 3 + (int32_t)(seed % 100);
    for (int64_t i = 0; i < m * lda; i++) a[i] = (uint8_t)next(&seed);
    for (int64_t i = 0; i < k * n; i++) b[i] = (uint8_t)next(&seed);
    for (int64_t j = 0; j < n; j++) {
        /* a uint8 B is kept within 127 of its zero point, which the tiles require */
        zb[j] = s->b_unsigned ? 128 : (int32_t)(next(&seed) % 5) - 2;
        scale[j] = (float)(next(&seed) % 1000 + 1) * 1e-4f;
        bias[j] = (float)(next(&seed) % 200) * 0.01f - 1.0f;
    }
    for (int64_t p = 0; p < k && !s->b_unsigned; p++)
        for (int64_t j = 0; j < n; j++) {
            int v = (int8_t)b[p * n + j] - zb[j];
            if (v < -128 || v > 127) b[p * n + j] = (uint8_t)(int8_t)zb[j];
        }
    for (int64_t i = 0; i < m; i++) rs[i] = (float)(next(&seed) % 100 + 1) * 0.01f;
    gemm_packed pb;
    assert_int_equal(gemm_pack_b8(t, k, n, b, !s->b_unsigned, n, 1, zb, colsum, &pb), ANVIL_OK);
    for (int64_t j = 0; j < n; j++) comp[j] = -za * colsum[j];
    gemm_problem p = {.m = m, .n = n, .k = k, .a8 = a, .rs_a = lda, .cs_a = 1, .pb = &pb};
    p.c = c;
    p.ldc = n;
    p.ep = gemm_epilogue_none();
    p.ep.col_scale = scale;
    p.ep.col_comp = comp;
    p.ep.col_bias = bias;
    if (s->row_scaled) p.ep.row_scale = rs;
    if (s->relu) p.ep.act = IR_ACT_RELU;
    gemm_blocking blk = gemm_blocking_config(t, m, n, k, core_hw_get(), s->kc, 0, 0);
    void *ws = core_aligned_alloc(64, gemm_thread_workspace(t, &blk));
    gemm_run_serial(t, &blk, &p, ws);
    int64_t bad = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t sum = 0;
            for (int64_t q = 0; q < k; q++) {
                const int32_t bv =
                    s->b_unsigned ? (int32_t)b[q * n + j] : (int32_t)(int8_t)b[q * n + j];
                sum += ((int32_t)a[i * lda + q] - za) * (bv - zb[j]);
            }
            float want = (float)sum * scale[j] * (s->row_scaled ? rs[i] : 1.0f) + bias[j];
            if (s->relu && want < 0.0f) want = 0.0f;
            if (c[i * n + j] != want) {
                if (bad < 3)
                    print_error("%s m=%lld n=%lld k=%lld: C[%lld,%lld] = %.9g, want %.9g\n",
                                t->name, (long long)m, (long long)n, (long long)k, (long long)i,
                                (long long)j, (double)c[i * n + j], (double)want);
                bad++;
            }
        }
    gemm_packed_free(&pb);
    free(ws);
    free(a);
    free(b);
    free(zb);
    free(colsum);
    free(comp);
    free(scale);
    free(bias);
    free(rs);
    free(c);
    return bad;
}

static void test_int8_tiles_exact(void **state) {
    (void)state;
    if (!have_vnni()) skip();
    static const shape shapes[] = {
        {1, 1, 1, 1, 0, false, false, false},     /* a lone slot, mostly padding */
        {14, 32, 64, 64, 0, false, false, false}, /* one full tile, A in place */
        {37, 100, 300, 300, 0, false, false, true},
        {37, 100, 301, 301, 0, false, true, false},    /* odd K: A packed, last slot padded */
        {50, 70, 1000, 1000, 128, false, false, true}, /* K in blocks of 128 */
        {50, 70, 1000, 1004, 132, true, false, false}, /* uint8 B, blocks of 132 */
        {128, 64, 256, 4096, 0, false, true, true},    /* rows 4 KiB apart: packed */
        {3, 200, 17, 20, 8, false, false, false},
    };
    int tiles = 0;
    for (const gemm_kernel *const *t = gemm_kernels_i8; *t; t++) {
        if (!gemm_kernel_usable(*t, core_hw_get())) continue;
        tiles++;
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
            assert_int_equal(run_shape(*t, &shapes[i], 7u + (uint32_t)i), 0);
    }
    assert_int_equal(tiles, 6);
}

/* A uint8 weight farther than 127 from its zero point cannot be an s8 operand: refused by name. */
static void test_pack_b8_refuses_far_uint8(void **state) {
    (void)state;
    if (!have_vnni()) skip();
    const uint8_t b[4] = {0, 255, 3, 4};
    const int32_t zp[1] = {0};
    gemm_packed pb;
    assert_int_equal(gemm_pack_b8(gemm_kernels_i8[0], 4, 1, b, false, 1, 1, zp, NULL, &pb),
                     ANVIL_ERR_UNSUPPORTED);
    assert_non_null(strstr(anvil_last_error(), "zero point"));
    assert_null(pb.data);
}

/* An 8-bit output equal to the reference's byte for byte. */
static long cmp_bytes(const op_tensor *want, const void *got, float rtol, float atol) {
    (void)rtol;
    (void)atol;
    const size_t n = op_tensor_numel(want);
    const uint8_t *w = want->data, *g = got;
    for (size_t i = 0; i < n; i++)
        if (w[i] != g[i]) {
            print_error("byte %zu: %u, want %u\n", i, g[i], w[i]);
            return (long)i;
        }
    return -1;
}

static uint8_t *random_bytes(size_t n, uint32_t seed) {
    uint8_t *x = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) x[i] = (uint8_t)next(&seed);
    return x;
}

/* Scales and zero points as QLinear inputs: one value, or n (per column / output channel). */
typedef struct qparam {
    float s[512];
    uint8_t z[512];
    int64_t n;
} qparam;

static void qparam_input(optest *t, int si, int zi, anvil_dtype zdt, qparam *q, float base,
                         uint32_t seed) {
    for (int64_t j = 0; j < q->n; j++) {
        q->s[j] = base * (float)(next(&seed) % 50 + 1) / 25.0f;
        q->z[j] = zdt == ANVIL_DTYPE_INT8 ? (uint8_t)(int8_t)((int)(next(&seed) % 21) - 10)
                                          : (uint8_t)(next(&seed) % 40 + 100);
    }
    const int64_t d[1] = {q->n};
    optest_input(t, si, ANVIL_DTYPE_FLOAT32, q->n == 1 ? 0 : 1, d, q->s, true);
    optest_input(t, zi, zdt, q->n == 1 ? 0 : 1, d, q->z, true);
}

static const anvil_dtype u8 = ANVIL_DTYPE_UINT8, s8 = ANVIL_DTYPE_INT8;

/* QLinearMatMul [batch, m, k] x [k, n]: the reference's bytes exactly, or -1. */
static int qmatmul(int64_t batch, int64_t m, int64_t k, int64_t n, anvil_dtype adt, anvil_dtype bdt,
                   anvil_dtype ydt, bool per_col, uint32_t seed) {
    optest t;
    optest_begin(&t, IR_OP_QLINEARMATMUL, 8, 1, 0);
    const int64_t da[3] = {batch, m, k}, db[2] = {k, n};
    uint8_t *a = random_bytes((size_t)(batch * m * k), seed),
            *b = random_bytes((size_t)(k * n), seed + 1);
    /* within 127 of the zero points below (100..139 for u8, -10..10 for s8), as the tiles need */
    for (int64_t i = 0; i < k * n; i++)
        b[i] = bdt == u8 ? (uint8_t)(60 + b[i] % 120) : (uint8_t)(int8_t)((int)(b[i] % 235) - 117);
    qparam qa = {.n = 1}, qb = {.n = per_col ? n : 1}, qy = {.n = 1};
    optest_input(&t, 0, adt, 3, da, a, false);
    qparam_input(&t, 1, 2, adt, &qa, 0.02f, seed + 2);
    optest_input(&t, 3, bdt, 2, db, b, true);
    qparam_input(&t, 4, 5, bdt, &qb, 0.01f, seed + 3);
    qparam_input(&t, 6, 7, ydt, &qy, 0.02f * 0.01f * (float)k * 4.0f, seed + 4);
    const bool applies = optest_variant_applies(&t, "qgemm_i8");
    int r = optest_check_variants_cmp(&t, 0, 0, cmp_bytes);
    optest_end(&t);
    free(a);
    free(b);
    return applies ? r : -1;
}

static void test_qlinearmatmul_exact(void **state) {
    (void)state;
    if (!have_vnni()) skip();
    assert_int_equal(qmatmul(1, 37, 64, 100, u8, s8, u8, true, 1), 1);
    assert_int_equal(qmatmul(2, 5, 33, 16, s8, s8, s8, false, 2), 1);   /* s8 A, K % 4 = 1 */
    assert_int_equal(qmatmul(1, 200, 300, 70, u8, u8, u8, true, 3), 1); /* u8 B near 128 */
    assert_int_equal(qmatmul(3, 64, 768, 48, u8, s8, s8, true, 4), 1);
    assert_int_equal(qmatmul(1, 5, 64, 300, u8, s8, u8, true, 5), 1); /* columns split */
}

/* QLinearConv on an NCHW image (group 1, or depthwise: m = c groups): the reference's bytes
 * exactly, or -1 where `variant` does not take it. */
static int qconv_v(const char *variant, int64_t n, int64_t c, int64_t h, int64_t w, int64_t m,
                   int64_t kh, int64_t kw, int64_t stride, int64_t pad, int64_t dil,
                   anvil_dtype xdt, anvil_dtype wdt, bool bias, uint32_t seed) {
    const bool dw = !strcmp(variant, "qconv_dw_i8");
    optest t;
    optest_begin(&t, IR_OP_QLINEARCONV, bias ? 9 : 8, 1, dw ? 5 : 4);
    if (dw) optest_attr_int(&t, 4, "group", c);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){kh, kw}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){stride, stride}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){pad, pad, pad, pad}, 4);
    optest_attr_ints(&t, 3, "dilations", (int64_t[]){dil, dil}, 2);
    const int64_t cg = dw ? 1 : c;
    const int64_t dx[4] = {n, c, h, w}, dwt[4] = {m, cg, kh, kw}, db[1] = {m};
    uint8_t *x = random_bytes((size_t)(n * c * h * w), seed);
    uint8_t *wt = random_bytes((size_t)(m * cg * kh * kw), seed + 1);
    int32_t *b = malloc(sizeof(int32_t) * (size_t)m);
    for (int64_t j = 0; j < m; j++) b[j] = (int32_t)(next(&seed) % 20001) - 10000;
    for (int64_t i = 0; i < m * cg * kh * kw; i++)
        wt[i] =
            wdt == u8 ? (uint8_t)(60 + wt[i] % 120) : (uint8_t)(int8_t)((int)(wt[i] % 235) - 117);
    qparam qx = {.n = 1}, qw = {.n = m}, qy = {.n = 1};
    optest_input(&t, 0, xdt, 4, dx, x, false);
    qparam_input(&t, 1, 2, xdt, &qx, 0.02f, seed + 2);
    optest_input(&t, 3, wdt, 4, dwt, wt, true);
    qparam_input(&t, 4, 5, wdt, &qw, 0.01f, seed + 3);
    qparam_input(&t, 6, 7, u8, &qy, 0.02f * 0.01f * (float)(cg * kh * kw) * 4.0f, seed + 4);
    if (bias) optest_input(&t, 8, ANVIL_DTYPE_INT32, 1, db, b, true);
    const bool applies = optest_variant_applies(&t, variant);
    int r = optest_check_variants_cmp(&t, 0, 0, cmp_bytes);
    optest_end(&t);
    free(x);
    free(wt);
    free(b);
    return applies ? r : -1;
}

static int qconv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t m, int64_t kh, int64_t kw,
                 int64_t stride, int64_t pad, int64_t dil, anvil_dtype xdt, anvil_dtype wdt,
                 bool bias, uint32_t seed) {
    return qconv_v("qconv_i8", n, c, h, w, m, kh, kw, stride, pad, dil, xdt, wdt, bias, seed);
}

/* Depthwise: MobileNet's 3x3 at strides 1 and 2, a 5x5, an s8 image, widths past 16 and 64. */
static void test_qlinearconv_depthwise_exact(void **state) {
    (void)state;
    if (!optest_have_avx512()) skip();
    assert_int_equal(qconv_v("qconv_dw_i8", 1, 24, 21, 21, 24, 3, 3, 1, 1, 1, u8, s8, true, 1), 1);
    assert_int_equal(qconv_v("qconv_dw_i8", 2, 8, 17, 70, 8, 3, 3, 2, 1, 1, u8, s8, true, 2), 1);
    assert_int_equal(qconv_v("qconv_dw_i8", 1, 5, 9, 9, 5, 5, 5, 2, 2, 1, s8, u8, false, 3), 1);
    assert_int_equal(qconv_v("qconv_dw_i8", 1, 3, 8, 8, 3, 3, 3, 3, 0, 1, u8, s8, true, 4), 1);
}

static void test_qlinearconv_exact(void **state) {
    (void)state;
    if (!have_vnni()) skip();
    assert_int_equal(qconv(1, 16, 9, 11, 24, 3, 3, 1, 1, 1, u8, s8, true, 1), 1);
    assert_int_equal(qconv(2, 3, 17, 15, 8, 7, 7, 2, 3, 1, u8, s8, true, 2), 1);  /* a stem */
    assert_int_equal(qconv(1, 32, 8, 8, 64, 1, 1, 1, 0, 1, u8, s8, false, 3), 1); /* in place */
    assert_int_equal(qconv(1, 12, 10, 10, 20, 3, 3, 2, 2, 2, s8, s8, true, 4), 1);
    assert_int_equal(qconv(1, 8, 6, 6, 40, 3, 3, 1, 1, 1, u8, u8, false, 5), 1);
    /* 9 pixels, 200 channels: one block of rows, its columns split among the threads */
    assert_int_equal(qconv(1, 64, 3, 3, 200, 3, 3, 1, 1, 1, u8, s8, true, 6), 1);
}

/* MaxPool of an 8-bit NCHW tensor: the reference's bytes exactly, or -1. */
static int qmaxpool(int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride, int64_t pad,
                    bool ceil, anvil_dtype dt, uint32_t seed) {
    optest t;
    optest_begin(&t, IR_OP_MAXPOOL, 1, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){stride, stride}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){pad, pad, pad, pad}, 4);
    optest_attr_int(&t, 3, "ceil_mode", ceil);
    const int64_t dx[4] = {2, c, h, w};
    uint8_t *x = random_bytes((size_t)(2 * c * h * w), seed);
    optest_input(&t, 0, dt, 4, dx, x, false);
    const bool applies = optest_variant_applies(&t, "maxpool_i8");
    int r = optest_check_variants_cmp(&t, 0, 0, cmp_bytes);
    optest_end(&t);
    free(x);
    return applies ? r : -1;
}

static void test_maxpool_i8_exact(void **state) {
    (void)state;
    if (!optest_have_avx512()) skip();
    assert_int_equal(qmaxpool(3, 112, 112, 3, 2, 1, false, u8, 1), 1); /* ResNet's, 56 wide */
    assert_int_equal(qmaxpool(5, 9, 70, 3, 1, 1, false, s8, 2), 1);    /* s8, 70 > 64 wide */
    assert_int_equal(qmaxpool(4, 13, 13, 2, 2, 0, true, u8, 3), 1);    /* ceil_mode overhang */
    assert_int_equal(qmaxpool(2, 11, 11, 3, 3, 1, false, s8, 4), 1);   /* stride 3 */
}

/* anvil.QLinearAdd of n elements: the reference's bytes exactly, or -1. */
static int qadd(int64_t n, anvil_dtype adt, anvil_dtype bdt, anvil_dtype ydt, uint32_t seed) {
    optest t;
    optest_begin(&t, IR_OP_QLINEAR_ADD, 8, 1, 0);
    const int64_t d[2] = {3, n};
    uint8_t *a = random_bytes((size_t)(3 * n), seed), *b = random_bytes((size_t)(3 * n), seed + 1);
    qparam qa = {.n = 1}, qb = {.n = 1}, qy = {.n = 1};
    optest_input(&t, 0, adt, 2, d, a, false);
    qparam_input(&t, 1, 2, adt, &qa, 0.02f, seed + 2);
    optest_input(&t, 3, bdt, 2, d, b, false);
    qparam_input(&t, 4, 5, bdt, &qb, 0.03f, seed + 3);
    qparam_input(&t, 6, 7, ydt, &qy, 0.04f, seed + 4);
    const bool applies = optest_variant_applies(&t, "qadd_avx512");
    int r = optest_check_variants_cmp(&t, 0, 0, cmp_bytes);
    optest_end(&t);
    free(a);
    free(b);
    return applies ? r : -1;
}

static void test_qlinear_add_exact(void **state) {
    (void)state;
    if (!optest_have_avx512()) skip();
    assert_int_equal(qadd(3000, u8, u8, u8, 1), 1); /* 9000 elements: split among threads */
    assert_int_equal(qadd(37, s8, u8, s8, 2), 1);
    assert_int_equal(qadd(5, u8, s8, u8, 3), 1);
}

static const kern_knobs int8_session = {.precision = KERN_PREC_INT8};

/* A MatMul [2, m, k] x [k, n] with B constant, checked under precision int8 at rtol/atol against
 * the fp32 reference; returns how many int8 variants applied (-1 on a mismatch). exact: every row
 * of A and column of B an integer multiple of its own scale (max|x| / 127, each row holding
 * +-127 of it), which dynamic quantization keeps as it is. */
static int dyn_matmul(int64_t m, int64_t k, int64_t n, bool exact, float rtol, float atol) {
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    const int64_t da[3] = {2, m, k}, db[2] = {k, n};
    float *a = optest_random_f32((size_t)(2 * m * k), 11, -1.0f, 1.0f);
    float *b = optest_random_f32((size_t)(k * n), 12, -1.0f, 1.0f);
    if (exact) {
        for (int64_t i = 0; i < 2 * m; i++) {
            const float sc = 0.01f * (float)(i % 7 + 1);
            for (int64_t p = 0; p < k; p++)
                a[i * k + p] = (p == i % k ? 127.0f : nearbyintf(a[i * k + p] * 127.0f)) * sc;
        }
        for (int64_t j = 0; j < n; j++) {
            const float sc = 0.02f * (float)(j % 5 + 1);
            for (int64_t p = 0; p < k; p++)
                b[p * n + j] = (p == j % k ? -127.0f : nearbyintf(b[p * n + j] * 127.0f)) * sc;
        }
    }
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, db, b, true);
    t.knobs = &int8_session;
    const bool applies = optest_variant_applies(&t, "gemm_i8_dynamic");
    int r = optest_check_variants(&t, rtol, atol);
    optest_end(&t);
    free(a);
    free(b);
    return r < 0 ? -1 : applies;
}

static void test_dynamic_int8_matmul(void **state) {
    (void)state;
    if (!have_vnni()) skip();
    /* exact operands: the fp32 result up to the order of its sums */
    assert_int_equal(dyn_matmul(37, 64, 100, true, 1e-5f, 1e-2f), 1);
    assert_int_equal(dyn_matmul(5, 301, 48, true, 1e-5f, 1e-2f), 1); /* K % 4 = 1: padded rows */
    /* random operands: within the rounding of both to 8 bits (|A||B| K / 127 per element at
     * most; 1 + k/2 here keeps a margin over the typical sqrt(K) growth) */
    assert_int_equal(dyn_matmul(64, 768, 96, false, 0.0f, 0.35f), 1);
    /* and not within fp32's tolerance: the rounding is real */
    assert_int_equal(dyn_matmul(64, 768, 96, false, 1e-5f, 1e-4f), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_tiles_exact),
        cmocka_unit_test(test_pack_b8_refuses_far_uint8),
        cmocka_unit_test(test_qlinearmatmul_exact),
        cmocka_unit_test(test_qlinearconv_exact),
        cmocka_unit_test(test_qlinearconv_depthwise_exact),
        cmocka_unit_test(test_maxpool_i8_exact),
        cmocka_unit_test(test_qlinear_add_exact),
        cmocka_unit_test(test_dynamic_int8_matmul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
