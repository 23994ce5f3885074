/* The attention family (src/kernels/cpu/attn) against anvil.Sdpa's reference kernel
 * (src/ops/nn/sdpa.c), and the reference against attention computed the unfused way (scores,
 * softmax, weighted sum, in double). Shapes cover the layouts the attention pass absorbs (heads
 * inside the sequence, as projections write them; heads outside; the output either way),
 * sequence lengths around the kernels' query and key blocks (16/64 queries, 60-120 keys), head
 * sizes around the register tiles, value head sizes unlike the key's, batch and head broadcasting
 * (one k/v head shared by all; grouped k/v heads), float masks per key and per (query, key), bool
 * masks with a fill (also inverted), causal, softcap, one key, and q, k, v read as column ranges
 * of one fused projection. Each check
 * asserts how many variants ran, so a variant that silently stops applying fails the test. */
#include "kernels/cpu/attn/attn.h"
#include "kernels/kernels.h"
#include "ops/sdpa_common.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static const int64_t bhsd[4] = {0, 1, 2, 3}, bshd[4] = {0, 2, 1, 3};

typedef struct problem {
    int64_t b, h, sq, sk, d, dv;
    int64_t kv_heads; /* heads of k and v (1: shared by every head of q) */
    int64_t kd;       /* k's head size when unlike q's (0: d) */
    const int64_t *perm_q, *perm_kv, *perm_o;
    int mask_rank;        /* 0: none */
    int64_t mask_dims[4]; /* right-aligned onto [b, h, sq, sk] */
    int keep_rank;        /* 0: none */
    int64_t keep_dims[4];
    bool causal; /* keep = j <= i (keep_dims must be [.., sq, sk]) */
    float scale, fill;
    bool invert;     /* the bool mask marks what to drop */
    float softcap;   /* 0: none */
    int causal_attr; /* the node's causal attribute: 1 upper-left, 2 lower-right aligned */
} problem;

static void set_dims(int64_t *dst, const int64_t *src, int n) {
    memcpy(dst, src, (size_t)n * sizeof *dst);
}

/* Physical dims of an operand with logical dims l stored with perm. */
static void physical(const int64_t *l, const int64_t *perm, int64_t *p) {
    for (int a = 0; a < 4; a++) p[perm[a]] = l[a];
}

typedef struct built {
    optest t;
    float *q, *k, *v, *mask;
    bool *keep;
} built;

static void build(built *x, const problem *pr) {
    memset(x, 0, sizeof *x);
    const int n_in = pr->keep_rank ? 5 : pr->mask_rank ? 4 : 3;
    optest_begin(&x->t, IR_OP_SDPA, n_in, 1, 9);
    optest_attr_ints(&x->t, 0, "perm_q", pr->perm_q, 4);
    optest_attr_ints(&x->t, 1, "perm_k", pr->perm_kv, 4);
    optest_attr_ints(&x->t, 2, "perm_v", pr->perm_kv, 4);
    optest_attr_ints(&x->t, 3, "perm_o", pr->perm_o, 4);
    optest_attr_float(&x->t, 4, "scale", pr->scale);
    optest_attr_float(&x->t, 5, "fill", pr->fill);
    optest_attr_int(&x->t, 6, "invert", pr->invert);
    optest_attr_float(&x->t, 7, "softcap", pr->softcap);
    optest_attr_int(&x->t, 8, "causal", pr->causal_attr);
    const int64_t lq[4] = {pr->b, pr->h, pr->sq, pr->d},
                  lk[4] = {pr->b, pr->kv_heads, pr->sk, pr->kd ? pr->kd : pr->d};
    const int64_t lv[4] = {pr->b, pr->kv_heads, pr->sk, pr->dv};
    int64_t dq[4], dk[4], dv[4];
    physical(lq, pr->perm_q, dq);
    physical(lk, pr->perm_kv, dk);
    physical(lv, pr->perm_kv, dv);
    x->q = optest_random_f32(optest_prod(dq, 4), 11, -2, 2);
    x->k = optest_random_f32(optest_prod(dk, 4), 12, -2, 2);
    x->v = optest_random_f32(optest_prod(dv, 4), 13, -1, 1);
    optest_input(&x->t, 0, ANVIL_DTYPE_FLOAT32, 4, dq, x->q, false);
    optest_input(&x->t, 1, ANVIL_DTYPE_FLOAT32, 4, dk, x->k, false);
    optest_input(&x->t, 2, ANVIL_DTYPE_FLOAT32, 4, dv, x->v, false);
    if (pr->mask_rank) {
        x->mask = optest_random_f32(optest_prod(pr->mask_dims, pr->mask_rank), 14, -3, 1);
        optest_input(&x->t, 3, ANVIL_DTYPE_FLOAT32, pr->mask_rank, pr->mask_dims, x->mask, false);
    }
    if (pr->keep_rank) {
        const size_t n = optest_prod(pr->keep_dims, pr->keep_rank);
        x->keep = malloc(n);
        const int64_t cols = pr->keep_dims[pr->keep_rank - 1];
        const int64_t rows = pr->keep_rank >= 2 ? pr->keep_dims[pr->keep_rank - 2] : 1;
        for (size_t e = 0; e < n; e++) {
            const int64_t j = (int64_t)e % cols, i = ((int64_t)e / cols) % rows;
            x->keep[e] = pr->causal ? j <= i : (e * 2654435761u) % 5 != 0;
        }
        optest_input(&x->t, 4, ANVIL_DTYPE_BOOL, pr->keep_rank, pr->keep_dims, x->keep, false);
    }
}

