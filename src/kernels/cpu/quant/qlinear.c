/* QLinearMatMul and QLinearConv on the int8 GEMM tiles (gemm.h's kpair 4), as variants
 * "qgemm_i8" and "qconv_i8".
 *
 * Both compute what the reference kernels (ops/quant/matmul_conv.c) compute, bit for bit: the
 * int32 sums of (a - za)(b - zb) are exact either way, and the requantization multiplies them by
 * the same float multiplier and rounds them the same way. The tiles multiply u8 by s8, so:
 *   - B (the constant weights) is packed once as the s8 values w - zw (per column), which a
 *     uint8 weight near its zero point (128, as older quantizers write) also fits; a weight that
 *     does not fit leaves the node to the reference;
 *   - an s8 A is shifted into u8 by +128 (its zero point too), as it is copied;
 *   - the A zero point comes back as a per-column compensation, -za * sum_p (w - zw)[p, j], added
 *     to the int32 sums with the bias before the conversion (gemm_epilogue.col_comp).
 * The float multiplier sa * sb[j] / sy is the epilogue's column scale, and the rows of fp32
 * results are requantized from a thread's scratch, still in L2 (quant_store_avx512).
 *
 * The convolution runs as an implicit GEMM over channels-last rows: each image is first turned to
 * NHWC bytes (the shift of an s8 image folded in), then each thread builds the rows of its block
 * of output pixels (kernel taps x channels, a padded tap filled with the zero point, which adds
 * nothing once the compensation is applied), multiplies them by the packed weights and writes its
 * block's planes of the NCHW output. A 1x1 stride-1 unpadded conv reads the NHWC rows in place. */
#include "kernels/cpu/gemm/gemm.h"
#include "ops/nn_common.h"
#include "quant.h"

#include <stdlib.h>
#include <string.h>

#define NEEDS_I8 (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_VNNI)

/* Input i's constant float32 values broadcast to `want` (one value, or exactly want of them). */
static bool const_scales(const kern_node *kn, int i, int64_t want, float *out) {
    if (!kern_has_input(kn, i)) return false;
    const op_tinfo *t = &kn->in[i];
    if (!t->value || t->dtype != ANVIL_DTYPE_FLOAT32 || !ir_shape_is_static(&t->shape))
        return false;
    const int64_t n = quant_numel(t);
    if (n != 1 && n != want) return false;
    /* constants may be unaligned for their dtype: copied, not dereferenced */
    for (int64_t j = 0; j < want && out; j++)
        memcpy(&out[j], (const char *)t->value + (n == 1 ? 0 : j) * sizeof(float), sizeof(float));
    return true;
}

/* The same for a zero point of dtype dt (absent: zeros). */
static bool const_zps(const kern_node *kn, int i, anvil_dtype dt, int64_t want, int32_t *out) {
    if (!kern_has_input(kn, i)) {
        for (int64_t j = 0; j < want && out; j++) out[j] = 0;
        return true;
    }
    const op_tinfo *t = &kn->in[i];
    if (!t->value || t->dtype != dt || !ir_shape_is_static(&t->shape)) return false;
    const int64_t n = quant_numel(t);
    if (n != 1 && n != want) return false;
    for (int64_t j = 0; j < want && out; j++) {
        const int64_t at = n == 1 ? 0 : j;
        out[j] = dt == ANVIL_DTYPE_INT8 ? ((const int8_t *)t->value)[at]
                                        : ((const uint8_t *)t->value)[at];
    }
    return true;
}

/* Whether every weight (w of dtype dt, n_col zero points from input zi, the column of element i
 * being (i / per) % n_col) lies within the s8 range of its zero point: gemm_pack_b8's condition,
 * checked before a variant claims the node. */
static bool weights_fit(const kern_node *kn, const op_tinfo *w, int zi, int64_t n_col,
                        int64_t per) {
    if (w->dtype == ANVIL_DTYPE_INT8 && !kern_has_input(kn, zi)) return true;
    int32_t *zp = malloc(sizeof(int32_t) * (size_t)n_col);
    bool ok = zp && const_zps(kn, zi, w->dtype, n_col, zp);
    /* s8 weights around zero points of 0 (what quantizers write) fit by their type: no scan of
     * the weights each time the cascade asks */
    bool zero = ok && w->dtype == ANVIL_DTYPE_INT8;
    for (int64_t j = 0; zero && j < n_col; j++) zero = zp[j] == 0;
    if (zero) {
        free(zp);
        return true;
    }
    const int64_t total = quant_numel(w);
    for (int64_t i = 0; ok && i < total; i++) {
        const int32_t v = w->dtype == ANVIL_DTYPE_INT8 ? ((const int8_t *)w->value)[i]
                                                       : ((const uint8_t *)w->value)[i];
        const int32_t d = v - zp[(i / per) % n_col];
        ok = d >= -128 && d <= 127;
    }
    free(zp);
    return ok;
}

