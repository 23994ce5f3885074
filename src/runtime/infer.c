/* Whole-graph shape inference with folding.
 *
 * One walk serves both load time (symbolic dims, to describe the model and catch impossible
 * shapes early) and plan time (concrete input shapes, every dim must come out static). A node
 * whose inputs are all known values is evaluated on the spot with its reference kernel: that is
 * how Shape -> Gather -> Concat -> Reshape chains resolve into static shapes without a separate
 * constant-folding pass, and why Shape folds as soon as its input's shape is static. */
#include "runtime/infer.h"

#include <stdlib.h>
#include <string.h>

anvil_status rt_shapes_init(rt_shapes *s, const ir_graph *g) {
    memset(s, 0, sizeof *s);
    s->n_values = g->n_values;
    s->n_nodes = g->n_nodes;
    s->info = core_calloc((size_t)g->n_values + 1, sizeof *s->info);
    s->owned = core_calloc((size_t)g->n_values + 1, sizeof *s->owned);
    s->folded = core_calloc((size_t)g->n_nodes + 1, sizeof *s->folded);
    s->dynamic = core_calloc((size_t)g->n_nodes + 1, sizeof *s->dynamic);
    if (!s->info || !s->owned || !s->folded || !s->dynamic) {
        rt_shapes_free(s);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (int32_t v = 0; v < g->n_values; v++) ir_shape_unknown(&s->info[v].shape);
    return ANVIL_OK;
}

void rt_shapes_free(rt_shapes *s) {
    if (s->owned)
        for (int32_t v = 0; v < s->n_values; v++) free(s->owned[v]);
    free(s->owned);
    free(s->info);
    free(s->folded);
    free(s->dynamic);
    memset(s, 0, sizeof *s);
}

/* The model may declare a node output's dtype and shape (value_info / graph outputs); the
 * inferred ones must agree, or the model and anvil disagree about what the node computes. */
static anvil_status check_declared(const ir_graph *g, const ir_node *n, const ir_value *v,
                                   const op_tinfo *t) {
    if (v->dtype != ANVIL_DTYPE_UNDEFINED && t->dtype != ANVIL_DTYPE_UNDEFINED &&
        v->dtype != t->dtype)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: output '%s' is declared %s but the node produces %s; fix the "
                        "value_info or the graph output type in the model",
                        ir_node_label(n), v->name, anvil_dtype_name(v->dtype),
                        anvil_dtype_name(t->dtype));
    if (v->shape.rank >= 0 && t->shape.rank >= 0) {
        bool bad = v->shape.rank != t->shape.rank;
        for (int i = 0; !bad && i < v->shape.rank; i++)
            bad = v->shape.d[i] >= 0 && t->shape.d[i] >= 0 && v->shape.d[i] != t->shape.d[i];
        if (bad) {
            char a[160], b[160];
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: output '%s' is declared with shape %s but the node produces %s",
                            ir_node_label(n), v->name, ir_shape_str(g, &v->shape, a, sizeof a),
                            ir_shape_str(g, &t->shape, b, sizeof b));
        }
    }
    return ANVIL_OK;
}

/* Where the inferred shape leaves a dim unknown but the model declares it, keep the declaration
 * (symbolic names included) so load-time descriptions stay as informative as the model. */
static void merge_declared(const ir_value *v, op_tinfo *t) {
    if (t->dtype == ANVIL_DTYPE_UNDEFINED) t->dtype = v->dtype;
    if (t->shape.rank < 0) {
        t->shape = v->shape;
        return;
    }
    if (v->shape.rank != t->shape.rank) return;
    for (int i = 0; i < t->shape.rank; i++) {
        if (t->shape.d[i] < 0 && v->shape.d[i] >= 0) t->shape.d[i] = v->shape.d[i];
        if (t->shape.d[i] < 0 && t->shape.sym[i] < 0) t->shape.sym[i] = v->shape.sym[i];
    }
}

