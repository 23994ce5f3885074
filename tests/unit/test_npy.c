/* .npy reader and writer: round trips for every dtype and for scalar, empty and rank-8 shapes,
 * byte-exact agreement with files numpy writes, and one malformed file per failure class, each
 * refused with its own message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/api.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_tmpdir.h"

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static size_t read_bytes(const char *path, unsigned char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Builds a file from a version, a header text (used verbatim, unpadded) and a payload, so that
 * each malformed case changes exactly one thing. */
static void write_npy_raw(const char *path, int major, const char *header, const void *data,
                          size_t n) {
    unsigned char buf[4096];
    size_t hl = strlen(header), off = 0;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    if (major == 1) {
        buf[8] = (unsigned char)(hl & 0xff);
        buf[9] = (unsigned char)(hl >> 8);
        off = 10;
    } else {
        for (int i = 0; i < 4; i++) buf[8 + i] = (unsigned char)(hl >> (8 * i));
        off = 12;
    }
    assert_true(off + hl + n <= sizeof buf);
    memcpy(buf + off, header, hl);
    if (n) memcpy(buf + off + hl, data, n);
    write_bytes(path, buf, off + hl + n);
}

static void expect_read_error(const char *name, anvil_status want, const char *substr) {
    anvil_tensor *t = NULL;
    anvil_status s = npy_read(tmp_path(name), &t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fail_msg("%s: got %s '%s', want %s containing '%s'", name, anvil_status_name(s),
                 anvil_last_error(), anvil_status_name(want), substr);
    assert_null(t);
}

/* ---- round trips --------------------------------------------------------------------------- */

static void round_trip(anvil_dtype dt, int rank, const int64_t *dims) {
    anvil_tensor *t;
    assert_int_equal(anvil_tensor_create(dt, rank, dims, &t), ANVIL_OK);
    unsigned char *p = anvil_tensor_data(t);
    size_t bytes = anvil_tensor_bytes(t);
    /* A byte pattern that differs per position; for bool keep values 0/1 as numpy would. */
    for (size_t i = 0; i < bytes; i++)
        p[i] = dt == ANVIL_DTYPE_BOOL ? (unsigned char)(i % 3 == 0) : (unsigned char)(i * 37 + 11);
    const char *path = tmp_path("rt.npy");
    assert_int_equal(npy_write(path, t), ANVIL_OK);

    unsigned char file[1 << 16];
    size_t n = read_bytes(path, file, sizeof file);
    assert_int_equal((n - bytes) % 64, 0); /* data starts 64-byte aligned */
    assert_int_equal(file[n - bytes - 1], '\n');

    anvil_tensor *u = NULL;
    assert_int_equal(npy_read(path, &u), ANVIL_OK);
    assert_int_equal(anvil_tensor_dtype(u), dt);
    assert_int_equal(anvil_tensor_rank(u), rank);
    for (int i = 0; i < rank; i++) assert_int_equal(anvil_tensor_dims(u)[i], dims[i]);
    assert_int_equal(anvil_tensor_bytes(u), bytes);
    if (bytes) assert_memory_equal(anvil_tensor_data(u), p, bytes);
    anvil_tensor_free(u);
    anvil_tensor_free(t);
}

static void test_round_trip_dtypes(void **state) {
    (void)state;
    static const anvil_dtype dts[] = {
        ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_INT8,
        ANVIL_DTYPE_UINT8,   ANVIL_DTYPE_INT16,   ANVIL_DTYPE_UINT16,  ANVIL_DTYPE_INT32,
        ANVIL_DTYPE_UINT32,  ANVIL_DTYPE_INT64,   ANVIL_DTYPE_UINT64,  ANVIL_DTYPE_BOOL,
    };
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
        round_trip(dts[i], 3, (const int64_t[]){2, 3, 5});
}

static void test_round_trip_shapes(void **state) {
    (void)state;
    round_trip(ANVIL_DTYPE_FLOAT32, 0, NULL);                       /* scalar: shape () */
    round_trip(ANVIL_DTYPE_FLOAT32, 1, (const int64_t[]){7});       /* shape (7,) */
    round_trip(ANVIL_DTYPE_INT64, 1, (const int64_t[]){0});         /* empty */
    round_trip(ANVIL_DTYPE_FLOAT32, 3, (const int64_t[]){4, 0, 2}); /* empty, rank 3 */
    round_trip(ANVIL_DTYPE_UINT8, ANVIL_MAX_RANK, (const int64_t[]){2, 1, 2, 1, 3, 1, 2, 2});
}

/* The exact bytes numpy 2.x writes for np.save(np.arange(6, dtype='<f4').reshape(2, 3)). */
static void test_matches_numpy_bytes(void **state) {
    (void)state;
    const char *numpy_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    unsigned char want[152];
    memcpy(want, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(want + 10, ' ', 118);
    memcpy(want + 10, numpy_header, strlen(numpy_header));
    want[127] = '\n';
    float vals[6] = {0, 1, 2, 3, 4, 5};
    memcpy(want + 128, vals, sizeof vals);

    anvil_tensor *t;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 2, (const int64_t[]){2, 3}, &t),
                     ANVIL_OK);
    memcpy(anvil_tensor_data(t), vals, sizeof vals);
    assert_int_equal(npy_write(tmp_path("np.npy"), t), ANVIL_OK);
    anvil_tensor_free(t);
    unsigned char got[512];
    assert_int_equal(read_bytes(tmp_path("np.npy"), got, sizeof got), sizeof want);
    assert_memory_equal(got, want, sizeof want);

    /* And the reader takes numpy's file back with the right values. */
    write_bytes(tmp_path("np2.npy"), want, sizeof want);
    anvil_tensor *u;
    assert_int_equal(npy_read(tmp_path("np2.npy"), &u), ANVIL_OK);
    assert_int_equal(anvil_tensor_dims(u)[1], 3);
    assert_memory_equal(anvil_tensor_data(u), vals, sizeof vals);
    anvil_tensor_free(u);
}

