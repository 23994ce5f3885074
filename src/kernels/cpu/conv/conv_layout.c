/* The compute-only half of the conv family (conv_layout.h): layout helpers and the run-time part
 * of the GEMM and few-channel variants, shared by anvil's variants and the libraries `anvil
 * compile` emits (which copy this file verbatim and build it against the emitter's shim). */
#include "conv_layout.h"

#include <string.h>

/* Output columns [lo, hi) whose tap at input offset `off` (= kx*dw - pl) lands inside [0, w). */
static void valid_cols(int64_t ow, int64_t sw, int64_t off, int64_t w, int64_t *lo, int64_t *hi) {
    /* ox*sw + off >= 0  and  ox*sw + off < w */
    int64_t a = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t b = w - off <= 0 ? 0 : (w - off + sw - 1) / sw;
    if (b > ow) b = ow;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* d[j] = s[2j]: with the stride a constant the compiler vectorizes it (even-lane shuffles);
 * the general strided loop stays scalar. */
static void copy_stride2(float *restrict d, const float *restrict s, int64_t n) {
    for (int64_t j = 0; j < n; j++) d[j] = s[2 * j];
}

/* d[0..n) = s[0..n) in moves of a size known when compiling: the copies of a small map's rows
 * are 2 to 16 floats, where a call of memcpy costs more than the copy. */
static void copy_short(float *restrict d, const float *restrict s, int64_t n) {
    if (n > 32) {
        memcpy(d, s, sizeof(float) * (size_t)n);
        return;
    }
    for (; n >= 8; n -= 8, d += 8, s += 8) memcpy(d, s, 8 * sizeof(float));
    if (n & 4) {
        memcpy(d, s, 4 * sizeof(float));
        d += 4;
        s += 4;
    }
    if (n & 2) {
        memcpy(d, s, 2 * sizeof(float));
        d += 2;
        s += 2;
    }
    if (n & 1) *d = *s;
}

/* conv_im2col of all of an image's pixels: row by row of the output, with the tap (c, ky, kx)
 * stepped rather than divided out of k, and each kx's valid output columns found once. The
 * general loop finds each run's output row and column by division, which with a small map's short
 * rows (ResNet-18 at 64x64: 16 down to 2 pixels) took most of its time. */
static void im2col_image(const conv_shape *s, const float *x, int64_t k0, int64_t k1, float *col,
                         int64_t ldc) {
    const int64_t khw = s->kh * s->kw, plane = s->h * s->w, ow = s->ow;
    enum { KW_MAX = 32 };
    int64_t los[KW_MAX], his[KW_MAX];
    for (int64_t kx = 0; kx < s->kw && kx < KW_MAX; kx++)
        valid_cols(ow, s->sw, kx * s->dw - s->pl, s->w, &los[kx], &his[kx]);
    int64_t c = k0 / khw, ky = k0 % khw / s->kw, kx = k0 % s->kw;
    for (int64_t k = k0; k < k1; k++) {
        const float *xc = x + c * plane;
        float *d = col + k * ldc;
        int64_t lo, hi;
        if (kx < KW_MAX) {
            lo = los[kx];
            hi = his[kx];
        } else {
            valid_cols(ow, s->sw, kx * s->dw - s->pl, s->w, &lo, &hi);
        }
        /* the input column of output column lo (read only where lo < hi) */
        const int64_t ix = lo * s->sw + kx * s->dw - s->pl;
        for (int64_t oy = 0; oy < s->oh; oy++, d += ow) {
            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
            if (iy < 0 || iy >= s->h || lo >= hi) {
                memset(d, 0, sizeof(float) * (size_t)ow);
                continue;
            }
            for (int64_t ox = 0; ox < lo; ox++) d[ox] = 0.0f;
            const float *src = xc + iy * s->w + ix;
            if (s->sw == 1)
                copy_short(d + lo, src, hi - lo);
            else if (s->sw == 2)
                copy_stride2(d + lo, src, hi - lo);
            else
                for (int64_t ox = lo; ox < hi; ox++) d[ox] = src[(ox - lo) * s->sw];
            for (int64_t ox = hi; ox < ow; ox++) d[ox] = 0.0f;
        }
        if (++kx == s->kw) {
            kx = 0;
            if (++ky == s->kh) {
                ky = 0;
                c++;
            }
        }
    }
}

void conv_im2col(const conv_shape *s, const float *x, int64_t k0, int64_t k1, int64_t p0,
                 int64_t np, float *col, int64_t ldc) {
    if (p0 == 0 && np == s->oh * s->ow) {
        im2col_image(s, x, k0, k1, col, ldc);
        return;
    }
    const int64_t khw = s->kh * s->kw, plane = s->h * s->w;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t c = k / khw, ky = k % khw / s->kw, kx = k % s->kw;
        const float *xc = x + c * plane;
        float *dst = col + k * ldc;
        int64_t lo, hi;
        valid_cols(s->ow, s->sw, kx * s->dw - s->pl, s->w, &lo, &hi);
        for (int64_t p = p0; p < p0 + np;) {
            const int64_t oy = p / s->ow, ox0 = p % s->ow;
            int64_t ox1 = s->ow < ox0 + (p0 + np - p) ? s->ow : ox0 + (p0 + np - p);
            float *d = dst + (p - p0);
            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
            if (iy < 0 || iy >= s->h) {
                memset(d, 0, sizeof(float) * (size_t)(ox1 - ox0));
            } else {
                /* zeros left of the valid columns, the strided copy, zeros right of them */
                const int64_t a = lo > ox0 ? (lo < ox1 ? lo : ox1) : ox0;
                const int64_t b = hi < ox1 ? (hi > a ? hi : a) : ox1;
                for (int64_t ox = ox0; ox < a; ox++) d[ox - ox0] = 0.0f;
                if (b > a) {
                    /* input column of output column a; never a pointer before the image */
                    const float *src = xc + iy * s->w + a * s->sw + kx * s->dw - s->pl;
                    if (s->sw == 1)
                        memcpy(d + (a - ox0), src, sizeof(float) * (size_t)(b - a));
                    else if (s->sw == 2)
                        copy_stride2(d + (a - ox0), src, b - a);
                    else
                        for (int64_t ox = a; ox < b; ox++) d[ox - ox0] = src[(ox - a) * s->sw];
                }
                for (int64_t ox = b; ox < ox1; ox++) d[ox - ox0] = 0.0f;
            }
            p += ox1 - ox0;
        }
    }
}