/* Makes *view describe info's dtype and shape over data. */
static void tensor_view(op_tensor *view, const op_tinfo *info, void *data) {
    view->dtype = info->dtype;
    view->rank = info->shape.rank;
    memcpy(view->dims, info->shape.d, sizeof view->dims);
    view->data = data;
}

/* The operands of one folded node: in_t/out_t hold the views, ins/outs point at them (NULL for
 * an omitted operand), as op_impl's run and run_alloc take them. */
typedef struct fold_io {
    op_tensor in_t[128], out_t[128];
    const op_tensor *ins[128];
    op_tensor *outs[128];
} fold_io;

/* Points io->ins[i] at a view of node input i's known value; NULL if the input is omitted. */
static void fold_inputs(const ir_node *n, const rt_shapes *s, fold_io *io) {
    for (int i = 0; i < n->n_inputs; i++) {
        ir_vid v = n->inputs[i];
        io->ins[i] = NULL;
        if (v == IR_NONE) continue;
        tensor_view(&io->in_t[i], &s->info[v], (void *)s->info[v].value);
        io->ins[i] = &io->in_t[i];
    }
}

/* A data-dependent op with every input known is evaluated like any other fold; its kernel
 * allocates the outputs, whose storage moves into s (so e.g. NonZero of a constant becomes a
 * constant and what it feeds plans statically). */
static anvil_status fold_alloc_node(const ir_node *n, rt_shapes *s, const rt_infer_opts *opts,
                                    int32_t node_index) {
    fold_io io;
    fold_inputs(n, s, &io);
    for (int i = 0; i < n->n_outputs; i++) {
        memset(&io.out_t[i], 0, sizeof io.out_t[i]);
        io.outs[i] = n->outputs[i] == IR_NONE ? NULL : &io.out_t[i];
    }
    anvil_status st =
        op_get(n->op)->run_alloc(n, io.ins, n->n_inputs, io.outs, n->n_outputs, opts->ctx);
    for (int i = 0; i < n->n_outputs; i++) {
        ir_vid v = n->outputs[i];
        if (v == IR_NONE) continue;
        if (st != ANVIL_OK || !io.out_t[i].data) {
            op_tensor_release(&io.out_t[i]);
            if (st == ANVIL_OK)
                st = core_err(ANVIL_ERR_INTERNAL, "%s did not produce output %d", ir_node_label(n),
                              i);
            continue;
        }
        free(s->owned[v]);
        s->owned[v] = io.out_t[i].data;
        s->info[v].dtype = io.out_t[i].dtype;
        ir_shape_set(&s->info[v].shape, io.out_t[i].rank, io.out_t[i].dims);
        s->info[v].value = io.out_t[i].data;
    }
    if (st != ANVIL_OK) return st;
    s->folded[node_index] = true;
    s->folded_count++;
    return ANVIL_OK;
}

bool rt_node_has_subgraph(const ir_node *n) {
    for (int k = 0; k < n->n_attrs; k++)
        if (n->attrs[k].type == IR_ATTR_GRAPH || n->attrs[k].type == IR_ATTR_GRAPHS) return true;
    return false;
}

static anvil_status infer_graph_static(ir_graph *g);

/* ONNX lets a body graph leave its inputs untyped: their types follow from the node. Only what
 * the model left out is filled in; declared types stay and are checked by the ops as usual. */
static void fill_body_input(ir_graph *body, int i, anvil_dtype dt, const ir_shape *shape) {
    if (i >= body->n_inputs) return;
    ir_value *bv = &body->values[body->inputs[i]];
    if (bv->dtype == ANVIL_DTYPE_UNDEFINED) bv->dtype = dt;
    if (bv->shape.rank < 0 && shape->rank >= 0) {
        /* symbolic dims are named per graph: keep only the known sizes */
        bv->shape = *shape;
        for (int d = 0; d < bv->shape.rank; d++) bv->shape.sym[d] = -1;
    }
}

