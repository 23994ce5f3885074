/* What the CLI's `anvil dump` and `anvil info` show of a model's graph (api.h): the graph as
 * text, Graphviz dot or ONNX, before or after a session's rewrites, and its statistics. The
 * tools reach the IR and the passes only through here.
 *
 * The statistics: FLOPs are for one run with every symbolic dim at 1 (flops_approx says when a
 * symbolic dim entered the estimate). Subgraphs count: an If as its costlier branch, a Loop or
 * Scan body once (one iteration). Parameters are the initializers, and the floating-point and
 * 8-bit tensors of Constant nodes (exporters put a body's weights there); integer Constant nodes
 * are shape arithmetic. */
#include "api/api.h"
#include "api/env.h"
#include "core/core.h"
#include "onnx/onnx.h"
#include "passes/passes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

anvil_status api_passes_parse(const char *spec, uint32_t *off) {
    API_CHECK(off, "api_passes_parse: off is NULL");
    return pass_spec_parse(spec, off);
}

/* One line: what each pass that ran did (its counters in pass_graph). */
static void print_pass_summary(const pass_graph *pg, uint32_t off, FILE *f) {
    const int did[PASS_COUNT] = {
        [PASS_CONST_NODES] = pg->const_nodes,
        [PASS_FOLD_QDQ] = pg->folded_qdq,
        [PASS_FOLD_CONSTS] = pg->folded_consts,
        [PASS_DROP_NOOPS] = pg->noops,
        [PASS_CSE] = pg->cse_merged,
        [PASS_FOLD_CONV_BN] = pg->folded_bn,
        [PASS_CROP_TAPS] = pg->cropped_convs,
        [PASS_FUSE_NORM] = pg->fused_norms,
        [PASS_FUSE_ATTENTION] = pg->fused_attention,
        [PASS_FUSE_EPILOGUE] = pg->fused_bias + pg->fused_residual + pg->fused_act,
        [PASS_FUSE_PARALLEL] = pg->fused_parallel,
        [PASS_FUSE_PAIR] = pg->fused_pairs,
        [PASS_POOL_ACT] = pg->pool_acts,
        [PASS_ATTENTION_VIEWS] = pg->attention_views,
        [PASS_FUSE_CHAIN] = pg->fused_chains,
        [PASS_LAYOUT] = pg->nhwc_convs,
        [PASS_TRANSPOSES] = pg->transposes_merged + pg->gemm_transposes,
        [PASS_DCE] = pg->dce_removed,
    };
    static const char *const what[PASS_COUNT] = {
        [PASS_CONST_NODES] = "Constant nodes made constants",
        [PASS_FOLD_QDQ] = "QDQ products made QLinear",
        [PASS_FOLD_CONSTS] = "nodes computed at load",
        [PASS_DROP_NOOPS] = "no-op Casts made Identity",
        [PASS_CSE] = "nodes merged into equal ones",
        [PASS_FOLD_CONV_BN] = "BatchNormalizations folded",
        [PASS_CROP_TAPS] = "Convs cropped",
        [PASS_FUSE_NORM] = "normalizations made one node",
        [PASS_FUSE_ATTENTION] = "attentions fused into anvil.Sdpa",
        [PASS_FUSE_EPILOGUE] = "bias/residual/activation epilogues fused",
        [PASS_FUSE_PARALLEL] = "groups of MatMuls made one",
        [PASS_FUSE_PAIR] = "back-to-back pairs made one node",
        [PASS_POOL_ACT] = "activations moved into a max pool",
        [PASS_ATTENTION_VIEWS] = "anvil.Sdpa nodes reading a Split's input",
        [PASS_FUSE_CHAIN] = "elementwise chains made",
        [PASS_LAYOUT] = "convs made channels-last",
        [PASS_TRANSPOSES] = "Transpose pairs merged or taken into a Gemm",
        [PASS_DCE] = "unread nodes removed",
    };
    fprintf(f, "passes:");
    for (int i = 0; i < PASS_COUNT; i++) {
        if (off & (1u << i))
            fprintf(f, "%s %s off", i ? ";" : "", pass_names[i]);
        else
            fprintf(f, "%s %s %d %s", i ? ";" : "", pass_names[i], did[i], what[i]);
    }
    fprintf(f, "\n");
}

