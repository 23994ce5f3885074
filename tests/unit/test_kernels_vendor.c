/* Vendor variants (oneDNN "dnnl_matmul" / "dnnl_conv" / "dnnl_conv_nchw" / "dnnl_conv_split",
 * OpenBLAS
 * "openblas_sgemm", BLIS "blis_sgemm") against the reference kernels on edge shapes: M, N, K
 * from {1, 7, 16, 17, 33}, K = 1, zero-size M/N/K, batched MatMul with broadcasting and 1-D
 * operands, Gemm with transA/transB, alpha/beta and every broadcast of C (constant or not),
 * Conv with groups, depthwise, strides, dilations, asymmetric pads, auto_pad, no bias, 1-D and
 * 3-D, constant and runtime weights; the training passes (ConvTranspose as a Conv's input
 * gradient, anvil.ConvGradW); each on 1, 2 and 3 threads. Also: the libraries use the
 * session's thread count, and OpenBLAS is loaded (privately) only when its variant is first
 * prepared. A test whose library was not found at build time is skipped. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

/* oneDNN and OpenBLAS keep process-lifetime caches (thread pools, JIT code, primitive cache)
 * that are still reachable at exit; nothing is expected to leak, so there are no LeakSanitizer
 * suppressions. */

/* A fresh fixed-seed buffer per call, so every operand differs. */
static float *rand_buf(size_t n) {
    static unsigned calls;
    return optest_random_f32(n, ++calls, -1.0f, 1.0f);
}

static size_t numel(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

static bool is_vendor(const char *name) {
    return !strncmp(name, "dnnl_", 5) || !strncmp(name, "openblas_", 9) ||
           !strncmp(name, "blis_", 5);
}

/* Number of vendor variants registered for op. */
static int vendor_count(ir_op op) {
    size_t count;
    const kern_variant *const *list = kern_variants(op, &count);
    int n = 0;
    for (size_t i = 0; i < count; i++) n += is_vendor(list[i]->name);
    return n;
}

static void skip_without_vendor(ir_op op) {
    if (vendor_count(op) == 0) {
        fprintf(stderr, "no vendor variant of %s in this build: skipped\n", ir_op_name(op));
        skip();
    }
}

/* Runs the reference, then every vendor variant of the node's op on 1, 2 and 3 threads, and
 * compares. Every vendor variant must apply to the node. */
static void check_vendor(optest *t, float rtol, float atol) {
    assert_int_equal(optest_run(t), ANVIL_OK);
    size_t count;
    const kern_variant *const *list = kern_variants(optest_node(t)->op, &count);
    for (size_t vi = 0; vi < count; vi++) {
        /* the bf16 ones run only in bf16 sessions (test_kernels_bf16 checks them there) */
        if (!is_vendor(list[vi]->name) || (list[vi]->needs & KERN_ROUNDS_BF16)) continue;
        for (int threads = 1; threads <= 3; threads++) {
            op_tensor got[OPTEST_MAX_IO];
            for (int i = 0; i < t->n_out; i++) {
                got[i] = t->out[i];
                size_t bytes = op_tensor_numel(&got[i]) * sizeof(float);
                got[i].data = malloc(bytes ? bytes : 1);
                /* NaN: an element the variant forgets to write is caught. */
                memset(got[i].data, 0xff, bytes);
            }
            anvil_status s = optest_run_variant(t, list[vi], threads, got);
            if (s != ANVIL_OK)
                fprintf(stderr, "variant %s (%d threads): %s\n", list[vi]->name, threads,
                        s == ANVIL_ERR_UNSUPPORTED && !*anvil_last_error() ? "does not apply"
                                                                           : anvil_last_error());
            assert_int_equal(s, ANVIL_OK);
            for (int i = 0; i < t->n_out; i++) {
                long at = optest_compare_f32(got[i].data, t->out[i].data,
                                             op_tensor_numel(&t->out[i]), rtol, atol);
                if (at >= 0)
                    fprintf(stderr, "variant %s (%d threads): output %d differs at %ld\n",
                            list[vi]->name, threads, i, at);
                free(got[i].data);
                assert_true(at < 0);
            }
        }
    }
}

/* ---- MatMul -------------------------------------------------------------------------------- */

static void matmul_case(int ra, const int64_t *ad, int rb, const int64_t *bd, bool b_const) {
    float *a = rand_buf(numel(ad, ra)), *b = rand_buf(numel(bd, rb));
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rb, bd, b, b_const);
    check_vendor(&t, 1e-4f, 1e-4f);
    optest_end(&t);
    free(a);
    free(b);
}

