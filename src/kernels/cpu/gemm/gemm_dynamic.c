/* MatMul (and Gemm, A not transposed, C a bias) in int8 with dynamic quantization, variant
 * "gemm_i8_dynamic": the transformer recipe a session asks for with precision int8
 * (KERN_ROUNDS_INT8; never offered otherwise).
 *
 * The constant B [K, N] is quantized once, per column and symmetric: sb[j] = max|B[:, j]| / 127,
 * B[p, j] / sb[j] rounded to s8. Each run quantizes the rows of A the same way, per row: sa[i] =
 * max|A[i, :]| / 127, A[i, p] / sa[i] rounded to [-127, 127] and stored shifted by 128 as u8 (the
 * int8 tiles' unsigned operand), so the zero point 128 comes back as a per-column compensation
 * -128 * sum_p q(B)[p, j]. The int8 tiles sum the products exactly in int32, and the epilogue
 * scales each sum by sa[i] * sb[j] (gemm_epilogue.row_scale, .col_scale) before the node's fused
 * bias, residual and activation. The error is the rounding of both operands to 8 bits (about
 * 0.4% of each row's and column's largest value), which `anvil bench --check` reports. */
#include "gemm.h"
#include "kernels/cpu/family.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/fusion.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct dyn_state {
    bool trans_b;   /* a Gemm's B stored [N, K] */
    float alpha;    /* a Gemm's */
    const float *c; /* a Gemm's C: its bias [N] (NULL: none), read from the node's input 2 */
    bool has_c;
    const gemm_kernel *k;
    gemm_blocking blk;
    gemm_packed pb;
    float *sb;     /* [n] */
    int32_t *comp; /* [n] -128 * column sums */
    int64_t m, n, kdim, k4;
    int threads;
    const ir_fusion *fusion; /* applied in the epilogue (NULL: none, or the runtime's) */
} dyn_state;

/* A Gemm this variant takes: A not transposed, and C absent or a bias of N values with beta 1
 * (a classifier's fully connected layer). */
static bool gemm_form(const kern_node *kn, bool *trans_b, float *alpha, bool *has_c) {
    int64_t ta = 0, tb = 0;
    float beta = 1.0f;
    *alpha = 1.0f;
    if (ir_attr_int(kn->node, "transA", 0, &ta) != ANVIL_OK || ta ||
        ir_attr_int(kn->node, "transB", 0, &tb) != ANVIL_OK ||
        ir_attr_float(kn->node, "alpha", 1.0f, alpha) != ANVIL_OK ||
        ir_attr_float(kn->node, "beta", 1.0f, &beta) != ANVIL_OK)
        return false;
    *trans_b = tb != 0;
    *has_c = kern_has_input(kn, 2);
    if (!*has_c) return true;
    const op_tinfo *c = &kn->in[2];
    const int64_t n = kn->out[0].shape.d[1];
    return beta == 1.0f && kfam_f32_static(c) &&
           ((c->shape.rank == 1 && c->shape.d[0] == n) ||
            (c->shape.rank == 2 && c->shape.d[0] == 1 && c->shape.d[1] == n));
}

static bool dyn_supports(const kern_node *kn, const core_hw *hw) {
    if (kn->n_in < 2 || !kfam_f32_static(&kn->in[0]) || !kfam_f32_static(&kn->in[1]) ||
        !kfam_f32_static(&kn->out[0]) || !kn->in[1].value || kn->in[0].shape.rank < 2 ||
        kn->in[1].shape.rank != 2)
        return false;
    bool trans_b = false, has_c = false;
    float alpha;
    if (kn->node->op == IR_OP_GEMM &&
        (kn->in[0].shape.rank != 2 || !gemm_form(kn, &trans_b, &alpha, &has_c) ||
         (has_c && kn->node->fusion && kn->node->fusion->bias >= 0)))
        return false;
    const int64_t kdim = kn->in[1].shape.d[trans_b ? 1 : 0];
    /* K within int32's exact range for 127 x 255 products */
    if (kdim < 1 || kdim > (1 << 16)) return false;
    return gemm_kernel_default_i8(1, kn->in[1].shape.d[1], kdim, hw) != NULL;
}

