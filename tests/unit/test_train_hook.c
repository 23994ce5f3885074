/* The gradient hook of src/train/ (train.h, train_grad_hook): the seam where data parallelism
 * plugs its allreduce in. On the committed model tests/unit/data/api_small.onnx (z = Relu(x + b))
 * with the "dot" loss, whose gradient of b is known exactly (the labels summed over the rows where
 * x + b > 0): the hook is called once per update, with every gradient complete and before any
 * parameter moves; what it writes is what the optimizer applies; its error fails the step and
 * leaves the parameters as they were. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/api.h"
#include "train/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char model_path[4096];

static const float b0[4] = {1.0f, -1.0f, 0.5f, -0.5f}; /* the model's b */

/* What the hook saw, and what it does: scales the gradients, then returns `ret`. */
typedef struct hook_log {
    train_session *ts;
    int calls, n;
    size_t numel;
    float grads[4];  /* the gradients it was given, at its last call */
    float params[4]; /* the parameters during its last call */
    float scale;
    anvil_status ret;
} hook_log;

static anvil_status hook(void *arg, int n, float *const *grads, const size_t *numel) {
    hook_log *h = arg;
    h->calls++;
    h->n = n;
    h->numel = n > 0 ? numel[0] : 0;
    if (n == 1 && numel[0] == 4) {
        memcpy(h->grads, grads[0], sizeof h->grads);
        memcpy(h->params, train_param_data(h->ts, 0, NULL), sizeof h->params);
    }
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < numel[i]; k++) grads[i][k] *= h->scale;
    return h->ret;
}

typedef struct fixture {
    anvil_model *m;
    train_session *ts;
    float x[12], g[12];
    anvil_tensor *xt, *gt;
    hook_log log;
} fixture;

static void setup(fixture *f, anvil_optimizer opt, float momentum, int accumulate) {
    memset(f, 0, sizeof *f);
    assert_int_equal(anvil_model_load(model_path, &f->m), ANVIL_OK);
    train_config c = {.grad_hook = hook, .grad_hook_arg = &f->log};
    anvil_train_config_default(&c.opt);
    c.opt.loss = ANVIL_LOSS_DOT;
    c.opt.output = "z";
    c.opt.threads = 1;
    c.opt.optimizer = opt;
    c.opt.lr = 0.1f;
    c.opt.momentum = momentum;
    c.opt.accumulate = accumulate;
    assert_int_equal(train_session_create(api_model_graph(f->m), &c, &f->ts), ANVIL_OK);
    f->log.ts = f->ts;
    f->log.scale = 1.0f;
    f->log.ret = ANVIL_OK;
    for (int i = 0; i < 12; i++) {
        f->x[i] = (float)(i % 5) - 2.0f;
        f->g[i] = 0.5f + (float)i;
    }
    const int64_t dims[2] = {3, 4};
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, f->x, &f->xt), ANVIL_OK);
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, f->g, &f->gt), ANVIL_OK);
}

static void teardown(fixture *f) {
    anvil_tensor_free(f->xt);
    anvil_tensor_free(f->gt);
    train_session_free(f->ts);
    anvil_model_free(f->m);
}

static anvil_status step(fixture *f, train_mode mode) {
    const char *names[1] = {"x"};
    const anvil_tensor *ins[1] = {f->xt};
    float loss;
    return train_run(f->ts, mode, 1, names, ins, f->gt, &loss, NULL);
}

/* The gradient of b at parameters b. */
static void want_grads(const fixture *f, const float *b, float *out) {
    for (int j = 0; j < 4; j++) {
        out[j] = 0.0f;
        for (int r = 0; r < 3; r++)
            if (f->x[r * 4 + j] + b[j] > 0) out[j] += f->g[r * 4 + j];
    }
}

