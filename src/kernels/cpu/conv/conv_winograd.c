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

#include "conv_wino_tmpl.h"

/* The portable transforms, for machines without AVX2 (contracts in conv.h). One body per
 * algorithm: T = tile (4, 5 or 6), M = outputs per tile (2 or 4), S = input columns from one tile
 * to the next (M times the stride). */
#define WINO_DEFINE_IN(NAME, T, M, S, BT)                                                          \
    static void NAME(const float *const *ph, int64_t tiles_x, float *v, const int64_t *off) {      \
        for (int64_t tx = 0; tx < tiles_x; tx++) {                                                 \
            float d[T][T], e[T][T], col[T], o[T];                                                  \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) d[i][j] =                      \
                    ph[i * S + j % S][tx + j / S];                                                 \
                BT(d[i], e[i]);                                                                    \
            }                                                                                      \
            _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = e[i][j];              \
                BT(col, o);                                                                        \
                _Pragma("GCC unroll 6") for (int a = 0; a < T; a++) v[off[a * T + j] + tx] = o[a]; \
            }                                                                                      \
        }                                                                                          \
    }

#define WINO_DEFINE_OUT(NAME, T, M, AT)                                                            \
    static void NAME(const float *mo, const int64_t *off, int64_t tiles_x, float bias,             \
                     float *const *rows) {                                                         \
        for (int64_t tx = 0; tx < tiles_x; tx++) {                                                 \
            float s[T][M], col[T], o[M];                                                           \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                float r[T];                                                                        \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) r[j] =                         \
                    mo[off[i * T + j] + tx];                                                       \
                AT(r, s[i]);                                                                       \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < M; c++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = s[i][c];              \
                AT(col, o);                                                                        \
                _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) rows[r][tx * M + c] =          \
                    o[r] + bias;                                                                   \
            }                                                                                      \
        }                                                                                          \
    }

/* The same per tile over up to 16 output channels, the channel loop innermost so that it is the
 * one vectorized. */
#define WINO_DEFINE_OUTC(NAME, T, M, AT)                                                           \
    static void NAME(const float *mo, const int64_t *off, int64_t nch, const float *bias,          \
                     float *out) {                                                                 \
        for (int64_t o = 0; o < nch; o++) {                                                        \
            float s[T][M], col[T], y[M];                                                           \
            const float b = bias ? bias[o] : 0.0f;                                                 \
            _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) {                                  \
                float r[T];                                                                        \
                _Pragma("GCC unroll 6") for (int j = 0; j < T; j++) r[j] = mo[off[i * T + j] + o]; \
                AT(r, s[i]);                                                                       \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < M; c++) {                                  \
                _Pragma("GCC unroll 6") for (int i = 0; i < T; i++) col[i] = s[i][c];              \
                AT(col, y);                                                                        \
                _Pragma("GCC unroll 4") for (int r = 0; r < M; r++) out[(r * M + c) * 16 + o] =    \
                    y[r] + b;                                                                      \
            }                                                                                      \
        }                                                                                          \
    }

static void wino_split_base(const float *x, int64_t w, int64_t pl, int64_t n, int s, float *ph,
                            int64_t lp) {
    for (int64_t q = 0; q < n; q++)
        ph[q % s * lp + q / s] = q - pl >= 0 && q - pl < w ? x[q - pl] : 0.0f;
}

WINO_DEFINE_IN(wino_in2_base, 4, 2, 2, WINO_BT4)
WINO_DEFINE_IN(wino_in4_base, 6, 4, 4, WINO_BT6)
WINO_DEFINE_IN(wino_in2s_base, 5, 2, 4, WINO_BT5)
WINO_DEFINE_OUT(wino_out2_base, 4, 2, WINO_AT4)
WINO_DEFINE_OUT(wino_out4_base, 6, 4, WINO_AT6)
WINO_DEFINE_OUT(wino_out2s_base, 5, 2, WINO_AT5)
WINO_DEFINE_OUTC(wino_out2c_base, 4, 2, WINO_AT4)
WINO_DEFINE_OUTC(wino_out4c_base, 6, 4, WINO_AT6)
WINO_DEFINE_OUTC(wino_out2sc_base, 5, 2, WINO_AT5)

