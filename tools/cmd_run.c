/* anvil run MODEL -i NAME=FILE.npy ... -o DIR: one inference from .npy files to .npy files.
 *
 * Everything the user could get wrong (unknown or missing input names, unreadable files) is
 * checked before a session is created, so a mistake costs no planning time and every missing
 * input is named at once instead of one per attempt. */
#include "cli.h"

#include "api/api.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void cli_run_usage(FILE *f) {
    fprintf(
        f,
        "usage: anvil run MODEL.onnx -i NAME=FILE.npy [-i ...] -o DIR [options]\n"
        "\n"
        "Runs the model once. Every model input must be given as a .npy file; each\n"
        "output is written to DIR (created if missing) as NAME.npy, where every character\n"
        "of the output name outside [A-Za-z0-9_-] is replaced by '_' (a suffix _K is added\n"
        "if two outputs would get the same file name). The files written are listed on\n"
        "stdout as 'NAME -> PATH DTYPE [DIMS]'.\n"
        "\n"
        "options:\n"
        "  -i, --input NAME=FILE.npy  an input tensor (repeat for each input)\n"
        "  -o, --output-dir DIR       where to write the outputs\n"
        "  --threads T                worker threads, 1..1024 (0 or absent: all cores)\n"
        "  --variant NODE_OR_OP=NAME  force an implementation for a node or an op type (repeat;\n"
        "                             --variant Conv=help lists the variants of Conv)\n"
        "  --opt-level N              graph rewrites: 0 none, 1 (default) fold BatchNorm into\n"
        "                             Conv and fuse bias/residual/activation "
        "epilogues\n" CLI_PASSES_HELP
        "  --profile FILE.json        write per-node timings as a Chrome trace\n"
        "  --emittable-only           plan as `anvil compile` does: only implementations it\n"
        "                             can emit (to check a compiled library "
        "against)\n" CLI_PRECISION_HELP CLI_TUNING_HELP
        "  -h, --help                 show this help\n");
}

enum {
    OPT_INPUT = 1,
    OPT_OUTDIR,
    OPT_THREADS,
    OPT_PROFILE,
    OPT_VARIANT,
    OPT_LEVEL,
    OPT_PASSES,
    OPT_PRECISION,
    OPT_EMITTABLE
};

typedef struct run_args {
    const char *model, *outdir, *profile, *passes, *precision;
    long long threads, opt_level;
    bool emittable_only;
    cli_tuning tuning;
    cli_inputs inputs;
    cli_variants variants;
} run_args;

