/* RotaryEmbedding and Attention reference kernels: rotations checked against cos/sin computed
 * here (split and interleaved halves, partial rotation, 3-D input with num_heads, position_ids),
 * attention against a softmax loop written here (causal mask with a KV cache, boolean and additive
 * masks, grouped-query heads equal to repeated key/value heads, 3-D inputs equal to 4-D ones), and
 * the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;

static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state % 2001) / 1000.0f - 1.0f;
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

/* ---- RotaryEmbedding ------------------------------------------------------------------------- */

/* X is B x NH x S x HS (4-D); rotates the first `rot` elements of each head. */
static void check_rope(bool interleaved, int64_t rot_attr) {
    enum { B = 2, NH = 2, S = 3, HS = 6, MAXP = 5 };
    int64_t rot = rot_attr ? rot_attr : HS, half = rot / 2;
    float x[B * NH * S * HS], cs[MAXP * HS / 2], sn[MAXP * HS / 2];
    fill(x, sizeof x / sizeof x[0]);
    for (int p = 0; p < MAXP; p++)
        for (int e = 0; e < half; e++) {
            cs[p * half + e] = cosf(0.3f * (float)(p * (e + 1)));
            sn[p * half + e] = sinf(0.3f * (float)(p * (e + 1)));
        }
    const int64_t pos[B * S] = {0, 1, 2, 4, 3, 0};
    optest t;
    optest_begin_opset(&t, IR_OP_ROTARYEMBEDDING, 4, 1, 2, 23);
    optest_attr_int(&t, 0, "interleaved", interleaved);
    optest_attr_int(&t, 1, "rotary_embedding_dim", rot_attr);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){B, NH, S, HS}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){MAXP, half}, cs, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){MAXP, half}, sn, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT64, 2, (int64_t[]){B, S}, pos, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float *y = t.out[0].data;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int s = 0; s < S; s++) {
                const float *xv = x + ((b * NH + h) * S + s) * HS;
                const float *yv = y + ((b * NH + h) * S + s) * HS;
                int64_t p = pos[b * S + s];
                for (int64_t e = 0; e < half; e++) {
                    int64_t i1 = interleaved ? 2 * e : e, i2 = interleaved ? 2 * e + 1 : e + half;
                    float c = cs[p * half + e], si = sn[p * half + e];
                    assert_true(fabsf(yv[i1] - (c * xv[i1] - si * xv[i2])) < 1e-6f);
                    assert_true(fabsf(yv[i2] - (si * xv[i1] + c * xv[i2])) < 1e-6f);
                }
                for (int64_t e = rot; e < HS; e++) assert_true(yv[e] == xv[e]);
            }
    optest_end(&t);
}

static void test_rope(void **state) {
    (void)state;
    check_rope(false, 0);
    check_rope(true, 0);
    check_rope(false, 4);
    check_rope(true, 2);
}

static void test_rope_errors(void **state) {
    (void)state;
    static float buf[256];
    const int64_t pos[2] = {0, 9};
    optest t;
    /* 3-D input without num_heads */
    optest_begin_opset(&t, IR_OP_ROTARYEMBEDDING, 3, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 8}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 4}, buf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 4}, buf, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "num_heads");
    optest_end(&t);
    /* cache of the wrong width */
    optest_begin_opset(&t, IR_OP_ROTARYEMBEDDING, 3, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 8}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, buf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "cos_cache");
    optest_end(&t);
    /* odd rotary_embedding_dim */
    optest_begin_opset(&t, IR_OP_ROTARYEMBEDDING, 3, 1, 1, 23);
    optest_attr_int(&t, 0, "rotary_embedding_dim", 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 8}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 4}, buf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 4}, buf, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "rotary_embedding_dim");
    optest_end(&t);
    /* position id beyond the caches */
    optest_begin_opset(&t, IR_OP_ROTARYEMBEDDING, 4, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 8}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 4}, buf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 4}, buf, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT64, 2, (int64_t[]){1, 2}, pos, false);
    expect_status(&t, ANVIL_ERR_RUNTIME, "position_ids[0, 1] is 9");
    optest_end(&t);
    /* the op does not exist before opset 23 */
    optest_begin_opset(&t, IR_OP_ROTARYEMBEDDING, 3, 1, 0, 22);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 8}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 4}, buf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 4}, buf, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 22");
    optest_end(&t);
}

/* ---- Attention ------------------------------------------------------------------------------ */

enum { AB = 2, AH = 2, AS = 3, AP = 2, AT = AS + AP, AD = 4, ADV = 3 };