static void dyn_setup(const kern_node *kn, dyn_state *s) {
    const op_tinfo *a = &kn->in[0], *b = &kn->in[1];
    s->alpha = 1.0f;
    if (kn->node->op == IR_OP_GEMM) gemm_form(kn, &s->trans_b, &s->alpha, &s->has_c);
    s->kdim = b->shape.d[s->trans_b ? 1 : 0];
    s->n = b->shape.d[s->trans_b ? 0 : 1];
    s->m = (int64_t)kfam_numel(&a->shape) / s->kdim;
    s->k4 = (s->kdim + 3) / 4 * 4;
    /* a row stride of 4 KiB would put every row of a micro-panel in one L1 set */
    if (s->k4 % 4096 == 0) s->k4 += 64;
    s->threads = kn->threads > 0 ? kn->threads : 1;
    const core_hw *hw = core_hw_get();
    s->k = gemm_kernel_default_i8(s->m, s->n, s->kdim, hw);
    s->blk = gemm_blocking_default(s->k, s->m, s->n, s->k4, hw);
}

static void dyn_release(void *state) {
    dyn_state *s = state;
    if (!s) return;
    gemm_packed_free(&s->pb);
    free(s->sb);
    free(s->comp);
    free(s);
}

static anvil_status dyn_prepare(const kern_node *kn, void **state) {
    dyn_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    dyn_setup(kn, s);
    const float *b = kn->in[1].value;
    /* B[p, j] at b[p * rs + j * cs]: a Gemm's transB stores it [N, K] */
    const int64_t rs = s->trans_b ? 1 : s->n, cs = s->trans_b ? s->kdim : 1;
    int8_t *q = malloc((size_t)(s->kdim * s->n));
    int32_t *colsum = malloc(sizeof(int32_t) * (size_t)s->n);
    s->sb = malloc(sizeof(float) * (size_t)s->n);
    s->comp = malloc(sizeof(int32_t) * (size_t)s->n);
    anvil_status st = q && colsum && s->sb && s->comp ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    for (int64_t j = 0; st == ANVIL_OK && j < s->n; j++) {
        float mx = 0.0f;
        for (int64_t p = 0; p < s->kdim; p++) {
            float v;
            memcpy(&v, b + p * rs + j * cs, sizeof v); /* constants may be unaligned */
            mx = fabsf(v) > mx ? fabsf(v) : mx;
        }
        /* a zero (or non-finite) column quantizes to zeros with scale 1 */
        s->sb[j] = mx > 0.0f && isfinite(mx) ? mx / 127.0f : 1.0f;
        for (int64_t p = 0; p < s->kdim; p++) {
            float v;
            memcpy(&v, b + p * rs + j * cs, sizeof v);
            float r = nearbyintf(v / s->sb[j]);
            r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
            q[p * s->n + j] = (int8_t)(r == r ? r : 0.0f);
        }
    }
    if (st == ANVIL_OK)
        st = gemm_pack_b8(s->k, s->kdim, s->n, q, true, s->n, 1, NULL, colsum, &s->pb);
    for (int64_t j = 0; st == ANVIL_OK && j < s->n; j++)
        s->comp[j] = (int32_t)(0u - 128u * (uint32_t)colsum[j]);
    free(q);
    free(colsum);
    if (st != ANVIL_OK) {
        dyn_release(s);
        return st;
    }
    kern_node_mark_copied(kn, 1);
    const ir_fusion *f = kn->node->fusion;
    s->fusion = f && kern_fusion_gemm_ok(f) ? f : NULL;
    *state = s;
    return ANVIL_OK;
}

static bool dyn_fuses(const kern_node *kn) {
    return !kn->node->fusion || kern_fusion_gemm_ok(kn->node->fusion);
}

