/* ScatterND with reduction "add" (float32) or "none" (any dtype): the gradient of Gather, which
 * autodiff builds as ScatterND(zeros of the table, indices[..., None], dY, reduction add), an
 * embedding table's gradient. The reference reduces element by element through a switch on the
 * dtype (2.7 ns a value on Zen 4: 1.4 ms for BERT's token-type table, 1024 rows of 512 into 2).
 *
 * The output starts as data: nothing to do when the runtime runs the node in place, a memset
 * when data is a constant that prepare found all zero bytes (the folded zeros of the gradient
 * rule: 62 MB for BERT's word table, 5.8 ms to copy on Zen 4 and 0.8 to clear), a memcpy
 * otherwise. Then each index tuple's slice of updates is added (or copied) into the output
 * slice it addresses, tuples in order, so repeated indices sum in the reference's order and the
 * result is the reference's bit for bit. Threads share only a memcpy of data: the scatter
 * itself ran slower split over two threads (by columns, which keeps every value's order) than on
 * one, in every table size of BERT's.
 *
 * Every index is checked before any output byte is written, with the reference's message. */
#include "data.h"
#include "ops/tensor_common.h"

/* Copy chunks are whole multiples of this many elements (a cache line of float32). */
#define SC_COLS 16

typedef struct sc_state {
    bool add;       /* reduction add (float32); else none */
    bool zero_data; /* data is a constant of zero bytes */
    size_t es;      /* element bytes */
    size_t tuples;  /* index tuples */
    size_t slice;   /* elements per slice: data.shape[k:] */
    size_t numel;   /* data's elements */
    int k;          /* indices' last dim */
    int64_t dims[IR_MAX_RANK];
} sc_state;

static bool sc_plan_of(const kern_node *kn, sc_state *s) {
    memset(s, 0, sizeof *s);
    const ir_node *n = kn->node;
    if (n->op != IR_OP_SCATTERND || kn->n_in < 3 || kn->n_out < 1 || !kern_has_input(kn, 2))
        return false;
    const op_tinfo *x = &kn->in[0], *ix = &kn->in[1], *u = &kn->in[2], *y = &kn->out[0];
    if (!data_static(x) || !data_static(u) || !data_static(y) || u->dtype != x->dtype ||
        y->dtype != x->dtype || ix->dtype != ANVIL_DTYPE_INT64 || !ir_shape_is_static(&ix->shape))
        return false;
    const char *red;
    if (ir_attr_string(n, "reduction", "none", &red) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    if (strcmp(red, "add") == 0)
        s->add = true;
    else if (strcmp(red, "none") != 0)
        return false;
    if (s->add && x->dtype != ANVIL_DTYPE_FLOAT32) return false;
    const int r = x->shape.rank, q = ix->shape.rank;
    if (r < 1 || q < 1) return false;
    const int64_t k = ix->shape.d[q - 1];
    if (k < 1 || k > r) return false;
    s->k = (int)k;
    s->es = anvil_dtype_size(x->dtype);
    s->tuples = data_prod(ix->shape.d, 0, q - 1);
    s->slice = data_prod(x->shape.d, s->k, r);
    s->numel = data_prod(x->shape.d, 0, r);
    for (int i = 0; i < s->k; i++) s->dims[i] = x->shape.d[i];
    return data_prod(u->shape.d, 0, u->shape.rank) == s->tuples * s->slice &&
           ir_shape_equal(&y->shape, &x->shape);
}

static bool sc_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    sc_state s;
    return sc_plan_of(kn, &s);
}

/* The slice offset (in elements) of each tuple. */
static size_t sc_workspace(const kern_node *kn) {
    sc_state s;
    return sc_plan_of(kn, &s) ? s.tuples * sizeof(size_t) : 0;
}

/* Whether n bytes at p are all zero. */
static bool sc_all_zero(const unsigned char *p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w) return false;
    }
    for (; i < n; i++)
        if (p[i]) return false;
    return true;
}

