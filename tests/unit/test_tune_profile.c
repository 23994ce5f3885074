/* The tuner's candidates (src/tune/candidates.c), profiler (profile.c) and database lookup
 * (select.c) on a real MatMul node: the cascade is always a candidate and the reference never
 * competes; a variant made slow on purpose always loses; a variant that returns wrong numbers
 * never wins however fast it is; parameter texts round-trip and bad ones are refused; a record
 * is found by exact key, then by nearest shape, and a record naming a variant this build lacks
 * is ignored. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "optest.h"
#include "tune/tune.h"

#include "test_tmpdir.h"

/* A MatMul A[m,96] (input) x B[96,80] (constant), as the plan would see it. */
typedef struct mm_case {
    optest t;
    float *a, *b;
    op_tinfo in[OPTEST_MAX_IO];
    kern_node kn;
} mm_case;

static void mm_build(mm_case *c, int64_t m, int threads) {
    memset(c, 0, sizeof *c);
    c->a = optest_random_f32((size_t)m * 96, 1, -1, 1);
    c->b = optest_random_f32(96 * 80, 2, -1, 1);
    optest_begin(&c->t, IR_OP_MATMUL, 2, 1, 0);
    optest_input(&c->t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){m, 96}, c->a, false);
    optest_input(&c->t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){96, 80}, c->b, true);
    assert_int_equal(optest_infer(&c->t), ANVIL_OK);
    optest_input_info(&c->t, c->in);
    c->kn = (kern_node){optest_node(&c->t), c->in, 2, c->t.out_info, 1, threads, NULL, NULL, NULL};
}

static void mm_free(mm_case *c) {
    optest_end(&c->t);
    free(c->a);
    free(c->b);
}

static core_pool *pool2(void) {
    core_pool *p;
    assert_int_equal(core_pool_create(2, &p), ANVIL_OK);
    return p;
}

static void test_candidates(void **state) {
    (void)state;
    mm_case c;
    mm_build(&c, 64, 2);
    tune_candidate *cands;
    int n;
    tune_space_stats st;
    assert_int_equal(tune_candidates(&c.kn, 2, &cands, &n, &st), ANVIL_OK);
    assert_true(n > 1);
    assert_int_equal(st.kept, n);
    assert_true(st.raw >= n - 1); /* the cascade may be added past the rules */
    int cascades = 0;
    bool one = false, two = false;
    for (int i = 0; i < n; i++) {
        cascades += cands[i].cascade;
        assert_ptr_not_equal(cands[i].v, kern_reference(IR_OP_MATMUL));
        assert_true(kern_applies(cands[i].v, &c.kn, core_hw_get()));
        one |= cands[i].threads == 1;
        two |= cands[i].threads == 2;
    }
    assert_int_equal(cascades, 1);
    assert_true(one && two);
    free(cands);
    mm_free(&c);
}

static void test_profile_real(void **state) {
    (void)state;
    mm_case c;
    mm_build(&c, 64, 2);
    tune_candidate *cands;
    int n, w;
    assert_int_equal(tune_candidates(&c.kn, 2, &cands, &n, NULL), ANVIL_OK);
    core_pool *p = pool2();
    tune_profile_opts o = {.pool = p, .max_seconds = 2};
    assert_int_equal(tune_profile(&c.kn, cands, n, &o, &w), ANVIL_OK);
    assert_true(w >= 0 && w < n);
    assert_int_equal(cands[w].state, TUNE_CAND_ALIVE);
    assert_true(cands[w].reps > 0 && cands[w].median_ns > 0);
    for (int i = 0; i < n; i++) {
        if (cands[i].state != TUNE_CAND_ALIVE) continue;
        assert_true(cands[i].max_err <= 1e-3);
        if (cands[i].reps) assert_true(cands[w].median_ns <= cands[i].median_ns * 1.0101);
    }
    free(cands);
    core_pool_free(p);
    mm_free(&c);
}