static void drop(built *x) {
    optest_end(&x->t);
    free(x->q);
    free(x->k);
    free(x->v);
    free(x->mask);
    free(x->keep);
}

/* The session the checks run in: NULL is fp32 (test_bf16 sets a bf16 one, where sdpa_bf16 joins
 * and the tolerance is bf16's; test_fp16 an fp16 one, where sdpa_fp16 joins at the same). */
static const kern_knobs *session;

static bool have_bf16(void) {
    return kern_isa_ok(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16, core_hw_get());
}

/* sdpa_fp16 applies: the CPU has AVX512-FP16 and the compiler knew it */
static bool have_fp16(void) {
    return kern_isa_ok(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_FP16, core_hw_get()) &&
           attn_isa_avx512fp16.block;
}

static int expected(void) {
    assert_non_null(kern_find(IR_OP_SDPA, "sdpa_avx512"));
    assert_non_null(kern_find(IR_OP_SDPA, "sdpa_avx2"));
    assert_non_null(kern_find(IR_OP_SDPA, "sdpa_bf16"));
    assert_non_null(kern_find(IR_OP_SDPA, "sdpa_fp16"));
    return (optest_have_avx512() ? 1 : 0) + (optest_have_avx2() ? 1 : 0) +
           (session && session->precision == KERN_PREC_BF16 && have_bf16() ? 1 : 0) +
           (session && session->precision == KERN_PREC_FP16 && have_fp16() ? 1 : 0);
}

static void check(const problem *pr, int want) {
    built x;
    build(&x, pr);
    x.t.knobs = session;
    /* bf16: q, k, v and the weights rounded to 8 significant bits; the outputs are averages of
     * v in [-1, 1] */
    const float tol = session ? 1.5e-2f : 2e-5f;
    const int got = optest_check_variants(&x.t, tol, session ? tol : 1e-5f);
    if (got != want)
        fprintf(stderr,
                "b%lld h%lld sq%lld sk%lld d%lld dv%lld mask rank %d keep rank %d%s%s: %d "
                "variants, want %d\n",
                (long long)pr->b, (long long)pr->h, (long long)pr->sq, (long long)pr->sk,
                (long long)pr->d, (long long)pr->dv, pr->mask_rank, pr->keep_rank,
                pr->causal ? " causal" : "", pr->invert ? " inverted" : "", got, want);
    assert_int_equal(got, want);
    drop(&x);
}

static problem base(int64_t sq, int64_t sk, int64_t d) {
    return (problem){.b = 2,
                     .h = 3,
                     .sq = sq,
                     .sk = sk,
                     .d = d,
                     .dv = d,
                     .kv_heads = 3,
                     .perm_q = bshd,
                     .perm_kv = bshd,
                     .perm_o = bshd,
                     .scale = 0.3f,
                     .fill = -3.0e38f};
}

