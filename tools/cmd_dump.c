/* anvil dump MODEL [--dot FILE]: the loaded graph (after import, checks and load-time shape
 * inference) as text on stdout, or as Graphviz dot into a file. */
#include "cli.h"

#include "api/api.h"
#include "api/env.h"
#include "ir/ir.h"
#include "onnx/onnx.h"
#include "passes/passes.h"

#include <errno.h>
#include <string.h>

void cli_dump_usage(FILE *f) {
    fprintf(f, "usage: anvil dump MODEL.onnx [--dot FILE.dot | --onnx FILE.onnx] [--opt-level N]\n"
               "                  [--passes LIST]\n"
               "\n"
               "Without --dot, prints the graph as text: inputs and outputs with dtype and\n"
               "shape, initializers, and one line per node with its inputs, outputs (with\n"
               "shapes) and attributes; subgraphs are indented under their node.\n"
               "With --dot, writes a Graphviz graph to FILE ('-' for stdout) instead; render\n"
               "it with e.g. 'dot -Tsvg FILE.dot -o graph.svg'.\n"
               "\n"
               "options:\n"
               "  --dot FILE       write Graphviz dot to FILE\n"
               "  --onnx FILE      write the graph as an ONNX model to FILE (e.g. to view in\n"
               "                   Netron): anvil's own ops and fused nodes in the domain\n"
               "                   ai.anvil, fused epilogues in a 'fused' attribute\n"
               "  --opt-level N    the graph after the rewrites a session at level N runs\n"
               "                   (0, the default: as loaded; 1: BatchNorm folded, epilogues\n"
               "                   fused; fused nodes show fused[...]); the text starts with\n"
               "                   a line saying what each pass did\n"
               "  --passes LIST    rewrites on/off by name, e.g. -fuse_attention or\n"
               "                   none,+fold_conv_bn (an unknown name lists the passes)\n"
               "  -h, --help       show this help\n");
}

enum { OPT_DOT = 1, OPT_LEVEL, OPT_PASSES, OPT_ONNX };

/* One line: what each pass that ran did (its counters in pass_graph). */
static void print_pass_summary(const pass_graph *pg, uint32_t off, FILE *f) {
    const int did[PASS_COUNT] = {
        [PASS_CONST_NODES] = pg->const_nodes,
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
        [PASS_TRANSPOSES] = pg->transposes_merged,
        [PASS_DCE] = pg->dce_removed,
    };
    static const char *const what[PASS_COUNT] = {
        [PASS_CONST_NODES] = "Constant nodes made constants",
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
        [PASS_TRANSPOSES] = "Transpose pairs merged",
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

int cli_dump_main(int argc, char **argv) {
    static const cli_option opts[] = {{"dot", 0, true, OPT_DOT},
                                      {"opt-level", 0, true, OPT_LEVEL},
                                      {"passes", 0, true, OPT_PASSES},
                                      {"onnx", 0, true, OPT_ONNX},
                                      {0}};
    cli_parser p;
    cli_parser_init(&p, "dump", argc, argv, opts);
    const char *val, *path = NULL, *dot = NULL, *onnx_out = NULL;
    long long level = 0;
    uint32_t off = 0;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        switch (id) {
        case CLI_ARG_HELP:
            cli_dump_usage(stdout);
            return CLI_EXIT_OK;
        case CLI_ARG_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            if (path)
                return cli_usage_error("dump", "unexpected argument '%s' (one model only)", val);
            path = val;
            break;
        case OPT_DOT:
            if (!val[0]) return cli_usage_error("dump", "--dot needs a file name");
            dot = val;
            break;
        case OPT_LEVEL:
            if (!cli_parse_int("dump", "--opt-level", val, 0, 3, &level)) return CLI_EXIT_USAGE;
            break;
        case OPT_PASSES:
            if (!cli_parse_passes("dump", val, &off)) return CLI_EXIT_USAGE;
            break;
        case OPT_ONNX:
            if (!val[0]) return cli_usage_error("dump", "--onnx needs a file name");
            onnx_out = val;
            break;
        }
    }
    if (!path) return cli_usage_error("dump", "missing the model file");
    if (dot && onnx_out) return cli_usage_error("dump", "--dot and --onnx: give one of them");

    anvil_model *m = NULL;
    anvil_status s = anvil_model_load(path, &m);
    if (s != ANVIL_OK) return cli_fail_status(s);
    const ir_graph *g = api_model_graph(m);
    pass_graph *pg = NULL;
    if (level > 0) {
        /* the environment's settings of the passes (api/env.h), then --passes */
        rt_session_config env = {0};
        if ((s = api_env_session(&env)) != ANVIL_OK) {
            anvil_model_free(m);
            return cli_fail_status(s);
        }
        off |= env.passes_off;
        pass_options po = {.opt_level = (int)level,
                           .off = off,
                           .layout = env.layout,
                           .parallel_gemm = env.parallel_gemm,
                           .b2b = env.b2b};
        if ((s = pass_pipeline_run(g, &po, &pg)) != ANVIL_OK) {
            anvil_model_free(m);
            return cli_fail_status(s);
        }
        g = pg->g;
    }
    int code = CLI_EXIT_OK;
    if (onnx_out) {
        if ((s = onnx_graph_write(g, onnx_out)) != ANVIL_OK) code = cli_fail_status(s);
        if (!code && pg) print_pass_summary(pg, off, stdout);
    } else if (!dot) {
        if (pg) print_pass_summary(pg, off, stdout);
        ir_graph_dump_text(g, stdout);
    } else if (!strcmp(dot, "-")) {
        ir_graph_dump_dot(g, stdout);
    } else {
        FILE *f = fopen(dot, "w");
        if (!f) {
            code = cli_fail(ANVIL_ERR_IO, "cannot open '%s' for writing: %s", dot, strerror(errno));
        } else {
            ir_graph_dump_dot(g, f);
            bool bad = ferror(f) != 0;
            if (fclose(f) != 0 || bad)
                code = cli_fail(ANVIL_ERR_IO, "could not write '%s' completely", dot);
        }
    }
    if (!code && fflush(stdout) != 0) code = cli_fail(ANVIL_ERR_IO, "could not write to stdout");
    pass_graph_free(pg);
    anvil_model_free(m);
    return code;
}
