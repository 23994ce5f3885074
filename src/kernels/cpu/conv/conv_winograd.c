/* Winograd convolutions: conv_winograd_f2x2_3x3 and conv_winograd_f4x4_3x3 (3x3, stride 1), and
 * conv_winograd_f2x2_3x3_s2 (3x3, stride 2); dilation 1, group 1, any pads.
 *
 * An m x m block of outputs comes from a t x t input tile as
 *   Y = A^T [ (G g G^T) .* (B^T d B) ] A,
 * summed over input channels: F(2x2) m = 2, t = 4; F(4x4) m = 4, t = 6; and for stride 2 m = 2,
 * t = 5, from the stride's two phases: the even input columns meet the taps w0 and w2, a 2-tap
 * filter that F(2,2) computes from 3 points, (x0 - x2) w0, x2 (w0 + w2), (x4 - x2) w2; the odd
 * ones meet w1 alone, x1 w1 and x3 w1. So 2 outputs take 5 multiplies instead of 6, and a 2x2
 * block 25 instead of 36 (1.44x fewer), with transforms of additions only.
 *
 * The elementwise product summed over channels is a GEMM per position of the t x t tile. Positions
 * whose transformed filters are equal (at stride 2, rows and columns 3 and 4 of G are both w1)
 * share one filter class and one GEMM, with their tiles side by side: 16 GEMMs over 25 positions,
 * and 16/9 instead of 25/9 times the filter bytes. Per class:
 *   M[cls] (Cout x q*tiles) = U[cls] (Cout x Cin) x V[cls] (Cin x q*tiles),
 * q the class's number of positions; or, where a block has few tiles, with the tiles as the rows
 * (wino_plan.tile_rows). U is transformed and packed once in prepare; per image, blocks of whole
 * tile rows are transformed into V (sized so V and M stay near L2), multiplied with anvil's GEMM,
 * and transformed back with the bias added; the node's fused residual and activation (ir_fusion)
 * are applied to the outputs while they are still in L1. With at least as many images as threads
 * each thread takes whole (image, block) jobs with its own buffers; otherwise the threads share
 * every block, phase by phase (wino_plan.shared).
 *
 * Accuracy: F(2x2) multiplies by 1/2 at most and the stride-2 form only adds, both within a few
 * ulps of direct convolution; F(4x4)'s matrices have entries up to 8 and 1/24, which costs about
 * two decimal digits (the test uses rtol 1e-3 for it against 1e-4 for the others). */
#include "conv.h"

#include <stdlib.h>
#include <string.h>

#define WINO_MAX_T CONV_WINO_MAX_T
#define WINO_MAX_POS CONV_WINO_MAX_POS
#define WINO_OUT_CH CONV_WINO_OUT_CH

/* The three algorithms' constants. G's rows are the filter classes of one dimension; pos_cls maps
 * a position of one dimension to its class. */
typedef struct wino_algo {
    int m, t, stride;
    int ncls1; /* classes per dimension (rows of g) */
    const double (*g)[3];
    int pos_cls[WINO_MAX_T];
} wino_algo;

