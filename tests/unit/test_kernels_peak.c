/* The multiply-accumulate peaks (kernels/cpu/peak/peak.h): per format a rate exactly where the
 * CPU (as core_hw_get reports it, ANVIL_ISA included) has a loop for it, each loop counting the
 * operations its instructions do, and the rates measured once per set of ISAs and kept. Rates are
 * printed, never compared with a time. Runs again under ANVIL_ISA=avx2 and =scalar
 * (tests/CMakeLists.txt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "anvil.h"
#include "core/core.h"
#include "kernels/cpu/peak/peak.h"

#include <stdio.h>
#include <string.h>

/* Whether the formats have a loop the CPU and the build can run, from core_hw's bits directly. */
static bool has_bf16(const core_hw *h) {
    return (h->avx512f && h->avx512_bf16) || (h->amx_tile && h->amx_bf16 && peak_build_has_amx());
}

static bool has_fp16(const core_hw *h) {
    return h->avx512f && h->avx512bw && h->avx512_fp16 && peak_build_has_fp16();
}

static bool has_i8(const core_hw *h) {
    return (h->avx512f && h->avx512bw && h->avx512_vnni) ||
           (h->avx2 && h->avx_vnni && peak_build_has_avx_vnni()) ||
           (h->amx_tile && h->amx_int8 && peak_build_has_amx());
}

/* The rate is positive exactly when the format is there, and then names a loop of that format. */
static void check_format(double rate, const char *isa, bool present, peak_format format) {
    if (!present) {
        assert_true(rate == 0);
        assert_null(isa);
        return;
    }
    assert_true(rate > 0);
    assert_non_null(isa);
    int found = -1;
    for (int i = 0; i < PEAK_ISA_COUNT; i++)
        if (!strcmp(isa, peak_isa_name((peak_isa)i))) found = i;
    assert_true(found >= 0);
    assert_int_equal(peak_isa_format((peak_isa)found), format);
    assert_non_null(peak_isa_loop((peak_isa)found));
}

static void check_rates(const peak_rates *r) {
    const core_hw *h = core_hw_get();
    check_format(r->f32, r->f32_isa, true, PEAK_FORMAT_F32);
    check_format(r->bf16, r->bf16_isa, has_bf16(h), PEAK_FORMAT_BF16);
    check_format(r->fp16, r->fp16_isa, has_fp16(h), PEAK_FORMAT_FP16);
    check_format(r->i8, r->i8_isa, has_i8(h), PEAK_FORMAT_I8);
    printf("peaks (cap %s): f32 %.1f (%s) bf16 %.1f (%s) fp16 %.1f (%s) i8 %.1f (%s)\n",
           core_isa_cap_name(core_hw_cap()), r->f32, r->f32_isa, r->bf16,
           r->bf16_isa ? r->bf16_isa : "none", r->fp16, r->fp16_isa ? r->fp16_isa : "none", r->i8,
           r->i8_isa ? r->i8_isa : "none");
}

static void test_rates_follow_cpu(void **state) {
    (void)state;
    check_rates(peak_rates_get());
}

/* A second call returns the first call's rates, not a new measurement: the same pointer and the
 * same values (a new measurement would not repeat every double exactly). */
static void test_rates_cached(void **state) {
    (void)state;
    const peak_rates *a = peak_rates_get();
    peak_rates copy = *a;
    uint64_t t0 = core_now_ns();
    const peak_rates *b = peak_rates_get();
    printf("second call: %.3f ms\n", (double)(core_now_ns() - t0) * 1e-6);
    assert_ptr_equal(a, b);
    assert_memory_equal(&copy, b, sizeof copy);
}

/* A cap set after the first call gets rates of the ISAs it leaves, each cap measured once; going
 * back to the first cap gives the first rates again. */
static void test_rates_per_cap(void **state) {
    (void)state;
    const core_isa_cap cap0 = core_hw_cap();
    const peak_rates *first = peak_rates_get();
    const core_isa_cap caps[] = {CORE_ISA_AVX2, CORE_ISA_SCALAR};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        core_hw_set_cap(caps[i]);
        const peak_rates *r = peak_rates_get();
        check_rates(r);
        assert_true(r->bf16 == 0 && r->fp16 == 0);
        if (caps[i] == CORE_ISA_SCALAR) {
            assert_string_equal(r->f32_isa, "sse_f32");
            assert_true(r->i8 == 0);
        }
        assert_ptr_equal(peak_rates_get(), r);
    }
    core_hw_set_cap(cap0);
    assert_ptr_equal(peak_rates_get(), first);
}

/* Each loop counts what its instructions do, per iteration (peak.h): chains x lanes x 2. */
static void test_loop_counts(void **state) {
    (void)state;
    const struct {
        peak_isa isa;
        peak_format format;
        uint64_t per_iter;
    } want[] = {
        {PEAK_AVX512_F32, PEAK_FORMAT_F32, 24 * 16 * 2},
        {PEAK_AVX2_F32, PEAK_FORMAT_F32, 12 * 8 * 2},
        {PEAK_SSE_F32, PEAK_FORMAT_F32, 12 * 4 * 2},
        {PEAK_AVX512_BF16, PEAK_FORMAT_BF16, 24 * 32 * 2},
        {PEAK_AVX512_FP16, PEAK_FORMAT_FP16, 24 * 32 * 2},
        {PEAK_AMX_BF16, PEAK_FORMAT_BF16, 4 * 16 * 16 * 32 * 2},
        {PEAK_AVX512_VNNI_I8, PEAK_FORMAT_I8, 24 * 64 * 2},
        {PEAK_AVX_VNNI_I8, PEAK_FORMAT_I8, 12 * 32 * 2},
        {PEAK_AMX_INT8, PEAK_FORMAT_I8, 4 * 16 * 16 * 64 * 2},
    };
    assert_int_equal(sizeof want / sizeof *want, PEAK_ISA_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_int_equal(peak_isa_format(want[i].isa), want[i].format);
        assert_non_null(peak_isa_name(want[i].isa));
        peak_loop loop = peak_isa_loop(want[i].isa);
        if (!loop) {
            assert_true(peak_isa_measure(want[i].isa, 0.001) == 0);
            continue;
        }
        float sink = 0;
        assert_int_equal(loop(3, &sink), 3 * want[i].per_iter);
        assert_true(sink == sink);
    }
    /* the baseline loop is there on every x86-64, whatever the cap */
    assert_non_null(peak_isa_loop(PEAK_SSE_F32));
}

static void test_loops_follow_cap(void **state) {
    (void)state;
    const core_isa_cap cap0 = core_hw_cap();
    core_hw_set_cap(CORE_ISA_SCALAR);
    for (int i = 0; i < PEAK_ISA_COUNT; i++)
        if (i != PEAK_SSE_F32) assert_null(peak_isa_loop((peak_isa)i));
    core_hw_set_cap(CORE_ISA_AVX2);
    for (int i = 0; i < PEAK_ISA_COUNT; i++) {
        const char *name = peak_isa_name((peak_isa)i);
        if (!strncmp(name, "avx512", 6) || !strncmp(name, "amx", 3))
            assert_null(peak_isa_loop((peak_isa)i));
    }
    core_hw_set_cap(cap0);
}

int main(void) {
    /* applies $ANVIL_ISA, as a session would */
    printf("ISA cap: %s\n", anvil_isa_cap());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates_follow_cpu), cmocka_unit_test(test_rates_cached),
        cmocka_unit_test(test_rates_per_cap),    cmocka_unit_test(test_loop_counts),
        cmocka_unit_test(test_loops_follow_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