/* Loop body inputs: (iteration_num INT64 scalar, cond BOOL scalar, loop-carried values). The
 * carried values may change shape between iterations, so only their dtype and rank are taken. */
static void type_loop_body(ir_graph *body, const rt_shapes *s, const ir_node *n) {
    ir_shape scalar;
    ir_shape_set(&scalar, 0, NULL);
    fill_body_input(body, 0, ANVIL_DTYPE_INT64, &scalar);
    fill_body_input(body, 1, ANVIL_DTYPE_BOOL, &scalar);
    for (int i = 2; i < n->n_inputs; i++) {
        if (n->inputs[i] == IR_NONE) continue;
        const op_tinfo *t = &s->info[n->inputs[i]];
        ir_shape sh;
        ir_shape_unknown(&sh);
        if (t->shape.rank >= 0) {
            sh.rank = t->shape.rank;
            for (int d = 0; d < sh.rank; d++) {
                sh.d[d] = IR_DIM_UNKNOWN;
                sh.sym[d] = -1;
            }
        }
        fill_body_input(body, i, t->dtype, &sh);
    }
}

/* Scan (opset 9 on) body inputs: the state values as the node's state inputs, then one slice of
 * each scan input, which is that input with its scan axis removed. Attributes the node's own
 * check refuses are left alone here; that check reports them. */
static void type_scan_body(ir_graph *body, const rt_shapes *s, const ir_node *n) {
    int64_t m = 0;
    const int64_t *axes = NULL;
    size_t n_axes = 0;
    if (n->opset < 9 || ir_attr_int(n, "num_scan_inputs", 0, &m) != ANVIL_OK || m < 1 ||
        m > n->n_inputs || ir_attr_ints(n, "scan_input_axes", &axes, &n_axes) != ANVIL_OK)
        return;
    int n_state = n->n_inputs - (int)m;
    for (int i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] == IR_NONE) continue;
        const op_tinfo *t = &s->info[n->inputs[i]];
        if (i < n_state) {
            fill_body_input(body, i, t->dtype, &t->shape);
            continue;
        }
        ir_shape sh;
        ir_shape_unknown(&sh);
        size_t j = (size_t)(i - n_state);
        int64_t axis = axes && j < n_axes ? axes[j] : 0;
        int rank = t->shape.rank;
        if (rank > 0 && axis < 0) axis += rank;
        if (rank > 0 && axis >= 0 && axis < rank) {
            sh.rank = rank - 1;
            for (int d = 0, o = 0; d < rank; d++) {
                if (d == axis) continue;
                sh.d[o] = t->shape.d[d];
                sh.sym[o] = -1;
                o++;
            }
        }
        fill_body_input(body, i, t->dtype, &sh);
    }
}

/* Load time: a subgraph's values get dtypes and shapes before its node is inferred (the node's
 * outputs take their dtypes from the subgraph's outputs). Outer-scope values take what the
 * enclosing graph knows by now. */
static anvil_status infer_subgraphs(const ir_graph *g, const rt_shapes *s, const ir_node *n) {
    for (int k = 0; k < n->n_attrs; k++) {
        const ir_attr *a = &n->attrs[k];
        for (size_t j = 0; j < ir_attr_graph_count(a); j++) {
            ir_graph *sub = ir_attr_graph_at(a, j);
            if (!sub) continue;
            if (n->op == IR_OP_LOOP && a->type == IR_ATTR_GRAPH) type_loop_body(sub, s, n);
            if (n->op == IR_OP_SCAN && a->type == IR_ATTR_GRAPH) type_scan_body(sub, s, n);
            for (ir_vid v = 0; v < sub->n_values; v++) {
                ir_value *val = &sub->values[v];
                if (!(val->flags & IR_VALUE_OUTER)) continue;
                ir_vid pv = ir_graph_find_value(g, val->name);
                if (pv == IR_NONE) continue;
                if (s->info[pv].dtype != ANVIL_DTYPE_UNDEFINED) val->dtype = s->info[pv].dtype;
                if (s->info[pv].shape.rank >= 0) {
                    /* symbolic dims are named per graph: keep only the known sizes */
                    val->shape = s->info[pv].shape;
                    for (int d = 0; d < val->shape.rank; d++) val->shape.sym[d] = -1;
                }
            }
            anvil_status st = infer_graph_static(sub);
            if (st != ANVIL_OK) return st;
        }
    }
    return ANVIL_OK;
}

