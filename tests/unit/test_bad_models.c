/* The bad-model corpus (tests/bad_models, written by gen_bad_models.py) through the public API:
 * every file must be refused with the status and message its manifest row names.
 *
 * stage "load": anvil_model_load must fail.
 * stage "run":  the model may load; then a session is created and run with every input filled
 *               with the row's fill value. The first failure, at whichever step, must match,
 *               and one must happen (load-time inference may already see what a run would). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "anvil.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct row {
    char file[256], status[64], substring[512], stage[16];
    double fill;
} row;

static const char *corpus_dir(void) {
    static char dir[4096];
    const char *src = getenv("ANVIL_SOURCE_DIR");
    snprintf(dir, sizeof dir, "%s/tests/bad_models", src ? src : ".");
    return dir;
}

/* Reads manifest.tsv; returns the number of rows (at most cap). */
/* A manifest column that does not fit its field is a broken manifest, not something to cut. */
static void copy_col(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) fail_msg("manifest column too long (%zu bytes): %.40s...", n, src);
    memcpy(dst, src, n + 1);
}

static int read_manifest(row *rows, int cap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.tsv", corpus_dir());
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s (is ANVIL_SOURCE_DIR set?)", path);
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        char *cols[5] = {"", "", "", "", ""};
        char *p = line;
        for (int i = 0; i < 5 && p; i++) {
            cols[i] = p;
            p = strchr(p, '\t');
            if (p) *p++ = '\0';
        }
        row *r = &rows[n++];
        copy_col(r->file, sizeof r->file, cols[0]);
        copy_col(r->status, sizeof r->status, cols[1]);
        copy_col(r->substring, sizeof r->substring, cols[2]);
        copy_col(r->stage, sizeof r->stage, cols[3]);
        r->fill = *cols[4] ? atof(cols[4]) : 0;
        if (strcmp(r->stage, "load") && strcmp(r->stage, "run"))
            fail_msg("manifest row %s: unknown stage '%s'", r->file, r->stage);
    }
    fclose(f);
    return n;
}

static void expect(const row *r, anvil_status s, const char *step) {
    if (s == ANVIL_OK) fail_msg("%s: %s succeeded; expected %s", r->file, step, r->status);
    const char *msg = anvil_last_error();
    if (strcmp(anvil_status_name(s), r->status))
        fail_msg("%s: %s failed with %s (%s); expected %s", r->file, step, anvil_status_name(s),
                 msg, r->status);
    if (!strstr(msg, r->substring))
        fail_msg("%s: %s failed with message '%s', which lacks '%s'", r->file, step, msg,
                 r->substring);
}

/* Creates a session and runs it with every input filled with r->fill (unknown dims are 1). */
static anvil_status run_model(const row *r, anvil_model *m, const char **step) {
    anvil_session *sess;
    *step = "anvil_session_create";
    anvil_status s = anvil_session_create(m, NULL, &sess);
    if (s != ANVIL_OK) return s;
    size_t n_in = anvil_model_input_count(m), n_out = anvil_model_output_count(m);
    const char **names = calloc(n_in + 1, sizeof *names);
    anvil_tensor **ins = calloc(n_in + 1, sizeof *ins);
    anvil_tensor **outs = calloc(n_out + 1, sizeof *outs);
    assert_true(names && ins && outs);
    for (size_t i = 0; i < n_in; i++) {
        anvil_value_info info;
        assert_int_equal(anvil_model_input_info(m, i, &info), ANVIL_OK);
        int64_t dims[ANVIL_MAX_RANK];
        int rank = info.rank < 0 ? 1 : info.rank;
        for (int k = 0; k < rank; k++)
            dims[k] = info.rank < 0 || info.dims[k] < 0 ? 1 : info.dims[k];
        assert_int_equal(anvil_tensor_create(info.dtype, rank, dims, &ins[i]), ANVIL_OK);
        void *data = anvil_tensor_data(ins[i]);
        for (size_t e = 0; e < anvil_tensor_element_count(ins[i]); e++)
            core_store_f64(info.dtype, data, e, r->fill);
        names[i] = info.name;
    }
    *step = "anvil_session_run";
    s = anvil_session_run(sess, n_in, names, (const anvil_tensor *const *)ins, n_out, NULL, outs);
    for (size_t i = 0; i < n_in; i++) anvil_tensor_free(ins[i]);
    for (size_t i = 0; i < n_out; i++) anvil_tensor_free(outs[i]);
    free(names);
    free(ins);
    free(outs);
    anvil_session_free(sess);
    return s;
}

static void test_corpus(void **state) {
    (void)state;
    static row rows[256];
    int n = read_manifest(rows, 256);
    assert_true(n >= 26);
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        char path[4500];
        int w = snprintf(path, sizeof path, "%s/%s", corpus_dir(), r->file);
        if (w < 0 || (size_t)w >= sizeof path) fail_msg("%s: path too long", r->file);
        struct stat st;
        if (stat(path, &st) != 0) fail_msg("%s: missing from the corpus", r->file);
        anvil_model *m = NULL;
        anvil_status s = anvil_model_load(path, &m);
        if (!strcmp(r->stage, "load") || s != ANVIL_OK) {
            expect(r, s, "anvil_model_load");
            assert_null(m);
            continue;
        }
        const char *step;
        s = run_model(r, m, &step);
        expect(r, s, step);
        anvil_model_free(m);
    }
}

/* The same files from memory: loading must fail too (with the same status, except for
 * external data, which a memory load refuses outright), and never crash. */
static void test_corpus_from_memory(void **state) {
    (void)state;
    static row rows[256];
    int n = read_manifest(rows, 256);
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (strcmp(r->stage, "load")) continue;
        char path[4500];
        int w = snprintf(path, sizeof path, "%s/%s", corpus_dir(), r->file);
        if (w < 0 || (size_t)w >= sizeof path) fail_msg("%s: path too long", r->file);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static uint8_t buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        anvil_model *m = NULL;
        anvil_status s = anvil_model_load_buffer(buf, len, &m);
        assert_int_not_equal(s, ANVIL_OK);
        assert_null(m);
        if (!strncmp(r->file, "ext_", 4)) continue;
        if (strcmp(anvil_status_name(s), r->status))
            fail_msg("%s from memory: %s (%s); expected %s", r->file, anvil_status_name(s),
                     anvil_last_error(), r->status);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_corpus_from_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
