/* anvil_tune_model on the small committed model of test_api.c (tests/unit/data/api_small.onnx:
 * z = Relu(x + b), s = Shape(z), x is [N, 4]): the database it fills, the report as a struct, as
 * text and as JSON, the progress callback, a rerun that measures nothing, the stop flag, and the
 * arguments it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "anvil.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char model_path[4096];

typedef struct fixture {
    anvil_model *m;
    float x[64];
    anvil_tensor *xt;
    char db[64];
    anvil_options *opts;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || anvil_model_load(model_path, &f->m) != ANVIL_OK) return -1;
    for (int i = 0; i < 64; i++) f->x[i] = (float)i / 8 - 4;
    const int64_t dims[2] = {16, 4};
    if (anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, f->x, &f->xt) != ANVIL_OK) return -1;
    snprintf(f->db, sizeof f->db, "/tmp/anvil_test_tune_%d.db", (int)getpid());
    unlink(f->db);
    if (anvil_options_create(&f->opts) != ANVIL_OK ||
        anvil_options_set_threads(f->opts, 1) != ANVIL_OK ||
        anvil_options_set_tuning_db(f->opts, f->db) != ANVIL_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    anvil_options_free(f->opts);
    anvil_tensor_free(f->xt);
    anvil_model_free(f->m);
    unlink(f->db);
    char side[80];
    snprintf(side, sizeof side, "%s-wal", f->db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", f->db);
    unlink(side);
    free(f);
    return 0;
}

typedef struct seen {
    int calls, settled, n_items;
} seen;

static void on_progress(void *arg, const anvil_tune_progress *p) {
    seen *s = arg;
    s->calls++;
    s->settled += p->alive == 0;
    s->n_items = p->n_items;
    assert_true(p->item >= 0 && p->item < p->n_items);
    assert_non_null(p->op);
    assert_true(p->elapsed_s >= 0 && p->eta_s >= 0);
}

static anvil_tune_report *tune(fixture *f, anvil_tune_options *o, anvil_status want) {
    const char *names[1] = {"x"};
    const anvil_tensor *ins[1] = {f->xt};
    anvil_tune_report *r = NULL;
    assert_int_equal(anvil_tune_model(f->m, o, 1, names, ins, &r), want);
    assert_non_null(r);
    return r;
}

static void test_tune_and_rerun(void **state) {
    fixture *f = *state;
    seen s = {0};
    anvil_tune_options o;
    anvil_tune_options_default(&o);
    assert_int_equal(o.runs, 20);
    o.session = f->opts;
    o.runs = 3;
    o.model_label = "small.onnx";
    o.progress = on_progress;
    o.progress_arg = &s;
    anvil_tune_report *r = tune(f, &o, ANVIL_OK);

    anvil_tune_summary sum;
    assert_int_equal(anvil_tune_report_summary(r, &sum), ANVIL_OK);
    assert_true(sum.problems >= 1);
    assert_int_equal((size_t)sum.problems, anvil_tune_report_count(r));
    assert_int_equal(sum.tuned + sum.cached + sum.skipped + sum.failed, sum.problems);
    assert_true(sum.tuned >= 1);
    assert_int_equal(sum.failed, 0);
    assert_false(sum.stopped);
    assert_string_equal(sum.database, f->db);
    assert_true(sum.fingerprint[0] != '\0');
    assert_true(sum.cascade_ms > 0 && sum.tuned_ms > 0);
    assert_int_equal(s.settled, sum.problems);
    assert_int_equal(s.n_items, sum.problems);
    assert_int_equal(access(f->db, F_OK), 0);

    for (size_t i = 0; i < anvil_tune_report_count(r); i++) {
        anvil_tune_problem p;
        assert_int_equal(anvil_tune_report_problem(r, i, &p), ANVIL_OK);
        assert_true(p.nodes >= 1);
        assert_non_null(p.key);
        if (!strcmp(p.status, "tuned") && !p.group) {
            assert_true(p.winner[0] != '\0');
            assert_true(p.median_ms > 0);
            assert_true(p.candidates >= 1);
        }
    }
    anvil_tune_problem p;
    assert_int_equal(anvil_tune_report_problem(r, anvil_tune_report_count(r), &p),
                     ANVIL_ERR_INVALID_ARGUMENT);

    const char *text = anvil_tune_report_text(r, 1);
    assert_non_null(text);
    assert_non_null(strstr(text, "problems: "));
    assert_non_null(strstr(text, f->db));
    cJSON *j = cJSON_Parse(anvil_tune_report_json(r));
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "small.onnx");
    assert_string_equal(cJSON_GetObjectItem(j, "database")->valuestring, f->db);
    assert_int_equal(cJSON_GetObjectItem(j, "threads")->valueint, 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "problems")), sum.problems);
    cJSON_Delete(j);
    anvil_tune_report_free(r);

    /* the rerun finds every problem in the database and measures none */
    o.progress = NULL;
    o.runs = 0;
    r = tune(f, &o, ANVIL_OK);
    anvil_tune_summary again;
    assert_int_equal(anvil_tune_report_summary(r, &again), ANVIL_OK);
    assert_int_equal(again.problems, sum.problems);
    assert_int_equal(again.tuned, 0);
    assert_true(again.cascade_ms == 0);
    anvil_tune_report_free(r);
}