static anvil_status fold_node(const ir_node *n, rt_shapes *s, const rt_infer_opts *opts,
                              int32_t node_index) {
    fold_io io;
    fold_inputs(n, s, &io);
    bool any_data = false;
    for (int i = 0; i < n->n_outputs; i++) {
        ir_vid v = n->outputs[i];
        if (v == IR_NONE) {
            io.outs[i] = NULL;
            continue;
        }
        op_tinfo *t = &s->info[v];
        size_t bytes = 0;
        core_tensor_bytes(t->dtype, t->shape.d, t->shape.rank, &bytes);
        any_data |= bytes > 0;
        void *buf = core_aligned_alloc(64, bytes ? bytes : 64);
        if (!buf) return ANVIL_ERR_OUT_OF_MEMORY;
        memset(buf, 0, bytes);
        free(s->owned[v]);
        s->owned[v] = buf;
        tensor_view(&io.out_t[i], t, buf);
        io.outs[i] = &io.out_t[i];
    }
    /* Outputs without elements need no kernel, which could still walk the inputs' outer dims
     * (a [2^62, 0, ...] tensor has zero elements but 2^62 rows). */
    anvil_status st =
        any_data ? op_get(n->op)->run(n, io.ins, n->n_inputs, io.outs, n->n_outputs, opts->ctx)
                 : ANVIL_OK;
    if (st == ANVIL_OK && any_data && n->fusion)
        st = opts->apply_fusion(n, io.ins, n->n_inputs, io.outs[0], opts->ctx);
    if (st != ANVIL_OK) return st;
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] != IR_NONE) s->info[n->outputs[i]].value = s->owned[n->outputs[i]];
    s->folded[node_index] = true;
    s->folded_count++;
    return ANVIL_OK;
}

/* Whether the known dims of a shape multiply within int64 (zero dims skipped): what every op's
 * shape arithmetic and every kernel's strides may assume of an input. */
static bool dims_fit(const ir_shape *sh) {
    int64_t p = 1;
    for (int d = 0; d < sh->rank; d++)
        if (sh->d[d] > 0 && !core_mul_i64(p, sh->d[d], &p)) return false;
    return true;
}

