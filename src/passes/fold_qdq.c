/* DequantizeLinear -> Conv / MatMul -> [Relu ->] QuantizeLinear (the QDQ form that ONNX Runtime's
 * quantize_static, NNCF and torch.onnx.export write) becomes one QLinearConv / QLinearMatMul on
 * the 8-bit tensors themselves, which the int8 kernels run (kernels/cpu/quant/qlinear.c) instead
 * of a dequantized fp32 product between two passes over memory.
 *
 * The rewrite computes what ONNX Runtime's own QDQ-to-QLinear fusion computes: the integer sums
 * of the quantized operands, requantized once. It differs from the QDQ graph's fp32 arithmetic
 * by its rounding only (an output may move by one quantization step where the fp32 value lies
 * near a rounding boundary). Taken where every quantization parameter is a constant, the
 * activations per tensor, the weights constant 8-bit tensors per tensor or per output channel
 * (axis 0 of a Conv's weights, axis 1 of a MatMul's B), a Conv's bias absent or the int32
 * DequantizeLinear of scale x_scale * w_scale that quantizers write. A Relu between the product
 * and the QuantizeLinear is dropped where the output's zero point is its type's minimum: the
 * saturation then clamps at zero already. Convolutions of one group only: a grouped or depthwise
 * one stays in fp32 between its DequantizeLinear and QuantizeLinear. qconv_dw_i8 (exact, on NCHW
 * planes) took MobileNetV2's int8 run from 3.0 to 4.1 ms against the fp32 depthwise kernels with
 * the conversions around them (Zen 5, 1 thread): an NHWC int8 depthwise kernel would have to beat
 * those first.
 *
 * The same pass makes the other nodes between them 8-bit where that is exact: a MaxPool between a
 * DequantizeLinear and a QuantizeLinear of the same parameters pools the 8-bit tensor, and a
 * residual Add of two dequantized tensors becomes anvil.QLinearAdd, which does the three nodes'
 * float arithmetic in one pass.
 *
 * Runs before fold_consts, which would otherwise turn the weights' DequantizeLinear into an fp32
 * constant and hide the pattern. */
#include "ops/ops.h"
#include "rewrite.h"

#include <math.h>
#include <string.h>

static bool is_8bit(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_UINT8 || dt == ANVIL_DTYPE_INT8;
}

/* v as a constant of dtype dt with `count` elements (count 0: any), else NULL. */
static const ir_value *const_value(const pass_ctx *c, ir_vid v, anvil_dtype dt, size_t count) {
    if (v == IR_NONE) return NULL;
    const ir_value *val = &c->g->values[v];
    size_t n;
    if (!(val->flags & IR_VALUE_CONST) || !val->data || val->dtype != dt ||
        !ir_shape_numel(&val->shape, &n) || (count && n != count))
        return NULL;
    return val;
}

/* The DequantizeLinear node that writes v (others may read v too: it stays for them), or NULL. */
static const ir_node *dq_of(const pass_ctx *c, ir_vid v) {
    const ir_node *p = pass_producer(c, v);
    if (!p || p->op != IR_OP_DEQUANTIZELINEAR || p->n_inputs < 3 || p->inputs[2] == IR_NONE)
        return NULL;
    int64_t block = 0;
    if (ir_attr_int(p, "block_size", 0, &block) != ANVIL_OK || block != 0) return NULL;
    return p;
}

/* A DequantizeLinear whose scale and zero point are constants of `count` elements (1: per tensor)
 * along `axis` (ignored per tensor), of an 8-bit x. */
static bool dq_params(const pass_ctx *c, const ir_node *dq, size_t count, int axis) {
    const anvil_dtype xt = c->g->values[dq->inputs[0]].dtype;
    if (!is_8bit(xt) || !const_value(c, dq->inputs[1], ANVIL_DTYPE_FLOAT32, count) ||
        !const_value(c, dq->inputs[2], xt, count))
        return false;
    if (count == 1) return true;
    int64_t ax = 1;
    const int rank = c->g->values[dq->inputs[0]].shape.rank;
    if (ir_attr_int(dq, "axis", 1, &ax) != ANVIL_OK) return false;
    return (ax < 0 ? ax + rank : ax) == axis;
}