void conv_pack_b_panels(const conv_shape *s, const gemm_kernel *k, const float *x, int64_t p0,
                        int64_t np, float *dst) {
    const int nr = k->nr;
    const int64_t kdim = conv_kdim(s), plane = s->h * s->w, sw = s->sw;
    /* A panel's pixels as runs within one output row (NR <= 64, so at most 64 runs): run r is
     * panel columns [j0[r], j1[r]), reading input row iy[r] + ky*dh from column ix[r] + kx*dw at
     * stride sw. Per tap, each run is zeros, a strided copy, zeros. */
    int64_t rj0[64], rj1[64], riy[64], rix[64];
    for (int64_t c0 = 0; c0 < np; c0 += nr, dst += kdim * nr) {
        const int cols = np - c0 < nr ? (int)(np - c0) : nr;
        int runs = 0;
        for (int j = 0; j < cols;) {
            const int64_t p = p0 + c0 + j, oy = p / s->ow, ox = p % s->ow;
            int len = (int)(s->ow - ox < cols - j ? s->ow - ox : cols - j);
            rj0[runs] = j;
            rj1[runs] = j + len;
            riy[runs] = oy * s->sh - s->pt;
            rix[runs] = ox * sw - s->pl;
            runs++;
            j += len;
        }
        int64_t kk = 0;
        for (int64_t c = 0; c < s->cg; c++) {
            const float *xc = x + c * plane;
            for (int64_t ky = 0; ky < s->kh; ky++)
                for (int64_t kx = 0; kx < s->kw; kx++, kk++) {
                    float *d = dst + kk * nr;
                    const int64_t dy = ky * s->dh, dx = kx * s->dw;
                    for (int r = 0; r < runs; r++) {
                        float *dr = d + rj0[r];
                        const int64_t n = rj1[r] - rj0[r], iy = riy[r] + dy;
                        if (iy < 0 || iy >= s->h) {
                            memset(dr, 0, sizeof(float) * (size_t)n);
                            continue;
                        }
                        int64_t lo, hi;
                        valid_cols(n, sw, rix[r] + dx, s->w, &lo, &hi);
                        for (int64_t j = 0; j < lo; j++) dr[j] = 0.0f;
                        if (hi > lo) {
                            /* the first valid tap; never form a pointer before the image */
                            const float *src = xc + iy * s->w + rix[r] + dx + lo * sw;
                            if (sw == 1)
                                memcpy(dr + lo, src, sizeof(float) * (size_t)(hi - lo));
                            else if (sw == 2)
                                copy_stride2(dr + lo, src, hi - lo);
                            else
                                for (int64_t j = 0; j < hi - lo; j++) dr[lo + j] = src[j * sw];
                        }
                        for (int64_t j = hi; j < n; j++) dr[j] = 0.0f;
                    }
                    for (int j = cols; j < nr; j++) d[j] = 0.0f;
                }
        }
    }
}

