/* Control flow: If, Loop and Scan. Their bodies are subgraphs run by the runtime's dynamic
 * interpreter (op_subgraph_run), which also binds the outer-scope values a body reads. Output
 * shapes depend on which branch runs or how many iterations happen, so all three are
 * OP_DATA_DEPENDENT and allocate their outputs (op_output_alloc) once they know them. */
#include "ops/tensor_common.h"

#include <stdlib.h>
#include <string.h>

static anvil_status graph_attr(const ir_node *n, const char *name, const ir_graph **out) {
    const ir_attr *a = ir_node_attr(n, name);
    if (!a || a->type != IR_ATTR_GRAPH || !a->g)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' must be a graph%s; fix the exporter", ir_node_label(n),
                        name, a ? "" : " and is missing");
    *out = a->g;
    return ANVIL_OK;
}

static anvil_dtype body_out_dtype(const ir_graph *b, int j) {
    return b->values[b->outputs[j]].dtype;
}

static size_t data_bytes(const op_tensor *t) {
    size_t b = 0;
    core_tensor_bytes(t->dtype, t->dims, t->rank, &b);
    return b;
}

static bool same_shape(const op_tensor *a, const op_tensor *b) {
    if (a->rank != b->rank || a->dtype != b->dtype) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

static const char *dims_str(const op_tensor *t, char *buf, size_t cap) {
    ir_shape s;
    ir_shape_set(&s, t->rank, t->dims);
    return ir_shape_str(NULL, &s, buf, cap);
}

/* Gives out a copy of t (t's storage is borrowed and stays with its owner). */
static anvil_status copy_out(op_ctx *ctx, op_tensor *out, const op_tensor *t) {
    CORE_TRY(op_output_alloc(ctx, out, t->dtype, t->rank, t->dims));
    size_t b = data_bytes(t);
    if (b) memcpy(out->data, t->data, b);
    return ANVIL_OK;
}

static bool scalar_true(const op_tensor *t) {
    return t && op_tensor_numel(t) > 0 && core_load_i64(t->dtype, t->data, 0) != 0;
}

/* ---- If ------------------------------------------------------------------------------------ */

typedef struct if_params {
    const ir_graph *then_g, *else_g;
} if_params;

static anvil_status if_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, if_params, p);
    CORE_TRY(graph_attr(n, "then_branch", &p->then_g));
    CORE_TRY(graph_attr(n, "else_branch", &p->else_g));
    const ir_graph *br[2] = {p->then_g, p->else_g};
    for (int b = 0; b < 2; b++) {
        if (br[b]->n_inputs != 0)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: %s has %d inputs; If branches take none",
                            ir_node_label(n), b ? "else_branch" : "then_branch",
                            (int)br[b]->n_inputs);
        if (br[b]->n_outputs != n->n_outputs)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: %s has %d outputs but the node has %d; they must match",
                            ir_node_label(n), b ? "else_branch" : "then_branch",
                            (int)br[b]->n_outputs, n->n_outputs);
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status if_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                             op_tinfo *out, int n_out) {
    (void)g, (void)n_in;
    const if_params *p = n->params;
    if (in[0].dtype != ANVIL_DTYPE_UNDEFINED && in[0].dtype != ANVIL_DTYPE_BOOL)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 (cond) must be bool but is %s",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    for (int j = 0; j < n_out; j++) {
        const ir_value *a = &p->then_g->values[p->then_g->outputs[j]];
        const ir_value *b = &p->else_g->values[p->else_g->outputs[j]];
        if (a->dtype != ANVIL_DTYPE_UNDEFINED && b->dtype != ANVIL_DTYPE_UNDEFINED &&
            a->dtype != b->dtype)
            return core_err(
                ANVIL_ERR_SHAPE, "%s: output %d is %s in then_branch but %s in else_branch",
                ir_node_label(n), j, anvil_dtype_name(a->dtype), anvil_dtype_name(b->dtype));
        out[j].dtype = a->dtype != ANVIL_DTYPE_UNDEFINED ? a->dtype : b->dtype;
        /* the branches may differ in shape (from opset 11): keep only what both agree on */
        if (a->shape.rank >= 0 && a->shape.rank == b->shape.rank) {
            tensor_shape_unknown_dims(&out[j].shape, a->shape.rank);
            for (int d = 0; d < a->shape.rank; d++)
                if (a->shape.d[d] >= 0 && a->shape.d[d] == b->shape.d[d])
                    out[j].shape.d[d] = a->shape.d[d];
        }
    }
    return ANVIL_OK;
}