/* softmax(q k^T * scale + bias) v for one query row over T keys (k: T x AD, v: T x ADV). */
static void ref_row(const float *q, const float *k, const float *v, const double *bias, int T,
                    double scale, double *y) {
    double s[AT], mx = -INFINITY, sum = 0;
    for (int t = 0; t < T; t++) {
        double d = 0;
        for (int e = 0; e < AD; e++) d += (double)q[e] * k[t * AD + e];
        s[t] = d * scale + bias[t];
        if (s[t] > mx) mx = s[t];
    }
    for (int t = 0; t < T; t++) {
        s[t] = exp(s[t] - mx);
        sum += s[t];
    }
    for (int e = 0; e < ADV; e++) {
        double acc = 0;
        for (int t = 0; t < T; t++) acc += s[t] / sum * v[t * ADV + e];
        y[e] = acc;
    }
}

/* Causal attention with a KV cache and a boolean mask, checked row by row. */
static void test_attention_cache_causal_mask(void **state) {
    (void)state;
    float q[AB * AH * AS * AD], k[AB * AH * AS * AD], v[AB * AH * AS * ADV];
    float pk[AB * AH * AP * AD], pv[AB * AH * AP * ADV];
    fill(q, sizeof q / sizeof q[0]);
    fill(k, sizeof k / sizeof k[0]);
    fill(v, sizeof v / sizeof v[0]);
    fill(pk, sizeof pk / sizeof pk[0]);
    fill(pv, sizeof pv / sizeof pv[0]);
    /* mask (Sq x T): key 0 hidden from query 1 */
    bool mask[AS * AT];
    for (int i = 0; i < AS * AT; i++) mask[i] = true;
    mask[1 * AT + 0] = false;
    optest t;
    optest_begin_opset(&t, IR_OP_ATTENTION, 6, 3, 1, 23);
    optest_attr_int(&t, 0, "is_causal", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){AB, AH, AS, AD}, q, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){AB, AH, AS, AD}, k, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){AB, AH, AS, ADV}, v, false);
    optest_input(&t, 3, ANVIL_DTYPE_BOOL, 2, (int64_t[]){AS, AT}, mask, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){AB, AH, AP, AD}, pk, false);
    optest_input(&t, 5, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){AB, AH, AP, ADV}, pv, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[1].dims[2], AT);
    const float *y = t.out[0].data, *presk = t.out[1].data;
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++) {
            float kc[AT * AD], vc[AT * ADV];
            for (int r = 0; r < AT; r++) {
                for (int e = 0; e < AD; e++)
                    kc[r * AD + e] = r < AP ? pk[((b * AH + h) * AP + r) * AD + e]
                                            : k[((b * AH + h) * AS + r - AP) * AD + e];
                for (int e = 0; e < ADV; e++)
                    vc[r * ADV + e] = r < AP ? pv[((b * AH + h) * AP + r) * ADV + e]
                                             : v[((b * AH + h) * AS + r - AP) * ADV + e];
            }
            for (int e = 0; e < AT * AD; e++)
                assert_true(presk[(b * AH + h) * AT * AD + e] == kc[e]);
            for (int i = 0; i < AS; i++) {
                double bias[AT], want[ADV];
                for (int r = 0; r < AT; r++)
                    bias[r] = (!mask[i * AT + r] || r > i + AP) ? -INFINITY : 0.0;
                ref_row(q + ((b * AH + h) * AS + i) * AD, kc, vc, bias, AT, 1.0 / sqrt(AD), want);
                for (int e = 0; e < ADV; e++)
                    assert_true(fabs(y[((b * AH + h) * AS + i) * ADV + e] - want[e]) < 1e-5);
            }
        }
    optest_end(&t);
}