static void test_matmul_edges(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_MATMUL);
    static const int64_t sizes[] = {1, 7, 16, 17, 33};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 5; k++) {
                /* Every (M, N) pair with every K, alternating constant and runtime B. */
                int64_t m = sizes[i], n = sizes[j], kk = sizes[k];
                matmul_case(2, (int64_t[]){m, kk}, 2, (int64_t[]){kk, n}, (i + j + k) % 2 == 0);
            }
}

static void test_matmul_batched(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_MATMUL);
    /* broadcast in both directions (no fold) */
    matmul_case(4, (int64_t[]){2, 1, 7, 17}, 4, (int64_t[]){1, 3, 17, 16}, false);
    matmul_case(4, (int64_t[]){2, 1, 7, 17}, 4, (int64_t[]){1, 3, 17, 16}, true);
    /* same batch on both sides */
    matmul_case(3, (int64_t[]){3, 16, 33}, 3, (int64_t[]){3, 33, 17}, false);
    /* B one matrix: A's batch folds into M, constant and not */
    matmul_case(3, (int64_t[]){3, 7, 17}, 2, (int64_t[]){17, 16}, true);
    matmul_case(4, (int64_t[]){2, 3, 1, 33}, 2, (int64_t[]){33, 7}, false);
    matmul_case(3, (int64_t[]){3, 7, 17}, 4, (int64_t[]){1, 1, 17, 16}, true);
    /* A lower rank than B */
    matmul_case(2, (int64_t[]){7, 17}, 3, (int64_t[]){2, 17, 16}, false);
    /* 1-D operands */
    matmul_case(1, (int64_t[]){17}, 3, (int64_t[]){2, 17, 5}, false);
    matmul_case(4, (int64_t[]){2, 3, 7, 17}, 1, (int64_t[]){17}, true);
    matmul_case(1, (int64_t[]){33}, 1, (int64_t[]){33}, false);
    matmul_case(1, (int64_t[]){16}, 2, (int64_t[]){16, 7}, true);
    /* K = 1 batched */
    matmul_case(3, (int64_t[]){2, 7, 1}, 3, (int64_t[]){2, 1, 17}, false);
}

static void test_matmul_zero_size(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_MATMUL);
    matmul_case(2, (int64_t[]){0, 17}, 2, (int64_t[]){17, 16}, true);
    matmul_case(2, (int64_t[]){7, 17}, 2, (int64_t[]){17, 0}, false);
    matmul_case(2, (int64_t[]){7, 0}, 2, (int64_t[]){0, 16}, true); /* K = 0: zeros */
    matmul_case(3, (int64_t[]){2, 7, 0}, 3, (int64_t[]){2, 0, 5}, false);
    matmul_case(3, (int64_t[]){0, 7, 3}, 3, (int64_t[]){1, 3, 5}, false);
}

/* ---- Gemm ---------------------------------------------------------------------------------- */

typedef struct gemm_case {
    int64_t m, n, k;
    bool ta, tb;
    float alpha, beta;
    int c_rank; /* -1: no C */
    int64_t c_dims[2];
    bool b_const, c_const;
} gemm_case;

static void run_gemm(const gemm_case *g) {
    int64_t ad[2] = {g->ta ? g->k : g->m, g->ta ? g->m : g->k};
    int64_t bd[2] = {g->tb ? g->n : g->k, g->tb ? g->k : g->n};
    float *a = rand_buf(numel(ad, 2)), *b = rand_buf(numel(bd, 2));
    float *c = g->c_rank >= 0 ? rand_buf(numel(g->c_dims, g->c_rank)) : NULL;
    optest t;
    optest_begin(&t, IR_OP_GEMM, g->c_rank >= 0 ? 3 : 2, 1, 4);
    optest_attr_int(&t, 0, "transA", g->ta);
    optest_attr_int(&t, 1, "transB", g->tb);
    optest_attr_float(&t, 2, "alpha", g->alpha);
    optest_attr_float(&t, 3, "beta", g->beta);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, ad, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, bd, b, g->b_const);
    if (c) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, g->c_rank, g->c_dims, c, g->c_const);
    check_vendor(&t, 1e-4f, 1e-4f);
    optest_end(&t);
    free(a);
    free(b);
    free(c);
}

