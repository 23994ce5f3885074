/* The run-time half of the math variants (mathk.h): a planned node (mk_state) split into blocks
 * across threads, the broadcast walked by an odometer over the folded dims, the rows handed to the
 * ISA's kernels. Called by math_variants.c's run and by the libraries `anvil compile` emits, so
 * both compute the same; uses only what src/emit/shim offers. */
#include "../eltwise/eltwise.h"
#include "kernels/kernels.h"
#include "mathk.h"

#include <string.h>

/* Below this many elements a node runs on the calling thread: waking the pool costs more. */
#define MK_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel block of the flat and broadcast kernels. */
#define MK_BLOCK ((size_t)4096)
/* Lines per task of the strided softmax (adjacent lines share cache lines). */
#define MK_SMX_COLS ((size_t)64)

typedef struct mk_job {
    const mk_state *s;
    const void *in[MK_MAX_OPS];
    void *out;
    size_t n; /* output elements */
    int n_in;
} mk_job;

static size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

/* Runs fn over the MK_BLOCK-element blocks of n elements (in parallel when n is large). */
static void parallel_blocks(op_ctx *ctx, size_t n, op_range_fn fn, void *job) {
    if (n == 0) return;
    op_parallel_for(n >= MK_PAR_MIN ? ctx : NULL, ceil_div(n, MK_BLOCK), fn, job);
}

static inline void block_span(size_t begin, size_t end, size_t n, size_t *lo, size_t *hi) {
    *lo = begin * MK_BLOCK;
    *hi = end * MK_BLOCK < n ? end * MK_BLOCK : n;
}

/* One (partial) innermost row: output elements [pos, pos + cnt), operand w starting at element
 * off[w] with stride s->fold.st[w][rank - 1]. */
typedef void (*mk_row_fn)(const mk_job *j, size_t pos, const int64_t *off, size_t cnt);

/* Output elements [pos, stop): an odometer over the folded dims, one call per row. */
static void fold_walk(const mk_fold *f, size_t pos, size_t stop, mk_row_fn fn, const mk_job *j) {
    const int r = f->rank, no = f->nops;
    int64_t idx[MK_MAX_RANK], off[MK_MAX_OPS] = {0};
    size_t rem = pos;
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)f->dims[d]);
        rem /= (size_t)f->dims[d];
        for (int w = 0; w < no; w++) off[w] += idx[d] * f->st[w][d];
    }
    const int64_t inner = f->dims[r - 1];
    while (pos < stop) {
        size_t cnt = (size_t)(inner - idx[r - 1]);
        if (cnt > stop - pos) cnt = stop - pos;
        fn(j, pos, off, cnt);
        pos += cnt;
        idx[r - 1] += (int64_t)cnt;
        for (int w = 0; w < no; w++) off[w] += (int64_t)cnt * f->st[w][r - 1];
        for (int d = r - 1; d > 0 && idx[d] == f->dims[d]; d--) {
            for (int w = 0; w < no; w++) off[w] += f->st[w][d - 1] - f->dims[d] * f->st[w][d];
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

static int inner_stride(const mk_state *s, int w) {
    return (int)s->fold.st[w][s->fold.rank - 1];
}

static void row_binary(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    s->isa->binary(s->bk, (float *)j->out + pos, (const float *)j->in[0] + off[0],
                   (const float *)j->in[1] + off[1], inner_stride(s, 0), inner_stride(s, 1), cnt);
}

static void row_compare(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    s->isa->compare(s->bk, (uint8_t *)j->out + pos, (const float *)j->in[0] + off[0],
                    (const float *)j->in[1] + off[1], inner_stride(s, 0), inner_stride(s, 1), cnt);
}

static void row_logic(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    s->isa->logic(s->bk, (uint8_t *)j->out + pos, (const uint8_t *)j->in[0] + off[0],
                  (const uint8_t *)j->in[1] + off[1], inner_stride(s, 0), inner_stride(s, 1), cnt);
}

static void row_where(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    const size_t es = s->es;
    s->isa->where(es, (char *)j->out + pos * es, (const uint8_t *)j->in[0] + off[0],
                  (const char *)j->in[1] + (size_t)off[1] * es,
                  (const char *)j->in[2] + (size_t)off[2] * es, inner_stride(s, 0),
                  inner_stride(s, 1), inner_stride(s, 2), cnt);
}

/* The inputs folded into the output row in the reference's order: f(x0, x1), then f(out, xk);
 * Mean divides at the end. One input: a copy (broadcast when the output is larger). */
static void row_variadic(const mk_job *j, size_t pos, const int64_t *off, size_t cnt) {
    const mk_state *s = j->s;
    float *o = (float *)j->out + pos;
    const float *x0 = (const float *)j->in[0] + off[0];
    if (j->n_in == 1) {
        if (inner_stride(s, 0))
            s->isa->unary(MK_COPY, NULL, o, x0, cnt);
        else
            s->isa->unary(MK_FILL, &(mk_uparam){.a = x0[0]}, o, o, cnt);
        return;
    }
    s->isa->binary(s->bk, o, x0, (const float *)j->in[1] + off[1], inner_stride(s, 0),
                   inner_stride(s, 1), cnt);
    for (int w = 2; w < j->n_in; w++)
        s->isa->binary(s->bk, o, o, (const float *)j->in[w] + off[w], 1, inner_stride(s, w), cnt);
    if (s->kind == K_VARIADIC && s->uk == MK_DIVC) s->isa->unary(MK_DIVC, &s->up, o, o, cnt);
}

typedef struct walk_arg {
    const mk_job *j;
    mk_row_fn fn;
} walk_arg;

static void walk_chunk(void *arg, size_t begin, size_t end) {
    const walk_arg *a = arg;
    size_t lo, hi;
    block_span(begin, end, a->j->n, &lo, &hi);
    fold_walk(&a->j->s->fold, lo, hi, a->fn, a->j);
}

static void unary_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->isa->unary(j->s->uk, &j->s->up, (float *)j->out + lo, (const float *)j->in[0] + lo,
                     hi - lo);
}

static void not_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->isa->logic(MK_NOT, (uint8_t *)j->out + lo, (const uint8_t *)j->in[0] + lo, NULL, 1, 0,
                     hi - lo);
}