/* Grouped-query heads equal the same run with key/value heads repeated; 3-D inputs equal 4-D. */
static void test_attention_gqa_and_3d(void **state) {
    (void)state;
    enum { HQ = 4, HK = 2, S = 3, D = 2 };
    float q[HQ * S * D], k[HK * S * D], v[HK * S * D], kr[HQ * S * D], vr[HQ * S * D];
    fill(q, sizeof q / sizeof q[0]);
    fill(k, sizeof k / sizeof k[0]);
    fill(v, sizeof v / sizeof v[0]);
    for (int h = 0; h < HQ; h++)
        for (int e = 0; e < S * D; e++) {
            kr[h * S * D + e] = k[(h / 2) * S * D + e];
            vr[h * S * D + e] = v[(h / 2) * S * D + e];
        }
    optest g, m, t3;
    optest_begin_opset(&g, IR_OP_ATTENTION, 3, 1, 0, 23);
    optest_input(&g, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, HQ, S, D}, q, false);
    optest_input(&g, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, HK, S, D}, k, false);
    optest_input(&g, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, HK, S, D}, v, false);
    assert_int_equal(optest_run(&g), ANVIL_OK);
    optest_begin_opset(&m, IR_OP_ATTENTION, 3, 1, 0, 23);
    optest_input(&m, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, HQ, S, D}, q, false);
    optest_input(&m, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, HQ, S, D}, kr, false);
    optest_input(&m, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, HQ, S, D}, vr, false);
    assert_int_equal(optest_run(&m), ANVIL_OK);
    assert_memory_equal(g.out[0].data, m.out[0].data, sizeof q);
    /* the same problem as 3-D tensors: B x S x (heads * D) */
    float q3[S * HQ * D], k3[S * HK * D], v3[S * HK * D];
    for (int s = 0; s < S; s++)
        for (int e = 0; e < D; e++) {
            for (int h = 0; h < HQ; h++) q3[(s * HQ + h) * D + e] = q[(h * S + s) * D + e];
            for (int h = 0; h < HK; h++) {
                k3[(s * HK + h) * D + e] = k[(h * S + s) * D + e];
                v3[(s * HK + h) * D + e] = v[(h * S + s) * D + e];
            }
        }
    optest_begin_opset(&t3, IR_OP_ATTENTION, 3, 1, 2, 23);
    optest_attr_int(&t3, 0, "q_num_heads", HQ);
    optest_attr_int(&t3, 1, "kv_num_heads", HK);
    optest_input(&t3, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, S, HQ * D}, q3, false);
    optest_input(&t3, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, S, HK * D}, k3, false);
    optest_input(&t3, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, S, HK * D}, v3, false);
    assert_int_equal(optest_run(&t3), ANVIL_OK);
    const float *y4 = g.out[0].data, *y3 = t3.out[0].data;
    for (int s = 0; s < S; s++)
        for (int h = 0; h < HQ; h++)
            for (int e = 0; e < D; e++)
                assert_true(y3[(s * HQ + h) * D + e] == y4[(h * S + s) * D + e]);
    optest_end(&g);
    optest_end(&m);
    optest_end(&t3);
}

static void test_attention_errors(void **state) {
    (void)state;
    static float buf[512];
    optest t;
    /* query heads not a multiple of key heads */
    optest_begin_opset(&t, IR_OP_ATTENTION, 3, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 2, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "multiple");
    optest_end(&t);
    /* 3-D without head counts */
    optest_begin_opset(&t, IR_OP_ATTENTION, 3, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 8}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 8}, buf, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 8}, buf, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "q_num_heads");
    optest_end(&t);
    /* mask that does not broadcast */
    optest_begin_opset(&t, IR_OP_ATTENTION, 4, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, buf, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "attn_mask");
    optest_end(&t);
    /* past_value with a different past length than past_key */
    optest_begin_opset(&t, IR_OP_ATTENTION, 6, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 3, 4}, buf, false);
    optest_input(&t, 5, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 1, 4}, buf, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "past_value");
    optest_end(&t);
    /* past_key without past_value */
    optest_begin_opset(&t, IR_OP_ATTENTION, 5, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 3, 4}, buf, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "together");
    optest_end(&t);
    /* bad qk_matmul_output_mode and integer inputs */
    optest_begin_opset(&t, IR_OP_ATTENTION, 3, 1, 1, 23);
    optest_attr_int(&t, 0, "qk_matmul_output_mode", 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "qk_matmul_output_mode");
    optest_end(&t);
    static int32_t ibuf[64];
    optest_begin_opset(&t, IR_OP_ATTENTION, 3, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 4, (int64_t[]){1, 2, 2, 4}, ibuf, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 4, (int64_t[]){1, 2, 2, 4}, ibuf, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 4, (int64_t[]){1, 2, 2, 4}, ibuf, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
    /* nonpad_kv_seqlen at opset 23 */
    const int64_t lens[1] = {1};
    optest_begin_opset(&t, IR_OP_ATTENTION, 7, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 4}, buf, false);
    optest_input(&t, 6, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, lens, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "nonpad_kv_seqlen");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_errors),
        cmocka_unit_test(test_attention_cache_causal_mask),
        cmocka_unit_test(test_attention_gqa_and_3d),
        cmocka_unit_test(test_attention_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
