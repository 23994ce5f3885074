/* Back-to-back fusion (Bolt's persistent kernels, on a CPU's caches): anvil.GemmPair and
 * anvil.ConvPair (ops/nn_common.h) run as one loop over blocks of the shared dimension. For each
 * block, the first product is computed into a per-thread tile that stays in L2 and the second
 * product reads it from there at once, so the intermediate, which two nodes would write to memory
 * whole and read back, never leaves the cache.
 *
 *   gemm_pair_f32  blocks of `rows` rows of X: T = act1(X[rows] W1 + B1) (rows x N0), then
 *                  Y[rows] = epilogue(T W2 + B2). W1 and W2 are packed once as B operands.
 *   conv_pair_f32  per image, blocks of `pixels` output pixels: the first conv's im2col of the
 *                  block is packed straight into B panels (as conv_implicit_gemm does), then
 *                  T = act1(W1 col + B1) (M1 x pixels), then Y[:, pixels] = epilogue(W2 T + B2).
 *                  W1 and W2 are packed once as A operands. The first conv has group 1.
 *
 * Both use anvil's GEMM (gemm_run_serial) for each product, so the tile, its ISA and the
 * epilogues are the GEMM's own. The block size is the tuner's parameter: too small and each
 * block re-reads the weights from L2 for little work, too large and T spills. Whether the pair
 * beats the two nodes at all is the pass's measured decision (passes/fuse_pair.c). */
#include "pair.h"

#include "kernels/cpu/conv/conv.h"
#include "kernels/cpu/family.h"
#include "kernels/fusion.h"
#include "ops/nn_common.h"

#include <stdlib.h>
#include <string.h>

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

static size_t l2_bytes(void) {
    const core_hw *hw = core_hw_get();
    return hw->l2_bytes ? hw->l2_bytes : (size_t)1 << 20;
}

/* The block the tuner asked for (parameter 0), or `dflt`, rounded up to a multiple of `unit`
 * and clipped to [unit, limit rounded up]. */
static int64_t pair_block(const kern_node *kn, int64_t dflt, int64_t unit, int64_t limit) {
    int64_t b = kern_param(kn, 0) > 0 ? kern_param(kn, 0) : dflt;
    const int64_t lim = (limit + unit - 1) / unit * unit;
    b = (b + unit - 1) / unit * unit;
    if (b > lim) b = lim;
    return b < unit ? unit : b;
}

/* Blocks split so that each of `threads` gets some when there are enough of them. */
static int64_t pair_share(int64_t block, int64_t total, int64_t unit, int threads) {
    if (threads > 1 && total < block * threads) {
        int64_t share = (total + threads - 1) / threads;
        share = (share + unit - 1) / unit * unit;
        if (share < block) block = share;
    }
    return block < unit ? unit : block;
}

/* ---- shapes ------------------------------------------------------------------------------ */

static bool gemm_pair_shape(const kern_node *kn, pair_state *p) {
    const ir_node *n = kn->node;
    if (n->op != IR_OP_GEMM_PAIR || kn->n_in < 4 || n->n_inputs < 4) return false;
    const op_tinfo *x = &kn->in[0], *w1 = &kn->in[1], *w2 = &kn->in[3];
    if (!kfam_f32_static(x) || !kfam_f32_static(w1) || !kfam_f32_static(w2) ||
        !kfam_f32_static(&kn->out[0]) || !w1->value || !w2->value || x->shape.rank < 2 ||
        w1->shape.rank != 2 || w2->shape.rank != 2)
        return false;
    p->k = w1->shape.d[0];
    p->n0 = w1->shape.d[1];
    p->n1 = w2->shape.d[1];
    if (x->shape.d[x->shape.rank - 1] != p->k || w2->shape.d[0] != p->n0) return false;
    p->m = (int64_t)(kfam_numel(&x->shape) / (size_t)(p->k ? p->k : 1));
    for (int b = 2; b <= 4; b += 2)
        if (kern_has_input(kn, b) &&
            (!kfam_f32_static(&kn->in[b]) ||
             kfam_numel(&kn->in[b].shape) != (size_t)(b == 2 ? p->n0 : p->n1)))
            return false;
    return p->k > 0 && p->n0 > 0 && p->n1 > 0;
}

