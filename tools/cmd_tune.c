/* anvil tune MODEL: measures, on this machine, which implementation of each of the model's
 * distinct problems is fastest, and keeps the winners in the tuning database that every session
 * reads (anvil_tune_model: src/api/tune.c over src/autotune). With --train, the problems are those
 * of the model's training graph (forward, loss and backward nodes, and each conv layer's grouped
 * choice), for the batch shapes of a training set, measured through anvil_train_tune as `anvil
 * train --tune offline` measures them.
 */
#include "cli.h"

#include "api/api.h"
#include "cmd_tune.h"
#include "train_common.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_tune_usage(FILE *f) {
    fprintf(
        f, "usage: anvil tune MODEL.onnx [options]\n"
           "       anvil tune MODEL.onnx --train --data FILE.npz [options]\n"
           "\n"
           "Finds the fastest implementation of every distinct problem (op, attributes,\n"
           "shapes, threads) of the model on this machine: every applicable kernel variant at\n"
           "every parameter setting the hardware rules keep, each checked against the reference\n"
           "kernel before it is timed. Winners go to the tuning database as they are found, so\n"
           "Ctrl-C keeps what was measured and a rerun resumes; problems already in the\n"
           "database are not measured again. Then it times the model with the cascade (no\n"
           "database) and tuned, alternating, and reports both.\n"
           "\n"
           "With --train it tunes the training graph instead, as `anvil train --tune offline`\n"
           "does before its first step: every forward, loss and backward node, and each conv\n"
           "layer's grouped choice (its forward, input-gradient and weight-gradient passes\n"
           "decided together: tuned | anvil | onednn), for the shapes of a batch of FILE.npz.\n"
           "Then it times training steps (SGD with learning rate 0, so every step does the same\n"
           "work) without the database and with it, alternating, and reports ms per step.\n"
           "\n"
           "options:\n"
           "  -i, --input NAME=FILE.npy  use this tensor for input NAME (repeatable)\n"
           "  --shape NAME=DIMS          shape of a generated input, e.g. x=1x3x224x224\n"
           "  --threads T                threads the sessions will use (default: all cores)\n"
           "  --budget SECONDS           stop measuring after this long (default: none)\n"
           "  --db FILE                  the database (default $ANVIL_TUNING_DB, else\n"
           "                             $XDG_CACHE_HOME/anvil/tuning.db)\n"
           "  --retune                   measure problems the database already has, too\n"
           "  --opt-level N              graph rewrites before tuning (default 1)\n" CLI_PASSES_HELP
               CLI_PRECISION_HELP CLI_TOLERANCE_HELP
           "  --runs N                   timed runs of each session for the before/after\n"
           "                             latency (default 20, with --train 10 steps; 0 skips it)\n"
           "  --train                    tune the training graph (needs --data; not with -i,\n"
           "                             --shape, --retune or --passes)\n"
           "  --data FILE.npz            the training set, as anvil train reads it: an array\n"
           "                             per model input and the targets; its first --batch\n"
           "                             rows give the batch\n"
           "  --batch B                  the batch size tuned for (default 32)\n"
           "  --loss cross_entropy|nll|mse  the loss (default cross_entropy)\n"
           "  --labels NAME              the array of targets (default labels)\n"
           "  --output NAME              the model output the loss reads (default: the first)\n"
           "  --json                     print the report as one JSON object\n"
           "  -v, --verbose              list every candidate of every problem\n"
           "  -q, --quiet                no progress line\n"
           "  -h, --help                 show this help\n");
}

enum {
    OPT_INPUT = 1,
    OPT_SHAPE,
    OPT_THREADS,
    OPT_BUDGET,
    OPT_DB,
    OPT_RETUNE,
    OPT_LEVEL,
    OPT_RUNS,
    OPT_JSON,
    OPT_VERBOSE,
    OPT_QUIET,
    OPT_PASSES,
    OPT_TRAIN,
    OPT_DATA,
    OPT_BATCH,
    OPT_LOSS,
    OPT_LABELS,
    OPT_OUTPUT,
    OPT_PRECISION,
    OPT_TOLERANCE,
};

static volatile int g_stop;

static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

