/* anvil dump MODEL [--dot FILE]: the loaded graph (after import, checks and load-time shape
 * inference) as text on stdout, or as Graphviz dot into a file (api_model_dump,
 * src/api/inspect.c). With --precision: a session at that precision runs the model once on
 * generated inputs, and what its plan computes in which format is printed instead
 * (api_session_print_regions): the format can only be known once the variants are chosen. */
#include "cli.h"

#include "api/api.h"

#include <stdlib.h>

void cli_dump_usage(FILE *f) {
    fprintf(
        f, "usage: anvil dump MODEL.onnx [--dot FILE.dot | --onnx FILE.onnx] [--opt-level N]\n"
           "                  [--passes LIST]\n"
           "       anvil dump MODEL.onnx --precision P [--tolerance X] [--threads N]\n"
           "                  [-i NAME=FILE.npy]... [--shape NAME=DIMS]... [--opt-level N]\n"
           "                  [--passes LIST]\n"
           "\n"
           "Without --dot, prints the graph as text: inputs and outputs with dtype and\n"
           "shape, initializers, and one line per node with its inputs, outputs (with\n"
           "shapes) and attributes; subgraphs are indented under their node.\n"
           "With --dot, writes a Graphviz graph to FILE ('-' for stdout) instead; render\n"
           "it with e.g. 'dot -Tsvg FILE.dot -o graph.svg'.\n"
           "With --precision, runs the model once (on the -i files, and generated data for\n"
           "the other inputs, as anvil bench makes it) in a session of that\n"
           "precision (the built-in rules, or the tuning database's choices where it has\n"
           "them) and prints each node of its plan with the implementation chosen, the\n"
           "arithmetic it computes in, how its activations are stored and its bf16 region,\n"
           "then the regions: connected nodes computing in bf16, with how many activations\n"
           "enter (rounded once), leave (in fp32) and stay inside (stored in bf16 where\n"
           "the kernels allow).\n"
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
           "  --precision P    fp32, bf16, fp16, auto or int8: show the regions of such a session\n"
           "                   (--opt-level defaults to 1 then, as in a session)\n"
           "  --tolerance X    precision auto's error bound (default 0.01)\n"
           "  --threads N      the session's threads (default: every core)\n"
           "  -i, --input NAME=FILE.npy  with --precision: this tensor for input NAME\n"
           "  --shape NAME=DIMS  dims of a generated input (symbolic dims default to 1)\n"
           "  -h, --help       show this help\n");
}

enum {
    OPT_DOT = 1,
    OPT_LEVEL,
    OPT_PASSES,
    OPT_ONNX,
    OPT_PRECISION,
    OPT_TOLERANCE,
    OPT_THREADS,
    OPT_SHAPE,
    OPT_INPUT
};

typedef struct regions_args {
    const char *precision;
    double tolerance;
    long long threads, level;
    const char *passes;
    cli_shapes shapes;
    cli_inputs inputs;
} regions_args;

/* The session's plan at a.precision, run once on generated inputs, as api_session_print_regions
 * prints it. */
