/* The run-time half of the Winograd variants (conv_layout.h: conv_wino_run) and the portable
 * transforms (conv_wino_fns_base); conv_winograd.c plans them and transforms the weights. Shared
 * by anvil's variants and the libraries `anvil compile` writes, which copy this file verbatim: it
 * sees only what the emitter's shim declares. */
#include "conv_layout.h"

#include <string.h>

#include "conv_wino_tmpl.h"

#define WINO_MAX_T CONV_WINO_MAX_T
#define WINO_MAX_POS CONV_WINO_MAX_POS
#define WINO_OUT_CH CONV_WINO_OUT_CH

typedef conv_wino_plan wino_plan;

/* The portable transforms, for machines without AVX2 (contracts in conv_layout.h). One body per
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

/* Floats between consecutive classes of V and M holding n floats each: an odd number of cache
 * lines. The transforms touch all t*t positions of a tile at once, and with a stride of a power
 * of two (512 channels x 16 tiles: 32 KiB) those t*t lines fall in one L1 set, which holds 8:
 * Winograd F(2x2) on a 512-channel 7x7 image spent 384 us per run in its input transform. */
static int64_t pos_stride(int64_t n) {
    return ((n + 15) / 16 | 1) * 16;
}

/* Class cls holds, for each channel, its q positions' tiles side by
 * side: position (cls, dup) of channel c and tile i is at base[cls] + (c * q + dup) * ntile + i
 * in V and in M with Cout as the rows, at base[cls] + (dup * ntile + i) * Cout + o in tile_rows
 * M. */
int64_t conv_wino_class_bases(const conv_wino_plan *p, int64_t ntile, int64_t ch, int64_t *base) {
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
    conv_wino_class_bases(p, ntile, ch, base);
    for (int pos = 0; pos < p->t * p->t; pos++) {
        const int cl = p->pos_cls[pos];
        pbase[pos] = base[cl] + p->pos_dup[pos] * ntile;
        cstride[pos] = p->cls_q[cl] * ntile;
    }
}

typedef struct wino_job {
    const wino_plan *p;
    const gemm_packed *u;
    const conv_wino_fns *fns;
    const conv_row_fusion *fuse;
    const float *x, *b;
    const float *res; /* the fused residual (NCHW, like y), or NULL */
    float *y;
    char *ws;
    int64_t img, ty0, nrows; /* the block the threads share (shared mode) */
} wino_job;

static char *slice_of(const wino_job *j, size_t t) {
    return j->ws + t * j->p->slice;
}

/* Input transform of channels [c0, c1) of a block into V (from `vslice`). Each of a channel's
 * input rows of the block (overlapping tile rows share theirs) is split once into the phases of
 * its zero-padded form in the band. */
static void wino_input(const wino_job *j, int64_t img, int64_t ty0, int64_t nrows, int64_t c0,
                       int64_t c1, char *vslice, char *own) {
    const wino_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int t = p->t, tt = t * t, S = p->step;
    const int64_t ntile = nrows * p->tiles_x, ci = s->c, wpa = p->wpa, lp = p->lp;
    float *v = (float *)(vslice + p->v_off), *band = (float *)(own + p->row_off);
    const int64_t nr = nrows * S + t - S, iy0 = ty0 * S - s->pt;
    const conv_wino_in_fn in = j->fns->in[p->kind];
    const conv_wino_split_fn split = j->fns->split;
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
    const wino_plan *p = j->p;
    const int64_t ci = p->s.c, co = p->s.m, n = p->cls_q[cl] * ntile;
    float *v = (float *)(vslice + p->v_off), *mo = (float *)(vslice + p->mo_off);
    int64_t vb[WINO_MAX_POS], mb[WINO_MAX_POS];
    conv_wino_class_bases(p, ntile, ci, vb);
    conv_wino_class_bases(p, ntile, co, mb);
    gemm_packed u = j->u[cl]; /* the panels of [o0, o1) */
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
    for (int cl = 0; cl < j->p->ncls; cl++)
        wino_class_gemm(j, ntile, cl, 0, j->p->s.m, vslice, own);
}