/* What both variants keep: the packed weights, the epilogue's columns and the output's format. */
typedef struct q_state {
    const gemm_kernel *k;
    gemm_blocking blk;
    gemm_packed pb;
    float *mult;   /* [n] sa * sb[j] / sy */
    int32_t *comp; /* [n] bias[j] - za * colsum[j] (za shifted for an s8 A), wrapping */
    int64_t m, n, kdim, k4;
    int64_t rows; /* rows of C one block of a thread's work holds */
    int32_t zy;
    bool a_signed, y_signed;
    uint8_t a_fill; /* the A zero point as stored (shifted): a padded tap's value */
    bool a_in_place;
    int threads;
    /* QLinearConv */
    nn_geom g;
    int64_t c_in;
} q_state;

static void q_release(void *state) {
    q_state *s = state;
    if (!s) return;
    gemm_packed_free(&s->pb);
    free(s->mult);
    free(s->comp);
    free(s);
}

/* The rows of C per block: enough for the tile to reuse its B panels, few enough that a block's
 * fp32 results (and its A rows) stay in L2 until they are requantized. Weights larger than half
 * an L2 are streamed from L3 once per block, so they get blocks of up to 1 MiB: ResNet's last
 * 3x3 convs (49 rows, 2.4 MB of weights) read them twice at 256 KiB. */
static int64_t block_rows(const gemm_kernel *k, int64_t m, int64_t n, int64_t k4) {
    const int64_t budget = k4 * n > (512 << 10) ? (1 << 20) : (256 << 10);
    int64_t r = budget / (4 * n + k4);
    r = r / k->mr * k->mr;
    if (r < k->mr) r = k->mr;
    const int64_t all = (m + k->mr - 1) / k->mr * k->mr;
    return r < all ? r : all;
}

/* Packs B ([kdim, n], B[p,j] at b[p*rs + j*cs]) and fills mult and comp; bias may be NULL. */
static anvil_status q_pack(q_state *s, const void *b, bool b_signed, int64_t rs, int64_t cs,
                           const int32_t *zb, const float *sb, float sa, float sy, int32_t za,
                           const void *bias, bool conv_mult) {
    int32_t *colsum = malloc(sizeof(int32_t) * (size_t)s->n);
    s->mult = malloc(sizeof(float) * (size_t)s->n);
    s->comp = malloc(sizeof(int32_t) * (size_t)s->n);
    if (!colsum || !s->mult || !s->comp) {
        free(colsum);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    anvil_status st = gemm_pack_b8(s->k, s->kdim, s->n, b, b_signed, rs, cs, zb, colsum, &s->pb);
    const int32_t za_eff = za + (s->a_signed ? 128 : 0);
    for (int64_t j = 0; st == ANVIL_OK && j < s->n; j++) {
        int32_t b = 0;
        if (bias) memcpy(&b, (const char *)bias + j * sizeof b, sizeof b); /* maybe unaligned */
        s->comp[j] = (int32_t)((uint32_t)b - (uint32_t)za_eff * (uint32_t)colsum[j]);
        /* each reference's own float arithmetic: the conv's in float, the matmul's in double */
        s->mult[j] = conv_mult ? sa * sb[j] / sy : (float)((double)sa * (double)sb[j] / (double)sy);
    }
    s->a_fill = (uint8_t)(za_eff & 0xff);
    free(colsum);
    return st;
}

/* ---- the blocks of rows each thread runs ---------------------------------------------------- */

typedef struct q_job {
    const q_state *s;
    const uint8_t *a; /* QLinearMatMul: A's rows; QLinearConv: the image as NHWC bytes */
    uint8_t *y;
    char *ws;
    size_t ws_stride;
    int slots;
    int64_t parts, part_cols; /* C's columns in parts of part_cols (whole tiles) */
} q_job;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* A thread's scratch: C rows in fp32, A rows in bytes, the GEMM's own. */
static size_t slot_bytes(const q_state *s) {
    return align64((size_t)s->rows * (size_t)s->n * sizeof(float)) +
           align64((size_t)s->rows * (size_t)s->k4) + gemm_thread_workspace(s->k, &s->blk);
}

/* Rows [r0, r0 + m) of A copied with a row stride of k4: shifted into u8, zero past kdim. */
static void copy_rows(const q_state *s, const uint8_t *a, int64_t r0, int64_t m, uint8_t *dst) {
    const uint8_t flip = s->a_signed ? 0x80 : 0;
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *src = a + (r0 + i) * s->kdim;
        uint8_t *d = dst + i * s->k4;
        for (int64_t p = 0; p < s->kdim; p++) d[p] = src[p] ^ flip;
        memset(d + s->kdim, 0, (size_t)(s->k4 - s->kdim));
    }
}

