/* The eltwise family's run over a planned node (elt_state, eltwise.h): the split of the work
 * across threads and the calls into the per-ISA tables. Shared by the runtime's variants
 * (eltwise_variants.c, which decides the elt_state at prepare) and the libraries `anvil compile`
 * emits, which copy this file: so it uses only the shim-level API (op_ctx, op_parallel_for) and
 * neither the IR nor op_tensor. */
#include "eltwise.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

/* Below this many elements a node runs on the calling thread: waking the pool costs more. */
#define ELT_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel block of the flat (unary, binary) kernels. */
#define ELT_BLOCK ((size_t)4096)

/* A run's work as its chunk functions see it: every op reads x (input 0) and writes y, the other
 * fields are per op. */
typedef struct elt_job {
    const elt_state *s;
    const float *x;
    float *y;
    const float *in1, *in2; /* binary: B; layernorm: scale, bias; batchnorm: the folded a, b */
    uint16_t *y16;          /* binary: y in bf16 (elt_io.y16) */
    size_t n;               /* elements; GlobalAveragePool: elements per plane; pooling: planes */
    float a, b;             /* unary: the op's parameters (Clip's bounds may be inputs) */
    size_t br, bc;          /* transpose swap: rows and columns per task */
    bool avg;               /* pooling: AveragePool */
    char *ws;               /* pooling: the threads' rows */
    int nthreads;           /* pooling */
} elt_job;

static op_ctx *par_ctx(op_ctx *ctx, size_t work) {
    return work >= ELT_PAR_MIN ? ctx : NULL;
}

static size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

/* Runs fn over the ELT_BLOCK-element blocks of n elements (in parallel when n is large). */
static void parallel_blocks(op_ctx *ctx, size_t n, op_range_fn fn, void *job) {
    op_parallel_for(par_ctx(ctx, n), ceil_div(n, ELT_BLOCK), fn, job);
}

/* The elements [*lo, *hi) of blocks [begin, end) of parallel_blocks over n elements. */
static inline void block_span(size_t begin, size_t end, size_t n, size_t *lo, size_t *hi) {
    *lo = begin * ELT_BLOCK;
    *hi = end * ELT_BLOCK < n ? end * ELT_BLOCK : n;
}

/* ---- unary -------------------------------------------------------------------------------- */

static void unary_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->isa->unary(j->s->uk, j->a, j->b, j->y + lo, j->x + lo, hi - lo);
}

/* ---- binary ------------------------------------------------------------------------------- */

/* Output elements of blocks [begin, end): an odometer over the folded dims, one kernel call per
 * (partial) innermost row. */
static void binary_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const elt_state *s = j->s;
    const int r = s->rank;
    size_t pos, stop;
    block_span(begin, end, j->n, &pos, &stop);
    int64_t idx[ELT_MAX_RANK], oa = 0, ob = 0;
    size_t rem = pos;
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)s->dims[d]);
        rem /= (size_t)s->dims[d];
        oa += idx[d] * s->sa[d];
        ob += idx[d] * s->sb[d];
    }
    const int64_t inner = s->dims[r - 1];
    while (pos < stop) {
        size_t cnt = (size_t)(inner - idx[r - 1]);
        if (cnt > stop - pos) cnt = stop - pos;
        if (j->y16)
            s->isa->binary16(s->bk, j->y16 + pos, j->x + oa, j->in1 + ob, (int)s->sa[r - 1],
                             (int)s->sb[r - 1], cnt);
        else
            s->isa->binary(s->bk, j->y + pos, j->x + oa, j->in1 + ob, (int)s->sa[r - 1],
                           (int)s->sb[r - 1], cnt);
        pos += cnt;
        idx[r - 1] += (int64_t)cnt;
        oa += (int64_t)cnt * s->sa[r - 1];
        ob += (int64_t)cnt * s->sb[r - 1];
        for (int d = r - 1; d > 0 && idx[d] == s->dims[d]; d--) {
            oa -= s->dims[d] * s->sa[d];
            ob -= s->dims[d] * s->sb[d];
            idx[d] = 0;
            idx[d - 1]++;
            oa += s->sa[d - 1];
            ob += s->sb[d - 1];
        }
    }
}

