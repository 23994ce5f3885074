/* The int8 GEMM tiles (src/kernels/cpu/gemm/gemm_avx512vnni.c through the driver, gemm.c).
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_tiles_exact),
        cmocka_unit_test(test_pack_b8_refuses_far_uint8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