static anvil_status sc_prepare(const kern_node *kn, void **state) {
    sc_state *s = calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!sc_plan_of(kn, s)) {
        free(s);
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: scatternd_add prepared for a node it does not take",
                        ir_node_label(kn->node));
    }
    /* a constant's bytes never change, so zeros found now are zeros at every run */
    const void *v = kn->in[0].value;
    s->zero_data = v && sc_all_zero(v, s->numel * s->es);
    *state = s;
    return ANVIL_OK;
}

typedef struct sc_copy_job {
    const sc_state *s;
    const char *src;
    char *dst;
    size_t chunk; /* elements per part */
} sc_copy_job;

/* Parts [begin, end) of the output's start: a chunk of data each. */
static void sc_copy_range(void *arg, size_t begin, size_t end) {
    const sc_copy_job *j = arg;
    const sc_state *s = j->s;
    const size_t lo = begin * j->chunk, hi = end * j->chunk < s->numel ? end * j->chunk : s->numel;
    if (lo >= hi) return;
    if (s->zero_data)
        memset(j->dst + lo * s->es, 0, (hi - lo) * s->es);
    else
        memcpy(j->dst + lo * s->es, j->src + lo * s->es, (hi - lo) * s->es);
}

/* Every tuple's slice of updates u into y at off[t], tuples in order. */
static void sc_scatter(const sc_state *s, const size_t *off, const char *u, char *y) {
    if (s->add) {
        for (size_t t = 0; t < s->tuples; t++) {
            float *restrict dst = (float *)y + off[t];
            const float *restrict src = (const float *)u + t * s->slice;
            for (size_t i = 0; i < s->slice; i++) dst[i] += src[i];
        }
        return;
    }
    const size_t bytes = s->slice * s->es;
    for (size_t t = 0; t < s->tuples; t++) memcpy(y + off[t] * s->es, u + t * bytes, bytes);
}

static anvil_status sc_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const sc_state *s = state;
    const op_tensor *x = in[0], *ix = in[1];
    const int64_t *idx = ix->data;
    size_t *off = ws;
    /* every index checked (flat order, as the reference) before anything is written */
    for (size_t t = 0; t < s->tuples; t++) {
        size_t o = 0;
        for (int j = 0; j < s->k; j++) {
            const size_t flat = t * (size_t)s->k + (size_t)j;
            const int64_t dim = s->dims[j];
            int64_t v = idx[flat];
            if (v < -dim || v >= dim)
                return tensor_index_error(n, "the indices", v, ix->dims, ix->rank, flat, -dim,
                                          dim - 1);
            if (v < 0) v += dim;
            o = o * (size_t)dim + (size_t)v;
        }
        off[t] = o * s->slice;
    }
    char *y = out[0]->data;
    if (s->numel && (s->zero_data || y != (const char *)x->data)) {
        const size_t bytes = s->numel * s->es;
        /* a memcpy of 62 MB took 5.8 ms on one core of Zen 4 and 4.0 on two; a memset 0.8 and
         * 1.5, so it stays on one */
        size_t parts =
            bytes >= ((size_t)4 << 20) && !s->zero_data ? (size_t)op_ctx_threads(ctx) : 1;
        sc_copy_job cj = {
            .s = s, .src = x->data, .dst = y, .chunk = (s->numel + parts - 1) / parts};
        /* chunks of whole cache lines */
        cj.chunk = (cj.chunk + SC_COLS - 1) / SC_COLS * SC_COLS;
        parts = (s->numel + cj.chunk - 1) / cj.chunk;
        op_parallel_for(parts > 1 ? ctx : NULL, parts, sc_copy_range, &cj);
    }
    /* on one thread: split by columns over two (Zen 4, 1024 rows of 512) it took 46 -> 89 us
     * into 2 rows, 91 -> 124 into 512 */
    if (s->tuples && s->slice) sc_scatter(s, off, in[2]->data, y);
    return ANVIL_OK;
}

const kern_variant data_scatternd_add = {.name = "scatternd_add",
                                         .op = IR_OP_SCATTERND,
                                         .supports = sc_supports,
                                         .workspace_size = sc_workspace,
                                         .prepare = sc_prepare,
                                         .release = free,
                                         .run = sc_run};
