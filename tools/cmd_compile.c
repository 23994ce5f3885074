/* anvil compile: a model, for fixed input shapes, as a standalone C library (anvil_session_compile
 * does the work; this file is the command line). --isa caps the CPU features anvil plans for
 * (anvil_set_isa_cap, over ANVIL_ISA: the option wins), before anything plans. */
#include "cli.h"

#include "api/env.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_compile_usage(FILE *f) {
    fprintf(
        f, "usage: anvil compile MODEL.onnx -o DIR [options]\n"
           "\n"
           "Writes the model as a standalone C library into DIR: NAME.h and NAME.c (the plan as\n"
           "straight-line calls with the arena offsets fixed), the anvil kernel sources the plan\n"
           "uses, NAME.weights, a Makefile and a CMakeLists.txt (`make -C DIR` builds libNAME.a\n"
           "and NAME_run, which takes anvil run's -i/-o arguments and --bench N) and a README.\n"
           "Input shapes are fixed: symbolic dims take --shape (or the -i file's shape).\n"
           "\n"
           "options:\n"
           "  -o, --output-dir DIR       where to write the library (created if missing)\n"
           "  --name NAME                C identifier for the symbols and files (default: net)\n"
           "  --shape NAME=DIMS          an input's shape, e.g. input=1x3x224x224\n"
           "  -i, --input NAME=FILE.npy  an input whose file gives its shape and dtype\n"
           "  --isa avx512|avx2|generic  the ISA the kernels are chosen for (default: this CPU's)\n"
           "  --embed-weights            also compile the weights into the library\n"
           "  --threads T                threads the plan is made for (default: all cores)\n"
           "  --variant NODE_OR_OP=NAME  force an implementation (it must be emittable)\n"
           "  --opt-level N              graph rewrites, as anvil run's (default 1)\n"
           "  --tuning-db FILE, --db FILE  the tuning database whose choices are emitted\n"
           "  --no-db                    the built-in rules only\n" CLI_PRECISION_HELP
           "                             (a bf16 kernel is emitted only where it can be)\n"
           "  --json                     print what was written as JSON\n"
           "  -h, --help                 show this help\n");
}

enum {
    OPT_OUT = 1,
    OPT_NAME,
    OPT_SHAPE,
    OPT_INPUT,
    OPT_ISA,
    OPT_EMBED,
    OPT_THREADS,
    OPT_VARIANT,
    OPT_OPT_LEVEL,
    OPT_TUNING_DB,
    OPT_ALLOW_VENDOR,
    OPT_JSON,
    OPT_PRECISION,
};

static const cli_option options[] = {
    {"output-dir", 'o', true, OPT_OUT},
    {"name", 0, true, OPT_NAME},
    {"shape", 0, true, OPT_SHAPE},
    {"input", 'i', true, OPT_INPUT},
    {"isa", 0, true, OPT_ISA},
    {"embed-weights", 0, false, OPT_EMBED},
    {"threads", 0, true, OPT_THREADS},
    {"variant", 0, true, OPT_VARIANT},
    {"opt-level", 0, true, OPT_OPT_LEVEL},
    {"tuning-db", 0, true, OPT_TUNING_DB},
    {"allow-vendor", 0, false, OPT_ALLOW_VENDOR},
    {"json", 0, false, OPT_JSON},
    {"precision", 0, true, OPT_PRECISION},
    CLI_TUNING_OPTIONS,
    {NULL, 0, false, 0},
};

typedef struct compile_args {
    const char *model, *dir, *name, *isa, *precision;
    bool embed, json;
    long long threads, opt_level;
    cli_inputs inputs;
    cli_shapes shapes;
    cli_variants variants;
    cli_tuning tuning;
} compile_args;

