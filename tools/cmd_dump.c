/* anvil dump MODEL [--dot FILE]: the loaded graph (after import, checks and load-time shape
 * inference) as text on stdout, or as Graphviz dot into a file. */
#include "cli.h"

#include "api/api.h"
#include "ir/ir.h"
#include "passes/passes.h"

#include <errno.h>
#include <string.h>

void cli_dump_usage(FILE *f) {
    fprintf(f, "usage: anvil dump MODEL.onnx [--dot FILE.dot] [--opt-level N]\n"
               "\n"
               "Without --dot, prints the graph as text: inputs and outputs with dtype and\n"
               "shape, initializers, and one line per node with its inputs, outputs (with\n"
               "shapes) and attributes; subgraphs are indented under their node.\n"
               "With --dot, writes a Graphviz graph to FILE ('-' for stdout) instead; render\n"
               "it with e.g. 'dot -Tsvg FILE.dot -o graph.svg'.\n"
               "\n"
               "options:\n"
               "  --dot FILE       write Graphviz dot to FILE\n"
               "  --opt-level N    the graph after the rewrites a session at level N runs\n"
               "                   (0, the default: as loaded; 1: BatchNorm folded, epilogues\n"
               "                   fused; fused nodes show fused[...])\n"
               "  -h, --help       show this help\n");
}

enum { OPT_DOT = 1, OPT_LEVEL };

int cli_dump_main(int argc, char **argv) {
    static const cli_option opts[] = {
        {"dot", 0, true, OPT_DOT}, {"opt-level", 0, true, OPT_LEVEL}, {0}};
    cli_parser p;
    cli_parser_init(&p, "dump", argc, argv, opts);
    const char *val, *path = NULL, *dot = NULL;
    long long level = 0;
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
        }
    }
    if (!path) return cli_usage_error("dump", "missing the model file");

    anvil_model *m = NULL;
    anvil_status s = anvil_model_load(path, &m);
    if (s != ANVIL_OK) return cli_fail_status(s);
    const ir_graph *g = api_model_graph(m);
    pass_graph *pg = NULL;
    if (level > 0) {
        pass_options po = {.opt_level = (int)level};
        if ((s = pass_pipeline_run(g, &po, &pg)) != ANVIL_OK) {
            anvil_model_free(m);
            return cli_fail_status(s);
        }
        g = pg->g;
    }
    int code = CLI_EXIT_OK;
    if (!dot) {
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
