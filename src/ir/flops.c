/* FLOPs estimates per node from the shapes recorded in the graph.
 *
 * The numbers are for reports (anvil info, benchmarks as % of peak), not for scheduling, so they
 * follow the usual conventions rather than counting every instruction: a multiply-accumulate is
 * two operations, elementwise work is one per output element, and copies cost nothing. Symbolic
 * dims are taken as 1 (the "batch 1" convention) and the caller is told so through `approx`,
 * because a total over unknown sizes would otherwise look exact. */
#include "ir.h"

#include <string.h>

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The shape of value v, or NULL when v is absent, out of range or of unknown rank (which makes the
 * estimate approximate). */
static const ir_shape *shape_of(const ir_graph *g, ir_vid v, bool *approx) {
    if (v == IR_NONE || v < 0 || v >= g->n_values || g->values[v].shape.rank < 0 ||
        g->values[v].shape.rank > IR_MAX_RANK) {
        *approx = true;
        return NULL;
    }
    return &g->values[v].shape;
}

/* Product of dims [from, rank) with unknown dims counted as 1. */
static uint64_t dims_product(const ir_shape *s, int from, bool *approx) {
    uint64_t p = 1;
    for (int i = from; i < s->rank; i++) {
        if (s->d[i] < 0)
            *approx = true;
        else
            p = sat_mul(p, (uint64_t)s->d[i]);
    }
    return p;
}

static uint64_t numel_of(const ir_graph *g, ir_vid v, bool *approx) {
    const ir_shape *s = shape_of(g, v, approx);
    return s ? dims_product(s, 0, approx) : 0;
}

static ir_vid input_at(const ir_node *n, int k) {
    return k < n->n_inputs ? n->inputs[k] : IR_NONE;
}

static ir_vid output0(const ir_node *n) {
    return n->n_outputs > 0 ? n->outputs[0] : IR_NONE;
}

/* An INT attribute read without touching the thread's last error: estimates never fail. */
static int64_t attr_int_or(const ir_node *n, const char *name, int64_t dflt) {
    const ir_attr *a = ir_node_attr(n, name);
    return a && a->type == IR_ATTR_INT ? a->i : dflt;
}

/* Conv: every output element is a dot product over C/group * kernel inputs, i.e. over all weight
 * dims but the first. ConvTranspose scatters each input element over the same product. */
static uint64_t conv_flops(const ir_graph *g, const ir_node *n, ir_vid driver, bool *approx) {
    const ir_shape *w = shape_of(g, input_at(n, 1), approx);
    if (!w || w->rank < 1) return 0;
    return sat_mul(2, sat_mul(numel_of(g, driver, approx), dims_product(w, 1, approx)));
}

static uint64_t gemm_flops(const ir_graph *g, const ir_node *n, bool *approx) {
    const ir_shape *a = shape_of(g, input_at(n, 0), approx);
    if (!a || a->rank != 2) return 0;
    int kdim = attr_int_or(n, "transA", 0) ? 0 : 1;
    uint64_t k = a->d[kdim] >= 0 ? (uint64_t)a->d[kdim] : (*approx = true, 1);
    return sat_mul(2, sat_mul(numel_of(g, output0(n), approx), k));
}

static uint64_t matmul_flops(const ir_graph *g, const ir_node *n, bool *approx) {
    const ir_shape *a = shape_of(g, input_at(n, 0), approx);
    if (!a || a->rank < 1) return 0;
    int64_t kd = a->d[a->rank - 1];
    uint64_t k = kd >= 0 ? (uint64_t)kd : (*approx = true, 1);
    return sat_mul(2, sat_mul(numel_of(g, output0(n), approx), k));
}

static uint64_t pool_flops(const ir_graph *g, const ir_node *n, bool *approx) {
    const ir_attr *ks = ir_node_attr(n, "kernel_shape");
    if (!ks || ks->type != IR_ATTR_INTS || !ks->ints) {
        *approx = true;
        return 0;
    }
    uint64_t window = 1;
    for (size_t i = 0; i < ks->n; i++)
        if (ks->ints[i] > 0) window = sat_mul(window, (uint64_t)ks->ints[i]);
    return sat_mul(numel_of(g, output0(n), approx), window);
}

static uint64_t resize_flops(const ir_graph *g, const ir_node *n, bool *approx) {
    const ir_attr *mode = ir_node_attr(n, "mode");
    bool nearest =
        !mode || (mode->type == IR_ATTR_STRING && mode->s && !strcmp(mode->s, "nearest"));
    return nearest ? 0 : numel_of(g, output0(n), approx);
}

uint64_t ir_node_flops_ex(const ir_graph *g, const ir_node *n, bool *approx) {
    bool local = false;
    bool *ap = approx ? approx : &local;
    *ap = false;
    if (!g || !n) return 0;
    switch (n->op) {
    case IR_OP_CONV:
    case IR_OP_CONV_NHWC:
        return conv_flops(g, n, output0(n), ap);
    case IR_OP_CONVTRANSPOSE:
        return conv_flops(g, n, input_at(n, 0), ap);
    case IR_OP_GEMM:
        return gemm_flops(g, n, ap);
    case IR_OP_MATMUL:
        return matmul_flops(g, n, ap);
    case IR_OP_MAXPOOL:
    case IR_OP_AVERAGEPOOL:
        return pool_flops(g, n, ap);
    case IR_OP_GLOBALAVERAGEPOOL:
        return numel_of(g, input_at(n, 0), ap);
    case IR_OP_RESIZE:
        return resize_flops(g, n, ap);
    /* max, subtract, exp, sum and divide per element */
    case IR_OP_SOFTMAX:
        return sat_mul(5, numel_of(g, output0(n), ap));
    /* inference form: one multiply and one add per element once the statistics are folded */
    case IR_OP_BATCHNORMALIZATION:
        return sat_mul(2, numel_of(g, output0(n), ap));
    case IR_OP_MAX:
    case IR_OP_MIN: {
        uint64_t present = 0;
        for (int k = 0; k < n->n_inputs; k++) present += n->inputs[k] != IR_NONE;
        return present > 1 ? sat_mul(present - 1, numel_of(g, output0(n), ap)) : 0;
    }
    case IR_OP_CAST:
    case IR_OP_CONCAT:
    case IR_OP_CONSTANT:
    case IR_OP_CONSTANTOFSHAPE:
    case IR_OP_DROPOUT:
    case IR_OP_FLATTEN:
    case IR_OP_GATHER:
    case IR_OP_IDENTITY:
    case IR_OP_PAD:
    case IR_OP_RESHAPE:
    case IR_OP_SHAPE:
    case IR_OP_SLICE:
    case IR_OP_SQUEEZE:
    case IR_OP_TRANSPOSE:
    case IR_OP_UNSQUEEZE:
        return 0;
    default:
        /* elementwise ops and activations, and any op added to the table later until it gets
         * its own row here: about one operation per output element */
        return numel_of(g, output0(n), ap);
    }
}

uint64_t ir_node_flops(const ir_graph *g, const ir_node *n) {
    return ir_node_flops_ex(g, n, NULL);
}