static void test_gemm_trans_and_c(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_GEMM);
    static const int64_t shapes[][3] = {
        {7, 16, 17}, {17, 33, 1}, {1, 1, 1}, {33, 7, 16}, {16, 17, 33}};
    static const float ab[][2] = {{1.0f, 1.0f}, {0.5f, 2.0f}, {1.0f, 0.0f}, {-1.5f, 1.0f}};
    int which = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        /* C: none, scalar, [1], [N], [1,N], [M,1], [M,N], [1,1] */
        const struct {
            int rank;
            int64_t d0, d1;
        } cs[] = {{-1, 0, 0}, {0, 0, 0}, {1, 1, 0}, {1, n, 0},
                  {2, 1, n},  {2, m, 1}, {2, m, n}, {2, 1, 1}};
        for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
            for (int tr = 0; tr < 4; tr++) {
                gemm_case g = {m,
                               n,
                               k,
                               tr & 1,
                               (tr >> 1) & 1,
                               ab[which % 4][0],
                               ab[which % 4][1],
                               cs[ci].rank,
                               {cs[ci].d0, cs[ci].d1},
                               which % 3 != 0,
                               which % 2 == 0};
                which++;
                run_gemm(&g);
            }
    }
}

static void test_gemm_bias_row_alpha_one(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_GEMM);
    /* The constant row C with alpha 1 (oneDNN takes it as its bias), any beta. */
    for (int tr = 0; tr < 4; tr++) {
        gemm_case g = {17, 33, 16, tr & 1, tr >> 1, 1.0f, 0.75f, 1, {33, 0}, true, true};
        run_gemm(&g);
        gemm_case h = {7, 16, 33, tr & 1, tr >> 1, 1.0f, 1.0f, 2, {1, 16}, false, true};
        run_gemm(&h);
        gemm_case s = {7, 16, 1, tr & 1, tr >> 1, 1.0f, 2.0f, 0, {0, 0}, true, true};
        run_gemm(&s);
    }
}

static void test_gemm_zero_size(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_GEMM);
    gemm_case k0 = {7, 16, 0, false, false, 1.0f, 0.5f, 1, {16, 0}, true, true};
    run_gemm(&k0);
    gemm_case k0n = {7, 16, 0, true, true, 2.0f, 1.0f, -1, {0, 0}, false, false};
    run_gemm(&k0n);
    gemm_case m0 = {0, 16, 7, false, true, 1.0f, 1.0f, 2, {1, 16}, true, false};
    run_gemm(&m0);
    gemm_case n0 = {7, 0, 7, true, false, 1.0f, 1.0f, -1, {0, 0}, true, false};
    run_gemm(&n0);
}

/* ---- Conv ---------------------------------------------------------------------------------- */

typedef struct conv_case {
    int rank;      /* 3, 4 or 5 */
    int64_t x[5];  /* N, C, spatial... */
    int64_t m;     /* output channels */
    int64_t k[3];  /* kernel */
    int64_t s[3];  /* strides (0: attribute absent) */
    int64_t d[3];  /* dilations (0: absent) */
    int64_t p[6];  /* pads begin..., end... */
    bool pads;     /* pads attribute present */
    int64_t group; /* 0: attribute absent */
    const char *auto_pad;
    bool bias, w_const;
} conv_case;