void conv_row_fusion_apply(const conv_row_fusion *f, const float *res, float *y, int64_t n) {
    gemm_epilogue ep = f->ep;
    if (res) {
        ep.r = res;
        ep.cs_r = 1;
        ep.beta = 1.0f;
    }
    f->fn(&ep, y, n, 0, 0, 1, n);
}

/* The last vector of a row may read CONV_DW_PAD_FLOATS past the last output's taps; at stride 2
 * that is kx/2 < 16 past the outputs rounded up to whole vectors, in each half. Padded column q
 * holds input column q - pl; columns past the row are not copied. */
void conv_dw_geom_init(const conv_shape *s, conv_dw_geom *g) {
    *g = (conv_dw_geom){.h = s->h,
                        .w = s->w,
                        .pt = s->pt,
                        .sy = s->sh,
                        .sx = s->sw,
                        .kh = s->kh,
                        .kw = s->kw,
                        .ow = s->ow};
    if (s->sw == 1) {
        g->ldp = ((s->ow - 1) + s->kw + CONV_DW_PAD_FLOATS + 15) / 16 * 16;
    } else {
        g->half = (s->ow + 15) / 16 * 16 + 16;
        g->ldp = 2 * g->half;
    }
    g->q0 = s->pl < g->ldp ? s->pl : g->ldp;
    g->n = s->pl + s->w > g->ldp ? g->ldp - g->q0 : s->w;
}

/* ---- the GEMM variants' run ----------------------------------------------------------------- */

typedef struct conv_job {
    const conv_gemm_plan *p;
    const gemm_packed *pa;
    const gemm_epilogue *ep;
    const float *x, *w, *bias;
    float *y;
    char *ws;
    const float *res; /* the fused residual (NCHW, like y), or NULL */
} conv_job;

/* The GEMM of one (image, group) item with B given by the caller; output pixels [p0, p0+np). */
static void item_problem(const conv_job *j, int64_t img, int64_t g, int64_t p0, int64_t np,
                         gemm_problem *pr) {
    const conv_shape *s = &j->p->s;
    const int64_t kdim = conv_kdim(s), hw_out = s->oh * s->ow;
    memset(pr, 0, sizeof *pr);
    pr->m = s->mg;
    pr->n = np;
    pr->k = kdim;
    if (j->pa) {
        pr->pa = &j->pa[g];
    } else {
        pr->a = j->w + g * s->mg * kdim;
        pr->rs_a = kdim;
        pr->cs_a = 1;
    }
    const int64_t off = (img * s->m + g * s->mg) * hw_out + p0;
    pr->c = j->y + off;
    pr->ldc = hw_out;
    pr->ep = *j->ep;
    if (j->bias) pr->ep.row_bias = j->bias + g * s->mg;
    if (j->res) {
        pr->ep.r = j->res + off;
        pr->ep.rs_r = hw_out;
        pr->ep.cs_r = 1;
        pr->ep.beta = 1.0f;
    }
}