/* Units of work: a block of rows times a part of the columns. Where the rows make fewer blocks
 * than there are threads (a 7x7 map's 49 pixels), the columns are cut too, each part's rows
 * built again: the weights then split among the threads rather than one thread doing it all. */
static void run_blocks(void *arg, size_t begin, size_t end) {
    const q_job *j = arg;
    const q_state *s = j->s;
    const bool conv = s->c_in > 0;
    const int64_t units = (s->m + s->rows - 1) / s->rows * j->parts;
    const int64_t slots = gemm_slots(s->k, s->k4);
    for (size_t t = begin; t < end; t++) {
        char *w = j->ws + t * j->ws_stride;
        float *c = (float *)w;
        uint8_t *arows = (uint8_t *)(w + align64((size_t)s->rows * (size_t)s->n * sizeof(float)));
        void *gws = (char *)arows + align64((size_t)s->rows * (size_t)s->k4);
        for (int64_t u = (int64_t)t; u < units; u += j->slots) {
            const int64_t b = u / j->parts, j0 = u % j->parts * j->part_cols;
            const int64_t r0 = b * s->rows, m = s->m - r0 < s->rows ? s->m - r0 : s->rows;
            const int64_t n = s->n - j0 < j->part_cols ? s->n - j0 : j->part_cols;
            if (n <= 0) continue;
            /* the part's panels of the packed weights (j0 is a multiple of NR) */
            const gemm_packed pb = {s->k, s->k4, n, s->pb.data + j0 * slots};
            gemm_problem p = {.m = m, .n = n, .k = s->k4, .cs_a = 1, .pb = &pb};
            if (s->a_in_place) {
                p.a8 = j->a + r0 * s->k4;
            } else {
                if (conv)
                    quant_im2col_avx512(j->a, s->g.in[0], s->g.in[1], s->c_in, s->g.kernel,
                                        s->g.stride, s->g.pad_begin, s->g.dil, s->g.out[1], r0, m,
                                        s->k4, s->a_fill, arows);
                else
                    copy_rows(s, j->a, r0, m, arows);
                p.a8 = arows;
            }
            p.rs_a = s->k4;
            p.c = c;
            p.ldc = n;
            p.ep = gemm_epilogue_none();
            p.ep.col_scale = s->mult + j0;
            p.ep.col_comp = s->comp + j0;
            gemm_run_serial(s->k, &s->blk, &p, gws);
            if (conv) /* NCHW: channel j's plane holds the block's pixels at r0.. */
                quant_store_avx512(c, n, m, n, s->zy, s->y_signed, j->y + j0 * s->m + r0, 1, s->m);
            else
                quant_store_avx512(c, n, m, n, s->zy, s->y_signed, j->y + r0 * s->n + j0, s->n, 1);
        }
    }
}

/* The threads that run and how the columns are cut (see run_blocks). */
static void job_plan(const q_state *s, op_ctx *ctx, q_job *j) {
    const int64_t blocks = (s->m + s->rows - 1) / s->rows;
    int t = op_ctx_threads(ctx);
    if (t > s->threads) t = s->threads;
    const int64_t nr = s->k->nr, tiles = (s->n + nr - 1) / nr;
    j->parts = blocks >= t ? 1 : (t + blocks - 1) / blocks;
    if (j->parts > tiles) j->parts = tiles;
    j->part_cols = (tiles + j->parts - 1) / j->parts * nr;
    const int64_t units = blocks * j->parts;
    j->slots = units < t ? (int)units : t;
}

