/* LinearAttention reference kernel: every update rule, GQA/MQA head sharing, per-head and
 * per-key-dim decay, past state and an empty sequence, checked against a double-precision
 * recurrence written here from the spec's formulas (state kept as S[b][h][d][m], the pre-decay
 * form of the gated delta rule); plus bad attributes, ranks, dtypes and shapes, each asserting
 * the status and the message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state % 2001) / 2000.0f - 0.5f;
}

static void fill(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = frand();
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

enum { MAXB = 2, MAXT = 3, MAXH = 4, MAXD = 4 };

typedef struct la_case {
    const char *rule;
    int b, t, hq, hkv, dk, dv;
    int decay_last; /* 0: no decay input */
    int beta_last;  /* 0: no beta input */
    bool past;
    float scale; /* 0: default */
} la_case;

/* Double-precision reference, indices spelled out from the packed [B, T, H*D] layout. With
 * gating and delta together it uses S_t = e*S + beta * k (x) (v - e * S^T k) literally. */
static void reference(const la_case *c, const float *q, const float *k, const float *v,
                      const float *past, const float *decay, const float *beta, double *out,
                      double *state) {
    bool gating = c->decay_last > 0, delta = c->beta_last > 0;
    double scale = c->scale != 0.0f ? c->scale : 1.0 / sqrt((double)c->dk);
    int group = c->hq / c->hkv;
    for (int b = 0; b < c->b; b++)
        for (int h = 0; h < c->hkv; h++) {
            double S[MAXD][MAXD];
            for (int d = 0; d < c->dk; d++)
                for (int m = 0; m < c->dv; m++)
                    S[d][m] = past ? past[((b * c->hkv + h) * c->dk + d) * c->dv + m] : 0.0;
            for (int t = 0; t < c->t; t++) {
                const float *kt = k + (b * c->t + t) * c->hkv * c->dk + h * c->dk;
                const float *vt = v + (b * c->t + t) * c->hkv * c->dv + h * c->dv;
                double e[MAXD], corr[MAXD], bt = 1.0;
                for (int d = 0; d < c->dk; d++) {
                    e[d] = 1.0;
                    if (gating) {
                        int idx = c->decay_last == c->hkv
                                      ? (b * c->t + t) * c->hkv + h
                                      : (b * c->t + t) * c->hkv * c->dk + h * c->dk + d;
                        e[d] = exp((double)decay[idx]);
                    }
                }
                if (delta) bt = beta[(b * c->t + t) * c->beta_last + (c->beta_last == 1 ? 0 : h)];
                for (int m = 0; m < c->dv; m++) {
                    double r = 0.0;
                    for (int d = 0; d < c->dk; d++) r += e[d] * S[d][m] * kt[d];
                    corr[m] = delta ? bt * (vt[m] - r) : vt[m];
                }
                for (int d = 0; d < c->dk; d++)
                    for (int m = 0; m < c->dv; m++) S[d][m] = e[d] * S[d][m] + kt[d] * corr[m];
                for (int j = 0; j < group; j++) {
                    int hq = h * group + j;
                    const float *qt = q + (b * c->t + t) * c->hq * c->dk + hq * c->dk;
                    for (int m = 0; m < c->dv; m++) {
                        double o = 0.0;
                        for (int d = 0; d < c->dk; d++) o += qt[d] * S[d][m];
                        out[(b * c->t + t) * c->hq * c->dv + hq * c->dv + m] = scale * o;
                    }
                }
            }
            for (int d = 0; d < c->dk; d++)
                for (int m = 0; m < c->dv; m++)
                    state[((b * c->hkv + h) * c->dk + d) * c->dv + m] = S[d][m];
        }
}

static void run_case(const la_case *c) {
    float q[MAXB * MAXT * MAXH * MAXD], k[MAXB * MAXT * MAXH * MAXD], v[MAXB * MAXT * MAXH * MAXD];
    float past[MAXB * MAXH * MAXD * MAXD], decay[MAXB * MAXT * MAXH * MAXD],
        beta[MAXB * MAXT * MAXH];
    double want_o[MAXB * MAXT * MAXH * MAXD], want_s[MAXB * MAXH * MAXD * MAXD];
    fill(q, sizeof q / sizeof *q);
    fill(k, sizeof k / sizeof *k);
    fill(v, sizeof v / sizeof *v);
    fill(past, sizeof past / sizeof *past);
    fill(decay, sizeof decay / sizeof *decay);
    for (size_t i = 0; i < sizeof beta / sizeof *beta; i++) beta[i] = frand() + 0.5f;
    reference(c, q, k, v, c->past ? past : NULL, decay, beta, want_o, want_s);

    int n_in = c->beta_last ? 6 : c->decay_last ? 5 : c->past ? 4 : 3;
    optest t;
    optest_begin_opset(&t, IR_OP_LINEARATTENTION, n_in, 2, c->scale != 0.0f ? 4 : 3, 27);
    optest_attr_int(&t, 0, "q_num_heads", c->hq);
    optest_attr_int(&t, 1, "kv_num_heads", c->hkv);
    optest_attr_string(&t, 2, "update_rule", c->rule);
    if (c->scale != 0.0f) optest_attr_float(&t, 3, "scale", c->scale);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){c->b, c->t, c->hq * c->dk}, q, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){c->b, c->t, c->hkv * c->dk}, k, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){c->b, c->t, c->hkv * c->dv}, v, false);
    if (c->past)
        optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->b, c->hkv, c->dk, c->dv}, past,
                     false);
    if (c->decay_last)
        optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){c->b, c->t, c->decay_last}, decay,
                     false);
    if (c->beta_last)
        optest_input(&t, 5, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){c->b, c->t, c->beta_last}, beta,
                     false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 3);
    assert_int_equal(t.out[0].dims[2], c->hq * c->dv);
    assert_int_equal(t.out[1].rank, 4);
    size_t no = (size_t)(c->b * c->t * c->hq * c->dv), ns = (size_t)(c->b * c->hkv * c->dk * c->dv);
    float wo[MAXB * MAXT * MAXH * MAXD], ws[MAXB * MAXH * MAXD * MAXD];
    for (size_t i = 0; i < no; i++) wo[i] = (float)want_o[i];
    for (size_t i = 0; i < ns; i++) ws[i] = (float)want_s[i];
    assert_int_equal(optest_compare_f32(t.out[0].data, wo, no, 1e-4f, 1e-5f), -1);
    assert_int_equal(optest_compare_f32(t.out[1].data, ws, ns, 1e-4f, 1e-5f), -1);
    optest_end(&t);
}