anvil_status rt_shapes_infer(const ir_graph *g, rt_shapes *s, const rt_infer_opts *opts) {
    op_tinfo in[128], out[128];
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (n->n_inputs > 128 || n->n_outputs > 128)
            return core_err(ANVIL_ERR_LIMIT, "%s has more than 128 inputs or outputs",
                            ir_node_label(n));
        bool all_known = true;
        for (int i = 0; i < n->n_inputs; i++) {
            ir_vid v = n->inputs[i];
            if (v == IR_NONE) {
                memset(&in[i], 0, sizeof in[i]);
                ir_shape_unknown(&in[i].shape);
                continue;
            }
            in[i] = s->info[v];
            if (!in[i].value) all_known = false;
            if (!dims_fit(&in[i].shape)) {
                char b[160];
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: input %d '%s' has shape %s, whose dims multiply past 2^63; "
                                "no tensor has that shape",
                                ir_node_label(n), i, g->values[v].name,
                                ir_shape_str(g, &in[i].shape, b, sizeof b));
            }
        }
        for (int i = 0; i < n->n_outputs; i++) {
            memset(&out[i], 0, sizeof out[i]);
            ir_shape_unknown(&out[i].shape);
        }
        const op_impl *impl = op_get(n->op);
        bool sub = rt_node_has_subgraph(n);
        if (sub && !opts->require_static) CORE_TRY(infer_subgraphs(g, s, n));
        anvil_status st = impl->infer(g, n, in, n->n_inputs, out, n->n_outputs);
        if (st != ANVIL_OK) return st;

        /* Plan time with dynamic steps allowed: a node runs dynamically when it reads a value
         * that is only known while running, owns subgraphs (which read outer values at run
         * time), or allocates its own outputs and cannot be folded now. */
        if (opts->allow_dynamic) {
            bool dyn = sub;
            for (int i = 0; i < n->n_inputs && !dyn; i++)
                dyn = n->inputs[i] != IR_NONE && !ir_shape_is_static(&in[i].shape);
            if (!dyn && impl->run_alloc) {
                if (all_known) {
                    for (int i = 0; i < n->n_outputs; i++)
                        if (n->outputs[i] != IR_NONE) s->info[n->outputs[i]] = out[i];
                    CORE_TRY(fold_alloc_node(n, s, opts, k));
                    continue;
                }
                dyn = true;
            }
            for (int i = 0; i < n->n_outputs && !dyn; i++)
                dyn = n->outputs[i] != IR_NONE && !ir_shape_is_static(&out[i].shape);
            if (dyn) {
                s->dynamic[k] = true;
                for (int i = 0; i < n->n_outputs; i++) {
                    ir_vid v = n->outputs[i];
                    if (v == IR_NONE) continue;
                    CORE_TRY(check_declared(g, n, &g->values[v], &out[i]));
                    out[i].value = NULL;
                    /* the dims are decided per run; keep dtype and rank */
                    if (out[i].shape.rank >= 0)
                        for (int d = 0; d < out[i].shape.rank; d++) {
                            out[i].shape.d[d] = IR_DIM_UNKNOWN;
                            out[i].shape.sym[d] = -1;
                        }
                    s->info[v] = out[i];
                }
                continue;
            }
        }

        size_t out_bytes = 0;
        bool all_static = true;
        for (int i = 0; i < n->n_outputs; i++) {
            ir_vid v = n->outputs[i];
            if (v == IR_NONE) continue;
            CORE_TRY(check_declared(g, n, &g->values[v], &out[i]));
            if (!opts->require_static) merge_declared(&g->values[v], &out[i]);
            out[i].value = NULL;
            s->info[v] = out[i];
            size_t bytes;
            if (!ir_shape_is_static(&out[i].shape)) {
                all_static = false;
                if (opts->require_static) {
                    char b[160];
                    return core_err(ANVIL_ERR_SHAPE,
                                    "%s: the shape of output '%s' is %s even with every input "
                                    "shape known; its shape depends on data anvil cannot see "
                                    "before running",
                                    ir_node_label(n), g->values[v].name,
                                    ir_shape_str(g, &out[i].shape, b, sizeof b));
                }
                continue;
            }
            if (!core_dtype_supported(out[i].dtype))
                return core_err(ANVIL_ERR_UNSUPPORTED, "%s: output '%s' has dtype %s",
                                ir_node_label(n), g->values[v].name,
                                anvil_dtype_name(out[i].dtype));
            if (!core_tensor_bytes(out[i].dtype, out[i].shape.d, out[i].shape.rank, &bytes) ||
                bytes > core_max_tensor_bytes()) {
                char b[160];
                return core_err(ANVIL_ERR_LIMIT,
                                "%s: output '%s' of shape %s would need more than the %zu-byte "
                                "limit per tensor (ANVIL_MAX_TENSOR_BYTES)",
                                ir_node_label(n), g->values[v].name,
                                ir_shape_str(g, &out[i].shape, b, sizeof b),
                                core_max_tensor_bytes());
            }
            if (!core_add_size(out_bytes, bytes, &out_bytes)) out_bytes = SIZE_MAX;
        }
        /* Shape and Size read only their input's dims */
        bool shape_only = (n->op == IR_OP_SHAPE || n->op == IR_OP_SIZE) &&
                          n->inputs[0] != IR_NONE &&
                          ir_shape_is_static(&s->info[n->inputs[0]].shape);
        bool fusion_ok = !n->fusion || opts->apply_fusion;
        if (all_static && (all_known || shape_only) && impl->run && !sub && fusion_ok &&
            out_bytes <= opts->fold_limit_bytes &&
            (shape_only || !opts->fold_limit_work || rt_fold_work(n, s) <= opts->fold_limit_work))
            CORE_TRY(fold_node(n, s, opts, k));
    }
    return ANVIL_OK;
}