static float scale_at(const ir_value *v, size_t i) {
    float x;
    memcpy(&x, (const char *)v->data + i * sizeof x, sizeof x);
    return x;
}

/* A bias DequantizeLinear of int32 b with scale sx * sw[j] (to float rounding) and zero point 0
 * or absent: its int32 input, else IR_NONE. */
static ir_vid bias_of(const pass_ctx *c, ir_vid bv, const ir_value *sx, const ir_value *sw,
                      size_t m) {
    const ir_node *p = pass_producer(c, bv);
    if (!p || p->op != IR_OP_DEQUANTIZELINEAR ||
        !const_value(c, p->inputs[0], ANVIL_DTYPE_INT32, m))
        return IR_NONE;
    size_t sn = 0;
    const ir_value *sb = const_value(c, p->inputs[1], ANVIL_DTYPE_FLOAT32, 0);
    if (!sb || !ir_shape_numel(&sb->shape, &sn) || (sn != 1 && sn != m)) return IR_NONE;
    if (p->n_inputs > 2 && p->inputs[2] != IR_NONE) {
        const ir_value *z = const_value(c, p->inputs[2], ANVIL_DTYPE_INT32, sn);
        for (size_t j = 0; z && j < sn; j++) {
            int32_t zj;
            memcpy(&zj, (const char *)z->data + j * sizeof zj, sizeof zj); /* maybe unaligned */
            if (zj != 0) return IR_NONE;
        }
        if (!z) return IR_NONE;
    }
    size_t wn = 0;
    ir_shape_numel(&sw->shape, &wn);
    for (size_t j = 0; j < m; j++) {
        const double want = (double)scale_at(sx, 0) * (double)scale_at(sw, wn == 1 ? 0 : j);
        const double got = scale_at(sb, sn == 1 ? 0 : j);
        if (!(fabs(got - want) <= 1e-6 * fabs(want))) return IR_NONE;
    }
    return p->inputs[0];
}

/* The QuantizeLinear that takes v (directly, or through a Relu it makes redundant), per tensor,
 * with a zero point; -1 if none. *relu: the Relu node between, or -1. */
static int32_t q_after(const pass_ctx *c, ir_vid v, int32_t *relu) {
    *relu = -1;
    int32_t r = pass_sole_reader(c, v);
    if (r >= 0 && c->g->nodes[r].op == IR_OP_RELU) {
        *relu = r;
        r = pass_sole_reader(c, c->g->nodes[r].outputs[0]);
    }
    if (r < 0) return -1;
    const ir_node *q = &c->g->nodes[r];
    if (q->op != IR_OP_QUANTIZELINEAR || q->n_inputs < 3 || q->inputs[2] == IR_NONE ||
        q->n_outputs != 1)
        return -1;
    const anvil_dtype yt = c->g->values[q->outputs[0]].dtype;
    const ir_value *zy = const_value(c, q->inputs[2], yt, 1);
    if (!is_8bit(yt) || !zy || !const_value(c, q->inputs[1], ANVIL_DTYPE_FLOAT32, 1)) return -1;
    int64_t block = 0;
    if (ir_attr_int(q, "block_size", 0, &block) != ANVIL_OK || block != 0) return -1;
    if (*relu >= 0) {
        const int32_t z =
            yt == ANVIL_DTYPE_INT8 ? *(const int8_t *)zy->data : *(const uint8_t *)zy->data;
        if (z != (yt == ANVIL_DTYPE_INT8 ? -128 : 0)) return -1;
    }
    return r;
}

/* Kills a DequantizeLinear nothing reads any more (NULL: none). */
static void drop_if_unread(pass_ctx *c, const ir_node *dq) {
    if (!dq) return;
    const int32_t k = (int32_t)(dq - c->g->nodes);
    if (!c->dead[k] && c->uses[dq->outputs[0]] == 0) pass_node_kill(c, k);
}

/* Node q becomes op over ins (n_in of them, IR_NONE for an absent one) with attrs; node k (the
 * product) and relu (or -1) go. */