static bool conv_pair_shape(const kern_node *kn, pair_state *p) {
    const ir_node *n = kn->node;
    if (n->op != IR_OP_CONV_PAIR || kn->n_in < 4 || !conv_shape_of_pair(kn, &p->s)) return false;
    const conv_shape *s = &p->s;
    const op_tinfo *w2 = &kn->in[3];
    if (s->group != 1 || !kn->in[1].value || !kfam_f32_static(w2) || !w2->value ||
        w2->shape.rank != 4 || w2->shape.d[1] != s->m || w2->shape.d[2] != 1 || w2->shape.d[3] != 1)
        return false;
    p->conv = true;
    p->n0 = s->m;
    p->n1 = w2->shape.d[0];
    p->k = conv_kdim(s);
    if (kern_has_input(kn, 4) &&
        (!kfam_f32_static(&kn->in[4]) || kfam_numel(&kn->in[4].shape) != (size_t)p->n1))
        return false;
    return p->n1 > 0 && s->oh * s->ow > 0;
}

/* The whole plan but the packed weights: kernels, block, blockings, workspace. */
static bool pair_plan(const kern_node *kn, pair_state *p) {
    memset(p, 0, sizeof *p);
    const bool conv = kn->node->op == IR_OP_CONV_PAIR;
    if (conv ? !conv_pair_shape(kn, p) : !gemm_pair_shape(kn, p)) return false;
    const core_hw *hw = core_hw_get();
    const size_t l2 = l2_bytes();
    p->threads = kn->threads > 0 ? kn->threads : 1;
    if (!conv) {
        /* rows whose X, T and Y tiles take about a quarter of L2 */
        const int64_t per_row = (p->k + p->n0 + p->n1) * (int64_t)sizeof(float);
        const int64_t dflt = (int64_t)(l2 / 4) / (per_row ? per_row : 1);
        p->k1 = gemm_kernel_default(p->m, p->n0, p->k, hw);
        p->k2 = gemm_kernel_default(p->m, p->n1, p->n0, hw);
        const int64_t unit = p->k1->mr > p->k2->mr ? p->k1->mr : p->k2->mr;
        p->block = pair_block(kn, dflt < 4 * unit ? 4 * unit : dflt, unit, p->m);
        if (!kern_param(kn, 0)) p->block = pair_share(p->block, p->m, unit, p->threads);
        p->b1 = gemm_blocking_for(kn, p->k1, p->block, p->n0, p->k, hw, 0, 0, 0);
        p->b2 = gemm_blocking_for(kn, p->k2, p->block, p->n1, p->n0, hw, 0, 0, 0);
        p->t_ws = align64((size_t)p->block * (size_t)p->n0 * sizeof(float));
    } else {
        const int64_t pix = p->s.oh * p->s.ow;
        p->k1 = conv_gemm_kernel(kn, p->n0, pix, p->k, hw);
        p->k2 = conv_gemm_kernel(kn, p->n1, pix, p->n0, hw);
        const int64_t unit = p->k1->nr;
        /* the block's packed im2col and T about half of L2 */
        const int64_t per_px = (p->k + p->n0) * (int64_t)sizeof(float);
        int64_t dflt = (int64_t)(l2 / 2) / (per_px ? per_px : 1);
        if (dflt > 1024) dflt = 1024;
        p->block = pair_block(kn, dflt < 2 * unit ? 2 * unit : dflt, unit, pix);
        if (!kern_param(kn, 0) && p->s.n < p->threads)
            p->block = pair_share(p->block, pix, unit, p->threads);
        p->b1 = gemm_blocking_for(kn, p->k1, p->n0, p->block, p->k, hw, 0, 0, 0);
        p->b2 = gemm_blocking_for(kn, p->k2, p->n1, p->block, p->n0, hw, 0, 0, 0);
        p->t_ws = align64((size_t)p->n0 * (size_t)p->block * sizeof(float));
        p->col_ws = align64((size_t)p->block * (size_t)p->k * sizeof(float));
    }
    size_t g1 = gemm_thread_workspace(p->k1, &p->b1), g2 = gemm_thread_workspace(p->k2, &p->b2);
    p->gemm_ws = align64(g1 > g2 ? g1 : g2);
    const ir_fusion *f = kn->node->fusion;
    p->residual = f && f->residual >= 0 && f->residual < kn->n_in ? f->residual : -1;
    p->ep1 = kern_fusion_epilogue(&((const pair_params *)kn->node->params)->first);
    p->ep2 = kern_fusion_epilogue(f);
    return true;
}