static anvil_status if_run(const ir_node *n, const op_tensor *const *in, int n_in,
                           op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    const if_params *p = n->params;
    if (!in[0] || op_tensor_numel(in[0]) != 1)
        return core_err(ANVIL_ERR_RUNTIME, "%s: cond must hold exactly one element",
                        ir_node_label(n));
    const ir_graph *br = scalar_true(in[0]) ? p->then_g : p->else_g;
    op_tensor tmp[128];
    if (n_out > 128)
        return core_err(ANVIL_ERR_LIMIT, "%s has more than 128 outputs", ir_node_label(n));
    CORE_TRY(op_subgraph_run(ctx, br, NULL, 0, tmp, n_out));
    for (int j = 0; j < n_out; j++) {
        if (out[j]) {
            *out[j] = tmp[j];
        } else {
            op_tensor_release(&tmp[j]);
        }
    }
    return ANVIL_OK;
}

TENSOR_DATA_DEPENDENT_IMPL(if, 1, 1, 1, 127, if_check, if_infer, if_run)

/* ---- Loop ---------------------------------------------------------------------------------- */

typedef struct loop_params {
    const ir_graph *body;
    int n_carried, n_scan;
} loop_params;

static anvil_status loop_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, loop_params, p);
    CORE_TRY(graph_attr(n, "body", &p->body));
    p->n_carried = n->n_inputs - 2;
    p->n_scan = n->n_outputs - p->n_carried;
    if (p->n_carried < 0 || p->n_scan < 0 || p->body->n_inputs != 2 + p->n_carried ||
        p->body->n_outputs != 1 + p->n_carried + p->n_scan)
        return core_err(
            ANVIL_ERR_INVALID_MODEL,
            "%s: with %d inputs and %d outputs the body must take %d inputs (iteration, "
            "cond, carried values) and give %d outputs (cond, carried, scan outputs), "
            "but it has %d and %d",
            ir_node_label(n), n->n_inputs, n->n_outputs, n->n_inputs, n->n_outputs + 1,
            (int)p->body->n_inputs, (int)p->body->n_outputs);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status loop_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g, (void)n_in, (void)n_out;
    const loop_params *p = n->params;
    if (n->inputs[0] != IR_NONE && in[0].dtype != ANVIL_DTYPE_UNDEFINED &&
        in[0].dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 (M) must be int64 but is %s",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    if (n->inputs[1] != IR_NONE && in[1].dtype != ANVIL_DTYPE_UNDEFINED &&
        in[1].dtype != ANVIL_DTYPE_BOOL)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (cond) must be bool but is %s",
                        ir_node_label(n), anvil_dtype_name(in[1].dtype));
    for (int j = 0; j < p->n_carried; j++) {
        out[j].dtype = in[2 + j].dtype;
        if (out[j].dtype == ANVIL_DTYPE_UNDEFINED) out[j].dtype = body_out_dtype(p->body, 1 + j);
        tensor_shape_unknown_dims(&out[j].shape, in[2 + j].shape.rank);
    }
    for (int k = 0; k < p->n_scan; k++) {
        const ir_value *v = &p->body->values[p->body->outputs[1 + p->n_carried + k]];
        out[p->n_carried + k].dtype = v->dtype;
        if (v->shape.rank >= 0 && v->shape.rank < IR_MAX_RANK)
            tensor_shape_unknown_dims(&out[p->n_carried + k].shape, v->shape.rank + 1);
    }
    return ANVIL_OK;
}