/* ---- QLinearMatMul: a [..., M, K] x b [K, N] ------------------------------------------------ */

enum { MM_A, MM_AS, MM_AZ, MM_B, MM_BS, MM_BZ, MM_YS, MM_YZ };

static bool mm_supports(const kern_node *kn, const core_hw *hw) {
    if (kn->n_in < 8 || kn->n_out < 1) return false;
    const op_tinfo *a = &kn->in[MM_A], *b = &kn->in[MM_B], *y = &kn->out[0];
    if (!quant_is_8bit(a->dtype) || !quant_is_8bit(b->dtype) || !quant_is_8bit(y->dtype) ||
        !b->value || !ir_shape_is_static(&a->shape) || !ir_shape_is_static(&b->shape) ||
        !ir_shape_is_static(&y->shape) || a->shape.rank < 2 || b->shape.rank != 2)
        return false;
    const int64_t n = b->shape.d[1];
    if (!const_scales(kn, MM_AS, 1, NULL) || !const_scales(kn, MM_BS, n, NULL) ||
        !const_scales(kn, MM_YS, 1, NULL) || !const_zps(kn, MM_AZ, a->dtype, 1, NULL) ||
        !const_zps(kn, MM_BZ, b->dtype, n, NULL) || !const_zps(kn, MM_YZ, y->dtype, 1, NULL))
        return false;
    return gemm_kernel_default_i8(quant_numel(a) / b->shape.d[0], n, b->shape.d[0], hw) != NULL &&
           weights_fit(kn, b, MM_BZ, n, 1);
}

/* The geometry, the tile and the blocking (prepare's first half; all workspace_size needs). */
static void mm_setup(const kern_node *kn, q_state *s) {
    const op_tinfo *a = &kn->in[MM_A], *b = &kn->in[MM_B];
    s->kdim = b->shape.d[0];
    s->n = b->shape.d[1];
    s->m = quant_numel(a) / (s->kdim > 0 ? s->kdim : 1);
    s->k4 = (s->kdim + 3) / 4 * 4;
    s->a_signed = a->dtype == ANVIL_DTYPE_INT8;
    s->y_signed = kn->out[0].dtype == ANVIL_DTYPE_INT8;
    s->a_in_place = !s->a_signed && s->k4 == s->kdim;
    s->threads = kn->threads > 0 ? kn->threads : 1;
    const core_hw *hw = core_hw_get();
    s->k = gemm_kernel_default_i8(s->m, s->n, s->kdim, hw);
    s->rows = block_rows(s->k, s->m, s->n, s->k4);
    s->blk = gemm_blocking_default(s->k, s->rows, s->n, s->k4, hw);
}

static anvil_status mm_prepare(const kern_node *kn, void **state) {
    q_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    const op_tinfo *a = &kn->in[MM_A], *b = &kn->in[MM_B];
    mm_setup(kn, s);
    float *sb = malloc(sizeof(float) * (size_t)s->n), sa, sy;
    int32_t *zb = malloc(sizeof(int32_t) * (size_t)s->n), za;
    anvil_status st = sb && zb ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    if (st == ANVIL_OK) {
        const_scales(kn, MM_AS, 1, &sa);
        const_scales(kn, MM_BS, s->n, sb);
        const_scales(kn, MM_YS, 1, &sy);
        const_zps(kn, MM_AZ, a->dtype, 1, &za);
        const_zps(kn, MM_BZ, b->dtype, s->n, zb);
        const_zps(kn, MM_YZ, kn->out[0].dtype, 1, &s->zy);
        st = q_pack(s, b->value, b->dtype == ANVIL_DTYPE_INT8, s->n, 1, zb, sb, sa, sy, za, NULL,
                    false);
    }
    free(sb);
    free(zb);
    if (st != ANVIL_OK) {
        q_release(s);
        return st;
    }
    kern_node_mark_copied(kn, MM_B);
    *state = s;
    return ANVIL_OK;
}

/* The threads' blocks, and a convolution's NHWC image before them. */
static size_t q_workspace(const q_state *s) {
    return (size_t)s->threads * align64(slot_bytes(s)) +
           (s->c_in > 0 ? align64((size_t)(s->g.in[0] * s->g.in[1] * s->c_in)) : 0);
}

