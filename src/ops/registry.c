/* The dispatch table generated from ir/ops.def, plus helpers shared by all op families.
 * A row of ops.def without its op_impl_<impl> definition is a link error. */
#include "ops.h"

#include <stdio.h>
#include <string.h>

#define OP(id, name, impl, file) extern const op_impl op_impl_##impl;
#include "ir/ops.def"
#undef OP

static const op_impl *const op_table[IR_OP_COUNT] = {
#define OP(id, name, impl, file) [IR_OP_##id] = &op_impl_##impl,
#include "ir/ops.def"
#undef OP
};

const op_impl *op_get(ir_op op) {
    return op_table[(unsigned)op < IR_OP_COUNT ? op : 0];
}

anvil_status op_check_graph(ir_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        const op_impl *impl = op_get(n->op);
        /* trailing omitted optional inputs/outputs do not count against the arity */
        int nin = n->n_inputs, nout = n->n_outputs, nin_all = n->n_inputs;
        /* inputs a fused epilogue appended (src/passes) are not the op's own */
        if (n->fusion && nin > impl->max_inputs) nin = nin_all = impl->max_inputs;
        while (nin > 0 && n->inputs[nin - 1] == IR_NONE) nin--;
        if (nin < impl->min_inputs || nin_all > impl->max_inputs)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s has %d inputs; %s takes %d to %d",
                            ir_node_label(n), n->n_inputs, ir_op_name(n->op), impl->min_inputs,
                            impl->max_inputs);
        for (int k = 0; k < impl->min_inputs && k < n->n_inputs; k++)
            if (n->inputs[k] == IR_NONE)
                return core_err(ANVIL_ERR_INVALID_MODEL, "%s: required input %d is missing",
                                ir_node_label(n), k);
        while (nout > 0 && n->outputs[nout - 1] == IR_NONE) nout--;
        if (nout < impl->min_outputs || n->n_outputs > impl->max_outputs)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s has %d outputs; %s produces %d to %d",
                            ir_node_label(n), n->n_outputs, ir_op_name(n->op), impl->min_outputs,
                            impl->max_outputs);
        CORE_TRY(impl->check(g, n));
    }
    for (int32_t i = 0; i < g->n_children; i++) CORE_TRY(op_check_graph(g->children[i]));
    return ANVIL_OK;
}

void op_parallel_for(op_ctx *ctx, size_t n, op_range_fn fn, void *arg) {
    if (!ctx) {
        core_pool_run(NULL, n, fn, arg);
        return;
    }
    core_pool_run_upto(ctx->pool, ctx->threads, n, fn, arg);
}

int op_ctx_threads(const op_ctx *ctx) {
    if (!ctx) return 1;
    int t = core_pool_threads(ctx->pool);
    return ctx->threads > 0 && ctx->threads < t ? ctx->threads : t;
}

size_t op_tensor_numel(const op_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->dims[i];
    return n;
}

anvil_status op_broadcast_shape(const ir_node *n, const ir_shape *a, const ir_shape *b,
                                ir_shape *out) {
    if (a->rank < 0 || b->rank < 0) {
        ir_shape_unknown(out);
        return ANVIL_OK;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    ir_shape o;
    memset(&o, 0, sizeof o);
    o.rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        int32_t sa = ia >= 0 ? a->sym[ia] : -1, sb = ib >= 0 ? b->sym[ib] : -1;
        o.sym[i] = -1;
        if (da >= 0 && db >= 0) {
            if (da == db || db == 1)
                o.d[i] = da;
            else if (da == 1)
                o.d[i] = db;
            else {
                char sa_buf[128], sb_buf[128];
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)",
                                ir_node_label(n), ir_shape_str(NULL, a, sa_buf, sizeof sa_buf),
                                ir_shape_str(NULL, b, sb_buf, sizeof sb_buf), i, (long long)da,
                                (long long)db);
            }
        } else if (da == 1) {
            o.d[i] = db;
            o.sym[i] = sb;
        } else if (db == 1) {
            o.d[i] = da;
            o.sym[i] = sa;
        } else if (da >= 0) {
            o.d[i] =
                da; /* the unknown side must be 1 or equal; the known dim wins unless it is 1 */
        } else if (db >= 0) {
            o.d[i] = db;
        } else {
            o.d[i] = IR_DIM_UNKNOWN;
            o.sym[i] = (sa == sb) ? sa : -1;
        }
    }
    *out = o;
    return ANVIL_OK;
}

anvil_status op_norm_axis(const ir_node *n, const char *what, int64_t axis, int rank, int *out) {
    if (axis < -(int64_t)rank || axis >= rank)
        return core_err(ANVIL_ERR_SHAPE, "%s: %s %lld is out of range for rank %d (valid: %d..%d)",
                        ir_node_label(n), what, (long long)axis, rank, -rank, rank - 1);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return ANVIL_OK;
}

anvil_status op_value_ints(const ir_node *n, int input, const op_tinfo *t, int64_t *out, size_t cap,
                           size_t *count) {
    if (t->dtype != ANVIL_DTYPE_INT64 && t->dtype != ANVIL_DTYPE_INT32)
        return core_err(ANVIL_ERR_SHAPE, "%s: input %d must be INT64 (or INT32) but is %s",
                        ir_node_label(n), input, anvil_dtype_name(t->dtype));
    size_t num;
    if (!ir_shape_numel(&t->shape, &num))
        return core_err(ANVIL_ERR_SHAPE, "%s: input %d has no static shape", ir_node_label(n),
                        input);
    if (num > cap)
        return core_err(ANVIL_ERR_SHAPE, "%s: input %d has %zu elements; at most %zu are allowed",
                        ir_node_label(n), input, num, cap);
    for (size_t i = 0; i < num; i++) out[i] = core_load_i64(t->dtype, t->value, i);
    *count = num;
    return ANVIL_OK;
}

bool op_dims_may_equal(const ir_shape *a, const ir_shape *b, int count) {
    for (int d = 0; d < count; d++)
        if (a->d[d] >= 0 && b->d[d] >= 0 && a->d[d] != b->d[d]) return false;
    return true;
}
