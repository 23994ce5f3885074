/* Signal ops: DFT (forward against a cosine's known spectrum, round trips through the inverse,
 * one-sided forms, dft_length padding, both opset forms of axis), STFT against a direct sum over
 * frames written here, the three windows against their closed forms, MelWeightMatrix's triangle
 * shape, Det against hand-computed determinants, plus the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

#define TPI 3.14159265358979323846

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static void assert_close(const float *got, const float *want, size_t n, float tol) {
    for (size_t i = 0; i < n; i++) {
        if (fabsf(got[i] - want[i]) > tol)
            fprintf(stderr, "element %zu: got %g want %g\n", i, got[i], want[i]);
        assert_true(fabsf(got[i] - want[i]) <= tol);
    }
}

/* ---- DFT ------------------------------------------------------------------------------------ */

/* x[n] = cos(2*pi*3n/N) + 2 has spectrum 2N at bin 0 and N/2 at bins 3 and N-3, zero elsewhere. */
static void test_dft_cosine_spectrum(void **state) {
    (void)state;
    enum { N = 16 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(cos(2.0 * TPI * 3.0 * i / N) + 2.0);
    float want[N * 2] = {0};
    want[0] = 2.0f * N;
    want[3 * 2] = N / 2.0f;
    want[(N - 3) * 2] = N / 2.0f;
    /* opset 20, axis input 0 on a [16, 1] signal */
    const int64_t axis = 0;
    optest t;
    optest_begin_opset(&t, IR_OP_DFT, 3, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){N, 1}, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 0, NULL, &axis, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 2);
    assert_int_equal(t.out[0].dims[0], N);
    assert_int_equal(t.out[0].dims[1], 2);
    assert_close(t.out[0].data, want, N * 2, 1e-4f);
    optest_end(&t);
    /* opset 17, one-sided, axis attribute 1 on a [1, 16, 1] signal */
    optest_begin_opset(&t, IR_OP_DFT, 1, 1, 2, 17);
    optest_attr_int(&t, 0, "axis", 1);
    optest_attr_int(&t, 1, "onesided", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, N, 1}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[1], N / 2 + 1);
    assert_close(t.out[0].data, want, (N / 2 + 1) * 2, 1e-4f);
    optest_end(&t);
}

/* The inverse of the forward transform gives the signal back, complex and one-sided (irfft). */
static void test_dft_round_trip(void **state) {
    (void)state;
    enum { B = 2, N = 7 };
    float x[B * N * 2];
    for (int i = 0; i < B * N * 2; i++) x[i] = (float)((i * 37) % 11) - 5.0f;
    optest f, inv;
    optest_begin_opset(&f, IR_OP_DFT, 1, 1, 0, 20);
    optest_input(&f, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){B, N, 2}, x, false);
    assert_int_equal(optest_run(&f), ANVIL_OK);
    optest_begin_opset(&inv, IR_OP_DFT, 1, 1, 1, 20);
    optest_attr_int(&inv, 0, "inverse", 1);
    optest_input(&inv, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){B, N, 2}, f.out[0].data, false);
    assert_int_equal(optest_run(&inv), ANVIL_OK);
    assert_close(inv.out[0].data, x, B * N * 2, 1e-4f);
    optest_end(&inv);
    optest_end(&f);

    /* real signal of even length 8: rfft then irfft */
    float r[8];
    for (int i = 0; i < 8; i++) r[i] = (float)(i * i % 5) - 1.5f;
    optest_begin_opset(&f, IR_OP_DFT, 1, 1, 1, 20);
    optest_attr_int(&f, 0, "onesided", 1);
    optest_input(&f, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){8, 1}, r, false);
    /* opset 20's default axis is -2, the signal axis here */
    assert_int_equal(optest_run(&f), ANVIL_OK);
    assert_int_equal(f.out[0].dims[0], 5);
    optest_begin_opset(&inv, IR_OP_DFT, 1, 1, 2, 20);
    optest_attr_int(&inv, 0, "inverse", 1);
    optest_attr_int(&inv, 1, "onesided", 1);
    optest_input(&inv, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){5, 2}, f.out[0].data, false);
    assert_int_equal(optest_run(&inv), ANVIL_OK);
    assert_int_equal(inv.out[0].dims[0], 8);
    assert_int_equal(inv.out[0].dims[1], 1);
    assert_close(inv.out[0].data, r, 8, 1e-4f);
    optest_end(&inv);
    optest_end(&f);
}