static void run_conv(const conv_case *c) {
    int nsp = c->rank - 2;
    int64_t g = c->group ? c->group : 1;
    int64_t wd[5] = {c->m, c->x[1] / g};
    for (int i = 0; i < nsp; i++) wd[2 + i] = c->k[i];
    float *x = rand_buf(numel(c->x, c->rank)), *w = rand_buf(numel(wd, c->rank));
    float *b = rand_buf((size_t)c->m);
    int n_attrs =
        1 + (c->s[0] != 0) + (c->d[0] != 0) + c->pads + (c->group != 0) + (c->auto_pad != NULL);
    optest t;
    optest_begin(&t, IR_OP_CONV, c->bias ? 3 : 2, 1, n_attrs);
    int a = 0;
    optest_attr_ints(&t, a++, "kernel_shape", c->k, (size_t)nsp);
    if (c->s[0]) optest_attr_ints(&t, a++, "strides", c->s, (size_t)nsp);
    if (c->d[0]) optest_attr_ints(&t, a++, "dilations", c->d, (size_t)nsp);
    if (c->pads) {
        int64_t pads[6];
        for (int i = 0; i < nsp; i++) {
            pads[i] = c->p[i];
            pads[nsp + i] = c->p[3 + i];
        }
        optest_attr_ints(&t, a++, "pads", pads, 2 * (size_t)nsp);
    }
    if (c->group) optest_attr_int(&t, a++, "group", c->group);
    if (c->auto_pad) optest_attr_string(&t, a++, "auto_pad", c->auto_pad);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, c->rank, c->x, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, c->rank, wd, w, c->w_const);
    if (c->bias) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &c->m, b, true);
    check_vendor(&t, 1e-4f, 1e-4f);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
}

