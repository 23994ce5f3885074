/* TopK for fp32 ("topk_heap", baseline code): the k first elements of each line under the
 * reference's order, found with a bounded heap instead of sorting the whole line.
 *
 * The reference sorts each line stably: by value (descending for largest, ascending otherwise),
 * NaN above every number and equal to every NaN, -0 equal to +0, and equal values in index order.
 * That order is total once the index breaks ties, so each element becomes one unsigned 64-bit key
 * that sorts exactly like it: the value's bits mapped to an order-preserving unsigned (every NaN
 * to the largest, -0 to +0), complemented for largest, above the 32-bit index. The k smallest
 * keys, in order, are the reference's output. A max-heap of k keys sees each element once; most
 * are rejected by one comparison with its top. k comes from the output's shape, so it may be an
 * input computed at run time. */
#include "reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RED_PAR_MIN ((size_t)1 << 15)

typedef struct topk_state {
    size_t outer, len, inner;
    int axis;
    bool largest;
    int threads;
} topk_state;

static bool topk_form(const kern_node *kn, topk_state *s) {
    const ir_node *n = kn->node;
    const ir_shape *x = &kn->in[0].shape;
    int64_t axis;
    if (kn->in[0].dtype != ANVIL_DTYPE_FLOAT32 || !ir_shape_is_static(x) || x->rank < 1 ||
        kn->out[0].dtype != ANVIL_DTYPE_FLOAT32 || !ir_shape_is_static(&kn->out[0].shape))
        return false;
    if (ir_attr_int(n, "axis", -1, &axis) != ANVIL_OK ||
        ir_attr_flag(n, "largest", true, &s->largest) != ANVIL_OK)
        return false;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return false;
    s->axis = (int)axis;
    s->outer = s->inner = 1;
    for (int d = 0; d < x->rank; d++)
        if (d < axis)
            s->outer *= (size_t)x->d[d];
        else if (d > axis)
            s->inner *= (size_t)x->d[d];
    s->len = (size_t)x->d[axis];
    s->threads = kn->threads > 0 ? kn->threads : 1;
    /* indices live in the low 32 bits of a key */
    return s->len < ((size_t)1 << 32);
}

/* The key of element i of value v: see the file comment. */
static inline uint64_t topk_key(float v, uint32_t i, bool largest) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (isnan(v))
        u = 0xffffffffu;
    else {
        if (u == 0x80000000u) u = 0; /* -0 ranks with +0 */
        u = (u & 0x80000000u) ? ~u : u | 0x80000000u;
    }
    if (largest) u = ~u;
    return (uint64_t)u << 32 | i;
}

static void sift_down(uint64_t *h, size_t n, size_t i) {
    uint64_t v = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] > h[c]) c++;
        if (h[c] <= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* One line: the k smallest keys in a max-heap, then sorted ascending in place (heap sort). */
static void topk_line(const topk_state *s, const float *x, size_t k, uint64_t *h, float *vo,
                      int64_t *io) {
    const size_t stride = s->inner, len = s->len;
    for (size_t i = 0; i < k; i++) h[i] = topk_key(x[i * stride], (uint32_t)i, s->largest);
    for (size_t i = k / 2; i-- > 0;) sift_down(h, k, i);
    /* key < top, decided on the value alone: the element's index is above every index in the
     * heap, so a tie with the top's value loses. thr: the top's value. */
    float thr = x[(size_t)(uint32_t)h[0] * stride];
    bool tnan = isnan(thr);
    for (size_t i = k; i < len; i++) {
        float v = x[i * stride];
        bool take = s->largest ? !tnan && (v > thr || isnan(v)) : tnan ? !isnan(v) : v < thr;
        if (!take) continue;
        h[0] = topk_key(v, (uint32_t)i, s->largest);
        sift_down(h, k, 0);
        thr = x[(size_t)(uint32_t)h[0] * stride];
        tnan = isnan(thr);
    }
    for (size_t n = k; n > 1; n--) {
        uint64_t top = h[0];
        h[0] = h[n - 1];
        h[n - 1] = top;
        sift_down(h, n - 1, 0);
    }
    for (size_t j = 0; j < k; j++) {
        uint32_t idx = (uint32_t)h[j];
        vo[j * stride] = x[(size_t)idx * stride];
        if (io) io[j * stride] = (int64_t)idx;
    }
}

typedef struct topk_job {
    const topk_state *s;
    const float *x;
    float *vo;
    int64_t *io;
    size_t k, lines;
    uint64_t *ws;
    size_t nthreads;
} topk_job;

/* Exactly one index per thread: index t owns heap t of the workspace. */
static void topk_chunk(void *arg, size_t begin, size_t end) {
    const topk_job *j = arg;
    const topk_state *s = j->s;
    for (size_t t = begin; t < end; t++) {
        uint64_t *h = j->ws + t * s->len;
        size_t l0 = j->lines * t / j->nthreads, l1 = j->lines * (t + 1) / j->nthreads;
        for (size_t line = l0; line < l1; line++) {
            size_t o = line / s->inner, i = line % s->inner;
            size_t ib = o * s->len * s->inner + i, ob = o * j->k * s->inner + i;
            topk_line(s, j->x + ib, j->k, h, j->vo + ob, j->io ? j->io + ob : NULL);
        }
    }
}

static bool topk_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    topk_state s;
    if (kn->n_out > 1 && kn->node->n_outputs > 1 && kn->node->outputs[1] != IR_NONE &&
        (kn->out[1].dtype != ANVIL_DTYPE_INT64 || !ir_shape_is_static(&kn->out[1].shape)))
        return false;
    return topk_form(kn, &s);
}

static size_t topk_workspace(const kern_node *kn) {
    topk_state s;
    if (!topk_form(kn, &s)) return 0;
    return (size_t)s.threads * s.len * sizeof(uint64_t);
}

static anvil_status topk_prepare(const kern_node *kn, void **state) {
    topk_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    topk_form(kn, s);
    *state = s;
    return ANVIL_OK;
}

static void topk_release(void *state) {
    free(state);
}

static anvil_status topk_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_in;
    const topk_state *s = state;
    size_t k = (size_t)out[0]->dims[s->axis];
    if (k > s->len)
        return core_err(ANVIL_ERR_RUNTIME, "%s: K is %zu but the axis has %zu elements",
                        ir_node_label(n), k, s->len);
    topk_job j = {.s = s, .x = in[0]->data, .vo = out[0]->data, .k = k, .ws = ws};
    j.io = n_out > 1 && out[1] ? out[1]->data : NULL;
    j.lines = s->outer * s->inner;
    if (k == 0 || j.lines == 0) return ANVIL_OK;
    size_t T = (size_t)op_ctx_threads(ctx);
    if (T > (size_t)s->threads) T = (size_t)s->threads;
    if (T > j.lines) T = j.lines;
    if (j.lines * s->len < RED_PAR_MIN || T < 1) T = 1;
    j.nthreads = T;
    op_parallel_for(T > 1 ? ctx : NULL, T, topk_chunk, &j);
    return ANVIL_OK;
}

const kern_variant reduce_v_topk = {.name = "topk_heap",
                                    .op = IR_OP_TOPK,
                                    .supports = topk_supports,
                                    .workspace_size = topk_workspace,
                                    .prepare = topk_prepare,
                                    .release = topk_release,
                                    .run = topk_run};