/* dft_length longer than the signal zero-pads it: a unit impulse gives all-ones. */
static void test_dft_length_pads(void **state) {
    (void)state;
    const double x[3] = {1.0, 0.0, 0.0};
    const int32_t len = 6;
    optest t;
    optest_begin_opset(&t, IR_OP_DFT, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 2, (int64_t[]){3, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, &len, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 6);
    const double *y = t.out[0].data;
    for (int k = 0; k < 6; k++) {
        assert_true(fabs(y[2 * k] - 1.0) < 1e-12);
        assert_true(fabs(y[2 * k + 1]) < 1e-12);
    }
    optest_end(&t);
}

static void test_dft_errors(void **state) {
    (void)state;
    const float x[8] = {0};
    const int64_t last = -1;
    optest t;
    optest_begin_opset(&t, IR_OP_DFT, 3, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 2}, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 0, NULL, &last, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "last (real/imaginary) dim");
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_DFT, 1, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "1 (real) or 2 (complex)");
    optest_end(&t);

    const int32_t xi[4] = {0};
    optest_begin_opset(&t, IR_OP_DFT, 1, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){4, 1}, xi, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "FLOAT16, FLOAT32 or FLOAT64");
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_DFT, 1, 1, 0, 16);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 1}, x, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 17");
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_DFT, 1, 1, 1, 17);
    optest_attr_int(&t, 0, "axis", 7);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 1}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);

    const int64_t zero = 0;
    optest_begin_opset(&t, IR_OP_DFT, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &zero, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "dft_length is 0");
    optest_end(&t);

    /* zero-size batch: fine, empty output */
    optest_begin_opset(&t, IR_OP_DFT, 1, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){0, 4, 1}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);
}

/* ---- STFT ----------------------------------------------------------------------------------- */

static void test_stft_against_direct_sum(void **state) {
    (void)state;
    enum { L = 20, FL = 8, STEP = 4, FRAMES = 1 + (L - FL) / STEP, BINS = FL / 2 + 1 };
    float x[L], w[FL];
    for (int i = 0; i < L; i++) x[i] = (float)sin(0.3 * i) + 0.1f * (float)i;
    for (int i = 0; i < FL; i++) w[i] = 0.5f + 0.05f * (float)i;
    const int64_t step = STEP;
    optest t;
    optest_begin(&t, IR_OP_STFT, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, L, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &step, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){FL}, w, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 4);
    assert_int_equal(t.out[0].dims[1], FRAMES);
    assert_int_equal(t.out[0].dims[2], BINS);
    float want[FRAMES * BINS * 2];
    for (int f = 0; f < FRAMES; f++)
        for (int k = 0; k < BINS; k++) {
            double re = 0, im = 0;
            for (int n = 0; n < FL; n++) {
                double v = (double)x[f * STEP + n] * w[n];
                re += v * cos(2.0 * TPI * k * n / FL);
                im -= v * sin(2.0 * TPI * k * n / FL);
            }
            want[(f * BINS + k) * 2] = (float)re;
            want[(f * BINS + k) * 2 + 1] = (float)im;
        }
    assert_close(t.out[0].data, want, FRAMES * BINS * 2, 1e-4f);
    optest_end(&t);
}