static void test_lengths(void **state) {
    (void)state;
    static const int64_t lens[] = {1, 5, 16, 17, 59, 60, 61, 64, 65, 121, 130};
    for (size_t a = 0; a < sizeof lens / sizeof *lens; a++)
        for (size_t b = 0; b < sizeof lens / sizeof *lens; b += 3) {
            problem p = base(lens[a], lens[b], 16);
            check(&p, expected());
        }
}

static void test_head_sizes(void **state) {
    (void)state;
    static const int64_t ds[] = {1, 5, 6, 7, 12, 32, 64, 80, 128};
    for (size_t a = 0; a < sizeof ds / sizeof *ds; a++) {
        problem p = base(33, 70, ds[a]);
        check(&p, expected());
        p.dv = ds[(a + 3) % (sizeof ds / sizeof *ds)];
        check(&p, expected());
    }
}

static void test_layouts(void **state) {
    (void)state;
    const int64_t *perms[2] = {bhsd, bshd};
    for (int q = 0; q < 2; q++)
        for (int kv = 0; kv < 2; kv++)
            for (int o = 0; o < 2; o++) {
                problem p = base(40, 67, 24);
                p.perm_q = perms[q];
                p.perm_kv = perms[kv];
                p.perm_o = perms[o];
                check(&p, expected());
            }
    /* k and v with their head size outside the last dim: the reference's alone */
    static const int64_t sd_last[4] = {0, 1, 3, 2};
    problem p = base(20, 30, 8);
    p.perm_kv = sd_last;
    check(&p, 0);
}

static void test_masks(void **state) {
    (void)state;
    /* BERT's per-key mask, a full (query, key) mask, a per-head bias as T5 adds */
    problem p = base(70, 70, 16);
    p.mask_rank = 4;
    set_dims(p.mask_dims, (int64_t[]){2, 1, 1, 70}, 4);
    check(&p, expected());
    set_dims(p.mask_dims, (int64_t[]){2, 3, 70, 70}, 4);
    check(&p, expected());
    p.mask_rank = 3;
    set_dims(p.mask_dims, (int64_t[]){3, 70, 70}, 3);
    check(&p, expected());
    /* GPT-2's causal bool mask with finfo.min, and a scattered one with a per-key mask too */
    p = base(65, 65, 16);
    p.keep_rank = 4;
    p.causal = true;
    set_dims(p.keep_dims, (int64_t[]){1, 1, 65, 65}, 4);
    check(&p, expected());
    p.causal = false;
    p.mask_rank = 2;
    set_dims(p.mask_dims, (int64_t[]){1, 65}, 2);
    p.keep_rank = 1;
    set_dims(p.keep_dims, (int64_t[]){65}, 1);
    p.fill = -7.0f;
    check(&p, expected());
    /* DistilBERT's Where(mask == 0, fill, scores): the bool mask marks what to drop */
    p.invert = true;
    check(&p, expected());
    /* the causal flag over several query and key blocks (blocks past the diagonal skipped),
     * alone and with a mask; and more keys than queries */
    for (int i = 0; i < 3; i++) {
        problem c = base(i == 2 ? 70 : 150, 150, 16);
        c.causal_attr = true;
        if (i == 1) {
            c.mask_rank = 4;
            set_dims(c.mask_dims, (int64_t[]){2, 1, 1, 150}, 4);
        }
        check(&c, expected());
    }
    /* lower-right aligned (a past cache): the queries are the last of the keys, over several
     * blocks, and one query (a decoding step), which keeps every key */
    for (int i = 0; i < 2; i++) {
        problem c = base(i ? 1 : 70, 150, 16);
        c.causal_attr = 2;
        check(&c, expected());
    }
    /* softcap before the masks (Gemma 2), with scores up to 2000 times the cap */
    p.softcap = 0.05f;
    p.scale = 2.0f;
    check(&p, expected());
}

static void test_broadcast(void **state) {
    (void)state;
    /* one k/v head for every query head, one query for many keys, one key */
    problem p = base(50, 61, 16);
    p.kv_heads = 1;
    check(&p, expected());
    /* grouped-query attention: 6 query heads over 2 k/v heads (3 each) */
    p = base(40, 61, 16);
    p.h = 6;
    p.kv_heads = 2;
    check(&p, expected());
    p = base(1, 200, 64);
    check(&p, expected());
    p = base(90, 1, 16);
    check(&p, expected());
}

