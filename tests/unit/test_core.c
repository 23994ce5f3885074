/* core: error messages, dtype conversions, overflow-checked sizes, the arena and the vector, and
 * the thread pool's claiming of chunks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/core.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static void test_error_prefix(void **state) {
    (void)state;
    assert_int_equal(core_err(ANVIL_ERR_SHAPE, "bad dim %d", 3), ANVIL_ERR_SHAPE);
    assert_string_equal(core_err_message(), "bad dim 3");
    core_err_prefix(ANVIL_ERR_SHAPE, "model.onnx");
    assert_string_equal(core_err_message(), "model.onnx: bad dim 3");
    /* a prefix longer than the buffer is truncated, never overflowed */
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    core_err_prefix(ANVIL_ERR_SHAPE, "%s", big);
    assert_true(strlen(core_err_message()) < 2048);
    core_err_clear();
    assert_string_equal(anvil_last_error(), "");
}

static void test_f16_round_trip(void **state) {
    (void)state;
    /* every finite half converts to float and back unchanged */
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint16_t x = (uint16_t)h;
        if ((x & 0x7c00) == 0x7c00 && (x & 0x3ff)) continue; /* nan payloads */
        assert_int_equal(core_f32_to_f16(core_f16_to_f32(x)), x);
    }
    assert_true(core_f16_to_f32(0x3c00) == 1.0f);
    assert_true(core_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_int_equal(core_f32_to_f16(65520.0f), 0x7c00);              /* rounds to inf */
    assert_int_equal(core_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie to even */
    assert_true(isnan(core_f16_to_f32(core_f32_to_f16(NAN))));
}

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(core_f32_to_bf16(1.0f), 0x3f80);
    assert_true(core_bf16_to_f32(0x3f80) == 1.0f);
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even gives 1 */
    assert_int_equal(core_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);
    assert_true(isnan(core_bf16_to_f32(core_f32_to_bf16(NAN))));
}

static void test_sizes_overflow(void **state) {
    (void)state;
    size_t n;
    int64_t ok[3] = {2, 3, 4}, neg[2] = {2, -1}, huge[3] = {1ll << 40, 1ll << 40, 1ll << 40};
    assert_true(core_numel(ok, 3, &n));
    assert_int_equal(n, 24);
    assert_false(core_numel(neg, 2, &n));
    assert_false(core_numel(huge, 3, &n));
    /* a zero dim does not hide the others' overflow (kernels multiply them into strides) */
    int64_t empty_huge[3] = {0, 1ll << 62, 1ll << 62}, empty[3] = {4, 0, 1ll << 40};
    assert_false(core_numel(empty_huge, 3, &n));
    assert_true(core_numel(empty, 3, &n));
    assert_int_equal(n, 0);
    int64_t big[1] = {1ll << 62};
    assert_false(core_tensor_bytes(ANVIL_DTYPE_FLOAT32, big, 1, &n));
    assert_false(core_tensor_bytes(ANVIL_DTYPE_STRING, ok, 3, &n));
    assert_true(core_tensor_bytes(ANVIL_DTYPE_FLOAT16, ok, 3, &n));
    assert_int_equal(n, 48);
}

static void test_dtype_table(void **state) {
    (void)state;
    assert_string_equal(anvil_dtype_name(ANVIL_DTYPE_FLOAT32), "FLOAT");
    assert_string_equal(anvil_dtype_name(ANVIL_DTYPE_FLOAT8E5M2), "FLOAT8E5M2");
    assert_string_equal(anvil_dtype_name((anvil_dtype)99), "UNKNOWN");
    assert_false(core_dtype_supported(ANVIL_DTYPE_COMPLEX64));
    assert_true(core_dtype_supported(ANVIL_DTYPE_BFLOAT16));
    int32_t v[2];
    core_store_f64(ANVIL_DTYPE_INT32, v, 0, NAN);
    core_store_f64(ANVIL_DTYPE_INT32, v, 1, -2.7);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], -2);
}

static void test_arena_and_vec(void **state) {
    (void)state;
    core_arena *a = core_arena_create();
    for (int i = 0; i < 1000; i++) {
        unsigned char *p = core_arena_alloc(a, (size_t)i * 37 + 1);
        assert_non_null(p);
        assert_true((uintptr_t)p % 16 == 0);
        for (int k = 0; k < i * 37 + 1; k++) assert_int_equal(p[k], 0);
        memset(p, 0xab, (size_t)i * 37 + 1);
    }
    assert_null(core_arena_array(a, SIZE_MAX / 2, 4));
    assert_string_equal(core_arena_printf(a, "%s-%d", "x", 7), "x-7");
    core_arena_free(a);

    core_vec v;
    core_vec_init(&v, sizeof(int));
    for (int i = 0; i < 100; i++) *(int *)core_vec_push(&v) = i;
    assert_int_equal(v.len, 100);
    assert_int_equal(((int *)v.data)[99], 99);
    core_vec_free(&v);
}

static void test_hw_override(void **state) {
    (void)state;
    const core_hw *real = core_hw_get();
    assert_true(real->logical_cores >= 1);
    core_hw fake = *real;
    fake.avx512f = false;
    core_hw_override(&fake);
    assert_false(core_hw_get()->avx512f);
    core_hw_override(NULL);
    assert_true(core_hw_get() == real);
}

/* Every index of a job runs exactly once. Each job stamps its own number into hits[], so a late
 * worker running a chunk of an earlier job over a later one's indices shows as a wrong stamp. */
typedef struct pool_job {
    _Atomic int *hits;
    int stamp;
} pool_job;

static void pool_mark(void *arg, size_t begin, size_t end) {
    const pool_job *j = arg;
    for (size_t i = begin; i < end; i++) atomic_fetch_add(&j->hits[i], j->stamp);
}

/* Many small jobs back to back on 1..4 threads, with thread limits, and some after a pause
 * longer than the workers' spin, so that they sleep and the caller may run their chunks. */
static void test_pool_claims(void **state) {
    (void)state;
    enum { N = 257 };
    static _Atomic int hits[N];
    for (int threads = 1; threads <= 4; threads++) {
        core_pool *p;
        assert_int_equal(core_pool_create(threads, &p), ANVIL_OK);
        for (int job = 1; job <= 3000; job++) {
            const size_t n = (size_t)(job % N) + 1;
            for (size_t i = 0; i < n; i++) atomic_store(&hits[i], 0);
            pool_job j = {hits, job};
            if (job % 500 == 0) nanosleep(&(struct timespec){0, 2000000}, NULL);
            core_pool_run_upto(p, job % 3, n, pool_mark, &j);
            for (size_t i = 0; i < n; i++) assert_int_equal(atomic_load(&hits[i]), job);
        }
        core_pool_free(p);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_prefix), cmocka_unit_test(test_f16_round_trip),
        cmocka_unit_test(test_bf16),         cmocka_unit_test(test_sizes_overflow),
        cmocka_unit_test(test_dtype_table),  cmocka_unit_test(test_arena_and_vec),
        cmocka_unit_test(test_hw_override),  cmocka_unit_test(test_pool_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
