/* anvil dump MODEL [--dot FILE]: the loaded graph (after import, checks and load-time shape
 * inference) as text on stdout, or as Graphviz dot into a file (api_model_dump,
 * src/api/inspect.c). */
#include "cli.h"

#include "api/api.h"

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
    api_dump_format format = onnx_out ? API_DUMP_ONNX : dot ? API_DUMP_DOT : API_DUMP_TEXT;
    int code = CLI_EXIT_OK;
    if ((s = api_model_dump(m, (int)level, off, format, onnx_out ? onnx_out : dot, stdout)) !=
        ANVIL_OK)
        code = cli_fail_status(s);
    if (!code && fflush(stdout) != 0) code = cli_fail(ANVIL_ERR_IO, "could not write to stdout");
    anvil_model_free(m);
    return code;
}