static void test_lengths(void **state);
static void test_head_sizes(void **state);
static void test_masks(void **state);

/* Every case above in session kb (which adds its reduced-precision variant at the reduced
 * tolerance, check), and one that must fail at fp32's tolerance. */
static void check_reduced(void **state, const kern_knobs *kb) {
    session = kb;
    test_lengths(state);
    test_head_sizes(state);
    test_masks(state);
    test_broadcast(state);
    built x;
    problem p = base(70, 70, 64);
    build(&x, &p);
    x.t.knobs = session;
    assert_int_equal(optest_check_variants(&x.t, 2e-5f, 1e-5f), -1);
    drop(&x);
    session = NULL;
}

/* The same shapes, lengths, head sizes and masks through sdpa_bf16 in a bf16 session, within
 * bf16's tolerance; and at fp32's it must fail, or it is not rounding at all. */
static void test_bf16(void **state) {
    if (!have_bf16()) skip();
    static const kern_knobs bf16 = {.precision = KERN_PREC_BF16};
    check_reduced(state, &bf16);
}

/* The same through sdpa_fp16 in an fp16 session (q, k, v and the weights rounded to 11
 * significant bits, sums of up to 60 pairs in fp16 before they are widened), within the same
 * tolerance; at fp32's it fails. */
static void test_fp16(void **state) {
    if (!have_fp16()) skip();
    static const kern_knobs fp16 = {.precision = KERN_PREC_FP16};
    check_reduced(state, &fp16);
}

/* q, k and v as column ranges of one [b, s, 3 x heads x size] tensor (a fused QKV projection,
 * view_q/k/v): against the same operands copied out into separate tensors. */
static void test_views(void **state) {
    (void)state;
    const int64_t b = 2, s = 70, h = 3, d = 16, w = 3 * h * d + 5; /* 5 columns of slack */
    const int64_t dims[3] = {b, s, w}, sep[4] = {b, s, h, d};
    float *qkv = optest_random_f32((size_t)(b * s * w), 21, -2, 2);
    float *parts[3];
    for (int x = 0; x < 3; x++) {
        parts[x] = malloc((size_t)(b * s * h * d) * sizeof(float));
        for (int64_t r = 0; r < b * s; r++)
            memcpy(parts[x] + r * h * d, qkv + r * w + 5 + x * h * d,
                   (size_t)(h * d) * sizeof(float));
    }
    const int64_t bshd[4] = {0, 2, 1, 3};
    optest want, got;
    optest *ts[2] = {&want, &got};
    for (int i = 0; i < 2; i++) {
        optest_begin(ts[i], IR_OP_SDPA, 3, 1, i ? 8 : 5);
        optest_attr_ints(ts[i], 0, "perm_q", bshd, 4);
        optest_attr_ints(ts[i], 1, "perm_k", bshd, 4);
        optest_attr_ints(ts[i], 2, "perm_v", bshd, 4);
        optest_attr_ints(ts[i], 3, "perm_o", bshd, 4);
        optest_attr_float(ts[i], 4, "scale", 0.25f);
    }
    static const char *const names[3] = {"view_q", "view_k", "view_v"};
    for (int x = 0; x < 3; x++) {
        optest_input(&want, x, ANVIL_DTYPE_FLOAT32, 4, sep, parts[x], false);
        optest_attr_ints(&got, 5 + x, names[x], (int64_t[]){5 + x * h * d, h, d}, 3);
        optest_input(&got, x, ANVIL_DTYPE_FLOAT32, 3, dims, qkv, false);
    }
    assert_int_equal(optest_run(&want), ANVIL_OK);
    assert_int_equal(optest_check_variants(&got, 2e-5f, 1e-5f), expected());
    const size_t n = op_tensor_numel(&want.out[0]);
    const float *a = want.out[0].data, *c = got.out[0].data;
    for (size_t e = 0; e < n; e++) assert_true(fabsf(a[e] - c[e]) <= 1e-6f + 1e-5f * fabsf(a[e]));
    optest_end(&want);
    optest_end(&got);
    for (int x = 0; x < 3; x++) free(parts[x]);
    free(qkv);
}