/* Constants whose bytes are not aligned for their dtype (protobuf gives no alignment) are copied
 * once into aligned storage owned by s; aligned ones are used in place. */
static anvil_status bind_constant(const ir_graph *g, rt_shapes *s, ir_vid v, size_t limit) {
    const ir_value *val = &g->values[v];
    op_tinfo *t = &s->info[v];
    t->dtype = val->dtype;
    t->shape = val->shape;
    if (val->data_bytes > limit) return ANVIL_OK; /* too big to matter for shapes */
    size_t es = anvil_dtype_size(val->dtype);
    if (es && ((uintptr_t)val->data % es) == 0) {
        t->value = val->data;
        return ANVIL_OK;
    }
    void *copy = core_aligned_alloc(64, val->data_bytes ? val->data_bytes : 64);
    if (!copy) return ANVIL_ERR_OUT_OF_MEMORY;
    if (val->data_bytes) memcpy(copy, val->data, val->data_bytes);
    s->owned[v] = copy;
    t->value = copy;
    return ANVIL_OK;
}

#define RT_LOAD_FOLD_LIMIT (64 * 1024)
/* Multiply-adds a fold at load may take (about 0.1 s in the reference kernels): what a model's
 * shapes need folded is far smaller, and the plan folds the rest once, where it must run anyway. */
#define RT_LOAD_FOLD_WORK ((uint64_t)1 << 26)

static uint64_t mul_sat(uint64_t a, uint64_t b) {
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t numel_sat(const op_tinfo *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->shape.rank; d++)
        n = mul_sat(n, t->shape.d[d] > 0 ? (uint64_t)t->shape.d[d] : 0);
    return n;
}

/* Input k of n, NULL where it is absent. */
static const op_tinfo *input_info(const ir_node *n, const rt_shapes *s, int k) {
    return k < n->n_inputs && n->inputs[k] != IR_NONE ? &s->info[n->inputs[k]] : NULL;
}

uint64_t rt_fold_work(const ir_node *n, const rt_shapes *s) {
    const op_tinfo *y =
        n->n_outputs > 0 && n->outputs[0] != IR_NONE ? &s->info[n->outputs[0]] : NULL;
    /* the weight: QLinearConv's and QLinearMatMul's second operand is their input 3 */
    const bool qlinear = n->op == IR_OP_QLINEARCONV || n->op == IR_OP_QLINEARMATMUL;
    const op_tinfo *a = input_info(n, s, 0), *w = input_info(n, s, qlinear ? 3 : 1);
    switch (n->op) {
    case IR_OP_CONV:
    case IR_OP_CONVINTEGER:
    case IR_OP_QLINEARCONV:
    case IR_OP_CONVTRANSPOSE:
    case IR_OP_DEFORMCONV:
        /* each output (ConvTranspose: each input) element sums W's elements per channel; the
         * reference walks the kernel's taps even where there are no channels to sum */
        if (w && a && y) {
            const op_tinfo *driver = n->op == IR_OP_CONVTRANSPOSE ? a : y;
            uint64_t terms = 1;
            for (int d = 1; d < w->shape.rank; d++)
                terms = mul_sat(terms, w->shape.d[d] > 1 ? (uint64_t)w->shape.d[d] : 1);
            return mul_sat(numel_sat(driver), terms);
        }
        break;
    case IR_OP_MATMUL:
    case IR_OP_MATMULINTEGER:
    case IR_OP_QLINEARMATMUL:
    case IR_OP_GEMM:
        /* each output element sums A's longer inner dim (Gemm may transpose A) */
        if (a && y && a->shape.rank >= 1) {
            int64_t kd = a->shape.d[a->shape.rank - 1];
            if (n->op == IR_OP_GEMM && a->shape.rank >= 2 && a->shape.d[0] > kd) kd = a->shape.d[0];
            return mul_sat(numel_sat(y), kd > 0 ? (uint64_t)kd : 1);
        }
        break;
    case IR_OP_MAXPOOL:
    case IR_OP_AVERAGEPOOL:
    case IR_OP_LPPOOL: {
        /* each output element visits its window */
        const int64_t *ks;
        size_t nk;
        if (y && ir_attr_ints(n, "kernel_shape", &ks, &nk) == ANVIL_OK) {
            uint64_t taps = 1;
            for (size_t d = 0; d < nk; d++) taps = mul_sat(taps, ks[d] > 0 ? (uint64_t)ks[d] : 1);
            return mul_sat(numel_sat(y), taps);
        }
        break;
    }
    default:
        break;
    }
    uint64_t work = y ? numel_sat(y) : 0;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] != IR_NONE) {
            const uint64_t e = numel_sat(&s->info[n->inputs[k]]);
            work = work > UINT64_MAX - e ? UINT64_MAX : work + e;
        }
    return work;
}