static const double g_f2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
static const double g_f4[6][3] = {{0.25, 0, 0},
                                  {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                  {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                  {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                  {0, 0, 1}};
static const double g_s2[4][3] = {{1, 0, 0}, {1, 0, 1}, {0, 0, 1}, {0, 1, 0}};

static const wino_algo algos[CONV_WINO_KINDS] = {
    [CONV_WINO_F2] = {2, 4, 1, 4, g_f2, {0, 1, 2, 3}},
    [CONV_WINO_F4] = {4, 6, 1, 6, g_f4, {0, 1, 2, 3, 4, 5}},
    [CONV_WINO_S2] = {2, 5, 2, 4, g_s2, {0, 1, 2, 3, 3}},
};

/* The plan (conv_wino_plan) is plain data in conv_layout.h, with the run (conv_wino_run in
 * conv_wino_run.c, with the portable transforms) that the runtime and the libraries `anvil
 * compile` emits share; the state adds the transformed filters. */
typedef conv_wino_plan wino_plan;

typedef struct wino_state {
    wino_plan p;
    gemm_packed *u; /* ncls packed U[cls] */
    const conv_wino_fns *fns;
    conv_row_fusion fuse;
} wino_state;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* Tiles as the GEMM rows where a block has few: with Cout as the rows, 16 tiles fill a third of
 * an 8x48 tile's columns. ResNet-50's 512-channel 7x7 layer (16 tiles), F(2x2), 1 thread:
 * 2.2 -> 1.6 ms. And wherever Cout is at least 128: a block's tiles (whole tile rows, 14 or 28
 * tiles wide in ResNet-50) then fall on the 7- and 14-row register tiles without padding, where
 * as columns they padded 42 to 48; and Cout is the columns, a multiple of 32. ResNet-50, ms,
 * 1 / 2 threads, columns -> rows: 128ch 56->28 stride 2 2.07/1.20 -> 1.99/1.11, 256ch 28->14
 * 1.75/0.95 -> 1.68/0.87, 512ch 14->7 2.90/1.47 -> 2.47/1.26, 128ch 28x28 F(4x4) 0.78/0.42 ->
 * 0.74/0.40, 256ch 14x14 F(4x4) 1.15/0.63 -> 1.05/0.45. With 64 channels the rows lose (56x56
 * F(2x2) 1.26 -> 1.46). The knob wino_rows (ANVIL_WINO_ROWS=0/1) forces either, for experiments. */
static bool wino_tile_rows(const kern_node *kn, const conv_shape *s, int64_t ntile) {
    const int forced = kern_knobs_of(kn)->wino_rows;
    if (forced) return forced == 1;
    return ntile <= 32 || s->m >= 128;
}

static bool wino_plan_of(const kern_node *kn, conv_wino_kind kind, wino_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    const wino_algo *a = &algos[kind];
    if (!conv_shape_of(kn, s)) return false;
    if (s->kh != 3 || s->kw != 3 || s->sh != a->stride || s->sw != a->stride || s->dh != 1 ||
        s->dw != 1 || s->group != 1)
        return false;
    /* U is built from the weights in prepare. */
    if (!kn->in[1].value) return false;
    const core_hw *hw = core_hw_get();
    const int m = a->m, t = a->t;
    p->kind = kind;
    p->m = m;
    p->t = t;
    p->step = m * a->stride;
    p->ncls = a->ncls1 * a->ncls1;
    for (int i = 0; i < t; i++)
        for (int j = 0; j < t; j++) {
            const int ci = a->pos_cls[i], cj = a->pos_cls[j];
            p->pos_cls[i * t + j] = ci * a->ncls1 + cj;
            p->cls_q[ci * a->ncls1 + cj]++;
        }
    for (int pos = 0, seen[WINO_MAX_POS] = {0}; pos < t * t; pos++)
        p->pos_dup[pos] = seen[p->pos_cls[pos]]++;
    for (int c = 0; c < p->ncls; c++)
        if (p->cls_q[c] > p->qmax) p->qmax = p->cls_q[c];
    p->threads = kn->threads > 0 ? kn->threads : 1;
    p->tiles_x = (s->ow + m - 1) / m;
    p->tiles_y = (s->oh + m - 1) / m;
    const int64_t tt = (int64_t)t * t;
    /* V and M of a block together about the size of L2, so they stay there between the phases;
     * but every block streams all of U, so a block is never smaller than U (ncls*c*m floats
     * against tt*(c+m) per tile): with deep layers U is the larger stream. */
    size_t l2 = hw->l2_bytes ? hw->l2_bytes : (size_t)1 << 20;
    int64_t per_tile = tt * (s->c + s->m) * (int64_t)sizeof(float);
    int64_t nb = (int64_t)l2 / (per_tile > 0 ? per_tile : 1);
    const int64_t nb_u = s->c + s->m > 0 ? p->ncls * s->c * s->m / (tt * (s->c + s->m)) : 0;
    const bool u_bound = nb < nb_u;
    if (u_bound) nb = nb_u;
    int64_t rows = (nb + p->tiles_x - 1) / p->tiles_x;
    if (rows < 1) rows = 1;
    /* Fewer images than threads: when U is the larger stream the threads share each block,
     * splitting the input transform by channels, the GEMMs into equal shares of the positions
     * (share_end: each part of U read by one thread) and the output transform by output
     * channels, at the cost of three fork-joins per block; otherwise each thread takes whole blocks
     * (no synchronisation), made small enough that every thread gets some. */
    p->shared = p->threads > 1 && s->n < p->threads && u_bound;
    if (p->threads > 1 && s->n < p->threads && !u_bound) {
        /* Equal shares of tile rows: one block per thread where that overfills L2 by at most a
         * quarter (ResNet-50's 128-channel stride-2 layer, 14 tile rows, 2 threads: blocks of
         * 7 instead of 6, 6 and 2), else the largest block that splits evenly. */
        const int64_t tr = p->tiles_y * s->n, T = p->threads;
        int64_t share = (tr + T - 1) / T;
        for (int64_t k = 2; share > rows + rows / 4 && k <= tr; k++)
            share = (tr + T * k - 1) / (T * k);
        rows = share;
    }
    if (rows > p->tiles_y) rows = p->tiles_y;
    if (rows < 1) rows = 1;
    p->rows_blk = rows;
    const int64_t ntile = rows * p->tiles_x, ncol = p->qmax * ntile;
    p->wp = p->tiles_x * p->step + (t - p->step);
    p->wpa = (p->wp + 16 * p->step - 1) / (16 * p->step) * (16 * p->step);
    p->lp = p->wpa / p->step;
    p->tile_rows = wino_tile_rows(kn, s, ntile);
    /* the tuner's tile and KC, where it sets them */
    const gemm_kernel *tile = conv_config_tile(kn, hw);
    const int64_t kc = conv_config_kc(kn);
    if (p->tile_rows) {
        p->k = tile ? tile : conv_gemm_kernel_forced(kn, hw);
        if (!p->k) p->k = gemm_kernel_default(ntile, s->m, s->c, hw);
        p->blk = gemm_blocking_for(kn, p->k, ncol, s->m, s->c, hw, kc, 0, 0);
    } else {
        p->k = tile ? tile : conv_gemm_kernel(kn, s->m, ntile, s->c, hw);
        p->blk = gemm_blocking_for(kn, p->k, s->m, ncol, s->c, hw, kc, 0, 0);
    }
    int64_t base[WINO_MAX_POS];
    size_t off = 0;
    p->v_off = off;
    off += align64((size_t)conv_wino_class_bases(p, ntile, s->c, base) * sizeof(float));
    p->mo_off = off;
    off += align64((size_t)conv_wino_class_bases(p, ntile, s->m, base) * sizeof(float));
    p->row_off = off;
    off += align64((size_t)((rows * p->step + t - p->step) * p->wpa) * sizeof(float));
    p->out_off = off;
    off += align64((size_t)(m * m * (p->tiles_x > WINO_OUT_CH ? p->tiles_x : WINO_OUT_CH)) *
                   sizeof(float));
    p->gemm_off = off;
    off += align64(gemm_thread_workspace(p->k, &p->blk));
    p->slice = off;
    return true;
}

static void wino_release(void *state) {
    wino_state *st = state;
    if (!st) return;
    if (st->u)
        for (int i = 0; i < st->p.ncls; i++) gemm_packed_free(&st->u[i]);
    free(st->u);
    free(st);
}

/* U[cls][o][c] = (G g G^T)[cls] for every filter g = W[o][c], in double. */
static void transform_weights(const wino_plan *p, const float *w, float *u) {
    const wino_algo *a = &algos[p->kind];
    const double(*g)[3] = a->g;
    const int n1 = a->ncls1;
    const int64_t co = p->s.m, ci = p->s.c;
    for (int64_t o = 0; o < co; o++)
        for (int64_t c = 0; c < ci; c++) {
            const float *f = w + (o * ci + c) * 9;
            double gf[WINO_MAX_T][3];
            for (int i = 0; i < n1; i++)
                for (int j = 0; j < 3; j++)
                    gf[i][j] = g[i][0] * f[j] + g[i][1] * f[3 + j] + g[i][2] * f[6 + j];
            for (int i = 0; i < n1; i++)
                for (int j = 0; j < n1; j++) {
                    double acc = gf[i][0] * g[j][0] + gf[i][1] * g[j][1] + gf[i][2] * g[j][2];
                    u[((int64_t)(i * n1 + j) * co + o) * ci + c] = (float)acc;
                }
        }
}

static anvil_status wino_prepare(const kern_node *kn, conv_wino_kind kind, void **state) {
    wino_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!wino_plan_of(kn, kind, &st->p)) {
        free(st);
        return conv_prepare_unsupported(kn, "Winograd variant");
    }
    const core_hw *hw = core_hw_get();
    st->fns = (hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq && hw->os_avx512)
                  ? &conv_wino_fns_avx512
              : (hw->avx2 && hw->fma) ? &conv_wino_fns_avx2
                                      : &conv_wino_fns_base;
    const wino_plan *p = &st->p;
    const int64_t per = p->s.m * p->s.c;
    anvil_status e = ANVIL_ERR_OUT_OF_MEMORY;
    float *u = malloc(sizeof(float) * (size_t)(p->ncls * per > 0 ? p->ncls * per : 1));
    st->u = core_calloc((size_t)p->ncls, sizeof *st->u);
    if (!u || !st->u) goto fail;
    transform_weights(p, kn->in[1].value, u);
    for (int i = 0; i < p->ncls; i++) {
        e = p->tile_rows ? gemm_pack_b(p->k, p->s.c, p->s.m, u + i * per, 1, p->s.c, &st->u[i])
                         : gemm_pack_a(p->k, p->s.m, p->s.c, u + i * per, p->s.c, 1, &st->u[i]);
        if (e != ANVIL_OK) goto fail;
    }
    free(u);
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &st->fuse);
    *state = st;
    return ANVIL_OK;
fail:
    free(u);
    wino_release(st);
    return e;
}