/* ---- the variant -------------------------------------------------------------------------- */

static bool pair_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    pair_state p;
    const ir_fusion *f = kn->node->fusion;
    if (f && (f->bias >= 0 || !kern_fusion_gemm_ok(f))) return false;
    return kn->node->params && pair_plan(kn, &p);
}

static size_t pair_workspace(const kern_node *kn) {
    pair_state p;
    if (!pair_plan(kn, &p)) return 0;
    return (size_t)p.threads * (p.gemm_ws + p.t_ws + p.col_ws);
}

static void pair_release(void *state) {
    pair_state *p = state;
    if (!p) return;
    gemm_packed_free(&p->w1);
    gemm_packed_free(&p->w2);
    free(p);
}

static anvil_status pair_prepare(const kern_node *kn, void **state) {
    pair_state *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!pair_plan(kn, p)) {
        free(p);
        return core_err(ANVIL_ERR_INTERNAL, "%s: pair variant prepared for a node it does not take",
                        ir_node_label(kn->node));
    }
    const float *w1 = kn->in[1].value, *w2 = kn->in[3].value;
    anvil_status st;
    if (p->conv) {
        st = gemm_pack_a(p->k1, p->n0, p->k, w1, p->k, 1, &p->w1);
        if (st == ANVIL_OK) st = gemm_pack_a(p->k2, p->n1, p->n0, w2, p->n0, 1, &p->w2);
    } else {
        st = gemm_pack_b(p->k1, p->k, p->n0, w1, p->n0, 1, &p->w1);
        if (st == ANVIL_OK) st = gemm_pack_b(p->k2, p->n0, p->n1, w2, p->n1, 1, &p->w2);
    }
    if (st != ANVIL_OK) {
        pair_release(p);
        return st;
    }
    kern_node_mark_copied(kn, 1);
    kern_node_mark_copied(kn, 3);
    *state = p;
    return ANVIL_OK;
}

static anvil_status pair_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const pair_state *p = state;
    pair_exec(p, in[0]->data, n_in > 2 && in[2] ? in[2]->data : NULL,
              n_in > 4 && in[4] ? in[4]->data : NULL,
              p->residual >= 0 && p->residual < n_in && in[p->residual] ? in[p->residual]->data
                                                                        : NULL,
              out[0]->data, ws, ctx);
    return ANVIL_OK;
}

static bool pair_fuses(const kern_node *kn) {
    (void)kn;
    return true; /* supports() took only fusions the GEMM epilogue applies */
}

/* ---- emitting (anvil compile): the plan as C, then pair_exec, as pair_run calls it ---------- */