static void test_stft_errors(void **state) {
    (void)state;
    const float x[8] = {0};
    const int64_t zero = 0, one = 1, big = 20;
    optest t;
    optest_begin(&t, IR_OP_STFT, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 8, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &zero, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "frame_step is 0");
    optest_end(&t);

    optest_begin(&t, IR_OP_STFT, 4, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 8, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &one, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT64, 0, NULL, &big, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "fewer than one frame");
    optest_end(&t);

    optest_begin(&t, IR_OP_STFT, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){8, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &one, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 3");
    optest_end(&t);

    optest_begin(&t, IR_OP_STFT, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &one, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "onesided=1 needs a real signal");
    optest_end(&t);
}

/* ---- windows -------------------------------------------------------------------------------- */

static void run_window(ir_op op, int64_t size, int periodic, float *got) {
    const int64_t sz = size;
    optest t;
    optest_begin(&t, op, 1, 1, 1);
    optest_attr_int(&t, 0, "periodic", periodic);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 0, NULL, &sz, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(t.out[0].dims[0], size);
    memcpy(got, t.out[0].data, (size_t)size * sizeof(float));
    optest_end(&t);
}

static void test_windows(void **state) {
    (void)state;
    float got[8];
    run_window(IR_OP_HANNWINDOW, 4, 1, got);
    assert_close(got, (const float[]){0.0f, 0.5f, 1.0f, 0.5f}, 4, 1e-6f);
    run_window(IR_OP_HANNWINDOW, 5, 0, got);
    assert_close(got, (const float[]){0.0f, 0.5f, 1.0f, 0.5f, 0.0f}, 5, 1e-6f);
    /* Hamming with alpha 25/46: ends at 25/46 - 21/46 = 4/46, middle at 1 */
    run_window(IR_OP_HAMMINGWINDOW, 5, 0, got);
    assert_close(got, (const float[]){4.0f / 46, 25.0f / 46, 1.0f, 25.0f / 46, 4.0f / 46}, 5,
                 1e-6f);
    /* Blackman, periodic 4: angles 0, pi/2, pi, 3pi/2 */
    run_window(IR_OP_BLACKMANWINDOW, 4, 1, got);
    assert_close(got, (const float[]){0.0f, 0.42f - 0.08f, 1.0f, 0.42f - 0.08f}, 4, 1e-6f);

    /* output_datatype DOUBLE, size 0 gives an empty tensor */
    const int32_t zero = 0;
    optest t;
    optest_begin(&t, IR_OP_HANNWINDOW, 1, 1, 1);
    optest_attr_int(&t, 0, "output_datatype", ANVIL_DTYPE_FLOAT64);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 0, NULL, &zero, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT64);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);

    const int64_t neg = -3;
    optest_begin(&t, IR_OP_HAMMINGWINDOW, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 0, NULL, &neg, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "must be >= 0");
    optest_end(&t);

    const int64_t four = 4;
    optest_begin(&t, IR_OP_BLACKMANWINDOW, 1, 1, 1);
    optest_attr_int(&t, 0, "output_datatype", 8); /* STRING */
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 0, NULL, &four, true);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "output_datatype");
    optest_end(&t);

    const float f = 4.0f;
    optest_begin(&t, IR_OP_HANNWINDOW, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 0, NULL, &f, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "INT32 or INT64");
    optest_end(&t);
}

/* ---- MelWeightMatrix ------------------------------------------------------------------------ */