static const float *item_input(const conv_job *j, int64_t img, int64_t g) {
    const conv_shape *s = &j->p->s;
    return j->x + (img * s->c + g * s->cg) * s->h * s->w;
}

/* Runs one item entirely on this thread with workspace slice t. */
static void item_serial(const conv_job *j, int64_t item, size_t t) {
    const conv_gemm_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t img = item / s->group, g = item % s->group, hw_out = s->oh * s->ow;
    void *gws = j->ws + t * p->gemm_ws;
    float *col = (float *)(j->ws + (size_t)p->threads * p->gemm_ws + t * p->col_ws);
    const float *xg = item_input(j, img, g);
    gemm_problem pr;
    if (p->kind == CONV_GEMM_IMPLICIT) {
        for (int64_t p0 = 0; p0 < hw_out; p0 += p->nblk) {
            const int64_t np = hw_out - p0 < p->nblk ? hw_out - p0 : p->nblk;
            conv_pack_b_panels(s, p->k, xg, p0, np, col);
            gemm_packed pb = {p->k, conv_kdim(s), np, col};
            item_problem(j, img, g, p0, np, &pr);
            pr.pb = &pb;
            gemm_run_serial(p->k, &p->blk, &pr, gws);
        }
        return;
    }
    item_problem(j, img, g, 0, hw_out, &pr);
    if (p->kind == CONV_GEMM_1X1) {
        pr.b = xg;
        pr.rs_b = s->h * s->w;
    } else {
        conv_im2col(s, xg, 0, conv_kdim(s), 0, hw_out, col, hw_out);
        pr.b = col;
        pr.rs_b = hw_out;
    }
    pr.cs_b = 1;
    gemm_run_serial(p->k, &p->blk, &pr, gws);
}

/* One index per thread: thread t runs its share of the items. */
static void items_chunk(void *arg, size_t begin, size_t end) {
    const conv_job *j = arg;
    const int64_t items = j->p->s.n * j->p->s.group, T = j->p->threads;
    for (size_t t = begin; t < end; t++)
        for (int64_t i = items * (int64_t)t / T; i < items * ((int64_t)t + 1) / T; i++)
            item_serial(j, i, t);
}

/* Implicit GEMM with shared items: jobs are (item, pixel block) pairs, split evenly. */
static void blocks_chunk(void *arg, size_t begin, size_t end) {
    const conv_job *j = arg;
    const conv_gemm_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t hw_out = s->oh * s->ow, nb = (hw_out + p->nblk - 1) / p->nblk;
    const int64_t jobs = s->n * s->group * nb, T = p->threads;
    for (size_t t = begin; t < end; t++) {
        void *gws = j->ws + t * p->gemm_ws;
        float *col = (float *)(j->ws + (size_t)T * p->gemm_ws + t * p->col_ws);
        for (int64_t q = jobs * (int64_t)t / T; q < jobs * ((int64_t)t + 1) / T; q++) {
            const int64_t item = q / nb, img = item / s->group, g = item % s->group;
            const int64_t p0 = q % nb * p->nblk, np = hw_out - p0 < p->nblk ? hw_out - p0 : p->nblk;
            conv_pack_b_panels(s, p->k, item_input(j, img, g), p0, np, col);
            gemm_packed pb = {p->k, conv_kdim(s), np, col};
            gemm_problem pr;
            item_problem(j, img, g, p0, np, &pr);
            pr.pb = &pb;
            gemm_run_serial(p->k, &p->blk, &pr, gws);
        }
    }
}

typedef struct im2col_job {
    const conv_shape *s;
    const float *x;
    float *col;
    int64_t kdim;
    size_t parts;
} im2col_job;