/* ---- variants made for the test ------------------------------------------------------------ */

static anvil_status ref_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    const kern_variant *r = kern_reference(IR_OP_MATMUL);
    return r->run(n, NULL, in, n_in, out, n_out, NULL, ctx);
}

/* The right numbers, 20 ms late (far past any scheduling delay). */
static anvil_status slow_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)state;
    (void)ws;
    uint64_t until = core_now_ns() + 20000000;
    anvil_status s = ref_run(n, in, n_in, out, n_out, ctx);
    while (core_now_ns() < until) {
    }
    return s;
}

/* Zeros at once: faster than anything, and wrong. */
static anvil_status wrong_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n, (void)state, (void)in, (void)n_in, (void)n_out, (void)ws, (void)ctx;
    memset(out[0]->data, 0, op_tensor_numel(out[0]) * sizeof(float));
    return ANVIL_OK;
}

/* Right except one element slightly off: still past the tolerance. */
static anvil_status off_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)state, (void)ws;
    anvil_status s = ref_run(n, in, n_in, out, n_out, ctx);
    ((float *)out[0]->data)[7] += 0.05f;
    return s;
}

static anvil_status fail_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n, (void)state, (void)in, (void)n_in, (void)out, (void)n_out, (void)ws, (void)ctx;
    return core_err(ANVIL_ERR_INTERNAL, "made to fail");
}

static const kern_variant v_slow = {.name = "test_slow", .op = IR_OP_MATMUL, .run = slow_run};
static const kern_variant v_wrong = {.name = "test_wrong", .op = IR_OP_MATMUL, .run = wrong_run};
static const kern_variant v_off = {.name = "test_off", .op = IR_OP_MATMUL, .run = off_run};
static const kern_variant v_fail = {.name = "test_fail", .op = IR_OP_MATMUL, .run = fail_run};

static void test_slow_and_wrong_never_win(void **state) {
    (void)state;
    mm_case c;
    mm_build(&c, 64, 2);
    const kern_variant *cascade;
    assert_int_equal(kern_select(&c.kn, NULL, &cascade), ANVIL_OK);
    core_pool *p = pool2();
    for (int trial = 0; trial < 3; trial++) {
        tune_candidate cands[5] = {
            {.v = &v_slow, .threads = 2},
            {.v = &v_wrong, .threads = 2},
            /* one thread: on a machine running other tests, a 2-thread run can wait a
             * scheduler tick (4 ms) for a preempted worker, which no test should depend on */
            {.v = cascade, .threads = 1, .cascade = true},
            {.v = &v_off, .threads = 1},
            {.v = &v_fail, .threads = 2},
        };
        int w;
        tune_profile_opts o = {.pool = p, .max_seconds = 2};
        assert_int_equal(tune_profile(&c.kn, cands, 5, &o, &w), ANVIL_OK);
        assert_int_equal(w, 2);
        assert_int_equal(cands[1].state, TUNE_CAND_WRONG);
        assert_int_equal(cands[3].state, TUNE_CAND_WRONG);
        assert_true(cands[3].max_err > 1e-3);
        assert_int_equal(cands[4].state, TUNE_CAND_FAILED);
        assert_int_equal(cands[0].state, TUNE_CAND_SLOW);
        assert_true(cands[0].median_ns >= 20e6);
    }
    core_pool_free(p);
    mm_free(&c);
}

/* ---- the nested search ------------------------------------------------------------------- */

/* One nested search over a 3x3 convolution's candidates; returns how many non-default
 * configurations were timed and checks that each one's variant survived the defaults round. */
