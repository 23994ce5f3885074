/* conv_batched_gemm: a whole batch as one GEMM, for small maps. The other GEMM formulations run
 * one GEMM per image, W [M, C*k] times that image's im2col [C*k, P]; on a map of a few pixels
 * that GEMM has a few columns, computes mostly padding and streams all of W per image. Here the
 * im2col of every image sits side by side, [C*k, N*P], the GEMM runs once into a scratch
 * [M, N*P], and a scatter writes it out NCHW (with the conv's bias). Training is where this
 * matters: batches of 16 and more at 2x2 to 8x8 (ResNet-18 at 64x64's last stages), with W an
 * input whose packing a per-image GEMM repeats for every image. The node's fused epilogue, if
 * any, is left to the runtime (the scatter would have to apply it; such nodes rarely reach this
 * variant: in training graphs nothing fuses into a conv that BatchNorm follows).
 *
 * Taken by the cascade (conv_variants.c) for group 1, two images or more, and maps under 64
 * pixels, when the batch's im2col fits 64 MiB. */
#include "conv.h"

#include <stdlib.h>
#include <string.h>

#define BATCHED_COL_BYTES ((size_t)64 << 20)

typedef struct batched_plan {
    conv_shape s;
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads;
    size_t gemm_ws, col_bytes, c_bytes;
    gemm_packed pa; /* W packed once when it is a constant; else the GEMM packs it per run */
} batched_plan;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

static bool plan_of(const kern_node *kn, batched_plan *p) {
    memset(p, 0, sizeof *p);
    if (!conv_shape_of(kn, &p->s)) return false;
    const conv_shape *s = &p->s;
    const int64_t cols = s->n * s->oh * s->ow, kdim = conv_kdim(s);
    if (s->group != 1 || s->n < 2 || cols <= 0) return false;
    p->col_bytes = align64((size_t)kdim * (size_t)cols * sizeof(float));
    p->c_bytes = align64((size_t)s->m * (size_t)cols * sizeof(float));
    if (p->col_bytes > BATCHED_COL_BYTES) return false;
    const core_hw *hw = core_hw_get();
    p->k = conv_gemm_kernel(s->m, cols, kdim, hw);
    p->blk = gemm_blocking_default(p->k, s->m, cols, kdim, hw);
    p->threads = kn->threads > 0 ? kn->threads : 1;
    p->gemm_ws = (size_t)p->threads * align64(gemm_thread_workspace(p->k, &p->blk));
    return true;
}

static bool batched_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    batched_plan p;
    return plan_of(kn, &p);
}

static size_t batched_ws(const kern_node *kn) {
    batched_plan p;
    return plan_of(kn, &p) ? p.gemm_ws + p.col_bytes + p.c_bytes : 0;
}

static void batched_release(void *state) {
    batched_plan *p = state;
    if (!p) return;
    gemm_packed_free(&p->pa);
    free(p);
}

static anvil_status batched_prepare(const kern_node *kn, void **state) {
    batched_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan_of(kn, p)) {
        free(p);
        return conv_prepare_unsupported(kn, "conv_batched_gemm");
    }
    const float *w = kn->in[1].value;
    if (w) {
        const int64_t kdim = conv_kdim(&p->s);
        anvil_status st = gemm_pack_a(p->k, p->s.m, kdim, w, kdim, 1, &p->pa);
        if (st != ANVIL_OK) {
            free(p);
            return st;
        }
        kern_node_mark_copied(kn, 1);
    }
    *state = p;
    return ANVIL_OK;
}

typedef struct batched_job {
    const batched_plan *p;
    const float *x, *bias;
    float *col, *c, *y;
} batched_job;

/* image i's im2col into columns [i*P, (i+1)*P) of the batch's */
static void im2col_range(void *arg, size_t begin, size_t end) {
    const batched_job *j = arg;
    const conv_shape *s = &j->p->s;
    const int64_t pix = s->oh * s->ow, cols = s->n * pix;
    for (size_t i = begin; i < end; i++)
        conv_im2col(s, j->x + (int64_t)i * s->c * s->h * s->w, 0, conv_kdim(s), 0, pix,
                    j->col + (int64_t)i * pix, cols);
}

/* output channels [begin, end): y[n, m, :] = c[m, n*P : (n+1)*P] + bias[m] */
static void scatter_range(void *arg, size_t begin, size_t end) {
    const batched_job *j = arg;
    const conv_shape *s = &j->p->s;
    const int64_t pix = s->oh * s->ow, cols = s->n * pix;
    for (size_t m = begin; m < end; m++) {
        const float b = j->bias ? j->bias[m] : 0.0f;
        for (int64_t n = 0; n < s->n; n++) {
            const float *src = j->c + (int64_t)m * cols + n * pix;
            float *dst = j->y + (n * s->m + (int64_t)m) * pix;
            for (int64_t q = 0; q < pix; q++) dst[q] = src[q] + b;
        }
    }
}

static anvil_status batched_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const batched_plan *p = state;
    const conv_shape *s = &p->s;
    char *base = ws;
    batched_job j = {p,
                     in[0]->data,
                     conv_bias(s, in, n_in),
                     (float *)(base + p->gemm_ws),
                     (float *)(base + p->gemm_ws + p->col_bytes),
                     out[0]->data};
    op_parallel_for(ctx, (size_t)s->n, im2col_range, &j);
    const int64_t cols = s->n * s->oh * s->ow, kdim = conv_kdim(s);
    gemm_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.m = s->m;
    pr.n = cols;
    pr.k = kdim;
    if (p->pa.data) {
        pr.pa = &p->pa;
    } else {
        pr.a = in[1]->data;
        pr.rs_a = kdim;
        pr.cs_a = 1;
    }
    pr.b = j.col;
    pr.rs_b = cols;
    pr.cs_b = 1;
    pr.c = j.c;
    pr.ldc = cols;
    pr.ep = gemm_epilogue_none();
    gemm_run(p->k, &p->blk, &pr, base, ctx);
    op_parallel_for(ctx, (size_t)s->m, scatter_range, &j);
    return ANVIL_OK;
}

const kern_variant conv_v_batched = {.name = "conv_batched_gemm",
                                     .op = IR_OP_CONV,
                                     .supports = batched_supports,
                                     .workspace_size = batched_ws,
                                     .prepare = batched_prepare,
                                     .release = batched_release,
                                     .run = batched_run};