/* A scan output being built: one slice per iteration, appended. */
typedef struct scan_acc {
    op_tensor first; /* the first slice's dtype and dims (data unused) */
    unsigned char *buf;
    size_t bytes, cap;
    int64_t count;
} scan_acc;

static anvil_status acc_append(const ir_node *n, int k, scan_acc *a, const op_tensor *t) {
    if (a->count == 0) {
        a->first = *t;
        a->first.data = NULL;
    } else if (!same_shape(&a->first, t)) {
        char x[160], y[160];
        return core_err(ANVIL_ERR_RUNTIME,
                        "%s: scan output %d is %s %s in the first iteration but %s %s in "
                        "iteration %lld; every iteration must give the same shape",
                        ir_node_label(n), k, anvil_dtype_name(a->first.dtype),
                        dims_str(&a->first, x, sizeof x), anvil_dtype_name(t->dtype),
                        dims_str(t, y, sizeof y), (long long)a->count);
    }
    size_t b = data_bytes(t);
    if (a->bytes + b > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->bytes + b) {
            if (!core_mul_size(cap, 2, &cap))
                return core_err(ANVIL_ERR_LIMIT, "%s: scan output %d is too large",
                                ir_node_label(n), k);
        }
        unsigned char *p = realloc(a->buf, cap);
        if (!p) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: out of memory", ir_node_label(n));
        a->buf = p;
        a->cap = cap;
    }
    if (b) memcpy(a->buf + a->bytes, t->data, b);
    a->bytes += b;
    a->count++;
    return ANVIL_OK;
}

/* Empty scan output after zero iterations: [0] followed by the body's declared dims (unknown
 * ones as 0, the tensor is empty anyway). */
static anvil_status acc_empty(op_ctx *ctx, op_tensor *out, const ir_value *decl) {
    int64_t dims[IR_MAX_RANK] = {0};
    int rank = decl->shape.rank >= 0 && decl->shape.rank < IR_MAX_RANK ? decl->shape.rank + 1 : 1;
    for (int d = 1; d < rank; d++) dims[d] = decl->shape.d[d - 1] > 0 ? decl->shape.d[d - 1] : 0;
    anvil_dtype dt = decl->dtype != ANVIL_DTYPE_UNDEFINED ? decl->dtype : ANVIL_DTYPE_FLOAT32;
    return op_output_alloc(ctx, out, dt, rank, dims);
}