static int search_conv(double prune_factor, int *timed, int *n_out) {
    optest t;
    float *x = optest_random_f32(32 * 20 * 20, 3, -1, 1),
          *w = optest_random_f32(32 * 32 * 9, 4, -1, 1);
    optest_begin(&t, IR_OP_CONV, 2, 1, 2);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(&t, 1, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 32, 20, 20}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){32, 32, 3, 3}, w, true);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    kern_node kn = {optest_node(&t), in, 2, t.out_info, 1, 2, NULL, NULL, NULL};
    tune_candidate *c;
    int n, win;
    assert_int_equal(tune_candidates(&kn, 2, &c, &n, NULL), ANVIL_OK);
    core_pool *p = pool2();
    /* no time limit that a slow (sanitized, shared) machine could reach before the search ends */
    tune_profile_opts o = {.pool = p,
                           .max_seconds = 600,
                           .max_reps = 8,
                           .target_rse = 0.5,
                           .prune_factor = prune_factor};
    assert_int_equal(tune_search(&kn, c, n, &o, &win), ANVIL_OK);
    assert_true(win >= 0);
    assert_int_equal(c[win].state, TUNE_CAND_ALIVE);
    assert_true(c[win].max_err <= 1e-3);
    int spaces = 0;
    *timed = 0;
    for (int i = 0; i < n; i++) {
        *timed += c[i].state != TUNE_CAND_UNTIMED;
        if (kern_config_is_default(&c[i].cfg) || c[i].state == TUNE_CAND_UNTIMED) continue;
        /* a non-default configuration was timed: its variant survived the defaults round */
        bool parent_survived = false;
        for (int j = 0; j < n; j++)
            parent_survived |= c[j].v == c[i].v && c[j].threads == c[i].threads &&
                               kern_config_is_default(&c[j].cfg) && c[j].stage >= 1 &&
                               !(c[j].stage == 1 && c[j].state == TUNE_CAND_SLOW);
        assert_true(parent_survived);
        assert_true(c[i].stage >= 2);
        spaces++;
    }
    *n_out = n;
    free(c);
    core_pool_free(p);
    optest_end(&t);
    free(x);
    free(w);
    return spaces;
}

/* The nested search on a convolution whose GEMM-based variants have a register tile and KC to
 * tune: it settles each surviving algorithm's parameters before the algorithms are compared at
 * their best, and never times the parameters of an algorithm that lost at its defaults. Which
 * algorithms lose depends on the machine, so the first search prunes nothing (every variant
 * with a space must then have its parameters tuned) and the second prunes as tune does (whatever
 * it tunes must have survived). */
static void test_search_nested(void **state) {
    (void)state;
    int timed, n;
    assert_true(search_conv(1e9, &timed, &n) > 0); /* some parameters were tuned */
    assert_true(timed < n);                        /* and not the whole space */
    search_conv(0, &timed, &n);                    /* 0: tune's default prune factor */
    assert_true(timed < n);
}

/* ---- parameter text ------------------------------------------------------------------------ */

static void test_params_text(void **state) {
    (void)state;
    mm_case c;
    mm_build(&c, 64, 2);
    tune_candidate *cands;
    int n;
    assert_int_equal(tune_candidates(&c.kn, 2, &cands, &n, NULL), ANVIL_OK);
    for (int i = 0; i < n; i++) {
        char text[TUNE_PARAMS_MAX];
        tune_params_format(cands[i].v, &cands[i].cfg, cands[i].threads, text, sizeof text);
        kern_config back;
        int threads;
        assert_int_equal(tune_params_parse(cands[i].v, text, &back, &threads), ANVIL_OK);
        assert_memory_equal(&back, &cands[i].cfg, sizeof back);
        assert_int_equal(threads, cands[i].threads);
    }
    kern_config cfg;
    int threads;
    const char *bad[] = {"bogus=3", "threads", "threads=x", "threads=0", "threads=2;", "=4"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        anvil_status s = tune_params_parse(cands[0].v, bad[i], &cfg, &threads);
        if (!strcmp(bad[i], "threads=2;")) {
            assert_int_equal(s, ANVIL_OK); /* a trailing separator is harmless */
            continue;
        }
        assert_int_equal(s, ANVIL_ERR_INVALID_ARGUMENT);
    }
    assert_int_equal(tune_params_parse(cands[0].v, "", &cfg, &threads), ANVIL_OK);
    assert_int_equal(threads, 0);
    free(cands);
    mm_free(&c);
}