/* ---- rows: softmax / logsoftmax, layernorm ------------------------------------------------ */

static void softmax_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const size_t len = j->s->len;
    for (size_t r = begin; r < end; r++)
        j->s->isa->softmax_row(j->y + r * len, j->x + r * len, len, j->s->logsm);
}

static void layernorm_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const size_t len = j->s->len;
    for (size_t r = begin; r < end; r++)
        j->s->isa->layernorm_row(j->y + r * len, j->x + r * len, len, j->in1, j->in2, j->s->eps);
}

/* ---- batchnorm ---------------------------------------------------------------------------- */

void elt_batchnorm_fold(float *ab, int64_t c, const float *scale, const float *bias,
                        const float *mean, const float *var, float eps) {
    for (int64_t i = 0; i < c; i++) {
        double a = (double)scale[i] / sqrt((double)var[i] + (double)eps);
        ab[i] = (float)a;
        ab[c + i] = (float)((double)bias[i] - (double)mean[i] * a);
    }
}

static void batchnorm_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const int64_t C = j->s->channels, P = j->s->plane;
    for (size_t q = begin; q < end; q++) {
        int64_t c = (int64_t)q % C;
        const float *x = j->x + (int64_t)q * P;
        float *y = j->y + (int64_t)q * P;
        j->s->isa->affine(y, x, (size_t)P, j->in1[c], j->in1[C + c]);
    }
}

/* ---- pooling ------------------------------------------------------------------------------ */

/* Exactly one index per thread: index t owns workspace row t. */
static void pool_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const elt_state *s = j->s;
    const int64_t in_sz = s->pool.ih * s->pool.iw, out_sz = s->pool.oh * s->pool.ow;
    for (size_t t = begin; t < end; t++) {
        float *row = (float *)(void *)(j->ws + t * s->row_stride * sizeof(float));
        size_t p0 = j->n * t / (size_t)j->nthreads;
        size_t p1 = j->n * (t + 1) / (size_t)j->nthreads;
        for (size_t p = p0; p < p1; p++)
            s->isa->pool2d(&s->pool, j->avg, s->cnt_h, s->cnt_w, j->y + (int64_t)p * out_sz,
                           j->x + (int64_t)p * in_sz, row);
    }
}

static void gap_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    for (size_t p = begin; p < end; p++)
        j->y[p] = j->s->isa->sum(j->x + p * j->n, j->n) / (float)j->n;
}

/* ---- transpose -----------------------------------------------------------------------------
 * The swap's tasks are (batch item, block of rows, block of columns), each block a set of 8x8
 * tiles: TR_ROWS rows by TR_BLOCK / TR_ROWS columns (64 KiB read, 64 KiB written), or, for a
 * matrix of fewer than TR_ROWS rows (an image's 3 channels turned channels-last), blocks of
 * TR_COLS columns of all its rows. Whole rows per task left NCHW -> NHWC of 96 channels two
 * tasks of 64 and 32 rows: at 2 threads one thread did two thirds of the work. */
#define TR_ROWS 64
#define TR_COLS 4096
#define TR_BLOCK 262144

static void tr_copy_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    memcpy(j->y + lo, j->x + lo, (hi - lo) * sizeof(float));
}

static void tr_swap_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const elt_state *s = j->s;
    const size_t rows = (size_t)s->t0, cols = (size_t)s->t1, br = j->br, bc = j->bc;
    const size_t nrb = ceil_div(rows, br), ncb = ceil_div(cols, bc);
    for (size_t t = begin; t < end; t++) {
        size_t b = t / (nrb * ncb), r0 = t / ncb % nrb * br, c0 = t % ncb * bc;
        size_t nr = rows - r0 < br ? rows - r0 : br, nc = cols - c0 < bc ? cols - c0 : bc;
        const float *src = j->x + b * rows * cols + r0 * cols + c0;
        float *dst = j->y + b * rows * cols + c0 * rows + r0;
        s->isa->transpose4((uint32_t *)(void *)dst, (const uint32_t *)(const void *)src, nr, nc,
                           cols, rows);
    }
}