static anvil_status loop_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in, (void)n_out;
    const loop_params *p = n->params;
    const int nc = p->n_carried, ns = p->n_scan, nb = 1 + nc + ns;
    if (nb > 128) return core_err(ANVIL_ERR_LIMIT, "%s has too many outputs", ir_node_label(n));
    int64_t trips = INT64_MAX;
    if (in[0]) {
        if (op_tensor_numel(in[0]) != 1)
            return core_err(ANVIL_ERR_RUNTIME, "%s: M must hold exactly one element",
                            ir_node_label(n));
        trips = ((const int64_t *)in[0]->data)[0];
    }
    bool cond = true;
    if (in[1]) {
        if (op_tensor_numel(in[1]) != 1)
            return core_err(ANVIL_ERR_RUNTIME, "%s: cond must hold exactly one element",
                            ir_node_label(n));
        cond = scalar_true(in[1]);
    }
    op_tensor carried[128], res[128];
    bool owned[128];
    scan_acc acc[128];
    memset(acc, 0, sizeof acc);
    for (int j = 0; j < nc; j++) {
        if (!in[2 + j])
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: loop-carried input %d is missing",
                            ir_node_label(n), 2 + j);
        carried[j] = *in[2 + j];
        owned[j] = false;
    }
    int64_t iter = 0;
    bool cond_v = cond;
    anvil_status st = ANVIL_OK;
    while (st == ANVIL_OK && iter < trips && cond) {
        op_tensor it_t = {ANVIL_DTYPE_INT64, 0, {0}, &iter};
        op_tensor cond_t = {ANVIL_DTYPE_BOOL, 0, {0}, &cond_v};
        const op_tensor *bin[130];
        bin[0] = &it_t;
        bin[1] = &cond_t;
        for (int j = 0; j < nc; j++) bin[2 + j] = &carried[j];
        st = op_subgraph_run(ctx, p->body, bin, 2 + nc, res, nb);
        if (st != ANVIL_OK) break;
        if (op_tensor_numel(&res[0]) != 1)
            st = core_err(ANVIL_ERR_RUNTIME,
                          "%s: the body's cond output must hold one element, it holds %zu",
                          ir_node_label(n), op_tensor_numel(&res[0]));
        for (int j = 0; j < nc && st == ANVIL_OK; j++)
            if (!same_shape(&carried[j], &res[1 + j])) {
                char x[160], y[160];
                st = core_err(
                    ANVIL_ERR_RUNTIME,
                    "%s: loop-carried value %d enters iteration %lld as %s %s but the "
                    "body returns %s %s; a loop-carried value must keep its dtype and "
                    "shape",
                    ir_node_label(n), j, (long long)iter, anvil_dtype_name(carried[j].dtype),
                    dims_str(&carried[j], x, sizeof x), anvil_dtype_name(res[1 + j].dtype),
                    dims_str(&res[1 + j], y, sizeof y));
            }
        for (int k = 0; k < ns && st == ANVIL_OK; k++)
            st = acc_append(n, k, &acc[k], &res[1 + nc + k]);
        if (st == ANVIL_OK) {
            cond = scalar_true(&res[0]);
            cond_v = cond;
            for (int j = 0; j < nc; j++) {
                if (owned[j]) op_tensor_release(&carried[j]);
                carried[j] = res[1 + j];
                owned[j] = true;
                res[1 + j].data = NULL;
            }
        }
        for (int j = 0; j < nb; j++) op_tensor_release(&res[j]);
        iter++;
    }
    for (int j = 0; j < nc && st == ANVIL_OK; j++) {
        if (!out[j]) continue;
        if (owned[j]) {
            *out[j] = carried[j];
            owned[j] = false;
        } else {
            st = copy_out(ctx, out[j], &carried[j]);
        }
    }
    for (int k = 0; k < ns && st == ANVIL_OK; k++) {
        op_tensor *o = out[nc + k];
        if (!o) continue;
        if (acc[k].count == 0) {
            st = acc_empty(ctx, o, &p->body->values[p->body->outputs[1 + nc + k]]);
            continue;
        }
        int64_t dims[IR_MAX_RANK];
        if (acc[k].first.rank + 1 > IR_MAX_RANK) {
            st = core_err(ANVIL_ERR_LIMIT, "%s: scan output %d would exceed rank %d",
                          ir_node_label(n), k, IR_MAX_RANK);
            break;
        }
        dims[0] = acc[k].count;
        for (int d = 0; d < acc[k].first.rank; d++) dims[d + 1] = acc[k].first.dims[d];
        st = op_output_alloc(ctx, o, acc[k].first.dtype, acc[k].first.rank + 1, dims);
        if (st == ANVIL_OK && acc[k].bytes) memcpy(o->data, acc[k].buf, acc[k].bytes);
    }
    for (int j = 0; j < nc; j++)
        if (owned[j]) op_tensor_release(&carried[j]);
    for (int k = 0; k < ns; k++) free(acc[k].buf);
    return st;
}