/* Output transform of output channels [o0, o1), bias, and the valid part of each tile row; the
 * fusion runs on each output row while it is in L1. */
static void wino_output(const wino_job *j, int64_t img, int64_t ty0, int64_t nrows, int64_t o0,
                        int64_t o1, char *vslice, char *own) {
    const wino_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int m = p->m, tt = p->t * p->t;
    const int64_t ntile = nrows * p->tiles_x, co = s->m;
    const float *mo = (const float *)(vslice + p->mo_off);
    float *outbuf = (float *)(own + p->out_off);
    float *orow[4];
    for (int r = 0; r < m; r++) orow[r] = outbuf + r * p->tiles_x * m;
    const conv_wino_out_fn out = j->fns->out[p->kind];
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
                if (j->fuse->on)
                    conv_row_fusion_apply(j->fuse,
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
    const wino_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int m = p->m, tt = p->t * p->t;
    const int64_t ntile = nrows * p->tiles_x, co = s->m, plane = s->oh * s->ow;
    const float *mo = (const float *)(vslice + p->mo_off);
    float *ob = (float *)(own + p->out_off);
    const int64_t oy_lo = ty0 * m;
    const int64_t oy_hi = (ty0 + nrows) * m < s->oh ? (ty0 + nrows) * m : s->oh;
    const conv_wino_outc_fn outc = j->fns->outc[p->kind];
    int64_t base[WINO_MAX_POS], pbase[WINO_MAX_POS], off[WINO_MAX_POS];
    conv_wino_class_bases(p, ntile, co, base);
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
        if (!j->fuse->on) continue;
        for (int64_t o = 0; o < nc; o++) {
            const int64_t at = (img * co + c0 + o) * plane + oy_lo * s->ow;
            conv_row_fusion_apply(j->fuse, j->res ? j->res + at : NULL, j->y + at,
                                  (oy_hi - oy_lo) * s->ow);
        }
    }
}

static void wino_out(const wino_job *j, int64_t img, int64_t ty0, int64_t nrows, int64_t o0,
                     int64_t o1, char *vslice, char *own) {
    (j->p->tile_rows ? wino_output_rows : wino_output)(j, img, ty0, nrows, o0, o1, vslice, own);
}

/* Private mode: thread t takes whole (image, block) jobs with its own slice. */
static void private_chunk(void *arg, size_t begin, size_t end) {
    const wino_job *j = arg;
    const wino_plan *p = j->p;
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
    const int64_t c = j->p->s.c, T = j->p->threads;
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
    const wino_plan *p = j->p;
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
    const int64_t co = j->p->s.m, T = j->p->threads;
    for (size_t t = begin; t < end; t++)
        wino_out(j, j->img, j->ty0, j->nrows, co * (int64_t)t / T, co * ((int64_t)t + 1) / T,
                 slice_of(j, 0), slice_of(j, t));
}

void conv_wino_run(const conv_wino_plan *p, const gemm_packed *u, const conv_wino_fns *fns,
                   const conv_row_fusion *fuse, const float *x, const float *b, const float *res,
                   float *y, void *ws, op_ctx *ctx) {
    wino_job j = {p, u, fns, fuse, x, b, res, y, ws, 0, 0, 0};
    if (p->s.n == 0 || p->s.m == 0) return;
    if (!p->shared) {
        op_parallel_for(ctx, (size_t)p->threads, private_chunk, &j);
        return;
    }
    for (j.img = 0; j.img < p->s.n; j.img++)
        for (j.ty0 = 0; j.ty0 < p->tiles_y; j.ty0 += p->rows_blk) {
            j.nrows = p->tiles_y - j.ty0 < p->rows_blk ? p->tiles_y - j.ty0 : p->rows_blk;
            op_parallel_for(ctx, (size_t)p->threads, shared_in_chunk, &j);
            op_parallel_for(ctx, (size_t)p->threads, shared_gemm_chunk, &j);
            op_parallel_for(ctx, (size_t)p->threads, shared_out_chunk, &j);
        }
}