static void test_conv_2d(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_CONV);
    const conv_case cases[] = {
        /* 3x3 pad 1 */
        {4, {2, 3, 9, 8}, 5, {3, 3}, {0}, {0}, {1, 1, 0, 1, 1}, true, 0, NULL, true, true},
        /* runtime weights */
        {4, {1, 3, 9, 8}, 5, {3, 3}, {0}, {0}, {1, 1, 0, 1, 1}, true, 0, NULL, true, false},
        /* stride 2, no bias, prime sizes */
        {4, {1, 7, 11, 13}, 17, {3, 3}, {2, 2}, {0}, {1, 1, 0, 1, 1}, true, 0, NULL, false, true},
        /* dilation 2, asymmetric pads */
        {4, {1, 4, 10, 9}, 6, {3, 3}, {1, 1}, {2, 2}, {2, 0, 0, 1, 3}, true, 0, NULL, true, true},
        /* groups */
        {4, {2, 4, 7, 7}, 6, {3, 3}, {0}, {0}, {1, 1, 0, 1, 1}, true, 2, NULL, true, true},
        {4, {1, 6, 8, 8}, 9, {1, 3}, {1, 2}, {0}, {0, 1, 0, 0, 1}, true, 3, NULL, false, false},
        /* five groups: dnnl_conv_split splits them 2 + 3 on two threads, 1 + 2 + 2 on three;
         * a batch of 2 makes each part's slice strided */
        {4, {2, 10, 6, 7}, 15, {3, 3}, {0}, {0}, {1, 1, 0, 1, 1}, true, 5, NULL, true, false},
        {4, {2, 10, 6, 7}, 15, {3, 3}, {2, 1}, {0}, {0}, false, 5, NULL, true, true},
        /* depthwise, stride 2 and 1 */
        {4, {1, 8, 9, 9}, 8, {3, 3}, {2, 2}, {0}, {1, 1, 0, 1, 1}, true, 8, NULL, true, true},
        {4, {2, 16, 7, 5}, 16, {3, 3}, {0}, {0}, {1, 1, 0, 1, 1}, true, 16, NULL, true, true},
        /* depthwise with channel multiplier 2 */
        {4, {1, 4, 6, 6}, 8, {3, 3}, {0}, {0}, {0}, false, 4, NULL, true, true},
        /* 40 output channels without groups: dnnl_conv_split's blocks of 16 on 2 and 3 threads */
        {4, {2, 5, 6, 7}, 40, {3, 3}, {0}, {0}, {1, 1, 0, 1, 1}, true, 0, NULL, true, false},
        /* 1x1 (as a GEMM), stride 2 */
        {4, {2, 16, 7, 7}, 33, {1, 1}, {0}, {0}, {0}, false, 0, NULL, true, true},
        {4, {1, 17, 5, 6}, 7, {1, 1}, {2, 2}, {0}, {0}, false, 0, NULL, false, true},
        /* auto_pad */
        {4, {1, 3, 9, 8}, 4, {3, 3}, {2, 2}, {0}, {0}, false, 0, "SAME_UPPER", true, true},
        {4, {1, 3, 8, 9}, 4, {4, 2}, {2, 3}, {0}, {0}, false, 0, "SAME_LOWER", true, true},
        {4, {1, 3, 9, 8}, 4, {3, 3}, {2, 2}, {0}, {0}, false, 0, "VALID", false, true},
        /* kernel as large as the input; pads dropped by the floor division */
        {4, {1, 2, 5, 5}, 3, {5, 5}, {0}, {0}, {0}, false, 0, NULL, true, true},
        {4, {1, 2, 8, 8}, 3, {3, 3}, {3, 3}, {0}, {1, 1, 0, 2, 2}, true, 0, NULL, true, true},
        /* one channel, one pixel */
        {4, {1, 1, 1, 1}, 1, {1, 1}, {0}, {0}, {0}, false, 0, NULL, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_conv(&cases[i]);
}

static void test_conv_1d_3d(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_CONV);
    const conv_case cases[] = {
        {3, {2, 3, 17}, 5, {3}, {2}, {0}, {1, 0, 0, 2}, true, 0, NULL, true, true},
        {3, {1, 4, 16}, 4, {5}, {0}, {2}, {0}, false, 4, "SAME_UPPER", false, true},
        {5, {1, 2, 5, 6, 7}, 3, {3, 3, 3}, {0}, {0}, {1, 1, 1, 1, 1, 1}, true, 0, NULL, true, true},
        {5, {1, 4, 4, 5, 6}, 4, {1, 3, 3}, {1, 2, 2}, {0}, {0}, false, 2, NULL, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_conv(&cases[i]);
}

static void test_conv_zero_batch(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_CONV);
    const conv_case c = {4, {0, 3, 5, 5}, 4, {3, 3}, {0}, {0}, {0}, false, 0, NULL, true, true};
    run_conv(&c);
}

/* ---- training passes: ConvTranspose (a Conv's input gradient) and anvil.ConvGradW ------------ */

/* The ConvTranspose that a Conv's input gradient is (src/autodiff): dY [n, m, oh, ow] and the
 * Conv's W [m, c/g, k, k] give dX [n, c, h, w]; output_padding where the Conv's floor division
 * dropped rows. Every vendor variant must take it. */
static void deconv_grad_case(const int64_t *dyd, int64_t c, int64_t k, int64_t s, int64_t p,
                             int64_t opad, int64_t g, bool w_const) {
    const int64_t wd[4] = {dyd[1], c / g, k, k};
    float *dy = rand_buf(numel(dyd, 4)), *w = rand_buf(numel(wd, 4));
    optest t;
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 5);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){s, s}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){p, p, p, p}, 4);
    optest_attr_ints(&t, 3, "output_padding", (int64_t[]){opad, opad}, 2);
    optest_attr_int(&t, 4, "group", g);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dyd, dy, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, wd, w, w_const);
    check_vendor(&t, 1e-4f, 1e-4f);
    optest_end(&t);
    free(dy);
    free(w);
}

static void test_deconv_training(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_CONVTRANSPOSE);
    /* ResNet's 3x3 stride 1 and stride 2 (odd input: output_padding 1), its 1x1 stride-2
     * shortcut, a grouped one; weights as inputs (a training graph) and constant */
    deconv_grad_case((int64_t[]){2, 8, 9, 9}, 6, 3, 1, 1, 0, 1, false);
    deconv_grad_case((int64_t[]){2, 8, 5, 5}, 6, 3, 2, 1, 0, 1, false);
    deconv_grad_case((int64_t[]){3, 5, 4, 4}, 7, 1, 2, 0, 1, 1, true);
    deconv_grad_case((int64_t[]){1, 6, 6, 6}, 4, 3, 1, 1, 0, 2, false);
    deconv_grad_case((int64_t[]){2, 6, 4, 4}, 9, 3, 2, 1, 1, 3, true);
}