static void test_hook_sees_whole_gradients(void **state) {
    (void)state;
    fixture f;
    setup(&f, ANVIL_OPTIMIZER_SGD, 0.0f, 1);
    float want[4], b[4];
    memcpy(b, b0, sizeof b);
    for (int s = 1; s <= 3; s++) {
        assert_int_equal(step(&f, TRAIN_STEP), ANVIL_OK);
        assert_int_equal(f.log.calls, s);
        assert_int_equal(f.log.n, 1);
        assert_int_equal(f.log.numel, 4);
        want_grads(&f, b, want);
        const float *p = train_param_data(f.ts, 0, NULL);
        for (int j = 0; j < 4; j++) {
            assert_float_equal(f.log.grads[j], want[j], 1e-5);
            assert_float_equal(f.log.params[j], b[j], 0); /* not updated yet */
            b[j] -= 0.1f * want[j];
            assert_float_equal(p[j], b[j], 1e-5);
        }
        assert_int_equal(train_updates(f.ts), s);
    }
    /* neither evaluation nor gradients alone update, so neither calls it */
    assert_int_equal(step(&f, TRAIN_EVAL), ANVIL_OK);
    assert_int_equal(step(&f, TRAIN_GRADIENTS), ANVIL_OK);
    assert_int_equal(f.log.calls, 3);
    teardown(&f);
}

/* Gradients scaled by 0 leave the parameters where they were (SGD with momentum: the buffer
 * stays 0 as well), every update. */
static void test_hook_zeroes_gradients(void **state) {
    (void)state;
    fixture f;
    setup(&f, ANVIL_OPTIMIZER_SGD, 0.9f, 1);
    f.log.scale = 0.0f;
    for (int s = 1; s <= 3; s++) assert_int_equal(step(&f, TRAIN_STEP), ANVIL_OK);
    assert_int_equal(f.log.calls, 3);
    assert_int_equal(train_updates(f.ts), 3);
    const float *p = train_param_data(f.ts, 0, NULL);
    for (int j = 0; j < 4; j++) assert_float_equal(p[j], b0[j], 0);
    teardown(&f);
}

/* A hook's error is the step's; nothing moves, and the next step with a good hook updates. */
static void test_hook_error_fails_step(void **state) {
    (void)state;
    fixture f;
    setup(&f, ANVIL_OPTIMIZER_ADAM, 0.0f, 1);
    f.log.ret = ANVIL_ERR_RUNTIME;
    assert_int_equal(step(&f, TRAIN_STEP), ANVIL_ERR_RUNTIME);
    assert_int_equal(f.log.calls, 1);
    assert_int_equal(train_updates(f.ts), 0);
    const float *p = train_param_data(f.ts, 0, NULL);
    for (int j = 0; j < 4; j++) assert_float_equal(p[j], b0[j], 0);
    f.log.ret = ANVIL_OK;
    assert_int_equal(step(&f, TRAIN_STEP), ANVIL_OK);
    assert_int_equal(f.log.calls, 2);
    assert_int_equal(train_updates(f.ts), 1);
    teardown(&f);
}

/* Accumulating two micro-steps: one call per update, with the summed gradients. */
static void test_hook_with_accumulation(void **state) {
    (void)state;
    fixture f;
    setup(&f, ANVIL_OPTIMIZER_SGD, 0.0f, 2);
    float want[4];
    want_grads(&f, b0, want);
    assert_int_equal(step(&f, TRAIN_STEP), ANVIL_OK);
    assert_int_equal(f.log.calls, 0);
    assert_int_equal(step(&f, TRAIN_STEP), ANVIL_OK);
    assert_int_equal(f.log.calls, 1);
    for (int j = 0; j < 4; j++) assert_float_equal(f.log.grads[j], 2.0f * want[j], 1e-5);
    const float *p = train_param_data(f.ts, 0, NULL);
    for (int j = 0; j < 4; j++) assert_float_equal(p[j], b0[j] - 0.2f * want[j], 1e-5);
    assert_int_equal(train_updates(f.ts), 1);
    teardown(&f);
}

int main(void) {
    const char *src = getenv("ANVIL_SOURCE_DIR");
    snprintf(model_path, sizeof model_path, "%s/tests/unit/data/api_small.onnx", src ? src : ".");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hook_sees_whole_gradients),
        cmocka_unit_test(test_hook_zeroes_gradients),
        cmocka_unit_test(test_hook_error_fails_step),
        cmocka_unit_test(test_hook_with_accumulation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
