/* anvil bench MODEL: load time, first-run time and steady-state latency of a model.
 *
 * The measuring and the report are anvil_bench_model's (src/api/bench.c); this command parses
 * its options, loads the model (timing it) and makes the inputs. Inputs not given as files are
 * filled with seeded pseudo-random data so that two runs of the same command measure the same
 * work (data-dependent kernels, e.g. Gather, see the same indices). Integers are kept small and
 * non-negative because integer inputs are usually indices or lengths. */
#include "cli.h"

#include "api/api.h"
#include "core/core.h"

#include <stdlib.h>

void cli_bench_usage(FILE *f) {
    fprintf(
        f,
        "usage: anvil bench MODEL.onnx [options]\n"
        "\n"
        "Measures the time to load the model, the first run (session creation + first\n"
        "inference, which includes planning) and the latency of further runs: min, median,\n"
        "mean, p90, p99 and throughput (inferences per second). Also reports the activation\n"
        "arena against the sum of all activations (memory saved by buffer reuse).\n"
        "\n"
        "Inputs not given with -i are filled with seeded random data of the declared shape:\n"
        "floats uniform in [-1,1], integers in [0,3], booleans random. Symbolic dims must be\n"
        "set with --shape, otherwise they are 1 (with a note on stderr).\n"
        "\n"
        "options:\n"
        "  -i, --input NAME=FILE.npy  use this tensor for input NAME (repeatable)\n"
        "  --shape NAME=DIMS          shape of a generated input, e.g. x=1x3x224x224\n"
        "  --warmup N                 untimed runs after the first one (default 5)\n"
        "  --iters N                  timed runs (default 50)\n"
        "  --threads T                worker threads, 1..1024 (0 or absent: all cores)\n"
        "  --json                     print one JSON object instead of text\n"
        "  --variant NODE_OR_OP=NAME  force an implementation for a node or an op type (repeat;\n"
        "                             --variant Conv=help lists the variants of Conv)\n"
        "  --opt-level N              graph rewrites: 0 none, 1 (default) fold BatchNorm into\n"
        "                             Conv and fuse bias/residual/activation "
        "epilogues\n" CLI_PASSES_HELP
        "  --profile FILE.json        write per-node timings of all runs as a Chrome trace\n"
        "  --explain                  list per node the implementation that ran, why\n"
        "                             (database, nearest, cascade, forced, dynamic) and\n"
        "                             its arithmetic (fp32 or bf16) and how its\n"
        "                             activations are stored (fp32, bf16 "
        "in/out)\n" CLI_PRECISION_HELP CLI_TOLERANCE_HELP
        "  --check                    also run an fp32 session once on the same inputs and\n"
        "                             report per output the max and mean error relative to\n"
        "                             its scale and, for a classifier's [N,C] output, the\n"
        "                             top-1 agreement (with --json: \"check\")\n" CLI_TUNING_HELP
        "  -h, --help                 show this help\n");
}

enum {
    OPT_INPUT = 1,
    OPT_SHAPE,
    OPT_WARMUP,
    OPT_ITERS,
    OPT_THREADS,
    OPT_JSON,
    OPT_PROFILE,
    OPT_VARIANT,
    OPT_LEVEL,
    OPT_EXPLAIN,
    OPT_PASSES,
    OPT_PRECISION,
    OPT_TOLERANCE,
    OPT_CHECK,
};

typedef struct bench_args {
    const char *model, *profile, *passes, *precision;
    long long warmup, iters, threads, opt_level;
    double tolerance; /* 0: the default */
    bool json, explain, check;
    cli_tuning tuning;
    cli_inputs inputs;
    cli_variants variants;
    cli_shapes shapes;
} bench_args;

static void args_free(bench_args *a) {
    cli_inputs_free(&a->inputs);
    cli_variants_free(&a->variants);
    cli_shapes_free(&a->shapes);
}