static void cast_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    size_t lo, hi;
    block_span(begin, end, j->n, &lo, &hi);
    j->s->cast((char *)j->out + lo * j->s->es_out, (const char *)j->in[0] + lo * j->s->es_in,
               hi - lo);
}

/* Task t: outer slice t / tasks-per-slice, lines [c0, c0 + MK_SMX_COLS) of it; with one line
 * per slice (inner == 1) a task is a contiguous row. */
static void softmax_chunk(void *arg, size_t begin, size_t end) {
    const mk_job *j = arg;
    const mk_state *s = j->s;
    const float *x = j->in[0];
    float *y = j->out;
    if (s->inner == 1) {
        const elt_isa *e = s->elt;
        for (size_t t = begin; t < end; t++)
            e->softmax_row(y + t * s->len, x + t * s->len, s->len, s->logsm);
        return;
    }
    const size_t per = ceil_div(s->inner, MK_SMX_COLS);
    for (size_t t = begin; t < end; t++) {
        size_t o = t / per, c0 = t % per * MK_SMX_COLS;
        size_t cols = s->inner - c0 < MK_SMX_COLS ? s->inner - c0 : MK_SMX_COLS;
        size_t base = o * s->len * s->inner + c0;
        s->isa->softmax_cols(y + base, x + base, s->len, s->inner, cols, s->logsm);
    }
}

void math_exec(const mk_state *s, void *out, const void *const *in, int n_in, size_t n,
               op_ctx *ctx) {
    mk_job j = {.s = s, .out = out, .n = n, .n_in = n_in};
    for (int i = 0; i < n_in && i < MK_MAX_OPS; i++) j.in[i] = in[i];
    if (j.n == 0) return;
    walk_arg w = {&j, NULL};
    switch (s->kind) {
    case K_UNARY:
        parallel_blocks(ctx, j.n, unary_chunk, &j);
        return;
    case K_CAST:
        parallel_blocks(ctx, j.n, cast_chunk, &j);
        return;
    case K_LOGIC:
        if (s->bk == MK_NOT) {
            parallel_blocks(ctx, j.n, not_chunk, &j);
            return;
        }
        w.fn = row_logic;
        break;
    case K_BINARY:
        w.fn = row_binary;
        break;
    case K_COMPARE:
        w.fn = row_compare;
        break;
    case K_VARIADIC:
        w.fn = row_variadic;
        break;
    case K_WHERE:
        w.fn = row_where;
        break;
    case K_SOFTMAX: {
        size_t tasks = s->inner == 1 ? s->outer : s->outer * ceil_div(s->inner, MK_SMX_COLS);
        op_parallel_for(j.n >= MK_PAR_MIN / 2 ? ctx : NULL, tasks, softmax_chunk, &j);
        return;
    }
    }
    parallel_blocks(ctx, j.n, walk_chunk, &w);
}