static void im2col_chunk(void *arg, size_t begin, size_t end) {
    const im2col_job *j = arg;
    const int64_t hw_out = j->s->oh * j->s->ow;
    for (size_t t = begin; t < end; t++) {
        int64_t k0 = j->kdim * (int64_t)t / (int64_t)j->parts;
        int64_t k1 = j->kdim * ((int64_t)t + 1) / (int64_t)j->parts;
        conv_im2col(j->s, j->x, k0, k1, 0, hw_out, j->col, hw_out);
    }
}

void conv_gemm_run(const conv_gemm_plan *p, const gemm_packed *pa, const gemm_epilogue *ep,
                   const float *x, const float *w, const float *bias, const float *res, float *y,
                   void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    const int64_t items = s->n * s->group, hw_out = s->oh * s->ow;
    if (items == 0 || s->mg == 0 || hw_out == 0) return;
    gemm_packed once[CONV_PREPACK_GROUPS];
    if (!pa && p->pa_ws > 0 && s->group <= CONV_PREPACK_GROUPS) {
        const int64_t kdim = conv_kdim(s);
        const size_t stride = p->pa_ws / (size_t)s->group;
        char *mem = (char *)ws + (size_t)p->threads * (p->gemm_ws + p->col_ws);
        for (int64_t g = 0; g < s->group; g++)
            gemm_pack_a_into(p->k, s->mg, kdim, w + g * s->mg * kdim, kdim, 1,
                             mem + (size_t)g * stride, &once[g]);
        pa = once;
    }
    conv_job j = {p, pa, ep, x, w, bias, y, ws, res};
    if (p->batch_parallel) {
        op_parallel_for(ctx, (size_t)p->threads, items_chunk, &j);
        return;
    }
    if (p->kind == CONV_GEMM_IMPLICIT) {
        op_parallel_for(ctx, (size_t)p->threads, blocks_chunk, &j);
        return;
    }
    float *col = (float *)((char *)ws + (size_t)p->threads * p->gemm_ws);
    for (int64_t item = 0; item < items; item++) {
        const int64_t img = item / s->group, g = item % s->group;
        const float *xg = item_input(&j, img, g);
        gemm_problem pr;
        item_problem(&j, img, g, 0, hw_out, &pr);
        if (p->kind == CONV_GEMM_1X1) {
            pr.b = xg;
            pr.rs_b = s->h * s->w;
        } else {
            im2col_job ij = {s, xg, col, conv_kdim(s), (size_t)p->threads};
            op_parallel_for(ctx, ij.parts, im2col_chunk, &ij);
            pr.b = col;
            pr.rs_b = hw_out;
        }
        pr.cs_b = 1;
        gemm_run(p->k, &p->blk, &pr, ws, ctx);
    }
}

/* ---- the few-channel variants' run ---------------------------------------------------------- */

size_t conv_sc_slice(const conv_sc_plan *p) {
    return ((size_t)(p->s.c * p->g.band_rows * p->g.g.ldp) * sizeof(float) + 63) & ~(size_t)63;
}

typedef struct sc_job {
    const conv_sc_plan *p;
    conv_sc_band_fn band;
    const float *wp, *x, *b, *res;
    float *y;
    char *ws;
} sc_job;

/* The fused epilogue over output channels [m0, m1) of image img, rows [r0, r0 + nr): each
 * channel's rows are consecutive, and were just written. */
static void sc_epilogue(const sc_job *j, int64_t img, int64_t m0, int64_t m1, int64_t r0,
                        int64_t nr) {
    const conv_sc_plan *p = j->p;
    for (int64_t m = m0; m < m1; m++) {
        const int64_t off = (img * p->s.m + m) * p->g.ohw + r0 * p->s.ow;
        conv_row_fusion_apply(&p->fuse, j->res ? j->res + off : NULL, j->y + off, nr * p->s.ow);
    }
}

