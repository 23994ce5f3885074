/* Back-to-back fusion's run over its plan (pair.h; pair.c describes the schedule). Copyable into
 * the libraries anvil compile emits: it uses the GEMM and the conv layout helpers only. */
#include "pair.h"

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

typedef struct pair_job {
    const pair_state *p;
    const float *x, *b1, *b2, *res;
    float *y;
    char *ws;
} pair_job;

/* GemmPair: rows [r0, r0 + mb) on this thread. */
static void gemm_block(const pair_job *j, int64_t r0, int64_t mb, char *gws, float *t) {
    const pair_state *p = j->p;
    gemm_problem q = {.m = mb,
                      .n = p->n0,
                      .k = p->k,
                      .a = j->x + r0 * p->k,
                      .rs_a = p->k,
                      .cs_a = 1,
                      .pb = &p->w1,
                      .c = t,
                      .ldc = p->n0,
                      .ep = p->ep1};
    q.ep.col_bias = j->b1;
    gemm_run_serial(p->k1, &p->b1, &q, gws);
    gemm_problem r = {.m = mb,
                      .n = p->n1,
                      .k = p->n0,
                      .a = t,
                      .rs_a = p->n0,
                      .cs_a = 1,
                      .pb = &p->w2,
                      .c = j->y + r0 * p->n1,
                      .ldc = p->n1,
                      .ep = p->ep2};
    r.ep.col_bias = j->b2;
    if (j->res) {
        r.ep.r = j->res + r0 * p->n1;
        r.ep.rs_r = p->n1;
        r.ep.cs_r = 1;
        r.ep.beta = 1.0f;
    }
    gemm_run_serial(p->k2, &p->b2, &r, gws);
}

/* ConvPair: pixels [p0, p0 + np) of image img on this thread. */
static void conv_block(const pair_job *j, int64_t img, int64_t p0, int64_t np, char *gws, float *t,
                       float *col) {
    const pair_state *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t pix = s->oh * s->ow;
    conv_pack_b_panels(s, p->k1, j->x + img * s->c * s->h * s->w, p0, np, col);
    const gemm_packed pb = {p->k1, p->k, np, col};
    gemm_problem q = {.m = p->n0,
                      .n = np,
                      .k = p->k,
                      .pa = &p->w1,
                      .pb = &pb,
                      .c = t,
                      .ldc = p->block,
                      .ep = p->ep1};
    q.ep.row_bias = j->b1;
    gemm_run_serial(p->k1, &p->b1, &q, gws);
    const int64_t off = img * p->n1 * pix + p0;
    gemm_problem r = {.m = p->n1,
                      .n = np,
                      .k = p->n0,
                      .pa = &p->w2,
                      .b = t,
                      .rs_b = p->block,
                      .cs_b = 1,
                      .c = j->y + off,
                      .ldc = pix,
                      .ep = p->ep2};
    r.ep.row_bias = j->b2;
    if (j->res) {
        r.ep.r = j->res + off;
        r.ep.rs_r = pix;
        r.ep.cs_r = 1;
        r.ep.beta = 1.0f;
    }
    gemm_run_serial(p->k2, &p->b2, &r, gws);
}

/* One index per thread: thread t runs an even share of the blocks (image-major for a conv). */
static void pair_chunk(void *arg, size_t begin, size_t end) {
    const pair_job *j = arg;
    const pair_state *p = j->p;
    const int64_t T = p->threads;
    const int64_t extent = p->conv ? p->s.oh * p->s.ow : p->m;
    const int64_t per = (extent + p->block - 1) / p->block, jobs = (p->conv ? p->s.n : 1) * per;
    for (size_t t = begin; t < end; t++) {
        char *base = j->ws + t * (p->gemm_ws + p->t_ws + p->col_ws);
        float *tile = (float *)(base + p->gemm_ws), *col = (float *)(base + p->gemm_ws + p->t_ws);
        for (int64_t q = jobs * (int64_t)t / T; q < jobs * ((int64_t)t + 1) / T; q++) {
            const int64_t at = q % per * p->block, len = min64(p->block, extent - at);
            if (p->conv)
                conv_block(j, q / per, at, len, base, tile, col);
            else
                gemm_block(j, at, len, base, tile);
        }
    }
}

void pair_exec(const pair_state *p, const float *x, const float *b1, const float *b2,
               const float *res, float *y, void *ws, op_ctx *ctx) {
    pair_job j = {p, x, b1, b2, res, y, ws};
    if ((p->conv ? p->s.n : p->m) == 0) return;
    op_parallel_for(ctx, (size_t)p->threads, pair_chunk, &j);
}