/* Returns -1 when parsing succeeded, else the exit code. */
static int parse_args(int argc, char **argv, run_args *a) {
    static const cli_option opts[] = {{"input", 'i', true, OPT_INPUT},
                                      {"output-dir", 'o', true, OPT_OUTDIR},
                                      {"threads", 0, true, OPT_THREADS},
                                      {"profile", 0, true, OPT_PROFILE},
                                      {"variant", 0, true, OPT_VARIANT},
                                      {"opt-level", 0, true, OPT_LEVEL},
                                      {"passes", 0, true, OPT_PASSES},
                                      {"precision", 0, true, OPT_PRECISION},
                                      {"emittable-only", 0, false, OPT_EMITTABLE},
                                      CLI_TUNING_OPTIONS,
                                      {0}};
    cli_parser p;
    cli_parser_init(&p, "run", argc, argv, opts);
    const char *val;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        switch (id) {
        case CLI_ARG_HELP:
            cli_run_usage(stdout);
            return CLI_EXIT_OK;
        case CLI_ARG_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            if (a->model)
                return cli_usage_error("run", "unexpected argument '%s' (one model only)", val);
            a->model = val;
            break;
        case OPT_INPUT:
            if (!cli_inputs_add(&a->inputs, "run", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_OUTDIR:
            if (!val[0]) return cli_usage_error("run", "-o needs a directory name");
            a->outdir = val;
            break;
        case OPT_THREADS:
            if (!cli_parse_int("run", "--threads", val, 0, 1024, &a->threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_PROFILE:
            if (!val[0]) return cli_usage_error("run", "--profile needs a file name");
            a->profile = val;
            break;
        case OPT_VARIANT:
            if (!cli_variants_add(&a->variants, "run", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_PRECISION:
            if (!cli_parse_precision("run", val)) return CLI_EXIT_USAGE;
            a->precision = val;
            break;
        case OPT_EMITTABLE:
            a->emittable_only = true;
            break;
        case OPT_PASSES: {
            uint32_t off;
            if (!cli_parse_passes("run", val, &off)) return CLI_EXIT_USAGE;
            a->passes = val;
            break;
        }
        case OPT_LEVEL:
            if (!cli_parse_int("run", "--opt-level", val, 0, 3, &a->opt_level))
                return CLI_EXIT_USAGE;
            break;
        default:
            if (cli_tuning_option(&a->tuning, "run", id, val) < 0) return CLI_EXIT_USAGE;
            break;
        }
    }
    if (!a->model) return cli_usage_error("run", "missing the model file");
    if (!a->outdir) return cli_usage_error("run", "missing -o DIR (where to write the outputs)");
    return -1;
}

/* Names every model input that has no -i, all in one message. */
static int check_missing(const anvil_model *m, const cli_inputs *in) {
    size_t n = anvil_model_input_count(m), missing = 0;
    for (size_t i = 0; i < n; i++) {
        anvil_value_info vi;
        if (anvil_model_input_info(m, i, &vi) != ANVIL_OK) continue;
        bool given = false;
        for (size_t k = 0; k < in->n && !given; k++) given = !strcmp(in->items[k].name, vi.name);
        if (given) continue;
        char sb[256];
        if (!missing++)
            fprintf(stderr, "anvil: error: %s: missing inputs:",
                    anvil_status_name(ANVIL_ERR_INVALID_ARGUMENT));
        fprintf(stderr, "%s '%s' (%s %s)", missing > 1 ? "," : "", vi.name,
                anvil_dtype_name(vi.dtype), cli_value_shape(&vi, sb, sizeof sb));
    }
    if (!missing) return CLI_EXIT_OK;
    fprintf(stderr, "; give each with -i NAME=FILE.npy\n");
    return cli_exit_code(ANVIL_ERR_INVALID_ARGUMENT);
}

/* Picks DIR/<sanitized name>.npy, adding _K (the output's index) when an earlier output of this
 * run already took that file name. */
static int output_path(const char *dir, const char *name, size_t index, char **used, char *path,
                       size_t cap) {
    char base[200];
    cli_sanitize_name(name, base, sizeof base);
    bool taken = false;
    for (size_t k = 0; k < index && !taken; k++) taken = used[k] && !strcmp(used[k], base);
    if (taken) {
        size_t len = strlen(base);
        if (len > sizeof base - 24) len = sizeof base - 24;
        snprintf(base + len, sizeof base - len, "_%zu", index);
    }
    used[index] = strdup(base);
    if (!used[index]) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    int w = snprintf(path, cap, "%s/%s.npy", dir, base);
    if (w < 0 || (size_t)w >= cap)
        return cli_fail(ANVIL_ERR_INVALID_ARGUMENT, "output path for '%s' is too long", name);
    return CLI_EXIT_OK;
}

static int write_outputs(const anvil_model *m, const char *dir, anvil_tensor **outs, size_t n) {
    int code = cli_mkdirs(dir);
    if (code) return code;
    char **used = calloc(n + 1, sizeof *used);
    if (!used) return cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n && !code; i++) {
        anvil_value_info vi;
        anvil_status s = anvil_model_output_info(m, i, &vi);
        if (s != ANVIL_OK) {
            code = cli_fail_status(s);
            break;
        }
        char path[PATH_MAX];
        code = output_path(dir, vi.name, i, used, path, sizeof path);
        if (code) break;
        s = npy_write(path, outs[i]);
        if (s != ANVIL_OK) {
            code = cli_fail_status(s);
            break;
        }
        char db[256];
        printf("%s -> %s %s %s\n", vi.name, path, anvil_dtype_name(anvil_tensor_dtype(outs[i])),
               cli_dims_str(anvil_tensor_rank(outs[i]), anvil_tensor_dims(outs[i]), db, sizeof db));
    }
    for (size_t i = 0; i < n; i++) free(used[i]);
    free(used);
    return code;
}

static int run_model(const run_args *a, anvil_model *m) {
    size_t n_in = a->inputs.n, n_out = anvil_model_output_count(m);
    anvil_tensor **ins = calloc(n_in + 1, sizeof *ins);
    anvil_tensor **outs = calloc(n_out + 1, sizeof *outs);
    const char **names = calloc(n_in + 1, sizeof *names);
    anvil_options *opts = NULL;
    anvil_session *sess = NULL;
    int code = CLI_EXIT_OK;
    anvil_status s;
    if (!ins || !outs || !names) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    code = cli_inputs_read(&a->inputs, ins);
    if (code) goto done;
    for (size_t i = 0; i < n_in; i++) names[i] = a->inputs.items[i].name;

    if ((s = anvil_options_create(&opts)) != ANVIL_OK ||
        (s = anvil_options_set_threads(opts, (int)a->threads)) != ANVIL_OK ||
        (s = anvil_options_set_opt_level(opts, (int)a->opt_level)) != ANVIL_OK ||
        (s = anvil_options_set_passes(opts, a->passes)) != ANVIL_OK ||
        (a->profile && (s = anvil_options_set_profiling(opts, 1)) != ANVIL_OK) ||
        (s = cli_tuning_apply(&a->tuning, opts)) != ANVIL_OK ||
        (s = cli_variants_apply(&a->variants, opts)) != ANVIL_OK ||
        (s = cli_precision_apply(a->precision, 0, opts)) != ANVIL_OK ||
        (a->emittable_only && (s = anvil_options_set_emittable_only(opts, 1)) != ANVIL_OK) ||
        (s = anvil_session_create(m, opts, &sess)) != ANVIL_OK ||
        (s = anvil_session_run(sess, n_in, names, (const anvil_tensor *const *)ins, n_out, NULL,
                               outs)) != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    code = write_outputs(m, a->outdir, outs, n_out);
    if (!code && a->profile && (s = anvil_session_write_profile(sess, a->profile)) != ANVIL_OK)
        code = cli_fail_status(s);
done:
    for (size_t i = 0; ins && i < n_in; i++) anvil_tensor_free(ins[i]);
    for (size_t i = 0; outs && i < n_out; i++) anvil_tensor_free(outs[i]);
    free(ins);
    free(outs);
    free(names);
    anvil_session_free(sess);
    anvil_options_free(opts);
    return code;
}

int cli_run_main(int argc, char **argv) {
    run_args a = {.opt_level = 1};
    int code = parse_args(argc, argv, &a);
    if (code >= 0) {
        cli_inputs_free(&a.inputs);
        cli_variants_free(&a.variants);
        return code;
    }
    anvil_model *m = NULL;
    anvil_status s = anvil_model_load(a.model, &m);
    if (s != ANVIL_OK)
        code = cli_fail_status(s);
    else if (!(code = cli_inputs_resolve(m, &a.inputs)) && !(code = check_missing(m, &a.inputs)))
        code = run_model(&a, m);
    anvil_model_free(m);
    cli_inputs_free(&a.inputs);
    cli_variants_free(&a.variants);
    return code;
}