/* M and cond (inputs 0 and 1) are optional but positional: loop_check wants both slots */
TENSOR_DATA_DEPENDENT_IMPL(loop, 0, 127, 0, 126, loop_check, loop_infer, loop_run)

/* ---- Scan ---------------------------------------------------------------------------------- */

typedef struct scan_params {
    const ir_graph *body;
    int n_state, n_in, n_out;
    const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs; /* NULL: all 0 */
} scan_params;

static anvil_status scan_list(const ir_node *n, const char *name, size_t want, bool dir,
                              const int64_t **out) {
    size_t cnt = 0;
    CORE_TRY(ir_attr_ints(n, name, out, &cnt));
    if (!*out) return ANVIL_OK;
    if (cnt != want)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute '%s' has %zu entries, expected %zu",
                        ir_node_label(n), name, cnt, want);
    for (size_t i = 0; i < cnt; i++)
        if (dir && (*out)[i] != 0 && (*out)[i] != 1)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute '%s' entry %zu is %lld; directions are 0 (forward) "
                            "or 1 (reverse)",
                            ir_node_label(n), name, i, (long long)(*out)[i]);
    return ANVIL_OK;
}

static anvil_status scan_check(ir_graph *g, ir_node *n) {
    for (int i = 0; i < n->n_inputs && n->opset >= 9; i++)
        if (n->inputs[i] == IR_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: input %d is missing; every Scan input is required",
                            ir_node_label(n), i);
    if (n->opset < 9)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: Scan-8 (batched, with sequence_lens) is not supported (model opset "
                        "%d); re-export the model with opset 9 or later",
                        ir_node_label(n), n->opset);
    OP_PARAMS_NEW(g, scan_params, p);
    CORE_TRY(graph_attr(n, "body", &p->body));
    int64_t m;
    if (!ir_node_attr(n, "num_scan_inputs"))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'num_scan_inputs' is required",
                        ir_node_label(n));
    CORE_TRY(ir_attr_int(n, "num_scan_inputs", 0, &m));
    if (m < 1 || m > n->n_inputs)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: num_scan_inputs is %lld but the node has %d inputs", ir_node_label(n),
                        (long long)m, n->n_inputs);
    p->n_in = (int)m;
    p->n_state = n->n_inputs - p->n_in;
    p->n_out = n->n_outputs - p->n_state;
    if (p->n_out < 0 || p->body->n_inputs != n->n_inputs || p->body->n_outputs != n->n_outputs)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: the body must take %d inputs and give %d outputs like the node, but "
                        "has %d and %d",
                        ir_node_label(n), n->n_inputs, n->n_outputs, (int)p->body->n_inputs,
                        (int)p->body->n_outputs);
    CORE_TRY(scan_list(n, "scan_input_axes", (size_t)p->n_in, false, &p->in_axes));
    CORE_TRY(scan_list(n, "scan_input_directions", (size_t)p->n_in, true, &p->in_dirs));
    CORE_TRY(scan_list(n, "scan_output_axes", (size_t)p->n_out, false, &p->out_axes));
    CORE_TRY(scan_list(n, "scan_output_directions", (size_t)p->n_out, true, &p->out_dirs));
    for (int i = 0; i < p->n_in && p->in_axes && n->opset < 11; i++)
        if (p->in_axes[i] < 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: negative scan axes are allowed from opset 11 (model opset %d)",
                            ir_node_label(n), n->opset);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status scan_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g, (void)n_in, (void)n_out;
    const scan_params *p = n->params;
    for (int j = 0; j < p->n_state; j++) {
        out[j].dtype = in[j].dtype;
        out[j].shape = in[j].shape;
    }
    for (int i = 0; i < p->n_in; i++) {
        const op_tinfo *x = &in[p->n_state + i];
        if (x->shape.rank == 0)
            return core_err(ANVIL_ERR_SHAPE, "%s: scan input %d is a scalar; it needs an axis",
                            ir_node_label(n), p->n_state + i);
        int axis;
        if (x->shape.rank > 0)
            CORE_TRY(op_norm_axis(n, "scan_input_axes", p->in_axes ? p->in_axes[i] : 0,
                                  x->shape.rank, &axis));
    }
    for (int k = 0; k < p->n_out; k++) {
        const ir_value *v = &p->body->values[p->body->outputs[p->n_state + k]];
        out[p->n_state + k].dtype = v->dtype;
        if (v->shape.rank >= 0 && v->shape.rank < IR_MAX_RANK)
            tensor_shape_unknown_dims(&out[p->n_state + k].shape, v->shape.rank + 1);
    }
    return ANVIL_OK;
}