static anvil_status rewrite(pass_ctx *c, int32_t k, int32_t relu, int32_t q, ir_op op,
                            const ir_vid *ins, int n_in, const ir_attr *attrs, int n_attrs) {
    ir_graph *g = c->g;
    ir_vid *inputs = core_arena_array(g->arena, (size_t)n_in, sizeof *inputs);
    if (!inputs) return ANVIL_ERR_OUT_OF_MEMORY;
    /* the producers of k's inputs: the DequantizeLinears, dropped below if nothing else reads them
     */
    const ir_node *dq[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && i < g->nodes[k].n_inputs; i++)
        if (g->nodes[k].inputs[i] != IR_NONE) dq[i] = dq_of(c, g->nodes[k].inputs[i]);
    pass_node_kill(c, k);
    if (relu >= 0) pass_node_kill(c, relu);
    pass_node_kill(c, q);
    c->dead[q] = false;
    ir_node *h = &g->nodes[q];
    h->op = op;
    h->attrs = (ir_attr *)attrs;
    h->n_attrs = n_attrs;
    h->params = NULL;
    h->fusion = NULL;
    for (int i = 0; i < n_in; i++) inputs[i] = IR_NONE;
    h->inputs = inputs;
    h->n_inputs = n_in;
    for (int i = 0; i < n_in; i++)
        if (ins[i] != IR_NONE) CORE_TRY(pass_node_set_input(c, q, i, ins[i]));
    CORE_TRY(op_get(op)->check(g, &g->nodes[q]));
    for (int i = 0; i < 3; i++) drop_if_unread(c, dq[i]);
    c->pg->folded_qdq++;
    return ANVIL_OK;
}

static anvil_status fold_conv(pass_ctx *c, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    int64_t group = 1;
    if (ir_attr_int(n, "group", 1, &group) != ANVIL_OK || group != 1 || n->n_inputs < 2)
        return ANVIL_OK;
    const ir_node *dx = dq_of(c, n->inputs[0]), *dw = dq_of(c, n->inputs[1]);
    if (!dx || !dw) return ANVIL_OK;
    const ir_value *w = &g->values[dw->inputs[0]];
    if (w->shape.rank != 4 || !(w->flags & IR_VALUE_CONST) || !w->data) return ANVIL_OK;
    const size_t m = (size_t)w->shape.d[0];
    const ir_value *sw = &g->values[dw->inputs[1]];
    size_t wn = 0;
    if (!ir_shape_numel(&sw->shape, &wn) || (wn != 1 && wn != m)) return ANVIL_OK;
    if (!dq_params(c, dx, 1, 0) || !dq_params(c, dw, wn, 0)) return ANVIL_OK;
    ir_vid bias = IR_NONE;
    if (n->n_inputs > 2 && n->inputs[2] != IR_NONE) {
        bias = bias_of(c, n->inputs[2], &g->values[dx->inputs[1]], sw, m);
        if (bias == IR_NONE) return ANVIL_OK;
    }
    int32_t relu;
    const int32_t q = q_after(c, n->outputs[0], &relu);
    if (q < 0) return ANVIL_OK;
    const ir_node *qn = &g->nodes[q];
    const ir_vid ins[9] = {dx->inputs[0], dx->inputs[1], dx->inputs[2],
                           dw->inputs[0], dw->inputs[1], dw->inputs[2],
                           qn->inputs[1], qn->inputs[2], bias};
    return rewrite(c, k, relu, q, IR_OP_QLINEARCONV, ins, bias != IR_NONE ? 9 : 8, n->attrs,
                   n->n_attrs);
}

static anvil_status fold_matmul(pass_ctx *c, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    const ir_node *da = dq_of(c, n->inputs[0]), *db = dq_of(c, n->inputs[1]);
    if (!da || !db) return ANVIL_OK;
    const ir_value *b = &g->values[db->inputs[0]];
    if (b->shape.rank != 2 || !(b->flags & IR_VALUE_CONST) || !b->data) return ANVIL_OK;
    size_t bn = 0;
    if (!ir_shape_numel(&g->values[db->inputs[1]].shape, &bn) ||
        (bn != 1 && bn != (size_t)b->shape.d[1]))
        return ANVIL_OK;
    if (g->values[da->inputs[0]].shape.rank < 2 || !dq_params(c, da, 1, 0) ||
        !dq_params(c, db, bn, 1))
        return ANVIL_OK;
    int32_t relu;
    const int32_t q = q_after(c, n->outputs[0], &relu);
    if (q < 0) return ANVIL_OK;
    const ir_node *qn = &g->nodes[q];
    const ir_vid ins[8] = {da->inputs[0], da->inputs[1], da->inputs[2], db->inputs[0],
                           db->inputs[1], db->inputs[2], qn->inputs[1], qn->inputs[2]};
    return rewrite(c, k, relu, q, IR_OP_QLINEARMATMUL, ins, 8, NULL, 0);
}

