/* anvil info MODEL: what a model takes, gives, contains and costs.
 *
 * Inputs and outputs come from the public API (what API users see); the op histogram, parameter
 * count and FLOPs come from the loaded graph (api_model_graph), which already carries the shapes
 * inferred at load time. FLOPs are for one run with every symbolic dim at 1, and the text says
 * so whenever a symbolic dim entered the estimate. Subgraphs count: an If as its costlier
 * branch, a Loop or Scan body once (one iteration). Parameters are the initializers, and the
 * floating-point and 8-bit tensors of Constant nodes (exporters put a body's weights there);
 * integer Constant nodes are shape arithmetic. */
#include "cli.h"

#include "api/api.h"
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

void cli_info_usage(FILE *f) {
    fprintf(f, "usage: anvil info MODEL.onnx\n"
               "\n"
               "Describes a model: its inputs and outputs (dtype and shape, symbolic dims by\n"
               "name), the default-domain opset, node count, a histogram of operator types\n"
               "(most frequent first; subgraph nodes included), the parameter count and bytes\n"
               "of its initializers, and an estimate of the FLOPs of one run (2 per\n"
               "multiply-accumulate; symbolic dims such as the batch size taken as 1).\n"
               "\n"
               "options:\n"
               "  -h, --help   show this help\n");
}

typedef struct op_count {
    ir_op op;
    uint64_t count;
} op_count;

typedef struct graph_totals {
    uint64_t ops[IR_OP_COUNT];
    uint64_t nodes, sub_nodes;
    uint64_t params, param_bytes, initializers;
} graph_totals;

static bool is_weight(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_BFLOAT16 ||
           dt == ANVIL_DTYPE_FLOAT64 || dt == ANVIL_DTYPE_INT8 || dt == ANVIL_DTYPE_UINT8;
}

static void count_graph(const ir_graph *g, graph_totals *t, int level) {
    if (level > IR_MAX_GRAPH_DEPTH) return;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if ((unsigned)g->nodes[i].op < IR_OP_COUNT) t->ops[g->nodes[i].op]++;
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
    for (int32_t c = 0; c < g->n_children; c++) count_graph(g->children[c], t, level + 1);
}

static int by_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(ir_op_name(x->op), ir_op_name(y->op));
}

static void print_values(const anvil_model *m, bool inputs) {
    size_t n = inputs ? anvil_model_input_count(m) : anvil_model_output_count(m);
    printf("%s (%zu):\n", inputs ? "inputs" : "outputs", n);
    for (size_t i = 0; i < n; i++) {
        anvil_value_info vi;
        anvil_status s =
            inputs ? anvil_model_input_info(m, i, &vi) : anvil_model_output_info(m, i, &vi);
        if (s != ANVIL_OK) continue;
        char sb[512];
        printf("  %-24s %-8s %s\n", vi.name, anvil_dtype_name(vi.dtype),
               cli_value_shape(&vi, sb, sizeof sb));
    }
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

static void print_flops(const ir_graph *g) {
    bool approx = false, loops = false;
    uint64_t total = graph_flops(g, &approx, &loops, 0);
    char hb[32];
    printf("flops: %llu", (unsigned long long)total);
    if (total >= 1000) printf(" (%s)", cli_human_si((double)total, hb, sizeof hb));
    printf(" per run");
    if (loops) printf(" (each Loop/Scan body counted once)");
    if (!approx) {
        printf(", from static shapes\n");
        return;
    }
    printf(", estimated with symbolic or unknown dims taken as 1");
    if (g->n_syms > 0) {
        printf(" (");
        for (int32_t k = 0; k < g->n_syms; k++) printf("%s%s=1", k ? ", " : "", g->syms[k]);
        printf(")");
    }
    printf("\n");
}

int cli_info_main(int argc, char **argv) {
    static const cli_option opts[] = {{0}};
    cli_parser p;
    cli_parser_init(&p, "info", argc, argv, opts);
    const char *val, *path = NULL;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        if (id == CLI_ARG_HELP) {
            cli_info_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (id == CLI_ARG_ERROR) return CLI_EXIT_USAGE;
        if (path) return cli_usage_error("info", "unexpected argument '%s' (one model only)", val);
        path = val;
    }
    if (!path) return cli_usage_error("info", "missing the model file");

    anvil_model *m = NULL;
    anvil_status s = anvil_model_load(path, &m);
    if (s != ANVIL_OK) return cli_fail_status(s);
    const ir_graph *g = api_model_graph(m);

    printf("model: %s\n", path);
    if (g->name && g->name[0]) printf("graph: %s\n", g->name);
    api_model_meta meta;
    api_model_meta_get(m, &meta);
    printf("ir_version: %lld\n", (long long)meta.ir_version);
    printf("opset: %d\n", g->opset);
    if (meta.producer_name[0])
        printf("producer: %s %s\n", meta.producer_name, meta.producer_version);
    print_values(m, true);
    print_values(m, false);

    graph_totals *t = calloc(1, sizeof *t);
    if (!t) {
        anvil_model_free(m);
        return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    }
    count_graph(g, t, 0);
    char hb[32], bb[32];
    printf("nodes: %llu", (unsigned long long)t->nodes);
    if (t->sub_nodes) printf(" (+%llu in subgraphs)", (unsigned long long)t->sub_nodes);
    printf("\n");
    printf("parameters: %llu", (unsigned long long)t->params);
    if (t->params >= 1000) printf(" (%s)", cli_human_si((double)t->params, hb, sizeof hb));
    printf(" in %llu initializers, %llu bytes (%s)\n", (unsigned long long)t->initializers,
           (unsigned long long)t->param_bytes,
           cli_human_bytes((double)t->param_bytes, bb, sizeof bb));
    print_flops(g);

    op_count hist[IR_OP_COUNT];
    size_t n_hist = 0;
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (t->ops[op]) hist[n_hist++] = (op_count){(ir_op)op, t->ops[op]};
    qsort(hist, n_hist, sizeof *hist, by_count);
    printf("ops (%zu types):\n", n_hist);
    for (size_t i = 0; i < n_hist; i++)
        printf("  %-24s %llu\n", ir_op_name(hist[i].op), (unsigned long long)hist[i].count);

    free(t);
    anvil_model_free(m);
    return CLI_EXIT_OK;
}