/* -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, compile_args *a) {
    cli_parser p;
    cli_parser_init(&p, "compile", argc, argv, options);
    const char *val;
    int id, t;
    while ((id = cli_parser_next(&p, &val)) != CLI_ARG_END) {
        if ((t = cli_tuning_option(&a->tuning, "compile", id, val)) != 0) {
            if (t < 0) return CLI_EXIT_USAGE;
            continue;
        }
        switch (id) {
        case CLI_ARG_HELP:
            cli_compile_usage(stdout);
            return CLI_EXIT_OK;
        case CLI_ARG_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            if (a->model) return cli_usage_error("compile", "more than one model given");
            a->model = val;
            break;
        case OPT_OUT:
            a->dir = val;
            break;
        case OPT_NAME:
            a->name = val;
            break;
        case OPT_SHAPE:
            if (!cli_shapes_add(&a->shapes, "compile", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_INPUT:
            if (!cli_inputs_add(&a->inputs, "compile", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_ISA:
            if (strcmp(val, "avx512") && strcmp(val, "avx2") && strcmp(val, "generic"))
                return cli_usage_error("compile", "--isa %s: expected avx512, avx2 or generic",
                                       val);
            a->isa = val;
            break;
        case OPT_EMBED:
            a->embed = true;
            break;
        case OPT_JSON:
            a->json = true;
            break;
        case OPT_THREADS:
            if (!cli_parse_int("compile", "--threads", val, 0, 1024, &a->threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_VARIANT:
            if (!cli_variants_add(&a->variants, "compile", val)) return CLI_EXIT_USAGE;
            break;
        case OPT_OPT_LEVEL:
            if (!cli_parse_int("compile", "--opt-level", val, 0, 3, &a->opt_level))
                return CLI_EXIT_USAGE;
            break;
        case OPT_TUNING_DB:
            a->tuning.db = val;
            break;
        case OPT_PRECISION:
            if (!cli_parse_precision("compile", val)) return CLI_EXIT_USAGE;
            a->precision = val;
            break;
        case OPT_ALLOW_VENDOR:
            return cli_fail(ANVIL_ERR_UNSUPPORTED,
                            "--allow-vendor: emitting calls into a vendor library (oneDNN, "
                            "OpenBLAS) is not implemented; compile without it, and anvil's own "
                            "kernels are chosen");
        default:
            return cli_usage_error("compile", "unexpected option");
        }
    }
    if (!a->model) return cli_usage_error("compile", "no model given");
    if (!a->dir) return cli_usage_error("compile", "no output folder given (-o DIR)");
    if (a->tuning.online)
        return cli_usage_error("compile", "--tune online: compile from a tuning database "
                                          "(anvil tune first) instead");
    return -1;
}

static int compile_model(const compile_args *a, anvil_model *m) {
    size_t n_in = anvil_model_input_count(m);
    cli_model_input *bi = calloc(n_in + 1, sizeof *bi);
    const char **names = calloc(n_in + 1, sizeof *names);
    const anvil_tensor **in = calloc(n_in + 1, sizeof *in);
    anvil_options *opts = NULL;
    anvil_session *s = NULL;
    int code = CLI_EXIT_OK;
    anvil_status st;
    if (!bi || !names || !in) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((code = cli_model_inputs(&a->inputs, &a->shapes, m, bi, n_in)) != 0) goto done;
    for (size_t i = 0; i < n_in; i++) {
        names[i] = bi[i].name;
        in[i] = bi[i].t;
        /* only the shapes and dtypes matter to the plan; zeros are a valid index for any Gather
         * (random ids are not: BERT's token_type_ids has 2 rows) */
        if (!bi[i].from_file && anvil_tensor_data(bi[i].t))
            memset(anvil_tensor_data(bi[i].t), 0, anvil_tensor_bytes(bi[i].t));
    }
    if ((st = anvil_options_create(&opts)) != ANVIL_OK ||
        (st = anvil_options_set_threads(opts, (int)a->threads)) != ANVIL_OK ||
        (st = anvil_options_set_opt_level(opts, (int)a->opt_level)) != ANVIL_OK ||
        (st = anvil_options_set_emittable_only(opts, 1)) != ANVIL_OK ||
        (st = cli_tuning_apply(&a->tuning, opts)) != ANVIL_OK ||
        (st = cli_variants_apply(&a->variants, opts)) != ANVIL_OK ||
        (st = cli_precision_apply(a->precision, 0, opts)) != ANVIL_OK ||
        (st = anvil_session_create(m, opts, &s)) != ANVIL_OK) {
        code = cli_fail_status(st);
        goto done;
    }
    anvil_compile_options co = {a->name ? a->name : "net", a->embed};
    if ((st = anvil_session_compile(s, n_in, names, in, &co, a->dir)) != ANVIL_OK) {
        code = cli_fail_status(st);
        goto done;
    }
    if (a->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", a->model);
        cJSON_AddStringToObject(root, "dir", a->dir);
        cJSON_AddStringToObject(root, "name", co.name);
        cJSON *files = cJSON_AddArrayToObject(root, "files");
        static const char *const suffix[] = {".h", ".c", ".weights", "_run.c"};
        for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
            char f[160];
            snprintf(f, sizeof f, "%s%s", co.name, suffix[i]);
            cJSON_AddItemToArray(files, cJSON_CreateString(f));
        }
        static const char *const fixed[] = {"Makefile", "CMakeLists.txt", "README.md"};
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
            cJSON_AddItemToArray(files, cJSON_CreateString(fixed[i]));
        char build[4200];
        snprintf(build, sizeof build, "make -C %s", a->dir);
        cJSON_AddStringToObject(root, "build", build);
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        if (!text) {
            code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        puts(text);
        free(text);
    } else {
        printf("%s: %s.h, %s.c, %s.weights, Makefile, CMakeLists.txt, README.md\n", a->dir, co.name,
               co.name, co.name);
        printf("build: make -C %s    run: %s/%s_run -i NAME=FILE.npy -o OUTDIR (or --bench 100)\n",
               a->dir, a->dir, co.name);
    }
done:
    anvil_session_free(s);
    anvil_options_free(opts);
    cli_model_inputs_free(bi, bi ? n_in : 0);
    free(names);
    free(in);
    return code;
}

int cli_compile_main(int argc, char **argv) {
    compile_args a = {.opt_level = 1};
    int code = parse_args(argc, argv, &a);
    anvil_model *m = NULL;
    if (code >= 0) goto done;
    anvil_status s;
    if (a.isa && (s = anvil_set_isa_cap(strcmp(a.isa, "generic") ? a.isa : "scalar")) != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    s = anvil_model_load(a.model, &m);
    if (s != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    if ((code = cli_inputs_resolve(m, &a.inputs)) == 0) code = compile_model(&a, m);
done:
    anvil_model_free(m);
    cli_inputs_free(&a.inputs);
    cli_shapes_free(&a.shapes);
    cli_variants_free(&a.variants);
    return code;
}