/* Version 2.0 and 3.0 headers (4-byte length), with '|u1', no trailing comma, double quotes and
 * odd spacing, all of which Python's dict syntax allows. */
static void test_versions_and_spelling(void **state) {
    (void)state;
    unsigned char d[4] = {9, 8, 7, 6};
    write_npy_raw(tmp_path("v2.npy"), 2,
                  "{\"shape\":(4,),\"fortran_order\" : False , 'descr':'|u1'}\n", d, 4);
    write_npy_raw(tmp_path("v3.npy"), 3,
                  "{'descr': '<i2', 'fortran_order': False, 'shape': (1, 2)}", d, 4);
    anvil_tensor *t;
    assert_int_equal(npy_read(tmp_path("v2.npy"), &t), ANVIL_OK);
    assert_int_equal(anvil_tensor_dtype(t), ANVIL_DTYPE_UINT8);
    assert_int_equal(anvil_tensor_element_count(t), 4);
    assert_memory_equal(anvil_tensor_data(t), d, 4);
    anvil_tensor_free(t);
    assert_int_equal(npy_read(tmp_path("v3.npy"), &t), ANVIL_OK);
    assert_int_equal(anvil_tensor_dtype(t), ANVIL_DTYPE_INT16);
    assert_int_equal(((int16_t *)anvil_tensor_data(t))[1], 6 * 256 + 7);
    anvil_tensor_free(t);
}

/* ---- malformed files ---------------------------------------------------------------------- */

#define GOOD_F4(shape) "{'descr': '<f4', 'fortran_order': False, 'shape': " shape ", }"