/* The quantized rows of A (m x k4 bytes), their scales (m floats), the GEMM's per thread. */
static size_t dyn_bytes(const dyn_state *s, size_t *a_bytes, size_t *sc_bytes) {
    *a_bytes = ((size_t)s->m * (size_t)s->k4 + 63) / 64 * 64;
    *sc_bytes = ((size_t)s->m * sizeof(float) + 63) / 64 * 64;
    return *a_bytes + *sc_bytes + (size_t)s->threads * gemm_thread_workspace(s->k, &s->blk);
}

static size_t dyn_workspace(const kern_node *kn) {
    dyn_state s = {0};
    dyn_setup(kn, &s);
    size_t a, sc;
    return dyn_bytes(&s, &a, &sc);
}

typedef struct dyn_job {
    const dyn_state *s;
    const float *a;
    uint8_t *q;
    float *sa;
    int64_t per;
} dyn_job;

static void quantize_rows(void *arg, size_t begin, size_t end) {
    const dyn_job *j = arg;
    int64_t r0 = (int64_t)begin * j->per, r1 = (int64_t)end * j->per;
    if (r1 > j->s->m) r1 = j->s->m;
    if (r0 < r1)
        quant_rows_dynamic_avx512(j->a + r0 * j->s->kdim, r1 - r0, j->s->kdim, j->q + r0 * j->s->k4,
                                  j->s->k4, j->sa + r0);
}

static anvil_status dyn_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    const dyn_state *s = state;
    if (s->m == 0 || s->n == 0) return ANVIL_OK;
    size_t a_bytes, sc_bytes;
    dyn_bytes(s, &a_bytes, &sc_bytes);
    dyn_job j = {.s = s, .a = in[0]->data, .q = ws, .sa = (float *)((char *)ws + a_bytes)};
    const int t = op_ctx_threads(ctx);
    j.per = (s->m + 4 * t - 1) / (4 * t);
    op_parallel_for(ctx, (size_t)((s->m + j.per - 1) / j.per), quantize_rows, &j);
    gemm_problem p = {
        .m = s->m, .n = s->n, .k = s->k4, .a8 = j.q, .rs_a = s->k4, .cs_a = 1, .pb = &s->pb};
    p.c = out[0]->data;
    p.ldc = s->n;
    p.ep = kern_fusion_epilogue(s->fusion);
    if (s->fusion && s->fusion->bias >= 0) p.ep.col_bias = in[s->fusion->bias]->data;
    if (s->has_c) p.ep.col_bias = in[2]->data;
    p.ep.scale = s->alpha;
    if (s->fusion && s->fusion->residual >= 0) {
        p.ep.r = in[s->fusion->residual]->data;
        p.ep.rs_r = s->n;
        p.ep.cs_r = 1;
        p.ep.beta = 1.0f;
    }
    p.ep.col_scale = s->sb;
    p.ep.col_comp = s->comp;
    p.ep.row_scale = j.sa;
    gemm_run(s->k, &s->blk, &p, (char *)ws + a_bytes + sc_bytes, ctx);
    return ANVIL_OK;
}

const kern_variant gemm_variant_i8_dynamic_gemm = {
    .name = "gemm_i8_dynamic",
    .op = IR_OP_GEMM,
    .needs = KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_VNNI | KERN_ROUNDS_INT8,
    .supports = dyn_supports,
    .workspace_size = dyn_workspace,
    .prepare = dyn_prepare,
    .release = dyn_release,
    .run = dyn_run,
    .fuses = dyn_fuses};

const kern_variant gemm_variant_i8_dynamic = {.name = "gemm_i8_dynamic",
                                              .op = IR_OP_MATMUL,
                                              .needs = KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_VNNI |
                                                       KERN_ROUNDS_INT8,
                                              .supports = dyn_supports,
                                              .workspace_size = dyn_workspace,
                                              .prepare = dyn_prepare,
                                              .release = dyn_release,
                                              .run = dyn_run,
                                              .fuses = dyn_fuses};