static anvil_status scan_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in, (void)n_out;
    const scan_params *p = n->params;
    const int S = p->n_state, M = p->n_in, K = p->n_out;
    if (S + M > 128 || S + K > 128)
        return core_err(ANVIL_ERR_LIMIT, "%s has too many inputs or outputs", ir_node_label(n));
    int in_axis[128], out_axis[128];
    int64_t len = -1;
    for (int i = 0; i < M; i++) {
        const op_tensor *x = in[S + i];
        if (!x || x->rank < 1)
            return core_err(ANVIL_ERR_SHAPE, "%s: scan input %d must have rank >= 1",
                            ir_node_label(n), S + i);
        CORE_TRY(op_norm_axis(n, "scan_input_axes", p->in_axes ? p->in_axes[i] : 0, x->rank,
                              &in_axis[i]));
        int64_t l = x->dims[in_axis[i]];
        if (len >= 0 && l != len)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: scan input %d has %lld entries along its scan axis but input %d "
                            "has %lld; all scan inputs must have the same length",
                            ir_node_label(n), S + i, (long long)l, S, (long long)len);
        len = l;
    }
    op_tensor state[128], slice[128], res[128];
    bool owned[128];
    for (int j = 0; j < S; j++) {
        if (!in[j])
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: state input %d is missing",
                            ir_node_label(n), j);
        state[j] = *in[j];
        owned[j] = false;
    }
    memset(slice, 0, sizeof slice);
    anvil_status st = ANVIL_OK;
    op_tensor scan_out[128];
    memset(scan_out, 0, sizeof scan_out);
    for (int i = 0; i < M && st == ANVIL_OK; i++) {
        const op_tensor *x = in[S + i];
        int64_t dims[IR_MAX_RANK];
        int r = 0;
        for (int d = 0; d < x->rank; d++)
            if (d != in_axis[i]) dims[r++] = x->dims[d];
        st = op_output_alloc(ctx, &slice[i], x->dtype, r, dims);
    }
    for (int64_t t = 0; t < len && st == ANVIL_OK; t++) {
        for (int i = 0; i < M; i++) {
            const op_tensor *x = in[S + i];
            int64_t pos = p->in_dirs && p->in_dirs[i] ? len - 1 - t : t;
            size_t es = anvil_dtype_size(x->dtype);
            size_t outer = tensor_dims_prod(x->dims, 0, in_axis[i]);
            size_t inner = tensor_dims_prod(x->dims, in_axis[i] + 1, x->rank);
            for (size_t o = 0; o < outer; o++)
                memcpy((unsigned char *)slice[i].data + o * inner * es,
                       (const unsigned char *)x->data +
                           (o * (size_t)len + (size_t)pos) * inner * es,
                       inner * es);
        }
        const op_tensor *bin[256];
        for (int j = 0; j < S; j++) bin[j] = &state[j];
        for (int i = 0; i < M; i++) bin[S + i] = &slice[i];
        st = op_subgraph_run(ctx, p->body, bin, S + M, res, S + K);
        if (st != ANVIL_OK) break;
        for (int j = 0; j < S && st == ANVIL_OK; j++)
            if (!same_shape(&state[j], &res[j])) {
                char a[160], b[160];
                st = core_err(ANVIL_ERR_RUNTIME,
                              "%s: state %d enters iteration %lld as %s but the body returns %s; "
                              "a state must keep its dtype and shape",
                              ir_node_label(n), j, (long long)t, dims_str(&state[j], a, sizeof a),
                              dims_str(&res[j], b, sizeof b));
            }
        for (int k = 0; k < K && st == ANVIL_OK; k++) {
            const op_tensor *y = &res[S + k];
            op_tensor *o = &scan_out[k];
            if (t == 0) {
                if (y->rank + 1 > IR_MAX_RANK) {
                    st = core_err(ANVIL_ERR_LIMIT, "%s: scan output %d would exceed rank %d",
                                  ir_node_label(n), k, IR_MAX_RANK);
                    break;
                }
                st = op_norm_axis(n, "scan_output_axes", p->out_axes ? p->out_axes[k] : 0,
                                  y->rank + 1, &out_axis[k]);
                int64_t dims[IR_MAX_RANK];
                for (int d = 0, r = 0; d <= y->rank; d++)
                    dims[d] = d == out_axis[k] ? len : y->dims[r++];
                if (st == ANVIL_OK) st = op_output_alloc(ctx, o, y->dtype, y->rank + 1, dims);
                if (st != ANVIL_OK) break;
            } else {
                bool ok = o->dtype == y->dtype && o->rank == y->rank + 1;
                for (int d = 0, r = 0; ok && d < o->rank; d++)
                    if (d != out_axis[k]) ok = o->dims[d] == y->dims[r++];
                if (!ok) {
                    char b[160];
                    st = core_err(ANVIL_ERR_RUNTIME,
                                  "%s: scan output %d changes shape in iteration %lld (now %s); "
                                  "every iteration must give the same shape",
                                  ir_node_label(n), k, (long long)t, dims_str(y, b, sizeof b));
                    break;
                }
            }
            int64_t pos = p->out_dirs && p->out_dirs[k] ? len - 1 - t : t;
            size_t es = anvil_dtype_size(y->dtype);
            size_t outer = tensor_dims_prod(o->dims, 0, out_axis[k]);
            size_t inner = tensor_dims_prod(o->dims, out_axis[k] + 1, o->rank);
            for (size_t q = 0; q < outer; q++)
                memcpy((unsigned char *)o->data + (q * (size_t)len + (size_t)pos) * inner * es,
                       (const unsigned char *)y->data + q * inner * es, inner * es);
        }
        if (st == ANVIL_OK)
            for (int j = 0; j < S; j++) {
                if (owned[j]) op_tensor_release(&state[j]);
                state[j] = res[j];
                owned[j] = true;
                res[j].data = NULL;
            }
        for (int j = 0; j < S + K; j++) op_tensor_release(&res[j]);
    }
    for (int k = 0; k < K && st == ANVIL_OK && len == 0; k++)
        st = acc_empty(ctx, &scan_out[k], &p->body->values[p->body->outputs[S + k]]);
    for (int j = 0; j < S && st == ANVIL_OK; j++) {
        if (!out[j]) continue;
        if (owned[j]) {
            *out[j] = state[j];
            owned[j] = false;
        } else {
            st = copy_out(ctx, out[j], &state[j]);
        }
    }
    for (int k = 0; k < K; k++) {
        if (st == ANVIL_OK && out[S + k]) {
            *out[S + k] = scan_out[k];
        } else {
            op_tensor_release(&scan_out[k]);
        }
    }
    for (int j = 0; j < S; j++)
        if (owned[j]) op_tensor_release(&state[j]);
    for (int i = 0; i < M; i++) op_tensor_release(&slice[i]);
    return st;
}

/* Scan-8's first input (sequence_lens) is optional; scan_check decides per opset */
TENSOR_DATA_DEPENDENT_IMPL(scan, 0, 127, 1, 127, scan_check, scan_infer, scan_run)