static anvil_status pair_emit(const kern_node *kn, const void *state, kern_emit *e) {
    const pair_state *p = state;
    CORE_TRY(conv_emit_files_need(e));
    CORE_TRY(e->need(e, "kernels/cpu/pair/pair_run.c"));
    CORE_TRY(e->include(e, "kernels/cpu/pair/pair.h"));
    CORE_TRY(conv_emit_packed(e, "w1", &p->w1, 1, p->conv));
    CORE_TRY(conv_emit_packed(e, "w2", &p->w2, 1, p->conv));
    conv_emit_tile(e, p->k1);
    conv_emit_tile(e, p->k2);
    e->code(e, "pair_state ps = {0};\nps.conv = %s;\n", p->conv ? "true" : "false");
    if (p->conv) conv_emit_shape(e, "ps.s", &p->s);
    e->code(e, "ps.m = %lld;\nps.k = %lld;\nps.n0 = %lld;\nps.n1 = %lld;\nps.block = %lld;\n",
            (long long)p->m, (long long)p->k, (long long)p->n0, (long long)p->n1,
            (long long)p->block);
    e->code(e, "ps.threads = %d;\nps.k1 = &gemm_kernel_%s;\nps.k2 = &gemm_kernel_%s;\n", p->threads,
            p->k1->name, p->k2->name);
    e->code(e,
            "ps.b1 = (gemm_blocking){%lld, %lld, %lld};\nps.b2 = (gemm_blocking){%lld, %lld, "
            "%lld};\n",
            (long long)p->b1.mc, (long long)p->b1.kc, (long long)p->b1.nc, (long long)p->b2.mc,
            (long long)p->b2.kc, (long long)p->b2.nc);
    e->code(e, "ps.w1 = w1[0];\nps.w2 = w2[0];\n");
    e->code(e, "ps.gemm_ws = %zu;\nps.t_ws = %zu;\nps.col_ws = %zu;\nps.residual = %d;\n",
            p->gemm_ws, p->t_ws, p->col_ws, p->residual);
    kern_emit_epilogue(e, "ep1", &p->ep1, NULL, NULL, NULL);
    kern_emit_epilogue(e, "ep2", &p->ep2, NULL, NULL, NULL);
    e->code(e, "ps.ep1 = ep1;\nps.ep2 = ep2;\n");
    const int n_in = kn->n_in;
    e->code(
        e, "pair_exec(&ps, (const float *)(%s), %s%s%s, %s%s%s, %s%s%s, (float *)(%s), %s, %s);\n",
        e->in(e, 0), n_in > 2 ? "(const float *)(" : "", n_in > 2 ? e->in(e, 2) : "NULL",
        n_in > 2 ? ")" : "", n_in > 4 ? "(const float *)(" : "", n_in > 4 ? e->in(e, 4) : "NULL",
        n_in > 4 ? ")" : "", p->residual >= 0 ? "(const float *)(" : "",
        p->residual >= 0 ? e->in(e, p->residual) : "NULL", p->residual >= 0 ? ")" : "",
        e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter pair_emitter = {pair_emit, NULL};

/* ---- the tuner's parameter: the block --------------------------------------------------------
 */

static int pair_space_values(const kern_node *kn, const core_hw *hw, int i, int32_t *vals,
                             int cap) {
    (void)hw;
    pair_state p;
    if (i != 0 || !pair_plan(kn, &p)) return 0;
    const int64_t extent = p.conv ? p.s.oh * p.s.ow : p.m;
    static const int32_t gemm_rows[] = {32, 64, 128, 256, 512};
    static const int32_t conv_pixels[] = {64, 128, 256, 512, 1024};
    const int32_t *list = p.conv ? conv_pixels : gemm_rows;
    int n = 0;
    for (int k = 0; k < 5 && n < cap; k++)
        if (list[k] <= extent || k == 0) vals[n++] = list[k];
    return n;
}

/* T must fit L2 with room for the rest: a block whose intermediate alone fills L2 is the
 * unfused schedule with extra steps. */
static bool pair_rule_t_fits(const kern_node *kn, const core_hw *hw, const kern_config *c) {
    kern_node k2 = *kn;
    k2.config = c;
    pair_state p;
    const size_t l2 = hw->l2_bytes ? hw->l2_bytes : (size_t)1 << 20;
    return pair_plan(&k2, &p) && p.t_ws <= l2 / 2;
}

static const kern_rule pair_rules[] = {{"intermediate fits half of L2", pair_rule_t_fits}};
static const kern_space gemm_pair_space = {1, {"rows"}, pair_space_values, NULL, pair_rules, 1};
static const kern_space conv_pair_space = {1, {"pixels"}, pair_space_values, NULL, pair_rules, 1};

static const kern_variant v_gemm_pair = {.name = "gemm_pair_f32",
                                         .op = IR_OP_GEMM_PAIR,
                                         .supports = pair_supports,
                                         .workspace_size = pair_workspace,
                                         .prepare = pair_prepare,
                                         .release = pair_release,
                                         .run = pair_run,
                                         .fuses = pair_fuses,
                                         .space = &gemm_pair_space,
                                         .emit = &pair_emitter};

static const kern_variant v_conv_pair = {.name = "conv_pair_f32",
                                         .op = IR_OP_CONV_PAIR,
                                         .supports = pair_supports,
                                         .workspace_size = pair_workspace,
                                         .prepare = pair_prepare,
                                         .release = pair_release,
                                         .run = pair_run,
                                         .fuses = pair_fuses,
                                         .space = &conv_pair_space,
                                         .emit = &pair_emitter};

const kern_variant *const kern_family_pair[] = {&v_gemm_pair, &v_conv_pair, NULL};
