/* MaxPool on 8-bit tensors (variant "maxpool_i8") and anvil.QLinearAdd ("qadd_avx512"). The
 * MaxPool is what fold_qdq leaves of a
 * DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero point (dequantizing is
 * increasing, so the max of the dequantized values is the dequantized max, and quantizing it
 * again gives the 8-bit value back). NCHW, 2-D windows without dilation, no Indices output; each
 * plane is pooled by quant_maxpool_avx512, the planes split among the threads. */
#include "kernels/kernels.h"
#include "ops/nn_common.h"
#include "quant.h"

#include <stdlib.h>

static bool pool_geometry(const kern_node *kn, quant_pool *g) {
    const ir_node *n = kn->node;
    const op_tinfo *x = &kn->in[0];
    if ((x->dtype != ANVIL_DTYPE_UINT8 && x->dtype != ANVIL_DTYPE_INT8) ||
        !ir_shape_is_static(&x->shape) || x->shape.rank != 4 || kern_has_output(kn, 1))
        return false;
    nn_window w;
    if (nn_window_parse(n, true, n->opset >= 10, n->opset >= 10, &w) != ANVIL_OK || w.n_kernel != 2)
        return false;
    nn_geom geo;
    if (nn_window_resolve(n, &w, 2, &x->shape.d[2], w.kernel, true, &geo) != ANVIL_OK) return false;
    for (int d = 0; d < 2; d++)
        if (geo.dil[d] != 1 || geo.kernel[d] > 32 || geo.pad_begin[d] >= geo.kernel[d] ||
            geo.pad_end[d] >= geo.kernel[d] || geo.out[d] != kn->out[0].shape.d[d + 2])
            return false;
    *g = (quant_pool){.ih = geo.in[0],
                      .iw = geo.in[1],
                      .oh = geo.out[0],
                      .ow = geo.out[1],
                      .kh = geo.kernel[0],
                      .kw = geo.kernel[1],
                      .sh = geo.stride[0],
                      .sw = geo.stride[1],
                      .pt = geo.pad_begin[0],
                      .pl = geo.pad_begin[1]};
    const int64_t span = (g->ow - 1) * g->sw + g->kw;
    g->row_len = span > g->pl + g->iw ? span : g->pl + g->iw;
    return true;
}

static bool supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    quant_pool g;
    return pool_geometry(kn, &g);
}

/* A row buffer per thread. */
static size_t workspace(const kern_node *kn) {
    quant_pool g;
    if (!pool_geometry(kn, &g)) return 0;
    return (size_t)(kn->threads > 0 ? kn->threads : 1) * (size_t)((g.row_len + 128 + 63) / 64 * 64);
}

typedef struct pool_job {
    quant_pool g;
    const uint8_t *x;
    uint8_t *y, *ws;
    size_t ws_stride;
    int64_t planes;
    int slots;
    bool is_signed;
} pool_job;

static void pool_range(void *arg, size_t begin, size_t end) {
    const pool_job *j = arg;
    for (size_t t = begin; t < end; t++)
        for (int64_t p = (int64_t)t; p < j->planes; p += j->slots)
            quant_maxpool_avx512(j->x + p * j->g.ih * j->g.iw, &j->g, j->is_signed,
                                 j->ws + t * j->ws_stride, j->y + p * j->g.oh * j->g.ow);
}

/* The geometry and the session's threads, for run. */
typedef struct pool_state {
    quant_pool g;
    int threads;
} pool_state;

static anvil_status prepare(const kern_node *kn, void **state) {
    pool_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!pool_geometry(kn, &s->g)) {
        free(s);
        return core_err(ANVIL_ERR_INTERNAL, "%s: maxpool_i8 prepared on a node it does not take",
                        ir_node_label(kn->node));
    }
    s->threads = kn->threads > 0 ? kn->threads : 1;
    *state = s;
    return ANVIL_OK;
}

static anvil_status run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    const pool_state *s = state;
    pool_job j = {.g = s->g,
                  .x = in[0]->data,
                  .y = out[0]->data,
                  .ws = ws,
                  .ws_stride = (size_t)((s->g.row_len + 128 + 63) / 64 * 64),
                  .planes = in[0]->dims[0] * in[0]->dims[1],
                  .is_signed = in[0]->dtype == ANVIL_DTYPE_INT8};
    int t = op_ctx_threads(ctx);
    if (t > s->threads) t = s->threads;
    j.slots = j.planes < t ? (int)j.planes : t;
    if (j.slots > 0) op_parallel_for(ctx, (size_t)j.slots, pool_range, &j);
    return ANVIL_OK;
}

const kern_variant quant_variant_maxpool = {.name = "maxpool_i8",
                                            .op = IR_OP_MAXPOOL,
                                            .needs = KERN_NEEDS_AVX512,
                                            .supports = supports,
                                            .workspace_size = workspace,
                                            .prepare = prepare,
                                            .release = free,
                                            .run = run};

/* ---- anvil.QLinearAdd ------------------------------------------------------------------------ */

static bool add_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    for (int i = 0; i < 8; i++)
        if (!kern_has_input(kn, i) || !ir_shape_is_static(&kn->in[i].shape) ||
            ((i == 1 || i == 2 || i == 4 || i == 5 || i == 6 || i == 7) && !kn->in[i].value))
            return false;
    return true;
}

typedef struct add_job {
    quant_add_params p;
    const uint8_t *a, *b;
    uint8_t *y;
    int64_t n;
} add_job;

static void add_range(void *arg, size_t begin, size_t end) {
    const add_job *j = arg;
    const int64_t chunk = (j->n + 63) / 64 / 64 * 64 + 64, b = (int64_t)begin * chunk;
    int64_t e = (int64_t)end * chunk;
    if (e > j->n) e = j->n;
    if (b < e) quant_add_avx512(&j->p, j->a + b, j->b + b, e - b, j->y + b);
}

static int32_t zp_of(const op_tensor *t) {
    return t->dtype == ANVIL_DTYPE_INT8 ? *(const int8_t *)t->data : *(const uint8_t *)t->data;
}

static anvil_status add_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)state;
    (void)n_in;
    (void)n_out;
    (void)ws;
    add_job j = {.p = {.sa = (float)core_load_f64(in[1]->dtype, in[1]->data, 0),
                       .sb = (float)core_load_f64(in[4]->dtype, in[4]->data, 0),
                       .sy = (float)core_load_f64(in[6]->dtype, in[6]->data, 0),
                       .za = zp_of(in[2]),
                       .zb = zp_of(in[5]),
                       .zy = zp_of(in[7]),
                       .a_signed = in[0]->dtype == ANVIL_DTYPE_INT8,
                       .b_signed = in[3]->dtype == ANVIL_DTYPE_INT8,
                       .y_signed = out[0]->dtype == ANVIL_DTYPE_INT8},
                 .a = in[0]->data,
                 .b = in[3]->data,
                 .y = out[0]->data,
                 .n = (int64_t)op_tensor_numel(out[0])};
    /* 64 pieces of whole 64-element runs; a small tensor on this thread alone */
    if (j.n >= 8192)
        op_parallel_for(ctx, 64, add_range, &j);
    else
        add_range(&j, 0, 64);
    return ANVIL_OK;
}

const kern_variant quant_variant_add = {.name = "qadd_avx512",
                                        .op = IR_OP_QLINEAR_ADD,
                                        .needs = KERN_NEEDS_AVX512,
                                        .supports = add_supports,
                                        .run = add_run};