static void test_stop(void **state) {
    fixture *f = *state;
    volatile int stop = 1;
    anvil_tune_options o;
    anvil_tune_options_default(&o);
    o.session = f->opts;
    o.retune = 1;
    o.stop = &stop;
    anvil_tune_report *r = tune(f, &o, ANVIL_OK);
    anvil_tune_summary sum;
    assert_int_equal(anvil_tune_report_summary(r, &sum), ANVIL_OK);
    assert_true(sum.stopped);
    assert_int_equal(sum.tuned, 0);
    assert_true(sum.cascade_ms == 0);
    assert_non_null(strstr(anvil_tune_report_text(r, 0), "rerun the same command to resume"));
    anvil_tune_report_free(r);
}

static void test_misuse(void **state) {
    fixture *f = *state;
    const char *names[1] = {"x"}, *wrong[1] = {"y"};
    const anvil_tensor *ins[1] = {f->xt};
    anvil_tune_report *r = (anvil_tune_report *)1;
    assert_int_equal(anvil_tune_model(NULL, NULL, 1, names, ins, &r), ANVIL_ERR_INVALID_ARGUMENT);
    assert_null(r);
    assert_int_equal(anvil_tune_model(f->m, NULL, 1, names, ins, NULL), ANVIL_ERR_INVALID_ARGUMENT);
    anvil_tune_options o;
    anvil_tune_options_default(&o);
    o.session = f->opts;
    r = tune(f, &o, ANVIL_OK);
    anvil_tune_report_free(r);
    assert_int_equal(anvil_tune_model(f->m, &o, 1, wrong, ins, &r), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "no input named 'y'"));
    anvil_tune_report_free(r);
    assert_int_equal(anvil_tune_model(f->m, &o, 0, NULL, NULL, &r), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "missing"));
    anvil_tune_report_free(r);
    /* a session with no database: the tune has nowhere to write */
    anvil_options *none;
    assert_int_equal(anvil_options_create(&none), ANVIL_OK);
    assert_int_equal(anvil_options_set_tuning_db(none, ""), ANVIL_OK);
    o.session = none;
    assert_int_equal(anvil_tune_model(f->m, &o, 1, names, ins, &r), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "no tuning database"));
    anvil_tune_report_free(r);
    anvil_options_free(none);
    o.session = f->opts;
    o.runs = -1;
    assert_int_equal(anvil_tune_model(f->m, &o, 1, names, ins, &r), ANVIL_ERR_INVALID_ARGUMENT);
    assert_null(r);
    assert_int_equal(anvil_tune_report_summary(NULL, NULL), ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_tune_report_count(NULL), 0);
    assert_null(anvil_tune_report_text(NULL, 0));
    assert_null(anvil_tune_report_json(NULL));
    anvil_tune_report_free(NULL);
}

int main(void) {
    const char *src = getenv("ANVIL_SOURCE_DIR");
    snprintf(model_path, sizeof model_path, "%s/tests/unit/data/api_small.onnx", src ? src : ".");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tune_and_rerun),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