static size_t mm_workspace(const kern_node *kn) {
    q_state s = {0};
    mm_setup(kn, &s);
    return q_workspace(&s);
}

static anvil_status mm_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    const q_state *s = state;
    if (s->m == 0 || s->n == 0) return ANVIL_OK;
    q_job j = {.s = s, .a = in[MM_A]->data, .y = out[0]->data, .ws = workspace};
    j.ws_stride = align64(slot_bytes(s));
    job_plan(s, ctx, &j);
    op_parallel_for(ctx, (size_t)j.slots, run_blocks, &j);
    return ANVIL_OK;
}

/* ---- QLinearConv: 2-D, one group --------------------------------------------------------------
 */

enum { CV_X, CV_XS, CV_XZ, CV_W, CV_WS, CV_WZ, CV_YS, CV_YZ, CV_B };

static bool cv_geometry(const kern_node *kn, nn_geom *g) {
    const qconv_params *p = kn->node->params;
    const op_tinfo *x = &kn->in[CV_X], *w = &kn->in[CV_W];
    if (!p || p->group != 1 || x->shape.rank != 4 || w->shape.rank != 4) return false;
    return nn_window_resolve(kn->node, &p->win, 2, x->shape.d + 2, w->shape.d + 2, false, g) ==
           ANVIL_OK;
}

static bool cv_supports(const kern_node *kn, const core_hw *hw) {
    if (kn->n_in < 8 || kn->n_out < 1) return false;
    const op_tinfo *x = &kn->in[CV_X], *w = &kn->in[CV_W], *y = &kn->out[0];
    if (!quant_is_8bit(x->dtype) || !quant_is_8bit(w->dtype) || !quant_is_8bit(y->dtype) ||
        !w->value || !ir_shape_is_static(&x->shape) || !ir_shape_is_static(&w->shape) ||
        !ir_shape_is_static(&y->shape))
        return false;
    nn_geom g;
    if (!cv_geometry(kn, &g)) return false;
    const int64_t m = w->shape.d[0];
    if (!const_scales(kn, CV_XS, 1, NULL) || !const_scales(kn, CV_WS, m, NULL) ||
        !const_scales(kn, CV_YS, 1, NULL) || !const_zps(kn, CV_XZ, x->dtype, 1, NULL) ||
        !const_zps(kn, CV_WZ, w->dtype, m, NULL) || !const_zps(kn, CV_YZ, y->dtype, 1, NULL))
        return false;
    if (kern_has_input(kn, CV_B)) {
        const op_tinfo *b = &kn->in[CV_B];
        if (!b->value || b->dtype != ANVIL_DTYPE_INT32 || quant_numel(b) != m) return false;
    }
    return gemm_kernel_default_i8(g.out[0] * g.out[1], m, 0, hw) != NULL &&
           weights_fit(kn, w, CV_WZ, m, quant_numel(w) / m);
}

static anvil_status cv_setup(const kern_node *kn, q_state *s) {
    const op_tinfo *x = &kn->in[CV_X], *w = &kn->in[CV_W];
    if (!cv_geometry(kn, &s->g))
        return core_err(ANVIL_ERR_INTERNAL, "%s: qconv_i8 prepared on a node it does not support",
                        ir_node_label(kn->node));
    const nn_geom *g = &s->g;
    s->c_in = x->shape.d[1];
    s->n = w->shape.d[0];
    s->kdim = s->c_in * g->kernel[0] * g->kernel[1];
    s->k4 = (s->kdim + 3) / 4 * 4;
    s->m = g->out[0] * g->out[1];
    s->a_signed = x->dtype == ANVIL_DTYPE_INT8;
    s->y_signed = kn->out[0].dtype == ANVIL_DTYPE_INT8;
    s->a_in_place = s->kdim == s->c_in && s->k4 == s->kdim && g->stride[0] == 1 &&
                    g->stride[1] == 1 && g->pad_begin[0] == 0 && g->pad_begin[1] == 0 &&
                    g->out[0] == g->in[0] && g->out[1] == g->in[1];
    s->threads = kn->threads > 0 ? kn->threads : 1;
    const core_hw *hw = core_hw_get();
    s->k = gemm_kernel_default_i8(s->m, s->n, s->kdim, hw);
    s->rows = block_rows(s->k, s->m, s->n, s->k4);
    s->blk = gemm_blocking_default(s->k, s->rows, s->n, s->k4, hw);
    return ANVIL_OK;
}