const conv_wino_fns conv_wino_fns_base = {{wino_in2_base, wino_in4_base, wino_in2s_base},
                                          {wino_out2_base, wino_out4_base, wino_out2s_base},
                                          {wino_out2c_base, wino_out4c_base, wino_out2sc_base},
                                          wino_split_base};

#define WINO_MAX_T 6
#define WINO_MAX_POS (WINO_MAX_T * WINO_MAX_T)

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

typedef struct wino_plan {
    conv_shape s;
    conv_wino_kind kind;
    int m, t, step;                     /* outputs per tile side, tile side, input step per tile */
    int ncls, qmax;                     /* filter classes (GEMMs per block), largest class */
    int pos_cls[WINO_MAX_POS];          /* class of each position of the t x t tile */
    int pos_dup[WINO_MAX_POS];          /* which of its class's q positions it is */
    int cls_q[WINO_MAX_POS];            /* positions per class */
    int64_t tiles_x, tiles_y, rows_blk; /* tile rows per block */
    int64_t wp;                         /* padded input row width */
    int64_t wpa, lp; /* the row rounded up to whole split vectors; each of its phases */
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads;
    bool shared; /* threads split each block's phases instead of taking whole blocks */
    /* The GEMMs run with the block's tiles as rows, M[cls] (q*tiles x Cout) = V[cls]^T U[cls]^T,
     * U packed as the B operand; otherwise Cout is the rows and the tiles the columns. */
    bool tile_rows;
    size_t v_off, mo_off, row_off, out_off, gemm_off, slice; /* per-thread layout, bytes */
} wino_plan;

typedef struct wino_state {
    wino_plan p;
    gemm_packed *u; /* ncls packed U[cls] */
    const conv_wino_fns *fns;
    conv_row_fusion fuse;
} wino_state;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* Floats between consecutive classes of V and M holding n floats each: an odd number of cache
 * lines. The transforms touch all t*t positions of a tile at once, and with a stride of a power
 * of two (512 channels x 16 tiles: 32 KiB) those t*t lines fall in one L1 set, which holds 8:
 * Winograd F(2x2) on a 512-channel 7x7 image spent 384 us per run in its input transform. */
static int64_t pos_stride(int64_t n) {
    return ((n + 15) / 16 | 1) * 16;
}

/* Where each class of a block with ntile tiles starts in V (ch = Cin) or M (ch = Cout); returns
 * the floats all of them take. Class cls holds, for each channel, its q positions' tiles side by
 * side: position (cls, dup) of channel c and tile i is at base[cls] + (c * q + dup) * ntile + i
 * in V and in M with Cout as the rows, at base[cls] + (dup * ntile + i) * Cout + o in tile_rows
 * M. */
static int64_t class_bases(const wino_plan *p, int64_t ntile, int64_t ch, int64_t *base) {
    int64_t off = 0;
    for (int c = 0; c < p->ncls; c++) {
        base[c] = off;
        off += pos_stride(p->cls_q[c] * ch * ntile);
    }
    return off;
}

/* Where position pos of channel c starts in V (ch = Cin) or in M with Cout as the rows (ch =
 * Cout), for a block of ntile tiles: pbase[pos] + c * cstride[pos]; its tiles follow. */
static void pos_offsets(const wino_plan *p, int64_t ntile, int64_t ch, int64_t *pbase,
                        int64_t *cstride) {
    int64_t base[WINO_MAX_POS];
    class_bases(p, ntile, ch, base);
    for (int pos = 0; pos < p->t * p->t; pos++) {
        const int cl = p->pos_cls[pos];
        pbase[pos] = base[cl] + p->pos_dup[pos] * ntile;
        cstride[pos] = p->cls_q[cl] * ntile;
    }
}

/* Output channels per output transform call in tile_rows mode. */
#define WINO_OUT_CH 16