/* anvil.ConvGradW (X, dY) -> dW for the Conv of those attributes. */
static void conv_grad_w_vendor_case(const int64_t *xd, int64_t m, int64_t k, int64_t s, int64_t p,
                                    int64_t d, int64_t g) {
    const int64_t span = (k - 1) * d + 1;
    const int64_t oh = (xd[2] + 2 * p - span) / s + 1, ow = (xd[3] + 2 * p - span) / s + 1;
    const int64_t dyd[4] = {xd[0], m, oh, ow};
    float *x = rand_buf(numel(xd, 4)), *dy = rand_buf(numel(dyd, 4));
    optest t;
    optest_begin(&t, IR_OP_CONV_GRAD_W, 2, 1, 5);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){s, s}, 2);
    optest_attr_ints(&t, 2, "dilations", (int64_t[]){d, d}, 2);
    optest_attr_ints(&t, 3, "pads", (int64_t[]){p, p, p, p}, 4);
    optest_attr_int(&t, 4, "group", g);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dyd, dy, false);
    /* sums over n * oh * ow products in float against the reference's double */
    check_vendor(&t, 2e-3f, 2e-3f);
    optest_end(&t);
    free(x);
    free(dy);
}

static void test_conv_grad_w(void **state) {
    (void)state;
    skip_without_vendor(IR_OP_CONV_GRAD_W);
    conv_grad_w_vendor_case((int64_t[]){2, 8, 9, 9}, 16, 3, 1, 1, 1, 1);
    conv_grad_w_vendor_case((int64_t[]){3, 5, 11, 11}, 7, 3, 2, 1, 1, 1);
    conv_grad_w_vendor_case((int64_t[]){2, 16, 7, 7}, 32, 1, 2, 0, 1, 1);
    conv_grad_w_vendor_case((int64_t[]){1, 3, 16, 16}, 8, 7, 2, 3, 1, 1);
    conv_grad_w_vendor_case((int64_t[]){2, 6, 9, 8}, 9, 3, 1, 2, 2, 3);
}

/* ---- the libraries' runtime ------------------------------------------------------------------ */

/* An n x n MatMul (B constant) in t with random a and b, run by the reference kernel; *got is a
 * copy of its output tensor with its own buffer (malloc'd, the caller frees it, a and b). */
static void square_matmul(optest *t, int64_t n, float **a, float **b, op_tensor *got) {
    *a = rand_buf((size_t)(n * n));
    *b = rand_buf((size_t)(n * n));
    optest_begin(t, IR_OP_MATMUL, 2, 1, 0);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){n, n}, *a, false);
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){n, n}, *b, true);
    assert_int_equal(optest_run(t), ANVIL_OK);
    *got = t->out[0];
    got->data = malloc((size_t)(n * n) * sizeof(float));
}

/* The variants run on exactly the session's thread count: OpenBLAS's global count follows the
 * session each call, and oneDNN leaves the caller's OpenMP setting as it found it. */
static void test_thread_counts(void **state) {
    (void)state;
    const kern_variant *ob = kern_find(IR_OP_MATMUL, "openblas_sgemm");
    const kern_variant *dn = kern_find(IR_OP_MATMUL, "dnnl_matmul");
    if (!ob && !dn) skip();
    int (*ob_threads)(void) = NULL;
    float *a, *b;
    optest t;
    op_tensor got;
    square_matmul(&t, 64, &a, &b, &got);
    for (int threads = 1; threads <= 3; threads++) {
        if (ob) {
            assert_int_equal(optest_run_variant(&t, ob, threads, &got), ANVIL_OK);
            /* loaded privately by the variant (openblas_variants.c) */
            void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
            assert_non_null(h);
            ob_threads = (int (*)(void))dlsym(h, "openblas_get_num_threads");
            assert_non_null(ob_threads);
            assert_int_equal(ob_threads(), threads);
        }
        if (dn) {
            /* libgomp comes privately with oneDNN (dnnl_variants.c): there once a dnnl_* ran */
            assert_int_equal(optest_run_variant(&t, dn, threads, &got), ANVIL_OK);
            void *h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
            assert_non_null(h);
            int (*omp_threads)(void) = (int (*)(void))dlsym(h, "omp_get_max_threads");
            assert_non_null(omp_threads);
            int before = omp_threads();
            assert_int_equal(optest_run_variant(&t, dn, threads, &got), ANVIL_OK);
            assert_int_equal(omp_threads(), before);
            dlclose(h);
        }
    }
    free(got.data);
    optest_end(&t);
    free(a);
    free(b);
}

