/* The run-time half of the pixels-as-rows conv GEMMs over channels-last images (conv_layout.h:
 * conv_nhwc_run, conv_nhwc_plan_run; conv_nhwc.c plans them and packs the weights). Shared by
 * anvil's variants conv_nhwc_im2col_gemm / convnhwc_gemm and the libraries `anvil compile` writes,
 * which copy this file verbatim: it sees only what the emitter's shim declares. */
#include "conv_layout.h"

#include <string.h>

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* A's storage per thread: the im2col, or the pointer table (one per pixel and tap). */
static size_t col_bytes(const conv_shape *s, const conv_nhwc_weights *pw) {
    const size_t pix = (size_t)(s->oh * s->ow);
    if (conv_nhwc_direct(s)) return 0;
    if (pw->indirect) return align64(pix * (size_t)(s->kh * s->kw) * sizeof(const float *));
    return align64(pix * (size_t)conv_kdim(s) * sizeof(float));
}

static size_t gemm_bytes(const conv_nhwc_weights *pw) {
    return align64(gemm_thread_workspace(pw->k, &pw->blk));
}

size_t conv_nhwc_workspace(const conv_shape *s, const conv_nhwc_weights *pw, int threads) {
    return (size_t)(threads > 0 ? threads : 1) * (gemm_bytes(pw) + col_bytes(s, pw));
}

static void copy_floats(float *restrict d, const float *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = s[i];
}

/* Rows [p0, p1) (output pixels) of the NHWC im2col of group g of one image. With one group and
 * no dilation, a kernel row's taps of a pixel whose taps are all inside the image are kw*c
 * consecutive floats of X: one copy (a network's first conv, 3 channels: 9 floats, where a
 * memcpy per tap cost more than the GEMM). */
static void im2col_nhwc(const conv_shape *s, const float *x, int64_t g, int64_t p0, int64_t p1,
                        float *col) {
    const int64_t kdim = conv_kdim(s);
    const bool rows = s->group == 1 && s->dw == 1;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t oy = p / s->ow, ox = p % s->ow;
        float *d = col + p * kdim;
        const int64_t ix0 = ox * s->sw - s->pl;
        if (rows && ix0 >= 0 && ix0 + s->kw <= s->w) {
            for (int64_t ky = 0; ky < s->kh; ky++, d += s->kw * s->c) {
                const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
                if (iy < 0 || iy >= s->h)
                    memset(d, 0, sizeof(float) * (size_t)(s->kw * s->c));
                else
                    copy_floats(d, x + (iy * s->w + ix0) * s->c, s->kw * s->c);
            }
            continue;
        }
        for (int64_t ky = 0; ky < s->kh; ky++) {
            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
            for (int64_t kx = 0; kx < s->kw; kx++, d += s->cg) {
                const int64_t ix = ox * s->sw - s->pl + kx * s->dw;
                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                    memset(d, 0, sizeof(float) * (size_t)s->cg);
                else
                    memcpy(d, x + (iy * s->w + ix) * s->c + g * s->cg,
                           sizeof(float) * (size_t)s->cg);
            }
        }
    }
}

/* The implicit GEMM's table for group g of one image: row p (an output pixel) is its kh*kw taps,
 * each the tap's cg channels in X or, in the padding, `zeros` (cg of them). */
static void pointer_table(const conv_shape *s, const float *x, int64_t g, const float *zeros,
                          const float **tab) {
    for (int64_t p = 0; p < s->oh * s->ow; p++) {
        const int64_t oy = p / s->ow, ox = p % s->ow;
        for (int64_t ky = 0; ky < s->kh; ky++) {
            const int64_t iy = oy * s->sh - s->pt + ky * s->dh;
            for (int64_t kx = 0; kx < s->kw; kx++) {
                const int64_t ix = ox * s->sw - s->pl + kx * s->dw;
                *tab++ = iy < 0 || iy >= s->h || ix < 0 || ix >= s->w
                             ? zeros
                             : x + (iy * s->w + ix) * s->c + g * s->cg;
            }
        }
    }
}

/* A for one item into `col` (the thread's slice): the table, or the im2col of all pixels. */
static void form_a(const conv_shape *s, const conv_nhwc_weights *pw, const float *x_img, int64_t g,
                   void *col) {
    if (pw->indirect)
        pointer_table(s, x_img, g, pw->zeros, col);
    else
        im2col_nhwc(s, x_img, g, 0, s->oh * s->ow, col);
}

typedef struct nhwc_job {
    const conv_shape *s;
    const conv_nhwc_weights *pw;
    const float *x, *bias;
    float *y;
    const uint16_t *x16; /* X stored in bf16 (conv_nhwc_run16), or NULL */
    uint16_t *y16;       /* Y stored in bf16, or NULL */
    char *ws;
    int threads;
    int64_t img, g;           /* the shared item (im2col_chunk) */
    const gemm_epilogue *act; /* the activation applied in the epilogue, or NULL */
    const float *res;         /* the residual, or NULL */
    bool res_nhwc;            /* res is NHWC like y (else NCHW) */
} nhwc_job;