/* ---- lookup -------------------------------------------------------------------------------- */

static void put(tune_db *db, const kern_node *kn, const char *fp, const char *variant,
                const char *params) {
    tune_problem pr;
    assert_int_equal(tune_problem_of(kn, &pr), ANVIL_OK);
    tune_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.key, sizeof r.key, "%s", pr.key);
    snprintf(r.family, sizeof r.family, "%s", pr.family);
    snprintf(r.fingerprint, sizeof r.fingerprint, "%s", fp);
    r.n_dims = pr.n_dims;
    memcpy(r.dims, pr.dims, sizeof r.dims);
    snprintf(r.variant, sizeof r.variant, "%s", variant);
    snprintf(r.params, sizeof r.params, "%s", params);
    r.median_ns = 1000;
    snprintf(r.source, sizeof r.source, "offline");
    assert_int_equal(tune_db_put(db, &r), ANVIL_OK);
}

static void test_lookup(void **state) {
    (void)state;
    char fp[TUNE_FINGERPRINT_MAX];
    assert_int_equal(tune_fingerprint(fp, sizeof fp), ANVIL_OK);
    tune_db *db;
    assert_int_equal(tune_db_open(tmp_path("lookup.db"), &db), ANVIL_OK);
    mm_case c, other;
    mm_build(&c, 64, 2);
    mm_build(&other, 56, 2);
    tune_choice ch;
    bool found;
    assert_int_equal(tune_lookup(db, fp, &c.kn, &ch, &found), ANVIL_OK);
    assert_false(found);

    /* A variant other than the cascade's, on one thread. */
    const kern_variant *cascade, *pick = NULL;
    assert_int_equal(kern_select(&c.kn, NULL, &cascade), ANVIL_OK);
    size_t nv;
    const kern_variant *const *vars = kern_variants(IR_OP_MATMUL, &nv);
    for (size_t i = 1; i < nv && !pick; i++)
        if (vars[i] != cascade && kern_applies(vars[i], &c.kn, core_hw_get())) pick = vars[i];
    if (!pick) pick = cascade;
    put(db, &c.kn, fp, pick->name, "threads=1");
    assert_int_equal(tune_lookup(db, fp, &c.kn, &ch, &found), ANVIL_OK);
    assert_true(found);
    assert_ptr_equal(ch.v, pick);
    assert_int_equal(ch.why, TUNE_WHY_DB);
    assert_int_equal(ch.threads, 1);

    /* Another M: the nearest record, on all threads. */
    assert_int_equal(tune_lookup(db, fp, &other.kn, &ch, &found), ANVIL_OK);
    assert_true(found);
    assert_ptr_equal(ch.v, pick);
    assert_int_equal(ch.why, TUNE_WHY_NEAREST);
    assert_int_equal(ch.threads, 0);

    /* Another machine's record is not this one's. */
    assert_int_equal(tune_lookup(db, "another machine", &c.kn, &ch, &found), ANVIL_OK);
    assert_false(found);

    /* A variant this build lacks, or parameters it cannot read: ignored, not an error. */
    put(db, &c.kn, fp, "no_such_variant", "");
    put(db, &other.kn, fp, pick->name, "no_such_param=3");
    assert_int_equal(tune_lookup(db, fp, &c.kn, &ch, &found), ANVIL_OK);
    assert_false(found);
    assert_string_equal(tune_why_name(TUNE_WHY_NEAREST), "nearest");
    tune_db_close(db);
    mm_free(&c);
    mm_free(&other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_profile_real),
        cmocka_unit_test(test_slow_and_wrong_never_win),
        cmocka_unit_test(test_search_nested),
        cmocka_unit_test(test_params_text),
        cmocka_unit_test(test_lookup),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_remove);
}