static void test_rules(void **state) {
    (void)state;
    const la_case cases[] = {
        {"linear", 2, 3, 2, 2, 3, 2, 0, 0, false, 0.0f},
        {"linear", 1, 1, 2, 2, 2, 3, 0, 0, true, 0.7f},
        {"gated", 2, 3, 2, 2, 3, 2, 6, 0, true, 0.0f},  /* per key dim */
        {"gated", 2, 3, 2, 2, 3, 2, 2, 0, false, 0.0f}, /* per head */
        {"delta", 2, 3, 2, 2, 3, 4, 0, 2, true, 0.0f},
        {"gated_delta", 2, 3, 4, 2, 2, 3, 4, 2, true, 0.0f}, /* GQA */
        {"gated_delta", 1, 3, 4, 1, 3, 2, 1, 1, true, 0.5f}, /* MQA, beta [.., 1] */
        {"gated_delta", 2, 0, 2, 2, 3, 2, 2, 2, true, 0.0f}, /* empty sequence: state passes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
}

/* q, k, v [1, 2, 4] (2 heads of 2), except that input `which` (0..2; -1: none) gets dtype dt
 * and shape dims instead. */
typedef struct la_override {
    int which;
    anvil_dtype dt;
    int rank;
    int64_t dims[3];
} la_override;

#define NO_OVERRIDE ((la_override){-1, ANVIL_DTYPE_FLOAT32, 0, {0}})

static void begin_bad(optest *t, int n_in, const char *rule, int64_t hq, int64_t hkv, int opset,
                      la_override o) {
    static const float z[64] = {0};
    optest_begin_opset(t, IR_OP_LINEARATTENTION, n_in, 2, 3, opset);
    optest_attr_int(t, 0, "q_num_heads", hq);
    optest_attr_int(t, 1, "kv_num_heads", hkv);
    optest_attr_string(t, 2, "update_rule", rule);
    for (int i = 0; i < 3; i++) {
        if (i == o.which)
            optest_input(t, i, o.dt, o.rank, o.dims, z, false);
        else
            optest_input(t, i, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 4}, z, false);
    }
}

static void test_bad_inputs(void **state) {
    (void)state;
    static const float z[64] = {0};
    optest t;
    begin_bad(&t, 3, "linear", 2, 2, 26, NO_OVERRIDE);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 27");
    optest_end(&t);
    begin_bad(&t, 3, "linear", 3, 2, 27, NO_OVERRIDE);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "positive multiple");
    optest_end(&t);
    begin_bad(&t, 3, "softmax", 2, 2, 27, NO_OVERRIDE);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "update_rule 'softmax'");
    optest_end(&t);
    begin_bad(&t, 3, "gated", 2, 2, 27, NO_OVERRIDE);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "requires the decay");
    optest_end(&t);
    begin_bad(&t, 5, "linear", 2, 2, 27, NO_OVERRIDE);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 2}, z, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "forbids the decay");
    optest_end(&t);
    begin_bad(&t, 3, "linear", 2, 2, 27, (la_override){1, ANVIL_DTYPE_FLOAT32, 2, {2, 4}});
    expect_status(&t, ANVIL_ERR_SHAPE, "key (input 1) has rank 2");
    optest_end(&t);
    begin_bad(&t, 3, "linear", 2, 2, 27, (la_override){2, ANVIL_DTYPE_INT32, 3, {1, 2, 4}});
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "value (input 2) has dtype INT32");
    optest_end(&t);
    begin_bad(&t, 3, "linear", 2, 2, 27, (la_override){1, ANVIL_DTYPE_FLOAT32, 3, {1, 2, 6}});
    expect_status(&t, ANVIL_ERR_SHAPE, "key (input 1) dim 2 is 6 but must be 4");
    optest_end(&t);
    begin_bad(&t, 3, "linear", 4, 4, 27, (la_override){0, ANVIL_DTYPE_FLOAT32, 3, {1, 2, 6}});
    expect_status(&t, ANVIL_ERR_SHAPE, "not divisible by q_num_heads");
    optest_end(&t);
    begin_bad(&t, 4, "linear", 2, 2, 27, NO_OVERRIDE);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 3}, z, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "past_state (input 3) dim 3 is 3 but must be 2");
    optest_end(&t);
    begin_bad(&t, 6, "delta", 2, 2, 27, NO_OVERRIDE);
    optest_input(&t, 5, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, z, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "beta's last dim is 3");
    optest_end(&t);
    begin_bad(&t, 5, "gated", 2, 2, 27, NO_OVERRIDE);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, z, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "decay's last dim is 3");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