/* Blocks [b0, b1) of image img over the row range rs, band by band. */
static void sc_range(const sc_job *j, int64_t img, int64_t rs, int64_t b0, int64_t b1, float *xb) {
    const conv_sc_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t y0 = s->oh * rs / p->rsplit, y1 = s->oh * (rs + 1) / p->rsplit;
    const float *x = j->x + img * s->c * s->h * s->w;
    float *y = j->y + img * s->m * p->g.ohw;
    const int64_t m0 = b0 * p->mb, m1 = b1 * p->mb < s->m ? b1 * p->mb : s->m;
    for (int64_t r0 = y0; r0 < y1; r0 += p->band) {
        const int64_t nr = y1 - r0 < p->band ? y1 - r0 : p->band;
        j->band(&p->g, x, xb, j->wp, j->b, y, r0, nr, b0, b1);
        if (p->fuse.on) sc_epilogue(j, img, m0, m1, r0, nr);
    }
}

/* Thread t's share of the items (image, row range, block), taken in runs of consecutive blocks
 * of one image and row range so the input band is copied once per run. */
static void sc_chunk(void *arg, size_t begin, size_t end) {
    const sc_job *j = arg;
    const conv_sc_plan *p = j->p;
    const int64_t T = p->threads, items = p->s.n * p->rsplit * p->nblk;
    for (size_t t = begin; t < end; t++) {
        float *xb = (float *)(j->ws + t * conv_sc_slice(p));
        memset(xb, 0, conv_sc_slice(p));
        int64_t q = items * (int64_t)t / T;
        const int64_t q1 = items * ((int64_t)t + 1) / T;
        while (q < q1) {
            const int64_t run = q / p->nblk, b0 = q % p->nblk;
            const int64_t b1 = q1 - run * p->nblk < p->nblk ? q1 - run * p->nblk : p->nblk;
            sc_range(j, run / p->rsplit, run % p->rsplit, b0, b1, xb);
            q = run * p->nblk + b1;
        }
    }
}

void conv_sc_run(const conv_sc_plan *p, conv_sc_band_fn band, const float *wp, const float *x,
                 const float *bias, const float *res, float *y, void *ws, op_ctx *ctx) {
    sc_job j = {p, band, wp, x, bias, res, y, ws};
    if (p->s.n * p->g.ohw == 0) return;
    op_parallel_for(ctx, (size_t)p->threads, sc_chunk, &j);
}

/* ---- transposes ------------------------------------------------------------------------------ */

void conv_transpose_rows_plain(float *dst, const float *src, size_t rows, size_t cols, size_t ldx,
                               size_t lds) {
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[c * lds + r] = src[r * ldx + c];
}

/* Rows per band: a band of a [rows, cols] matrix is one transposer call. */
#define TR_BAND 32

typedef struct transpose_job {
    const float *src;
    float *dst;
    int64_t mats, rows, cols;
    int threads;
    conv_transpose_rows_fn fn;
} transpose_job;

static void transpose_chunk(void *arg, size_t begin, size_t end) {
    const transpose_job *j = arg;
    const int64_t bands = (j->rows + TR_BAND - 1) / TR_BAND, total = j->mats * bands;
    const int64_t T = j->threads;
    for (size_t t = begin; t < end; t++)
        for (int64_t q = total * (int64_t)t / T; q < total * ((int64_t)t + 1) / T; q++) {
            const int64_t mat = q / bands, r0 = q % bands * TR_BAND;
            const int64_t nr = r0 + TR_BAND < j->rows ? TR_BAND : j->rows - r0;
            const int64_t off = mat * j->rows * j->cols;
            j->fn(j->dst + off + r0, j->src + off + r0 * j->cols, (size_t)nr, (size_t)j->cols,
                  (size_t)j->cols, (size_t)j->rows);
        }
}

void conv_transpose_run(const float *src, float *dst, int64_t mats, int64_t rows, int64_t cols,
                        conv_transpose_rows_fn fn, op_ctx *ctx) {
    transpose_job j = {src, dst, mats, rows, cols, op_ctx_threads(ctx), fn};
    op_parallel_for(ctx, (size_t)j.threads, transpose_chunk, &j);
}