/* Whether constants a and b hold the same bytes (and dtype and element count). */
static bool same_const(const pass_ctx *c, ir_vid a, ir_vid b) {
    const ir_value *va = &c->g->values[a], *vb = &c->g->values[b];
    return va->dtype == vb->dtype && va->data_bytes == vb->data_bytes && va->data && vb->data &&
           !memcmp(va->data, vb->data, va->data_bytes);
}

/* DequantizeLinear -> MaxPool -> QuantizeLinear with the same scale and zero point is the
 * MaxPool of the 8-bit tensor itself: dequantizing is increasing (a positive scale), so it
 * commutes with max, and quantizing a dequantized value gives it back. */
static anvil_status fold_pool(pass_ctx *c, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (n->n_inputs != 1) return ANVIL_OK;
    const ir_node *dx = dq_of(c, n->inputs[0]);
    if (!dx || !dq_params(c, dx, 1, 0)) return ANVIL_OK;
    const int32_t q = pass_sole_reader(c, n->outputs[0]);
    if (q < 0) return ANVIL_OK;
    const ir_node *qn = &g->nodes[q];
    if (qn->op != IR_OP_QUANTIZELINEAR || qn->n_inputs < 3 || qn->inputs[2] == IR_NONE ||
        g->values[qn->outputs[0]].dtype != g->values[dx->inputs[0]].dtype ||
        !same_const(c, qn->inputs[1], dx->inputs[1]) ||
        !same_const(c, qn->inputs[2], dx->inputs[2]))
        return ANVIL_OK;
    const ir_vid ins[1] = {dx->inputs[0]};
    return rewrite(c, k, -1, q, IR_OP_MAXPOOL, ins, 1, n->attrs, n->n_attrs);
}

/* DequantizeLinear(a) + DequantizeLinear(b) -> [Relu ->] QuantizeLinear, a and b of one shape:
 * anvil.QLinearAdd on the 8-bit tensors (ops/quant/qadd.c), the same arithmetic in one pass. */
static anvil_status fold_add(pass_ctx *c, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (n->n_inputs != 2) return ANVIL_OK;
    const ir_node *da = dq_of(c, n->inputs[0]), *db = dq_of(c, n->inputs[1]);
    if (!da || !db || !dq_params(c, da, 1, 0) || !dq_params(c, db, 1, 0)) return ANVIL_OK;
    const ir_shape *sa = &g->values[da->inputs[0]].shape, *sb = &g->values[db->inputs[0]].shape;
    if (sa->rank < 0 || !ir_shape_equal(sa, sb)) return ANVIL_OK;
    int32_t relu;
    const int32_t q = q_after(c, n->outputs[0], &relu);
    if (q < 0) return ANVIL_OK;
    const ir_node *qn = &g->nodes[q];
    const ir_vid ins[8] = {da->inputs[0], da->inputs[1], da->inputs[2], db->inputs[0],
                           db->inputs[1], db->inputs[2], qn->inputs[1], qn->inputs[2]};
    return rewrite(c, k, relu, q, IR_OP_QLINEAR_ADD, ins, 8, NULL, 0);
}

anvil_status pass_fold_qdq(pass_ctx *c) {
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        const ir_node *n = &c->g->nodes[k];
        if (c->dead[k] || n->fusion || n->n_outputs != 1 || n->n_inputs < 1) continue;
        if (n->op == IR_OP_CONV)
            CORE_TRY(fold_conv(c, k));
        else if (n->op == IR_OP_MATMUL)
            CORE_TRY(fold_matmul(c, k));
        else if (n->op == IR_OP_MAXPOOL)
            CORE_TRY(fold_pool(c, k));
        else if (n->op == IR_OP_ADD)
            CORE_TRY(fold_add(c, k));
    }
    return ANVIL_OK;
}
