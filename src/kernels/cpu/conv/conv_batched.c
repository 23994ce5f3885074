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

/* The plan (conv_layout.h) and W packed once when it is a constant (else the GEMM packs it per
 * run). */
typedef struct batched_state {
    conv_batched_plan p;
    gemm_packed pa;
} batched_state;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* bf16: the GEMM on a bf16 tile (conv_batched_bf16), whose packers round W and the im2col to
 * bf16. */
static bool plan_of(const kern_node *kn, bool bf16, conv_batched_plan *p) {
    memset(p, 0, sizeof *p);
    if (!conv_shape_of(kn, &p->s)) return false;
    const conv_shape *s = &p->s;
    const int64_t cols = s->n * s->oh * s->ow, kdim = conv_kdim(s);
    if (s->group != 1 || s->n < 2 || cols <= 0) return false;
    p->col_bytes = align64((size_t)kdim * (size_t)cols * sizeof(float));
    p->c_bytes = align64((size_t)s->m * (size_t)cols * sizeof(float));
    if (p->col_bytes > BATCHED_COL_BYTES) return false;
    const core_hw *hw = core_hw_get();
    p->k = bf16 ? gemm_kernel_default_bf16(s->m, cols, kdim, hw)
                : conv_gemm_kernel(kn, s->m, cols, kdim, hw);
    if (!p->k) return false;
    p->blk = gemm_blocking_for(kn, p->k, s->m, cols, kdim, hw, 0, 0, 0);
    p->threads = kn->threads > 0 ? kn->threads : 1;
    p->gemm_ws = (size_t)p->threads * align64(gemm_thread_workspace(p->k, &p->blk));
    return true;
}

static bool batched_supports_as(const kern_node *kn, bool bf16) {
    conv_batched_plan p;
    return plan_of(kn, bf16, &p);
}

static size_t batched_ws_as(const kern_node *kn, bool bf16) {
    conv_batched_plan p;
    return plan_of(kn, bf16, &p) ? p.gemm_ws + p.col_bytes + p.c_bytes : 0;
}

static bool batched_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return batched_supports_as(kn, false);
}

static size_t batched_ws(const kern_node *kn) {
    return batched_ws_as(kn, false);
}

static bool batched_supports_bf16(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return batched_supports_as(kn, true);
}

static size_t batched_ws_bf16(const kern_node *kn) {
    return batched_ws_as(kn, true);
}

static void batched_release(void *state) {
    batched_state *st = state;
    if (!st) return;
    gemm_packed_free(&st->pa);
    free(st);
}

static anvil_status batched_prepare_as(const kern_node *kn, bool bf16, void **state) {
    batched_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    conv_batched_plan *p = &st->p;
    if (!plan_of(kn, bf16, p)) {
        free(st);
        return conv_prepare_unsupported(kn, bf16 ? "conv_batched_bf16" : "conv_batched_gemm");
    }
    const float *w = kn->in[1].value;
    if (w) {
        const int64_t kdim = conv_kdim(&p->s);
        anvil_status rc = gemm_pack_a(p->k, p->s.m, kdim, w, kdim, 1, &st->pa);
        if (rc != ANVIL_OK) {
            free(st);
            return rc;
        }
        kern_node_mark_copied(kn, 1);
    }
    *state = st;
    return ANVIL_OK;
}

static anvil_status batched_prepare(const kern_node *kn, void **state) {
    return batched_prepare_as(kn, false, state);
}

static anvil_status batched_prepare_bf16(const kern_node *kn, void **state) {
    return batched_prepare_as(kn, true, state);
}

static anvil_status batched_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const batched_state *st = state;
    const conv_batched_plan *p = &st->p;
    conv_batched_run(p, st->pa.data ? &st->pa : NULL, in[0]->data, st->pa.data ? NULL : in[1]->data,
                     conv_bias(&p->s, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan as an initializer, the packed weights (when constant) as a blob, and a
 * conv_batched_run call: the very code batched_run runs. */

static anvil_status batched_emit(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    const batched_state *st = state;
    const conv_batched_plan *p = &st->p;
    const conv_shape *s = &p->s;
    CORE_TRY(conv_emit_files_need(e));
    const char *pa = "NULL";
    if (st->pa.data) {
        CORE_TRY(conv_emit_packed(e, "pa", &st->pa, 1, true));
        pa = "pa";
    }
    conv_emit_tile(e, p->k);
    e->code(e, "conv_batched_plan bp;\nmemset(&bp, 0, sizeof bp);\n");
    conv_emit_shape(e, "bp.s", s);
    e->code(e, "bp.k = &gemm_kernel_%s;\nbp.blk = (gemm_blocking){%lld, %lld, %lld};\n", p->k->name,
            (long long)p->blk.mc, (long long)p->blk.kc, (long long)p->blk.nc);
    e->code(e, "bp.threads = %d;\nbp.gemm_ws = %zu;\nbp.col_bytes = %zu;\nbp.c_bytes = %zu;\n",
            p->threads, p->gemm_ws, p->col_bytes, p->c_bytes);
    char x[96], w[96], b[96];
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, st->pa.data ? -1 : 1, w, sizeof w);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    e->code(e,
            "conv_batched_run(&bp, %s, (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (float *)(%s), %s, %s);\n",
            pa, x, w, b, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter batched_emitter = {batched_emit, NULL};

const kern_variant conv_v_batched = {.name = "conv_batched_gemm",
                                     .op = IR_OP_CONV,
                                     .supports = batched_supports,
                                     .workspace_size = batched_ws,
                                     .prepare = batched_prepare,
                                     .release = batched_release,
                                     .run = batched_run,
                                     .emit = &batched_emitter};

/* The same on bf16 tiles, for sessions that accept bf16 (the forward convs of mixed-precision
 * training on small maps); before conv_batched_gemm in the cascade. */
const kern_variant conv_v_batched_bf16 = {.name = "conv_batched_bf16",
                                          .op = IR_OP_CONV,
                                          .needs = KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 |
                                                   KERN_ROUNDS_BF16,
                                          .supports = batched_supports_bf16,
                                          .workspace_size = batched_ws_bf16,
                                          .prepare = batched_prepare_bf16,
                                          .release = batched_release,
                                          .run = batched_run,
                                          .emit = &batched_emitter};