/* ---- the regions variants' run ------------------------------------------------------------- */

/* Y (NHWC) of one image from X (NHWC), tap by tap: entry 0 writes Y with the bias where it
 * covers it (else Y starts as the bias), every other entry's product is added through the block,
 * and the activation runs over Y last. */
static void taps_image(const conv_regions_plan *rp, const gemm_epilogue *ep, const float *x,
                       const float *bias, float *y, char *ws, op_ctx *ctx) {
    const conv_shape *s = &rp->s;
    const float **table = (const float **)(void *)(ws + rp->gemm_bytes);
    float *block = (float *)(void *)(ws + rp->gemm_bytes + rp->table_bytes);
    const int64_t pixels = s->oh * s->ow;
    const conv_region *r0 = &rp->r[0];
    const bool covers = rp->n > 0 && (r0->y1 - r0->y0) * (r0->x1 - r0->x0) == pixels;
    if (!covers)
        for (int64_t q = 0; q < pixels; q++) {
            if (bias)
                memcpy(y + q * s->m, bias, (size_t)s->m * sizeof(float));
            else
                memset(y + q * s->m, 0, (size_t)s->m * sizeof(float));
        }
    for (int i = 0; i < rp->n; i++) {
        const conv_region *r = &rp->r[i];
        const int64_t width = r->x1 - r->x0, pix = (r->y1 - r->y0) * width;
        int64_t ky = 0, kx = 0;
        while (!(r->ym >> ky & 1)) ky++;
        while (!(r->xm >> kx & 1)) kx++;
        const float **row = table;
        for (int64_t oy = r->y0; oy < r->y1; oy++)
            for (int64_t ox = r->x0; ox < r->x1; ox++) {
                const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
                const int64_t ix = ox * s->sw - s->pl + kx * s->dw;
                *row++ = x + (iy * s->w + ix) * s->c;
            }
        const bool direct = i == 0 && covers;
        gemm_problem p;
        memset(&p, 0, sizeof p);
        p.m = pix;
        p.n = s->mg;
        p.k = s->cg;
        p.a_ind = table;
        p.a_seg = s->cg;
        p.cs_a = 1;
        p.pb = &r->pb;
        p.c = direct ? y : block;
        p.ldc = s->mg;
        p.ep = gemm_epilogue_none();
        if (direct) p.ep.col_bias = bias;
        gemm_run(rp->k, &r->blk, &p, ws, ctx);
        if (direct) continue;
        for (int64_t oy = r->y0; oy < r->y1; oy++)
            for (int64_t ox = r->x0; ox < r->x1; ox++) {
                float *dst = y + (oy * s->ow + ox) * s->m;
                const float *src = block + ((oy - r->y0) * width + (ox - r->x0)) * s->mg;
                for (int64_t o = 0; o < s->m; o++) dst[o] += src[o];
            }
    }
    if (ep->act != IR_ACT_NONE) {
        gemm_epilogue act = *ep;
        act.col_bias = act.row_bias = act.r = NULL;
        act.scale = 1.0f;
        gemm_epilogue_apply(&act, y, s->m, 0, 0, pixels, s->m);
    }
}