/* OpenBLAS is loaded only when an openblas_sgemm node is prepared (its threads start at load
 * and spin), and then privately: cblas_sgemm of the process stays whatever else defines it.
 * Runs first, before any other test prepares the variant. */
static void test_openblas_loaded_lazily(void **state) {
    (void)state;
    const kern_variant *ob = kern_find(IR_OP_MATMUL, "openblas_sgemm");
    if (!ob) skip();
    assert_null(dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD));
    float *a, *b;
    optest t;
    op_tensor got;
    square_matmul(&t, 8, &a, &b, &got);
    assert_int_equal(optest_run_variant(&t, ob, 1, &got), ANVIL_OK);
    assert_true(optest_compare_f32(got.data, t.out[0].data, 64, 1e-5f, 1e-5f) < 0);
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *sym = dlsym(RTLD_DEFAULT, "cblas_sgemm");
    Dl_info info;
    if (sym && dladdr(sym, &info))
        fprintf(stderr, "process-wide cblas_sgemm: %s\n", info.dli_fname);
    free(got.data);
    optest_end(&t);
    free(a);
    free(b);
}

/* oneDNN, and libgomp with it, load only when a dnnl_* node is prepared, and then OpenMP's
 * workers sleep when idle instead of spinning for milliseconds on the cores anvil's own threads
 * run on next (dnnl_variants.c): OMP_WAIT_POLICY is PASSIVE unless the user set it. Runs first. */
static void test_dnnl_loaded_lazily(void **state) {
    (void)state;
    const kern_variant *dn = kern_find(IR_OP_MATMUL, "dnnl_matmul");
    if (!dn) skip();
    void *linked = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (linked) {
        /* sanitizer builds link oneDNN and libgomp (cmake/vendor.cmake) */
        dlclose(linked);
        skip();
    }
    const char *user = getenv("OMP_WAIT_POLICY");
    char *before = user ? strdup(user) : NULL;
    float *a, *b;
    optest t;
    op_tensor got;
    square_matmul(&t, 8, &a, &b, &got);
    assert_int_equal(optest_run_variant(&t, dn, 2, &got), ANVIL_OK);
    assert_true(optest_compare_f32(got.data, t.out[0].data, 64, 1e-5f, 1e-5f) < 0);
    void *h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    dlclose(h);
    assert_string_equal(getenv("OMP_WAIT_POLICY"), before ? before : "PASSIVE");
    free(before);
    free(got.data);
    optest_end(&t);
    free(a);
    free(b);
}

/* Vendor variants come after anvil's own: they are never the default for a node that an anvil
 * variant can run. */
static void test_vendor_after_anvil(void **state) {
    (void)state;
    const ir_op ops[] = {IR_OP_MATMUL, IR_OP_GEMM, IR_OP_CONV};
    for (size_t o = 0; o < 3; o++) {
        size_t count;
        const kern_variant *const *list = kern_variants(ops[o], &count);
        bool seen_vendor = false;
        for (size_t i = 1; i < count; i++) {
            if (is_vendor(list[i]->name))
                seen_vendor = true;
            else
                assert_false(seen_vendor);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openblas_loaded_lazily),
        cmocka_unit_test(test_dnnl_loaded_lazily),
        cmocka_unit_test(test_matmul_edges),
        cmocka_unit_test(test_matmul_batched),
        cmocka_unit_test(test_matmul_zero_size),
        cmocka_unit_test(test_gemm_trans_and_c),
        cmocka_unit_test(test_gemm_bias_row_alpha_one),
        cmocka_unit_test(test_gemm_zero_size),
        cmocka_unit_test(test_conv_2d),
        cmocka_unit_test(test_conv_1d_3d),
        cmocka_unit_test(test_conv_zero_batch),
        cmocka_unit_test(test_deconv_training),
        cmocka_unit_test(test_conv_grad_w),
        cmocka_unit_test(test_thread_counts),
        cmocka_unit_test(test_vendor_after_anvil),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