/* Output block (b, i1, i0) of tin elements is input block (b, i0, i1); task t = (b, i1). */
static void tr_blocks_chunk(void *arg, size_t begin, size_t end) {
    const elt_job *j = arg;
    const elt_state *s = j->s;
    const size_t d0 = (size_t)s->t0, d1 = (size_t)s->t1, in = (size_t)s->tin;
    for (size_t t = begin; t < end; t++) {
        size_t b = t / d1, i1 = t % d1;
        float *dst = j->y + (b * d1 + i1) * d0 * in;
        const float *src = j->x + (b * d0 * d1 + i1) * in;
        for (size_t i0 = 0; i0 < d0; i0++) memcpy(dst + i0 * in, src + i0 * d1 * in, in * 4);
    }
}

/* ---- the run ------------------------------------------------------------------------------ */

void elt_run(const elt_state *s, const elt_io *io, op_ctx *ctx) {
    const size_t numel = io->numel;
    elt_job j = {.s = s, .x = io->x, .y = io->y, .n = numel};
    switch (s->kind) {
    case ELT_K_BINARY:
        j.in1 = io->in[0];
        j.n = io->out_numel;
        j.y16 = io->y16;
        if (j.n > 0) parallel_blocks(ctx, j.n, binary_chunk, &j);
        return;
    case ELT_K_SOFTMAX:
        if (s->rows > 0 && s->len > 0)
            op_parallel_for(par_ctx(ctx, numel / 2), s->rows, softmax_chunk, &j);
        return;
    case ELT_K_LAYERNORM:
        j.in1 = io->in[0];
        j.in2 = io->in[1];
        if (s->rows > 0 && s->len > 0)
            op_parallel_for(par_ctx(ctx, numel), s->rows, layernorm_chunk, &j);
        return;
    case ELT_K_BATCHNORM: {
        size_t planes = (size_t)(io->d0 * s->channels);
        if (planes == 0 || s->plane == 0) return;
        j.in1 = s->ab;
        if (!s->ab) {
            elt_batchnorm_fold(io->ws, s->channels, io->in[0], io->in[1], io->in[2], io->in[3],
                               s->bn_eps);
            j.in1 = io->ws;
        }
        op_parallel_for(par_ctx(ctx, numel), planes, batchnorm_chunk, &j);
        return;
    }
    case ELT_K_POOL: {
        size_t planes = (size_t)(io->d0 * io->d1);
        if (planes == 0 || io->out_numel == 0) return;
        int T = op_ctx_threads(ctx);
        if (T > s->threads) T = s->threads;
        if ((size_t)T > planes) T = (int)planes;
        if (numel < ELT_PAR_MIN || T < 1) T = 1;
        j.n = planes;
        j.avg = s->avg;
        j.ws = io->ws;
        j.nthreads = T;
        op_parallel_for(T > 1 ? ctx : NULL, (size_t)T, pool_chunk, &j);
        return;
    }
    case ELT_K_GAP: {
        size_t planes = (size_t)(io->d0 * io->d1);
        if (planes == 0 || numel / planes == 0) return;
        j.n = numel / planes;
        op_parallel_for(par_ctx(ctx, numel), planes, gap_chunk, &j);
        return;
    }
    case ELT_K_TRANSPOSE: {
        if (numel == 0) return;
        const size_t rows = (size_t)s->t0, cols = (size_t)s->t1;
        j.br = rows < TR_ROWS ? rows : TR_ROWS;
        j.bc = rows < TR_ROWS ? TR_COLS : TR_BLOCK / TR_ROWS;
        op_ctx *c = par_ctx(ctx, numel);
        if (s->tform == ELT_TR_COPY)
            parallel_blocks(ctx, numel, tr_copy_chunk, &j);
        else if (s->tform == ELT_TR_SWAP)
            op_parallel_for(c, (size_t)s->tb * ceil_div(rows, j.br) * ceil_div(cols, j.bc),
                            tr_swap_chunk, &j);
        else
            op_parallel_for(c, (size_t)s->tb * cols, tr_blocks_chunk, &j);
        return;
    }
    case ELT_K_UNARY:
        j.a = io->a;
        j.b = io->b;
        if (j.n == 0) return;
        parallel_blocks(ctx, j.n, unary_chunk, &j);
        return;
    }
}