static anvil_status cv_prepare(const kern_node *kn, void **state) {
    q_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    const op_tinfo *x = &kn->in[CV_X], *w = &kn->in[CV_W];
    anvil_status st = cv_setup(kn, s);
    if (st != ANVIL_OK) {
        free(s);
        return st;
    }
    const nn_geom *g = &s->g;
    /* the weights in the rows' (ky, kx, c) order, one output channel per column */
    const int64_t taps = g->kernel[0] * g->kernel[1];
    uint8_t *wr = malloc((size_t)(s->n * s->kdim));
    float *sw = malloc(sizeof(float) * (size_t)s->n), sx, sy;
    int32_t *zw = malloc(sizeof(int32_t) * (size_t)s->n), zx;
    st = wr && sw && zw ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    if (st == ANVIL_OK) {
        const uint8_t *wv = w->value;
        for (int64_t j = 0; j < s->n; j++)
            for (int64_t c = 0; c < s->c_in; c++)
                for (int64_t t = 0; t < taps; t++)
                    wr[j * s->kdim + t * s->c_in + c] = wv[(j * s->c_in + c) * taps + t];
        const_scales(kn, CV_XS, 1, &sx);
        const_scales(kn, CV_WS, s->n, sw);
        const_scales(kn, CV_YS, 1, &sy);
        const_zps(kn, CV_XZ, x->dtype, 1, &zx);
        const_zps(kn, CV_WZ, w->dtype, s->n, zw);
        const_zps(kn, CV_YZ, kn->out[0].dtype, 1, &s->zy);
        const void *bias = kern_has_input(kn, CV_B) ? kn->in[CV_B].value : NULL;
        st =
            q_pack(s, wr, w->dtype == ANVIL_DTYPE_INT8, 1, s->kdim, zw, sw, sx, sy, zx, bias, true);
    }
    free(wr);
    free(sw);
    free(zw);
    if (st != ANVIL_OK) {
        q_release(s);
        return st;
    }
    kern_node_mark_copied(kn, CV_W);
    *state = s;
    return ANVIL_OK;
}

static size_t cv_workspace(const kern_node *kn) {
    q_state s = {0};
    if (cv_setup(kn, &s) != ANVIL_OK) return 0; /* prepare reports the error */
    return q_workspace(&s);
}

typedef struct nhwc_job {
    const uint8_t *x;
    uint8_t *xt;
    int64_t c, hw;
    uint8_t flip;
} nhwc_job;

/* Pixels [16 begin, 16 end) of an NCHW image as NHWC rows, shifted into u8. */
static void to_nhwc(void *arg, size_t begin, size_t end) {
    const nhwc_job *j = arg;
    const int64_t p0 = (int64_t)begin * 16,
                  p1 = (int64_t)end * 16 < j->hw ? (int64_t)end * 16 : j->hw;
    if (p0 < p1)
        quant_nchw_to_nhwc_avx512(j->x + p0, j->c, p1 - p0, j->hw, j->flip, j->xt + p0 * j->c);
}

static anvil_status cv_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    const q_state *s = state;
    if (s->m == 0 || s->n == 0) return ANVIL_OK;
    const op_tensor *x = in[CV_X];
    const int64_t hw = s->g.in[0] * s->g.in[1];
    uint8_t *xt = workspace;
    q_job j = {.s = s, .a = xt, .ws = (char *)workspace + align64((size_t)(hw * s->c_in))};
    j.ws_stride = align64(slot_bytes(s));
    job_plan(s, ctx, &j);
    for (int64_t b = 0; b < x->dims[0]; b++) {
        nhwc_job t = {(const uint8_t *)x->data + b * s->c_in * hw, xt, s->c_in, hw,
                      s->a_signed ? 0x80 : 0};
        op_parallel_for(ctx, (size_t)((hw + 15) / 16), to_nhwc, &t);
        j.y = (uint8_t *)out[0]->data + b * s->n * s->m;
        op_parallel_for(ctx, (size_t)j.slots, run_blocks, &j);
    }
    return ANVIL_OK;
}

static const kern_variant v_qgemm_i8 = {.name = "qgemm_i8",
                                        .op = IR_OP_QLINEARMATMUL,
                                        .needs = NEEDS_I8,
                                        .supports = mm_supports,
                                        .workspace_size = mm_workspace,
                                        .prepare = mm_prepare,
                                        .release = q_release,
                                        .run = mm_run};