/* Returns -1 when parsing succeeded, else the exit code. */
static int parse_args(int argc, char **argv, bench_args *a) {
    static const cli_option opts[] = {{"input", 'i', true, OPT_INPUT},
                                      {"shape", 0, true, OPT_SHAPE},
                                      {"warmup", 0, true, OPT_WARMUP},
                                      {"iters", 0, true, OPT_ITERS},
                                      {"threads", 0, true, OPT_THREADS},
                                      {"json", 0, false, OPT_JSON},
                                      {"profile", 0, true, OPT_PROFILE},
                                      {"variant", 0, true, OPT_VARIANT},
                                      {"opt-level", 0, true, OPT_LEVEL},
                                      {"explain", 0, false, OPT_EXPLAIN},
                                      {"passes", 0, true, OPT_PASSES},
                                      {"precision", 0, true, OPT_PRECISION},
                                      {"tolerance", 0, true, OPT_TOLERANCE},
                                      {"check", 0, false, OPT_CHECK},
                                      CLI_TUNING_OPTIONS,
                                      {0}};
    cli_parser p;
    cli_parser_init(&p, "bench", argc, argv, opts);
    const char *val;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        switch (id) {
        case CLI_ARG_HELP:
            cli_bench_usage(stdout);
            return CLI_EXIT_OK;
        case CLI_ARG_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            if (a->model)
                return cli_usage_error("bench", "unexpected argument '%s' (one model only)", val);
            a->model = val;
            break;
        case OPT_INPUT:
            if (!cli_inputs_add(&a->inputs, "bench", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_SHAPE:
            if (!cli_shapes_add(&a->shapes, "bench", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_WARMUP:
            if (!cli_parse_int("bench", "--warmup", val, 0, 1000000, &a->warmup))
                return CLI_EXIT_USAGE;
            break;
        case OPT_ITERS:
            if (!cli_parse_int("bench", "--iters", val, 1, 10000000, &a->iters))
                return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS:
            if (!cli_parse_int("bench", "--threads", val, 0, 1024, &a->threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_JSON:
            a->json = true;
            break;
        case OPT_PROFILE:
            if (!val[0]) return cli_usage_error("bench", "--profile needs a file name");
            a->profile = val;
            break;
        case OPT_PASSES: {
            uint32_t off;
            if (!cli_parse_passes("bench", val, &off)) return CLI_EXIT_USAGE;
            a->passes = val;
            break;
        }
        case OPT_LEVEL:
            if (!cli_parse_int("bench", "--opt-level", val, 0, 3, &a->opt_level))
                return CLI_EXIT_USAGE;
            break;
        case OPT_VARIANT:
            if (!cli_variants_add(&a->variants, "bench", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_EXPLAIN:
            a->explain = true;
            break;
        case OPT_PRECISION:
            if (!cli_parse_precision("bench", val)) return CLI_EXIT_USAGE;
            a->precision = val;
            break;
        case OPT_TOLERANCE:
            if (!cli_parse_tolerance("bench", val, &a->tolerance)) return CLI_EXIT_USAGE;
            break;
        case OPT_CHECK:
            a->check = true;
            break;
        default:
            if (cli_tuning_option(&a->tuning, "bench", id, val) < 0) return CLI_EXIT_USAGE;
            break;
        }
    }
    if (!a->model) return cli_usage_error("bench", "missing the model file");
    return -1;
}

/* Measures with the parsed options on the inputs made (bi, n_in) and prints the report. */
static int bench(const bench_args *a, const anvil_model *m, double load_ms,
                 const cli_model_input *bi, size_t n_in) {
    const char **names = calloc(n_in + 1, sizeof *names);
    const anvil_tensor **ins = calloc(n_in + 1, sizeof *ins);
    const char **sources = calloc(n_in + 1, sizeof *sources);
    anvil_options *opts = NULL;
    anvil_bench_report *r = NULL;
    int code = CLI_EXIT_OK;
    anvil_status s = ANVIL_OK;
    if (!names || !ins || !sources) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_in; i++) {
        names[i] = bi[i].name;
        ins[i] = bi[i].t;
        sources[i] = bi[i].from_file ? "file" : "random";
    }
    if ((s = anvil_options_create(&opts)) != ANVIL_OK ||
        (s = anvil_options_set_threads(opts, (int)a->threads)) != ANVIL_OK ||
        (s = anvil_options_set_opt_level(opts, (int)a->opt_level)) != ANVIL_OK ||
        (s = anvil_options_set_passes(opts, a->passes)) != ANVIL_OK ||
        (s = cli_variants_apply(&a->variants, opts)) != ANVIL_OK ||
        (s = cli_tuning_apply(&a->tuning, opts)) != ANVIL_OK ||
        (s = cli_precision_apply(a->precision, a->tolerance, opts)) != ANVIL_OK)
        goto fail;
    anvil_bench_options bo = {.session = opts,
                              .warmup = (int)a->warmup,
                              .iters = (int)a->iters,
                              .explain = a->explain,
                              .model_label = a->model,
                              .load_ms = load_ms,
                              .input_sources = sources,
                              .profile_path = a->profile,
                              .check = a->check};
    if ((s = anvil_bench_model(m, &bo, n_in, names, ins, &r)) != ANVIL_OK) goto fail;
    fputs(a->json ? anvil_bench_report_json(r) : anvil_bench_report_text(r), stdout);
    goto done;
fail:
    code = cli_fail_status(s);
done:
    anvil_bench_report_free(r);
    anvil_options_free(opts);
    free(names);
    free(ins);
    free(sources);
    return code;
}

int cli_bench_main(int argc, char **argv) {
    bench_args a = {.warmup = 5, .iters = 50, .opt_level = 1};
    int code = parse_args(argc, argv, &a);
    if (code >= 0) {
        args_free(&a);
        return code;
    }
    anvil_model *m = NULL;
    cli_model_input *bi = NULL;
    size_t n_in = 0;
    uint64_t t0 = core_now_ns();
    anvil_status s = anvil_model_load(a.model, &m);
    double load_ms = cli_ms(t0, core_now_ns());
    if (s != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    code = cli_inputs_resolve(m, &a.inputs);
    if (code) goto done;
    n_in = anvil_model_input_count(m);
    bi = calloc(n_in + 1, sizeof *bi);
    if (!bi) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    code = cli_model_inputs(&a.inputs, &a.shapes, m, bi, n_in);
    if (!code) code = bench(&a, m, load_ms, bi, n_in);
done:
    for (size_t i = 0; bi && i < n_in; i++) anvil_tensor_free(bi[i].t);
    free(bi);
    anvil_model_free(m);
    args_free(&a);
    return code;
}