/* The reference against the unfused computation, in double. */
static void test_reference(void **state) {
    (void)state;
    problem p = base(9, 11, 5);
    p.dv = 4;
    p.mask_rank = 4;
    set_dims(p.mask_dims, (int64_t[]){2, 1, 9, 11}, 4);
    p.keep_rank = 2;
    p.causal = true;
    set_dims(p.keep_dims, (int64_t[]){9, 11}, 2);
    p.fill = -1e9f;
    built x;
    build(&x, &p);
    assert_int_equal(optest_run(&x.t), ANVIL_OK);
    const float *o = x.t.out[0].data;
    /* q, k, v [b, s, h, d] (bshd); mask [b, 1, sq, sk]; keep [sq, sk]; o [b, sq, h, dv] */
    for (int64_t b = 0; b < p.b; b++)
        for (int64_t h = 0; h < p.h; h++)
            for (int64_t i = 0; i < p.sq; i++) {
                double s[11], mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < p.sk; j++) {
                    double acc = 0;
                    for (int64_t e = 0; e < p.d; e++)
                        acc += (double)x.q[((b * p.sq + i) * p.h + h) * p.d + e] *
                               x.k[((b * p.sk + j) * p.h + h) * p.d + e];
                    acc = acc * p.scale + x.mask[(b * p.sq + i) * p.sk + j];
                    s[j] = x.keep[i * p.sk + j] ? acc : p.fill;
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t j = 0; j < p.sk; j++) sum += (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < p.dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < p.sk; j++)
                        acc += s[j] / sum * x.v[((b * p.sk + j) * p.h + h) * p.dv + e];
                    const float got = o[((b * p.sq + i) * p.h + h) * p.dv + e];
                    assert_true(fabs(got - acc) <= 1e-5 + 1e-4 * fabs(acc));
                }
            }
    drop(&x);
}

static void test_malformed(void **state) {
    (void)state;
    problem p = base(4, 4, 8);
    built x;
    build(&x, &p);
    optest_attr_ints(&x.t, 1, "perm_k", (int64_t[]){0, 1, 1, 3}, 4);
    assert_int_equal(optest_run(&x.t), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(anvil_last_error(), "perm_k"));
    drop(&x);
    /* k's head size unlike q's */
    p = base(4, 4, 8);
    p.kd = 7;
    build(&x, &p);
    assert_int_equal(optest_run(&x.t), ANVIL_ERR_SHAPE);
    drop(&x);
    /* a view past the end of its rows */
    {
        optest t;
        const int64_t d3[3] = {2, 4, 20}, d4[4] = {2, 4, 3, 8}, bshd[4] = {0, 2, 1, 3};
        float *a = optest_random_f32(2 * 4 * 24, 1, -1, 1);
        optest_begin(&t, IR_OP_SDPA, 3, 1, 5);
        optest_attr_ints(&t, 0, "perm_q", bshd, 4);
        optest_attr_ints(&t, 1, "perm_k", bshd, 4);
        optest_attr_ints(&t, 2, "perm_v", bshd, 4);
        optest_attr_ints(&t, 3, "perm_o", bshd, 4);
        optest_attr_ints(&t, 4, "view_q", (int64_t[]){0, 3, 8}, 3);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, d3, a, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, d4, a, false);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, d4, a, false);
        assert_int_equal(optest_run(&t), ANVIL_ERR_SHAPE);
        assert_non_null(strstr(anvil_last_error(), "viewed as columns [0, 24)"));
        optest_end(&t);
        free(a);
    }
    /* a mask with a key count of its own */
    p = base(4, 4, 8);
    p.mask_rank = 2;
    set_dims(p.mask_dims, (int64_t[]){4, 3}, 2);
    build(&x, &p);
    assert_int_equal(optest_run(&x.t), ANVIL_ERR_SHAPE);
    drop(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lengths),   cmocka_unit_test(test_head_sizes),
        cmocka_unit_test(test_layouts),   cmocka_unit_test(test_masks),
        cmocka_unit_test(test_broadcast), cmocka_unit_test(test_views),
        cmocka_unit_test(test_reference), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bf16),      cmocka_unit_test(test_fp16),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