static void test_mel_triangles(void **state) {
    (void)state;
    const int64_t bins = 4, dft = 64, rate = 16000;
    const float lo = 100.0f, hi = 7000.0f;
    optest t;
    optest_begin(&t, IR_OP_MELWEIGHTMATRIX, 5, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 0, NULL, &bins, true);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &dft, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 0, NULL, &rate, false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 0, NULL, &lo, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 0, NULL, &hi, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 33);
    assert_int_equal(t.out[0].dims[1], 4);
    const float *w = t.out[0].data;
    /* Each column is a triangle: values in [0, 1], exactly one peak of 1, rising then falling,
     * and each column's peak lies below the next column's. */
    int prev_peak = -1;
    for (int c = 0; c < 4; c++) {
        int peak = -1, ones = 0;
        for (int r = 0; r < 33; r++) {
            float v = w[r * 4 + c];
            assert_true(v >= 0.0f && v <= 1.0f);
            if (v == 1.0f) {
                peak = r;
                ones++;
            }
        }
        assert_int_equal(ones, 1);
        assert_true(peak > prev_peak);
        for (int r = 1; r <= peak; r++) assert_true(w[r * 4 + c] >= w[(r - 1) * 4 + c]);
        for (int r = peak + 1; r < 33; r++) assert_true(w[r * 4 + c] <= w[(r - 1) * 4 + c]);
        prev_peak = peak;
    }
    /* The first peak: mel points step by (mel(7000) - mel(100)) / 6; bin = floor(65 * hz / 16000)
     */
    double m0 = 2595.0 * log10(1.0 + 100.0 / 700.0), m1 = 2595.0 * log10(1.0 + 7000.0 / 700.0);
    double hz1 = 700.0 * (pow(10.0, (m0 + (m1 - m0) / 6.0) / 2595.0) - 1.0);
    assert_int_equal(w[(int)floor(65.0 * hz1 / 16000.0) * 4 + 0] == 1.0f, 1);
    optest_end(&t);

    const int64_t zero = 0;
    optest_begin(&t, IR_OP_MELWEIGHTMATRIX, 5, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 0, NULL, &zero, true);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &dft, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 0, NULL, &rate, false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 0, NULL, &lo, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 0, NULL, &hi, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "num_mel_bins is 0");
    optest_end(&t);
}

/* ---- Det ------------------------------------------------------------------------------------ */

static void test_det_values(void **state) {
    (void)state;
    /* [[1,2],[3,4]] = -2; a 2x2 permutation = -1; identity = 1 (batch of three) */
    const float a[12] = {1, 2, 3, 4, 0, 1, 1, 0, 1, 0, 0, 1};
    optest t;
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){3, 2, 2}, a, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 1);
    assert_close(t.out[0].data, (const float[]){-2.0f, -1.0f, 1.0f}, 3, 1e-6f);
    optest_end(&t);
    /* needs a pivot (zero in the corner): cofactor expansion gives -2 */
    const double b[9] = {0, 1, 2, 1, 0, 3, 4, -3, 8};
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 22);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 2, (int64_t[]){3, 3}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 0);
    assert_true(fabs(*(const double *)t.out[0].data + 2.0) < 1e-12);
    optest_end(&t);
    /* singular matrix */
    const float s[4] = {1, 2, 2, 4};
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, s, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(fabsf(*(const float *)t.out[0].data) < 1e-6f);
    optest_end(&t);
    /* zero batch */
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){0, 2, 2}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);
}

static void test_det_errors(void **state) {
    (void)state;
    const float a[6] = {0};
    optest t;
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, a, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "square");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, a, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank >= 2");
    optest_end(&t);
    const int32_t ai[4] = {0};
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 2}, ai, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "FLOAT16");
    optest_end(&t);
    /* bfloat16 only from opset 22 */
    const uint16_t bf[4] = {0};
    optest_begin_opset(&t, IR_OP_DET, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_BFLOAT16, 2, (int64_t[]){2, 2}, bf, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "BFLOAT16");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dft_cosine_spectrum),
        cmocka_unit_test(test_dft_round_trip),
        cmocka_unit_test(test_dft_length_pads),
        cmocka_unit_test(test_dft_errors),
        cmocka_unit_test(test_stft_against_direct_sum),
        cmocka_unit_test(test_stft_errors),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_mel_triangles),
        cmocka_unit_test(test_det_values),
        cmocka_unit_test(test_det_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