static void item_problem(const nhwc_job *j, int64_t img, int64_t g, const void *col,
                         gemm_problem *p) {
    const conv_shape *s = j->s;
    memset(p, 0, sizeof *p);
    p->m = s->oh * s->ow;
    p->n = s->mg;
    p->k = conv_kdim(s);
    if (col && j->pw->indirect) {
        p->a_ind = col;
        p->a_seg = s->cg;
    } else if (col) {
        p->a = col;
        p->rs_a = p->k;
    } else if (j->x16) {
        p->a16 = j->x16 + img * s->h * s->w * s->c + g * s->cg;
        p->rs_a = s->c;
    } else {
        p->a = j->x + img * s->h * s->w * s->c + g * s->cg;
        p->rs_a = s->c;
    }
    p->cs_a = 1;
    p->pb = &j->pw->pb[g];
    if (j->y16)
        p->c16 = j->y16 + img * p->m * s->m + g * s->mg;
    else
        p->c = j->y + img * p->m * s->m + g * s->mg;
    p->ldc = s->m;
    p->ep = j->act ? *j->act : gemm_epilogue_none();
    if (j->bias) p->ep.col_bias = j->bias + g * s->mg;
    if (j->res && j->res_nhwc) {
        p->ep.r = j->res + img * p->m * s->m + g * s->mg;
        p->ep.rs_r = s->m;
        p->ep.cs_r = 1;
        p->ep.beta = 1.0f;
    } else if (j->res) {
        /* C[pixel, channel] of this item is residual[img][g*mg + channel][pixel] */
        p->ep.r = j->res + (img * s->m + g * s->mg) * p->m;
        p->ep.rs_r = 1;
        p->ep.cs_r = p->m;
        p->ep.beta = 1.0f;
    }
}

static void items_chunk(void *arg, size_t begin, size_t end) {
    const nhwc_job *j = arg;
    const conv_shape *s = j->s;
    const int64_t items = s->n * s->group, T = j->threads;
    for (size_t t = begin; t < end; t++) {
        void *gws = j->ws + t * gemm_bytes(j->pw);
        void *col = conv_nhwc_direct(s)
                        ? NULL
                        : j->ws + (size_t)T * gemm_bytes(j->pw) + t * col_bytes(s, j->pw);
        for (int64_t i = items * (int64_t)t / T; i < items * ((int64_t)t + 1) / T; i++) {
            const int64_t img = i / s->group, g = i % s->group;
            if (col) form_a(s, j->pw, j->x + img * s->h * s->w * s->c, g, col);
            gemm_problem p;
            item_problem(j, img, g, col, &p);
            gemm_run_serial(j->pw->k, &j->pw->blk, &p, gws);
        }
    }
}

static void im2col_chunk(void *arg, size_t begin, size_t end) {
    const nhwc_job *j = arg;
    const conv_shape *s = j->s;
    const int64_t pix = s->oh * s->ow, T = j->threads;
    float *col = (float *)(j->ws + (size_t)T * gemm_bytes(j->pw));
    for (size_t t = begin; t < end; t++)
        im2col_nhwc(s, j->x + j->img * s->h * s->w * s->c, j->g, pix * (int64_t)t / T,
                    pix * ((int64_t)t + 1) / T, col);
}

void conv_nhwc_run(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                   const float *bias, float *y, void *ws, op_ctx *ctx) {
    conv_nhwc_run_fused(s, pw, x, bias, NULL, NULL, false, y, ws, ctx);
}

void conv_nhwc_run_fused(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                         const float *bias, const gemm_epilogue *act, const float *res,
                         bool res_nhwc, float *y, void *ws, op_ctx *ctx) {
    conv_nhwc_run16(s, pw, x, NULL, bias, act, res, res_nhwc, y, NULL, ws, ctx);
}

void conv_nhwc_run16(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                     const uint16_t *x16, const float *bias, const gemm_epilogue *act,
                     const float *res, bool res_nhwc, float *y, uint16_t *y16, void *ws,
                     op_ctx *ctx) {
    const int threads = op_ctx_threads(ctx);
    nhwc_job j = {s, pw, x, bias, y, x16, y16, ws, threads, 0, 0, act, res, res_nhwc};
    const int64_t items = s->n * s->group;
    if (items == 0 || s->mg == 0 || s->oh * s->ow == 0) return;
    if (threads > 1 && items >= threads) {
        op_parallel_for(ctx, (size_t)threads, items_chunk, &j);
        return;
    }
    for (int64_t i = 0; i < items; i++) {
        j.img = i / s->group;
        j.g = i % s->group;
        void *col = NULL;
        if (pw->indirect) {
            /* a table of oh*ow*kh*kw pointers: not worth a fork-join */
            col = (char *)ws + (size_t)threads * gemm_bytes(pw);
            pointer_table(s, x + j.img * s->h * s->w * s->c, j.g, pw->zeros, col);
        } else if (!conv_nhwc_direct(s)) {
            op_parallel_for(ctx, (size_t)threads, im2col_chunk, &j);
            col = (char *)ws + (size_t)threads * gemm_bytes(pw);
        }
        gemm_problem p;
        item_problem(&j, j.img, j.g, col, &p);
        gemm_run(pw->k, &pw->blk, &p, ws, ctx);
    }
}

void conv_nhwc_plan_run(const conv_nhwc_plan *p, const conv_nhwc_weights *pw,
                        const gemm_epilogue *act, conv_transpose_rows_fn tr, const float *x,
                        const float *bias, const float *res, float *y, void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n == 0 || s->m == 0) return;
    if (p->last) {
        conv_nhwc_run_fused(s, pw, x, bias, act, res, true, y, ws, ctx);
        return;
    }
    float *xt = ws, *yt = (float *)((char *)ws + p->xt_bytes);
    void *run_ws = (char *)ws + p->xt_bytes + p->yt_bytes;
    conv_transpose_run(x, xt, s->n, s->c, s->h * s->w, tr, ctx);
    conv_nhwc_run_fused(s, pw, xt, bias, act, res, false, yt, run_ws, ctx);
    conv_transpose_run(yt, y, s->n, s->oh * s->ow, s->m, tr, ctx);
}