static anvil_status dump_dot_file(const ir_graph *g, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        return core_err(ANVIL_ERR_IO, "cannot open '%s' for writing: %s", path, strerror(errno));
    ir_graph_dump_dot(g, f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return core_err(ANVIL_ERR_IO, "could not write '%s' completely", path);
    return ANVIL_OK;
}

anvil_status api_model_dump(const anvil_model *m, int opt_level, uint32_t passes_off,
                            api_dump_format format, const char *path, FILE *out) {
    API_CHECK(m && out, "api_model_dump: model or out is NULL");
    API_CHECK(format == API_DUMP_TEXT || path, "api_model_dump: no path");
    const ir_graph *g = api_model_graph(m);
    pass_graph *pg = NULL;
    if (opt_level > 0) {
        /* the environment's settings of the passes (env.h), then --passes */
        rt_session_config env = {0};
        CORE_TRY(api_env_session(&env));
        passes_off |= env.passes_off;
        pass_options po = {.opt_level = opt_level,
                           .off = passes_off,
                           .layout = env.layout,
                           .parallel_gemm = env.parallel_gemm,
                           .b2b = env.b2b};
        CORE_TRY(pass_pipeline_run(g, &po, &pg));
        g = pg->g;
    }
    anvil_status s = ANVIL_OK;
    if (format == API_DUMP_ONNX) {
        s = onnx_graph_write(g, path);
        if (s == ANVIL_OK && pg) print_pass_summary(pg, passes_off, out);
    } else if (format == API_DUMP_TEXT) {
        if (pg) print_pass_summary(pg, passes_off, out);
        ir_graph_dump_text(g, out);
    } else if (!strcmp(path, "-")) {
        ir_graph_dump_dot(g, out);
    } else {
        s = dump_dot_file(g, path);
    }
    pass_graph_free(pg);
    return s;
}

static bool is_weight(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_BFLOAT16 ||
           dt == ANVIL_DTYPE_FLOAT64 || dt == ANVIL_DTYPE_INT8 || dt == ANVIL_DTYPE_UINT8;
}

static void count_graph(const ir_graph *g, api_model_stats *t, uint64_t *ops, int level) {
    if (level > IR_MAX_GRAPH_DEPTH) return;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if ((unsigned)g->nodes[i].op < IR_OP_COUNT) ops[g->nodes[i].op]++;
        const ir_attr *a =
            g->nodes[i].op == IR_OP_CONSTANT ? ir_node_attr(&g->nodes[i], "value") : NULL;
        if (a && a->type == IR_ATTR_TENSOR && a->t && is_weight(a->t->dtype)) {
            size_t numel = 1;
            for (int d = 0; d < a->t->rank; d++) numel *= (size_t)a->t->dims[d];
            t->initializers++;
            t->params += numel;
            t->param_bytes += a->t->bytes;
        }
        if (level == 0)
            t->nodes++;
        else
            t->sub_nodes++;
    }
    for (ir_vid v = 0; v < g->n_values; v++) {
        const ir_value *val = &g->values[v];
        if (!(val->flags & IR_VALUE_CONST)) continue;
        /* a Constant node's output: counted from the node above */
        if (val->producer >= 0) continue;
        size_t numel = 0, es = anvil_dtype_size(val->dtype);
        if (!ir_shape_numel(&val->shape, &numel) && es) numel = val->data_bytes / es;
        t->initializers++;
        t->params += numel;
        t->param_bytes += val->data_bytes;
    }
    for (int32_t c = 0; c < g->n_children; c++) count_graph(g->children[c], t, ops, level + 1);
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
    return a + b < a ? UINT64_MAX : a + b;
}

/* FLOPs of one run of g: an If's costlier branch, a Loop's or Scan's body once. */
static uint64_t graph_flops(const ir_graph *g, bool *approx, bool *loops, int level) {
    uint64_t total = 0;
    if (level > IR_MAX_GRAPH_DEPTH) return 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool a = false;
        total = add_sat(total, ir_node_flops_ex(g, n, &a));
        *approx |= a;
        uint64_t branch = 0;
        for (int k = 0; k < n->n_attrs; k++)
            for (size_t j = 0; j < ir_attr_graph_count(&n->attrs[k]); j++) {
                const ir_graph *sub = ir_attr_graph_at(&n->attrs[k], j);
                uint64_t f = sub ? graph_flops(sub, approx, loops, level + 1) : 0;
                if (n->op == IR_OP_IF) {
                    if (f > branch) branch = f;
                } else {
                    branch = add_sat(branch, f);
                    *loops = true;
                }
            }
        total = add_sat(total, branch);
    }
    return total;
}

static int by_count(const void *a, const void *b) {
    const api_op_count *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->op, y->op);
}

anvil_status api_model_stats_get(const anvil_model *m, api_model_stats *out) {
    API_CHECK(m && out, "api_model_stats_get: model or out is NULL");
    memset(out, 0, sizeof *out);
    const ir_graph *g = api_model_graph(m);
    uint64_t *ops = calloc(IR_OP_COUNT, sizeof *ops);
    api_op_count *hist = calloc(IR_OP_COUNT, sizeof *hist);
    if (!ops || !hist) {
        free(ops);
        free(hist);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    }
    out->graph_name = g->name ? g->name : "";
    out->opset = g->opset;
    count_graph(g, out, ops, 0);
    out->flops = graph_flops(g, &out->flops_approx, &out->flops_loops, 0);
    out->syms = g->syms;
    out->n_syms = g->n_syms;
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (ops[op]) hist[out->n_ops++] = (api_op_count){ir_op_name((ir_op)op), ops[op]};
    qsort(hist, out->n_ops, sizeof *hist, by_count);
    free(ops);
    out->ops = hist;
    return ANVIL_OK;
}