/* Y (NHWC) of one image from X (NHWC), region by region. */
static void regions_image(const conv_regions_plan *rp, const gemm_epilogue *ep, const float *x,
                          const float *bias, float *y, char *ws, op_ctx *ctx) {
    const conv_shape *s = &rp->s;
    const float **table = (const float **)(void *)(ws + rp->gemm_bytes);
    float *block = (float *)(void *)(ws + rp->gemm_bytes + rp->table_bytes);
    for (int i = 0; i < rp->n; i++) {
        const conv_region *r = &rp->r[i];
        const int64_t width = r->x1 - r->x0, pix = (r->y1 - r->y0) * width;
        const float **row = table;
        for (int64_t oy = r->y0; oy < r->y1; oy++)
            for (int64_t ox = r->x0; ox < r->x1; ox++)
                for (int64_t ky = 0; ky < s->kh; ky++)
                    for (int64_t kx = 0; kx < s->kw; kx++)
                        if (r->ym >> ky & r->xm >> kx & 1) {
                            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
                            const int64_t ix = ox * s->sw - s->pl + kx * s->dw;
                            *row++ = x + (iy * s->w + ix) * s->c;
                        }
        const bool whole = width == s->ow;
        gemm_problem p;
        memset(&p, 0, sizeof p);
        p.m = pix;
        p.n = s->mg;
        p.k = r->n_taps * s->cg;
        p.a_ind = table;
        p.a_seg = s->cg;
        p.cs_a = 1;
        p.pb = &r->pb;
        p.c = whole ? y + r->y0 * s->ow * s->m : block;
        p.ldc = whole ? s->m : s->mg;
        p.ep = *ep;
        p.ep.col_bias = bias;
        gemm_run(rp->k, &r->blk, &p, ws, ctx);
        if (whole) continue;
        for (int64_t oy = r->y0; oy < r->y1; oy++)
            memcpy(y + (oy * s->ow + r->x0) * s->m, block + (oy - r->y0) * width * s->mg,
                   (size_t)(width * s->mg) * sizeof(float));
    }
}

void conv_regions_run(const conv_regions_plan *p, const gemm_epilogue *ep,
                      conv_transpose_rows_fn tr, const float *x, const float *bias, float *y,
                      void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n == 0 || s->m == 0) return;
    float *out = y;
    char *run_ws = ws;
    if (!p->last) {
        float *xt = ws, *yt = (float *)((char *)ws + p->xt_bytes);
        run_ws = (char *)ws + p->xt_bytes + p->yt_bytes;
        conv_transpose_run(x, xt, s->n, s->c, s->h * s->w, tr, ctx);
        x = xt;
        y = yt;
    }
    for (int64_t img = 0; img < s->n; img++)
        (p->by_tap ? taps_image : regions_image)(p, ep, x + img * s->h * s->w * s->c, bias,
                                                 y + img * s->oh * s->ow * s->m, run_ws, ctx);
    if (!p->last) conv_transpose_run(y, out, s->n, s->oh * s->ow, s->m, tr, ctx);
}

/* ---- a batch as one GEMM (conv_batched_gemm) ------------------------------------------------ */

typedef struct batched_job {
    const conv_batched_plan *p;
    const float *x, *bias;
    float *col, *c, *y;
} batched_job;

/* image i's im2col into columns [i*P, (i+1)*P) of the batch's */
static void batched_im2col(void *arg, size_t begin, size_t end) {
    const batched_job *j = arg;
    const conv_shape *s = &j->p->s;
    const int64_t pix = s->oh * s->ow, cols = s->n * pix;
    for (size_t i = begin; i < end; i++)
        conv_im2col(s, j->x + (int64_t)i * s->c * s->h * s->w, 0, conv_kdim(s), 0, pix,
                    j->col + (int64_t)i * pix, cols);
}

/* output channels [begin, end): y[n, m, :] = c[m, n*P : (n+1)*P] + bias[m] */
static void batched_scatter(void *arg, size_t begin, size_t end) {
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

void conv_batched_run(const conv_batched_plan *p, const gemm_packed *pa, const float *x,
                      const float *w, const float *bias, float *y, void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    char *base = ws;
    batched_job j = {
        p, x, bias, (float *)(base + p->gemm_ws), (float *)(base + p->gemm_ws + p->col_bytes), y};
    op_parallel_for(ctx, (size_t)s->n, batched_im2col, &j);
    const int64_t cols = s->n * s->oh * s->ow, kdim = conv_kdim(s);
    gemm_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.m = s->m;
    pr.n = cols;
    pr.k = kdim;
    if (pa) {
        pr.pa = pa;
    } else {
        pr.a = w;
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
    op_parallel_for(ctx, (size_t)s->m, batched_scatter, &j);
}