/* Tiles as the GEMM rows where a block has few: with Cout as the rows, 16 tiles fill a third of
 * an 8x48 tile's columns. ResNet-50's 512-channel 7x7 layer (16 tiles), F(2x2), 1 thread:
 * 2.2 -> 1.6 ms. And wherever Cout is at least 128: a block's tiles (whole tile rows, 14 or 28
 * tiles wide in ResNet-50) then fall on the 7- and 14-row register tiles without padding, where
 * as columns they padded 42 to 48; and Cout is the columns, a multiple of 32. ResNet-50, ms,
 * 1 / 2 threads, columns -> rows: 128ch 56->28 stride 2 2.07/1.20 -> 1.99/1.11, 256ch 28->14
 * 1.75/0.95 -> 1.68/0.87, 512ch 14->7 2.90/1.47 -> 2.47/1.26, 128ch 28x28 F(4x4) 0.78/0.42 ->
 * 0.74/0.40, 256ch 14x14 F(4x4) 1.15/0.63 -> 1.05/0.45. With 64 channels the rows lose (56x56
 * F(2x2) 1.26 -> 1.46). ANVIL_WINO_ROWS=0/1 forces either, for experiments. */
static bool wino_tile_rows(const conv_shape *s, int64_t ntile) {
    const char *e = getenv("ANVIL_WINO_ROWS");
    if (e && *e) return *e == '1';
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
    p->tile_rows = wino_tile_rows(s, ntile);
    /* the tuner's tile and KC, where it sets them */
    const gemm_kernel *tile = conv_config_tile(kn, hw);
    const int64_t kc = conv_config_kc(kn);
    if (p->tile_rows) {
        p->k = tile ? tile : conv_gemm_kernel_forced(hw);
        if (!p->k) p->k = gemm_kernel_default(ntile, s->m, s->c, hw);
        p->blk = gemm_blocking_config(p->k, ncol, s->m, s->c, hw, kc, 0, 0);
    } else {
        p->k = tile ? tile : conv_gemm_kernel(s->m, ntile, s->c, hw);
        p->blk = gemm_blocking_config(p->k, s->m, ncol, s->c, hw, kc, 0, 0);
    }
    int64_t base[WINO_MAX_POS];
    size_t off = 0;
    p->v_off = off;
    off += align64((size_t)class_bases(p, ntile, s->c, base) * sizeof(float));
    p->mo_off = off;
    off += align64((size_t)class_bases(p, ntile, s->m, base) * sizeof(float));
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

typedef struct wino_job {
    const wino_state *st;
    const float *x, *b;
    const float *res; /* the fused residual (NCHW, like y), or NULL */
    float *y;
    char *ws;
    int64_t img, ty0, nrows; /* the block the threads share (shared mode) */
} wino_job;

static char *slice_of(const wino_job *j, size_t t) {
    return j->ws + t * j->st->p.slice;
}

/* Input transform of channels [c0, c1) of a block into V (from `vslice`). Each of a channel's
 * input rows of the block (overlapping tile rows share theirs) is split once into the phases of
 * its zero-padded form in the band. */
static void wino_input(const wino_job *j, int64_t img, int64_t ty0, int64_t nrows, int64_t c0,
                       int64_t c1, char *vslice, char *own) {
    const wino_plan *p = &j->st->p;
    const conv_shape *s = &p->s;
    const int t = p->t, tt = t * t, S = p->step;
    const int64_t ntile = nrows * p->tiles_x, ci = s->c, wpa = p->wpa, lp = p->lp;
    float *v = (float *)(vslice + p->v_off), *band = (float *)(own + p->row_off);
    const int64_t nr = nrows * S + t - S, iy0 = ty0 * S - s->pt;
    const conv_wino_in_fn in = j->st->fns->in[p->kind];
    const conv_wino_split_fn split = j->st->fns->split;
    int64_t pbase[WINO_MAX_POS], cstride[WINO_MAX_POS], off[WINO_MAX_POS];
    pos_offsets(p, ntile, ci, pbase, cstride);
    for (int64_t c = c0; c < c1; c++) {
        const float *xc = j->x + (img * ci + c) * s->h * s->w;
        for (int64_t i = 0; i < nr; i++) {
            const int64_t iy = iy0 + i;
            if (iy < 0 || iy >= s->h)
                memset(band + i * wpa, 0, sizeof(float) * (size_t)wpa);
            else
                split(xc + iy * s->w, s->w, s->pl, wpa, S, band + i * wpa, lp);
        }
        for (int64_t r = 0; r < nrows; r++) {
            const float *ph[WINO_MAX_T * 4];
            for (int i = 0; i < t; i++)
                for (int f = 0; f < S; f++) ph[i * S + f] = band + (r * S + i) * wpa + f * lp;
            for (int pos = 0; pos < tt; pos++)
                off[pos] = pbase[pos] + c * cstride[pos] + r * p->tiles_x;
            in(ph, p->tiles_x, v, off);
        }
    }
}

/* Output channels [o0, o1) of class cl's channel GEMM, M[cls] = U[cls] x V[cls]; o0 (and o1
 * unless it is Cout) a multiple of the tile's side along Cout, so the part of U is whole packed
 * panels. */
static void wino_class_gemm(const wino_job *j, int64_t ntile, int cl, int64_t o0, int64_t o1,
                            char *vslice, char *own) {
    const wino_plan *p = &j->st->p;
    const int64_t ci = p->s.c, co = p->s.m, n = p->cls_q[cl] * ntile;
    float *v = (float *)(vslice + p->v_off), *mo = (float *)(vslice + p->mo_off);
    int64_t vb[WINO_MAX_POS], mb[WINO_MAX_POS];
    class_bases(p, ntile, ci, vb);
    class_bases(p, ntile, co, mb);
    gemm_packed u = j->st->u[cl]; /* the panels of [o0, o1) */
    gemm_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.k = ci;
    if (p->tile_rows) {
        u.data += o0 / p->k->nr * ci * p->k->nr;
        u.cols = o1 - o0;
        pr.m = n;
        pr.n = o1 - o0;
        pr.a = v + vb[cl];
        pr.rs_a = 1;
        pr.cs_a = n;
        pr.pb = &u;
        pr.c = mo + mb[cl] + o0;
        pr.ldc = co;
    } else {
        u.data += o0 / p->k->mr * ci * p->k->mr;
        u.rows = o1 - o0;
        pr.m = o1 - o0;
        pr.n = n;
        pr.pa = &u;
        pr.b = v + vb[cl];
        pr.rs_b = n;
        pr.cs_b = 1;
        pr.c = mo + mb[cl] + o0 * n;
        pr.ldc = n;
    }
    pr.ep = gemm_epilogue_none();
    gemm_run_serial(p->k, &p->blk, &pr, own + p->gemm_off);
}

/* Every class's channel GEMM, whole (private mode). */
static void wino_gemms(const wino_job *j, int64_t ntile, char *vslice, char *own) {
    for (int cl = 0; cl < j->st->p.ncls; cl++)
        wino_class_gemm(j, ntile, cl, 0, j->st->p.s.m, vslice, own);
}

/* Output transform of output channels [o0, o1), bias, and the valid part of each tile row; the
 * fusion runs on each output row while it is in L1. */
static void wino_output(const wino_job *j, int64_t img, int64_t ty0, int64_t nrows, int64_t o0,
                        int64_t o1, char *vslice, char *own) {
    const wino_plan *p = &j->st->p;
    const conv_shape *s = &p->s;
    const int m = p->m, tt = p->t * p->t;
    const int64_t ntile = nrows * p->tiles_x, co = s->m;
    const float *mo = (const float *)(vslice + p->mo_off);
    float *outbuf = (float *)(own + p->out_off);
    float *orow[4];
    for (int r = 0; r < m; r++) orow[r] = outbuf + r * p->tiles_x * m;
    const conv_wino_out_fn out = j->st->fns->out[p->kind];
    int64_t pbase[WINO_MAX_POS], cstride[WINO_MAX_POS], off[WINO_MAX_POS];
    pos_offsets(p, ntile, co, pbase, cstride);
    for (int64_t o = o0; o < o1; o++) {
        const float bias = j->b ? j->b[o] : 0.0f;
        const int64_t plane = (img * co + o) * s->oh * s->ow;
        float *yo = j->y + plane;
        for (int64_t r = 0; r < nrows; r++) {
            for (int pos = 0; pos < tt; pos++)
                off[pos] = pbase[pos] + o * cstride[pos] + r * p->tiles_x;
            out(mo, off, p->tiles_x, bias, orow);
            const int64_t oy0 = (ty0 + r) * m;
            for (int rr = 0; rr < m && oy0 + rr < s->oh; rr++) {
                /* one row of ow outputs; the residual row is the output row's twin */
                if (j->st->fuse.on)
                    conv_row_fusion_apply(&j->st->fuse,
                                          j->res ? j->res + plane + (oy0 + rr) * s->ow : NULL,
                                          orow[rr], s->ow);
                memcpy(yo + (oy0 + rr) * s->ow, orow[rr], sizeof(float) * (size_t)s->ow);
            }
        }
    }
}

/* wino_output in tile_rows mode, where M[cls] is tiles x Cout: the transform runs over
 * WINO_OUT_CH output channels of one tile at a time, vectorized along the channels, and scatters
 * the tile into the channels' planes; the fusion then runs over each plane's rows of the block. */
static void wino_output_rows(const wino_job *j, int64_t img, int64_t ty0, int64_t nrows, int64_t o0,
                             int64_t o1, char *vslice, char *own) {
    const wino_plan *p = &j->st->p;
    const conv_shape *s = &p->s;
    const int m = p->m, tt = p->t * p->t;
    const int64_t ntile = nrows * p->tiles_x, co = s->m, plane = s->oh * s->ow;
    const float *mo = (const float *)(vslice + p->mo_off);
    float *ob = (float *)(own + p->out_off);
    const int64_t oy_lo = ty0 * m;
    const int64_t oy_hi = (ty0 + nrows) * m < s->oh ? (ty0 + nrows) * m : s->oh;
    const conv_wino_outc_fn outc = j->st->fns->outc[p->kind];
    int64_t base[WINO_MAX_POS], pbase[WINO_MAX_POS], off[WINO_MAX_POS];
    class_bases(p, ntile, co, base);
    for (int pos = 0; pos < tt; pos++)
        pbase[pos] = base[p->pos_cls[pos]] + p->pos_dup[pos] * ntile * co;
    for (int64_t c0 = o0; c0 < o1; c0 += WINO_OUT_CH) {
        const int64_t nc = o1 - c0 < WINO_OUT_CH ? o1 - c0 : WINO_OUT_CH;
        float *y0 = j->y + (img * co + c0) * plane;
        for (int64_t tl = 0; tl < ntile; tl++) {
            for (int pos = 0; pos < tt; pos++) off[pos] = pbase[pos] + tl * co + c0;
            outc(mo, off, nc, j->b ? j->b + c0 : NULL, ob);
            const int64_t oy0 = (ty0 + tl / p->tiles_x) * m, ox0 = tl % p->tiles_x * m;
            for (int r = 0; r < m && oy0 + r < s->oh; r++)
                for (int c = 0; c < m && ox0 + c < s->ow; c++) {
                    const float *src = ob + (r * m + c) * WINO_OUT_CH;
                    float *dst = y0 + (oy0 + r) * s->ow + ox0 + c;
                    for (int64_t o = 0; o < nc; o++) dst[o * plane] = src[o];
                }
        }
        if (!j->st->fuse.on) continue;
        for (int64_t o = 0; o < nc; o++) {
            const int64_t at = (img * co + c0 + o) * plane + oy_lo * s->ow;
            conv_row_fusion_apply(&j->st->fuse, j->res ? j->res + at : NULL, j->y + at,
                                  (oy_hi - oy_lo) * s->ow);
        }
    }
}

static void wino_out(const wino_job *j, int64_t img, int64_t ty0, int64_t nrows, int64_t o0,
                     int64_t o1, char *vslice, char *own) {
    (j->st->p.tile_rows ? wino_output_rows : wino_output)(j, img, ty0, nrows, o0, o1, vslice, own);
}

/* Private mode: thread t takes whole (image, block) jobs with its own slice. */
static void private_chunk(void *arg, size_t begin, size_t end) {
    const wino_job *j = arg;
    const wino_plan *p = &j->st->p;
    const int64_t nb = (p->tiles_y + p->rows_blk - 1) / p->rows_blk, jobs = p->s.n * nb;
    const int64_t T = p->threads;
    for (size_t t = begin; t < end; t++)
        for (int64_t q = jobs * (int64_t)t / T; q < jobs * ((int64_t)t + 1) / T; q++) {
            const int64_t img = q / nb, ty0 = q % nb * p->rows_blk;
            const int64_t nrows = p->tiles_y - ty0 < p->rows_blk ? p->tiles_y - ty0 : p->rows_blk;
            char *sl = slice_of(j, t);
            wino_input(j, img, ty0, nrows, 0, p->s.c, sl, sl);
            wino_gemms(j, nrows * p->tiles_x, sl, sl);
            wino_out(j, img, ty0, nrows, 0, p->s.m, sl, sl);
        }
}

/* Shared mode: the threads split each phase of one block (V and M in slice 0). */
static void shared_in_chunk(void *arg, size_t begin, size_t end) {
    const wino_job *j = arg;
    const int64_t c = j->st->p.s.c, T = j->st->p.threads;
    for (size_t t = begin; t < end; t++)
        wino_input(j, j->img, j->ty0, j->nrows, c * (int64_t)t / T, c * ((int64_t)t + 1) / T,
                   slice_of(j, 0), slice_of(j, t));
}

/* Where the share of thread t (of T) ends in class cl, as an output channel: the positions, laid
 * end to end class by class, are cut into T equal shares, and a class a cut falls inside is split
 * by output channels in proportion, at the tile's side along Cout. Whole classes only (each U[cls]
 * read by one thread) left ResNet-50's stride-2 layers, 25 positions, at 13 + 12. */
static int64_t share_end(const wino_plan *p, int cl, int64_t before, int64_t t) {
    const int64_t T = p->threads, tt = p->t * p->t, q = p->cls_q[cl], co = p->s.m;
    const int64_t cut = (t + 1) * tt, lo = before * T, hi = (before + q) * T; /* in 1/T positions */
    if (cut <= lo) return 0;
    if (cut >= hi) return co;
    const int64_t unit = p->tile_rows ? p->k->nr : p->k->mr;
    const int64_t o = (co * (cut - lo) / (hi - lo) + unit / 2) / unit * unit;
    return o < co ? o : co;
}

/* Thread t's share of the positions' GEMMs (share_end). */
static void shared_gemm_chunk(void *arg, size_t begin, size_t end) {
    const wino_job *j = arg;
    const wino_plan *p = &j->st->p;
    for (size_t t = begin; t < end; t++)
        for (int cl = 0, before = 0; cl < p->ncls; before += p->cls_q[cl], cl++) {
            const int64_t o0 = t ? share_end(p, cl, before, (int64_t)t - 1) : 0;
            const int64_t o1 = share_end(p, cl, before, (int64_t)t);
            if (o0 < o1)
                wino_class_gemm(j, j->nrows * p->tiles_x, cl, o0, o1, slice_of(j, 0),
                                slice_of(j, t));
        }
}

static void shared_out_chunk(void *arg, size_t begin, size_t end) {
    const wino_job *j = arg;
    const int64_t co = j->st->p.s.m, T = j->st->p.threads;
    for (size_t t = begin; t < end; t++)
        wino_out(j, j->img, j->ty0, j->nrows, co * (int64_t)t / T, co * ((int64_t)t + 1) / T,
                 slice_of(j, 0), slice_of(j, t));
}

static anvil_status wino_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const wino_state *st = state;
    const wino_plan *p = &st->p;
    const float *b = conv_bias(&p->s, in, n_in);
    const float *res = conv_row_fusion_residual(&st->fuse, in, n_in);
    wino_job j = {st, in[0]->data, b, res, out[0]->data, ws, 0, 0, 0};
    if (p->s.n == 0 || p->s.m == 0) return ANVIL_OK;
    if (!p->shared) {
        op_parallel_for(ctx, (size_t)p->threads, private_chunk, &j);
        return ANVIL_OK;
    }
    for (j.img = 0; j.img < p->s.n; j.img++)
        for (j.ty0 = 0; j.ty0 < p->tiles_y; j.ty0 += p->rows_blk) {
            j.nrows = p->tiles_y - j.ty0 < p->rows_blk ? p->tiles_y - j.ty0 : p->rows_blk;
            op_parallel_for(ctx, (size_t)p->threads, shared_in_chunk, &j);
            op_parallel_for(ctx, (size_t)p->threads, shared_gemm_chunk, &j);
            op_parallel_for(ctx, (size_t)p->threads, shared_out_chunk, &j);
        }
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
        NAME,         IR_OP_CONV, 0,          sup_##ID,    ws_##ID, prep_##ID,                     \
        wino_release, wino_run,   conv_fuses, &space_##ID, NULL};

WINO_VARIANT(f2, CONV_WINO_F2, "conv_winograd_f2x2_3x3")
WINO_VARIANT(f4, CONV_WINO_F4, "conv_winograd_f4x4_3x3")
WINO_VARIANT(s2, CONV_WINO_S2, "conv_winograd_f2x2_3x3_s2")