static int parse_args(int argc, char **argv, tune_args *a) {
    static const cli_option opts[] = {{"input", 'i', true, OPT_INPUT},
                                      {"shape", 0, true, OPT_SHAPE},
                                      {"threads", 0, true, OPT_THREADS},
                                      {"budget", 0, true, OPT_BUDGET},
                                      {"db", 0, true, OPT_DB},
                                      {"retune", 0, false, OPT_RETUNE},
                                      {"opt-level", 0, true, OPT_LEVEL},
                                      {"runs", 0, true, OPT_RUNS},
                                      {"passes", 0, true, OPT_PASSES},
                                      {"json", 0, false, OPT_JSON},
                                      {"verbose", 'v', false, OPT_VERBOSE},
                                      {"quiet", 'q', false, OPT_QUIET},
                                      {"train", 0, false, OPT_TRAIN},
                                      {"data", 0, true, OPT_DATA},
                                      {"batch", 0, true, OPT_BATCH},
                                      {"loss", 0, true, OPT_LOSS},
                                      {"labels", 0, true, OPT_LABELS},
                                      {"output", 0, true, OPT_OUTPUT},
                                      {"precision", 0, true, OPT_PRECISION},
                                      {"tolerance", 0, true, OPT_TOLERANCE},
                                      {0}};
    cli_parser p;
    cli_parser_init(&p, "tune", argc, argv, opts);
    const char *val;
    for (int id; (id = cli_parser_next(&p, &val)) != CLI_ARG_END;) {
        switch (id) {
        case CLI_ARG_HELP:
            cli_tune_usage(stdout);
            return CLI_EXIT_OK;
        case CLI_ARG_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            if (a->model)
                return cli_usage_error("tune", "unexpected argument '%s' (one model only)", val);
            a->model = val;
            break;
        case OPT_INPUT:
            if (!cli_inputs_add(&a->inputs, "tune", val)) return CLI_EXIT_USAGE;
            if (!a->infer_only) a->infer_only = "-i/--input";
            break;
        case OPT_SHAPE:
            if (!cli_shapes_add(&a->shapes, "tune", val)) return CLI_EXIT_USAGE;
            if (!a->infer_only) a->infer_only = "--shape";
            break;
        case OPT_THREADS:
            if (!cli_parse_int("tune", "--threads", val, 0, 1024, &a->threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_BUDGET:
            if (!cli_parse_int("tune", "--budget", val, 1, 1000000, &a->budget))
                return CLI_EXIT_USAGE;
            break;
        case OPT_DB:
            if (!val[0]) return cli_usage_error("tune", "--db needs a file name");
            a->db = val;
            break;
        case OPT_RETUNE:
            a->retune = true;
            if (!a->infer_only) a->infer_only = "--retune";
            break;
        case OPT_LEVEL:
            if (!cli_parse_int("tune", "--opt-level", val, 0, 3, &a->opt_level))
                return CLI_EXIT_USAGE;
            break;
        case OPT_PASSES:
            if (!cli_parse_passes("tune", val, &a->passes_off)) return CLI_EXIT_USAGE;
            a->passes = val;
            if (!a->infer_only) a->infer_only = "--passes";
            break;
        case OPT_RUNS:
            if (!cli_parse_int("tune", "--runs", val, 0, 100000, &a->runs)) return CLI_EXIT_USAGE;
            break;
        case OPT_JSON:
            a->json = true;
            break;
        case OPT_VERBOSE:
            a->verbose = true;
            break;
        case OPT_QUIET:
            a->quiet = true;
            break;
        case OPT_TRAIN:
            a->train = true;
            break;
        case OPT_DATA:
            if (!val[0]) return cli_usage_error("tune", "--data needs a file name");
            a->data = val;
            if (!a->train_only) a->train_only = "--data";
            break;
        case OPT_BATCH:
            if (!cli_parse_int("tune", "--batch", val, 1, 1 << 24, &a->batch))
                return CLI_EXIT_USAGE;
            if (!a->train_only) a->train_only = "--batch";
            break;
        case OPT_LOSS:
            if (!cli_parse_loss("tune", val, &a->loss)) return CLI_EXIT_USAGE;
            if (!a->train_only) a->train_only = "--loss";
            break;
        case OPT_LABELS:
            a->labels = val;
            if (!a->train_only) a->train_only = "--labels";
            break;
        case OPT_OUTPUT:
            a->output = val;
            if (!a->train_only) a->train_only = "--output";
            break;
        case OPT_PRECISION:
            if (!cli_parse_precision("tune", val)) return CLI_EXIT_USAGE;
            a->precision = val;
            break;
        case OPT_TOLERANCE:
            if (!cli_parse_tolerance("tune", val, &a->tolerance)) return CLI_EXIT_USAGE;
            break;
        }
    }
    if (!a->model) return cli_usage_error("tune", "missing the model file");
    if (!a->train && a->train_only)
        return cli_usage_error("tune",
                               "%s belongs to --train (tuning the training graph); inference "
                               "inputs are -i NAME=FILE.npy or --shape NAME=DIMS",
                               a->train_only);
    if (a->train && !a->data)
        return cli_usage_error("tune", "--train needs --data FILE.npz: the training set whose "
                                       "first --batch rows give the shapes to tune");
    if (a->train && a->infer_only)
        return cli_usage_error("tune", "%s does not apply to --train (the batch comes from --data)",
                               a->infer_only);
    if (a->runs < 0) a->runs = a->train ? 10 : 20;
    return -1;
}

/* ---- progress ------------------------------------------------------------------------------- */

static void show_progress(void *arg, const anvil_tune_progress *p) {
    (void)arg;
    char best[32] = "-";
    if (p->best_ms > 0) snprintf(best, sizeof best, "%.3f ms", p->best_ms);
    fprintf(stderr, "\r\033[K[%d/%d] %-14.14s %-24.24s %3d left  best %-11s %5.0fs  ETA %4.0fs",
            p->item + 1, p->n_items, p->op, p->node, p->alive, best, p->elapsed_s, p->eta_s);
    fflush(stderr);
}

int cli_tune_main(int argc, char **argv) {
    tune_args a = {.opt_level = 1,
                   .runs = -1,
                   .labels = "labels",
                   .batch = CLI_TRAIN_BATCH,
                   .loss = ANVIL_LOSS_CROSS_ENTROPY};
    int code = parse_args(argc, argv, &a);
    anvil_model *m = NULL;
    cli_model_input *bi = NULL;
    const anvil_tensor **in = NULL;
    const char **names = NULL;
    anvil_tune_report *rep = NULL;
    anvil_options *opts = NULL;
    char db_path[4096];
    if (code >= 0) goto done;
    code = CLI_EXIT_OK;
    anvil_status s;
    if ((code = cli_tuning_db_path(a.db, db_path, sizeof db_path)) != 0) goto done;
    if (a.train) {
        code = cli_tune_train(&a, db_path);
        goto done;
    }
    if ((s = anvil_model_load(a.model, &m)) != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    if ((code = cli_inputs_resolve(m, &a.inputs)) != 0) goto done;
    size_t n_in = anvil_model_input_count(m);
    bi = calloc(n_in + 1, sizeof *bi);
    in = calloc(n_in + 1, sizeof *in);
    names = calloc(n_in + 1, sizeof *names);
    if (!bi || !in || !names) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if ((code = cli_model_inputs(&a.inputs, &a.shapes, m, bi, n_in)) != 0) goto done;
    for (size_t i = 0; i < n_in; i++) {
        in[i] = bi[i].t;
        names[i] = bi[i].name;
    }
    if ((s = anvil_options_create(&opts)) != ANVIL_OK ||
        (s = anvil_options_set_threads(opts, (int)a.threads)) != ANVIL_OK ||
        (s = anvil_options_set_opt_level(opts, (int)a.opt_level)) != ANVIL_OK ||
        (s = anvil_options_set_passes(opts, a.passes)) != ANVIL_OK ||
        (s = anvil_options_set_tuning_db(opts, db_path)) != ANVIL_OK ||
        (s = cli_precision_apply(a.precision, a.tolerance, opts)) != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    anvil_tune_options o;
    anvil_tune_options_default(&o);
    o.session = opts;
    o.budget_seconds = (double)a.budget;
    o.retune = a.retune;
    o.runs = (int)a.runs;
    o.model_label = a.model;
    o.stop = &g_stop;
    if (!a.quiet && isatty(STDERR_FILENO)) o.progress = show_progress;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    s = anvil_tune_model(m, &o, n_in, names, in, &rep);
    sigaction(SIGINT, &old, NULL);
    if (o.progress) fprintf(stderr, "\r\033[K");
    if (s != ANVIL_OK) {
        code = cli_fail_status(s);
        goto done;
    }
    const char *text =
        a.json ? anvil_tune_report_json(rep) : anvil_tune_report_text(rep, a.verbose);
    if (!text) {
        code = cli_fail(ANVIL_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if (a.json)
        puts(text);
    else
        fputs(text, stdout);
done:
    anvil_tune_report_free(rep);
    anvil_options_free(opts);
    free(in);
    free(names);
    cli_model_inputs_free(bi, bi ? anvil_model_input_count(m) : 0);
    anvil_model_free(m);
    cli_inputs_free(&a.inputs);
    cli_shapes_free(&a.shapes);
    return code;
}