anvil_status rt_shapes_known(const ir_graph *g, rt_shapes *s) {
    CORE_TRY(rt_shapes_init(s, g));
    anvil_status st = ANVIL_OK;
    for (int32_t v = 0; v < g->n_values && st == ANVIL_OK; v++) {
        const ir_value *val = &g->values[v];
        if (val->flags & IR_VALUE_CONST) {
            st = bind_constant(g, s, v, RT_LOAD_FOLD_LIMIT);
        } else if (val->flags & IR_VALUE_GRAPH_INPUT) {
            s->info[v].dtype = val->dtype;
            s->info[v].shape = val->shape;
        }
    }
    rt_infer_opts opts = {.fold_limit_bytes = RT_LOAD_FOLD_LIMIT,
                          .fold_limit_work = RT_LOAD_FOLD_WORK,
                          .require_static = true,
                          .allow_dynamic = true};
    if (st == ANVIL_OK) st = rt_shapes_infer(g, s, &opts);
    if (st != ANVIL_OK) rt_shapes_free(s);
    return st;
}

anvil_status rt_infer_graph_static(ir_graph *g) {
    return infer_graph_static(g);
}

static anvil_status infer_graph_static(ir_graph *g) {
    rt_shapes s;
    CORE_TRY(rt_shapes_init(&s, g));
    anvil_status st = ANVIL_OK;
    for (int32_t v = 0; v < g->n_values && st == ANVIL_OK; v++) {
        const ir_value *val = &g->values[v];
        if (val->flags & IR_VALUE_CONST)
            st = bind_constant(g, &s, v, RT_LOAD_FOLD_LIMIT);
        else if (val->flags & (IR_VALUE_GRAPH_INPUT | IR_VALUE_OUTER)) {
            s.info[v].dtype = val->dtype;
            s.info[v].shape = val->shape;
        }
    }
    if (st == ANVIL_OK) {
        rt_infer_opts opts = {.fold_limit_bytes = RT_LOAD_FOLD_LIMIT,
                              .fold_limit_work = RT_LOAD_FOLD_WORK,
                              .require_static = false};
        st = rt_shapes_infer(g, &s, &opts);
    }
    if (st == ANVIL_OK) {
        for (int32_t k = 0; k < g->n_nodes; k++) {
            const ir_node *n = &g->nodes[k];
            for (int i = 0; i < n->n_outputs; i++) {
                ir_vid v = n->outputs[i];
                if (v == IR_NONE) continue;
                g->values[v].dtype = s.info[v].dtype;
                g->values[v].shape = s.info[v].shape;
            }
        }
    }
    rt_shapes_free(&s);
    return st;
}
