/* anvil info MODEL: what a model takes, gives, contains and costs.
 *
 * Inputs and outputs come from the public API (what API users see); the op histogram, parameter
 * count and FLOPs from api_model_stats_get (src/api/inspect.c), which reads the loaded graph with
 * the shapes inferred at load time and says how it counts. */
#include "cli.h"

#include "api/api.h"

#include <stdlib.h>

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

static void print_flops(const api_model_stats *st) {
    char hb[32];
    printf("flops: %llu", (unsigned long long)st->flops);
    if (st->flops >= 1000) printf(" (%s)", cli_human_si((double)st->flops, hb, sizeof hb));
    printf(" per run");
    if (st->flops_loops) printf(" (each Loop/Scan body counted once)");
    if (!st->flops_approx) {
        printf(", from static shapes\n");
        return;
    }
    printf(", estimated with symbolic or unknown dims taken as 1");
    if (st->n_syms > 0) {
        printf(" (");
        for (int32_t k = 0; k < st->n_syms; k++) printf("%s%s=1", k ? ", " : "", st->syms[k]);
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
    api_model_stats st;
    if ((s = api_model_stats_get(m, &st)) != ANVIL_OK) {
        anvil_model_free(m);
        return cli_fail_status(s);
    }

    printf("model: %s\n", path);
    if (st.graph_name[0]) printf("graph: %s\n", st.graph_name);
    api_model_meta meta;
    api_model_meta_get(m, &meta);
    printf("ir_version: %lld\n", (long long)meta.ir_version);
    printf("opset: %d\n", st.opset);
    if (meta.producer_name[0])
        printf("producer: %s %s\n", meta.producer_name, meta.producer_version);
    print_values(m, true);
    print_values(m, false);

    char hb[32], bb[32];
    printf("nodes: %llu", (unsigned long long)st.nodes);
    if (st.sub_nodes) printf(" (+%llu in subgraphs)", (unsigned long long)st.sub_nodes);
    printf("\n");
    printf("parameters: %llu", (unsigned long long)st.params);
    if (st.params >= 1000) printf(" (%s)", cli_human_si((double)st.params, hb, sizeof hb));
    printf(" in %llu initializers, %llu bytes (%s)\n", (unsigned long long)st.initializers,
           (unsigned long long)st.param_bytes,
           cli_human_bytes((double)st.param_bytes, bb, sizeof bb));
    print_flops(&st);

    printf("ops (%zu types):\n", st.n_ops);
    for (size_t i = 0; i < st.n_ops; i++)
        printf("  %-24s %llu\n", st.ops[i].op, (unsigned long long)st.ops[i].count);

    free(st.ops);
    anvil_model_free(m);
    return CLI_EXIT_OK;
}