static const kern_variant v_qconv_i8 = {.name = "qconv_i8",
                                        .op = IR_OP_QLINEARCONV,
                                        .needs = NEEDS_I8,
                                        .supports = cv_supports,
                                        .workspace_size = cv_workspace,
                                        .prepare = cv_prepare,
                                        .release = q_release,
                                        .run = cv_run};

/* ---- QuantizeLinear / DequantizeLinear per tensor ---------------------------------------------
 */

/* The activations between the QLinear nodes that stay in fp32 (a residual Add, a pool) cross
 * these: per tensor, they are one vector pass (the reference's per-element parameter lookup
 * took longer than the int8 convolutions around them). */
static bool qdq_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    const bool q = kn->node->op == IR_OP_QUANTIZELINEAR;
    const op_tinfo *x = &kn->in[0], *y = &kn->out[0];
    const anvil_dtype narrow = q ? y->dtype : x->dtype;
    if (kn->n_in < 2 || !ir_shape_is_static(&x->shape) || !quant_is_8bit(narrow) ||
        (q ? x->dtype : y->dtype) != ANVIL_DTYPE_FLOAT32)
        return false;
    int64_t block = 0;
    if (ir_attr_int(kn->node, "block_size", 0, &block) != ANVIL_OK || block != 0) return false;
    if (q) {
        int64_t prec = 0;
        if (ir_attr_int(kn->node, "precision", 0, &prec) != ANVIL_OK || prec != 0) return false;
    }
    return const_scales(kn, 1, 1, NULL) && const_zps(kn, 2, narrow, 1, NULL);
}

typedef struct qdq_job {
    const void *x;
    void *y;
    int64_t n;
    float s;
    int32_t z;
    bool q, is_signed;
} qdq_job;

static void qdq_range(void *arg, size_t begin, size_t end) {
    const qdq_job *j = arg;
    const int64_t chunk = (j->n + 63) / 64, b = (int64_t)begin * chunk;
    int64_t e = (int64_t)end * chunk;
    if (e > j->n) e = j->n;
    if (b >= e) return;
    if (j->q)
        quant_f32_avx512((const float *)j->x + b, e - b, j->s, j->z, j->is_signed,
                         (uint8_t *)j->y + b);
    else
        quant_dequant_f32_avx512((const uint8_t *)j->x + b, e - b, j->s, j->z, j->is_signed,
                                 (float *)j->y + b);
}

static anvil_status qdq_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *workspace, op_ctx *ctx) {
    (void)state;
    (void)n_out;
    (void)workspace;
    qdq_job j = {.x = in[0]->data, .y = out[0]->data, .n = (int64_t)op_tensor_numel(in[0])};
    j.q = n->op == IR_OP_QUANTIZELINEAR;
    const op_tensor *narrow = j.q ? out[0] : in[0];
    j.is_signed = narrow->dtype == ANVIL_DTYPE_INT8;
    memcpy(&j.s, in[1]->data, sizeof j.s);
    const op_tensor *zp = n_in > 2 ? in[2] : NULL;
    j.z = !zp ? 0 : j.is_signed ? *(const int8_t *)zp->data : *(const uint8_t *)zp->data;
    /* 64 pieces, enough for any thread count; a small tensor on this thread alone */
    if (j.n >= 4096)
        op_parallel_for(ctx, 64, qdq_range, &j);
    else
        qdq_range(&j, 0, 64);
    return ANVIL_OK;
}

static const kern_variant v_quantize_i8 = {.name = "quantize_avx512",
                                           .op = IR_OP_QUANTIZELINEAR,
                                           .needs = KERN_NEEDS_AVX512,
                                           .supports = qdq_supports,
                                           .run = qdq_run};

static const kern_variant v_dequantize_i8 = {.name = "dequantize_avx512",
                                             .op = IR_OP_DEQUANTIZELINEAR,
                                             .needs = KERN_NEEDS_AVX512,
                                             .supports = qdq_supports,
                                             .run = qdq_run};

const kern_variant *const kern_family_quant[] = {&v_qgemm_i8,
                                                 &v_qconv_i8,
                                                 &v_quantize_i8,
                                                 &v_dequantize_i8,
                                                 &quant_variant_maxpool,
                                                 &quant_variant_add,
                                                 &quant_variant_dwconv,
                                                 NULL};