static int dump_regions(const anvil_model *m, regions_args *a) {
    size_t n_in = anvil_model_input_count(m), n_out = anvil_model_output_count(m);
    cli_model_input *bi = calloc(n_in + 1, sizeof *bi);
    const char **names = calloc(n_in + 1, sizeof *names);
    anvil_tensor **ins = calloc(n_in + 1, sizeof *ins);
    anvil_tensor **outs = calloc(n_out + 1, sizeof *outs);
    anvil_options *opts = NULL;
    anvil_session *sess = NULL;
    anvil_status s;
    int code = CLI_EXIT_OK;
    if (!bi || !names || !ins || !outs) {
        free(bi);
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((code = cli_model_inputs(&a->inputs, &a->shapes, m, bi, n_in)) != 0) goto done;
    for (size_t i = 0; i < n_in; i++) {
        names[i] = bi[i].name;
        ins[i] = bi[i].t;
    }
    if ((s = anvil_options_create(&opts)) != ANVIL_OK ||
        (s = anvil_options_set_threads(opts, (int)a->threads)) != ANVIL_OK ||
        (s = anvil_options_set_opt_level(opts, (int)a->level)) != ANVIL_OK ||
        (s = anvil_options_set_passes(opts, a->passes)) != ANVIL_OK ||
        (s = cli_precision_apply(a->precision, a->tolerance, opts)) != ANVIL_OK ||
        (s = anvil_session_create(m, opts, &sess)) != ANVIL_OK ||
        (s = anvil_session_run(sess, n_in, names, (const anvil_tensor *const *)ins, n_out, NULL,
                               outs)) != ANVIL_OK ||
        (s = api_session_print_regions(sess, stdout)) != ANVIL_OK)
        code = cli_fail_status(s);
done:
    for (size_t i = 0; outs && i < n_out; i++) anvil_tensor_free(outs[i]);
    if (bi) cli_model_inputs_free(bi, n_in);
    free(names);
    free(ins);
    free(outs);
    anvil_session_free(sess);
    anvil_options_free(opts);
    return code;
}

/* Reads the arguments into *a; 0 after --help, the exit code after a usage error, -1 to go on. */
typedef struct dump_args {
    const char *path, *dot, *onnx_out;
    uint32_t off;
    regions_args ra;
} dump_args;

static int parse_args(int argc, char **argv, dump_args *a) {
    static const cli_option opts[] = {{"dot", 0, true, OPT_DOT},
                                      {"opt-level", 0, true, OPT_LEVEL},
                                      {"passes", 0, true, OPT_PASSES},
                                      {"onnx", 0, true, OPT_ONNX},
                                      {"precision", 0, true, OPT_PRECISION},
                                      {"tolerance", 0, true, OPT_TOLERANCE},
                                      {"threads", 0, true, OPT_THREADS},
                                      {"shape", 0, true, OPT_SHAPE},
                                      {"input", 'i', true, OPT_INPUT},
                                      {0}};
    cli_parser p;
    cli_parser_init(&p, "dump", argc, argv, opts);
    const char *val;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        switch (id) {
        case CLI_ARG_HELP:
            cli_dump_usage(stdout);
            return CLI_EXIT_OK;
        case CLI_ARG_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            if (a->path)
                return cli_usage_error("dump", "unexpected argument '%s' (one model only)", val);
            a->path = val;
            break;
        case OPT_DOT:
            if (!val[0]) return cli_usage_error("dump", "--dot needs a file name");
            a->dot = val;
            break;
        case OPT_LEVEL:
            if (!cli_parse_int("dump", "--opt-level", val, 0, 3, &a->ra.level))
                return CLI_EXIT_USAGE;
            break;
        case OPT_PASSES:
            if (!cli_parse_passes("dump", val, &a->off)) return CLI_EXIT_USAGE;
            a->ra.passes = val;
            break;
        case OPT_ONNX:
            if (!val[0]) return cli_usage_error("dump", "--onnx needs a file name");
            a->onnx_out = val;
            break;
        case OPT_PRECISION:
            if (!cli_parse_precision("dump", val)) return CLI_EXIT_USAGE;
            a->ra.precision = val;
            break;
        case OPT_TOLERANCE:
            if (!cli_parse_tolerance("dump", val, &a->ra.tolerance)) return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS:
            if (!cli_parse_int("dump", "--threads", val, 0, 1024, &a->ra.threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_SHAPE:
            if (!cli_shapes_add(&a->ra.shapes, "dump", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_INPUT:
            if (!cli_inputs_add(&a->ra.inputs, "dump", val)) return CLI_EXIT_USAGE;
            break;
        }
    }
    if (!a->path) return cli_usage_error("dump", "missing the model file");
    if (a->dot && a->onnx_out) return cli_usage_error("dump", "--dot and --onnx: give one of them");
    if (a->ra.precision && (a->dot || a->onnx_out))
        return cli_usage_error("dump", "--precision prints the plan's formats as text; drop %s",
                               a->dot ? "--dot" : "--onnx");
    if (!a->ra.precision &&
        (a->ra.tolerance > 0 || a->ra.threads || a->ra.shapes.n || a->ra.inputs.n))
        return cli_usage_error("dump",
                               "--tolerance, --threads, --shape and -i go with --precision");
    return -1;
}

int cli_dump_main(int argc, char **argv) {
    dump_args a = {.ra.level = -1};
    int code = parse_args(argc, argv, &a);
    if (code >= 0) {
        cli_shapes_free(&a.ra.shapes);
        cli_inputs_free(&a.ra.inputs);
        return code;
    }
    code = CLI_EXIT_OK;
    anvil_model *m = NULL;
    anvil_status s = anvil_model_load(a.path, &m);
    if (s != ANVIL_OK) {
        code = cli_fail_status(s);
    } else if (a.ra.precision) {
        /* a session's default level, unless --opt-level said otherwise */
        if (a.ra.level < 0) a.ra.level = 1;
        code = cli_inputs_resolve(m, &a.ra.inputs);
        if (!code) code = dump_regions(m, &a.ra);
    } else {
        api_dump_format format = a.onnx_out ? API_DUMP_ONNX : a.dot ? API_DUMP_DOT : API_DUMP_TEXT;
        if ((s = api_model_dump(m, a.ra.level < 0 ? 0 : (int)a.ra.level, a.off, format,
                                a.onnx_out ? a.onnx_out : a.dot, stdout)) != ANVIL_OK)
            code = cli_fail_status(s);
    }
    if (!code && fflush(stdout) != 0) code = cli_fail(ANVIL_ERR_IO, "could not write to stdout");
    anvil_model_free(m);
    cli_shapes_free(&a.ra.shapes);
    cli_inputs_free(&a.ra.inputs);
    return code;
}