static anvil_status wino_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const wino_state *st = state;
    conv_wino_run(&st->p, st->u, st->fns, &st->fuse, in[0]->data, conv_bias(&st->p.s, in, n_in),
                  conv_row_fusion_residual(&st->fuse, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

/* The channel GEMMs of a Winograd variant for kn under configuration c (its space's view). */
static bool wino_view(const kern_node *kn, const kern_config *c, conv_wino_kind kind,
                      conv_gemm_view *v) {
    kern_node k2 = *kn;
    k2.config = c;
    wino_plan p;
    if (!wino_plan_of(&k2, kind, &p)) return false;
    v->k = p.k;
    v->blk = p.blk;
    v->kdim = p.s.c;
    v->a_seg = 0;
    return true;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan as an initializer, the transformed filters as a blob, and a conv_wino_run call with
 * the transforms prepare chose: the very code wino_run runs. */

static void emit_ints(kern_emit *e, const char *var, const int *v, int n) {
    e->code(e, "{\n    static const int v_[%d] = {", n);
    for (int i = 0; i < n; i++) e->code(e, "%s%d", i ? ", " : "", v[i]);
    e->code(e, "};\n    memcpy(%s, v_, sizeof v_);\n}\n", var);
}

static anvil_status wino_emit(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    const wino_state *st = state;
    const wino_plan *p = &st->p;
    CORE_TRY(conv_emit_files_need(e));
    CORE_TRY(e->need(e, "kernels/cpu/conv/conv_wino_run.c"));
    CORE_TRY(e->need(e, "kernels/cpu/conv/conv_wino_tmpl.h"));
    const char *fns = "conv_wino_fns_base";
    if (st->fns != &conv_wino_fns_base) {
        const bool w = st->fns == &conv_wino_fns_avx512;
        fns = w ? "conv_wino_fns_avx512" : "conv_wino_fns_avx2";
        CORE_TRY(e->need(e, "kernels/cpu/conv/conv_wino_vec_tmpl.h"));
        CORE_TRY(e->need(e, w ? "kernels/cpu/conv/conv_vec_avx512.h"
                              : "kernels/cpu/conv/conv_vec_avx2.h"));
        CORE_TRY(e->need(e, w ? "kernels/cpu/conv/conv_wino_avx512.c"
                              : "kernels/cpu/conv/conv_wino_avx2.c"));
    }
    CORE_TRY(conv_emit_packed(e, "u", st->u, p->ncls, !p->tile_rows));
    CORE_TRY(conv_emit_row_fusion(e, "fuse", &st->fuse));
    e->code(e, "conv_wino_plan wp;\nmemset(&wp, 0, sizeof wp);\n");
    conv_emit_shape(e, "wp.s", &p->s);
    e->code(e,
            "wp.kind = %d;\nwp.m = %d;\nwp.t = %d;\nwp.step = %d;\nwp.ncls = %d;\nwp.qmax = "
            "%d;\n",
            (int)p->kind, p->m, p->t, p->step, p->ncls, p->qmax);
    emit_ints(e, "wp.pos_cls", p->pos_cls, CONV_WINO_MAX_POS);
    emit_ints(e, "wp.pos_dup", p->pos_dup, CONV_WINO_MAX_POS);
    emit_ints(e, "wp.cls_q", p->cls_q, CONV_WINO_MAX_POS);
    e->code(e,
            "wp.tiles_x = %lld;\nwp.tiles_y = %lld;\nwp.rows_blk = %lld;\nwp.wp = %lld;\nwp.wpa "
            "= %lld;\nwp.lp = %lld;\n",
            (long long)p->tiles_x, (long long)p->tiles_y, (long long)p->rows_blk, (long long)p->wp,
            (long long)p->wpa, (long long)p->lp);
    e->code(e, "wp.k = &gemm_kernel_%s;\nwp.blk = (gemm_blocking){%lld, %lld, %lld};\n", p->k->name,
            (long long)p->blk.mc, (long long)p->blk.kc, (long long)p->blk.nc);
    e->code(e, "wp.threads = %d;\nwp.shared = %s;\nwp.tile_rows = %s;\n", p->threads,
            p->shared ? "true" : "false", p->tile_rows ? "true" : "false");
    e->code(e,
            "wp.v_off = %zu;\nwp.mo_off = %zu;\nwp.row_off = %zu;\nwp.out_off = %zu;\n"
            "wp.gemm_off = %zu;\nwp.slice = %zu;\n",
            p->v_off, p->mo_off, p->row_off, p->out_off, p->gemm_off, p->slice);
    char x[96], b[96], r[96];
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, p->s.has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, st->fuse.residual, r, sizeof r);
    e->code(e,
            "conv_wino_run(&wp, u, &%s, &fuse, (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (float *)(%s), %s, %s);\n",
            fns, x, b, r, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter wino_emitter = {wino_emit, NULL};

#define WINO_VARIANT(ID, KIND, NAME)                                                               \
    static bool sup_##ID(const kern_node *kn, const core_hw *hw) {                                 \
        (void)hw;                                                                                  \
        wino_plan p;                                                                               \
        return wino_plan_of(kn, KIND, &p);                                                         \
    }                                                                                              \
    static size_t ws_##ID(const kern_node *kn) {                                                   \
        wino_plan p;                                                                               \
        return wino_plan_of(kn, KIND, &p) ? (size_t)p.threads * p.slice : 0;                       \
    }                                                                                              \
    static anvil_status prep_##ID(const kern_node *kn, void **state) {                             \
        return wino_prepare(kn, KIND, state);                                                      \
    }                                                                                              \
    static bool view_##ID(const kern_node *kn, const kern_config *c, conv_gemm_view *v) {          \
        return wino_view(kn, c, KIND, v);                                                          \
    }                                                                                              \
    CONV_SPACE(space_##ID, view_##ID);                                                             \
    const kern_variant conv_v_winograd_##ID = {                                                    \
        NAME,         IR_OP_CONV, 0,          sup_##ID,    ws_##ID,       prep_##ID,               \
        wino_release, wino_run,   conv_fuses, &space_##ID, &wino_emitter, NULL};

WINO_VARIANT(f2, CONV_WINO_F2, "conv_winograd_f2x2_3x3")
WINO_VARIANT(f4, CONV_WINO_F4, "conv_winograd_f4x4_3x3")
WINO_VARIANT(s2, CONV_WINO_S2, "conv_winograd_f2x2_3x3_s2")