static void test_malformed(void **state) {
    (void)state;
    float f[4] = {1, 2, 3, 4};

    write_bytes(tmp_path("empty.npy"), "", 0);
    expect_read_error("empty.npy", ANVIL_ERR_INVALID_ARGUMENT, "shorter than the .npy preamble");

    write_bytes(tmp_path("magic.npy"), "PK\x03\x04 this is a zip file", 24);
    expect_read_error("magic.npy", ANVIL_ERR_INVALID_ARGUMENT, "magic");

    write_npy_raw(tmp_path("ver.npy"), 9, GOOD_F4("(4,)"), f, 16);
    expect_read_error("ver.npy", ANVIL_ERR_INVALID_ARGUMENT, "version 9.0");

    /* A header length far past the end of a tiny file. */
    write_bytes(tmp_path("hlen.npy"), "\x93NUMPY\x01\x00\xff\xff{}", 12);
    expect_read_error("hlen.npy", ANVIL_ERR_INVALID_ARGUMENT, "ends inside the header");
    write_bytes(tmp_path("hbig.npy"), "\x93NUMPY\x02\x00\xff\xff\xff\x7f{}", 14);
    expect_read_error("hbig.npy", ANVIL_ERR_INVALID_ARGUMENT, "larger than 64 KiB");

    write_npy_raw(tmp_path("fortran.npy"), 1,
                  "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", f, 16);
    expect_read_error("fortran.npy", ANVIL_ERR_INVALID_ARGUMENT, "Fortran-ordered");

    write_npy_raw(tmp_path("be.npy"), 1,
                  "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", f, 16);
    expect_read_error("be.npy", ANVIL_ERR_INVALID_ARGUMENT, "big-endian");

    write_npy_raw(tmp_path("c8.npy"), 1,
                  "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", f, 16);
    expect_read_error("c8.npy", ANVIL_ERR_INVALID_ARGUMENT, "unsupported .npy dtype '<c8'");

    write_npy_raw(tmp_path("pipe.npy"), 1,
                  "{'descr': '|f4', 'fortran_order': False, 'shape': (4,), }", f, 16);
    expect_read_error("pipe.npy", ANVIL_ERR_INVALID_ARGUMENT, "'|' for a multi-byte type");

    write_npy_raw(tmp_path("neg.npy"), 1, GOOD_F4("(-4,)"), f, 16);
    expect_read_error("neg.npy", ANVIL_ERR_INVALID_ARGUMENT, "non-negative integers");

    write_npy_raw(tmp_path("ovf.npy"), 1, GOOD_F4("(99999999999999999999,)"), f, 16);
    expect_read_error("ovf.npy", ANVIL_ERR_INVALID_ARGUMENT, "overflows int64");

    write_npy_raw(tmp_path("bytes.npy"), 1, GOOD_F4("(4611686018427387904, 4)"), f, 16);
    expect_read_error("bytes.npy", ANVIL_ERR_INVALID_ARGUMENT, "byte size overflows");

    write_npy_raw(tmp_path("rank9.npy"), 1, GOOD_F4("(1, 1, 1, 1, 1, 1, 1, 1, 4)"), f, 16);
    expect_read_error("rank9.npy", ANVIL_ERR_INVALID_ARGUMENT, "rank exceeds");

    write_npy_raw(tmp_path("short.npy"), 1, GOOD_F4("(5,)"), f, 16);
    expect_read_error("short.npy", ANVIL_ERR_INVALID_ARGUMENT,
                      "need 20 data bytes but the file holds 16");

    write_npy_raw(tmp_path("long.npy"), 1, GOOD_F4("(3,)"), f, 16);
    expect_read_error("long.npy", ANVIL_ERR_INVALID_ARGUMENT,
                      "need 12 data bytes but the file holds 16");

    /* A huge declared shape with no data must fail on the size check, not allocate. */
    write_npy_raw(tmp_path("huge.npy"), 1, GOOD_F4("(1000000000, 1000)"), f, 16);
    expect_read_error("huge.npy", ANVIL_ERR_INVALID_ARGUMENT, "the file holds 16");

    write_npy_raw(tmp_path("nokey.npy"), 1, "{'descr': '<f4', 'shape': (4,), }", f, 16);
    expect_read_error("nokey.npy", ANVIL_ERR_INVALID_ARGUMENT, "lacks one of");

    write_npy_raw(tmp_path("dup.npy"), 1,
                  "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f,
                  16);
    expect_read_error("dup.npy", ANVIL_ERR_INVALID_ARGUMENT, "unknown or repeated key");

    write_npy_raw(tmp_path("unterm.npy"), 1, "{'descr': '<f4", f, 16);
    expect_read_error("unterm.npy", ANVIL_ERR_INVALID_ARGUMENT, "unterminated string");

    write_npy_raw(tmp_path("nodict.npy"), 1, "[1, 2, 3]", f, 16);
    expect_read_error("nodict.npy", ANVIL_ERR_INVALID_ARGUMENT, "not a dict");

    write_npy_raw(tmp_path("tuple.npy"), 1, GOOD_F4("(4,,)"), f, 16);
    expect_read_error("tuple.npy", ANVIL_ERR_INVALID_ARGUMENT, "non-negative integers");

    write_npy_raw(tmp_path("trail.npy"), 1, GOOD_F4("(4,)") " extra", f, 16);
    expect_read_error("trail.npy", ANVIL_ERR_INVALID_ARGUMENT, "trailing characters");

    expect_read_error("does_not_exist.npy", ANVIL_ERR_IO, "cannot open");
}

static void test_write_errors(void **state) {
    (void)state;
    anvil_tensor *t;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_BFLOAT16, 1, (const int64_t[]){2}, &t),
                     ANVIL_OK);
    assert_int_equal(npy_write(tmp_path("bf16.npy"), t), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "BFLOAT16 has no .npy equivalent"));
    anvil_tensor_free(t);

    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 1, (const int64_t[]){2}, &t),
                     ANVIL_OK);
    assert_int_equal(npy_write(tmp_path("no/such/dir/x.npy"), t), ANVIL_ERR_IO);
    assert_non_null(strstr(anvil_last_error(), "cannot create"));
    anvil_tensor_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_dtypes),   cmocka_unit_test(test_round_trip_shapes),
        cmocka_unit_test(test_matches_numpy_bytes), cmocka_unit_test(test_versions_and_spelling),
        cmocka_unit_test(test_malformed),           cmocka_unit_test(test_write_errors),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_remove);
}
