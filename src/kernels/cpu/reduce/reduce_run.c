/* The run-time half of the reduce family's Reduce* / ArgMax / ArgMin / GlobalMaxPool variants
 * (reduce_run.h): each pass's rows or column blocks split across threads and handed to the ISA's
 * table, then the final step (mean, sqrt, log). Called by reduce_variants.c's run and by the
 * libraries `anvil compile` emits, so both compute the same; uses only what
 * src/emit/shim offers. */
#include "kernels/kernels.h"
#include "reduce_run.h"

#include <math.h>

/* Below this many input elements a node runs on the calling thread: waking the pool costs
 * more. */
#define RED_PAR_MIN ((size_t)1 << 15)
/* Columns per task of a pass whose inner dim is > 1. */
#define COL_BLOCK ((size_t)256)

/* Rows too few for the threads (a reduction to a handful of values) are split into `threads`
 * parts each, whose partial results the pass's combining op reduces afterwards. */
static bool split_rows(const red_state *s, const red_pass *p) {
    return s->threads > 1 && p->inner == 1 && p->outer < (size_t)s->threads &&
           p->len >= RED_PAR_MIN;
}

/* One pass (or ArgMax) as its chunk functions see it. */
typedef struct red_job {
    const red_state *s;
    red_op op;
    red_pass p;
    const float *x;
    float *y;
    int64_t *iy; /* ArgMax / ArgMin */
    size_t nblk; /* column blocks per outer index */
    size_t blk;  /* columns per block */
    float *part; /* split rows: the parts' partial results, threads per row */
    size_t np;   /* split rows: parts per row */
} red_job;

static void rows_chunk(void *arg, size_t begin, size_t end) {
    const red_job *j = arg;
    const size_t len = j->p.len;
    if (j->iy)
        j->s->isa->arg_rows(j->s->is_max, j->s->last, j->x + begin * len, len, end - begin,
                            j->iy + begin);
    else
        j->s->isa->rows(j->op, j->x + begin * len, len, end - begin, j->y + begin);
}

/* Task t: part t % np of row t / np. */
static void parts_chunk(void *arg, size_t begin, size_t end) {
    const red_job *j = arg;
    const size_t len = j->p.len;
    for (size_t t = begin; t < end; t++) {
        size_t r = t / j->np, q = t % j->np;
        size_t lo = len * q / j->np, hi = len * (q + 1) / j->np;
        j->s->isa->rows(j->op, j->x + r * len + lo, hi - lo, 1, j->part + t);
    }
}

static void cols_chunk(void *arg, size_t begin, size_t end) {
    const red_job *j = arg;
    const size_t len = j->p.len, inner = j->p.inner;
    for (size_t t = begin; t < end; t++) {
        size_t o = t / j->nblk, c0 = t % j->nblk * j->blk;
        size_t nc = inner - c0 < j->blk ? inner - c0 : j->blk;
        const float *x = j->x + o * len * inner + c0;
        if (j->iy)
            j->s->isa->arg_cols(j->s->is_max, j->s->last, x, len, inner, nc,
                                j->iy + o * inner + c0);
        else
            j->s->isa->cols(j->op, x, len, inner, nc, j->y + o * inner + c0);
    }
}

/* Runs one (outer, len, inner) pass: rows across threads, or (outer, column block) tasks. */
static void run_pass(red_job *j, op_ctx *ctx) {
    const red_pass *p = &j->p;
    size_t work = p->outer * p->len * p->inner;
    op_ctx *c = work >= RED_PAR_MIN ? ctx : NULL;
    if (p->outer == 0 || p->inner == 0) return;
    if (p->inner == 1 && !j->iy && c && split_rows(j->s, p)) {
        j->np = (size_t)j->s->threads;
        op_parallel_for(c, p->outer * j->np, parts_chunk, j);
        j->s->isa->rows(j->s->rest, j->part, j->np, p->outer, j->y);
        return;
    }
    if (p->inner == 1) {
        op_parallel_for(c, p->outer, rows_chunk, j);
        return;
    }
    /* COL_BLOCK columns per task, or fewer (whole vectors) where that leaves a thread without one:
     * a mean over an NHWC map's pixels is one outer index of C <= 256 columns, which was one
     * task (EfficientNet-B0's 17 squeeze-excitation pools, 2 threads: 97 -> 72 us, Zen 5) */
    j->blk = COL_BLOCK;
    const size_t T = c && j->s->threads > 1 ? (size_t)j->s->threads : 1;
    if (p->outer * ((p->inner + COL_BLOCK - 1) / COL_BLOCK) < T) {
        const size_t per = ((p->inner + T - 1) / T + 15) / 16 * 16;
        j->blk = per < COL_BLOCK ? per : COL_BLOCK;
    }
    j->nblk = (p->inner + j->blk - 1) / j->blk;
    op_parallel_for(c, p->outer * j->nblk, cols_chunk, j);
}

static void finalize(const red_state *s, float *y, size_t n) {
    switch (s->fin) {
    case FIN_MEAN: {
        /* the reference divides in double; a float division differs by at most an ulp */
        const float cnt = (float)s->count;
        for (size_t i = 0; i < n; i++) y[i] /= cnt;
        break;
    }
    case FIN_SQRT:
        for (size_t i = 0; i < n; i++) y[i] = sqrtf(y[i]);
        break;
    case FIN_LOG:
        for (size_t i = 0; i < n; i++) y[i] = logf(y[i]);
        break;
    default:
        break;
    }
}

void reduce_exec(const red_state *s, const float *x, void *y, size_t ny, float *ws, op_ctx *ctx) {
    if (ny == 0) return;
    red_job j = {.s = s, .p = s->pass[0], .x = x};
    if (s->arg) {
        j.iy = y;
        run_pass(&j, ctx);
        return;
    }
    float *bufs[2] = {ws, ws};
    if (ws) {
        bufs[1] = ws + s->buf[0];
        j.part = bufs[1] + s->buf[1];
    }
    for (int i = 0; i < s->npass; i++) {
        j.p = s->pass[i];
        j.op = i == 0 ? s->first : s->rest;
        j.y = i == s->npass - 1 ? (float *)y : bufs[i % 2];
        run_pass(&j, ctx);
        j.x = j.y;
    }
    finalize(s, y, ny);
}
